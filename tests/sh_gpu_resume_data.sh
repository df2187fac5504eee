#!/usr/bin/env bash
# sh_resume_data.sh on GPU 0 and, with two GPUs, on GPUs 0 and 1 (worker
# processes): a resumed run equals an uninterrupted one byte for byte also
# when the data layer's next batch is staged on the device ahead of its
# iteration.  Skips (77) without a GPU.
set -euo pipefail
here=$(dirname "$0")
source "$here/gpu_count.sh"
ngpu=$(ct_gpu_count)
[ "$ngpu" -ge 1 ] || { echo "no GPU: skipped"; exit 77; }
RESUME_DEVICE=gpu bash "$here/sh_resume_data.sh"
if [ "$ngpu" -ge 2 ]; then RESUME_DEVICE=gpu2 bash "$here/sh_resume_data.sh"; fi
