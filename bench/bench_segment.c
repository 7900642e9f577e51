/* SPDX-License-Identifier: Apache-2.0 */
/* Check-and-count on a heap limiter against the same on a limiter in a
 * shared segment, in 1 or more processes.
 * Usage: bench_segment heap|shm PROCS OPS
 * Prints ns per entry (wall clock; each process runs OPS entries). Under
 * callgrind (1 process), count only run_case (see bench/run.sh). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sw/sw.h>

#include "bench.h"

__attribute__((noinline)) void run_case(sw_limiter *l, long ops);
__attribute__((noinline)) void run_case(sw_limiter *l, long ops) {
  sw_decision d;
  for (long i = 0; i < ops; i++) sw_limiter_entry(l, 1, 0, &d);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s heap|shm PROCS OPS\n", argv[0]);
    return 2;
  }
  bool shm = strcmp(argv[1], "shm") == 0;
  int procs = atoi(argv[2]);
  long ops = atol(argv[3]);
  sw_options *o;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 1e15);
  char name[64];
  snprintf(name, sizeof name, "sw-bench-%d", (int)getpid());
  sw_segment *seg = NULL;
  sw_limiter *l;
  if (shm) {
    if (sw_segment_open(&seg, name, 4, o, SW_SEGMENT_CREATE | SW_SEGMENT_RESET) ||
        sw_registry_get(sw_segment_registry(seg), "bench", &l)) {
      fprintf(stderr, "%s\n", sw_last_error());
      return 1;
    }
  } else if (sw_limiter_create(&l, o)) {
    fprintf(stderr, "%s\n", sw_last_error());
    return 1;
  }
  double t0 = now_s();
  if (procs == 1) {
    run_case(l, ops);
  } else {
    for (int i = 0; i < procs; i++)
      if (fork() == 0) { /* a heap limiter is copied: each process has its own */
        run_case(l, ops);
        _exit(0);
      }
    for (int i = 0; i < procs; i++) wait(NULL);
  }
  double dt = now_s() - t0;
  printf("storage=%s procs=%d ops=%ld ns_per_entry=%.1f mentries_total=%.2f\n", argv[1], procs,
         ops, dt * 1e9 / (double)ops, (double)ops * procs / dt / 1e6);
  if (shm) {
    sw_segment_close(seg);
    sw_segment_unlink(name);
  } else {
    sw_limiter_free(l);
  }
  sw_options_free(o);
  return 0;
}
