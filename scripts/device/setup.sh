#!/usr/bin/env bash
# There (the GPU machine, Ubuntu): unpacks the carried .debs into .deps/root
# (never into /) and prints the environment to build against them:
#   eval "$(bash scripts/device/setup.sh)"
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD/.deps/root
if [ ! -f "$root/.done" ]; then
  mkdir -p "$root"
  for f in .deps/debs/*.deb; do dpkg -x "$f" "$root"; done
  touch "$root/.done"
fi
lib=$root/usr/lib/x86_64-linux-gnu
echo "export CORTADO_DEPS_ROOT=$root"
echo "export PATH=$root/usr/bin:$root/usr/sbin:\$PATH"
echo "export LD_LIBRARY_PATH=$lib:$root/usr/lib:\${LD_LIBRARY_PATH:-}"
echo "export PKG_CONFIG_PATH=$lib/pkgconfig:$root/usr/share/pkgconfig:\${PKG_CONFIG_PATH:-}"
echo "export CMAKE_PREFIX_PATH=$root/usr:$root:\${CMAKE_PREFIX_PATH:-}"
echo "export NCCL_NVLS_ENABLE=0"
