/* SPDX-License-Identifier: Apache-2.0 */
/* Flow-rule limiters (sw_limiter_*): exact decisions at explicit times for
 * each behaviour, the strict / fast admission modes under threads, rules
 * changed at run time and every invalid input.
 *
 * Ported from Sentinel (see /work/notes/sentinel-reference.md §2):
 *   DefaultControllerTest           -> test_default_controller_port
 *   RateLimiterControllerTest,
 *   ThrottlingControllerTest        -> test_pacing_java_ports
 *   sentinel-golang tc_throttling   -> test_pacing_go_ports
 *   WarmUpControllerTest            -> test_warm_up_controller_port
 *   WarmUpRateLimiterControllerTest -> test_warm_up_pacing_port
 * Real sleeps and mocked nodes of the originals become explicit times and
 * statistics written into the limiter's own node. */
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"
#include "receipt.h"

/* ---------------------------------------------------------------- helpers */

static sw_options *opts_new(void) {
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  return o;
}

/* Options for a QPS or concurrency rule with the given behaviour. */
static sw_options *rule_opts(int grade, int behavior, double threshold) {
  sw_options *o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_GRADE, grade));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, behavior));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, threshold));
  return o;
}

static sw_limiter *limiter_from(const sw_options *o) {
  sw_limiter *l = NULL;
  ck_ok(sw_limiter_create(&l, o));
  ck_assert_ptr_nonnull(l);
  return l;
}

static sw_limiter *limiter_new(int grade, int behavior, double threshold) {
  sw_options *o = rule_opts(grade, behavior, threshold);
  sw_limiter *l = limiter_from(o);
  sw_options_free(o);
  return l;
}

/* A warm-up (or warm-up + pacing) limiter. */
static sw_limiter *warm_new(int behavior, double threshold, int64_t sec, int64_t cold,
                            int64_t max_queue) {
  sw_options *o = rule_opts(SW_GRADE_QPS, behavior, threshold);
  ck_ok(sw_options_set(o, SW_OPT_WARM_UP_SEC, sec));
  ck_ok(sw_options_set(o, SW_OPT_COLD_FACTOR, cold));
  if (max_queue >= 0) ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, max_queue));
  sw_limiter *l = limiter_from(o);
  sw_options_free(o);
  return l;
}

/* Decide an entry; the call itself must succeed. */
#define ENTER(l, t, n, flags, d) ck_ok(sw_limiter_entry_at((l), (t), (n), (flags), &(d)))

/* Check every field of a decision (borrowed and receipt included): an
 * admission's receipt names its kind (receipt.h), a block's is zero. */
#define ck_decision(d, v, wait, retry, rem, borrow)                                        \
  do {                                                                                     \
    const sw_decision *d_ = &(d);                                                          \
    ck_assert_msg(d_->verdict == (v) && d_->wait_ms == (wait) &&                           \
                      d_->retry_after_ms == (retry) && d_->remaining == (rem) &&           \
                      d_->borrowed == (borrow),                                            \
                  "decision {verdict %d, wait %lld, retry %lld, remaining %lld, "          \
                  "borrowed %d}, expected {%d, %lld, %lld, %lld, %d}",                     \
                  d_->verdict, (long long)d_->wait_ms, (long long)d_->retry_after_ms,      \
                  (long long)d_->remaining, d_->borrowed, (v), (long long)(wait),          \
                  (long long)(retry), (long long)(rem), (borrow));                         \
    ck_assert_int_eq(d_->would_block, 0);                                                \
    ck_assert_int_eq(d_->full, 0);                                                 \
    ck_assert_int_eq(d_->probe, 0); /* a breaker's field */                             \
    const uint64_t kind_ = (uint64_t)d_->receipt[1] >> SW__RC_KIND_SHIFT & 3;             \
    if (d_->verdict == BLOCK)                                                             \
      ck_assert(d_->receipt[0] == 0 && d_->receipt[1] == 0);                              \
    else if (d_->borrowed)                                                                \
      ck_assert_uint_eq(kind_, SW__RC_BORROW);                                            \
    else                                                                                  \
      ck_assert(kind_ == SW__RC_PASS || kind_ == SW__RC_PACING);                          \
  } while (0)

#define PASS SW_VERDICT_PASS
#define BLOCK SW_VERDICT_BLOCK
#define WAIT SW_VERDICT_WAIT

/* A blocked decision at t promises that an entry of n passes at
 * t + retry_after and not before: check both ends (they count a block and
 * a pass). */
#define ck_retry_exact(l, t, n, d)                                                         \
  do {                                                                                     \
    sw_decision r_;                                                                        \
    int64_t at_ = (t) + (d).retry_after_ms;                                                \
    ck_assert_int_gt((d).retry_after_ms, 0);                                               \
    ENTER(l, at_ - 1, n, 0, r_);                                                           \
    ck_assert_msg(r_.verdict == BLOCK, "entry at %lld (retry_after - 1) was not blocked",  \
                  (long long)(at_ - 1));                                                   \
    ENTER(l, at_, n, 0, r_);                                                               \
    ck_assert_msg(r_.verdict == PASS, "entry at %lld (t + retry_after) did not pass",      \
                  (long long)at_);                                                         \
  } while (0)

/* ------------------------------------------------------ reject (QPS grade) */

/* DefaultController: pass iff (int)passQps + n <= threshold. Threshold 10
 * admits exactly 10 in a second; remaining counts down; blocks say when the
 * 10 passes leave the interval. */
START_TEST(test_reject_admits_threshold_per_second) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_node *n = sw_limiter_node(l);
  sw_decision d;
  for (int i = 0; i < 20; i++) {
    int64_t t = 1000 + 50 * i;
    ENTER(l, t, 1, 0, d);
    if (i < 10)
      ck_decision(d, PASS, 0, 0, 9 - i, 0);
    else
      ck_decision(d, BLOCK, 0, 2000 - t, 0, 0);
  }
  ck_assert_double_eq(sw_node_pass_qps_at(n, 1999), 10);
  ck_assert_double_eq(sw_node_block_qps_at(n, 1999), 10);
  ck_assert_int_eq(sw_node_concurrency(n), 10);
  /* the 10 passes of window 1000 leave at 2000 */
  ENTER(l, 2000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 9, 0);
  ck_assert_int_eq(sw_node_total_pass_at(n, 2000), 11);
  ck_assert_int_eq(sw_node_block_request_at(n, 2000), 10);
  sw_limiter_free(l);

  /* all at one instant: 10 pass, the 11th waits a whole interval */
  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  for (int i = 0; i < 10; i++) {
    ENTER(l, 1000, 1, 0, d);
    ck_decision(d, PASS, 0, 0, 9 - i, 0);
  }
  ENTER(l, 1000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1000, 0, 0);
  ck_retry_exact(l, 1000, 1, d);
  sw_limiter_free(l);
}
END_TEST

/* retry_after is the time until enough old windows leave the interval:
 * 10 at 1000 -> a block at 1200 retries after 800; 5 at 1000 and 5 at 1600
 * -> a block at 1700 retries after 300 (only window 1000 needs to leave). */
