/* SPDX-License-Identifier: Apache-2.0 */
/* StatisticNode: per-second and per-minute metrics plus requests in flight. */
#include <stdlib.h>
#include <string.h>

#include "node.h"

#define SW__NODE_CHECK(node)                                                     \
  do {                                                                           \
    if (sw__unlikely((node) == NULL)) return sw__fail(SW_ENULL, "node is NULL"); \
  } while (0)

static uint64_t sw__node_prefix(void) { return 2 * SW_CACHE_LINE; }

int sw__node_geom_from(const sw_options *opts, sw__node_geom *g) {
  int64_t v;
  bool occupiable;
  sw__metric_options(opts, &occupiable, &g->stripes, &g->max_rt);
  sw_options_get(opts, SW_OPT_SECOND_SAMPLE_COUNT, &v);
  g->second_n = (int32_t)v;
  sw_options_get(opts, SW_OPT_SECOND_INTERVAL_MS, &g->second_interval);
  sw_options_get(opts, SW_OPT_MINUTE_SAMPLE_COUNT, &v);
  g->minute_n = (int32_t)v;
  sw_options_get(opts, SW_OPT_MINUTE_INTERVAL_MS, &g->minute_interval);
  sw_options_get(opts, SW_OPT_OCCUPY_TIMEOUT_MS, &g->occupy_timeout);
  return sw__node_geom_validate(g);
}

int sw__node_geom_validate(const sw__node_geom *g) {
  if (!sw__is_pow2(g->stripes) || g->stripes > SW__MAX_STRIPES || g->max_rt < 1 ||
      g->occupy_timeout < 0)
    return sw__fail(SW_ERANGE, "stripes=%u, max RT %lld, occupy timeout %lld: out of range",
                    g->stripes, (long long)g->max_rt, (long long)g->occupy_timeout);
  int rc = sw__metric_validate(g->second_n, g->second_interval, g->stripes);
  if (rc < 0) return sw__fail(rc, "per-second array: %s", sw_last_error());
  if ((rc = sw__metric_validate(g->minute_n, g->minute_interval, g->stripes)) < 0)
    return sw__fail(rc, "per-minute array: %s", sw_last_error());
  if (g->occupy_timeout > g->second_interval)
    return sw__fail(SW_ERANGE, "SW_OPT_OCCUPY_TIMEOUT_MS=%lld exceeds the per-second "
                    "interval %lld", (long long)g->occupy_timeout,
                    (long long)g->second_interval);
  return SW_OK;
}

uint64_t sw__node_size(const sw__node_geom *g) {
  return sw__node_prefix() + sw__metric_size(g->second_n, true, g->stripes) +
         sw__metric_size(g->minute_n, false, g->stripes);
}

int sw__node_init(void *mem, const sw__node_geom *g, bool process_shared) {
  sw__node_hdr *h = mem;
  h->occupy_timeout = g->occupy_timeout;
  h->second_off = sw__node_prefix();
  h->minute_off = h->second_off + sw__metric_size(g->second_n, true, g->stripes);
  h->total_size = sw__node_size(g);
  int rc = sw__metric_init((char *)mem + h->second_off, g->second_n, g->second_interval, true,
                           g->stripes, g->max_rt, process_shared);
  if (rc == SW_OK)
    rc = sw__metric_init((char *)mem + h->minute_off, g->minute_n, g->minute_interval, false,
                         g->stripes, g->max_rt, process_shared);
  if (rc == SW_OK) h->magic = SW__NODE_MAGIC;
  return rc;
}

void sw__node_fini(void *mem) {
  sw__node_hdr *h = mem;
  sw__metric_fini((char *)mem + h->second_off);
  sw__metric_fini((char *)mem + h->minute_off);
}

int sw__node_check(const void *mem, const sw__node_geom *g) {
  const sw__node_hdr *h = mem;
  if (h->magic != SW__NODE_MAGIC || h->occupy_timeout != g->occupy_timeout ||
      h->second_off != sw__node_prefix() ||
      h->minute_off != h->second_off + sw__metric_size(g->second_n, true, g->stripes) ||
      h->total_size != sw__node_size(g))
    return sw__fail(SW_ECORRUPT, "node header does not match its geometry");
  int rc = sw__metric_check((const char *)mem + h->second_off, g->second_n, g->second_interval,
                            true, g->stripes, g->max_rt);
  return rc < 0 ? rc
                : sw__metric_check((const char *)mem + h->minute_off, g->minute_n,
                                   g->minute_interval, false, g->stripes, g->max_rt);
}

