/* SPDX-License-Identifier: Apache-2.0 */
/* ArrayMetric (sw_metric_*): Java's ArrayMetricTest and sentinel-golang's
 * bucket_leap_array_test / metric_bucket_test, ported with explicit times,
 * plus every function's edge cases. T = 1600000000123 stands for the real
 * time of the tests that used it; s = T - T % 500 = 1600000000000. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "testutil.h"

#define T INT64_C(1600000000123)
#define S INT64_C(1600000000000) /* start of T's window for any length dividing 1000 */

static sw_metric *metric(int32_t n, int64_t interval) {
  sw_metric *m = NULL;
  ck_ok(sw_metric_create(&m, n, interval, NULL));
  ck_assert_ptr_nonnull(m);
  return m;
}

static sw_metric *metric_opt(int32_t n, int64_t interval, sw_option key, int64_t value) {
  sw_options *o;
  sw_metric *m = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, key, value));
  ck_ok(sw_metric_create(&m, n, interval, o));
  sw_options_free(o);
  ck_assert_ptr_nonnull(m);
  return m;
}

/* -------------------------------------------------------- construction */

START_TEST(test_metric_create_validation) {
  sw_metric *m = (sw_metric *)&m; /* any non-NULL: a failure must set NULL */
  ck_sw(sw_metric_create(&m, 0, 1000, NULL), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "sample_count=0 must be > 0");
  ck_assert_ptr_null(m);
  ck_sw(sw_metric_create(&m, 2, 0, NULL), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "interval_ms=0 must be > 0");
  ck_sw(sw_metric_create(&m, 3, 1000, NULL), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "sample_count=3 does not divide interval_ms=1000");
  ck_sw(sw_metric_create(NULL, 2, 1000, NULL), SW_ENULL);

  /* The occupiable pair is validated the same way. */
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_OCCUPIABLE, 1));
  ck_sw(sw_metric_create(&m, 3, 1000, o), SW_ESIZE);
  ck_assert_ptr_null(m);
  ck_sw(sw_metric_create(&m, -1, 1000, o), SW_ESIZE);

  /* Too many windows: SW_EOVERFLOW, with the default and the largest stripes.
   * (Not with SW_OPT_OCCUPIABLE: its one-stripe future array, created first,
   * would fit under the limit and be allocated for real.) */
  ck_sw(sw_metric_create(&m, INT32_MAX, INT32_MAX, NULL), SW_EOVERFLOW);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "sample_count=2147483647"));
  ck_ok(sw_options_set(o, SW_OPT_OCCUPIABLE, 0));
  ck_ok(sw_options_set(o, SW_OPT_STRIPES, 64));
  ck_sw(sw_metric_create(&m, INT32_MAX, INT32_MAX, o), SW_EOVERFLOW);
  ck_assert_ptr_null(m);
  sw_options_free(o);
  sw_metric_free(NULL);
}
END_TEST

START_TEST(test_metric_accessors) {
  sw_metric *m = metric(20, 10000);
  ck_assert_int_eq(sw_metric_sample_count(m), 20);
  ck_assert(sw_metric_interval_sec(m) == 10.0);
  sw_leap_array *la = sw_metric_leap_array(m);
  ck_assert_ptr_nonnull(la);
  ck_assert_str_eq(sw_leap_array_type(la)->name, SW_TYPE_METRIC);
  ck_assert_int_eq(sw_leap_array_window_length_ms(la), 500);
  sw_metric_free(m);

  m = metric(2, 1500);
  ck_assert(sw_metric_interval_sec(m) == 1.5);
  sw_metric_free(m);

  ck_sw(sw_metric_sample_count(NULL), SW_ENULL);
  ck_assert(sw_metric_interval_sec(NULL) < 0);
  ck_assert_ptr_null(sw_metric_leap_array(NULL));
}
END_TEST

/* sentinel-golang TestGetIntervalInSecond: 10000 ms is 10.0 s. */
START_TEST(test_go_bucket_leap_array_get_interval_in_second) {
  sw_metric *m = metric(20, 10000);
  ck_assert(sw_metric_interval_sec(m) == 10000 / 1000.0);
  sw_metric_free(m);
}
END_TEST

/* ------------------------------------------------------- Java ports */

/* Java ArrayMetricTest.testOperateArrayMetric (a single window). */
START_TEST(test_java_array_metric_operate_array_metric) {
  sw_metric *m = metric(2, 1000);
  ck_ok(sw_metric_add_rt_at(m, T, 21));
  for (int i = 0; i < 9; i++) ck_ok(sw_metric_add_pass_at(m, T, 1));
  for (int i = 0; i < 2; i++) ck_ok(sw_metric_add_block_at(m, T, 1));
  for (int i = 0; i < 9; i++) ck_ok(sw_metric_add_success_at(m, T, 1));
  for (int i = 0; i < 6; i++) ck_ok(sw_metric_add_exception_at(m, T, 1));
  ck_assert_int_eq(sw_metric_pass_at(m, T), 9);
  ck_assert_int_eq(sw_metric_block_at(m, T), 2);
  ck_assert_int_eq(sw_metric_success_at(m, T), 9);
  ck_assert_int_eq(sw_metric_exception_at(m, T), 6);
  ck_assert_int_eq(sw_metric_rt_at(m, T), 21);
  sw_metric_free(m);
}
END_TEST

