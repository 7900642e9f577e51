/* SPDX-License-Identifier: Apache-2.0 */
/* Construction options: keys with bounds and defaults, checked when set. */
#include <stdlib.h>

#include "internal.h"

typedef struct sw__option_info {
  sw_option key;
  const char *name;
  double min, max, def;
  bool real; /* takes a fractional value */
} sw__option_info;

static const sw__option_info sw__options[] = {
    {SW_OPT_OCCUPIABLE, "SW_OPT_OCCUPIABLE", 0, 1, 0, false},
    {SW_OPT_STRIPES, "SW_OPT_STRIPES", 1, 64, 4, false},
    {SW_OPT_MAX_RT_MS, "SW_OPT_MAX_RT_MS", 1, INT32_MAX, 5000, false},
    {SW_OPT_SECOND_SAMPLE_COUNT, "SW_OPT_SECOND_SAMPLE_COUNT", 1, 1000, 2, false},
    {SW_OPT_SECOND_INTERVAL_MS, "SW_OPT_SECOND_INTERVAL_MS", 1, 3600000, 1000, false},
    {SW_OPT_MINUTE_SAMPLE_COUNT, "SW_OPT_MINUTE_SAMPLE_COUNT", 1, 3600, 60, false},
    {SW_OPT_MINUTE_INTERVAL_MS, "SW_OPT_MINUTE_INTERVAL_MS", 1, 86400000, 60000, false},
    {SW_OPT_OCCUPY_TIMEOUT_MS, "SW_OPT_OCCUPY_TIMEOUT_MS", 0, 3600000, 500, false},
    {SW_OPT_GRADE, "SW_OPT_GRADE", 0, 1, SW_GRADE_QPS, false},
    {SW_OPT_BEHAVIOR, "SW_OPT_BEHAVIOR", 0, 3, SW_BEHAVIOR_REJECT, false},
    {SW_OPT_THRESHOLD, "SW_OPT_THRESHOLD", 0, 1e15, 0, true},
    {SW_OPT_MAX_QUEUE_MS, "SW_OPT_MAX_QUEUE_MS", 0, 3600000, 500, false},
    {SW_OPT_WARM_UP_SEC, "SW_OPT_WARM_UP_SEC", 1, 86400, 10, false},
    {SW_OPT_COLD_FACTOR, "SW_OPT_COLD_FACTOR", 2, 1000, 3, false},
    {SW_OPT_STRICT, "SW_OPT_STRICT", 0, 1, 1, false},
    {SW_OPT_SEGMENT_MODE, "SW_OPT_SEGMENT_MODE", 0, 0777, 0600, false},
    {SW_OPT_SEGMENT_UID, "SW_OPT_SEGMENT_UID", -1, INT32_MAX, -1, false},
    {SW_OPT_SEGMENT_GID, "SW_OPT_SEGMENT_GID", -1, INT32_MAX, -1, false},
    {SW_OPT_CLUSTER, "SW_OPT_CLUSTER", 0, 1, 0, false},
    {SW_OPT_CLUSTER_LEASE, "SW_OPT_CLUSTER_LEASE", 1, 1e9, 100, false},
    {SW_OPT_CLUSTER_FAILURE, "SW_OPT_CLUSTER_FAILURE", 0, 2, SW_CLUSTER_FALLBACK_LOCAL, false},
    {SW_OPT_CLUSTER_NODES, "SW_OPT_CLUSTER_NODES", 1, 1e6, 1, false},
    {SW_OPT_CLUSTER_TIMEOUT_MS, "SW_OPT_CLUSTER_TIMEOUT_MS", 1, 60000, 100, false},
    {SW_OPT_CLUSTER_RETRY_MS, "SW_OPT_CLUSTER_RETRY_MS", 1, 600000, 1000, false},
    {SW_OPT_CLUSTER_LOW_WATER_PCT, "SW_OPT_CLUSTER_LOW_WATER_PCT", 0, 100, 25, false},
    {SW_OPT_DRY_RUN, "SW_OPT_DRY_RUN", 0, 1, 0, false},
    {SW_OPT_SEGMENT_MAX_MB, "SW_OPT_SEGMENT_MAX_MB", 1, 1 << 24, 2048, false},
    {SW_OPT_KEY_BYTES, "SW_OPT_KEY_BYTES", 16, 128, 16, false},
    {SW_OPT_KEYED_ON_FULL, "SW_OPT_KEYED_ON_FULL", 0, 2, SW_FULL_EVICT, false},
    {SW_OPT_BREAKER_STRATEGY, "SW_OPT_BREAKER_STRATEGY", 0, 2, SW_BREAKER_SLOW_RATIO, false},
    {SW_OPT_BREAKER_COUNT, "SW_OPT_BREAKER_COUNT", 0, 1e15, 0, true},
    {SW_OPT_BREAKER_SLOW_RATIO, "SW_OPT_BREAKER_SLOW_RATIO", 0, 1, 1, true},
    {SW_OPT_BREAKER_TIME_WINDOW_SEC, "SW_OPT_BREAKER_TIME_WINDOW_SEC", 0.001, 1e8, 10, true},
    {SW_OPT_BREAKER_MIN_REQUESTS, "SW_OPT_BREAKER_MIN_REQUESTS", 1, INT32_MAX, 5, false},
    {SW_OPT_BREAKER_STAT_INTERVAL_MS, "SW_OPT_BREAKER_STAT_INTERVAL_MS", 1, 86400000, 1000, false},
    {SW_OPT_BREAKER_SAMPLE_COUNT, "SW_OPT_BREAKER_SAMPLE_COUNT", 1, 100, 1, false},
    {SW_OPT_BREAKER_HALF_OPEN_CALLS, "SW_OPT_BREAKER_HALF_OPEN_CALLS", 1, 32, 1, false},
    {SW_OPT_BREAKER_PROBE_TIMEOUT_MS, "SW_OPT_BREAKER_PROBE_TIMEOUT_MS", 1, 86400000, 5000, false},
};
#define SW__OPTION_COUNT (sizeof sw__options / sizeof sw__options[0])

