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

/* Count n passes at t in the per-minute array and, unless the admission
 * already did, in the per-second one; and (in_flight) one more request in
 * flight, unless the admission already did. */
void sw__node_count_pass(sw_node *node, int64_t t, int64_t n, bool second_counted,
                         bool in_flight);
/* tryOccupyNext and addWaiting together: borrow n units for a coming
 * window if threshold allows; returns the wait, or the occupy timeout when
 * refused. strict: borrowers of one window reserve with one CAS on its
 * PASS word, re-checking after every change. */
int64_t sw__node_borrow(sw_node *node, int64_t t, int64_t n, double threshold, bool strict);
/* One request less in flight; false if there was none. */
bool sw__node_leave(sw_node *node);
/* n blocks let through by a dry-run rule, in both arrays. */
void sw__node_count_would_block(sw_node *node, int64_t t, int64_t n);
/* The end of a request at t in both arrays (the limiter's exit). */
void sw__node_count_exit(sw_node *node, int64_t t, int64_t rt, int64_t n, bool error);

#endif /* SW_NODE_H */
