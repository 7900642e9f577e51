/* SPDX-License-Identifier: Apache-2.0 */
/* A circuit breaker's hot path: the entry, the exit and every transition
 * (the protocol is in breaker.h). Sentinel's AbstractCircuitBreaker,
 * ResponseTimeCircuitBreaker and ExceptionCircuitBreaker, with the state
 * in one word that every process sees and changes by CAS, and probes as
 * leases. Nothing here waits or locks. */
#include <string.h>

#define SW_BREAKER_INTERNALS
#include "../internal.h"
#include "breaker.h"

#define SW__BRK_CHECK(b, t)                                                         \
  do {                                                                              \
    SW__CHECK_NULL(b, "breaker");                                                   \
    SW__CHECK_WRITABLE(b);                                                          \
    SW__CHECK_TIME(t);                                                              \
    if (sw__unlikely((t) > SW__BRK_TIME_MAX))                                      \
      return sw__fail(SW_ETIME, "time %lld ms is past a breaker's last time (2^42 ms)", \
                      (long long)(t));                                              \
  } while (0)

/* A transition this call made: count it, then tell the listener. */
static void sw__brk_changed(sw_breaker *b, int counter, uint32_t from, uint32_t to, int64_t t,
                            double value) {
  atomic_fetch_add_explicit(&b->blk->count[counter], 1, memory_order_relaxed);
  if (b->listener) b->listener(b->listener_user, (int32_t)from, (int32_t)to, t, value);
}

/* Move from the state word w to state `to` (time: see breaker.h); true if
 * this call made the transition (false: someone else changed w first). */
static bool sw__brk_move(sw_breaker *b, uint64_t w, uint32_t to, int64_t time) {
  return atomic_compare_exchange_strong_explicit(&b->blk->state, &w,
                                                 sw__brk_word(to, sw__brk_epoch(w) + 1, time),
                                                 memory_order_acq_rel, memory_order_acquire);
}

static int sw__brk_refuse(sw_breaker *b, sw_decision *d, int64_t retry_after) {
  memset(d, 0, sizeof *d);
  d->verdict = SW_VERDICT_BLOCK;
  d->retry_after_ms = retry_after > 0 ? retry_after : 1;
  atomic_fetch_add_explicit(&b->blk->count[SW__BRK_BLOCKED], 1, memory_order_relaxed);
  return SW_OK;
}

/* Take a probe lease of the half-open state w at t: 1 with the lease's word
 * (*lost: it replaced a lease whose deadline had passed), 0 when every lease
 * is held or done (*retry: until the earliest deadline), -1 when w is no
 * longer the state (read it again). */
static int sw__brk_lease(sw_breaker *b, uint64_t w, int64_t t, uint64_t *word, int64_t *retry,
                         bool *lost) {
  sw__brk_block *blk = b->blk;
  const uint64_t e = sw__brk_epoch(w);
  const uint64_t mine = sw__brk_probe_word(e, (uint64_t)sw__brk_later(t, blk->rule.probe_timeout_ms));
  int64_t soonest = INT64_MAX;
  for (int i = 0; i < blk->rule.half_open_calls; i++) {
    uint64_t p = atomic_load_explicit(&blk->probe[i], memory_order_acquire);
    for (;;) {
      const uint64_t tag = sw__brk_tag(p), dl = sw__brk_deadline(p);
      *lost = tag == e;
      if (tag == e && dl == SW__BRK_DONE) break;
      if (tag == e && (int64_t)dl > t) {
        if ((int64_t)dl < soonest) soonest = (int64_t)dl;
        break;
      }
      /* A tag newer than e means w is stale, unless w is still the state
       * (then the tag is from an epoch 2^20 transitions ago: free). */
      if (tag != e && ((e - tag) & SW__BRK_EPOCH_MASK) > SW__BRK_EPOCH_MASK / 2 &&
          atomic_load_explicit(&blk->state, memory_order_acquire) != w)
        return -1;
      if (atomic_compare_exchange_strong_explicit(&blk->probe[i], &p, mine,
                                                  memory_order_acq_rel, memory_order_acquire)) {
        *word = mine;
        return 1;
      }
    }
  }
  *retry = soonest == INT64_MAX ? 1 : soonest - t;
  return 0;
}

