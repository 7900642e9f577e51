/* SPDX-License-Identifier: Apache-2.0 */
/* A keyed table's keys and their places: hashing a key, finding it without
 * a lock, idle keys, the bucket locks and the repair of a dead locker's
 * buckets, and inserts that take an empty place, reclaim an idle key's or
 * evict the least recently active (layout and protocol: keyed.h). */
#include <string.h>

#include "keyed.h"

/* ------------------------------------------------------------------ hash */

/* A seeded multiply-mix hash of words (the seed is random per table, so
 * keys cannot be chosen to collide without knowing it). */
static uint64_t sw__kt_hash(uint64_t seed, const uint64_t *w, uint32_t nwords, uint64_t len) {
  uint64_t h = seed ^ sw__mum(len ^ SW__P0, seed ^ SW__P1);
  uint32_t i = 0;
  for (; i + 1 < nwords; i += 2) h = sw__mum(w[i] ^ h ^ SW__P0, w[i + 1] ^ seed ^ SW__P1);
  if (i < nwords) h = sw__mum(w[i] ^ h ^ SW__P0, seed ^ SW__P2);
  return sw__mum(h ^ SW__P2, len ^ SW__P1);
}

/* The same over bytes of any length (digests of long keys). */
static uint64_t sw__kt_hash_bytes(uint64_t seed, const unsigned char *p, size_t len) {
  uint64_t h = seed ^ sw__mum((uint64_t)len ^ SW__P0, seed ^ SW__P1);
  uint64_t w[2];
  for (size_t off = 0; off < len; off += 16) {
    size_t take = len - off < 16 ? len - off : 16;
    w[0] = w[1] = 0;
    memcpy(w, p + off, take);
    h = sw__mum(w[0] ^ h ^ SW__P0, w[1] ^ seed ^ SW__P1);
  }
  return sw__mum(h ^ SW__P2, (uint64_t)len ^ SW__P1);
}

int sw__kt_prepare(const sw_keyed *k, const void *key, size_t len, sw__kt_key *q) {
  if (sw__unlikely(key == NULL)) return sw__fail(SW_ENULL, "key is NULL");
  if (sw__unlikely(len == 0 || len > 65535))
    return sw__fail(SW_ERANGE, "key of %zu bytes: keys take 1..65535 bytes", len);
  const uint64_t *seed = k->hdr->seed;
  const unsigned char *p = key;
  uint64_t lenfield = len;
  if (sw__likely(len <= 16)) {
    sw__kt_prepare_short(k, p, len, q);
    sw__kt_place_second(k, q);
    return SW_OK;
  }
  if (len <= (size_t)k->key_words * 8) {
    q->nwords = (uint32_t)((len + 7) / 8);
    q->w[q->nwords - 1] = 0;
    memcpy(q->w, key, len);
    q->hash = sw__kt_hash(seed[0], q->w, q->nwords, len);
  } else { /* longer than a slot holds: its 128-bit digest stands for it */
    q->w[0] = sw__kt_hash_bytes(seed[0], key, len);
    q->w[1] = sw__kt_hash_bytes(seed[1], key, len);
    q->nwords = 2;
    q->hash = q->w[0];
    lenfield = 0;
  }
  sw__kt_place(k, lenfield, q);
  sw__kt_place_second(k, q);
  return SW_OK;
}

/* ---------------------------------------------------------------- lookup */

int sw__kt_find(const sw_keyed *k, const sw__kt_key *q, sw__kt_ref *ref) {
  for (int j = 0; j < 2; j++) {
    if (j == 1 && q->b[1] == q->b[0]) break;
    int64_t idx = sw__kt_in_bucket(k, q, q->b[j], &ref->meta);
    if (idx >= 0) {
      ref->idx = (uint32_t)idx;
      return 1;
    }
  }
  return 0;
}

/* ------------------------------------------------------------- idle keys */

/* The 31-bit distance from window lo to the window of wid (the later one). */
static inline uint64_t sw__kt_behind(int64_t wid, uint64_t lo) {
  return ((uint64_t)wid - sw__kt_wid(lo)) & SW__KT_WID_MASK;
}

