/* SPDX-License-Identifier: Apache-2.0 */
/* Circuit breaker benchmark: ns per operation with the real clock, next to
 * a limiter's entry, 1 or more threads on one breaker.
 * Usage: bench_breaker CASE THREADS OPS
 *   closed: entry + exit (RT 1 ms, never slow) on a closed breaker whose
 *           exits check the rule (min requests never reached: the sums run)
 *   open:   entry on an open breaker (refused, with the time to the probe)
 *   limiter-entry: sw_limiter_entry alone (reject, strict, NO_EXIT), the
 *           limiter's cost the breaker is compared with
 *   limiter-pair:  sw_limiter_entry + sw_limiter_exit
 * Under callgrind, count only run_case (see bench/run.sh). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sw/sw.h>

#include "bench.h"

typedef struct job {
  sw_breaker *b;
  sw_limiter *l;
  int kind; /* 0 closed, 1 open, 2 limiter entry, 3 limiter pair */
  long ops;
} job;

__attribute__((noinline)) void run_case(job *j);
__attribute__((noinline)) void run_case(job *j) {
  sw_decision d;
  switch (j->kind) {
  case 0:
    for (long i = 0; i < j->ops; i++) {
      sw_breaker_entry(j->b, &d);
      sw_breaker_exit(j->b, &d, 1, 0);
    }
    break;
  case 1:
    for (long i = 0; i < j->ops; i++) sw_breaker_entry(j->b, &d);
    break;
  case 2:
    for (long i = 0; i < j->ops; i++) sw_limiter_entry(j->l, 1, SW_ENTRY_NO_EXIT, &d);
    break;
  default:
    for (long i = 0; i < j->ops; i++) {
      sw_limiter_entry(j->l, 1, 0, &d);
      sw_limiter_exit(j->l, 1, 1, 0);
    }
  }
}

static void run_job(void *arg) { run_case(arg); }

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s closed|open|limiter-entry|limiter-pair THREADS OPS\n", argv[0]);
    return 2;
  }
  static const char *const kinds[] = {"closed", "open", "limiter-entry", "limiter-pair"};
  int kind = -1;
  for (int k = 0; k < 4; k++)
    if (strcmp(argv[1], kinds[k]) == 0) kind = k;
  int threads = atoi(argv[2]);
  long ops = atol(argv[3]);
  if (kind < 0 || threads < 1 || ops < 1) return 2;
  sw_options *o;
  sw_options_create(&o);
  sw_options_set(o, SW_OPT_BREAKER_STRATEGY, SW_BREAKER_SLOW_RATIO);
  sw_options_set(o, SW_OPT_BREAKER_COUNT, 100);
  sw_options_set(o, SW_OPT_BREAKER_MIN_REQUESTS, kind == 1 ? 1 : INT32_MAX);
  sw_options_set_double(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, 1e6);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 1e12);
  sw_breaker *b;
  sw_limiter *l;
  if (sw_breaker_create(&b, o) != SW_OK || sw_limiter_create(&l, o) != SW_OK) {
    fprintf(stderr, "%s\n", sw_last_error());
    return 1;
  }
  if (kind == 1) { /* open it: one slow completion */
    sw_decision d;
    sw_breaker_entry(b, &d);
    sw_breaker_exit(b, &d, 1000, 0);
  }
  job *jobs = calloc((size_t)threads, sizeof *jobs);
  for (int i = 0; i < threads; i++) jobs[i] = (job){.b = b, .l = l, .kind = kind, .ops = ops};
  double dt = bench_run(jobs, sizeof *jobs, threads, run_job);
  sw_breaker_info in;
  sw_breaker_stats_at(b, sw_now_ms(), &in);
  printf("case=%s threads=%d ops=%ld ns_per_op=%.1f mops_total=%.2f state=%d\n", argv[1], threads,
         ops, dt * 1e9 / (double)ops, (double)ops * threads / dt / 1e6, in.state);
  free(jobs);
  sw_breaker_free(b);
  sw_limiter_free(l);
  sw_options_free(o);
  return 0;
}
