/* SPDX-License-Identifier: Apache-2.0 */
/* StatisticNode (sw_node_*): rates over the per-second array, totals over the
 * per-minute array, concurrency, borrowing (waiting, add_occupied_pass,
 * tryOccupyNext), metric export and construction errors. Explicit time only.
 * Sentinel reference: StatisticNode (notes §1.8); tryOccupyNext has no
 * upstream test, so the worked example of §1.8 and hand-derived cases are
 * used. */
#include <math.h>
#include <string.h>

#include "testutil.h"

static sw_node *node_new(const sw_options *o) {
  sw_node *n = NULL;
  ck_ok(sw_node_create(&n, o));
  ck_assert_ptr_nonnull(n);
  return n;
}

static sw_options *opts_new(void) {
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  return o;
}

/* ------------------------------------------------------------------ rates */

/* Per-second rates sum the two 500 ms windows of the interval ending at t:
 * pass, block, success, exception; total = pass + block. */
START_TEST(test_rates) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_pass_at(n, 1000, 3));
  ck_ok(sw_node_increase_block_at(n, 1100, 4));
  ck_ok(sw_node_add_rt_and_success_at(n, 1200, 30, 2));
  ck_ok(sw_node_add_pass_at(n, 1600, 2));
  ck_ok(sw_node_increase_block_at(n, 1700, 1));
  ck_ok(sw_node_increase_exception_at(n, 1650, 2));
  /* t = 1700: windows 1000 and 1500 */
  ck_assert_double_eq(sw_node_pass_qps_at(n, 1700), 5);
  ck_assert_double_eq(sw_node_block_qps_at(n, 1700), 5);
  ck_assert_double_eq(sw_node_success_qps_at(n, 1700), 2);
  ck_assert_double_eq(sw_node_exception_qps_at(n, 1700), 2);
  ck_assert_double_eq(sw_node_total_qps_at(n, 1700), 10);
  /* t = 2100: windows 1500 and 2000; the 1000 window left the interval */
  ck_assert_double_eq(sw_node_pass_qps_at(n, 2100), 2);
  ck_assert_double_eq(sw_node_block_qps_at(n, 2100), 1);
  ck_assert_double_eq(sw_node_success_qps_at(n, 2100), 0);
  ck_assert_double_eq(sw_node_exception_qps_at(n, 2100), 2);
  ck_assert_double_eq(sw_node_total_qps_at(n, 2100), 3);
  /* t = 2600: nothing left */
  ck_assert_double_eq(sw_node_pass_qps_at(n, 2600), 0);
  ck_assert_double_eq(sw_node_total_qps_at(n, 2600), 0);
  ck_assert_double_eq(sw_node_exception_qps_at(n, 2600), 0);
  sw_node_free(n);
}
END_TEST

/* A 2 s per-second array (4 x 500 ms) divides by 2: rates are per second and
 * may be fractional. */
START_TEST(test_rates_longer_interval) {
  sw_options *o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 4));
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 2000));
  sw_node *n = node_new(o);
  ck_ok(sw_node_add_pass_at(n, 10000, 2));
  ck_ok(sw_node_add_pass_at(n, 10600, 2));
  ck_ok(sw_node_add_pass_at(n, 11700, 1));
  ck_assert_double_eq(sw_node_pass_qps_at(n, 11999), 2.5);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 12000), 1.5); /* 10000 window left */
  ck_ok(sw_node_add_rt_and_success_at(n, 11000, 10, 2));
  ck_ok(sw_node_add_rt_and_success_at(n, 11600, 10, 6));
  /* max success of one window (6) scaled to a second: 6 * 4 / 2 s */
  ck_assert_double_eq(sw_node_max_success_qps_at(n, 11999), 12);
  sw_node_free(n);
  sw_options_free(o);
}
END_TEST

/* occupiedPassQps reads OCCUPIED_PASS of the per-second array, which
 * sw_node_add_occupied_pass_at does not touch (Sentinel records borrowed
 * passes in the minute array only). */
