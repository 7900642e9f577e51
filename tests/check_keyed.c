/* SPDX-License-Identifier: Apache-2.0 */
/* Keyed tables (sw_keyed_*): exact per-key decisions at explicit times for
 * each kind of rule, idle keys reclaimed with nothing lost, the full-table
 * policies, long keys, inspection, errors, and threads entering keys while
 * their places are given to others. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static sw_options *keyed_opts(int behavior, double threshold) {
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, behavior));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, threshold));
  return o;
}

static sw_keyed *keyed_new(uint32_t capacity, const sw_options *o) {
  sw_keyed *k = NULL;
  ck_ok(sw_keyed_create(&k, capacity, o));
  ck_assert_ptr_nonnull(k);
  return k;
}

#define PASS SW_VERDICT_PASS
#define BLOCK SW_VERDICT_BLOCK
#define WAIT SW_VERDICT_WAIT

static sw_decision enter(sw_keyed *k, int64_t t, const char *key) {
  sw_decision d;
  ck_ok(sw_keyed_entry_at(k, t, key, strlen(key), 1, 0, &d));
  return d;
}

static int64_t key_pass(sw_keyed *k, int64_t t, const char *key) {
  sw_keyed_key s;
  int rc = sw_keyed_lookup_at(k, t, key, strlen(key), &s);
  ck_assert_int_ge(rc, 0);
  return rc ? s.pass : -1;
}

static sw_keyed_info info(const sw_keyed *k) {
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(k, &in));
  return in;
}

/* ------------------------------------------------------------------ reject */

/* Threshold 10 per key over 2 x 500 ms: 10 pass, then blocks until the
 * window leaves; keys are independent; remaining counts down. */
START_TEST(test_reject_per_key) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 10);
  sw_keyed *k = keyed_new(100, o);
  for (int i = 0; i < 10; i++) {
    sw_decision d = enter(k, 1000, "alice");
    ck_assert_int_eq(d.verdict, PASS);
    ck_assert_int_eq(d.remaining, 9 - i);
  }
  sw_decision d = enter(k, 1000, "alice");
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 1000); /* [1000, 1500) leaves at 2000 */
  ck_assert_int_eq(d.remaining, 0);
  ck_assert_int_eq(enter(k, 1000, "bob").verdict, PASS);
  ck_assert_int_eq(enter(k, 1600, "alice").verdict, BLOCK);
  ck_assert_int_eq(enter(k, 1999, "alice").verdict, BLOCK);
  ck_assert_int_eq(enter(k, 2000, "alice").verdict, PASS);
  ck_assert_int_eq(key_pass(k, 2000, "alice"), 1);
  ck_assert_int_eq(key_pass(k, 1000, "bob"), 1);
  ck_assert_int_eq(key_pass(k, 1000, "carol"), -1);
  sw_keyed_info in = info(k);
  ck_assert_int_eq(in.keys, 2);
  ck_assert_int_eq(in.pass, 12);
  ck_assert_int_eq(in.block, 3);
  ck_assert_int_eq(in.bytes_per_key, 65); /* meta, 16 key bytes, pad, 2 windows of 16, tag */
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* n units at once; the sliding interval across windows; retry_after is
 * exact (a retry at t + retry_after passes, one ms earlier does not). */
START_TEST(test_reject_sliding_and_retry) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 10);
  sw_keyed *k = keyed_new(100, o);
  sw_decision d;
  ck_ok(sw_keyed_entry_at(k, 1200, "k", 1, 6, 0, &d)); /* [1000, 1500): 6 */
  ck_assert_int_eq(d.verdict, PASS);
  ck_ok(sw_keyed_entry_at(k, 1700, "k", 1, 4, 0, &d)); /* [1500, 2000): 4 */
  ck_assert_int_eq(d.verdict, PASS);
  ck_ok(sw_keyed_entry_at(k, 1800, "k", 1, 5, 0, &d));
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 200); /* at 2000 only the 4 remain */
  ck_ok(sw_keyed_entry_at(k, 1999, "k", 1, 5, 0, &d));
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_ok(sw_keyed_entry_at(k, 2000, "k", 1, 5, 0, &d));
  ck_assert_int_eq(d.verdict, PASS);
  ck_ok(sw_keyed_entry_at(k, 2000, "k", 1, 11, 0, &d)); /* more than the threshold: never */
  ck_assert_int_eq(d.retry_after_ms, -1);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* Strict at a window boundary: an entry whose time is behind another's is
 * decided at the newer window; one a lap behind too. */
