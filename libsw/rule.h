/* SPDX-License-Identifier: Apache-2.0 */
/* A flow rule (grade, behaviour, threshold and the behaviour's parameters),
 * validated from options, and its storage in shared memory: a box of two
 * copies that readers never wait on. Used by the limiter and the keyed
 * table. */
#ifndef SW_RULE_H
#define SW_RULE_H

#include <stddef.h>
#include <string.h>

#include "internal.h"

/* A validated rule with its derived warm-up constants. */
typedef struct sw__rule {
  int32_t grade, behavior;
  int32_t strict;
  int16_t cluster; /* fleet-wide on Redis (lease.c) */
  int16_t dry_run; /* count "would block" and let everything pass */
  double threshold;
  /* ---- the 3 words above are read on every entry; below only when needed ---- */
  int32_t cold_factor, failure; /* warm-up; what a cluster rule does while Redis is down */
  int64_t max_queue_ms, warm_up_sec;
  int64_t warning_token, max_token;
  double slope;
  int64_t lease, timeout_ms, retry_ms;
  int32_t nodes, low_water_pct;
} sw__rule;

#define SW__RULE_WORDS 13
#define SW__RULE_HOT 3
_Static_assert(sizeof(sw__rule) == SW__RULE_WORDS * 8, "rule fits its words");

/* The rule is kept twice: ver names the published copy (ver & 1).
 * A writer (serialised by its owner's lock) fills the other copy, then advances
 * ver, so a reader never waits for a writer: it reads the published
 * copy and retries only if a write was published meanwhile (the next write
 * after that one reuses its copy). A writer killed halfway leaves only the
 * unpublished copy half written, and the next writer rewrites it whole. */
typedef struct sw__rule_box {
  _Atomic uint64_t ver;
  _Atomic uint64_t rule[2][SW__RULE_WORDS];
} sw__rule_box;

/* Build a rule from options (validating it, with a message naming the bad value). */
int sw__rule_from(const sw_options *opts, sw__rule *r);
/* Write the rule's options into opts. */
void sw__rule_to(const sw__rule *r, sw_options *opts);
/* Publish r (writers are serialised by the caller, or own the memory). */
void sw__rule_box_store(sw__rule_box *b, const sw__rule *r);

extern const char *const sw__behavior_names[4];

/* Load only the hot words of the rule (grade, behaviour, strict, cluster,
 * dry run, threshold): what the plain reject behaviour reads. Unrolled (the
 * loop of sw__rule_box_load costs a keyed entry 18 more instructions). */
_Static_assert(SW__RULE_HOT == 3, "sw__rule_box_hot loads the hot words one by one");
static inline __attribute__((always_inline)) void sw__rule_box_hot(const sw__rule_box *h,
                                                                    sw__rule *r) {
  union {
    uint64_t w[SW__RULE_HOT];
    sw__rule r;
  } u;
  uint64_t ver;
  do {
    ver = atomic_load_explicit(&h->ver, memory_order_acquire);
    const _Atomic uint64_t *copy = h->rule[ver & 1];
    u.w[0] = atomic_load_explicit(&copy[0], memory_order_relaxed);
    u.w[1] = atomic_load_explicit(&copy[1], memory_order_relaxed);
    u.w[2] = atomic_load_explicit(&copy[2], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
  } while (ver != atomic_load_explicit(&h->ver, memory_order_relaxed));
  memcpy(r, u.w, sizeof u.w);
}

/* The hot words and the queue bound: what pacing per key reads (keyed
 * tables; their rule has no other parameter). */
#define SW__RULE_QUEUE_WORD (offsetof(sw__rule, max_queue_ms) / 8)
_Static_assert(offsetof(sw__rule, max_queue_ms) % 8 == 0, "the queue bound is a word");
static inline __attribute__((always_inline)) void sw__rule_box_queue(const sw__rule_box *h,
                                                                      sw__rule *r) {
  uint64_t w[SW__RULE_HOT], q, ver;
  do {
    ver = atomic_load_explicit(&h->ver, memory_order_acquire);
    const _Atomic uint64_t *copy = h->rule[ver & 1];
    w[0] = atomic_load_explicit(&copy[0], memory_order_relaxed);
    w[1] = atomic_load_explicit(&copy[1], memory_order_relaxed);
    w[2] = atomic_load_explicit(&copy[2], memory_order_relaxed);
    q = atomic_load_explicit(&copy[SW__RULE_QUEUE_WORD], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
  } while (ver != atomic_load_explicit(&h->ver, memory_order_relaxed));
  memcpy(r, w, sizeof w);
  memcpy(&r->max_queue_ms, &q, sizeof q);
}

/* Load the rule; the reject behaviour needs only its hot words (loaded
 * unrolled, as sw__rule_box_hot does) unless full is set, the others read
 * the rest in the same pass. Never waits: a retry means a write was
 * published meanwhile. */
static inline __attribute__((always_inline)) void sw__rule_box_load(const sw__rule_box *h,
                                                                     sw__rule *r, bool full) {
  union {
    uint64_t w[SW__RULE_WORDS];
    sw__rule r;
  } u;
  uint64_t ver;
  bool rest;
  do {
    ver = atomic_load_explicit(&h->ver, memory_order_acquire);
    const _Atomic uint64_t *copy = h->rule[ver & 1];
    u.w[0] = atomic_load_explicit(&copy[0], memory_order_relaxed);
    u.w[1] = atomic_load_explicit(&copy[1], memory_order_relaxed);
    u.w[2] = atomic_load_explicit(&copy[2], memory_order_relaxed);
    rest = full || u.r.behavior != SW_BEHAVIOR_REJECT || u.r.cluster;
    for (int i = SW__RULE_HOT; rest && i < SW__RULE_WORDS; i++)
      u.w[i] = atomic_load_explicit(&copy[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
  } while (ver != atomic_load_explicit(&h->ver, memory_order_relaxed));
  memcpy(r, u.w, SW__RULE_HOT * sizeof u.w[0]);
  if (rest)
    memcpy((uint64_t *)r + SW__RULE_HOT, u.w + SW__RULE_HOT,
           (SW__RULE_WORDS - SW__RULE_HOT) * sizeof u.w[0]);
}

#endif /* SW_RULE_H */
