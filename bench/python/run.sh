#!/bin/sh
# Per-call cost of the libsw Python decorator (entry + exit) against an
# undecorated call and python3-limits (fixed and moving window, in memory),
# and of per-key limits on a keyed table (try_acquire(key=) + release, an
# existing key and a new key, over the same call with its key generation):
#   1. ns per call, best of several timed runs (bench_decorator.py);
#   2. instructions per call with valgrind --tool=callgrind: each mode runs
#      with CALLS calls and with 0 calls (same setup), the difference / CALLS.
# Usage: bench/python/run.sh [bench_decorator.py options]
# Environment: PYTHON (default: .venv/bin/python of the repository, made by
# bindings/python/run-tests.sh), CALLS (default 20000), CALLS_MOVING
# (default 2000: limits' moving window inserts at the head of a Python list,
# so its cost grows with the hits inside the window), NO_CALLGRIND=1,
# VARIANTS=1 (also the hot-path designs the decorator was chosen against).
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

echo "== ns per call (time.perf_counter_ns, best of runs)"
if [ "${VARIANTS:-0}" = 1 ]; then set -- --variants "$@"; fi
"$PY" "$BENCH" "$@"

if [ "${NO_CALLGRIND:-0}" = 1 ]; then exit 0; fi
if ! command -v valgrind >/dev/null 2>&1; then
  echo "== callgrind: valgrind not installed (apt-get install valgrind), skipped"
  exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM

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
base=""
MODES="plain libsw limits-fixed limits-moving plain-key key-existing key-new"
[ "${VARIANTS:-0}" = 1 ] && MODES="$MODES libsw-ffinew libsw-tlocal libsw-ptr"
for mode in $MODES; do
  n=$CALLS
  [ "$mode" = limits-moving ] && n=$CALLS_MOVING
  i0=$(instructions "$mode" 0)
  i1=$(instructions "$mode" "$n")
  per=$(( (i1 - i0) / n ))
  [ -z "$base" ] && base=$per
  [ "$mode" = plain-key ] && base_key=$per # per-key modes: over the same call with its key
  case $mode in key-*) over=$((per - base_key)) ;; *) over=$((per - base)) ;; esac
  printf '%-24s %14d %14d\n' "$mode" "$per" "$over"
done
