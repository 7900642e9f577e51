/* SPDX-License-Identifier: Apache-2.0 */
/* The leap array: a ring of time windows over a pluggable bucket type
 * (Sentinel's LeapArray). Layout and reset protocol: see leap_array.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "leap_array.h"

/* ------------------------------------------------------------- validation */

int sw__bucket_type_copy(sw_bucket_type *dst, const sw_bucket_type *src) {
  if (src == NULL) return sw__fail(SW_ENULL, "bucket type is NULL");
  if ((src->abi_version >> 16) != SW_PLUGIN_ABI_MAJOR)
    return sw__fail(SW_EABI, "bucket type ABI version %u.%u, this libsw speaks %u.x",
                    src->abi_version >> 16, src->abi_version & 0xffffu, SW_PLUGIN_ABI_MAJOR);
  if (src->struct_size < SW_BUCKET_TYPE_MIN_SIZE)
    return sw__fail(SW_EABI, "bucket type struct_size=%u is smaller than the minimum %u",
                    src->struct_size, SW_BUCKET_TYPE_MIN_SIZE);
  memset(dst, 0, sizeof *dst);
  memcpy(dst, src, src->struct_size < sizeof *dst ? src->struct_size : sizeof *dst);
  /* A member that does not lie wholly within the plugin's struct_size is absent. */
#define SW__ABSENT_BEYOND(m)                                                      \
  if (offsetof(sw_bucket_type, m) + sizeof dst->m > src->struct_size)            \
    memset(&dst->m, 0, sizeof dst->m);
  SW__ABSENT_BEYOND(is_window_deprecated)
  SW__ABSENT_BEYOND(field_count)
  SW__ABSENT_BEYOND(field_names)
  SW__ABSENT_BEYOND(field_kinds)
  SW__ABSENT_BEYOND(add)
  SW__ABSENT_BEYOND(get)
#undef SW__ABSENT_BEYOND
  dst->struct_size = sizeof *dst;
  const char *name = dst->name ? dst->name : "(unnamed)";
  if (dst->name == NULL || dst->name[0] == '\0')
    return sw__fail(SW_EABI, "bucket type has no name");
  if (dst->bucket_size == 0 || dst->bucket_size > SW_BUCKET_SIZE_MAX)
    return sw__fail(SW_EABI, "bucket type %s: bucket_size=%u is not in 1..%u", name,
                    dst->bucket_size, SW_BUCKET_SIZE_MAX);
  if (!sw__is_pow2(dst->bucket_align) || dst->bucket_align > SW_BUCKET_ALIGN_MAX)
    return sw__fail(SW_EABI, "bucket type %s: bucket_align=%u is not a power of two <= %u",
                    name, dst->bucket_align, SW_BUCKET_ALIGN_MAX);
  if (dst->new_empty_bucket == NULL || dst->reset_window_to == NULL)
    return sw__fail(SW_EABI, "bucket type %s: new_empty_bucket and reset_window_to are required",
                    name);
  if (dst->field_count > 0 && (dst->add == NULL || dst->get == NULL))
    return sw__fail(SW_EABI, "bucket type %s: field_count=%u needs add and get", name,
                    dst->field_count);
  if (dst->field_count == 0) {
    dst->add = NULL;
    dst->get = NULL;
  }
  return SW_OK;
}

static uint32_t sw__body_size(uint32_t bucket_size) {
  return (uint32_t)sw__round_up(bucket_size, SW_CACHE_LINE);
}

static uint64_t sw__slots_offset(void) {
  return sw__round_up(sizeof(sw__la_block), SW_CACHE_LINE);
}

uint64_t sw__la_block_size(int32_t sample_count, uint32_t bucket_size) {
  uint64_t stride = SW_CACHE_LINE + 2u * (uint64_t)sw__body_size(bucket_size), total;
  if (sample_count <= 0 || __builtin_mul_overflow(stride, (uint64_t)sample_count, &total) ||
      __builtin_add_overflow(total, sw__slots_offset(), &total) || total > (UINT64_C(1) << 40))
    return 0;
  return total;
}

