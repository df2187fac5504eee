#!/usr/bin/env bash
# CPU training on a shared machine: Caffe's LeNet and CIFAR-10 quick solvers,
# each trained on a quiet machine and then beside busy processes, in one run.
#
# In a scratch Caffe root it writes synthetic LMDBs where Caffe's examples
# expect MNIST and CIFAR-10 (examples/mnist/mnist_*_lmdb, examples/cifar10/
# cifar10_*_lmdb and mean.binaryproto: `cortado make_synthetic_db`,
# `cortado compute_image_mean`) and copies of the BVLC solvers and nets
# (lenet_solver, cifar10_quick_solver) that train LENET_ITERS and
# CIFAR_ITERS iterations with no tests and no snapshots.  Each variant then
# runs `cortado train --solver=S --cpu` RUNS times quiet and RUNS times beside
# HOGS busy processes, and the table gives the median wall time of each and
# their ratio (loaded / quiet).  The load average before and after each
# phase is printed: on a machine shared with other work the quiet phase is
# only as quiet as the machine was.
#
# Variants:
#   cortado   as shipped (OMP_WAIT_POLICY, OMP_NUM_THREADS and
#             OPENBLAS_NUM_THREADS left to cortado: see src/cli/early.c)
#   spinning  GOMP_SPINCOUNT=300000: libgomp's own default, the behaviour
#             before cortado chose a wait policy (a user's GOMP_SPINCOUNT
#             is kept as it is)
#   env:K=V   cortado with K=V in its environment (e.g. env:OPENBLAS_NUM_THREADS=1)
# and, when a `caffe` command is on the PATH (BVLC Caffe, e.g. Debian's
# caffe-cpu), `caffe train` on the same solvers with solver_mode: CPU.
#
#   bench/contention.sh            measure and print the table
#   bench/contention.sh --record   also append it to bench/RESULTS.md
#
# Environment: BUILD (build folder, default build), FIXTURES (the BVLC
# prototxts; default: the build's CORTADO_FIXTURES_DIR), RUNS (3),
# LENET_ITERS (2000), CIFAR_ITERS (300), HOGS (2), HOG (yes: `yes
# >/dev/null`; sha: `sha256sum /dev/zero`), VARIANTS ("cortado spinning"),
# NICE (0): the nice value of the training runs and the hogs alike, and of
# the script's scheduler autogroup (Linux shares the CPUs between sessions
# first, then between the processes of each); on a machine shared with
# other work, `NICE=-20 setsid bench/contention.sh` (root) gives the
# benchmark precedence over the rest, so that the quiet phase is close to
# quiet and the loaded one is the training against its own hogs.
# This is a benchmark, not a test: nothing here fails on a slow number.
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
lenet_iters=${LENET_ITERS:-2000}
cifar_iters=${CIFAR_ITERS:-300}
hogs=${HOGS:-2}
hog=${HOG:-yes}
variants=${VARIANTS:-cortado spinning}
nice_value=${NICE:-0}
if [ "$nice_value" != 0 ] && [ -w /proc/self/autogroup ]; then
  echo "$nice_value" >/proc/self/autogroup 2>/dev/null || echo "contention: cannot set the autogroup's nice value" >&2
fi
bin=$(realpath "$build/cortado")
[ -x "$bin" ] || { echo "contention: $bin not built (make build)" >&2; exit 1; }
fixtures=${FIXTURES:-$(sed -n 's/^CORTADO_FIXTURES_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null)}
fixtures=$(realpath "${fixtures:-../shared/fixtures/caffe}")
if command -v caffe >/dev/null 2>&1; then variants="$variants caffe"; fi

root=$(mktemp -d)
hog_pids=()
stop_hogs() {
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${hog_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  hog_pids=()
}
trap 'stop_hogs; rm -rf "$root"' EXIT

# ---------------------------------------------------------------- the Caffe root
mkdir -p "$root/examples/mnist" "$root/examples/cifar10"
(
  cd "$root"
  q=(--log_level=1)
  "$bin" make_synthetic_db examples/mnist/mnist_train_lmdb --num=6000 --shape=1,28,28 --labels=10 "${q[@]}"
  "$bin" make_synthetic_db examples/mnist/mnist_test_lmdb --num=1000 --shape=1,28,28 --labels=10 --seed=2 "${q[@]}"
  "$bin" make_synthetic_db examples/cifar10/cifar10_train_lmdb --num=5000 --shape=3,32,32 --labels=10 "${q[@]}"
  "$bin" make_synthetic_db examples/cifar10/cifar10_test_lmdb --num=1000 --shape=3,32,32 --labels=10 --seed=2 "${q[@]}"
  "$bin" compute_image_mean examples/cifar10/cifar10_train_lmdb examples/cifar10/mean.binaryproto "${q[@]}"
)
# solver net dir iterations -> a copy that trains `iterations` with no tests or snapshots
solver_copy() {
  local src=$1 net=$2 dir=$3 iters=$4 out
  out="$root/$dir/$(basename "$src" .prototxt)_bench.prototxt"
  cp "$fixtures/$net" "$root/$dir/"
  sed -e "s/^max_iter:.*/max_iter: $iters/" -e 's/^test_interval:.*/test_interval: 1000000/' \
      -e 's/^snapshot:.*/snapshot: 0/' -e 's/^solver_mode:.*/solver_mode: CPU/' \
      -e '/^display:/d' "$fixtures/$src" >"$out"
  printf 'display: 100\ntest_initialization: false\nsnapshot_after_train: false\n' >>"$out"
  echo "$out"
}
lenet_solver=$(solver_copy lenet_solver.prototxt lenet_train_test.prototxt examples/mnist "$lenet_iters")
cifar_solver=$(solver_copy cifar10_quick_solver.prototxt cifar10_quick_train_test.prototxt examples/cifar10 "$cifar_iters")

# ---------------------------------------------------------------- runs
start_hogs() {
  for ((h = 0; h < hogs; h++)); do
    case $hog in
      yes) nice -n "$nice_value" yes >/dev/null & ;;
      sha) nice -n "$nice_value" sha256sum /dev/zero >/dev/null & ;;
      *) echo "contention: HOG is yes or sha" >&2; exit 2 ;;
    esac
    hog_pids+=($!)
  done
  sleep 1
}

