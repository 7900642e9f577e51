/* SPDX-License-Identifier: Apache-2.0 */
/* Keyed entries and exits: the table's rule applied to one key's words,
 * each decision one 16-byte CAS on one word (keyed.h; cancels: cancel.c). */
#include <math.h>
#include <string.h>

#include "keyed.h"

#define SW__KT_RETRY 1   /* the slot changed generation under us: find the key again */
#define SW__KT_UNSETTLED 2 /* a decision found no consistent state in many steps */
/* Whole units left under limit (>= 0) once used are taken. */
static inline int64_t sw__kt_left(double limit, int64_t used) {
  const double l = limit > 0 ? limit : 0; /* 0 also for NaN (a damaged rule) */
  int64_t whole = l < 9.2e18 ? (int64_t)l : INT64_MAX;
  return whole > used ? whole - used : 0;
}

/* Sentinel's DefaultController: (int)(pass / interval_sec) + n > limit. */
static inline bool sw__kt_over(const sw_keyed *k, int64_t pass, int64_t n, double limit) {
  return (double)(int64_t)((double)pass / k->isec) + (double)n > limit;
}

/* The 31-bit distance from window tag to window lo, forward. */
static inline uint64_t sw__kt_ahead(uint64_t lo, uint64_t tag) {
  return (sw__kt_wid(lo) - tag) & SW__KT_WID_MASK;
}

/* Add passes (to the count) and blocks (to the high half) of window wid in
 * its ring word (statistics of pacing and concurrency tables; blocks of
 * every table): a few CAS attempts, never across a generation, never over
 * a newer window (a late entry's statistics are dropped, as a leap array
 * drops an add behind its window). Counts stop at their 32 bits. */
static inline __attribute__((always_inline)) void sw__kt_add(sw__kt_w *word, uint32_t gen,
                                                             int64_t wid, int64_t pass,
                                                             int64_t block) {
  const uint64_t tag = (uint64_t)wid & SW__KT_WID_MASK;
  uint64_t lo = sw__kt_lo_of(word), hi = sw__kt_hi_of(word);
  for (int tries = 0; tries < 8 && sw__kt_hgen(hi) == gen; tries++) {
    const bool same = sw__kt_wid(lo) == tag;
    const uint64_t ahead = sw__kt_ahead(lo, tag);
    if (!same && sw__kt_live(lo) && ahead <= SW__KT_HALF) return; /* a newer window */
    int64_t c = (same ? sw__kt_count(lo) : 0) + pass, b = (same ? sw__kt_block(hi) : 0) + block;
    uint64_t nlo = sw__kt_lo(wid, c > SW__KT_COUNT_MAX ? SW__KT_COUNT_MAX : c) |
                   (same ? lo & SW__KT_SEAL : 0);
    if (sw__kt_cas(word, &lo, &hi, nlo, sw__kt_hi(gen, b > SW__KT_COUNT_MAX ? SW__KT_COUNT_MAX : b)))
      return;
  }
}

/* The first window boundary at which the interval (the key's windows as
 * read, passes in counts[i] of window wid - i) leaves room for n: the ms
 * from t to it (no overflow near INT64_MAX: the boundary is s windows past
 * t's window start). */
static int64_t sw__kt_retry_after(const sw_keyed *k, int64_t t, int64_t wid, const int64_t *counts,
                                  int64_t n, double limit) {
  if ((double)n > limit) return -1;
  const int64_t into = t - wid * k->wl; /* t's offset in its window */
  for (uint32_t s = 1; s <= k->windows; s++) { /* after s boundaries, s windows have left */
    int64_t rest = 0;
    for (uint32_t i = 0; i + s < k->windows; i++) rest += counts[i];
    if (!sw__kt_over(k, rest, n, limit)) return s * k->wl - into;
  }
  return k->windows * k->wl - into;
}

static void sw__kt_blocked(sw_keyed *k, uint32_t idx, uint32_t gen, int64_t wid, int64_t n,
                           sw_decision *d) {
  d->verdict = SW_VERDICT_BLOCK;
  sw__kt_add(&sw__kt_win(k, idx)[wid % k->windows], gen, wid, 0, n);
  atomic_fetch_add_explicit(&sw__kt_my_totals(k)->block, n, memory_order_relaxed);
}

