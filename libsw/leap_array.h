/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of a leap array and the inline pieces of its hot path.
 *
 * The ring lives in one position-independent block (offsets only, no
 * pointers), on the heap or in a shared segment:
 *
 *   block header (one cache line + the reset mutex)
 *   slot 0: header line { seq, start[2] } | body 0 | body 1
 *   slot 1: ...
 *
 * Each slot has two bodies (double buffering). seq is a per-slot sequence:
 * 0 = never used; even >= 2 = body (seq >> 1) & 1 is active and holds the
 * window start[body]; odd = the other body is being prepared for a new
 * window (the active one is unchanged). A reset prepares the inactive body
 * completely and then publishes it with one release store of seq + 1, so:
 *  - adders never see the new start with old counts;
 *  - an add that raced with the reset lands in the retired body, i.e. it is
 *    counted in the window it read (now deprecated), never in the new one;
 *  - the body an adder or reader holds is not rewritten before two more
 *    resets of its slot (at least one full interval of the clock).
 * Resets are serialised by a robust process-shared mutex taken only on that
 * rare path; a process that dies holding it leaves at most a half-prepared
 * inactive body, which the next locker prepares again (EOWNERDEAD).
 *
 * Each handle (process-local) keeps a hint: the start and slot of the
 * window it last found current. The hot path trusts it only after seeing
 * the slot still hold that start, so a stale hint (another handle or
 * process moved the slot on) or a torn one (two threads writing it) costs
 * the division it saves, never a wrong window.
 */
#ifndef SW_LEAP_ARRAY_H
#define SW_LEAP_ARRAY_H

#include <pthread.h>

#include "internal.h"

#define SW__LA_MAGIC 0x414c5753u /* "SWLA" */
#define SW__LA_LAYOUT_VERSION 2u

typedef struct sw__la_block {
  uint32_t magic;
  uint32_t layout_version;
  int32_t sample_count;
  uint32_t body_size; /* bytes per body, a multiple of SW_CACHE_LINE */
  int64_t window_length_ms;
  int64_t interval_ms;
  uint64_t slot_stride; /* SW_CACHE_LINE + 2 * body_size */
  uint64_t slots_offset;
  uint64_t total_size;
  uint64_t type_id; /* hash of the bucket type's name: attach with another type is refused */
  _Atomic int64_t detached; /* adds that went to a detached window */
  pthread_mutex_t reset_lock;
} sw__la_block;

typedef struct sw__la_slot {
  _Atomic uint64_t seq;
  _Atomic int64_t start[2];
} sw__la_slot;

struct sw_leap_array {
  /* Where the window last found current lives (process-local, racy: a
   * reader trusts the pair only once the slot holds that start), so the
   * hot path finds its slot without dividing. */
  _Atomic int64_t hint_start; /* INT64_MIN: none yet */
  _Atomic uint32_t hint_idx;
  sw__la_block *blk;
  unsigned char *slots;
  int64_t wl; /* window length */
  int64_t interval;
  uint64_t stride;
  uint64_t body_off[2]; /* where a slot's two bodies start */
  uint32_t body_size;
  int32_t n;
  void *ctx;
  bool owns_block;
  bool readonly; /* bound to a read-only mapping: writes are refused */
  bool borrowed; /* part of a larger object: *_free leaves it alone */
  sw_bucket_type vt; /* validated copy, members beyond the plugin's struct_size zeroed */
};

/* Size of a block for the geometry, or 0 on overflow. */
uint64_t sw__la_block_size(int32_t sample_count, uint32_t bucket_size);
/* Validate geometry and vtable (SW_ESIZE / SW_EOVERFLOW / SW_EABI, with a message). */
int sw__la_validate(const sw_bucket_type *type, int32_t sample_count, int64_t interval_ms);
/* Initialise a zeroed block of sw__la_block_size() bytes. */
int sw__la_block_init(sw__la_block *blk, const sw_bucket_type *type, int32_t sample_count,
                      int64_t interval_ms, bool process_shared);
/* Check that an initialised block has the layout of this geometry and was
 * laid out for this type (SW_EFOREIGN / SW_EVERSION / SW_ECORRUPT / SW_ETYPE
 * with a message). */
int sw__la_check(const sw__la_block *blk, const sw_bucket_type *type, int32_t sample_count,
                 int64_t interval_ms);
/* Bind a handle to an initialised block (the block is not owned). */
int sw__la_bind(sw_leap_array *la, sw__la_block *blk, const sw_bucket_type *type, void *ctx);
/* Copy a vtable, zero-filling members beyond its struct_size. */
int sw__bucket_type_copy(sw_bucket_type *dst, const sw_bucket_type *src);
/* Prepare and publish the window ws in slot idx (slow path of current). */
int sw__la_reset(sw_leap_array *la, uint32_t idx, int64_t ws, int64_t t);
/* Slow path of sw__la_current_body: reset or detach. */
void *sw__la_current_body_slow(sw_leap_array *la, int64_t t);

