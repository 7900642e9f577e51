#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Observability, end to end: swctl serve on a segment with known traffic
# (fixture.c). Checks /metrics with promtool and by value, Sentinel's metric
# log (values, rolling), the dashboard in headless Chromium (the numbers it
# shows, and a screenshot), dry-run visible everywhere, and bad input (bad
# listen address, unreadable segment, a full disk for the log) — with the
# limiter working throughout; then finding segments (discover.sh), one
# exporter for several segments (export.sh), rules as data (rules.sh),
# keyed tables (keyed.sh) and circuit breakers (breaker.sh).
# Usage: tests/observability/run.sh BUILD_DIR
set -eu
. "$(dirname "$0")/lib.sh"
make -C "$build" -s tests/observability/fixture >/dev/null
fixture="$build/tests/observability/fixture"
seg="swobs-$$"
big="swobs-big-$$"
segs="$seg $big"

"$fixture" "$seg" keep > "$work/fixture.out" &
pids="$pids $!"
wait_line "$work/fixture.out" ready

p=$(port)
"$swctl" serve "$seg" --listen "127.0.0.1:$p" --seconds 60 --log-dir "$work" --app obs \
  2> "$work/serve.err" &
pids="$pids $!"
wait_http "http://127.0.0.1:$p/metrics"
sleep 1.2 # one poll after the start

echo "--- /metrics passes promtool and holds the segment's numbers"
curl -fs "http://127.0.0.1:$p/metrics" > "$work/metrics.txt"
promtool check metrics < "$work/metrics.txt" || fail "promtool rejected /metrics"
val() { grep "^$1{segment=\"$seg\",resource=\"$2\"}" "$work/metrics.txt" | awk '{print $2}'; }
[ "$(val libsw_block_total api)" = 2 ] || fail "block_total api: $(val libsw_block_total api)"
[ "$(val libsw_exception_total api)" = 3 ] || fail "exception_total api"
[ "$(val libsw_would_block_total shadow)" = 3 ] || fail "would_block_total shadow"
[ "$(val libsw_dry_run shadow)" = 1 ] || fail "dry_run shadow"
[ "$(val libsw_threshold api)" = 10 ] || fail "threshold api"
[ "$(val libsw_pass_total api)" = 10 ] || fail "pass_total api: $(val libsw_pass_total api)"

echo "--- the metric log has Sentinel's lines"
log="$work/obs-metrics.log"
[ -s "$log" ] || fail "no metric log"
grep -q "|api|10|2|10|3|20|0|" "$log" || fail "no api line 10 pass 2 block 10 ok 3 err rt 20: $(cat "$log")"
grep -Eq "\|shadow\|4\|0\|4\|0\|1\|0\|[0-9]+\|0\|3$" "$log" || fail "no shadow line with would-block 3: $(cat "$log")"

echo "--- the dashboard shows the same numbers (headless Chromium)"
chrome --dump-dom "http://127.0.0.1:$p/" > "$work/dom.html"
python3 - "$work/dom.html" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
def row(name):
    m = re.search(r'data-resource="%s".*?<tr class="latest"[^>]*>(.*?)</tr>' % re.escape(name), dom, re.S)
    if not m:
        sys.exit("dashboard has no row for %s" % name)
    return dict(re.findall(r'data-field="(\w+)"[^>]*>([^<]*)<', m.group(1)))
api, shadow = row("api"), row("shadow")
# the last whole second with traffic on api is the known one
assert (api["pass"], api["block"], api["exception"], api["rt"]) == ("10", "2", "3", "20"), api
assert shadow["would_block"] == "3", shadow
def card(name):
    m = re.search(r'<div class="res[^"]*" data-resource="%s"[^>]*>(.*?)</table>' % re.escape(name), dom, re.S)
    return m.group(0)
# dry run marked on shadow's card, on shadow's only
assert re.search(r'<span class="dry-run"[^>]*>dry run</span>', card("shadow")), card("shadow")
assert re.search(r'<span class="dry-run"[^>]*hidden[^>]*>', card("api")), card("api")
# y ticks: distinct, rising from 0; the time axis: a label every 15 s
for name in ("api", "shadow", "steady"):
    ys = re.search(r'data-yticks="([^"]*)"', card(name)).group(1).split()
    assert ys[0] == "0" and len(set(ys)) == len(ys) and list(map(int, ys)) == sorted(map(int, ys)), (name, ys)
    xs = re.search(r'data-xticks="([^"]*)"', card(name)).group(1).split()
    assert len(xs) == 4 and all(re.fullmatch(r"\d\d:\d\d:[0-5][05]", x) for x in xs), (name, xs)
    secs = [int(x[:2]) * 3600 + int(x[3:5]) * 60 + int(x[6:]) for x in xs]
    assert all((b - a) % 86400 == 15 for a, b in zip(secs, secs[1:])), xs