START_TEST(test_reject_retry_after) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  for (int i = 0; i < 10; i++) ENTER(l, 1000, 1, 0, d);
  ENTER(l, 1200, 1, 0, d);
  ck_decision(d, BLOCK, 0, 800, 0, 0);
  ENTER(l, 1999, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1, 0, 0);
  ENTER(l, 2000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 9, 0);
  sw_limiter_free(l);

  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  for (int i = 0; i < 5; i++) ENTER(l, 1000, 1, 0, d);
  for (int i = 0; i < 5; i++) ENTER(l, 1600, 1, 0, d);
  ENTER(l, 1700, 1, 0, d);
  ck_decision(d, BLOCK, 0, 300, 0, 0);
  ck_retry_exact(l, 1700, 1, d);
  sw_limiter_free(l);

  /* a larger n may need more windows to leave: 2 at 1000, 8 at 1600 */
  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  ENTER(l, 1000, 2, 0, d);
  ENTER(l, 1600, 8, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 1700, 2, 0, d); /* 8 + 2 <= 10 once window 1000 left */
  ck_decision(d, BLOCK, 0, 300, 0, 0);
  ENTER(l, 1700, 3, 0, d); /* 8 + 3 > 10: window 1500 must leave too */
  ck_decision(d, BLOCK, 0, 800, 0, 0);
  ck_retry_exact(l, 1700, 3, d);
  sw_limiter_free(l);

  /* n > threshold can never pass */
  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  ENTER(l, 1000, 11, 0, d);
  ck_decision(d, BLOCK, 0, -1, 10, 0);
  ENTER(l, 1000, 10, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 1000, INT32_MAX, 0, d);
  ck_decision(d, BLOCK, 0, -1, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* DefaultControllerTest, through the limiter: passQps 9 -> pass (9 + 1 is
 * not > 10), passQps 10 -> block; thread grade: 7 in flight -> pass, 8 ->
 * block (threshold 8). */
START_TEST(test_default_controller_port) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  ck_ok(sw_node_add_pass_at(sw_limiter_node(l), 5000, 9));
  ENTER(l, 5100, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(l), 5100), 10);
  ENTER(l, 5100, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  sw_limiter_free(l);

  l = limiter_new(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 8);
  for (int i = 0; i < 7; i++) ck_ok(sw_node_increase_concurrency(sw_limiter_node(l)));
  ENTER(l, 5000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(sw_node_concurrency(sw_limiter_node(l)), 8);
  ENTER(l, 5000, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  sw_limiter_free(l);
}
END_TEST

/* passQps is truncated to an integer and the threshold may be fractional:
 * a 2 s per-second array with threshold 10 admits 20 (19 / 2 = 9.5 -> 9),
 * threshold 2.5 admits 2 a second, and n == 0 passes at the threshold. */
START_TEST(test_reject_truncation_and_fractions) {
  sw_decision d;
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 2000));
  sw_limiter *l = limiter_from(o);
  for (int i = 0; i < 20; i++) {
    ENTER(l, 4000, 1, 0, d);
    ck_assert_msg(d.verdict == PASS, "entry %d blocked", i);
  }
  ENTER(l, 4000, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 2000);
  sw_limiter_free(l);
  sw_options_free(o);

  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 2.5);
  ENTER(l, 1000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 1, 0);
  ENTER(l, 1000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 1000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1000, 0, 0);
  ENTER(l, 1000, 0, 0, d); /* 2 + 0 <= 2.5 */
  ck_decision(d, PASS, 0, 0, 0, 0);
  sw_limiter_free(l);

  /* threshold 0 blocks everything but n == 0 */
  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 0);
  ENTER(l, 1000, 1, 0, d);
  ck_decision(d, BLOCK, 0, -1, 0, 0);
  ENTER(l, 1000, 0, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* exit records successes, RT, exceptions (SW_EXIT_ERROR) and one request
 * less in flight; a block counts n blocks and nothing in flight. */
START_TEST(test_entry_and_exit_records) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 5);
  sw_node *n = sw_limiter_node(l);
  ENTER(l, 1000, 3, 0, d);
  ck_decision(d, PASS, 0, 0, 2, 0);
  ENTER(l, 1000, 3, 0, d);
  ck_decision(d, BLOCK, 0, 1000, 2, 0);
  ck_assert_int_eq(sw_node_concurrency(n), 1);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 1000), 3);
  ck_assert_double_eq(sw_node_block_qps_at(n, 1000), 3);
  ck_assert_int_eq(sw_node_total_pass_at(n, 1000), 3);
  ck_assert_int_eq(sw_node_block_request_at(n, 1000), 3);
  ck_ok(sw_limiter_exit_at(l, 1040, 40, 3, SW_EXIT_ERROR));
  ck_assert_int_eq(sw_node_concurrency(n), 0);
  ck_assert_double_eq(sw_node_success_qps_at(n, 1040), 3);
  ck_assert_double_eq(sw_node_exception_qps_at(n, 1040), 3);
  ck_assert_double_eq(sw_node_avg_rt_at(n, 1040), 40.0 / 3);
  ck_assert_double_eq(sw_node_min_rt_at(n, 1040), 40);
  ck_assert_int_eq(sw_node_total_success_at(n, 1040), 3);
  ck_assert_int_eq(sw_node_total_exception_at(n, 1040), 3);
  ENTER(l, 1100, 2, 0, d);
  ck_ok(sw_limiter_exit_at(l, 1110, 10, 2, 0));
  ck_assert_double_eq(sw_node_exception_qps_at(n, 1110), 3);
  ck_assert_double_eq(sw_node_success_qps_at(n, 1110), 5);
  sw_limiter_free(l);
}
END_TEST

/* ------------------------------------------------------------ prioritized */

/* A prioritized entry that the threshold blocks borrows from the next
 * window: WAIT, borrowed, wait_ms from tryOccupyNext. The borrowed pass
 * waits (sw_node_waiting_at) until its window starts and is then that
 * window's PASS; the minute array gets OCCUPIED_PASS and PASS at once; the
 * request is in flight. */
START_TEST(test_prioritized_borrows_next_window) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_node *n = sw_limiter_node(l);
  sw_metric *minute = sw_node_minute_metric(n);
  sw_decision d;
  for (int i = 0; i < 10; i++) ENTER(l, 9600, 1, 0, d); /* window 9500 */
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  /* tryOccupyNext: 10 + 0 + 1 - 10 <= 10 at the first candidate: 200 ms */
  ck_decision(d, WAIT, 200, 0, 0, 1);
  ck_assert_int_eq(sw_node_waiting_at(n, 10300), 1);
  ck_assert_int_eq(sw_node_waiting_at(n, 10499), 1);
  ck_assert_int_eq(sw_node_waiting_at(n, 10500), 0);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10300), 10); /* not a pass of this window */
  ck_assert_double_eq(sw_node_block_qps_at(n, 10300), 0);
  ck_assert_int_eq(sw_metric_occupied_pass_at(minute, 10300), 1);
  ck_assert_int_eq(sw_metric_pass_at(minute, 10300), 11);
  ck_assert_int_eq(sw_node_total_pass_at(n, 10300), 11);
  ck_assert_int_eq(sw_node_concurrency(n), 11);
  /* the same entry without the flag is blocked, and does not borrow */
  ENTER(l, 10300, 1, 0, d);
  ck_decision(d, BLOCK, 0, 200, 0, 0);
  ck_assert_int_eq(sw_node_waiting_at(n, 10300), 1);
  /* in window 10500 the borrowed pass is a PASS of that window */
  ENTER(l, 10600, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 8, 0);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10600), 2);
  ck_assert_int_eq(sw_metric_window_pass_at(sw_node_second_metric(n), 10500), 2);
  ck_assert_int_eq(sw_node_total_pass_at(n, 10600), 12);
  sw_limiter_free(l);
}
END_TEST

/* Sentinel reads refresh the current window, so the borrowed pass is a
 * PASS from the first millisecond of its window, before any write there. */
START_TEST(test_prioritized_pass_visible_at_window_start) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_node *n = sw_limiter_node(l);
  sw_decision d;
  for (int i = 0; i < 10; i++) ENTER(l, 9600, 1, 0, d);
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  ck_assert_int_eq(d.verdict, WAIT);
  ck_assert_int_eq(sw_node_waiting_at(n, 10500), 0);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10500), 1);
  sw_limiter_free(l);
}
END_TEST

/* Borrowing stops when the waiting passes reach the next window's quota
 * (waiting >= maxCount): 10 borrowed at 10300, the 11th is blocked. Its
 * retry_after must account for the borrowed passes that fill window 10500. */
START_TEST(test_prioritized_borrow_limit) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_node *n = sw_limiter_node(l);
  sw_decision d;
  for (int i = 0; i < 10; i++) ENTER(l, 9600, 1, 0, d);
  for (int i = 0; i < 10; i++) {
    ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
    ck_decision(d, WAIT, 200, 0, 0, 1);
  }
  ck_assert_int_eq(sw_node_waiting_at(n, 10300), 10);
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.borrowed, 0);
  ck_assert_int_eq(sw_metric_occupied_pass_at(sw_node_minute_metric(n), 10300), 10);
  ck_assert_int_eq(sw_node_concurrency(n), 20);
  /* window 10500 is full of borrowed passes: a plain entry is blocked there */
  sw_decision late;
  ENTER(l, 10600, 1, 0, late);
  ck_assert_int_eq(late.verdict, BLOCK);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10600), 10);
  /* 10500 leaves the interval at 11500: that is the earliest pass */
  ck_assert_int_eq(d.retry_after_ms, 1200);
  sw_limiter_free(l);
}
END_TEST

/* Only the reject behaviour on the QPS grade borrows (Sentinel's
 * DefaultController); other behaviours ignore the flag. */
START_TEST(test_prioritized_ignored_elsewhere) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 1);
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  ck_assert_int_eq(d.verdict, PASS);
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.borrowed, 0);
  ck_assert_int_eq(sw_node_waiting_at(sw_limiter_node(l), 10300), 0);
  sw_limiter_free(l);

  l = warm_new(SW_BEHAVIOR_WARM_UP, 10, 10, 3, -1);
  for (int i = 0; i < 3; i++) ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d); /* cold: 3.33 */
  ck_assert_int_eq(d.verdict, PASS);
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.borrowed, 0);
  ck_assert_int_eq(sw_node_waiting_at(sw_limiter_node(l), 10300), 0);
  sw_limiter_free(l);

  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  ck_decision(d, PASS, 0, 0, 5, 0);
  ENTER(l, 10300, 1, SW_ENTRY_PRIORITIZED, d);
  ck_decision(d, WAIT, 100, 0, 4, 0);
  sw_limiter_free(l);
}
END_TEST

/* Sentinel's differential case: threshold 1, prioritized entries at
 * ...1749 (pass), ...2009 (borrows [2500, 3000): wait 491) and ...3146:
 * the borrowed pass is in the interval (libsw counts it even though no
 * entry wrote that window) and leaves it at 3500, so the third waits 354. */
START_TEST(test_prioritized_walk_subtracts_borrowed_window) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1);
  sw_decision d;
  ENTER(l, 1000001749, 1, SW_ENTRY_PRIORITIZED, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 1000002009, 1, SW_ENTRY_PRIORITIZED, d);
  ck_decision(d, WAIT, 491, 0, 0, 1);
  ENTER(l, 1000003146, 1, SW_ENTRY_PRIORITIZED, d);
  ck_decision(d, WAIT, 354, 0, 0, 1);
  sw_limiter_free(l);
}
END_TEST

