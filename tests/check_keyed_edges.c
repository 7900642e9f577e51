/* SPDX-License-Identifier: Apache-2.0 */
/* The edges of a keyed table's arithmetic: the interval's boundary in
 * reads, pacing waits rounded, 64 windows, counts that fill 32 bits with an
 * interval under 1 s, times near INT64_MAX, and a concurrency key with a
 * request in flight never given to another key (not as idle, not by an
 * eviction racing with its entry). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "keyedutil.h"


static sw_keyed *table(uint32_t capacity, sw_options *o) {
  sw_keyed *k = NULL;
  ck_ok(sw_keyed_create(&k, capacity, o));
  sw_options_free(o);
  return k;
}


static sw_keyed_key look(const sw_keyed *k, int64_t t, const char *key) {
  sw_keyed_key s;
  memset(&s, 0, sizeof s);
  ck_assert_int_eq(sw_keyed_lookup_at(k, t, key, strlen(key), &s), 1);
  return s;
}

/* A window counts in reads until the first ms after it leaves the
 * interval: 2 x 500 ms, an entry at 1000 (window 2) is read at 1999 and
 * not at 2000 — by lookup, scan and the top's active keys. */
START_TEST(test_read_boundary) {
  sw_keyed *k = table(100, kt_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10));
  kt_enter(k, 1000, "a", 3);
  ck_assert_int_eq(look(k, 1999, "a").pass, 3);
  ck_assert_int_eq(look(k, 2000, "a").pass, 0);
  sw_keyed_key top[4];
  int64_t active = -1;
  ck_assert_int_eq(sw_keyed_top_at(k, 1999, SW_KEYED_BY_PASS, top, 4, &active), 1);
  ck_assert_int_eq(active, 1);
  ck_assert_int_eq(sw_keyed_top_at(k, 2000, SW_KEYED_BY_PASS, top, 4, &active), 0);
  ck_assert_int_eq(active, 0);
  uint64_t cursor = 0;
  ck_assert_int_eq(sw_keyed_scan_at(k, 2000, &cursor, top, 4), 1);
  ck_assert_int_eq(top[0].pass, 0);
  sw_keyed_free(k);
}
END_TEST

/* Pacing at 3 per second: 333.33 ms apart; waits are rounded to the
 * nearest ms (333, 667), as the limiter's are, not truncated. */
START_TEST(test_pacing_rounding) {
  sw_options *o = kt_opts(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 3);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 1000));
  sw_keyed *k = table(10, o);
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 0);
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 333);
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 667);
  ck_assert_int_eq(kt_enter(k, 10000, "p", 1).wait_ms, 1000);
  sw_keyed_free(k);
}
END_TEST

/* 1..64 windows, as documented: 64 work, 65 are refused. */
START_TEST(test_window_counts) {
  sw_options *o = kt_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1000);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 64));
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 64000));
  sw_keyed *k = NULL;
  ck_ok(sw_keyed_create(&k, 10, o));
  for (int i = 0; i < 64; i++) kt_enter(k, 1000 * i, "w", 1);
  ck_assert_int_eq(look(k, 63000, "w").pass, 64);
  ck_assert_int_eq(look(k, 64000, "w").pass, 63);
  sw_keyed_free(k);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 65));
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 65000));
  k = NULL;
  ck_sw(sw_keyed_create(&k, 10, o), SW_ERANGE);
  sw_options_free(o);
}
END_TEST

/* 2,000,000 per second over 100 ms (one window): one entry of 2,000,000
 * units is admitted and counted exactly — a 20-bit count would have kept
 * 1,048,575 of them (general path) or carried into the window's number
 * (fast path); the next unit is refused. Both paths: a short key (fast)
 * and one of 20 bytes (general). */
START_TEST(test_counts_fill_32_bits) {
  sw_options *o = kt_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 2e6);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 1));
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 100));
  sw_keyed *k = table(10, o);
  const char *keys[] = {"short", "a key of twenty bytes"};
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(kt_enter(k, 5000, keys[i], 1).verdict, SW_VERDICT_PASS); /* the key exists */
    ck_assert_int_eq(kt_enter(k, 5100, keys[i], 2000000).verdict, SW_VERDICT_PASS);
    ck_assert_int_eq(look(k, 5100, keys[i]).pass, 2000000);
    ck_assert_int_eq(kt_enter(k, 5100, keys[i], 1).verdict, SW_VERDICT_BLOCK);
  }
  sw_keyed_free(k);
}
END_TEST

