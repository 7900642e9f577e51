/* SPDX-License-Identifier: Apache-2.0 */
/* Flow rules on a node: Sentinel's DefaultController (with prioritized
 * borrowing), RateLimiterController (pacing), WarmUpController and
 * WarmUpRateLimiterController, returning a decision instead of sleeping. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admit.h"
#include "limiter.h"
#include "receipt.h"

#define SW__LIMITER_CHECK(l)                                                        \
  do {                                                                              \
    if (sw__unlikely((l) == NULL)) return sw__fail(SW_ENULL, "limiter is NULL");    \
  } while (0)

/* ------------------------------------------------------------------ rules */

void sw__limiter_rule(const sw_limiter *l, sw__rule *r) { sw__rule_box_load(&l->hdr->rule, r, true); }

/* ---------------------------------------------------------------- layout */

static uint64_t sw__limiter_prefix(void) {
  return sw__round_up(sizeof(sw__limiter_hdr), SW_CACHE_LINE) +
         sw__round_up(sizeof(sw__limiter_state), SW_CACHE_LINE);
}

/* A limiter's id (the tag of its receipts): distinct for limiters made at
 * once by threads and processes, and for one remade at the same place. */
static uint64_t sw__limiter_new_id(const void *mem) {
  static _Atomic uint64_t made;
  uint64_t x = (uint64_t)(uintptr_t)mem ^ (uint64_t)getpid() << 40 ^ (uint64_t)sw_now_ns() ^
               atomic_fetch_add(&made, 1) * UINT64_C(0x9e3779b97f4a7c15);
  x = (x ^ x >> 30) * UINT64_C(0xbf58476d1ce4e5b9); /* splitmix64's finaliser */
  x = (x ^ x >> 27) * UINT64_C(0x94d049bb133111eb);
  return x ^ x >> 31;
}

uint64_t sw__limiter_size(const sw__node_geom *g) {
  return sw__limiter_prefix() + sw__node_size(g);
}

int sw__limiter_init(void *mem, const sw__node_geom *g, const sw__rule *r,
                     bool process_shared) {
  sw__limiter_hdr *h = mem;
  int rc = sw__robust_init(&h->rule_lock, process_shared);
  if (rc < 0) return rc;
  h->node_off = sw__limiter_prefix();
  h->total_size = sw__limiter_size(g);
  sw__rule_box_store(&h->rule, r);
  sw__limiter_state *st = (sw__limiter_state *)((char *)mem + h->node_off -
                                                sw__round_up(sizeof *st, SW_CACHE_LINE));
  atomic_store(&st->latest_passed, SW__PACING_NONE); /* Sentinel's -1 ms: the first passes */
  st->id = sw__limiter_new_id(mem);
  if ((rc = sw__node_init((char *)mem + h->node_off, g, process_shared)) < 0) return rc;
  h->magic = SW__LIMITER_MAGIC;
  return SW_OK;
}

void sw__limiter_fini(void *mem) {
  sw__limiter_hdr *h = mem;
  pthread_mutex_destroy(&h->rule_lock);
  sw__node_fini((char *)mem + h->node_off);
}

int sw__limiter_check(const void *mem, const sw__node_geom *g) {
  const sw__limiter_hdr *h = mem;
  if (h->magic != SW__LIMITER_MAGIC || h->node_off != sw__limiter_prefix() ||
      h->total_size != sw__limiter_size(g))
    return sw__fail(SW_ECORRUPT, "limiter header does not match its geometry");
  return sw__node_check((const char *)mem + h->node_off, g);
}

void sw__limiter_set_readonly(sw_limiter *l) {
  l->readonly = l->node.readonly = true;
  sw_metric *m[2] = {&l->node.second, &l->node.minute};
  for (int i = 0; i < 2; i++) m[i]->readonly = m[i]->la.readonly = m[i]->future.readonly = true;
}

int sw__limiter_bind(sw_limiter *l, void *mem) {
  sw__limiter_hdr *h = mem;
  memset(l, 0, sizeof *l);
  l->hdr = h;
  l->st = (sw__limiter_state *)((char *)mem + h->node_off -
                                 sw__round_up(sizeof *l->st, SW_CACHE_LINE));
  int rc = sw__node_bind(&l->node, (char *)mem + h->node_off);
  l->node.borrowed = true;
  l->receipt_tag = sw__receipt_tag(l->st->id);
  l->receipt_own_tag = sw__receipt_own_tag(l->st->id);
  l->receipt_mask = sw__receipt_mask(l->st->id);
  return rc;
}

