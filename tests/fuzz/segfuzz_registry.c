/* SPDX-License-Identifier: Apache-2.0 */
/* The registry kind (sw_segment_open): limiters of every behaviour with
 * counts in several windows, and each damaged copy driven through the
 * registry, its limiters, their nodes, metrics and leap arrays. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "segfuzz.h"

static const uint32_t capacity_of[] = {6, 3};

/* The configuration of variant v (other: another one, for the layout diff). */
static sw_options *reg_opts(int v, bool other) {
  sw_options *o = fz_opts();
  fz_set(o, SW_OPT_SECOND_SAMPLE_COUNT, other ? 4 : v ? 4 : 2);
  fz_set(o, SW_OPT_SECOND_INTERVAL_MS, 1000);
  fz_set(o, SW_OPT_MINUTE_SAMPLE_COUNT, other ? 4 : 6);
  fz_set(o, SW_OPT_MINUTE_INTERVAL_MS, other ? 8000 : 6000);
  fz_set(o, SW_OPT_STRIPES, v ? 2 : 1);
  fz_set(o, SW_OPT_THRESHOLD, 5);
  return o;
}

/* A rule of each behaviour, for the limiters made with sw_registry_get_ex. */
static sw_options *rule_opts(int which) {
  sw_options *o = fz_opts();
  switch (which % 4) {
  case 0: fz_set(o, SW_OPT_THRESHOLD, 5); break;
  case 1:
    fz_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING);
    fz_set(o, SW_OPT_THRESHOLD, 10);
    fz_set(o, SW_OPT_MAX_QUEUE_MS, 400);
    break;
  case 2:
    fz_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY);
    fz_set(o, SW_OPT_THRESHOLD, 2);
    break;
  default:
    fz_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP);
    fz_set(o, SW_OPT_THRESHOLD, 20);
    fz_set(o, SW_OPT_WARM_UP_SEC, 2);
    break;
  }
  return o;
}

static const char *const names[] = {"api", "pacing", "conc", "warm", "extra", "zz-absent"};

/* Entries (passes, blocks, waits, borrowings) and exits of l at t0.. */
static void use(sw_limiter *l, int64_t t0, int k) {
  sw_decision d;
  for (int i = 0; i < 8; i++) {
    int64_t t = t0 + i * 90;
    if (sw_limiter_entry_at(l, t, 1 + i % 2, i % 3 == 2 ? SW_ENTRY_PRIORITIZED : 0, &d) == SW_OK &&
        d.verdict != SW_VERDICT_BLOCK)
      sw_limiter_exit_at(l, t + 3 + k, 7 + i, 1, i % 2 ? SW_EXIT_ERROR : 0);
  }
}

static void make(int v, const char *dir, fz_base *out) {
  char path[512], other[512];
  snprintf(out->variant, sizeof out->variant, v ? "full" : "mixed");
  snprintf(path, sizeof path, "%s/registry-%d", dir, v);
  snprintf(other, sizeof other, "%s/registry-%d-other", dir, v);
  sw_options *o = reg_opts(v, false), *oo = reg_opts(v, true);
  sw_segment *seg, *seg2;
  FZ_MUST(sw_segment_open(&seg, path, capacity_of[v], o, SW_SEGMENT_CREATE));
  fz_tick(); /* its creation time differs from the first one's: a layout word */
  FZ_MUST(sw_segment_open(&seg2, other, capacity_of[v] + 1, oo, SW_SEGMENT_CREATE));
  /* the structure: every limiter made, nothing counted yet */
  sw_limiter *l[4];
  int n = (int)capacity_of[v] < 4 ? (int)capacity_of[v] : 4;
  for (int i = 0; i < n; i++) {
    sw_options *ro = rule_opts(i);
    FZ_MUST(sw_registry_get_ex(sw_segment_registry(seg), names[i], ro, &l[i]));
    FZ_MUST(sw_registry_get_ex(sw_segment_registry(seg2), names[i], ro, &l[i]));
    sw_options_free(ro);
  }
  for (int i = 0; i < n; i++) /* the handles of seg (those of seg2 go with it) */
    FZ_MUST(sw_registry_get(sw_segment_registry(seg), names[i], &l[i]));
  fz_bytes fresh = fz_read_file(path), fresh_other = fz_read_file(other);
  sw_segment_close(seg2);
  fz_bytes states[3];
  for (int i = 0; i < n; i++) use(l[i], FZ_T0, i);
  states[0] = fz_read_file(path);
  sw_options *ro = rule_opts(0);
  fz_set(ro, SW_OPT_THRESHOLD, 3);
  FZ_MUST(sw_limiter_set_rule(l[0], ro));
  FZ_MUST(sw_limiter_set_dry_run(l[n - 1], 1));
  sw_options_free(ro);
  for (int i = 0; i < n; i++) use(l[i], FZ_T0 + 2500, i);
  states[1] = fz_read_file(path);
  for (int i = 0; i < n; i++) use(l[i], FZ_T0 + 7100, i);
  for (int i = 0; i < n; i++) sw_node_increase_concurrency(sw_limiter_node(l[i]));
  states[2] = fz_read_file(path);
  sw_segment_close(seg);
  fz_find_targets(&out->tg, &fresh, &fresh_other, states, 3);
  out->bytes = states[2];
  for (int i = 0; i < 2; i++) fz_bytes_free(&states[i]);
  fz_bytes_free(&fresh);
  fz_bytes_free(&fresh_other);
  sw_options_free(o);
  sw_options_free(oo);
}

