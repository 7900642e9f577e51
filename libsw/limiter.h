/* Internal layout of sw_limiter: a rule and controller state in front of a
 * node, in one position-independent block, so that a limiter can live in a
 * shared segment as well as on the heap:
 *   header + rule (seqlock) | controller state line | node block */
#ifndef SW_LIMITER_H
#define SW_LIMITER_H

#include "node.h"

#define SW__LIMITER_MAGIC 0x4d4c5753u /* "SWLM" */

/* A validated rule with its derived warm-up constants. */
typedef struct sw__rule {
  int32_t grade, behavior, strict, cold_factor;
  double threshold;
  int64_t max_queue_ms, warm_up_sec;
  int64_t warning_token, max_token;
  double slope;
} sw__rule;

#define SW__RULE_WORDS 8
_Static_assert(sizeof(sw__rule) == SW__RULE_WORDS * 8, "rule fits its words");

typedef struct sw__limiter_hdr {
  uint32_t magic;
  uint32_t pad_;
  uint64_t node_off, total_size;
  _Atomic uint64_t rule_seq; /* odd while the rule is being written */
  _Atomic uint64_t rule[SW__RULE_WORDS];
  pthread_mutex_t rule_lock; /* robust: serialises rule writers */
} sw__limiter_hdr;

/* Controller state, shared by every user of the limiter. */
typedef struct sw__limiter_state {
  _Atomic int64_t latest_passed;  /* pacing: time of the last admission */
  _Atomic int64_t stored_tokens;  /* warm-up */
  _Atomic int64_t last_filled;    /* warm-up: second of the last refill */
} sw__limiter_state;

struct sw_limiter {
  sw__limiter_hdr *hdr;
  sw__limiter_state *st;
  sw_node node;
  bool owns_block;
  bool readonly; /* bound to a read-only mapping: writes are refused */
  bool borrowed; /* part of a larger object: *_free leaves it alone */
};

/* Build a rule from options (validating it, with a message naming the bad value). */
int sw__rule_from(const sw_options *opts, sw__rule *r);
uint64_t sw__limiter_size(const sw__node_geom *g);
int sw__limiter_init(void *mem, const sw__node_geom *g, const sw__rule *r, bool process_shared);
void sw__limiter_fini(void *mem);
int sw__limiter_bind(sw_limiter *l, void *mem);
int sw__limiter_check(const void *mem, const sw__node_geom *g);
/* Mark a limiter and every handle under it read-only. */
void sw__limiter_set_readonly(sw_limiter *l);

#endif /* SW_LIMITER_H */