START_TEST(test_occupied_pass_qps) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_occupied_pass_at(n, 5000, 3));
  ck_assert_double_eq(sw_node_occupied_pass_qps_at(n, 5100), 0);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 5100), 0);
  ck_ok(sw_metric_add_occupied_pass_at(sw_node_second_metric(n), 5200, 4));
  ck_assert_double_eq(sw_node_occupied_pass_qps_at(n, 5300), 4);
  ck_assert_double_eq(sw_node_occupied_pass_qps_at(n, 6000), 0);
  sw_node_free(n);
}
END_TEST

/* avgRt = RT / SUCCESS over the per-second array, 0 when there is no success
 * (idle, or the successes left the interval). */
START_TEST(test_avg_rt) {
  sw_node *n = node_new(NULL);
  ck_assert_double_eq(sw_node_avg_rt_at(n, 1000), 0);
  ck_ok(sw_node_add_rt_and_success_at(n, 1000, 30, 2));
  ck_ok(sw_node_add_rt_and_success_at(n, 1600, 10, 1));
  ck_assert_double_eq_tol(sw_node_avg_rt_at(n, 1700), 40.0 / 3.0, 1e-12);
  ck_assert_double_eq(sw_node_avg_rt_at(n, 2000), 10);   /* window 1500 only */
  ck_assert_double_eq(sw_node_avg_rt_at(n, 2500), 0);    /* no success left */
  /* an exception alone gives no RT */
  ck_ok(sw_node_increase_exception_at(n, 3000, 1));
  ck_assert_double_eq(sw_node_avg_rt_at(n, 3000), 0);
  sw_node_free(n);
}
END_TEST

/* minRt: the smallest RT of the interval, the statistic max RT when idle,
 * never below 1. */
START_TEST(test_min_rt) {
  sw_node *n = node_new(NULL);
  ck_assert_double_eq(sw_node_min_rt_at(n, 1000), 5000);
  ck_ok(sw_node_add_rt_and_success_at(n, 1000, 30, 1));
  ck_ok(sw_node_add_rt_and_success_at(n, 1600, 10, 1));
  ck_assert_double_eq(sw_node_min_rt_at(n, 1700), 10);
  ck_ok(sw_node_add_rt_and_success_at(n, 2000, 50, 1));
  ck_assert_double_eq(sw_node_min_rt_at(n, 2100), 10); /* 1500 window still in */
  ck_assert_double_eq(sw_node_min_rt_at(n, 2500), 50);
  ck_assert_double_eq(sw_node_min_rt_at(n, 3000), 5000);
  ck_ok(sw_node_add_rt_and_success_at(n, 4000, 0, 1));
  ck_assert_double_eq(sw_node_min_rt_at(n, 4000), 1); /* clamped to 1 */
  sw_node_free(n);

  sw_options *o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_MAX_RT_MS, 3000));
  n = node_new(o);
  ck_assert_double_eq(sw_node_min_rt_at(n, 1000), 3000);
  sw_node_free(n);
  sw_options_free(o);
}
END_TEST

/* maxSuccessQps = max per-window SUCCESS (at least 1) * sampleCount / interval. */
START_TEST(test_max_success_qps) {
  sw_node *n = node_new(NULL);
  ck_assert_double_eq(sw_node_max_success_qps_at(n, 1000), 2); /* max(0, 1) * 2 / 1 */
  ck_ok(sw_node_add_rt_and_success_at(n, 1000, 1, 3));
  ck_ok(sw_node_add_rt_and_success_at(n, 1500, 1, 5));
  ck_assert_double_eq(sw_node_max_success_qps_at(n, 1700), 10);
  ck_assert_double_eq(sw_node_max_success_qps_at(n, 2000), 10);
  ck_assert_double_eq(sw_node_max_success_qps_at(n, 2500), 2);
  sw_node_free(n);
}
END_TEST

/* previousPassQps / previousBlockQps: PASS / BLOCK of the previous window of
 * the per-minute array (the last whole second), not of the per-second one. */
