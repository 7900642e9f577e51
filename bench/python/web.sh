#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# libsw.web's cost per request (bench/python/bench_web.py): time in one
# process (best of runs), instructions per request with callgrind (each
# mode run with CALLS requests and with 0, the difference / CALLS), and the
# modes' overhead over the same request with no limiter.
# Usage: bench/python/web.sh      Environment: PYTHON (default .venv/bin/python),
# CALLS (default 2000), NO_CALLGRIND=1.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
BENCH=$ROOT/bench/python/bench_web.py
CALLS=${CALLS:-2000}
"$PY" "$BENCH" inproc
[ "${NO_CALLGRIND:-0}" = 1 ] && exit 0
command -v valgrind >/dev/null 2>&1 || { echo "callgrind: valgrind not installed, skipped"; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
instructions() {
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" "$PY" "$BENCH" inproc --mode "$1" \
    --calls "$2" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; return 1; }
  sed -n 's/.*Collected : \([0-9][0-9]*\).*/\1/p' "$TMP/out" | tail -n 1
}
echo
echo "callgrind, instructions per request (CALLS=$CALLS)"
printf '%-18s %14s %14s\n' mode "instr/request" "over no limiter"
for pair in "wsgi wsgi" "wsgi-libsw wsgi" "wsgi-libsw-2 wsgi" "asgi asgi" "asgi-libsw asgi" \
  "flask flask" "flask-libsw flask" "flask-limiter flask" "starlette starlette" "starlette-libsw starlette"; do
  set -- $pair
  per=$(( ($(instructions "$1" "$CALLS") - $(instructions "$1" 0)) / CALLS ))
  [ "$1" = "$2" ] && b=$per   # each group starts with its mode with no limiter
  printf '%-18s %14d %14d\n' "$1" "$per" "$((per - b))"
done
