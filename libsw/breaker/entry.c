/* SPDX-License-Identifier: Apache-2.0 */
/* A circuit breaker's hot path: the entry, the exit and every transition
 * (the protocol, its words and its kill points are in breaker.h).
 * Sentinel's AbstractCircuitBreaker, ResponseTimeCircuitBreaker and
 * ExceptionCircuitBreaker, with the state in one word that every process
 * sees and changes by CAS, and probes as leases. Nothing here waits or
 * locks. */
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

static inline int64_t sw__brk_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* A transition this call made: count it, then tell the listener. */
static void sw__brk_changed(sw_breaker *b, int counter, uint32_t from, uint32_t to, int64_t t,
                            double value) {
  atomic_fetch_add_explicit(&b->blk->count[counter], 1, memory_order_relaxed);
  if (b->listener) b->listener(b->listener_user, (int32_t)from, (int32_t)to, t, value);
}

/* Move from the state word w to state `to` at `time` (see breaker.h): 1 if
 * this call made the transition, 0 if someone else changed w first, or
 * SW_ECORRUPT when the time is past what a word holds (only a damaged word
 * leads there). */
static int sw__brk_move(sw_breaker *b, uint64_t w, uint32_t to, int64_t time) {
  if (sw__unlikely(time > SW__BRK_WORD_TIME_MAX))
    return sw__brk_corrupt(b, "its state word 0x%016llx leads to the time %lld ms",
                           (unsigned long long)w, (long long)time);
  return atomic_compare_exchange_strong(&b->blk->state, &w, sw__brk_word(to, time));
}

static int sw__brk_refuse(sw_breaker *b, sw_decision *d, int64_t retry_after) {
  memset(d, 0, sizeof *d);
  d->verdict = SW_VERDICT_BLOCK;
  d->retry_after_ms = retry_after > 0 ? retry_after : 1;
  atomic_fetch_add_explicit(&b->blk->count[SW__BRK_BLOCKED], 1, memory_order_relaxed);
  return SW_OK;
}

/* A prober announces its time before it reads the state it leases in: the
 * clock word rises to t (see breaker.h for why). */
static int sw__brk_announce(sw_breaker *b, int64_t t) {
  _Atomic int64_t *clock = &b->blk->clock;
  int64_t c = atomic_load(clock);
  for (int i = 0; c < t; i++) {
    if (i == SW__BRK_RETRIES)
      return sw__brk_corrupt(b, "its clock word changed %d times under one entry", i);
    if (atomic_compare_exchange_weak(clock, &c, t)) break;
  }
  SW__KILL_POINT("breaker-lease-clock");
  return SW_OK;
}

/* The breaker closes: the half-open period w ended with every probe good,
 * at t. The windows are cleared first (Sentinel's resetStat), so a closer
 * that dies anywhere leaves them cleared or the breaker half-open with
 * every place done, which the next entry closes (helping). */
static int sw__brk_close(sw_breaker *b, uint64_t w, int64_t t) {
  const int64_t at = sw__brk_max(t, sw__brk_time(w));
  if (atomic_load(&b->blk->state) != w) return SW_OK;
  sw__brk_clear_windows(b, at);
  SW__KILL_POINT("breaker-close-cleared");
  const int moved = sw__brk_move(b, w, SW_BREAKER_CLOSED, at);
  if (moved <= 0) return moved;
  SW__KILL_POINT("breaker-closed");
  sw__brk_changed(b, SW__BRK_CLOSED, SW_BREAKER_HALF_OPEN, SW_BREAKER_CLOSED, at, 0);
  return SW_OK;
}

/* Take a probe lease of the half-open period w at t: 1 with the lease's word
 * (*lost: it replaced a lease of w whose deadline had passed), 0 when every
 * place is held or done (*retry: until the earliest deadline), 2 when every
 * place is done (the period should have closed: close it), or an error. */
static int sw__brk_lease(sw_breaker *b, uint64_t w, int64_t t, uint64_t *word, int64_t *retry,
                         bool *lost) {
  sw__brk_block *blk = b->blk;
  const int n = b->rule.half_open_calls;
  const uint64_t mine =
      sw__brk_lease_word(sw__brk_max(t, sw__brk_time(w)) + b->rule.probe_timeout_ms);
  int64_t soonest = INT64_MAX;
  int done = 0;
  for (int i = 0; i < n; i++) {
    uint64_t p = atomic_load(&blk->probe[i]);
    for (int tries = 0;; tries++) {
      if (tries == SW__BRK_RETRIES)
        return sw__brk_corrupt(b, "its probe place %d changed %d times under one entry", i,
                               tries);
      const bool of = sw__brk_of(b, w, p);
      if (of && (p & SW__BRK_DONE)) {
        done++;
        break;
      }
      if (of && sw__brk_deadline(p) > t) {
        if (sw__brk_deadline(p) < soonest) soonest = sw__brk_deadline(p);
        break;
      }
      *lost = of; /* a lease of this period whose deadline passed */
      if (atomic_compare_exchange_strong(&blk->probe[i], &p, mine)) {
        *word = mine;
        return 1;
      }
    }
  }
  if (done == n) return 2;
  *retry = soonest == INT64_MAX ? 1 : soonest - t;
  return 0;
}

