/* SPDX-License-Identifier: Apache-2.0 */
/* Flow rules: built from options and validated (Sentinel's constructors,
 * warm-up arithmetic included), and stored in a two-copy box (rule.h). */
#include <string.h>

#include "rule.h"

const char *const sw__behavior_names[4] = {"reject", "warm-up", "pacing", "warm-up + pacing"};

int sw__rule_from(const sw_options *opts, sw__rule *r) {
  int64_t v;
  memset(r, 0, sizeof *r);
  sw_options_get(opts, SW_OPT_GRADE, &v);
  r->grade = (int32_t)v;
  sw_options_get(opts, SW_OPT_BEHAVIOR, &v);
  r->behavior = (int32_t)v;
  sw_options_get(opts, SW_OPT_STRICT, &v);
  r->strict = (int32_t)v;
  sw_options_get(opts, SW_OPT_COLD_FACTOR, &v);
  r->cold_factor = (int32_t)v;
  sw_options_get_double(opts, SW_OPT_THRESHOLD, &r->threshold);
  sw_options_get(opts, SW_OPT_MAX_QUEUE_MS, &r->max_queue_ms);
  sw_options_get(opts, SW_OPT_WARM_UP_SEC, &r->warm_up_sec);
  sw_options_get(opts, SW_OPT_CLUSTER, &v);
  r->cluster = (int16_t)v;
  sw_options_get(opts, SW_OPT_DRY_RUN, &v);
  r->dry_run = (int16_t)v;
  sw_options_get(opts, SW_OPT_CLUSTER_FAILURE, &v);
  r->failure = (int32_t)v;
  sw_options_get(opts, SW_OPT_CLUSTER_LEASE, &r->lease);
  sw_options_get(opts, SW_OPT_CLUSTER_TIMEOUT_MS, &r->timeout_ms);
  sw_options_get(opts, SW_OPT_CLUSTER_RETRY_MS, &r->retry_ms);
  sw_options_get(opts, SW_OPT_CLUSTER_NODES, &v);
  r->nodes = (int32_t)v;
  sw_options_get(opts, SW_OPT_CLUSTER_LOW_WATER_PCT, &v);
  r->low_water_pct = (int32_t)v;
  if (r->cluster && (r->grade != SW_GRADE_QPS || r->behavior != SW_BEHAVIOR_REJECT))
    return sw__fail(SW_EINVAL, "SW_OPT_CLUSTER=1 needs SW_OPT_GRADE=SW_GRADE_QPS and "
                    "SW_OPT_BEHAVIOR=SW_BEHAVIOR_REJECT");
  if (r->grade == SW_GRADE_CONCURRENCY && r->behavior != SW_BEHAVIOR_REJECT)
    return sw__fail(SW_EINVAL, "SW_OPT_BEHAVIOR=%d (%s) needs SW_OPT_GRADE=SW_GRADE_QPS",
                    r->behavior, sw__behavior_names[r->behavior]);
  if (r->behavior == SW_BEHAVIOR_WARM_UP || r->behavior == SW_BEHAVIOR_WARM_UP_PACING) {
    /* Sentinel's WarmUpController constructor, integer casts included. */
    double count = r->threshold, period = (double)r->warm_up_sec;
    if (period * count > 1e18)
      return sw__fail(SW_ERANGE, "warm-up with SW_OPT_THRESHOLD=%g and SW_OPT_WARM_UP_SEC=%lld "
                      "stores more than 1e18 tokens", count, (long long)r->warm_up_sec);
    r->warning_token = (int64_t)(period * count) / (r->cold_factor - 1);
    r->max_token = r->warning_token + (int64_t)(2 * period * count / (1.0 + r->cold_factor));
    if (count <= 0 || r->max_token <= r->warning_token)
      return sw__fail(SW_EINVAL, "warm-up with SW_OPT_THRESHOLD=%g and SW_OPT_WARM_UP_SEC=%lld "
                      "has no warm-up range (threshold x period too small)", count,
                      (long long)r->warm_up_sec);
    r->slope = (r->cold_factor - 1.0) / count / (double)(r->max_token - r->warning_token);
  }
  return SW_OK;
}

/* Fill the unpublished copy, then advance ver. */
void sw__rule_box_store(sw__rule_box *h, const sw__rule *r) {
  uint64_t w[SW__RULE_WORDS];
  memcpy(w, r, sizeof w);
  uint64_t ver = atomic_load_explicit(&h->ver, memory_order_relaxed) + 1;
  _Atomic uint64_t *copy = h->rule[ver & 1];
  /* order the copy's stores after the previous publication (readers pair
   * this with their acquire fence) */
  atomic_thread_fence(memory_order_release);
  for (int i = 0; i < SW__RULE_WORDS; i++) {
    atomic_store_explicit(&copy[i], w[i], memory_order_relaxed);
    if (i == SW__RULE_WORDS / 2) SW__KILL_POINT("rule-write");
  }
  atomic_store_explicit(&h->ver, ver, memory_order_release);
}

void sw__rule_to(const sw__rule *r, sw_options *opts) {
  sw_options_set(opts, SW_OPT_GRADE, r->grade);
  sw_options_set(opts, SW_OPT_BEHAVIOR, r->behavior);
  sw_options_set(opts, SW_OPT_STRICT, r->strict);
  sw_options_set(opts, SW_OPT_COLD_FACTOR, r->cold_factor);
  sw_options_set_double(opts, SW_OPT_THRESHOLD, r->threshold);
  sw_options_set(opts, SW_OPT_MAX_QUEUE_MS, r->max_queue_ms);
  sw_options_set(opts, SW_OPT_WARM_UP_SEC, r->warm_up_sec);
  sw_options_set(opts, SW_OPT_CLUSTER, r->cluster);
  sw_options_set(opts, SW_OPT_DRY_RUN, r->dry_run);
  sw_options_set(opts, SW_OPT_CLUSTER_FAILURE, r->failure);
  sw_options_set(opts, SW_OPT_CLUSTER_LEASE, r->lease);
  sw_options_set(opts, SW_OPT_CLUSTER_TIMEOUT_MS, r->timeout_ms);
  sw_options_set(opts, SW_OPT_CLUSTER_RETRY_MS, r->retry_ms);
  sw_options_set(opts, SW_OPT_CLUSTER_NODES, r->nodes);
  sw_options_set(opts, SW_OPT_CLUSTER_LOW_WATER_PCT, r->low_water_pct);
}
