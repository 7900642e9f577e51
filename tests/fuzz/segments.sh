#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The segment fuzzer: for each kind of segment (registry, keyed table,
# breaker), COUNT damaged copies of real segments, each opened in every mode
# and driven through every public call of its kind and swctl ls / list /
# dump, under ASan+UBSan, every call bounded in time (tests/fuzz/segfuzz.h).
# Builds the harness against the ASan+UBSan build's libsw.a and swctl's
# sources (into BUILD_DIR/segfuzz-bin/segfuzz); a failing copy is saved with
# its log, and can be run again from the seed and its index (each FAIL line
# says how: BUILD_DIR/segfuzz-bin/segfuzz KIND --seed S --index I).
#
# Usage: tests/fuzz/segments.sh [SEED] [COUNT] [BUILD_DIR]
#   SEED       the damage's seed (default 1); COUNT copies per kind (default 2000)
#   BUILD_DIR  a configured and built ASan+UBSan build (default _build/asan, as
#              tests/run-all.sh makes it)
# Environment:
#   SW_SEGFUZZ_KINDS        kinds to run (default "registry keyed breaker")
#   SW_SEGFUZZ_REPORT_ONLY  kinds whose crashes, hangs and sanitizer reports are
#                           printed but do not fail the run (default: none;
#                           tests/run-all.sh names those with open findings,
#                           tests/fuzz/FINDINGS.md)
#   SW_SEGFUZZ_SAVE         where failing copies go (default BUILD_DIR/segfuzz-failures)
#   SW_SEGFUZZ_JOBS         copies run at once (default 3: a copy with a damaged lock
#                           word sleeps through a bounded wait of 1 to 2 s)
# A longer run: tests/fuzz/segments.sh 7 20000
set -eu
seed=${1:-1}
count=${2:-2000}
build=${3:-_build/asan}
top=$(cd "$(dirname "$0")/../.." && pwd)
kinds=${SW_SEGFUZZ_KINDS:-registry keyed breaker}
report_only=${SW_SEGFUZZ_REPORT_ONLY:-}
save=${SW_SEGFUZZ_SAVE:-$build/segfuzz-failures}
jobs=${SW_SEGFUZZ_JOBS:-3}
lib="$build/libsw/.libs/libsw.a"
[ -f "$lib" ] || { echo "segments.sh: no $lib: build $build first (tests/run-all.sh)" >&2; exit 2; }
libs=$(sed -n "s/^dependency_libs='\(.*\)'/\1/p" "$build/libsw/libsw.la")

out="$build/segfuzz-bin" # kept: the FAIL lines say how to run a copy again with it
rm -rf "$out"
mkdir -p "$out"
cflags="-std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all
  -fno-omit-frame-pointer -I$top/libsw -I$build/libsw -I$top/tools"
sh "$top/tools/embed.sh" "$out/swctl_assets.c" "$top/tools/dashboard/index.html" \
  "$top/tools/dashboard/dashboard.js"
pids=""
for f in "$top"/tests/fuzz/segfuzz_*.c "$top"/tools/swctl_*.c "$out/swctl_assets.c"; do
  clang $cflags -c "$f" -o "$out/$(basename "$f" .c).o" &
  pids="$pids $!"
done
clang $cflags -Dmain=swctl_main -c "$top/tools/swctl.c" -o "$out/swctl.o"
for p in $pids; do wait "$p"; done
clang -fsanitize=address,undefined "$out"/*.o "$lib" $libs -lm -lpthread -o "$out/segfuzz"

status=0
for kind in $kinds; do
  rc=0
  "$out/segfuzz" "$kind" --seed "$seed" --count "$count" --jobs "$jobs" --save "$save" || rc=$?
  case " $report_only " in
  *" $kind "*) [ "$rc" -eq 0 ] || echo "segments.sh: $kind: failures reported, not failing the run (SW_SEGFUZZ_REPORT_ONLY)" ;;
  *) [ "$rc" -eq 0 ] || status=1 ;;
  esac
done
# The copies that once failed (tests/fuzz/findings/KIND-VARIANT-*.seg), again.
for f in "$top"/tests/fuzz/findings/*.seg; do
  [ -f "$f" ] || continue
  b=$(basename "$f" .seg)
  kind=${b%%-*}
  rest=${b#*-}
  "$out/segfuzz" "$kind" --replay "$f" --variant "${rest%%-*}" || status=1
done
[ "$status" -eq 0 ] || echo "segments.sh: failing copies are in $save"
exit "$status"
