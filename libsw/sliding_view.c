/* SPDX-License-Identifier: Apache-2.0 */
/* sentinel-golang's SlidingWindowMetric: a read-only view with its own
 * (sample_count, interval) over a metric's larger leap array. */
#include <stdlib.h>

#include "metric.h"

struct sw_sliding_view {
  const sw_metric *real;
  int64_t interval;
  int64_t window_length; /* the view's own: interval / sample_count */
};

SW_API int sw_sliding_view_create(sw_sliding_view **out, const sw_metric *real,
                                  int32_t sample_count, int64_t interval_ms) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(real, "real metric");
  if (sample_count <= 0 || interval_ms <= 0 || interval_ms % sample_count != 0)
    return sw__fail(SW_ESIZE, "view sample_count=%d, interval_ms=%lld: both must be > 0 "
                    "and the count must divide the interval", sample_count,
                    (long long)interval_ms);
  const sw_leap_array *la = &real->la;
  if (la->interval % interval_ms != 0)
    return sw__fail(SW_EGEOMETRY, "view interval_ms=%lld does not divide the real interval "
                    "%lld", (long long)interval_ms, (long long)la->interval);
  if ((interval_ms / sample_count) % la->wl != 0)
    return sw__fail(SW_EGEOMETRY, "view window length %lld is not a multiple of the real "
                    "window length %lld", (long long)(interval_ms / sample_count),
                    (long long)la->wl);
  sw_sliding_view *v = sw__malloc(sizeof *v);
  if (v == NULL) return sw__fail(SW_ENOMEM, "sliding view");
  *v = (sw_sliding_view){real, interval_ms, interval_ms / sample_count};
  *out = v;
  return SW_OK;
}

SW_API void sw_sliding_view_free(sw_sliding_view *v) { sw__free(v); }

/* getBucketStartRange: real windows whose start is in [lo, hi]. */
typedef struct sw__range {
  int64_t lo, hi;
} sw__range;

static int sw__in_range(int64_t start, void *user) {
  const sw__range *r = user;
  return start >= r->lo && start <= r->hi;
}

/* Real windows of the view's interval ending at t (borrowed-only windows of
 * an occupiable metric included, as its sums include them); returns the count. */
static int sw__view_windows(const sw_sliding_view *v, int64_t t, sw__mwin *out) {
  const sw_leap_array *la = &v->real->la;
  sw__range r;
  r.hi = t - t % la->wl;
  r.lo = r.hi - v->interval + la->wl;
  return sw__metric_collect(v->real, SW__SEL_CONDITION, t, sw__in_range, &r, out,
                            2 * (uint32_t)la->n);
}

#define SW__VIEW_FOLD(v, t, body)                                              \
  do {                                                                         \
    sw__mwin stack_[64], *w_ = stack_;                                         \
    uint32_t n_ = 2 * (uint32_t)(v)->real->la.n;                               \
    if (n_ > 64 && (w_ = sw__malloc(n_ * sizeof *w_)) == NULL)                 \
      return sw__fail(SW_ENOMEM, "view over %u windows", n_);                  \
    int count_ = sw__view_windows(v, t, w_);                                   \
    for (int i_ = 0; i_ < count_; i_++) {                                      \
      const void *bucket = w_[i_].bucket;                                      \
      const sw__metric_cfg *cfg = w_[i_].cfg;                                  \
      body;                                                                    \
    }                                                                          \
    if (w_ != stack_) sw__free(w_);                                            \
    if (count_ < 0) return count_;                                             \
  } while (0)

#define SW__VIEW_CHECK(v, t, event)                                            \
  SW__CHECK_NULL(v, "sliding view");                                           \
  SW__CHECK_TIME(t);                                                           \
  if ((unsigned)(event) >= SW_EVENT_COUNT)                                     \
    return sw__fail(SW_ERANGE, "event=%d is not a sw_event", (int)(event))

