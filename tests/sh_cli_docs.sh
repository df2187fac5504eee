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

if [ "$failures" -ne 0 ]; then
  echo "sh_cli_docs: $failures check(s) failed" >&2
  exit 1
fi
echo "sh_cli_docs: README.md and docs/cli.md match the flag tables"
