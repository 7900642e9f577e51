/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of sw_node (Sentinel's StatisticNode), shared with the
 * limiter and the registry. One position-independent block:
 *   header line | concurrency line | second metric block | minute metric block */
#ifndef SW_NODE_H
#define SW_NODE_H

#include "metric.h"

#define SW__NODE_MAGIC 0x444e5753u /* "SWND" */

typedef struct sw__node_hdr {
  uint32_t magic;
  uint32_t pad_;
  int64_t occupy_timeout;
  uint64_t second_off, minute_off, total_size;
} sw__node_hdr;

typedef struct sw__node_live {
  _Atomic int64_t concurrency;
} sw__node_live;

struct sw_node {
  sw__node_hdr *hdr;
  sw__node_live *live;
  sw_metric second; /* occupiable */
  sw_metric minute;
  bool owns_block;
  bool readonly; /* bound to a read-only mapping: writes are refused */
  bool borrowed; /* part of a larger object: *_free leaves it alone */
};

/* Geometry of a node, read from options and validated. */
typedef struct sw__node_geom {
  int32_t second_n, minute_n;
  int64_t second_interval, minute_interval, occupy_timeout, max_rt;
  uint32_t stripes;
} sw__node_geom;

int sw__node_geom_from(const sw_options *opts, sw__node_geom *g);
/* Validate a geometry (from options, or read back from a segment). */
int sw__node_geom_validate(const sw__node_geom *g);
int sw__node_check(const void *mem, const sw__node_geom *g);
uint64_t sw__node_size(const sw__node_geom *g);
int sw__node_init(void *mem, const sw__node_geom *g, bool process_shared);
void sw__node_fini(void *mem);
int sw__node_bind(sw_node *node, void *mem);

/* Count n of ev at t in a metric's current window (hinted: no division). */
static inline __attribute__((always_inline)) void sw__node_add(sw_metric *m, int64_t t,
                                                               sw_event ev, int64_t n) {
  void *b = sw__la_current_body(&m->la, t);
  if (sw__likely(b != NULL)) sw__mb_add(&m->cfg, b, ev, n);
}

/* Count n passes at t in the per-minute array and, unless the admission
 * already did, in the per-second one; and (in_flight) one more request in
 * flight, unless the admission already did. */
static inline __attribute__((always_inline)) void sw__node_count_pass(sw_node *node, int64_t t,
                                                                      int64_t n,
                                                                      bool second_counted,
                                                                      bool in_flight) {
  if (!second_counted) sw__node_add(&node->second, t, SW_EVENT_PASS, n);
  sw__node_add(&node->minute, t, SW_EVENT_PASS, n);
  if (in_flight) atomic_fetch_add_explicit(&node->live->concurrency, 1, memory_order_relaxed);
}

/* n of ev at t in both arrays (blocks, dry-run would-blocks). */
static inline __attribute__((always_inline)) void sw__node_count(sw_node *node, int64_t t,
                                                                 sw_event ev, int64_t n) {
  sw__node_add(&node->second, t, ev, n);
  sw__node_add(&node->minute, t, ev, n);
}

/* The end of a request at t in both arrays (the limiter's exit). */
static inline __attribute__((always_inline)) void sw__node_count_exit(sw_node *node, int64_t t,
                                                                      int64_t rt, int64_t n,
                                                                      bool error) {
  const uint32_t h = sw__stripe_hint();
  void *b;
  if ((b = sw__la_current_body(&node->second.la, t)))
    sw__mb_exit(&node->second.cfg, b, h, rt, n, error);
  if ((b = sw__la_current_body(&node->minute.la, t)))
    sw__mb_exit(&node->minute.cfg, b, h, rt, n, error);
}

/* One request less in flight; false if there was none. */
static inline __attribute__((always_inline)) bool sw__node_leave(sw_node *node) {
  _Atomic int64_t *c = &node->live->concurrency;
  int64_t v = atomic_load_explicit(c, memory_order_relaxed);
  do {
    if (sw__unlikely(v <= 0)) return false;
  } while (!atomic_compare_exchange_weak_explicit(c, &v, v - 1, memory_order_relaxed,
                                                  memory_order_relaxed));
  return true;
}

/* tryOccupyNext and addWaiting together: borrow n units for a coming
 * window if threshold allows; returns the wait, or the occupy timeout when
 * refused. strict: borrowers of one window reserve with one CAS on its
 * PASS word, re-checking after every change. *counted: whether the
 * per-second array counted the borrowed passes (not when a slot held a
 * newer window: the caller's clock is behind). */
int64_t sw__node_borrow(sw_node *node, int64_t t, int64_t n, double threshold, bool strict,
                        bool *counted);

#endif /* SW_NODE_H */
