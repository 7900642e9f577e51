/* SPDX-License-Identifier: Apache-2.0 */
/* The leap array (sw_leap_array_*): Sentinel's LeapArray and sentinel-golang's
 * leapArray, ported scenario by scenario, plus libsw's own edge cases.
 *
 * Every call uses an explicit time (the *_at twins); the few clock-reading
 * functions are driven by a fake clock. Where Java used the real time T we
 * use T = 1600000000123. */
#include <string.h>

#include "leap_array.h" /* the slot protocol's torn-read rule */
#include "testutil.h"

#define T INT64_C(1600000000123)

/* ------------------------------------------------------------- helpers */

/* A minimal plugin type: one int64 counter, and a recorder (the ctx) that
 * sees every new_empty_bucket / reset_window_to call. Tests are
 * single-threaded, so plain fields are fine. */
typedef struct counter {
  int64_t v;
} counter;

typedef struct recorder {
  int news, resets;
  int64_t new_time;  /* time_ms given to new_empty_bucket */
  int64_t reset_old; /* window->start_ms seen by reset_window_to */
  int64_t reset_new; /* start_ms given to reset_window_to */
} recorder;

static void ctr_new(void *ctx, void *bucket, int64_t time_ms) {
  recorder *r = ctx;
  r->news++;
  r->new_time = time_ms;
  ((counter *)bucket)->v = 0;
}

static void ctr_reset(void *ctx, sw_window *w, int64_t start_ms) {
  recorder *r = ctx;
  r->resets++;
  r->reset_old = w->start_ms;
  r->reset_new = start_ms;
  ((counter *)w->bucket)->v = 0;
}

static void ctr_add(void *ctx, void *bucket, uint32_t field, int64_t n) {
  (void)ctx;
  (void)field;
  ((counter *)bucket)->v += n;
}

static int64_t ctr_get(void *ctx, const void *bucket, uint32_t field) {
  (void)ctx;
  (void)field;
  return ((const counter *)bucket)->v;
}

static const char *const ctr_field_names[] = {"v"};

static const sw_bucket_type counter_type = {
    .abi_version = SW_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sw_bucket_type),
    .name = "test.counter",
    .bucket_size = sizeof(counter),
    .bucket_align = 8,
    .new_empty_bucket = ctr_new,
    .reset_window_to = ctr_reset,
    .field_count = 1,
    .field_names = ctr_field_names,
    .add = ctr_add,
    .get = ctr_get,
};

#define CTR(w) (((counter *)(w).bucket)->v)

/* A sw.metric leap array (one stripe: ctx NULL). */
static sw_leap_array *metric_array(int32_t n, int64_t interval) {
  sw_leap_array *la = NULL;
  ck_ok(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, n, interval));
  ck_assert_ptr_nonnull(la);
  return la;
}

static sw_leap_array *counter_array(recorder *r, int32_t n, int64_t interval) {
  sw_leap_array *la = NULL;
  ck_ok(sw_leap_array_create(&la, &counter_type, r, n, interval));
  ck_assert_ptr_nonnull(la);
  return la;
}

static int64_t pass_of(const sw_leap_array *la, const void *bucket) {
  return sw_metric_bucket_get(la, bucket, SW_EVENT_PASS);
}

static int64_t sum_of(const sw_leap_array *la, int64_t t, uint32_t field) {
  int64_t v = -999;
  ck_ok(sw_leap_array_sum_at(la, t, field, &v));
  return v;
}

/* --------------------------------------------------------- construction */

START_TEST(test_create_validation) {
  sw_leap_array *la = (sw_leap_array *)&la; /* any non-NULL: a failure must set NULL */
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 0, 1000), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "sample_count=0 must be > 0");
  ck_assert_ptr_null(la);
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, -2, 1000), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "sample_count=-2 must be > 0");
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 2, 0), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "interval_ms=0 must be > 0");
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 2, -1000), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "interval_ms=-1000 must be > 0");
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 3, 1000), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "sample_count=3 does not divide interval_ms=1000");
  /* Java's order: the sample count is checked before the interval. */
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 0, 0), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "sample_count=0 must be > 0");
  ck_assert_ptr_null(la);

  ck_sw(sw_leap_array_create(NULL, &counter_type, NULL, 2, 1000), SW_ENULL);
  ck_sw(sw_leap_array_create(&la, NULL, NULL, 2, 1000), SW_ENULL);
  ck_sw(sw_leap_array_create_by_name(NULL, SW_TYPE_METRIC, NULL, 2, 1000), SW_ENULL);
  ck_sw(sw_leap_array_create_by_name(&la, "no.such.type", NULL, 2, 1000), SW_ENOTFOUND);
  ck_assert_str_eq(sw_last_error(), "no bucket type named no.such.type");
  ck_assert_ptr_null(la);

  /* A good one, and its accessors. */
  ck_ok(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 2, 1000));
  ck_assert_int_eq(sw_leap_array_sample_count(la), 2);
  ck_assert_int_eq(sw_leap_array_interval_ms(la), 1000);
  ck_assert_int_eq(sw_leap_array_window_length_ms(la), 500);
  ck_assert_str_eq(sw_leap_array_type(la)->name, SW_TYPE_METRIC);
  ck_assert_int_eq(sw_leap_array_detached_count(la), 0);
  sw_leap_array_free(la);
  sw_leap_array_free(NULL);

  ck_sw(sw_leap_array_sample_count(NULL), SW_ENULL);
  ck_sw(sw_leap_array_interval_ms(NULL), SW_ENULL);
  ck_sw(sw_leap_array_window_length_ms(NULL), SW_ENULL);
  ck_sw(sw_leap_array_detached_count(NULL), SW_ENULL);
  ck_assert_ptr_null(sw_leap_array_type(NULL));
}
END_TEST

/* A NULL type name is a NULL argument, with a message that says so; a
 * context given to a built-in type is refused (they take their own). */
START_TEST(test_create_by_name_null_name) {
  sw_leap_array *la = (sw_leap_array *)&la;
  ck_sw(sw_leap_array_create_by_name(&la, NULL, NULL, 2, 1000), SW_ENULL);
  ck_assert_str_eq(sw_last_error(), "type name is NULL");
  ck_assert_ptr_null(la);
  int ctx = 0;
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, &ctx, 2, 1000), SW_EINVAL);
  ck_assert_str_eq(sw_last_error(), "built-in type sw.metric takes no context: use sw_metric_create");
}
END_TEST

