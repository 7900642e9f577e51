/* SPDX-License-Identifier: Apache-2.0 */
/* sw_keyed_cancel: an admitted entry given back, as if never admitted —
 * passes in their window, a request in flight, a place in a pacing queue;
 * blocked and cancelled decisions are no-ops; a window gone or a place
 * given to another key keeps what it holds; threads cancelling at once
 * leave exact counts; and several limits on one request are all or
 * nothing (a flooding client refused by its own limit uses none of the
 * site's). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "keyedutil.h"

static sw_keyed *table(uint32_t capacity, int grade, int behavior, double threshold) {
  sw_options *o = kt_opts(grade, behavior, threshold);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 500));
  sw_keyed *k = NULL;
  ck_ok(sw_keyed_create(&k, capacity, o));
  sw_options_free(o);
  return k;
}



static int64_t total_pass(sw_keyed *k) {
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(k, &in));
  return in.pass;
}

/* Reject: the third pass given back, the next entry takes it; a blocked
 * decision and a second cancel change nothing; keys of both paths (a
 * short key: the fast path; 20 bytes: the general one). */
START_TEST(test_reject) {
  const char *keys[] = {"a", "a key of twenty bytes"};
  for (int i = 0; i < 2; i++) {
    sw_keyed *k = table(10, SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 3);
    kt_enter(k, 1000, keys[i], 1);
    kt_enter(k, 1000, keys[i], 1);
    sw_decision third = kt_enter(k, 1000, keys[i], 1);
    ck_assert_int_eq(third.verdict, SW_VERDICT_PASS);
    sw_decision blocked = kt_enter(k, 1000, keys[i], 1);
    ck_assert_int_eq(blocked.verdict, SW_VERDICT_BLOCK);
    ck_ok(sw_keyed_cancel(k, &blocked));
    ck_assert_int_eq(kt_pass(k, 1000, keys[i]), 3);
    ck_ok(sw_keyed_cancel(k, &third));
    ck_assert_int_eq(kt_pass(k, 1000, keys[i]), 2);
    ck_assert_int_eq(total_pass(k), 2);
    ck_ok(sw_keyed_cancel(k, &third)); /* again: nothing */
    ck_assert_int_eq(kt_pass(k, 1000, keys[i]), 2);
    ck_assert_int_eq(kt_enter(k, 1000, keys[i], 1).verdict, SW_VERDICT_PASS);
    ck_assert_int_eq(kt_enter(k, 1000, keys[i], 1).verdict, SW_VERDICT_BLOCK);
    sw_keyed_free(k);
  }
}
END_TEST

/* A pass of an earlier window still in the interval is taken from that
 * window; one whose window has left the ring is gone already. */
START_TEST(test_windows) {
  sw_keyed *k = table(10, SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10);
  sw_decision early = kt_enter(k, 1000, "a", 1); /* window 2 */
  kt_enter(k, 1600, "a", 1);                     /* window 3 */
  ck_assert_int_eq(kt_pass(k, 1600, "a"), 2);
  ck_ok(sw_keyed_cancel(k, &early));
  ck_assert_int_eq(kt_pass(k, 1600, "a"), 1);
  ck_assert_int_eq(kt_pass(k, 2000, "a"), 1); /* window 3 alone */
  sw_decision gone = kt_enter(k, 2000, "b", 1);  /* window 4 */
  kt_enter(k, 3000, "b", 1);                     /* window 6: the same word, 4 has left */
  kt_enter(k, 3000, "b", 1);
  ck_ok(sw_keyed_cancel(k, &gone));
  ck_assert_int_eq(kt_pass(k, 3000, "b"), 2);
  sw_keyed_free(k);
}
END_TEST

/* Concurrency: the request in flight is given back with the pass. */
START_TEST(test_concurrency) {
  sw_keyed *k = table(10, SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 2);
  kt_enter(k, 1000, "c", 1);
  sw_decision second = kt_enter(k, 1000, "c", 1);
  ck_assert_int_eq(kt_enter(k, 1000, "c", 1).verdict, SW_VERDICT_BLOCK);
  ck_ok(sw_keyed_cancel(k, &second));
  sw_keyed_key s;
  ck_assert_int_eq(sw_keyed_lookup_at(k, 1000, "c", 1, &s), 1);
  ck_assert_int_eq(s.in_flight, 1);
  ck_assert_int_eq(s.pass, 1);
  ck_assert_int_eq(kt_enter(k, 1000, "c", 1).verdict, SW_VERDICT_PASS);
  sw_keyed_free(k);
}
END_TEST

/* Pacing, 10 per second: the last place of the queue is given back (the
 * next entry waits what it would have); one with a later entry behind it
 * stays taken (the later one keeps its time), its pass given back. */
