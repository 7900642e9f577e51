/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in bucket types: sw.metric (Sentinel's BucketLeapArray),
 * sw.metric.future (FutureBucketLeapArray) and sw.metric.occupiable
 * (OccupiableBucketLeapArray, reached through sw_metric with
 * SW_OPT_OCCUPIABLE=1), and sw_metric_bucket_get.
 *
 * Java's tests of this family use the real time T (or a mocked TimeUtil
 * frozen at T); here T = 1600000000123 and every call takes it explicitly. */
#include <pthread.h>
#include <string.h>

#include "testutil.h"

#define T INT64_C(1600000000123)

/* ------------------------------------------------------------- helpers */

static sw_leap_array *array_of(const char *type, int32_t n, int64_t interval) {
  sw_leap_array *la = NULL;
  ck_ok(sw_leap_array_create_by_name(&la, type, NULL, n, interval));
  ck_assert_ptr_nonnull(la);
  return la;
}

static sw_metric *occupiable_metric(int32_t n, int64_t interval) {
  sw_options *o;
  sw_metric *m = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_OCCUPIABLE, 1));
  ck_ok(sw_metric_create(&m, n, interval, o));
  sw_options_free(o);
  ck_assert_ptr_nonnull(m);
  ck_assert_str_eq(sw_leap_array_type(sw_metric_leap_array(m))->name,
                   SW_TYPE_METRIC_OCCUPIABLE);
  return m;
}

static int64_t get(const sw_leap_array *la, const void *bucket, uint32_t field) {
  return sw_metric_bucket_get(la, bucket, field);
}

/* PASS of the current window of t (created if needed), as Java's
 * currentWindow(t).value().pass(). */
static int64_t current_pass(sw_leap_array *la, int64_t t) {
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, t, &w));
  ck_assert_uint_eq(w.flags, 0);
  return get(la, w.bucket, SW_EVENT_PASS);
}

/* Java's values(t): how many, and the sum of their PASS. */
static int values_pass(const sw_leap_array *la, int64_t t, int64_t *sum) {
  void *b[64];
  int n = sw_leap_array_values_at(la, t, b, 64);
  ck_assert_int_ge(n, 0);
  *sum = 0;
  for (int i = 0; i < n && i < 64; i++) *sum += get(la, b[i], SW_EVENT_PASS);
  return n;
}

/* ------------------------------------------------- sw.metric (Bucket) */

/* Java BucketLeapArrayTest.testNewWindow. */
START_TEST(test_java_bucket_leap_array_new_window) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 2, 2000);
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, T, &w));
  ck_assert_int_eq(w.length_ms, 1000);
  ck_assert_int_eq(w.start_ms, T - T % 1000);
  ck_assert_ptr_nonnull(w.bucket);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_PASS), 0);
  sw_leap_array_free(la);
}
END_TEST

/* Java BucketLeapArrayTest.testLeapArrayWindowStart. */
START_TEST(test_java_bucket_leap_array_window_start) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 2, 2000);
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, T, &w));
  ck_assert_int_eq(w.length_ms, 1000);
  ck_assert_int_eq(w.start_ms, INT64_C(1600000000000));
  sw_leap_array_free(la);
}
END_TEST

/* Java BucketLeapArrayTest.testWindowAfterOneInterval. */
START_TEST(test_java_bucket_leap_array_window_after_one_interval) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 2, 2000);
  const int64_t s = T - T % 1000;
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, s, &w));
  ck_assert_int_eq(w.length_ms, 1000);
  ck_assert_int_eq(w.start_ms, s);
  void *b = w.bucket;
  ck_assert_ptr_nonnull(b);
  ck_ok(sw_leap_array_add_at(la, s, SW_EVENT_PASS, 1));
  ck_ok(sw_leap_array_add_at(la, s, SW_EVENT_BLOCK, 1));
  ck_assert_int_eq(get(la, b, SW_EVENT_PASS), 1);
  ck_assert_int_eq(get(la, b, SW_EVENT_BLOCK), 1);

  const int64_t middle = s + 500;
  ck_ok(sw_leap_array_current_window_at(la, middle, &w));
  ck_assert_int_eq(w.start_ms, s);
  ck_assert_ptr_eq(w.bucket, b); /* assertSame */
  ck_ok(sw_leap_array_add_at(la, middle, SW_EVENT_PASS, 1));
  ck_assert_int_eq(get(la, b, SW_EVENT_PASS), 2);
  ck_assert_int_eq(get(la, b, SW_EVENT_BLOCK), 1);

  const int64_t next = middle + 500;
  ck_ok(sw_leap_array_current_window_at(la, next, &w));
  ck_assert_int_eq(w.length_ms, 1000);
  ck_assert_int_eq(w.start_ms - s, 1000);
  ck_assert_ptr_nonnull(w.bucket);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_PASS), 0);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_BLOCK), 0);
  sw_leap_array_free(la);
}
END_TEST

