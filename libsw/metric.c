/* SPDX-License-Identifier: Apache-2.0 */
/* ArrayMetric: Sentinel's Metric interface over one metric leap array.
 * Reads never write: they select the windows of the interval ending at t by
 * their start, which gives what Sentinel reads after refreshing the current
 * window, without the refresh. */
#include <stdlib.h>
#include <string.h>

#include "admit.h"

#define SW__METRIC_CHECK(m)                                                   \
  do {                                                                        \
    if (sw__unlikely((m) == NULL)) return sw__fail(SW_ENULL, "metric is NULL"); \
  } while (0)

static int sw__check_count(const char *what, int64_t n) {
  if (sw__unlikely(n < 0 || n > INT32_MAX))
    return sw__fail(SW_ERANGE, "%s=%lld is outside 0..%d", what, (long long)n, INT32_MAX);
  return SW_OK;
}

static sw_bucket_type sw__metric_vt(bool occupiable, uint32_t stripes) {
  sw_bucket_type vt = occupiable ? sw__occupiable_type : sw__metric_type;
  vt.bucket_size = stripes * (uint32_t)sizeof(sw__mb_stripe);
  return vt;
}

int sw__metric_validate(int32_t sample_count, int64_t interval_ms, uint32_t stripes) {
  sw_bucket_type vt = sw__metric_vt(false, stripes);
  return sw__la_validate(&vt, sample_count, interval_ms);
}

static uint64_t sw__metric_hdr_size(void) {
  return sw__round_up(sizeof(sw__metric_hdr), SW_CACHE_LINE);
}

uint64_t sw__metric_size(int32_t sample_count, bool occupiable, uint32_t stripes) {
  uint64_t main = sw__la_block_size(sample_count, stripes * (uint32_t)sizeof(sw__mb_stripe));
  uint64_t future = occupiable ? sw__la_block_size(sample_count, sizeof(sw__mb_stripe)) : 0;
  if (main == 0 || (occupiable && future == 0)) return 0;
  return sw__metric_hdr_size() + main + future;
}

int sw__metric_init(void *mem, int32_t sample_count, int64_t interval_ms, bool occupiable,
                    uint32_t stripes, int64_t max_rt, bool process_shared) {
  sw__metric_hdr *h = mem;
  sw_bucket_type vt = sw__metric_vt(occupiable, stripes);
  h->occupiable = occupiable;
  h->stripes = stripes;
  h->max_rt = max_rt;
  h->main_off = sw__metric_hdr_size();
  h->future_off = h->main_off + sw__la_block_size(sample_count, vt.bucket_size);
  h->total_size = sw__metric_size(sample_count, occupiable, stripes);
  int rc = sw__la_block_init((sw__la_block *)((char *)mem + h->main_off), &vt, sample_count,
                             interval_ms, process_shared);
  if (rc == SW_OK && occupiable) {
    rc = sw__la_block_init((sw__la_block *)((char *)mem + h->future_off), &sw__future_type,
                           sample_count, interval_ms, process_shared);
  }
  if (rc == SW_OK) h->magic = SW__METRIC_MAGIC;
  return rc;
}

void sw__metric_fini(void *mem) {
  sw__metric_hdr *h = mem;
  pthread_mutex_destroy(&((sw__la_block *)((char *)mem + h->main_off))->reset_lock);
  if (h->occupiable)
    pthread_mutex_destroy(&((sw__la_block *)((char *)mem + h->future_off))->reset_lock);
}

int sw__metric_check(const void *mem, int32_t sample_count, int64_t interval_ms,
                     bool occupiable, uint32_t stripes, int64_t max_rt) {
  const sw__metric_hdr *h = mem;
  uint32_t bucket = stripes * (uint32_t)sizeof(sw__mb_stripe);
  if (h->magic != SW__METRIC_MAGIC || h->occupiable != occupiable || h->stripes != stripes ||
      h->max_rt != max_rt || h->main_off != sw__metric_hdr_size() ||
      h->future_off != h->main_off + sw__la_block_size(sample_count, bucket) ||
      h->total_size != sw__metric_size(sample_count, occupiable, stripes))
    return sw__fail(SW_ECORRUPT, "metric header does not match its geometry");
  sw_bucket_type vt = sw__metric_vt(occupiable, stripes);
  int rc = sw__la_check((const sw__la_block *)((const char *)mem + h->main_off), &vt,
                        sample_count, interval_ms);
  if (rc == SW_OK && occupiable)
    rc = sw__la_check((const sw__la_block *)((const char *)mem + h->future_off),
                      &sw__future_type, sample_count, interval_ms);
  return rc;
}

