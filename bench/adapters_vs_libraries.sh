#!/usr/bin/env bash
# What collie's adapters cost: `collie bench --backend mpi` and `--backend
# torch:gloo` (each rank times its own ops through collie's op-level seam,
# the result of one iteration per size checked) against the libraries' own
# programs timing the same all_reduce (bench/mpi_allreduce.c under the same
# mpirun settings; bench/torch_allreduce.py, a plain torch loop). Prints
# time per all_reduce for both and the ratio adapter/library per size (1.00:
# the adapter adds nothing measurable).
#
#   [REPEATS=R] bench/adapters_vs_libraries.sh [N] [MIN_BYTES] [MAX_BYTES]
#
# With REPEATS=R the programs run in turn R times and each column is the
# median over the repeats (the machine's speed drifts; interleaving spreads
# the drift over both).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}
R=${REPEATS:-1}
MIN=${2:-8}
MAX=${3:-4194304}
PY=${COLLIE_PYTHON:-/usr/bin/python3}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -Wno-dev > /dev/null
cmake --build build -j2 --target collie > /dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O2 bench/mpi_allreduce.c -o "$out/mpi_allreduce"
collie=build/tools/collie
# The settings collie's mpi backend gives Open MPI's mpirun.
export OMPI_MCA_rmaps_base_oversubscribe=1
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "# machine: $(nproc) cores, $(uname -r); world $N; all_reduce float32 SUM, sizes $MIN..$MAX B"
rows() { grep -v '^#' | awk '{print $1, $6}'; }  # collie bench table -> "bytes time_us"
for rep in $(seq "$R"); do
  "$collie" bench --backend mpi -n "$N" -b "$MIN" -e "$MAX" | rows >> "$out/collie_mpi.all"
  mpirun -np "$N" "$out/mpi_allreduce" "$MIN" "$MAX" | awk '{print $1, $2}' >> "$out/mpi.all"
  "$collie" bench --backend torch:gloo -n "$N" -b "$MIN" -e "$MAX" | rows >> "$out/collie_gloo.all"
  OMP_NUM_THREADS=1 "$collie" launch -n "$N" --no-prefix -- "$PY" bench/torch_allreduce.py gloo "$MIN" "$MAX" |
    awk '{print $1, $2}' >> "$out/gloo.all"
done
median() {  # FILE -> "bytes median_time"
  sort -k1,1n -k2,2g "$1" |
    awk '$1 != s { if (n) print s, v[int((n + 1) / 2)]; s = $1; n = 0 } { v[++n] = $2 } END { if (n) print s, v[int((n + 1) / 2)] }'
}
for f in collie_mpi mpi collie_gloo gloo; do median "$out/$f.all" > "$out/$f"; done
echo "# medians of $R run(s) each, interleaved; time per all_reduce in us"
printf '%10s | %11s %11s %8s | %11s %11s %8s\n' bytes "collie mpi" "Open MPI" ratio "collie gloo" "torch gloo" ratio
join "$out/collie_mpi" "$out/mpi" | join - "$out/collie_gloo" | join - "$out/gloo" |
  awk '{ printf "%10d | %11.2f %11.2f %8.2f | %11.2f %11.2f %8.2f\n", $1, $2, $3, $2/$3, $4, $5, $4/$5 }'