typedef struct adder_arg {
  sw_leap_array *la;
  sw_metric *m; /* occupiable scenario when set */
} adder_arg;

static void *bucket_adder(void *p) {
  adder_arg *a = p;
  ck_ok(sw_leap_array_add_at(a->la, T, SW_EVENT_PASS, 1));
  return NULL;
}

static void run_threads(int n, void *(*fn)(void *), void *arg) {
  pthread_t th[16];
  ck_assert_int_le(n, 16);
  for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, fn, arg), 0);
  for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
}

/* Java BucketLeapArrayTest.testMultiThreadUpdateEmptyWindow: 16 threads
 * race to create the same empty window; no increment is lost. */
START_TEST(test_java_bucket_leap_array_multi_thread_update_empty_window) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 2, 2000);
  adder_arg a = {la, NULL};
  run_threads(16, bucket_adder, &a);
  ck_assert_int_eq(current_pass(la, T), 16);
  sw_leap_array_free(la);
}
END_TEST

/* Java BucketLeapArrayTest.testGetPreviousWindow. Java judges deprecation
 * by the wall clock (about T); libsw judges it at the given time. */
START_TEST(test_java_bucket_leap_array_get_previous_window) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 2, 2000);
  sw_window prev, w;
  ck_ok(sw_leap_array_current_window_at(la, T, &prev));
  ck_sw(sw_leap_array_previous_window_at(la, T, &w), 0);
  ck_sw(sw_leap_array_previous_window_at(la, T + 1000, &w), 1);
  ck_assert_ptr_eq(w.bucket, prev.bucket);
  ck_assert_int_eq(w.start_ms, prev.start_ms);
  /* Java: null because s + 1000 < T + 10000; libsw: the slot does not hold
   * the window starting at start(T + 11000) - 1000. */
  ck_sw(sw_leap_array_previous_window_at(la, T + 11 * 1000, &w), 0);
  sw_leap_array_free(la);
}
END_TEST

/* Java BucketLeapArrayTest.testListWindowsResetOld (W = 100, N = 10). */
START_TEST(test_java_bucket_leap_array_list_windows_reset_old) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 10, 1000);
  sw_window a, b, list[16];
  ck_ok(sw_leap_array_current_window_at(la, T, &a));
  ck_ok(sw_leap_array_current_window_at(la, T + 100, &b));
  /* Java's list() at now = T holds both (a future window is not
   * deprecated); libsw's list_at(T) holds only the windows up to T's
   * (deliberate: the interval ends at start(T)). Both are subsets of {a, b}. */
  int n = sw_leap_array_list_at(la, T, list, 16);
  ck_assert_int_eq(n, 1);
  ck_assert_ptr_eq(list[0].bucket, a.bucket);
  ck_sw(sw_leap_array_list_at(la, T + 100, list, 16), 2);

  /* "sleep" 1100 ms: the write hits b's slot and resets it. */
  ck_ok(sw_leap_array_add_at(la, T + 100 + 1000, SW_EVENT_PASS, 1));
  ck_sw(sw_leap_array_list_at(la, T + 1100, list, 16), 1);
  ck_assert_int_eq(list[0].start_ms, T - T % 100 + 1100);
  ck_assert_int_eq(get(la, list[0].bucket, SW_EVENT_PASS), 1);
  sw_leap_array_free(la);
}
END_TEST

