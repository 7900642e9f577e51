/* SPDX-License-Identifier: Apache-2.0 */
/* What every benchmark program shares. */
#ifndef SW_BENCH_H
#define SW_BENCH_H

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* Monotonic seconds, for wall-clock figures. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Run fn on each of n jobs laid out stride bytes apart: a single job in
 * this thread (so that callgrind counts it), else one thread each. Returns
 * the wall-clock seconds it took. */
typedef struct bench_thread {
  pthread_t tid;
  void (*fn)(void *);
  void *job;
} bench_thread;

static void *bench_thread_main(void *arg) {
  bench_thread *t = arg;
  t->fn(t->job);
  return NULL;
}

static inline double bench_run(void *jobs, size_t stride, int n, void (*fn)(void *)) {
  double t0 = now_s();
  if (n == 1) {
    fn(jobs);
    return now_s() - t0;
  }
  bench_thread *t = calloc((size_t)n, sizeof *t);
  for (int i = 0; i < n; i++) {
    t[i] = (bench_thread){.fn = fn, .job = (char *)jobs + (size_t)i * stride};
    pthread_create(&t[i].tid, NULL, bench_thread_main, &t[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(t[i].tid, NULL);
  free(t);
  return now_s() - t0;
}

#endif /* SW_BENCH_H */
