/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of sw_breaker: the state machine of Sentinel's circuit
 * breakers in one position-independent block, on the heap or in a shared
 * segment (one breaker for every process that maps it):
 *
 *   header (magic, layout, rule) | state line | probe line | counters line
 *   | leap array of sw.breaker.slow / sw.breaker.error buckets
 *
 * The state is one atomic word: state (2 bits) | epoch (20 bits) | time
 * (42 bits: OPEN: when the next probe may go; otherwise when the state
 * began). Every transition is one CAS of that word that also advances the
 * epoch, so a transition is decided once, by one thread of one process,
 * whatever races with it, and no lock is ever held.
 *
 * Probes are leases. Each of the rule's half-open calls has a word:
 * epoch (20 bits) | deadline (44 bits). A word of an older epoch is free;
 * one of the current epoch is held until its deadline (an entry took it
 * with a CAS), or done (SW__BRK_DONE: the probe ended well). A probe whose
 * process died never ends: once its deadline passes, the next entry takes
 * the word with a CAS and probes in its place. The decision carries the
 * word it took (sw_decision.probe), so a late or lost probe's exit finds
 * its word gone or its epoch past, and decides nothing. */
#ifndef SW_BREAKER_H
#define SW_BREAKER_H

#include <stdint.h>

#define SW__BRK_MAGIC 0x4b525753u /* "SWRK" */
#define SW__BRK_LAYOUT_VERSION 1u
#define SW__BRK_PROBES_MAX 32
#define SW__BRK_TIME_BITS 42
#define SW__BRK_TIME_MAX ((INT64_C(1) << SW__BRK_TIME_BITS) - 1) /* times are below this */
#define SW__BRK_EPOCH_MASK ((UINT64_C(1) << 20) - 1)
#define SW__BRK_DL_BITS 44
#define SW__BRK_DONE ((UINT64_C(1) << SW__BRK_DL_BITS) - 1)

extern const sw_bucket_type sw__brk_slow_type;
extern const sw_bucket_type sw__brk_error_type;
void sw__brk_bucket_clear(void *bucket);

#ifdef SW_BREAKER_INTERNALS /* the breaker's own files; buckets.c needs only the above */
#include "../leap_array.h"

/* A validated DegradeRule. */
typedef struct sw__brk_rule {
  int32_t strategy;     /* SW_BREAKER_* */
  int32_t sample_count;
  int64_t interval_ms;  /* statIntervalMs */
  double count;         /* max RT (ms), error ratio or error count */
  double slow_ratio;
  int64_t max_rt_ms;    /* round(count) for the slow ratio */
  int64_t open_ms;      /* timeWindow in ms */
  int64_t min_requests;
  int64_t probe_timeout_ms;
  int32_t half_open_calls;
  int32_t pad_;
} sw__brk_rule;

/* Transition counters (sw_breaker_info). */
enum { SW__BRK_OPENED, SW__BRK_HALF_OPENED, SW__BRK_CLOSED, SW__BRK_REOPENED, SW__BRK_PROBES,
       SW__BRK_LOST, SW__BRK_BLOCKED, SW__BRK_NCOUNT };

typedef struct sw__brk_block {
  uint32_t magic;
  uint32_t layout_version;
  uint64_t total_size;
  uint64_t la_off;
  sw__brk_rule rule;
  _Alignas(64) _Atomic uint64_t state;
  _Alignas(64) _Atomic uint64_t probe[SW__BRK_PROBES_MAX];
  _Alignas(64) _Atomic int64_t count[SW__BRK_NCOUNT];
} sw__brk_block;

struct sw_breaker {
  sw__brk_block *blk;
  sw_leap_array la;
  sw_breaker_listener_fn listener;
  void *listener_user;
  struct sw__shm *shm; /* a shared breaker's segment, else NULL */
  bool readonly;
};

/* The state word. */
static inline uint32_t sw__brk_state(uint64_t w) { return (uint32_t)(w & 3); }
static inline uint64_t sw__brk_epoch(uint64_t w) { return (w >> 2) & SW__BRK_EPOCH_MASK; }
static inline int64_t sw__brk_time(uint64_t w) { return (int64_t)(w >> 22); }
static inline uint64_t sw__brk_word(uint32_t state, uint64_t epoch, int64_t t) {
  return (uint64_t)t << 22 | (epoch & SW__BRK_EPOCH_MASK) << 2 | state;
}
/* A probe word. */
static inline uint64_t sw__brk_tag(uint64_t p) { return p >> SW__BRK_DL_BITS; }
static inline uint64_t sw__brk_deadline(uint64_t p) { return p & SW__BRK_DONE; }
static inline uint64_t sw__brk_probe_word(uint64_t epoch, uint64_t deadline) {
  return (epoch & SW__BRK_EPOCH_MASK) << SW__BRK_DL_BITS | deadline;
}
/* t + d, kept below the largest time a word holds. */
static inline int64_t sw__brk_later(int64_t t, int64_t d) {
  return d >= SW__BRK_TIME_MAX - t ? SW__BRK_TIME_MAX - 1 : t + d;
}

/* Options to a rule (SW_ERANGE / SW_ESIZE naming the value). */
int sw__brk_rule_from(const sw_options *opts, sw__brk_rule *r);
void sw__brk_rule_to(const sw__brk_rule *r, sw_options *opts);
/* The block's size for a rule, its initialisation, and binding a handle. */
uint64_t sw__brk_size(const sw__brk_rule *r);
int sw__brk_init(void *mem, const sw__brk_rule *r, bool process_shared);
int sw__brk_bind(sw_breaker *b, void *mem, uint64_t size);
/* Completions and bad ones over the windows of the interval ending at t. */
void sw__brk_sums(const sw_breaker *b, int64_t t, int64_t *total, int64_t *bad);
/* Clear the windows of the interval ending at t (a breaker that closes). */
void sw__brk_clear_windows(sw_breaker *b, int64_t t);
#endif

#endif /* SW_BREAKER_H */