int sw__metric_bind(sw_metric *m, void *mem) {
  sw__metric_hdr *h = mem;
  memset(m, 0, sizeof *m);
  m->hdr = h;
  m->cfg = (sw__metric_cfg){h->stripes, h->max_rt, NULL};
  m->fcfg = (sw__metric_cfg){1, h->max_rt, NULL};
  sw_bucket_type vt = sw__metric_vt(h->occupiable, h->stripes);
  int rc = sw__la_bind(&m->la, (sw__la_block *)((char *)mem + h->main_off), &vt, &m->cfg);
  if (rc == SW_OK && h->occupiable) {
    rc = sw__la_bind(&m->future, (sw__la_block *)((char *)mem + h->future_off),
                     &sw__future_type, &m->fcfg);
    m->cfg.borrow = &m->future;
  }
  m->la.borrowed = m->future.borrowed = true;
  m->isec = (double)m->la.interval / 1000.0;
  return rc;
}

void sw__metric_options(const sw_options *opts, bool *occupiable, uint32_t *stripes,
                        int64_t *max_rt) {
  int64_t v;
  sw_options_get(opts, SW_OPT_OCCUPIABLE, &v);
  *occupiable = v != 0;
  sw_options_get(opts, SW_OPT_STRIPES, &v);
  *stripes = (uint32_t)v;
  sw_options_get(opts, SW_OPT_MAX_RT_MS, max_rt);
}

SW_API int sw_metric_create(sw_metric **out, int32_t sample_count, int64_t interval_ms,
                            const sw_options *opts) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  bool occupiable;
  uint32_t stripes;
  int64_t max_rt;
  sw__metric_options(opts, &occupiable, &stripes, &max_rt);
  int rc = sw__metric_validate(sample_count, interval_ms, stripes);
  if (rc < 0) return rc;
  uint64_t size = sw__metric_size(sample_count, occupiable, stripes);
  sw_metric *m;
  void *mem;
  if ((rc = sw__alloc_pair((void **)&m, sizeof *m, (void **)&mem, size, "metric")) < 0) return rc;
  if ((rc = sw__metric_init(mem, sample_count, interval_ms, occupiable, stripes, max_rt,
                            false)) < 0 ||
      (rc = sw__metric_bind(m, mem)) < 0) {
    sw__free(m);
    sw__free(mem);
    return rc;
  }
  m->owns_block = true;
  *out = m;
  return SW_OK;
}

SW_API void sw_metric_free(sw_metric *m) {
  if (m == NULL || m->borrowed) return; /* a node's metric belongs to the node */
  if (m->owns_block) {
    sw__metric_fini(m->hdr);
    sw__free(m->hdr);
  }
  sw__free(m);
}

SW_API sw_leap_array *sw_metric_leap_array(sw_metric *m) {
  if (m == NULL) sw__fail(SW_ENULL, "metric is NULL");
  return m ? &m->la : NULL;
}

SW_API int32_t sw_metric_sample_count(const sw_metric *m) {
  return m ? m->la.n : sw__fail(SW_ENULL, "metric is NULL");
}

SW_API double sw_metric_interval_sec(const sw_metric *m) {
  return m ? (double)m->la.interval / 1000.0 : (double)sw__fail(SW_ENULL, "metric is NULL");
}

/* ------------------------------------------------------------------ reads */

/* What a strict admission's read found besides the sum. */
typedef struct sw__strict_view {
  bool unsealed; /* an older window of the interval is not sealed */
  int64_t newer; /* the start of the newest window after t's, 0 if none */
} sw__strict_view;

/* Fold an event over the interval ending at t (sum, or max). cur (may be
 * NULL) receives the body of t's window when the slot already holds it.
 * sv (a strict admission's read): stripe 0 of that body, the CAS word, is
 * left out of the sum, and *sv says what must happen before deciding. */
