#!/usr/bin/env bash
# Training iterations of Cortado and of PyTorch on the very same prototxts,
# batches and math modes, in one run on one GPU (issue: the GPU engine).
#
#   bench/gpu_vs_pytorch.sh BUILD_DIR [OUT_DIR]
#
# Cortado: `cortado time --update --dummy_data` (forward, backward and an SGD
# update with momentum 0.9 and weight decay 5e-4 on synthetic data of a fixed
# batch; MODES: fp32 tf32 bf16 fp16, the last two Cortado's --precision
# against the peer's bf16cl, AMP with channels-last).  PyTorch: .bench/torch_from_prototxt.py (a copy of
# ../shared/bench/torch_from_prototxt.py: scripts/device/fetch-debs.sh makes
# it), same net, batch and mode.  Prints a markdown table: img/s, ms per
# iteration, peak GPU memory and the ratio of img/s; LeNet and
# cifar10_quick as the medians of REPEAT (default 3) alternating runs each
# way, every run listed under the table.  Needs a GPU.
#
# BASE=BUILD_DIR: a second build (say, of the commit before a change) runs
# right after each run of BUILD_DIR's, against the same PyTorch runs; the
# table then adds its img/s, its ratio to PyTorch and BUILD_DIR's img/s over
# BASE's.  Both builds then run the cuDNN convolution algorithms that the
# first run of each net and mode benchmarked (CORTADO_CUDNN_ALGOS, a file per
# net and mode in OUT_DIR), so that what differs is the builds, not a
# near-tie between algorithms that a benchmark resolves differently from
# one run to the next.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR [OUT_DIR]}
out=${2:-${OUT:-/tmp}}
cortado=$build/cortado
base=${BASE:-}
peer=${PEER:-.bench/torch_from_prototxt.py}
fix=${FIXTURES:-.fixtures}
iters=${ITERS:-50}
modes=${MODES:-"fp32 tf32"}
export NCCL_NVLS_ENABLE=0
mkdir -p "$out/nets"
rm -f "$out"/torch_*.log  # a peer run is reused within this run only (bf16 and fp16 share one)
# GoogLeNet's train_val uses batch 32: the bench runs it at 128.
sed 's/batch_size: 32$/batch_size: 128/' "$fix/bvlc_googlenet_train_val.prototxt" > "$out/nets/bvlc_googlenet_b128.prototxt"

# Public model-zoo nets as their authors lay them out (bench/zoo_nets.py: ResNet-101/152 with frozen
# BatchNorm, SqueezeNet v1.1, MobileNet v1's depthwise convolutions, VGG-16), given a loss, batch
# ZOO_BATCH (64): run only when NETS names them.
zb=${ZOO_BATCH:-64}
python3 "$(dirname "$0")/zoo_nets.py" "$out/nets" --batch "$zb"

# name | prototxt | batch | C,H,W | classes
nets=(
  "LeNet|$fix/lenet_train_test.prototxt|64|1,28,28|10"
  "cifar10_quick|$fix/cifar10_quick_train_test.prototxt|100|3,32,32|10"
  "AlexNet|$fix/bvlc_alexnet_train_val.prototxt|256|3,227,227|1000"
  "GoogLeNet|$out/nets/bvlc_googlenet_b128.prototxt|128|3,224,224|1000"
  "ResNet-50|models/resnet50/train_val.prototxt|128|3,224,224|1000"
)
zoo=(
  "ResNet-101|$out/nets/resnet101.prototxt|$zb|3,224,224|1000"
  "ResNet-152|$out/nets/resnet152.prototxt|$zb|3,224,224|1000"
  "SqueezeNet|$out/nets/squeezenet_v1.1.prototxt|$zb|3,224,224|1000"
  "MobileNet|$out/nets/mobilenet_v1.prototxt|$zb|3,224,224|1000"
  "VGG-16|$out/nets/vgg16.prototxt|$zb|3,224,224|1000"
)
if [ -n "${NETS:-}" ]; then
  keep=()
  for n in "${nets[@]}" "${zoo[@]}"; do [[ " $NETS " == *" ${n%%|*} "* ]] && keep+=("$n"); done
  nets=("${keep[@]}")
fi