int sw__node_bind(sw_node *node, void *mem) {
  sw__node_hdr *h = mem;
  memset(node, 0, sizeof *node);
  node->hdr = h;
  node->live = (sw__node_live *)((char *)mem + SW_CACHE_LINE);
  int rc = sw__metric_bind(&node->second, (char *)mem + h->second_off);
  if (rc == SW_OK) rc = sw__metric_bind(&node->minute, (char *)mem + h->minute_off);
  node->second.borrowed = node->minute.borrowed = true;
  return rc;
}

SW_API int sw_node_create(sw_node **out, const sw_options *opts) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  sw__node_geom g;
  int rc = sw__node_geom_from(opts, &g);
  if (rc < 0) return rc;
  uint64_t size = sw__node_size(&g);
  sw_node *node;
  void *mem;
  if ((rc = sw__alloc_pair((void **)&node, sizeof *node, (void **)&mem, size, "node")) < 0) return rc;
  if ((rc = sw__node_init(mem, &g, false)) < 0 || (rc = sw__node_bind(node, mem)) < 0) {
    sw__free(node);
    sw__free(mem);
    return rc;
  }
  node->owns_block = true;
  *out = node;
  return SW_OK;
}

SW_API void sw_node_free(sw_node *node) {
  if (node == NULL || node->borrowed) return; /* a limiter's node belongs to the limiter */
  if (node->owns_block) {
    sw__node_fini(node->hdr);
    sw__free(node->hdr);
  }
  sw__free(node);
}

SW_API sw_metric *sw_node_second_metric(sw_node *node) {
  if (node == NULL) sw__fail(SW_ENULL, "node is NULL");
  return node ? &node->second : NULL;
}
SW_API sw_metric *sw_node_minute_metric(sw_node *node) {
  if (node == NULL) sw__fail(SW_ENULL, "node is NULL");
  return node ? &node->minute : NULL;
}

/* ----------------------------------------------------------------- rates */

static double sw__rate(const sw_node *node, int64_t t, sw_event ev) {
  SW__NODE_CHECK(node);
  int64_t sum = sw_metric_sum_at(&node->second, t, ev);
  return sum < 0 ? (double)sum : (double)sum * 1000.0 / (double)node->second.la.interval;
}

SW_API double sw_node_pass_qps_at(const sw_node *node, int64_t t) {
  return sw__rate(node, t, SW_EVENT_PASS);
}
SW_API double sw_node_block_qps_at(const sw_node *node, int64_t t) {
  return sw__rate(node, t, SW_EVENT_BLOCK);
}
SW_API double sw_node_success_qps_at(const sw_node *node, int64_t t) {
  return sw__rate(node, t, SW_EVENT_SUCCESS);
}
SW_API double sw_node_exception_qps_at(const sw_node *node, int64_t t) {
  return sw__rate(node, t, SW_EVENT_EXCEPTION);
}
SW_API double sw_node_occupied_pass_qps_at(const sw_node *node, int64_t t) {
  return sw__rate(node, t, SW_EVENT_OCCUPIED_PASS);
}
SW_API double sw_node_would_block_qps_at(const sw_node *node, int64_t t) {
  return sw__rate(node, t, SW_EVENT_WOULD_BLOCK);
}
SW_API double sw_node_total_qps_at(const sw_node *node, int64_t t) {
  double pass = sw__rate(node, t, SW_EVENT_PASS);
  return pass < 0 ? pass : pass + sw__rate(node, t, SW_EVENT_BLOCK);
}

SW_API double sw_node_avg_rt_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  int64_t ok = sw_metric_success_at(&node->second, t);
  if (ok <= 0) return (double)ok;
  return (double)sw_metric_rt_at(&node->second, t) / (double)ok;
}

SW_API double sw_node_min_rt_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return (double)sw_metric_min_rt_at(&node->second, t);
}

SW_API double sw_node_max_success_qps_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  int64_t max = sw_metric_max_success_at(&node->second, t);
  if (max < 0) return (double)max;
  return (double)max * node->second.la.n * 1000.0 / (double)node->second.la.interval;
}

