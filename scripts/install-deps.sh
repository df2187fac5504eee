#!/usr/bin/env bash
# Installs the Debian packages that building and testing Cortado need.
# Idempotent: packages already there are left alone, and apt is not touched at
# all when nothing is missing.  Needs root (or sudo) when something is missing.
#   scripts/install-deps.sh           install what is missing
#   scripts/install-deps.sh --check   exit 1 and print the command when something is missing
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git python3
  protobuf-c-compiler libprotobuf-c-dev
  libopenblas-dev libdnnl-dev liblmdb-dev lmdb-utils libleveldb-dev libsnappy-dev
  libjpeg62-turbo-dev libpng-dev zlib1g-dev libhdf5-dev
  libopenmpi-dev openmpi-bin
  libhiredis-dev redis-server libgloo-dev
  libcmocka-dev
  clang libclang-rt-14-dev
  iproute2
  dataset-fashion-mnist
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "${1:-}" = "--check" ]; then
  echo "install-deps: missing: ${missing[*]}" >&2
  echo "run: sudo scripts/install-deps.sh" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
