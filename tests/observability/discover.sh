#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Finding segments (run by run.sh): swctl ls lists the libsw segments of
# /dev/shm and of given directories by their header — kind, capacity, names
# or keys in use, creator, layout — and nothing else; list, top and dump
# take several segments, globs and --all.
# Usage: tests/observability/discover.sh BUILD_DIR
set -eu
. "$(dirname "$0")/lib.sh"
make -C "$build" -s tests/observability/fixture tests/observability/keyed_fixture >/dev/null
fixture="$build/tests/observability/fixture"
keyed="$build/tests/observability/keyed_fixture"
a="swdisc-a-$$"
b="swdisc-b-$$"
k="swdisc-k-$$"
segs="$a $b $k"
"$fixture" "$a" > /dev/null
"$fixture" "$b" keep 2 > "$work/b.out" &
bpid=$!
pids="$pids $bpid"
wait_line "$work/b.out" ready
"$keyed" "$k" exact > /dev/null
mkdir "$work/dir"
"$fixture" "$work/dir/file-seg" > /dev/null       # a segment at a path
head -c 8192 /dev/urandom > "$work/dir/not-libsw"  # a file that is not one
: > "$work/dir/empty"

echo "--- swctl ls: the segments of /dev/shm, by their header"
"$swctl" ls > "$work/ls.txt"
grep -E "^$a +registry .* 16 +3 [0-9]+ \(gone\) .* current$" "$work/ls.txt" ||
  fail "ls: $a: $(grep "$a" "$work/ls.txt")"
grep -E "^$b +registry .* 18 +5 $bpid .* current$" "$work/ls.txt" ||
  fail "ls: $b (its creator alive): $(grep "$b" "$work/ls.txt")"
grep -E "^$k +keyed .* 1000 +9 " "$work/ls.txt" || fail "ls: $k: $(grep "$k" "$work/ls.txt")"
"$swctl" ls --json | python3 -c '
import json, sys
rows = {r["segment"]: r for r in json.load(sys.stdin)}
a, k = rows[sys.argv[1]], rows[sys.argv[2]]
assert a["kind"] == "registry" and a["capacity"] == 16 and a["in_use"] == 3, a
assert a["layout"] == "current" and a["size"] > 0 and not a["creator_alive"], a
assert k["kind"] == "keyed" and k["in_use"] == 9, k
print("ls --json ok")' "$a" "$k"

echo "--- swctl ls DIR: segments at paths; other files are not listed"
"$swctl" ls "$work/dir" > "$work/ls-dir.txt"
cat "$work/ls-dir.txt"
grep -q "^$work/dir/file-seg " "$work/ls-dir.txt" || fail "ls DIR misses the segment"
grep -q "not-libsw\|empty" "$work/ls-dir.txt" && fail "ls DIR lists a file that is not a segment"
[ "$(wc -l < "$work/ls-dir.txt")" = 2 ] || fail "ls DIR: $(cat "$work/ls-dir.txt")"
"$swctl" ls "$work/nosuch" 2> "$work/err" && fail "ls of a missing directory succeeded"
grep -q "cannot read" "$work/err" || fail "$(cat "$work/err")"

echo "--- list / dump / top: several segments, a glob, --all"
"$swctl" list "$a" "$b" > "$work/two.txt"
grep -q "^$a: 3 of 16 resources" "$work/two.txt" && grep -q "^$b: 5 of 18 resources" "$work/two.txt" ||
  fail "list A B: $(cat "$work/two.txt")"
n=$("$swctl" dump "swdisc-*-$$" | grep -c '"segment"')
[ "$n" = 9 ] || fail "dump of a glob: $n lines with a segment, want 3 + 5 + 1"
"$swctl" list --all --json | python3 -c '
import json, sys
segs = {r["segment"] for r in json.load(sys.stdin)}
assert set(sys.argv[1:]) <= segs, segs
print("list --all ok")' "$a" "$b" "$k"
"$swctl" list "$work/dir/*" | grep -q "^$work/dir/file-seg: 3 of 16" || fail "a glob of paths"
"$swctl" top "$a" "$k" --seconds 1 > "$work/top.txt"
grep -q "$a: 3 of 16" "$work/top.txt" && grep -q "^$k: keyed table" "$work/top.txt" || fail "top A K"
"$swctl" list "swdisc-none-*" 2> "$work/err" && fail "an empty glob succeeded"
grep -q "no libsw segment matches" "$work/err" || fail "$(cat "$work/err")"
"$swctl" list "$a" "nosuch-$$" > /dev/null 2> "$work/err" && fail "a missing segment: exit 0"
grep -q "cannot open segment nosuch" "$work/err" || fail "$(cat "$work/err")"
echo "discovery: ok"
