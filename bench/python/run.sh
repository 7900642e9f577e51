#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Per-call cost of each form of a libsw limiter in Python — the decorator,
# `with lim:`, try_acquire() + release(), the async decorator, `async with
# lim:` — against an undecorated call; of the decorator against
# python3-limits (fixed and moving window, in memory); and of per-key limits
# on a keyed table (try_acquire(key=) + release, an existing key and a new
# key, over the same call with its key generation):
#   1. ns per call, best of several timed runs (bench_decorator.py);
#   2. instructions per call with valgrind --tool=callgrind: each mode runs
#      with CALLS calls and with 0 calls (same setup), the difference / CALLS;
#   3. a summary, one line per form: ns and instructions per call, the ratio
#      of each to the decorator's, and the cost over the undecorated call;
#      then the goals of issue 16, one line each (goal=NAME ns=... instructions=...).
# Usage: bench/python/run.sh [bench_decorator.py options]
# Environment: PYTHON (default: .venv/bin/python of the repository, made by
# bindings/python/run-tests.sh), CALLS (default 20000), CALLS_MOVING
# (default 2000: limits' moving window inserts at the head of a Python list,
# so its cost grows with the hits inside the window), NO_CALLGRIND=1,
# VARIANTS=1 (also the hot-path designs each form was chosen against),
# MODES (the modes to count with callgrind; default: all).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
BENCH=$ROOT/bench/python/bench_decorator.py
CALLS=${CALLS:-20000}
CALLS_MOVING=${CALLS_MOVING:-2000}

if ! "$PY" -c 'import libsw, limits' 2>/dev/null; then
  echo "run.sh: $PY cannot import libsw and limits; run bindings/python/run-tests.sh" \
       "first (it makes .venv), or set PYTHON" >&2
  exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

echo "== ns per call (time.perf_counter_ns, best of runs, the runs going round the modes)"
if [ "${VARIANTS:-0}" = 1 ]; then set -- --variants "$@"; fi
"$PY" "$BENCH" --ns-out "$TMP/ns" "$@"

if [ "${NO_CALLGRIND:-0}" = 1 ]; then exit 0; fi
if ! command -v valgrind >/dev/null 2>&1; then
  echo "== callgrind: valgrind not installed (apt-get install valgrind), skipped"
  exit 0
fi

# instructions MODE N: total instructions of a run of N calls of MODE
instructions() {
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" \
    "$PY" "$BENCH" --mode "$1" --calls "$2" >"$TMP/out" 2>&1 || {
    cat "$TMP/out" >&2
    return 1
  }
  sed -n 's/.*Collected : \([0-9][0-9]*\).*/\1/p' "$TMP/out" | tail -n 1
}

echo "== callgrind instructions per call (CALLS=$CALLS, moving window: $CALLS_MOVING)"
printf '%-24s %14s %14s\n' mode "instr/call" "overhead"
DEFAULT_MODES="plain libsw with try async-plain async-libsw async-with limits-fixed limits-moving"
DEFAULT_MODES="$DEFAULT_MODES plain-key key-existing key-new"
[ "${VARIANTS:-0}" = 1 ] && DEFAULT_MODES="$DEFAULT_MODES libsw-ffinew libsw-tlocal libsw-ptr \
  with-contextvars with-pymethods try-python async-with-coroutines"
: >"$TMP/instr"
for mode in ${MODES:-$DEFAULT_MODES}; do
  n=$CALLS
  [ "$mode" = limits-moving ] && n=$CALLS_MOVING
  i0=$(instructions "$mode" 0)
  i1=$(instructions "$mode" "$n")
  per=$(( (i1 - i0) / n ))
  echo "$mode $per" >>"$TMP/instr"
  case $mode in # the overhead is over the same call undecorated
  key-*) base=plain-key ;;
  async-*) base=async-plain ;;
  *) base=plain ;;
  esac
  b=$(sed -n "s/^$base //p" "$TMP/instr")
  printf '%-24s %14d %14s\n' "$mode" "$per" "$([ -n "$b" ] && echo $((per - b)) || echo -)"
done

echo "== each form against the decorator (ns: the timed runs above; instructions: callgrind)"
"$PY" "$BENCH" --summary "$TMP/ns" "$TMP/instr"