static inline __attribute__((always_inline)) int64_t sw__fold_ex(const sw_metric *m, int64_t t,
                                                                 sw_event ev, bool max,
                                                                 void **cur,
                                                                 sw__strict_view *sv) {
  /* Geometry in locals: the acquire loads below would make the compiler
   * reload fields of *la on every slot. */
  const sw_leap_array *la = &m->la;
  const uint32_t n = (uint32_t)la->n, stripes = m->cfg.stripes;
  const uint64_t stride = la->stride;
  const bool borrows = ev == SW_EVENT_PASS && m->hdr->occupiable;
  const int64_t wl = la->wl;
  int64_t ws;
  uint32_t idx = sw__la_locate(la, t, &ws);
  unsigned char *slot = la->slots + (uint64_t)idx * stride;
  int64_t acc = 0, want = ws;
  /* from t's window back: slot idx holds the window starting at want */
  for (uint32_t i = 0; i < n && want >= 0; i++, want -= wl) {
    int64_t v = 0, held;
    void *body;
    if (sw__read_window(la, (sw__la_slot *)slot, want, stripes, ev, sv && i == 0, &v, &body,
                        &held)) {
      if (ev == SW_EVENT_PASS) { /* only stripe 0 can carry the seal bit */
        if (sv && i > 0 && !(v & SW__SEALED)) sv->unsealed = true;
        v &= ~SW__SEALED;
      }
      if (cur && i == 0) *cur = body;
    } else if (sv && held > ws) {
      sv->newer = held > sv->newer ? held : sv->newer;
    } else if (borrows) {
      v = sw__borrowed_for(m, idx, want);
    }
    acc = max ? (v > acc ? v : acc) : sw__sat_add(acc, v);
    if (idx == 0) {
      idx = n - 1;
      slot = la->slots + (uint64_t)idx * stride;
    } else {
      idx--;
      slot -= stride;
    }
  }
  return acc;
}

static inline __attribute__((always_inline)) int64_t sw__fold(const sw_metric *m, int64_t t,
                                                              sw_event ev, bool max,
                                                              void **cur) {
  return sw__fold_ex(m, t, ev, max, cur, NULL);
}

/* The readers of one event: the fold specialised for it. */
static inline __attribute__((always_inline)) int64_t sw__sum(const sw_metric *m, int64_t t,
                                                             sw_event event) {
  SW__METRIC_CHECK(m);
  SW__CHECK_TIME(t);
  return sw__fold(m, t, event, false, NULL);
}

SW_API int64_t sw_metric_sum_at(const sw_metric *m, int64_t t, sw_event event) {
  SW__METRIC_CHECK(m);
  SW__CHECK_TIME(t);
  if ((unsigned)event >= SW_EVENT_COUNT)
    return sw__fail(SW_ERANGE, "event=%d is not a sw_event", (int)event);
  return sw__fold(m, t, event, false, NULL);
}

#define SW__SUM_READER(name, event)                                             \
  SW_API int64_t sw_metric_##name##_at(const sw_metric *m, int64_t t) {         \
    return sw__sum(m, t, event);                                                \
  }                                                                             \
  SW_API int64_t sw_metric_##name(const sw_metric *m) {                         \
    return sw__sum(m, sw__now_ms(), event);                                     \
  }

SW__SUM_READER(pass, SW_EVENT_PASS)
SW__SUM_READER(block, SW_EVENT_BLOCK)
SW__SUM_READER(exception, SW_EVENT_EXCEPTION)
SW__SUM_READER(success, SW_EVENT_SUCCESS)
SW__SUM_READER(rt, SW_EVENT_RT)
SW__SUM_READER(occupied_pass, SW_EVENT_OCCUPIED_PASS)

SW_API int64_t sw_metric_max_success_at(const sw_metric *m, int64_t t) {
  SW__METRIC_CHECK(m);
  SW__CHECK_TIME(t);
  int64_t max = sw__fold(m, t, SW_EVENT_SUCCESS, true, NULL);
  return max > 1 ? max : 1; /* as Sentinel: at least 1 */
}

