/* SPDX-License-Identifier: Apache-2.0 */
/* The admission of a QPS rule, inline: what the limiter's entry runs on
 * every request. The common case (sw__admit_fast) reads the interval once
 * through the window hint; every other case goes to sw__admit_general
 * (metric.c), which decides the same way from any state. */
#ifndef SW_ADMIT_H
#define SW_ADMIT_H

#include "metric.h"

/* Would n more break limit, with pass in the interval? Sentinel's check:
 * floor(pass / interval_sec) + n > limit. */
static inline bool sw__over(int64_t pass, double isec, int64_t n, double limit) {
  return (double)(int64_t)((double)pass / isec) + (double)n > limit;
}

/* Passes borrowed for the window starting at start that no main window
 * holds yet (the carry happens at the window's first write; Sentinel's reads
 * refresh the window first, libsw's read the borrow array instead). */
static inline int64_t sw__borrowed_for(const sw_metric *m, uint32_t slot, int64_t start) {
  sw__la_slot *s = sw__la_slot_at(&m->future, slot);
  for (;;) {
    uint64_t seq;
    int64_t fstart;
    if (!sw__la_active(s, &seq, &fstart) || fstart != start) return 0;
    int64_t v = sw__mb_get(&m->fcfg, sw__la_body(&m->future, s, (seq >> 1) & 1), SW_EVENT_PASS);
    if (sw__la_still_valid(s, seq)) return v;
  }
}

/* Read ev from slot s if it holds the window starting at want: 1 with its
 * value (without stripe 0 when skip0: the strict CAS word) and body, torn-
 * free; 0 when the slot holds another window, whose start is in *held
 * (INT64_MIN: none). */
static inline __attribute__((always_inline)) int sw__read_window(const sw_leap_array *la,
                                                                 sw__la_slot *s, int64_t want,
                                                                 uint32_t stripes, sw_event ev,
                                                                 bool skip0, int64_t *v,
                                                                 void **body, int64_t *held) {
  for (;;) {
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
    int64_t start =
        q >= 2 ? atomic_load_explicit(&s->start[(q >> 1) & 1], memory_order_relaxed) : INT64_MIN;
    if (start != want) {
      *held = start;
      return 0;
    }
    sw__mb_stripe *b = sw__la_body(la, s, (q >> 1) & 1);
    int64_t x = skip0 ? sw__mb_sum_tail(stripes, b, ev) : sw__mb_sum(stripes, b, ev);
    if (sw__unlikely(!sw__la_still_valid(s, q))) continue;
    *v = x;
    *body = b;
    return 1;
  }
}

/* Whether the borrow array holds passes for the window starting at start,
 * in slot idx (then reads must count them). */
static inline bool sw__borrowed_any(const sw_metric *m, uint32_t idx, int64_t start) {
  uint64_t seq;
  int64_t fstart;
  return m->hdr->occupiable && sw__la_active(sw__la_slot_at(&m->future, idx), &seq, &fstart) &&
         fstart == start;
}

/* PASS of the window starting at want, older than ws, in slot idx, for an
 * admission's fast path: >= 0, or -1 when the general path must decide (the
 * slot holds a newer window, the window is borrowed-only, or it is not
 * sealed for a strict admission). */
static inline __attribute__((always_inline)) int64_t sw__older_pass(const sw_metric *m,
                                                                    uint32_t idx, int64_t want,
                                                                    int64_t ws, bool strict) {
  int64_t v = 0, held;
  void *body;
  if (want < 0) return 0; /* before time 0 */
  if (sw__read_window(&m->la, sw__la_slot_at(&m->la, idx), want, m->cfg.stripes, SW_EVENT_PASS,
                      false, &v, &body, &held)) {
    if (strict && !(v & SW__SEALED)) return -1;
    return v & ~SW__SEALED;
  }
  return held > ws || sw__borrowed_any(m, idx, want) ? -1 : 0;
}

/* The common admission, in one read of the interval: t's window exists
 * and the hint knows its slot; no slot holds a newer window, no window of
 * the interval is borrowed-only, the older ones are sealed (strict). The
 * same decision as sw__admit_general's in that state, window values kept.
 * raw (sw_metric_try_pass): the interval's PASS + n against raw_limit
 * instead of Sentinel's QPS check. Returns 1 admitted, 0 refused, -1 when
 * the general path must decide. */
static inline __attribute__((always_inline)) int sw__admit_fast(sw_metric *m, int64_t t,
                                                                int64_t n, double limit,
                                                                bool strict, bool raw,
                                                                int64_t raw_limit,
                                                                sw__admit_view *view) {
#define SW__OVER(pass) (raw ? (pass) + n > raw_limit : sw__over((pass), m->isec, n, limit))
  const sw_leap_array *la = &m->la;
  const uint32_t nwin = (uint32_t)la->n, stripes = m->cfg.stripes;
  int64_t ws;
  sw__la_slot *cs;
  uint64_t cq;
  uint32_t idx;
  if (sw__unlikely(nwin > SW__ADMIT_WINDOWS || !sw__la_hinted(la, t, &ws, &cs, &cq, &idx)))
    return -1;
  int64_t acc;
  if (nwin == 2) { /* Sentinel's per-second geometry: the other slot */
    if ((acc = sw__older_pass(m, idx ^ 1, ws - la->wl, ws, strict)) < 0) return -1;
    view->win[1] = acc;
  } else {
    acc = 0;
    for (uint32_t i = 1; i < nwin; i++) { /* the older windows, newest first */
      int64_t v = sw__older_pass(m, (idx + nwin - i) % nwin, ws - (int64_t)i * la->wl, ws, strict);
      if (v < 0) return -1;
      view->win[i] = v;
      acc += v;
    }
  }
  sw__mb_stripe *cur = sw__la_body(la, cs, (cq >> 1) & 1);
  view->nwin = nwin;
  view->ws = ws;
  if (!strict) {
    int64_t c = sw__mb_sum(stripes, cur, SW_EVENT_PASS) & ~SW__SEALED;
    if (sw__unlikely(!sw__la_still_valid(cs, cq))) return -1;
    view->pass = acc + c;
    view->win[0] = c;
    if (SW__OVER(acc + c)) return 0;
    sw__mb_add(&m->cfg, cur, SW_EVENT_PASS, n);
    return 1;
  }
  acc += sw__mb_sum_tail(stripes, cur, SW_EVENT_PASS); /* all but the CAS word */
  if (sw__unlikely(!sw__la_still_valid(cs, cq))) return -1;
  _Atomic int64_t *word = &cur->c[SW_EVENT_PASS];
  SW__KILL_POINT("strict-cas"); /* read, not yet counted: a test stops here */
  int64_t c = atomic_load_explicit(word, memory_order_relaxed);
  for (;;) {
    if (sw__unlikely(c & SW__SEALED)) return -1; /* a newer window has started */
    view->pass = acc + c;
    if (SW__OVER(acc + c)) break;
    if (atomic_compare_exchange_weak_explicit(word, &c, c + n, memory_order_relaxed,
                                              memory_order_relaxed))
      return 1;
  }
  int64_t older = 0; /* refused: t's window is what the others are not */
  for (uint32_t i = 1; i < nwin; i++) older += view->win[i];
  view->win[0] = view->pass - older;
  return 0;
#undef SW__OVER
}

#endif /* SW_ADMIT_H */