SW_API int64_t sw_node_previous_pass_qps_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return sw_metric_previous_window_pass_at(&node->minute, t);
}
SW_API int64_t sw_node_previous_block_qps_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return sw_metric_previous_window_block_at(&node->minute, t);
}

SW_API int64_t sw_node_total_request_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  int64_t pass = sw_metric_pass_at(&node->minute, t);
  return pass < 0 ? pass : sw__sat_add(pass, sw_metric_block_at(&node->minute, t));
}
SW_API int64_t sw_node_total_pass_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return sw_metric_pass_at(&node->minute, t);
}
SW_API int64_t sw_node_total_success_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return sw_metric_success_at(&node->minute, t);
}
SW_API int64_t sw_node_total_exception_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return sw_metric_exception_at(&node->minute, t);
}
SW_API int64_t sw_node_block_request_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return sw_metric_block_at(&node->minute, t);
}

SW_API int64_t sw_node_concurrency(const sw_node *node) {
  SW__NODE_CHECK(node);
  return atomic_load_explicit(&node->live->concurrency, memory_order_relaxed);
}

SW_API int64_t sw_node_waiting_at(const sw_node *node, int64_t t) {
  SW__NODE_CHECK(node);
  return sw_metric_waiting_at(&node->second, t);
}

SW_API int64_t sw_node_occupy_timeout_ms(const sw_node *node) {
  SW__NODE_CHECK(node);
  return node->hdr->occupy_timeout;
}

/* ------------------------------------------------------------- recording */

/* Record one event in both arrays. */
static int sw__both(sw_node *node, int64_t t, sw_event ev, int64_t n) {
  SW__NODE_CHECK(node);
  SW__CHECK_WRITABLE(node);
  int rc = sw_metric_add_at(&node->second, t, ev, n);
  return rc < 0 ? rc : sw_metric_add_at(&node->minute, t, ev, n);
}

SW_API int sw_node_add_pass_at(sw_node *node, int64_t t, int64_t n) {
  return sw__both(node, t, SW_EVENT_PASS, n);
}
SW_API int sw_node_increase_block_at(sw_node *node, int64_t t, int64_t n) {
  return sw__both(node, t, SW_EVENT_BLOCK, n);
}
SW_API int sw_node_increase_exception_at(sw_node *node, int64_t t, int64_t n) {
  return sw__both(node, t, SW_EVENT_EXCEPTION, n);
}
SW_API int sw_node_add_rt_and_success_at(sw_node *node, int64_t t, int64_t rt_ms, int64_t n) {
  if (rt_ms < 0 || rt_ms > INT32_MAX || n < 0 || n > INT32_MAX) /* nothing counted on error */
    return sw__fail(SW_ERANGE, "n=%lld, rt_ms=%lld: both must be in 0..%d", (long long)n,
                    (long long)rt_ms, INT32_MAX);
  int rc = sw__both(node, t, SW_EVENT_SUCCESS, n);
  return rc < 0 ? rc : sw__both(node, t, SW_EVENT_RT, rt_ms);
}

SW_API int sw_node_increase_concurrency(sw_node *node) {
  SW__NODE_CHECK(node);
  SW__CHECK_WRITABLE(node);
  atomic_fetch_add_explicit(&node->live->concurrency, 1, memory_order_relaxed);
  return SW_OK;
}
SW_API int sw_node_decrease_concurrency(sw_node *node) {
  SW__NODE_CHECK(node);
  SW__CHECK_WRITABLE(node);
  return sw__node_leave(node) ? SW_OK : sw__fail(SW_ESTATE, "no request in flight");
}

SW_API int sw_node_add_waiting(sw_node *node, int64_t future_ms, int64_t n) {
  SW__NODE_CHECK(node);
  SW__CHECK_WRITABLE(node);
  return sw_metric_add_waiting(&node->second, future_ms, n);
}

SW_API int sw_node_add_occupied_pass_at(sw_node *node, int64_t t, int64_t n) {
  SW__NODE_CHECK(node);
  SW__CHECK_WRITABLE(node);
  int rc = sw_metric_add_at(&node->minute, t, SW_EVENT_OCCUPIED_PASS, n);
  return rc < 0 ? rc : sw_metric_add_at(&node->minute, t, SW_EVENT_PASS, n);
}

/* ------------------------------------------------------------- borrowing */