print("dashboard rows:", api, shadow)
PY
echo "--- the dashboard filters and sorts (from the address, as the controls do)"
chrome --dump-dom "http://127.0.0.1:$p/?filter=SHAD" > "$work/filter.html"
chrome --dump-dom "http://127.0.0.1:$p/?sort=block" > "$work/block.html"
chrome --dump-dom "http://127.0.0.1:$p/?sort=dry_run" > "$work/dry.html"
python3 - "$work/filter.html" "$work/block.html" "$work/dry.html" <<'PY'
import re, sys
def cards(path):  # [(resource, hidden)] in the page's order
    dom = open(path).read()
    return [(name, "hidden" in rest)
            for name, rest in re.findall(r'<div class="res[^"]*" data-resource="([^"]+)"([^>]*)>', dom)]
filtered = cards(sys.argv[1])
assert [n for n, hidden in filtered if not hidden] == ["shadow"], filtered
assert "1 of 3 resources" in open(sys.argv[1]).read()
by_block = [n for n, _ in cards(sys.argv[2])]
assert by_block[0] == "api", by_block  # the only one with blocks
by_dry = [n for n, _ in cards(sys.argv[3])]
assert by_dry[0] == "shadow", by_dry
print("filter:", filtered, "sort by blocks:", by_block, "dry run first:", by_dry)
PY
shot="$build/tests/observability/dashboard.png"
rm -f "$shot"
chrome --window-size=1200,900 --screenshot="$shot" "http://127.0.0.1:$p/" >/dev/null
[ -s "$shot" ] || fail "no screenshot"
echo "screenshot: $shot"

echo "--- /api/series holds the known second"
curl -fs "http://127.0.0.1:$p/api/series" | python3 -c '
import json, sys
d = json.load(sys.stdin)
res = {r["name"]: r for r in d["resources"]}
known = [s for s in res["api"]["series"] if s["block"] == 2]
assert known and known[0]["pass"] == 10 and known[0]["exception"] == 3 and known[0]["rt"] == 20, res["api"]
assert any(s["would_block"] == 3 for s in res["shadow"]["series"]), res["shadow"]
assert res["shadow"]["dry_run"] == 1
print("series ok")'

echo "--- bad input gives a clear error"
"$swctl" serve "$seg" --listen nonsense --seconds 1 2> "$work/err" && fail "bad address accepted"
grep -q "bad listen address" "$work/err" || fail "$(cat "$work/err")"
"$swctl" serve "$seg" --listen "127.0.0.1:$p" --seconds 1 2> "$work/err" && fail "port in use accepted"
grep -q "cannot listen" "$work/err" || fail "$(cat "$work/err")"
"$swctl" list "nosuch-$$" 2> "$work/err" && fail "missing segment accepted"
grep -q "cannot open segment" "$work/err" || fail "$(cat "$work/err")"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  cp "/dev/shm/$seg" "$work/private.seg"
  chmod 600 "$work/private.seg"
  chmod 755 "$work"
  if su -s /bin/sh nobody -c "'$swctl' list '$work/private.seg'" 2> "$work/err"; then
    fail "unreadable segment accepted"
  fi
  grep -q "Permission denied" "$work/err" || fail "$(cat "$work/err")"
fi

echo "--- a full disk for the metric log: reported, and everything goes on"
mkdir "$work/full"
ln -s /dev/full "$work/full/obs-metrics.log"
p2=$(port)
"$swctl" serve "$seg" --listen "127.0.0.1:$p2" --seconds 30 --log-dir "$work/full" --app obs \
  2> "$work/full.err" &
pids="$pids $!"
wait_http "http://127.0.0.1:$p2/metrics"
sleep 2.5
grep -q "No space left on device" "$work/full.err" || fail "the full disk was not reported: $(cat "$work/full.err")"
curl -fs "http://127.0.0.1:$p2/metrics" | promtool check metrics || fail "/metrics broken after ENOSPC"
dots=$(tr -cd . < "$work/fixture.out" | wc -c)
sleep 1.2
[ "$(tr -cd . < "$work/fixture.out" | wc -c)" -gt "$dots" ] || fail "the limiter stopped working"

echo "--- the metric log rolls within its bounds"
p3=$(port)
mkdir "$work/roll"
"$swctl" serve "$seg" --listen "127.0.0.1:$p3" --seconds 5 --log-dir "$work/roll" --app r \
  --log-max-size 256 --log-max-files 3 2>/dev/null