int sw__la_validate(const sw_bucket_type *type, int32_t sample_count, int64_t interval_ms) {
  if (sample_count <= 0)
    return sw__fail(SW_ESIZE, "sample_count=%d must be > 0", sample_count);
  if (interval_ms <= 0)
    return sw__fail(SW_ESIZE, "interval_ms=%lld must be > 0", (long long)interval_ms);
  if (interval_ms % sample_count != 0)
    return sw__fail(SW_ESIZE, "sample_count=%d does not divide interval_ms=%lld", sample_count,
                    (long long)interval_ms);
  if (sw__la_block_size(sample_count, type->bucket_size) == 0)
    return sw__fail(SW_EOVERFLOW, "sample_count=%d with bucket_size=%u needs more than 1 TiB",
                    sample_count, type->bucket_size);
  return SW_OK;
}

/* ------------------------------------------------------------ construction */

/* The built-in types read their context as their own configuration. */
static int sw__no_builtin_ctx(const sw_bucket_type *vt, const void *ctx) {
  if (ctx != NULL && strncmp(vt->name, "sw.", 3) == 0)
    return sw__fail(SW_EINVAL, "built-in type %s takes no context: use sw_metric_create",
                    vt->name);
  return SW_OK;
}

/* A block remembers the name of its bucket type. */
static uint64_t sw__type_id(const sw_bucket_type *type) {
  return sw__fnv(type->name, strlen(type->name), SW__FNV_BASIS);
}

int sw__la_block_init(sw__la_block *blk, const sw_bucket_type *type, int32_t sample_count,
                      int64_t interval_ms, bool process_shared) {
  int rc = sw__robust_init(&blk->reset_lock, process_shared);
  if (rc < 0) return rc;
  blk->sample_count = sample_count;
  blk->body_size = sw__body_size(type->bucket_size);
  blk->window_length_ms = interval_ms / sample_count;
  blk->interval_ms = interval_ms;
  blk->slot_stride = SW_CACHE_LINE + 2u * (uint64_t)blk->body_size;
  blk->slots_offset = sw__slots_offset();
  blk->total_size = sw__la_block_size(sample_count, type->bucket_size);
  blk->type_id = sw__type_id(type);
  blk->layout_version = SW__LA_LAYOUT_VERSION;
  atomic_thread_fence(memory_order_release);
  blk->magic = SW__LA_MAGIC;
  return SW_OK;
}

/* Every slot's window starts (either body may become the active one) are
 * window starts: >= 0 and whole windows, so that no arithmetic on them
 * overflows; its seq is far from the top of its range. (The header has
 * been checked: the slots lie inside the block.) */
static int sw__la_check_slots(const sw__la_block *blk) {
  const unsigned char *slots = (const unsigned char *)blk + blk->slots_offset;
  for (int32_t i = 0; i < blk->sample_count; i++) {
    sw__la_slot *s = (sw__la_slot *)(slots + (uint64_t)i * blk->slot_stride);
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    for (int b = 0; b < 2; b++) {
      int64_t start = atomic_load_explicit(&s->start[b], memory_order_relaxed);
      if (start < 0 || start % blk->window_length_ms != 0)
        return sw__fail(SW_ECORRUPT, "leap array slot %d holds window start %lld, not a "
                        "multiple of %lld ms", i, (long long)start,
                        (long long)blk->window_length_ms);
    }
    if (seq >= UINT64_C(1) << 62)
      return sw__fail(SW_ECORRUPT, "leap array slot %d has sequence %llu", i,
                      (unsigned long long)seq);
  }
  return SW_OK;
}

