#!/usr/bin/env bash
# Accuracy of every data-parallel mode against the all-reduce (issue 29:
# within 0.5% at staleness <= 4): BVLC's LeNet solver on Fashion-MNIST
# (Debian's dataset-fashion-mnist), W workers under mpirun, ITERS
# iterations, the final test on the whole 10,000-image test set, for each
# seed; prints one Markdown row per mode with every seed's accuracy, their
# mean and the mean's difference from the all-reduce's.
#   ITERS=2000 SEEDS="1 2" WORKERS=3 MODES="..." bench/ps_accuracy.sh [BIN]
# Too long for CI (about 1.5 minutes a run on 2 cores at 2000 iterations);
# tests/sh_ps_lenet_mpi.sh is the short check.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/cortado}
iters=${ITERS:-2000}
seeds=${SEEDS:-1 2}
workers=${WORKERS:-3}
modes=${MODES:-"allreduce ssp:1 ssp:2 ssp:4 async bmuf:10"}
dir=${OUT:-/tmp/ps_accuracy}
mkdir -p "$dir"
export CORTADO_BIN=$bin CORTADO_SRC=$here
. "$here/tests/lenet_precision.sh"
. "$here/bench/ps_modes.sh"
lenet_data "$dir"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# flags MODE: the ranks and flags of a mode (ssp:S, bmuf:PERIOD)

run() { # MODE SEED: the final test accuracy
  local mode=$1 seed=$2 log np rest
  log="$dir/$(tr -c 'a-z0-9' _ <<<"$mode")_$seed.log"
  sed -e "s#examples/fashion_mnist/lenet_train_test.prototxt#$dir/net.prototxt#" \
      -e "s#^snapshot_prefix.*#snapshot_prefix: \"$dir/lenet\"#" -e "s#^snapshot:.*#snapshot: 0#" \
      -e "s#^test_interval.*#test_interval: $iters#" -e "s#^max_iter.*#max_iter: $iters#" \
      -e "s#^display.*#display: 100#" \
      "$here/examples/fashion_mnist/lenet_solver.prototxt" >"$dir/solver_$seed.prototxt"
  printf 'random_seed: %s\nsnapshot_after_train: false\n' "$seed" >>"$dir/solver_$seed.prototxt"
  read -r np rest <<<"$(ps_mode_flags "$mode" "$workers" 1)"
  # shellcheck disable=SC2086
  mpirun --oversubscribe --bind-to none -np "$np" "$bin" train --solver="$dir/solver_$seed.prototxt" $rest \
    >"$log" 2>&1 || { tail -5 "$log" >&2; echo nan; return; }
  # a diverged net (test loss -log(FLT_MIN) = 87.34, or nan) scores 1 in
  # Caffe's Accuracy layer: reported as such
  awk '/Test net output #0: accuracy = / { a = $NF }
       /Test net output #1: loss = / { l = $11 }
       END { print (l == "nan" || l + 0 >= 87) ? "diverged" : a }' "$log"
}

echo "| mode | $(for s in $seeds; do printf 'seed %s | ' "$s"; done)mean | vs all-reduce |"
echo "| --- | $(for _ in $seeds; do printf -- '--- | '; done)--- | --- |"
ref=""
for mode in $modes; do
  accs=""
  for s in $seeds; do accs="$accs $(run "$mode" "$s")"; done
  mean=$(echo "$accs" | awk '{ t = 0; for (i = 1; i <= NF; i++) { if ($i == "diverged") { print $i; exit } t += $i }
                               printf "%.4f", t / NF }')
  [ -z "$ref" ] && ref=$mean
  diff=$(awk -v m="$mean" -v r="$ref" 'BEGIN { if (m == "diverged") print "-"; else printf "%+.2f%%", (m - r) * 100 }')
  echo "| $mode | $(for a in $accs; do printf '%s | ' "$a"; done)$mean | $diff |"
done
