/* Shared helpers of the Check test programs. */
#ifndef SW_TESTUTIL_H
#define SW_TESTUTIL_H

#include <check.h>
#include <stdlib.h>

#include <sw/sw.h>

/* Assert a libsw call returns rc; print sw_last_error() on failure. */
#define ck_sw(call, rc)                                                                  \
  do {                                                                                   \
    int64_t got_ = (call);                                                               \
    ck_assert_msg(got_ == (rc), "%s returned %lld (%s), expected %lld; last error: %s",  \
                  #call, (long long)got_, sw_err_name((int)got_), (long long)(rc),       \
                  sw_last_error());                                                      \
  } while (0)

#define ck_ok(call) ck_sw(call, SW_OK)

/* Run one suite; the exit status is the number of failures. */
static inline int sw_test_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* A test case with the given tests and a generous timeout (sanitizers). */
#define SW_TCASE(suite, name, ...)                                                       \
  do {                                                                                   \
    TCase *tc_ = tcase_create(name);                                                     \
    tcase_set_timeout(tc_, 120);                                                         \
    const TTest *tests_[] = {__VA_ARGS__};                                               \
    for (size_t i_ = 0; i_ < sizeof tests_ / sizeof tests_[0]; i_++)                     \
      tcase_add_test(tc_, tests_[i_]);                                      \
    suite_add_tcase(suite, tc_);                                                         \
  } while (0)

#endif /* SW_TESTUTIL_H */