int sw__la_check(const sw__la_block *blk, const sw_bucket_type *type, int32_t sample_count,
                 int64_t interval_ms) {
  const uint32_t bucket_size = type->bucket_size;
  if (blk->magic != SW__LA_MAGIC)
    return sw__fail(SW_EFOREIGN, "not a leap array (magic 0x%08x)", blk->magic);
  if (blk->layout_version != SW__LA_LAYOUT_VERSION)
    return sw__fail(SW_EVERSION, "leap array layout version %u, this libsw has %u",
                    blk->layout_version, SW__LA_LAYOUT_VERSION);
  uint32_t body = sw__body_size(bucket_size);
  if (sample_count <= 0 || interval_ms <= 0 || interval_ms % sample_count != 0 ||
      blk->sample_count != sample_count || blk->interval_ms != interval_ms ||
      blk->window_length_ms != interval_ms / sample_count || blk->body_size != body ||
      blk->slot_stride != SW_CACHE_LINE + 2u * (uint64_t)body ||
      blk->slots_offset != sw__slots_offset() ||
      blk->total_size != sw__la_block_size(sample_count, bucket_size))
    return sw__fail(SW_ECORRUPT, "leap array header (%d windows, %lld ms, %u-byte bodies) "
                    "does not match its geometry (%d, %lld, %u)", blk->sample_count,
                    (long long)blk->interval_ms, blk->body_size, sample_count,
                    (long long)interval_ms, body);
  if (blk->type_id != sw__type_id(type))
    return sw__fail(SW_ETYPE, "the leap array was laid out for another bucket type than %s",
                    type->name);
  return sw__la_check_slots(blk);
}

int sw__la_bind(sw_leap_array *la, sw__la_block *blk, const sw_bucket_type *type, void *ctx) {
  int rc = sw__bucket_type_copy(&la->vt, type);
  if (rc < 0) return rc;
  la->blk = blk;
  la->slots = (unsigned char *)blk + blk->slots_offset;
  la->wl = blk->window_length_ms;
  la->interval = blk->interval_ms;
  la->stride = blk->slot_stride;
  la->body_size = blk->body_size;
  la->body_off[0] = SW_CACHE_LINE;
  la->body_off[1] = SW_CACHE_LINE + (uint64_t)blk->body_size;
  la->n = blk->sample_count;
  la->ctx = ctx;
  atomic_store(&la->hint_idx, 0);
  atomic_store(&la->hint_start, INT64_MIN);
  return SW_OK;
}

SW_API int sw_leap_array_create(sw_leap_array **out, const sw_bucket_type *type, void *ctx,
                                int32_t sample_count, int64_t interval_ms) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  sw_bucket_type vt;
  int rc = sw__bucket_type_copy(&vt, type);
  if (rc < 0) return rc;
  if ((rc = sw__no_builtin_ctx(&vt, ctx)) < 0) return rc;
  if ((rc = sw__la_validate(&vt, sample_count, interval_ms)) < 0) return rc;
  uint64_t size = sw__la_block_size(sample_count, vt.bucket_size);
  sw_leap_array *la;
  sw__la_block *blk;
  if ((rc = sw__alloc_pair((void **)&la, sizeof *la, (void **)&blk, size, "leap array")) < 0) return rc;
  if ((rc = sw__la_block_init(blk, &vt, sample_count, interval_ms, false)) < 0 ||
      (rc = sw__la_bind(la, blk, type, ctx)) < 0) {
    sw__free(la);
    sw__free(blk);
    return rc;
  }
  la->owns_block = true;
  *out = la;
  return SW_OK;
}

SW_API int64_t sw_leap_array_layout_size(const sw_bucket_type *type, int32_t sample_count,
                                         int64_t interval_ms) {
  sw_bucket_type vt;
  int rc = sw__bucket_type_copy(&vt, type);
  if (rc < 0 || (rc = sw__la_validate(&vt, sample_count, interval_ms)) < 0) return rc;
  return (int64_t)sw__la_block_size(sample_count, vt.bucket_size);
}

SW_API int sw_leap_array_init_at(void *mem, uint64_t size, const sw_bucket_type *type,
                                 int32_t sample_count, int64_t interval_ms, uint32_t flags) {
  SW__CHECK_NULL(mem, "memory");
  if (flags & ~SW_LEAP_ARRAY_SHARED) return sw__fail(SW_EINVAL, "unknown flags 0x%x", flags);
  int64_t need = sw_leap_array_layout_size(type, sample_count, interval_ms);
  if (need < 0) return (int)need;
  if ((uintptr_t)mem % SW_CACHE_LINE != 0)
    return sw__fail(SW_EINVAL, "memory at %p is not 64-byte aligned", mem);
  if (size < (uint64_t)need)
    return sw__fail(SW_ESIZE, "%llu bytes given, the array needs %lld",
                    (unsigned long long)size, (long long)need);
  memset(mem, 0, (size_t)need);
  return sw__la_block_init(mem, type, sample_count, interval_ms, flags & SW_LEAP_ARRAY_SHARED);
}