static int start_ge(int64_t start, void *user) { return start >= *(int64_t *)user; }

/* Java ArrayMetricTest.testGetMetricDetailsOnCondition: four 500 ms windows
 * (500, 1000, 1500, 2000) with PASS 1..4. Java mocks the array; here they
 * are real windows of a (4, 2000) metric, all within the interval at 2000. */
START_TEST(test_java_array_metric_get_metric_details_on_condition) {
  sw_metric *m = metric(4, 2000);
  for (int k = 1; k <= 4; k++) ck_ok(sw_metric_add_pass_at(m, 500 * k, k));
  sw_metric_record r[8];
  ck_sw(sw_metric_details_on_condition_at(m, 2000, NULL, NULL, r, 8), 4);
  int64_t min = 1500;
  ck_sw(sw_metric_details_on_condition_at(m, 2000, start_ge, &min, r, 8), 2);
  ck_assert_int_eq(r[0].pass, 3);
  ck_assert_int_eq(r[1].pass, 4);
  ck_assert_int_eq(r[0].start_ms, 1500);
  min = 2500;
  ck_sw(sw_metric_details_on_condition_at(m, 2000, start_ge, &min, r, 8), 0);
  sw_metric_free(m);
}
END_TEST

/* ------------------------------------------------------- Go ports */

/* sentinel-golang Test_NewBucketLeapArray. */
START_TEST(test_go_bucket_leap_array_new) {
  sw_metric *m = metric(20, 10000);
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(sw_metric_leap_array(m), T, &w));
  ck_assert_ptr_nonnull(w.bucket);
  ck_assert_int_eq(w.start_ms, T - T % 500);
  ck_assert_int_eq(sw_metric_pass_at(m, T), 0);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang Test_UpdateBucket_Concurrent, with the 2980 random
 * goroutine adds replaced by a fixed sequence of offsets (the counts do not
 * depend on where in the interval they land). */
