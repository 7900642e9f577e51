/* SPDX-License-Identifier: Apache-2.0 */
/* Circuit breakers with explicit time: ports of Sentinel's
 * ResponseTimeCircuitBreakerTest, ExceptionCircuitBreakerTest and
 * CircuitBreakingIntegrationTest and of sentinel-golang's
 * circuit_breaker_test.go, every transition checked with its exact time;
 * then probes (several, lost, cancelled), the bucket types, and the rule's
 * validation. The cases across processes are in check_breaker_shared.c. */
#include <math.h>
#include <string.h>

#include "testutil.h"

/* ------------------------------------------------------------- fixtures */

typedef struct transition {
  int32_t from, to;
  int64_t t;
  double value;
} transition;

typedef struct recorder {
  transition seen[64];
  int n;
} recorder;

static void record(void *user, int32_t from, int32_t to, int64_t t, double value) {
  recorder *r = user;
  ck_assert_int_lt(r->n, 64);
  r->seen[r->n++] = (transition){from, to, t, value};
}

#define C SW_BREAKER_CLOSED
#define O SW_BREAKER_OPEN
#define H SW_BREAKER_HALF_OPEN

/* The k-th transition recorded was from -> to at t. */
static void seen(const recorder *r, int k, int32_t from, int32_t to, int64_t t) {
  ck_assert_msg(k < r->n, "transition %d not seen (%d seen)", k, r->n);
  ck_assert_msg(r->seen[k].from == from && r->seen[k].to == to && r->seen[k].t == t,
                "transition %d: %d -> %d at %lld, expected %d -> %d at %lld", k, r->seen[k].from,
                r->seen[k].to, (long long)r->seen[k].t, from, to, (long long)t);
}

typedef struct kv {
  sw_option key;
  double value;
} kv;

static sw_breaker *breaker(recorder *rec, const kv *o, size_t n) {
  sw_options *opts;
  ck_ok(sw_options_create(&opts));
  for (size_t i = 0; i < n; i++) ck_ok(sw_options_set_double(opts, o[i].key, o[i].value));
  sw_breaker *b = NULL;
  ck_ok(sw_breaker_create(&b, opts));
  sw_options_free(opts);
  if (rec) ck_ok(sw_breaker_set_listener(b, record, rec));
  return b;
}
#define BREAKER(rec, ...) \
  breaker(rec, (const kv[]){__VA_ARGS__}, sizeof((const kv[]){__VA_ARGS__}) / sizeof(kv))

static int state(const sw_breaker *b, int64_t t) {
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, t, &in));
  return in.state;
}

/* A clock the helpers advance, as Sentinel's AbstractTimeBasedTest mocks it. */
static int64_t now;

/* entryAndSleepFor: enter at now; if admitted, take rt ms and exit (ok). */
static int entry_and_sleep(sw_breaker *b, int64_t rt) {
  sw_decision d;
  ck_ok(sw_breaker_entry_at(b, now, &d));
  if (d.verdict == SW_VERDICT_BLOCK) return 0;
  now += rt;
  ck_ok(sw_breaker_exit_at(b, now, &d, rt, 0));
  return 1;
}

/* entryWithErrorIfPresent: enter and exit at once, failed if error. */
static int entry_with_error(sw_breaker *b, int error) {
  sw_decision d;
  ck_ok(sw_breaker_entry_at(b, now, &d));
  if (d.verdict == SW_VERDICT_BLOCK) return 0;
  ck_ok(sw_breaker_exit_at(b, now, &d, 0, error ? SW_EXIT_ERROR : 0));
  return 1;
}