/* Sizes that do not fit: INT32_MAX windows of the largest bucket. */
START_TEST(test_create_overflow) {
  sw_bucket_type big = counter_type;
  big.name = "test.big";
  big.bucket_size = SW_BUCKET_SIZE_MAX;
  sw_leap_array *la = NULL;
  ck_sw(sw_leap_array_create(&la, &big, NULL, INT32_MAX, INT32_MAX), SW_EOVERFLOW);
  ck_assert_str_eq(sw_last_error(),
                   "sample_count=2147483647 with bucket_size=65536 needs more than 1 TiB");
  ck_assert_ptr_null(la);
  /* Geometry errors come first: the size is judged only for a valid geometry. */
  ck_sw(sw_leap_array_create(&la, &big, NULL, INT32_MAX, 1000), SW_ESIZE);
}
END_TEST

/* A bad vtable is refused with SW_EABI and a message naming the member. */
START_TEST(test_create_bad_vtable) {
  sw_leap_array *la = NULL;
  sw_bucket_type t = counter_type;
  t.abi_version = (SW_PLUGIN_ABI_MAJOR + 1) << 16;
  ck_sw(sw_leap_array_create(&la, &t, NULL, 2, 1000), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "ABI version"));

  t = counter_type;
  t.struct_size = SW_BUCKET_TYPE_MIN_SIZE - 1;
  ck_sw(sw_leap_array_create(&la, &t, NULL, 2, 1000), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "struct_size="));

  t = counter_type;
  t.bucket_size = 0;
  ck_sw(sw_leap_array_create(&la, &t, NULL, 2, 1000), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "bucket_size=0"));

  t = counter_type;
  t.bucket_align = 3;
  ck_sw(sw_leap_array_create(&la, &t, NULL, 2, 1000), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "bucket_align=3"));

  t = counter_type;
  t.reset_window_to = NULL;
  ck_sw(sw_leap_array_create(&la, &t, NULL, 2, 1000), SW_EABI);

  t = counter_type;
  t.get = NULL;
  ck_sw(sw_leap_array_create(&la, &t, NULL, 2, 1000), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "field_count=1"));
  ck_assert_ptr_null(la);
}
END_TEST

/* sentinel-golang leap_array_test.go TestNewLeapArray. */
START_TEST(test_go_new_leap_array) {
  recorder r = {0};
  sw_leap_array *la = NULL;
  ck_ok(sw_leap_array_create(&la, &counter_type, &r, 20, 10000));
  sw_leap_array_free(la);
  /* Go: nil BucketGenerator -> error; here a NULL vtable. */
  ck_sw(sw_leap_array_create(&la, NULL, &r, 20, 10000), SW_ENULL);
  ck_assert_ptr_null(la);
  ck_sw(sw_leap_array_create(&la, &counter_type, &r, 30, 10000), SW_ESIZE);
  ck_assert_ptr_null(la);
  ck_sw(sw_leap_array_create(&la, &counter_type, &r, 0, 10000), SW_ESIZE);
  ck_assert_ptr_null(la);
  ck_assert_int_eq(r.news, 0); /* construction creates no bucket (Java: null slots) */
}
END_TEST

/* ------------------------------------------------- time index and start */

/* sentinel-golang Test_leapArray_calculateTimeIdx_normal. */
START_TEST(test_go_leap_array_calculate_time_idx_normal) {
  sw_leap_array *la = metric_array(20, 10000);
  int32_t idx = -1;
  ck_ok(sw_leap_array_time_index(la, INT64_C(1576296044907), &idx));
  ck_assert_int_eq(idx, 9);
  sw_leap_array_free(la);
}
END_TEST

/* sentinel-golang Test_calculateStartTime_normal. */
START_TEST(test_go_calculate_start_time_normal) {
  sw_leap_array *la = metric_array(20, 10000);
  int64_t start = -1;
  ck_ok(sw_leap_array_window_start(la, INT64_C(1576296044907), &start));
  ck_assert_int_eq(start, INT64_C(1576296044500));
  sw_leap_array_free(la);
}
END_TEST

