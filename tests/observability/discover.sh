#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Finding segments (run by run.sh): swctl ls lists the libsw segments of
# /dev/shm and of given directories by their header — kind, size, the free
# space of its file system, capacity, names or keys in use, creator, layout
# — and nothing else; list, top and dump
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

echo "--- swctl ls: each segment's size, the bytes it holds, its file system's free space"
head -1 "$work/ls.txt" | grep -q " SIZE FS_FREE " || fail "ls: no FS_FREE column: $(head -1 "$work/ls.txt")"
grep -E "^$a +registry +[0-9.]+M +[0-9.]+[MG] " "$work/ls.txt" ||
  fail "ls: $a's size (reserved: no *) and free space: $(grep "$a" "$work/ls.txt")"
"$swctl" ls --json | python3 -c '
import json, os, sys
rows = {r["segment"]: r for r in json.load(sys.stdin)}
vfs = os.statvfs("/dev/shm")
for name in sys.argv[1:]:
    r = rows[name]
    assert r["allocated"] >= r["size"] > 0, r            # reserved whole at creation
    assert r["fs_size"] == vfs.f_blocks * vfs.f_frsize, r  # /dev/shm
    assert 0 <= r["fs_free"] <= r["fs_size"], r
print("ls --json: size, allocated, fs_free, fs_size ok")' "$a" "$k"
if [ "$(id -u)" = 0 ]; then # a tmpfs of its own (a private mount namespace): the free space exactly
  mkdir "$work/small"
  unshare -m sh -c "mount -t tmpfs -o size=8m tmpfs '$work/small' && '$fixture' '$work/small/seg' &&
    '$swctl' ls '$work/small' > '$work/small.txt' && '$swctl' ls '$work/small' --json > '$work/small.json'" \
    > /dev/null || fail "ls of a segment on an 8 MiB tmpfs"
  python3 - "$work/small.txt" "$work/small.json" <<'PY'
import json, sys
text, (row,) = open(sys.argv[1]).read().splitlines(), json.load(open(sys.argv[2]))
pages = (row["size"] + 4095) // 4096 * 4096
assert row["allocated"] == pages and row["fs_size"] == 8 << 20, row
assert row["fs_free"] == (8 << 20) - pages, row
free, size = "%.1fM" % (row["fs_free"] / 2**20), "%.1fM" % (row["size"] / 2**20)
assert text[1].split()[2:4] == [size, free], (text, size, free)
print("ls on an 8 MiB tmpfs:", text[1].split()[2:4], "free", row["fs_free"])
PY
fi

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