/* Times near INT64_MAX: a refused entry's retry-after is computed without
 * overflow (UBSan in the sanitizer run), and is exact. */
START_TEST(test_far_times) {
  sw_keyed *k = table(10, kt_opts(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1));
  const int64_t t = INT64_MAX - 3; /* 304 ms into its window of 500 */
  ck_assert_int_eq(t % 500, 304);
  ck_assert_int_eq(kt_enter(k, t, "far", 1).verdict, SW_VERDICT_PASS);
  sw_decision d = kt_enter(k, t, "far", 1);
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 1000 - 304); /* when its window leaves the interval */
  sw_keyed_free(k);
}
END_TEST

/* A concurrency key with a request in flight whose windows have all left
 * the interval is not idle: a new key does not take its place. */
START_TEST(test_in_flight_is_not_idle) {
  sw_options *o = kt_opts(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 2);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_CLOSED));
  sw_keyed *k = table(12, o); /* one bucket: 16 places */
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    ck_assert_int_eq(kt_enter(k, 1000, key, 1).verdict, SW_VERDICT_PASS);
  }
  sw_decision d = kt_enter(k, 100000, "new", 1); /* every window out, every request in */
  ck_assert_int_eq(d.full, 1);
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    ck_ok(sw_keyed_exit_at(k, 100000, key, strlen(key), 1, 1, 0));
  }
  sw_keyed_free(k);
}
END_TEST

/* Four threads entering and leaving 24 concurrency keys that share 16
 * places (so most entries of an absent key evict another): an eviction
 * never takes a key with a request in flight, so no exit ever finds its
 * key gone (SW_ESTATE) — the eviction checks in-flight in the same CAS
 * that moves the word, not only when it chose the key. */
typedef struct race {
  sw_keyed *k;
  uint32_t seed;
  int64_t rounds, orphans, exits;
} race;

static void *race_worker(void *arg) {
  race *r = arg;
  char key[8];
  for (int64_t i = 0; i < r->rounds; i++) {
    r->seed = r->seed * 1103515245u + 12345u;
    snprintf(key, sizeof key, "k%u", (r->seed >> 8) % 24);
    sw_decision d;
    ck_ok(sw_keyed_entry_at(r->k, 1000, key, strlen(key), 1, 0, &d));
    if (d.verdict != SW_VERDICT_PASS || d.full) continue;
    r->exits++;
    if (sw_keyed_exit_at(r->k, 1000, key, strlen(key), 1, 1, 0) == SW_ESTATE) r->orphans++;
  }
  return NULL;
}

START_TEST(test_eviction_races_entries) {
  sw_options *o = kt_opts(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 1000);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_EVICT));
  sw_keyed *k = table(12, o); /* one bucket: 16 places */
  race r[4];
  pthread_t tid[4];
  for (int i = 0; i < 4; i++) {
    r[i] = (race){.k = k, .seed = 77u * (uint32_t)i + 1, .rounds = 50000 * sw_stress()};
    ck_assert_int_eq(pthread_create(&tid[i], NULL, race_worker, &r[i]), 0);
  }
  int64_t orphans = 0, exits = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(tid[i], NULL);
    orphans += r[i].orphans;
    exits += r[i].exits;
  }
  ck_assert_int_gt(exits, 0);
  ck_assert_msg(orphans == 0, "%lld of %lld exits found their key gone", (long long)orphans,
                (long long)exits);
  sw_keyed_free(k);
}
END_TEST

int main(void) {
  Suite *s = suite_create("keyed_edges");
  SW_TCASE(s, "edges", test_read_boundary, test_pacing_rounding, test_window_counts,
           test_counts_fill_32_bits, test_far_times, test_in_flight_is_not_idle,
           test_eviction_races_entries);
  return sw_test_run(s);
}