# The small nets (sub-millisecond iterations) run REPEAT times each way,
# alternating, and the table takes each side's median: the Python peer's
# launch-bound iteration took 1.8 to 3.9 ms for cifar10_quick in fp32 in
# runs of one day on the same H100 (bench/RESULTS.md, session 13).
repeat=${REPEAT:-3}
rows=()
runs=()
# the larger of a running peak (nan: none yet) and a run's peak (empty: none)
peak() { python3 -c 'import sys; a,b=sys.argv[1],sys.argv[2]; print(a if not b else b if a=="nan" else max(float(a), float(b)))' "$1" "$2"; }
ms_of() { sed -n 's/.*Average training iteration (forward, backward, update): \([0-9.e+-]*\) ms.*/\1/p' "$1" | tail -1; }
median() { python3 -c 'import sys,statistics; v=[float(x) for x in sys.argv[1:] if x not in ("","nan")]; print(statistics.median(v) if v else "nan")' "$@"; }
for mode in $modes; do
  # Cortado's flag and the peer's mode for each mode: the 16-bit modes are
  # mixed precision, against PyTorch's AMP in bfloat16 with channels-last
  # (the peer has no float16 mode: fp16 is measured against the same)
  case $mode in
    bf16|fp16) cflag="--precision=$mode" pmode=bf16cl ;;
    *) cflag="--math=$mode" pmode=$mode ;;
  esac
  for entry in "${nets[@]}"; do
    IFS='|' read -r name net batch shape classes <<<"$entry"
    n=1
    [ "$name" = LeNet ] || [ "$name" = cifar10_quick ] && n=$repeat
    cs=() bs=() ps=() c_mem=nan p_mem=nan
    if [ -n "$base" ]; then
      export CORTADO_CUDNN_ALGOS="$out/${name}_${mode}.algos"
      rm -f "$CORTADO_CUDNN_ALGOS"
    fi
    for r in $(seq 1 "$n"); do
      log="$out/cortado_${name}_${mode}.log"
      [ "$r" -gt 1 ] && log="$out/cortado_${name}_${mode}_$r.log"
      "$cortado" time --model="$net" --gpu=0 --dummy_data --dummy_shape="$shape" --update \
        --iterations="$iters" $cflag >"$log" 2>&1
      cs+=("$(ms_of "$log")")
      m=$(sed -n 's/.*Peak GPU memory: \([0-9.]*\) MB.*/\1/p' "$log" | tail -1)
      c_mem=$(peak "$c_mem" "$m")
      if [ -n "$base" ]; then
        blog="${log/cortado_/base_}"
        "$base/cortado" time --model="$net" --gpu=0 --dummy_data --dummy_shape="$shape" --update \
          --iterations="$iters" $cflag >"$blog" 2>&1
        bs+=("$(ms_of "$blog")")
      fi
      # the peer's run for this net and peer mode: one for bf16 and fp16 (both against bf16cl)
      plog="$out/torch_${name}_${pmode}.log"
      [ "$r" -gt 1 ] && plog="$out/torch_${name}_${pmode}_$r.log"
      [ -s "$plog" ] && grep -q '^{' "$plog" && [ "$n" -eq 1 ] ||
        python3 "$peer" "$net" --batch "$batch" --input "$shape" --classes "$classes" --mode "$pmode" \
          --steps "$iters" >"$plog" 2>&1
      json=$(grep '^{' "$plog" | tail -1)
      ps+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ms_iter"])' "$json" 2>/dev/null)")
      m=$(python3 -c 'import json,sys; print(round(json.loads(sys.argv[1])["peak_gib"]*1024,1))' "$json" 2>/dev/null || true)
      p_mem=$(peak "$p_mem" "$m")
    done
    c_ms=$(median "${cs[@]}")
    p_ms=$(median "${ps[@]}")
    b_ms=nan
    [ -n "$base" ] && b_ms=$(median "${bs[@]}")
    [ "$n" -gt 1 ] && runs+=("$name $mode: Cortado ${cs[*]} ms, PyTorch ${ps[*]} ms${base:+, base ${bs[*]} ms} (medians in the table)")
    row=$(python3 - "$name" "$mode" "$batch" "${c_ms:-nan}" "${p_ms:-nan}" "${c_mem:-nan}" "${p_mem:-nan}" "${b_ms:-nan}" "${base:+1}" <<'PY'
import sys, math
name, mode, batch, c, p, cm, pm, bm, has_base = sys.argv[1:]
b = int(batch); c = float(c); p = float(p); bm = float(bm)
ips = lambda ms: b * 1000 / ms if ms == ms and ms > 0 else float('nan')
ci, pi, bi = ips(c), ips(p), ips(bm)
ratio = ci / pi if pi == pi and pi > 0 else float('nan')
row = f"| {name} | {b} | {mode} | {ci:,.0f} | {c:.3f} | {cm} | {pi:,.0f} | {p:.3f} | {pm} | {ratio:.2f}x |"
if has_base:
    bratio = bi / pi if pi == pi and pi > 0 else float('nan')
    row += f" {bi:,.0f} | {bratio:.2f}x | {ci / bi:.3f} |"
print(row)
PY
)
    rows+=("$row")
    echo "$row"
  done
done
{
  if [ -n "$base" ]; then
    echo "| net | batch | mode | Cortado img/s | Cortado ms/iter | Cortado peak MB | PyTorch img/s | PyTorch ms/iter | PyTorch peak MB | ratio | base img/s | base ratio | vs base |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  else
    echo "| net | batch | mode | Cortado img/s | Cortado ms/iter | Cortado peak MB | PyTorch img/s | PyTorch ms/iter | PyTorch peak MB | ratio |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  fi
  printf '%s\n' "${rows[@]}"
  [ ${#runs[@]} -gt 0 ] && { echo; printf -- '- %s\n' "${runs[@]}"; }
} | tee "$out/gpu_vs_pytorch.md"
