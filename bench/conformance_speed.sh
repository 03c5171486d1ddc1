#!/usr/bin/env bash
# The whole default conformance suite on sim, tcp, mpi and torch:gloo: wall
# time of each against the goals of issue #25 (tcp <= 10 s, mpi <= 30 s,
# torch:gloo <= 45 s on a quiet 2-core VM), with the load average around it
# (a busy machine stretches every figure).
#
#   [REPEATS=R] [BASELINE=/path/to/other/collie [BASELINE_DATA=DIR]] \
#     bench/conformance_speed.sh [BACKEND...]
#
# With BASELINE, that collie (another build, e.g. of main) runs the same
# suites in the same invocation, interleaved: each row then shows both wall
# times, their ratio, and whether the two JUnit reports give every case the
# same verdict (pass/fail/skip and whether it has notes). BASELINE_DATA is
# its COLLIE_DATA_DIR (its scenarios and torch driver: `git archive main
# scenarios backends | tar -x -C DIR`; default: what it finds itself). With
# REPEATS=R each figure is the median of R runs. A backend that is not
# available here is skipped with collie's reason.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${REPEATS:-1}
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(sim tcp mpi torch:gloo)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -Wno-dev > /dev/null
cmake --build build -j2 --target collie > /dev/null
cmake --build build -j2 --target collie-mpi-worker > /dev/null 2>&1 || true
collie=build/tools/collie
base=${BASELINE:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

goal() {
  case "$1" in
    tcp) echo 10 ;;
    mpi) echo 30 ;;
    torch:gloo) echo 45 ;;
    *) echo - ;;
  esac
}

# run DATA_DIR BINARY BACKEND TAG: one suite, its wall seconds on stdout.
run() {
  local t0 t1
  t0=$(date +%s.%N)
  if [ -n "$1" ]; then export COLLIE_DATA_DIR="$1"; else unset COLLIE_DATA_DIR; fi
  "$2" conformance --backend "$3" -q --junit "$out/$4.xml" > "$out/$4.txt" 2>&1 || true
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# Whether two JUnit reports give every case the same verdict.
same_verdicts() {
  python3 - "$1" "$2" <<'EOF'
import sys, xml.etree.ElementTree as ET
def verdicts(path):
    out = {}
    for c in ET.parse(path).getroot().iter("testcase"):
        state = "fail" if c.find("failure") is not None else "skip" if c.find("skipped") is not None else "pass"
        so = c.find("system-out")
        out[c.get("classname").split(".", 1)[1] + "/" + c.get("name")] = (state, bool(so is not None and so.text))
    return out
a, b = verdicts(sys.argv[1]), verdicts(sys.argv[2])
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print("same" if not diff else "%d differ (%s)" % (len(diff), ", ".join(diff[:3])))
EOF
}

echo "# machine: $(nproc) cores, $(uname -r); repeats $R; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-11s %8s %6s %-48s" backend wall_s goal result
[ -n "$base" ] && printf " %9s %6s %s" base_s ratio verdicts
printf " %s\n" "load(1m) after"
for b in "${backends[@]}"; do
  tag=${b//:/_}
  if ! why=$("$collie" conformance --backend "$b" -q --filter '^$' 2>&1 >/dev/null) && [ -n "$why" ]; then
    printf "%-11s skipped: %s\n" "$b" "$why"
    continue
  fi
  : > "$out/$tag.times"
  : > "$out/$tag.base_times"
  for rep in $(seq "$R"); do
    run "$PWD" "$collie" "$b" "$tag" >> "$out/$tag.times"
    if [ -n "$base" ]; then run "${BASELINE_DATA:-}" "$base" "$b" "$tag.base" >> "$out/$tag.base_times"; fi
  done
  wall=$(median < "$out/$tag.times")
  result=$(grep -E '^[0-9]+ passed' "$out/$tag.txt" | tail -1)
  printf "%-11s %8.1f %6s %-48s" "$b" "$wall" "$(goal "$b")" "$result"
  if [ -n "$base" ]; then
    bwall=$(median < "$out/$tag.base_times")
    printf " %9.1f %6.2f %s" "$bwall" "$(echo "$wall / $bwall" | bc -l)" "$(same_verdicts "$out/$tag.base.xml" "$out/$tag.xml")"
  fi
  printf " %s\n" "$(cut -d' ' -f1 /proc/loadavg)"
done
