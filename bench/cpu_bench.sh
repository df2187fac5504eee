#!/usr/bin/env bash
# CPU training speed of the reference nets against BVLC Caffe and PyTorch.
#
# For LeNet (MNIST, batch 64) and CIFAR-10 quick (batch 100) it runs
#   cortado time --model=NET --dummy_data --dummy_shape=C,H,W --iterations=ITERS
# RUNS times, pinned with taskset to the first THREADS cores, and prints a
# table: the median and the minimum of the runs' "Average Forward-Backward"
# (ms per iteration, forward + backward), the figures quoted for BVLC Caffe
# (im2col + OpenBLAS) and PyTorch 1.13 on the same 2-core AVX2 machine, and
# the ratios (peer / Cortado: above 1 is faster than the peer).  The load
# average before and after is printed too: on a shared machine, the numbers
# are only as good as the machine was quiet.
#
#   bench/cpu_bench.sh            build if needed, measure, print the table
#   bench/cpu_bench.sh --record   also append the results to bench/RESULTS.md
#
# Environment: BUILD (build folder, default build), FIXTURES (folder of the
# Caffe prototxts; default: the build's CORTADO_FIXTURES_DIR), RUNS (3),
# ITERS (50), THREADS (all cores; also OMP_NUM_THREADS).
set -euo pipefail
cd "$(dirname "$0")/.."

record=0
for a in "$@"; do
  case $a in
    --record) record=1 ;;
    *) echo "usage: $0 [--record]" >&2; exit 2 ;;
  esac
done

build=${BUILD:-build}
runs=${RUNS:-3}
iters=${ITERS:-50}
threads=${THREADS:-$(nproc)}

if [ ! -x "$build/cortado" ]; then
  echo "cpu_bench: building $build/cortado" >&2
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$build" -j "$(nproc)" --target cortado >&2
fi
fixtures=${FIXTURES:-$(sed -n 's/^CORTADO_FIXTURES_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null)}
fixtures=${fixtures:-../shared/fixtures/caffe}
for f in lenet_train_test.prototxt cifar10_quick_train_test.prototxt; do
  [ -f "$fixtures/$f" ] || { echo "cpu_bench: $fixtures/$f not found (set FIXTURES)" >&2; exit 1; }
done

export OMP_NUM_THREADS=$threads
cpus="0-$((threads - 1))"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# net  prototxt  C,H,W  BVLC-Caffe-ms  PyTorch-ms  target-ms
nets=(
  "lenet lenet_train_test.prototxt 1,28,28 23 21 10"
  "cifar10_quick cifar10_quick_train_test.prototxt 3,32,32 158 96 60"
)

rows=()
for entry in "${nets[@]}"; do
  read -r name proto shape caffe torch target <<<"$entry"
  times=()
  engines=""
  batch="?"
  for ((r = 0; r < runs; r++)); do
    taskset -c "$cpus" "$build/cortado" time --model="$fixtures/$proto" --dummy_data \
      --dummy_shape="$shape" --iterations="$iters" >"$log" 2>&1 || {
      cat "$log" >&2
      echo "cpu_bench: cortado time failed on $name" >&2
      exit 1
    }
    t=$(sed -n 's/.*Average Forward-Backward: \([0-9.]*\) ms.*/\1/p' "$log")
    [ -n "$t" ] || { cat "$log" >&2; echo "cpu_bench: no Average Forward-Backward line" >&2; exit 1; }
    times+=("$t")
    batch=$(sed -n 's/.*-> DummyData \([0-9]*\) x.*/\1/p' "$log" | head -1)
    engines=$(grep -o "host engine [a-zA-Z0-9 +]*" "$log" | sed 's/host engine //' | sort | uniq -c |
      awk '{c=$1; $1=""; printf "%s%s x%s", (NR>1?", ":""), substr($0,2), c}')
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -g)
  med=$(printf '%s\n' "$sorted" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  min=$(printf '%s\n' "$sorted" | head -1)
  rows+=("$name $batch $med $min $caffe $torch $target|$engines|${times[*]}")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

printf '\nCortado CPU training speed: %s runs of %s iterations, %s threads (cores %s)\n' \
  "$runs" "$iters" "$threads" "$cpus"
printf 'load average before: %s, after: %s\n\n' "$load_before" "$load_after"
printf '%-14s %5s %12s %9s %11s %7s %12s %7s %8s\n' net batch "median ms" "min ms" \
  "BVLC Caffe" ratio "PyTorch 1.13" ratio target
for row in "${rows[@]}"; do
  read -r name batch med min caffe torch target <<<"${row%%|*}"
  awk -v n="$name" -v b="$batch" -v m="$med" -v mi="$min" -v c="$caffe" -v p="$torch" -v t="$target" \
    'BEGIN {printf "%-14s %5s %12.2f %9.2f %11.1f %6.2fx %12.1f %6.2fx %5.1f %s\n",
            n, b, m, mi, c, c / m, p, p / m, t, (m <= t ? "met" : "MISSED")}'
done
printf '\nengines (per convolution layer):\n'
for row in "${rows[@]}"; do
  rest=${row#*|}
  printf '  %-14s %s\n' "${row%% *}" "${rest%%|*}"
done

if [ "$record" = 1 ]; then
  results=bench/RESULTS.md
  if [ ! -f "$results" ]; then
    cat >"$results" <<'EOF'
# Benchmark results

Recorded by the bench scripts (`bench/cpu_bench.sh --record`).  Times are
milliseconds per training iteration (forward + backward) from `cortado time
--dummy_data`, the median of the runs; the peers' figures are the ones quoted
for the same machine class.  Ratio = peer / Cortado (above 1: Cortado is
faster).  Numbers from a shared, loaded machine say so in the notes.

| date | commit | device | net | batch | Cortado ms (median, min) | peer | peer ms | ratio | notes |
|---|---|---|---|---|---|---|---|---|---|
EOF
  fi
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD -- src 2>/dev/null || commit="$commit+dirty"
  device="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
  when=$(date -u +%Y-%m-%d)
  for row in "${rows[@]}"; do
    read -r name batch med min caffe torch target <<<"${row%%|*}"
    for peer in "BVLC Caffe:$caffe" "PyTorch 1.13:$torch"; do
      awk -v d="$when" -v c="$commit" -v dev="$device" -v n="$name" -v b="$batch" -v m="$med" \
        -v mi="$min" -v pn="${peer%%:*}" -v pm="${peer##*:}" -v th="$threads" \
        -v lb="$load_before" -v la="$load_after" \
        'BEGIN {printf "| %s | %s | %s | %s | %s | %.2f (%.2f) | %s | %.1f | %.2fx | %s threads; load %s -> %s |\n",
                d, c, dev, n, b, m, mi, pn, pm, pm / m, th, lb, la}' >>"$results"
    done
  done
  echo "recorded in $results"
fi