START_TEST(test_previous_qps) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_pass_at(n, 3000, 4));
  ck_ok(sw_node_add_pass_at(n, 3999, 3));
  ck_ok(sw_node_increase_block_at(n, 3500, 2));
  ck_ok(sw_node_add_pass_at(n, 4100, 9));
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 4000), 7);
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 4999), 7);
  ck_assert_int_eq(sw_node_previous_block_qps_at(n, 4500), 2);
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 3999), 0); /* second 2000: empty */
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 5000), 9);
  ck_assert_int_eq(sw_node_previous_block_qps_at(n, 5000), 0);
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 6000), 0); /* second 5000: empty */
  /* passes written into the per-second array only do not count */
  ck_ok(sw_metric_add_pass_at(sw_node_second_metric(n), 7000, 5));
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 8000), 0);
  ck_ok(sw_metric_add_pass_at(sw_node_minute_metric(n), 9000, 6));
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 10000), 6);
  sw_node_free(n);
}
END_TEST

/* Totals sum the per-minute array: 60 one-second windows. */
START_TEST(test_totals_over_minute) {
  sw_node *n = node_new(NULL);
  for (int64_t s = 0; s < 10; s++) {
    int64_t t = 100000 + s * 1000 + 250;
    ck_ok(sw_node_add_pass_at(n, t, 2));
    ck_ok(sw_node_increase_block_at(n, t, 1));
    ck_ok(sw_node_add_rt_and_success_at(n, t, 5, 1));
    ck_ok(sw_node_increase_exception_at(n, t, 1));
  }
  ck_assert_int_eq(sw_node_total_pass_at(n, 110000), 20);
  ck_assert_int_eq(sw_node_total_request_at(n, 110000), 30);
  ck_assert_int_eq(sw_node_block_request_at(n, 110000), 10);
  ck_assert_int_eq(sw_node_total_success_at(n, 110000), 10);
  ck_assert_int_eq(sw_node_total_exception_at(n, 110000), 10);
  /* at 160500 the minute covers seconds 101000..160000: the first one left */
  ck_assert_int_eq(sw_node_total_pass_at(n, 160500), 18);
  ck_assert_int_eq(sw_node_total_request_at(n, 160500), 27);
  ck_assert_int_eq(sw_node_total_pass_at(n, 170000), 0);
  ck_assert_int_eq(sw_node_total_request_at(n, 170000), 0);
  /* while the per-second rates only see the last second */
  ck_assert_double_eq(sw_node_pass_qps_at(n, 109300), 2);
  sw_node_free(n);
}
END_TEST

/* curThreadNum: increase / decrease, never tied to time. */
START_TEST(test_concurrency) {
  sw_node *n = node_new(NULL);
  ck_assert_int_eq(sw_node_concurrency(n), 0);
  for (int i = 0; i < 3; i++) ck_ok(sw_node_increase_concurrency(n));
  ck_ok(sw_node_decrease_concurrency(n));
  ck_assert_int_eq(sw_node_concurrency(n), 2);
  ck_ok(sw_node_decrease_concurrency(n));
  ck_ok(sw_node_decrease_concurrency(n));
  ck_assert_int_eq(sw_node_concurrency(n), 0);
  sw_node_free(n);
}
END_TEST

/* waiting: borrowed passes of future windows that start after t. */
START_TEST(test_waiting) {
  sw_node *n = node_new(NULL);
  ck_assert_int_eq(sw_node_waiting_at(n, 10300), 0);
  ck_ok(sw_node_add_waiting(n, 10500, 2));
  ck_ok(sw_node_add_waiting(n, 10700, 1)); /* same window 10500 */
  ck_ok(sw_node_add_waiting(n, 11000, 4));
  ck_assert_int_eq(sw_node_waiting_at(n, 10300), 7);
  ck_assert_int_eq(sw_node_waiting_at(n, 10499), 7);
  ck_assert_int_eq(sw_node_waiting_at(n, 10500), 4); /* 10500 has started */
  ck_assert_int_eq(sw_node_waiting_at(n, 10999), 4);
  ck_assert_int_eq(sw_node_waiting_at(n, 11000), 0);
  /* waiting passes are not passes yet */
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10300), 0);
  /* once the window is current (any write), its borrowed passes are PASS */
  ck_ok(sw_node_increase_block_at(n, 10500, 1));
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10600), 3);
  ck_ok(sw_node_increase_block_at(n, 11000, 1));
  ck_assert_double_eq(sw_node_pass_qps_at(n, 11100), 7);
  sw_node_free(n);
}
END_TEST

/* Sentinel reads refresh the current window first, so a borrowed pass is
 * visible as PASS from the first millisecond of its window, before anything
 * is written there: at every instant it is either waiting or passed. */
