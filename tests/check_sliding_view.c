/* SPDX-License-Identifier: Apache-2.0 */
/* The sliding view (sw_sliding_view_*): sentinel-golang's SlidingWindowMetric,
 * a read-only (sample_count, interval) view over a metric's larger array.
 * Ports sliding_window_metric_test.go with explicit times; where Go used
 * the current time we use T = 1600000000123 (S = T - T % 1000). */
#include <string.h>

#include "testutil.h"

#define T INT64_C(1600000000123)
#define S INT64_C(1600000000000)

static sw_metric *metric(int32_t n, int64_t interval) {
  sw_metric *m = NULL;
  ck_ok(sw_metric_create(&m, n, interval, NULL));
  ck_assert_ptr_nonnull(m);
  return m;
}

static sw_sliding_view *view(const sw_metric *m, int32_t n, int64_t interval) {
  sw_sliding_view *v = NULL;
  ck_ok(sw_sliding_view_create(&v, m, n, interval));
  ck_assert_ptr_nonnull(v);
  return v;
}

/* -------------------------------------------------------- construction */

/* sentinel-golang Test_NewSlidingWindowMetric, over a (20, 10000) array. */
START_TEST(test_go_new_sliding_window_metric) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = NULL;
  ck_ok(sw_sliding_view_create(&v, m, 4, 2000));
  sw_sliding_view_free(v);
  v = (sw_sliding_view *)&v;
  ck_sw(sw_sliding_view_create(&v, m, 0, 0), SW_ESIZE);
  ck_assert_ptr_null(v);
  ck_sw(sw_sliding_view_create(&v, m, 4, 2001), SW_ESIZE);
  ck_sw(sw_sliding_view_create(&v, m, 2, 2002), SW_EGEOMETRY);  /* 10000 % 2002 != 0 */
  ck_sw(sw_sliding_view_create(&v, m, 4, 200000), SW_EGEOMETRY); /* 10000 % 200000 != 0 */
  ck_assert_ptr_null(v);
  sw_metric_free(m);
}
END_TEST

/* Codes and messages, in sentinel-golang's order of checks. */
START_TEST(test_view_create_validation) {
  sw_metric *m = metric(20, 10000); /* W = 500 */
  sw_sliding_view *v = NULL;
  ck_sw(sw_sliding_view_create(&v, m, 4, 2001), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "view sample_count=4, interval_ms=2001: both must be > 0 "
                                    "and the count must divide the interval");
  ck_sw(sw_sliding_view_create(&v, m, -2, 1000), SW_ESIZE);
  ck_sw(sw_sliding_view_create(&v, m, 2, -1000), SW_ESIZE);
  ck_sw(sw_sliding_view_create(&v, m, 2, 2002), SW_EGEOMETRY);
  ck_assert_str_eq(sw_last_error(), "view interval_ms=2002 does not divide the real interval 10000");
  /* The view's window (250 ms) must be a multiple of the real one (500 ms). */
  ck_sw(sw_sliding_view_create(&v, m, 4, 1000), SW_EGEOMETRY);
  ck_assert_str_eq(sw_last_error(),
                   "view window length 250 is not a multiple of the real window length 500");
  ck_assert_ptr_null(v);
  ck_sw(sw_sliding_view_create(&v, NULL, 2, 1000), SW_ENULL);
  ck_sw(sw_sliding_view_create(NULL, m, 2, 1000), SW_ENULL);
  /* The real geometry itself, and one window over the whole interval. */
  ck_ok(sw_sliding_view_create(&v, m, 20, 10000));
  sw_sliding_view_free(v);
  ck_ok(sw_sliding_view_create(&v, m, 1, 10000));
  sw_sliding_view_free(v);
  ck_ok(sw_sliding_view_create(&v, m, 1, 500));
  sw_sliding_view_free(v);
  sw_sliding_view_free(NULL);
  sw_metric_free(m);
}
END_TEST

/* ---------------------------------------------------- bucket start range */

