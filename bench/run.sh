#!/bin/sh
# Run the C benchmarks: ns/op (best of 5 runs, 1 and 2 threads) and
# callgrind instructions/op (1 thread, only the measured loop).
# Usage: bench/run.sh [BUILD_DIR] (default: _build/plain)
set -eu
b=${1:-_build/plain}
make -C "$b" -s bench/bench_core bench/bench_limiter bench/bench_segment >/dev/null
best() { # best of 5 runs by the ns field ($2)
  for i in 1 2 3 4 5; do "$@"; done | sort -t= -k"$SW_FIELD" -n | head -1
}
# instructions per op of run_case, counted by callgrind
irs() {
  out=$(mktemp)
  "$b/libtool" --mode=execute valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect='run_case*' "$@" >/dev/null 2>&1
  ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  rm -f "$out"
  echo "$ir" | awk -v n="$N" '{printf "%.1f", $1 / n}'
}
N=100000
echo "# core: wall clock (noisy machine: best of 5 runs)"
SW_FIELD=7
for c in add sum check; do
  for t in 1 2; do best "$b/bench/bench_core" "$c" "$t" 20000000; done
done
best "$b/bench/bench_core" check 1 20000000 4 coarse
best "$b/bench/bench_core" add 2 20000000 1
echo "# core: callgrind instructions per op (1 thread; the clock is a syscall under valgrind)"
for c in add sum check; do echo "case=$c instructions_per_op=$(irs "$b/bench/bench_core" "$c" 1 $N)"; done
echo "# limiter: entry+exit pairs, wall clock (best of 5 runs)"
SW_FIELD=5
for beh in reject reject-fast pacing warm-up concurrency; do
  for t in 1 2; do best "$b/bench/bench_limiter" "$beh" "$t" 5000000; done
done
echo "# limiter: callgrind instructions per entry+exit pair (1 thread)"
for beh in reject reject-fast pacing warm-up concurrency; do
  echo "behaviour=$beh instructions_per_pair=$(irs "$b/bench/bench_limiter" "$beh" 1 $N)"
done
echo "# shared segment: entries (check-and-count) on a heap vs a shared limiter"
SW_FIELD=4
for st in heap shm; do
  for p in 1 2; do best "$b/bench/bench_segment" "$st" "$p" 5000000; done
done
echo "# shared segment: callgrind instructions per entry (1 process)"
for st in heap shm; do
  echo "storage=$st instructions_per_entry=$(irs "$b/bench/bench_segment" "$st" 1 $N)"
done