SW_API int sw_limiter_create(sw_limiter **out, const sw_options *opts) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  sw__node_geom g;
  sw__rule r;
  int rc = sw__node_geom_from(opts, &g);
  if (rc < 0 || (rc = sw__rule_from(opts, &r)) < 0) return rc;
  uint64_t size = sw__limiter_size(&g);
  sw_limiter *l;
  void *mem;
  if ((rc = sw__alloc_pair((void **)&l, sizeof *l, (void **)&mem, size, "limiter")) < 0) return rc;
  if ((rc = sw__limiter_init(mem, &g, &r, false)) < 0 || (rc = sw__limiter_bind(l, mem)) < 0) {
    sw__free(l);
    sw__free(mem);
    return rc;
  }
  l->owns_block = true;
  *out = l;
  return SW_OK;
}

void sw__limiter_release(sw_limiter *l) {
  sw_cluster *c = atomic_load(&l->cluster);
  /* in a forked child the cluster's lock may be held by a thread that does
   * not exist there, and no refiller runs: nothing to wait for */
  if (c && l->cluster_pid == getpid()) sw_cluster_remove(c, l);
}

SW_API void sw_limiter_free(sw_limiter *l) {
  if (l == NULL || l->borrowed) return; /* a registry's limiter belongs to the registry */
  sw__limiter_release(l);
  if (l->owns_block) {
    sw__limiter_fini(l->hdr);
    sw__free(l->hdr);
  }
  sw__free(l);
}

SW_API sw_node *sw_limiter_node(sw_limiter *l) {
  if (l == NULL) sw__fail(SW_ENULL, "limiter is NULL");
  return l ? &l->node : NULL;
}

/* Write a new rule (or, with r NULL, the current one with dry_run set),
 * under the rule lock. A writer that died mid-write left its copy
 * unpublished: readers never saw it, and this write fills it again whole. */
static int sw__rule_write(sw_limiter *l, const sw__rule *r, int dry_run) {
  int rc = sw__robust_lock(&l->hdr->rule_lock, NULL, NULL, "rule", SW__WRITE_LOCK_MS);
  if (rc < 0) return rc;
  sw__rule old, next;
  sw__rule_box_load(&l->hdr->rule, &old, true);
  next = r ? *r : old;
  if (!r) next.dry_run = (int16_t)dry_run;
  if (old.behavior != next.behavior) { /* a new controller, as Sentinel builds one */
    atomic_store(&l->st->latest_passed, SW__PACING_NONE);
    atomic_store(&l->st->stored_tokens, 0);
    atomic_store(&l->st->last_filled, 0);
  }
  sw__rule_box_store(&l->hdr->rule, &next);
  pthread_mutex_unlock(&l->hdr->rule_lock);
  return SW_OK;
}

SW_API int sw_limiter_set_rule(sw_limiter *l, const sw_options *opts) {
  SW__LIMITER_CHECK(l);
  SW__CHECK_WRITABLE(l);
  sw__rule r;
  int rc = sw__rule_from(opts, &r);
  return rc < 0 ? rc : sw__rule_write(l, &r, -1);
}

SW_API int sw_limiter_set_dry_run(sw_limiter *l, int on) {
  SW__LIMITER_CHECK(l);
  SW__CHECK_WRITABLE(l);
  if (on != 0 && on != 1) return sw__fail(SW_EINVAL, "dry-run on=%d: want 0 or 1", on);
  return sw__rule_write(l, NULL, on);
}

SW_API int sw_limiter_get_rule(const sw_limiter *l, sw_options *opts) {
  SW__LIMITER_CHECK(l);
  SW__CHECK_NULL(opts, "options");
  sw__rule r;
  sw__rule_box_load(&l->hdr->rule, &r, true);
  sw__rule_to(&r, opts);
  return SW_OK;
}

/* --------------------------------------------------------------- warm-up */