/* Issue 24 case 12, Sentinel's flow controllers side by side: passes
 * borrowed into window 1500 that no entry touches live only in the borrow
 * array; the borrow at 2060 (for 2500) reuses that slot while 1500 is still
 * in the interval. The borrowed pass must still count there (pass_qps 3,
 * as Sentinel's), so the entry at 2100 is blocked; it used to vanish, and
 * the limit admitted it again. Entries [t, n, prioritized, hold_ms] =
 * [920,1,0,2000] [920,2,0,300] [1030,1,1,-] [2000,1,0,-] [2005,1,1,-]
 * [2060,1,1,300], t past a round second; both strict modes. */
START_TEST(test_prioritized_borrowed_pass_outlives_its_slot) {
  for (int strict = 0; strict < 2; strict++) {
    sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 3);
    ck_ok(sw_options_set(o, SW_OPT_STRICT, strict));
    sw_limiter *l = limiter_from(o);
    sw_options_free(o);
    sw_node *node = sw_limiter_node(l);
    const int64_t b = 1000000; /* a round second */
    sw_decision d;
    ENTER(l, b + 920, 1, 0, d);
    ck_assert_int_eq(d.verdict, PASS);
    ENTER(l, b + 920, 2, 0, d);
    ck_assert_int_eq(d.verdict, PASS);
    ENTER(l, b + 1030, 1, SW_ENTRY_PRIORITIZED, d); /* borrows window 1500 */
    ck_assert_int_eq(d.verdict, WAIT);
    ck_assert_int_eq(d.wait_ms, 470);
    ck_ok(sw_limiter_exit_at(l, b + 1220, 300, 2, 0));
    ENTER(l, b + 2000, 1, 0, d);
    ck_assert_int_eq(d.verdict, PASS);
    ENTER(l, b + 2005, 1, SW_ENTRY_PRIORITIZED, d);
    ck_assert_int_eq(d.verdict, PASS);
    ENTER(l, b + 2060, 1, SW_ENTRY_PRIORITIZED, d); /* borrows window 2500: slot of 1500 */
    ck_assert_int_eq(d.verdict, WAIT);
    ck_assert_int_eq(d.wait_ms, 440);
    ck_assert_msg(sw_node_pass_qps_at(node, b + 2060) == 3.0, "strict %d: pass_qps %g",
                  strict, sw_node_pass_qps_at(node, b + 2060));
    ENTER(l, b + 2100, 1, 0, d);
    ck_assert_msg(d.verdict == BLOCK, "strict %d: the vanished pass was admitted again",
                  strict);
    ck_assert_int_eq(sw_node_waiting_at(node, b + 2100), 1);
    /* 1500 leaves the interval at 2500, when the pass borrowed for it comes in */
    ck_assert(sw_node_pass_qps_at(node, b + 2499) == 3.0);
    ck_assert(sw_node_pass_qps_at(node, b + 2500) == 3.0);
    ck_ok(sw_limiter_exit_at(l, b + 2360, 300, 1, 0));
    ck_ok(sw_limiter_exit_at(l, b + 2920, 2000, 1, 0));
    sw_limiter_free(l);
  }
}
END_TEST

/* ----------------------------------------------------------------- pacing */

/* RateLimiterController, threshold 10 -> 100 ms apart: the first entry
 * passes, the next ones at the same instant queue 100, 200, ... 500 ms
 * (max queue 500), then block with retry_after = wait - max queue; the
 * queue tail does not move on a block. */
START_TEST(test_pacing_queue) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  sw_node *n = sw_limiter_node(l);
  sw_decision d;
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 5, 0);
  for (int i = 1; i <= 5; i++) {
    ENTER(l, 10000, 1, 0, d);
    ck_decision(d, WAIT, 100 * i, 0, 5 - i, 0);
  }
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 100, 0, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 100, 0, 0);
  /* every admitted entry is counted as a pass at once, blocks as blocks */
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10000), 6);
  ck_assert_double_eq(sw_node_block_qps_at(n, 10000), 2);
  ck_assert_int_eq(sw_node_concurrency(n), 6);
  /* retry_after is exact: at 10100 the queue has room again */
  ENTER(l, 10099, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1, 0, 0);
  ENTER(l, 10100, 1, 0, d);
  ck_decision(d, WAIT, 500, 0, 0, 0);
  /* once the queue has drained, an entry passes at once */
  ENTER(l, 10700, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 5, 0);
  sw_limiter_free(l);
}
END_TEST

/* Entries spaced at least one cost apart never wait; closer ones wait the
 * difference, accumulating until the queue is full. */
START_TEST(test_pacing_spacing) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  for (int i = 0; i < 30; i++) {
    ENTER(l, 20000 + 100 * i, 1, 0, d);
    ck_decision(d, PASS, 0, 0, 5, 0);
  }
  for (int i = 0; i < 10; i++) {
    ENTER(l, 30000 + 150 * i, 1, 0, d);
    ck_decision(d, PASS, 0, 0, 5, 0);
  }
  sw_limiter_free(l);

  /* every 50 ms: each entry waits 50 ms more than the previous one */
  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  ENTER(l, 20000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 5, 0);
  for (int k = 1; k <= 10; k++) {
    ENTER(l, 20000 + 50 * k, 1, 0, d);
    ck_decision(d, WAIT, 50 * k, 0, (500 - 50 * k) / 100, 0);
  }
  ENTER(l, 20550, 1, 0, d);
  ck_decision(d, BLOCK, 0, 50, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* cost = n / threshold s, kept in ns: threshold 3 -> 333.33 ms (the wait
 * is reported to the nearest ms, the retry rounded up to a whole ms that
 * fits); n = 2 at threshold 10 -> 200 ms; the max queue is an option. */
START_TEST(test_pacing_cost_and_queue_option) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 3);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 1, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, WAIT, 333, 0, 0, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 167, 0, 0); /* 666.67 - 500 */
  sw_limiter_free(l);

  /* threshold 6: 166666667 ns apart, so waits of 167 and 333 ms (whole-ms
   * costs of 167 would give 167 and 334); a third would wait 500.000001 */
  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 6);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 2, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, WAIT, 167, 0, 1, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, WAIT, 333, 0, 0, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1, 0, 0);
  sw_limiter_free(l);

  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  ENTER(l, 10000, 2, 0, d);
  ck_decision(d, PASS, 0, 0, 2, 0);
  ENTER(l, 10000, 2, 0, d);
  ck_decision(d, WAIT, 200, 0, 1, 0);
  ENTER(l, 10000, 2, 0, d);
  ck_decision(d, WAIT, 400, 0, 0, 0);
  ENTER(l, 10000, 2, 0, d);
  ck_decision(d, BLOCK, 0, 100, 0, 0);
  ENTER(l, 10000, 1, 0, d); /* a smaller entry still fits: 400 + 100 */
  ck_decision(d, WAIT, 500, 0, 0, 0);
  sw_limiter_free(l);

  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 1000));
  l = limiter_from(o);
  ENTER(l, 10000, 1, 0, d);
  for (int i = 1; i <= 10; i++) {
    ENTER(l, 10000, 1, 0, d);
    ck_decision(d, WAIT, 100 * i, 0, 10 - i, 0);
  }
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 100, 0, 0);
  sw_limiter_free(l);
  sw_options_free(o);
}
END_TEST

/* RateLimiterControllerTest / ThrottlingControllerTest (500 ms, 10 qps):
 *  normal: 6 entries in a row all pass, taking > 400 ms in total (each call
 *    returns after its wait, and the next one starts then);
 *  timeout: 10 simultaneous entries -> some blocked (1 pass, 5 wait, 4 block);
 *  zero attack: threshold 0 blocks n = 1 and passes n = 0, twice. */
START_TEST(test_pacing_java_ports) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  int64_t t = 50000, total = 0;
  for (int i = 0; i < 6; i++) {
    ENTER(l, t, 1, 0, d);
    ck_assert_int_ne(d.verdict, BLOCK);
    ck_assert_int_eq(d.wait_ms, i == 0 ? 0 : 100);
    t += d.wait_ms; /* the caller sleeps, then calls again */
    total += d.wait_ms;
  }
  ck_assert_int_gt(total, 400);
  ck_assert_int_eq(total, 500);
  sw_limiter_free(l);

  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  int pass = 0, wait = 0, block = 0;
  for (int i = 0; i < 10; i++) {
    ENTER(l, 50000, 1, 0, d);
    pass += d.verdict == PASS;
    wait += d.verdict == WAIT;
    block += d.verdict == BLOCK;
  }
  ck_assert_int_gt(block, 0);
  ck_assert_int_eq(pass, 1);
  ck_assert_int_eq(wait, 5);
  ck_assert_int_eq(block, 4);
  sw_limiter_free(l);

  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 0);
  for (int i = 0; i < 2; i++) {
    ENTER(l, 50000, 1, 0, d);
    ck_decision(d, BLOCK, 0, -1, 0, 0);
    ENTER(l, 50000, 0, 0, d);
    ck_assert_int_eq(d.verdict, PASS);
    ck_assert_int_eq(d.wait_ms, 0);
  }
  sw_limiter_free(l);
}
END_TEST

/* sentinel-golang tc_throttling_test, in qps (threshold 50 per 10 s = 5/s,
 * 200 ms apart):
 *  no queueing (timeout 0): after a pass, 10 entries at once block; after
 *    2010 ms one passes and the next blocks;
 *  timeout 2000: of 20 entries after a pass, 10 wait (i + 1) * 200 ms and
 *    10 block. */