/* sentinel-golang TestSlidingWindowMetric_getBucketStartRange. The range is
 * internal in libsw, so each row is checked through a sum: every window of
 * the real ring gets PASS 1 << k (k = age rank, oldest 0), so the sum is a
 * bitmask of exactly the windows the view reads. A window ahead of now is
 * added too (it replaces the oldest) and must not be read. */
START_TEST(test_go_sliding_window_metric_get_bucket_start_range) {
  static const struct {
    int32_t sc;
    int64_t iv;
    int32_t real_sc;
    int64_t real_iv, now, want_start, want_end;
  } rows[] = {
      {4, 2000, 20, 10000, INT64_C(1578416556900), INT64_C(1578416555000), INT64_C(1578416556500)},
      {2, 1000, 20, 10000, INT64_C(1578416556900), INT64_C(1578416556000), INT64_C(1578416556500)},
      {1, 2000, 10, 10000, INT64_C(1578416556900), INT64_C(1578416555000), INT64_C(1578416556000)},
      {1, 10000, 10, 20000, INT64_C(1578416556900), INT64_C(1578416548000), INT64_C(1578416556000)},
      {2, 1000, 20, 10000, INT64_C(1578416556500), INT64_C(1578416556000), INT64_C(1578416556500)},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    sw_metric *m = metric(rows[r].real_sc, rows[r].real_iv);
    sw_sliding_view *v = view(m, rows[r].sc, rows[r].iv);
    const int64_t len = rows[r].real_iv / rows[r].real_sc;
    const int64_t end = rows[r].now - rows[r].now % len;
    const int64_t oldest = end - (rows[r].real_sc - 1) * len;
    for (int k = 0; k < rows[r].real_sc; k++)
      ck_ok(sw_metric_add_pass_at(m, oldest + k * len, INT64_C(1) << k));
    ck_ok(sw_metric_add_pass_at(m, end + len, INT64_C(1) << 30)); /* ahead of now */
    int64_t want = 0;
    for (int64_t st = rows[r].want_start; st <= rows[r].want_end; st += len)
      want |= INT64_C(1) << ((st - oldest) / len);
    ck_assert_msg(sw_sliding_view_sum_at(v, rows[r].now, SW_EVENT_PASS) == want,
                  "row %zu: sum %lld, want %lld", r + 1,
                  (long long)sw_sliding_view_sum_at(v, rows[r].now, SW_EVENT_PASS),
                  (long long)want);
    sw_sliding_view_free(v);
    sw_metric_free(m);
  }
}
END_TEST

/* sentinel-golang TestSlidingWindowMetric_GetIntervalSumWithTime: passes in
 * windows ahead of now are not in the view's sum. */
START_TEST(test_go_sliding_window_metric_get_interval_sum_with_time) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 2, 2000);
  for (int i = 0; i < 500; i++) ck_ok(sw_metric_add_pass_at(m, T + i + 1000, 1));
  for (int i = 0; i < 2000; i++) ck_ok(sw_metric_add_pass_at(m, T, 1));
  ck_assert_int_eq(sw_sliding_view_sum_at(v, T, SW_EVENT_PASS), 2000);
  ck_assert_int_eq(sw_sliding_view_sum_at(v, T + 1500, SW_EVENT_PASS), 2500);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* ------------------------------------------------------------- readers */

/* sentinel-golang's GetSum / GetQPS / GetPreviousQPS on a fresh view. */
START_TEST(test_go_sliding_window_metric_fresh_view) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 4, 2000);
  ck_assert_int_eq(sw_sliding_view_sum_at(v, T, SW_EVENT_PASS), 0);
  ck_assert(sw_sliding_view_qps_at(v, T, SW_EVENT_PASS) == 0.0);
  ck_assert(sw_sliding_view_previous_qps_at(v, T, SW_EVENT_PASS) == 0.0);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang TestGetMaxOfSingleBucket. */