START_TEST(test_reject_boundary) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 10);
  sw_keyed *k = keyed_new(100, o);
  for (int i = 0; i < 9; i++) enter(k, 1400, "k");
  ck_assert_int_eq(enter(k, 1600, "k").verdict, PASS);
  ck_assert_int_eq(enter(k, 1499, "k").verdict, BLOCK); /* stale: would make 11 */
  ck_assert_int_eq(key_pass(k, 1600, "k"), 10);
  for (int i = 0; i < 10; i++) enter(k, 1600, "m"); /* [1000, 1500) never written */
  ck_assert_int_eq(enter(k, 1400, "m").verdict, BLOCK);
  ck_assert_int_eq(key_pass(k, 1600, "m"), 10);
  for (int i = 0; i < 10; i++) enter(k, 3100, "j");
  ck_assert_int_eq(enter(k, 2100, "j").verdict, BLOCK); /* a lap behind */
  ck_assert_int_eq(key_pass(k, 3100, "j"), 10);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* Dry run: the block is a PASS with would_block, and counted as one. */
START_TEST(test_dry_run) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 2);
  ck_ok(sw_options_set(o, SW_OPT_DRY_RUN, 1));
  sw_keyed *k = keyed_new(10, o);
  enter(k, 1000, "k");
  enter(k, 1000, "k");
  sw_decision d = enter(k, 1000, "k");
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(d.would_block, 1);
  ck_assert_int_eq(d.retry_after_ms, 1000); /* what enforcing it would have said */
  ck_assert_int_eq(key_pass(k, 1000, "k"), 3);
  ck_assert_int_eq(info(k).would_block, 1);
  ck_ok(sw_keyed_set_dry_run(k, 0));
  ck_assert_int_eq(enter(k, 1000, "k").verdict, BLOCK);
  ck_assert_int_eq(info(k).block, 1);
  sw_keyed_free(k);
  sw_options_free(o);
  /* pacing, 10 per second, no queue: the second entry would wait 100 ms */
  o = keyed_opts(SW_BEHAVIOR_PACING, 10);
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 0));
  ck_ok(sw_options_set(o, SW_OPT_DRY_RUN, 1));
  k = keyed_new(10, o);
  enter(k, 1000, "p");
  d = enter(k, 1000, "p");
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(d.would_block, 1);
  ck_assert_int_eq(d.retry_after_ms, 100);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* ------------------------------------------------------------ other kinds */

/* Pacing per key (threshold 10: 100 ms apart, queue 500): as the limiter,
 * per key; microsecond spacing at 3000 per second. */
START_TEST(test_pacing_per_key) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_PACING, 10);
  sw_keyed *k = keyed_new(10, o);
  sw_decision d = enter(k, 10000, "a");
  ck_assert_int_eq(d.verdict, PASS);
  for (int i = 1; i <= 5; i++) {
    d = enter(k, 10000, "a");
    ck_assert_int_eq(d.verdict, WAIT);
    ck_assert_int_eq(d.wait_ms, 100 * i);
    ck_assert_int_eq(d.remaining, 5 - i);
  }
  d = enter(k, 10000, "a");
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 100);
  ck_assert_int_eq(enter(k, 10000, "b").verdict, PASS); /* another key: its own queue */
  ck_assert_int_eq(enter(k, 10700, "a").verdict, PASS); /* drained */
  sw_keyed_free(k);
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 3000));
  k = keyed_new(10, o);
  int admitted = 0;
  for (int i = 0; i < 12000; i++) { /* 6000 per second for 2 s, queue 500 ms */
    sw_decision x;
    ck_ok(sw_keyed_entry_at(k, 100000 + i / 6, "p", 1, 1, 0, &x));
    admitted += x.verdict != BLOCK;
  }
  ck_assert_int_eq(admitted, 7498); /* Sentinel 1.8.9's count for this load */
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* Concurrency grade per key: 2 in flight, the third blocked; an exit frees
 * a place; an exit without an entry is SW_ESTATE. */
START_TEST(test_concurrency_per_key) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 2);
  ck_ok(sw_options_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY));
  sw_keyed *k = keyed_new(10, o);
  ck_assert_int_eq(enter(k, 1000, "a").verdict, PASS);
  ck_assert_int_eq(enter(k, 1000, "a").verdict, PASS);
  sw_decision d = enter(k, 1000, "a");
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_ge(d.retry_after_ms, 1);
  ck_assert_int_eq(enter(k, 1000, "b").verdict, PASS);
  ck_ok(sw_keyed_exit_at(k, 1010, "a", 1, 10, 1, 0));
  ck_assert_int_eq(enter(k, 1010, "a").verdict, PASS);
  sw_keyed_key s;
  ck_sw(sw_keyed_lookup_at(k, 1010, "a", 1, &s), 1);
  ck_assert_int_eq(s.in_flight, 2);
  ck_ok(sw_keyed_exit_at(k, 1020, "b", 1, 5, 1, SW_EXIT_ERROR));
  ck_sw(sw_keyed_exit_at(k, 1020, "b", 1, 5, 1, 0), SW_ESTATE);
  ck_sw(sw_keyed_exit_at(k, 1020, "zed", 3, 5, 1, 0), SW_ESTATE);
  sw_keyed_info in = info(k);
  ck_assert_int_eq(in.success, 2);
  ck_assert_int_eq(in.exception, 1);
  ck_assert_int_eq(in.rt, 15);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* ------------------------------------------------------------ reclamation */

