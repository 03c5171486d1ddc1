#!/usr/bin/env bash
# collie's simulator vs SimGrid's SMPI on the same job: all_reduce of 1 MiB
# of float32, 10 iterations, real data, at 256 and 1024 ranks, on equivalent
# platforms (one rank per host; 5 us latency; 12.5 GB/s = 100 Gb/s links).
# Both run in this invocation, one after the other; wall time and peak
# memory (max RSS) come from /usr/bin/time for both, and CPU time (user + sys),
# which a loaded machine inflates less than wall time. Prints collie/SMPI ratios.
#
#   bench/sim_vs_smpi.sh [RANKS...]        (default: 256 1024)
#
# Needs: COLLIE_WITH_PEERS=1 scripts/setup.sh (libsimgrid-dev), a build in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=("${@:-256 1024}")
[[ $# -eq 0 ]] && ranks=(256 1024)
BYTES=$((1 << 20))
ITERS=10
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --build build --target sim_allreduce > /dev/null
smpicc -O2 bench/smpi_allreduce.c -o "$work/smpi_allreduce"

# One host per rank, each with its own 12.5 GB/s, 5 us link to a fast backbone.
platform() {
  cat > "$work/platform.xml" <<XML
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="world" routing="Full">
    <cluster id="cluster" prefix="node-" suffix="" radical="0-$(( $1 - 1 ))"
             speed="1Gf" bw="12.5GBps" lat="2.5us" bb_bw="10TBps" bb_lat="0us"/>
  </zone>
</platform>
XML
  seq 0 $(( $1 - 1 )) | sed 's/^/node-/' > "$work/hostfile"
}

measure() {  # prints "wall_s rss_mb cpu_s" of the command
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@" > "$work/out" 2> "$work/err" || { cat "$work/err" >&2; return 1; }
  read -r wall rss user sys < "$work/time"
  echo "$wall $(awk -v k="$rss" 'BEGIN{printf "%.0f", k/1024}') $(echo "$user + $sys" | bc -l)"
}

printf "%-6s %12s %12s %10s %12s %12s %10s %12s %12s %10s\n" ranks collie_wall_s smpi_wall_s wall_ratio \
  collie_rss_mb smpi_rss_mb rss_ratio collie_cpu_s smpi_cpu_s cpu_ratio
for n in "${ranks[@]}"; do
  platform "$n"
  read -r cw cm cc < <(measure build/bench/sim_allreduce --ranks "$n" --bytes "$BYTES" --iters "$ITERS")
  collie_line=$(cat "$work/out")
  read -r sw sm sc < <(measure smpirun -np "$n" -platform "$work/platform.xml" -hostfile "$work/hostfile" \
      --cfg=smpi/host-speed:1Gf --cfg=smpi/display-timing:no --cfg=smpi/privatization:1 \
      "$work/smpi_allreduce" "$BYTES" "$ITERS")
  smpi_line=$(grep '^smpi:' "$work/out" || true)
  printf "%-6s %12s %12s %10.3f %12s %12s %10.3f %12s %12s %10.3f\n" "$n" "$cw" "$sw" "$(echo "$cw / $sw" | bc -l)" \
    "$cm" "$sm" "$(echo "$cm / $sm" | bc -l)" "$cc" "$sc" "$(echo "$cc / $sc" | bc -l)"
  echo "    $collie_line"
  echo "    $smpi_line"
done