START_TEST(test_go_bucket_leap_array_update_bucket) {
  const int64_t now = INT64_C(1976296040000);
  sw_metric *m = metric(20, 10000);
  for (int64_t t = now; t < now + 10000; t += 500) {
    ck_ok(sw_metric_add_success_at(m, t, 1)); /* Go's Complete */
    ck_ok(sw_metric_add_pass_at(m, t, 1));
    ck_ok(sw_metric_add_block_at(m, t, 1));
    ck_ok(sw_metric_add_exception_at(m, t, 1)); /* Go's Error */
    ck_ok(sw_metric_add_rt_at(m, t, 10));
  }
  sw_metric_record r[20];
  ck_sw(sw_metric_details_at(m, now + 9500, r, 20), 20);
  for (int i = 0; i < 20; i++) {
    ck_assert_int_eq(r[i].start_ms, now + 500 * i);
    ck_assert_int_eq(r[i].success, 1);
    ck_assert_int_eq(r[i].pass, 1);
    ck_assert_int_eq(r[i].block, 1);
    ck_assert_int_eq(r[i].exception, 1);
    ck_assert_int_eq(r[i].rt, 10);
  }
  for (int i = 0; i < 2980; i++) {
    int64_t t = now + (int64_t)((i * 7919u) % 10000u);
    ck_ok(sw_metric_add_success_at(m, t, 1));
    ck_ok(sw_metric_add_pass_at(m, t, 1));
    ck_ok(sw_metric_add_block_at(m, t, 1));
    ck_ok(sw_metric_add_exception_at(m, t, 1));
    ck_ok(sw_metric_add_rt_at(m, t, 10));
  }
  const int64_t end = now + 9999;
  ck_assert_int_eq(sw_metric_success_at(m, end), 3000);
  ck_assert_int_eq(sw_metric_pass_at(m, end), 3000);
  ck_assert_int_eq(sw_metric_block_at(m, end), 3000);
  ck_assert_int_eq(sw_metric_exception_at(m, end), 3000);
  ck_assert_int_eq(sw_metric_rt_at(m, end), 30000);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang TestAddCount. */
START_TEST(test_go_bucket_leap_array_add_count) {
  sw_metric *m = metric(20, 10000);
  ck_ok(sw_metric_add_at(m, T, SW_EVENT_PASS, 1));
  ck_assert_int_eq(sw_metric_pass_at(m, T), 1);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang TestMinRt. Go's DefaultStatisticMaxRt is 60000 in current
 * versions (5000 in old ones); libsw uses Java's statisticMaxRt, 5000. */
START_TEST(test_go_bucket_leap_array_min_rt) {
  sw_metric *m = metric(20, 10000);
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 5000);
  ck_ok(sw_metric_add_rt_at(m, T, 100));
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 100);
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang Test_metricBucket_Normal (max concurrency is not a libsw
 * counter; Complete is SUCCESS and Error is EXCEPTION). */
START_TEST(test_go_metric_bucket_normal) {
  sw_metric *m = metric(2, 1000);
  for (int i = 0; i < 120; i++) {
    switch (i % 6) {
    case 0: ck_ok(sw_metric_add_pass_at(m, T, 1)); break;
    case 1: ck_ok(sw_metric_add_block_at(m, T, 1)); break;
    case 2: ck_ok(sw_metric_add_success_at(m, T, 1)); break;
    case 3: ck_ok(sw_metric_add_exception_at(m, T, 1)); break;
    case 4: ck_ok(sw_metric_add_rt_at(m, T, 100)); break;
    default: ck_ok(sw_metric_add_occupied_pass_at(m, T, 1)); break; /* Go: concurrency */
    }
  }
  ck_assert_int_eq(sw_metric_pass_at(m, T), 20);
  ck_assert_int_eq(sw_metric_block_at(m, T), 20);
  ck_assert_int_eq(sw_metric_success_at(m, T), 20);
  ck_assert_int_eq(sw_metric_exception_at(m, T), 20);
  ck_assert_int_eq(sw_metric_rt_at(m, T), 2000);
  ck_assert_int_eq(sw_metric_occupied_pass_at(m, T), 20);
  sw_metric_free(m);
}
END_TEST

typedef struct adder {
  sw_metric *m;
  int from, to;
} adder;

static void *metric_adder(void *p) {
  adder *a = p;
  for (int i = a->from; i < a->to; i++) {
    ck_ok(sw_metric_add_pass_at(a->m, T, 1));
    ck_ok(sw_metric_add_block_at(a->m, T, 2));
    ck_ok(sw_metric_add_success_at(a->m, T, 3));
    ck_ok(sw_metric_add_exception_at(a->m, T, 4));
    ck_ok(sw_metric_add_rt_at(a->m, T, i));
  }
  return NULL;
}

/* sentinel-golang Test_metricBucket_Concurrent: 1000 adds of each kind
 * (here from 8 threads, so over several stripes) and RT 0..999. */
START_TEST(test_go_metric_bucket_concurrent) {
  sw_metric *m = metric_opt(2, 1000, SW_OPT_STRIPES, 8);
  pthread_t th[8];
  adder a[8];
  for (int k = 0; k < 8; k++) {
    a[k] = (adder){m, k * 125, (k + 1) * 125};
    ck_assert_int_eq(pthread_create(&th[k], NULL, metric_adder, &a[k]), 0);
  }
  for (int k = 0; k < 8; k++) ck_assert_int_eq(pthread_join(th[k], NULL), 0);
  ck_assert_int_eq(sw_metric_pass_at(m, T), 1000);
  ck_assert_int_eq(sw_metric_block_at(m, T), 2000);
  ck_assert_int_eq(sw_metric_success_at(m, T), 3000);
  ck_assert_int_eq(sw_metric_exception_at(m, T), 4000);
  ck_assert_int_eq(sw_metric_rt_at(m, T), 999 * 1000 / 2);
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 1); /* RT 0 seen; clamped to >= 1 */
  sw_metric_free(m);
}
END_TEST

/* sentinel-golang Test_Reset: a reused window starts with the default min RT. */
START_TEST(test_go_metric_bucket_reset) {
  sw_metric *m = metric(2, 1000);
  sw_metric_record r;
  ck_ok(sw_metric_add_rt_at(m, T, 100));
  ck_sw(sw_metric_details_at(m, T, &r, 1), 1);
  ck_assert_int_eq(r.min_rt, 100);
  ck_ok(sw_metric_add_pass_at(m, T + 1000, 1)); /* same slot: reset */
  ck_sw(sw_metric_details_at(m, T + 1000, &r, 1), 1);
  ck_assert_int_eq(r.start_ms, S + 1000);
  ck_assert_int_eq(r.min_rt, 5000);
  ck_assert_int_eq(r.rt, 0);
  sw_metric_free(m);
}
END_TEST

/* ------------------------------------------------------------- sums */

START_TEST(test_metric_sums_every_event) {
  sw_metric *m = metric(2, 1000);
  const sw_event evs[] = {SW_EVENT_PASS, SW_EVENT_BLOCK,         SW_EVENT_EXCEPTION,
                          SW_EVENT_SUCCESS, SW_EVENT_RT,     SW_EVENT_OCCUPIED_PASS,
                          SW_EVENT_WOULD_BLOCK};
  for (int e = 0; e < SW_EVENT_COUNT; e++) {
    ck_ok(sw_metric_add_at(m, T, evs[e], 10 + e));
    ck_ok(sw_metric_add_at(m, T + 500, evs[e], 100 * (e + 1)));
  }
  ck_ok(sw_metric_add_occupied_pass_at(m, T + 500, 1));
  for (int e = 0; e < SW_EVENT_COUNT; e++)
    ck_assert_int_eq(sw_metric_sum_at(m, T + 500, evs[e]),
                     10 + e + 100 * (e + 1) + (evs[e] == SW_EVENT_OCCUPIED_PASS));
  ck_assert_int_eq(sw_metric_pass_at(m, S + 999), 10 + 100);
  ck_assert_int_eq(sw_metric_pass_at(m, S + 1000), 100); /* S is one interval old */
  ck_assert_int_eq(sw_metric_block_at(m, T + 500), 11 + 200);
  ck_assert_int_eq(sw_metric_exception_at(m, T + 500), 12 + 300);
  ck_assert_int_eq(sw_metric_success_at(m, T + 500), 13 + 400);
  ck_assert_int_eq(sw_metric_rt_at(m, T + 500), 14 + 500);
  ck_assert_int_eq(sw_metric_occupied_pass_at(m, T + 500), 15 + 601);
  sw_metric_free(m);
}
END_TEST

