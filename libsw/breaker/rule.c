/* SPDX-License-Identifier: Apache-2.0 */
/* A breaker's rule: Sentinel's DegradeRule from options, validated as
 * DegradeRuleManager.isValidRule does, each refusal naming its value. */
#include <math.h>
#include <string.h>

#define SW_BREAKER_INTERNALS
#include "../internal.h"
#include "breaker.h"

int sw__brk_rule_from(const sw_options *opts, sw__brk_rule *r) {
  memset(r, 0, sizeof *r);
  int64_t strategy, min_requests, interval, samples, calls, probe_timeout;
  double count, slow_ratio, window_sec;
  sw_options_get(opts, SW_OPT_BREAKER_STRATEGY, &strategy);
  sw_options_get_double(opts, SW_OPT_BREAKER_COUNT, &count);
  sw_options_get_double(opts, SW_OPT_BREAKER_SLOW_RATIO, &slow_ratio);
  sw_options_get_double(opts, SW_OPT_BREAKER_TIME_WINDOW_SEC, &window_sec);
  sw_options_get(opts, SW_OPT_BREAKER_MIN_REQUESTS, &min_requests);
  sw_options_get(opts, SW_OPT_BREAKER_STAT_INTERVAL_MS, &interval);
  sw_options_get(opts, SW_OPT_BREAKER_SAMPLE_COUNT, &samples);
  sw_options_get(opts, SW_OPT_BREAKER_HALF_OPEN_CALLS, &calls);
  sw_options_get(opts, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, &probe_timeout);
  if (strategy == SW_BREAKER_ERROR_RATIO && count > 1)
    return sw__fail(SW_ERANGE, "SW_OPT_BREAKER_COUNT=%.17g is an error ratio here "
                    "(SW_BREAKER_ERROR_RATIO): it must lie in 0..1", count);
  if (strategy == SW_BREAKER_SLOW_RATIO && count > INT32_MAX)
    return sw__fail(SW_ERANGE, "SW_OPT_BREAKER_COUNT=%.17g is a max RT in ms here "
                    "(SW_BREAKER_SLOW_RATIO): at most %d", count, INT32_MAX);
  if (interval % samples != 0)
    return sw__fail(SW_ESIZE, "SW_OPT_BREAKER_SAMPLE_COUNT=%lld does not divide "
                    "SW_OPT_BREAKER_STAT_INTERVAL_MS=%lld", (long long)samples,
                    (long long)interval);
  r->strategy = (int32_t)strategy;
  r->sample_count = (int32_t)samples;
  r->interval_ms = interval;
  r->count = count;
  r->slow_ratio = slow_ratio;
  r->max_rt_ms = strategy == SW_BREAKER_SLOW_RATIO ? llround(count) : 0;
  r->open_ms = llround(window_sec * 1000.0);
  if (r->open_ms < 1) r->open_ms = 1;
  r->min_requests = min_requests;
  r->probe_timeout_ms = probe_timeout;
  r->half_open_calls = (int32_t)calls;
  return SW_OK;
}

void sw__brk_rule_to(const sw__brk_rule *r, sw_options *o) {
  sw_options_set(o, SW_OPT_BREAKER_STRATEGY, r->strategy);
  sw_options_set_double(o, SW_OPT_BREAKER_COUNT, r->count);
  sw_options_set_double(o, SW_OPT_BREAKER_SLOW_RATIO, r->slow_ratio);
  sw_options_set_double(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, (double)r->open_ms / 1000.0);
  sw_options_set(o, SW_OPT_BREAKER_MIN_REQUESTS, r->min_requests);
  sw_options_set(o, SW_OPT_BREAKER_STAT_INTERVAL_MS, r->interval_ms);
  sw_options_set(o, SW_OPT_BREAKER_SAMPLE_COUNT, r->sample_count);
  sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, r->half_open_calls);
  sw_options_set(o, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, r->probe_timeout_ms);
}