START_TEST(test_time_index_and_window_start) {
  sw_leap_array *la = metric_array(4, 400); /* windows of 100 ms */
  int32_t idx;
  int64_t start;
  const int64_t cases[][3] = {/* t, idx, start */
                              {0, 0, 0},      {99, 0, 0},     {100, 1, 100},
                              {399, 3, 300},  {400, 0, 400},  {401, 0, 400},
                              {T, 1, T - 23}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ck_ok(sw_leap_array_time_index(la, cases[i][0], &idx));
    ck_assert_int_eq(idx, cases[i][1]);
    ck_ok(sw_leap_array_window_start(la, cases[i][0], &start));
    ck_assert_int_eq(start, cases[i][2]);
  }
  ck_sw(sw_leap_array_time_index(la, -1, &idx), SW_ETIME);
  ck_assert_str_eq(sw_last_error(), "time -1 ms is negative");
  ck_sw(sw_leap_array_window_start(la, -1, &start), SW_ETIME);
  ck_sw(sw_leap_array_time_index(la, 0, NULL), SW_ENULL);
  ck_sw(sw_leap_array_window_start(la, 0, NULL), SW_ENULL);
  ck_sw(sw_leap_array_time_index(NULL, 0, &idx), SW_ENULL);
  ck_sw(sw_leap_array_window_start(NULL, 0, &start), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* ------------------------------------------------------- current window */

/* Sentinel's four cases of currentWindow, watched through the vtable. */
START_TEST(test_current_window_four_cases) {
  recorder r = {0};
  sw_leap_array *la = counter_array(&r, 4, 400); /* windows of 100 ms */
  sw_window w, again, reset, det, stored;

  /* 1. Empty slot: created; new_empty_bucket gets the raw time, as Java. */
  ck_ok(sw_leap_array_current_window_at(la, 250, &w));
  ck_assert_int_eq(w.start_ms, 200);
  ck_assert_int_eq(w.length_ms, 100);
  ck_assert_uint_eq(w.slot, 2);
  ck_assert_uint_eq(w.flags, 0);
  ck_assert_ptr_nonnull(w.bucket);
  ck_assert_int_eq(r.news, 1);
  ck_assert_int_eq(r.new_time, 250);
  ck_assert_int_eq(r.resets, 0);
  CTR(w) += 5;

  /* 2. Same start: the same bucket, nothing called. */
  ck_ok(sw_leap_array_current_window_at(la, 299, &again));
  ck_assert_ptr_eq(again.bucket, w.bucket);
  ck_assert_int_eq(again.start_ms, 200);
  ck_assert_int_eq(CTR(again), 5);
  ck_assert_int_eq(r.news, 1);

  /* 3. Older start in the slot: reset to the new start; reset_window_to sees
   * the start the slot held before. */
  ck_ok(sw_leap_array_current_window_at(la, 650, &reset));
  ck_assert_int_eq(reset.start_ms, 600);
  ck_assert_uint_eq(reset.slot, 2);
  ck_assert_uint_eq(reset.flags, 0);
  ck_assert_int_eq(r.resets, 1);
  ck_assert_int_eq(r.reset_old, 200);
  ck_assert_int_eq(r.reset_new, 600);
  ck_assert_int_eq(r.news, 1);
  ck_assert_int_eq(CTR(reset), 0);
  CTR(reset) += 7;

  /* 4. Newer start in the slot (clock behind): a detached empty window. */
  ck_ok(sw_leap_array_current_window_at(la, 250, &det));
  ck_assert_uint_eq(det.flags, SW_WINDOW_DETACHED);
  ck_assert_int_eq(det.start_ms, 200);
  ck_assert_uint_eq(det.slot, 2);
  ck_assert_ptr_nonnull(det.bucket);
  ck_assert_ptr_ne(det.bucket, reset.bucket);
  ck_assert_int_eq(CTR(det), 0);
  ck_assert_int_eq(sw_leap_array_detached_count(la), 1);
  CTR(det) += 99; /* seen by no reader */
  ck_sw(sw_leap_array_window_value_at(la, 650, &stored), 1);
  ck_assert_int_eq(CTR(stored), 7);
  ck_assert_int_eq(r.resets, 1); /* the slot was not touched */

  /* Deliberate difference: t < 0 is SW_ETIME (Java's currentWindow returns
   * null, its values() an empty list). */
  ck_sw(sw_leap_array_current_window_at(la, -1, &w), SW_ETIME);
  ck_sw(sw_leap_array_current_window_at(la, 0, NULL), SW_ENULL);
  ck_sw(sw_leap_array_current_window_at(NULL, 0, &w), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* sentinel-golang Test_leapArray_BucketStartCheck_normal: the window of
 * now + 801 starts at now + 500 and is the bucket of slot 1. Go pre-fills
 * every slot at construction; libsw creates the window on first use, so
 * "the existing bucket" is checked by asking twice. */
START_TEST(test_go_leap_array_bucket_start_check_normal) {
  const int64_t now = INT64_C(1596199310000);
  sw_leap_array *la = metric_array(20, 10000);
  sw_window w, again;
  ck_ok(sw_leap_array_current_window_at(la, now, &w));
  ck_assert_uint_eq(w.slot, 0);
  ck_ok(sw_leap_array_current_window_at(la, now + 801, &w));
  ck_assert_int_eq(w.start_ms, now + 500);
  ck_assert_uint_eq(w.slot, 1);
  ck_ok(sw_leap_array_current_window_at(la, now + 801, &again));
  ck_assert_ptr_eq(again.bucket, w.bucket);
  sw_leap_array_free(la);
}
END_TEST

/* The bucket of a window stays readable, with its counts, after its slot
 * was reset once (sw.h: valid for at least one interval after the window
 * stops being current). */
START_TEST(test_old_bucket_survives_one_reset) {
  sw_leap_array *la = metric_array(2, 1000);
  sw_window old, cur;
  ck_ok(sw_leap_array_current_window_at(la, T, &old));
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_PASS, 5));
  ck_ok(sw_leap_array_current_window_at(la, T + 1000, &cur)); /* same slot, reset */
  ck_assert_uint_eq(cur.slot, old.slot);
  ck_assert_int_eq(pass_of(la, cur.bucket), 0);
  ck_assert_int_eq(pass_of(la, old.bucket), 5);
  sw_leap_array_free(la);
}
END_TEST

/* ----------------------------------------------------------- valid head */

/* Java LeapArrayTest.testGetValidHead (mocked time starting at 0), with the
 * AtomicInteger bucket replaced by the counter type. */
START_TEST(test_java_leap_array_get_valid_head) {
  recorder r = {0};
  sw_leap_array *la = counter_array(&r, 10, 1000); /* W = 100 */
  sw_window expected1, expected2, w, head;
  int64_t now = 0;
  ck_ok(sw_leap_array_current_window_at(la, now, &expected1));
  CTR(expected1) += 1;
  now += 100;
  ck_ok(sw_leap_array_current_window_at(la, now, &expected2));
  CTR(expected2) += 2;
  for (int i = 0; i < 8; i++) {
    now += 100;
    ck_ok(sw_leap_array_current_window_at(la, now, &w));
    CTR(w) += i + 3;
  }
  ck_assert_int_eq(now, 900);
  ck_sw(sw_leap_array_valid_head_at(la, now, &head), 1);
  ck_assert_ptr_eq(head.bucket, expected1.bucket);
  ck_assert_int_eq(head.start_ms, 0);
  ck_assert_int_eq(CTR(head), 1);

  now += 100;
  ck_sw(sw_leap_array_valid_head_at(la, now, &head), 1);
  ck_assert_ptr_eq(head.bucket, expected2.bucket);
  ck_assert_int_eq(head.start_ms, 100);
  ck_assert_int_eq(CTR(head), 2);
  sw_leap_array_free(la);
}
END_TEST

START_TEST(test_valid_head_edges) {
  sw_leap_array *la = metric_array(4, 400); /* W = 100 */
  sw_window w;
  ck_sw(sw_leap_array_valid_head_at(la, 250, &w), 0); /* empty array */
  ck_ok(sw_leap_array_current_window_at(la, 300, &w)); /* slot 3 */
  /* The head of t is the slot of t + W: slot 3 for t in [200, 300). */
  /* Deliberate difference: the slot holds a window newer than t's (clock
   * behind). Java's getValidHead would return it (a future window is never
   * deprecated); it is not the head of the interval ending at t. */
  ck_sw(sw_leap_array_valid_head_at(la, 250, &w), 0);
  ck_sw(sw_leap_array_valid_head_at(la, 600, &w), 1); /* 600 - 300 = 300 <= 400 */
  ck_assert_int_eq(w.start_ms, 300);
  ck_sw(sw_leap_array_valid_head_at(la, 699, &w), 1);
  ck_sw(sw_leap_array_valid_head_at(la, 700, &w), 0);  /* head is slot 0: empty */
  /* Judged at t, not by the wall clock as Java's getValidHead does. */
  ck_sw(sw_leap_array_valid_head_at(la, 1000, &w), 0); /* 1000 - 300 > 400 */
  ck_sw(sw_leap_array_valid_head_at(la, -1, &w), SW_ETIME);
  ck_sw(sw_leap_array_valid_head_at(la, 0, NULL), SW_ENULL);
  ck_sw(sw_leap_array_valid_head_at(NULL, 0, &w), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* ---------------------------------------------------------- deprecation */

/* sentinel-golang Test_leapArray_isBucketDeprecated_normal. */
START_TEST(test_go_leap_array_is_bucket_deprecated_normal) {
  sw_leap_array *la = metric_array(20, 10000);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, INT64_C(1576296044907),
                                              INT64_C(1576296004907)),
        1);
  sw_leap_array_free(la);
}
END_TEST

START_TEST(test_deprecation_boundary) {
  sw_leap_array *la = metric_array(2, 1000);
  /* Strictly greater, as Java: exactly one interval old is not deprecated. */
  ck_sw(sw_leap_array_is_window_deprecated_at(la, T + 1000, T), 0);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, T + 1001, T), 1);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, T, T), 0);
  /* A future window is not deprecated (Java's signed difference; Go's
   * unsigned difference would call it deprecated). */
  ck_sw(sw_leap_array_is_window_deprecated_at(la, T, T + 5000), 0);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, 0, 0), 0);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, INT64_MAX, 0), 1);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, -1, 0), SW_ETIME);
  ck_sw(sw_leap_array_is_window_deprecated_at(NULL, 0, 0), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* start_ms is "any value, not checked" (docs/api.md), so a negative start at
 * a huge time must still get the right answer (deprecated: the difference
 * exceeds the interval) -- or SW_ETIME if negative starts become refused --
 * and never a signed overflow (UBSan reports one). */
START_TEST(test_deprecation_extreme_start) {
  sw_leap_array *la = metric_array(2, 1000);
  int rc = sw_leap_array_is_window_deprecated_at(la, INT64_MAX, -1);
  ck_assert_msg(rc == SW_ETIME || rc == 1, "got %d", rc);
  rc = sw_leap_array_is_window_deprecated_at(la, 0, INT64_MIN);
  ck_assert_msg(rc == SW_ETIME || rc == 1, "got %d", rc);
  sw_leap_array_free(la);
}
END_TEST

/* ----------------------------------------------------- previous window */

START_TEST(test_previous_window) {
  sw_leap_array *la = metric_array(4, 400); /* W = 100 */
  sw_window w, prev;
  ck_sw(sw_leap_array_previous_window_at(la, 0, &prev), 0);   /* no window before 0 */
  ck_sw(sw_leap_array_previous_window_at(la, 250, &prev), 0); /* slot empty */
  ck_ok(sw_leap_array_current_window_at(la, 150, &w));
  ck_ok(sw_leap_array_add_at(la, 150, SW_EVENT_PASS, 3));
  ck_sw(sw_leap_array_previous_window_at(la, 150, &prev), 0);
  ck_sw(sw_leap_array_previous_window_at(la, 200, &prev), 1);
  ck_assert_ptr_eq(prev.bucket, w.bucket);
  ck_assert_int_eq(prev.start_ms, 100);
  ck_sw(sw_leap_array_previous_window_at(la, 299, &prev), 1);
  ck_assert_int_eq(pass_of(la, prev.bucket), 3);
  /* The exact start is required: at 300 the previous window would start at
   * 200 and slot 2 is empty; at 600 it would start at 500 and slot 1 holds
   * 100 (Java: null as well, since 100 + W < 600 - W). */
  ck_sw(sw_leap_array_previous_window_at(la, 300, &prev), 0);
  ck_sw(sw_leap_array_previous_window_at(la, 600, &prev), 0);
  /* Deliberate difference: a newer window in the previous slot (the caller's
   * clock is behind) is not "previous". Java's getPreviousWindow(200) would
   * return the window of 500 (500 + W >= 200 - W, and not deprecated by the
   * wall clock). */
  ck_ok(sw_leap_array_current_window_at(la, 550, &w)); /* slot 1 := 500 */
  ck_sw(sw_leap_array_previous_window_at(la, 200, &prev), 0);
  ck_sw(sw_leap_array_previous_window_at(la, 600, &prev), 1);
  ck_assert_int_eq(prev.start_ms, 500);

  ck_sw(sw_leap_array_previous_window_at(la, -1, &prev), SW_ETIME);
  ck_sw(sw_leap_array_previous_window_at(la, 0, NULL), SW_ENULL);
  ck_sw(sw_leap_array_previous_window_at(NULL, 0, &prev), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* --------------------------------------------------------- window value */

START_TEST(test_window_value) {
  sw_leap_array *la = metric_array(4, 400); /* W = 100 */
  sw_window w, v;
  ck_sw(sw_leap_array_window_value_at(la, 150, &v), 0);
  ck_ok(sw_leap_array_current_window_at(la, 150, &w));
  ck_sw(sw_leap_array_window_value_at(la, 100, &v), 1); /* [100, 200) */
  ck_assert_ptr_eq(v.bucket, w.bucket);
  ck_assert_int_eq(v.start_ms, 100);
  ck_assert_uint_eq(v.slot, 1);
  ck_sw(sw_leap_array_window_value_at(la, 199, &v), 1);
  ck_sw(sw_leap_array_window_value_at(la, 200, &v), 0); /* half open */
  ck_sw(sw_leap_array_window_value_at(la, 99, &v), 0);
  /* Same slot, other window: not the window of t. */
  ck_sw(sw_leap_array_window_value_at(la, 550, &v), 0);
  ck_sw(sw_leap_array_window_value_at(la, -1, &v), SW_ETIME);
  ck_sw(sw_leap_array_window_value_at(la, 0, NULL), SW_ENULL);
  ck_sw(sw_leap_array_window_value_at(NULL, 0, &v), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* -------------------------------------------------------------- listing */

/* Five windows written into a ring of four (100 ms windows): the ring
 * wraps, so slot order (400, 500, 200, 300) differs from time order. */
static sw_leap_array *wrapped_ring(void) {
  sw_leap_array *la = metric_array(4, 400);
  for (int k = 1; k <= 5; k++) ck_ok(sw_leap_array_add_at(la, 100 * k, SW_EVENT_PASS, k));
  return la;
}

static void assert_starts(const sw_window *w, int n, const int64_t *starts) {
  for (int i = 0; i < n; i++) ck_assert_int_eq(w[i].start_ms, starts[i]);
}

START_TEST(test_list_oldest_first) {
  sw_leap_array *la = wrapped_ring();
  sw_window w[8];
  ck_sw(sw_leap_array_list_at(la, 500, w, 8), 4);
  assert_starts(w, 4, (const int64_t[]){200, 300, 400, 500});
  ck_assert_uint_eq(w[0].slot, 2);
  ck_assert_uint_eq(w[3].slot, 1);
  ck_assert_int_eq(pass_of(la, w[0].bucket), 2);
  ck_assert_int_eq(pass_of(la, w[3].bucket), 5);
  ck_sw(sw_leap_array_list_at(la, 599, w, 8), 4);
  ck_sw(sw_leap_array_list_all(la, w, 8), 4);
  assert_starts(w, 4, (const int64_t[]){200, 300, 400, 500});
  sw_leap_array_free(la);
}
END_TEST

/* Deliberate difference: list/values select starts in
 * [start(t) - interval + length, start(t)]. At t = 600 the window of 200
 * started exactly one interval ago: Java's values(600) without a refresh
 * keeps it (600 - 200 = 400 is not > 400) and returns 4 windows; Java's
 * readers refresh the current window first, which resets that very slot,
 * so what they actually read is the 3 windows libsw returns. */
START_TEST(test_list_excludes_window_one_interval_old) {
  sw_leap_array *la = wrapped_ring();
  sw_window w[8];
  void *b[8];
  ck_sw(sw_leap_array_list_at(la, 600, w, 8), 3);
  assert_starts(w, 3, (const int64_t[]){300, 400, 500});
  ck_sw(sw_leap_array_values_at(la, 600, b, 8), 3);
  ck_assert_int_eq(pass_of(la, b[0]), 3);
  ck_assert_int_eq(sum_of(la, 600, SW_EVENT_PASS), 3 + 4 + 5);
  /* ... but it is not deprecated, so the conditional listing keeps it. */
  ck_sw(sw_leap_array_is_window_deprecated_at(la, 600, 200), 0);
  ck_sw(sw_leap_array_values_on_condition_at(la, 600, NULL, NULL, b, 8), 4);
  ck_assert_int_eq(pass_of(la, b[0]), 2);
  /* list_all keeps every stored window whatever its age. */
  ck_sw(sw_leap_array_list_all(la, w, 8), 4);
  ck_assert_int_eq(w[0].start_ms, 200);
  sw_leap_array_free(la);
}
END_TEST

/* Deliberate difference: windows newer than start(t) are not in list_at(t)
 * (Java keeps them: a future window is not deprecated). The conditional
 * listing follows the deprecation rule and keeps them (sentinel-golang's
 * unsigned rule would drop them). */
START_TEST(test_list_excludes_future_windows) {
  sw_leap_array *la = wrapped_ring();
  sw_window w[8];
  void *b[8];
  ck_sw(sw_leap_array_list_at(la, 450, w, 8), 3);
  assert_starts(w, 3, (const int64_t[]){200, 300, 400});
  ck_assert_int_eq(sum_of(la, 450, SW_EVENT_PASS), 2 + 3 + 4);
  ck_sw(sw_leap_array_values_on_condition_at(la, 450, NULL, NULL, b, 8), 4);
  ck_assert_int_eq(pass_of(la, b[3]), 5);
  sw_leap_array_free(la);
}
END_TEST

/* cap smaller than the count: the full count is returned and the oldest cap
 * windows written; NULL out with cap 0 just counts. */
START_TEST(test_list_cap) {
  sw_leap_array *la = wrapped_ring();
  sw_window w[4];
  void *b[4];
  memset(w, 0, sizeof w);
  w[2].start_ms = -7;
  ck_sw(sw_leap_array_list_at(la, 500, w, 2), 4);
  assert_starts(w, 2, (const int64_t[]){200, 300});
  ck_assert_int_eq(w[2].start_ms, -7); /* untouched */
  ck_sw(sw_leap_array_list_all(la, w, 1), 4);
  ck_assert_int_eq(w[0].start_ms, 200);
  b[1] = (void *)&w;
  ck_sw(sw_leap_array_values_at(la, 500, b, 1), 4);
  ck_assert_int_eq(pass_of(la, b[0]), 2);
  ck_assert_ptr_eq(b[1], (void *)&w);
  ck_sw(sw_leap_array_values_on_condition_at(la, 500, NULL, NULL, b, 2), 4);
  ck_assert_int_eq(pass_of(la, b[1]), 3);

  ck_sw(sw_leap_array_list_at(la, 500, NULL, 0), 4);
  ck_sw(sw_leap_array_list_all(la, NULL, 0), 4);
  ck_sw(sw_leap_array_values_at(la, 500, NULL, 0), 4);
  ck_sw(sw_leap_array_values_on_condition_at(la, 500, NULL, NULL, NULL, 0), 4);
  ck_sw(sw_leap_array_list_at(la, 500, NULL, 1), SW_ENULL);
  ck_assert_str_eq(sw_last_error(), "out is NULL with cap=1");
  ck_sw(sw_leap_array_list_all(la, NULL, 1), SW_ENULL);
  ck_sw(sw_leap_array_values_at(la, 500, NULL, 1), SW_ENULL);
  ck_sw(sw_leap_array_values_on_condition_at(la, 500, NULL, NULL, NULL, 1), SW_ENULL);

  ck_sw(sw_leap_array_list_at(la, -1, w, 4), SW_ETIME);
  ck_sw(sw_leap_array_values_at(la, -1, b, 4), SW_ETIME);
  ck_sw(sw_leap_array_values_on_condition_at(la, -1, NULL, NULL, b, 4), SW_ETIME);
  ck_sw(sw_leap_array_list_at(NULL, 0, w, 4), SW_ENULL);
  ck_sw(sw_leap_array_list_all(NULL, w, 4), SW_ENULL);
  ck_sw(sw_leap_array_values_at(NULL, 0, b, 4), SW_ENULL);
  ck_sw(sw_leap_array_values_on_condition_at(NULL, 0, NULL, NULL, b, 4), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* More windows than fit the functions' stack buffers. */
START_TEST(test_list_large_ring) {
  sw_leap_array *la = metric_array(100, 10000); /* W = 100 */
  /* 130 windows: the last 100 survive, written out of slot order. */
  for (int k = 0; k < 130; k++) ck_ok(sw_leap_array_add_at(la, 100 * k, SW_EVENT_PASS, k));
  const int64_t t = 100 * 129;
  sw_window w[100];
  static void *b[100];
  ck_sw(sw_leap_array_list_at(la, t, w, 100), 100);
  for (int i = 0; i < 100; i++) ck_assert_int_eq(w[i].start_ms, 100 * (30 + i));
  ck_sw(sw_leap_array_values_at(la, t, b, 100), 100);
  for (int i = 0; i < 100; i++) ck_assert_int_eq(pass_of(la, b[i]), 30 + i);
  ck_sw(sw_leap_array_values_at(la, t, b, 70), 100);
  ck_assert_int_eq(pass_of(la, b[69]), 99);
  ck_sw(sw_leap_array_list_all(la, w, 100), 100);
  ck_assert_int_eq(w[99].start_ms, t);
  ck_assert_int_eq(sum_of(la, t, SW_EVENT_PASS), (30 + 129) * 100 / 2);
  sw_leap_array_free(la);
}
END_TEST

/* sentinel-golang Test_leapArray_valuesWithTime_normal: windows starting at
 * 1576296040000 + 500k (k = 0..19) are all in the interval ending at
 * 1576296049907 (the oldest is 9907 ms old). */
START_TEST(test_go_leap_array_values_with_time_normal) {
  const int64_t base = INT64_C(1576296040000);
  sw_leap_array *la = metric_array(20, 10000);
  for (int k = 0; k < 20; k++) ck_ok(sw_leap_array_add_at(la, base + 500 * k, SW_EVENT_PASS, k));
  void *b[20];
  sw_window all[20];
  ck_sw(sw_leap_array_values_at(la, INT64_C(1576296049907), b, 20), 20);
  ck_sw(sw_leap_array_list_all(la, all, 20), 20);
  for (int k = 0; k < 20; k++) {
    ck_assert_ptr_eq(b[k], all[k].bucket); /* only buckets of the array */
    ck_assert_int_eq(all[k].start_ms, base + 500 * k);
    ck_assert_uint_eq(all[k].slot, (uint32_t)k);
    ck_assert_int_eq(pass_of(la, b[k]), k);
  }
  sw_leap_array_free(la);
}
END_TEST

static int start_at_least(int64_t start, void *user) { return start >= *(int64_t *)user; }

START_TEST(test_values_on_condition) {
  sw_leap_array *la = wrapped_ring();
  void *b[8];
  int64_t min = 300;
  ck_sw(sw_leap_array_values_on_condition_at(la, 500, start_at_least, &min, b, 8), 3);
  ck_assert_int_eq(pass_of(la, b[0]), 3);
  ck_assert_int_eq(pass_of(la, b[2]), 5);
  min = 1000;
  ck_sw(sw_leap_array_values_on_condition_at(la, 500, start_at_least, &min, b, 8), 0);
  /* At 800 only windows at most one interval old remain: 400 and 500. */
  ck_sw(sw_leap_array_values_on_condition_at(la, 800, NULL, NULL, b, 8), 2);
  ck_assert_int_eq(pass_of(la, b[0]), 4);
  sw_leap_array_free(la);
}
END_TEST

/* --------------------------------------------------- generic add / sum */

START_TEST(test_generic_add_sum_metric) {
  sw_leap_array *la = metric_array(2, 1000);
  const sw_bucket_type *type = sw_leap_array_type(la);
  ck_assert_uint_eq(type->field_count, SW_FIELD_MIN_RT + 1);
  ck_assert_str_eq(type->field_names[SW_EVENT_PASS], "pass");
  ck_assert_str_eq(type->field_names[SW_FIELD_MIN_RT], "min_rt");
  ck_assert_uint_eq(type->field_kinds[SW_FIELD_MIN_RT], SW_FIELD_MIN);

  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_PASS, 3));
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_BLOCK, 1));
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_RT, 40)); /* addRT: sum and min */
  ck_ok(sw_leap_array_add_at(la, T + 500, SW_EVENT_PASS, 2));
  ck_ok(sw_leap_array_add_at(la, T + 500, SW_EVENT_RT, 25));
  ck_assert_int_eq(sum_of(la, T + 500, SW_EVENT_PASS), 5);
  ck_assert_int_eq(sum_of(la, T + 500, SW_EVENT_BLOCK), 1);
  ck_assert_int_eq(sum_of(la, T + 500, SW_EVENT_RT), 65);
  ck_assert_int_eq(sum_of(la, T + 500, SW_FIELD_MIN_RT), 25); /* min, not sum */
  ck_assert_int_eq(sum_of(la, T, SW_EVENT_PASS), 3);          /* T + 500 is future at T */
  ck_assert_int_eq(sum_of(la, T, SW_FIELD_MIN_RT), 40);
  ck_assert_int_eq(sum_of(la, T + 1000, SW_EVENT_PASS), 2);
  ck_assert_int_eq(sum_of(la, T + 5000, SW_EVENT_PASS), 0);

  int64_t v;
  ck_sw(sw_leap_array_add_at(la, T, SW_FIELD_MIN_RT + 1, 1), SW_ERANGE);
  ck_assert_str_eq(sw_last_error(), "field=8, bucket type sw.metric has 8 fields");
  ck_sw(sw_leap_array_sum_at(la, T, SW_FIELD_MIN_RT + 1, &v), SW_ERANGE);
  ck_sw(sw_leap_array_sum_at(la, T, SW_EVENT_PASS, NULL), SW_ENULL);
  ck_sw(sw_leap_array_add_at(la, -1, SW_EVENT_PASS, 1), SW_ETIME);
  ck_sw(sw_leap_array_sum_at(la, -1, SW_EVENT_PASS, &v), SW_ETIME);
  ck_sw(sw_leap_array_add_at(NULL, T, SW_EVENT_PASS, 1), SW_ENULL);
  ck_sw(sw_leap_array_sum_at(NULL, T, SW_EVENT_PASS, &v), SW_ENULL);
  sw_leap_array_free(la);
}
END_TEST

/* A generic add to the min_rt field lowers the window's min RT only; an
 * add to the rt field adds to the sum and lowers the minimum. */
START_TEST(test_generic_add_min_rt_field) {
  sw_leap_array *la = metric_array(2, 1000);
  ck_assert_int_eq(sum_of(la, T, SW_FIELD_MIN_RT), 0); /* MIN over no window: 0 */
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_RT, 40));
  ck_ok(sw_leap_array_add_at(la, T, SW_FIELD_MIN_RT, 7));
  ck_assert_int_eq(sum_of(la, T, SW_FIELD_MIN_RT), 7);
  ck_assert_int_eq(sum_of(la, T, SW_EVENT_RT), 40);
  ck_sw(sw_leap_array_add_at(la, T, SW_EVENT_PASS, -7), SW_ERANGE);
  ck_sw(sw_leap_array_add_at(la, T, SW_EVENT_PASS, (int64_t)INT32_MAX + 1), SW_ERANGE);
  sw_leap_array_free(la);
}
END_TEST