/* Everything but a closed breaker's entry. */
static __attribute__((noinline)) int sw__brk_entry_slow(sw_breaker *b, int64_t t,
                                                        sw_decision *d) {
  sw__brk_block *blk = b->blk;
  bool announced = false;
  for (int round = 0; round < SW__BRK_RETRIES; round++) {
    const uint64_t w = atomic_load(&blk->state);
    const uint32_t s = sw__brk_state(w);
    if (s == SW_BREAKER_CLOSED) {
      memset(d, 0, sizeof *d);
      return SW_OK;
    }
    if (s == SW_BREAKER_OPEN) {
      const int64_t next = sw__brk_time(w);
      if (t < next) return sw__brk_refuse(b, d, next - t);
      /* retryTimeoutArrived: OPEN -> HALF_OPEN, once, after every time a
       * prober announced; then probe like anyone */
      const int64_t clock = atomic_load(&blk->clock);
      if (sw__unlikely(clock > SW__BRK_WORD_TIME_MAX))
        return sw__brk_corrupt(b, "its clock word holds %lld ms", (long long)clock);
      const int64_t start = sw__brk_max(t, clock + 1);
      const int moved = sw__brk_move(b, w, SW_BREAKER_HALF_OPEN, start);
      if (moved < 0) return moved;
      if (moved) {
        SW__KILL_POINT("breaker-half-open");
        sw__brk_changed(b, SW__BRK_HALF_OPENED, SW_BREAKER_OPEN, SW_BREAKER_HALF_OPEN, start, 0);
      }
      continue;
    }
    if (sw__unlikely(s != SW_BREAKER_HALF_OPEN))
      return sw__brk_corrupt(b, "its state word 0x%016llx holds no state",
                             (unsigned long long)w);
    if (!announced) { /* then read the state again */
      int rc = sw__brk_announce(b, t);
      if (rc < 0) return rc;
      announced = true;
      continue;
    }
    uint64_t word = 0;
    int64_t retry = 1;
    bool lost = false;
    const int got = sw__brk_lease(b, w, t, &word, &retry, &lost);
    if (got < 0) return got;
    if (got == 0) return sw__brk_refuse(b, d, retry);
    if (got == 2) { /* a closer died after its done mark: close for it */
      int rc = sw__brk_close(b, w, t);
      if (rc < 0) return rc;
      continue;
    }
    SW__KILL_POINT("breaker-lease");
    /* A lease counts only if w was still the state after it was taken;
     * otherwise it is of a past period, so free: lease again. */
    if (atomic_load(&blk->state) != w) continue;
    atomic_fetch_add_explicit(&blk->count[SW__BRK_PROBES], 1, memory_order_relaxed);
    if (lost) atomic_fetch_add_explicit(&blk->count[SW__BRK_LOST], 1, memory_order_relaxed);
    SW__KILL_POINT("breaker-probe");
    memset(d, 0, sizeof *d);
    d->probe = (int64_t)word;
    return SW_OK;
  }
  return sw__brk_corrupt(b, "its state changed %d times under one entry", SW__BRK_RETRIES);
}

SW_API int sw_breaker_entry_at(sw_breaker *b, int64_t t, sw_decision *d) {
  SW__BRK_CHECK(b, t);
  SW__CHECK_NULL(d, "decision");
  const uint64_t w = atomic_load_explicit(&b->blk->state, memory_order_acquire);
  if (sw__likely(sw__brk_state(w) == SW_BREAKER_CLOSED)) {
    memset(d, 0, sizeof *d);
    return SW_OK;
  }
  return sw__brk_entry_slow(b, t, d);
}

SW_API int sw_breaker_entry(sw_breaker *b, sw_decision *d) {
  return sw_breaker_entry_at(b, sw__now_ms(), d);
}

/* A probe of the half-open period w ended: a bad one opens the breaker
 * again, a good one is done, and the last of the rule's good ones closes
 * it. A probe whose lease is gone (its timeout passed and another entry
 * took it) decides nothing. */