SW_API int sw_leap_array_attach(sw_leap_array **out, void *mem, uint64_t size,
                                const sw_bucket_type *type, void *ctx) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(mem, "memory");
  SW__CHECK_NULL(type, "bucket type");
  sw_bucket_type vt;
  int rc = sw__bucket_type_copy(&vt, type);
  if (rc < 0 || (rc = sw__no_builtin_ctx(&vt, ctx)) < 0) return rc;
  if ((uintptr_t)mem % SW_CACHE_LINE != 0)
    return sw__fail(SW_EINVAL, "memory at %p is not 64-byte aligned", mem);
  const sw__la_block *blk = mem;
  if (size < sizeof *blk)
    return sw__fail(SW_ECORRUPT, "%llu bytes cannot hold a leap array header",
                    (unsigned long long)size);
  if (blk->magic == SW__LA_MAGIC && blk->total_size > size)
    return sw__fail(SW_ECORRUPT, "the array needs %llu bytes, %llu given",
                    (unsigned long long)blk->total_size, (unsigned long long)size);
  rc = blk->magic == SW__LA_MAGIC && blk->sample_count > 0
               ? sw__la_check(blk, &vt, blk->sample_count, blk->interval_ms)
               : sw__fail(SW_EFOREIGN, "not a leap array (magic 0x%08x)", blk->magic);
  if (rc < 0) return rc;
  sw_leap_array *la = sw__calloc(1, sizeof *la);
  if (la == NULL) return sw__fail(SW_ENOMEM, "leap array handle");
  if ((rc = sw__la_bind(la, mem, type, ctx)) < 0) {
    sw__free(la);
    return rc;
  }
  *out = la;
  return SW_OK;
}

SW_API int sw_leap_array_create_by_name(sw_leap_array **out, const char *type_name, void *ctx,
                                        int32_t sample_count, int64_t interval_ms) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(type_name, "type name");
  const sw_bucket_type *type = sw_bucket_type_find(type_name);
  if (type == NULL) return SW_ENOTFOUND;
  return sw_leap_array_create(out, type, ctx, sample_count, interval_ms);
}

SW_API void sw_leap_array_free(sw_leap_array *la) {
  if (la == NULL || la->borrowed) return; /* a metric's array belongs to the metric */
  if (la->owns_block) {
    pthread_mutex_destroy(&la->blk->reset_lock);
    sw__free(la->blk);
  }
  sw__free(la);
}

/* --------------------------------------------------------------- accessors */

SW_API int32_t sw_leap_array_sample_count(const sw_leap_array *la) {
  return la ? la->n : sw__fail(SW_ENULL, "leap array is NULL");
}
SW_API int64_t sw_leap_array_interval_ms(const sw_leap_array *la) {
  return la ? la->interval : sw__fail(SW_ENULL, "leap array is NULL");
}
SW_API int64_t sw_leap_array_window_length_ms(const sw_leap_array *la) {
  return la ? la->wl : sw__fail(SW_ENULL, "leap array is NULL");
}
SW_API const sw_bucket_type *sw_leap_array_type(const sw_leap_array *la) {
  if (la == NULL) sw__fail(SW_ENULL, "leap array is NULL");
  return la ? &la->vt : NULL;
}
SW_API int64_t sw_leap_array_detached_count(const sw_leap_array *la) {
  if (la == NULL) return sw__fail(SW_ENULL, "leap array is NULL");
  return atomic_load_explicit(&la->blk->detached, memory_order_relaxed);
}