START_TEST(test_pacing_go_ports) {
  sw_decision d;
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 5);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 0));
  sw_limiter *l = limiter_from(o);
  ENTER(l, 70000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  for (int i = 0; i < 10; i++) {
    ENTER(l, 70000, 1, 0, d);
    ck_decision(d, BLOCK, 0, 200, 0, 0);
  }
  ENTER(l, 72010, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 72010, 1, 0, d);
  ck_decision(d, BLOCK, 0, 200, 0, 0);
  sw_limiter_free(l);

  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 2000));
  l = limiter_from(o);
  ENTER(l, 70000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  for (int i = 0; i < 20; i++) {
    ENTER(l, 70000, 1, 0, d);
    if (i < 10)
      ck_decision(d, WAIT, (i + 1) * 200, 0, 9 - i, 0);
    else
      ck_assert_int_eq(d.verdict, BLOCK);
  }
  sw_limiter_free(l);
  sw_options_free(o);
}
END_TEST

/* Sentinel 1.8.9's ThrottlingController keeps the cost in nanoseconds.
 * threshold 300, no queue: entries at 913 and 916 ms -> pass, then block
 * (916 < 913 + 3.33); threshold 3, queue 500: 56129, 56224, 56295 -> pass,
 * wait 238 (238.33), block (the wait would be 500.67 > 500). */
START_TEST(test_pacing_sub_millisecond_cost) {
  sw_decision d;
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 300);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 0));
  sw_limiter *l = limiter_from(o);
  ENTER(l, 913, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 916, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1, 0, 0);
  ENTER(l, 917, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  sw_limiter_free(l);
  sw_options_free(o);

  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 3);
  ENTER(l, 56129, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 1, 0);
  ENTER(l, 56224, 1, 0, d);
  ck_decision(d, WAIT, 238, 0, 0, 0);
  ENTER(l, 56295, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* Saturation, as measured against Sentinel 1.8.9: arrivals at twice the
 * threshold for 2 s (whole-ms times), queue 500 ms. Admitted: Sentinel's
 * counts exactly (whole-ms costs gave 834, 2500, 2500 and, above 2000 QPS,
 * everything). */
START_TEST(test_pacing_saturation_matches_sentinel) {
  static const struct {
    int threshold, admitted;
  } want[] = {{300, 750},   {700, 1750},  {1500, 3749},
              {2500, 6248}, {3000, 7498}, {5000, 12496}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, want[k].threshold);
    int demand = 2 * want[k].threshold, admitted = 0;
    for (int i = 0; i < 2 * demand; i++) {
      sw_decision d;
      ENTER(l, 100000 + (int64_t)i * 1000 / demand, 1, 0, d);
      admitted += d.verdict != BLOCK;
    }
    ck_assert_msg(admitted == want[k].admitted, "threshold %d: admitted %d, Sentinel %d",
                  want[k].threshold, admitted, want[k].admitted);
    sw_limiter_free(l);
  }
}
END_TEST

/* Warm-up + pacing keeps the same precision: warm at threshold 1500, entries
 * 0.67 ms apart wait 0, 1 (0.67), 1 (1.33), 2 (2.0). */
START_TEST(test_warm_up_pacing_sub_millisecond_cost) {
  sw_limiter *l = warm_new(SW_BEHAVIOR_WARM_UP_PACING, 1500, 10, 3, 500);
  ck_ok(sw_metric_add_pass_at(sw_node_minute_metric(sw_limiter_node(l)), 99000, 15000));
  static const int64_t waits[] = {0, 1, 1, 2};
  for (int i = 0; i < 4; i++) {
    sw_decision d;
    ENTER(l, 100000, 1, 0, d);
    ck_assert_int_eq(d.verdict, i == 0 ? PASS : WAIT);
    ck_assert_int_eq(d.wait_ms, waits[i]);
  }
  sw_limiter_free(l);
}
END_TEST

/* A rule lowered below the passes already counted: blocks say 0 remaining,
 * never a negative number. */
START_TEST(test_remaining_never_negative) {
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_limiter *l = limiter_from(o);
  sw_decision d;
  for (int i = 0; i < 10; i++) ENTER(l, 10000, 1, 0, d);
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 5));
  ck_ok(sw_limiter_set_rule(l, o));
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1000, 0, 0);
  sw_limiter_free(l);
  sw_options_free(o);
}
END_TEST

/* A dry-run pacing rule: a WAIT is an admission, not a would-be block: the
 * second entry passes with its wait, would_block 0, and both count. */
START_TEST(test_dry_run_pacing_wait_is_not_a_block) {
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  ck_ok(sw_options_set(o, SW_OPT_DRY_RUN, 1));
  sw_limiter *l = limiter_from(o);
  sw_decision d;
  ENTER(l, 10000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ENTER(l, 10000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(d.wait_ms, 100);
  ck_assert_int_eq(d.would_block, 0);
  ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(l), 10000), 2);
  ck_assert_double_eq(sw_node_would_block_qps_at(sw_limiter_node(l), 10000), 0);
  sw_limiter_free(l);
  sw_options_free(o);
}
END_TEST

