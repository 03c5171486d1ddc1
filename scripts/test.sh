#!/usr/bin/env bash
# Every test: installs what is missing, builds with warnings as errors, and
# runs the whole CTest suite (unit, property, example tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLLIE_WERROR=ON -Wno-dev > /dev/null
cmake --build build -j2
(cd build && ctest --output-on-failure -j2 "$@")

# The sanitized stage: everything the stage's targets reach compiled with
# AddressSanitizer and UndefinedBehaviorSanitizer (line tables only: -g1
# keeps the stack traces and compiles faster). The TCP wire, rendezvous and
# auth tests, the random-point kill test (its rank processes and the launcher
# sanitized too), the soak, and the fuzz tests (cmake/FuzzTests.cmake).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" -DCOLLIE_SANITIZE=ON \
  -Wno-dev > /dev/null
cmake --build build-asan -j2 --target tcp_test tcp_kill_test tcp_soak_test chaos_rank collie fuzz_test
(cd build-asan && ctest --output-on-failure -j2 -R '^(Wire|Tcp|Rendezvous|KillTest|TcpSoak)\.|Fuzz\.' "$@")