SW_API int64_t sw_node_try_occupy_next_at(const sw_node *node, int64_t t, int64_t n,
                                          double threshold) {
  SW__NODE_CHECK(node);
  SW__CHECK_TIME(t);
  if (n < 0 || n > INT32_MAX)
    return sw__fail(SW_ERANGE, "n=%lld is outside 0..%d", (long long)n, INT32_MAX);
  if (!(threshold >= 0 && threshold <= 1e15))
    return sw__fail(SW_ERANGE, "threshold=%g is outside 0..1e15", threshold);
  const sw_metric *sec = &node->second;
  const int64_t wl = sec->la.wl, ws = t - t % wl;
  const int32_t windows = sec->la.n;
  const int64_t timeout = node->hdr->occupy_timeout;
  double max_count = threshold * (double)sec->la.interval / 1000.0;
  int64_t borrow = sw_metric_waiting_at(sec, t);
  if (borrow < 0 || (double)borrow >= max_count) return timeout;
  int64_t pass = sw_metric_pass_at(sec, t);
  /* Sentinel walks `earliest` from the oldest window of the interval up to
   * t; counting windows instead keeps the arithmetic away from overflow. */
  for (int32_t idx = 0; idx < windows; idx++) {
    int64_t earliest = ws - (int64_t)(windows - 1 - idx) * wl;
    if (earliest >= t) break;
    int64_t wait = idx * wl + wl - t % wl;
    if (wait >= timeout) break;
    int64_t window_pass = earliest >= 0 ? sw_metric_window_pass_at(sec, earliest) : 0;
    if ((double)(pass + borrow + n - window_pass) <= max_count) return wait;
    pass -= window_pass;
  }
  return timeout;
}

int64_t sw__node_borrow(sw_node *node, int64_t t, int64_t n, double threshold, bool strict,
                        bool *counted) {
  const int64_t timeout = node->hdr->occupy_timeout;
  for (;;) {
    int64_t wait = sw_node_try_occupy_next_at(node, t, n, threshold);
    if (wait < 0 || wait >= timeout || t > INT64_MAX - wait) return timeout;
    sw__mb_stripe *st = strict ? sw__metric_future_body(&node->second, t + wait) : NULL;
    _Atomic int64_t *word = st ? &st->c[SW_EVENT_PASS] : NULL;
    int64_t c = word ? atomic_load_explicit(word, memory_order_relaxed) : 0;
    /* fast mode, a detached future window, or one already current (sealed):
     * borrow as addWaiting does */
    if (word == NULL || (c & SW__SEALED)) {
      *counted = sw__metric_borrow(&node->second, t + wait, n);
      return wait;
    }
    /* Decide again with the word as read: a CAS from it proves nothing changed. */
    if (sw_node_try_occupy_next_at(node, t, n, threshold) != wait) continue;
    if (atomic_compare_exchange_strong_explicit(word, &c, c + n, memory_order_relaxed,
                                                memory_order_relaxed)) {
      *counted = true;
      return wait;
    }
  }
}

/* ---------------------------------------------------------------- export */

typedef struct sw__since {
  int64_t since, before;
} sw__since;

static int sw__in_export(int64_t start, void *user) {
  const sw__since *s = user;
  return start > s->since && start < s->before;
}

SW_API int sw_node_metrics_at(const sw_node *node, int64_t t, int64_t since_ms,
                              sw_metric_record *out, uint32_t cap) {
  SW__NODE_CHECK(node);
  SW__CHECK_TIME(t);
  if (out == NULL && cap > 0) return sw__fail(SW_ENULL, "out is NULL with cap=%u", cap);
  uint32_t n = (uint32_t)node->minute.la.n;
  sw_metric_record *all = sw__malloc(n * sizeof *all);
  if (all == NULL) return sw__fail(SW_ENOMEM, "metrics of %u windows", n);
  sw__since s = {since_ms, t - t % 1000};
  int count = sw_metric_details_on_condition_at(&node->minute, t, sw__in_export, &s, all, n);
  if (count < 0) {
    sw__free(all);
    return count;
  }
  uint32_t kept = 0;
  for (int i = 0; i < count; i++) {
    const sw_metric_record *r = &all[i];
    if (r->pass || r->block || r->success || r->exception || r->rt || r->occupied_pass ||
        r->would_block) {
      if (kept < cap) out[kept] = *r;
      kept++;
    }
  }
  sw__free(all);
  return (int)kept;
}