/* 10x the capacity in distinct keys, in waves idle longer than the interval
 * before the next: every new key takes an idle key's place, nothing is
 * evicted or refused, and every key is limited exactly. */
START_TEST(test_waves_reclaim_everything) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 3);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_CLOSED));
  sw_keyed *k = keyed_new(1000, o);
  const uint32_t slots = 1000;
  for (int wave = 0; wave < 10; wave++) {
    int64_t t = 100000 + wave * 2000;
    for (uint32_t i = 0; i < slots; i++) {
      char key[32];
      snprintf(key, sizeof key, "w%d-k%u", wave, i);
      for (int j = 0; j < 4; j++) {
        sw_decision d = enter(k, t, key);
        ck_assert_msg(d.verdict == (j < 3 ? PASS : BLOCK), "wave %d key %u entry %d: %d", wave,
                      i, j, d.verdict);
      }
    }
  }
  sw_keyed_info in = info(k);
  ck_assert_int_eq(in.inserted, 10 * slots);
  ck_assert_int_eq(in.evicted, 0);
  ck_assert_int_eq(in.refused, 0);
  ck_assert_int_eq(in.reclaimed + in.keys, in.inserted); /* every key, fresh or reclaimed */
  ck_assert_int_ge(in.reclaimed, 9 * slots - (in.slots - slots));
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* A table full of keys active right now: a new key evicts the least
 * recently active key of its buckets (SW_FULL_EVICT), passes uncounted
 * (SW_FULL_OPEN) or is blocked (SW_FULL_CLOSED); each counted. */
START_TEST(test_full_of_active_keys) {
  const int policies[] = {SW_FULL_EVICT, SW_FULL_OPEN, SW_FULL_CLOSED};
  for (int p = 0; p < 3; p++) {
    sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 5);
    ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, policies[p]));
    sw_keyed *k = keyed_new(12, o); /* one bucket: 16 places */
    ck_assert_int_eq(info(k).slots, 16);
    for (int i = 0; i < 16; i++) {
      char key[8];
      snprintf(key, sizeof key, "k%d", i);
      enter(k, 1000 + i, key); /* k0 is the least recently active */
    }
    sw_decision d = enter(k, 1100, "new");
    sw_keyed_info in = info(k);
    ck_assert_int_eq(in.on_full, policies[p]);
    if (policies[p] == SW_FULL_EVICT) {
      ck_assert_int_eq(d.verdict, PASS);
      ck_assert_int_eq(d.full, 0); /* it has a place */
      ck_assert_int_eq(in.evicted, 1);
      ck_assert_int_eq(key_pass(k, 1100, "k0"), -1);
      ck_assert_int_eq(key_pass(k, 1100, "new"), 1);
    } else {
      ck_assert_int_eq(d.verdict, policies[p] == SW_FULL_OPEN ? PASS : BLOCK);
      ck_assert_int_eq(d.full, 1);
      ck_assert_int_eq(in.refused, 1);
      ck_assert_int_eq(key_pass(k, 1100, "new"), -1);
      ck_assert_int_eq(key_pass(k, 1100, "k0"), 1);
    }
    /* once the keys are idle, the new key gets a place without loss */
    d = enter(k, 5000, "new");
    ck_assert_int_eq(d.verdict, PASS);
    ck_assert_int_eq(d.full, 0);
    ck_assert_int_eq(key_pass(k, 5000, "new"), 1);
    sw_keyed_free(k);
    sw_options_free(o);
  }
}
END_TEST

/* A concurrency table never evicts a key with requests in flight (its
 * exit would find another key): a new key finding only such keys is
 * blocked as full; once one of them exits, the new key takes its place. */
START_TEST(test_in_flight_keys_are_not_evicted) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 2);
  ck_ok(sw_options_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY));
  sw_keyed *k = keyed_new(12, o); /* one bucket: 16 places; on_full evict */
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    ck_assert_int_eq(enter(k, 100 + i, key).verdict, PASS);
  }
  sw_decision d = enter(k, 200, "new");
  ck_assert_int_eq(d.verdict, BLOCK);
  ck_assert_int_eq(d.full, 1);
  ck_assert_int_eq(info(k).evicted, 0);
  ck_ok(sw_keyed_exit_at(k, 300, "k7", 2, 5, 1, 0));
  d = enter(k, 400, "new");
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(d.full, 0);
  ck_assert_int_eq(info(k).evicted, 1);
  ck_assert_int_eq(key_pass(k, 400, "k7"), -1); /* the one with nothing in flight */
  for (int i = 0; i < 16; i++) { /* every other exit still finds its key */
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    if (i != 7) ck_ok(sw_keyed_exit_at(k, 500, key, strlen(key), 5, 1, 0));
  }
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* A key is idle from the first window in which its last window has left
 * the interval, not one later: 16 keys active in window 0 (0..500 ms of
 * 2 x 500) are active at t=999 (a new key is refused) and idle at t=1000
 * (a new key takes one's place, reclaimed). */
START_TEST(test_idle_from_the_first_window_out) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 5);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_CLOSED));
  sw_keyed *k = keyed_new(12, o); /* one bucket: 16 places */
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    enter(k, 100 + i, key);
  }
  sw_decision d = enter(k, 999, "new");
  ck_assert_int_eq(d.full, 1);
  ck_assert_int_eq(info(k).refused, 1);
  d = enter(k, 1000, "new");
  ck_assert_int_eq(d.full, 0);
  ck_assert_int_eq(d.verdict, PASS);
  ck_assert_int_eq(info(k).reclaimed, 1);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* An insert whose time is behind the table's newest window (a clock read
 * a moment earlier) evicts the least recently active key, not the freshest:
 * a window after the caller's time is as recent as can be. */