/* A window word holds nothing at wid: its window is out of the interval
 * and not ahead of it (a newer window means the caller's time is behind). */
static inline bool sw__kt_window_idle(const sw_keyed *k, uint64_t lo, int64_t wid) {
  uint64_t ahead = (sw__kt_wid(lo) - (uint64_t)wid) & SW__KT_WID_MASK;
  return sw__kt_count(lo) == 0 ||
         (sw__kt_behind(wid, lo) >= k->windows && (ahead == 0 || ahead > SW__KT_HALF));
}

/* An aux word holds nothing at t: nothing in flight; pacing drained (its
 * last admission not after t). */
static inline bool sw__kt_aux_idle(const sw_keyed *k, uint64_t lo, int64_t t) {
  if (lo == 0) return true;
  if (k->kind == SW__KT_CONCURRENCY) return false;
  return (int64_t)lo <= t * SW__KT_TICKS_PER_MS;
}

/* Whether state word i of a slot (aux, windows) holds something at t. */
static inline bool sw__kt_holds(const sw_keyed *k, uint32_t i, uint64_t lo, int64_t t) {
  if (i == 0 && k->kind != SW__KT_REJECT) return !sw__kt_aux_idle(k, lo, t);
  return !sw__kt_window_idle(k, lo, sw__kt_wid_of(k, t));
}

bool sw__kt_idle(const sw_keyed *k, uint32_t idx, uint32_t gen, int64_t t) {
  sw__kt_w *w = sw__kt_state_of(k, idx);
  for (uint32_t i = 0; i < sw__kt_nstate(k); i++)
    if (sw__kt_hgen(sw__kt_hi_of(&w[i])) != gen || sw__kt_holds(k, i, sw__kt_lo_of(&w[i]), t))
      return false;
  return true;
}

/* How long ago the slot was last active (in windows; larger is older). A
 * window after wid (the caller's time is behind) is as recent as can be. */
static uint64_t sw__kt_age(const sw_keyed *k, uint32_t idx, int64_t wid) {
  uint64_t age = SW__KT_WID_MASK;
  sw__kt_w *win = sw__kt_win(k, idx);
  for (uint32_t i = 0; i < k->windows; i++) {
    uint64_t lo = sw__kt_lo_of(&win[i]), b = sw__kt_behind(wid, lo);
    if (sw__kt_count(lo) > 0 && (b > SW__KT_HALF ? 0 : b) < age) age = b > SW__KT_HALF ? 0 : b;
  }
  return age;
}

/* ----------------------------------------------------------------- locks */

typedef struct sw__kt_repair_arg {
  sw_keyed *k;
  uint32_t lock;
} sw__kt_repair_arg;

/* Set word w to (lo, hi) under the slot's lock (nobody else changes a word
 * of another generation than its slot's meta; entries of its own may). */
static void sw__kt_put(sw__kt_w *w, uint64_t lo, uint64_t hi) {
  uint64_t l = sw__kt_lo_of(w), h = sw__kt_hi_of(w);
  while (!sw__kt_cas(w, &l, &h, lo, hi)) {
  }
}

/* Modes of sw__kt_move_words. */
enum { SW__KT_MOVE_IDLE, SW__KT_MOVE_EVICT };

/* Move every state word of slot idx from gen to gen + 1, emptied, one CAS
 * each. IDLE: only if each holds nothing at t; EVICT: whatever the windows
 * hold, but never a request in flight. If a word refuses, the words moved
 * so far go back (emptied: they held nothing, or their key was being
 * evicted) and false is returned. */