static int64_t retry_after(sw_breaker *b) {
  sw_decision d;
  ck_ok(sw_breaker_entry_at(b, now, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  return d.retry_after_ms;
}

/* ------------------------------------------- ResponseTimeCircuitBreakerTest */

START_TEST(test_rt_max_slow_ratio_threshold) {
  recorder rec = {0};
  sw_breaker *b = BREAKER(&rec, {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_SLOW_RATIO},
                          {SW_OPT_BREAKER_COUNT, 10}, {SW_OPT_BREAKER_MIN_REQUESTS, 3},
                          {SW_OPT_BREAKER_SLOW_RATIO, 1}, {SW_OPT_BREAKER_STAT_INTERVAL_MS, 5000},
                          {SW_OPT_BREAKER_TIME_WINDOW_SEC, 5});
  now = 10000;
  ck_assert(entry_and_sleep(b, 20));
  ck_assert(entry_and_sleep(b, 20));
  ck_assert_int_eq(rec.n, 0);
  ck_assert(entry_and_sleep(b, 20)); /* 3 of 3 slower than 10 ms: 100% reaches 100% */
  ck_assert_int_eq(rec.n, 1);
  seen(&rec, 0, C, O, 10060);
  ck_assert(rec.seen[0].value == 1.0);
  ck_assert(!entry_and_sleep(b, 20));
  ck_assert_int_eq(retry_after(b), 5000);
  now += 1000;
  ck_assert(!entry_and_sleep(b, 20));
  ck_assert_int_eq(retry_after(b), 4000);
  now += 3999;
  ck_assert(!entry_and_sleep(b, 20)); /* 1 ms early */
  now += 1;
  ck_assert(entry_and_sleep(b, 20)); /* the probe, slow: open again */
  seen(&rec, 1, O, H, 15060);
  seen(&rec, 2, H, O, 15080);
  ck_assert_int_eq(state(b, now), O);
  sw_breaker_free(b);
}
END_TEST

/* --------------------------------------------- ExceptionCircuitBreakerTest */

START_TEST(test_exception_record_error_or_success) {
  recorder rec = {0};
  sw_breaker *b = BREAKER(&rec, {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO},
                          {SW_OPT_BREAKER_COUNT, 0.2}, {SW_OPT_BREAKER_STAT_INTERVAL_MS, 20000},
                          {SW_OPT_BREAKER_TIME_WINDOW_SEC, 10}, {SW_OPT_BREAKER_MIN_REQUESTS, 1});
  now = 0;
  ck_assert(entry_and_sleep(b, 10));
  ck_assert(entry_with_error(b, 1)); /* 1 of 2 failed: 50% > 20% */
  seen(&rec, 0, C, O, 10);
  ck_assert(rec.seen[0].value == 0.5);
  ck_assert(!entry_with_error(b, 1));
  ck_assert(!entry_and_sleep(b, 100));
  now += 5000;
  ck_assert(!entry_and_sleep(b, 100));
  ck_assert_int_eq(retry_after(b), 5000);
  now += 5000;
  ck_assert(entry_with_error(b, 1)); /* -> half-open -> open */
  seen(&rec, 1, O, H, 10010);
  seen(&rec, 2, H, O, 10010);
  ck_assert(!entry_and_sleep(b, 100));
  ck_assert(!entry_and_sleep(b, 100));
  now += 10000;
  ck_assert(entry_and_sleep(b, 100)); /* -> half-open -> closed */
  seen(&rec, 3, O, H, 20010);
  seen(&rec, 4, H, C, 20110);
  for (int i = 0; i < 6; i++) ck_assert(entry_and_sleep(b, 100));
  ck_assert(entry_with_error(b, 1)); /* 1 of 7 since closing: 14% */
  ck_assert(entry_and_sleep(b, 100));
  ck_assert_int_eq(rec.n, 5);
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, now, &in));
  ck_assert_int_eq(in.total, 8);
  ck_assert_int_eq(in.bad, 1);
  ck_assert_int_eq(in.opened, 1);
  ck_assert_int_eq(in.half_opened, 2);
  ck_assert_int_eq(in.reopened, 1);
  ck_assert_int_eq(in.closed, 1);
  ck_assert_int_eq(in.probes, 2);
  ck_assert_int_eq(in.blocked, 6);
  sw_breaker_free(b);
}
END_TEST

