#!/usr/bin/env bash
# collie's TCP backend against Open MPI (TCP transport on loopback) and Gloo
# (ring and halving-doubling), in one invocation: all_reduce, float32 sum,
# the same sizes and iteration counts, N processes on this host. Prints each
# one's time and busbw per size and the ratios collie/peer (time: below 1 is
# faster; busbw: above 1 is faster).
#
#   COLLIE_WITH_PEERS=1 scripts/setup.sh      # Open MPI, Gloo
#   [REPEATS=R] bench/tcp_vs_peers.sh [N] [MIN_BYTES] [MAX_BYTES]
#
# With REPEATS=R (default 1) the four programs run in turn R times and each
# column is the median over the repeats: on a shared machine the speed
# drifts over minutes, and interleaving spreads the drift over all four.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2}
R=${REPEATS:-1}
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
for rep in $(seq "$R"); do
  "$collie" bench --backend tcp -n "$N" -b "$MIN" -e "$MAX" | tee -a "$out/collie.full" | grep -v '^#' |
    awk '{print $1, $6, $8}' >> "$out/collie.all"
  mpirun --oversubscribe --allow-run-as-root -np "$N" --mca btl tcp,self --mca btl_tcp_if_include lo \
    "$out/mpi_allreduce" "$MIN" "$MAX" >> "$out/mpi.all"
  "$collie" launch -n "$N" --no-prefix -- "$out/gloo_allreduce" ring "$MIN" "$MAX" >> "$out/gloo_ring.all"
  "$collie" launch -n "$N" --no-prefix -- "$out/gloo_allreduce" halving_doubling "$MIN" "$MAX" >> "$out/gloo_hd.all"
done
# Per size, the median of each column over the repeats.
column_median() {  # FILE COLUMN -> "bytes median"
  sort -k1,1n -k"$2","$2"g "$1" |
    awk -v c="$2" '$1 != s { if (n) print s, v[int((n + 1) / 2)]; s = $1; n = 0 } { v[++n] = $c }
                   END { if (n) print s, v[int((n + 1) / 2)] }'
}
median() { join <(column_median "$1" 2) <(column_median "$1" 3) > "$2"; }
for f in collie mpi gloo_ring gloo_hd; do median "$out/$f.all" "$out/$f"; done
echo "# medians of $R run(s) each, interleaved"
grep '^# Out of bounds' "$out/collie.full" | sort | uniq -c
printf '%10s | %9s %9s %9s %9s | %8s %8s %8s %8s | %9s %9s %9s | %9s %9s %9s\n' \
  bytes "collie us" "ompi us" "gloo-r us" "gloo-hd us" "collie" "ompi" "gloo-r" "gloo-hd" \
  "t/ompi" "t/gloo-r" "t/gloo-hd" "bw/ompi" "bw/gloo-r" "bw/gloo-hd"
printf '%10s | %42s | %35s | %31s | %31s\n' "" "time per all_reduce" "busbw GB/s" "collie time / peer" "collie busbw / peer"
join "$out/collie" "$out/mpi" | join - "$out/gloo_ring" | join - "$out/gloo_hd" | awk '{
  printf "%10d | %9.2f %9.2f %9.2f %9.2f | %8.3f %8.3f %8.3f %8.3f | %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f\n",
    $1, $2, $4, $6, $8, $3, $5, $7, $9, $2/$4, $2/$6, $2/$8, $3/$5, $3/$7, $3/$9 }'