static bool sw__kt_move_words(sw_keyed *k, uint32_t idx, uint32_t gen, int64_t t, int mode) {
  const uint32_t nw = sw__kt_nstate(k);
  sw__kt_w *w = sw__kt_state_of(k, idx);
  for (uint32_t i = 0; i < nw; i++) {
    uint64_t lo = sw__kt_lo_of(&w[i]), hi = sw__kt_hi_of(&w[i]);
    for (;;) {
      const bool aux = i == 0 && k->kind != SW__KT_REJECT;
      if (sw__kt_hgen(hi) != gen || (mode == SW__KT_MOVE_IDLE && sw__kt_holds(k, i, lo, t)) ||
          (mode == SW__KT_MOVE_EVICT && aux && k->kind == SW__KT_CONCURRENCY && lo != 0)) {
        for (uint32_t j = 0; j < i; j++) sw__kt_put(&w[j], 0, sw__kt_hi(gen, 0));
        return false;
      }
      if (sw__kt_cas(&w[i], &lo, &hi, 0, sw__kt_hi(gen + 1, 0))) break;
    }
    SW__KILL_POINT("keyed-move");
  }
  return true;
}

/* Set slot idx's tag byte (0: the slot is EMPTY), under its bucket's lock:
 * nobody else writes that bucket's tags. */
static void sw__kt_set_tag(sw_keyed *k, uint32_t idx, uint64_t tag) {
  _Atomic uint64_t *tw = &k->tags[idx / 8];
  const unsigned shift = (idx % 8) * 8;
  uint64_t tags = atomic_load_explicit(tw, memory_order_relaxed);
  tags = (tags & ~(UINT64_C(0xff) << shift)) | ((tag & 0xff) << shift);
  atomic_store_explicit(tw, tags, memory_order_relaxed);
}

/* The tag byte a READY slot's key has (from its stored words). */
static uint64_t sw__kt_tag_of(const sw_keyed *k, uint32_t idx, uint64_t meta) {
  const uint32_t len = sw__kt_mlen(meta);
  uint64_t words[SW__KT_MAX_KEY / 8];
  _Atomic uint64_t *kw = sw__kt_key_of(k, idx);
  for (uint32_t i = 0; i < k->key_words; i++) words[i] = atomic_load(&kw[i]);
  sw__kt_key q;
  if (len == 0) { /* a digest: its first word is the hash */
    q.hash = words[0];
    sw__kt_place(k, 0, &q);
  } else if (sw__kt_prepare(k, words, len <= k->key_words * 8 ? len : k->key_words * 8, &q) < 0) {
    return 1;
  }
  return q.tags & 0xff;
}

/* Empty a slot that holds no valid key (under its lock): its words to
 * gen + 1 (late entries of its generation then fail), EMPTY(gen + 1). */
static void sw__kt_empty_slot(sw_keyed *k, uint32_t idx, uint32_t gen) {
  sw__kt_w *w = sw__kt_state_of(k, idx);
  for (uint32_t i = 0; i < sw__kt_nstate(k); i++) sw__kt_put(&w[i], 0, sw__kt_hi(gen + 1, 0));
  atomic_store(sw__kt_meta_of(k, idx), sw__kt_meta(SW__KT_EMPTY, gen + 1, 0));
  sw__kt_set_tag(k, idx, 0);
}

/* Bring bucket b back to a state its locker can trust (under its lock):
 * a key half written goes back to EMPTY; words half moved to the next
 * generation are completed (the key was idle or evicted: nothing of it is
 * kept) or, if the move had not reached them all, rolled back; damaged
 * bytes (a meta of no state, a READY key's word of another generation, a
 * tag that disagrees with its slot) are mended. Returns the keys of b. */
