# Sourced by the shell tests: ct_gpu_count prints how many CUDA devices the
# CUDA runtime shows this process (CUDA_VISIBLE_DEVICES respected), counted
# from `cortado device_query`'s "Device id:" lines: 0 without a GPU, without
# a driver, or in a build without CUDA.  Needs CORTADO_BIN.
ct_gpu_count() {
  local n
  n=$("${CORTADO_BIN:?CORTADO_BIN is not set}" device_query --gpu=all --log_level=0 2>&1 |
      grep -c 'Device id:' || true)
  echo "${n:-0}"
}
