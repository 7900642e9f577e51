/* SPDX-License-Identifier: Apache-2.0 */
/* Core micro-benchmarks: ns/op (wall clock, 1 or more threads) for
 *   add    add PASS to the current window       (sw_metric_add_pass)
 *   sum    read the sliding sum                  (sw_metric_pass)
 *   check  check-then-add as a limiter does (sw_metric_try_pass)
 *   sumadd read the sliding sum, then add PASS    (Sentinel's pass() + addPass)
 * Usage: bench_core CASE THREADS OPS [STRIPES] [coarse]
 * Under callgrind, count only run_case: see bench/run.sh. Prints one line:
 *   case=add threads=2 stripes=4 ops=... ns_per_op=... mops_total=... */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sw/sw.h>

#include "bench.h"

typedef struct job {
  pthread_t tid;
  const char *name;
  sw_metric *m;
  long ops;
  int64_t sink;
} job;

/* Kept out of line so callgrind --toggle-collect=run_case sees only the ops. */
__attribute__((noinline)) void run_case(job *j);
__attribute__((noinline)) void run_case(job *j) {
  sw_metric *m = j->m;
  int64_t sink = 0;
  if (strcmp(j->name, "add") == 0) {
    for (long i = 0; i < j->ops; i++) sw_metric_add_pass(m, 1);
  } else if (strcmp(j->name, "sum") == 0) {
    for (long i = 0; i < j->ops; i++) sink += sw_metric_pass(m);
  } else if (strcmp(j->name, "sumadd") == 0) {
    for (long i = 0; i < j->ops; i++) {
      sink += sw_metric_pass(m);
      sw_metric_add_pass(m, 1);
    }
  } else { /* check */
    const int64_t threshold = INT64_MAX / 2;
    for (long i = 0; i < j->ops; i++) sink += sw_metric_try_pass(m, 1, threshold, NULL);
  }
  j->sink = sink;
}

static void *thread_main(void *arg) {
  run_case(arg);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s add|sum|sumadd|check THREADS OPS [STRIPES] [coarse]\n", argv[0]);
    return 2;
  }
  const char *name = argv[1];
  int threads = atoi(argv[2]);
  long ops = atol(argv[3]);
  int stripes = argc > 4 ? atoi(argv[4]) : 4;
  if (argc > 5 && strcmp(argv[5], "coarse") == 0) sw_clock_use(SW_CLOCK_MONOTONIC_COARSE);
  sw_options *o;
  sw_metric *m;
  if (sw_options_create(&o) || sw_options_set(o, SW_OPT_STRIPES, stripes) ||
      sw_metric_create(&m, 2, 1000, o)) {
    fprintf(stderr, "setup: %s\n", sw_last_error());
    return 1;
  }
  sw_metric_add_pass(m, 1); /* create the current window outside the timing */
  job *jobs = calloc((size_t)threads, sizeof *jobs);
  double t0 = now_s();
  for (int i = 0; i < threads; i++) {
    jobs[i] = (job){.name = name, .m = m, .ops = ops};
    if (threads == 1)
      run_case(&jobs[i]);
    else
      pthread_create(&jobs[i].tid, NULL, thread_main, &jobs[i]);
  }
  if (threads > 1)
    for (int i = 0; i < threads; i++) pthread_join(jobs[i].tid, NULL);
  double dt = now_s() - t0;
  printf("case=%s threads=%d stripes=%d clock=%s ops=%ld ns_per_op=%.2f mops_total=%.2f\n",
         name, threads, stripes, argc > 5 ? argv[5] : "default", ops,
         dt * 1e9 / (double)ops, (double)ops * threads / dt / 1e6);
  free(jobs);
  sw_metric_free(m);
  sw_options_free(o);
  return 0;
}