static int64_t sw__kt_mend_bucket(sw_keyed *k, uint32_t b) {
  const uint32_t nw = sw__kt_nstate(k);
  int64_t keys = 0;
  for (uint32_t idx = b * SW__KT_WAYS; idx < (b + 1) * SW__KT_WAYS; idx++) {
    uint64_t m = atomic_load(sw__kt_meta_of(k, idx));
    const uint32_t gen = sw__kt_mgen(m), st = sw__kt_state(m);
    sw__kt_w *w = sw__kt_state_of(k, idx);
    if (st == SW__KT_BUSY || st > SW__KT_READY) { /* a dead inserter's, or damaged */
      sw__kt_empty_slot(k, idx, gen);
      continue;
    }
    if (st == SW__KT_EMPTY) {
      sw__kt_set_tag(k, idx, 0);
      continue;
    }
    uint32_t moved = 0, foreign = 0;
    for (uint32_t i = 0; i < nw; i++) {
      uint32_t g = sw__kt_hgen(sw__kt_hi_of(&w[i]));
      moved += g == gen + 1;
      foreign += g != gen && g != gen + 1;
    }
    if (moved == nw) { /* a giver died after moving every word: the key is gone */
      sw__kt_empty_slot(k, idx, gen);
      continue;
    }
    if (moved || foreign)
      for (uint32_t i = 0; i < nw; i++)
        if (sw__kt_hgen(sw__kt_hi_of(&w[i])) != gen) sw__kt_put(&w[i], 0, sw__kt_hi(gen, 0));
    if (sw__kt_mlen(m) > k->key_words * 8) { /* a length no key has: damaged */
      sw__kt_empty_slot(k, idx, gen);
      continue;
    }
    uint64_t tag = sw__kt_tag_of(k, idx, m);
    uint64_t have = atomic_load(&k->tags[idx / 8]) >> (idx % 8 * 8) & 0xff;
    if (have != tag) sw__kt_set_tag(k, idx, tag);
    keys++;
  }
  return keys;
}

/* Repair the buckets of a lock whose holder died, and count their keys. */
static void sw__kt_repair(void *arg) {
  const sw__kt_repair_arg *a = arg;
  sw_keyed *k = a->k;
  int64_t keys = 0;
  for (uint32_t b = a->lock; b < k->nbuckets; b += k->nlocks) {
    keys += sw__kt_mend_bucket(k, b);
    SW__KILL_POINT("keyed-repair"); /* a repairer that dies: the next locker repairs again */
  }
  atomic_store(&k->locks[a->lock].keys, keys);
}

/* Take the locks of q's two buckets, in order. */
static int sw__kt_lock(sw_keyed *k, const sw__kt_key *q, uint32_t lk[2]) {
  const uint32_t nl = k->nlocks;
  lk[0] = q->b[0] % nl;
  lk[1] = q->b[1] % nl;
  if (lk[1] < lk[0]) {
    uint32_t x = lk[0];
    lk[0] = lk[1];
    lk[1] = x;
  }
  for (int i = 0; i < 2; i++) {
    if (i == 1 && lk[1] == lk[0]) break;
    sw__kt_repair_arg arg = {k, lk[i]};
    int rc = sw__robust_lock(&k->locks[lk[i]].m, sw__kt_repair, &arg, "keyed table bucket",
                             SW__WRITE_LOCK_MS);
    if (rc < 0) {
      if (i == 1) pthread_mutex_unlock(&k->locks[lk[0]].m);
      return rc;
    }
  }
  return SW_OK;
}

static void sw__kt_unlock(sw_keyed *k, const uint32_t lk[2]) {
  if (lk[1] != lk[0]) pthread_mutex_unlock(&k->locks[lk[1]].m);
  pthread_mutex_unlock(&k->locks[lk[0]].m);
}

int sw__kt_settle(sw_keyed *k, const sw__kt_key *q, int heal) {
  uint32_t lk[2];
  sw__kt_ref ref;
  int rc = sw__kt_lock(k, q, lk);
  if (rc < 0) return rc;
  if (heal && !k->readonly && sw__kt_find(k, q, &ref)) {
    const uint32_t gen = sw__kt_mgen(ref.meta);
    sw__kt_w *w = sw__kt_state_of(k, ref.idx);
    for (uint32_t i = 0; i < sw__kt_nstate(k); i++)
      if (heal > 1 || sw__kt_hgen(sw__kt_hi_of(&w[i])) != gen) sw__kt_put(&w[i], 0, sw__kt_hi(gen, 0));
  }
  sw__kt_unlock(k, lk);
  return SW_OK;
}

void sw__kt_mend_dead(sw_keyed *k) {
  if (k->readonly) return;
  for (uint32_t i = 0; i < k->nlocks; i++) {
    sw__kt_repair_arg arg = {k, i};
    /* no wait: a lock held by a live process is left to it */
    if (sw__robust_lock(&k->locks[i].m, sw__kt_repair, &arg, "keyed table bucket", 0) == SW_OK)
      pthread_mutex_unlock(&k->locks[i].m);
  }
}