START_TEST(test_borrowed_pass_visible_at_window_start) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_waiting(n, 10500, 2));
  ck_assert_int_eq(sw_node_waiting_at(n, 10499), 2);
  ck_assert_int_eq(sw_node_waiting_at(n, 10500), 0);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10500), 2);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10700), 2);
  sw_node_free(n);
}
END_TEST

/* addOccupiedPass touches the per-minute array only: OCCUPIED_PASS and PASS. */
START_TEST(test_add_occupied_pass) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_occupied_pass_at(n, 5000, 3));
  ck_ok(sw_node_add_occupied_pass_at(n, 5900, 1));
  sw_metric *minute = sw_node_minute_metric(n), *second = sw_node_second_metric(n);
  ck_assert_int_eq(sw_metric_occupied_pass_at(minute, 5900), 4);
  ck_assert_int_eq(sw_metric_pass_at(minute, 5900), 4);
  ck_assert_int_eq(sw_node_total_pass_at(n, 5900), 4);
  ck_assert_int_eq(sw_node_total_request_at(n, 5900), 4);
  ck_assert_int_eq(sw_metric_pass_at(second, 5900), 0);
  ck_assert_int_eq(sw_metric_occupied_pass_at(second, 5900), 0);
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 6000), 4);
  sw_node_free(n);
}
END_TEST

/* ------------------------------------------------------------ tryOccupyNext */

/* Notes §1.8, worked example: t = 10300, threshold 10, n = 1, defaults
 * (1000 ms, 2 windows, timeout 500). earliest = 9500; the only candidate is
 * waiting 200 ms for the 9500 window to leave. */
START_TEST(test_try_occupy_worked_example) {
  sw_node *n = node_new(NULL);
  ck_assert_int_eq(sw_node_occupy_timeout_ms(n), 500);
  /* idle: 0 + 0 + 1 - 0 <= 10 at the first candidate */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 200);
  /* 5 in window 9500, 5 in window 10000: 10 + 0 + 1 - 5 = 6 <= 10 -> 200 */
  ck_ok(sw_node_add_pass_at(n, 9600, 5));
  ck_ok(sw_node_add_pass_at(n, 10100, 5));
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 200);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 5, 10), 200); /* 10 <= 10 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 6, 10), 500); /* 11 > 10 */
  /* the wait is to the next window start: 10000 + 500 - t */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10001, 1, 10), 499);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10499, 1, 10), 1);
  sw_node_free(n);

  /* all 10 in window 10000: 10 + 0 + 1 - 0 = 11 > 10; the next candidate
   * would wait 700 >= 500: cannot (returns the timeout) */
  n = node_new(NULL);
  ck_ok(sw_node_add_pass_at(n, 10100, 10));
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 500);
  /* a fractional threshold: maxCount = 10.5 admits 10 + 1 - 0 = 11? no */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10.5), 500);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 11), 200);
  /* at 10800 (window 10500) the leaving window is 10000, which holds the 10 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10800, 1, 10), 200);
  sw_node_free(n);
}
END_TEST

/* Borrowed passes still waiting count against the next window:
 * pass + borrow + n - leaving <= maxCount, and borrow >= maxCount is a
 * timeout at once. */
START_TEST(test_try_occupy_counts_waiting) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_pass_at(n, 9600, 5));
  ck_ok(sw_node_add_pass_at(n, 10100, 5));
  ck_ok(sw_node_add_waiting(n, 10500, 3));
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 200); /* 9 <= 10 */
  ck_ok(sw_node_add_waiting(n, 10500, 2));
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 500); /* 11 > 10 */
  sw_node_free(n);

  /* waiting >= maxCount: timeout whatever the windows hold */
  n = node_new(NULL);
  ck_ok(sw_node_add_waiting(n, 10500, 10));
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 500);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 0, 10), 500);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10.5), 500); /* 11 > 10.5 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 0, 10.5), 200); /* 10 <= 10.5 */
  sw_node_free(n);

  /* threshold 0: maxCount 0, waiting 0 >= 0 */
  n = node_new(NULL);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 0), 500);
  sw_node_free(n);
}
END_TEST

