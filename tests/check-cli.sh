#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# swctl's conventions and the manual pages (part of make check):
# --help / --version / help COMMAND / COMMAND --help exit 0 on stdout,
# usage errors exit 2 and runtime errors 1 on stderr, and `man -l` renders
# swctl(1) and libsw(3) without a warning, swctl(1) naming every command.
# Environment: SWCTL (the built swctl), SW_SRCDIR (the source tree).
set -u
swctl=${SWCTL:?}
src=${SW_SRCDIR:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
expect() { # STATUS COMMAND...: the exit status of the command
  want=$1
  shift
  "$@" > "$work/out" 2> "$work/err"
  got=$?
  [ "$got" = "$want" ] || fail "$*: exit $got, want $want: $(cat "$work/err")"
}

expect 0 "$swctl" --help
grep -q "^usage: swctl COMMAND" "$work/out" || fail "--help prints no usage on stdout"
[ -s "$work/err" ] && fail "--help wrote to stderr"
expect 0 "$swctl" -h
expect 0 "$swctl" help
expect 0 "$swctl" --version
grep -q "^swctl (libsw) [0-9]" "$work/out" || fail "--version: $(cat "$work/out")"
commands=$("$swctl" --help | sed -n 's/^  swctl \([a-z]*\).*/\1/p')
[ -n "$commands" ] || fail "--help lists no command"
for c in $commands; do
  expect 0 "$swctl" "$c" --help
  grep -q "^usage: swctl $c" "$work/out" || fail "$c --help: $(cat "$work/out")"
  expect 0 "$swctl" help "$c"
done
expect 2 "$swctl"
expect 2 "$swctl" nosuch
grep -q "no such command" "$work/err" || fail "nosuch: $(cat "$work/err")"
expect 2 "$swctl" list
expect 2 "$swctl" list x --nosuch
grep -q "not an option of swctl list" "$work/err" || fail "--nosuch: $(cat "$work/err")"
expect 2 "$swctl" list x --top many
expect 2 "$swctl" log x
expect 2 "$swctl" rules frob x
grep -q "rules frob: want get, apply or check" "$work/err" || fail "rules frob: $(cat "$work/err")"
expect 2 "$swctl" rules apply x
printf '[{"resource": "a", "count": -1}]' > "$work/bad.json"
expect 3 "$swctl" rules check "$work/bad.json"
grep -q 'rule 1 (resource "a"): count' "$work/err" || fail "rules check: $(cat "$work/err")"
expect 1 "$swctl" list "nosuch-$$"
grep -q "cannot open segment" "$work/err" || fail "missing segment: $(cat "$work/err")"

if command -v man >/dev/null 2>&1; then
  for page in swctl.1 libsw.3; do
    MANWIDTH=80 man -l --warnings -P cat "$src/man/$page" > "$work/page" 2> "$work/warn" ||
      fail "man -l $page failed"
    [ -s "$work/warn" ] && fail "man -l $page warns: $(cat "$work/warn")"
    grep -q "^NAME" "$work/page" || fail "$page renders no NAME section"
  done
  for c in $commands; do
    MANWIDTH=80 man -l -P cat "$src/man/swctl.1" 2>/dev/null | grep -q "^ *swctl $c" ||
      fail "swctl(1) has no synopsis for $c"
  done
  MANWIDTH=80 man -l -P cat "$src/man/swctl.1" 2>/dev/null | grep -q "EXIT STATUS" ||
    fail "swctl(1) has no EXIT STATUS"
else
  echo "man is missing (Debian's man-db): the pages were not rendered" >&2
  fails=$((fails + 1))
fi
[ "$fails" = 0 ] || exit 1
echo "swctl's conventions and the manual pages: ok"