struct sw_options {
  double value[SW__OPTION_COUNT];
};

static const sw__option_info *sw__option_find(sw_option key, size_t *index) {
  for (size_t i = 0; i < SW__OPTION_COUNT; i++)
    if (sw__options[i].key == key) {
      if (index) *index = i;
      return &sw__options[i];
    }
  sw__fail(SW_EINVAL, "option key %d is unknown", (int)key);
  return NULL;
}

SW_API int sw_options_create(sw_options **out) {
  SW__CHECK_NULL(out, "out");
  *out = sw__malloc(sizeof **out);
  if (*out == NULL) return sw__fail(SW_ENOMEM, "options");
  for (size_t i = 0; i < SW__OPTION_COUNT; i++) (*out)->value[i] = sw__options[i].def;
  return SW_OK;
}

SW_API void sw_options_free(sw_options *opts) { sw__free(opts); }

SW_API int sw_options_set_double(sw_options *opts, sw_option key, double value) {
  SW__CHECK_NULL(opts, "options");
  size_t i;
  const sw__option_info *info = sw__option_find(key, &i);
  if (info == NULL) return SW_EINVAL;
  if (value != value)
    return sw__fail(SW_ERANGE, "%s=nan is not a number", info->name);
  if (value < info->min || value > info->max)
    return sw__fail(SW_ERANGE, "%s=%.17g is outside %.17g..%.17g", info->name, value,
                    info->min, info->max);
  if (!info->real && value != (double)(int64_t)value)
    return sw__fail(SW_ERANGE, "%s=%.17g is not an integer", info->name, value);
  if (key == SW_OPT_STRIPES && !sw__is_pow2((uint64_t)value))
    return sw__fail(SW_ERANGE, "%s=%lld is not a power of two", info->name, (long long)value);
  opts->value[i] = value;
  return SW_OK;
}

SW_API int sw_options_set(sw_options *opts, sw_option key, int64_t value) {
  return sw_options_set_double(opts, key, (double)value);
}

SW_API int sw_options_get_double(const sw_options *opts, sw_option key, double *value) {
  SW__CHECK_NULL(value, "value");
  size_t i;
  const sw__option_info *info = sw__option_find(key, &i);
  if (info == NULL) return SW_EINVAL;
  *value = opts ? opts->value[i] : info->def;
  return SW_OK;
}

SW_API int sw_options_get(const sw_options *opts, sw_option key, int64_t *value) {
  SW__CHECK_NULL(value, "value");
  double v;
  int rc = sw_options_get_double(opts, key, &v);
  if (rc == SW_OK) *value = (int64_t)v;
  return rc;
}

SW_API int sw_option_bounds(sw_option key, double *min, double *max, double *def) {
  const sw__option_info *info = sw__option_find(key, NULL);
  if (info == NULL) return SW_EINVAL;
  if (min) *min = info->min;
  if (max) *max = info->max;
  if (def) *def = info->def;
  return SW_OK;
}

SW_API const char *sw_option_name(sw_option key) {
  const sw__option_info *info = sw__option_find(key, NULL);
  return info ? info->name : NULL;
}

SW_API sw_options *sw_options_clone(const sw_options *opts) {
  sw_options *c;
  if (sw_options_create(&c) != SW_OK) return NULL;
  if (opts) *c = *opts;
  return c;
}
