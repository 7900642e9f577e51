#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The speed goals of issue 25 (item 7), measured side by side in one run:
#   per key:  try_acquire(key=) + release() on an existing key <= 1.5x, on a
#             new key <= 2x the unkeyed try_acquire() + release(), each
#             counted over the same call without a limiter (with the same key
#             generation for the keyed forms: bench_decorator.py);
#   the web:  the middleware's own cost per request (one rate, headers on)
#             <= 10,000 instructions and <= 5 us over the application without
#             it, and <= 1/8 of Flask-Limiter memory://'s added cost on the
#             same (Flask) application (bench_web.py).
# Each mode is timed (ns or us per call, best of runs going round the modes)
# and counted with callgrind (instructions per call: a run of N calls minus
# a run of 0, / N). Prints a table, then one line per goal.
# Usage: bench/python/goals.sh     Environment: PYTHON (default .venv/bin/python),
# CALLS (callgrind calls, default 20000; Flask modes: CALLS / 10), RUNS (default 7).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
DECO=$ROOT/bench/python/bench_decorator.py
WEB=$ROOT/bench/python/bench_web.py
CALLS=${CALLS:-20000}
RUNS=${RUNS:-7}
KEY_MODES="plain try plain-key key-existing key-new"
WEB_MODES="wsgi wsgi-libsw-h asgi asgi-libsw-h flask flask-libsw-h flask-wsgi-h flask-limiter flask-limiter-h"
export PYTHONHASHSEED=0 # dict layouts alike in every run: callgrind's counts repeat

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

echo "== time: ns per call (per key), us per request (web), best of $RUNS runs"
"$PY" "$DECO" --modes "$(echo $KEY_MODES | tr ' ' ,)" --runs "$RUNS" -n 200000 --ns-out "$TMP/ns" | tail -n 6
"$PY" "$WEB" inproc --modes "$(echo $WEB_MODES | tr ' ' ,)" --runs "$RUNS" --calls 2000 --us-out "$TMP/us"

if ! command -v valgrind >/dev/null 2>&1; then
  echo "callgrind: valgrind not installed (apt-get install valgrind): instructions not counted"
  exit 0
fi
count() { # count FILE ARGS...: instructions of one run
  out=$1
  shift
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" "$PY" "$@" >"$out" 2>&1 || { cat "$out" >&2; return 1; }
  sed -n 's/.*Collected : \([0-9][0-9]*\).*/\1/p' "$out" | tail -n 1
}
echo "== callgrind: instructions per call"
: >"$TMP/instr"
for m in $KEY_MODES; do
  i=$(( ($(count "$TMP/o" "$DECO" --mode "$m" --calls "$CALLS") - $(count "$TMP/o" "$DECO" --mode "$m" --calls 0)) / CALLS ))
  echo "$m $i" | tee -a "$TMP/instr"
done
for m in $WEB_MODES; do
  n=$CALLS
  case $m in flask*) n=$((CALLS / 10)) ;; esac
  i=$(( ($(count "$TMP/o" "$WEB" inproc --mode "$m" --calls "$n") - $(count "$TMP/o" "$WEB" inproc --mode "$m" --calls 0)) / n ))
  echo "$m $i" | tee -a "$TMP/instr"
done

echo "== goals (issue 25, item 7)"
"$PY" - "$TMP/ns" "$TMP/us" "$TMP/instr" <<'EOF'
import sys

def pairs(path):
    with open(path) as f:
        return {m: float(v) for m, v in (line.split() for line in f if line.strip())}

ns, us, ins = pairs(sys.argv[1]), pairs(sys.argv[2]), pairs(sys.argv[3])
t = {**{m: v / 1000.0 for m, v in ns.items()}, **us}  # us everywhere

def over(d, m, base):
    return d[m] - d[base]

unkeyed_t, unkeyed_i = over(t, "try", "plain"), over(ins, "try", "plain")
for mode, target in (("key-existing", 1.5), ("key-new", 2.0)):
    print("goal=%s_vs_unkeyed ns=%.0f instructions=%.0f unkeyed_ns=%.0f unkeyed_instructions=%.0f "
          "ratio_ns=%.2f ratio_instructions=%.2f target_ratio=%.1f" % (
              mode.replace("-", "_"), over(t, mode, "plain-key") * 1000, over(ins, mode, "plain-key"),
              unkeyed_t * 1000, unkeyed_i, over(t, mode, "plain-key") / unkeyed_t,
              over(ins, mode, "plain-key") / unkeyed_i, target))
for mode, base in (("wsgi-libsw-h", "wsgi"), ("asgi-libsw-h", "asgi")):
    print("goal=%s_over_app us=%.2f instructions=%.0f target_us=5 target_instructions=10000"
          % (mode.replace("-", "_"), over(t, mode, base), over(ins, mode, base)))
fl_i = over(ins, "flask-limiter", "flask")
fl_h = over(ins, "flask-limiter-h", "flask")
for mode in ("flask-libsw-h", "flask-wsgi-h"):
    print("goal=%s_vs_flask_limiter instructions=%.0f flask_limiter=%.0f flask_limiter_headers=%.0f "
          "ratio=%.3f ratio_headers=%.3f target_ratio=0.125" % (
              mode.replace("-", "_"), over(ins, mode, "flask"), fl_i, fl_h, over(ins, mode, "flask") / fl_i,
              over(ins, mode, "flask") / fl_h))
EOF