/* ------------------------------------------ CircuitBreakingIntegrationTest */

/* Sentinel draws the RTs at random around maxRt; these are fixed. */
START_TEST(test_integration_slow_request_mode) {
  recorder rec = {0};
  const int64_t max_rt = 50, slow = max_rt + 15, fast = max_rt - 15;
  sw_breaker *b = BREAKER(&rec, {SW_OPT_BREAKER_TIME_WINDOW_SEC, 5}, {SW_OPT_BREAKER_COUNT, 50},
                          {SW_OPT_BREAKER_STAT_INTERVAL_MS, 20000},
                          {SW_OPT_BREAKER_MIN_REQUESTS, 10}, {SW_OPT_BREAKER_SLOW_RATIO, 0.8},
                          {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_SLOW_RATIO});
  now = 100000;
  for (int i = 0; i < 10; i++) ck_assert(entry_and_sleep(b, i < 7 ? slow : fast));
  /* 70% slow; 0.8 is passed at the 16th (13 of 16), not at 12 of 15 (equal) */
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(rec.n, 0);
    ck_assert(entry_and_sleep(b, slow));
  }
  const int64_t opened = 100000 + 7 * slow + 3 * fast + 6 * slow;
  seen(&rec, 0, C, O, opened);
  ck_assert(rec.seen[0].value == 13.0 / 16.0);
  ck_assert_int_eq(state(b, now), O);
  ck_assert(!entry_and_sleep(b, 1));
  now += 1000;
  ck_assert(!entry_and_sleep(b, 1));
  now += 5000;
  ck_assert(entry_and_sleep(b, slow)); /* half-open to open */
  seen(&rec, 1, O, H, opened + 6000);
  seen(&rec, 2, H, O, opened + 6000 + slow);
  now += 6000;
  ck_assert(entry_and_sleep(b, fast)); /* half-open to closed */
  seen(&rec, 3, O, H, opened + 12000 + slow);
  seen(&rec, 4, H, C, opened + 12000 + slow + fast);
  ck_assert(entry_and_sleep(b, slow)); /* closed: 1 of 1 slow, under min requests */
  ck_assert_int_eq(rec.n, 5);
  sw_breaker_free(b);
}
END_TEST

START_TEST(test_integration_exception_ratio_mode) {
  recorder rec = {0};
  sw_breaker *b = BREAKER(&rec, {SW_OPT_BREAKER_TIME_WINDOW_SEC, 5}, {SW_OPT_BREAKER_COUNT, 0.5},
                          {SW_OPT_BREAKER_STAT_INTERVAL_MS, 25000},
                          {SW_OPT_BREAKER_MIN_REQUESTS, 10},
                          {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO});
  now = 100000;
  for (int i = 0; i < 9; i++) ck_assert(entry_with_error(b, i < 6));
  ck_assert_int_eq(rec.n, 0); /* 6 of 9, under min requests */
  ck_assert(entry_with_error(b, 1)); /* 7 of 10 */
  seen(&rec, 0, C, O, 100000);
  ck_assert(!entry_with_error(b, 0));
  now += 2000;
  ck_assert(!entry_with_error(b, 0));
  now += 5000;
  ck_assert(entry_with_error(b, 1));
  seen(&rec, 1, O, H, 107000);
  seen(&rec, 2, H, O, 107000);
  ck_assert(rec.seen[2].value == 1.0);
  now += 6000;
  ck_assert(entry_with_error(b, 0));
  seen(&rec, 3, O, H, 113000);
  seen(&rec, 4, H, C, 113000);
  ck_assert(entry_with_error(b, 1)); /* closed, its windows cleared: 1 of 1 < min */
  ck_assert_int_eq(state(b, now), C);
  sw_breaker_free(b);
}
END_TEST

