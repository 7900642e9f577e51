/* SPDX-License-Identifier: Apache-2.0 */
/* The bucket-type registry and the plugin loader. Types are copied into a
 * fixed table (SW__REGISTRY_MAX entries) and never removed: arrays may use
 * them for the life of the process. */
#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"
#include "leap_array.h"
#include "metric_bucket.h"
#include "breaker/breaker.h"

#define SW__REGISTRY_MAX 128

static pthread_mutex_t sw__reg_lock = PTHREAD_MUTEX_INITIALIZER;
static sw_bucket_type sw__reg[SW__REGISTRY_MAX];
static uint32_t sw__reg_count;
static pthread_once_t sw__reg_once = PTHREAD_ONCE_INIT;

static int sw__register_locked(const sw_bucket_type *type) {
  sw_bucket_type copy;
  int rc = sw__bucket_type_copy(&copy, type);
  if (rc < 0) return rc;
  for (uint32_t i = 0; i < sw__reg_count; i++)
    if (strcmp(sw__reg[i].name, copy.name) == 0)
      return sw__fail(SW_EEXIST, "bucket type %s is already registered", copy.name);
  if (sw__reg_count == SW__REGISTRY_MAX)
    return sw__fail(SW_EFULL, "bucket type registry is full (%u types)", SW__REGISTRY_MAX);
  sw__reg[sw__reg_count++] = copy;
  return SW_OK;
}

static void sw__register_builtins(void) {
  sw__register_locked(&sw__metric_type);
  sw__register_locked(&sw__occupiable_type);
  sw__register_locked(&sw__future_type);
  sw__register_locked(&sw__brk_slow_type);
  sw__register_locked(&sw__brk_error_type);
}

SW_API int sw_bucket_type_register(const sw_bucket_type *type) {
  SW__CHECK_NULL(type, "bucket type");
  pthread_once(&sw__reg_once, sw__register_builtins);
  if (type->struct_size >= SW_BUCKET_TYPE_MIN_SIZE && type->name &&
      strncmp(type->name, "sw.", 3) == 0)
    return sw__fail(SW_EINVAL, "bucket type name %s: the sw. prefix is reserved", type->name);
  pthread_mutex_lock(&sw__reg_lock);
  int rc = sw__register_locked(type);
  pthread_mutex_unlock(&sw__reg_lock);
  return rc;
}

SW_API const sw_bucket_type *sw_bucket_type_find(const char *name) {
  if (name == NULL) {
    sw__fail(SW_ENULL, "type name is NULL");
    return NULL;
  }
  pthread_once(&sw__reg_once, sw__register_builtins);
  const sw_bucket_type *found = NULL;
  pthread_mutex_lock(&sw__reg_lock);
  for (uint32_t i = 0; i < sw__reg_count && !found; i++)
    if (strcmp(sw__reg[i].name, name) == 0) found = &sw__reg[i];
  pthread_mutex_unlock(&sw__reg_lock);
  if (found == NULL) sw__fail(SW_ENOTFOUND, "no bucket type named %s", name);
  return found;
}

SW_API int sw_plugin_load(const char *path, uint32_t *registered) {
  SW__CHECK_NULL(path, "plugin path");
  if (registered) *registered = 0;
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (so == NULL) return sw__fail(SW_EPLUGIN, "cannot open plugin: %s", dlerror());
  sw_plugin_entry_fn entry;
  *(void **)&entry = dlsym(so, SW_PLUGIN_ENTRY_SYMBOL);
  if (entry == NULL) {
    sw__fail(SW_EPLUGIN, "plugin %s does not export %s", path, SW_PLUGIN_ENTRY_SYMBOL);
    dlclose(so);
    return SW_EPLUGIN;
  }
  uint32_t count = 0;
  const sw_bucket_type *const *types = entry(SW_PLUGIN_ABI_VERSION, &count);
  if (types == NULL || count == 0) {
    dlclose(so);
    return sw__fail(SW_EABI, "plugin %s refused host ABI %u.%u", path, SW_PLUGIN_ABI_MAJOR,
                    SW_PLUGIN_ABI_MINOR);
  }
  /* Validate every vtable before registering any, so a bad plugin leaves no trace. */
  for (uint32_t i = 0; i < count; i++) {
    sw_bucket_type copy;
    int rc = sw__bucket_type_copy(&copy, types[i]);
    if (rc < 0) {
      dlclose(so);
      return sw__fail(rc, "plugin %s, type %u: %s", path, i, sw_last_error());
    }
  }
  uint32_t done = 0;
  int rc = SW_OK;
  for (uint32_t i = 0; i < count && rc == SW_OK; i++)
    if ((rc = sw_bucket_type_register(types[i])) == SW_OK) done++;
  if (registered) *registered = done;
  /* The object stays loaded: registered types point into it. */
  return rc;
}