START_TEST(test_generic_add_sum_plugin_types) {
  recorder r = {0};
  sw_leap_array *la = counter_array(&r, 4, 400);
  ck_ok(sw_leap_array_add_at(la, 100, 0, 2));
  ck_ok(sw_leap_array_add_at(la, 250, 0, 3));
  ck_assert_int_eq(sum_of(la, 250, 0), 5); /* field_kinds NULL: all SUM */
  ck_sw(sw_leap_array_add_at(la, 100, 1, 1), SW_ERANGE);

  /* A type without fields. */
  sw_bucket_type bare = counter_type;
  bare.name = "test.bare";
  bare.field_count = 0;
  bare.field_names = NULL;
  bare.add = NULL;
  bare.get = NULL;
  sw_leap_array *lb = NULL;
  int64_t v;
  ck_ok(sw_leap_array_create(&lb, &bare, &r, 4, 400));
  ck_sw(sw_leap_array_add_at(lb, 100, 0, 1), SW_ENOTSUP);
  ck_assert_str_eq(sw_last_error(), "bucket type test.bare has no fields");
  ck_sw(sw_leap_array_sum_at(lb, 100, 0, &v), SW_ENOTSUP);
  sw_leap_array_free(lb);
  sw_leap_array_free(la);
}
END_TEST