/* Sentinel's testExceptionCountMode is a TODO; here it is. */
START_TEST(test_integration_exception_count_mode) {
  recorder rec = {0};
  sw_breaker *b = BREAKER(&rec, {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_COUNT},
                          {SW_OPT_BREAKER_COUNT, 3}, {SW_OPT_BREAKER_MIN_REQUESTS, 5},
                          {SW_OPT_BREAKER_STAT_INTERVAL_MS, 1000},
                          {SW_OPT_BREAKER_TIME_WINDOW_SEC, 2});
  now = 5000;
  for (int i = 0; i < 4; i++) ck_assert(entry_with_error(b, 1)); /* 4 errors, 4 < 5 requests */
  ck_assert_int_eq(rec.n, 0);
  ck_assert(entry_with_error(b, 0)); /* 5 requests, 4 errors > 3 */
  seen(&rec, 0, C, O, 5000);
  ck_assert(rec.seen[0].value == 4.0);
  now = 7000;
  ck_assert(entry_with_error(b, 0));
  seen(&rec, 1, O, H, 7000);
  seen(&rec, 2, H, C, 7000);
  /* a new stat interval: 3 errors of 5 do not exceed 3 */
  now = 8000;
  for (int i = 0; i < 5; i++) ck_assert(entry_with_error(b, i < 3));
  ck_assert_int_eq(rec.n, 3);
  /* errors at the end of one interval and the start of the next are not summed */
  now = 8999;
  ck_assert(entry_with_error(b, 1)); /* 4 errors of 6 in [8000, 9000): opens */
  seen(&rec, 3, C, O, 8999);
  sw_breaker_free(b);
}
END_TEST

/* Two rules on one resource: the caller checks both breakers; a probe the
 * second refuses is given back (SW_EXIT_CANCEL). */
START_TEST(test_integration_multiple_half_opened_breakers) {
  recorder r1 = {0}, r2 = {0};
  sw_breaker *b[2];
  for (int i = 0; i < 2; i++)
    b[i] = BREAKER(i ? &r2 : &r1, {SW_OPT_BREAKER_TIME_WINDOW_SEC, 2 * (i + 1)},
                   {SW_OPT_BREAKER_COUNT, 50}, {SW_OPT_BREAKER_STAT_INTERVAL_MS, 20000},
                   {SW_OPT_BREAKER_MIN_REQUESTS, 1}, {SW_OPT_BREAKER_SLOW_RATIO, 0.8});
  now = 100000;
  sw_decision d[2];
  for (int i = 0; i < 2; i++) ck_ok(sw_breaker_entry_at(b[i], now, &d[i]));
  now += 100;
  for (int i = 0; i < 2; i++) ck_ok(sw_breaker_exit_at(b[i], now, &d[i], 100, 0));
  ck_assert_int_eq(state(b[0], now), O);
  ck_assert_int_eq(state(b[1], now), O);
  now += 3000;
  for (int k = 0; k < 10; k++) {
    ck_ok(sw_breaker_entry_at(b[0], now, &d[0]));
    ck_assert_int_eq(d[0].verdict, SW_VERDICT_PASS); /* a probe, every time */
    ck_assert(d[0].probe != 0);
    ck_ok(sw_breaker_entry_at(b[1], now, &d[1]));
    ck_assert_int_eq(d[1].verdict, SW_VERDICT_BLOCK);
    ck_ok(sw_breaker_exit_at(b[0], now, &d[0], 0, SW_EXIT_CANCEL));
  }
  ck_assert_int_eq(state(b[0], now), H); /* Sentinel: OPEN with its old retry time */
  ck_assert_int_eq(state(b[1], now), O);
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b[0], now, &in));
  ck_assert_int_eq(in.probes, 10);
  ck_assert_int_eq(in.probes_lost, 0); /* a place given back is free, not lost */
  ck_assert_int_eq(in.probes_in_flight, 0);
  ck_assert_int_eq(in.total, 1); /* cancelled entries count nothing */
  now += 3000;
  for (int k = 0; k < 10; k++) {
    for (int i = 0; i < 2; i++) {
      ck_ok(sw_breaker_entry_at(b[i], now, &d[i]));
      ck_assert_int_eq(d[i].verdict, SW_VERDICT_PASS);
    }
    now += 1;
    for (int i = 0; i < 2; i++) ck_ok(sw_breaker_exit_at(b[i], now, &d[i], 1, 0));
  }
  ck_assert_int_eq(state(b[0], now), C);
  ck_assert_int_eq(state(b[1], now), C);
  seen(&r1, 1, O, H, 103100);
  seen(&r1, 2, H, C, 106101);
  seen(&r2, 1, O, H, 106100);
  seen(&r2, 2, H, C, 106101);
  for (int i = 0; i < 2; i++) sw_breaker_free(b[i]);
}
END_TEST

