#!/usr/bin/env bash
# What `collie run -- python ...` costs per op: the round trip between a
# torch.distributed program's processes and the collie controller. The
# same program (bench/script_all_reduce.py: blocking 8-byte all_reduces)
# runs under collie on the simulator and under plain torch with gloo
# (`collie launch`: env:// rendezvous, no collie in the loop), world 2 and
# 8, interleaved; prints the mean wall time per op for both and the ratio.
#
#   [REPEATS=R] [ITERS=N] bench/script_round_trip.sh [WORLDS...]
set -euo pipefail
cd "$(dirname "$0")/.."
R=${REPEATS:-3}
N=${ITERS:-2000}
if [[ $# -gt 0 ]]; then WORLDS=("$@"); else WORLDS=(2 8); fi
PY=${COLLIE_PYTHON:-/usr/bin/python3}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -Wno-dev > /dev/null
cmake --build build -j2 --target collie > /dev/null
collie=build/tools/collie
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
us() { sed -n 's/.*: \([0-9.]*\) us per op, rank 0 cpu \([0-9.]*\) us per op.*/\1 \2/p'; }
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $N blocking all_reduces of 8 bytes; $R runs each, interleaved"
for w in "${WORLDS[@]}"; do
  for rep in $(seq "$R"); do
    "$collie" run -n "$w" -- "$PY" bench/script_all_reduce.py "$N" 2>&1 | us >> "$out/collie_$w"
    OMP_NUM_THREADS=1 "$collie" launch -n "$w" --no-prefix -- "$PY" bench/script_all_reduce.py "$N" | us >> "$out/gloo_$w"
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%6s | %16s %16s %8s | %18s %18s\n' world "collie sim us/op" "torch gloo us/op" ratio "collie rank0 cpu" "gloo rank0 cpu"
for w in "${WORLDS[@]}"; do
  c=$(cut -d' ' -f1 "$out/collie_$w" | median); g=$(cut -d' ' -f1 "$out/gloo_$w" | median)
  cc=$(cut -d' ' -f2 "$out/collie_$w" | median); gc=$(cut -d' ' -f2 "$out/gloo_$w" | median)
  awk -v w="$w" -v c="$c" -v g="$g" -v cc="$cc" -v gc="$gc" \
    'BEGIN { printf "%6d | %16.1f %16.1f %8.2f | %18.1f %18.1f\n", w, c, g, c / g, cc, gc }'
done
