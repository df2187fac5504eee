#!/usr/bin/env bash
# The data tool commands as a user runs them: convert_mnist_data (plain and
# gzipped idx files made here), convert_cifar_data (Caffe's positional
# DB_TYPE), compute_image_mean's log and file, db_info's report,
# make_synthetic_db, and the errors and exit statuses of each.
# Needs CORTADO_BIN (set by ctest); scratch files go under CORTADO_TMP.
set -euo pipefail

BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
TMP=${CORTADO_TMP:-/tmp}/sh_tools_cli
rm -rf "$TMP"
mkdir -p "$TMP"
failures=0

# run ARGS...: runs cortado; $rc, $out (stdout) and $err (stderr).
run() {
  set +e
  out=$("$BIN" "$@" 2>"$TMP/stderr")
  rc=$?
  set -e
  err=$(cat "$TMP/stderr")
}
fail() {
  echo "FAIL: $*" >&2
  echo "  stdout: ${out:-}" | head -n 20 >&2
  echo "  stderr: ${err:-}" | head -n 20 >&2
  failures=$((failures + 1))
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "$2: exit status $rc, expected $1"; }
expect_out() { grep -qxF -- "$1" <<<"$out" || fail "$2: stdout lacks the line '$1'"; }
expect_err() { grep -qF -- "$1" <<<"$err" || fail "$2: stderr lacks '$1'"; }

# --- the commands are listed
run --help
for c in convert_mnist_data convert_cifar_data convert_imageset compute_image_mean db_info \
  make_synthetic_db; do
  grep -qE "^  $c " <<<"$out" || fail "cortado --help does not list $c"
done

# --- MNIST idx files: 2 images of 2x2 pixels, labels 3 and 7
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\x0a\x14\x1e\x0a\x14\x1e\x28' \
  >"$TMP/images"
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x03\x07' >"$TMP/labels"
gzip -c "$TMP/images" >"$TMP/images.gz"
gzip -c "$TMP/labels" >"$TMP/labels.gz"

run convert_mnist_data "$TMP/images.gz" "$TMP/labels.gz" "$TMP/mnist_lmdb"
expect_rc 0 "convert_mnist_data (gzipped)"
expect_err "Processed 2 files." "convert_mnist_data logs its progress"
run db_info "$TMP/mnist_lmdb"
expect_rc 0 "db_info"
expect_out "db: $TMP/mnist_lmdb (lmdb)" "db_info"
expect_out "records: 2" "db_info"
expect_out "keys: 00000000, 00000001" "db_info"
expect_out "storage: raw 2" "db_info"
expect_out "shape (CxHxW): 1x2x2 2" "db_info"
expect_out "labels: 2 distinct, 3..7" "db_info"
expect_out "  3: 1" "db_info"
expect_out "  7: 1" "db_info"

run convert_mnist_data "$TMP/images" "$TMP/labels" "$TMP/mnist_leveldb" --backend=leveldb
expect_rc 0 "convert_mnist_data --backend=leveldb"
run db_info "$TMP/mnist_leveldb"
expect_out "db: $TMP/mnist_leveldb (leveldb)" "db_info finds a LevelDB by itself"
expect_out "records: 2" "db_info on LevelDB"
# folders that hold no database: what is there instead
mkdir -p "$TMP/notadb" "$TMP/emptydir"
echo x >"$TMP/notadb/readme.txt"
run db_info "$TMP/notadb"
expect_rc 1 "db_info on a folder of other files"
expect_err "cortado: error: $TMP/notadb: cannot open LMDB for reading: a folder, but not an LMDB database (no data.mdb in it)" \
  "db_info on a folder of other files"
run db_info "$TMP/emptydir"
expect_err "cortado: error: $TMP/emptydir: cannot open LMDB for reading: a folder, but not an LMDB database (no data.mdb in it); the folder is empty" \
  "db_info on an empty folder"
run db_info "$TMP/mnist_leveldb" --backend=lmdb
expect_err "cortado: error: $TMP/mnist_leveldb: cannot open LMDB for reading: a folder, but not an LMDB database (no data.mdb in it); it holds a LevelDB database: give --backend=leveldb" \
  "db_info --backend=lmdb on a LevelDB"
run db_info "$TMP/mnist_lmdb" --backend=leveldb
expect_err "cortado: error: $TMP/mnist_lmdb: cannot open LevelDB for reading: a folder, but not a LevelDB database (no CURRENT in it); it holds an LMDB database: give --backend=lmdb" \
  "db_info --backend=leveldb on an LMDB"

run convert_mnist_data "$TMP/labels" "$TMP/images" "$TMP/swapped"
expect_rc 1 "convert_mnist_data with swapped files"
expect_err "cortado: error: $TMP/labels: not an idx image file: magic number 0x00000801" \
  "convert_mnist_data with swapped files"
