/* SPDX-License-Identifier: Apache-2.0 */
/* The keyed kind (sw_keyed_open): a table of each kind of state per key
 * (windows, pacing, concurrency) with keys inserted, counted, blocked,
 * reclaimed and evicted, and each damaged copy driven through entries,
 * exits, cancels, rules, stats, lookup, scan and top. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "segfuzz.h"

#define CAPACITY 32

static const char *const variants[] = {"reject", "pacing", "concurrency"};

static sw_options *kt_opts(int v, bool other) {
  sw_options *o = fz_opts();
  fz_set(o, SW_OPT_SECOND_SAMPLE_COUNT, other ? 4 : 2);
  fz_set(o, SW_OPT_SECOND_INTERVAL_MS, 1000);
  fz_set(o, SW_OPT_KEY_BYTES, v == 0 ? 16 : v == 1 ? 32 : 128);
  switch (v) {
  case 0: fz_set(o, SW_OPT_THRESHOLD, 5); break;
  case 1:
    fz_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING);
    fz_set(o, SW_OPT_THRESHOLD, 10);
    fz_set(o, SW_OPT_MAX_QUEUE_MS, 400);
    break;
  default:
    fz_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY);
    fz_set(o, SW_OPT_THRESHOLD, 2);
    break;
  }
  return o;
}

/* Key i: short ones, and every eighth longer than any table keeps whole. */
static size_t key(int i, char *buf) {
  if (i % 8 == 7) {
    memset(buf, 'a' + i % 26, 200);
    memcpy(buf, &i, sizeof i);
    return 200;
  }
  return (size_t)snprintf(buf, 32, "client-%d", i);
}

static void use(sw_keyed *k, int64_t t, int from, int to, bool exits) {
  char buf[256];
  sw_decision d;
  for (int i = from; i < to; i++) {
    size_t len = key(i, buf);
    for (int j = 0; j < 1 + i % 4; j++) {
      int rc = sw_keyed_entry_at(k, t + j * 40, buf, len, 1, 0, &d);
      if (rc == SW_OK && exits && d.verdict != SW_VERDICT_BLOCK)
        sw_keyed_exit_at(k, t + j * 40 + 5, buf, len, 5, 1, j % 2 ? SW_EXIT_ERROR : 0);
    }
  }
}

static void make(int v, const char *dir, fz_base *out) {
  char path[512], other[512];
  snprintf(out->variant, sizeof out->variant, "%s", variants[v]);
  snprintf(path, sizeof path, "%s/keyed-%d", dir, v);
  snprintf(other, sizeof other, "%s/keyed-%d-other", dir, v);
  sw_options *o = kt_opts(v, false), *oo = kt_opts(v, true);
  sw_keyed *k, *k2;
  FZ_MUST(sw_keyed_open(&k, path, CAPACITY, o, SW_SEGMENT_CREATE));
  fz_tick(); /* its creation time differs from the first one's: a layout word */
  FZ_MUST(sw_keyed_open(&k2, other, CAPACITY + 8, oo, SW_SEGMENT_CREATE));
  fz_bytes fresh = fz_read_file(path), fresh_other = fz_read_file(other);
  sw_keyed_free(k2);
  fz_bytes states[4];
  use(k, FZ_T0, 0, 20, v != 2);
  states[0] = fz_read_file(path);
  use(k, FZ_T0 + 1500, 10, 30, true);
  states[1] = fz_read_file(path);
  use(k, FZ_T0 + 4000, 25, 70, v != 2); /* more keys than places: reclaims, evictions */
  states[2] = fz_read_file(path);
  FZ_MUST(sw_keyed_set_dry_run(k, 1));
  use(k, FZ_T0 + 7200, 60, 75, false);
  states[3] = fz_read_file(path);
  sw_keyed_free(k);
  fz_find_targets(&out->tg, &fresh, &fresh_other, states, 4);
  out->bytes = states[3];
  for (int i = 0; i < 3; i++) fz_bytes_free(&states[i]);
  fz_bytes_free(&fresh);
  fz_bytes_free(&fresh_other);
  sw_options_free(o);
  sw_options_free(oo);
}

/* The whole table by cursor; a scan that never ends is a hang. */
static void scan(const sw_keyed *k, int64_t t) {
  sw_keyed_key out[8];
  uint64_t cursor = 0;
  for (long rounds = 0;; rounds++) {
    if (rounds > 1000000) {
      fz_begin("sw_keyed_scan_at: the cursor never reaches the end (%llu)",
               (unsigned long long)cursor);
      raise(SIGALRM);
    }
    int n = (int)FZ(sw_keyed_scan_at(k, t, &cursor, out, 8), "sw_keyed_scan_at %llu",
                    (unsigned long long)cursor);
    if (n <= 0) break;
  }
}