SW_API int64_t sw_metric_max_success(const sw_metric *m) {
  return sw_metric_max_success_at(m, sw__now_ms());
}

SW_API int64_t sw_metric_min_rt_at(const sw_metric *m, int64_t t) {
  SW__METRIC_CHECK(m);
  SW__CHECK_TIME(t);
  sw_window w[64], *all = w;
  uint32_t n = (uint32_t)m->la.n;
  if (n > 64 && (all = sw__malloc(n * sizeof *all)) == NULL)
    return sw__fail(SW_ENOMEM, "min RT over %u windows", n);
  int count = sw__la_collect(&m->la, SW__SEL_INTERVAL, t, NULL, NULL, all, n);
  int64_t min = m->cfg.max_rt;
  for (int i = 0; i < count; i++) {
    int64_t v = sw__mb_min_rt(&m->cfg, all[i].bucket);
    min = v < min ? v : min;
  }
  if (all != w) sw__free(all);
  return min > 1 ? min : 1;
}

SW_API int64_t sw_metric_min_rt(const sw_metric *m) {
  return sw_metric_min_rt_at(m, sw__now_ms());
}

/* PASS of the window starting at start in slot idx: the main window's, or
 * the passes borrowed for it while no main window holds it. -1: neither. */
static int64_t sw__window_pass(const sw_metric *m, uint32_t idx, int64_t start) {
  sw_window w;
  sw__la_slot *s = sw__la_slot_at(&m->la, idx);
  uint64_t seq;
  int64_t have;
  if (sw__la_active(s, &seq, &have) && have == start) {
    w.bucket = sw__la_body(&m->la, s, (seq >> 1) & 1);
    return sw__mb_get(&m->cfg, w.bucket, SW_EVENT_PASS);
  }
  return m->hdr->occupiable ? sw__borrowed_for(m, idx, start) : -1;
}

SW_API int64_t sw_metric_window_pass_at(const sw_metric *m, int64_t t) {
  SW__METRIC_CHECK(m);
  SW__CHECK_TIME(t);
  int64_t v = sw__window_pass(m, (uint32_t)((t / m->la.wl) % m->la.n), t - t % m->la.wl);
  return v > 0 ? v : 0;
}

static int64_t sw__previous(const sw_metric *m, int64_t t, sw_event ev) {
  SW__METRIC_CHECK(m);
  sw_window w;
  int rc = sw_leap_array_previous_window_at(&m->la, t, &w);
  if (rc < 0) return rc;
  if (rc == 1) return sw__mb_get(&m->cfg, w.bucket, ev);
  /* no main window: passes borrowed for it count as they do in pass_at */
  const int64_t wid = t / m->la.wl, start = (wid - 1) * m->la.wl;
  if (ev != SW_EVENT_PASS || wid == 0 || !m->hdr->occupiable || t - start > m->la.interval)
    return 0;
  int64_t v = sw__window_pass(m, (uint32_t)((wid - 1) % m->la.n), start);
  return v > 0 ? v : 0;
}

SW_API int64_t sw_metric_previous_window_pass_at(const sw_metric *m, int64_t t) {
  return sw__previous(m, t, SW_EVENT_PASS);
}
SW_API int64_t sw_metric_previous_window_pass(const sw_metric *m) {
  return sw__previous(m, sw__now_ms(), SW_EVENT_PASS);
}
SW_API int64_t sw_metric_previous_window_block_at(const sw_metric *m, int64_t t) {
  return sw__previous(m, t, SW_EVENT_BLOCK);
}
SW_API int64_t sw_metric_previous_window_block(const sw_metric *m) {
  return sw__previous(m, sw__now_ms(), SW_EVENT_BLOCK);
}

SW_API int64_t sw_metric_waiting_at(const sw_metric *m, int64_t t) {
  SW__METRIC_CHECK(m);
  SW__CHECK_TIME(t);
  if (!m->hdr->occupiable) return 0;
  void *b[64], **all = b;
  uint32_t n = (uint32_t)m->future.n;
  if (n > 64 && (all = sw__malloc(n * sizeof *all)) == NULL)
    return sw__fail(SW_ENOMEM, "waiting over %u windows", n);
  /* The future type's rule keeps the windows that start after t. */
  int count = sw_leap_array_values_at(&m->future, t, all, n);
  int64_t sum = count < 0 ? count : 0;
  for (int i = 0; i < count; i++) sum += sw__mb_get(&m->fcfg, all[i], SW_EVENT_PASS);
  if (all != b) sw__free(all);
  return sum;
}