/* With 4 windows of 250 ms and a 1000 ms timeout the loop walks several
 * windows: each one that leaves frees its passes, and the wait grows by one
 * window length each step (200, 450, 700, 950). */
START_TEST(test_try_occupy_several_windows) {
  sw_options *o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 4));
  ck_ok(sw_options_set(o, SW_OPT_OCCUPY_TIMEOUT_MS, 1000));
  sw_node *n = node_new(o);
  ck_ok(sw_node_add_pass_at(n, 9500, 3));
  ck_ok(sw_node_add_pass_at(n, 9750, 3));
  ck_ok(sw_node_add_pass_at(n, 10000, 3));
  ck_ok(sw_node_add_pass_at(n, 10250, 1));
  ck_assert_double_eq(sw_node_pass_qps_at(n, 10300), 10);
  /* earliest = 10300 - 50 + 250 - 1000 = 9500 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 200);  /* 11 - 3 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 3, 10), 200);  /* 13 - 3 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 4, 10), 450);  /* 7 + 4 - 3 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 7, 10), 700);  /* 4 + 7 - 3 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 10, 10), 950); /* 1 + 10 - 1 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 11, 10), 1000);
  sw_node_free(n);
  sw_options_free(o);
}
END_TEST

/* A shorter occupy timeout cuts the candidates: a wait >= timeout is never
 * offered; timeout 0 never borrows. */
START_TEST(test_try_occupy_timeout_option) {
  sw_options *o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_OCCUPY_TIMEOUT_MS, 100));
  sw_node *n = node_new(o);
  ck_assert_int_eq(sw_node_occupy_timeout_ms(n), 100);
  ck_ok(sw_node_add_pass_at(n, 9600, 10));
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10300, 1, 10), 100); /* 200 >= 100 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10400, 1, 10), 100); /* 100 >= 100 */
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10450, 1, 10), 50);
  sw_node_free(n);

  ck_ok(sw_options_set(o, SW_OPT_OCCUPY_TIMEOUT_MS, 0));
  n = node_new(o);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 10499, 1, 10), 0);
  sw_node_free(n);

  /* the timeout may equal the per-second interval */
  ck_ok(sw_options_set(o, SW_OPT_OCCUPY_TIMEOUT_MS, 1000));
  n = node_new(o);
  ck_assert_int_eq(sw_node_occupy_timeout_ms(n), 1000);
  sw_node_free(n);
  sw_options_free(o);
}
END_TEST

/* Passes borrowed into a window that nobody wrote are in pass_at and leave
 * the interval with their window: the walk subtracts them. Default node, a
 * pass borrowed for [2500, 3000): at 3146 the interval holds it, and when
 * [2500, 3000) leaves at 3500 there is room for 1 more (wait 354); the 4x200
 * example of the issue: borrowed 2 + 1 for [600, 800), queried at 628. */
START_TEST(test_try_occupy_borrowed_only_window) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_waiting(n, 2500, 1));
  ck_assert_int_eq(sw_metric_pass_at(sw_node_second_metric(n), 3146), 1);
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 3146, 1, 1), 354);
  sw_node_free(n);

  sw_options *o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 4));
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 800));
  ck_ok(sw_options_set(o, SW_OPT_OCCUPY_TIMEOUT_MS, 200));
  n = node_new(o);
  ck_ok(sw_node_add_waiting(n, 614, 2));
  ck_ok(sw_node_add_waiting(n, 728, 1));
  ck_assert_int_eq(sw_node_try_occupy_next_at(n, 628, 1, 10), 172);
  sw_node_free(n);
  sw_options_free(o);
}
END_TEST

/* ------------------------------------------------------------------ export */

static int has_start(const sw_metric_record *r, int count, int64_t start) {
  for (int i = 0; i < count; i++)
    if (r[i].start_ms == start) return 1;
  return 0;
}

/* metrics(): whole seconds of the per-minute array after since_ms and before
 * the second of t, only those with activity, oldest first. */