START_TEST(test_stale_insert_evicts_the_oldest) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 5);
  sw_keyed *k = keyed_new(12, o); /* 16 places */
  enter(k, 1000, "old");
  for (int i = 1; i < 15; i++) {
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    enter(k, 1500, key);
  }
  enter(k, 2100, "fresh");
  ck_assert_int_eq(enter(k, 1600, "stale").verdict, PASS);
  ck_assert_int_eq(info(k).evicted, 1);
  ck_assert_int_eq(key_pass(k, 2100, "fresh"), 1);
  ck_assert_int_eq(key_pass(k, 1600, "old"), -1);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* ----------------------------------------------------------------- keys */

/* Any bytes make a key (NULs, binary IPv6); keys longer than the key bytes
 * are kept as a digest and still exact; 1 and 65535 bytes are the bounds. */
START_TEST(test_keys) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 2);
  sw_keyed *k = keyed_new(100, o);
  const unsigned char v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const unsigned char v6b[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  sw_decision d;
  for (int i = 0; i < 3; i++) {
    ck_ok(sw_keyed_entry_at(k, 1000, v6, 16, 1, 0, &d));
    ck_assert_int_eq(d.verdict, i < 2 ? PASS : BLOCK);
  }
  ck_ok(sw_keyed_entry_at(k, 1000, v6b, 16, 1, 0, &d));
  ck_assert_int_eq(d.verdict, PASS);
  ck_ok(sw_keyed_entry_at(k, 1000, "a\0b", 3, 1, 0, &d)); /* not "a" */
  ck_ok(sw_keyed_entry_at(k, 1000, "a", 1, 1, 0, &d));
  ck_assert_int_eq(d.verdict, PASS);
  char longkey[300];
  memset(longkey, 'x', sizeof longkey);
  for (int i = 0; i < 3; i++) {
    ck_ok(sw_keyed_entry_at(k, 1000, longkey, sizeof longkey, 1, 0, &d));
    ck_assert_int_eq(d.verdict, i < 2 ? PASS : BLOCK);
  }
  longkey[299] = 'y'; /* another long key */
  ck_ok(sw_keyed_entry_at(k, 1000, longkey, sizeof longkey, 1, 0, &d));
  ck_assert_int_eq(d.verdict, PASS);
  sw_keyed_key s;
  ck_sw(sw_keyed_lookup_at(k, 1000, longkey, sizeof longkey, &s), 1);
  ck_assert_int_eq(s.len, 0); /* a digest */
  ck_sw(sw_keyed_lookup_at(k, 1000, v6, 16, &s), 1);
  ck_assert_int_eq(s.len, 16);
  ck_assert(memcmp(s.key, v6, 16) == 0);
  ck_assert_int_eq(s.pass, 2);
  ck_assert_int_eq(s.block, 1);
  ck_assert_int_eq(s.last_ms, 1000);
  static char huge[65536];
  ck_sw(sw_keyed_entry_at(k, 1000, huge, sizeof huge, 1, 0, &d), SW_ERANGE);
  ck_ok(sw_keyed_entry_at(k, 1000, huge, sizeof huge - 1, 1, 0, &d));
  ck_sw(sw_keyed_entry_at(k, 1000, "", 0, 1, 0, &d), SW_ERANGE);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* Scanning streams every key in chunks; top-N finds the busiest keys by
 * passes and by blocks. */
START_TEST(test_scan_and_top) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 50);
  sw_keyed *k = keyed_new(1000, o);
  for (int i = 0; i < 200; i++) {
    char key[16];
    snprintf(key, sizeof key, "key%03d", i);
    sw_decision d;
    ck_ok(sw_keyed_entry_at(k, 1000, key, strlen(key), i % 60, 0, &d));
  }
  uint64_t cursor = 0;
  sw_keyed_key chunk[7];
  int total = 0, n;
  int64_t pass = 0;
  while ((n = sw_keyed_scan_at(k, 1000, &cursor, chunk, 7)) > 0) {
    total += n;
    for (int i = 0; i < n; i++) pass += chunk[i].pass;
  }
  ck_assert_int_eq(n, 0);
  ck_assert_int_eq(total, 200);
  ck_assert_int_eq(pass, info(k).pass);
  sw_keyed_key top[5];
  int64_t active;
  ck_assert_int_eq(sw_keyed_top_at(k, 1000, SW_KEYED_BY_PASS, top, 5, &active), 5);
  ck_assert_int_eq(active, 200 - 4); /* 0 units: no pass, no block */
  for (int i = 0; i < 5; i++) /* keys 50, 110, 170 pass 50 at once; 49, 109, ... 49 */
    ck_assert_int_eq(top[i].pass, i < 3 ? 50 : 49);
  ck_assert_int_eq(sw_keyed_top_at(k, 1000, SW_KEYED_BY_BLOCK, top, 5, NULL), 5);
  ck_assert_int_eq(top[0].block, 59); /* key059, key119 or key179 */
  ck_assert_int_eq(strncmp((char *)top[0].key, "key", 3), 0);
  ck_assert_int_eq((atoi((char *)top[0].key + 3)) % 60, 59);
  ck_assert_int_ge(top[0].block, top[4].block);
  ck_assert_int_eq(sw_keyed_top_at(k, 1000, SW_KEYED_BY_PASS, top, 0, &active), 0);
  ck_assert_int_eq(active, 196);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* Per-key state sizes: 65 bytes for keys up to 16 bytes with 2 windows
 * (meta and key in 32 bytes, 16 a window, a tag byte), 113 for keys up
 * to 63 bytes, 16 more with pacing; a table is capacity / 0.8 places of
 * that (81 and 141 bytes per key of capacity), reserved and untouched until
 * keys come. */
