/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the Check test programs. */
#ifndef SW_TESTUTIL_H
#define SW_TESTUTIL_H

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* The factor of stress tests' rounds: SW_STRESS (default 1). */
static inline int64_t sw_stress(void) {
  const char *s = getenv("SW_STRESS");
  const int64_t k = s ? atoll(s) : 1;
  return k > 0 ? k : 1;
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

/* Run this test program again as a victim, `--victim a [b]` (b may be
 * NULL), with SW_TEST_KILL_AT=point (read when the library loads), and
 * check that it died of SIGKILL there. */
static inline void sw_test_killed_at(const char *point, const char *a, const char *b) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("SW_TEST_KILL_AT", point, 1);
    execl("/proc/self/exe", "victim", "--victim", a, b, (char *)NULL);
    _exit(99);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                "victim at %s (%s %s) was not killed there: status %d", point, a, b ? b : "",
                status);
}

#endif /* SW_TESTUTIL_H */