/* Sums cover the windows whose start is in [start(t) - interval + W,
 * start(t)]: the window one interval old and future windows are out. */
START_TEST(test_metric_sum_window_selection) {
  sw_metric *m = metric(4, 2000); /* W = 500 */
  ck_ok(sw_metric_add_pass_at(m, S, 1));
  ck_ok(sw_metric_add_pass_at(m, S + 500, 2));
  ck_ok(sw_metric_add_pass_at(m, S + 1500, 4));
  ck_assert_int_eq(sw_metric_pass_at(m, S + 1500), 7);
  ck_assert_int_eq(sw_metric_pass_at(m, S + 1999), 7);
  ck_assert_int_eq(sw_metric_pass_at(m, S + 500), 3);  /* S + 1500 is ahead */
  ck_assert_int_eq(sw_metric_pass_at(m, S + 2000), 6); /* S is exactly one interval old */
  ck_assert_int_eq(sw_metric_pass_at(m, S + 3499), 4);
  ck_assert_int_eq(sw_metric_pass_at(m, S + 3500), 0);
  ck_assert_int_eq(sw_metric_pass_at(m, S - 1), 0); /* all ahead */
  sw_metric_free(m);
}
END_TEST

START_TEST(test_metric_max_success) {
  sw_metric *m = metric(4, 2000);
  ck_assert_int_eq(sw_metric_max_success_at(m, T), 1); /* idle: at least 1, as Java */
  ck_ok(sw_metric_add_success_at(m, S, 0));
  ck_assert_int_eq(sw_metric_max_success_at(m, T), 1);
  ck_ok(sw_metric_add_success_at(m, S, 5));
  ck_ok(sw_metric_add_success_at(m, S + 500, 9));
  ck_ok(sw_metric_add_success_at(m, S + 1000, 3));
  ck_assert_int_eq(sw_metric_max_success_at(m, S + 1000), 9);
  ck_assert_int_eq(sw_metric_max_success_at(m, S + 500), 9);
  ck_assert_int_eq(sw_metric_max_success_at(m, S), 5);
  ck_assert_int_eq(sw_metric_max_success_at(m, S + 2500), 3); /* 9's window is out */
  ck_assert_int_eq(sw_metric_max_success_at(m, S + 10000), 1);
  ck_sw(sw_metric_max_success_at(m, -1), SW_ETIME);
  ck_sw(sw_metric_max_success_at(NULL, T), SW_ENULL);
  sw_metric_free(m);
}
END_TEST

START_TEST(test_metric_min_rt) {
  sw_metric *m = metric(4, 2000);
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 5000); /* idle: statisticMaxRt */
  ck_ok(sw_metric_add_rt_at(m, S, 300));
  ck_ok(sw_metric_add_rt_at(m, S + 500, 40));
  ck_ok(sw_metric_add_rt_at(m, S + 500, 70));
  ck_assert_int_eq(sw_metric_min_rt_at(m, S), 300);
  ck_assert_int_eq(sw_metric_min_rt_at(m, S + 500), 40);
  ck_assert_int_eq(sw_metric_min_rt_at(m, S + 2000), 40);
  ck_assert_int_eq(sw_metric_min_rt_at(m, S + 2500), 5000); /* S + 500 is out */
  ck_assert_int_eq(sw_metric_min_rt_at(m, S + 3000), 5000); /* all out of the interval */
  ck_ok(sw_metric_add_rt_at(m, S + 3000, 0));
  ck_assert_int_eq(sw_metric_min_rt_at(m, S + 3000), 1); /* clamped to >= 1 */
  ck_assert_int_eq(sw_metric_rt_at(m, S + 3000), 0);
  ck_sw(sw_metric_min_rt_at(m, -1), SW_ETIME);
  ck_sw(sw_metric_min_rt_at(NULL, T), SW_ENULL);
  sw_metric_free(m);
}
END_TEST

/* SW_OPT_MAX_RT_MS is the idle value and each window's initial min RT:
 * an RT above it does not raise the minimum (as Java's MetricBucket). */
START_TEST(test_metric_min_rt_option) {
  sw_metric *m = metric_opt(2, 1000, SW_OPT_MAX_RT_MS, 100);
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 100);
  ck_ok(sw_metric_add_rt_at(m, T, 300));
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 100);
  ck_ok(sw_metric_add_rt_at(m, T, 60));
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 60);
  sw_metric_record r;
  ck_ok(sw_metric_add_pass_at(m, T + 500, 1));
  ck_sw(sw_metric_details_at(m, T + 500, &r, 1), 2);
  ck_assert_int_eq(r.min_rt, 60);
  sw_metric_free(m);

  m = metric_opt(2, 1000, SW_OPT_MAX_RT_MS, 1);
  ck_assert_int_eq(sw_metric_min_rt_at(m, T), 1);
  sw_metric_free(m);
}
END_TEST

