#!/usr/bin/env bash
# A full disk (here a file size limit, `ulimit -f`, which fails writes the
# same way without root) is an error naming the file, never a torn file:
#  - a snapshot that cannot be written fails the run with the file's name,
#    the snapshot already at that path stays whole, no temporary is left;
#  - a database tool that cannot write leaves no database and no temporary.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_disk_full
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL: $*"; fail=1; }

cat >net.prototxt <<'NET'
name: "full"
layer { name: "data" type: "DummyData" top: "x" top: "y"
  dummy_data_param { shape { dim: 2 dim: 100 } shape { dim: 2 dim: 500 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "p"
  inner_product_param { num_output: 500 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "y" top: "loss" }
NET
printf 'net: "net.prototxt"\nbase_lr: 0.001\nlr_policy: "fixed"\nmax_iter: 2\nsnapshot_prefix: "run"\nsolver_mode: CPU\nrandom_seed: 1\n' >solver.prototxt
# a complete snapshot of iteration 2 (200 KB of weights), kept as it was
"$bin" train --solver=solver.prototxt --log_level=1
cp run_iter_2.caffemodel before.caffemodel
rc=0
out=$(bash -c "ulimit -f 64; exec '$bin' train --solver=solver.prototxt --log_level=1" 2>&1) || rc=$?
last=$(tail -1 <<<"$out")
if [ $rc = 1 ] && [ "$last" = "cortado: error: run_iter_2.caffemodel: write failed: File too large" ]; then
  ok "a snapshot past the limit: $last"
else
  bad "snapshot past the limit: status $rc: $last"
fi
cmp -s before.caffemodel run_iter_2.caffemodel && ok "the snapshot already there is whole" || bad "the old snapshot changed"
[ -z "$(ls | grep '\.tmp\.' || true)" ] && ok "no temporary left" || bad "left: $(ls | grep '\.tmp\.')"

for backend in lmdb leveldb; do
  rc=0
  out=$(bash -c "ulimit -f 100; exec '$bin' make_synthetic_db db_$backend --num=2000 --shape=3,32,32 --backend=$backend --log_level=1" 2>&1) || rc=$?
  last=$(tail -1 <<<"$out")
  if [ $rc = 1 ] && grep -Eq "^cortado: error: db_$backend\.tmp\.[0-9]+\.0: commit of [0-9]+ records failed: " <<<"$last"; then
    ok "$backend: a database past the limit fails: $last"
  else
    bad "$backend: status $rc: $last"
  fi
  [ ! -e db_$backend ] && [ -z "$(ls | grep "^db_$backend" || true)" ] && ok "$backend: no database, no temporary" ||
    bad "$backend: left $(ls | grep "^db_$backend")"
done
exit $fail