/* Java BucketLeapArrayTest.testListWindowsNewBucket (W = 100, N = 10). */
START_TEST(test_java_bucket_leap_array_list_windows_new_bucket) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 10, 1000);
  sw_window w, list[16];
  ck_ok(sw_leap_array_current_window_at(la, T, &w));
  ck_ok(sw_leap_array_current_window_at(la, T + 100, &w));
  const int64_t now = T + 1000 + 100 * 3; /* after the "sleep" */
  ck_sw(sw_leap_array_list_at(la, now, list, 16), 0); /* both are too old */
  ck_ok(sw_leap_array_add_at(la, now, SW_EVENT_PASS, 1)); /* an empty slot */
  ck_sw(sw_leap_array_list_at(la, now, list, 16), 1);
  ck_assert_int_eq(list[0].start_ms, now - now % 100);
  sw_leap_array_free(la);
}
END_TEST

/* sentinel-golang TestBucketLeapArray_resetBucketTo: a window's counts are
 * gone once its slot holds a newer window. */
START_TEST(test_go_bucket_leap_array_reset_bucket_to) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 20, 10000);
  sw_window w;
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_PASS, 100));
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_BLOCK, 100));
  ck_ok(sw_leap_array_current_window_at(la, T + 10000, &w)); /* same slot */
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_PASS), 0);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_BLOCK), 0);
  ck_assert_int_eq(get(la, w.bucket, SW_FIELD_MIN_RT), 5000);
  sw_leap_array_free(la);
}
END_TEST

/* ------------------------------------------------------ sw.metric.future */

/* Java FutureBucketLeapArrayTest: a window is deprecated once t reaches its
 * start, so values(t) never holds the window just written at t. */
START_TEST(test_java_future_bucket_leap_array) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC_FUTURE, 10, 2000);
  for (int64_t i = 0; i < 2000; i += 200) {
    ck_ok(sw_leap_array_add_at(la, i + T, SW_EVENT_PASS, 1));
    ck_sw(sw_leap_array_values_at(la, i + T, NULL, 0), 0);
  }
  sw_leap_array_free(la);
}
END_TEST

START_TEST(test_future_deprecation_rule) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC_FUTURE, 10, 2000); /* W = 200 */
  const int64_t s = T - T % 200;
  ck_sw(sw_leap_array_is_window_deprecated_at(la, s, s), 1);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, s - 1, s), 0);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, s + 5000, s), 1);
  /* Windows ahead of t are listed (the type's own rule), oldest first,
   * however far ahead within the ring. */
  for (int k = 1; k <= 9; k++) ck_ok(sw_leap_array_add_at(la, s + 200 * k, SW_EVENT_PASS, k));
  sw_window w[16];
  ck_sw(sw_leap_array_list_at(la, s, w, 16), 9);
  ck_assert_int_eq(w[0].start_ms, s + 200);
  ck_assert_int_eq(w[8].start_ms, s + 1800);
  ck_sw(sw_leap_array_list_at(la, s + 1000, w, 16), 4);
  ck_assert_int_eq(w[0].start_ms, s + 1200);
  int64_t sum;
  ck_ok(sw_leap_array_sum_at(la, s + 1000, SW_EVENT_PASS, &sum));
  ck_assert_int_eq(sum, 6 + 7 + 8 + 9);
  ck_sw(sw_leap_array_list_at(la, s + 1800, w, 16), 0);
  sw_leap_array_free(la);
}
END_TEST

/* -------------------------------------------------- sw.metric.occupiable */

/* Java OccupiableBucketLeapArrayTest.testNewWindow (mocked now = T). */
START_TEST(test_java_occupiable_bucket_leap_array_new_window) {
  sw_metric *m = occupiable_metric(10, 2000); /* W = 200 */
  sw_leap_array *la = sw_metric_leap_array(m);
  sw_window cw;
  ck_ok(sw_leap_array_current_window_at(la, T, &cw));
  ck_ok(sw_metric_add_pass_at(m, T, 1));
  ck_assert_int_eq(get(la, cw.bucket, SW_EVENT_PASS), 1);
  ck_ok(sw_metric_add_waiting(m, T + 200, 1));
  ck_assert_int_eq(sw_metric_waiting_at(m, T), 1);
  ck_assert_int_eq(get(la, cw.bucket, SW_EVENT_PASS), 1); /* borrowing leaves it alone */
  sw_metric_free(m);
}
END_TEST

