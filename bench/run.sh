#!/bin/sh
# Run the core benchmarks: ns/op (best of 5 runs, 1 and 2 threads) and
# callgrind instructions/op. Usage: bench/run.sh [BUILD_DIR] (default: .)
set -eu
b=${1:-.}
make -C "$b" -s bench/bench_core >/dev/null
bin="$b/bench/bench_core"
best() { # best ns_per_op of 5 runs
  for i in 1 2 3 4 5; do "$bin" "$@"; done | sort -t= -k7 -n | awk 'NR==1'
}
echo "# wall clock (noisy machine: best of 5)"
for c in add sum check; do
  for t in 1 2; do best "$c" "$t" 20000000; done
done
best check 1 20000000 4 coarse
best add 2 20000000 1
echo "# callgrind instructions per op (1 thread; run_case only)"
for c in add sum check; do
  out=$(mktemp)
  "$b/libtool" --mode=execute valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect=run_case "$bin" "$c" 1 100000 >/dev/null 2>&1
  ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
  rm -f "$out"
  echo "case=$c instructions_per_op=$(echo "$ir / 100000" | bc -l | xargs printf %.1f)"
done