/* Everything but a closed breaker's entry. */
static __attribute__((noinline)) int sw__brk_entry_slow(sw_breaker *b, int64_t t,
                                                        sw_decision *d, uint64_t w) {
  sw__brk_block *blk = b->blk;
  for (;;) {
    const uint32_t s = sw__brk_state(w);
    if (s == SW_BREAKER_CLOSED) {
      memset(d, 0, sizeof *d);
      return SW_OK;
    }
    if (s == SW_BREAKER_OPEN) {
      const int64_t next = sw__brk_time(w);
      if (t < next) return sw__brk_refuse(b, d, next - t);
      /* retryTimeoutArrived: OPEN -> HALF_OPEN, once; then probe like anyone */
      if (sw__brk_move(b, w, SW_BREAKER_HALF_OPEN, t)) {
        SW__KILL_POINT("breaker-half-open");
        sw__brk_changed(b, SW__BRK_HALF_OPENED, SW_BREAKER_OPEN, SW_BREAKER_HALF_OPEN, t, 0);
      }
      w = atomic_load_explicit(&blk->state, memory_order_acquire);
      continue;
    }
    uint64_t word = 0;
    int64_t retry = 1;
    bool lost = false;
    const int got = sw__brk_lease(b, w, t, &word, &retry, &lost);
    if (got == 0) return sw__brk_refuse(b, d, retry);
    /* A lease counts only if its epoch was still the state after it was
     * taken; otherwise it belongs to a past epoch, which frees it. */
    const uint64_t now = atomic_load_explicit(&blk->state, memory_order_acquire);
    if (got < 0 || now != w) {
      w = now;
      continue;
    }
    atomic_fetch_add_explicit(&blk->count[SW__BRK_PROBES], 1, memory_order_relaxed);
    if (lost) atomic_fetch_add_explicit(&blk->count[SW__BRK_LOST], 1, memory_order_relaxed);
    SW__KILL_POINT("breaker-probe");
    memset(d, 0, sizeof *d);
    d->probe = (int64_t)word;
    return SW_OK;
  }
}

SW_API int sw_breaker_entry_at(sw_breaker *b, int64_t t, sw_decision *d) {
  SW__BRK_CHECK(b, t);
  SW__CHECK_NULL(d, "decision");
  const uint64_t w = atomic_load_explicit(&b->blk->state, memory_order_acquire);
  if (sw__likely(sw__brk_state(w) == SW_BREAKER_CLOSED)) {
    memset(d, 0, sizeof *d);
    return SW_OK;
  }
  return sw__brk_entry_slow(b, t, d, w);
}

SW_API int sw_breaker_entry(sw_breaker *b, sw_decision *d) {
  return sw_breaker_entry_at(b, sw__now_ms(), d);
}

/* A probe of the half-open state w ended: a bad one opens the breaker
 * again, a good one is done, and the last of the rule's good ones closes
 * it. A probe whose lease is gone (its timeout passed and another entry
 * took it) decides nothing. */
static void sw__brk_probe_end(sw_breaker *b, uint64_t w, uint64_t word, bool bad, int64_t t) {
  sw__brk_block *blk = b->blk;
  const int n = blk->rule.half_open_calls;
  int i = 0;
  while (i < n && atomic_load_explicit(&blk->probe[i], memory_order_acquire) != word) i++;
  if (i == n) return;
  if (bad) {
    if (sw__brk_move(b, w, SW_BREAKER_OPEN, sw__brk_later(t, blk->rule.open_ms)))
      sw__brk_changed(b, SW__BRK_REOPENED, SW_BREAKER_HALF_OPEN, SW_BREAKER_OPEN, t, 1.0);
    return;
  }
  /* Leases taken in the same ms of one epoch have the same word: mark the
   * first slot still holding it (another probe's exit may take the one
   * found first). */
  const uint64_t e = sw__brk_epoch(w), done = sw__brk_probe_word(e, SW__BRK_DONE);
  SW__KILL_POINT("breaker-probe-end"); /* found its slot, not yet marked it */
  for (;; i++) {
    if (i == n) return;
    uint64_t p = word;
    if (atomic_compare_exchange_strong_explicit(&blk->probe[i], &p, done, memory_order_acq_rel,
                                                memory_order_acquire))
      break;
  }
  for (int k = 0; k < n; k++)
    if (atomic_load_explicit(&blk->probe[k], memory_order_acquire) != done) return;
  if (sw__brk_move(b, w, SW_BREAKER_CLOSED, t)) {
    sw__brk_clear_windows(b, t); /* Sentinel's resetStat */
    sw__brk_changed(b, SW__BRK_CLOSED, SW_BREAKER_HALF_OPEN, SW_BREAKER_CLOSED, t, 0);
  }
}

