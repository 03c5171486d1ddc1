#!/usr/bin/env bash
# Before/after for `collie run -- python ...`'s per-op round trip: two
# collie trees, each with its build in build/ (not rebuilt here), run
# interleaved on bench/script_all_reduce.py (blocking 8-byte all_reduces).
# Per world and repeat, one line: wall us per op and rank 0's CPU us per op
# for BEFORE, then AFTER; then, per repeat, the controller's own CPU per op
# (`perf stat --no-inherit -e task-clock` of the collie process: 2500 ops
# minus 500 ops, over 2000) at world 2.
#
#   [REPEATS=R] [ITERS=N] bench/script_compare.sh BEFORE_DIR AFTER_DIR [WORLDS...]
set -euo pipefail
before=$(cd "$1" && pwd); after=$(cd "$2" && pwd); shift 2
R=${REPEATS:-3}
N=${ITERS:-1000}
if [[ $# -gt 0 ]]; then WORLDS=("$@"); else WORLDS=(2 8); fi
PY=${COLLIE_PYTHON:-/usr/bin/python3}
prog=$(cd "$(dirname "$0")" && pwd)/script_all_reduce.py
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
run() { COLLIE_DATA_DIR="$1" "$1/build/tools/collie" run -n "$2" -- "$PY" "$prog" "$3"; }
us() { sed -n 's/.*: \([0-9.]*\) us per op, rank 0 cpu \([0-9.]*\) us per op.*/\1 \2/p'; }
task_ms() {
  perf stat --no-inherit -x, -e task-clock -o "$tmp" -- env COLLIE_DATA_DIR="$1" "$1/build/tools/collie" run -n 2 -- \
    "$PY" "$prog" "$2" > /dev/null 2>&1
  grep task-clock "$tmp" | cut -d, -f1
}
controller() { awk -v a="$(task_ms "$1" 2500)" -v b="$(task_ms "$1" 500)" 'BEGIN { printf "%.1f", (a - b) * 1000 / 2000 }'; }
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $N ops; before $before, after $after"
for w in "${WORLDS[@]}"; do
  for rep in $(seq "$R"); do
    echo "world $w before $(run "$before" "$w" "$N" 2>&1 | us) after $(run "$after" "$w" "$N" 2>&1 | us)"
  done
done
for rep in $(seq "$R"); do
  echo "controller world 2 before $(controller "$before") after $(controller "$after") us/op"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
