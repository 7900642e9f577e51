/* SPDX-License-Identifier: Apache-2.0 */
/* The process-wide clocks. Windows are placed by sw_now_ms(), durations
 * (pacing, response times) measured by sw_now_ns(). By default the window
 * clock is CLOCK_MONOTONIC_COARSE (a vDSO read of the last tick: about 4 ns,
 * one kernel tick of resolution) and the duration clock CLOCK_MONOTONIC
 * (about 25 ns, nanoseconds). The coarse clock is the precise one truncated
 * to the last tick, so the two agree to within a tick and never cross. */
#include <time.h>

#include "internal.h"

_Atomic(sw_clock_fn) sw__custom_fn;
void *_Atomic sw__custom_user;
atomic_int sw__window_id = CLOCK_MONOTONIC_COARSE;
static atomic_int sw__duration_id = CLOCK_MONOTONIC;

SW_API int64_t sw_now_ms(void) { return sw__now_ms(); }

SW_API int64_t sw_now_ns(void) {
  sw_clock_fn fn = atomic_load_explicit(&sw__custom_fn, memory_order_acquire);
  if (sw__unlikely(fn != NULL)) {
    int64_t ms = fn(atomic_load_explicit(&sw__custom_user, memory_order_relaxed)), ns;
    if (ms < 0) return ms < INT64_MIN / 1000000 ? INT64_MIN : ms * 1000000;
    return __builtin_mul_overflow(ms, 1000000, &ns) ? INT64_MAX : ns;
  }
  struct timespec ts;
  clock_gettime(atomic_load_explicit(&sw__duration_id, memory_order_relaxed), &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

SW_API int sw_clock_use(uint32_t source) {
  int window, duration;
  switch (source) {
  case SW_CLOCK_DEFAULT:
    window = CLOCK_MONOTONIC_COARSE, duration = CLOCK_MONOTONIC;
    break;
  case SW_CLOCK_MONOTONIC:
    window = duration = CLOCK_MONOTONIC;
    break;
  case SW_CLOCK_MONOTONIC_COARSE:
    window = duration = CLOCK_MONOTONIC_COARSE;
    break;
  default:
    return sw__fail(SW_EINVAL, "clock source %u is unknown (SW_CLOCK_MONOTONIC=0, "
                    "SW_CLOCK_MONOTONIC_COARSE=1, SW_CLOCK_DEFAULT=2)", source);
  }
  atomic_store(&sw__window_id, window);
  atomic_store(&sw__duration_id, duration);
  return SW_OK;
}

SW_API int64_t sw_clock_resolution_ns(void) {
  if (atomic_load_explicit(&sw__custom_fn, memory_order_acquire) != NULL) return 1000000;
  struct timespec ts;
  if (clock_getres(atomic_load_explicit(&sw__window_id, memory_order_relaxed), &ts) != 0)
    return sw__fail(SW_EIO, "clock_getres of the window clock failed");
  int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  return ns > 1000000 ? ns : 1000000; /* sw_now_ms() counts whole milliseconds */
}

SW_API int sw_clock_set_custom(sw_clock_fn fn, void *user) {
  atomic_store_explicit(&sw__custom_user, user, memory_order_relaxed);
  atomic_store_explicit(&sw__custom_fn, fn, memory_order_release);
  return SW_OK;
}