/* A probe that did not run gives its lease back: the word of an older
 * epoch is free for the next entry (Sentinel flips back to OPEN with the
 * old retry time, which lets the next entry probe too). */
static void sw__brk_probe_cancel(sw_breaker *b, uint64_t word) {
  sw__brk_block *blk = b->blk;
  const uint64_t freed = sw__brk_probe_word(sw__brk_tag(word) - 1, 0);
  for (int i = 0; i < blk->rule.half_open_calls; i++) {
    uint64_t p = word;
    if (atomic_compare_exchange_strong_explicit(&blk->probe[i], &p, freed, memory_order_acq_rel,
                                                memory_order_acquire))
      return;
  }
}

SW_API int sw_breaker_exit_at(sw_breaker *b, int64_t t, const sw_decision *d, int64_t rt_ms,
                              uint32_t flags) {
  SW__BRK_CHECK(b, t);
  if (sw__unlikely(rt_ms < 0 || rt_ms > INT32_MAX))
    return sw__fail(SW_ERANGE, "rt_ms=%lld is outside 0..%d", (long long)rt_ms, INT32_MAX);
  if (sw__unlikely(flags & ~(SW_EXIT_ERROR | SW_EXIT_CANCEL)))
    return sw__fail(SW_EINVAL, "exit flags 0x%x: SW_EXIT_ERROR and SW_EXIT_CANCEL are known",
                    flags);
  sw__brk_block *blk = b->blk;
  if (sw__unlikely(flags & SW_EXIT_CANCEL)) {
    if (d != NULL && d->probe != 0) sw__brk_probe_cancel(b, (uint64_t)d->probe);
    return SW_OK;
  }
  const sw__brk_rule *r = &blk->rule;
  const bool bad = r->strategy == SW_BREAKER_SLOW_RATIO ? rt_ms > r->max_rt_ms
                                                        : (flags & SW_EXIT_ERROR) != 0;
  void *body = sw__la_current_body(&b->la, t);
  if (sw__likely(body != NULL)) { /* NULL: t is behind the window (dropped, as any add) */
    b->la.vt.add(NULL, body, 0, 1);
    if (bad) b->la.vt.add(NULL, body, 1, 1);
  }
  const uint64_t w = atomic_load_explicit(&blk->state, memory_order_acquire);
  const uint32_t s = sw__brk_state(w);
  if (s == SW_BREAKER_OPEN) return SW_OK;
  if (s == SW_BREAKER_HALF_OPEN) {
    if (d != NULL && d->probe != 0 && sw__brk_tag((uint64_t)d->probe) == sw__brk_epoch(w))
      sw__brk_probe_end(b, w, (uint64_t)d->probe, bad, t);
    return SW_OK;
  }
  int64_t total, nbad;
  if (sw__likely(b->la.n == 1 && body != NULL)) {
    /* one window (Sentinel's): the interval is the window just counted */
    total = b->la.vt.get(NULL, body, 0);
    nbad = b->la.vt.get(NULL, body, 1);
  } else {
    sw__brk_sums(b, t, &total, &nbad);
  }
  if (total < r->min_requests) return SW_OK;
  const double v = r->strategy == SW_BREAKER_ERROR_COUNT ? (double)nbad
                                                         : (double)nbad / (double)total;
  const double limit = r->strategy == SW_BREAKER_SLOW_RATIO ? r->slow_ratio : r->count;
  /* the slow ratio opens at 100% when its threshold is 100% */
  const bool trip = v > limit || (r->strategy == SW_BREAKER_SLOW_RATIO && v == 1.0 && limit == 1.0);
  if (trip && sw__brk_move(b, w, SW_BREAKER_OPEN, sw__brk_later(t, r->open_ms)))
    sw__brk_changed(b, SW__BRK_OPENED, SW_BREAKER_CLOSED, SW_BREAKER_OPEN, t, v);
  return SW_OK;
}

SW_API int sw_breaker_exit(sw_breaker *b, const sw_decision *d, int64_t rt_ms, uint32_t flags) {
  return sw_breaker_exit_at(b, sw__now_ms(), d, rt_ms, flags);
}