START_TEST(test_sizes) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 10);
  sw_keyed *k = keyed_new(1000000, o);
  sw_keyed_info in = info(k);
  ck_assert_int_eq(in.bytes_per_key, 65);
  ck_assert_int_le(in.bytes, 1000000 * 82);
  sw_keyed_free(k);
  ck_ok(sw_options_set(o, SW_OPT_KEY_BYTES, 63));
  k = keyed_new(1000000, o);
  in = info(k);
  ck_assert_int_eq(in.bytes_per_key, 113);
  ck_assert_int_le(in.bytes, 1000000 * 142);
  sw_keyed_free(k);
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  k = keyed_new(1000, o);
  ck_assert_int_eq(info(k).bytes_per_key, 129);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* ----------------------------------------------------------------- rules */

START_TEST(test_rules) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 2);
  sw_keyed *k = keyed_new(10, o);
  enter(k, 1000, "a");
  enter(k, 1000, "a");
  ck_assert_int_eq(enter(k, 1000, "a").verdict, BLOCK);
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 3));
  ck_ok(sw_keyed_set_rule(k, o)); /* counts kept */
  ck_assert_int_eq(enter(k, 1000, "a").verdict, PASS);
  ck_assert_int_eq(enter(k, 1000, "a").verdict, BLOCK);
  sw_options *got = keyed_opts(0, 0);
  ck_ok(sw_keyed_get_rule(k, got));
  double th;
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &th));
  ck_assert_double_eq(th, 3);
  /* the kind of state per key stays */
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  ck_sw(sw_keyed_set_rule(k, o), SW_EINVAL);
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP));
  ck_sw(sw_keyed_set_rule(k, o), SW_EINVAL);
  ck_sw(sw_keyed_set_dry_run(k, 2), SW_EINVAL);
  sw_keyed_free(k);
  sw_options_free(o);
  sw_options_free(got);
}
END_TEST