START_TEST(test_go_sliding_window_metric_get_max_of_single_bucket) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 4, 2000);
  ck_ok(sw_metric_add_pass_at(m, T, 100));
  ck_assert_int_eq(sw_sliding_view_max_of_single_bucket_at(v, T, SW_EVENT_PASS), 100);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang TestMinRT: the idle value. Current Go returns its
 * DefaultStatisticMaxRt, 60000; libsw uses Java's statisticMaxRt, 5000
 * (or SW_OPT_MAX_RT_MS). */
START_TEST(test_go_sliding_window_metric_min_rt) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 4, 2000);
  ck_assert_int_eq(sw_sliding_view_min_rt_at(v, T), 5000);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang TestAvgRT (Complete is SUCCESS). */
START_TEST(test_go_sliding_window_metric_avg_rt) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 4, 2000);
  ck_ok(sw_metric_add_rt_at(m, T, 100));
  ck_ok(sw_metric_add_success_at(m, T, 100));
  ck_assert(sw_sliding_view_avg_rt_at(v, T) == 1.0);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang TestMetricItemFromBuckets and TestSecondMetricsOnCondition:
 * with the predicate "start within the view's range", the current window
 * makes one per-second item. Go pre-fills its array, so the current window
 * exists from the start; libsw creates it on first use. */
static int in_range(int64_t start, void *user) {
  const int64_t *r = user;
  return start >= r[0] && start <= r[1];
}

START_TEST(test_go_sliding_window_metric_second_metrics_on_condition) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 4, 2000);
  sw_window w;
  sw_metric_record rec[4];
  const int64_t range[2] = {T - T % 500 - 2000 + 500, T - T % 500};
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, T, in_range, (void *)range, rec, 4),
        0);
  ck_ok(sw_leap_array_current_window_at(sw_metric_leap_array(m), T, &w));
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, T, in_range, (void *)range, rec, 4),
        1);
  ck_assert_int_eq(rec[0].pass, 0);
  ck_ok(sw_metric_add_pass_at(m, T, 100));
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, T, in_range, (void *)range, rec, 4),
        1);
  ck_assert_int_eq(rec[0].pass, 100); /* Go: PassQps == 100 */
  ck_assert_int_eq(rec[0].start_ms, S);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* QPS is the view's sum over its interval in seconds; the previous QPS is
 * the QPS one view window earlier (Go's GetPreviousQPS). */
START_TEST(test_view_qps_and_previous_qps) {
  sw_metric *m = metric(20, 10000); /* W = 500 */
  ck_ok(sw_metric_add_pass_at(m, S, 10));
  ck_ok(sw_metric_add_pass_at(m, S + 500, 20));
  ck_ok(sw_metric_add_pass_at(m, S + 1000, 30));
  ck_ok(sw_metric_add_block_at(m, S + 1000, 3));
  sw_sliding_view *one = view(m, 2, 1000), *two = view(m, 4, 2000), *whole = view(m, 1, 1000);
  ck_assert_int_eq(sw_sliding_view_sum_at(one, S + 1000, SW_EVENT_PASS), 50);
  ck_assert(sw_sliding_view_qps_at(one, S + 1000, SW_EVENT_PASS) == 50.0);
  ck_assert(sw_sliding_view_qps_at(one, S + 1000, SW_EVENT_BLOCK) == 3.0);
  ck_assert(sw_sliding_view_previous_qps_at(one, S + 1000, SW_EVENT_PASS) == 30.0);
  ck_assert(sw_sliding_view_qps_at(two, S + 1000, SW_EVENT_PASS) == 30.0);      /* 60 / 2 s */
  ck_assert(sw_sliding_view_previous_qps_at(two, S + 1000, SW_EVENT_PASS) == 15.0); /* 30 / 2 s */
  /* One 1000 ms window: its previous window is a full second earlier. */
  ck_assert(sw_sliding_view_qps_at(whole, S + 1499, SW_EVENT_PASS) == 50.0);
  ck_assert(sw_sliding_view_previous_qps_at(whole, S + 1499, SW_EVENT_PASS) == 10.0);
  /* Before the first view window there is no previous one. */
  ck_assert(sw_sliding_view_previous_qps_at(one, 499, SW_EVENT_PASS) == 0.0);
  ck_assert(sw_sliding_view_previous_qps_at(one, 0, SW_EVENT_PASS) == 0.0);
  ck_assert(sw_sliding_view_qps_at(one, S + 5000, SW_EVENT_PASS) == 0.0);
  sw_sliding_view_free(one);
  sw_sliding_view_free(two);
  sw_sliding_view_free(whole);
  sw_metric_free(m);
}
END_TEST

START_TEST(test_view_max_of_single_bucket) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 2, 1000);
  ck_assert_int_eq(sw_sliding_view_max_of_single_bucket_at(v, S, SW_EVENT_PASS), 0);
  ck_ok(sw_metric_add_pass_at(m, S, 70));
  ck_ok(sw_metric_add_pass_at(m, S + 500, 20));
  ck_ok(sw_metric_add_pass_at(m, S + 1000, 30));
  ck_assert_int_eq(sw_sliding_view_max_of_single_bucket_at(v, S + 500, SW_EVENT_PASS), 70);
  ck_assert_int_eq(sw_sliding_view_max_of_single_bucket_at(v, S + 1000, SW_EVENT_PASS), 30);
  ck_assert_int_eq(sw_sliding_view_max_of_single_bucket_at(v, S + 1000, SW_EVENT_BLOCK), 0);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