/* Pacing keeps times in ns: a time beyond INT64_MAX ns is refused. */
START_TEST(test_pacing_time_range) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  ck_sw(sw_limiter_entry_at(l, INT64_MAX / 1000000 + 1, 1, 0, &d), SW_ETIME);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "292 years"));
  const int64_t end = INT64_MAX / 1000000;
  ENTER(l, end - 1000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 5, 0);
  ENTER(l, end - 1000, 1, 0, d);
  ck_decision(d, WAIT, 100, 0, 4, 0);
  ENTER(l, end, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 5, 0);
  ENTER(l, end, 1, 0, d); /* the next admission would be after the end of time */
  ck_decision(d, BLOCK, 0, -1, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* n == 0 passes at once whatever the queue holds, and does not move it. */
START_TEST(test_pacing_zero_units) {
  sw_decision d;
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  for (int i = 0; i < 7; i++) ENTER(l, 10000, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ENTER(l, 10000, 0, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(d.wait_ms, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 100, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* ---------------------------------------------------------------- warm-up */

/* WarmUpControllerTest, exactly as the notes' table, through the limiter.
 * WarmUpController(10, 10, 3): warningToken 50, maxToken 100, slope 0.004.
 * passQps is what the per-second array holds, previousPassQps what the
 * previous 1 s window of the per-minute array holds; both are written
 * directly into those arrays where the Java test stubs the node. Steps 1
 * and 2 happen in the same second (no token sync in between), as in Java. */
START_TEST(test_warm_up_controller_port) {
  sw_limiter *l = warm_new(SW_BEHAVIOR_WARM_UP, 10, 10, 3, -1);
  sw_node *n = sw_limiter_node(l);
  sw_metric *sec = sw_node_second_metric(n), *minute = sw_node_minute_metric(n);
  const int64_t s0 = INT64_C(1600000000000); /* a whole second */
  sw_decision d;

  /* step 1: passQps 8, previousPassQps 1 -> false. The first sync fills the
   * bucket to 100, minus 1: 99 tokens, warning QPS nextUp(1 / (49 * 0.004 +
   * 0.1)) = 3.378; 8 + 1 > 3.378. */
  ck_ok(sw_metric_add_pass_at(minute, s0 - 900, 1));
  ck_ok(sw_metric_add_pass_at(sec, s0 - 400, 8)); /* window s0 - 500 */
  ck_assert_double_eq(sw_node_pass_qps_at(n, s0 + 100), 8);
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, s0 + 100), 1);
  ENTER(l, s0 + 100, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);

  /* step 2: passQps 1 -> true (1 + 1 <= 3.378); same second, no sync */
  ck_ok(sw_metric_add_pass_at(sec, s0 + 100, 1)); /* window s0 */
  ck_assert_double_eq(sw_node_pass_qps_at(n, s0 + 600), 1);
  ENTER(l, s0 + 600, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);

  /* step 3: previousPassQps 10 from now on; 100 x (sleep 100; canPass),
   * results ignored. 10 second boundaries: 99 -> 89 -> 79 -> 69 -> 59 -> 49,
   * then +10 -10 each: 49. Entries of 0 units sync the tokens and count
   * nothing, so the previous seconds hold exactly 10 passes. */
  ck_ok(sw_metric_add_pass_at(minute, s0 + 700, 9)); /* s0 holds 1 + 9 */
  for (int64_t j = 1; j <= 9; j++) ck_ok(sw_metric_add_pass_at(minute, s0 + 1000 * j, 10));
  int64_t t = s0 + 600;
  for (int k = 1; k <= 100; k++) {
    t += 100;
    if (t % 1000 == 0) ck_assert_int_eq(sw_node_previous_pass_qps_at(n, t), 10);
    ENTER(l, t, 0, 0, d);
  }
  ck_assert_int_eq(t, s0 + 10600);
  /* 49 < warningToken: the limit is the threshold again (nothing passed in
   * this second: remaining 10) */
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(d.remaining, 10);

  /* step 4: passQps 8 -> true (8 + 1 <= 10) */
  ck_ok(sw_metric_add_pass_at(sec, t, 8));
  ck_assert_double_eq(sw_node_pass_qps_at(n, t), 8);
  ENTER(l, t, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);

  /* step 5: passQps 10 -> false (10 + 1 > 10) */
  ck_ok(sw_metric_add_pass_at(sec, t, 1));
  ck_assert_double_eq(sw_node_pass_qps_at(n, t), 10);
  ENTER(l, t, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  sw_limiter_free(l);
}
END_TEST

/* A cold limiter admits threshold / coldFactor: threshold 10 -> 3 a second
 * (nextUp(1 / (50 * 0.004 + 0.1)) = 3.33). */
START_TEST(test_warm_up_cold_start) {
  sw_limiter *l = warm_new(SW_BEHAVIOR_WARM_UP, 10, 10, 3, -1);
  sw_decision d;
  for (int i = 0; i < 3; i++) {
    ENTER(l, 100000, 1, 0, d);
    ck_decision(d, PASS, 0, 0, 2 - i, 0);
  }
  ENTER(l, 100000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 1000, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* The warm-up curve: threshold 100, 10 s, cold factor 3, 20 entries offered
 * every 100 ms (200/s) for 20 s. Admissions per second start at
 * threshold / coldFactor, never decrease, are still below the threshold at
 * 10 s and reach it one second later (the tokens follow previousPassQps,
 * one second behind), then stay there. */
START_TEST(test_warm_up_curve) {
  sw_limiter *l = warm_new(SW_BEHAVIOR_WARM_UP, 100, 10, 3, -1);
  const int64_t t0 = 1000000;
  int64_t admitted[20] = {0};
  sw_decision d;
  for (int64_t t = t0; t < t0 + 20000; t += 100) {
    for (int i = 0; i < 20; i++) {
      ENTER(l, t, 1, 0, d);
      if (d.verdict == PASS) {
        admitted[(t - t0) / 1000]++;
        ck_ok(sw_limiter_exit_at(l, t, 5, 1, 0));
      } else {
        ck_assert_int_eq(d.verdict, BLOCK);
      }
    }
  }
  char line[256];
  int off = 0;
  for (int s = 0; s < 20; s++)
    off += snprintf(line + off, sizeof line - (size_t)off, " %lld", (long long)admitted[s]);
  ck_assert_msg(admitted[0] >= 30 && admitted[0] <= 100 / 3 + 1, "first second:%s", line);
  for (int s = 1; s < 20; s++)
    ck_assert_msg(admitted[s] >= admitted[s - 1], "admissions fell at second %d:%s", s, line);
  ck_assert_msg(admitted[9] < 100, "warm before the period ended:%s", line);
  for (int s = 11; s < 20; s++)
    ck_assert_msg(admitted[s] == 100, "second %d not at the threshold:%s", s, line);
  sw_limiter_free(l);
}
END_TEST

/* --------------------------------------------------------- warm-up + pacing */

/* WarmUpRateLimiterControllerTest.testPace: (10 qps, 10 s, 1000 ms queue,
 * 3) with previousPassQps 100: the first sync leaves 100 - 100 = 0 tokens
 * (warm), so entries cost 100 ms: the first passes, 10 more queue 100 ms
 * apart (average 100 ms), the next one is over the 1000 ms queue. */
START_TEST(test_warm_up_pacing_port) {
  sw_limiter *l = warm_new(SW_BEHAVIOR_WARM_UP_PACING, 10, 10, 3, 1000);
  sw_node *n = sw_limiter_node(l);
  ck_ok(sw_metric_add_pass_at(sw_node_minute_metric(n), 99000, 100));
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 100000), 100);
  sw_decision d;
  ENTER(l, 100000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 10, 0);
  int64_t sum = 0;
  for (int i = 1; i <= 10; i++) {
    ENTER(l, 100000, 1, 0, d);
    ck_decision(d, WAIT, 100 * i, 0, 10 - i, 0);
    sum += d.wait_ms - (i - 1) * 100; /* each one 100 ms after the previous */
  }
  ck_assert_int_eq(sum / 10, 100);
  ENTER(l, 100000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 100, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* testPaceCanNotPass: (10, 10, 10 ms queue, 3), warm: the first passes, the
 * second would wait 100 > 10 ms and is blocked (retry after 90). */
START_TEST(test_warm_up_pacing_cannot_pass) {
  sw_limiter *l = warm_new(SW_BEHAVIOR_WARM_UP_PACING, 10, 10, 3, 10);
  ck_ok(sw_metric_add_pass_at(sw_node_minute_metric(sw_limiter_node(l)), 99000, 100));
  sw_decision d;
  ENTER(l, 100000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ENTER(l, 100000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 90, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* Cold, the pacing interval is coldFactor times longer: threshold 10 ->
 * warming QPS 3.33 -> 300 ms apart. */
START_TEST(test_warm_up_pacing_cold_cost) {
  sw_limiter *l = warm_new(SW_BEHAVIOR_WARM_UP_PACING, 10, 10, 3, -1);
  sw_decision d;
  ENTER(l, 100000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ENTER(l, 100000, 1, 0, d);
  ck_assert_int_eq(d.verdict, WAIT);
  ck_assert_int_eq(d.wait_ms, 300);
  ENTER(l, 100000, 1, 0, d);
  ck_decision(d, BLOCK, 0, 100, 0, 0); /* 600 > 500 */
  ENTER(l, 100300, 1, 0, d);
  ck_decision(d, WAIT, 300, 0, 0, 0);
  sw_limiter_free(l);
}
END_TEST

/* ------------------------------------------------------------ concurrency */

/* Concurrency grade, threshold 2: the third request in flight is blocked
 * (retry >= 1), an exit frees a place; n > threshold can never pass. */
START_TEST(test_concurrency_grade) {
  sw_limiter *l = limiter_new(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 2);
  sw_node *n = sw_limiter_node(l);
  sw_decision d;
  ENTER(l, 1000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 1, 0);
  ENTER(l, 1000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 1000, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_ge(d.retry_after_ms, 1);
  ck_assert_int_eq(d.remaining, 0);
  ck_assert_int_eq(sw_node_concurrency(n), 2);
  ck_assert_double_eq(sw_node_block_qps_at(n, 1000), 1);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 1000), 2);
  ck_ok(sw_limiter_exit_at(l, 1030, 30, 1, 0));
  ck_assert_int_eq(sw_node_concurrency(n), 1);
  ENTER(l, 1040, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 1050, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_ge(d.retry_after_ms, 1);
  ENTER(l, 1050, 3, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.retry_after_ms, -1);
  /* the QPS does not matter on this grade */
  ck_ok(sw_limiter_exit_at(l, 1060, 1, 1, 0));
  ck_ok(sw_limiter_exit_at(l, 1060, 1, 1, 0));
  for (int i = 0; i < 50; i++) {
    ENTER(l, 1100, 1, 0, d);
    ck_assert_int_eq(d.verdict, PASS);
    ck_ok(sw_limiter_exit_at(l, 1100, 1, 1, 0));
  }
  ck_assert_int_eq(sw_node_concurrency(n), 0);
  sw_limiter_free(l);
}
END_TEST

/* --------------------------------------------------------------- threads */

#define THREADS 4

typedef struct worker {
  pthread_t tid;
  sw_limiter *l;
  pthread_barrier_t *start;
  int64_t tries;
  int64_t passed;
  int threshold;
  _Atomic int *in_flight, *max_in_flight;
} worker;

static void *qps_worker(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  for (int64_t i = 0; i < w->tries; i++) {
    sw_decision d;
    if (sw_limiter_entry_at(w->l, 5000, 1, 0, &d) == SW_OK && d.verdict == PASS) w->passed++;
  }
  return NULL;
}

static int64_t run_qps_threads(sw_limiter *l) {
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, THREADS);
  worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.l = l, .start = &b, .tries = 1000};
    ck_assert_int_eq(pthread_create(&w[i].tid, NULL, qps_worker, &w[i]), 0);
  }
  int64_t total = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(w[i].tid, NULL);
    total += w[i].passed;
  }
  pthread_barrier_destroy(&b);
  return total;
}

/* Strict mode (default): 4 threads x 1000 entries in one window, threshold
 * 1000: exactly 1000 admitted, never more. */
START_TEST(test_strict_exact_under_threads) {
  for (int round = 0; round < 5; round++) {
    sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1000);
    int64_t total = run_qps_threads(l);
    ck_assert_int_eq(total, 1000);
    ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(l), 5000), 1000);
    ck_assert_double_eq(sw_node_block_qps_at(sw_limiter_node(l), 5000), 3000);
    sw_limiter_free(l);
  }
}
END_TEST

/* Strict mode at a window boundary: an entry whose time is behind another's
 * (its clock read just before the boundary, its call run just after) used to
 * add to the older window after the newer entry had read it: 11 passes in a
 * 10-per-second interval. The newer entry seals the older window first; the
 * stale entry is decided again at the newer window, and blocked. Fast mode
 * keeps Sentinel's check-then-add. */
START_TEST(test_strict_boundary_no_overshoot) {
  for (int strict = 1; strict >= 0; strict--) {
    sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
    ck_ok(sw_options_set(o, SW_OPT_STRICT, strict));
    sw_limiter *l = limiter_from(o);
    sw_metric *sec = sw_node_second_metric(sw_limiter_node(l));
    sw_decision d;
    for (int i = 0; i < 9; i++) ENTER(l, 1400, 1, 0, d);
    ENTER(l, 1600, 1, 0, d); /* window [1500, 2000): 9 + 1 = 10 */
    ck_assert_int_eq(d.verdict, PASS);
    ENTER(l, 1499, 1, 0, d); /* stale: [1000, 1500) holds 9 */
    if (strict) {
      ck_assert_int_eq(d.verdict, BLOCK);
      ck_assert_int_eq(sw_metric_pass_at(sec, 1600), 10);
      ck_assert_int_eq(sw_metric_pass_at(sec, 1499), 9);
    } else {
      ck_assert_int_eq(d.verdict, PASS);
      ck_assert_int_eq(sw_metric_pass_at(sec, 1600), 11);
    }
    sw_limiter_free(l);
    sw_options_free(o);
  }
  /* a stale entry whose window was sealed is decided at the newer one, and
   * passes there when the newer interval has room */
  {
    sw_limiter *l3 = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
    sw_decision d3;
    for (int i = 0; i < 5; i++) ENTER(l3, 1400, 1, 0, d3);
    ENTER(l3, 1600, 1, 0, d3); /* seals [1000, 1500) */
    ENTER(l3, 1499, 1, 0, d3);
    ck_assert_int_eq(d3.verdict, PASS);
    ck_assert_int_eq(sw_metric_pass_at(sw_node_second_metric(sw_limiter_node(l3)), 1600), 7);
    ck_assert_int_eq(sw_metric_window_pass_at(sw_node_second_metric(sw_limiter_node(l3)), 1600), 2);
    sw_limiter_free(l3);
  }
  /* the older window absent: a stale entry must not create it and count
   * there after the newer window took the whole interval */
  {
    sw_limiter *l2 = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
    sw_decision d2;
    for (int i = 0; i < 10; i++) ENTER(l2, 1600, 1, 0, d2);
    ENTER(l2, 1400, 1, 0, d2); /* [1000, 1500) was never written */
    ck_assert_int_eq(d2.verdict, BLOCK);
    ck_assert_int_eq(sw_metric_pass_at(sw_node_second_metric(sw_limiter_node(l2)), 1600), 10);
    sw_limiter_free(l2);
  }
  /* an entry whose slot already holds a newer window (time behind by a lap)
   * is decided at that window in strict mode, not admitted uncounted */
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_decision d;
  for (int i = 0; i < 10; i++) ENTER(l, 2100, 1, 0, d);
  ENTER(l, 1100, 1, 0, d); /* slot of [1000, 1500) holds [2000, 2500) */
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(sw_metric_pass_at(sw_node_second_metric(sw_limiter_node(l)), 2100), 10);
  sw_limiter_free(l);
}
END_TEST

typedef struct boundary_worker {
  pthread_t tid;
  sw_limiter *l;
  pthread_barrier_t *start;
  int id;
  int64_t passed;
} boundary_worker;

/* Each thread walks the clock across many window boundaries, its times
 * lagging the others' by up to a few ms (a clock read before a boundary, a
 * call after it). */
static void *boundary_entries(void *arg) {
  boundary_worker *w = arg;
  pthread_barrier_wait(w->start);
  uint32_t r = 2654435761u * (uint32_t)(w->id + 1);
  for (int64_t i = 0; i < 4000; i++) {
    r = r * 1103515245u + 12345u;
    int64_t t = 10000 + i - (int64_t)((r >> 16) % 4);
    sw_decision d;
    if (sw_limiter_entry_at(w->l, t, 1, 0, &d) == SW_OK && d.verdict == PASS) w->passed++;
  }
  return NULL;
}

/* Strict mode under threads across boundaries: no interval of the
 * per-second array ever holds more than the threshold, and every admission
 * is counted. */
START_TEST(test_strict_boundaries_under_threads) {
  const int threads = 4, stress = getenv("SW_STRESS") ? atoi(getenv("SW_STRESS")) : 1;
  for (int round = 0; round < 10 * stress; round++) {
    sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 50);
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, threads);
    boundary_worker w[4];
    for (int i = 0; i < threads; i++) {
      w[i] = (boundary_worker){.l = l, .start = &b, .id = i};
      ck_assert_int_eq(pthread_create(&w[i].tid, NULL, boundary_entries, &w[i]), 0);
    }
    int64_t total = 0;
    for (int i = 0; i < threads; i++) {
      pthread_join(w[i].tid, NULL);
      total += w[i].passed;
    }
    pthread_barrier_destroy(&b);
    sw_node *n = sw_limiter_node(l);
    sw_metric *sec = sw_node_second_metric(n), *min = sw_node_minute_metric(n);
    for (int64_t t = 9000; t < 14500; t++) {
      int64_t pass = sw_metric_pass_at(sec, t);
      ck_assert_msg(pass <= 50, "round %d: %lld passes in the interval ending at %lld", round,
                    (long long)pass, (long long)t);
    }
    ck_assert_int_eq(sw_metric_pass_at(min, 14000), total);
    sw_limiter_free(l);
  }
}
END_TEST

/* Fast mode (Sentinel's check-then-add): at least 1000 admitted (threads
 * racing for the last units may overshoot), and every admission counted. */
START_TEST(test_fast_mode_under_threads) {
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1000);
  ck_ok(sw_options_set(o, SW_OPT_STRICT, 0));
  for (int round = 0; round < 5; round++) {
    sw_limiter *l = limiter_from(o);
    int64_t total = run_qps_threads(l);
    ck_assert_int_ge(total, 1000);
    ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(l), 5000), (double)total);
    ck_assert_double_eq(sw_node_block_qps_at(sw_limiter_node(l), 5000),
                        (double)(THREADS * 1000 - total));
    sw_limiter_free(l);
  }
  sw_options_free(o);
}
END_TEST