/* ------------------------------------------ sentinel-golang's breaker tests */

/* Open a breaker with two slow (or failed) completions at t. */
static void trip(sw_breaker *b, int64_t t) {
  for (int i = 0; i < 2; i++) {
    sw_decision d;
    ck_ok(sw_breaker_entry_at(b, t, &d));
    ck_ok(sw_breaker_exit_at(b, t, &d, 100, SW_EXIT_ERROR));
  }
}

static sw_breaker *golang_rule(recorder *rec, int strategy, double threshold) {
  return BREAKER(rec, {SW_OPT_BREAKER_STRATEGY, strategy},
                 {SW_OPT_BREAKER_TIME_WINDOW_SEC, 3}, {SW_OPT_BREAKER_MIN_REQUESTS, 2},
                 {SW_OPT_BREAKER_STAT_INTERVAL_MS, 10000},
                 {SW_OPT_BREAKER_COUNT, strategy == SW_BREAKER_SLOW_RATIO ? 50 : threshold},
                 {SW_OPT_BREAKER_SLOW_RATIO, strategy == SW_BREAKER_SLOW_RATIO ? threshold : 1});
}

START_TEST(test_golang_try_pass) {
  static const int strategies[] = {SW_BREAKER_SLOW_RATIO, SW_BREAKER_ERROR_RATIO,
                                   SW_BREAKER_ERROR_COUNT};
  for (int s = 0; s < 3; s++) {
    recorder rec = {0};
    sw_breaker *b = golang_rule(&rec, strategies[s], s == 2 ? 1 : 0.5);
    sw_decision d;
    ck_ok(sw_breaker_entry_at(b, 1000, &d)); /* TryPass_Closed */
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
    ck_assert_int_eq(d.probe, 0);
    trip(b, 1000);
    seen(&rec, 0, C, O, 1000);
    ck_ok(sw_breaker_entry_at(b, 3999, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
    ck_assert_int_eq(d.retry_after_ms, 1);
    ck_ok(sw_breaker_entry_at(b, 4000, &d)); /* TryPass_Probe */
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
    ck_assert(d.probe != 0);
    ck_assert_int_eq(state(b, 4000), H);
    seen(&rec, 1, O, H, 4000);
    sw_breaker_free(b);
  }
}
END_TEST

/* OnRequestComplete: under min requests nothing changes; a probe decides. */
START_TEST(test_golang_on_request_complete) {
  static const int strategies[] = {SW_BREAKER_SLOW_RATIO, SW_BREAKER_ERROR_RATIO,
                                   SW_BREAKER_ERROR_COUNT};
  for (int s = 0; s < 3; s++) {
    recorder rec = {0};
    sw_breaker *b = golang_rule(&rec, strategies[s], s == 2 ? 1 : 0.5);
    sw_decision d;
    ck_ok(sw_breaker_entry_at(b, 1000, &d));
    ck_ok(sw_breaker_exit_at(b, 1000, &d, 100, SW_EXIT_ERROR)); /* Less_Than_MinRequestAmount */
    ck_assert_int_eq(state(b, 1000), C);
    trip(b, 1000);
    ck_ok(sw_breaker_entry_at(b, 4000, &d));
    /* Probe_Failed: slow (RT 51 > 50) or failed */
    ck_ok(sw_breaker_exit_at(b, 4000, &d, s == 0 ? 51 : 0, s == 0 ? 0 : SW_EXIT_ERROR));
    ck_assert_int_eq(state(b, 4000), O);
    seen(&rec, 2, H, O, 4000);
    sw_breaker_info in;
    ck_ok(sw_breaker_stats_at(b, 4000, &in));
    ck_assert_int_eq(in.next_probe_ms, 7000); /* FromHalfOpenToOpen: a new retry time */
    ck_ok(sw_breaker_entry_at(b, 7000, &d));
    /* Probe_Succeed: RT 10, or no error */
    ck_ok(sw_breaker_exit_at(b, 7000, &d, s == 0 ? 10 : 100, 0));
    ck_assert_int_eq(state(b, 7000), C);
    seen(&rec, 4, H, C, 7000);
    sw_breaker_free(b);
  }
}
END_TEST

/* ResetBucketTo: a reused window starts empty (through the bucket vtable). */
START_TEST(test_golang_reset_bucket_to) {
  static const char *const types[] = {SW_TYPE_BREAKER_SLOW, SW_TYPE_BREAKER_ERROR};
  for (int i = 0; i < 2; i++) {
    const sw_bucket_type *vt = sw_bucket_type_find(types[i]);
    ck_assert_ptr_nonnull(vt);
    ck_assert_uint_eq(vt->field_count, 2);
    ck_assert_str_eq(vt->field_names[1], i ? "error" : "slow");
    sw_leap_array *la;
    ck_ok(sw_leap_array_create_by_name(&la, types[i], NULL, 1, 1000));
    ck_ok(sw_leap_array_add_at(la, 1, 0, 1));
    ck_ok(sw_leap_array_add_at(la, 1, 1, 1));
    int64_t v;
    ck_ok(sw_leap_array_sum_at(la, 999, 1, &v));
    ck_assert_int_eq(v, 1);
    sw_window w;
    ck_ok(sw_leap_array_current_window_at(la, 5000, &w)); /* the slot reset to 5000 */
    ck_assert_int_eq(w.start_ms, 5000);
    ck_ok(sw_leap_array_bucket_get(la, w.bucket, 0, &v));
    ck_assert_int_eq(v, 0);
    ck_ok(sw_leap_array_bucket_get(la, w.bucket, 1, &v));
    ck_assert_int_eq(v, 0);
    sw_leap_array_free(la);
  }
}
END_TEST

/* ----------------------------------------------------------------- probes */

/* Resilience4j's permitted calls in half-open: 3 probes, then nothing; the
 * first bad one opens at once, 3 good ones close. */
START_TEST(test_half_open_calls) {
  recorder rec = {0};
  sw_breaker *b = BREAKER(&rec, {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_COUNT},
                          {SW_OPT_BREAKER_COUNT, 0}, {SW_OPT_BREAKER_MIN_REQUESTS, 1},
                          {SW_OPT_BREAKER_TIME_WINDOW_SEC, 1},
                          {SW_OPT_BREAKER_HALF_OPEN_CALLS, 3},
                          {SW_OPT_BREAKER_PROBE_TIMEOUT_MS, 500});
  sw_decision d[4];
  trip(b, 0);
  seen(&rec, 0, C, O, 0);
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, 500, &in));
  ck_assert_int_eq(in.state, O);
  ck_assert_int_eq(in.state_since_ms, 0); /* open since the trip, until the probe */
  ck_assert_int_eq(in.next_probe_ms, 1000);
  for (int i = 0; i < 3; i++) {
    ck_ok(sw_breaker_entry_at(b, 1000 + i, &d[i]));
    ck_assert_int_eq(d[i].verdict, SW_VERDICT_PASS);
  }
  ck_ok(sw_breaker_entry_at(b, 1003, &d[3]));
  ck_assert_int_eq(d[3].verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d[3].retry_after_ms, 497); /* the first probe's timeout */
  ck_ok(sw_breaker_exit_at(b, 1010, &d[0], 5, 0));
  ck_ok(sw_breaker_exit_at(b, 1011, &d[1], 5, 0));
  ck_assert_int_eq(state(b, 1011), H);
  ck_ok(sw_breaker_exit_at(b, 1012, &d[2], 5, SW_EXIT_ERROR)); /* the third fails */
  seen(&rec, 2, H, O, 1012);
  /* the next half-open: three good probes close it */
  for (int i = 0; i < 3; i++) ck_ok(sw_breaker_entry_at(b, 2012, &d[i]));
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(d[i].verdict, SW_VERDICT_PASS);
    ck_assert_int_eq(state(b, 2013 + i), H);
    ck_ok(sw_breaker_exit_at(b, 2013 + i, &d[i], 5, 0));
  }
  seen(&rec, 4, H, C, 2015);
  ck_assert_int_eq(state(b, 2015), C);
  sw_breaker_free(b);
}
END_TEST