/* Java OccupiableBucketLeapArrayTest.testWindowInOneInterval. */
START_TEST(test_java_occupiable_bucket_leap_array_window_in_one_interval) {
  sw_metric *m = occupiable_metric(10, 2000);
  sw_leap_array *la = sw_metric_leap_array(m);
  sw_window cw;
  int64_t sum;
  ck_ok(sw_leap_array_current_window_at(la, T, &cw));
  ck_ok(sw_metric_add_pass_at(m, T, 1));
  ck_assert_int_eq(get(la, cw.bucket, SW_EVENT_PASS), 1);
  ck_ok(sw_metric_add_waiting(m, T + 200, 2));
  ck_assert_int_eq(sw_metric_waiting_at(m, T), 2);
  ck_assert_int_eq(get(la, cw.bucket, SW_EVENT_PASS), 1);
  /* The next window starts with the 2 borrowed passes. */
  ck_assert_int_eq(current_pass(la, T + 200), 2);
  ck_assert_int_eq(values_pass(la, T + 200, &sum), 2);
  ck_assert_int_eq(sum, 3);
  sw_metric_free(m);
}
END_TEST

static void *occupiable_adder(void *p) {
  adder_arg *a = p;
  ck_ok(sw_metric_add_pass_at(a->m, T, 1));
  ck_ok(sw_metric_add_waiting(a->m, T + 200, 1));
  return NULL;
}

/* Java OccupiableBucketLeapArrayTest.testMultiThreadUpdateEmptyWindow. */
START_TEST(test_java_occupiable_bucket_leap_array_multi_thread_update_empty_window) {
  sw_metric *m = occupiable_metric(10, 2000);
  sw_leap_array *la = sw_metric_leap_array(m);
  adder_arg a = {la, m};
  int64_t sum;
  run_threads(16, occupiable_adder, &a);
  ck_assert_int_eq(current_pass(la, T), 16);
  ck_assert_int_eq(sw_metric_waiting_at(m, T), 16);
  ck_assert_int_eq(current_pass(la, T + 200), 16);
  ck_assert_int_eq(values_pass(la, T + 200, &sum), 2);
  ck_assert_int_eq(sum, 32);
  sw_metric_free(m);
}
END_TEST

/* Java OccupiableBucketLeapArrayTest.testWindowAfterOneInterval. Each step
 * adds one pass to the window of T + 200i and borrows one for the next. */
START_TEST(test_java_occupiable_bucket_leap_array_window_after_one_interval) {
  sw_metric *m = occupiable_metric(10, 2000);
  sw_leap_array *la = sw_metric_leap_array(m);
  int64_t sum;
  for (int i = 0; i < 10; i++) {
    ck_ok(sw_metric_add_pass_at(m, T + i * 200, 1));
    ck_ok(sw_metric_add_waiting(m, T + (i + 1) * 200, 1));
    /* The first window had nothing borrowed; the others start with 1. */
    ck_assert_int_eq(current_pass(la, T + i * 200), i == 0 ? 1 : 2);
  }
  /* Deliberate difference: Java's values(s0 + 2000) also keeps the window
   * of s0 (2000 - 0 is not > 2000) and gives 10 windows, pass 2*10 - 1 = 19.
   * libsw's interval ending at s0 + 2000 starts at s0 + 200 (the window of
   * s0 + 2000 itself, which replaces s0, is not created by a read): 9
   * windows of 2 passes. */
  ck_assert_int_eq(values_pass(la, T - T % 200 + 2000, &sum), 9);
  ck_assert_int_eq(sum, 18);
  /* As Java: the borrowed windows s0+200 .. s0+2000 all lie ahead of T. */
  ck_assert_int_eq(sw_metric_waiting_at(m, T), 10);
  sw_metric_free(m);
}
END_TEST

/* Borrowed passes are carried when the slot is reused (reset), not only
 * when it is created. */
START_TEST(test_occupiable_carry_on_reset) {
  sw_metric *m = occupiable_metric(2, 1000); /* W = 500 */
  sw_leap_array *la = sw_metric_leap_array(m);
  const int64_t s = T - T % 500;
  ck_ok(sw_metric_add_pass_at(m, s, 4));           /* slot 0 created */
  ck_ok(sw_metric_add_waiting(m, s + 1000, 3));    /* slot 0's next window */
  ck_assert_int_eq(sw_metric_waiting_at(m, s), 3);
  ck_assert_int_eq(sw_metric_pass_at(m, s), 4);
  ck_assert_int_eq(current_pass(la, s + 1000), 3); /* reset carries 3 */
  ck_assert_int_eq(sw_metric_pass_at(m, s + 1000), 3);
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 1000), 0);
  ck_assert_int_eq(sw_metric_waiting_at(m, s), 3); /* a reader behind still sees it ahead */
  sw_metric_free(m);
}
END_TEST

