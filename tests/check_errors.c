/* SPDX-License-Identifier: Apache-2.0 */
/* Errors, version, options and the clock. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>
#include <time.h>

#include "testutil.h"

START_TEST(test_strerror_table) {
  ck_assert_str_eq(sw_strerror(SW_OK), "success");
  ck_assert_str_eq(sw_strerror(SW_EINVAL), "invalid argument");
  ck_assert_str_eq(sw_err_name(SW_ESIZE), "SW_ESIZE");
  ck_assert_str_eq(sw_err_name(SW_ETYPE), "SW_ETYPE");
  ck_assert_str_eq(sw_strerror(-9999), "unknown error");
  ck_assert_str_eq(sw_err_name(12345), "SW_UNKNOWN");
  /* Every code of the table has a distinct name and a message. */
#define CHECK_CODE(name, value, msg)                       \
  ck_assert_int_eq(SW_##name, value);                      \
  ck_assert_str_eq(sw_strerror(value), msg);               \
  ck_assert_str_eq(sw_err_name(value), "SW_" #name);
  SW_ERRNO_MAP(CHECK_CODE)
#undef CHECK_CODE
}
END_TEST

START_TEST(test_version) {
  ck_assert_uint_eq(sw_version(), SW_VERSION_HEX);
  ck_assert_str_eq(sw_version_string(), SW_VERSION_STRING);
  ck_assert_uint_eq(SW_VERSION_HEX >> 16, SW_VERSION_MAJOR);
}
END_TEST

START_TEST(test_options) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  int64_t v;
  double lo, hi, def;
  ck_ok(sw_options_get(o, SW_OPT_STRIPES, &v));
  ck_assert_int_eq(v, 4);
  ck_ok(sw_option_bounds(SW_OPT_MAX_RT_MS, &lo, &hi, &def));
  ck_assert_double_eq(def, 5000);
  ck_assert_double_eq(lo, 1);
  ck_ok(sw_options_set(o, SW_OPT_STRIPES, 8));
  ck_sw(sw_options_set(o, SW_OPT_STRIPES, 3), SW_ERANGE);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "SW_OPT_STRIPES=3"));
  ck_sw(sw_options_set(o, SW_OPT_STRIPES, 128), SW_ERANGE);
  ck_sw(sw_options_set(o, SW_OPT_OCCUPIABLE, 2), SW_ERANGE);
  ck_sw(sw_options_set(o, SW_OPT_MAX_RT_MS, 0), SW_ERANGE);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "SW_OPT_MAX_RT_MS=0"));
  ck_sw(sw_options_set(o, (sw_option)999, 1), SW_EINVAL);
  ck_sw(sw_options_set(NULL, SW_OPT_STRIPES, 1), SW_ENULL);
  ck_sw(sw_options_get(o, SW_OPT_STRIPES, NULL), SW_ENULL);
  ck_ok(sw_options_get(o, SW_OPT_STRIPES, &v));
  ck_assert_int_eq(v, 8); /* the failed sets left it alone */
  ck_ok(sw_options_get(NULL, SW_OPT_OCCUPIABLE, &v)); /* NULL options: defaults */
  ck_assert_int_eq(v, 0);
  ck_assert_str_eq(sw_option_name(SW_OPT_OCCUPIABLE), "SW_OPT_OCCUPIABLE");
  ck_assert_ptr_null(sw_option_name((sw_option)0));
  sw_options_free(o);
  sw_options_free(NULL);
}
END_TEST

static int64_t fake_now = 42;
static int64_t fake_clock(void *user) { return *(int64_t *)user; }

START_TEST(test_clock) {
  int64_t a = sw_now_ms(), b = sw_now_ms();
  ck_assert_int_ge(a, 0);
  ck_assert_int_ge(b, a);
  ck_ok(sw_clock_use(SW_CLOCK_MONOTONIC_COARSE));
  ck_assert_int_ge(sw_now_ms(), 0);
  ck_ok(sw_clock_use(SW_CLOCK_MONOTONIC));
  ck_sw(sw_clock_use(7), SW_EINVAL);
  ck_ok(sw_clock_set_custom(fake_clock, &fake_now));
  ck_assert_int_eq(sw_now_ms(), 42);
  fake_now = 1000;
  ck_assert_int_eq(sw_now_ms(), 1000);
  ck_assert_int_eq(sw_now_ns(), INT64_C(1000000000)); /* durations follow a custom clock */
  ck_assert_int_eq(sw_clock_resolution_ns(), 1000000);
  fake_now = INT64_MAX / 1000;
  ck_assert_int_eq(sw_now_ns(), INT64_MAX); /* saturates */
  ck_ok(sw_clock_set_custom(NULL, NULL));
  ck_assert_int_ge(sw_now_ms(), b);
  ck_ok(sw_clock_use(SW_CLOCK_DEFAULT));
}
END_TEST

/* The default: windows on the coarse clock (its resolution is the tick),
 * which never runs ahead of the precise one; durations precise. */
START_TEST(test_default_clock_split) {
  struct timespec res;
  ck_assert_int_eq(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
  int64_t tick = res.tv_sec * INT64_C(1000000000) + res.tv_nsec;
  ck_assert_int_eq(sw_clock_resolution_ns(), tick > 1000000 ? tick : 1000000);
  for (int i = 0; i < 1000; i++) {
    int64_t ms = sw_now_ms(), after = sw_now_ns();
    ck_assert_int_le(ms, after / 1000000);
  }
  /* the duration clock resolves below a millisecond */
  int64_t a = sw_now_ns(), b;
  while ((b = sw_now_ns()) == a) {
  }
  ck_assert_int_lt(b - a, 1000000);
  ck_ok(sw_clock_use(SW_CLOCK_MONOTONIC));
  ck_assert_int_eq(sw_clock_resolution_ns(), 1000000);
  ck_ok(sw_clock_use(SW_CLOCK_DEFAULT));
}
END_TEST

START_TEST(test_last_error_names_the_value) {
  sw_leap_array *la;
  ck_sw(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 3, 1000), SW_ESIZE);
  ck_assert_str_eq(sw_last_error(), "sample_count=3 does not divide interval_ms=1000");
  ck_assert_ptr_null(la);
}
END_TEST

int main(void) {
  Suite *s = suite_create("errors");
  SW_TCASE(s, "core", test_strerror_table, test_version, test_options, test_clock,
           test_default_clock_split,
           test_last_error_names_the_value);
  return sw_test_run(s);
}