/* A probe that never ends (its process died) is lost at its timeout: the
 * next entry probes in its place, and the lost one's late exit decides
 * nothing. */
START_TEST(test_lost_probe) {
  recorder rec = {0};
  sw_breaker *b = BREAKER(&rec, {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO},
                          {SW_OPT_BREAKER_COUNT, 0.5}, {SW_OPT_BREAKER_MIN_REQUESTS, 2},
                          {SW_OPT_BREAKER_TIME_WINDOW_SEC, 1},
                          {SW_OPT_BREAKER_PROBE_TIMEOUT_MS, 300});
  trip(b, 0);
  sw_decision lost, d;
  ck_ok(sw_breaker_entry_at(b, 1000, &lost));
  ck_assert(lost.probe != 0);
  ck_ok(sw_breaker_entry_at(b, 1299, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 1);
  ck_ok(sw_breaker_entry_at(b, 1300, &d)); /* the timeout: a new probe */
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  ck_assert(d.probe != 0 && d.probe != lost.probe);
  ck_ok(sw_breaker_exit_at(b, 1310, &lost, 5, SW_EXIT_ERROR)); /* too late: decides nothing */
  ck_assert_int_eq(state(b, 1310), H);
  ck_ok(sw_breaker_exit_at(b, 1320, &d, 5, 0));
  ck_assert_int_eq(state(b, 1320), C);
  seen(&rec, 2, H, C, 1320);
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, 1320, &in));
  ck_assert_int_eq(in.probes, 2);
  ck_assert_int_eq(in.probes_lost, 1);
  ck_assert_int_eq(in.half_opened, 1);
  sw_breaker_free(b);
}
END_TEST