SW_API int64_t sw_metric_waiting(const sw_metric *m) {
  return sw_metric_waiting_at(m, sw__now_ms());
}

/* ------------------------------------------------------------------ adds */

/* Count n of event in body (the RT event also lowers the min RT). */
static inline __attribute__((always_inline)) void sw__metric_count(sw_metric *m, void *body,
                                                                   sw_event event, int64_t n) {
  if (event == SW_EVENT_RT)
    sw__mb_add_rt(&m->cfg, body, n);
  else
    sw__mb_add(&m->cfg, body, event, n);
}

/* An add that the fast path did not finish: a bad argument, or t outside
 * the window the hint knows. */
static __attribute__((noinline, cold)) int sw__metric_add_slow(sw_metric *m, int64_t t,
                                                               sw_event event, int64_t n) {
  SW__METRIC_CHECK(m);
  SW__CHECK_WRITABLE(m);
  SW__CHECK_TIME(t);
  int rc = sw__check_count(event == SW_EVENT_RT ? "rt_ms" : "n", n);
  if (rc < 0) return rc;
  void *body = sw__la_current_body_slow(&m->la, t);
  if (sw__likely(body != NULL)) sw__metric_count(m, body, event, n);
  return SW_OK;
}

/* Add n of event at t. The fast path is one hinted slot and one atomic
 * add; t < 0 never matches a hint, so the slow path rejects it. */
static inline __attribute__((always_inline)) int sw__metric_add(sw_metric *m, int64_t t,
                                                                sw_event event, int64_t n) {
  int64_t ws;
  sw__la_slot *s;
  uint64_t seq;
  uint32_t idx;
  /* a read-only handle has no hint (sw__la_hint_set) */
  if (sw__unlikely(m == NULL || (uint64_t)n > INT32_MAX ||
                   !sw__la_hinted(&m->la, t, &ws, &s, &seq, &idx)))
    return sw__metric_add_slow(m, t, event, n);
  sw__metric_count(m, sw__la_body(&m->la, s, (seq >> 1) & 1), event, n);
  return SW_OK;
}

SW_API int sw_metric_add_at(sw_metric *m, int64_t t, sw_event event, int64_t n) {
  if ((unsigned)event >= SW_EVENT_COUNT)
    return sw__fail(SW_ERANGE, "event=%d is not a sw_event", (int)event);
  return sw__metric_add(m, t, event, n);
}

#define SW__ADDER(name, event)                                                  \
  SW_API int sw_metric_add_##name##_at(sw_metric *m, int64_t t, int64_t n) {    \
    return sw__metric_add(m, t, event, n);                                      \
  }                                                                             \
  SW_API int sw_metric_add_##name(sw_metric *m, int64_t n) {                    \
    return sw__metric_add(m, sw__now_ms(), event, n);                           \
  }

SW__ADDER(pass, SW_EVENT_PASS)
SW__ADDER(block, SW_EVENT_BLOCK)
SW__ADDER(exception, SW_EVENT_EXCEPTION)
SW__ADDER(success, SW_EVENT_SUCCESS)
SW__ADDER(occupied_pass, SW_EVENT_OCCUPIED_PASS)
SW__ADDER(rt, SW_EVENT_RT)

/* Seal the CAS word of every window of the interval ending at t that is
 * older than t's window: strict admissions that still hold an older time
 * then fail their CAS and decide again at the newer window. */
static void sw__seal_older(sw_metric *m, int64_t t) {
  const sw_leap_array *la = &m->la;
  const int64_t ws = t - t % la->wl, lo = sw__la_range_lo(la, ws);
  for (uint32_t i = 0; i < (uint32_t)la->n; i++) {
    sw__la_slot *s = sw__la_slot_at(la, i);
    uint64_t seq;
    int64_t start;
    if (!sw__la_active(s, &seq, &start) || start < lo || start >= ws) continue;
    sw__mb_stripe *st = sw__la_body(la, s, (seq >> 1) & 1);
    atomic_fetch_or_explicit(&st->c[SW_EVENT_PASS], SW__SEALED, memory_order_relaxed);
  }
}