static void *borrow_worker(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  for (int64_t i = 0; i < w->tries; i++) {
    sw_decision d;
    if (sw_limiter_entry_at(w->l, 10300, 1, SW_ENTRY_PRIORITIZED, &d) == SW_OK &&
        d.verdict == WAIT)
      w->passed++;
  }
  return NULL;
}

/* Strict mode and prioritized entries: with 1000 passes in the leaving
 * window, 4 threads x 1000 prioritized entries borrow exactly 1000 from
 * the next window (threshold 1000), never more: that window must not
 * start above the threshold. */
START_TEST(test_strict_borrowing_under_threads) {
  for (int round = 0; round < 200; round++) {
    sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1000);
    sw_decision d;
    ck_ok(sw_node_add_pass_at(sw_limiter_node(l), 9600, 1000));
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, THREADS);
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
      w[i] = (worker){.l = l, .start = &b, .tries = 1000};
      ck_assert_int_eq(pthread_create(&w[i].tid, NULL, borrow_worker, &w[i]), 0);
    }
    int64_t total = 0;
    for (int i = 0; i < THREADS; i++) {
      pthread_join(w[i].tid, NULL);
      total += w[i].passed;
    }
    pthread_barrier_destroy(&b);
    ck_assert_msg(total == 1000, "round %d: %lld borrowed", round, (long long)total);
    ck_assert_int_eq(sw_node_waiting_at(sw_limiter_node(l), 10300), 1000);
    ENTER(l, 10600, 0, 0, d);
    ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(l), 10600), 1000);
    sw_limiter_free(l);
  }
}
END_TEST

static void *warm_worker(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  for (int64_t i = 0; i < w->tries; i++) {
    sw_decision d;
    sw_limiter_entry_at(w->l, 1001000, 0, 0, &d);
  }
  return NULL;
}

/* Warm-up under threads: the token bucket is synced once per second, even
 * when several threads enter the new second together. Threshold 100 (warning
 * 500, max 1000): cold at 1000000 (1000 tokens); 200 passes in that second;
 * at 1001000 the tokens must be 1000 - 200 = 800 (warm QPS 1 / (300 *
 * 0.00004 + 0.01) = 45.45), not 600 (71.4) from subtracting twice. */
START_TEST(test_warm_up_sync_under_threads) {
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_WARM_UP, 100);
  for (int round = 0; round < 2000; round++) {
    sw_limiter *l = limiter_from(o);
    sw_decision d;
    ENTER(l, 1000000, 0, 0, d);
    ck_ok(sw_metric_add_pass_at(sw_node_minute_metric(sw_limiter_node(l)), 1000000, 200));
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, THREADS);
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
      w[i] = (worker){.l = l, .start = &b, .tries = 20};
      ck_assert_int_eq(pthread_create(&w[i].tid, NULL, warm_worker, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(w[i].tid, NULL);
    pthread_barrier_destroy(&b);
    ENTER(l, 1001000, 0, 0, d); /* nothing passed in this second: remaining = limit */
    ck_assert_msg(d.remaining == 45, "round %d: warm limit %lld, expected 45", round,
                  (long long)d.remaining);
    sw_limiter_free(l);
  }
  sw_options_free(o);
}
END_TEST

static void *conc_worker(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  for (int64_t i = 0; i < w->tries; i++) {
    sw_decision d;
    int64_t t = 5000 + i % 1000;
    if (sw_limiter_entry_at(w->l, t, 1, 0, &d) != SW_OK || d.verdict != PASS) continue;
    int now = atomic_fetch_add(w->in_flight, 1) + 1;
    int max = atomic_load(w->max_in_flight);
    while (now > max && !atomic_compare_exchange_weak(w->max_in_flight, &max, now)) {
    }
    atomic_fetch_sub(w->in_flight, 1);
    sw_limiter_exit_at(w->l, t, 1, 1, 0);
    w->passed++;
  }
  return NULL;
}

/* Concurrency grade, strict, 4 threads entering and leaving in a loop with
 * threshold 2: never more than 2 in flight. */