SW_API int sw_leap_array_time_index(const sw_leap_array *la, int64_t t, int32_t *idx) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_NULL(idx, "idx");
  SW__CHECK_TIME(t);
  *idx = (int32_t)((t / la->wl) % la->n);
  return SW_OK;
}

SW_API int sw_leap_array_window_start(const sw_leap_array *la, int64_t t, int64_t *start) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_NULL(start, "start");
  SW__CHECK_TIME(t);
  *start = t - t % la->wl;
  return SW_OK;
}

/* ------------------------------------------------------------------ reset */

int sw__la_reset(sw_leap_array *la, uint32_t idx, int64_t ws, int64_t t) {
  /* A holder that died mid-reset left at most an odd seq and a half-written
   * inactive body, which is prepared again below anyway: nothing to repair. */
  int rc = sw__robust_lock(&la->blk->reset_lock, NULL, NULL, "window reset", SW__RESET_LOCK_MS);
  if (rc < 0) return rc;
  sw__la_slot *s = sw__la_slot_at(la, idx);
  uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
  int64_t old_start = INT64_MIN;
  if (seq >= 2) {
    old_start = atomic_load_explicit(&s->start[(seq >> 1) & 1], memory_order_relaxed);
    if (old_start >= ws) { /* someone else got here first, or the window is newer */
      pthread_mutex_unlock(&la->blk->reset_lock);
      return SW_OK;
    }
  }
  uint64_t prep = seq | 1; /* odd: preparing the inactive body */
  unsigned nb = (unsigned)(((prep + 1) >> 1) & 1);
  atomic_store_explicit(&s->seq, prep, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  void *body = sw__la_body(la, s, nb);
  if (seq < 2) {
    memset(body, 0, la->body_size);
    la->vt.new_empty_bucket(la->ctx, body, t);
  } else {
    sw_window w = {old_start, la->wl, body, 0, idx};
    la->vt.reset_window_to(la->ctx, &w, ws);
  }
  atomic_store_explicit(&s->start[nb], ws, memory_order_relaxed);
  atomic_store_explicit(&s->seq, prep + 1, memory_order_release);
  pthread_mutex_unlock(&la->blk->reset_lock);
  return SW_OK;
}

void *sw__la_current_body_slow(sw_leap_array *la, int64_t t) {
  int64_t wid = t / la->wl, ws = wid * la->wl;
  uint32_t idx = (uint32_t)(wid % la->n);
  sw__la_slot *s = sw__la_slot_at(la, idx);
  for (;;) {
    uint64_t seq;
    int64_t start;
    if (sw__likely(sw__la_active(s, &seq, &start))) {
      if (sw__likely(start == ws)) {
        sw__la_hint_set(la, ws, idx);
        return sw__la_body(la, s, (seq >> 1) & 1);
      }
      if (start > ws) {
        atomic_fetch_add_explicit(&la->blk->detached, 1, memory_order_relaxed);
        return NULL;
      }
    }
    if (sw__la_reset(la, idx, ws, t) < 0) return NULL;
  }
}

/* ------------------------------------------------------ detached windows */

static pthread_key_t sw__scratch_key;
static pthread_once_t sw__scratch_once = PTHREAD_ONCE_INIT;
static void sw__scratch_key_init(void) { pthread_key_create(&sw__scratch_key, sw__free); }

/* Per-thread scratch bucket for detached windows (freed at thread exit). */
static void *sw__scratch(uint32_t size) {
  pthread_once(&sw__scratch_once, sw__scratch_key_init);
  void *p = pthread_getspecific(sw__scratch_key);
  if (p == NULL) {
    p = sw__malloc(SW_BUCKET_SIZE_MAX);
    if (p == NULL || pthread_setspecific(sw__scratch_key, p) != 0) {
      sw__free(p);
      return NULL;
    }
  }
  memset(p, 0, size);
  return p;
}

SW_API int sw_leap_array_current_window_at(sw_leap_array *la, int64_t t, sw_window *out) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_WRITABLE(la);
  SW__CHECK_NULL(out, "out");
  SW__CHECK_TIME(t);
  int64_t wid = t / la->wl, ws = wid * la->wl;
  uint32_t idx = (uint32_t)(wid % la->n);
  sw__la_slot *s = sw__la_slot_at(la, idx);
  *out = (sw_window){ws, la->wl, NULL, 0, idx};
  for (;;) {
    uint64_t seq;
    int64_t start;
    if (sw__la_active(s, &seq, &start)) {
      if (start == ws) {
        out->bucket = sw__la_body(la, s, (seq >> 1) & 1);
        return SW_OK;
      }
      if (start > ws) break;
    }
    int rc = sw__la_reset(la, idx, ws, t);
    if (rc < 0) return rc;
  }
  /* Sentinel case 4: the clock is behind the stored window. */
  atomic_fetch_add_explicit(&la->blk->detached, 1, memory_order_relaxed);
  out->bucket = sw__scratch(la->body_size);
  if (out->bucket == NULL) return sw__fail(SW_ENOMEM, "scratch bucket");
  out->flags = SW_WINDOW_DETACHED;
  la->vt.new_empty_bucket(la->ctx, out->bucket, t);
  return SW_OK;
}