START_TEST(test_bad_input) {
  sw_keyed *k = NULL;
  sw_options *o = keyed_opts(SW_BEHAVIOR_WARM_UP, 10);
  ck_sw(sw_keyed_create(&k, 10, o), SW_EINVAL);
  ck_assert_ptr_null(k);
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_REJECT));
  ck_ok(sw_options_set(o, SW_OPT_CLUSTER, 1));
  ck_sw(sw_keyed_create(&k, 10, o), SW_EINVAL);
  ck_ok(sw_options_set(o, SW_OPT_CLUSTER, 0));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 4294967295.0 - 1));
  ck_ok(sw_keyed_create(&k, 10, o)); /* at most 2^32 - 1 a window: 2^32 - 2 + 1 */
  sw_keyed_free(k);
  k = NULL;
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 4294967295.0));
  ck_sw(sw_keyed_create(&k, 10, o), SW_ERANGE); /* could count 2^32 in a window */
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "4294967295"));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 100));
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 1000));
  ck_sw(sw_keyed_create(&k, 10, o), SW_ERANGE);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 3));
  ck_sw(sw_keyed_create(&k, 10, o), SW_ESIZE);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 2));
  ck_sw(sw_keyed_create(&k, 0, o), SW_ESIZE);
  ck_sw(sw_keyed_create(&k, (1u << 28) + 1, o), SW_ESIZE);
  ck_sw(sw_keyed_create(NULL, 10, o), SW_ENULL);
  ck_sw(sw_options_set(o, SW_OPT_KEY_BYTES, 15), SW_ERANGE);
  k = keyed_new(10, o);
  sw_decision d;
  ck_sw(sw_keyed_entry_at(NULL, 1000, "a", 1, 1, 0, &d), SW_ENULL);
  ck_sw(sw_keyed_entry_at(k, 1000, NULL, 1, 1, 0, &d), SW_ENULL);
  ck_sw(sw_keyed_entry_at(k, 1000, "a", 1, 1, 0, NULL), SW_ENULL);
  ck_sw(sw_keyed_entry_at(k, -1, "a", 1, 1, 0, &d), SW_ETIME);
  ck_sw(sw_keyed_entry_at(k, 1000, "a", 1, -1, 0, &d), SW_ERANGE);
  ck_sw(sw_keyed_entry_at(k, 1000, "a", 1, (int64_t)INT32_MAX + 1, 0, &d), SW_ERANGE);
  ck_sw(sw_keyed_entry_at(k, 1000, "a", 1, 1, SW_ENTRY_PRIORITIZED, &d), SW_ENOTSUP);
  ck_sw(sw_keyed_entry_at(k, 1000, "a", 1, 1, 0x80, &d), SW_EINVAL);
  ck_sw(sw_keyed_exit_at(k, 1000, "a", 1, -1, 1, 0), SW_ERANGE);
  ck_sw(sw_keyed_exit_at(k, 1000, "a", 1, 1, 1, 0x10), SW_EINVAL);
  ck_assert_int_eq(info(k).keys, 0); /* nothing was inserted by a refused call */
  sw_keyed_key s;
  ck_sw(sw_keyed_top_at(k, 1000, 7, &s, 1, NULL), SW_EINVAL);
  ck_sw(sw_keyed_top_at(k, 1000, SW_KEYED_BY_PASS, NULL, 1, NULL), SW_ENULL);
  ck_sw(sw_keyed_scan_at(k, 1000, NULL, &s, 1), SW_ENULL);
  sw_keyed_free(k);
  sw_keyed_free(NULL);
  sw_options_free(o);
}
END_TEST

/* ---------------------------------------------------------------- threads */

#define CHURN_THREADS 4
#define CHURN_KEYS 24
#define CHURN_T 10

typedef struct churn {
  pthread_t tid;
  sw_keyed *k;
  pthread_barrier_t *phase;
  int id, phases;
  _Atomic int64_t (*admitted)[CHURN_KEYS]; /* per phase and key */
} churn;

static void churn_key(char *buf, size_t n, int phase, int key) {
  /* half of a phase's keys are the previous phase's: idle, their places
   * being given to new keys while threads enter them again */
  snprintf(buf, n, "p%d-k%d", key < CHURN_KEYS / 2 ? phase - 1 : phase, key);
}

static void *churn_worker(void *arg) {
  churn *c = arg;
  uint32_t r = 0x9e3779b9u * (uint32_t)(c->id + 1);
  for (int p = 1; p <= c->phases; p++) {
    pthread_barrier_wait(c->phase);
    const int64_t t = 1000000 + (int64_t)p * 5000; /* every earlier key is idle */
    for (int i = 0; i < 200; i++) {
      r = r * 1103515245u + 12345u;
      int key = (int)((r >> 8) % CHURN_KEYS);
      char name[32];
      churn_key(name, sizeof name, p, key);
      sw_decision d;
      if (sw_keyed_entry_at(c->k, t, name, strlen(name), 1, 0, &d) == SW_OK &&
          d.verdict == SW_VERDICT_PASS)
        atomic_fetch_add(&c->admitted[p][key], 1);
    }
    pthread_barrier_wait(c->phase);
  }
  return NULL;
}

/* 4 threads enter keys whose places are being reclaimed for other keys (a
 * 16-place table, 24 keys a phase): each key present at a phase's end holds
 * exactly the passes its entries were told (no count lost, none in another
 * key's state), and never more than the threshold. Under ThreadSanitizer in
 * CI; rounds scale with SW_STRESS. */