/* ---------------------------------------------------------- edge cases */

/* Exactly one interval after a window's start is the same slot: the
 * window is reset, and the old one leaves every reading. */
START_TEST(test_boundary_one_interval) {
  sw_leap_array *la = metric_array(2, 1000);
  sw_window w;
  const int64_t s = T - 123; /* start of T's window, a multiple of 500 */
  ck_ok(sw_leap_array_add_at(la, s, SW_EVENT_PASS, 4));
  ck_assert_int_eq(sum_of(la, s + 999, SW_EVENT_PASS), 4); /* interval [s, s + 1000) */
  ck_assert_int_eq(sum_of(la, s + 500, SW_EVENT_PASS), 4);
  /* t - start == interval: s is neither listed nor summed (see the
   * deliberate difference above), and not deprecated either. */
  ck_assert_int_eq(sum_of(la, s + 1000, SW_EVENT_PASS), 0);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, s + 1000, s), 0);
  ck_ok(sw_leap_array_current_window_at(la, s + 1000, &w));
  ck_assert_int_eq(w.start_ms, s + 1000);
  ck_assert_int_eq(pass_of(la, w.bucket), 0);
  ck_sw(sw_leap_array_list_all(la, NULL, 0), 1);
  sw_leap_array_free(la);
}
END_TEST