SW_API int sw_leap_array_current_window(sw_leap_array *la, sw_window *out) {
  return sw_leap_array_current_window_at(la, sw__now_ms(), out);
}

/* ---------------------------------------------------------------- lookups */

static bool sw__deprecated(const sw_leap_array *la, int64_t t, const sw_window *w) {
  if (la->vt.is_window_deprecated)
    return la->vt.is_window_deprecated(la->ctx, t, w, la->interval) != 0;
  return t - w->start_ms > la->interval;
}

/* The stored window of slot idx, if any. */
static bool sw__la_stored(const sw_leap_array *la, uint32_t idx, sw_window *out) {
  sw__la_slot *s = sw__la_slot_at(la, idx);
  uint64_t seq;
  int64_t start;
  if (!sw__la_active(s, &seq, &start)) return false;
  *out = (sw_window){start, la->wl, sw__la_body(la, s, (seq >> 1) & 1), 0, idx};
  return true;
}

SW_API int sw_leap_array_is_window_deprecated_at(const sw_leap_array *la, int64_t t,
                                                 int64_t start_ms) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_TIME(t);
  SW__CHECK_TIME(start_ms); /* window starts are times too (and t - start must not overflow) */
  sw_window w = {start_ms, la->wl, NULL, 0, 0};
  return sw__deprecated(la, t, &w);
}

SW_API int sw_leap_array_window_value_at(const sw_leap_array *la, int64_t t, sw_window *out) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_NULL(out, "out");
  SW__CHECK_TIME(t);
  sw_window w;
  if (!sw__la_stored(la, (uint32_t)((t / la->wl) % la->n), &w)) return 0;
  if (t < w.start_ms || t - w.start_ms >= la->wl) return 0;
  *out = w;
  return 1;
}

SW_API int sw_leap_array_previous_window_at(const sw_leap_array *la, int64_t t,
                                            sw_window *out) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_NULL(out, "out");
  SW__CHECK_TIME(t);
  int64_t wid = t / la->wl;
  if (wid == 0) return 0;
  sw_window w;
  if (!sw__la_stored(la, (uint32_t)((wid - 1) % la->n), &w)) return 0;
  if (w.start_ms != (wid - 1) * la->wl || sw__deprecated(la, t, &w)) return 0;
  *out = w;
  return 1;
}

SW_API int sw_leap_array_previous_window(const sw_leap_array *la, sw_window *out) {
  return sw_leap_array_previous_window_at(la, sw__now_ms(), out);
}

SW_API int sw_leap_array_valid_head_at(const sw_leap_array *la, int64_t t, sw_window *out) {
  SW__CHECK_NULL(la, "leap array");
  SW__CHECK_NULL(out, "out");
  SW__CHECK_TIME(t);
  int64_t wid = t / la->wl;
  sw_window w;
  if (!sw__la_stored(la, (uint32_t)((wid % la->n + 1) % la->n), &w)) return 0;
  if (w.start_ms > wid * la->wl || sw__deprecated(la, t, &w)) return 0;
  *out = w;
  return 1;
}

