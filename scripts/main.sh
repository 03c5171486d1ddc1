#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the tutorial
# scenarios on the simulator -- each rank prints what it holds, as the
# torch.distributed tutorials do, and every op is checked against the
# reference oracle. Arguments go to `collie run` (e.g. --seed 7, -v).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -Wno-dev > /dev/null
# collie (and collie-mpi-worker), and what the README's commands use.
cmake --build build -j2 --target collie tcp_tutorial collie_plugin_loopback collie_plugin_family
exec build/tools/collie run scenarios/tutorial/*.yaml "$@"