START_TEST(test_gap_of_many_intervals) {
  sw_leap_array *la = metric_array(2, 1000);
  sw_window w[4], prev;
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_PASS, 3));        /* slot 0 */
  ck_ok(sw_leap_array_add_at(la, T + 500, SW_EVENT_PASS, 5));  /* slot 1 */
  const int64_t later = T + 1000 * 1000;                       /* slot 0 again */
  ck_ok(sw_leap_array_add_at(la, later, SW_EVENT_PASS, 7));
  ck_assert_int_eq(sum_of(la, later, SW_EVENT_PASS), 7);
  ck_sw(sw_leap_array_list_at(la, later, w, 4), 1);
  ck_assert_int_eq(w[0].start_ms, later - 123);
  ck_sw(sw_leap_array_previous_window_at(la, later, &prev), 0); /* slot 1 is ancient */
  ck_sw(sw_leap_array_valid_head_at(la, later, &prev), 0);
  ck_sw(sw_leap_array_list_all(la, w, 4), 2);
  ck_assert_int_eq(w[0].start_ms, T + 500 - 123);
  ck_assert_int_eq(w[1].start_ms, later - 123);
  ck_assert_int_eq(sum_of(la, later + 500, SW_EVENT_PASS), 7);
  ck_assert_int_eq(sum_of(la, later + 1000, SW_EVENT_PASS), 0);
  sw_leap_array_free(la);
}
END_TEST

