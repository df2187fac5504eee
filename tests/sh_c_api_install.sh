#!/usr/bin/env bash
# The public C API as an embedder uses it: `cmake --install` into a fresh
# prefix, then examples/c_api/lenet_classify.c compiled against the
# installed cortado.h and libcortado through pkg-config alone, and run on
# Caffe's trained LeNet: it must call the drawn one a one.  Also checks that
# the installed header is the one public header (no internal include
# needed) and that its version matches the library's.
# Needs CORTADO_BIN, CORTADO_SRC and CORTADO_FIXTURES (set by ctest).
set -euo pipefail

BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
SRC=${CORTADO_SRC:?CORTADO_SRC is not set}
FIX=${CORTADO_FIXTURES:?CORTADO_FIXTURES is not set}
BUILD=$(dirname "$BIN")
TMP=${CORTADO_TMP:-/tmp}/sh_c_api_install
rm -rf "$TMP"
mkdir -p "$TMP"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

PREFIX=$TMP/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 || {
  cat "$TMP/install.log" >&2
  echo "FAIL: cmake --install" >&2
  exit 1
}
[ -f "$PREFIX/include/cortado.h" ] || fail "cortado.h is not installed at include/cortado.h"

PC_DIR=$(dirname "$(find "$PREFIX" -name cortado.pc | head -n 1)")
[ -n "$PC_DIR" ] || { echo "FAIL: no cortado.pc installed" >&2; exit 1; }
export PKG_CONFIG_PATH=$PC_DIR
cflags=$(pkg-config --cflags cortado)
libs=$(pkg-config --libs cortado)
libdir=$(pkg-config --variable=libdir cortado)
incdir=$(pkg-config --variable=includedir cortado)
[ "$(cd "$incdir" && pwd -P)" = "$(cd "$PREFIX/include" && pwd -P)" ] ||
  fail "pkg-config's includedir $incdir is not $PREFIX/include"

# Sanitized builds install a sanitized library: the program links the runtime too.
san=()
if [ "${CORTADO_SANITIZED:-0}" = 1 ]; then san=(-fsanitize=address,undefined); fi
# The example sees only the installed prefix: not the source tree's headers.
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "${san[@]}" "$SRC/examples/c_api/lenet_classify.c" $cflags $libs \
  -Wl,-rpath,"$libdir" -o "$TMP/lenet_classify" 2>"$TMP/cc.log" || {
  cat "$TMP/cc.log" >&2
  echo "FAIL: the example does not build against the installed library" >&2
  exit 1
}
# C++ embedders include the same header.
printf '#include <cortado.h>\nint main() { return cortado_api_version() == CORTADO_API_VERSION ? 0 : 1; }\n' \
  >"$TMP/embed.cc"
# shellcheck disable=SC2086
c++ -Wall -Werror "${san[@]}" "$TMP/embed.cc" $cflags $libs -Wl,-rpath,"$libdir" -o "$TMP/embed" \
  2>"$TMP/cxx.log" && "$TMP/embed" || { cat "$TMP/cxx.log" >&2; fail "cortado.h from C++"; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=1
out=$("$TMP/lenet_classify" "$FIX/lenet.prototxt" "$FIX/lenet_iter_10000.caffemodel" 2>"$TMP/run.err") || {
  cat "$TMP/run.err" >&2
  fail "lenet_classify exited with an error"
}
want_version=$(sed -n 's/^#define CORTADO_VERSION "\(.*\)"$/\1/p' "$SRC/include/cortado.h")
grep -qxF "cortado $want_version (API 1)" <<<"$out" || fail "version line: $out"
grep -qE "^output 'prob': class 1, probability (0\.9[5-9][0-9]|1\.000)$" <<<"$out" ||
  fail "the drawn one is not a confident class 1: $out"
grep -qxF "conv1 weights 20x1x5x5" <<<"$out" || fail "conv1's shape: $out"

# A missing weights file is an error with the file's name, exit status 1.
set +e
"$TMP/lenet_classify" "$FIX/lenet.prototxt" "$TMP/missing.caffemodel" >/dev/null 2>"$TMP/err2"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "a missing weights file: exit status $rc, expected 1"
grep -qF "missing.caffemodel" "$TMP/err2" || fail "the error does not name the file: $(cat "$TMP/err2")"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "sh_c_api_install: passed"
