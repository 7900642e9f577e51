/* What every benchmark program shares. */
#ifndef SW_BENCH_H
#define SW_BENCH_H

#include <time.h>

/* Monotonic seconds, for wall-clock figures. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif /* SW_BENCH_H */