/* Exits of requests let in while closed do not decide a half-open state
 * (Sentinel takes any completion in half-open as the probe's). */
START_TEST(test_only_probes_decide) {
  sw_breaker *b = BREAKER(NULL, {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO},
                          {SW_OPT_BREAKER_COUNT, 0.5}, {SW_OPT_BREAKER_MIN_REQUESTS, 2},
                          {SW_OPT_BREAKER_TIME_WINDOW_SEC, 1});
  sw_decision early, probe;
  ck_ok(sw_breaker_entry_at(b, 0, &early));
  trip(b, 0);
  ck_ok(sw_breaker_entry_at(b, 1000, &probe));
  ck_ok(sw_breaker_exit_at(b, 1001, &early, 1, 0)); /* a good, old request */
  ck_ok(sw_breaker_exit_at(b, 1001, NULL, 1, 0));
  ck_assert_int_eq(state(b, 1001), H);
  ck_ok(sw_breaker_exit_at(b, 1002, &probe, 1, SW_EXIT_ERROR));
  ck_assert_int_eq(state(b, 1002), O);
  sw_breaker_free(b);
}
END_TEST

/* Stats, sub-windows, a clock that went backwards, the rule round trip. */
START_TEST(test_stats_and_windows) {
  sw_breaker *b = BREAKER(NULL, {SW_OPT_BREAKER_STRATEGY, SW_BREAKER_SLOW_RATIO},
                          {SW_OPT_BREAKER_COUNT, 100}, {SW_OPT_BREAKER_SLOW_RATIO, 0.5},
                          {SW_OPT_BREAKER_MIN_REQUESTS, 100},
                          {SW_OPT_BREAKER_STAT_INTERVAL_MS, 1000},
                          {SW_OPT_BREAKER_SAMPLE_COUNT, 4});
  for (int i = 0; i < 8; i++) ck_ok(sw_breaker_exit_at(b, 250 * i, NULL, i % 2 ? 101 : 100, 0));
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, 1750, &in)); /* windows 1000..1750: 4 completions */
  ck_assert_int_eq(in.total, 4);
  ck_assert_int_eq(in.bad, 2);
  ck_assert(in.ratio == 0.5);
  ck_assert_int_eq(in.state, C);
  ck_assert_int_eq(in.next_probe_ms, -1);
  ck_ok(sw_breaker_exit_at(b, 10, NULL, 500, 0)); /* behind the window: dropped */
  ck_ok(sw_breaker_stats_at(b, 1750, &in));
  ck_assert_int_eq(in.total, 4);
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_breaker_get_rule(b, o));
  double v;
  ck_ok(sw_options_get_double(o, SW_OPT_BREAKER_SLOW_RATIO, &v));
  ck_assert(v == 0.5);
  ck_ok(sw_options_get_double(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, &v));
  ck_assert(v == 10);
  int64_t n;
  ck_ok(sw_options_get(o, SW_OPT_BREAKER_SAMPLE_COUNT, &n));
  ck_assert_int_eq(n, 4);
  sw_options_free(o);
  sw_breaker_free(b);
}
END_TEST