START_TEST(test_view_min_rt_and_avg_rt) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 2, 1000);
  ck_ok(sw_metric_add_rt_at(m, S, 30));
  ck_ok(sw_metric_add_rt_at(m, S + 500, 20));
  ck_ok(sw_metric_add_rt_at(m, S + 500, 40));
  ck_ok(sw_metric_add_success_at(m, S + 500, 3));
  ck_assert_int_eq(sw_sliding_view_min_rt_at(v, S + 500), 20);
  ck_assert_int_eq(sw_sliding_view_min_rt_at(v, S + 1000), 20);
  ck_assert_int_eq(sw_sliding_view_min_rt_at(v, S + 1500), 5000); /* both out of the view */
  ck_assert(sw_sliding_view_avg_rt_at(v, S + 500) == 90.0 / 3.0);
  /* No SUCCESS: 0, where Go divides by zero (NaN or +Inf). */
  ck_assert(sw_sliding_view_avg_rt_at(v, S) == 0.0);
  ck_ok(sw_metric_add_rt_at(m, S + 1500, 0));
  ck_assert_int_eq(sw_sliding_view_min_rt_at(v, S + 1500), 1); /* clamped to >= 1 */
  sw_sliding_view_free(v);
  sw_metric_free(m);

  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_MAX_RT_MS, 200));
  ck_ok(sw_metric_create(&m, 20, 10000, o));
  sw_options_free(o);
  v = view(m, 2, 1000);
  ck_assert_int_eq(sw_sliding_view_min_rt_at(v, S), 200);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* Per-second records: windows are merged into whole seconds, oldest first.
 * As sentinel-golang's SecondMetricsOnCondition, the windows come from the
 * whole real array (those not deprecated at t), filtered only by pred: the
 * view's own interval does not limit them. */
