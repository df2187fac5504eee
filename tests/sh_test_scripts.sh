#!/usr/bin/env bash
# The shell tests themselves: under `set -o pipefail`, `PRODUCER | grep -q`
# is a race.  grep -q exits at its first match; a producer still writing then
# dies of SIGPIPE, and pipefail turns the pipeline's status into 141: the
# test reads "no match" where there was one (CI's ASan run failed twice so,
# in sh_mpi_dp_kill and sh_ps_faults_gloo).  A grep after a pipe reads all of
# its input (`grep PATTERN >/dev/null`) or reads files itself.
set -euo pipefail
root=${CORTADO_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
bad=0
while IFS= read -r f; do
  grep -q "pipefail" "$f" || continue
  # a `|` (not `||`) followed by a grep whose options hold q
  if hits=$(grep -nE '^[[:space:]]*[^#[:space:]].*([^|])\|[[:space:]]*grep[[:space:]]+(-[[:alpha:]]*q|--quiet|--silent)' "$f"); then
    echo "FAIL: $f: grep -q reads a pipe under pipefail:" >&2
    echo "$hits" >&2
    bad=1
  fi
done < <(find "$root/tests" "$root/scripts" "$root/bench" "$root/.ci" -name '*.sh' -o -name run -path '*/.ci/*')
[ $bad = 0 ] || exit 1
echo "PASS: no grep -q reads a pipe in a pipefail script"
