#!/usr/bin/env bash
# Interrupted work leaves nothing that looks finished: convert_mnist_data
# killed with SIGKILL half way through (its images come through a FIFO that
# the test stops feeding, so the kill lands after a committed batch, without
# any timing) leaves no database at the output path, only a temporary that
# the next conversion removes before it writes the whole database.
set -euo pipefail
bin=$CORTADO_BIN
dir=$CORTADO_TMP/sh_interrupted_writes
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL: $*"; fail=1; }

n=3000
be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }
{ be32 2051; be32 $n; be32 28; be32 28; } > images.head
{ be32 2049; be32 $n; } > labels.idx
head -c $((n * 784)) /dev/urandom > images.body
head -c $n /dev/zero >> labels.idx
cat images.head images.body > images.idx

for backend in lmdb leveldb; do
  db=mnist_$backend
  rm -f images.fifo && mkfifo images.fifo
  "$bin" convert_mnist_data images.fifo labels.idx "$db" --backend=$backend > convert1_$backend.log 2>&1 &
  pid=$!
  exec 3> images.fifo
  # 1500 of 3000 images: the writes return once the converter has taken all
  # but a pipe buffer (64 KiB, 84 images) of them, so it has passed record
  # 1000 and committed the first batch
  cat images.head >&3
  head -c $((1500 * 784)) images.body >&3
  kill -KILL $pid
  wait $pid 2>/dev/null || true
  exec 3>&-
  if [ -e "$db" ]; then
    bad "$backend: a killed conversion left $db: $("$bin" db_info "$db" --backend=$backend 2>&1 | grep -m1 records || true)"
  else
    ok "$backend: a killed conversion leaves no $db"
  fi
  left=$(ls -d "$db".tmp.$pid.* 2>/dev/null | wc -l)
  [ "$left" = 1 ] && ok "$backend: its work is under $db.tmp.$pid.*" || bad "$backend: no temporary of pid $pid: $(ls)"

  "$bin" convert_mnist_data images.idx labels.idx "$db" --backend=$backend > convert2_$backend.log 2>&1
  if grep -q "Removing $db.tmp.$pid.0, left unfinished by process $pid, which no longer runs" convert2_$backend.log; then
    ok "$backend: the next conversion removed the dead one's temporary"
  else
    bad "$backend: no removal line in:"; cat convert2_$backend.log
  fi
  [ -z "$(ls -d "$db".tmp.* 2>/dev/null)" ] && ok "$backend: no temporaries left" || bad "$backend: left $(ls -d "$db".tmp.*)"
  if "$bin" db_info "$db" --backend=$backend 2>&1 | grep -x "records: $n" >/dev/null; then
    ok "$backend: the finished database has all $n records"
  else
    bad "$backend: db_info says:"; "$bin" db_info "$db" --backend=$backend 2>&1 | head -5
  fi
  out=$("$bin" convert_mnist_data images.idx labels.idx "$db" --backend=$backend --log_level=1 2>&1) && bad "overwrote $db" ||
    [ "$out" = "cortado: error: $db: cannot create $( [ $backend = lmdb ] && echo LMDB || echo LevelDB): the path already exists" ] &&
    ok "$backend: an existing database is refused" || bad "$backend: $out"
done
exit $fail