/* Sentinel's WarmUpController.coolDownTokens and syncToken. */
static int64_t sw__cool_down(const sw__rule *r, int64_t last, int64_t now, int64_t pass_qps,
                             int64_t old) {
  int64_t cold = r->cold_factor > 1 ? r->cold_factor : 3; /* a rule read from a segment */
  if (old < r->warning_token ||
      (old > r->warning_token && pass_qps < (int64_t)r->threshold / cold)) {
    double v = (double)old + (double)(now - last) * r->threshold / 1000.0;
    return v < (double)r->max_token ? (int64_t)v : r->max_token; /* min before converting */
  }
  return old < r->max_token ? old : r->max_token;
}

/* One refill per second: the thread that moves last_filled to this second
 * does it (Sentinel swaps the tokens first and can refill twice). */
static void sw__sync_token(const sw__rule *r, sw__limiter_state *st, int64_t t,
                           int64_t pass_qps) {
  int64_t now = t - t % 1000, last = atomic_load(&st->last_filled);
  if (now <= last || !atomic_compare_exchange_strong(&st->last_filled, &last, now)) return;
  int64_t old = atomic_load(&st->stored_tokens);
  int64_t v;
  do {
    v = sw__cool_down(r, last, now, pass_qps, old) - pass_qps;
    if (v < 0) v = 0;
  } while (!atomic_compare_exchange_weak(&st->stored_tokens, &old, v));
}

double sw__warm_rate(const sw__rule *r, int64_t rest) {
  if (rest < r->warning_token) return r->threshold;
  double above = (double)(rest - r->warning_token);
  return nextafter(1.0 / (above * r->slope + 1.0 / r->threshold), INFINITY);
}

/* The QPS the warm-up allows now, after this second's refill. */
static double sw__warm_qps(const sw__rule *r, sw_limiter *l, int64_t t) {
  sw__sync_token(r, l->st, t, sw_node_previous_pass_qps_at(&l->node, t));
  return sw__warm_rate(r, atomic_load(&l->st->stored_tokens));
}

/* ------------------------------------------------------------- decisions */

/* When a QPS check of n units against limit, blocked at t, would pass: the
 * first window boundary at which the interval (with the passes borrowed
 * into its coming windows) leaves room. */
static __attribute__((noinline)) int64_t sw__retry_after(sw_limiter *l, int64_t t, int64_t n,
                                                         double limit) {
  if ((double)n > limit) return -1;
  const sw_metric *sec = &l->node.second;
  const int64_t wl = sec->la.wl;
  int64_t at = t - t % wl;
  for (int32_t k = 0; k < 2 * sec->la.n; k++) {
    if (__builtin_add_overflow(at, wl, &at)) return INT64_MAX - t; /* the end of time */
    int64_t pass = sw_metric_pass_at(sec, at);
    if (pass >= 0 && (double)(int64_t)((double)pass / sec->isec) + (double)n <= limit) break;
  }
  return at - t;
}

/* The same from the window values an admission's fast path read (view):
 * at the k-th boundary after t's window the oldest k windows have left the
 * interval and the borrowed passes of the k windows after t's have come in. */
static __attribute__((noinline)) int64_t sw__retry_after_view(sw_limiter *l, int64_t t,
                                                              int64_t n, double limit,
                                                              const sw__admit_view *v) {
  const sw_metric *sec = &l->node.second;
  const uint32_t nwin = v->nwin;
  const int64_t wl = sec->la.wl, ws = v->ws, last = 2 * (int64_t)nwin;
  if (nwin == 0 || ws > INT64_MAX - last * wl || (double)n > limit)
    return sw__retry_after(l, t, n, limit);
  /* the windows after t's that hold borrowed passes: ws + fj[i] * wl */
  int64_t fj[SW__ADMIT_WINDOWS], fv[SW__ADMIT_WINDOWS];
  uint32_t nf = 0;
  for (uint32_t f = 0; sec->hdr->occupiable && f < nwin; f++) {
    uint64_t seq;
    int64_t start;
    if (sw__la_active(sw__la_slot_at(&sec->future, f), &seq, &start) && start > ws &&
        start <= ws + last * wl) {
      fj[nf] = (start - ws) / wl;
      fv[nf++] = sw__borrowed_for(sec, f, start);
    }
  }
  int64_t kept = v->pass, k = 1;
  for (; k <= last; k++) {
    if (k <= nwin) kept -= v->win[nwin - k]; /* the oldest window leaves */
    int64_t coming = 0;
    for (uint32_t i = 0; i < nf; i++) coming += fj[i] <= k && fj[i] > k - nwin ? fv[i] : 0;
    if ((double)(int64_t)((double)(kept + coming) / sec->isec) + (double)n <= limit) break;
  }
  return ws + (k <= last ? k : last) * wl - t;
}