/* ------------------------------------------------------ single windows */

START_TEST(test_metric_window_pass_at) {
  sw_metric *m = metric(2, 1000);
  ck_assert_int_eq(sw_metric_window_pass_at(m, T), 0); /* nothing stored */
  ck_ok(sw_metric_add_pass_at(m, T, 3));
  ck_ok(sw_metric_add_pass_at(m, T + 500, 5));
  ck_assert_int_eq(sw_metric_window_pass_at(m, S), 3);
  ck_assert_int_eq(sw_metric_window_pass_at(m, S + 499), 3);
  ck_assert_int_eq(sw_metric_window_pass_at(m, S + 500), 5);
  ck_assert_int_eq(sw_metric_window_pass_at(m, S + 1000), 0); /* slot holds S */
  ck_assert_int_eq(sw_metric_window_pass_at(m, S - 500), 0);  /* slot holds S + 500 */
  ck_ok(sw_metric_add_pass_at(m, S + 1000, 1));
  ck_assert_int_eq(sw_metric_window_pass_at(m, S), 0); /* replaced */
  ck_sw(sw_metric_window_pass_at(m, -1), SW_ETIME);
  ck_sw(sw_metric_window_pass_at(NULL, T), SW_ENULL);
  sw_metric_free(m);
}
END_TEST

START_TEST(test_metric_previous_window) {
  sw_metric *m = metric(4, 2000); /* W = 500 */
  ck_ok(sw_metric_add_pass_at(m, S, 3));
  ck_ok(sw_metric_add_block_at(m, S, 2));
  ck_ok(sw_metric_add_pass_at(m, S + 500, 7));
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, S), 0);
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, S + 500), 3);
  ck_assert_int_eq(sw_metric_previous_window_block_at(m, S + 999), 2);
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, S + 1000), 7);
  ck_assert_int_eq(sw_metric_previous_window_block_at(m, S + 1000), 0);
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, S + 1500), 0); /* S + 1000 never stored */
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, S + 2500), 0); /* slot holds S */
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, 0), 0);
  ck_sw(sw_metric_previous_window_pass_at(m, -1), SW_ETIME);
  ck_sw(sw_metric_previous_window_block_at(m, -1), SW_ETIME);
  ck_sw(sw_metric_previous_window_pass_at(NULL, T), SW_ENULL);
  ck_sw(sw_metric_previous_window_block_at(NULL, T), SW_ENULL);
  sw_metric_free(m);
}
END_TEST

/* ----------------------------------------------------------- records */

START_TEST(test_metric_details_oldest_first) {
  sw_metric *m = metric(4, 2000); /* W = 500: five windows wrap the ring */
  for (int k = 0; k < 5; k++) {
    ck_ok(sw_metric_add_pass_at(m, S + 500 * k, k + 1));
    ck_ok(sw_metric_add_block_at(m, S + 500 * k, 10 * (k + 1)));
    ck_ok(sw_metric_add_success_at(m, S + 500 * k, 2));
    ck_ok(sw_metric_add_rt_at(m, S + 500 * k, 50 + k));
    ck_ok(sw_metric_add_rt_at(m, S + 500 * k, 10 + k));
  }
  ck_ok(sw_metric_add_exception_at(m, S + 2000, 4));
  ck_ok(sw_metric_add_occupied_pass_at(m, S + 2000, 6));
  sw_metric_record r[8];
  ck_sw(sw_metric_details_at(m, S + 2000, r, 8), 4);
  for (int i = 0; i < 4; i++) {
    int k = i + 1;
    ck_assert_int_eq(r[i].start_ms, S + 500 * k);
    ck_assert_int_eq(r[i].pass, k + 1);
    ck_assert_int_eq(r[i].block, 10 * (k + 1));
    ck_assert_int_eq(r[i].success, 2);
    /* The RT sum (Java's MetricNode holds rt / success instead). */
    ck_assert_int_eq(r[i].rt, 60 + 2 * k);
    ck_assert_int_eq(r[i].min_rt, 10 + k);
  }
  ck_assert_int_eq(r[3].exception, 4);
  ck_assert_int_eq(r[3].occupied_pass, 6);
  ck_assert_int_eq(r[0].exception, 0);

  /* windows: the same records. */
  sw_metric_record w[8];
  ck_sw(sw_metric_windows_at(m, S + 2000, w, 8), 4);
  ck_assert_int_eq(memcmp(r, w, 4 * sizeof r[0]), 0);

  /* cap smaller than the count: the full count, the oldest cap written. */
  memset(w, 0x5a, sizeof w);
  ck_sw(sw_metric_details_at(m, S + 2000, w, 2), 4);
  ck_assert_int_eq(memcmp(r, w, 2 * sizeof r[0]), 0);
  ck_assert_int_eq(w[2].start_ms, INT64_C(0x5a5a5a5a5a5a5a5a));
  ck_sw(sw_metric_windows_at(m, S + 2000, w, 1), 4);
  ck_sw(sw_metric_details_at(m, S + 2000, NULL, 0), 4);
  ck_sw(sw_metric_windows_at(m, S + 2000, NULL, 0), 4);
  ck_sw(sw_metric_details_on_condition_at(m, S + 2000, NULL, NULL, NULL, 0), 4);
  ck_sw(sw_metric_details_at(m, S + 2000, NULL, 1), SW_ENULL);
  ck_sw(sw_metric_windows_at(m, S + 2000, NULL, 1), SW_ENULL);
  ck_sw(sw_metric_details_on_condition_at(m, S + 2000, NULL, NULL, NULL, 1), SW_ENULL);
  ck_sw(sw_metric_details_at(m, -1, r, 8), SW_ETIME);
  ck_sw(sw_metric_windows_at(m, -1, r, 8), SW_ETIME);
  ck_sw(sw_metric_details_on_condition_at(m, -1, NULL, NULL, r, 8), SW_ETIME);
  ck_sw(sw_metric_details_at(NULL, T, r, 8), SW_ENULL);
  ck_sw(sw_metric_windows_at(NULL, T, r, 8), SW_ENULL);
  ck_sw(sw_metric_details_on_condition_at(NULL, T, NULL, NULL, r, 8), SW_ENULL);
  sw_metric_free(m);
}
END_TEST