START_TEST(test_pacing) {
  sw_keyed *k = table(10, SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10);
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 0);
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 100);
  sw_decision third = kt_enter(k, 10000, "p", 1);
  ck_assert_int_eq(third.wait_ms, 200);
  ck_ok(sw_keyed_cancel(k, &third));
  ck_assert_int_eq(kt_pass(k, 10000, "p"), 2);
  sw_decision again = kt_enter(k, 10000, "p", 1);
  ck_assert_int_eq(again.wait_ms, 200);
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 300);
  ck_ok(sw_keyed_cancel(k, &again)); /* not the last: the queue stays */
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 400);
  ck_assert_int_eq(kt_pass(k, 10000, "p"), 4);
  sw_keyed_free(k);
}
END_TEST

/* A decision whose key's place went to another key gives nothing back
 * (the other key's counts are its own); a receipt no entry of this table
 * wrote is SW_EINVAL. */
START_TEST(test_foreign) {
  sw_keyed *k = table(12, SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 5); /* one bucket: 16 places */
  sw_decision d = kt_enter(k, 1000, "first", 1);
  for (int i = 0; i < 15; i++) {
    char key[8];
    snprintf(key, sizeof key, "f%d", i);
    kt_enter(k, 100000, key, 1);
  }
  kt_enter(k, 100000, "taker", 1); /* "first" is idle: its place is taken */
  ck_assert_int_eq(kt_pass(k, 100000, "first"), -1);
  ck_ok(sw_keyed_cancel(k, &d));
  ck_assert_int_eq(kt_pass(k, 100000, "taker"), 1);
  sw_decision bad = {.receipt = {(int64_t)(UINT64_C(2) << 62 | 0x3fffffff), 1}};
  ck_sw(sw_keyed_cancel(k, &bad), SW_EINVAL);
  sw_keyed_free(k);
}
END_TEST

/* Four threads enter one key and cancel every other admission: the key
 * holds exactly the admissions they kept. */
typedef struct canceller {
  sw_keyed *k;
  int64_t kept;
} canceller;

static void *cancel_worker(void *arg) {
  canceller *c = arg;
  for (int i = 0; i < 20000; i++) {
    sw_decision d;
    ck_ok(sw_keyed_entry_at(c->k, 1000, "shared", 6, 1, 0, &d));
    if (d.verdict != SW_VERDICT_PASS) continue;
    if (i % 2) ck_ok(sw_keyed_cancel(c->k, &d));
    else c->kept++;
  }
  return NULL;
}

START_TEST(test_threads) {
  sw_keyed *k = table(10, SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1e9);
  canceller c[4];
  pthread_t tid[4];
  for (int i = 0; i < 4; i++) {
    c[i] = (canceller){.k = k};
    ck_assert_int_eq(pthread_create(&tid[i], NULL, cancel_worker, &c[i]), 0);
  }
  int64_t kept = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(tid[i], NULL);
    kept += c[i].kept;
  }
  ck_assert_int_eq(kt_pass(k, 1000, "shared"), kept);
  ck_assert_int_eq(total_pass(k), kept);
  sw_keyed_free(k);
}
END_TEST

/* A site limit of 100 per second and 2 per client: a client sending 200
 * requests is refused by its own limit 198 times, and those are counted
 * by neither limit (entered site first, then the client, the site's
 * admission cancelled when the client's refuses): 98 other clients then
 * get their requests through the site. */
static int request(sw_keyed *site, sw_keyed *client, int64_t t, const char *who) {
  sw_decision s, c;
  ck_ok(sw_keyed_entry_at(site, t, "site", 4, 1, 0, &s));
  if (s.verdict == SW_VERDICT_BLOCK) return 0;
  ck_ok(sw_keyed_entry_at(client, t, who, strlen(who), 1, 0, &c));
  if (c.verdict == SW_VERDICT_BLOCK) {
    ck_ok(sw_keyed_cancel(site, &s));
    return 0;
  }
  return 1;
}

START_TEST(test_all_or_nothing) {
  sw_keyed *site = table(10, SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 100);
  sw_keyed *client = table(1000, SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 2);
  int flood = 0, others = 0;
  for (int i = 0; i < 200; i++) flood += request(site, client, 10000, "flooder");
  for (int i = 0; i < 98; i++) {
    char who[16];
    snprintf(who, sizeof who, "client%d", i);
    others += request(site, client, 10000, who);
  }
  ck_assert_int_eq(flood, 2);
  ck_assert_int_eq(others, 98);
  ck_assert_int_eq(kt_pass(site, 10000, "site"), 100);
  sw_keyed_free(site);
  sw_keyed_free(client);
}
END_TEST

int main(void) {
  Suite *s = suite_create("keyed_cancel");
  SW_TCASE(s, "cancel", test_reject, test_windows, test_concurrency, test_pacing, test_foreign,
           test_threads, test_all_or_nothing);
  return sw_test_run(s);
}
