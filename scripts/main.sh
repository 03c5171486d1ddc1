#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the seed tutorial
# on the simulator, printing what each rank holds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -Wno-dev > /dev/null
cmake --build build -j2 --target seed_tutorial
exec build/examples/seed_tutorial "$@"