files=$(ls "$work/roll" | wc -l)
[ "$files" -ge 2 ] && [ "$files" -le 3 ] || fail "rolling kept $files files: $(ls -l "$work/roll")"
for f in "$work"/roll/*; do
  [ "$(stat -c %s "$f")" -le 256 ] || fail "$f is larger than 256 bytes"
done

echo "--- hostile clients: swctl serves concurrently, with a cap and deadlines"
# 4000 idle resources with long names: a /metrics of about 6 MB, more than
# the socket buffers of a client that does not read can take
"$fixture" "$big" keep 4000 > "$work/big.out" &
pids="$pids $!"
for i in $(seq 1 200); do grep -q ready "$work/big.out" && break; sleep 0.05; done
grep -q ready "$work/big.out" || fail "the large fixture did not start"
mkdir "$work/big"
p4=$(port)
"$swctl" serve "$big" --listen "127.0.0.1:$p4" --seconds 120 --log-dir "$work/big" --app big \
  --read-timeout 3 2> "$work/big.err" &
serve_pid=$!
pids="$pids $serve_pid"
wait_http "http://127.0.0.1:$p4/metrics"
clients="python3 $top/tests/observability/clients.py"
$clients idle "$p4" 66
$clients slow "$p4" "$work/big/big-metrics.log" steady
$clients read-deadline "$p4"
$clients malformed "$p4"
kill -0 "$serve_pid" 2>/dev/null || fail "swctl serve died: $(cat "$work/big.err")"
p5=$(port)
"$swctl" serve "$big" --listen "127.0.0.1:$p5" --seconds 60 --write-timeout 2 --max-connections 4 \
  2> "$work/cap.err" &
pids="$pids $!"
wait_http "http://127.0.0.1:$p5/metrics"
$clients write-deadline "$p5"
$clients cap "$p5" 4
curl -fs "http://127.0.0.1:$p5/metrics" > "$work/cap.metrics"
promtool check metrics < "$work/cap.metrics" || fail "promtool rejected /metrics with swctl's own series"
grep -Eq '^swctl_http_refused_total [1-9]' "$work/cap.metrics" || fail "refusals not counted: $(grep ^swctl_ "$work/cap.metrics")"
grep -Eq '^swctl_http_timeouts_total [1-9]' "$work/cap.metrics" || fail "deadline resets not counted: $(grep ^swctl_ "$work/cap.metrics")"
grep -q "closed at accept" "$work/cap.err" || fail "refusals not reported: $(cat "$work/cap.err")"
grep -q "reset past their deadline" "$work/cap.err" || fail "deadline resets not reported: $(cat "$work/cap.err")"
"$swctl" serve "$seg" --max-connections 0 2> "$work/err" && fail "--max-connections 0 accepted"
grep -q "want a whole number in 1..100000" "$work/err" || fail "$(cat "$work/err")"

echo "--- a swctl built without libmicrohttpd says serve is unavailable; log still works"
nomhd="$work/swctl-nomhd"
cc -std=c11 -D_GNU_SOURCE -I"$top/libsw" -I"$build/libsw" -o "$nomhd" "$top"/tools/swctl*.c \
  "$build/tools/swctl_assets.c" -L"$build/libsw/.libs" -lsw -Wl,-rpath,"$build/libsw/.libs" ||
  fail "swctl does not build without libmicrohttpd"
if "$nomhd" serve "$seg" --listen "127.0.0.1:$(port)" --seconds 1 2> "$work/err"; then
  fail "serve without libmicrohttpd succeeded"
fi
grep -q "serve is unavailable: this swctl was built without libmicrohttpd" "$work/err" || fail "$(cat "$work/err")"
mkdir "$work/nomhd"
"$nomhd" log "$seg" --log-dir "$work/nomhd" --app n --seconds 2 2> "$work/err" || fail "$(cat "$work/err")"
grep -q "|steady|" "$work/nomhd/n-metrics.log" || fail "swctl log without libmicrohttpd wrote no line"

echo "--- finding segments: swctl ls, several segments, globs, --all"
tests/observability/discover.sh "$build"

echo "--- one exporter for a host: several segments, --all, bounded series, NaN"
tests/observability/export.sh "$build"

echo "--- rules as data: swctl rules get / apply / check"
tests/observability/rules.sh "$build"

echo "--- keyed tables"
tests/observability/keyed.sh "$build"
echo "--- circuit breakers"
tests/observability/breaker.sh "$build"

echo "observability: all checks passed"