int sw__kt_damaged(const sw_keyed *k, uint32_t idx, const char *what) {
  return sw__fail(SW_ECORRUPT, "keyed table %s: slot %u (bucket %u) %s: its bytes are damaged",
                  k->name ? k->name : "(heap)", idx, idx / SW__KT_WAYS, what);
}

/* ---------------------------------------------------------------- insert */

/* Write q into slot idx, its state words already at gen and empty (under
 * the lock): BUSY, the key, its tag, then READY. A reject table's key
 * starts with the older windows of t's interval sealed, as its first
 * admission would seal them, and with *adm (a first admission) counted:
 * no entry can see the words before READY. */
static void sw__kt_fill(sw_keyed *k, uint32_t idx, uint32_t gen, const sw__kt_key *q, int64_t t,
                        const sw__kt_first *adm) {
  _Atomic uint64_t *meta = sw__kt_meta_of(k, idx);
  atomic_store_explicit(meta, sw__kt_meta(SW__KT_BUSY, gen, 0), memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  SW__KILL_POINT("keyed-busy");
  _Atomic uint64_t *w = sw__kt_key_of(k, idx);
  for (uint32_t i = 0; i < k->key_words; i++) {
    atomic_store_explicit(&w[i], i < q->nwords ? q->w[i] : 0, memory_order_relaxed);
    if (i == 0) SW__KILL_POINT("keyed-fill");
  }
  if (k->kind == SW__KT_REJECT) {
    const uint32_t nw = k->windows;
    const int64_t wid = sw__kt_wid_of(k, t);
    sw__kt_w *win = sw__kt_win(k, idx);
    for (uint32_t back = 1; back < nw && (int64_t)back <= wid; back++) /* none before 0 */
      atomic_store_explicit(&win[(uint64_t)(wid - back) % nw].lo,
                            sw__kt_lo(wid - (int64_t)back, 0) | SW__KT_SEAL, memory_order_relaxed);
    SW__KILL_POINT("keyed-sealed");
  }
  if (adm) {
    atomic_store_explicit(&sw__kt_win(k, idx)[(uint64_t)adm->wid % k->windows].lo,
                          sw__kt_lo(adm->wid, adm->n), memory_order_relaxed);
    if (adm->aux) atomic_store_explicit(&sw__kt_aux(k, idx)->lo, adm->aux, memory_order_relaxed);
    SW__KILL_POINT("keyed-first");
  }
  sw__kt_set_tag(k, idx, q->tags);
  SW__KILL_POINT("keyed-tag");
  atomic_store_explicit(meta, sw__kt_meta(SW__KT_READY, gen, q->low), memory_order_release);
  SW__KILL_POINT("keyed-ready");
}

/* How many slots of bucket b are EMPTY, and the first (*first): those with
 * a zero tag byte (the tags of a bucket whose lock is held say exactly
 * which slots are EMPTY). */
static inline int64_t sw__kt_empties(const sw_keyed *k, uint32_t b, int64_t *first) {
  const uint64_t low7 = UINT64_C(0x7f7f7f7f7f7f7f7f), ones = UINT64_C(0x0101010101010101);
  int64_t count = 0;
  *first = -1;
  for (uint32_t half = 0; half < 2; half++) {
    uint64_t x = atomic_load_explicit(&k->tags[b * 2 + half], memory_order_relaxed);
    uint64_t zero = ~(((x & low7) + low7) | x | low7); /* 0x80 in each zero byte, exactly */
    if (zero && *first < 0) *first = b * SW__KT_WAYS + half * 8 + __builtin_ctzll(zero) / 8;
    count += (int64_t)(((zero >> 7) * ones) >> 56);
  }
  return count;
}

/* The lock that counts the keys of slot idx. */
static inline sw__kt_stripe *sw__kt_lock_of(const sw_keyed *k, uint32_t idx) {
  return &k->locks[idx / SW__KT_WAYS % k->nlocks];
}

/* Damage seen in q's buckets under their locks: mend their stripes (and
 * count their keys again); -2 tells the inserter to look again. */
static int sw__kt_mend_locked(sw_keyed *k, const sw__kt_key *q) {
  for (int i = 0; i < 2; i++) {
    sw__kt_repair_arg arg = {k, q->b[i] % k->nlocks};
    if (i == 0 || arg.lock != q->b[0] % k->nlocks) sw__kt_repair(&arg);
  }
  return -2;
}

/* Insert under the locks (sw__kt_insert): 1 inserted, 2 found (another
 * inserted it meanwhile), 0 refused, -2 damage mended (look again). */
static int sw__kt_insert_locked(sw_keyed *k, int64_t t, const sw__kt_key *q, sw__kt_ref *ref,
                                const sw__kt_first *adm) {
  if (sw__kt_find(k, q, ref)) return 2;
  /* Two choices, as the key was placed: an empty slot of the emptier
   * bucket; else an idle key's slot in the bucket with more idle keys; else
   * the key active least recently (an eviction, if the policy allows). */
  const int nb = q->b[1] == q->b[0] ? 1 : 2;
  int64_t first[2] = {-1, -1}, count[2] = {0, 0};
  for (int j = 0; j < nb; j++) count[j] = sw__kt_empties(k, q->b[j], &first[j]);
  int j = count[1] > count[0];
  if (count[j] > 0) {
    const uint32_t idx = (uint32_t)first[j];
    uint64_t m = atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_relaxed);
    if (sw__unlikely(sw__kt_state(m) != SW__KT_EMPTY)) /* a damaged tag */
      return sw__kt_mend_locked(k, q);
    sw__kt_fill(k, idx, sw__kt_mgen(m), q, t, adm);
    atomic_fetch_add_explicit(&sw__kt_lock_of(k, idx)->keys, 1, memory_order_relaxed);
    *ref = (sw__kt_ref){idx, atomic_load(sw__kt_meta_of(k, idx))};
    return 1;
  }
  for (int pass = 0; pass < 2; pass++) { /* 0: idle keys; 1: eviction */
    if (pass == 1 && k->hdr->cfg.on_full != SW_FULL_EVICT) break;
    const int64_t wid = sw__kt_wid_of(k, t);
    uint64_t oldest = 0;
    first[0] = first[1] = -1;
    count[0] = count[1] = 0;
    for (j = 0; j < nb; j++)
      for (uint32_t idx = q->b[j] * SW__KT_WAYS; idx < (q->b[j] + 1) * SW__KT_WAYS; idx++) {
        uint64_t m = atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_acquire);
        if (sw__unlikely(sw__kt_state(m) > SW__KT_READY ||
                         (sw__kt_state(m) == SW__KT_READY && sw__kt_mlen(m) > k->key_words * 8)))
          return sw__kt_mend_locked(k, q); /* a damaged meta: its place given back */
        if (sw__kt_state(m) != SW__KT_READY) continue;
        if (pass == 0) {
          if (!sw__kt_idle(k, idx, sw__kt_mgen(m), t)) continue;
          if (first[j] < 0) first[j] = idx;
          count[j]++;
        } else if (k->kind != SW__KT_CONCURRENCY || sw__kt_lo_of(sw__kt_aux(k, idx)) == 0) {
          /* the least recently active key with nothing in flight (checked
           * again by the move's CAS) */
          uint64_t age = sw__kt_age(k, idx, wid);
          if (first[0] < 0 || age > oldest) {
            first[0] = idx;
            oldest = age;
          }
        }
      }
    j = pass == 0 && count[1] > count[0];
    if (first[j] < 0) continue;
    const uint32_t idx = (uint32_t)first[j], gen = sw__kt_mgen(atomic_load(sw__kt_meta_of(k, idx)));
    SW__KILL_POINT(pass == 0 ? "keyed-reclaim" : "keyed-evict"); /* chosen, not yet moved */
    if (!sw__kt_move_words(k, idx, gen, t, pass == 0 ? SW__KT_MOVE_IDLE : SW__KT_MOVE_EVICT))
      continue; /* came back to life, or a request went in flight */
    SW__KILL_POINT("keyed-moved");
    sw__kt_fill(k, idx, gen + 1, q, t, adm);
    atomic_fetch_add_explicit(pass == 0 ? &k->hdr->reclaimed : &k->hdr->evicted, 1,
                              memory_order_relaxed);
    *ref = (sw__kt_ref){idx, atomic_load(sw__kt_meta_of(k, idx))};
    return 1;
  }
  return 0;
}