SW_API int64_t sw_sliding_view_sum_at(const sw_sliding_view *v, int64_t t, sw_event event) {
  SW__VIEW_CHECK(v, t, event);
  int64_t sum = 0;
  SW__VIEW_FOLD(v, t, sum = sw__sat_add(sum, sw__mb_get(cfg, bucket, event)));
  return sum;
}

SW_API double sw_sliding_view_qps_at(const sw_sliding_view *v, int64_t t, sw_event event) {
  int64_t sum = sw_sliding_view_sum_at(v, t, event);
  return sum < 0 ? (double)sum : (double)sum * 1000.0 / (double)v->interval;
}

SW_API double sw_sliding_view_previous_qps_at(const sw_sliding_view *v, int64_t t,
                                              sw_event event) {
  SW__VIEW_CHECK(v, t, event);
  return t < v->window_length ? 0.0 : sw_sliding_view_qps_at(v, t - v->window_length, event);
}

SW_API int64_t sw_sliding_view_max_of_single_bucket_at(const sw_sliding_view *v, int64_t t,
                                                       sw_event event) {
  SW__VIEW_CHECK(v, t, event);
  int64_t max = 0;
  SW__VIEW_FOLD(v, t, {
    int64_t x = sw__mb_get(cfg, bucket, event);
    max = x > max ? x : max;
  });
  return max;
}

SW_API int64_t sw_sliding_view_min_rt_at(const sw_sliding_view *v, int64_t t) {
  SW__VIEW_CHECK(v, t, 0);
  int64_t min = v->real->cfg.max_rt;
  SW__VIEW_FOLD(v, t, {
    int64_t x = sw__mb_min_rt(cfg, bucket);
    min = x < min ? x : min;
  });
  return min > 1 ? min : 1;
}

SW_API double sw_sliding_view_avg_rt_at(const sw_sliding_view *v, int64_t t) {
  int64_t rt = sw_sliding_view_sum_at(v, t, SW_EVENT_RT);
  if (rt < 0) return (double)rt;
  int64_t ok = sw_sliding_view_sum_at(v, t, SW_EVENT_SUCCESS);
  return ok > 0 ? (double)rt / (double)ok : 0.0;
}

SW_API int sw_sliding_view_second_metrics_on_condition_at(const sw_sliding_view *v,
                                                          int64_t t,
                                                          sw_time_predicate pred,
                                                          void *user,
                                                          sw_metric_record *out,
                                                          uint32_t cap) {
  SW__VIEW_CHECK(v, t, 0);
  if (out == NULL && cap > 0) return sw__fail(SW_ENULL, "out is NULL with cap=%u", cap);
  const sw_metric *m = v->real;
  sw__mwin stack[64], *w = stack;
  uint32_t n = 2 * (uint32_t)m->la.n;
  if (n > 64 && (w = sw__malloc(n * sizeof *w)) == NULL)
    return sw__fail(SW_ENOMEM, "view over %u windows", n);
  int count = sw__metric_collect(m, SW__SEL_CONDITION, t, pred, user, w, n);
  if (count < 0) {
    if (w != stack) sw__free(w);
    return count;
  }
  int groups = 0;
  sw_metric_record cur = {0};
  for (int i = 0; i < count; i++) { /* windows come oldest first: group by second */
    sw_metric_record r;
    sw__metric_record(w[i].cfg, w[i].bucket, w[i].start - w[i].start % 1000, &r);
    if (groups > 0 && r.start_ms == cur.start_ms) {
      cur.pass += r.pass;
      cur.block += r.block;
      cur.exception += r.exception;
      cur.success += r.success;
      cur.rt += r.rt;
      cur.occupied_pass += r.occupied_pass;
      cur.would_block += r.would_block;
      cur.min_rt = r.min_rt < cur.min_rt ? r.min_rt : cur.min_rt;
    } else {
      if (groups > 0 && (uint32_t)groups <= cap) out[groups - 1] = cur;
      cur = r;
      groups++;
    }
  }
  if (groups > 0 && (uint32_t)groups <= cap) out[groups - 1] = cur;
  if (w != stack) sw__free(w);
  return groups;
}