START_TEST(test_view_second_metrics_grouping) {
  sw_metric *m = metric(20, 10000); /* W = 500 */
  sw_sliding_view *v = view(m, 2, 1000);
  ck_ok(sw_metric_add_pass_at(m, S, 1));
  ck_ok(sw_metric_add_rt_at(m, S, 30));
  ck_ok(sw_metric_add_success_at(m, S, 1));
  ck_ok(sw_metric_add_pass_at(m, S + 500, 2));
  ck_ok(sw_metric_add_rt_at(m, S + 500, 20));
  ck_ok(sw_metric_add_block_at(m, S + 500, 5));
  ck_ok(sw_metric_add_pass_at(m, S + 1000, 4));
  ck_ok(sw_metric_add_pass_at(m, S + 5000, 8));
  sw_metric_record r[4];
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, S + 5000, NULL, NULL, r, 4), 3);
  ck_assert_int_eq(r[0].start_ms, S);
  ck_assert_int_eq(r[0].pass, 3);
  ck_assert_int_eq(r[0].block, 5);
  ck_assert_int_eq(r[0].success, 1);
  ck_assert_int_eq(r[0].rt, 50); /* the RT sum (Go's item holds rt / complete) */
  ck_assert_int_eq(r[0].min_rt, 20);
  ck_assert_int_eq(r[1].start_ms, S + 1000);
  ck_assert_int_eq(r[1].pass, 4);
  ck_assert_int_eq(r[1].min_rt, 5000);
  ck_assert_int_eq(r[2].start_ms, S + 5000);
  ck_assert_int_eq(r[2].pass, 8);

  /* With the view's range as the predicate, only its second remains. */
  const int64_t range[2] = {S + 4500, S + 5000};
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, S + 5000, in_range, (void *)range, r,
                                                       4),
        1);
  ck_assert_int_eq(r[0].pass, 8);

  /* cap smaller than the count: the full count, the oldest cap written. */
  memset(r, 0, sizeof r);
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, S + 5000, NULL, NULL, r, 2), 3);
  ck_assert_int_eq(r[0].pass, 3);
  ck_assert_int_eq(r[1].pass, 4);
  ck_assert_int_eq(r[2].pass, 0);
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, S + 5000, NULL, NULL, NULL, 0), 3);
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, S + 5000, NULL, NULL, NULL, 1),
        SW_ENULL);
  /* After the real interval everything is deprecated. */
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, S + 20000, NULL, NULL, r, 4), 0);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* ------------------------------------------------------------ edges */

START_TEST(test_view_bad_input) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 2, 1000);
  sw_metric_record r;
  ck_sw(sw_sliding_view_sum_at(NULL, T, SW_EVENT_PASS), SW_ENULL);
  ck_assert(sw_sliding_view_qps_at(NULL, T, SW_EVENT_PASS) == (double)SW_ENULL);
  ck_assert(sw_sliding_view_previous_qps_at(NULL, T, SW_EVENT_PASS) == (double)SW_ENULL);
  ck_sw(sw_sliding_view_max_of_single_bucket_at(NULL, T, SW_EVENT_PASS), SW_ENULL);
  ck_sw(sw_sliding_view_min_rt_at(NULL, T), SW_ENULL);
  ck_assert(sw_sliding_view_avg_rt_at(NULL, T) == (double)SW_ENULL);
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(NULL, T, NULL, NULL, &r, 1), SW_ENULL);

  ck_sw(sw_sliding_view_sum_at(v, -1, SW_EVENT_PASS), SW_ETIME);
  ck_assert(sw_sliding_view_qps_at(v, -1, SW_EVENT_PASS) == (double)SW_ETIME);
  ck_assert(sw_sliding_view_previous_qps_at(v, -1, SW_EVENT_PASS) == (double)SW_ETIME);
  ck_sw(sw_sliding_view_max_of_single_bucket_at(v, -1, SW_EVENT_PASS), SW_ETIME);
  ck_sw(sw_sliding_view_min_rt_at(v, -1), SW_ETIME);
  ck_assert(sw_sliding_view_avg_rt_at(v, -1) == (double)SW_ETIME);
  ck_sw(sw_sliding_view_second_metrics_on_condition_at(v, -1, NULL, NULL, &r, 1), SW_ETIME);

  ck_sw(sw_sliding_view_sum_at(v, T, SW_EVENT_COUNT), SW_ERANGE);
  ck_assert_str_eq(sw_last_error(), "event=7 is not a sw_event");
  ck_sw(sw_sliding_view_sum_at(v, T, (sw_event)-1), SW_ERANGE);
  ck_assert(sw_sliding_view_qps_at(v, T, SW_EVENT_COUNT) == (double)SW_ERANGE);
  ck_assert(sw_sliding_view_previous_qps_at(v, T, SW_EVENT_COUNT) == (double)SW_ERANGE);
  ck_sw(sw_sliding_view_max_of_single_bucket_at(v, T, SW_EVENT_COUNT), SW_ERANGE);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* Times near INT64_MAX and time 0. */
