/* SPDX-License-Identifier: Apache-2.0 */
/* Limiter benchmark: ns per entry+exit pair for each behaviour, with the
 * real clock, 1 or more threads on one limiter.
 * Usage: bench_limiter BEHAVIOUR THREADS OPS
 *   BEHAVIOUR: reject | reject-fast | pacing | warm-up | concurrency | blocked | no-exit
 * The threshold is high enough that every entry passes: this measures the
 * cost of the decision and the counting, not of blocking; except "blocked"
 * (strict reject, threshold 1): after the first, every entry is blocked
 * (and has no exit), the cost of a refusal with its retry-after; and
 * "no-exit" (strict reject, SW_ENTRY_NO_EXIT): passing entries alone. Under
 * callgrind, count only run_case (see bench/run.sh). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sw/sw.h>

#include "bench.h"

typedef struct job {
  sw_limiter *l;
  long ops;
  uint32_t flags;
} job;

__attribute__((noinline)) void run_case(job *j);
__attribute__((noinline)) void run_case(job *j) {
  sw_decision d;
  for (long i = 0; i < j->ops; i++) {
    sw_limiter_entry(j->l, 1, j->flags, &d);
    if (d.verdict != SW_VERDICT_BLOCK && !(j->flags & SW_ENTRY_NO_EXIT))
      sw_limiter_exit(j->l, 1, 1, 0);
  }
}

static void run_job(void *arg) { run_case(arg); }

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s reject|reject-fast|pacing|warm-up|concurrency|blocked|no-exit THREADS OPS\n",
            argv[0]);
    return 2;
  }
  const char *b = argv[1];
  int threads = atoi(argv[2]);
  long ops = atol(argv[3]);
  sw_options *o;
  sw_limiter *l;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, strcmp(b, "blocked") == 0 ? 1 : 1e12);
  if (strcmp(b, "reject-fast") == 0) sw_options_set(o, SW_OPT_STRICT, 0);
  if (strcmp(b, "pacing") == 0) sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING);
  if (strcmp(b, "warm-up") == 0) sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP);
  if (strcmp(b, "concurrency") == 0) sw_options_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY);
  if (sw_limiter_create(&l, o) != SW_OK) {
    fprintf(stderr, "%s\n", sw_last_error());
    return 1;
  }
  job *jobs = calloc((size_t)threads, sizeof *jobs);
  uint32_t flags = strcmp(b, "no-exit") == 0 ? SW_ENTRY_NO_EXIT : 0;
  for (int i = 0; i < threads; i++) jobs[i] = (job){.l = l, .ops = ops, .flags = flags};
  double dt = bench_run(jobs, sizeof *jobs, threads, run_job);
  printf("behaviour=%s threads=%d ops=%ld ns_per_pair=%.1f mpairs_total=%.2f\n", b, threads,
         ops, dt * 1e9 / (double)ops, (double)ops * threads / dt / 1e6);
  free(jobs);
  sw_limiter_free(l);
  sw_options_free(o);
  return 0;
}