/* The common insert, under the lock of q's first bucket only: into that
 * bucket, which is at most half full, or has at least the second's room
 * (the choice of sw__kt_insert_locked: the two choices keep the buckets
 * even as they fill up). Every insert of a key holds its first bucket's
 * lock (so no other process inserts the same key meanwhile), and every
 * write into a bucket's slots holds that bucket's lock. As sw__kt_insert;
 * -3: not done (the bucket had no room after all, or a damaged tag). */
static int sw__kt_insert_roomy(sw_keyed *k, int64_t t, const sw__kt_key *q, sw__kt_ref *ref,
                               const sw__kt_first *adm, int64_t idx) {
  const uint32_t lock = q->b[0] % k->nlocks;
  sw__kt_repair_arg arg = {k, lock};
  int rc = sw__robust_lock(&k->locks[lock].m, sw__kt_repair, &arg, "keyed table bucket",
                           SW__WRITE_LOCK_MS);
  if (rc < 0) return rc;
  if (sw__kt_find(k, q, ref)) {
    rc = 1;
  } else if ((atomic_load_explicit(&k->tags[idx / 8], memory_order_relaxed) >> (idx % 8 * 8) &
              0xff) &&
             sw__kt_empties(k, q->b[0], &idx) == 0) { /* idx, empty when seen, taken since */
    rc = -3;
  } else {
    uint64_t m = atomic_load_explicit(sw__kt_meta_of(k, (uint32_t)idx), memory_order_relaxed);
    if (sw__unlikely(sw__kt_state(m) != SW__KT_EMPTY)) { /* a damaged tag: mended under both */
      rc = -3;
    } else {
      sw__kt_fill(k, (uint32_t)idx, sw__kt_mgen(m), q, t, adm);
      atomic_fetch_add_explicit(&k->locks[lock].keys, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&k->hdr->inserted, 1, memory_order_relaxed);
      *ref = (sw__kt_ref){(uint32_t)idx, atomic_load(sw__kt_meta_of(k, (uint32_t)idx))};
      rc = adm ? 2 : 1;
    }
  }
  pthread_mutex_unlock(&k->locks[lock].m);
  return rc;
}