/* Make every older window of the interval of wid sealed in its ring slot:
 * seal it, or, where the slot still holds an older window, put the window
 * there empty and sealed. A slot that holds a newer window is left (the
 * caller then decides at that window). */
static void sw__kt_seal_interval(sw_keyed *k, sw__kt_w *win, uint32_t gen, int64_t wid) {
  const uint32_t nw = k->windows, cur = (uint32_t)(wid % nw);
  for (uint32_t back = 1; back < nw && (int64_t)back <= wid; back++) { /* none before 0 */
    const uint32_t i = (cur + nw - back) % nw;
    const uint64_t want = (uint64_t)(wid - (int64_t)back) & SW__KT_WID_MASK;
    uint64_t lo = sw__kt_lo_of(&win[i]), hi = sw__kt_hi_of(&win[i]), nlo, nhi = hi;
    for (int tries = 0; tries < SW__KT_STEPS; tries++) {
      if (sw__kt_hgen(hi) != gen || (lo & SW__KT_SEAL && sw__kt_wid(lo) == want)) break;
      if (sw__kt_wid(lo) == want) {
        nlo = lo | SW__KT_SEAL;
        nhi = hi;
      } else if (!sw__kt_live(lo) || ((want - sw__kt_wid(lo)) & SW__KT_WID_MASK) <= SW__KT_HALF) {
        nlo = sw__kt_lo(want, 0) | SW__KT_SEAL; /* an older window: replaced */
        nhi = sw__kt_hi(gen, 0);
      } else {
        break; /* a newer window */
      }
      if (sw__kt_cas(&win[i], &lo, &hi, nlo, nhi)) break;
    }
  }
}

/* Reject behaviour, strict: the interval's passes and the current window's
 * word checked and counted with one CAS. Linearizable across windows as in
 * metric.c: an admission first finds every older window of its interval
 * sealed in its slot (sealing it if needed), so an entry with an older time
 * fails its CAS and is decided again at the newer window; and one that sees
 * a newer window anywhere in the ring moves there first. */
