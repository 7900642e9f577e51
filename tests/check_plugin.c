/* SPDX-License-Identifier: Apache-2.0 */
/* The bucket-type registry and the plugin loader. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#ifndef SW_PLUGIN_DIR
#error "SW_PLUGIN_DIR must name the directory of the built test plugins"
#endif
#define PLUGIN(name) SW_PLUGIN_DIR "/" name ".so"

START_TEST(test_load_histogram_template) {
  uint32_t n = 0;
  ck_ok(sw_plugin_load(SW_HISTOGRAM_PATH, &n));
  ck_assert_uint_eq(n, 1);
  const sw_bucket_type *t = sw_bucket_type_find("example.histogram");
  ck_assert_ptr_nonnull(t);
  ck_assert_uint_eq(t->field_count, 16);
  ck_assert_str_eq(t->field_names[3], "le7ms");

  sw_leap_array *la;
  ck_ok(sw_leap_array_create_by_name(&la, "example.histogram", NULL, 10, 1000));
  /* latencies 0, 5, 5, 100 ms in one window; 6 ms in the next */
  ck_ok(sw_leap_array_add_at(la, 1000, 0, 0));
  ck_ok(sw_leap_array_add_at(la, 1010, 0, 5));
  ck_ok(sw_leap_array_add_at(la, 1020, 0, 5));
  ck_ok(sw_leap_array_add_at(la, 1030, 0, 100));
  ck_ok(sw_leap_array_add_at(la, 1100, 0, 6));
  int64_t v;
  ck_ok(sw_leap_array_sum_at(la, 1100, 0, &v));
  ck_assert_int_eq(v, 1); /* le0ms */
  ck_ok(sw_leap_array_sum_at(la, 1100, 3, &v));
  ck_assert_int_eq(v, 3); /* le7ms: 5, 5, 6 */
  ck_ok(sw_leap_array_sum_at(la, 1100, 7, &v));
  ck_assert_int_eq(v, 1); /* le127ms: 100 */
  ck_ok(sw_leap_array_sum_at(la, 2050, 3, &v));
  ck_assert_int_eq(v, 1); /* a second later only the 1100 window is left */
  ck_sw(sw_leap_array_sum_at(la, 1100, 16, &v), SW_ERANGE);
  sw_leap_array_free(la);

  /* Loading it again registers nothing: the name is taken. */
  ck_sw(sw_plugin_load(SW_HISTOGRAM_PATH, &n), SW_EEXIST);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "example.histogram"));
}
END_TEST

START_TEST(test_load_failures) {
  uint32_t n = 7;
  ck_sw(sw_plugin_load("/nonexistent/plugin.so", &n), SW_EPLUGIN);
  ck_assert_uint_eq(n, 0);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "/nonexistent/plugin.so"));
  ck_sw(sw_plugin_load("libc.so.6", NULL), SW_EPLUGIN);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "does not export sw_plugin_entry"));
  ck_sw(sw_plugin_load(NULL, NULL), SW_ENULL);

  ck_sw(sw_plugin_load(PLUGIN("bad_major"), &n), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "ABI version 2.0"));
  ck_assert_ptr_null(sw_bucket_type_find("test.bad_major"));

  ck_sw(sw_plugin_load(PLUGIN("small_struct"), &n), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "struct_size=16"));

  ck_sw(sw_plugin_load(PLUGIN("refuse"), &n), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "refused host ABI"));
}
END_TEST

START_TEST(test_old_minimal_plugin) {
  /* A 1.0 plugin that knows only the required members: what lies beyond its
   * struct_size is garbage and must read as absent. */
  ck_ok(sw_plugin_load(PLUGIN("old_minimal"), NULL));
  const sw_bucket_type *t = sw_bucket_type_find("test.old_minimal");
  ck_assert_ptr_nonnull(t);
  ck_assert_ptr_null(t->is_window_deprecated);
  ck_assert_uint_eq(t->field_count, 0);
  sw_leap_array *la;
  ck_ok(sw_leap_array_create(&la, t, NULL, 2, 1000));
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, 1234, &w));
  ck_assert_int_eq(*(int64_t *)w.bucket, 1234); /* new_empty_bucket got the time */
  ck_ok(sw_leap_array_current_window_at(la, 2234, &w));
  ck_assert_int_eq(*(int64_t *)w.bucket, 2000); /* reset_window_to got the start */
  /* no deprecation member: Sentinel's rule, t - start > interval */
  ck_assert_int_eq(sw_leap_array_is_window_deprecated_at(la, 3000, 2000), 0);
  ck_assert_int_eq(sw_leap_array_is_window_deprecated_at(la, 3001, 2000), 1);
  ck_sw(sw_leap_array_add_at(la, 2234, 0, 1), SW_ENOTSUP);
  sw_leap_array_free(la);
}
END_TEST

