#!/usr/bin/env bash
# collie's TCP backend against Open MPI (TCP transport on loopback) and Gloo
# (ring and halving-doubling), in one invocation: all_reduce, float32 sum,
# the same sizes and iteration counts, N processes on this host. Prints each
# one's time and busbw per size and the ratios collie/peer (time: below 1 is
# faster; busbw: above 1 is faster).
#
#   COLLIE_WITH_PEERS=1 scripts/setup.sh      # Open MPI, Gloo
#   bench/tcp_vs_peers.sh [N] [MIN_BYTES] [MAX_BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}
MIN=${2:-8}
MAX=${3:-67108864}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -Wno-dev > /dev/null
cmake --build build -j2 --target collie > /dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O2 bench/mpi_allreduce.c -o "$out/mpi_allreduce"
g++ -O2 -std=c++17 bench/gloo_allreduce.cpp -o "$out/gloo_allreduce" -lgloo -lpthread
collie=build/tools/collie
echo "# machine: $(nproc) cores, $(uname -r); world $N; sizes $MIN..$MAX B"
"$collie" bench --backend tcp -n "$N" -b "$MIN" -e "$MAX" | tee "$out/collie.full" | grep -v '^#' | awk '{print $1, $6, $8}' > "$out/collie"
mpirun --oversubscribe --allow-run-as-root -np "$N" --mca btl tcp,self --mca btl_tcp_if_include lo \
  "$out/mpi_allreduce" "$MIN" "$MAX" > "$out/mpi"
"$collie" launch -n "$N" --no-prefix -- "$out/gloo_allreduce" ring "$MIN" "$MAX" > "$out/gloo_ring"
"$collie" launch -n "$N" --no-prefix -- "$out/gloo_allreduce" halving_doubling "$MIN" "$MAX" > "$out/gloo_hd"
grep '^# Out of bounds' "$out/collie.full"
printf '%10s | %9s %9s %9s %9s | %8s %8s %8s %8s | %9s %9s %9s | %9s %9s %9s\n' \
  bytes "collie us" "ompi us" "gloo-r us" "gloo-hd us" "collie" "ompi" "gloo-r" "gloo-hd" \
  "t/ompi" "t/gloo-r" "t/gloo-hd" "bw/ompi" "bw/gloo-r" "bw/gloo-hd"
printf '%10s | %42s | %35s | %31s | %31s\n' "" "time per all_reduce" "busbw GB/s" "collie time / peer" "collie busbw / peer"
join "$out/collie" "$out/mpi" | join - "$out/gloo_ring" | join - "$out/gloo_hd" | awk '{
  printf "%10d | %9.2f %9.2f %9.2f %9.2f | %8.3f %8.3f %8.3f %8.3f | %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f\n",
    $1, $2, $4, $6, $8, $3, $5, $7, $9, $2/$4, $2/$6, $2/$8, $3/$5, $3/$7, $3/$9 }'