static int sw__kt_decide_reject(sw_keyed *k, const sw__rule *r, int64_t t, uint32_t idx,
                                uint32_t gen, int64_t n, sw_decision *d) {
  sw__kt_w *win = sw__kt_win(k, idx);
  const uint32_t nw = k->windows;
  const int64_t t0 = t;
  int64_t wid = t / k->wl, counts[SW__KT_MAX_WINDOWS];
  for (int steps = 0; steps < SW__KT_STEPS; steps++) {
    const uint32_t cur = (uint32_t)(wid % nw);
    const uint64_t tag = (uint64_t)wid & SW__KT_WID_MASK;
    int64_t pass = 0;
    uint64_t newer = 0;
    bool unsealed = false;
    for (uint32_t i = 0; i < nw; i++) {
      uint64_t lo = sw__kt_lo_of(&win[i]);
      uint64_t ahead = sw__kt_ahead(lo, tag);
      if (sw__unlikely(ahead != 0 && ahead <= SW__KT_HALF && sw__kt_live(lo))) {
        newer = ahead > newer ? ahead : newer; /* a newer window */
        continue;
      }
      if (i == cur) continue;
      const uint32_t back = (cur + nw - i) % nw;
      if ((int64_t)back > wid) { /* a window before time 0: nothing, nothing to seal */
        counts[back] = 0;
        continue;
      }
      if (sw__kt_wid(lo) != ((tag - back) & SW__KT_WID_MASK)) {
        unsealed = true; /* the window is absent: its place must be sealed */
        counts[back] = 0;
        continue;
      }
      counts[back] = sw__kt_count(lo);
      pass += counts[back];
      if (!(lo & SW__KT_SEAL)) unsealed = true;
    }
    if (sw__unlikely(newer)) {
      wid += (int64_t)newer;
      continue;
    }
    if (sw__unlikely(unsealed && nw > 1)) { /* the first admission of a window */
      sw__kt_seal_interval(k, win, gen, wid);
      continue;
    }
    uint64_t c = sw__kt_lo_of(&win[cur]), h = sw__kt_hi_of(&win[cur]);
    for (; steps < SW__KT_STEPS; steps++) {
      if (sw__unlikely(sw__kt_hgen(h) != gen)) return SW__KT_RETRY;
      const bool same = sw__kt_wid(c) == tag;
      const uint64_t ahead = sw__kt_ahead(c, tag);
      if ((same && (c & SW__KT_SEAL)) || (!same && ahead <= SW__KT_HALF && sw__kt_live(c)))
        break; /* a newer window has started */
      counts[0] = same ? sw__kt_count(c) : 0;
      const int64_t used = pass + counts[0];
      const bool over = sw__kt_over(k, used, n, r->threshold);
      if (over && !r->dry_run) {
        d->retry_after_ms = sw__kt_retry_after(k, t0, wid, counts, n, r->threshold);
        d->remaining = sw__kt_left(r->threshold, (int64_t)((double)used / k->isec));
        sw__kt_blocked(k, idx, gen, wid, n, d);
        return SW_OK;
      }
      const int64_t next = counts[0] + n; /* beyond the word only in a dry run: kept at its top */
      const uint64_t nlo = sw__kt_lo(wid, next > SW__KT_COUNT_MAX ? SW__KT_COUNT_MAX : next);
      SW__KILL_POINT("keyed-cas"); /* read, not yet counted: a test stops here */
      if (sw__kt_cas(&win[cur], &c, &h, nlo, same ? h : sw__kt_hi(gen, 0))) {
        sw__kt_totals *tot = sw__kt_my_totals(k);
        atomic_fetch_add_explicit(&tot->pass, n, memory_order_relaxed);
        if (over) { /* dry run: admitted, counted as a would-be block */
          d->would_block = 1;
          d->retry_after_ms = sw__kt_retry_after(k, t0, wid, counts, n, r->threshold);
          atomic_fetch_add_explicit(&tot->would_block, n, memory_order_relaxed);
        }
        d->remaining = sw__kt_left(r->threshold, (int64_t)((double)(used + n) / k->isec));
        sw__kt_receipt(d, idx, sw__kt_meta(SW__KT_READY, gen, 0), (uint64_t)wid, n);
        return SW_OK;
      }
    }
    const uint64_t ahead = sw__kt_ahead(c, tag);
    wid += ahead == 0 || ahead > SW__KT_HALF ? 1 : (int64_t)ahead; /* decide at the newer window */
  }
  return SW__KT_UNSETTLED;
}

/* The common entry in one pass: a key of up to 16 bytes the table holds,
 * a reject rule, the key's older windows sealed, no newer window, room
 * left, no other thread on the word. SW__KT_FAST_DONE when decided and
 * counted; otherwise nothing is done and the general path takes over, told
 * what the lookup found: SW__KT_FAST_ABSENT (no such key; *q prepared for
 * an insert) or SW__KT_FAST_FOUND (*ref is its place; q's second bucket
 * not computed if the first held it). */
#define SW__KT_FAST_DONE 2
#define SW__KT_FAST_FOUND 1
#define SW__KT_FAST_ABSENT 0
/* A key of up to 16 bytes looked up without a copy loop: SW__KT_FAST_FOUND
 * and *ref, or SW__KT_FAST_ABSENT (*q prepared for an insert). */
static inline __attribute__((always_inline)) int sw__kt_fast_find(const sw_keyed *k,
                                                                  const unsigned char *key,
                                                                  size_t len, sw__kt_key *q,
                                                                  sw__kt_ref *ref) {
  uint64_t meta;
  sw__kt_prepare_short(k, key, len, q);
  int64_t idx = sw__kt_in_bucket(k, q, q->b[0], &meta);
  if (idx < 0) {
    sw__kt_place_second(k, q);
    if (q->b[1] == q->b[0] || (idx = sw__kt_in_bucket(k, q, q->b[1], &meta)) < 0)
      return SW__KT_FAST_ABSENT;
  }
  *ref = (sw__kt_ref){(uint32_t)idx, meta};
  return SW__KT_FAST_FOUND;
}

