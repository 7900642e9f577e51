/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a keyed table: its totals, one key, every key (streaming) and
 * the top keys — without a lock, in bounded memory (keyed.h). */
#include <string.h>

#include "keyed.h"

static inline uint64_t sw__kt_behind(uint64_t wid, uint64_t lo) {
  return (wid - sw__kt_wid(lo)) & SW__KT_WID_MASK;
}

int64_t sw__kt_interval_pass(const sw_keyed *k, uint32_t idx, uint32_t gen, int64_t t,
                             int64_t *block) {
  const uint64_t wid = (uint64_t)(t / k->wl);
  sw__kt_w *win = sw__kt_win(k, idx);
  int64_t pass = 0, blocks = 0;
  for (uint32_t i = 0; i < k->windows; i++) {
    uint64_t lo = sw__kt_lo_of(&win[i]), hi = sw__kt_hi_of(&win[i]);
    if (sw__kt_hgen(hi) != gen) return -1;
    if (sw__kt_behind(wid, lo) < k->windows) { /* in the interval (not ahead of it) */
      pass += sw__kt_count(lo);
      blocks += sw__kt_block(hi);
    }
  }
  if (block) *block = blocks;
  return pass;
}

/* Read slot idx at t into out: true if it holds a key (read consistently:
 * its meta unchanged across the read; a length no key has is damage, not
 * a key). */
static bool sw__kt_read(const sw_keyed *k, uint32_t idx, int64_t t, sw_keyed_key *out) {
  const uint64_t wid = (uint64_t)(t / k->wl);
  for (int tries = 0; tries < 4; tries++) {
    uint64_t m = atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_acquire);
    if (sw__kt_state(m) != SW__KT_READY || sw__kt_mlen(m) > k->key_words * 8) return false;
    const uint32_t gen = sw__kt_mgen(m);
    memset(out, 0, sizeof *out);
    out->len = sw__kt_mlen(m);
    uint64_t words[SW__KT_MAX_KEY / 8];
    _Atomic uint64_t *kw = sw__kt_key_of(k, idx);
    for (uint32_t i = 0; i < k->key_words; i++)
      words[i] = atomic_load_explicit(&kw[i], memory_order_relaxed);
    memcpy(out->key, words, out->len ? out->len : 16);
    out->pass = sw__kt_interval_pass(k, idx, gen, t, &out->block);
    uint64_t a = 0, ah = sw__kt_hi(gen, 0);
    if (k->kind != SW__KT_REJECT) {
      a = sw__kt_lo_of(sw__kt_aux(k, idx));
      ah = sw__kt_hi_of(sw__kt_aux(k, idx));
    }
    out->in_flight = k->kind == SW__KT_CONCURRENCY && a <= INT64_MAX ? (int64_t)a : 0;
    out->last_ms = -1;
    uint64_t recent = SW__KT_WID_MASK;
    for (uint32_t i = 0; i < k->windows; i++) {
      uint64_t lo = sw__kt_lo_of(&sw__kt_win(k, idx)[i]);
      if (sw__kt_count(lo) > 0 && sw__kt_behind(wid, lo) < recent) recent = sw__kt_behind(wid, lo);
    }
    if (recent < SW__KT_WID_MASK && (int64_t)recent <= (int64_t)wid)
      out->last_ms = ((int64_t)wid - (int64_t)recent) * k->wl;
    atomic_thread_fence(memory_order_acquire);
    if (out->pass >= 0 && atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_relaxed) == m &&
        sw__kt_hgen(ah) == gen)
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
  /* a process killed inside an insert left its stripe's key count stale:
   * repaired here rather than at the stripe's next insert (a table shared
   * read-only cannot: its count is exact again at that insert) */
  sw__kt_mend_dead((sw_keyed *)k);
  out->capacity = h->cfg.capacity;
  out->slots = h->nbuckets * SW__KT_WAYS;
  out->key_bytes = h->cfg.key_bytes;
  out->windows = h->cfg.windows;
  out->interval_ms = h->cfg.interval_ms;
  out->bytes = (int64_t)h->total_size;
  out->bytes_per_key = (int64_t)h->slot_size + 1; /* and its tag byte */
  /* sums wrap rather than overflow (damaged counters are only wrong) */
  uint64_t keys = 0, sum[7] = {0};
  for (uint32_t i = 0; i < k->nlocks; i++) keys += (uint64_t)atomic_load(&k->locks[i].keys);
  out->keys = (int64_t)keys;
  out->inserted = atomic_load(&h->inserted);
  out->reclaimed = atomic_load(&h->reclaimed);
  out->evicted = atomic_load(&h->evicted);
  out->on_full = h->cfg.on_full;
  for (uint32_t i = 0; i < SW__KT_TOTAL_STRIPES; i++) {
    const sw__kt_totals *s = &h->totals[i];
    sum[0] += (uint64_t)atomic_load_explicit(&s->refused, memory_order_relaxed);
    sum[1] += (uint64_t)atomic_load_explicit(&s->pass, memory_order_relaxed);
    sum[2] += (uint64_t)atomic_load_explicit(&s->block, memory_order_relaxed);
    sum[3] += (uint64_t)atomic_load_explicit(&s->would_block, memory_order_relaxed);
    sum[4] += (uint64_t)atomic_load_explicit(&s->success, memory_order_relaxed);
    sum[5] += (uint64_t)atomic_load_explicit(&s->exception, memory_order_relaxed);
    sum[6] += (uint64_t)atomic_load_explicit(&s->rt, memory_order_relaxed);
  }
  out->refused = (int64_t)sum[0];
  out->pass = (int64_t)sum[1];
  out->block = (int64_t)sum[2];
  out->would_block = (int64_t)sum[3];
  out->success = (int64_t)sum[4];
  out->exception = (int64_t)sum[5];
  out->rt = (int64_t)sum[6];
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