/* Borrowing for the next two windows: each is carried into its own window
 * and stops being "waiting" when its window starts. */
START_TEST(test_occupiable_borrow_across_two_windows) {
  sw_metric *m = occupiable_metric(2, 1000); /* W = 500 */
  const int64_t s = T - T % 500;
  ck_ok(sw_metric_add_pass_at(m, s + 100, 1));
  ck_ok(sw_metric_add_waiting(m, s + 500, 2));
  ck_ok(sw_metric_add_waiting(m, s + 1000, 5));
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 100), 7);
  ck_assert_int_eq(sw_metric_pass_at(m, s + 100), 1);

  ck_ok(sw_metric_add_pass_at(m, s + 600, 1)); /* window s+500: 2 + 1 */
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 600), 5);
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 500), 3);
  ck_assert_int_eq(sw_metric_pass_at(m, s + 600), 4);

  ck_ok(sw_metric_add_pass_at(m, s + 1100, 1)); /* window s+1000: 5 + 1 */
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 1100), 0);
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 1000), 6);
  ck_assert_int_eq(sw_metric_pass_at(m, s + 1100), 9);
  sw_metric_free(m);
}
END_TEST

/* A borrow for a time that is already past is not waiting (Future rule:
 * deprecated once t >= start). Reads count it in its window, as Sentinel's
 * refreshing reads would, though no write has carried it yet. */
START_TEST(test_occupiable_future_window_in_the_past) {
  sw_metric *m = occupiable_metric(10, 2000); /* W = 200 */
  const int64_t s = T - T % 200;
  ck_ok(sw_metric_add_waiting(m, s + 1000, 4));
  ck_assert_int_eq(sw_metric_waiting_at(m, s), 4);
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 999), 4);
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 1000), 0);
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 5000), 0);
  /* No main window was made current at s + 1000: the sums read the borrow
   * array, and so does every read of that window. */
  ck_assert_int_eq(sw_metric_pass_at(m, s + 1100), 4);
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 1000), 4);
  ck_ok(sw_metric_add_pass_at(m, s + 1100, 1)); /* the carry: counted once */
  ck_assert_int_eq(sw_metric_pass_at(m, s + 1100), 5);
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 1000), 5);
  sw_metric_free(m);
}
END_TEST

/* Every read of a window with passes borrowed for it and no main window yet
 * agrees with pass_at: the window's own pass, the previous window, the
 * details (their passes sum to pass_at) and the sliding view. */
START_TEST(test_occupiable_borrowed_only_window_reads) {
  sw_metric *m = occupiable_metric(2, 1000); /* W = 500 */
  const int64_t s = T - T % 1000;
  ck_ok(sw_metric_add_pass_at(m, s + 100, 2));
  ck_ok(sw_metric_add_waiting(m, s + 500, 3)); /* [s+500, s+1000): never written */
  const int64_t t = s + 1100;
  ck_assert_int_eq(sw_metric_pass_at(m, t), 3);
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 700), 3);
  ck_assert_int_eq(sw_metric_previous_window_pass_at(m, t), 3);
  ck_assert_int_eq(sw_metric_previous_window_block_at(m, t), 0);
  sw_metric_record rec[4];
  ck_assert_int_eq(sw_metric_details_at(m, t, rec, 4), 1);
  ck_assert_int_eq(rec[0].start_ms, s + 500);
  ck_assert_int_eq(rec[0].pass, 3);
  ck_assert_int_eq(rec[0].block, 0);
  ck_assert_int_eq(rec[0].min_rt, 5000);
  /* at s + 700 the details hold both windows, oldest first, summing to pass_at */
  ck_assert_int_eq(sw_metric_details_at(m, s + 700, rec, 4), 2);
  ck_assert_int_eq(rec[0].start_ms, s);
  ck_assert_int_eq(rec[1].start_ms, s + 500);
  ck_assert_int_eq(rec[0].pass + rec[1].pass, sw_metric_pass_at(m, s + 700));
  /* a cap keeps the oldest */
  ck_assert_int_eq(sw_metric_details_at(m, s + 700, rec, 1), 2);
  ck_assert_int_eq(rec[0].start_ms, s);
  /* once carried, the same numbers */
  ck_ok(sw_metric_add_block_at(m, s + 600, 1));
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 700), 3);
  ck_assert_int_eq(sw_metric_details_at(m, t, rec, 4), 1);
  ck_assert_int_eq(rec[0].pass, 3);
  ck_assert_int_eq(rec[0].block, 1);
  /* nothing borrowed (a borrow of 0 units) makes no window */
  ck_ok(sw_metric_add_waiting(m, s + 1500, 0));
  ck_assert_int_eq(sw_metric_details_at(m, s + 1600, rec, 4), 0);
  sw_metric_free(m);
}
END_TEST