/* detailsOnCondition keeps the stored windows that are not deprecated at t
 * (t - start <= interval), so unlike details it can include the window that
 * started exactly one interval ago: Java's detailsOnCondition refreshes the
 * current window first, which replaces that window (libsw reads never
 * write), so Java would list the fresh, empty current window instead. */
START_TEST(test_metric_details_on_condition_boundary) {
  sw_metric *m = metric(4, 2000);
  for (int k = 0; k < 4; k++) ck_ok(sw_metric_add_pass_at(m, S + 500 * k, k + 1));
  sw_metric_record r[8];
  ck_sw(sw_metric_details_at(m, S + 2000, r, 8), 3);
  ck_assert_int_eq(r[0].start_ms, S + 500);
  ck_sw(sw_metric_details_on_condition_at(m, S + 2000, NULL, NULL, r, 8), 4);
  ck_assert_int_eq(r[0].start_ms, S);
  ck_assert_int_eq(r[0].pass, 1);
  ck_sw(sw_metric_details_on_condition_at(m, S + 2001, NULL, NULL, r, 8), 3);
  sw_metric_free(m);
}
END_TEST

/* --------------------------------------------------------- bad input */

START_TEST(test_metric_null_handle) {
  sw_metric_record r;
  ck_sw(sw_metric_pass_at(NULL, T), SW_ENULL);
  ck_assert_str_eq(sw_last_error(), "metric is NULL");
  ck_sw(sw_metric_block_at(NULL, T), SW_ENULL);
  ck_sw(sw_metric_exception_at(NULL, T), SW_ENULL);
  ck_sw(sw_metric_success_at(NULL, T), SW_ENULL);
  ck_sw(sw_metric_rt_at(NULL, T), SW_ENULL);
  ck_sw(sw_metric_occupied_pass_at(NULL, T), SW_ENULL);
  ck_sw(sw_metric_sum_at(NULL, T, SW_EVENT_PASS), SW_ENULL);
  ck_sw(sw_metric_add_at(NULL, T, SW_EVENT_PASS, 1), SW_ENULL);
  ck_sw(sw_metric_add_pass_at(NULL, T, 1), SW_ENULL);
  ck_sw(sw_metric_add_block_at(NULL, T, 1), SW_ENULL);
  ck_sw(sw_metric_add_exception_at(NULL, T, 1), SW_ENULL);
  ck_sw(sw_metric_add_success_at(NULL, T, 1), SW_ENULL);
  ck_sw(sw_metric_add_occupied_pass_at(NULL, T, 1), SW_ENULL);
  ck_sw(sw_metric_add_rt_at(NULL, T, 1), SW_ENULL);
  ck_sw(sw_metric_details_at(NULL, T, &r, 1), SW_ENULL);
  /* The clock-reading twins too. */
  ck_sw(sw_metric_pass(NULL), SW_ENULL);
  ck_sw(sw_metric_max_success(NULL), SW_ENULL);
  ck_sw(sw_metric_min_rt(NULL), SW_ENULL);
  ck_sw(sw_metric_previous_window_pass(NULL), SW_ENULL);
  ck_sw(sw_metric_waiting(NULL), SW_ENULL);
  ck_sw(sw_metric_add_pass(NULL, 1), SW_ENULL);
  ck_sw(sw_metric_details(NULL, &r, 1), SW_ENULL);
}
END_TEST

