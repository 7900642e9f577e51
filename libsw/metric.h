/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of sw_metric, shared with the sliding view. */
#ifndef SW_METRIC_H
#define SW_METRIC_H

#include "metric_bucket.h"

/* A metric's block: this header, then the main leap array block and, for an
 * occupiable metric, the future array's block. Position-independent. */
#define SW__METRIC_MAGIC 0x544d5753u /* "SWMT" */
typedef struct sw__metric_hdr {
  uint32_t magic;
  uint32_t occupiable;
  uint32_t stripes;
  uint32_t pad_;
  int64_t max_rt;
  uint64_t main_off, future_off, total_size;
} sw__metric_hdr;

struct sw_metric {
  sw_leap_array la;     /* sw.metric or sw.metric.occupiable */
  sw_leap_array future; /* occupiable only (blk NULL otherwise): the borrow array */
  sw__metric_cfg cfg;   /* ctx of la */
  sw__metric_cfg fcfg;  /* ctx of future (one stripe) */
  sw__metric_hdr *hdr;
  double isec; /* the interval in seconds */
  bool owns_block;
  bool readonly; /* bound to a read-only mapping: writes are refused */
  bool borrowed; /* part of a larger object: *_free leaves it alone */
};

/* Validate a metric geometry (SW_ESIZE / SW_EOVERFLOW with a message). */
int sw__metric_validate(int32_t sample_count, int64_t interval_ms, uint32_t stripes);
/* Bytes of a metric block, 0 on overflow (validate first). */
uint64_t sw__metric_size(int32_t sample_count, bool occupiable, uint32_t stripes);
/* Initialise a zeroed block of sw__metric_size() bytes. */
int sw__metric_init(void *mem, int32_t sample_count, int64_t interval_ms, bool occupiable,
                    uint32_t stripes, int64_t max_rt, bool process_shared);
/* Check a block's layout against the geometry (SW_ECORRUPT ...). */
int sw__metric_check(const void *mem, int32_t sample_count, int64_t interval_ms,
                     bool occupiable, uint32_t stripes, int64_t max_rt);
/* Bind a handle (owned by the caller, not moved afterwards) to a block. */
int sw__metric_bind(sw_metric *m, void *mem);
/* Release what sw__metric_init set up in a heap block (not the memory). */
void sw__metric_fini(void *mem);
/* What an admission read: the interval's PASS its check saw and, when the
 * fast path decided, the PASS of each window from t's back (win[0] is t's
 * window; nwin = 0 when the general path decided). */
#define SW__ADMIT_WINDOWS 16
typedef struct sw__admit_view {
  int64_t pass;
  int64_t ws; /* the start of t's window */
  uint32_t nwin;
  int64_t win[SW__ADMIT_WINDOWS];
} sw__admit_view;

/* Admission of n at t against a QPS limit, from any state: passes if
 * floor(PASS / interval_sec) + n <= limit, and then counts n in the current
 * window's PASS. strict: the check and the count are one CAS on one word
 * (stripe 0's PASS of the current window), so concurrent strict admissions
 * never overshoot; otherwise Sentinel's check-then-add. Returns 1 admitted
 * and counted at *at (t, or for a strict admission behind a newer window,
 * that window's start), 2 admitted uncounted (t's slot holds a newer
 * window, or its reset failed), 0 refused; *pass_before gets the interval's
 * PASS its check saw. The limiter's entries call it when the fast path
 * (sw__admit_fast, admit.h) cannot decide. */
int sw__admit_general(sw_metric *m, int64_t t, int64_t n, double limit, bool strict,
                      int64_t *pass_before, int64_t *at);

/* The future (borrow) bucket of target's window, created or reset as
 * needed; NULL when its slot holds a newer window. Its slot may still hold
 * an older window whose borrowed passes no main window has taken (nothing
 * was counted while it was current): they are carried into that window of
 * the main array first, so that they count until it leaves the interval
 * instead of vanishing with the slot. A borrower's target is at most one
 * interval after its time, so that window has begun, and the main window
 * it replaces has left the interval. Rare path: a reset under a lock. */
void *sw__metric_future_body(sw_metric *m, int64_t target);
/* Borrow n passes for target's window (addWaiting): counted in the future
 * array, or in the main window once that is current (the future word
 * sealed). False when neither counted them (a slot held a newer window). */
bool sw__metric_borrow(sw_metric *m, int64_t target, int64_t n);

/* Read the metric options (SW_OPT_OCCUPIABLE, SW_OPT_STRIPES, SW_OPT_MAX_RT_MS). */
void sw__metric_options(const sw_options *opts, bool *occupiable, uint32_t *stripes,
                        int64_t *max_rt);

/* A window of a metric as its readers see it: a bucket of the main array,
 * or, for an occupiable metric, the future array's bucket of a window that
 * holds only passes borrowed for it (its main window not written yet). */
typedef struct sw__mwin {
  int64_t start;
  const void *bucket;
  const sw__metric_cfg *cfg;
} sw__mwin;

/* The windows sw__la_collect selects on the main array, plus the borrowed-only
 * windows selected by the same rule (and started by t), oldest first: the
 * oldest cap are written; returns how many there are. */
int sw__metric_collect(const sw_metric *m, sw__selector sel, int64_t t, sw_time_predicate pred,
                       void *user, sw__mwin *out, uint32_t cap);

/* Fill a record from a metric bucket. */
void sw__metric_record(const sw__metric_cfg *cfg, const void *bucket, int64_t start,
                       sw_metric_record *rec);

#endif /* SW_METRIC_H */