static inline sw__la_slot *sw__la_slot_at(const sw_leap_array *la, uint32_t idx) {
  return (sw__la_slot *)(la->slots + (uint64_t)idx * la->stride);
}

static inline void *sw__la_body(const sw_leap_array *la, sw__la_slot *s, unsigned b) {
  return (unsigned char *)s + la->body_off[b];
}

/* True once a reader that loaded seq1 may be looking at a rewritten body:
 * seq moved on by two or more. Compared modulo 2^64, so that a damaged seq
 * near the top of the range reads as it is instead of torn for ever. */
static inline bool sw__la_torn(uint64_t seq1, uint64_t seq2) {
  return seq2 - (seq1 | 1) - 2 < (UINT64_C(1) << 62);
}

/* Snapshot of a slot's active window: false if the slot never held one. */
static inline bool sw__la_active(sw__la_slot *s, uint64_t *seq, int64_t *start) {
  uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
  if (q < 2) return false;
  *seq = q;
  *start = atomic_load_explicit(&s->start[(q >> 1) & 1], memory_order_relaxed);
  return true;
}

/* After reading a body found with sw__la_active: false if it may be torn. */
static inline bool sw__la_still_valid(sw__la_slot *s, uint64_t seq1) {
  atomic_thread_fence(memory_order_acquire);
  return !sw__la_torn(seq1, atomic_load_explicit(&s->seq, memory_order_relaxed));
}

/* Remember that the window starting at ws lives in slot idx. Only writers
 * set a hint, so a read-only handle never has one and the adds' fast path
 * need not check that it may write. */
static inline void sw__la_hint_set(const sw_leap_array *la, int64_t ws, uint32_t idx) {
  sw_leap_array *w = (sw_leap_array *)la; /* the hint is a cache, even of a const handle */
  atomic_store_explicit(&w->hint_idx, idx, memory_order_relaxed);
  atomic_store_explicit(&w->hint_start, ws, memory_order_release);
}

/* t's window as the hint has it: true with the window's start, its slot,
 * the slot's seq and index; false when t is not in the hinted window or the
 * slot no longer holds it (then divide: t / wl, % n). A t < 0 never matches. */
static inline bool sw__la_hinted(const sw_leap_array *la, int64_t t, int64_t *ws,
                                 sw__la_slot **slot, uint64_t *seq, uint32_t *idx) {
  int64_t hs = atomic_load_explicit(&la->hint_start, memory_order_acquire);
  if (sw__unlikely((uint64_t)t - (uint64_t)hs >= (uint64_t)la->wl)) return false;
  uint32_t i = atomic_load_explicit(&la->hint_idx, memory_order_relaxed);
  sw__la_slot *s = sw__la_slot_at(la, i);
  /* No seq < 2 check: the hint names a slot only once it held hs (and no
   * window starts at INT64_MIN); the release store of hint_start orders
   * that slot's initialisation before any reader trusting it. */
  uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
  if (sw__unlikely(atomic_load_explicit(&s->start[(q >> 1) & 1], memory_order_relaxed) != hs))
    return false;
  *ws = hs;
  *slot = s;
  *seq = q;
  *idx = i;
  return true;
}

/* The start of t's window (ws) and the index of its slot. */
static inline uint32_t sw__la_locate(const sw_leap_array *la, int64_t t, int64_t *ws) {
  sw__la_slot *s;
  uint64_t seq;
  uint32_t idx;
  if (sw__likely(sw__la_hinted(la, t, ws, &s, &seq, &idx))) return idx;
  int64_t wid = t / la->wl;
  *ws = wid * la->wl;
  return (uint32_t)(wid % la->n);
}

/* The body of the current window of t (t >= 0), resetting as needed, or NULL
 * when the slot holds a newer window (counted as detached). */
static inline void *sw__la_current_body(sw_leap_array *la, int64_t t) {
  int64_t ws;
  sw__la_slot *s;
  uint64_t seq;
  uint32_t idx;
  if (sw__likely(sw__la_hinted(la, t, &ws, &s, &seq, &idx)))
    return sw__la_body(la, s, (seq >> 1) & 1);
  return sw__la_current_body_slow(la, t);
}

/* Selection of windows for listing (see sw_leap_array_list_at). */
typedef enum { SW__SEL_INTERVAL, SW__SEL_ALL, SW__SEL_CONDITION } sw__selector;
/* Whether a stored window w is selected at t. */
bool sw__la_selected(const sw_leap_array *la, sw__selector sel, int64_t t, const sw_window *w,
                     sw_time_predicate pred, void *user);
/* Collect selected windows oldest first into out (the oldest cap of them);
 * returns how many there are. */
int sw__la_collect(const sw_leap_array *la, sw__selector sel, int64_t t,
                   sw_time_predicate pred, void *user, sw_window *out, uint32_t cap);

/* Oldest start of the sliding interval ending at t (may be negative). */
static inline int64_t sw__la_range_lo(const sw_leap_array *la, int64_t ws) {
  return ws - (la->interval - la->wl);
}

#endif /* SW_LEAP_ARRAY_H */