START_TEST(test_metric_negative_time) {
  sw_metric *m = metric(2, 1000);
  ck_sw(sw_metric_pass_at(m, -1), SW_ETIME);
  ck_assert_str_eq(sw_last_error(), "time -1 ms is negative");
  ck_sw(sw_metric_block_at(m, INT64_MIN), SW_ETIME);
  ck_sw(sw_metric_sum_at(m, -1, SW_EVENT_RT), SW_ETIME);
  ck_sw(sw_metric_add_at(m, -1, SW_EVENT_PASS, 1), SW_ETIME);
  ck_sw(sw_metric_add_pass_at(m, -1, 1), SW_ETIME);
  ck_sw(sw_metric_add_rt_at(m, -5, 1), SW_ETIME);
  ck_assert_int_eq(sw_metric_pass_at(m, 0), 0); /* nothing was added */
  ck_assert_int_eq(sw_leap_array_list_all(sw_metric_leap_array(m), NULL, 0), 0);
  sw_metric_free(m);
}
END_TEST

/* Counts are 0..INT32_MAX (Java's int acquireCount). */
START_TEST(test_metric_count_range) {
  sw_metric *m = metric(2, 1000);
  ck_sw(sw_metric_add_pass_at(m, T, -1), SW_ERANGE);
  ck_assert_str_eq(sw_last_error(), "n=-1 is outside 0..2147483647");
  ck_sw(sw_metric_add_block_at(m, T, (int64_t)INT32_MAX + 1), SW_ERANGE);
  ck_sw(sw_metric_add_at(m, T, SW_EVENT_SUCCESS, INT64_MIN), SW_ERANGE);
  ck_sw(sw_metric_add_rt_at(m, T, -3), SW_ERANGE);
  ck_assert_str_eq(sw_last_error(), "rt_ms=-3 is outside 0..2147483647");
  ck_sw(sw_metric_add_rt_at(m, T, INT64_MAX), SW_ERANGE);
  ck_assert_int_eq(sw_metric_pass_at(m, T), 0);
  ck_assert_int_eq(sw_metric_rt_at(m, T), 0);
  ck_ok(sw_metric_add_pass_at(m, T, 0));
  ck_ok(sw_metric_add_pass_at(m, T, INT32_MAX));
  ck_ok(sw_metric_add_pass_at(m, T, INT32_MAX));
  ck_assert_int_eq(sw_metric_pass_at(m, T), 2 * (int64_t)INT32_MAX);
  ck_ok(sw_metric_add_rt_at(m, T, INT32_MAX));
  ck_assert_int_eq(sw_metric_rt_at(m, T), INT32_MAX);
  sw_metric_free(m);
}
END_TEST

START_TEST(test_metric_bad_event) {
  sw_metric *m = metric(2, 1000);
  ck_sw(sw_metric_sum_at(m, T, SW_EVENT_COUNT), SW_ERANGE);
  ck_assert_str_eq(sw_last_error(), "event=7 is not a sw_event");
  ck_sw(sw_metric_sum_at(m, T, (sw_event)-1), SW_ERANGE);
  ck_sw(sw_metric_add_at(m, T, SW_EVENT_COUNT, 1), SW_ERANGE);
  ck_sw(sw_metric_add_at(m, T, (sw_event)-1, 1), SW_ERANGE);
  ck_sw(sw_metric_add_at(m, T, (sw_event)SW_FIELD_MIN_RT, 1), SW_ERANGE);
  ck_assert_int_eq(sw_leap_array_list_all(sw_metric_leap_array(m), NULL, 0), 0);
  sw_metric_free(m);
}
END_TEST

/* ----------------------------------------------------------- edges */

/* The number of stripes does not change any count. */
START_TEST(test_metric_stripes) {
  const int64_t stripes[] = {1, 2, 64};
  for (size_t i = 0; i < 3; i++) {
    sw_metric *m = metric_opt(2, 1000, SW_OPT_STRIPES, stripes[i]);
    ck_ok(sw_metric_add_pass_at(m, T, 5));
    ck_ok(sw_metric_add_rt_at(m, T, 9));
    ck_assert_int_eq(sw_metric_pass_at(m, T), 5);
    ck_assert_int_eq(sw_metric_min_rt_at(m, T), 9);
    sw_metric_free(m);
  }
}
END_TEST

/* Adds with the clock behind a stored window are counted as detached and
 * change nothing that is read. */
START_TEST(test_metric_detached_add) {
  sw_metric *m = metric(2, 1000);
  sw_leap_array *la = sw_metric_leap_array(m);
  ck_ok(sw_metric_add_pass_at(m, T + 1000, 2));
  ck_ok(sw_metric_add_pass_at(m, T, 50)); /* same slot, older window */
  ck_ok(sw_metric_add_rt_at(m, T, 1));
  ck_assert_int_eq(sw_leap_array_detached_count(la), 2);
  ck_assert_int_eq(sw_metric_pass_at(m, T + 1000), 2);
  ck_assert_int_eq(sw_metric_min_rt_at(m, T + 1000), 5000);
  ck_assert_int_eq(sw_metric_pass_at(m, T), 0);
  sw_metric_free(m);
}
END_TEST