/* Whole units left under limit (>= 0) once used are taken (a negative
 * used, a count damaged in a segment, leaves all of them). */
static inline int64_t sw__floor_left(double limit, int64_t used) {
  int64_t whole = limit < (double)INT64_MAX ? (int64_t)limit : INT64_MAX; /* limit >= 0 */
  return used < 0 ? whole : whole > used ? whole - used : 0;
}

/* An admission of n at t that the fast path (admit.h) left to the general
 * one: 1 admitted, counted in both arrays where the general path counted
 * it (a strict entry behind a newer window: there), with its receipt. */
static __attribute__((noinline)) int sw__admit_qps_general(sw_limiter *l, const sw__rule *r,
                                                           int64_t t, int64_t n, uint32_t flags,
                                                           double limit, sw__admit_view *view,
                                                           sw_decision *d) {
  int64_t at = t;
  view->nwin = 0;
  int admitted = sw__admit_general(&l->node.second, t, n, limit, r->strict, &view->pass, &at);
  if (!admitted) return 0;
  sw__node_count_pass(&l->node, at, n, true, sw__in_flight(flags));
  sw__receipt_pass(d->receipt, l->receipt_tag, at, n, flags);
  d->receipt[1] |= (int64_t)(admitted >> 1); /* 2: admitted uncounted */
  d->remaining = sw__floor_left(limit, (int64_t)((double)(view->pass + n) / l->node.second.isec));
  return 1;
}

/* Reject behaviour (and warm-up, with its current limit) on the QPS grade. */
static inline __attribute__((always_inline)) void sw__decide_qps(sw_limiter *l,
                                                                 const sw__rule *r, int64_t t,
                                                                 int64_t n, uint32_t flags,
                                                                 double limit, sw_decision *d) {
  sw__admit_view view;
  const double isec = l->node.second.isec;
  sw_metric *sec = &l->node.second;
  int admitted = r->strict ? sw__admit_fast(sec, t, n, limit, true, false, 0, &view)
                           : sw__admit_fast(sec, t, n, limit, false, false, 0, &view);
  if (sw__likely(admitted > 0)) {
    sw__node_count_pass(&l->node, t, n, true, sw__in_flight(flags));
    sw__receipt_pass(d->receipt, l->receipt_tag, t, n, flags);
    d->remaining = sw__floor_left(limit, (int64_t)((double)(view.pass + n) / isec));
    return;
  }
  if (admitted < 0 && sw__admit_qps_general(l, r, t, n, flags, limit, &view, d)) return;
  if ((flags & SW_ENTRY_PRIORITIZED) && r->behavior == SW_BEHAVIOR_REJECT) {
    bool counted;
    int64_t wait = sw__node_borrow(&l->node, t, n, r->threshold, r->strict, &counted);
    if (wait < l->node.hdr->occupy_timeout) {
      sw_node_add_occupied_pass_at(&l->node, t, n);
      if (sw__in_flight(flags))
        atomic_fetch_add_explicit(&l->node.live->concurrency, 1, memory_order_relaxed);
      d->verdict = SW_VERDICT_WAIT;
      d->borrowed = 1;
      d->wait_ms = wait;
      d->receipt[0] = (int64_t)((uint64_t)t ^ l->receipt_mask);
      d->receipt[1] = (int64_t)(sw__receipt_own(l->receipt_own_tag, SW__RC_BORROW, n, flags,
                                                (uint64_t)wait) |
                                (counted ? 0 : SW__RC_UNCOUNTED));
      return;
    }
  }
  d->verdict = SW_VERDICT_BLOCK;
  d->retry_after_ms = sw__retry_after_view(l, t, n, limit, &view);
  d->remaining = sw__floor_left(limit, (int64_t)((double)view.pass / isec));
}

void sw__limiter_decide_qps(sw_limiter *l, const sw__rule *r, int64_t t, int64_t n,
                            uint32_t flags, double limit, sw_decision *d) {
  sw__decide_qps(l, r, t, n, flags, limit, d);
}