/* Strict admissions are linearizable across windows: the first one in a
 * window seals the CAS words of the older windows of its interval before it
 * reads them, so a racing admission that holds an older time either counted
 * before the seal (and is read) or fails its CAS on the sealed word and is
 * decided again at the newer window. An admission that finds a newer window
 * anywhere moves there first, and one that creates its window reads again
 * before counting: so an older window created after a newer one's last read
 * never takes a count. The boundary cannot overshoot. */
#define SW__ADMIT_ROUNDS 64
int sw__admit_general(sw_metric *m, int64_t t, int64_t n, double limit, bool strict,
                      int64_t *pass_before, int64_t *at) {
  const double isec = (double)m->la.interval / 1000.0;
  const int64_t wl = m->la.wl;
  for (int round = 0;; round++) {
    /* Each round follows a change another entry made (a newer window, a
     * seal, a window created); window words that keep sending it round
     * (damaged: a start that is no window's, a seal that never holds) would
     * send it round for ever: refused, and said. */
    if (sw__unlikely(round == SW__ADMIT_ROUNDS)) {
      sw__fail(SW_ECORRUPT, "the windows of a limiter's per-second array are damaged (no "
               "decision after %d rounds at %lld ms): entry refused", SW__ADMIT_ROUNDS,
               (long long)t);
      *pass_before = 0;
      return 0;
    }
    void *body = NULL;
    sw__strict_view sv = {false, 0};
    int64_t pass = sw__fold_ex(m, t, SW_EVENT_PASS, false, &body, strict ? &sv : NULL);
    if (sw__unlikely(sv.newer)) { /* a newer window exists: decide there */
      t = sv.newer;
      continue;
    }
    if (sw__unlikely(sv.unsealed)) {
      sw__seal_older(m, t);
      continue;
    }
    if (body == NULL) {
      *pass_before = pass;
      if (sw__over(pass, isec, n, limit)) return 0;
      /* the window does not exist yet: create it and look again */
      if (sw__la_current_body(&m->la, t) != NULL) continue;
      /* The slot holds a newer window (the caller's time is behind). Fast
       * mode, as Sentinel, admits without counting; strict mode decides at
       * that window's start. A reset that failed (its lock timed out) also
       * lands here: the entry is admitted uncounted rather than refused. */
      uint64_t seq;
      int64_t start;
      sw__la_slot *s = sw__la_slot_at(&m->la, (uint32_t)((t / wl) % m->la.n));
      *at = t;
      if (!strict || !sw__la_active(s, &seq, &start) || start <= t) return 2;
      t = start;
      continue;
    }
    /* t's window exists: the next admissions of this handle in it take the
     * fast path (another process may have created it) */
    sw__la_hint_set(&m->la, t - t % wl, (uint32_t)((t / wl) % m->la.n));
    if (!strict) {
      *pass_before = pass;
      if (sw__over(pass, isec, n, limit)) return 0;
      sw__mb_add(&m->cfg, body, SW_EVENT_PASS, n);
      *at = t;
      return 1;
    }
    _Atomic int64_t *word = &((sw__mb_stripe *)body)->c[SW_EVENT_PASS];
    SW__KILL_POINT("strict-cas"); /* read, not yet counted: a test stops here */
    int64_t c = atomic_load_explicit(word, memory_order_relaxed);
    for (;;) {
      if (sw__unlikely(c & SW__SEALED)) break; /* a newer window has started */
      *pass_before = pass + c;
      if (sw__over(pass + c, isec, n, limit)) return 0;
      if (atomic_compare_exchange_weak_explicit(word, &c, c + n, memory_order_relaxed,
                                                memory_order_relaxed)) {
        *at = t;
        return 1;
      }
    }
    const int64_t next = t - t % wl + wl;
    if (next < t) { /* the end of time: nothing newer to decide at */
      *pass_before = pass + (c & ~SW__SEALED);
      return 0;
    }
    t = next;
  }
}

