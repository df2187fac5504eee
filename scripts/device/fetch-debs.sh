#!/usr/bin/env bash
# Here (Debian): downloads the Debian packages that the GPU machine lacks into
# .deps/debs, and copies ../shared's fixtures and bench scripts into .fixtures
# and .bench, so that a device run can carry them (all three are git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/debs
(cd .deps/debs && apt-get download -q \
  liblmdb0 liblmdb-dev libleveldb1d libleveldb-dev libsnappy1v5 \
  libprotobuf-c1 libprotobuf-c-dev protobuf-c-compiler libprotoc32 libprotobuf32 \
  libhiredis0.14 libhiredis-dev libcmocka0 libcmocka-dev libgloo0 libgloo-dev \
  libibverbs1 libibverbs-dev libnl-3-200 libnl-route-3-200 redis-server redis-tools libjemalloc2 liblzf1 \
  libdnnl2 libdnnl-dev ocl-icd-libopencl1 2>&1 | tail -1)
rm -rf .fixtures .bench
cp -r ../shared/fixtures/caffe .fixtures
cp -r ../shared/bench .bench
du -sh .deps .fixtures .bench