static void drive_leap_array(const char *what, sw_leap_array *la, int64_t t) {
  sw_window w[16];
  void *vals[16];
  int64_t v;
  int32_t idx;
  FZ(sw_leap_array_sample_count(la), "%s sample_count", what);
  FZ(sw_leap_array_interval_ms(la), "%s interval_ms", what);
  FZ(sw_leap_array_window_length_ms(la), "%s window_length_ms", what);
  FZ(sw_leap_array_type(la) != NULL, "%s type", what);
  FZ(sw_leap_array_detached_count(la), "%s detached_count", what);
  FZ(sw_leap_array_time_index(la, t, &idx), "%s time_index", what);
  FZ(sw_leap_array_window_start(la, t, &v), "%s window_start", what);
  FZ(sw_leap_array_list_at(la, t, w, 16), "%s list_at", what);
  FZ(sw_leap_array_list_all(la, w, 16), "%s list_all", what);
  FZ(sw_leap_array_values_at(la, t, vals, 16), "%s values_at", what);
  FZ(sw_leap_array_valid_head_at(la, t, w), "%s valid_head_at", what);
  FZ(sw_leap_array_previous_window_at(la, t, w), "%s previous_window_at", what);
  int found = (int)FZ(sw_leap_array_window_value_at(la, t, w), "%s window_value_at", what);
  if (found == 1) {
    FZ(sw_leap_array_bucket_get(la, w[0].bucket, 0, &v), "%s bucket_get", what);
    FZ(sw_metric_bucket_get(la, w[0].bucket, SW_FIELD_MIN_RT), "%s sw_metric_bucket_get", what);
  }
  FZ(sw_leap_array_is_window_deprecated_at(la, t, t - 1500), "%s is_window_deprecated_at", what);
  FZ(sw_leap_array_sum_at(la, t, 0, &v), "%s sum_at", what);
  FZ(sw_leap_array_add_at(la, t, 0, 1), "%s add_at", what);
  FZ(sw_leap_array_current_window_at(la, t, w), "%s current_window_at", what);
}

static int even_seconds(int64_t start, void *user) {
  (void)user;
  return start / 1000 % 2 == 0;
}

static void drive_metric(const char *what, sw_metric *m, int64_t t) {
  sw_metric_record rec[16];
  int64_t pass;
  FZ(sw_metric_sample_count(m), "%s sample_count", what);
  FZD(sw_metric_interval_sec(m), "%s interval_sec", what);
  for (int e = 0; e < SW_EVENT_COUNT; e++) FZ(sw_metric_sum_at(m, t, (sw_event)e), "%s sum_at %d", what, e);
  FZ(sw_metric_pass_at(m, t), "%s pass_at", what);
  FZ(sw_metric_block(m), "%s block", what);
  FZ(sw_metric_max_success_at(m, t), "%s max_success_at", what);
  FZ(sw_metric_min_rt_at(m, t), "%s min_rt_at", what);
  FZ(sw_metric_window_pass_at(m, t), "%s window_pass_at", what);
  FZ(sw_metric_previous_window_pass_at(m, t), "%s previous_window_pass_at", what);
  FZ(sw_metric_previous_window_block(m), "%s previous_window_block", what);
  FZ(sw_metric_waiting_at(m, t), "%s waiting_at", what);
  FZ(sw_metric_details_at(m, t, rec, 16), "%s details_at", what);
  FZ(sw_metric_details_on_condition_at(m, t, even_seconds, NULL, rec, 16),
     "%s details_on_condition_at", what);
  FZ(sw_metric_windows_at(m, t, rec, 16), "%s windows_at", what);
  FZ(sw_metric_add_pass_at(m, t, 1), "%s add_pass_at", what);
  FZ(sw_metric_add_rt_at(m, t, 12), "%s add_rt_at", what);
  FZ(sw_metric_add_at(m, t, SW_EVENT_BLOCK, 2), "%s add_at", what);
  FZ(sw_metric_try_pass_at(m, t, 1, 5, &pass), "%s try_pass_at", what);
  FZ(sw_metric_add_waiting(m, t + 500, 1), "%s add_waiting", what);
  drive_leap_array(what, sw_metric_leap_array(m), t);
}

