#!/usr/bin/env bash
# Installs everything collie needs to build and test on Debian 12 (bookworm).
# Idempotent: packages already present are left alone. Runs as root or via sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev libcli11-dev libasio-dev nlohmann-json3-dev
  librapidcheck-dev libgtest-dev libxml2-utils libssl-dev iproute2
  # The libraries collie checks through its op-level seam (--backend mpi,
  # --backend torch:gloo); without them those backends say they are not
  # available and their tests skip.
  openmpi-bin libopenmpi-dev python3-torch
)
# Peers for the side-by-side benchmarks (bench/); not needed for tests.
if [[ "${COLLIE_WITH_PEERS:-0}" == "1" ]]; then
  packages+=(libsimgrid-dev time libgloo-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