START_TEST(test_view_extreme_times) {
  sw_metric *m = metric(20, 10000);
  sw_sliding_view *v = view(m, 2, 1000);
  ck_ok(sw_metric_add_pass_at(m, INT64_MAX - 5, 3));
  ck_ok(sw_metric_add_pass_at(m, INT64_MAX - 5 - 500, 2));
  ck_ok(sw_metric_add_pass_at(m, INT64_MAX - 5 - 1000, 1));
  ck_assert_int_eq(sw_sliding_view_sum_at(v, INT64_MAX, SW_EVENT_PASS), 5);
  ck_assert(sw_sliding_view_previous_qps_at(v, INT64_MAX, SW_EVENT_PASS) == 3.0);
  ck_assert_int_eq(sw_sliding_view_max_of_single_bucket_at(v, INT64_MAX, SW_EVENT_PASS), 3);
  sw_sliding_view_free(v);
  sw_metric_free(m);

  m = metric(20, 10000);
  v = view(m, 2, 1000);
  ck_ok(sw_metric_add_pass_at(m, 0, 4));
  ck_assert_int_eq(sw_sliding_view_sum_at(v, 0, SW_EVENT_PASS), 4);
  ck_assert_int_eq(sw_sliding_view_sum_at(v, 999, SW_EVENT_PASS), 4);
  ck_assert_int_eq(sw_sliding_view_sum_at(v, 1000, SW_EVENT_PASS), 0);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

/* A view over an occupiable metric reads the borrowed passes of a window as
 * the metric's sums do: before the carry (from the borrow array) and after. */
START_TEST(test_view_over_occupiable) {
  sw_options *o;
  sw_metric *m = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_OCCUPIABLE, 1));
  ck_ok(sw_metric_create(&m, 20, 10000, o));
  sw_options_free(o);
  sw_sliding_view *v = view(m, 2, 1000);
  ck_ok(sw_metric_add_pass_at(m, S, 1));
  ck_ok(sw_metric_add_waiting(m, S + 500, 6));
  ck_assert_int_eq(sw_sliding_view_sum_at(v, S + 500, SW_EVENT_PASS), 7); /* not yet carried */
  ck_assert_int_eq(sw_metric_pass_at(m, S + 500), 7);
  ck_ok(sw_metric_add_pass_at(m, S + 500, 1));
  ck_assert_int_eq(sw_sliding_view_sum_at(v, S + 500, SW_EVENT_PASS), 8);
  sw_sliding_view_free(v);
  sw_metric_free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sliding_view");
  SW_TCASE(s, "construction", test_go_new_sliding_window_metric, test_view_create_validation);
  SW_TCASE(s, "range", test_go_sliding_window_metric_get_bucket_start_range,
           test_go_sliding_window_metric_get_interval_sum_with_time);
  SW_TCASE(s, "go", test_go_sliding_window_metric_fresh_view,
           test_go_sliding_window_metric_get_max_of_single_bucket,
           test_go_sliding_window_metric_min_rt, test_go_sliding_window_metric_avg_rt,
           test_go_sliding_window_metric_second_metrics_on_condition);
  SW_TCASE(s, "readers", test_view_qps_and_previous_qps, test_view_max_of_single_bucket,
           test_view_min_rt_and_avg_rt, test_view_second_metrics_grouping);
  SW_TCASE(s, "edges", test_view_bad_input, test_view_extreme_times, test_view_over_occupiable);
  return sw_test_run(s);
}