static inline __attribute__((always_inline)) int sw__kt_fast(sw_keyed *k, int64_t t,
                                                             const unsigned char *key, size_t len,
                                                             int64_t n, double threshold,
                                                             sw_decision *d, sw__kt_key *q,
                                                             sw__kt_ref *ref) {
  if (sw__kt_fast_find(k, key, len, q, ref) == SW__KT_FAST_ABSENT) return SW__KT_FAST_ABSENT;
  const uint64_t meta = ref->meta;
  const uint32_t idx = ref->idx;
  const uint32_t nw = k->windows, gen = sw__kt_mgen(meta);
  sw__kt_w *win = sw__kt_win(k, idx);
  const int64_t wid = t / k->wl;
  const uint64_t tag = (uint64_t)wid & SW__KT_WID_MASK;
  const uint32_t cur = nw == 2 ? (uint32_t)(wid & 1) : (uint32_t)(wid % nw);
  int64_t pass = 0;
  /* the older windows, each sealed in its slot (the default 2: one) */
  if (nw == 2) {
    const uint64_t lo = sw__kt_lo_of(&win[cur ^ 1]);
    if ((lo & ~(uint64_t)SW__KT_COUNT_MAX) != (sw__kt_lo(tag - 1, 0) | SW__KT_SEAL))
      return SW__KT_FAST_FOUND; /* to seal, absent, newer or another key's */
    pass = sw__kt_count(lo);
  } else {
    for (uint32_t back = 1, j = cur; back < nw; back++) {
      j = j ? j - 1 : nw - 1;
      const uint64_t lo = sw__kt_lo_of(&win[j]);
      if ((lo & ~(uint64_t)SW__KT_COUNT_MAX) != (sw__kt_lo(tag - back, 0) | SW__KT_SEAL))
        return SW__KT_FAST_FOUND;
      pass += sw__kt_count(lo);
    }
  }
  uint64_t c = sw__kt_lo_of(&win[cur]), h = sw__kt_hi_of(&win[cur]);
  const bool same = sw__kt_wid(c) == tag;
  if (sw__kt_hgen(h) != gen || (same && (c & SW__KT_SEAL)) ||
      (!same && sw__kt_live(c) && sw__kt_ahead(c, tag) <= SW__KT_HALF))
    return SW__KT_FAST_FOUND;
  const int64_t used = pass + (same ? sw__kt_count(c) : 0);
  /* the block path, with its retry; a 1 s interval needs no division */
  if (k->unit_interval ? (double)(used + n) > threshold : sw__kt_over(k, used, n, threshold))
    return SW__KT_FAST_FOUND;
  /* the rule's bound keeps the count within its 32 bits (sw__kt_rule_check) */
  SW__KILL_POINT("keyed-cas");
  if (!sw__kt_cas_once(&win[cur], c, h, same ? c + (uint64_t)n : sw__kt_lo(wid, n),
                       same ? h : sw__kt_hi(gen, 0)))
    return SW__KT_FAST_FOUND;
  atomic_fetch_add_explicit(&sw__kt_my_totals(k)->pass, n, memory_order_relaxed);
  d->remaining = sw__kt_left(threshold, k->unit_interval
                                            ? used + n
                                            : (int64_t)((double)(used + n) / k->isec));
  sw__kt_receipt(d, idx, meta, (uint64_t)wid, n);
  return SW__KT_FAST_DONE;
}

/* The pacing clock now: 1/16 us; precise entries read the duration clock
 * (see limiter.c), the others their time t. */
static inline int64_t sw__kt_ticks(int64_t t, bool precise) {
  _Static_assert(SW__KT_TICKS_PER_MS == 16000, "a tick is 62.5 ns: ns * 2 / 125");
  const int64_t ns = precise ? sw_now_ns() : -1;
  return ns >= 0 ? ns / 125 * 2 + ns % 125 * 2 / 125 : t * SW__KT_TICKS_PER_MS;
}

/* Pacing per key (a leaky bucket, as nginx's limit_req): the last
 * admission in 1/16 us; one CAS. */
/* The ticks between two admissions of n (rounded), or -1: none ever. */
static inline int64_t sw__kt_pacing_cost(const sw__rule *r, int64_t n) {
  const double ticks = (double)n / r->threshold * 1000.0 * SW__KT_TICKS_PER_MS;
  if (!(r->threshold > 0) || !(ticks <= (double)(INT64_C(1) << 60))) return -1;
  return (int64_t)(ticks + 0.5); /* round: ticks >= 0 */
}