static void drive_node(sw_node *n, int64_t t) {
  sw_metric_record rec[16];
  FZD(sw_node_pass_qps_at(n, t), "sw_node_pass_qps_at");
  FZD(sw_node_block_qps_at(n, t), "sw_node_block_qps_at");
  FZD(sw_node_success_qps_at(n, t), "sw_node_success_qps_at");
  FZD(sw_node_exception_qps_at(n, t), "sw_node_exception_qps_at");
  FZD(sw_node_occupied_pass_qps_at(n, t), "sw_node_occupied_pass_qps_at");
  FZD(sw_node_would_block_qps_at(n, t), "sw_node_would_block_qps_at");
  FZD(sw_node_total_qps_at(n, t), "sw_node_total_qps_at");
  FZD(sw_node_avg_rt_at(n, t), "sw_node_avg_rt_at");
  FZD(sw_node_min_rt_at(n, t), "sw_node_min_rt_at");
  FZD(sw_node_max_success_qps_at(n, t), "sw_node_max_success_qps_at");
  FZ(sw_node_previous_pass_qps_at(n, t), "sw_node_previous_pass_qps_at");
  FZ(sw_node_previous_block_qps_at(n, t), "sw_node_previous_block_qps_at");
  FZ(sw_node_total_request_at(n, t), "sw_node_total_request_at");
  FZ(sw_node_total_pass_at(n, t), "sw_node_total_pass_at");
  FZ(sw_node_total_success_at(n, t), "sw_node_total_success_at");
  FZ(sw_node_total_exception_at(n, t), "sw_node_total_exception_at");
  FZ(sw_node_block_request_at(n, t), "sw_node_block_request_at");
  FZ(sw_node_concurrency(n), "sw_node_concurrency");
  FZ(sw_node_waiting_at(n, t), "sw_node_waiting_at");
  FZ(sw_node_occupy_timeout_ms(n), "sw_node_occupy_timeout_ms");
  FZ(sw_node_try_occupy_next_at(n, t, 1, 5.0), "sw_node_try_occupy_next_at");
  FZ(sw_node_metrics_at(n, t, t - 10000, rec, 16), "sw_node_metrics_at");
  FZ(sw_node_add_pass_at(n, t, 1), "sw_node_add_pass_at");
  FZ(sw_node_increase_block_at(n, t, 1), "sw_node_increase_block_at");
  FZ(sw_node_increase_exception_at(n, t, 1), "sw_node_increase_exception_at");
  FZ(sw_node_add_rt_and_success_at(n, t, 9, 1), "sw_node_add_rt_and_success_at");
  FZ(sw_node_increase_concurrency(n), "sw_node_increase_concurrency");
  FZ(sw_node_decrease_concurrency(n), "sw_node_decrease_concurrency");
  FZ(sw_node_add_waiting(n, t + 400, 1), "sw_node_add_waiting");
  FZ(sw_node_add_occupied_pass_at(n, t, 1), "sw_node_add_occupied_pass_at");
  drive_metric("second", sw_node_second_metric(n), t);
  drive_metric("minute", sw_node_minute_metric(n), t);
}

/* Every call of a limiter: entries at times inside, after, before and far
 * beyond the state, exits, cancels, its rule, its node. */
