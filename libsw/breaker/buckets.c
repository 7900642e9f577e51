/* SPDX-License-Identifier: Apache-2.0 */
/* The circuit breakers' bucket types, written as any plugin writes one: this
 * file includes only <sw/plugin.h> and fills two sw_bucket_type vtables
 * (the steps of examples/plugin/histogram.c). libsw registers them at start
 * as "sw.breaker.slow" (Sentinel's SlowRequestCounter: total and slow
 * requests) and "sw.breaker.error" (SimpleErrorCounter: total and failed
 * requests); anyone can also make leap arrays of them by name.
 *
 * One window holds two counters. They live in memory the host owns (the
 * heap or a shared segment), so they are plain atomics and no pointers. */
#include <stdatomic.h>
#include <stdint.h>

#include <sw/plugin.h>

#include "breaker.h"

/* Step 1: the bucket. Field 0 counts completed requests, field 1 the bad
 * ones among them (slow, or failed). */
typedef struct sw__brk_bucket {
  _Atomic int64_t count[2];
} sw__brk_bucket;

_Static_assert(sizeof(sw__brk_bucket) == 2 * sizeof(int64_t), "two counters");

static void sw__brk_clear(sw__brk_bucket *b) {
  atomic_store_explicit(&b->count[0], 0, memory_order_relaxed);
  atomic_store_explicit(&b->count[1], 0, memory_order_relaxed);
}

/* Step 2: the two required callbacks (Sentinel's newEmptyBucket and
 * resetWindowValue). */
static void sw__brk_new_empty(void *ctx, void *bucket, int64_t time_ms) {
  (void)ctx;
  (void)time_ms;
  sw__brk_clear(bucket);
}

static void sw__brk_reset_to(void *ctx, sw_window *window, int64_t start_ms) {
  (void)ctx;
  (void)start_ms;
  sw__brk_clear(window->bucket);
}

/* Step 3: generic access by field. */
static void sw__brk_add(void *ctx, void *bucket, uint32_t field, int64_t n) {
  (void)ctx;
  atomic_fetch_add_explicit(&((sw__brk_bucket *)bucket)->count[field & 1], n,
                            memory_order_relaxed);
}

static int64_t sw__brk_get(void *ctx, const void *bucket, uint32_t field) {
  (void)ctx;
  return atomic_load_explicit(&((const sw__brk_bucket *)bucket)->count[field & 1],
                              memory_order_relaxed);
}

static const char *const sw__brk_slow_fields[2] = {"total", "slow"};
static const char *const sw__brk_error_fields[2] = {"total", "error"};

/* Step 4: the vtables. */
const sw_bucket_type sw__brk_slow_type = {
    .abi_version = SW_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sw_bucket_type),
    .name = "sw.breaker.slow",
    .bucket_size = sizeof(sw__brk_bucket),
    .bucket_align = _Alignof(sw__brk_bucket),
    .new_empty_bucket = sw__brk_new_empty,
    .reset_window_to = sw__brk_reset_to,
    .field_count = 2,
    .field_names = sw__brk_slow_fields,
    .add = sw__brk_add,
    .get = sw__brk_get,
};

const sw_bucket_type sw__brk_error_type = {
    .abi_version = SW_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sw_bucket_type),
    .name = "sw.breaker.error",
    .bucket_size = sizeof(sw__brk_bucket),
    .bucket_align = _Alignof(sw__brk_bucket),
    .new_empty_bucket = sw__brk_new_empty,
    .reset_window_to = sw__brk_reset_to,
    .field_count = 2,
    .field_names = sw__brk_error_fields,
    .add = sw__brk_add,
    .get = sw__brk_get,
};

/* Step 5 of a plugin (its entry point) is libsw's registry here:
 * bucket_types.c registers both vtables with the built-in types. Sentinel
 * resets a breaker's windows when it closes; a vtable has no member for
 * that, so the breaker, which owns this type, clears its buckets with this. */
void sw__brk_bucket_clear(void *bucket) { sw__brk_clear(bucket); }
