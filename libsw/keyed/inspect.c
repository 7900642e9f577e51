/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a keyed table: its totals, one key, every key (streaming) and
 * the top keys — without a lock, in bounded memory (keyed.h). */
#include <string.h>

#include "keyed.h"

static inline uint64_t sw__kt_behind(uint64_t wid, uint64_t w) {
  return (wid - sw__kt_wid(w)) & SW__KT_WID_MASK;
}

int64_t sw__kt_interval_pass(const sw_keyed *k, uint32_t idx, uint32_t gen, int64_t t) {
  const uint64_t wid = (uint64_t)(t / k->wl);
  _Atomic uint64_t *win = sw__kt_win(k, idx);
  int64_t pass = 0;
  for (uint32_t i = 0; i < k->windows; i++) {
    uint64_t w = atomic_load_explicit(&win[i], memory_order_relaxed);
    if (sw__kt_wgen(w) != gen) return -1;
    if (sw__kt_behind(wid, w) < k->windows) pass += sw__kt_count(w);
  }
  return pass;
}

/* Read slot idx at t into out: true if it holds a key (read consistently:
 * its meta unchanged across the read). */
static bool sw__kt_read(const sw_keyed *k, uint32_t idx, int64_t t, sw_keyed_key *out) {
  const uint64_t wid = (uint64_t)(t / k->wl);
  for (int tries = 0; tries < 4; tries++) {
    uint64_t m = atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_acquire);
    if (sw__kt_state(m) != SW__KT_READY) return false;
    const uint32_t gen = sw__kt_mgen(m);
    memset(out, 0, sizeof *out);
    out->len = (uint32_t)(m >> SW__KT_FRAG_BITS) & 0xffu;
    uint64_t words[SW__KT_MAX_KEY / 8];
    _Atomic uint64_t *kw = sw__kt_key_of(k, idx);
    for (uint32_t i = 0; i < k->key_words; i++)
      words[i] = atomic_load_explicit(&kw[i], memory_order_relaxed);
    memcpy(out->key, words, out->len ? out->len : 16);
    out->pass = sw__kt_interval_pass(k, idx, gen, t);
    uint64_t b = atomic_load_explicit(sw__kt_blocks(k, idx), memory_order_relaxed);
    out->block = sw__kt_behind(wid, b) < k->windows ? sw__kt_count(b) : 0;
    uint64_t a = k->kind == SW__KT_REJECT ? b : atomic_load_explicit(sw__kt_aux(k, idx),
                                                                         memory_order_relaxed);
    out->in_flight = k->kind == SW__KT_CONCURRENCY ? (int64_t)(a & SW__KT_VALUE_MASK) : 0;
    out->last_ms = -1;
    uint64_t recent = SW__KT_WID_MASK;
    for (uint32_t i = 0; i < k->windows; i++) {
      uint64_t w = atomic_load_explicit(&sw__kt_win(k, idx)[i], memory_order_relaxed);
      if (sw__kt_count(w) > 0 && sw__kt_behind(wid, w) < recent) recent = sw__kt_behind(wid, w);
    }
    if (recent < SW__KT_WID_MASK && (int64_t)recent <= (int64_t)wid)
      out->last_ms = ((int64_t)wid - (int64_t)recent) * k->wl;
    atomic_thread_fence(memory_order_acquire);
    if (out->pass >= 0 && atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_relaxed) == m &&
        sw__kt_wgen(a) == gen && sw__kt_wgen(b) == gen)
      return true;
  }
  return false; /* changing hands as we read: seen as absent */
}

#define SW__KT_READ_CHECK(k, t)                                                   \
  do {                                                                            \
    if (sw__unlikely((k) == NULL)) return sw__fail(SW_ENULL, "keyed table is NULL"); \
    SW__CHECK_TIME(t);                                                            \
  } while (0)

SW_API int sw_keyed_stats(const sw_keyed *k, sw_keyed_info *out) {
  SW__CHECK_NULL(k, "keyed table");
  SW__CHECK_NULL(out, "out");
  const sw__kt_hdr *h = k->hdr;
  memset(out, 0, sizeof *out);
  out->capacity = h->cfg.capacity;
  out->slots = h->nbuckets * SW__KT_WAYS;
  out->key_bytes = h->cfg.key_bytes;
  out->windows = h->cfg.windows;
  out->interval_ms = h->cfg.interval_ms;
  out->bytes = (int64_t)h->total_size;
  out->bytes_per_key = (int64_t)h->slot_size + 1; /* and its tag byte */
  out->keys = atomic_load(&h->keys);
  out->inserted = atomic_load(&h->inserted);
  out->reclaimed = atomic_load(&h->reclaimed);
  out->evicted = atomic_load(&h->evicted);
  out->on_full = h->cfg.on_full;
  for (uint32_t i = 0; i < SW__KT_TOTAL_STRIPES; i++) {
    const sw__kt_totals *s = &h->totals[i];
    out->refused += atomic_load_explicit(&s->refused, memory_order_relaxed);
    out->pass += atomic_load_explicit(&s->pass, memory_order_relaxed);
    out->block += atomic_load_explicit(&s->block, memory_order_relaxed);
    out->would_block += atomic_load_explicit(&s->would_block, memory_order_relaxed);
    out->success += atomic_load_explicit(&s->success, memory_order_relaxed);
    out->exception += atomic_load_explicit(&s->exception, memory_order_relaxed);
    out->rt += atomic_load_explicit(&s->rt, memory_order_relaxed);
  }
  return SW_OK;
}

