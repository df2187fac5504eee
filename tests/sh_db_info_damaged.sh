#!/usr/bin/env bash
# `cortado db_info` says when a database is damaged, and training on it is an
# error naming it (status 1), not a signal or a run on a third of the data:
# a LevelDB whose write-ahead log was cut (10,000 records read as 3,000
# before, with no word) and an LMDB whose data.mdb was cut (SIGBUS before).
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_db_info_damaged
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
fail=0
expect() { # description, wanted last line, command...
  local what=$1 want=$2 rc=0 out
  shift 2
  out=$("$@" 2>&1) || rc=$?
  if [ $rc = 1 ] && grep -qE -- "$want" <<<"$(tail -1 <<<"$out")"; then
    echo "ok   $what: $(tail -1 <<<"$out")"
  else
    echo "FAIL $what: status $rc: $(tail -1 <<<"$out")"; fail=1
  fi
}
"$bin" make_synthetic_db ldb --num=10000 --shape=1,8,8 --backend=leveldb --log_level=1
log=$(ls ldb/*.log)
truncate -s $(($(stat -c %s "$log") / 3)) "$log"
expect "db_info, LevelDB with its log cut" \
  "^cortado: error: ldb: cannot open LevelDB for reading: the database is damaged: its write-ahead log [0-9]+\.log is cut inside a write \([0-9]+ of [0-9]+ bytes whole\); LevelDB would drop the records from byte [0-9]+ on without a word$" \
  "$bin" db_info ldb --backend=leveldb
"$bin" make_synthetic_db mdb --num=200 --shape=3,32,32 --log_level=1
truncate -s 100000 mdb/data.mdb
expect "db_info, LMDB with data.mdb cut" \
  "^cortado: error: mdb: cannot open LMDB for reading: data.mdb is truncated: 100000 bytes, but its last page \([0-9]+, of 4096 bytes\) ends at [0-9]+ bytes$" \
  "$bin" db_info mdb
cat >net.prototxt <<'NET'
name: "d"
layer { name: "data" type: "Data" top: "x" top: "y" data_param { source: "mdb" batch_size: 4 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "p" inner_product_param { num_output: 10 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "p" bottom: "y" top: "loss" }
NET
printf 'net: "net.prototxt"\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 2\nsolver_mode: CPU\n' >solver.prototxt
expect "train on the cut LMDB" "^cortado: error: .*mdb: cannot open LMDB for reading: data.mdb is truncated: " \
  "$bin" train --solver=solver.prototxt
exit $fail