/* The longest wait admitted, in ticks. */
static inline int64_t sw__kt_max_queue(const sw__rule *r) {
  return r->max_queue_ms > 0 && r->max_queue_ms < (INT64_C(1) << 40)
             ? r->max_queue_ms * SW__KT_TICKS_PER_MS
             : r->max_queue_ms > 0 ? INT64_C(1) << 54 : 0;
}

/* (inlined: the pacing entry's hot path) */
static inline __attribute__((always_inline)) int sw__kt_decide_pacing(sw_keyed *k,
                                                                      const sw__rule *r, int64_t t,
                                                                      bool precise, uint32_t idx,
                                                                      uint32_t gen, int64_t n,
                                                                      sw_decision *d) {
  sw__kt_w *aux = sw__kt_aux(k, idx);
  const int64_t wid = t / k->wl;
  const int64_t cost = sw__kt_pacing_cost(r, n);
  if (cost < 0) {
    d->retry_after_ms = -1;
    sw__kt_blocked(k, idx, gen, wid, n, d);
    return SW_OK;
  }
  const int64_t max_queue = sw__kt_max_queue(r);
  const int64_t now = sw__kt_ticks(t, precise);
  uint64_t a = sw__kt_lo_of(aux), h = sw__kt_hi_of(aux);
  int64_t wait, next;
  for (int steps = 0;; steps++) {
    if (sw__unlikely(sw__kt_hgen(h) != gen)) return SW__KT_RETRY;
    if (sw__unlikely(steps == SW__KT_STEPS)) return SW__KT_UNSETTLED;
    const int64_t last = (int64_t)a;
    wait = 0;
    next = now;
    /* 0: no admission yet; a damaged word far from now is no queue */
    if (last != 0 && last > now - (INT64_C(1) << 60) && last < now + (INT64_C(1) << 60) &&
        last + cost > now) {
      wait = last + cost - now;
      next = last + cost;
    }
    if (wait > max_queue) {
      d->retry_after_ms = (wait - max_queue + SW__KT_TICKS_PER_MS - 1) / SW__KT_TICKS_PER_MS;
      if (!r->dry_run) {
        sw__kt_blocked(k, idx, gen, wid, n, d);
        return SW_OK;
      }
      d->would_block = 1; /* dry run: admitted now, the queue left as it is */
      break;
    }
    if (next == 0) next = 1; /* 0 means "no admission yet" */
    SW__KILL_POINT("keyed-cas");
    if (sw__kt_cas(aux, &a, &h, (uint64_t)next, h)) break;
  }
  sw__kt_totals *tot = sw__kt_my_totals(k);
  atomic_fetch_add_explicit(&tot->pass, n, memory_order_relaxed);
  d->verdict = wait > 0 && !d->would_block ? SW_VERDICT_WAIT : SW_VERDICT_PASS;
  d->wait_ms = d->would_block ? 0 : (wait + SW__KT_TICKS_PER_MS / 2) / SW__KT_TICKS_PER_MS;
  d->remaining = cost > 0 ? (max_queue - wait) / cost : INT32_MAX;
  int64_t swid = wid;
  if (d->would_block) {
    atomic_fetch_add_explicit(&tot->would_block, n, memory_order_relaxed);
  } else { /* counted in the window of its start, which its receipt finds again */
    swid = sw__kt_pacing_wid(k, next, d->wait_ms);
    sw__kt_receipt(d, idx, sw__kt_meta(SW__KT_READY, gen, 0), (uint64_t)next, n);
  }
  sw__kt_add(&sw__kt_win(k, idx)[swid % k->windows], gen, swid, n, 0);
  return SW_OK;
}

