#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Run the C benchmarks: ns/op (best of 5 runs, 1 and 2 threads) and
# callgrind instructions/op (1 thread, only the measured loop). The first
# section prints one line per goal of the hot path (docs/performance.md):
# the figure, the goal, and Sentinel's figure where it has one.
# Usage: bench/run.sh [BUILD_DIR] (default: _build/plain)
set -eu
b=${1:-_build/plain}
make -C "$b" -s bench/bench_core bench/bench_limiter bench/bench_segment bench/bench_clock >/dev/null
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
val() { # val KEY LINE: the value of KEY=... in LINE
  echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "# goals: instructions by callgrind (1 thread, the clock a system call under valgrind),"
echo "# ns the best of 5 runs; java_*: Sentinel 1.8.9 on JDK 17, measured in issue 16"
SW_FIELD=3
clk=$(best "$b/bench/bench_clock" read default 20000000)
echo "goal=clock_read ns=$(val ns_per_read "$clk") target_ns=10 java_ns=20"
SW_FIELD=7
add1=$(best "$b/bench/bench_core" add 1 20000000)
echo "goal=add_pass instructions=$(irs "$b/bench/bench_core" add 1 $N) ns=$(val ns_per_op "$add1")" \
  "target_instructions=40 target_ns=10 java_ns=14.7"
sa=$(best "$b/bench/bench_core" sumadd 1 20000000)
echo "goal=pass_and_add_pass instructions=$(irs "$b/bench/bench_core" sumadd 1 $N)" \
  "ns=$(val ns_per_op "$sa") java_ns=44.3"
echo "goal=check_then_add instructions=$(irs "$b/bench/bench_core" check 1 $N) target_instructions=80"
SW_FIELD=5
pair=$(best "$b/bench/bench_limiter" reject 1 5000000)
echo "goal=limiter_pair_strict instructions=$(irs "$b/bench/bench_limiter" reject 1 $N)" \
  "ns=$(val ns_per_pair "$pair") target_instructions=250 java_ns=149"
blk=$(best "$b/bench/bench_limiter" blocked 1 5000000)
echo "goal=blocked_strict instructions=$(irs "$b/bench/bench_limiter" blocked 1 $N)" \
  "ns=$(val ns_per_pair "$blk") target_instructions=150 java_ns=71.5"
SW_FIELD=7
add2=$(best "$b/bench/bench_core" add 2 20000000)
add2s1=$(best "$b/bench/bench_core" add 2 20000000 1)
echo "goal=add_pass_2_threads mops=$(val mops_total "$add2") one_thread_mops=$(val mops_total "$add1")" \
  "ratio=$(ratio "$(val mops_total "$add2")" "$(val mops_total "$add1")") target_ratio=1.6" \
  "one_stripe_mops=$(val mops_total "$add2s1") java_mops=62.0"
SW_FIELD=5
pair2=$(best "$b/bench/bench_limiter" reject 2 5000000)
fast1=$(best "$b/bench/bench_limiter" reject-fast 1 5000000)
fast2=$(best "$b/bench/bench_limiter" reject-fast 2 5000000)
echo "goal=limiter_pair_2_threads strict_mpairs=$(val mpairs_total "$pair2")" \
  "strict_ratio=$(ratio "$(val mpairs_total "$pair2")" "$(val mpairs_total "$pair")")" \
  "fast_ratio=$(ratio "$(val mpairs_total "$fast2")" "$(val mpairs_total "$fast1")") target_ratio=1.6"
echo "# clock: ns per read (best of 5 runs): sw_now_ms by source, sw_now_ns (default duration clock)"
SW_FIELD=3
for src in default monotonic coarse ns; do best "$b/bench/bench_clock" read "$src" 20000000; done
echo "# clock: lag of sw_now_ms (default: coarse) behind CLOCK_MONOTONIC, sampled every 100 us"
"$b/bench/bench_clock" lag 2
echo "# core: wall clock (noisy machine: best of 5 runs)"
SW_FIELD=7
for c in add sum sumadd check; do
  for t in 1 2; do best "$b/bench/bench_core" "$c" "$t" 20000000; done
done
best "$b/bench/bench_core" check 1 20000000 4 coarse
best "$b/bench/bench_core" add 2 20000000 1
echo "# core: callgrind instructions per op (1 thread; the clock is a syscall under valgrind)"
for c in add sum sumadd check; do echo "case=$c instructions_per_op=$(irs "$b/bench/bench_core" "$c" 1 $N)"; done
echo "# limiter: entry+exit pairs, wall clock (best of 5 runs)"
SW_FIELD=5
for beh in reject reject-fast pacing warm-up concurrency blocked no-exit; do
  for t in 1 2; do best "$b/bench/bench_limiter" "$beh" "$t" 5000000; done
done
echo "# limiter: callgrind instructions per entry+exit pair (1 thread; blocked, no-exit: per entry)"
for beh in reject reject-fast pacing warm-up concurrency blocked no-exit; do
  echo "behaviour=$beh instructions_per_pair=$(irs "$b/bench/bench_limiter" "$beh" 1 $N)"
done
echo "# breaker: entry+exit closed, entry open, next to a limiter's entry (wall clock, best of 5 runs)"
make -C "$b" -s bench/bench_breaker >/dev/null
SW_FIELD=5
for c in closed open limiter-entry limiter-pair; do
  for t in 1 2; do best "$b/bench/bench_breaker" "$c" "$t" 5000000; done
done
echo "# breaker: callgrind instructions per op (1 thread)"
for c in closed open limiter-entry limiter-pair; do
  echo "case=$c instructions_per_op=$(irs "$b/bench/bench_breaker" "$c" 1 $N)"
done
echo "# shared segment: entries (check-and-count) on a heap vs a shared limiter"
SW_FIELD=5
for st in heap shm; do
  for p in 1 2; do best "$b/bench/bench_segment" "$st" "$p" 5000000; done
done
echo "# shared segment: callgrind instructions per entry (1 process)"
for st in heap shm; do
  echo "storage=$st instructions_per_entry=$(irs "$b/bench/bench_segment" "$st" 1 $N)"
done
echo "# keyed table: entries of existing keys (4-byte IPv4 keys, explicit time; best of 5)"
make -C "$b" -s bench/bench_keyed >/dev/null
SW_FIELD=6
for keys in 1000 1000000; do best "$b/bench/bench_keyed" existing "$keys" 1 3000000; done
for st in heap procs; do
  for t in 1 2; do best "$b/bench/bench_keyed" existing 1000 "$t" 3000000 "$st"; done
done
best "$b/bench/bench_keyed" new 1 1 1000000
best "$b/bench/bench_keyed" clock 1000 1 3000000
echo "# keyed table: callgrind instructions per entry (1 thread; only sw_keyed_entry_at)"
irs_fn() { # instructions per call of sw_keyed_entry_at*, run with OPS calls
  out=$(mktemp)
  "$b/libtool" --mode=execute valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect='sw_keyed_entry*' "$@" >/dev/null 2>&1
  callgrind_annotate "$out" 2>/dev/null | awk -v n="$N" '/PROGRAM TOTALS/ {gsub(",", "", $1); printf "%.1f", $1 / n}'
  rm -f "$out"
}
echo "case=existing-key instructions_per_entry=$(irs_fn "$b/bench/bench_keyed" existing 1 1 $N) (one key, its first entries included)"
echo "case=new-key instructions_per_entry=$(irs_fn "$b/bench/bench_keyed" new 1 1 $N)"
echo "# keyed table: resident memory after N distinct keys in a table of 1,000,000"
for keys in 10000 100000 1000000; do "$b/bench/bench_keyed" memory "$keys"; done
echo "# keyed table in a shared segment: /dev/shm it holds (reserved) and pages touched, against keys seen"
make -C "$b" -s bench/bench_memory bench/bench_rules >/dev/null
"$b/bench/bench_memory" 100000
echo "# rules as data: CPU time of sw_rules_parse for a list of N rules"
for n in 10000 100000; do "$b/bench/bench_rules" parse "$n"; done
# cluster
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  make -C "$b" -s bench/bench_cluster >/dev/null
  echo "# cluster: hot path, a cluster rule admitting from a full lease vs the same local rule (best of 5 runs)"
  SW_FIELD=4
  for r in local cluster; do best "$b/bench/bench_cluster" hot "$r" 5000000; done
  echo "# cluster: callgrind instructions per entry (1 thread)"
  for r in local cluster; do
    echo "rule=$r instructions_per_entry=$(irs "$b/bench/bench_cluster" hot "$r" $N)"
  done
  # a redis-server of our own on a free port, stopped by PID whatever happens
  port=$((20000 + $$ % 10000))
  while redis-cli -p "$port" ping >/dev/null 2>&1; do port=$((port + 1)); done
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    >/dev/null 2>&1 &
  rpid=$!
  trap 'kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null || true' EXIT
  i=0
  until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ "$i" -lt 100 ] || { echo "redis-server did not start"; exit 1; }; sleep 0.05
  done
  echo "# cluster: Redis calls per 100k admissions (1 process, as fast as the lease allows)"
  for L in 10 100 1000; do "$b/bench/bench_cluster" calls "127.0.0.1:$port" "$L" 100000; done
  echo "# cluster: 2 processes offering 1.6x the fleet's limit; windows of 2 buckets of Redis time"
  "$b/bench/bench_cluster" share "127.0.0.1:$port" 200 20 5
  "$b/bench/bench_cluster" share "127.0.0.1:$port" 1000 50 5
  "$b/bench/bench_cluster" share "127.0.0.1:$port" 1000 100 5
  kill "$rpid"; wait "$rpid" 2>/dev/null || true; trap - EXIT
else
  echo "# cluster: redis-server not installed: skipped"
fi