START_TEST(test_concurrency_strict_under_threads) {
  sw_limiter *l = limiter_new(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 2);
  _Atomic int in_flight = 0, max_in_flight = 0;
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, THREADS);
  worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.l = l, .start = &b, .tries = 20000, .in_flight = &in_flight,
                    .max_in_flight = &max_in_flight};
    ck_assert_int_eq(pthread_create(&w[i].tid, NULL, conc_worker, &w[i]), 0);
  }
  int64_t passed = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(w[i].tid, NULL);
    passed += w[i].passed;
  }
  pthread_barrier_destroy(&b);
  ck_assert_int_gt(passed, 0);
  ck_assert_int_le(atomic_load(&max_in_flight), 2);
  ck_assert_int_eq(sw_node_concurrency(sw_limiter_node(l)), 0);
  sw_limiter_free(l);
}
END_TEST

/* ------------------------------------------------------------------ rules */

/* set_rule keeps the statistics and the new threshold applies at once;
 * a grade change uses the requests already in flight. */
START_TEST(test_set_rule_keeps_statistics) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_node *n = sw_limiter_node(l);
  sw_decision d;
  for (int i = 0; i < 5; i++) ENTER(l, 1000, 1, 0, d);
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 5);
  ck_ok(sw_limiter_set_rule(l, o));
  ck_assert_double_eq(sw_node_pass_qps_at(n, 1000), 5);
  ck_assert_int_eq(sw_node_total_pass_at(n, 1000), 5);
  ENTER(l, 1100, 1, 0, d);
  ck_decision(d, BLOCK, 0, 900, 0, 0);
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 20));
  ck_ok(sw_limiter_set_rule(l, o));
  for (int i = 0; i < 15; i++) {
    ENTER(l, 1200, 1, 0, d);
    ck_decision(d, PASS, 0, 0, 14 - i, 0);
  }
  ENTER(l, 1200, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(sw_node_total_pass_at(n, 1200), 20);
  ck_assert_int_eq(sw_node_block_request_at(n, 1200), 2);
  /* to the concurrency grade: the 20 in flight count */
  ck_assert_int_eq(sw_node_concurrency(n), 20);
  sw_options_free(o);
  o = rule_opts(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 21);
  ck_ok(sw_limiter_set_rule(l, o));
  ENTER(l, 1300, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 0, 0);
  ENTER(l, 1300, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  sw_options_free(o);
  sw_limiter_free(l);
}
END_TEST

/* Changing the behaviour restarts the pacing queue (Sentinel builds a new
 * controller); the same behaviour with other values keeps it. */
START_TEST(test_set_rule_resets_pacing_queue) {
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  sw_limiter *l = limiter_from(o);
  sw_decision d;
  for (int i = 0; i < 6; i++) ENTER(l, 10000, 1, 0, d);
  ck_decision(d, WAIT, 500, 0, 0, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  /* same behaviour, longer queue: the queue goes on */
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 1000));
  ck_ok(sw_limiter_set_rule(l, o));
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, WAIT, 600, 0, 4, 0);
  /* another behaviour and back: a new queue, the first entry passes */
  sw_options *r = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1000);
  ck_ok(sw_limiter_set_rule(l, r));
  ENTER(l, 10000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ck_ok(sw_limiter_set_rule(l, o));
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 10, 0);
  ENTER(l, 10000, 1, 0, d);
  ck_decision(d, WAIT, 100, 0, 9, 0);
  sw_options_free(r);
  sw_options_free(o);
  sw_limiter_free(l);
}
END_TEST

/* get_rule returns what was set (and the defaults for the rest). */
START_TEST(test_get_rule_round_trip) {
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_WARM_UP_PACING, 12.5);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 250));
  ck_ok(sw_options_set(o, SW_OPT_WARM_UP_SEC, 7));
  ck_ok(sw_options_set(o, SW_OPT_COLD_FACTOR, 4));
  ck_ok(sw_options_set(o, SW_OPT_STRICT, 0));
  sw_limiter *l = limiter_new(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 3);
  sw_options *got = opts_new();
  int64_t v;
  double x;
  ck_ok(sw_limiter_get_rule(l, got));
  ck_ok(sw_options_get(got, SW_OPT_GRADE, &v));
  ck_assert_int_eq(v, SW_GRADE_CONCURRENCY);
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 3);
  ck_ok(sw_options_get(got, SW_OPT_MAX_QUEUE_MS, &v));
  ck_assert_int_eq(v, 500);
  ck_ok(sw_options_get(got, SW_OPT_STRICT, &v));
  ck_assert_int_eq(v, 1);

  ck_ok(sw_limiter_set_rule(l, o));
  ck_ok(sw_limiter_get_rule(l, got));
  ck_ok(sw_options_get(got, SW_OPT_GRADE, &v));
  ck_assert_int_eq(v, SW_GRADE_QPS);
  ck_ok(sw_options_get(got, SW_OPT_BEHAVIOR, &v));
  ck_assert_int_eq(v, SW_BEHAVIOR_WARM_UP_PACING);
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 12.5);
  ck_ok(sw_options_get(got, SW_OPT_MAX_QUEUE_MS, &v));
  ck_assert_int_eq(v, 250);
  ck_ok(sw_options_get(got, SW_OPT_WARM_UP_SEC, &v));
  ck_assert_int_eq(v, 7);
  ck_ok(sw_options_get(got, SW_OPT_COLD_FACTOR, &v));
  ck_assert_int_eq(v, 4);
  ck_ok(sw_options_get(got, SW_OPT_STRICT, &v));
  ck_assert_int_eq(v, 0);
  /* node options are not part of the rule and stay untouched */
  ck_ok(sw_options_set(got, SW_OPT_SECOND_SAMPLE_COUNT, 4));
  ck_ok(sw_limiter_get_rule(l, got));
  ck_ok(sw_options_get(got, SW_OPT_SECOND_SAMPLE_COUNT, &v));
  ck_assert_int_eq(v, 4);
  sw_options_free(got);
  sw_options_free(o);
  sw_limiter_free(l);
}
END_TEST

/* get_rule writes every rule value, whatever the behaviour: a reject rule
 * with a non-default queue and warm-up period read into options that hold
 * other values gives back the rule's values. */
START_TEST(test_get_rule_reject_writes_every_value) {
  sw_options *o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 42);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 250));
  ck_ok(sw_options_set(o, SW_OPT_WARM_UP_SEC, 7));
  ck_ok(sw_options_set(o, SW_OPT_COLD_FACTOR, 5));
  sw_limiter *l = limiter_from(o);
  for (int round = 0; round < 2; round++) {
    sw_options *got = opts_new();
    ck_ok(sw_options_set(got, SW_OPT_MAX_QUEUE_MS, 123));
    ck_ok(sw_options_set(got, SW_OPT_WARM_UP_SEC, 99));
    ck_ok(sw_options_set(got, SW_OPT_COLD_FACTOR, 9));
    ck_ok(sw_limiter_get_rule(l, got));
    int64_t v;
    double x;
    ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
    ck_assert_double_eq(x, 42);
    ck_ok(sw_options_get(got, SW_OPT_COLD_FACTOR, &v));
    ck_assert_int_eq(v, 5);
    ck_ok(sw_options_get(got, SW_OPT_MAX_QUEUE_MS, &v));
    ck_assert_int_eq(v, 250);
    ck_ok(sw_options_get(got, SW_OPT_WARM_UP_SEC, &v));
    ck_assert_int_eq(v, 7);
    sw_options_free(got);
    ck_ok(sw_limiter_set_rule(l, o)); /* and after a run-time update */
  }
  sw_limiter_free(l);
  sw_options_free(o);
}
END_TEST

/* -------------------------------------------------------------- bad input */

#define ck_msg_has(text)                                                                   \
  ck_assert_msg(strstr(sw_last_error(), (text)) != NULL, "message \"%s\" lacks \"%s\"",    \
                sw_last_error(), (text))

/* Every invalid rule value is refused with a specific code and a message
 * naming it, when set or when the limiter is created. */
