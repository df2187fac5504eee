# Sourced by the parameter-server benchmarks (ps_accuracy.sh,
# ps_stragglers.sh): the mpirun ranks and `cortado train` flags of a
# data-parallel mode written as allreduce, ssp:S, async or bmuf:PERIOD.
#   ps_mode_flags MODE WORKERS SERVERS   prints "RANKS FLAGS..."
ps_mode_flags() {
  local mode=$1 w=$2 k=$3
  case $mode in
    allreduce) echo "$w" ;;
    ssp:*) echo "$((w + k)) --dp_mode=ssp --staleness=${mode#ssp:} --num_servers=$k" ;;
    async) echo "$((w + k)) --dp_mode=async --num_servers=$k" ;;
    bmuf:*) echo "$((w + k)) --dp_mode=bmuf --bmuf_sync_period=${mode#bmuf:} --num_servers=$k" ;;
    *) echo "unknown mode $mode (allreduce, ssp:S, async, bmuf:PERIOD)" >&2; return 2 ;;
  esac
}