static void sw__decide_concurrency(sw_limiter *l, const sw__rule *r, int64_t t, int64_t n,
                                   sw_decision *d) {
  _Atomic int64_t *cur = &l->node.live->concurrency;
  int64_t c = atomic_load_explicit(cur, memory_order_relaxed);
  for (;;) {
    if ((double)c + (double)n > r->threshold) { /* in doubles: c may be any value */
      d->verdict = SW_VERDICT_BLOCK;
      /* Nothing says when a request will finish: suggest the average RT. */
      double rt = sw_node_avg_rt_at(&l->node, t);
      d->retry_after_ms = (double)n > r->threshold ? -1 : rt >= 1 ? (int64_t)ceil(rt) : 1;
      d->remaining = sw__floor_left(r->threshold, c);
      return;
    }
    if (!r->strict) {
      sw__node_count_pass(&l->node, t, n, false, true);
      break;
    }
    if (atomic_compare_exchange_weak_explicit(cur, &c, c + 1, memory_order_relaxed,
                                              memory_order_relaxed)) {
      sw__node_count_pass(&l->node, t, n, false, false); /* the CAS counted it in flight */
      break;
    }
  }
  sw__receipt_pass(d->receipt, l->receipt_tag, t, n, 0);
  d->remaining = sw__floor_left(r->threshold, c + 1);
}

/* Pacing (RateLimiterController, as Sentinel 1.8.7+ computes it): admissions
 * spaced cost apart, queueing up to max_queue_ms, with the cost and the time
 * of the last admission kept in nanoseconds (whole milliseconds would make
 * every rate above 666 QPS wrong and stop limiting above 2000). One CAS on
 * the time of the last admission. */
static void sw__block_never(sw_decision *d) {
  d->verdict = SW_VERDICT_BLOCK;
  d->retry_after_ms = -1;
}

int64_t sw__pacing_cost(int64_t n, double qps) {
  if (qps <= 0) return -1;
  double cost_ns = round((double)n / qps * 1e9);
  return cost_ns > 4e18 ? -1 : (int64_t)cost_ns; /* a tiny rate: centuries away */
}

/* A pacing admission's receipt: its passes at t, and the queue time next
 * it set, to be moved back by its cost if no later entry queued after it. */
static void sw__receipt_pacing(sw_limiter *l, int64_t t, int64_t n, uint32_t flags,
                               int64_t next, sw_decision *d) {
  if (t > SW__PACING_MAX_MS) { /* a custom clock past pacing's range */
    sw__receipt_pass(d->receipt, l->receipt_tag, t, n, flags);
    return;
  }
  int64_t q = next - t * SW__NS_PER_MS; /* the wait, and the lag of the window clock */
  if (q < 0 || q >= SW__RC_Q_NONE) q = SW__RC_Q_NONE; /* clocks too far apart: not kept */
  d->receipt[0] = (int64_t)(((uint64_t)t | (uint64_t)q << SW__RC_T_BITS) ^ l->receipt_mask);
  d->receipt[1] = (int64_t)sw__receipt_own(l->receipt_own_tag, SW__RC_PACING, n, flags,
                                           (uint64_t)q >> (64 - SW__RC_T_BITS));
}