START_TEST(test_metrics_at) {
  sw_node *n = node_new(NULL);
  ck_ok(sw_node_add_pass_at(n, 1000, 2));
  ck_ok(sw_node_increase_block_at(n, 2500, 3));
  ck_ok(sw_node_add_rt_and_success_at(n, 4200, 40, 2));
  ck_ok(sw_node_increase_exception_at(n, 4300, 1));
  ck_ok(sw_node_increase_block_at(n, 5000, 0)); /* second 5000 exists but is empty */
  ck_ok(sw_node_add_occupied_pass_at(n, 6000, 1));
  ck_ok(sw_node_add_pass_at(n, 7100, 5)); /* the current second at t = 7300 */

  sw_metric_record r[8];
  memset(r, 0xff, sizeof r);
  int c = sw_node_metrics_at(n, 7300, -1, r, 8);
  ck_assert_int_eq(c, 4);
  ck_assert_int_eq(r[0].start_ms, 1000);
  ck_assert_int_eq(r[0].pass, 2);
  ck_assert_int_eq(r[0].block, 0);
  ck_assert_int_eq(r[1].start_ms, 2000);
  ck_assert_int_eq(r[1].block, 3);
  ck_assert_int_eq(r[2].start_ms, 4000);
  ck_assert_int_eq(r[2].success, 2);
  ck_assert_int_eq(r[2].rt, 40);
  ck_assert_int_eq(r[2].exception, 1);
  ck_assert_int_eq(r[2].min_rt, 40);
  ck_assert_int_eq(r[3].start_ms, 6000);
  ck_assert_int_eq(r[3].occupied_pass, 1);
  ck_assert_int_eq(r[3].pass, 1);
  ck_assert(!has_start(r, c, 5000)); /* empty */
  ck_assert(!has_start(r, c, 7000)); /* not before the second of t */

  /* after since_ms (strictly) */
  c = sw_node_metrics_at(n, 7300, 2000, r, 8);
  ck_assert_int_eq(c, 2);
  ck_assert_int_eq(r[0].start_ms, 4000);
  ck_assert_int_eq(r[1].start_ms, 6000);
  ck_assert_int_eq(sw_node_metrics_at(n, 7300, 6000, r, 8), 0);
  /* at the next second, 7000 is complete */
  c = sw_node_metrics_at(n, 8000, 6000, r, 8);
  ck_assert_int_eq(c, 1);
  ck_assert_int_eq(r[0].start_ms, 7000);
  ck_assert_int_eq(r[0].pass, 5);

  /* cap smaller than the count: the oldest cap records, the full count */
  memset(r, 0, sizeof r);
  ck_assert_int_eq(sw_node_metrics_at(n, 8000, -1, r, 2), 5);
  ck_assert_int_eq(r[0].start_ms, 1000);
  ck_assert_int_eq(r[1].start_ms, 2000);
  ck_assert_int_eq(r[2].start_ms, 0); /* untouched */
  ck_assert_int_eq(sw_node_metrics_at(n, 8000, -1, NULL, 0), 5);
  ck_sw(sw_node_metrics_at(n, 8000, -1, NULL, 1), SW_ENULL);

  /* a second older than the minute is gone */
  c = sw_node_metrics_at(n, 61500, -1, r, 8);
  ck_assert_int_eq(c, 4);
  ck_assert_int_eq(r[0].start_ms, 2000);
  sw_node_free(n);
}
END_TEST

/* --------------------------------------------------------------- creation */

/* Bad geometry of either array is SW_ESIZE with the array named; an occupy
 * timeout longer than the per-second interval is SW_ERANGE. */
