/* SPDX-License-Identifier: Apache-2.0 */
/* The metric bucket: Sentinel's MetricBucket (PASS, BLOCK, EXCEPTION, SUCCESS,
 * RT, OCCUPIED_PASS and min RT), striped over cache lines so that threads
 * adding to one window do not fight over one line (Java's LongAdder does the
 * same). A bucket is `stripes` consecutive sw__mb_stripe; a reader sums them.
 */
#ifndef SW_METRIC_BUCKET_H
#define SW_METRIC_BUCKET_H

#include "leap_array.h"

typedef struct sw__mb_stripe {
  _Atomic int64_t c[SW_EVENT_COUNT];
  _Atomic int64_t min_rt;
} sw__mb_stripe;

_Static_assert(sizeof(sw__mb_stripe) == SW_CACHE_LINE, "one stripe per cache line");

#define SW__MAX_STRIPES 64u
#define SW__DEFAULT_STRIPES 4u
#define SW__DEFAULT_MAX_RT 5000
/* Set in a future bucket's PASS once its borrowed count was carried into the
 * main window: later borrowers then add to the main window instead. */
#define SW__SEALED (INT64_C(1) << 62)

/* Context of the built-in metric types (NULL means the defaults). */
typedef struct sw__metric_cfg {
  uint32_t stripes; /* power of two */
  int64_t max_rt;
  sw_leap_array *borrow; /* occupiable: the future array it borrows from */
} sw__metric_cfg;

extern const sw_bucket_type sw__metric_type;
extern const sw_bucket_type sw__occupiable_type;
extern const sw_bucket_type sw__future_type;

static inline uint32_t sw__mb_stripes(const sw__metric_cfg *cfg) {
  return cfg ? cfg->stripes : 1u;
}

/* The stripe of bucket that the thread with stripe hint h adds to. */
static inline sw__mb_stripe *sw__mb_stripe_of(const sw__metric_cfg *cfg, void *bucket,
                                              uint32_t h) {
  return (sw__mb_stripe *)bucket + (h & (sw__mb_stripes(cfg) - 1));
}

static inline sw__mb_stripe *sw__mb_my_stripe(const sw__metric_cfg *cfg, void *bucket) {
  return sw__mb_stripe_of(cfg, bucket, sw__stripe_hint());
}

static inline void sw__mb_add(const sw__metric_cfg *cfg, void *bucket, sw_event ev, int64_t n) {
  atomic_fetch_add_explicit(&sw__mb_my_stripe(cfg, bucket)->c[ev], n, memory_order_relaxed);
}

/* Lower a stripe's min RT to rt (exact, unlike Sentinel's racy update). */
static inline void sw__mb_stripe_min(sw__mb_stripe *st, int64_t rt) {
  int64_t cur = atomic_load_explicit(&st->min_rt, memory_order_relaxed);
  while (rt < cur && !atomic_compare_exchange_weak_explicit(&st->min_rt, &cur, rt,
                                                            memory_order_relaxed,
                                                            memory_order_relaxed)) {
  }
}

static inline void sw__mb_lower_min_rt(const sw__metric_cfg *cfg, void *bucket, int64_t rt) {
  sw__mb_stripe_min(sw__mb_my_stripe(cfg, bucket), rt);
}

static inline void sw__mb_add_rt(const sw__metric_cfg *cfg, void *bucket, int64_t rt) {
  sw__mb_stripe *st = sw__mb_my_stripe(cfg, bucket);
  atomic_fetch_add_explicit(&st->c[SW_EVENT_RT], rt, memory_order_relaxed);
  sw__mb_stripe_min(st, rt);
}

/* The end of a request in one window: n successes, one RT (and n
 * exceptions), on the stripe of hint h. */
static inline void sw__mb_exit(const sw__metric_cfg *cfg, void *bucket, uint32_t h, int64_t rt,
                               int64_t n, bool error) {
  sw__mb_stripe *st = sw__mb_stripe_of(cfg, bucket, h);
  atomic_fetch_add_explicit(&st->c[SW_EVENT_SUCCESS], n, memory_order_relaxed);
  if (error) atomic_fetch_add_explicit(&st->c[SW_EVENT_EXCEPTION], n, memory_order_relaxed);
  atomic_fetch_add_explicit(&st->c[SW_EVENT_RT], rt, memory_order_relaxed);
  sw__mb_stripe_min(st, rt);
}

/* Sum of an event over the stripes after the first (unrolled: stripes is a
 * power of two). Added modulo 2^64: counts damaged in a shared segment
 * give a wrong sum, never an overflow. */
static inline int64_t sw__mb_sum_tail(uint32_t stripes, const void *bucket, sw_event ev) {
  const sw__mb_stripe *st = bucket;
#define SW__LD(i) (uint64_t)atomic_load_explicit(&st[i].c[ev], memory_order_relaxed)
  if (sw__likely(stripes == SW__DEFAULT_STRIPES))
    return (int64_t)(SW__LD(1) + SW__LD(2) + SW__LD(3));
  if (stripes == 1) return 0;
  uint64_t sum = SW__LD(1);
  if (stripes == 2) return (int64_t)sum;
  sum += SW__LD(2) + SW__LD(3);
  for (uint32_t i = 4; i < stripes; i += 2) sum += SW__LD(i) + SW__LD(i + 1);
  return (int64_t)sum;
#undef SW__LD
}

/* Sum of an event over the stripes (modulo 2^64, as above). */
static inline int64_t sw__mb_sum(uint32_t stripes, const void *bucket, sw_event ev) {
  const sw__mb_stripe *st = bucket;
  return (int64_t)((uint64_t)atomic_load_explicit(&st[0].c[ev], memory_order_relaxed) +
                   (uint64_t)sw__mb_sum_tail(stripes, bucket, ev));
}

/* Same, for any metric bucket: a sealed future PASS reads unsealed. */
static inline int64_t sw__mb_get(const sw__metric_cfg *cfg, const void *bucket, sw_event ev) {
  int64_t sum = sw__mb_sum(sw__mb_stripes(cfg), bucket, ev);
  return ev == SW_EVENT_PASS ? sum & ~SW__SEALED : sum;
}

static inline int64_t sw__mb_min_rt(const sw__metric_cfg *cfg, const void *bucket) {
  const sw__mb_stripe *st = bucket;
  int64_t min = INT64_MAX;
  for (uint32_t i = 0, k = sw__mb_stripes(cfg); i < k; i++) {
    int64_t v = atomic_load_explicit(&st[i].min_rt, memory_order_relaxed);
    min = v < min ? v : min;
  }
  return min;
}

/* Add n borrowed passes to a future bucket: false if its count was already
 * carried into the main array (sealed: the caller adds there). */
bool sw__future_add(sw__mb_stripe *st, int64_t n);

#endif /* SW_METRIC_BUCKET_H */
