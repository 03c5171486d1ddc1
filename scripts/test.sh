#!/usr/bin/env bash
# Every test: installs what is missing, builds with warnings as errors, and
# runs the whole CTest suite (unit, property, example tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLIE_WERROR=ON -Wno-dev > /dev/null
cmake --build build -j2
cd build
ctest --output-on-failure -j2 "$@"
