/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in metric bucket types, expressed through the public vtable:
 *  sw.metric            Sentinel's BucketLeapArray: windows reset to zero;
 *  sw.metric.occupiable OccupiableBucketLeapArray: a window starts with the
 *                       passes borrowed for it from a sw.metric.future array;
 *  sw.metric.future     FutureBucketLeapArray: deprecated once t >= start. */
#include <string.h>
#include <unistd.h>

#include "metric_bucket.h"

static void sw__mb_clear(const sw__metric_cfg *cfg, void *bucket) {
  sw__mb_stripe *st = bucket;
  int64_t max_rt = cfg ? cfg->max_rt : SW__DEFAULT_MAX_RT;
  for (uint32_t i = 0, k = sw__mb_stripes(cfg); i < k; i++) {
    for (int e = 0; e < SW_EVENT_COUNT; e++)
      atomic_store_explicit(&st[i].c[e], 0, memory_order_relaxed);
    atomic_store_explicit(&st[i].min_rt, max_rt, memory_order_relaxed);
  }
}

static void sw__mb_new(void *ctx, void *bucket, int64_t time_ms) { sw__mb_clear(ctx, bucket); }

static void sw__mb_reset(void *ctx, sw_window *w, int64_t start_ms) {
  sw__mb_clear(ctx, w->bucket);
}

static const char *const sw__mb_field_names[] = {
    "pass", "block", "exception", "success", "rt", "occupied_pass", "would_block", "min_rt"};
static const uint8_t sw__mb_field_kinds[] = {SW_FIELD_SUM, SW_FIELD_SUM, SW_FIELD_SUM,
                                             SW_FIELD_SUM, SW_FIELD_SUM, SW_FIELD_SUM,
                                             SW_FIELD_SUM, SW_FIELD_MIN};

static void sw__mb_field_add(void *ctx, void *bucket, uint32_t field, int64_t n) {
  if (field == SW_FIELD_MIN_RT)
    sw__mb_lower_min_rt(ctx, bucket, n);
  else if (field == SW_EVENT_RT)
    sw__mb_add_rt(ctx, bucket, n);
  else
    sw__mb_add(ctx, bucket, (sw_event)field, n);
}

static int64_t sw__mb_field_get(void *ctx, const void *bucket, uint32_t field) {
  return field == SW_FIELD_MIN_RT ? sw__mb_min_rt(ctx, bucket)
                                  : sw__mb_get(ctx, bucket, (sw_event)field);
}

#define SW__METRIC_TYPE(type_name, new_fn, reset_fn, deprecated_fn)                   \
  {                                                                                  \
    .abi_version = SW_PLUGIN_ABI_VERSION, .struct_size = sizeof(sw_bucket_type),     \
    .name = type_name, .bucket_size = sizeof(sw__mb_stripe),                         \
    .bucket_align = SW_CACHE_LINE, .new_empty_bucket = new_fn,                       \
    .reset_window_to = reset_fn, .is_window_deprecated = deprecated_fn,              \
    .field_count = SW_FIELD_MIN_RT + 1, .field_names = sw__mb_field_names,           \
    .field_kinds = sw__mb_field_kinds, .add = sw__mb_field_add,                      \
    .get = sw__mb_field_get,                                                         \
  }

const sw_bucket_type sw__metric_type =
    SW__METRIC_TYPE(SW_TYPE_METRIC, sw__mb_new, sw__mb_reset, NULL);

/* ----------------------------------------------------------------- future */

static int sw__future_deprecated(void *ctx, int64_t t, const sw_window *w, int64_t interval) {
  return t >= w->start_ms;
}

const sw_bucket_type sw__future_type =
    SW__METRIC_TYPE(SW_TYPE_METRIC_FUTURE, sw__mb_new, sw__mb_reset, sw__future_deprecated);

/* Borrowing and carrying meet on one word, the future bucket's PASS (a
 * future array has one stripe): a borrower adds with CAS unless the word is
 * sealed; the carry seals it with fetch_or and takes what was there. So
 * every borrowed pass is counted exactly once, in one window or the other. */
bool sw__future_add(sw__mb_stripe *st, int64_t n) {
  int64_t cur = atomic_load_explicit(&st->c[SW_EVENT_PASS], memory_order_relaxed);
  do {
    if (cur & SW__SEALED) return false;
  } while (!atomic_compare_exchange_weak_explicit(&st->c[SW_EVENT_PASS], &cur, cur + n,
                                                  memory_order_relaxed, memory_order_relaxed));
  return true;
}

static int64_t sw__future_carry(sw_leap_array *future, int64_t start) {
  if (future == NULL) return 0;
  sw__mb_stripe *st = sw__la_current_body(future, start);
  if (st == NULL) return 0;
  return atomic_fetch_or_explicit(&st->c[SW_EVENT_PASS], SW__SEALED, memory_order_relaxed) &
         ~SW__SEALED;
}

/* ------------------------------------------------------------- occupiable */

/* Sentinel copies every counter of the borrow bucket when a window is created
 * but only PASS when one is reset; a future bucket only ever holds PASS, so
 * libsw carries PASS in both cases. */
static void sw__occupiable_new(void *ctx, void *bucket, int64_t time_ms) {
  const sw__metric_cfg *cfg = ctx;
  sw__mb_clear(cfg, bucket);
  if (cfg && cfg->borrow) {
    int64_t start = time_ms - time_ms % cfg->borrow->wl;
    sw__mb_add(cfg, bucket, SW_EVENT_PASS, sw__future_carry(cfg->borrow, start));
  }
}

static void sw__occupiable_reset(void *ctx, sw_window *w, int64_t start_ms) {
  const sw__metric_cfg *cfg = ctx;
  sw__mb_clear(cfg, w->bucket);
  if (cfg) sw__mb_add(cfg, w->bucket, SW_EVENT_PASS, sw__future_carry(cfg->borrow, start_ms));
}

const sw_bucket_type sw__occupiable_type =
    SW__METRIC_TYPE(SW_TYPE_METRIC_OCCUPIABLE, sw__occupiable_new, sw__occupiable_reset, NULL);

SW_API int64_t sw_metric_bucket_get(const sw_leap_array *la, const void *bucket,
                                    uint32_t field) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_NULL(bucket, "bucket");
  if (la->vt.get != sw__mb_field_get)
    return sw__fail(SW_ETYPE, "leap array holds %s buckets, not sw.metric*", la->vt.name);
  if (field > SW_FIELD_MIN_RT)
    return sw__fail(SW_ERANGE, "field=%u, a metric bucket has %u", field, SW_FIELD_MIN_RT + 1);
  return sw__mb_field_get(la->ctx, bucket, field);
}