SW_API int sw_metric_try_pass_at(sw_metric *m, int64_t t, int64_t n, int64_t limit,
                                 int64_t *pass_out) {
  SW__METRIC_CHECK(m);
  SW__CHECK_WRITABLE(m);
  SW__CHECK_TIME(t);
  int rc = sw__check_count("n", n);
  if (rc < 0) return rc;
  sw__admit_view view;
  if ((rc = sw__admit_fast(m, t, n, 0, false, true, limit, &view)) >= 0) {
    if (pass_out) *pass_out = view.pass;
    return rc;
  }
  void *body = NULL;
  int64_t pass = sw__fold(m, t, SW_EVENT_PASS, false, &body);
  if (pass_out) *pass_out = pass;
  if (pass + n > limit) return 0;
  if (body == NULL) body = sw__la_current_body(&m->la, t);
  if (sw__likely(body != NULL)) sw__mb_add(&m->cfg, body, SW_EVENT_PASS, n);
  return 1;
}

SW_API int sw_metric_try_pass(sw_metric *m, int64_t n, int64_t limit, int64_t *pass_out) {
  return sw_metric_try_pass_at(m, sw__now_ms(), n, limit, pass_out);
}

void *sw__metric_future_body(sw_metric *m, int64_t target) {
  sw_leap_array *f = &m->future;
  const int64_t ws = target - target % f->wl;
  const uint32_t idx = (uint32_t)((target / f->wl) % f->n);
  sw__la_slot *s = sw__la_slot_at(f, idx);
  uint64_t seq;
  int64_t start;
  if (sw__la_active(s, &seq, &start) && start < ws) {
    const sw__mb_stripe *st = sw__la_body(f, s, (seq >> 1) & 1);
    if (!(atomic_load_explicit(&st->c[SW_EVENT_PASS], memory_order_relaxed) & SW__SEALED))
      sw__la_reset(&m->la, idx, start, start); /* no-op if the main slot holds it or newer */
  }
  return sw__la_current_body(f, target);
}

bool sw__metric_borrow(sw_metric *m, int64_t target, int64_t n) {
  sw__mb_stripe *st = sw__metric_future_body(m, target);
  if (st == NULL) return false; /* the slot holds a newer window: dropped as detached */
  if (sw__future_add(st, n)) return true;
  void *body = sw__la_current_body(&m->la, target); /* carried already: count it there */
  if (body == NULL) return false;
  sw__mb_add(&m->cfg, body, SW_EVENT_PASS, n);
  return true;
}

SW_API int sw_metric_add_waiting(sw_metric *m, int64_t future_ms, int64_t n) {
  SW__METRIC_CHECK(m);
  SW__CHECK_WRITABLE(m);
  SW__CHECK_TIME(future_ms);
  int rc = sw__check_count("n", n);
  if (rc < 0) return rc;
  if (!m->hdr->occupiable)
    return sw__fail(SW_ENOTSUP, "add_waiting needs an occupiable metric (SW_OPT_OCCUPIABLE=1)");
  sw__metric_borrow(m, future_ms, n);
  return SW_OK;
}

/* ---------------------------------------------------------------- records */

void sw__metric_record(const sw__metric_cfg *cfg, const void *bucket, int64_t start,
                       sw_metric_record *rec) {
  rec->start_ms = start;
  rec->pass = sw__mb_get(cfg, bucket, SW_EVENT_PASS);
  rec->block = sw__mb_get(cfg, bucket, SW_EVENT_BLOCK);
  rec->exception = sw__mb_get(cfg, bucket, SW_EVENT_EXCEPTION);
  rec->success = sw__mb_get(cfg, bucket, SW_EVENT_SUCCESS);
  rec->rt = sw__mb_get(cfg, bucket, SW_EVENT_RT);
  rec->occupied_pass = sw__mb_get(cfg, bucket, SW_EVENT_OCCUPIED_PASS);
  rec->min_rt = sw__mb_min_rt(cfg, bucket);
  rec->would_block = sw__mb_get(cfg, bucket, SW_EVENT_WOULD_BLOCK);
}