START_TEST(test_churn_under_threads) {
  const char *s = getenv("SW_STRESS");
  const int phases = 40 * (s && atoi(s) > 0 ? atoi(s) : 1);
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, CHURN_T);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_CLOSED));
  sw_keyed *k = keyed_new(13, o); /* 1 bucket: 16 places */
  ck_assert_int_eq(info(k).slots, 16);
  _Atomic int64_t(*admitted)[CHURN_KEYS] = calloc((size_t)phases + 1, sizeof *admitted);
  pthread_barrier_t phase;
  pthread_barrier_init(&phase, NULL, CHURN_THREADS + 1);
  churn w[CHURN_THREADS];
  for (int i = 0; i < CHURN_THREADS; i++) {
    w[i] = (churn){.k = k, .phase = &phase, .id = i, .phases = phases, .admitted = admitted};
    ck_assert_int_eq(pthread_create(&w[i].tid, NULL, churn_worker, &w[i]), 0);
  }
  for (int p = 1; p <= phases; p++) {
    pthread_barrier_wait(&phase); /* go */
    pthread_barrier_wait(&phase); /* done */
    const int64_t t = 1000000 + (int64_t)p * 5000;
    for (int key = 0; key < CHURN_KEYS; key++) {
      char name[32];
      churn_key(name, sizeof name, p, key);
      int64_t told = atomic_load(&admitted[p][key]), have = key_pass(k, t, name);
      ck_assert_int_le(told, CHURN_T);
      if (told > 0)
        ck_assert_msg(have == told, "phase %d key %s: entries were told %lld passes, the table "
                      "holds %lld", p, name, (long long)told, (long long)have);
    }
  }
  for (int i = 0; i < CHURN_THREADS; i++) pthread_join(w[i].tid, NULL);
  ck_assert_int_gt(info(k).reclaimed, 0);
  pthread_barrier_destroy(&phase);
  free(admitted);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* 4 threads enter the same new keys at once in a table whose buckets are
 * some at most half full (an insert under the first bucket's lock only),
 * some fuller (under both buckets' locks): each key is inserted once and
 * admits exactly its threshold, reject and pacing alike (the first
 * admission is counted by the insert). Under ThreadSanitizer in CI. */
#define RACE_THREADS 4
#define RACE_KEYS 40
#define RACE_T 3

typedef struct race {
  pthread_t tid;
  sw_keyed *k;
  pthread_barrier_t *go;
  _Atomic int64_t *admitted; /* per key */
} race;

static void *race_worker(void *arg) {
  race *c = arg;
  for (int j = 0; j < 2 * RACE_KEYS; j++) { /* each key twice, all threads on it at once */
    int key = j % RACE_KEYS;
    pthread_barrier_wait(c->go);
    char name[16];
    snprintf(name, sizeof name, "new%d", key);
    sw_decision d;
    if (sw_keyed_entry_at(c->k, 50000, name, strlen(name), 1, 0, &d) == SW_OK &&
        d.verdict != BLOCK && !d.full)
      atomic_fetch_add(&c->admitted[key], 1);
  }
  return NULL;
}

START_TEST(test_new_keys_raced_by_threads) {
  const char *s = getenv("SW_STRESS");
  const int rounds = 20 * (s && atoi(s) > 0 ? atoi(s) : 1);
  for (int round = 0; round < rounds; round++) {
    const int behavior = round % 2 ? SW_BEHAVIOR_PACING : SW_BEHAVIOR_REJECT;
    /* pacing: 3 a minute, 2 queued (the first at once), the rest refused */
    sw_options *o = keyed_opts(behavior, behavior == SW_BEHAVIOR_PACING ? 1.0 / 60 : RACE_T);
    if (behavior == SW_BEHAVIOR_PACING) {
      ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 60000));
      ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 2 * 60000));
    }
    ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_CLOSED));
    sw_keyed *k = keyed_new(200, o); /* 16 buckets of 16 */
    for (int i = 0; i < 120; i++) { /* 7.5 a bucket on average: some over half full */
      char name[16];
      snprintf(name, sizeof name, "old%d", i);
      enter(k, 50000, name);
    }
    _Atomic int64_t admitted[RACE_KEYS] = {0};
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACE_THREADS);
    race w[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
      w[i] = (race){.k = k, .go = &go, .admitted = admitted};
      ck_assert_int_eq(pthread_create(&w[i].tid, NULL, race_worker, &w[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(w[i].tid, NULL);
    pthread_barrier_destroy(&go);
    sw_keyed_info in = info(k);
    ck_assert_int_eq(in.refused, 0);
    ck_assert_int_eq(in.inserted, 120 + RACE_KEYS);
    ck_assert_int_eq(in.keys, 120 + RACE_KEYS);
    for (int key = 0; key < RACE_KEYS; key++) {
      char name[16];
      snprintf(name, sizeof name, "new%d", key);
      ck_assert_msg(atomic_load(&admitted[key]) == RACE_T, "round %d key %s: %lld admitted",
                    round, name, (long long)atomic_load(&admitted[key]));
      ck_assert_int_eq(key_pass(k, 50000, name), RACE_T);
    }
    sw_keyed_free(k);
    sw_options_free(o);
  }
}
END_TEST

/* A thread evicts and re-enters keys of a full 16-place table while
 * another asks for the top keys: every key top returns is a key with
 * passes (one whose place changed hands between the scan and the read is
 * left out, never returned empty). */
typedef struct top_churn {
  sw_keyed *k;
  _Atomic int stop;
} top_churn;

static void *top_churn_worker(void *arg) {
  top_churn *c = arg;
  uint32_t r = 7;
  while (!atomic_load(&c->stop)) {
    char key[16];
    r = r * 1103515245u + 12345u;
    snprintf(key, sizeof key, "k%u", (r >> 8) % 64);
    sw_decision d;
    sw_keyed_entry_at(c->k, 1000, key, strlen(key), 1, 0, &d);
  }
  return NULL;
}

START_TEST(test_top_while_places_change_hands) {
  const char *s = getenv("SW_STRESS");
  const int rounds = 20000 * (s && atoi(s) > 0 ? atoi(s) : 1);
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 1000);
  sw_keyed *k = keyed_new(12, o); /* one bucket: every new key evicts one */
  top_churn c = {.k = k};
  pthread_t tid;
  ck_assert_int_eq(pthread_create(&tid, NULL, top_churn_worker, &c), 0);
  int64_t returned = 0;
  for (int i = 0; i < rounds; i++) {
    sw_keyed_key top[16];
    int n = sw_keyed_top_at(k, 1000, SW_KEYED_BY_PASS, top, 16, NULL);
    ck_assert_int_ge(n, 0);
    for (int j = 0; j < n; j++)
      ck_assert_msg(top[j].pass > 0 && top[j].key[0] == 'k', "round %d: top[%d] is empty", i, j);
    returned += n;
  }
  atomic_store(&c.stop, 1);
  pthread_join(tid, NULL);
  ck_assert_int_gt(returned, 0);
  ck_assert_int_gt(info(k).evicted, 0);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* 1,000,000 distinct IPv4 keys into one table of that capacity: every key
 * limited exactly (threshold 2: 2 pass, the third is blocked), none lost;
 * the table's memory stays within 82 bytes per key. */
START_TEST(test_million_ipv4_keys) {
  sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 2);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_CLOSED));
  sw_keyed *k = keyed_new(1000000, o);
  ck_assert_int_le(info(k).bytes, 82 * 1000000);
  int64_t wrong = 0;
  for (uint32_t i = 0; i < 1000000; i++) {
    uint32_t ip = 0x0a000000u + i * 7u; /* 10.x.y.z */
    unsigned char key[4] = {ip >> 24, ip >> 16, ip >> 8, ip};
    for (int j = 0; j < 3; j++) {
      sw_decision d;
      ck_ok(sw_keyed_entry_at(k, 50000, key, 4, 1, 0, &d));
      wrong += d.verdict != (j < 2 ? PASS : BLOCK);
    }
  }
  ck_assert_int_eq(wrong, 0);
  sw_keyed_info in = info(k);
  ck_assert_int_eq(in.keys, 1000000);
  ck_assert_int_eq(in.evicted + in.refused, 0);
  ck_assert_int_eq(in.pass, 2000000);
  ck_assert_int_eq(in.block, 1000000);
  sw_keyed_free(k);
  sw_options_free(o);
}
END_TEST

