/* SPDX-License-Identifier: Apache-2.0 */
/* The breaker kind (sw_breaker_open): a breaker of each strategy taken
 * through closed, open, half-open (probes in flight, one ended) and back,
 * and each damaged copy driven through entries, exits (good, slow, failed,
 * cancelled, probes), stats, rules and the listener. */
#include <stdio.h>

#include "segfuzz.h"

static const char *const variants[] = {"slow-ratio", "error-ratio", "error-count"};

static sw_options *brk_opts(int v, bool other) {
  sw_options *o = fz_opts();
  fz_set(o, SW_OPT_BREAKER_STRATEGY, v);
  fz_set(o, SW_OPT_BREAKER_COUNT, v == 0 ? 50 : v == 1 ? 0.3 : 2);
  fz_set(o, SW_OPT_BREAKER_SLOW_RATIO, 0.5);
  fz_set(o, SW_OPT_BREAKER_MIN_REQUESTS, 3);
  fz_set(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, 1);
  fz_set(o, SW_OPT_BREAKER_STAT_INTERVAL_MS, 1000);
  fz_set(o, SW_OPT_BREAKER_SAMPLE_COUNT, other ? 5 : v == 1 ? 4 : 2);
  fz_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, other ? 7 : v == 0 ? 1 : 3);
  fz_set(o, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, 700);
  return o;
}

/* n requests at t.., each bad (slow and failed) or good; probes ended as
 * the calls say: 0 held (never ended), 1 ended. */
static void traffic(sw_breaker *b, int64_t t, int n, bool bad, bool end) {
  sw_decision d;
  for (int i = 0; i < n; i++, t += 20) {
    if (sw_breaker_entry_at(b, t, &d) != SW_OK || d.verdict != SW_VERDICT_PASS) continue;
    if (d.probe && !end) continue;
    sw_breaker_exit_at(b, t + 5, &d, bad ? 200 : 1, bad ? SW_EXIT_ERROR : 0);
  }
}

static void listener(void *user, int32_t from, int32_t to, int64_t t, double value) {
  (void)from, (void)to, (void)t, (void)value;
  ++*(int *)user;
}

static void make(int v, const char *dir, fz_base *out) {
  char path[512], other[512];
  snprintf(out->variant, sizeof out->variant, "%s", variants[v]);
  snprintf(path, sizeof path, "%s/breaker-%d", dir, v);
  snprintf(other, sizeof other, "%s/breaker-%d-other", dir, v);
  sw_options *o = brk_opts(v, false), *oo = brk_opts(v, true);
  sw_breaker *b, *b2;
  FZ_MUST(sw_breaker_open(&b, path, o, SW_SEGMENT_CREATE));
  fz_tick(); /* its creation time differs from the first one's: a layout word */
  FZ_MUST(sw_breaker_open(&b2, other, oo, SW_SEGMENT_CREATE));
  fz_bytes fresh = fz_read_file(path), fresh_other = fz_read_file(other);
  sw_breaker_free(b2);
  fz_bytes states[5];
  traffic(b, FZ_T0, 10, false, true); /* closed */
  states[0] = fz_read_file(path);
  traffic(b, FZ_T0 + 300, 10, true, true); /* opens */
  states[1] = fz_read_file(path);
  traffic(b, FZ_T0 + 1500, 1, false, true); /* a good probe: closes (one call) */
  traffic(b, FZ_T0 + 1600, 10, true, true); /* opens again */
  states[2] = fz_read_file(path);
  traffic(b, FZ_T0 + 2800, 2, true, true); /* a bad probe: open again */
  states[3] = fz_read_file(path);
  traffic(b, FZ_T0 + 4000, 3, false, false); /* half-open, probes in flight */
  states[4] = fz_read_file(path);
  sw_breaker_free(b);
  fz_find_targets(&out->tg, &fresh, &fresh_other, states, 5);
  out->bytes = states[4];
  for (int i = 0; i < 4; i++) fz_bytes_free(&states[i]);
  fz_bytes_free(&fresh);
  fz_bytes_free(&fresh_other);
  sw_options_free(o);
  sw_options_free(oo);
}

static void drive(int v, const char *path, int mode) {
  sw_options *o = brk_opts(v, false);
  sw_breaker *b = NULL;
  int rc = (int)FZ(sw_breaker_open(&b, path, o, fz_mode_flags[mode]), "sw_breaker_open %s",
                   fz_mode_names[mode]);
  fz_cur->open_rc[mode] = rc;
  sw_options_free(o);
  fz_probe(path);
  if (rc < 0) return;
  int changes = 0;
  FZ(sw_breaker_set_listener(b, listener, &changes), "sw_breaker_set_listener");
  sw_breaker_info info;
  static const int64_t at[] = {0, FZ_T0 - 4000, FZ_T0 + 4100, FZ_NOW, FZ_T0 + 60000,
                               (INT64_C(1) << 42) - 2, INT64_C(1) << 42};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
    FZ(sw_breaker_stats_at(b, at[i], &info), "sw_breaker_stats_at t%zu", i);
  /* through open and half-open: probes good, slow, failed, cancelled, held */
  sw_decision d;
  int64_t t = FZ_T0 + 4050;
  for (int i = 0; i < 60; i++, t += 97) {
    rc = (int)FZ(sw_breaker_entry_at(b, t, &d), "sw_breaker_entry_at %d", i);
    if (rc != SW_OK || d.verdict != SW_VERDICT_PASS) continue;
    int what = i % 5;
    if (what == 4 && d.probe) continue; /* a probe whose process died */
    FZ(sw_breaker_exit_at(b, t + 3, what == 3 ? NULL : &d, what == 1 ? 300 : 2,
                          what == 2 ? SW_EXIT_ERROR : what == 3 ? 0 : what == 4 ? SW_EXIT_CANCEL : 0),
       "sw_breaker_exit_at %d (%d)", i, what);
  }
  FZ(sw_breaker_entry_at(b, FZ_T0 - 4000, &d), "sw_breaker_entry_at, earlier");
  if (FZ(sw_breaker_entry(b, &d), "sw_breaker_entry") == SW_OK && d.verdict == SW_VERDICT_PASS)
    FZ(sw_breaker_exit(b, &d, 1, 0), "sw_breaker_exit");
  FZ(sw_breaker_exit_at(b, t, &d, 1, SW_EXIT_CANCEL), "sw_breaker_exit_at, again");
  FZ(sw_breaker_entry_at(b, (INT64_C(1) << 42) - 2, &d), "sw_breaker_entry_at, latest time");
  FZ(sw_breaker_stats_at(b, t, &info), "sw_breaker_stats_at");
  sw_options *r = fz_opts();
  FZ(sw_breaker_get_rule(b, r), "sw_breaker_get_rule");
  sw_options_free(r);
  fz_begin("sw_breaker_free");
  sw_breaker_free(b);
  fz_end(0);
}

const fz_kind fz_breaker_kind = {"breaker", 3, make, drive};
