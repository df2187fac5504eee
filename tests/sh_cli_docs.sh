#!/usr/bin/env bash
# The command reference in README.md and docs/cli.md is written by hand from
# the flag tables; this fails when a command or a flag is missing from either,
# or when a documented flag no longer exists.
# Needs CORTADO_BIN and CORTADO_SRC (set by ctest).
set -euo pipefail

BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
SRC=${CORTADO_SRC:?CORTADO_SRC is not set}
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# section FILE HEADING: the lines under the '### HEADING' heading, up to the next heading.
section() {
  awk -v h="### $2" '$0 == h {on = 1; next} /^#/ {on = 0} on' "$1"
}

# flags_of COMMAND: the names of a command's own flags, from its help.
flags_of() {
  "$BIN" help "$1" | awk '/^flags:/ {on = 1; next} /^global flags:/ {on = 0} on' |
    grep -oE '^  --[a-z0-9_]+' | sed 's/^  //' || true
}

commands=$("$BIN" --help | awk '/^commands:/ {on = 1; next} /^$/ {on = 0} on {print $1}')
[ -n "$commands" ] || fail "cortado --help listed no commands"

for doc in README.md docs/cli.md; do
  path="$SRC/$doc"
  [ -f "$path" ] || { fail "$doc is missing"; continue; }
  for cmd in $commands; do
    text=$(section "$path" "\`cortado $cmd\`")
    if [ -z "$text" ]; then
      fail "$doc has no section '### \`cortado $cmd\`'"
      continue
    fi
    wanted=$(flags_of "$cmd")
    for flag in $wanted; do
      grep -qE -- "$flag([^a-z0-9_]|$)" <<<"$text" || fail "$doc: 'cortado $cmd' does not document $flag"
    done
    # Every flag the section names must exist (global flags may be mentioned anywhere).
    for flag in $(grep -oE -- '`--[a-z0-9_]+' <<<"$text" | sed 's/^`//' | sort -u); do
      grep -qxF -- "$flag" <<<"$wanted" && continue
      case "$flag" in --log_level | --log_file | --help) continue ;; esac
      fail "$doc: 'cortado $cmd' documents $flag, which it does not have"
    done
  done
  for flag in --log_level --log_file --help; do
    grep -qF -- "\`$flag" "$path" || fail "$doc does not document the global flag $flag"
  done
done

# The README's CORTADO_* rows are the settings table's (core/settings.c), as
# `cortado help environment` prints them, in the same order.
want=$("$BIN" help environment | awk '/^Set by Cortado/ {stop = 1} !stop && /^\| `CORTADO_/')
have=$(grep -E '^\| `CORTADO_' "$SRC/README.md" || true)
[ -n "$want" ] || fail "cortado help environment printed no CORTADO_ rows"
if [ "$want" != "$have" ]; then
  fail "README.md's environment table differs from 'cortado help environment':"
  diff <(echo "$want") <(echo "$have") >&2 || true
fi

# An unknown CORTADO_* name is warned about with the nearest known one; known
# ones (the harness's own, set by ctest) are not.
out=$(CORTADO_FUZE=0 "$BIN" help 2>&1 >/dev/null)
grep -qF "unknown environment variable CORTADO_FUZE=0 ignored (did you mean CORTADO_FUSE?)" <<<"$out" ||
  fail "no warning for CORTADO_FUZE: $out"
out=$(CORTADO_FUSE=0 "$BIN" help 2>&1 >/dev/null)
[ -z "$out" ] || fail "a known variable was warned about: $out"
# A bad value of a known one is warned about and the default kept.
out=$(CORTADO_COMM_TIMEOUT=soon "$BIN" help train 2>&1)
grep -qF "CORTADO_COMM_TIMEOUT=soon: expected a valid value; using the default (300)" <<<"$out" ||
  fail "no warning for a bad CORTADO_COMM_TIMEOUT: $out"
# The variable is --comm_timeout's default; the option given wins.
out=$(CORTADO_COMM_TIMEOUT=42 "$BIN" help train)
grep -qF -- '--comm_timeout=NUMBER    (double, default 42)' <<<"$out" ||
  fail "CORTADO_COMM_TIMEOUT=42 is not --comm_timeout's default"

if [ "$failures" -ne 0 ]; then
  echo "sh_cli_docs: $failures check(s) failed" >&2
  exit 1
fi
echo "sh_cli_docs: README.md and docs/cli.md match the flag tables"