/* Concurrency grade per key: requests in flight, one CAS. */
static int sw__kt_decide_concurrency(sw_keyed *k, const sw__rule *r, int64_t t, uint32_t idx,
                                     uint32_t gen, int64_t n, sw_decision *d) {
  sw__kt_w *aux = sw__kt_aux(k, idx);
  const int64_t wid = t / k->wl;
  uint64_t a = sw__kt_lo_of(aux), h = sw__kt_hi_of(aux);
  for (int steps = 0;; steps++) {
    if (sw__unlikely(sw__kt_hgen(h) != gen)) return SW__KT_RETRY;
    if (sw__unlikely(steps == SW__KT_STEPS || a > (UINT64_C(1) << 62))) return SW__KT_UNSETTLED;
    const int64_t c = (int64_t)a;
    if ((double)(c + n) > r->threshold) {
      if (!r->dry_run) {
        /* nothing says when a request will finish: suggest the average RT */
        sw__kt_totals *tot = sw__kt_my_totals(k);
        int64_t ok = atomic_load(&tot->success), rt = atomic_load(&tot->rt);
        d->retry_after_ms = (double)n > r->threshold ? -1 : ok > 0 && rt / ok > 1 ? rt / ok : 1;
        d->remaining = sw__kt_left(r->threshold, c);
        sw__kt_blocked(k, idx, gen, wid, n, d);
        return SW_OK;
      }
      d->would_block = 1;
    }
    SW__KILL_POINT("keyed-cas");
    if (sw__kt_cas(aux, &a, &h, a + 1, h)) {
      d->remaining = sw__kt_left(r->threshold, c + 1);
      break;
    }
  }
  sw__kt_totals *tot = sw__kt_my_totals(k);
  atomic_fetch_add_explicit(&tot->pass, n, memory_order_relaxed);
  if (d->would_block) atomic_fetch_add_explicit(&tot->would_block, n, memory_order_relaxed);
  sw__kt_add(&sw__kt_win(k, idx)[wid % k->windows], gen, wid, n, 0);
  sw__kt_receipt(d, idx, sw__kt_meta(SW__KT_READY, gen, 0), (uint64_t)wid, n);
  return SW_OK;
}

int sw__kt_decide(sw_keyed *k, const sw__rule *r, int64_t t, bool precise, const sw__kt_ref *ref,
                  int64_t n, sw_decision *d) {
  const uint32_t gen = sw__kt_mgen(ref->meta);
  switch (k->kind) {
  case SW__KT_PACING:
    return sw__kt_decide_pacing(k, r, t, precise, ref->idx, gen, n, d);
  case SW__KT_CONCURRENCY:
    return sw__kt_decide_concurrency(k, r, t, ref->idx, gen, n, d);
  default:
    return sw__kt_decide_reject(k, r, t, ref->idx, gen, n, d);
  }
}

/* A new key's first admission, counted by its insert (sw__kt_first) when
 * the rule admits n at once on an empty state: a reject rule whose limit
 * is at least n, or a pacing rule (an empty queue). False otherwise: the
 * key is inserted empty and decided as any other. */
static bool sw__kt_first_of(const sw_keyed *k, const sw__rule *r, int64_t t, bool precise,
                            int64_t n, sw__kt_first *f) {
  f->n = n;
  f->aux = 0;
  if (k->kind == SW__KT_REJECT) {
    f->wid = t / k->wl;
    return !sw__kt_over(k, 0, n, r->threshold);
  }
  if (k->kind != SW__KT_PACING || sw__kt_pacing_cost(r, n) < 0) return false;
  const int64_t now = sw__kt_ticks(t, precise);
  f->aux = now ? (uint64_t)now : 1; /* 0 means "no admission yet" */
  f->wid = sw__kt_pacing_wid(k, (int64_t)f->aux, 0);
  return true;
}

/* The decision of a first admission its insert counted (slot ref). */
static void sw__kt_first_decided(sw_keyed *k, const sw__rule *r, const sw__kt_ref *ref,
                                 const sw__kt_first *f, sw_decision *d) {
  atomic_fetch_add_explicit(&sw__kt_my_totals(k)->pass, f->n, memory_order_relaxed);
  const uint64_t meta = sw__kt_meta(SW__KT_READY, sw__kt_mgen(ref->meta), 0);
  if (k->kind == SW__KT_REJECT) {
    d->remaining = sw__kt_left(r->threshold, (int64_t)((double)f->n / k->isec));
    sw__kt_receipt(d, ref->idx, meta, (uint64_t)f->wid, f->n);
    return;
  }
  const int64_t cost = sw__kt_pacing_cost(r, f->n);
  d->remaining = cost > 0 ? sw__kt_max_queue(r) / cost : INT32_MAX;
  sw__kt_receipt(d, ref->idx, meta, f->aux, f->n);
}

/* The table is full of active keys and its policy refuses new ones: the
 * entry passes uncounted (SW_FULL_OPEN) or is blocked (SW_FULL_CLOSED). */
