/* The process-wide millisecond clock: CLOCK_MONOTONIC by default, a coarse
 * source or a custom function on request. */
#include <time.h>

#include "internal.h"

static _Atomic(sw_clock_fn) sw__custom_fn;
static void *_Atomic sw__custom_user;
static atomic_int sw__clock_id = CLOCK_MONOTONIC;

SW_API int64_t sw_now_ms(void) {
  sw_clock_fn fn = atomic_load_explicit(&sw__custom_fn, memory_order_acquire);
  if (sw__unlikely(fn != NULL))
    return fn(atomic_load_explicit(&sw__custom_user, memory_order_relaxed));
  struct timespec ts;
  clock_gettime(atomic_load_explicit(&sw__clock_id, memory_order_relaxed), &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

SW_API int sw_clock_use(uint32_t source) {
  switch (source) {
  case SW_CLOCK_MONOTONIC:
    atomic_store(&sw__clock_id, CLOCK_MONOTONIC);
    return SW_OK;
  case SW_CLOCK_MONOTONIC_COARSE:
    atomic_store(&sw__clock_id, CLOCK_MONOTONIC_COARSE);
    return SW_OK;
  default:
    return sw__fail(SW_EINVAL, "clock source %u is unknown (SW_CLOCK_MONOTONIC=0, "
                    "SW_CLOCK_MONOTONIC_COARSE=1)", source);
  }
}

SW_API int sw_clock_set_custom(sw_clock_fn fn, void *user) {
  atomic_store_explicit(&sw__custom_user, user, memory_order_relaxed);
  atomic_store_explicit(&sw__custom_fn, fn, memory_order_release);
  return SW_OK;
}