static int sw__decide_pacing(sw_limiter *l, const sw__rule *r, int64_t t, bool precise,
                             int64_t n, uint32_t flags, double qps, sw_decision *d) {
  if (n == 0) {
    sw__node_count_pass(&l->node, t, n, false, sw__in_flight(flags));
    sw__receipt_pass(d->receipt, l->receipt_tag, t, n, flags);
    return SW_OK;
  }
  if (sw__unlikely(!precise && t > SW__PACING_MAX_MS))
    return sw__fail(SW_ETIME, "time %lld ms is beyond the range of pacing (%lld ms, 292 years)",
                    (long long)t, (long long)SW__PACING_MAX_MS);
  const int64_t cost = sw__pacing_cost(n, qps);
  if (cost < 0) {
    sw__block_never(d);
    return SW_OK;
  }
  /* the clock's entries pace on the duration clock: the window clock may
   * advance by whole ticks, which would admit one request per tick */
  const int64_t now = precise ? sw_now_ns() : t * SW__NS_PER_MS,
                max_queue = r->max_queue_ms * SW__NS_PER_MS;
  _Atomic int64_t *latest = &l->st->latest_passed;
  int64_t last = atomic_load(latest), next, wait;
  for (;;) {
    if (__builtin_add_overflow(last, cost, &next)) { /* the queue runs past the end of time */
      sw__block_never(d);
      return SW_OK;
    }
    if (next <= now) {
      next = now;
      wait = 0;
    } else {
      wait = next - now;
      if (wait > max_queue) {
        d->verdict = SW_VERDICT_BLOCK;
        /* the first whole millisecond at which the wait fits the queue */
        d->retry_after_ms = (wait - max_queue + SW__NS_PER_MS - 1) / SW__NS_PER_MS;
        return SW_OK;
      }
    }
    if (atomic_compare_exchange_weak(latest, &last, next)) break;
  }
  sw__node_count_pass(&l->node, t, n, false, sw__in_flight(flags));
  sw__receipt_pacing(l, t, n, flags, next, d);
  d->verdict = wait > 0 ? SW_VERDICT_WAIT : SW_VERDICT_PASS;
  d->wait_ms = (wait + SW__NS_PER_MS / 2) / SW__NS_PER_MS; /* to the nearest ms */
  /* how many more of this size still fit in the queue */
  d->remaining = cost > 0 ? (max_queue - wait) / cost : INT32_MAX;
  return SW_OK;
}

/* Why an entry's arguments were refused (its fast check failed). */
static __attribute__((noinline, cold)) int sw__entry_refused(const sw_limiter *l, int64_t t,
                                                             int64_t n, uint32_t flags,
                                                             const sw_decision *d) {
  SW__LIMITER_CHECK(l);
  SW__CHECK_WRITABLE(l);
  SW__CHECK_NULL(d, "decision");
  SW__CHECK_TIME(t);
  if (n < 0 || n > INT32_MAX)
    return sw__fail(SW_ERANGE, "n=%lld is outside 0..%d", (long long)n, INT32_MAX);
  return sw__fail(SW_EINVAL, "unknown entry flags 0x%x", flags);
}

/* Every rule but the plain reject one (its whole rule loaded). */
static __attribute__((noinline)) int sw__entry_other(sw_limiter *l, int64_t t, bool precise,
                                                     int64_t n, uint32_t flags,
                                                     const sw__rule *r, sw_decision *d) {
  int rc;
  switch (r->behavior) {
  case SW_BEHAVIOR_PACING:
    if ((rc = sw__decide_pacing(l, r, t, precise, n, flags, r->threshold, d)) < 0) return rc;
    break;
  case SW_BEHAVIOR_WARM_UP:
    sw__limiter_decide_qps(l, r, t, n, flags, sw__warm_qps(r, l, t), d);
    break;
  case SW_BEHAVIOR_WARM_UP_PACING:
    if ((rc = sw__decide_pacing(l, r, t, precise, n, flags, sw__warm_qps(r, l, t), d)) < 0) return rc;
    break;
  default: /* a cluster rule */
    sw__decide_cluster(l, r, t, n, flags, d);
    /* its lease admitted: passes counted at t (the local fallback wrote its own) */
    if (d->verdict != SW_VERDICT_BLOCK && d->receipt[1] == 0)
      sw__receipt_pass(d->receipt, l->receipt_tag, t, n, flags);
  }
  return SW_OK;
}

/* An entry at t; precise: t is the window clock's now, and pacing reads
 * the duration clock. The plain reject rule reads only the rule's hot
 * words; the others read the whole rule again. */