static void drive_limiter(sw_limiter *l) {
  static const int64_t times[] = {FZ_T0 + 7200, FZ_T0 + 500, FZ_T0 + 8800, FZ_T0 - 4000,
                                  FZ_T0 + 61000, FZ_T0 + (INT64_C(1) << 40)};
  static const uint32_t flags[] = {0, SW_ENTRY_PRIORITIZED, SW_ENTRY_NO_EXIT};
  sw_decision d;
  for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
    for (int f = 0; f < 3; f++) {
      int rc = (int)FZ(sw_limiter_entry_at(l, times[i], 1 + f, flags[f], &d),
                       "sw_limiter_entry_at t%zu f%d", i, f);
      if (rc != SW_OK || d.verdict == SW_VERDICT_BLOCK) continue;
      if (f == 2) FZ(sw_limiter_cancel(l, &d), "sw_limiter_cancel");
      else FZ(sw_limiter_exit_at(l, times[i] + 4, 6, 1 + f, f ? SW_EXIT_ERROR : 0),
              "sw_limiter_exit_at t%zu f%d", i, f);
    }
  }
  if (FZ(sw_limiter_entry(l, 1, 0, &d), "sw_limiter_entry") == SW_OK && d.verdict != SW_VERDICT_BLOCK)
    FZ(sw_limiter_exit(l, 3, 1, 0), "sw_limiter_exit");
  sw_lease_info li;
  FZ(sw_lease_stats(l, FZ_NOW, &li), "sw_lease_stats");
  sw_options *o = fz_opts();
  if (FZ(sw_limiter_get_rule(l, o), "sw_limiter_get_rule") == SW_OK)
    FZ(sw_limiter_set_rule(l, o), "sw_limiter_set_rule");
  sw_options_free(o);
  FZ(sw_limiter_set_dry_run(l, 1), "sw_limiter_set_dry_run 1");
  FZ(sw_limiter_entry_at(l, FZ_NOW, 1, 0, &d), "sw_limiter_entry_at dry run");
  FZ(sw_limiter_set_dry_run(l, 0), "sw_limiter_set_dry_run 0");
  drive_node(sw_limiter_node(l), FZ_NOW);
}

static void drive(int v, const char *path, int mode) {
  sw_options *o = reg_opts(v, false);
  sw_segment *seg = NULL;
  int rc = (int)FZ(sw_segment_open(&seg, path, capacity_of[v], o, fz_mode_flags[mode]),
                   "sw_segment_open %s", fz_mode_names[mode]);
  fz_cur->open_rc[mode] = rc;
  sw_options_free(o);
  fz_probe(path);
  if (rc < 0) return;
  sw_registry *r = sw_segment_registry(seg);
  FZ(sw_segment_size(seg), "sw_segment_size");
  FZ(sw_segment_created(seg), "sw_segment_created");
  FZ(sw_segment_name(seg) != NULL, "sw_segment_name");
  FZ(sw_registry_capacity(r), "sw_registry_capacity");
  uint32_t count = (uint32_t)FZ(sw_registry_count(r), "sw_registry_count");
  for (uint32_t i = 0; i < count + 2 && i < 64; i++) {
    sw_limiter *l = NULL;
    const char *name = NULL;
    if (FZ(sw_registry_at(r, i, &l, &name), "sw_registry_at %u", i) != SW_OK) continue;
    FZ(strlen(name), "the name of limiter %u", i);
    drive_limiter(l);
  }
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    sw_limiter *l = NULL;
    FZ(sw_registry_find(r, names[i], &l), "sw_registry_find %s", names[i]);
    sw_options *ro = i % 2 ? rule_opts((int)i) : NULL;
    rc = (int)(i % 2 ? FZ(sw_registry_get_ex(r, names[i], ro, &l), "sw_registry_get_ex %s", names[i])
                     : FZ(sw_registry_get(r, names[i], &l), "sw_registry_get %s", names[i]));
    sw_options_free(ro);
    sw_decision d;
    if (rc == SW_OK && FZ(sw_limiter_entry_at(l, FZ_NOW, 1, 0, &d), "entry of %s", names[i]) == SW_OK &&
        d.verdict != SW_VERDICT_BLOCK)
      FZ(sw_limiter_exit_at(l, FZ_NOW, 2, 1, 0), "exit of %s", names[i]);
  }
  sw_options *ro = rule_opts(0);
  FZ(sw_registry_set_rule(r, ro), "sw_registry_set_rule");
  sw_options_free(ro);
  FZ(sw_registry_count(r), "sw_registry_count");
  fz_begin("sw_segment_close");
  sw_segment_close(seg);
  fz_end(0);
}

const fz_kind fz_registry_kind = {"registry", 2, make, drive};
