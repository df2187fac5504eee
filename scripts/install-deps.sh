#!/usr/bin/env bash
# Installs the Debian packages that building and testing Cortado need.
# Idempotent: packages already there are left alone, and apt is not touched at
# all when nothing is missing.  Needs root (or sudo) when something is missing.
#   scripts/install-deps.sh           install what is missing
#   scripts/install-deps.sh --check   exit 1 and print the command when something is missing
#
# Then the Python packages the Python package's tests need (numpy, protobuf,
# pytest, pydot: python/requirements-test.txt), for the `python3` that CMake
# finds first on PATH: from PyPI with pip, or, for an interpreter that pip may
# not change (Debian's own, PEP 668), as Debian packages.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git python3 python3-dev python3-venv python3-pip graphviz
  protobuf-c-compiler libprotobuf-c-dev
  libopenblas-dev libdnnl-dev liblmdb-dev lmdb-utils libleveldb-dev libsnappy-dev
  libjpeg62-turbo-dev libpng-dev zlib1g-dev libhdf5-dev
  libopenmpi-dev openmpi-bin
  libhiredis-dev redis-server libgloo-dev
  libcmocka-dev
  libcairo2-dev
  clang libclang-rt-14-dev
  iproute2
  dataset-fashion-mnist
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null; then
    missing+=("$p")
  fi
done

# Python modules (import name:PyPI name:Debian package) for `python3` on PATH.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY_MODULES=(numpy:numpy:python3-numpy google.protobuf:protobuf:python3-protobuf
            pytest:pytest:python3-pytest pydot:pydot:python3-pydot)
py_missing=()
py_missing_debs=()
python_missing() {
  py_missing=()
  py_missing_debs=()
  command -v python3 >/dev/null || return 0
  for m in "${PY_MODULES[@]}"; do
    IFS=: read -r mod pypi deb <<<"$m"
    if ! python3 -c "import $mod" >/dev/null 2>&1; then
      py_missing+=("$pypi")
      py_missing_debs+=("$deb")
    fi
  done
}
python_missing

if [ ${#missing[@]} -eq 0 ] && [ ${#py_missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages and ${#PY_MODULES[@]} Python modules present"
  exit 0
fi

if [ "${1:-}" = "--check" ]; then
  [ ${#missing[@]} -eq 0 ] || echo "install-deps: missing: ${missing[*]}" >&2
  [ ${#py_missing[@]} -eq 0 ] || echo "install-deps: missing Python modules for $(command -v python3): ${py_missing[*]}" >&2
  echo "run: sudo scripts/install-deps.sh" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: need root to install: ${missing[*]} ${py_missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python_missing
if [ ${#py_missing[@]} -gt 0 ]; then
  py=$(command -v python3)
  echo "install-deps: installing Python modules for $py: ${py_missing[*]}"
  if ! "$py" -m pip install --quiet --disable-pip-version-check -r "$HERE/python/requirements-test.txt"; then
    # an interpreter pip may not change (PEP 668): Debian's packages
    echo "install-deps: pip could not install into $py; using Debian's packages"
    $SUDO apt-get install -y -qq --no-install-recommends "${py_missing_debs[@]}"
  fi
  python_missing
  if [ ${#py_missing[@]} -gt 0 ]; then
    echo "install-deps: still missing Python modules for $py: ${py_missing[*]}" >&2
    exit 1
  fi
fi