START_TEST(test_options_validation) {
  sw_options *o = opts_new();
  sw_node *n = (sw_node *)&n;
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 3));
  ck_sw(sw_node_create(&n, o), SW_ESIZE);
  ck_assert_ptr_null(n);
  ck_assert_msg(strstr(sw_last_error(), "per-second array:") != NULL, "message: %s",
                sw_last_error());
  ck_assert_msg(strstr(sw_last_error(), "sample_count=3") != NULL, "message: %s",
                sw_last_error());
  sw_options_free(o);

  o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_MINUTE_SAMPLE_COUNT, 7));
  ck_sw(sw_node_create(&n, o), SW_ESIZE);
  ck_assert_msg(strstr(sw_last_error(), "per-minute array:") != NULL, "message: %s",
                sw_last_error());
  ck_assert_msg(strstr(sw_last_error(), "sample_count=7") != NULL, "message: %s",
                sw_last_error());
  sw_options_free(o);

  o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_MINUTE_INTERVAL_MS, 1000));
  ck_ok(sw_options_set(o, SW_OPT_MINUTE_SAMPLE_COUNT, 60)); /* 1000 % 60 != 0 */
  ck_sw(sw_node_create(&n, o), SW_ESIZE);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "per-minute array:"));
  sw_options_free(o);

  o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_OCCUPY_TIMEOUT_MS, 1001));
  ck_sw(sw_node_create(&n, o), SW_ERANGE);
  ck_assert_ptr_null(n);
  ck_assert_msg(strstr(sw_last_error(), "SW_OPT_OCCUPY_TIMEOUT_MS=1001") != NULL,
                "message: %s", sw_last_error());
  /* with a longer per-second interval the same timeout is fine */
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 2000));
  ck_ok(sw_node_create(&n, o));
  ck_assert_int_eq(sw_node_occupy_timeout_ms(n), 1001);
  sw_node_free(n);
  sw_options_free(o);

  ck_sw(sw_node_create(NULL, NULL), SW_ENULL);
  /* a custom but valid geometry: the metrics report it */
  o = opts_new();
  ck_ok(sw_options_set(o, SW_OPT_MINUTE_SAMPLE_COUNT, 6));
  n = node_new(o);
  ck_assert_int_eq(sw_metric_sample_count(sw_node_minute_metric(n)), 6);
  ck_assert_int_eq(sw_metric_sample_count(sw_node_second_metric(n)), 2);
  ck_assert_double_eq(sw_metric_interval_sec(sw_node_minute_metric(n)), 60);
  /* previous window of a 10 s minute window */
  ck_ok(sw_node_add_pass_at(n, 25000, 3));
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 30000), 3);
  ck_assert_int_eq(sw_node_previous_pass_qps_at(n, 29999), 0);
  sw_node_free(n);
  sw_options_free(o);
  sw_node_free(NULL);
}
END_TEST

/* NULL node: SW_ENULL (as a negative double for rates); negative time:
 * SW_ETIME; counts outside 0..INT32_MAX: SW_ERANGE. Failed calls count
 * nothing. */
