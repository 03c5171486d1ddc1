#!/usr/bin/env bash
# Several hosts on one machine: N network namespaces (the "hosts"), each
# with one address on a shared bridge (10.77.0.1 .. 10.77.0.N) through a
# veth pair, and one collie process per host joining by env://, rank 0 on
# 10.77.0.1. Runs the command given after the collie binary in every host and
# fails if any rank fails.
#
#   netns_hosts.sh N -- PROGRAM ARGS...
#
# Exits 77 (CTest's "skipped"), saying why, where namespaces cannot be made
# (not root, no CAP_NET_ADMIN, no veth or bridge support).
set -uo pipefail
n=$1
shift 2
tag="c$$"
hub="${tag}hub"
cleanup() {
  for ((i = 0; i < n; i++)); do ip netns del "${tag}h$i" 2>/dev/null; done
  ip netns del "$hub" 2>/dev/null
}
trap cleanup EXIT
skip() {
  echo "SKIPPED: cannot build $n network namespaces here: $1"
  exit 77
}
command -v ip > /dev/null || skip "no iproute2 (ip)"
ip netns add "$hub" 2> /tmp/$tag.err || skip "ip netns add failed: $(cat /tmp/$tag.err) (needs root or CAP_NET_ADMIN)"
ip -n "$hub" link add br0 type bridge 2> /tmp/$tag.err || skip "no bridge support: $(cat /tmp/$tag.err)"
ip -n "$hub" link set br0 up
for ((i = 0; i < n; i++)); do
  ns="${tag}h$i"
  ip netns add "$ns" || skip "ip netns add $ns failed"
  ip link add "${tag}a$i" netns "$hub" type veth peer name eth0 netns "$ns" 2> /tmp/$tag.err ||
    skip "no veth support: $(cat /tmp/$tag.err)"
  ip -n "$hub" link set "${tag}a$i" master br0 up
  ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done
rm -f /tmp/$tag.err
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$((20000 + RANDOM % 10000))
pids=()
for ((i = 0; i < n; i++)); do
  ip netns exec "${tag}h$i" env RANK=$i WORLD_SIZE=$n MASTER_ADDR=10.77.0.1 MASTER_PORT=$port \
    COLLIE_JOB_TOKEN="$token" COLLIE_INIT_TIMEOUT_S=20 COLLIE_TIMEOUT_S=60 "$@" 2>&1 | sed "s/^/[host $i] /" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