SW_API int sw_leap_array_valid_head(const sw_leap_array *la, sw_window *out) {
  return sw_leap_array_valid_head_at(la, sw__now_ms(), out);
}

/* ---------------------------------------------------------------- listing */

bool sw__la_selected(const sw_leap_array *la, sw__selector sel, int64_t t, const sw_window *w,
                     sw_time_predicate pred, void *user) {
  switch (sel) {
  case SW__SEL_ALL:
    return true;
  case SW__SEL_CONDITION:
    return !sw__deprecated(la, t, w) && (pred == NULL || pred(w->start_ms, user));
  case SW__SEL_INTERVAL:
  default:
    if (la->vt.is_window_deprecated) return !sw__deprecated(la, t, w);
    int64_t ws = t - t % la->wl;
    return w->start_ms <= ws && w->start_ms >= sw__la_range_lo(la, ws);
  }
}

int sw__la_collect(const sw_leap_array *la, sw__selector sel, int64_t t,
                   sw_time_predicate pred, void *user, sw_window *out, uint32_t cap) {
  uint32_t n = 0;
  /* Start after t's slot: for the sliding interval that is oldest first. */
  uint32_t first = (uint32_t)(((t / la->wl) % la->n + 1) % la->n);
  for (uint32_t k = 0; k < (uint32_t)la->n; k++) {
    sw_window w;
    if (!sw__la_stored(la, (first + k) % (uint32_t)la->n, &w)) continue;
    if (!sw__la_selected(la, sel, t, &w, pred, user)) continue;
    /* Keep the oldest cap windows, sorted (insertion sort, usually a no-op). */
    uint32_t len = n < cap ? n : cap;
    if (len < cap || (cap > 0 && out[cap - 1].start_ms > w.start_ms)) {
      uint32_t j = len < cap ? len : cap - 1;
      while (j > 0 && out[j - 1].start_ms > w.start_ms) {
        out[j] = out[j - 1];
        j--;
      }
      out[j] = w;
    }
    n++;
  }
  return (int)n;
}

#define SW__LIST_ARGS_CHECK()                        \
  SW__CHECK_NULL(la, "leap array");                 \
  if (out == NULL && cap > 0) return sw__fail(SW_ENULL, "out is NULL with cap=%u", cap)

SW_API int sw_leap_array_list_at(const sw_leap_array *la, int64_t t, sw_window *out,
                                 uint32_t cap) {
  SW__LIST_ARGS_CHECK();
  SW__CHECK_TIME(t);
  return sw__la_collect(la, SW__SEL_INTERVAL, t, NULL, NULL, out, cap);
}

SW_API int sw_leap_array_list(const sw_leap_array *la, sw_window *out, uint32_t cap) {
  return sw_leap_array_list_at(la, sw__now_ms(), out, cap);
}

SW_API int sw_leap_array_list_all(const sw_leap_array *la, sw_window *out, uint32_t cap) {
  SW__LIST_ARGS_CHECK();
  return sw__la_collect(la, SW__SEL_ALL, 0, NULL, NULL, out, cap);
}

/* Run a collection into a temporary window array and keep the buckets. */
static int sw__la_values(const sw_leap_array *la, sw__selector sel, int64_t t,
                         sw_time_predicate pred, void *user, void **out, uint32_t cap) {
  sw_window stack[64], *w = stack;
  uint32_t wcap = cap < (uint32_t)la->n ? cap : (uint32_t)la->n;
  if (wcap > 64 && (w = sw__malloc(wcap * sizeof *w)) == NULL)
    return sw__fail(SW_ENOMEM, "values of %u windows", wcap);
  int n = sw__la_collect(la, sel, t, pred, user, w, wcap);
  for (uint32_t i = 0; i < (uint32_t)n && i < wcap; i++) out[i] = w[i].bucket;
  if (w != stack) sw__free(w);
  return n;
}

