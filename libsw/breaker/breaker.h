/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of sw_breaker: the state machine of Sentinel's circuit
 * breakers in one position-independent block, on the heap or in a shared
 * segment (one breaker for every process that maps it):
 *
 *   header (magic, layout, rule) | state line | probe line (clock, probe
 *   places) | counters line | leap array of sw.breaker.slow / .error buckets
 *
 * Words. The state is one atomic word: time (62 bits) | state (2 bits);
 * the time is, OPEN: when the next probe may go; HALF_OPEN: when the
 * half-open period began (its start, s); CLOSED: when it closed. A probe
 * place is one word: deadline (63 bits) | done (1 bit); 0 is free. Every
 * transition is one CAS of the state word, so it is decided once, by one
 * call of one process, whatever races with it; no lock is ever held.
 *
 * Time only moves forward, so no word ever comes back. Each transition
 * writes a time no earlier than the word it replaces: OPEN at
 * max(t, time) + open_ms (so at least 1 ms later), HALF_OPEN at
 * max(t, clock + 1), CLOSED at max(t, s). Every cycle passes through OPEN,
 * so the state word's time grows by at least open_ms every three
 * transitions and a state word never repeats: a CAS from a word read
 * before a pause fails once anything happened, after any number of
 * transitions. There is no generation counter to wrap.
 *
 * Probes are leases. A probe of the period that began at s takes a place
 * by CAS with its deadline max(t, s) + probe_timeout. A word belongs to the
 * period s when its deadline >= s + probe_timeout; any other word is of an
 * earlier period, so free. This needs every lease of an earlier period to
 * lie before s, whatever time its caller passed, and the clock gives it: a
 * prober first raises the clock word to its t (announce), then reads the
 * state; the entry that starts a period reads the state, then the clock,
 * and starts at clock + 1 or later (all seq_cst, so a prober that read the
 * earlier period's state announced before the starter read the clock).
 * So a late exit, done mark or cancel of a paused probe finds no word of
 * its own in any later period and decides nothing there.
 *
 * Changes of several shared writes, and their kill points (SW__KILL_POINT,
 * SIGKILL or SIGSTOP there in tests/check_breaker_kill.c):
 *  - OPEN -> HALF_OPEN: CAS | breaker-half-open | count. A probe then
 *    leases like any entry.
 *  - lease: raise the clock | breaker-lease-clock | CAS a place
 *    | breaker-lease | (the state still the same? else lease again: the
 *    place left behind is of a past period, so free) count | breaker-probe.
 *    A prober that died holds its place until the deadline; then the next
 *    entry takes it (counted lost).
 *  - good probe: breaker-probe-end | CAS its place done | breaker-probe-done
 *    | (every place done?) clear the windows | breaker-close-cleared | CAS
 *    CLOSED | breaker-closed | count. A closer that died after its done
 *    mark is helped: an entry that finds every place of the period done
 *    clears and closes itself (counted and told to its listener once, by
 *    the CAS winner). A closer paused before its clear clears, when it goes
 *    on, only windows that began by its close time (no later window).
 *  - bad probe: CAS OPEN | breaker-reopened | count.
 *  - cancel: breaker-cancel | CAS its place free.
 *  - CLOSED -> OPEN (an exit): CAS | breaker-opened | count.
 * A process that dies between a CAS and its count leaves that counter one
 * short (the counters are statistics, the state word is the truth).
 *
 * A damaged segment never crashes or hangs a call: the rule is checked
 * when a handle binds and copied into it (the shared copy is never read
 * again), a state 3 or a time past SW__BRK_WORD_TIME_MAX is SW_ECORRUPT
 * naming the segment, and every retry loop over a shared word gives up
 * with SW_ECORRUPT after SW__BRK_RETRIES rounds. */
#ifndef SW_BREAKER_H
#define SW_BREAKER_H

#include <stdint.h>

#define SW__BRK_MAGIC 0x4b525753u /* "SWRK" */
#define SW__BRK_LAYOUT_VERSION 2u
#define SW__BRK_PROBES_MAX 32
/* Times the API takes are below this (2^42 ms, 139 years). */
#define SW__BRK_TIME_MAX ((INT64_C(1) << 42) - 1)
/* Times a word holds: far above any the API makes (SW__BRK_TIME_MAX + the
 * longest time window, 10^11 ms), below what a word can hold. */
#define SW__BRK_WORD_TIME_MAX (INT64_C(1) << 60)
#define SW__BRK_OPEN_MS_MAX INT64_C(100000000000)  /* SW_OPT_BREAKER_TIME_WINDOW_SEC 1e8 */
#define SW__BRK_PROBE_TIMEOUT_MAX INT64_C(86400000) /* SW_OPT_BREAKER_PROBE_TIMEOUT_MS */
/* Rounds of a retry loop over a shared word before SW_ECORRUPT. */
#define SW__BRK_RETRIES 10000

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
  _Alignas(64) _Atomic int64_t clock; /* the latest time a prober announced */
  _Atomic uint64_t probe[SW__BRK_PROBES_MAX];
  _Alignas(64) _Atomic int64_t count[SW__BRK_NCOUNT];
} sw__brk_block;

struct sw_breaker {
  sw__brk_block *blk;
  sw__brk_rule rule; /* the block's, checked when bound: never read from the block again */
  sw_leap_array la;
  sw_breaker_listener_fn listener;
  void *listener_user;
  struct sw__shm *shm; /* a shared breaker's segment, else NULL */
  bool readonly;
  char name[112];      /* the segment's name or path, for messages ("" on the heap) */
};

/* The state word. */
static inline uint32_t sw__brk_state(uint64_t w) { return (uint32_t)(w & 3); }
static inline int64_t sw__brk_time(uint64_t w) { return (int64_t)(w >> 2); }
static inline uint64_t sw__brk_word(uint32_t state, int64_t t) { return (uint64_t)t << 2 | state; }
/* A probe place's word. */
#define SW__BRK_DONE UINT64_C(1)
static inline int64_t sw__brk_deadline(uint64_t p) { return (int64_t)(p >> 1); }
static inline uint64_t sw__brk_lease_word(int64_t deadline) { return (uint64_t)deadline << 1; }
/* Whether the probe word p belongs to the half-open period of state word w
 * (see above: every lease of an earlier period ended before w began). */
static inline bool sw__brk_of(const sw_breaker *b, uint64_t w, uint64_t p) {
  return sw__brk_deadline(p) >= sw__brk_time(w) + b->rule.probe_timeout_ms;
}

/* Options to a rule (SW_ERANGE / SW_ESIZE naming the value). */
int sw__brk_rule_from(const sw_options *opts, sw__brk_rule *r);
void sw__brk_rule_to(const sw__brk_rule *r, sw_options *opts);
/* The block's size for a rule, its initialisation, and binding a handle. */
uint64_t sw__brk_size(const sw__brk_rule *r);
int sw__brk_init(void *mem, const sw__brk_rule *r, bool process_shared);
int sw__brk_bind(sw_breaker *b, void *mem, uint64_t size);
/* SW_ECORRUPT with a message naming the breaker's segment. */
int sw__brk_corrupt(const sw_breaker *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Completions and bad ones over the windows of the interval ending at t. */
void sw__brk_sums(const sw_breaker *b, int64_t t, int64_t *total, int64_t *bad);
/* Clear the windows of the interval ending at t that began by t (a breaker that closes at t). */
void sw__brk_clear_windows(sw_breaker *b, int64_t t);
#endif

#endif /* SW_BREAKER_H */
