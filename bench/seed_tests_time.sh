#!/usr/bin/env bash
# The wall time of each of seeds_test's tests (the tutorials' programs under
# `collie run`), one build tree against another, interleaved test by test:
#
#   bench/seed_tests_time.sh BUILD_BEFORE [BUILD_AFTER]
#
# e.g. bench/seed_tests_time.sh /work/main/build build. Each tree runs its own
# collie hook (its seeds_test finds script/python beside its sources).
set -uo pipefail
trees=("$@")
[[ ${#trees[@]} -ge 1 ]] || { echo "usage: $0 BUILD [BUILD]" >&2; exit 2; }
first=${trees[0]}/script/seeds_test
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M) UTC"
names=$("$first" --gtest_list_tests | sed -n 's/^  [A-Za-z]*\/\([A-Za-z0-9_]*\).*/\1/p')
printf '%-46s' test; for t in "${trees[@]}"; do printf ' %12s' "$t"; done; echo
for name in $names; do
  printf '%-46s' "$name"
  for t in "${trees[@]}"; do
    start=$(date +%s.%N)
    if "$t/script/seeds_test" --gtest_filter="Tutorials/Seeds.*/$name" > /dev/null 2>&1; then ok=""; else ok="!"; fi
    printf ' %11.2f%1s' "$(echo "$(date +%s.%N) - $start" | bc)" "$ok"
  done
  echo
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg) (! : the test failed)"