int sw__kt_insert(sw_keyed *k, int64_t t, const sw__kt_key *q, sw__kt_ref *ref,
                  const sw__kt_first *adm) {
  if (k->readonly) return sw__fail(SW_EPERM, "attached read-only: no new keys");
  int64_t idx, other, room = sw__kt_empties(k, q->b[0], &idx); /* without the locks: a hint */
  int rc;
  if (room > 0 &&
      (room >= SW__KT_WAYS / 2 || q->b[1] == q->b[0] ||
       room >= sw__kt_empties(k, q->b[1], &other)) &&
      (rc = sw__kt_insert_roomy(k, t, q, ref, adm, idx)) != -3)
    return rc;
  uint32_t lk[2];
  rc = sw__kt_lock(k, q, lk);
  if (rc < 0) return rc;
  rc = sw__kt_insert_locked(k, t, q, ref, adm);
  if (rc == -2) rc = sw__kt_insert_locked(k, t, q, ref, adm); /* its buckets mended */
  if (rc == 1) atomic_fetch_add_explicit(&k->hdr->inserted, 1, memory_order_relaxed);
  sw__kt_unlock(k, lk);
  if (rc == -2) return sw__kt_damaged(k, q->b[0] * SW__KT_WAYS, "tags disagree with the keys");
  return rc == 2 ? 1 : rc == 1 && adm ? 2 : rc;
}