static void sw__kt_refused(sw_keyed *k, int64_t t, int64_t n, sw_decision *d) {
  sw__kt_totals *tot = sw__kt_my_totals(k);
  atomic_fetch_add_explicit(&tot->refused, 1, memory_order_relaxed);
  d->full = 1;
  if (k->hdr->cfg.on_full == SW_FULL_OPEN) {
    atomic_fetch_add_explicit(&tot->pass, n, memory_order_relaxed);
    return;
  }
  d->verdict = SW_VERDICT_BLOCK;
  d->retry_after_ms = k->wl - t % k->wl; /* a key may have gone idle by then */
  atomic_fetch_add_explicit(&tot->block, n, memory_order_relaxed);
}

/* Tries of an entry whose slot keeps changing hands (or whose words never
 * settle) before it goes through the key's bucket locks: every 64th. The
 * first time through, the slot's words of another generation are emptied;
 * the second, all its words (a damaged slot: its counts are lost, its key
 * kept); after that the entry gives up with SW_ECORRUPT. */
#define SW__KT_SETTLE_EVERY 64
#define SW__KT_TRIES (4 * SW__KT_SETTLE_EVERY)

/* An entry at t; precise: t is the window clock's now (pacing reads the
 * duration clock). */
static int sw__keyed_entry(sw_keyed *k, int64_t t, bool precise, const void *key, size_t len,
                           int64_t n, uint32_t flags, sw_decision *d) {
  SW__KT_CHECK(k);
  SW__CHECK_WRITABLE(k);
  SW__CHECK_NULL(d, "decision");
  SW__CHECK_TIME(t);
  if (sw__unlikely(n < 0 || n > INT32_MAX))
    return sw__fail(SW_ERANGE, "n=%lld is outside 0..%d", (long long)n, INT32_MAX);
  if (sw__unlikely(flags & ~SW_ENTRY_NO_EXIT))
    return sw__fail(flags & ~(SW_ENTRY_PRIORITIZED | SW_ENTRY_NO_EXIT) ? SW_EINVAL : SW_ENOTSUP,
                    "entry flags 0x%x: a keyed table takes only SW_ENTRY_NO_EXIT (no "
                    "borrowing per key)", flags);
  if (sw__unlikely(flags && k->kind == SW__KT_CONCURRENCY))
    return sw__fail(SW_EINVAL, "SW_ENTRY_NO_EXIT on a concurrency table: its exits free "
                    "its places");
  if (sw__unlikely(key == NULL)) return sw__fail(SW_ENULL, "key is NULL");
  memset(d, 0, sizeof *d);
  sw__rule r;
  /* the plain reject rule reads its hot words only, pacing the queue bound too */
  if (k->kind == SW__KT_REJECT)
    sw__rule_box_hot(&k->hdr->rule, &r);
  else if (k->kind == SW__KT_PACING)
    sw__rule_box_queue(&k->hdr->rule, &r);
  else
    sw__rule_box_load(&k->hdr->rule, &r, true);
  sw__kt_key q;
  sw__kt_ref ref;
  int rc, known = -1; /* what a first lookup found: SW__KT_FAST_*, -1 none made */
  if (k->kind == SW__KT_REJECT && !r.dry_run && len - 1 < 16) {
    known = sw__kt_fast(k, t, key, len, n, r.threshold, d, &q, &ref);
    if (known == SW__KT_FAST_DONE) return SW_OK;
    if (known == SW__KT_FAST_FOUND) sw__kt_place_second(k, &q); /* for a lookup again */
  } else if (k->kind == SW__KT_PACING && len - 1 < 16) { /* a short key: no copy loop */
    known = sw__kt_fast_find(k, key, len, &q, &ref);
    if (known == SW__KT_FAST_FOUND) {
      rc = sw__kt_decide_pacing(k, &r, t, precise, ref.idx, sw__kt_mgen(ref.meta), n, d);
      if (rc != SW__KT_RETRY && rc != SW__KT_UNSETTLED) return rc;
      memset(d, 0, sizeof *d);
      sw__kt_place_second(k, &q);
      known = -1;
    }
  } else if ((rc = sw__kt_prepare(k, key, len, &q)) < 0) {
    return rc;
  }
  for (int tries = 1;; tries++) {
    rc = known >= 0 ? known : sw__kt_find(k, &q, &ref);
    known = -1;
    if (!rc) {
      sw__kt_first first;
      const bool counted = sw__kt_first_of(k, &r, t, precise, n, &first);
      if ((rc = sw__kt_insert(k, t, &q, &ref, counted ? &first : NULL)) <= 0) {
        if (rc < 0) return rc;
        sw__kt_refused(k, t, n, d);
        return SW_OK;
      }
      if (rc == 2) {
        sw__kt_first_decided(k, &r, &ref, &first, d);
        return SW_OK;
      }
    }
    rc = sw__kt_decide(k, &r, t, precise, &ref, n, d);
    if (rc != SW__KT_RETRY && rc != SW__KT_UNSETTLED) return rc;
    memset(d, 0, sizeof *d);
    /* The slot is being given to another key. Its giver finishes in a few
     * instructions; one that died is repaired by the next locker of the
     * key's buckets, so after a while go through them. */
    if (tries == SW__KT_TRIES) return sw__kt_damaged(k, ref.idx, "never settles");
    if (tries % SW__KT_SETTLE_EVERY == 0 &&
        (rc = sw__kt_settle(k, &q, rc == SW__KT_UNSETTLED ? 1 + tries / (2 * SW__KT_SETTLE_EVERY)
                                                          : tries / (2 * SW__KT_SETTLE_EVERY))) < 0)
      return rc;
  }
}