SW_API int sw_leap_array_values_at(const sw_leap_array *la, int64_t t, void **out,
                                   uint32_t cap) {
  SW__LIST_ARGS_CHECK();
  SW__CHECK_TIME(t);
  return sw__la_values(la, SW__SEL_INTERVAL, t, NULL, NULL, out, cap);
}

SW_API int sw_leap_array_values(const sw_leap_array *la, void **out, uint32_t cap) {
  return sw_leap_array_values_at(la, sw__now_ms(), out, cap);
}

SW_API int sw_leap_array_values_on_condition_at(const sw_leap_array *la, int64_t t,
                                                sw_time_predicate pred, void *user,
                                                void **out, uint32_t cap) {
  SW__LIST_ARGS_CHECK();
  SW__CHECK_TIME(t);
  return sw__la_values(la, SW__SEL_CONDITION, t, pred, user, out, cap);
}

/* ------------------------------------------------------- generic fields */

static int sw__field_check(const sw_leap_array *la, uint32_t field) {
  SW__CHECK_NULL(la, "leap array");
  if (la->vt.field_count == 0)
    return sw__fail(SW_ENOTSUP, "bucket type %s has no fields", la->vt.name);
  if (field >= la->vt.field_count)
    return sw__fail(SW_ERANGE, "field=%u, bucket type %s has %u fields", field, la->vt.name,
                    la->vt.field_count);
  return SW_OK;
}

SW_API int sw_leap_array_add_at(sw_leap_array *la, int64_t t, uint32_t field, int64_t n) {
  int rc = sw__field_check(la, field);
  if (rc < 0) return rc;
  SW__CHECK_WRITABLE(la);
  SW__CHECK_TIME(t);
  if (n < 0 || n > INT32_MAX)
    return sw__fail(SW_ERANGE, "n=%lld is outside 0..%d", (long long)n, INT32_MAX);
  void *body = sw__la_current_body(la, t);
  if (body != NULL) la->vt.add(la->ctx, body, field, n);
  return SW_OK;
}

SW_API int sw_leap_array_add(sw_leap_array *la, uint32_t field, int64_t n) {
  return sw_leap_array_add_at(la, sw__now_ms(), field, n);
}

SW_API int sw_leap_array_bucket_get(const sw_leap_array *la, const void *bucket, uint32_t field,
                                    int64_t *out) {
  int rc = sw__field_check(la, field);
  if (rc < 0) return rc;
  SW__CHECK_NULL(bucket, "bucket");
  SW__CHECK_NULL(out, "out");
  *out = la->vt.get(la->ctx, bucket, field);
  return SW_OK;
}

SW_API int sw_leap_array_sum_at(const sw_leap_array *la, int64_t t, uint32_t field,
                                int64_t *out) {
  int rc = sw__field_check(la, field);
  if (rc < 0) return rc;
  SW__CHECK_NULL(out, "out");
  SW__CHECK_TIME(t);
  uint8_t kind = la->vt.field_kinds ? la->vt.field_kinds[field] : SW_FIELD_SUM;
  int64_t acc = kind == SW_FIELD_MIN ? INT64_MAX : kind == SW_FIELD_MAX ? INT64_MIN : 0;
  int found = 0;
  for (uint32_t idx = 0; idx < (uint32_t)la->n; idx++) {
    sw__la_slot *s = sw__la_slot_at(la, idx);
    for (;;) {
      uint64_t seq;
      sw_window w = {0, la->wl, NULL, 0, idx};
      if (!sw__la_active(s, &seq, &w.start_ms)) break;
      if (!sw__la_selected(la, SW__SEL_INTERVAL, t, &w, NULL, NULL)) break;
      int64_t v = la->vt.get(la->ctx, sw__la_body(la, s, (seq >> 1) & 1), field);
      if (!sw__la_still_valid(s, seq)) continue;
      found = 1;
      if (kind == SW_FIELD_MIN) acc = v < acc ? v : acc;
      else if (kind == SW_FIELD_MAX) acc = v > acc ? v : acc;
      else acc = sw__sat_add(acc, v);
      break;
    }
  }
  *out = found || kind == SW_FIELD_SUM ? acc : 0;
  return SW_OK;
}
