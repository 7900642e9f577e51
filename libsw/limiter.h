/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of sw_limiter: a rule and controller state in front of a
 * node, in one position-independent block, so that a limiter can live in a
 * shared segment as well as on the heap:
 *   header + rule (seqlock) | controller state line | node block */
#ifndef SW_LIMITER_H
#define SW_LIMITER_H

#include <sys/types.h>

#include "node.h"
#include "rule.h"

#define SW__LIMITER_MAGIC 0x4d4c5753u /* "SWLM" */

typedef struct sw__limiter_hdr {
  uint32_t magic;
  uint32_t registry_entry; /* in a registry: 1 + its index entry (sw_registry_at) */
  uint64_t node_off, total_size;
  sw__rule_box rule;
  pthread_mutex_t rule_lock; /* robust: serialises rule writers */
} sw__limiter_hdr;

/* A lease of fleet-wide tokens from Redis (lease.c). Each slot is one word,
 * tag (bucket number mod 2^24) << 40 | tokens, so that taking a token and
 * checking its bucket is one CAS; two slots hold the current and the next
 * bucket. */
typedef struct sw__lease {
  _Atomic uint64_t slot[2];
  _Atomic int64_t offset;        /* Redis time - local time, ms */
  _Atomic int64_t synced;        /* 1 once offset holds a measured value */
  _Atomic int64_t down_since;    /* local ms Redis was found down; 0: up */
  _Atomic int64_t call_since;    /* local ms of the call in flight; 0: none */
  _Atomic int64_t spent_bucket;  /* Redis ms of a bucket whose fleet budget is spent */
  _Atomic int64_t refund;        /* tokens of a past bucket to give back ... */
  _Atomic int64_t refund_bucket; /* ... to this bucket (Redis ms) */
  _Atomic int64_t calls;         /* script calls made */
  _Atomic int64_t granted;       /* tokens granted */
  _Atomic int64_t need;          /* local ms an entry first found the lease short; 0: none */
  _Atomic int64_t retry_at;      /* while down: local ms of the next try */
  /* Passes the failure policy admitted, per local bucket (tag << 40 | count,
   * bucket number mod 3), charged to Redis by the next call (recovery). */
  _Atomic uint64_t policy[3];
} sw__lease;

#define SW__NS_PER_MS INT64_C(1000000)
#define SW__PACING_NONE (-SW__NS_PER_MS)            /* no admission yet: Sentinel's -1 ms */
#define SW__PACING_MAX_MS (INT64_MAX / SW__NS_PER_MS) /* later times do not fit in ns */

/* Controller state, shared by every user of the limiter. */
typedef struct sw__limiter_state {
  _Atomic int64_t latest_passed;  /* pacing: time of the last admission, ns */
  _Atomic int64_t stored_tokens;  /* warm-up */
  _Atomic int64_t last_filled;    /* warm-up: second of the last refill */
  uint64_t id;                    /* drawn at creation: the tag of its receipts (receipt.h) */
  int64_t pad_[4];
  sw__lease lease;                /* cluster rules, on their own lines */
} sw__limiter_state;

struct sw_limiter {
  sw__limiter_hdr *hdr;
  sw__limiter_state *st;
  sw_node node;
  bool owns_block;
  bool readonly; /* bound to a read-only mapping: writes are refused */
  bool borrowed; /* part of a larger object: *_free leaves it alone */
  sw_cluster *_Atomic cluster; /* the cluster it is added to, if any (cluster.c) */
  pid_t cluster_pid;            /* ... by this process (a forked child has no refiller) */
  uint64_t receipt_tag, receipt_own_tag, receipt_mask; /* receipt.h, from st->id when bound */
};

/* Before a limiter handle's memory goes: out of its cluster, so that the
 * refiller never reads it again (waits for a round in progress). */
void sw__limiter_release(sw_limiter *l);

/* The limiter's whole rule. */
void sw__limiter_rule(const sw_limiter *l, sw__rule *r);
/* Reject behaviour on the QPS grade against limit (limiter.c). */
void sw__limiter_decide_qps(sw_limiter *l, const sw__rule *r, int64_t t, int64_t n,
                            uint32_t flags, double limit, sw_decision *d);
/* Count a decided entry: a block as BLOCK, or with a dry-run rule as a pass
 * that WOULD_BLOCK (the verdict becomes PASS). */
void sw__limiter_settle(sw_limiter *l, const sw__rule *r, int64_t t, int64_t n, uint32_t flags,
                        sw_decision *d);
/* The QPS warm-up allows with stored tokens (the threshold once warm). */
double sw__warm_rate(const sw__rule *r, int64_t stored_tokens);
/* A pacing admission's cost of n units at qps, in ns; -1 if it never passes. */
int64_t sw__pacing_cost(int64_t n, double qps);
/* Whether an entry with these flags counts a request in flight. */
static inline bool sw__in_flight(uint32_t flags) { return !(flags & SW_ENTRY_NO_EXIT); }
/* A cluster rule's entry (lease.c). */
int sw__decide_cluster(sw_limiter *l, const sw__rule *r, int64_t t, int64_t n, uint32_t flags,
                       sw_decision *d);
/* A cluster rule's budget per window of the per-second array (lease.c). */
int64_t sw__lease_threshold(const sw_limiter *l, const sw__rule *r);

uint64_t sw__limiter_size(const sw__node_geom *g);
int sw__limiter_init(void *mem, const sw__node_geom *g, const sw__rule *r, bool process_shared);
void sw__limiter_fini(void *mem);
int sw__limiter_bind(sw_limiter *l, void *mem);
int sw__limiter_check(const void *mem, const sw__node_geom *g);
/* Mark a limiter and every handle under it read-only. */
void sw__limiter_set_readonly(sw_limiter *l);

#endif /* SW_LIMITER_H */