# variant solver -> seconds of wall time of one training run
train_once() {
  local variant=$1 solver=$2 log="$root/train.log" t0 t1
  t0=$(date +%s.%N)
  case $variant in
    cortado) (cd "$root" && nice -n "$nice_value" "$bin" train --solver="$solver" --cpu) >"$log" 2>&1 ;;
    spinning) (cd "$root" && GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-300000} nice -n "$nice_value" "$bin" train \
                 --solver="$solver" --cpu) >"$log" 2>&1 ;;
    caffe) (cd "$root" && nice -n "$nice_value" caffe train --solver="$solver") >"$log" 2>&1 ;;
    env:*) (cd "$root" && env ${variant#env:} nice -n "$nice_value" "$bin" train --solver="$solver" --cpu) >"$log" 2>&1 ;;
  esac || { tail -5 "$log" >&2; echo "contention: $variant failed on $solver" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}'
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A result
phase() { # quiet|loaded
  local what=$1
  echo "== $what: load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  for variant in $variants; do
    for net in lenet cifar10_quick; do
      local solver=$lenet_solver times=()
      [ "$net" = cifar10_quick ] && solver=$cifar_solver
      for ((r = 0; r < runs; r++)); do times+=("$(train_once "$variant" "$solver")"); done
      result[$variant,$net,$what]=$(median "${times[@]}")
      result[$variant,$net,$what,all]="${times[*]}"
      echo "   $variant $net: ${times[*]} s" >&2
    done
  done
  echo "   load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}

load_quiet=$(cut -d' ' -f1-3 /proc/loadavg)
phase quiet
start_hogs
load_loaded=$(cut -d' ' -f1-3 /proc/loadavg)
phase loaded
stop_hogs

device="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src 2>/dev/null || commit="$commit+dirty"
when=$(date -u +%Y-%m-%d)
table=$(
  printf '| net | iterations | variant | quiet s (median) | beside %d x `%s` s (median) | loaded / quiet |\n' "$hogs" "$hog"
  printf '|---|---|---|---|---|---|\n'
  for net in lenet cifar10_quick; do
    iters=$lenet_iters
    [ "$net" = cifar10_quick ] && iters=$cifar_iters
    for variant in $variants; do
      q=${result[$variant,$net,quiet]} l=${result[$variant,$net,loaded]}
      awk -v n="$net" -v i="$iters" -v v="$variant" -v q="$q" -v l="$l" \
        'BEGIN {printf "| %s | %s | %s | %.1f | %.1f | %.2fx |\n", n, i, v, q, l, l / q}'
    done
  done
)
printf '\n%s, %s, commit %s, %s runs each, nice %s\n' "$device" "$when" "$commit" "$runs" "$nice_value"
printf 'load average at the start of the quiet phase: %s; of the loaded phase: %s\n\n' "$load_quiet" "$load_loaded"
echo "$table"

if [ "$record" = 1 ]; then
  {
    printf '\n### Contention run of %s (commit %s, %s)\n\n' "$when" "$commit" "$device"
    printf '`bench/contention.sh`: %s runs per cell (nice %s), `cortado train --cpu` on the BVLC solvers over\n' "$runs" "$nice_value"
    printf 'synthetic LMDBs; load average %s (quiet phase), %s (loaded phase).\n\n' "$load_quiet" "$load_loaded"
    echo "$table"
  } >>bench/RESULTS.md
  echo "recorded in bench/RESULTS.md"
fi