START_TEST(test_rule_validation) {
  sw_options *o;
  sw_breaker *b = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO));
  ck_ok(sw_options_set_double(o, SW_OPT_BREAKER_COUNT, 1.5));
  ck_sw(sw_breaker_create(&b, o), SW_ERANGE);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "SW_OPT_BREAKER_COUNT=1.5"));
  ck_ok(sw_options_set(o, SW_OPT_BREAKER_COUNT, 1));
  ck_ok(sw_options_set(o, SW_OPT_BREAKER_SAMPLE_COUNT, 3));
  ck_sw(sw_breaker_create(&b, o), SW_ESIZE);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "SW_OPT_BREAKER_SAMPLE_COUNT=3"));
  ck_sw(sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, 33), SW_ERANGE);
  ck_sw(sw_options_set_double(o, SW_OPT_BREAKER_SLOW_RATIO, 1.01), SW_ERANGE);
  ck_sw(sw_options_set(o, SW_OPT_BREAKER_MIN_REQUESTS, 0), SW_ERANGE);
  ck_sw(sw_options_set(o, SW_OPT_BREAKER_STRATEGY, 3), SW_ERANGE);
  ck_assert_ptr_null(b);
  sw_options_free(o);
}
END_TEST

int main(void) {
  Suite *s = suite_create("breaker");
  SW_TCASE(s, "sentinel", test_rt_max_slow_ratio_threshold, test_exception_record_error_or_success,
           test_integration_slow_request_mode, test_integration_exception_ratio_mode,
           test_integration_exception_count_mode, test_integration_multiple_half_opened_breakers);
  SW_TCASE(s, "sentinel-golang", test_golang_try_pass, test_golang_on_request_complete,
           test_golang_reset_bucket_to);
  SW_TCASE(s, "probes", test_half_open_calls, test_lost_probe, test_only_probes_decide);
  SW_TCASE(s, "stats", test_stats_and_windows, test_rule_validation);
  return sw_test_run(s);
}