START_TEST(test_bad_rules) {
  sw_options *o = opts_new();
  ck_sw(sw_options_set_double(o, SW_OPT_THRESHOLD, -1), SW_ERANGE);
  ck_msg_has("SW_OPT_THRESHOLD=-1");
  ck_sw(sw_options_set_double(o, SW_OPT_THRESHOLD, NAN), SW_ERANGE);
  ck_msg_has("SW_OPT_THRESHOLD=nan");
  ck_sw(sw_options_set(o, SW_OPT_GRADE, 5), SW_ERANGE);
  ck_msg_has("SW_OPT_GRADE=5");
  ck_sw(sw_options_set(o, SW_OPT_GRADE, -1), SW_ERANGE);
  ck_sw(sw_options_set(o, SW_OPT_BEHAVIOR, 9), SW_ERANGE);
  ck_msg_has("SW_OPT_BEHAVIOR=9");
  ck_sw(sw_options_set(o, SW_OPT_COLD_FACTOR, 1), SW_ERANGE);
  ck_msg_has("SW_OPT_COLD_FACTOR=1");
  ck_sw(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, -1), SW_ERANGE);
  ck_msg_has("SW_OPT_MAX_QUEUE_MS=-1");
  ck_sw(sw_options_set(o, SW_OPT_WARM_UP_SEC, 0), SW_ERANGE);
  ck_msg_has("SW_OPT_WARM_UP_SEC=0");
  ck_sw(sw_options_set(o, SW_OPT_STRICT, 2), SW_ERANGE);
  ck_msg_has("SW_OPT_STRICT=2");
  ck_sw(sw_options_set_double(o, SW_OPT_MAX_QUEUE_MS, 1.5), SW_ERANGE);
  ck_msg_has("not an integer");
  sw_options_free(o);

  /* pacing / warm-up need the QPS grade */
  sw_limiter *l = (sw_limiter *)&l;
  for (int b = SW_BEHAVIOR_WARM_UP; b <= SW_BEHAVIOR_WARM_UP_PACING; b++) {
    o = rule_opts(SW_GRADE_CONCURRENCY, b, 10);
    ck_sw(sw_limiter_create(&l, o), SW_EINVAL);
    ck_assert_ptr_null(l);
    ck_msg_has("SW_GRADE_QPS");
    ck_msg_has("SW_OPT_BEHAVIOR=");
    sw_options_free(o);
  }
  /* warm-up with no warm-up range: threshold x period too small, or 0 */
  o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_WARM_UP, 0.1);
  ck_ok(sw_options_set(o, SW_OPT_WARM_UP_SEC, 1));
  ck_sw(sw_limiter_create(&l, o), SW_EINVAL);
  ck_msg_has("SW_OPT_THRESHOLD=0.1");
  ck_msg_has("SW_OPT_WARM_UP_SEC=1");
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 0));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP_PACING));
  ck_sw(sw_limiter_create(&l, o), SW_EINVAL);
  ck_msg_has("SW_OPT_THRESHOLD=0");
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 4)); /* 4 x 1 s: (4/2, 2 + 2) */
  ck_ok(sw_limiter_create(&l, o));
  sw_limiter_free(l);
  sw_options_free(o);

  /* a rule refused at run time leaves the old one in force */
  l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1);
  o = rule_opts(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_PACING, 10);
  ck_sw(sw_limiter_set_rule(l, o), SW_EINVAL);
  ck_msg_has("SW_GRADE_QPS");
  sw_decision d;
  ENTER(l, 1000, 1, 0, d);
  ck_assert_int_eq(d.verdict, PASS);
  ENTER(l, 1000, 1, 0, d);
  ck_assert_int_eq(d.verdict, BLOCK);
  sw_options_free(o);
  sw_limiter_free(l);

  /* bad node geometry is the node's error */
  o = rule_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 3));
  ck_sw(sw_limiter_create(&l, o), SW_ESIZE);
  ck_msg_has("per-second array:");
  sw_options_free(o);
}
END_TEST

/* NULL limiter / decision / options: SW_ENULL; negative time: SW_ETIME;
 * n outside 0..INT32_MAX: SW_ERANGE. Failed calls count nothing. */
START_TEST(test_bad_calls) {
  sw_decision d;
  ck_sw(sw_limiter_create(NULL, NULL), SW_ENULL);
  ck_sw(sw_limiter_entry_at(NULL, 1000, 1, 0, &d), SW_ENULL);
  ck_msg_has("limiter");
  ck_sw(sw_limiter_entry(NULL, 1, 0, &d), SW_ENULL);
  ck_sw(sw_limiter_exit_at(NULL, 1000, 1, 1, 0), SW_ENULL);
  ck_sw(sw_limiter_exit(NULL, 1, 1, 0), SW_ENULL);
  ck_sw(sw_limiter_set_rule(NULL, NULL), SW_ENULL);
  ck_sw(sw_limiter_get_rule(NULL, NULL), SW_ENULL);
  ck_assert_ptr_null(sw_limiter_node(NULL));
  sw_limiter_free(NULL);

  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_node *n = sw_limiter_node(l);
  ck_sw(sw_limiter_entry_at(l, 1000, 1, 0, NULL), SW_ENULL);
  ck_msg_has("decision");
  ck_sw(sw_limiter_get_rule(l, NULL), SW_ENULL);
  ck_sw(sw_limiter_entry_at(l, -1, 1, 0, &d), SW_ETIME);
  ck_msg_has("-1");
  ck_sw(sw_limiter_entry_at(l, 1000, -1, 0, &d), SW_ERANGE);
  ck_msg_has("n=-1");
  ck_sw(sw_limiter_entry_at(l, 1000, (int64_t)INT32_MAX + 1, 0, &d), SW_ERANGE);
  ck_msg_has("n=2147483648");
  ck_sw(sw_limiter_exit_at(l, -1, 1, 1, 0), SW_ETIME);
  ck_sw(sw_limiter_exit_at(l, 1000, 1, -1, 0), SW_ERANGE);
  ck_assert_double_eq(sw_node_total_qps_at(n, 1000), 0);
  ck_assert_int_eq(sw_node_total_request_at(n, 1000), 0);
  ck_assert_int_eq(sw_node_total_success_at(n, 1000), 0);
  ck_assert_int_eq(sw_node_concurrency(n), 0);
  /* the limiter still works */
  ENTER(l, 0, 1, 0, d);
  ck_decision(d, PASS, 0, 0, 9, 0);
  sw_limiter_free(l);
}
END_TEST

/* An exit whose RT is out of range fails as a whole: no success counted,
 * the request still in flight. */
START_TEST(test_bad_exit_records_nothing) {
  sw_limiter *l = limiter_new(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_node *n = sw_limiter_node(l);
  sw_decision d;
  ENTER(l, 1000, 1, 0, d);
  ck_sw(sw_limiter_exit_at(l, 1000, -1, 1, 0), SW_ERANGE);
  ck_assert_int_eq(sw_node_concurrency(n), 1);
  ck_assert_int_eq(sw_node_total_success_at(n, 1000), 0);
  sw_limiter_free(l);
}
END_TEST

/* Dry-run: the rule decides and counts "would block", and everything
 * passes; switched off at run time, the same traffic blocks. */
START_TEST(test_dry_run_counts_would_block) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 2));
  ck_ok(sw_options_set(o, SW_OPT_DRY_RUN, 1));
  sw_limiter *l;
  ck_ok(sw_limiter_create(&l, o));
  sw_decision d;
  for (int i = 0; i < 5; i++) {
    ck_ok(sw_limiter_entry_at(l, 1000, 1, 0, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
    ck_assert_int_eq(d.would_block, i >= 2);
  }
  sw_node *n = sw_limiter_node(l);
  ck_assert(sw_node_pass_qps_at(n, 1000) == 5.0);
  ck_assert(sw_node_would_block_qps_at(n, 1000) == 3.0);
  ck_assert(sw_node_block_qps_at(n, 1000) == 0.0);
  ck_assert_int_eq(sw_node_concurrency(n), 5); /* all went ahead */
  sw_options *got;
  ck_ok(sw_options_create(&got));
  ck_ok(sw_limiter_get_rule(l, got));
  int64_t v;
  ck_ok(sw_options_get(got, SW_OPT_DRY_RUN, &v));
  ck_assert_int_eq(v, 1);
  ck_ok(sw_limiter_set_dry_run(l, 0)); /* enforce from now on */
  ck_ok(sw_limiter_entry_at(l, 1000, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.would_block, 0);
  ck_assert(sw_node_block_qps_at(n, 1000) == 1.0);
  /* pacing in dry-run: a wait becomes a pass that says how long it would wait */
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  ck_ok(sw_limiter_set_rule(l, o));
  ck_ok(sw_limiter_entry_at(l, 5000, 1, 0, &d));
  ck_ok(sw_limiter_entry_at(l, 5000, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  ck_assert_int_eq(d.wait_ms, 100);
  sw_metric_record rec[60];
  int k = sw_node_metrics_at(n, 3000, 0, rec, 60);
  ck_assert_int_eq(k, 1);
  ck_assert_int_eq(rec[0].would_block, 3);
  sw_options_free(got);
  sw_options_free(o);
  sw_limiter_free(l);
}
END_TEST

int main(void) {
  Suite *s = suite_create("limiter");
  SW_TCASE(s, "reject", test_dry_run_counts_would_block, test_reject_admits_threshold_per_second, test_reject_retry_after,
           test_default_controller_port, test_reject_truncation_and_fractions,
           test_entry_and_exit_records);
  SW_TCASE(s, "prioritized", test_prioritized_borrows_next_window,
           test_prioritized_pass_visible_at_window_start, test_prioritized_borrow_limit,
           test_prioritized_ignored_elsewhere, test_prioritized_walk_subtracts_borrowed_window,
           test_prioritized_borrowed_pass_outlives_its_slot);
  SW_TCASE(s, "pacing", test_pacing_queue, test_pacing_spacing,
           test_pacing_cost_and_queue_option, test_pacing_java_ports, test_pacing_go_ports,
           test_pacing_zero_units, test_pacing_sub_millisecond_cost,
           test_pacing_saturation_matches_sentinel, test_warm_up_pacing_sub_millisecond_cost,
           test_pacing_time_range, test_dry_run_pacing_wait_is_not_a_block,
           test_remaining_never_negative);
  SW_TCASE(s, "warm-up", test_warm_up_controller_port, test_warm_up_cold_start,
           test_warm_up_curve, test_warm_up_pacing_port, test_warm_up_pacing_cannot_pass,
           test_warm_up_pacing_cold_cost);
  SW_TCASE(s, "concurrency", test_concurrency_grade);
  SW_TCASE(s, "threads", test_strict_exact_under_threads, test_fast_mode_under_threads,
           test_strict_boundary_no_overshoot, test_strict_boundaries_under_threads,
           test_strict_borrowing_under_threads, test_warm_up_sync_under_threads,
           test_concurrency_strict_under_threads);
  SW_TCASE(s, "rules", test_set_rule_keeps_statistics, test_set_rule_resets_pacing_queue,
           test_get_rule_round_trip, test_get_rule_reject_writes_every_value);
  SW_TCASE(s, "errors", test_bad_rules, test_bad_calls, test_bad_exit_records_nothing);
  return sw_test_run(s);
}