expect_err "are the arguments swapped?" "convert_mnist_data with swapped files"
[ ! -e "$TMP/swapped" ] || fail "a failed convert_mnist_data left $TMP/swapped"

run convert_mnist_data "$TMP/images" "$TMP/labels" "$TMP/mnist_lmdb"
expect_rc 1 "convert_mnist_data over an existing database"
expect_err "$TMP/mnist_lmdb" "convert_mnist_data over an existing database"

run convert_mnist_data "$TMP/images" "$TMP/labels" "$TMP/x" --backend=lmbd
expect_rc 2 "convert_mnist_data --backend=lmbd"
expect_err "(did you mean 'lmdb'?)" "convert_mnist_data --backend=lmbd"

run convert_mnist_data "$TMP/images" "$TMP/labels"
expect_rc 2 "convert_mnist_data with two arguments"

# --- compute_image_mean: per-pixel means 5, 15, 25, 35; channel mean 20
run compute_image_mean "$TMP/mnist_lmdb" "$TMP/mean.binaryproto"
expect_rc 0 "compute_image_mean"
expect_err "Number of channels: 1" "compute_image_mean"
expect_err "mean_value channel [0]: 20" "compute_image_mean"
# num, channels, height, width (8 bytes), then the packed data (2 + 16 bytes).
want=$(printf '\x08\x01\x10\x01\x18\x02\x20\x02\x2a\x10' | od -An -tx1 | tr -d ' \n')
want+=$(printf '\x00\x00\xa0\x40\x00\x00\x70\x41\x00\x00\xc8\x41\x00\x00\x0c\x42' | od -An -tx1 |
  tr -d ' \n')
got=$({ od -An -tx1 "$TMP/mean.binaryproto" 2>/dev/null || true; } | tr -d ' \n')
[ "$got" = "$want" ] || fail "mean.binaryproto is $got, expected $want"

run compute_image_mean "$TMP/mnist_leveldb"
expect_rc 0 "compute_image_mean on a LevelDB without --backend"
expect_err "mean_value channel [0]: 20" "compute_image_mean on a LevelDB"

run compute_image_mean "$TMP/nothing"
expect_rc 1 "compute_image_mean on a missing database"
expect_err "cortado: error: $TMP/nothing" "compute_image_mean on a missing database"

# --- CIFAR-10: six one-record batches, Caffe's positional DB_TYPE
mkdir -p "$TMP/cifar" "$TMP/cifar_out"
for f in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
  { printf '\x04'; head -c 3072 /dev/zero; } >"$TMP/cifar/$f.bin"
done
run convert_cifar_data "$TMP/cifar" "$TMP/cifar_out" leveldb
expect_rc 0 "convert_cifar_data IN OUT leveldb"
run db_info "$TMP/cifar_out/cifar10_train_leveldb"
expect_out "records: 5" "convert_cifar_data training database"
expect_out "keys: 00000, 00001, 00002, ..., 00004" "convert_cifar_data keys"
expect_out "shape (CxHxW): 3x32x32 5" "convert_cifar_data shapes"
expect_out "  4: 5" "convert_cifar_data labels"
run db_info "$TMP/cifar_out/cifar10_test_leveldb"
expect_out "records: 1" "convert_cifar_data test database"
run convert_cifar_data "$TMP/cifar" "$TMP/cifar_out" leveldb --backend=lmdb
expect_rc 2 "convert_cifar_data with a DB_TYPE contradicting --backend"
expect_err "DB_TYPE 'leveldb' contradicts --backend=lmdb" "convert_cifar_data DB_TYPE"

# --- make_synthetic_db
run make_synthetic_db "$TMP/syn" --num=30 --shape=1,8,8 --labels=3 --encode_type=png --seed=5
expect_rc 0 "make_synthetic_db"
run db_info "$TMP/syn" --max_labels=1
expect_out "records: 30" "make_synthetic_db count"
expect_out "storage: png 30" "make_synthetic_db storage"
expect_out "shape (CxHxW): 1x8x8 30" "make_synthetic_db shape"
expect_out "labels: 3 distinct, 0..2" "make_synthetic_db labels"
expect_out "  ... (2 more labels)" "db_info --max_labels"
run make_synthetic_db "$TMP/syn2" --shape=3,0,8
expect_rc 2 "make_synthetic_db --shape=3,0,8"
expect_err "bad shape '3,0,8' for --shape (expected C,H,W with positive integers)" \
  "make_synthetic_db --shape=3,0,8"
run make_synthetic_db "$TMP/syn2" --shape=4,8,8 --encode_type=jpg
expect_rc 1 "make_synthetic_db of 4-channel JPEGs"
expect_err "jpg images have 1 or 3 channels, not 4" "make_synthetic_db of 4-channel JPEGs"

if [ "$failures" -ne 0 ]; then
  echo "sh_tools_cli: $failures check(s) failed" >&2
  exit 1
fi
echo "sh_tools_cli: all checks passed"
