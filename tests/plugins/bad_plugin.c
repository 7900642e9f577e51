/* SPDX-License-Identifier: Apache-2.0 */
/* Deliberately broken plugins for tests/check_plugin.c, one per build flag:
 *  BAD_MAJOR     a vtable built for ABI major 2;
 *  SMALL_STRUCT  a struct_size below SW_BUCKET_TYPE_MIN_SIZE;
 *  REFUSE        an entry that refuses every host (returns NULL);
 *  OLD_MINIMAL   a valid minimal 1.0 vtable whose struct_size stops after
 *                reset_window_to, followed by garbage the host must ignore. */
#include <stdint.h>

#include <sw/plugin.h>

static void new_bucket(void *ctx, void *bucket, int64_t t) { *(int64_t *)bucket = t; }
static void reset_bucket(void *ctx, sw_window *w, int64_t start) { *(int64_t *)w->bucket = start; }

static struct {
  sw_bucket_type t;
} vt = {{
    .abi_version = SW_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sw_bucket_type),
    .name = "test.bad",
    .bucket_size = 8,
    .bucket_align = 8,
    .new_empty_bucket = new_bucket,
    .reset_window_to = reset_bucket,
#ifdef OLD_MINIMAL
    /* beyond the declared struct_size: must be treated as absent */
    .is_window_deprecated = (int (*)(void *, int64_t, const sw_window *, int64_t))1,
    .field_count = 99,
#endif
}};

__attribute__((visibility("default"))) const sw_bucket_type *const *
sw_plugin_entry(uint32_t host_abi_version, uint32_t *count) {
  static const sw_bucket_type *const types[] = {&vt.t};
#ifdef BAD_MAJOR
  vt.t.abi_version = (2u << 16) | 0u;
  vt.t.name = "test.bad_major";
#endif
#ifdef SMALL_STRUCT
  vt.t.struct_size = 16;
  vt.t.name = "test.small_struct";
#endif
#ifdef REFUSE
  return 0;
#endif
#ifdef OLD_MINIMAL
  vt.t.struct_size = SW_BUCKET_TYPE_MIN_SIZE;
  vt.t.name = "test.old_minimal";
#endif
  *count = 1;
  (void)host_abi_version;
  return types;
}