/* Once a window is current its future bucket is sealed: a late borrow for
 * it goes straight to the main window's PASS, and is not waiting. */
START_TEST(test_occupiable_sealed_future_window) {
  sw_metric *m = occupiable_metric(2, 1000); /* W = 500 */
  const int64_t s = T - T % 500;
  ck_ok(sw_metric_add_waiting(m, s + 500, 2));
  ck_ok(sw_metric_add_pass_at(m, s + 500, 1)); /* carries 2, seals */
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 500), 3);
  ck_ok(sw_metric_add_waiting(m, s + 700, 4));  /* the window is already current */
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 500), 7);
  ck_assert_int_eq(sw_metric_waiting_at(m, s), 2); /* only the carried 2 lie ahead of s */
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 500), 0);
  ck_assert_int_eq(sw_metric_pass_at(m, s + 500), 7);
  /* Same when nothing was borrowed before the window became current. */
  ck_ok(sw_metric_add_pass_at(m, s + 1000, 1));
  ck_ok(sw_metric_add_waiting(m, s + 1499, 5));
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 1000), 6);
  ck_assert_int_eq(sw_metric_waiting_at(m, s + 999), 0);
  sw_metric_free(m);
}
END_TEST

/* A borrow whose future slot already holds a newer window is dropped, as
 * Java adds it to a throwaway window. */
START_TEST(test_occupiable_borrow_behind_newer_future_window) {
  sw_metric *m = occupiable_metric(2, 1000); /* W = 500 */
  const int64_t s = T - T % 500;
  ck_ok(sw_metric_add_waiting(m, s + 1500, 1)); /* future slot 1 := s+1500 */
  ck_ok(sw_metric_add_waiting(m, s + 500, 9));  /* slot 1 is newer: dropped */
  ck_assert_int_eq(sw_metric_waiting_at(m, s), 1);
  ck_ok(sw_metric_add_pass_at(m, s + 500, 0));
  ck_assert_int_eq(sw_metric_window_pass_at(m, s + 500), 0);
  sw_metric_free(m);
}
END_TEST

START_TEST(test_add_waiting_bad_input) {
  sw_metric *m = occupiable_metric(2, 1000), *plain = NULL;
  ck_sw(sw_metric_add_waiting(m, T, -1), SW_ERANGE);
  ck_assert_str_eq(sw_last_error(), "n=-1 is outside 0..2147483647");
  ck_sw(sw_metric_add_waiting(m, T, (int64_t)INT32_MAX + 1), SW_ERANGE);
  ck_sw(sw_metric_add_waiting(m, -1, 1), SW_ETIME);
  ck_sw(sw_metric_add_waiting(NULL, T, 1), SW_ENULL);
  ck_sw(sw_metric_waiting_at(m, -1), SW_ETIME);
  ck_sw(sw_metric_waiting_at(NULL, T), SW_ENULL);
  ck_assert_int_eq(sw_metric_waiting_at(m, T), 0);
  /* A plain metric cannot borrow (Java throws UnsupportedOperationException)
   * and waits for nothing. */
  ck_ok(sw_metric_create(&plain, 2, 1000, NULL));
  ck_sw(sw_metric_add_waiting(plain, T, 1), SW_ENOTSUP);
  ck_assert_int_eq(sw_metric_waiting_at(plain, T), 0);
  sw_metric_free(plain);
  sw_metric_free(m);
}
END_TEST

