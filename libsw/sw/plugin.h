/* SPDX-License-Identifier: Apache-2.0 */
/* <sw/plugin.h>: the bucket-type ABI of libsw.
 *
 * A leap array is a ring of time windows; what a window holds (its "bucket")
 * is described by a sw_bucket_type vtable. libsw's own buckets (the metric
 * bucket and its Bucket / Occupiable / Future variants) are expressed through
 * this same vtable, so a third party adds a bucket type exactly the way libsw
 * does.
 *
 * This header is self-contained: a plugin includes it and needs no link
 * against libsw. See examples/plugin/ for a template meant to be copied.
 *
 * Rules of the vtable (SQLite's sqlite3_vfs is the model):
 *  - abi_version is SW_PLUGIN_ABI_VERSION as the plugin saw it at build time;
 *    the host refuses a different major version.
 *  - struct_size is sizeof(sw_bucket_type) as the plugin saw it. Members are
 *    only ever appended; the host treats a member that does not lie wholly
 *    within struct_size as absent (NULL / 0), and refuses a struct_size
 *    smaller than SW_BUCKET_TYPE_MIN_SIZE.
 *  - Buckets live in memory owned by the host: on the heap or in a shared
 *    memory segment mapped at different addresses by different processes.
 *    A bucket must therefore hold no pointers, and every field that is read
 *    while other threads or processes write it must be accessed atomically.
 */
#ifndef SW_PLUGIN_H
#define SW_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SW_PLUGIN_ABI_MAJOR 1
#define SW_PLUGIN_ABI_MINOR 0
#define SW_PLUGIN_ABI_VERSION ((SW_PLUGIN_ABI_MAJOR << 16) | SW_PLUGIN_ABI_MINOR)

/* Largest bucket the host accepts, in bytes, and the largest alignment. */
#define SW_BUCKET_SIZE_MAX 65536u
#define SW_BUCKET_ALIGN_MAX 64u

/* sw_window.flags */
#define SW_WINDOW_DETACHED 0x1u /* not stored in the array: see sw_leap_array_current_window_at */

/* One window of a leap array, as the host hands it out (a view, not an owner). */
typedef struct sw_window {
  int64_t start_ms;  /* first millisecond of the window */
  int64_t length_ms; /* window length: interval / sample count */
  void *bucket;      /* the window's bucket; borrowed from the array */
  uint32_t flags;    /* SW_WINDOW_* */
  uint32_t slot;     /* index of the window in the ring */
} sw_window;

/* How a field's values combine across windows (sw_bucket_type.field_kinds). */
#define SW_FIELD_SUM 0u
#define SW_FIELD_MIN 1u
#define SW_FIELD_MAX 2u

typedef struct sw_bucket_type sw_bucket_type;

struct sw_bucket_type {
  uint32_t abi_version; /* SW_PLUGIN_ABI_VERSION */
  uint32_t struct_size; /* sizeof(sw_bucket_type) */
  const char *name;     /* registry name, e.g. "acme.histogram"; sw.* is reserved */
  uint32_t bucket_size; /* bytes, 1..SW_BUCKET_SIZE_MAX */
  uint32_t bucket_align; /* power of two, 1..SW_BUCKET_ALIGN_MAX (buckets are
                            always placed on 64-byte boundaries) */

  /* Initialise a bucket for a window created at time_ms in a slot that never
   * held a window (Sentinel's newEmptyBucket), or for a detached window
   * (per-thread scratch memory, when the caller's clock is behind). The
   * memory is zeroed. */
  void (*new_empty_bucket)(void *ctx, void *bucket, int64_t time_ms);

  /* Make window->bucket the bucket of the window that starts at start_ms
   * (Sentinel's resetWindowTo). window->start_ms is the start the slot held
   * before. The memory holds an older window of this type, not necessarily
   * the previous one: initialise every field. Called once per slot and start,
   * while no other thread reads or writes this bucket. */
  void (*reset_window_to)(void *ctx, sw_window *window, int64_t start_ms);

  /* ---- optional members; NULL (or beyond struct_size) means absent ---- */

  /* Nonzero when the window is deprecated at time_ms. Absent: Sentinel's rule,
   * time_ms - window->start_ms > interval_ms. window->bucket may be NULL
   * (a question about a start alone). */
  int (*is_window_deprecated)(void *ctx, int64_t time_ms, const sw_window *window,
                              int64_t interval_ms);

  /* Generic access by field, used by sw_leap_array_add_at / _sum_at and by the
   * bindings. field < field_count. */
  uint32_t field_count;
  const char *const *field_names; /* field_count names */
  const uint8_t *field_kinds;     /* field_count SW_FIELD_*; NULL: all SUM */
  void (*add)(void *ctx, void *bucket, uint32_t field, int64_t n);
  int64_t (*get)(void *ctx, const void *bucket, uint32_t field);

  /* members above are version 1.0 */
};

/* The smallest struct_size the host accepts: up to reset_window_to. */
#define SW_BUCKET_TYPE_MIN_SIZE \
  ((uint32_t)(offsetof(sw_bucket_type, reset_window_to) + sizeof(void (*)(void))))

/* A plugin shared object exports one function with this name and type. It is
 * given the host's SW_PLUGIN_ABI_VERSION and returns an array of *count
 * vtables that stay valid while the object is loaded (static storage), or
 * NULL to refuse the host. */
#define SW_PLUGIN_ENTRY_SYMBOL "sw_plugin_entry"
typedef const sw_bucket_type *const *(*sw_plugin_entry_fn)(uint32_t host_abi_version,
                                                           uint32_t *count);
/* What a plugin defines (declared here so the compiler checks its type). */
const sw_bucket_type *const *sw_plugin_entry(uint32_t host_abi_version, uint32_t *count);

#ifdef __cplusplus
}
#endif

#endif /* SW_PLUGIN_H */