static int sw__brk_probe_end(sw_breaker *b, uint64_t w, uint64_t word, bool bad, int64_t t) {
  sw__brk_block *blk = b->blk;
  const int n = b->rule.half_open_calls;
  int i = 0;
  while (i < n && atomic_load(&blk->probe[i]) != word) i++;
  if (i == n) return SW_OK;
  if (bad) {
    const int64_t at = sw__brk_max(t, sw__brk_time(w));
    const int moved = sw__brk_move(b, w, SW_BREAKER_OPEN, at + b->rule.open_ms);
    if (moved <= 0) return moved;
    SW__KILL_POINT("breaker-reopened");
    sw__brk_changed(b, SW__BRK_REOPENED, SW_BREAKER_HALF_OPEN, SW_BREAKER_OPEN, at, 1.0);
    return SW_OK;
  }
  /* Leases taken in the same ms of one period have the same word: mark the
   * first place still holding it (another probe's exit may take the one
   * found first). */
  SW__KILL_POINT("breaker-probe-end"); /* found its place, not yet marked it */
  for (;; i++) {
    if (i == n) return SW_OK;
    uint64_t p = word;
    if (atomic_compare_exchange_strong(&blk->probe[i], &p, word | SW__BRK_DONE)) break;
  }
  SW__KILL_POINT("breaker-probe-done");
  for (int k = 0; k < n; k++) {
    const uint64_t p = atomic_load(&blk->probe[k]);
    if (!(p & SW__BRK_DONE) || !sw__brk_of(b, w, p)) return SW_OK;
  }
  return sw__brk_close(b, w, t);
}

/* A probe that did not run gives its place back: free for the next entry,
 * not lost (Sentinel flips back to OPEN with the old retry time, which lets
 * the next entry probe too). Only its own word is freed: a late cancel
 * finds none in a later period. */
static void sw__brk_probe_cancel(sw_breaker *b, uint64_t word) {
  sw__brk_block *blk = b->blk;
  SW__KILL_POINT("breaker-cancel");
  for (int i = 0; i < b->rule.half_open_calls; i++) {
    uint64_t p = word;
    if (atomic_compare_exchange_strong(&blk->probe[i], &p, 0)) return;
  }
}

/* Everything but a closed breaker's exit: nothing while open, the probe's
 * end while half-open. */
static __attribute__((noinline)) int sw__brk_exit_slow(sw_breaker *b, uint64_t w, int64_t t,
                                                       const sw_decision *d, bool bad) {
  const uint32_t s = sw__brk_state(w);
  if (s == SW_BREAKER_OPEN) return SW_OK;
  if (sw__unlikely(s != SW_BREAKER_HALF_OPEN))
    return sw__brk_corrupt(b, "its state word 0x%016llx holds no state", (unsigned long long)w);
  /* only a probe of this period decides it */
  if (d != NULL && d->probe != 0 && sw__brk_of(b, w, (uint64_t)d->probe))
    return sw__brk_probe_end(b, w, (uint64_t)d->probe, bad, t);
  return SW_OK;
}

SW_API int sw_breaker_exit_at(sw_breaker *b, int64_t t, const sw_decision *d, int64_t rt_ms,
                              uint32_t flags) {
  SW__BRK_CHECK(b, t);
  if (sw__unlikely(rt_ms < 0 || rt_ms > INT32_MAX))
    return sw__fail(SW_ERANGE, "rt_ms=%lld is outside 0..%d", (long long)rt_ms, INT32_MAX);
  if (sw__unlikely(flags & ~(SW_EXIT_ERROR | SW_EXIT_CANCEL)))
    return sw__fail(SW_EINVAL, "exit flags 0x%x: SW_EXIT_ERROR and SW_EXIT_CANCEL are known",
                    flags);
  if (sw__unlikely(flags & SW_EXIT_CANCEL)) {
    if (d != NULL && d->probe != 0) sw__brk_probe_cancel(b, (uint64_t)d->probe);
    return SW_OK;
  }
  const sw__brk_rule *r = &b->rule;
  const bool bad = r->strategy == SW_BREAKER_SLOW_RATIO ? rt_ms > r->max_rt_ms
                                                        : (flags & SW_EXIT_ERROR) != 0;
  void *body = sw__la_current_body(&b->la, t);
  if (sw__likely(body != NULL)) { /* NULL: t is behind the window (dropped, as any add) */
    b->la.vt.add(NULL, body, 0, 1);
    if (bad) b->la.vt.add(NULL, body, 1, 1);
  }
  const uint64_t w = atomic_load_explicit(&b->blk->state, memory_order_acquire);
  if (sw__unlikely(sw__brk_state(w) != SW_BREAKER_CLOSED))
    return sw__brk_exit_slow(b, w, t, d, bad);
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
  if (!trip) return SW_OK;
  const int64_t at = sw__brk_max(t, sw__brk_time(w));
  const int moved = sw__brk_move(b, w, SW_BREAKER_OPEN, at + r->open_ms);
  if (moved <= 0) return moved;
  SW__KILL_POINT("breaker-opened");
  sw__brk_changed(b, SW__BRK_OPENED, SW_BREAKER_CLOSED, SW_BREAKER_OPEN, at, v);
  return SW_OK;
}

SW_API int sw_breaker_exit(sw_breaker *b, const sw_decision *d, int64_t rt_ms, uint32_t flags) {
  return sw_breaker_exit_at(b, sw__now_ms(), d, rt_ms, flags);
}