START_TEST(test_metric_huge_time) {
  const int64_t t = INT64_MAX - 5;
  sw_metric *m = metric(2, 1000);
  ck_ok(sw_metric_add_pass_at(m, t - 500, 1));
  ck_ok(sw_metric_add_pass_at(m, t, 2));
  ck_ok(sw_metric_add_success_at(m, INT64_MAX, 3));
  ck_assert_int_eq(sw_metric_pass_at(m, INT64_MAX), 3);
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, t), 1);
  ck_assert_int_eq(sw_metric_window_pass_at(m, INT64_MAX), 2);
  ck_assert_int_eq(sw_metric_max_success_at(m, t), 3);
  sw_metric_record r[2];
  ck_sw(sw_metric_details_at(m, INT64_MAX, r, 2), 2);
  ck_assert_int_eq(r[1].start_ms, INT64_C(9223372036854775500));
  sw_metric_free(m);
}
END_TEST

START_TEST(test_metric_sample_count_one) {
  sw_metric *m = metric(1, 1000);
  ck_ok(sw_metric_add_pass_at(m, 100, 1));
  ck_ok(sw_metric_add_pass_at(m, 900, 1));
  ck_assert_int_eq(sw_metric_pass_at(m, 999), 2);
  ck_assert_int_eq(sw_metric_pass_at(m, 1000), 0);
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, 1000), 2);
  ck_ok(sw_metric_add_pass_at(m, 1000, 4));
  ck_assert_int_eq(sw_metric_pass_at(m, 1999), 4);
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, 1000), 0);
  ck_assert_int_eq(sw_metric_sample_count(m), 1);
  sw_metric_free(m);
}
END_TEST

/* ------------------------------------------------- clock-reading twins */

static int64_t fake_now;
static int64_t fake_clock(void *user) { return *(int64_t *)user; }

/* Every function without _at reads the process clock: drive it by hand. */
START_TEST(test_metric_clock_twins) {
  sw_options *o;
  sw_metric *m = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_OCCUPIABLE, 1));
  ck_ok(sw_metric_create(&m, 2, 1000, o));
  sw_options_free(o);
  ck_ok(sw_clock_set_custom(fake_clock, &fake_now));
  fake_now = S;
  ck_ok(sw_metric_add_pass(m, 1));
  ck_ok(sw_metric_add_block(m, 2));
  ck_ok(sw_metric_add_exception(m, 3));
  ck_ok(sw_metric_add_success(m, 4));
  ck_ok(sw_metric_add_occupied_pass(m, 5));
  ck_ok(sw_metric_add_rt(m, 6));
  ck_ok(sw_metric_add_waiting(m, S + 500, 7));
  ck_assert_int_eq(sw_metric_pass(m), 1);
  ck_assert_int_eq(sw_metric_block(m), 2);
  ck_assert_int_eq(sw_metric_exception(m), 3);
  ck_assert_int_eq(sw_metric_success(m), 4);
  ck_assert_int_eq(sw_metric_occupied_pass(m), 5);
  ck_assert_int_eq(sw_metric_rt(m), 6);
  ck_assert_int_eq(sw_metric_max_success(m), 4);
  ck_assert_int_eq(sw_metric_min_rt(m), 6);
  ck_assert_int_eq(sw_metric_waiting(m), 7);
  fake_now = S + 500;
  ck_assert_int_eq(sw_metric_previous_window_pass(m), 1);
  ck_assert_int_eq(sw_metric_previous_window_block(m), 2);
  ck_assert_int_eq(sw_metric_waiting(m), 0);
  ck_ok(sw_metric_add_pass(m, 0)); /* the window of S + 500 becomes current */
  ck_assert_int_eq(sw_metric_pass(m), 8);
  sw_metric_record r[2];
  ck_sw(sw_metric_details(m, r, 2), 2);
  ck_assert_int_eq(r[1].pass, 7);
  ck_ok(sw_clock_set_custom(NULL, NULL));
  sw_metric_free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("metric");
  SW_TCASE(s, "construction", test_metric_create_validation, test_metric_accessors,
           test_go_bucket_leap_array_get_interval_in_second);
  SW_TCASE(s, "java", test_java_array_metric_operate_array_metric,
           test_java_array_metric_get_metric_details_on_condition);
  SW_TCASE(s, "go", test_go_bucket_leap_array_new, test_go_bucket_leap_array_update_bucket,
           test_go_bucket_leap_array_add_count, test_go_bucket_leap_array_min_rt,
           test_go_metric_bucket_normal, test_go_metric_bucket_concurrent,
           test_go_metric_bucket_reset);
  SW_TCASE(s, "reads", test_metric_sums_every_event, test_metric_sum_window_selection,
           test_metric_max_success, test_metric_min_rt, test_metric_min_rt_option,
           test_metric_window_pass_at, test_metric_previous_window);
  SW_TCASE(s, "records", test_metric_details_oldest_first,
           test_metric_details_on_condition_boundary);
  SW_TCASE(s, "bad_input", test_metric_null_handle, test_metric_negative_time,
           test_metric_count_range, test_metric_bad_event);
  SW_TCASE(s, "edges", test_metric_stripes, test_metric_detached_add, test_metric_huge_time,
           test_metric_sample_count_one, test_metric_clock_twins);
  return sw_test_run(s);
}