/* A key's first interval after time 0, whatever the windows: its windows
 * before 0 hold nothing and need no seal (with 10 windows an entry before
 * 500 ms spun for ever). One entry every 100 ms against 5 a second: the
 * first 5 pass, then one more each time a window of passes leaves. */
START_TEST(test_entries_near_time_zero) {
  static const int32_t counts[] = {1, 2, 4, 5, 10};
  for (int c = 0; c < 5; c++) {
    sw_options *o = keyed_opts(SW_BEHAVIOR_REJECT, 5);
    ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, counts[c]));
    sw_keyed *k = keyed_new(16, o);
    sw_options_free(o);
    const int64_t wl = 1000 / counts[c];
    int64_t passed[64];
    int np = 0;
    for (int64_t t = 0; t < 3000; t += 100) {
      int64_t in = 0; /* passes of the windows of the interval ending at t */
      for (int i = 0; i < np; i++) in += passed[i] / wl > t / wl - counts[c];
      sw_decision d = enter(k, t, "near");
      ck_assert_msg(d.verdict == (in + 1 <= 5 ? PASS : BLOCK),
                    "%d windows, t=%lld: verdict %d with %lld in the interval", counts[c],
                    (long long)t, d.verdict, (long long)in);
      if (d.verdict == PASS) passed[np++] = t;
    }
    ck_assert_int_ge(np, 10);
    sw_keyed_free(k);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("keyed");
  SW_TCASE(s, "reject", test_reject_per_key, test_reject_sliding_and_retry, test_reject_boundary,
           test_dry_run, test_entries_near_time_zero);
  SW_TCASE(s, "kinds", test_pacing_per_key, test_concurrency_per_key);
  SW_TCASE(s, "places", test_waves_reclaim_everything, test_full_of_active_keys,
           test_idle_from_the_first_window_out, test_in_flight_keys_are_not_evicted,
           test_stale_insert_evicts_the_oldest, test_keys,
           test_scan_and_top, test_sizes);
  SW_TCASE(s, "rules", test_rules, test_bad_input);
  SW_TCASE(s, "scale", test_churn_under_threads, test_new_keys_raced_by_threads,
           test_top_while_places_change_hands,
           test_million_ipv4_keys);
  return sw_test_run(s);
}
