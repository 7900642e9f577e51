/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of a keyed table: one rule, any number of keys, a few
 * dozen bytes per key, in one position-independent block (heap or shared
 * segment).
 *
 *   header (geometry, seeds, rule box, striped totals)
 *   locks[nlocks]            robust mutexes, one per stripe of buckets, each with
 *                            the number of keys in its buckets
 *   tags[nbuckets][16]       one byte of each slot's key hash (0: none), 16 bytes a bucket
 *   slots[nbuckets * 16]     meta | key words | (pad) | aux (pacing, concurrency) | windows[n]
 *
 * A key hashes (seeded) to two buckets of 16 slots; it lives in one slot of
 * either, placed in the emptier one: a table of capacity keys has capacity
 * / 0.8 slots, and at 80% two choices of 16 find a free slot (a million
 * random keys: none failed in simulation; at 85%, one in a million). A
 * lookup matches the key's tag against its bucket's 16 tags at once (two
 * words, no lock), then checks the candidate slot's meta and key: one line
 * of tags and one slot. Tags are hints: written (under the bucket's lock)
 * before a slot is published, never trusted without the meta.
 *
 * meta (8 bytes): state:2 | gen:32 | (READY) len:8 | fragment:22 of the key's hash.
 *   EMPTY(gen): free, its state words at gen; the initial all-zero word.
 *   BUSY(gen):  an inserter is writing the key (under the bucket's lock).
 *   READY(gen): the key is valid. len 0: the key is a 16-byte digest of a
 *               key longer than the slot holds.
 *
 * A key's state is a few state words of 16 bytes, each changed only by a
 * 16-byte CAS (cmpxchg16b; libsw is built with -mcx16 on x86-64), each
 * carrying in its high half the slot's full 32-bit generation:
 *   window  lo: seal:1 | wid:31 | count:32    hi: gen:32 | block:32
 *   aux     lo: value:64                       hi: gen:32 | 0:32
 * A window word holds a window's number, its passes and its blocks, so
 * resetting a window and counting in it is one CAS; the seal bit makes
 * strict admissions linearizable across window boundaries (as in metric.c).
 * aux: pacing, the last admission (1/16 us of the clock); concurrency, the
 * requests in flight.
 *
 * Entries take no lock: find the key's slot (meta, then key words), then
 * CAS its state words, each CAS requiring the word's generation to be the
 * one the meta had when the key was found (the found meta's generation is
 * the expected high half). Every insert of a key holds the lock of its
 * first bucket (so one key is never inserted twice), and every write into
 * a bucket's slots (an insert, a reclaim, an eviction) that bucket's lock:
 * an insert into a roomy first bucket takes its lock only, the others
 * both. A new key's first admission is counted in its words before it is
 * READY. Giving a slot to another key first moves every state word to
 * gen + 1 by CAS — an entry that counted in between makes that CAS fail,
 * and an idle key found active again is kept — and only then changes the
 * meta: no count ever lands in another key's state. Generations have 32
 * bits: an entry stopped
 * between finding its key and its CAS (a debugger, SIGSTOP, a swapped-out
 * machine) fails that CAS unless its place changed hands an exact multiple
 * of 2^32 times meanwhile (a place taken over a million times a second
 * would need 71 minutes of it, and 4 billion takeovers).
 *
 * Every step of a change of hands is a kill point (SW_TEST_KILL_AT):
 *   keyed-reclaim, keyed-evict   an idle / the least recent key chosen
 *   keyed-move:i    the i-th state word moved to gen + 1
 *   keyed-moved     every word moved, the meta not yet changed
 *   keyed-busy      meta BUSY(gen + 1) (or BUSY(gen) for an empty slot)
 *   keyed-fill      the first key word written
 *   keyed-sealed    a reject key's older windows sealed
 *   keyed-first     a new key's first admission counted in its words
 *   keyed-tag       its tag written
 *   keyed-ready     meta READY: the key is in, its lock's key count not yet
 *   keyed-repair    a bucket of a dead locker's stripe mended, the others not yet
 * and an entry stops at keyed-cas (each path) with its words read and its
 * CAS not yet made; a cancel at keyed-cancel,
 * between its give-backs (each one CAS). A process killed inside a lock leaves a BUSY slot, words at gen + 1, or a
 * stale key count; the next locker (EOWNERDEAD) repairs the lock's buckets
 * (sw__kt_repair) and counts their keys again. Shared bytes are untrusted:
 * every loop over a shared word is bounded, a slot whose words never
 * settle is healed under its lock (its counts are lost, its key kept), and
 * after that SW_ECORRUPT names the table and the slot. */
#ifndef SW_KEYED_H
#define SW_KEYED_H

#include "../rule.h"

#define SW__KT_MAGIC 0x544b5753u /* "SWKT" */
#define SW__KT_LAYOUT_VERSION 2u
#define SW__KT_WAYS 16u
#define SW__KT_TOTAL_STRIPES 16u
#define SW__KT_MAX_LOCKS 1024u
#define SW__KT_MAX_KEY 128u   /* the largest SW_OPT_KEY_BYTES */
#define SW__KT_MAX_WINDOWS 64 /* the largest window count of a keyed rule */

/* meta */
#define SW__KT_EMPTY 0u
#define SW__KT_BUSY 1u
#define SW__KT_READY 2u
#define SW__KT_FRAG_BITS 22 /* READY: len:8 | fragment:22 below the generation */
#define SW__KT_META_GEN_SHIFT 30
#define SW__KT_META_GEN_MASK (UINT64_C(0xffffffff) << SW__KT_META_GEN_SHIFT)
#define sw__kt_state(m) ((uint32_t)((m) >> 62))
#define sw__kt_mgen(m) ((uint32_t)((m) >> SW__KT_META_GEN_SHIFT))
#define sw__kt_meta(state, gen, low)                                                  \
  (((uint64_t)(state) << 62) | ((uint64_t)(uint32_t)(gen) << SW__KT_META_GEN_SHIFT) | (low))
#define sw__kt_mlen(m) ((uint32_t)((m) >> SW__KT_FRAG_BITS) & 0xffu)

/* state words */
typedef struct sw__kt_w {
  _Atomic uint64_t lo, hi;
} __attribute__((aligned(16))) sw__kt_w;
#define SW__KT_COUNT_MAX INT64_C(0xffffffff)
#define SW__KT_WID_MASK ((UINT64_C(1) << 31) - 1)
#define SW__KT_SEAL (UINT64_C(1) << 63)
#define sw__kt_wid(lo) (((lo) >> 32) & SW__KT_WID_MASK)
#define sw__kt_count(lo) ((int64_t)((lo) & UINT64_C(0xffffffff)))
#define sw__kt_lo(wid, count) ((((uint64_t)(wid) & SW__KT_WID_MASK) << 32) | (uint64_t)(count))
#define sw__kt_hgen(hi) ((uint32_t)((hi) >> 32))
#define sw__kt_block(hi) ((int64_t)((hi) & UINT64_C(0xffffffff)))
#define sw__kt_hi(gen, block) (((uint64_t)(uint32_t)(gen) << 32) | (uint64_t)(block))
/* Window numbers compare on 31 bits: the times a table is given must lie
 * within 2^30 windows of each other (17 years of 500 ms windows). */
#define SW__KT_HALF (SW__KT_WID_MASK / 2)

/* ThreadSanitizer runs a 16-byte atomic under a lock of its own process,
 * which is no atomic at all against the other processes of a segment: in
 * its builds the instruction itself, its ordering told to TSan. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SW__KT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SW__KT_TSAN 1
#endif
#if defined(SW__KT_TSAN) && defined(__x86_64__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
static inline unsigned __int128 sw__kt_cas16(sw__kt_w *w, unsigned __int128 old,
                                             unsigned __int128 nw) {
  uint64_t lo = (uint64_t)old, hi = (uint64_t)(old >> 64);
  __tsan_release(w);
  __asm__ __volatile__("lock cmpxchg16b %0"
                       : "+m"(*(volatile unsigned __int128 *)(void *)w), "+a"(lo), "+d"(hi)
                       : "b"((uint64_t)nw), "c"((uint64_t)(nw >> 64))
                       : "memory", "cc");
  __tsan_acquire(w);
  return (unsigned __int128)hi << 64 | lo;
}
#else
static inline unsigned __int128 sw__kt_cas16(sw__kt_w *w, unsigned __int128 old,
                                             unsigned __int128 nw) {
  return __sync_val_compare_and_swap((unsigned __int128 *)(void *)w, old, nw);
}
#endif

/* The 16-byte CAS: true if *w held (*lo, *hi) and now holds (nlo, nhi);
 * otherwise (*lo, *hi) is what it held, read at once. A full barrier. */
static inline bool sw__kt_cas(sw__kt_w *w, uint64_t *lo, uint64_t *hi, uint64_t nlo,
                              uint64_t nhi) {
  const unsigned __int128 old = (unsigned __int128)*hi << 64 | *lo;
  const unsigned __int128 got = sw__kt_cas16(w, old, (unsigned __int128)nhi << 64 | nlo);
  if (sw__likely(got == old)) return true;
  *lo = (uint64_t)got;
  *hi = (uint64_t)(got >> 64);
  return false;
}
/* The same when the caller needs no fresh values on failure (one flag). */
static inline bool sw__kt_cas_once(sw__kt_w *w, uint64_t lo, uint64_t hi, uint64_t nlo,
                                   uint64_t nhi) {
  const unsigned __int128 old = (unsigned __int128)hi << 64 | lo,
                          nw = (unsigned __int128)nhi << 64 | nlo;
#if defined(SW__KT_TSAN) && defined(__x86_64__)
  return sw__kt_cas16(w, old, nw) == old;
#else
  return __sync_bool_compare_and_swap((unsigned __int128 *)(void *)w, old, nw);
#endif
}
static inline uint64_t sw__kt_lo_of(sw__kt_w *w) {
  return atomic_load_explicit(&w->lo, memory_order_relaxed);
}
static inline uint64_t sw__kt_hi_of(sw__kt_w *w) {
  return atomic_load_explicit(&w->hi, memory_order_relaxed);
}

/* A window word that stands for a window: it counted something, or it is
 * a sealed place-holder. Others (emptied, never used) are no window at all,
 * whatever their number says. */
static inline bool sw__kt_live(uint64_t lo) { return (lo & SW__KT_SEAL) || sw__kt_count(lo) > 0; }

/* What each key keeps, fixed by the rule the table was created with. */
enum { SW__KT_REJECT = 0, SW__KT_PACING = 1, SW__KT_CONCURRENCY = 2 };

/* The creation parameters (a shared segment's configuration). */
typedef struct sw__kt_config {
  uint32_t capacity;
  uint32_t key_bytes; /* stored per slot: a multiple of 8, >= 16 */
  uint32_t windows;
  uint32_t on_full; /* SW_FULL_* */
  int64_t interval_ms;
  sw__rule rule; /* the rule the table starts with */
} sw__kt_config;

/* Totals since creation, striped over cache lines. */
typedef struct sw__kt_totals {
  _Atomic int64_t pass, block, would_block, success, exception, rt, refused, orphan_exits;
} sw__kt_totals;

/* A lock of a stripe of buckets, and the keys (READY slots) of its buckets:
 * written under the lock, counted again by its repair. */
typedef struct sw__kt_stripe {
  pthread_mutex_t m;
  _Atomic int64_t keys;
} sw__kt_stripe;

typedef struct sw__kt_hdr {
  uint32_t magic, layout_version;
  sw__kt_config cfg;
  uint32_t nbuckets, nlocks, slot_size, kind;
  int64_t wl;          /* window length */
  uint64_t seed[2];    /* the hash's secret, random per table */
  uint64_t locks_off, tags_off, slots_off, total_size;
  sw__rule_box rule;
  pthread_mutex_t rule_lock;
  _Alignas(64) _Atomic int64_t inserted, reclaimed, evicted;
  _Alignas(64) sw__kt_totals totals[SW__KT_TOTAL_STRIPES];
} sw__kt_hdr;

struct sw_keyed {
  sw__kt_hdr *hdr;
  sw__kt_stripe *locks;
  _Atomic uint64_t *tags; /* two words (16 tag bytes) per bucket */
  unsigned char *slots;
  uint32_t nbuckets, nlocks, slot_size, key_words, windows, kind;
  uint32_t state_off;   /* the first state word's byte offset in a slot */
  uint32_t win_off;     /* the first window word's byte offset in a slot */
  bool unit_interval;   /* a 1 s interval: passes per second need no division */
  int64_t wl;
  double isec; /* the interval in seconds */
  bool readonly;
  bool heap;    /* the block is an anonymous mapping of ours */
  bool created; /* this open created the table */
  void *shm;    /* the segment (sw__shm), or NULL on the heap */
  char *name;
};

/* A key as looked for: its words as stored (zero-padded; a digest for a
 * key longer than the slot holds), its hash and its meta fields. */
typedef struct sw__kt_key {
  uint64_t w[SW__KT_MAX_KEY / 8];
  uint64_t hash;
  uint64_t low;       /* len:8 | fragment:42, as in a READY meta */
  uint64_t tags;      /* its tag byte in every byte (the SWAR pattern) */
  uint32_t b[2];      /* its two buckets (the second computed when needed) */
  uint32_t nwords;    /* words to compare */
} sw__kt_key;

/* A key's place: its slot, and the meta seen when it was found. */
typedef struct sw__kt_ref {
  uint32_t idx; /* slot index (bucket * 16 + way) */
  uint64_t meta;
} sw__kt_ref;

/* A slot: its meta word, its key words, then its 16-byte state words:
 * aux (pacing and concurrency tables), the windows. */
static inline _Atomic uint64_t *sw__kt_meta_of(const sw_keyed *k, uint32_t idx) {
  return (_Atomic uint64_t *)(k->slots + (uint64_t)idx * k->slot_size);
}
static inline _Atomic uint64_t *sw__kt_key_of(const sw_keyed *k, uint32_t idx) {
  return sw__kt_meta_of(k, idx) + 1;
}
static inline sw__kt_w *sw__kt_state_of(const sw_keyed *k, uint32_t idx) {
  return (sw__kt_w *)(k->slots + (uint64_t)idx * k->slot_size + k->state_off);
}
static inline sw__kt_w *sw__kt_aux(const sw_keyed *k, uint32_t idx) {
  return sw__kt_state_of(k, idx); /* not for SW__KT_REJECT */
}
static inline sw__kt_w *sw__kt_win(const sw_keyed *k, uint32_t idx) {
  return (sw__kt_w *)(k->slots + (uint64_t)idx * k->slot_size + k->win_off);
}
/* State words of a slot: aux (if any) and the windows. */
static inline uint32_t sw__kt_nstate(const sw_keyed *k) {
  return k->windows + (k->kind != SW__KT_REJECT);
}
/* Units of the pacing clock per millisecond (1/16 us: exact rates to
 * about 1e-4 at 3000 per second). */
#define SW__KT_TICKS_PER_MS 16000

static inline sw__kt_totals *sw__kt_my_totals(const sw_keyed *k) {
  return &k->hdr->totals[sw__stripe_hint() & (SW__KT_TOTAL_STRIPES - 1)];
}

/* ------------------------------------------------ inline pieces of lookups */

static inline uint64_t sw__mum(uint64_t a, uint64_t b) {
  unsigned __int128 r = (unsigned __int128)a * b;
  return (uint64_t)r ^ (uint64_t)(r >> 64);
}

#define SW__P0 UINT64_C(0xa0761d6478bd642f)
#define SW__P1 UINT64_C(0xe7037ed1a0b428db)
#define SW__P2 UINT64_C(0x8ebc6af09c88c6e3)

/* The little-endian value of n <= 8 bytes at p, zero-padded, reading no
 * byte outside them (overlapping loads, as fast hashes do). */
static inline uint64_t sw__kt_load(const unsigned char *p, size_t n) {
  if (n >= 4) {
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + n - 4, 4);
    return lo | (uint64_t)hi << ((n - 4) * 8);
  }
  if (n == 0) return 0;
  return (uint64_t)p[0] | (uint64_t)p[n / 2] << (n / 2 * 8) | (uint64_t)p[n - 1] << ((n - 1) * 8);
}

/* A key's meta fields, tag and first bucket from its hash. */
static inline __attribute__((always_inline)) void sw__kt_place(const sw_keyed *k, uint64_t lenfield,
                                                               sw__kt_key *q) {
  q->low = (lenfield << SW__KT_FRAG_BITS) | (q->hash >> (64 - SW__KT_FRAG_BITS));
  uint64_t tag = (q->hash >> 20) & 0xff;
  q->tags = (tag ? tag : 1) * UINT64_C(0x0101010101010101);
  q->b[0] = (uint32_t)(((q->hash & 0xffffffffu) * (uint64_t)k->nbuckets) >> 32);
}

/* Its second bucket (needed only when the first does not hold it). */
static inline void sw__kt_place_second(const sw_keyed *k, sw__kt_key *q) {
  const uint64_t nb = k->nbuckets;
  q->b[1] = (uint32_t)(((sw__mum(q->hash ^ k->hdr->seed[1], SW__P2) & 0xffffffffu) * nb) >> 32);
  if (q->b[1] == q->b[0] && nb > 1) q->b[1] = (q->b[0] + 1) % (uint32_t)nb;
}

/* A key of 1..16 bytes (IPv4 and IPv6 addresses, short ids): its two words
 * and the hash, without a copy loop. */
static inline __attribute__((always_inline)) void sw__kt_prepare_short(const sw_keyed *k,
                                                                       const unsigned char *p,
                                                                       size_t len, sw__kt_key *q) {
  const uint64_t *seed = k->hdr->seed;
  q->w[0] = sw__kt_load(p, len < 8 ? len : 8);
  q->w[1] = len > 8 ? sw__kt_load(p + 8, len - 8) : 0;
  q->nwords = len > 8 ? 2 : 1;
  q->hash = sw__mum(q->w[0] ^ seed[0] ^ SW__P0, q->w[1] ^ seed[1] ^ (uint64_t)len);
  q->hash = sw__mum(q->hash ^ SW__P2, seed[0] ^ SW__P1);
  sw__kt_place(k, len, q);
}

static inline bool sw__kt_same_key(const sw_keyed *k, uint32_t idx, const sw__kt_key *q) {
  _Atomic uint64_t *w = sw__kt_key_of(k, idx);
  for (uint32_t i = 0; i < q->nwords; i++)
    if (atomic_load_explicit(&w[i], memory_order_relaxed) != q->w[i]) return false;
  return true;
}

/* The slot of q in bucket b whose meta and key match, or -1: only the
 * slots whose tag matches q's are read (no lock: a tag is written before
 * its slot turns READY). */
static inline __attribute__((always_inline)) int64_t sw__kt_in_bucket(const sw_keyed *k,
                                                                      const sw__kt_key *q,
                                                                      uint32_t b, uint64_t *meta) {
  const uint64_t want = sw__kt_meta(SW__KT_READY, 0, q->low);
  const uint64_t lo = UINT64_C(0x0101010101010101), hi = UINT64_C(0x8080808080808080);
  for (uint32_t half = 0; half < 2; half++) {
    /* bytes equal to q's tag: a zero byte of x (SWAR; a byte above a zero
     * byte may match falsely, which the meta check then refuses) */
    uint64_t x = atomic_load_explicit(&k->tags[b * 2 + half], memory_order_relaxed) ^ q->tags;
    uint64_t match = (x - lo) & ~x & hi;
    for (; match; match &= match - 1) {
      uint32_t idx = b * SW__KT_WAYS + half * 8 + (uint32_t)(__builtin_ctzll(match) / 8);
      uint64_t m = atomic_load_explicit(sw__kt_meta_of(k, idx), memory_order_acquire);
      if ((m & ~SW__KT_META_GEN_MASK) == want &&
          sw__kt_same_key(k, idx, q)) {
        *meta = m;
        return idx;
      }
    }
  }
  return -1;
}

/* table.c */
/* The layout fingerprint of a keyed table's segment, as this libsw lays it out. */
uint64_t sw__kt_fingerprint(void);
int sw__kt_prepare(const sw_keyed *k, const void *key, size_t len, sw__kt_key *q);
/* Find q's slot without a lock: 1 and *ref, or 0. */
int sw__kt_find(const sw_keyed *k, const sw__kt_key *q, sw__kt_ref *ref);
/* A new key's first admission, written with its key before it is READY
 * (entry.c prepares it when the rule admits n on an empty state): n counted
 * in window wid, and a pacing key's last admission aux (0: none). */
typedef struct sw__kt_first {
  int64_t wid, n;
  uint64_t aux;
} sw__kt_first;
/* Insert q, which a lookup without the lock did not find (reclaiming or
 * evicting as the table's policy says), or find it if it came meanwhile.
 * 1 found or inserted, 2 inserted with *first counted (first not NULL), 0
 * refused by the full-table policy, or a negative code (a lock timed out). */
int sw__kt_insert(sw_keyed *k, int64_t t, const sw__kt_key *q, sw__kt_ref *ref,
                  const sw__kt_first *first);
/* Take and release the locks of q's buckets: a place being given to
 * another key is then settled (its giver finished, or repaired if it died).
 * heal (a slot whose words never settled): the words of q's slot that are
 * not of its generation are emptied, and with heal > 1 all of them. */
int sw__kt_settle(sw_keyed *k, const sw__kt_key *q, int heal);
/* Repair the stripes whose locker died (a writable handle; each lock
 * tried, none waited for): their key counts are then exact. */
void sw__kt_mend_dead(sw_keyed *k);
/* True when a slot's state holds nothing at t (every window out of the
 * interval, pacing drained, nothing in flight). */
bool sw__kt_idle(const sw_keyed *k, uint32_t idx, uint32_t gen, int64_t t);
/* The window number of t. */
static inline int64_t sw__kt_wid_of(const sw_keyed *k, int64_t t) { return t / k->wl; }

#define SW__KT_CHECK(k)                                                            \
  do {                                                                             \
    if (sw__unlikely((k) == NULL)) return sw__fail(SW_ENULL, "keyed table is NULL"); \
  } while (0)

/* entry.c: the rule (loaded by the caller) applied to one key's slot. */
/* Steps a decision takes before it calls its slot unsettled: each step
 * either moves to a newer window, seals one, or loses a CAS to another
 * entry that won it, so only damaged bytes come near this. */
#define SW__KT_STEPS 100000

/* The receipt of an admission (sw_keyed_cancel): the meta it found, with
 * the slot's index for its len and fragment bits (READY's top bit marks a
 * receipt; the generation stays); the units counted and where: the low 32
 * bits of the window, or (pacing) of the queue's last admission it set. */
#define SW__KT_RECEIPT_IDX ((UINT64_C(1) << SW__KT_META_GEN_SHIFT) - 1)
static inline void sw__kt_receipt(sw_decision *d, uint32_t idx, uint64_t meta, uint64_t what,
                                  int64_t n) {
  d->receipt[0] = (int64_t)((meta & ~SW__KT_RECEIPT_IDX) | idx);
  d->receipt[1] = (int64_t)(what << 32 | (uint64_t)n);
}

/* The window a pacing admission is counted in: the one its wait ends in,
 * less the wait it was told (t's own window but near a boundary). */
static inline int64_t sw__kt_pacing_wid(const sw_keyed *k, int64_t next, int64_t wait_ms) {
  const int64_t ms = next / SW__KT_TICKS_PER_MS - wait_ms;
  return ms > 0 ? ms / k->wl : 0;
}

int sw__kt_decide(sw_keyed *k, const sw__rule *r, int64_t t, bool precise, const sw__kt_ref *ref,
                  int64_t n, sw_decision *d);

/* Passes and blocks of a slot's interval at t (words of generation gen);
 * -1 if a word is of another generation. */
int64_t sw__kt_interval_pass(const sw_keyed *k, uint32_t idx, uint32_t gen, int64_t t,
                             int64_t *block);

/* SW_ECORRUPT naming the table, the slot and what was wrong with it. */
int sw__kt_damaged(const sw_keyed *k, uint32_t idx, const char *what);

#endif /* SW_KEYED_H */
