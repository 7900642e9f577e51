/* SPDX-License-Identifier: Apache-2.0 */
/* A latency histogram bucket for libsw: a template plugin meant to be copied.
 *
 * Every window of a leap array of this type counts response times in
 * power-of-two buckets: field k counts latencies in [2^(k-1), 2^k) ms
 * (field 0 counts 0 ms, the last field everything from 2^(N-2) ms up).
 *
 * To write your own bucket type, copy this file and follow the steps:
 *   1. Describe the bucket: a struct of fixed-size fields, no pointers (it may
 *      live in shared memory mapped at different addresses). Fields that
 *      several threads touch are atomics.
 *   2. Write new_empty_bucket and reset_window_to: both must initialise every
 *      field (reset gets memory holding an older window of the same type).
 *   3. Optionally give field names, kinds and add/get so that generic hosts
 *      (sw_leap_array_add_at, sw_leap_array_sum_at, the Python and Lua
 *      bindings) can use the type without knowing its layout.
 *   4. Fill a sw_bucket_type with SW_PLUGIN_ABI_VERSION and sizeof.
 *   5. Export sw_plugin_entry returning your vtables.
 * Build: cc -shared -fPIC -I<libsw include dir> histogram.c -o sw_histogram.so
 * (no link against libsw is needed). Load: sw_plugin_load("./sw_histogram.so").
 */
#include <stdatomic.h>
#include <stdint.h>

#include <sw/plugin.h>

/* Step 1: the bucket. */
#define HIST_FIELDS 16
typedef struct hist_bucket {
  _Atomic int64_t count[HIST_FIELDS];
} hist_bucket;

static void hist_clear(hist_bucket *b) {
  for (int i = 0; i < HIST_FIELDS; i++) atomic_store_explicit(&b->count[i], 0, memory_order_relaxed);
}

/* Step 2: the two required callbacks. */
static void hist_new_empty_bucket(void *ctx, void *bucket, int64_t time_ms) {
  (void)ctx;
  (void)time_ms;
  hist_clear(bucket);
}

static void hist_reset_window_to(void *ctx, sw_window *window, int64_t start_ms) {
  (void)ctx;
  (void)start_ms;
  hist_clear(window->bucket);
}

/* Step 3: generic access. add(field 0, n) records one latency of n ms in the
 * right counter; add(field k > 0, n) adds n to counter k directly. */
static uint32_t hist_field_of(int64_t latency_ms) {
  uint32_t k = 0;
  while (latency_ms > 0 && k < HIST_FIELDS - 1) {
    latency_ms >>= 1;
    k++;
  }
  return k;
}

static void hist_add(void *ctx, void *bucket, uint32_t field, int64_t n) {
  (void)ctx;
  hist_bucket *b = bucket;
  uint32_t k = field == 0 ? hist_field_of(n) : field;
  atomic_fetch_add_explicit(&b->count[k], field == 0 ? 1 : n, memory_order_relaxed);
}

static int64_t hist_get(void *ctx, const void *bucket, uint32_t field) {
  (void)ctx;
  const hist_bucket *b = bucket;
  return atomic_load_explicit(&b->count[field], memory_order_relaxed);
}

static const char *const hist_field_names[HIST_FIELDS] = {
    "le0ms",  "le1ms",   "le3ms",   "le7ms",   "le15ms",   "le31ms",   "le63ms",  "le127ms",
    "le255ms", "le511ms", "le1023ms", "le2047ms", "le4095ms", "le8191ms", "le16383ms", "inf"};

/* Step 4: the vtable. */
static const sw_bucket_type hist_type = {
    .abi_version = SW_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sw_bucket_type),
    .name = "example.histogram",
    .bucket_size = sizeof(hist_bucket),
    .bucket_align = _Alignof(hist_bucket),
    .new_empty_bucket = hist_new_empty_bucket,
    .reset_window_to = hist_reset_window_to,
    .field_count = HIST_FIELDS,
    .field_names = hist_field_names,
    .add = hist_add,
    .get = hist_get,
};

/* Step 5: the entry point. Refuse a host of another major ABI version. */
__attribute__((visibility("default"))) const sw_bucket_type *const *
sw_plugin_entry(uint32_t host_abi_version, uint32_t *count) {
  static const sw_bucket_type *const types[] = {&hist_type};
  if ((host_abi_version >> 16) != SW_PLUGIN_ABI_MAJOR) return 0;
  *count = 1;
  return types;
}
