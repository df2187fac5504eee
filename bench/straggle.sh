#!/usr/bin/env bash
# Slows process PID to a share of its speed from outside, so that no code
# path of it knows: SIGSTOP and SIGCONT in a cycle of PERIOD seconds, run
# for SHARE of it (default 0.5: half speed), until PID ends.
#   bench/straggle.sh PID [PERIOD [SHARE]]
set -u
pid=$1 period=${2:-0.2} share=${3:-0.5}
run=$(awk -v p="$period" -v s="$share" 'BEGIN { printf "%.4f", p * s }')
stop=$(awk -v p="$period" -v s="$share" 'BEGIN { printf "%.4f", p * (1 - s) }')
trap 'kill -CONT "$pid" 2>/dev/null; exit 0' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  sleep "$run"
  kill -STOP "$pid" 2>/dev/null || break
  sleep "$stop"
  kill -CONT "$pid" 2>/dev/null || break
done