SW_API int sw_keyed_entry_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t n,
                             uint32_t flags, sw_decision *d) {
  return sw__keyed_entry(k, t, false, key, len, n, flags, d);
}

SW_API int sw_keyed_entry(sw_keyed *k, const void *key, size_t len, int64_t n, uint32_t flags,
                          sw_decision *d) {
  return sw__keyed_entry(k, sw__now_ms(), true, key, len, n, flags, d);
}

SW_API int sw_keyed_exit_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t rt_ms,
                            int64_t n, uint32_t flags) {
  SW__KT_CHECK(k);
  SW__CHECK_WRITABLE(k);
  SW__CHECK_TIME(t);
  if (sw__unlikely(n < 0 || n > INT32_MAX || rt_ms < 0 || rt_ms > INT32_MAX))
    return sw__fail(SW_ERANGE, "n=%lld, rt_ms=%lld: both must be in 0..%d", (long long)n,
                    (long long)rt_ms, INT32_MAX);
  if (flags & ~SW_EXIT_ERROR) return sw__fail(SW_EINVAL, "unknown exit flags 0x%x", flags);
  sw__kt_key q;
  int rc = sw__kt_prepare(k, key, len, &q);
  if (rc < 0) return rc;
  sw__kt_totals *tot = sw__kt_my_totals(k);
  if (k->kind == SW__KT_CONCURRENCY) { /* one request of this key less in flight */
    sw__kt_ref ref;
    bool left = false;
    for (int tries = 0; !left && tries < 64 && sw__kt_find(k, &q, &ref); tries++) {
      sw__kt_w *aux = sw__kt_aux(k, ref.idx);
      const uint32_t gen = sw__kt_mgen(ref.meta);
      uint64_t a = sw__kt_lo_of(aux), h = sw__kt_hi_of(aux);
      for (int steps = 0; steps < SW__KT_STEPS && sw__kt_hgen(h) == gen && a > 0 &&
                          !(left = sw__kt_cas(aux, &a, &h, a - 1, h));
           steps++) {
      }
      if (!left && sw__kt_hgen(h) == gen) break; /* nothing in flight */
    }
    if (!left) {
      atomic_fetch_add_explicit(&tot->orphan_exits, 1, memory_order_relaxed);
      return sw__fail(SW_ESTATE, "exit without an entry of this key in flight");
    }
  }
  atomic_fetch_add_explicit(&tot->success, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&tot->rt, rt_ms, memory_order_relaxed);
  if (flags & SW_EXIT_ERROR) atomic_fetch_add_explicit(&tot->exception, n, memory_order_relaxed);
  return SW_OK;
}

SW_API int sw_keyed_exit(sw_keyed *k, const void *key, size_t len, int64_t rt_ms, int64_t n,
                         uint32_t flags) {
  return sw_keyed_exit_at(k, sw__now_ms(), key, len, rt_ms, n, flags);
}
