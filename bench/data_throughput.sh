#!/usr/bin/env bash
# Data pipeline throughput (decode + crop 224 + mirror of 256x256 JPEG
# records from an LMDB) for a list of thread counts.
#
#   bench/data_throughput.sh [BUILD_DIR] [THREADS] [extra data_throughput options]
#   e.g. bench/data_throughput.sh build 1,2,4,8 --records 1024
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-"$here/../build"}
threads=${2:-1,2}
shift $(( $# > 2 ? 2 : $# ))
bin="$build/bench/data_throughput"
if [[ ! -x "$bin" ]]; then
  cmake --build "$build" --target data_throughput -j2
fi
exec "$bin" --threads "$threads" "$@"