static void nop_new(void *ctx, void *b, int64_t t) {}
static void nop_reset(void *ctx, sw_window *w, int64_t s) {}

static sw_bucket_type good_type(const char *name) {
  sw_bucket_type t = {.abi_version = SW_PLUGIN_ABI_VERSION,
                      .struct_size = sizeof(sw_bucket_type),
                      .name = name,
                      .bucket_size = 16,
                      .bucket_align = 8,
                      .new_empty_bucket = nop_new,
                      .reset_window_to = nop_reset};
  return t;
}

START_TEST(test_register_validation) {
  sw_bucket_type t = good_type("test.v");
  t.abi_version = SW_PLUGIN_ABI_VERSION + (1u << 16);
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  t = good_type("test.v");
  t.abi_version = SW_PLUGIN_ABI_VERSION + 5; /* a newer minor is fine */
  ck_ok(sw_bucket_type_register(&t));
  t = good_type("test.v2");
  t.bucket_size = 0;
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  ck_assert_str_eq(sw_last_error(), "bucket type test.v2: bucket_size=0 is not in 1..65536");
  t.bucket_size = SW_BUCKET_SIZE_MAX + 1;
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  t = good_type("test.v2");
  t.bucket_align = 3;
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  t.bucket_align = 128;
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  t = good_type("test.v2");
  t.reset_window_to = NULL;
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  t = good_type("test.v2");
  t.field_count = 2;
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "field_count=2 needs add and get"));
  t = good_type("");
  ck_sw(sw_bucket_type_register(&t), SW_EABI);
  t = good_type("sw.mine");
  ck_sw(sw_bucket_type_register(&t), SW_EINVAL);
  ck_sw(sw_bucket_type_register(NULL), SW_ENULL);
  t = good_type("test.v");
  ck_sw(sw_bucket_type_register(&t), SW_EEXIST);
  ck_assert_ptr_null(sw_bucket_type_find("test.v2"));
  ck_assert_ptr_null(sw_bucket_type_find(NULL));
  ck_assert_ptr_null(sw_bucket_type_find("no.such.type"));
  ck_assert_str_eq(sw_last_error(), "no bucket type named no.such.type");
  sw_leap_array *la;
  ck_sw(sw_leap_array_create_by_name(&la, "no.such.type", NULL, 2, 1000), SW_ENOTFOUND);
}
END_TEST

START_TEST(test_builtins_registered) {
  ck_assert_ptr_nonnull(sw_bucket_type_find(SW_TYPE_METRIC));
  ck_assert_ptr_nonnull(sw_bucket_type_find(SW_TYPE_METRIC_OCCUPIABLE));
  const sw_bucket_type *f = sw_bucket_type_find(SW_TYPE_METRIC_FUTURE);
  ck_assert_ptr_nonnull(f);
  ck_assert_ptr_nonnull(f->is_window_deprecated);
}
END_TEST

START_TEST(test_registry_full) {
  static char names[200][16];
  int rc = SW_OK, i;
  for (i = 0; i < 200 && rc == SW_OK; i++) {
    snprintf(names[i], sizeof names[i], "test.r%d", i);
    sw_bucket_type t = good_type(names[i]);
    rc = sw_bucket_type_register(&t);
  }
  ck_sw(rc, SW_EFULL);
  /* The three built-ins take their places (and, when the tests share one
   * process with CK_FORK=no, the types registered by earlier tests). */
  ck_assert_int_le(i - 1, 128 - 3);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "registry is full (128 types)"));
  ck_assert_ptr_nonnull(sw_bucket_type_find("test.r0"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("plugin");
  SW_TCASE(s, "loader", test_load_histogram_template, test_load_failures,
           test_old_minimal_plugin);
  SW_TCASE(s, "registry", test_register_validation, test_builtins_registered,
           test_registry_full);
  return sw_test_run(s);
}