static void drive(int v, const char *path, int mode) {
  static const int64_t times[] = {FZ_T0 + 7300, FZ_T0 + 500, FZ_T0 + 8800, FZ_T0 - 4000,
                                  FZ_T0 + 61000, FZ_T0 + INT64_C(100000000000)};
  sw_options *o = kt_opts(v, false);
  sw_keyed *k = NULL;
  int rc = (int)FZ(sw_keyed_open(&k, path, CAPACITY, o, fz_mode_flags[mode]), "sw_keyed_open %s",
                   fz_mode_names[mode]);
  fz_cur->open_rc[mode] = rc;
  fz_probe(path);
  if (rc < 0) {
    sw_options_free(o);
    return;
  }
  FZ(sw_keyed_created(k), "sw_keyed_created");
  sw_keyed_info info;
  FZ(sw_keyed_stats(k, &info), "sw_keyed_stats");
  char buf[256];
  sw_decision d;
  sw_keyed_key kk;
  for (int i = 55; i < 80; i += 2) { /* keys held, keys evicted, keys never seen */
    size_t len = key(i, buf);
    for (size_t ti = 0; ti < sizeof times / sizeof times[0]; ti++) {
      int64_t t = times[ti];
      rc = (int)FZ(sw_keyed_entry_at(k, t, buf, len, 1 + (int64_t)ti % 3, 0, &d),
                   "sw_keyed_entry_at key %d t%zu", i, ti);
      if (rc == SW_OK && d.verdict != SW_VERDICT_BLOCK) {
        if (ti % 2) FZ(sw_keyed_cancel(k, &d), "sw_keyed_cancel key %d", i);
        else FZ(sw_keyed_exit_at(k, t + 7, buf, len, 7, 1, ti % 4 ? SW_EXIT_ERROR : 0),
                "sw_keyed_exit_at key %d t%zu", i, ti);
      }
      FZ(sw_keyed_lookup_at(k, t, buf, len, &kk), "sw_keyed_lookup_at key %d t%zu", i, ti);
    }
    FZ(sw_keyed_entry_at(k, FZ_NOW, buf, len, 1, SW_ENTRY_NO_EXIT, &d), "entry NO_EXIT key %d", i);
    FZ(sw_keyed_entry_at(k, FZ_NOW, buf, len, 1, SW_ENTRY_PRIORITIZED, &d), "entry PRIORITIZED");
    if (FZ(sw_keyed_entry(k, buf, len, 1, 0, &d), "sw_keyed_entry key %d", i) == SW_OK &&
        d.verdict != SW_VERDICT_BLOCK)
      FZ(sw_keyed_exit(k, buf, len, 3, 1, 0), "sw_keyed_exit key %d", i);
  }
  FZ(sw_keyed_exit_at(k, FZ_NOW, "never-entered", 13, 1, 1, 0), "sw_keyed_exit_at, no entry");
  FZ(sw_keyed_entry_at(k, FZ_NOW, "", 0, 1, 0, &d), "sw_keyed_entry_at, empty key");
  sw_keyed_key top[8];
  int64_t active;
  for (size_t ti = 0; ti < 3; ti++) {
    scan(k, times[ti]);
    FZ(sw_keyed_top_at(k, times[ti], SW_KEYED_BY_PASS, top, 8, &active), "sw_keyed_top_at pass");
    FZ(sw_keyed_top_at(k, times[ti], SW_KEYED_BY_BLOCK, top, 8, NULL), "sw_keyed_top_at block");
  }
  sw_options *r = fz_opts();
  if (FZ(sw_keyed_get_rule(k, r), "sw_keyed_get_rule") == SW_OK)
    FZ(sw_keyed_set_rule(k, r), "sw_keyed_set_rule");
  FZ(sw_keyed_set_rule(k, o), "sw_keyed_set_rule as created");
  FZ(sw_keyed_set_dry_run(k, 0), "sw_keyed_set_dry_run 0");
  FZ(sw_keyed_set_dry_run(k, 1), "sw_keyed_set_dry_run 1");
  FZ(sw_keyed_stats(k, &info), "sw_keyed_stats");
  sw_options_free(r);
  sw_options_free(o);
  fz_begin("sw_keyed_free");
  sw_keyed_free(k);
  fz_end(0);
}

const fz_kind fz_keyed_kind = {"keyed", 3, make, drive};