/* The occupiable type made by name has no borrow array: it is a Bucket. */
START_TEST(test_occupiable_by_name_without_borrow) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC_OCCUPIABLE, 2, 1000);
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_PASS, 3));
  ck_assert_int_eq(current_pass(la, T), 3);
  ck_assert_int_eq(current_pass(la, T + 1000), 0);
  sw_leap_array_free(la);
}
END_TEST

/* ------------------------------------------------- sw_metric_bucket_get */

START_TEST(test_metric_bucket_get) {
  sw_leap_array *la = array_of(SW_TYPE_METRIC, 2, 1000);
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, T, &w));
  for (uint32_t f = 0; f < SW_EVENT_COUNT; f++) {
    if (f != SW_EVENT_RT) ck_ok(sw_leap_array_add_at(la, T, f, 10 + f));
  }
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_RT, 30));
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_RT, 12));
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_PASS), 10);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_BLOCK), 11);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_EXCEPTION), 12);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_SUCCESS), 13);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_RT), 42);
  ck_assert_int_eq(get(la, w.bucket, SW_EVENT_OCCUPIED_PASS), 15);
  ck_assert_int_eq(get(la, w.bucket, SW_FIELD_MIN_RT), 12);

  ck_sw(get(la, w.bucket, SW_FIELD_MIN_RT + 1), SW_ERANGE);
  ck_assert_str_eq(sw_last_error(), "field=8, a metric bucket has 8");
  ck_sw(get(NULL, w.bucket, 0), SW_ENULL);
  ck_sw(get(la, NULL, 0), SW_ENULL);

  /* Future and occupiable buckets are metric buckets too. */
  sw_leap_array *lf = array_of(SW_TYPE_METRIC_FUTURE, 2, 1000);
  ck_ok(sw_leap_array_add_at(lf, T, SW_EVENT_PASS, 2));
  ck_ok(sw_leap_array_current_window_at(lf, T, &w));
  ck_assert_int_eq(get(lf, w.bucket, SW_EVENT_PASS), 2);
  sw_leap_array_free(lf);

  /* Not a metric bucket: SW_ETYPE. */
  sw_bucket_type other = *sw_leap_array_type(la);
  other.name = "test.not_metric";
  other.get = NULL;
  other.add = NULL;
  other.field_count = 0;
  sw_leap_array *lo = NULL;
  ck_ok(sw_leap_array_create(&lo, &other, NULL, 2, 1000));
  ck_ok(sw_leap_array_current_window_at(lo, T, &w));
  ck_sw(get(lo, w.bucket, SW_EVENT_PASS), SW_ETYPE);
  ck_assert_str_eq(sw_last_error(), "leap array holds test.not_metric buckets, not sw.metric*");
  sw_leap_array_free(lo);
  sw_leap_array_free(la);
}
END_TEST

int main(void) {
  Suite *s = suite_create("variants");
  SW_TCASE(s, "bucket", test_java_bucket_leap_array_new_window,
           test_java_bucket_leap_array_window_start,
           test_java_bucket_leap_array_window_after_one_interval,
           test_java_bucket_leap_array_multi_thread_update_empty_window,
           test_java_bucket_leap_array_get_previous_window,
           test_java_bucket_leap_array_list_windows_reset_old,
           test_java_bucket_leap_array_list_windows_new_bucket,
           test_go_bucket_leap_array_reset_bucket_to);
  SW_TCASE(s, "future", test_java_future_bucket_leap_array, test_future_deprecation_rule);
  SW_TCASE(s, "occupiable", test_java_occupiable_bucket_leap_array_new_window,
           test_java_occupiable_bucket_leap_array_window_in_one_interval,
           test_java_occupiable_bucket_leap_array_multi_thread_update_empty_window,
           test_java_occupiable_bucket_leap_array_window_after_one_interval,
           test_occupiable_carry_on_reset, test_occupiable_borrow_across_two_windows,
           test_occupiable_future_window_in_the_past, test_occupiable_borrowed_only_window_reads, test_occupiable_sealed_future_window,
           test_occupiable_borrow_behind_newer_future_window, test_add_waiting_bad_input,
           test_occupiable_by_name_without_borrow);
  SW_TCASE(s, "bucket_get", test_metric_bucket_get);
  return sw_test_run(s);
}