SW_API int sw_keyed_lookup_at(const sw_keyed *k, int64_t t, const void *key, size_t len,
                              sw_keyed_key *out) {
  SW__KT_READ_CHECK(k, t);
  SW__CHECK_NULL(out, "out");
  sw__kt_key q;
  sw__kt_ref ref;
  int rc = sw__kt_prepare(k, key, len, &q);
  if (rc < 0) return rc;
  for (int tries = 0; tries < 4; tries++)
    if (sw__kt_find(k, &q, &ref) && sw__kt_read(k, ref.idx, t, out)) return 1;
  return 0;
}

SW_API int sw_keyed_scan_at(const sw_keyed *k, int64_t t, uint64_t *cursor, sw_keyed_key *out,
                            uint32_t cap) {
  SW__KT_READ_CHECK(k, t);
  SW__CHECK_NULL(cursor, "cursor");
  if (out == NULL && cap > 0) return sw__fail(SW_ENULL, "out is NULL with cap=%u", cap);
  const uint64_t slots = (uint64_t)k->nbuckets * SW__KT_WAYS;
  uint32_t n = 0;
  uint64_t idx = *cursor;
  for (; idx < slots && n < cap; idx++)
    if (sw__kt_read(k, (uint32_t)idx, t, &out[n])) n++;
  *cursor = idx;
  return (int)n;
}

/* The top so far: a min-heap in the caller's array, by passes or blocks. */
static inline int64_t sw__kt_by(const sw_keyed_key *e, uint32_t by) {
  return by == SW_KEYED_BY_PASS ? e->pass : e->block;
}

static void sw__kt_swap(sw_keyed_key *a, sw_keyed_key *b) {
  sw_keyed_key x = *a;
  *a = *b;
  *b = x;
}

static void sw__kt_sift_down(sw_keyed_key *h, uint32_t n, uint32_t i, uint32_t by) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && sw__kt_by(&h[l], by) < sw__kt_by(&h[m], by)) m = l;
    if (r < n && sw__kt_by(&h[r], by) < sw__kt_by(&h[m], by)) m = r;
    if (m == i) return;
    sw__kt_swap(&h[i], &h[m]);
    i = m;
  }
}

SW_API int sw_keyed_top_at(const sw_keyed *k, int64_t t, uint32_t by, sw_keyed_key *out,
                           uint32_t n, int64_t *active) {
  SW__KT_READ_CHECK(k, t);
  if (by > SW_KEYED_BY_BLOCK) return sw__fail(SW_EINVAL, "by=%u: SW_KEYED_BY_PASS or _BY_BLOCK", by);
  if (out == NULL && n > 0) return sw__fail(SW_ENULL, "out is NULL with n=%u", n);
  if (n > 100000) return sw__fail(SW_ERANGE, "n=%u: at most 100000 top keys", n);
  const uint64_t slots = (uint64_t)k->nbuckets * SW__KT_WAYS;
  uint32_t size = 0;
  int64_t busy = 0;
  sw_keyed_key key;
  /* each key as read once (a place that changes hands later is not read again) */
  for (uint64_t idx = 0; idx < slots; idx++) {
    if (sw__kt_state(atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_relaxed)) !=
            SW__KT_READY ||
        !sw__kt_read(k, (uint32_t)idx, t, &key))
      continue;
    int64_t v = sw__kt_by(&key, by);
    if (key.pass > 0 || key.block > 0) busy++;
    if (v <= 0 || n == 0) continue;
    if (size < n) {
      out[size++] = key;
      for (uint32_t i = size - 1; i > 0 && sw__kt_by(&out[(i - 1) / 2], by) > sw__kt_by(&out[i], by);
           i = (i - 1) / 2)
        sw__kt_swap(&out[i], &out[(i - 1) / 2]);
    } else if (v > sw__kt_by(&out[0], by)) {
      out[0] = key;
      sw__kt_sift_down(out, size, 0, by);
    }
  }
  if (active) *active = busy;
  /* most first: the minimum goes to the last free place */
  for (uint32_t left = size; left > 1; left--) {
    sw__kt_swap(&out[0], &out[left - 1]);
    sw__kt_sift_down(out, left - 1, 0, by);
  }
  return (int)size;
}