/* The clock goes backwards by one interval: writes go to detached windows,
 * are counted, and leave the stored window alone. */
START_TEST(test_clock_backwards) {
  sw_leap_array *la = metric_array(2, 1000);
  sw_window w;
  ck_ok(sw_leap_array_add_at(la, T + 1000, SW_EVENT_PASS, 2));
  ck_ok(sw_leap_array_add_at(la, T, SW_EVENT_PASS, 100)); /* slot holds T + 1000's window */
  ck_assert_int_eq(sw_leap_array_detached_count(la), 1);
  ck_ok(sw_leap_array_current_window_at(la, T, &w));
  ck_assert_uint_eq(w.flags, SW_WINDOW_DETACHED);
  ck_assert_int_eq(w.start_ms, T - 123);
  ck_assert_int_eq(pass_of(la, w.bucket), 0);
  ck_assert_int_eq(sw_metric_bucket_get(la, w.bucket, SW_FIELD_MIN_RT), 5000);
  ck_assert_int_eq(sw_leap_array_detached_count(la), 2);
  ck_assert_int_eq(sum_of(la, T + 1000, SW_EVENT_PASS), 2);
  ck_assert_int_eq(sum_of(la, T, SW_EVENT_PASS), 0); /* the window of T is not stored */
  ck_ok(sw_leap_array_current_window_at(la, T + 1000, &w));
  ck_assert_uint_eq(w.flags, 0);
  ck_assert_int_eq(pass_of(la, w.bucket), 2);
  /* A slot the newer time never reached is an ordinary older window. */
  ck_ok(sw_leap_array_add_at(la, T + 500, SW_EVENT_PASS, 1));
  ck_assert_int_eq(sw_leap_array_detached_count(la), 2);
  ck_assert_int_eq(sum_of(la, T + 1000, SW_EVENT_PASS), 3);
  sw_leap_array_free(la);
}
END_TEST

/* Time 0 is a valid time, as in Java (sentinel-golang refuses now <= 0). */
START_TEST(test_time_zero) {
  sw_leap_array *la = metric_array(2, 1000);
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, 0, &w));
  ck_assert_int_eq(w.start_ms, 0);
  ck_assert_uint_eq(w.slot, 0);
  ck_assert_uint_eq(w.flags, 0);
  ck_ok(sw_leap_array_add_at(la, 0, SW_EVENT_PASS, 1));
  ck_assert_int_eq(sum_of(la, 0, SW_EVENT_PASS), 1);
  ck_sw(sw_leap_array_list_at(la, 0, NULL, 0), 1);
  ck_sw(sw_leap_array_previous_window_at(la, 0, &w), 0);
  ck_sw(sw_leap_array_valid_head_at(la, 0, &w), 0);
  ck_sw(sw_leap_array_window_value_at(la, 0, &w), 1);
  ck_sw(sw_leap_array_previous_window_at(la, 500, &w), 1);
  ck_assert_int_eq(w.start_ms, 0);
  sw_leap_array_free(la);
}
END_TEST

/* Times near INT64_MAX: no overflow in index, start or any lookup. */
START_TEST(test_huge_times) {
  const int64_t t = INT64_MAX - 5, s = INT64_C(9223372036854775500);
  sw_leap_array *la = metric_array(2, 1000); /* W = 500 */
  int32_t idx;
  int64_t start;
  sw_window w, v;
  ck_ok(sw_leap_array_time_index(la, t, &idx));
  ck_assert_int_eq(idx, 1);
  ck_ok(sw_leap_array_window_start(la, t, &start));
  ck_assert_int_eq(start, s);
  ck_ok(sw_leap_array_window_start(la, INT64_MAX, &start));
  ck_assert_int_eq(start, s);

  ck_ok(sw_leap_array_current_window_at(la, t, &w));
  ck_assert_int_eq(w.start_ms, s);
  ck_assert_uint_eq(w.slot, 1);
  ck_ok(sw_leap_array_add_at(la, t, SW_EVENT_PASS, 2));
  ck_ok(sw_leap_array_add_at(la, INT64_MAX, SW_EVENT_PASS, 1)); /* same window */
  ck_assert_int_eq(sum_of(la, t, SW_EVENT_PASS), 3);
  ck_sw(sw_leap_array_window_value_at(la, INT64_MAX, &v), 1);
  ck_assert_ptr_eq(v.bucket, w.bucket);
  ck_sw(sw_leap_array_list_at(la, INT64_MAX, NULL, 0), 1);
  ck_sw(sw_leap_array_previous_window_at(la, t, &v), 0);
  ck_ok(sw_leap_array_add_at(la, t - 500, SW_EVENT_PASS, 4)); /* slot 0, the window before */
  ck_sw(sw_leap_array_previous_window_at(la, t, &v), 1);
  ck_assert_int_eq(v.start_ms, s - 500);
  ck_sw(sw_leap_array_valid_head_at(la, t, &v), 1);
  ck_assert_int_eq(v.start_ms, s - 500);
  ck_assert_int_eq(sum_of(la, INT64_MAX, SW_EVENT_PASS), 7);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, INT64_MAX, 0), 1);
  ck_sw(sw_leap_array_is_window_deprecated_at(la, t, s - 500), 0);

  sw_leap_array *lb = metric_array(20, 10000);
  ck_ok(sw_leap_array_time_index(lb, t, &idx));
  ck_assert_int_eq(idx, 11);
  ck_ok(sw_leap_array_add_at(lb, t, SW_EVENT_PASS, 1));
  ck_assert_int_eq(sum_of(lb, INT64_MAX, SW_EVENT_PASS), 1);
  sw_leap_array_free(lb);
  sw_leap_array_free(la);
}
END_TEST