int sw__metric_collect(const sw_metric *m, sw__selector sel, int64_t t, sw_time_predicate pred,
                       void *user, sw__mwin *out, uint32_t cap) {
  const uint32_t n = (uint32_t)m->la.n;
  sw_window wstack[64], *w = wstack;
  sw__mwin astack[64], *all = astack;
  if (n > 32 && ((w = sw__malloc(n * sizeof *w)) == NULL ||
                 (all = sw__malloc(2 * n * sizeof *all)) == NULL)) {
    if (w != wstack) sw__free(w);
    return sw__fail(SW_ENOMEM, "windows of %u slots", n);
  }
  int count = sw__la_collect(&m->la, sel, t, pred, user, w, n);
  uint32_t k = 0;
  for (int i = 0; i < count; i++) all[k++] = (sw__mwin){w[i].start_ms, w[i].bucket, &m->cfg};
  const int64_t ws = t - t % m->la.wl;
  for (uint32_t i = 0; m->hdr->occupiable && i < n; i++) { /* borrowed-only windows */
    sw__la_slot *fs = sw__la_slot_at(&m->future, i), *ms = sw__la_slot_at(&m->la, i);
    uint64_t seq, mseq;
    int64_t start, mstart;
    if (!sw__la_active(fs, &seq, &start) || start > ws ||
        (sw__la_active(ms, &mseq, &mstart) && mstart == start))
      continue;
    sw_window fw = {start, m->la.wl, NULL, 0, i};
    void *body = sw__la_body(&m->future, fs, (seq >> 1) & 1);
    if (sw__mb_get(&m->fcfg, body, SW_EVENT_PASS) <= 0 ||
        !sw__la_selected(&m->la, sel, t, &fw, pred, user))
      continue;
    uint32_t at = k++; /* keep all[] sorted by start */
    for (; at > 0 && all[at - 1].start > start; at--) all[at] = all[at - 1];
    all[at] = (sw__mwin){start, body, &m->fcfg};
  }
  for (uint32_t i = 0; i < k && i < cap; i++) out[i] = all[i];
  if (w != wstack) sw__free(w);
  if (all != astack) sw__free(all);
  return (int)k;
}

static int sw__records(const sw_metric *m, sw__selector sel, int64_t t, sw_time_predicate pred,
                       void *user, sw_metric_record *out, uint32_t cap) {
  SW__METRIC_CHECK(m);
  SW__CHECK_TIME(t);
  if (out == NULL && cap > 0) return sw__fail(SW_ENULL, "out is NULL with cap=%u", cap);
  sw__mwin w[64], *all = w;
  uint32_t wcap = cap < 2 * (uint32_t)m->la.n ? cap : 2 * (uint32_t)m->la.n;
  if (wcap > 64 && (all = sw__malloc(wcap * sizeof *all)) == NULL)
    return sw__fail(SW_ENOMEM, "records of %u windows", wcap);
  int n = sw__metric_collect(m, sel, t, pred, user, all, wcap);
  for (uint32_t i = 0; n > 0 && i < (uint32_t)n && i < wcap; i++)
    sw__metric_record(all[i].cfg, all[i].bucket, all[i].start, &out[i]);
  if (all != w) sw__free(all);
  return n;
}

SW_API int sw_metric_details_at(const sw_metric *m, int64_t t, sw_metric_record *out,
                                uint32_t cap) {
  return sw__records(m, SW__SEL_INTERVAL, t, NULL, NULL, out, cap);
}

SW_API int sw_metric_details(const sw_metric *m, sw_metric_record *out, uint32_t cap) {
  return sw__records(m, SW__SEL_INTERVAL, sw__now_ms(), NULL, NULL, out, cap);
}

SW_API int sw_metric_details_on_condition_at(const sw_metric *m, int64_t t,
                                             sw_time_predicate pred, void *user,
                                             sw_metric_record *out, uint32_t cap) {
  return sw__records(m, SW__SEL_CONDITION, t, pred, user, out, cap);
}

SW_API int sw_metric_windows_at(const sw_metric *m, int64_t t, sw_metric_record *out,
                                uint32_t cap) {
  return sw__records(m, SW__SEL_INTERVAL, t, NULL, NULL, out, cap);
}