START_TEST(test_null_and_time_errors) {
  ck_assert_double_eq(sw_node_pass_qps_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_block_qps_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_success_qps_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_exception_qps_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_occupied_pass_qps_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_total_qps_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_avg_rt_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_min_rt_at(NULL, 0), SW_ENULL);
  ck_assert_double_eq(sw_node_max_success_qps_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_previous_pass_qps_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_previous_block_qps_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_total_request_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_total_pass_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_total_success_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_total_exception_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_block_request_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_concurrency(NULL), SW_ENULL);
  ck_sw(sw_node_waiting_at(NULL, 0), SW_ENULL);
  ck_sw(sw_node_occupy_timeout_ms(NULL), SW_ENULL);
  ck_sw(sw_node_add_pass_at(NULL, 0, 1), SW_ENULL);
  ck_sw(sw_node_add_rt_and_success_at(NULL, 0, 1, 1), SW_ENULL);
  ck_sw(sw_node_increase_block_at(NULL, 0, 1), SW_ENULL);
  ck_sw(sw_node_increase_exception_at(NULL, 0, 1), SW_ENULL);
  ck_sw(sw_node_increase_concurrency(NULL), SW_ENULL);
  ck_sw(sw_node_decrease_concurrency(NULL), SW_ENULL);
  ck_sw(sw_node_add_waiting(NULL, 0, 1), SW_ENULL);
  ck_sw(sw_node_add_occupied_pass_at(NULL, 0, 1), SW_ENULL);
  ck_sw(sw_node_try_occupy_next_at(NULL, 0, 1, 10), SW_ENULL);
  ck_sw(sw_node_metrics_at(NULL, 0, -1, NULL, 0), SW_ENULL);
  ck_assert_ptr_null(sw_node_second_metric(NULL));
  ck_assert_ptr_null(sw_node_minute_metric(NULL));

  sw_node *n = node_new(NULL);
  ck_assert_double_eq(sw_node_pass_qps_at(n, -1), SW_ETIME);
  ck_assert_double_eq(sw_node_total_qps_at(n, -1), SW_ETIME);
  ck_assert_double_eq(sw_node_avg_rt_at(n, -1), SW_ETIME);
  ck_assert_double_eq(sw_node_min_rt_at(n, -1), SW_ETIME);
  ck_assert_double_eq(sw_node_max_success_qps_at(n, -1), SW_ETIME);
  ck_sw(sw_node_previous_pass_qps_at(n, -1), SW_ETIME);
  ck_sw(sw_node_total_request_at(n, -1), SW_ETIME);
  ck_sw(sw_node_waiting_at(n, -1), SW_ETIME);
  ck_sw(sw_node_add_pass_at(n, -1, 1), SW_ETIME);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "-1"));
  ck_sw(sw_node_add_rt_and_success_at(n, -5, 1, 1), SW_ETIME);
  ck_sw(sw_node_increase_block_at(n, -1, 1), SW_ETIME);
  ck_sw(sw_node_increase_exception_at(n, -1, 1), SW_ETIME);
  ck_sw(sw_node_add_waiting(n, -1, 1), SW_ETIME);
  ck_sw(sw_node_add_occupied_pass_at(n, -1, 1), SW_ETIME);
  ck_sw(sw_node_try_occupy_next_at(n, -1, 1, 10), SW_ETIME);
  ck_sw(sw_node_metrics_at(n, -1, -1, NULL, 0), SW_ETIME);

  ck_sw(sw_node_add_pass_at(n, 1000, -1), SW_ERANGE);
  ck_sw(sw_node_add_pass_at(n, 1000, (int64_t)INT32_MAX + 1), SW_ERANGE);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "2147483648"));
  ck_sw(sw_node_increase_block_at(n, 1000, -3), SW_ERANGE);
  ck_sw(sw_node_add_rt_and_success_at(n, 1000, 1, -1), SW_ERANGE);
  ck_sw(sw_node_add_waiting(n, 1500, -1), SW_ERANGE);
  ck_sw(sw_node_try_occupy_next_at(n, 1000, -1, 10), SW_ERANGE);
  ck_sw(sw_node_try_occupy_next_at(n, 1000, (int64_t)INT32_MAX + 1, 10), SW_ERANGE);
  /* nothing was counted by the failed calls */
  ck_assert_int_eq(sw_node_total_request_at(n, 1000), 0);
  ck_assert_int_eq(sw_node_total_success_at(n, 1000), 0);
  ck_assert_int_eq(sw_node_waiting_at(n, 1000), 0);
  ck_assert_double_eq(sw_node_pass_qps_at(n, 1000), 0);
  /* time 0 is valid */
  ck_ok(sw_node_add_pass_at(n, 0, 1));
  ck_assert_double_eq(sw_node_pass_qps_at(n, 0), 1);
  sw_node_free(n);
}
END_TEST

/* A recording call that fails records nothing: an RT out of range must not
 * leave its successes counted. */
START_TEST(test_failed_rt_records_nothing) {
  sw_node *n = node_new(NULL);
  ck_sw(sw_node_add_rt_and_success_at(n, 1000, -1, 1), SW_ERANGE);
  ck_sw(sw_node_add_rt_and_success_at(n, 1000, (int64_t)INT32_MAX + 1, 2), SW_ERANGE);
  ck_assert_double_eq(sw_node_success_qps_at(n, 1000), 0);
  ck_assert_int_eq(sw_node_total_success_at(n, 1000), 0);
  sw_node_free(n);
}
END_TEST

int main(void) {
  Suite *s = suite_create("node");
  SW_TCASE(s, "rates", test_rates, test_rates_longer_interval, test_occupied_pass_qps,
           test_avg_rt, test_min_rt, test_max_success_qps);
  SW_TCASE(s, "minute", test_previous_qps, test_totals_over_minute, test_metrics_at);
  SW_TCASE(s, "borrowing", test_concurrency, test_waiting,
           test_borrowed_pass_visible_at_window_start, test_add_occupied_pass,
           test_try_occupy_worked_example, test_try_occupy_counts_waiting,
           test_try_occupy_several_windows, test_try_occupy_timeout_option,
           test_try_occupy_borrowed_only_window);
  SW_TCASE(s, "errors", test_options_validation, test_null_and_time_errors,
           test_failed_rt_records_nothing);
  return sw_test_run(s);
}
