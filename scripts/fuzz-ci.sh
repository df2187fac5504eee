#!/usr/bin/env bash
# Builds the libFuzzer harnesses (`make fuzz`: clang, ASan + UBSan, in
# build-fuzz/) and runs each one for SECONDS (default 60) on a scratch copy
# of its seed corpus under fuzz/corpus/, so the checked-in corpus never
# changes.  Any crash, leak, timeout or sanitizer report fails the script;
# the input that triggered it is saved as fuzz/crash-* (or leak-*, timeout-*)
# for replaying with `build-fuzz/fuzz/HARNESS FILE`.
#
# Usage: scripts/fuzz-ci.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-60}
case $secs in
  '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

make fuzz JOBS="${JOBS:-$(nproc)}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# harness  corpus  extra libFuzzer options
harnesses=(
  "fuzz_text_net text -dict=fuzz/text.dict -max_len=8192"
  "fuzz_binary_net binary -max_len=4096"
  "fuzz_datum datum -max_len=65536"
  "fuzz_solverstate solverstate -max_len=16384"
  "fuzz_db_records dbrecords -max_len=65536"
)

failed=()
for entry in "${harnesses[@]}"; do
  read -r name corpus extra <<<"$entry"
  mkdir -p "$work/$name"
  cp fuzz/corpus/"$corpus"/* "$work/$name"/
  echo "==== $name: ${secs} s on a copy of fuzz/corpus/$corpus"
  # shellcheck disable=SC2086  # extra holds several options
  if ! build-fuzz/fuzz/"$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix=fuzz/ $extra "$work/$name"; then
    failed+=("$name")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found problems in: ${failed[*]} (reproducers: fuzz/crash-*, fuzz/leak-*, fuzz/timeout-*)" >&2
  exit 1
fi
echo "fuzzing: no findings in ${#harnesses[@]} harnesses, ${secs} s each"