static inline __attribute__((always_inline)) int sw__limiter_entry(sw_limiter *l, int64_t t,
                                                                   bool precise, int64_t n,
                                                                   uint32_t flags,
                                                                   sw_decision *d) {
  if (sw__unlikely(l == NULL || l->readonly || d == NULL || t < 0 || (uint64_t)n > INT32_MAX ||
                   (flags & ~(SW_ENTRY_PRIORITIZED | SW_ENTRY_NO_EXIT))))
    return sw__entry_refused(l, t, n, flags, d);
  memset(d, 0, sizeof *d);
  sw__rule r;
  sw__rule_box_load(&l->hdr->rule, &r, false);
  if (sw__unlikely(r.behavior != SW_BEHAVIOR_REJECT || r.cluster)) {
    int rc = sw__entry_other(l, t, precise, n, flags, &r, d);
    if (rc < 0) return rc;
  } else if (sw__likely(r.grade == SW_GRADE_QPS)) {
    sw__decide_qps(l, &r, t, n, flags, r.threshold, d);
  } else if (sw__unlikely(flags & SW_ENTRY_NO_EXIT)) {
    return sw__fail(SW_EINVAL, "SW_ENTRY_NO_EXIT on a concurrency rule: its exits free its "
                    "places");
  } else {
    sw__decide_concurrency(l, &r, t, n, d);
  }
  if (d->verdict != SW_VERDICT_PASS) sw__limiter_settle(l, &r, t, n, flags, d);
  return SW_OK;
}

void sw__limiter_settle(sw_limiter *l, const sw__rule *r, int64_t t, int64_t n, uint32_t flags,
                        sw_decision *d) {
  if (sw__unlikely(r->dry_run) && d->verdict != SW_VERDICT_PASS) {
    /* Shadow mode: whatever the rule says, the request goes ahead; what it
     * would have done stays in the decision (would_block, wait_ms). */
    if (d->verdict == SW_VERDICT_BLOCK) {
      d->would_block = 1;
      sw__node_count(&l->node, t, SW_EVENT_WOULD_BLOCK, n);
      sw__node_count_pass(&l->node, t, n, false, sw__in_flight(flags));
      sw__receipt_pass(d->receipt, l->receipt_tag, t, n, flags);
      d->receipt[1] |= (int64_t)SW__RC_WOULD_BLOCK;
    }
    d->verdict = SW_VERDICT_PASS;
    return;
  }
  if (d->verdict == SW_VERDICT_BLOCK) sw__node_count(&l->node, t, SW_EVENT_BLOCK, n);
}

SW_API int sw_limiter_entry_at(sw_limiter *l, int64_t t, int64_t n, uint32_t flags,
                               sw_decision *d) {
  return sw__limiter_entry(l, t, false, n, flags, d);
}

SW_API int sw_limiter_entry(sw_limiter *l, int64_t n, uint32_t flags, sw_decision *d) {
  return sw__limiter_entry(l, sw__now_ms(), true, n, flags, d);
}

/* Why an exit's arguments were refused (its fast check failed). */
static __attribute__((noinline, cold)) int sw__exit_refused(const sw_limiter *l, int64_t t,
                                                            int64_t rt_ms, int64_t n,
                                                            uint32_t flags) {
  SW__LIMITER_CHECK(l);
  SW__CHECK_WRITABLE(l);
  SW__CHECK_TIME(t);
  if (n < 0 || n > INT32_MAX || rt_ms < 0 || rt_ms > INT32_MAX)
    return sw__fail(SW_ERANGE, "n=%lld, rt_ms=%lld: both must be in 0..%d", (long long)n,
                    (long long)rt_ms, INT32_MAX);
  return sw__fail(SW_EINVAL, "unknown exit flags 0x%x", flags);
}

static inline __attribute__((always_inline)) int sw__limiter_exit(sw_limiter *l, int64_t t,
                                                                  int64_t rt_ms, int64_t n,
                                                                  uint32_t flags) {
  if (sw__unlikely(l == NULL || l->readonly || t < 0 || (uint64_t)n > INT32_MAX ||
                   (uint64_t)rt_ms > INT32_MAX || (flags & ~SW_EXIT_ERROR)))
    return sw__exit_refused(l, t, rt_ms, n, flags);
  if (sw__unlikely(!sw__node_leave(&l->node)))
    return sw__fail(SW_ESTATE, "exit without an entry in flight");
  sw__node_count_exit(&l->node, t, rt_ms, n, flags & SW_EXIT_ERROR);
  return SW_OK;
}

SW_API int sw_limiter_exit_at(sw_limiter *l, int64_t t, int64_t rt_ms, int64_t n,
                              uint32_t flags) {
  return sw__limiter_exit(l, t, rt_ms, n, flags);
}

SW_API int sw_limiter_exit(sw_limiter *l, int64_t rt_ms, int64_t n, uint32_t flags) {
  return sw__limiter_exit(l, sw__now_ms(), rt_ms, n, flags);
}