/* One window covering the whole interval. */
START_TEST(test_sample_count_one) {
  sw_leap_array *la = metric_array(1, 1000);
  sw_window w;
  int32_t idx;
  ck_assert_int_eq(sw_leap_array_window_length_ms(la), 1000);
  ck_ok(sw_leap_array_time_index(la, T, &idx));
  ck_assert_int_eq(idx, 0);
  ck_ok(sw_leap_array_add_at(la, 500, SW_EVENT_PASS, 1));
  ck_assert_int_eq(sum_of(la, 999, SW_EVENT_PASS), 1);
  /* At 1000 the stored window (start 0) is the previous one, exactly one
   * interval old: not deprecated (Java gives the same), but not listed. */
  ck_sw(sw_leap_array_previous_window_at(la, 1000, &w), 1);
  ck_assert_int_eq(w.start_ms, 0);
  ck_sw(sw_leap_array_previous_window_at(la, 1001, &w), 0);
  ck_sw(sw_leap_array_list_at(la, 1000, NULL, 0), 0);
  ck_ok(sw_leap_array_add_at(la, 1500, SW_EVENT_PASS, 2)); /* reset */
  ck_assert_int_eq(sum_of(la, 1500, SW_EVENT_PASS), 2);
  ck_sw(sw_leap_array_previous_window_at(la, 1500, &w), 0);
  ck_sw(sw_leap_array_valid_head_at(la, 1500, &w), 1); /* the head is the only window */
  ck_assert_int_eq(w.start_ms, 1000);
  ck_ok(sw_leap_array_add_at(la, 700, SW_EVENT_PASS, 9)); /* behind: detached */
  ck_assert_int_eq(sw_leap_array_detached_count(la), 1);
  ck_assert_int_eq(sum_of(la, 1999, SW_EVENT_PASS), 2);
  sw_leap_array_free(la);
}
END_TEST

/* ------------------------------------------------- clock-reading twins */

static int64_t fake_now;
static int64_t fake_clock(void *user) { return *(int64_t *)user; }

/* The functions without _at read the process clock: drive it by hand. */
START_TEST(test_clock_twins) {
  sw_leap_array *la = metric_array(4, 400);
  sw_window w[4], one;
  void *b[4];
  ck_ok(sw_clock_set_custom(fake_clock, &fake_now));
  fake_now = 150;
  ck_ok(sw_leap_array_current_window(la, &one));
  ck_assert_int_eq(one.start_ms, 100);
  ck_ok(sw_leap_array_add(la, SW_EVENT_PASS, 2));
  fake_now = 250;
  ck_ok(sw_leap_array_add(la, SW_EVENT_PASS, 3));
  ck_sw(sw_leap_array_previous_window(la, &one), 1);
  ck_assert_int_eq(one.start_ms, 100);
  ck_sw(sw_leap_array_list(la, w, 4), 2);
  ck_assert_int_eq(w[0].start_ms, 100);
  ck_sw(sw_leap_array_values(la, b, 4), 2);
  ck_assert_int_eq(pass_of(la, b[1]), 3);
  fake_now = 400;
  ck_sw(sw_leap_array_valid_head(la, &one), 1);
  ck_assert_int_eq(one.start_ms, 100);
  ck_ok(sw_clock_set_custom(NULL, NULL));
  sw_leap_array_free(la);
}
END_TEST

/* The slot protocol: a reader that loaded seq1 and finds seq2 afterwards
 * may have read a rewritten body once a second reset has started preparing
 * it: (seq1 | 1) + 2 and later. One reset (its own body untouched) is fine. */
START_TEST(test_torn_read_rule) {
  ck_assert(!sw__la_torn(2, 2));
  ck_assert(!sw__la_torn(2, 3)); /* a reset prepares the other body */
  ck_assert(!sw__la_torn(2, 4)); /* published: ours is now the retired body */
  ck_assert(sw__la_torn(2, 5));  /* the next reset prepares ours */
  ck_assert(sw__la_torn(2, 6));
  ck_assert(!sw__la_torn(3, 4)); /* loaded while preparing: the active body was ours */
  ck_assert(sw__la_torn(3, 5));
}
END_TEST

int main(void) {
  Suite *s = suite_create("leap_array");
  SW_TCASE(s, "construction", test_create_validation, test_create_by_name_null_name,
           test_create_overflow,
           test_create_bad_vtable, test_go_new_leap_array);
  SW_TCASE(s, "time", test_go_leap_array_calculate_time_idx_normal,
           test_go_calculate_start_time_normal, test_time_index_and_window_start);
  SW_TCASE(s, "current_window", test_current_window_four_cases,
           test_go_leap_array_bucket_start_check_normal, test_old_bucket_survives_one_reset);
  SW_TCASE(s, "lookups", test_java_leap_array_get_valid_head, test_valid_head_edges,
           test_go_leap_array_is_bucket_deprecated_normal, test_deprecation_boundary,
           test_deprecation_extreme_start, test_previous_window, test_window_value);
  SW_TCASE(s, "listing", test_list_oldest_first, test_list_excludes_window_one_interval_old,
           test_list_excludes_future_windows, test_list_cap, test_list_large_ring,
           test_go_leap_array_values_with_time_normal, test_values_on_condition);
  SW_TCASE(s, "fields", test_generic_add_sum_metric, test_generic_add_min_rt_field,
           test_generic_add_sum_plugin_types);
  SW_TCASE(s, "protocol", test_torn_read_rule);
  SW_TCASE(s, "edges", test_boundary_one_interval, test_gap_of_many_intervals,
           test_clock_backwards, test_time_zero, test_huge_times, test_sample_count_one,
           test_clock_twins);
  return sw_test_run(s);
}
