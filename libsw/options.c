/* Construction options: keys with bounds and defaults, checked when set. */
#include <stdlib.h>

#include "internal.h"

typedef struct sw__option_info {
  sw_option key;
  const char *name;
  int64_t min, max, def;
} sw__option_info;

static const sw__option_info sw__options[] = {
    {SW_OPT_OCCUPIABLE, "SW_OPT_OCCUPIABLE", 0, 1, 0},
    {SW_OPT_STRIPES, "SW_OPT_STRIPES", 1, 64, 4},
    {SW_OPT_MAX_RT_MS, "SW_OPT_MAX_RT_MS", 1, INT32_MAX, 5000},
};
#define SW__OPTION_COUNT (sizeof sw__options / sizeof sw__options[0])

struct sw_options {
  int64_t value[SW__OPTION_COUNT];
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
  *out = malloc(sizeof **out);
  if (*out == NULL) return sw__fail(SW_ENOMEM, "options");
  for (size_t i = 0; i < SW__OPTION_COUNT; i++) (*out)->value[i] = sw__options[i].def;
  return SW_OK;
}

SW_API void sw_options_free(sw_options *opts) { free(opts); }

SW_API int sw_options_set(sw_options *opts, sw_option key, int64_t value) {
  SW__CHECK_NULL(opts, "options");
  size_t i;
  const sw__option_info *info = sw__option_find(key, &i);
  if (info == NULL) return SW_EINVAL;
  if (value < info->min || value > info->max)
    return sw__fail(SW_ERANGE, "%s=%lld is outside %lld..%lld", info->name, (long long)value,
                    (long long)info->min, (long long)info->max);
  if (key == SW_OPT_STRIPES && !sw__is_pow2((uint64_t)value))
    return sw__fail(SW_ERANGE, "%s=%lld is not a power of two", info->name, (long long)value);
  opts->value[i] = value;
  return SW_OK;
}

SW_API int sw_options_get(const sw_options *opts, sw_option key, int64_t *value) {
  SW__CHECK_NULL(value, "value");
  size_t i;
  const sw__option_info *info = sw__option_find(key, &i);
  if (info == NULL) return SW_EINVAL;
  *value = opts ? opts->value[i] : info->def;
  return SW_OK;
}

SW_API int sw_option_bounds(sw_option key, int64_t *min, int64_t *max, int64_t *def) {
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
