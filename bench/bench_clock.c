/* SPDX-License-Identifier: Apache-2.0 */
/* The clocks: ns per read of each source, and how far the window clock
 * (sw_now_ms, coarse by default) runs behind CLOCK_MONOTONIC.
 * Usage: bench_clock read SOURCE OPS   SOURCE: default | monotonic | coarse | ns
 *        bench_clock lag SECONDS
 * Prints one line, e.g. clock=default ops=... ns_per_read=...
 * or clock=lag samples=... min_ms=... p50_ms=... p99_ms=... max_ms=... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sw/sw.h>

#include "bench.h"

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Kept out of line so callgrind --toggle-collect=run_case sees only the reads. */
__attribute__((noinline)) int64_t run_case(int ns, long ops);
__attribute__((noinline)) int64_t run_case(int ns, long ops) {
  int64_t sink = 0;
  if (ns)
    for (long i = 0; i < ops; i++) sink += sw_now_ns();
  else
    for (long i = 0; i < ops; i++) sink += sw_now_ms();
  return sink;
}

static int read_case(const char *source, long ops) {
  if (strcmp(source, "monotonic") == 0) sw_clock_use(SW_CLOCK_MONOTONIC);
  else if (strcmp(source, "coarse") == 0) sw_clock_use(SW_CLOCK_MONOTONIC_COARSE);
  else if (strcmp(source, "default") != 0 && strcmp(source, "ns") != 0) return 2;
  double t0 = now_s();
  int64_t sink = run_case(strcmp(source, "ns") == 0, ops);
  double dt = now_s() - t0;
  /* sw_clock_resolution_ns is the window clock's; sw_now_ns reads CLOCK_MONOTONIC */
  struct timespec res;
  clock_getres(CLOCK_MONOTONIC, &res);
  long long resolution = strcmp(source, "ns") == 0 ? res.tv_sec * 1000000000LL + res.tv_nsec
                                                   : (long long)sw_clock_resolution_ns();
  printf("clock=%s ops=%ld ns_per_read=%.2f resolution_ns=%lld%s\n", source, ops,
         dt * 1e9 / (double)ops, resolution, sink == 42 ? " " : "");
  return 0;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Lag of the window clock behind CLOCK_MONOTONIC, sampled every 100 us. */
static int lag_case(double seconds) {
  long cap = (long)(seconds * 10000) + 1, n = 0;
  int64_t *lag = malloc((size_t)cap * sizeof *lag);
  if (lag == NULL) return 1;
  int64_t end = mono_ns() + (int64_t)(seconds * 1e9);
  while (n < cap) {
    int64_t before = mono_ns(), ms = sw_now_ms();
    if (before > end) break;
    lag[n++] = before - ms * 1000000; /* >= 0: ms is truncated, and never ahead */
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  qsort(lag, (size_t)n, sizeof *lag, cmp64);
  printf("clock=lag samples=%ld min_ms=%.2f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", n,
         lag[0] / 1e6, lag[n / 2] / 1e6, lag[n * 99 / 100] / 1e6, lag[n - 1] / 1e6);
  free(lag);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "read") == 0) {
    int rc = read_case(argv[2], atol(argv[3]));
    if (rc != 2) return rc;
  }
  if (argc == 3 && strcmp(argv[1], "lag") == 0) return lag_case(atof(argv[2]));
  fprintf(stderr, "usage: %s read default|monotonic|coarse|ns OPS | lag SECONDS\n", argv[0]);
  return 2;
}
