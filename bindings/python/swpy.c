/* SPDX-License-Identifier: Apache-2.0 */
/* The Python binding's glue: see swpy.h. Compiled into libsw._libsw with the
 * full (not the limited) Python API, for one field: the current context of
 * a thread state, which tells asyncio tasks and greenlets apart. */
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "swpy.h"

#include <string.h>

#define SWPY_NS_PER_MS 1000000
#define SWPY_FREE_MAX 256 /* records kept by a thread; more go to the shared pool */
#define SWPY_REFILL 16    /* records a thread takes from the pool at once */

#define swpy_likely(x) __builtin_expect(!!(x), 1)

/* ------------------------------------------------------------- tables */
/* Sites and records are named by their index in a table of chunks: CFFI
 * converts a Python int below 2^30 (one digit) to C and back several times
 * faster than an address (two or three digits). A site's number and a
 * token are an index and 8 bits of a generation above it, below 2^30 too:
 * a `with` record of a site freed since never matches the site that takes
 * its place, and a token ends its entry once. Chunks are never freed: a
 * stale token may still read its record's generation. */
#define SWPY_CHUNK_BITS 10
#define SWPY_CHUNK (1u << SWPY_CHUNK_BITS)
#define SWPY_INDEX_BITS 22 /* up to 4,194,304 sites, and records */
#define SWPY_CHUNKS (1u << (SWPY_INDEX_BITS - SWPY_CHUNK_BITS))
#define SWPY_INDEX_MASK ((1u << SWPY_INDEX_BITS) - 1)
#define SWPY_GEN_MASK 0xffu

typedef struct swpy_site {
  _Atomic(sw_limiter *) l; /* NULL once the Python object is closed */
  _Atomic(sw_keyed *) k;   /* a keyed table's site: its table, NULL once closed */
  uint32_t flags;
  int clocked;
  int64_t period_ms; /* keyed: the site's clock (see swpy_ksite_new) */
  int64_t epoch;
  uint32_t next_free; /* free sites */
  uint32_t gen;       /* times freed: a site's number holds 8 bits of it */
} swpy_site;

/* An entry in flight: of a token (a decorator's call, a permit) or of a
 * `with` (then in its thread's with list). gen is odd while the record is
 * free or its entry has ended, even while the entry is in flight; only the
 * thread holding a record changes it, except the exit of a token, which
 * claims it with a compare-and-swap (so a token ends its entry once). */
typedef struct swpy_rec {
  struct swpy_rec *next; /* free list, with list */
  sw_limiter *l;
  int64_t t0;
  int64_t n;
  _Atomic int64_t remaining; /* read by swpy_token_remaining from any thread */
  void *owner;               /* with: the Python context entered in */
  uint32_t site;             /* with: the site entered */
  uint32_t index;
  _Atomic uint32_t gen;
  /* a token's entry: its decision, for swpy_cancel (limiter and keyed) */
  sw_decision d;
  /* a keyed entry (k != NULL): its key, and the clock of its exit */
  sw_keyed *k;
  int64_t period_ms; /* 1000 and epoch 0: libsw's clock; 0: a custom clock (t0 in its ms) */
  int64_t epoch;
  uint32_t klen;
  uint8_t *kp; /* the key: key[] below, or a copy of a longer one (malloc) */
  uint8_t key[SWPY_KEY_INLINE];
} swpy_rec;

typedef struct swpy_thread {
  sw_decision d;  /* the last decision */
  swpy_rec *free; /* records to reuse */
  uint32_t nfree;
  uint32_t registered; /* the thread-exit destructor is set */
  swpy_rec *with;      /* entries of `with`, the latest first */
} swpy_thread;

static _Thread_local swpy_thread swpy_t;
static pthread_key_t swpy_key;
static pthread_once_t swpy_key_once = PTHREAD_ONCE_INIT;

/* The tables, grown under their lock; readers take no lock. */
static pthread_mutex_t swpy_table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(swpy_site *) swpy_site_chunks[SWPY_CHUNKS];
static _Atomic(swpy_rec *) swpy_rec_chunks[SWPY_CHUNKS];
static uint32_t swpy_sites, swpy_site_free_head; /* sites made; free ones (0: none) */
static uint32_t swpy_recs;                       /* records made */
static swpy_rec *swpy_pool; /* free records of exited threads and over SWPY_FREE_MAX */

static inline swpy_site *swpy_site_at(int64_t site) {
  uint32_t i = (uint32_t)site & SWPY_INDEX_MASK;
  return &atomic_load_explicit(&swpy_site_chunks[i >> SWPY_CHUNK_BITS],
                               memory_order_acquire)[i & (SWPY_CHUNK - 1)];
}

static inline swpy_rec *swpy_rec_at(uint32_t i) {
  return &atomic_load_explicit(&swpy_rec_chunks[i >> SWPY_CHUNK_BITS],
                               memory_order_acquire)[i & (SWPY_CHUNK - 1)];
}

/* ------------------------------------------------------------ records */

static void swpy_pool_push(swpy_rec *first, swpy_rec *last) {
  pthread_mutex_lock(&swpy_table_lock);
  last->next = swpy_pool;
  swpy_pool = first;
  pthread_mutex_unlock(&swpy_table_lock);
}

/* At thread exit: the records go to the pool; `with` entries never exited
 * (a generator abandoned inside a `with`) end there too, uncounted. */
static void swpy_thread_exit(void *arg) {
  swpy_thread *t = arg;
  for (swpy_rec *r = t->with; r != NULL; r = r->next) atomic_fetch_add(&r->gen, 1);
  swpy_rec *lists[2] = {t->free, t->with};
  for (int i = 0; i < 2; i++) {
    swpy_rec *last = lists[i];
    if (last == NULL) continue;
    while (last->next != NULL) last = last->next;
    swpy_pool_push(lists[i], last);
  }
  t->free = t->with = NULL;
  t->nfree = 0;
}

static void swpy_key_init(void) { pthread_key_create(&swpy_key, swpy_thread_exit); }

/* A new chunk of records into the pool (under the lock); 0 or SW_ENOMEM. */
static int swpy_rec_grow(void) {
  uint32_t c = swpy_recs >> SWPY_CHUNK_BITS;
  swpy_rec *chunk = c < SWPY_CHUNKS ? calloc(SWPY_CHUNK, sizeof *chunk) : NULL;
  if (chunk == NULL) return SW_ENOMEM;
  for (uint32_t i = SWPY_CHUNK; i-- > (c == 0 ? 1u : 0u);) { /* index 0 names nothing */
    chunk[i].index = c << SWPY_CHUNK_BITS | i;
    atomic_init(&chunk[i].gen, 1);
    chunk[i].next = swpy_pool;
    swpy_pool = &chunk[i];
  }
  atomic_store_explicit(&swpy_rec_chunks[c], chunk, memory_order_release);
  swpy_recs += SWPY_CHUNK;
  return 0;
}

/* The thread has no record to reuse: take some from the pool. */
static __attribute__((noinline)) swpy_rec *swpy_rec_refill(swpy_thread *t) {
  if (!t->registered) {
    t->registered = 1;
    pthread_once(&swpy_key_once, swpy_key_init);
    pthread_setspecific(swpy_key, t);
  }
  pthread_mutex_lock(&swpy_table_lock);
  if (swpy_pool == NULL && swpy_rec_grow() < 0) {
    pthread_mutex_unlock(&swpy_table_lock);
    return NULL;
  }
  for (int i = 0; i < SWPY_REFILL && swpy_pool != NULL; i++) {
    swpy_rec *r = swpy_pool;
    swpy_pool = r->next;
    r->next = t->free;
    t->free = r;
    t->nfree++;
  }
  pthread_mutex_unlock(&swpy_table_lock);
  swpy_rec *r = t->free;
  t->free = r->next;
  t->nfree--;
  return r;
}

/* A free record, now in flight (gen even). */
static inline swpy_rec *swpy_rec_get(swpy_thread *t) {
  swpy_rec *r = t->free;
  if (swpy_likely(r != NULL)) {
    t->free = r->next;
    t->nfree--;
  } else if ((r = swpy_rec_refill(t)) == NULL) {
    return NULL;
  }
  atomic_store_explicit(&r->gen, atomic_load_explicit(&r->gen, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  /* the new generation before the new entry's fields (swpy_token_remaining
   * reads them as a sequence lock's reader) */
  atomic_thread_fence(memory_order_release);
  return r;
}

/* Give back a record whose entry ended (gen odd). */
static inline void swpy_rec_put(swpy_thread *t, swpy_rec *r) {
  r->next = t->free;
  t->free = r;
  if (swpy_likely(++t->nfree <= SWPY_FREE_MAX)) return;
  swpy_rec *last = r; /* half of them to the pool */
  for (int i = 1; i < SWPY_FREE_MAX / 2; i++) last = last->next;
  t->free = last->next;
  t->nfree -= SWPY_FREE_MAX / 2;
  swpy_pool_push(r, last);
}

/* End a record's entry that did not happen or has ended: gen odd again.
 * (No token of it is out, or the caller holds the only one: nothing
 * else changes gen meanwhile.) */
static inline void swpy_rec_unget(swpy_thread *t, swpy_rec *r) {
  atomic_store_explicit(&r->gen, atomic_load_explicit(&r->gen, memory_order_relaxed) + 1,
                        memory_order_release);
  swpy_rec_put(t, r);
}

/* Keep key in r for its exit: 0, or SW_ENOMEM. */
static inline int swpy_rec_key(swpy_rec *r, const void *key, size_t len) {
  uint8_t *p = len <= SWPY_KEY_INLINE ? r->key : malloc(len);
  if (p == NULL) return SW_ENOMEM;
  memcpy(p, key, len);
  r->kp = p;
  r->klen = (uint32_t)len;
  return 0;
}

/* A keyed record whose entry has ended: its key's copy freed. */
static inline void swpy_rec_key_free(swpy_rec *r) {
  if (r->k != NULL && r->kp != r->key) free(r->kp);
  r->kp = r->key;
}

/* A token's generation: 8 bits of the in-flight (even) generation g. */
static inline uint32_t swpy_gen8(uint32_t g) { return (g >> 1) & SWPY_GEN_MASK; }

static inline int64_t swpy_token_of(swpy_rec *r) {
  uint32_t g = atomic_load_explicit(&r->gen, memory_order_relaxed);
  return (int64_t)(swpy_gen8(g) << SWPY_INDEX_BITS | r->index);
}

static inline swpy_rec *swpy_rec_of(int64_t token) {
  return swpy_rec_at((uint32_t)token & SWPY_INDEX_MASK);
}

/* ------------------------------------------------------------- times */

static inline int64_t swpy_rt(int64_t t, int64_t t0) {
  int64_t rt = t - t0;
  return rt < 0 ? 0 : rt > INT32_MAX ? INT32_MAX : rt;
}

static inline int64_t swpy_rt_ns(int64_t t0) {
  int64_t d = sw_now_ns() - t0;
  return d < 0 ? 0 : d / SWPY_NS_PER_MS > INT32_MAX ? INT32_MAX : d / SWPY_NS_PER_MS;
}

/* A keyed site's clock: libsw's milliseconds (period 1000, epoch 0), or a
 * clock whose 1000 ms are period_ms of libsw's, from epoch (libsw.web's
 * rules of other periods). */
static inline int64_t swpy_scaled(int64_t period_ms, int64_t epoch) {
  return sw_now_ms() * 1000 / period_ms + epoch;
}

/* The exit of a keyed record's entry: at t of a custom clock (period 0),
 * else now on the site's clock, with the response time in real ms. */
static inline int swpy_kexit_rec(const swpy_rec *r, int64_t t, uint32_t flags) {
  if (r->period_ms == 0)
    return sw_keyed_exit_at(r->k, t, r->kp, r->klen, swpy_rt(t, r->t0), r->n, flags);
  int64_t rt = swpy_rt_ns(r->t0);
  if (r->period_ms == 1000 && r->epoch == 0)
    return sw_keyed_exit(r->k, r->kp, r->klen, rt, r->n, flags);
  return sw_keyed_exit_at(r->k, swpy_scaled(r->period_ms, r->epoch), r->kp, r->klen, rt, r->n,
                          flags);
}

/* ------------------------------------------------------- plain calls */

int64_t swpy_enter(sw_limiter *l, int64_t n, uint32_t flags) {
  int rc = sw_limiter_entry(l, n, flags, &swpy_t.d);
  if (rc < 0) return rc;
  return swpy_t.d.verdict == SW_VERDICT_PASS ? sw_now_ns() : SWPY_NOT_PASS;
}

int64_t swpy_enter_at(sw_limiter *l, int64_t t, int64_t n, uint32_t flags) {
  int rc = sw_limiter_entry_at(l, t, n, flags, &swpy_t.d);
  if (rc < 0) return rc;
  return swpy_t.d.verdict == SW_VERDICT_PASS ? t : SWPY_NOT_PASS;
}

int swpy_exit(sw_limiter *l, int64_t t0, int64_t n, uint32_t flags) {
  return sw_limiter_exit(l, swpy_rt_ns(t0), n, flags);
}

int swpy_exit_at(sw_limiter *l, int64_t t, int64_t t0, int64_t n, uint32_t flags) {
  return sw_limiter_exit_at(l, t, swpy_rt(t, t0), n, flags);
}

sw_decision *swpy_decision(void) { return &swpy_t.d; }
int64_t swpy_remaining(void) { return swpy_t.d.remaining; }

/* PyGILState_Check is exported by every CPython >= 3.4. */
int swpy_gil_held(void) { return PyGILState_Check(); }

/* ------------------------------------------------------------- sites */

/* A fork() copies the tables' lock as it is: held by no thread of the child. */
static void swpy_fork_prepare(void) { pthread_mutex_lock(&swpy_table_lock); }
static void swpy_fork_done(void) { pthread_mutex_unlock(&swpy_table_lock); }
static void swpy_fork_init(void) { pthread_atfork(swpy_fork_prepare, swpy_fork_done, swpy_fork_done); }
static pthread_once_t swpy_fork_once = PTHREAD_ONCE_INIT;

int64_t swpy_site_new(sw_limiter *l, uint32_t flags, int clocked) {
  pthread_once(&swpy_fork_once, swpy_fork_init);
  pthread_mutex_lock(&swpy_table_lock);
  uint32_t i = swpy_site_free_head;
  if (i != 0) {
    swpy_site_free_head = swpy_site_at(i)->next_free;
  } else {
    i = swpy_sites == 0 ? 1 : swpy_sites; /* index 0 names nothing */
    uint32_t c = i >> SWPY_CHUNK_BITS;
    if (c >= SWPY_CHUNKS) {
      pthread_mutex_unlock(&swpy_table_lock);
      return SW_ENOMEM;
    }
    if (atomic_load_explicit(&swpy_site_chunks[c], memory_order_relaxed) == NULL) {
      swpy_site *chunk = calloc(SWPY_CHUNK, sizeof *chunk);
      if (chunk == NULL) {
        pthread_mutex_unlock(&swpy_table_lock);
        return SW_ENOMEM;
      }
      atomic_store_explicit(&swpy_site_chunks[c], chunk, memory_order_release);
    }
    swpy_sites = i + 1;
  }
  swpy_site *s = swpy_site_at(i);
  atomic_store_explicit(&s->l, l, memory_order_release);
  atomic_store_explicit(&s->k, NULL, memory_order_release);
  s->flags = flags;
  s->clocked = clocked;
  s->period_ms = 1000;
  s->epoch = 0;
  int64_t site = (int64_t)((s->gen & SWPY_GEN_MASK) << SWPY_INDEX_BITS | i);
  pthread_mutex_unlock(&swpy_table_lock);
  return site;
}

void swpy_site_clear(int64_t site) {
  swpy_site *s = swpy_site_at(site);
  atomic_store(&s->l, NULL);
  atomic_store(&s->k, NULL);
}

void swpy_site_free(int64_t site) {
  pthread_mutex_lock(&swpy_table_lock);
  swpy_site *s = swpy_site_at(site);
  atomic_store(&s->l, NULL);
  atomic_store(&s->k, NULL);
  s->gen++;
  s->next_free = swpy_site_free_head;
  swpy_site_free_head = (uint32_t)site & SWPY_INDEX_MASK;
  pthread_mutex_unlock(&swpy_table_lock);
}

static inline sw_limiter *swpy_site_limiter(const swpy_site *s) {
  return atomic_load_explicit(&s->l, memory_order_acquire);
}

/* ------------------------------------------------------------ tokens */

/* Enter n units through a site: a record in flight (t0 and n set) on a
 * PASS verdict, else NULL with *rc the result to return. */
static inline swpy_rec *swpy_site_entry(swpy_thread *t, int64_t site, int64_t n, int64_t *rc) {
  const swpy_site *s = swpy_site_at(site);
  sw_limiter *l = swpy_site_limiter(s);
  swpy_rec *r = swpy_rec_get(t);
  if (r == NULL) {
    *rc = SW_ENOMEM;
    return NULL;
  }
  int e = sw_limiter_entry(l, n, s->flags, &t->d);
  if (e < 0 || t->d.verdict != SW_VERDICT_PASS) {
    swpy_rec_unget(t, r);
    *rc = e < 0 ? e : SWPY_NOT_PASS;
    return NULL;
  }
  r->l = l;
  r->k = NULL;
  r->n = n;
  r->t0 = sw_now_ns();
  return r;
}

int64_t swpy_enter_site(int64_t site) {
  swpy_thread *t = &swpy_t;
  int64_t rc;
  swpy_rec *r = swpy_site_entry(t, site, 1, &rc);
  return r != NULL ? swpy_token_of(r) : rc;
}

int64_t swpy_acquire_site_n(int64_t site, int64_t n) {
  swpy_thread *t = &swpy_t;
  int64_t rc;
  swpy_rec *r = swpy_site_entry(t, site, n, &rc);
  if (r == NULL) return rc;
  if (t->d.would_block) { /* the permit says so: Python makes it from the decision */
    swpy_rec_unget(t, r);
    return SWPY_NOT_PASS;
  }
  r->d = t->d;
  atomic_store_explicit(&r->remaining, t->d.remaining, memory_order_relaxed);
  return swpy_token_of(r);
}

int64_t swpy_acquire_site(int64_t site) { return swpy_acquire_site_n(site, 1); }

int64_t swpy_token(sw_limiter *l, int64_t t0, int64_t n, int64_t remaining) {
  swpy_rec *r = swpy_rec_get(&swpy_t);
  if (r == NULL) return SW_ENOMEM;
  r->l = l;
  r->k = NULL;
  r->d = swpy_t.d;
  r->t0 = t0;
  r->n = n;
  atomic_store_explicit(&r->remaining, remaining, memory_order_relaxed);
  return swpy_token_of(r);
}

/* The record of a token whose entry is in flight, now ended (gen odd); NULL
 * when the token was released already. */
static inline swpy_rec *swpy_claim(int64_t token) {
  swpy_rec *r = swpy_rec_of(token);
  uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
  if ((g & 1) || swpy_gen8(g) != (uint32_t)token >> SWPY_INDEX_BITS) return NULL;
  return atomic_compare_exchange_strong(&r->gen, &g, g + 1) ? r : NULL;
}

/* The exit of a record's entry (a custom clock's time t, else unused). */
static inline int swpy_rec_exit(const swpy_rec *r, int64_t t, int clocked, uint32_t flags) {
  if (r->k != NULL) return swpy_kexit_rec(r, t, flags);
  if (clocked) return sw_limiter_exit_at(r->l, t, swpy_rt(t, r->t0), r->n, flags);
  return sw_limiter_exit(r->l, swpy_rt_ns(r->t0), r->n, flags);
}

/* End a token's entry now: the exit's result, SWPY_STALE; *remaining. */
static inline int swpy_exit_token(int64_t token, uint32_t flags, int64_t *remaining) {
  swpy_rec *r = swpy_claim(token);
  if (r == NULL) return SWPY_STALE;
  int rc = swpy_rec_exit(r, 0, 0, flags);
  *remaining = atomic_load_explicit(&r->remaining, memory_order_relaxed);
  swpy_rec_key_free(r);
  swpy_rec_put(&swpy_t, r);
  return rc;
}

/* The decorator's exit: its token never leaves the wrapper's frame, so it
 * is ended once without the claim's compare-and-swap. */
static inline int swpy_exit_own(int64_t token, uint32_t flags) {
  swpy_rec *r = swpy_rec_of(token);
  int rc = sw_limiter_exit(r->l, swpy_rt_ns(r->t0), r->n, flags);
  swpy_rec_unget(&swpy_t, r);
  return rc;
}

int swpy_exit_ok(int64_t token) { return swpy_exit_own(token, 0); }
int swpy_exit_err(int64_t token) { return swpy_exit_own(token, SW_EXIT_ERROR); }

static inline int64_t swpy_release(int64_t token, uint32_t flags) {
  int64_t remaining;
  int rc = swpy_exit_token(token, flags, &remaining);
  return rc < 0 ? rc : remaining;
}

int64_t swpy_release_ok(int64_t token) { return swpy_release(token, 0); }
int64_t swpy_release_err(int64_t token) { return swpy_release(token, SW_EXIT_ERROR); }

int64_t swpy_exit_token_at(int64_t token, int64_t t, uint32_t flags) {
  swpy_rec *r = swpy_claim(token);
  if (r == NULL) return SWPY_STALE;
  int rc = swpy_rec_exit(r, t, 1, flags);
  int64_t remaining = atomic_load_explicit(&r->remaining, memory_order_relaxed);
  swpy_rec_key_free(r);
  swpy_rec_put(&swpy_t, r);
  return rc < 0 ? rc : remaining;
}

int64_t swpy_abandon(int64_t token) {
  swpy_rec *r = swpy_claim(token);
  if (r == NULL) return SWPY_STALE;
  swpy_rec_key_free(r);
  swpy_rec_put(&swpy_t, r);
  return 0;
}

int64_t swpy_cancel(int64_t token, int64_t t) {
  swpy_rec *r = swpy_claim(token);
  if (r == NULL) return SWPY_STALE;
  int rc = r->k != NULL ? sw_keyed_cancel(r->k, &r->d) : sw_limiter_cancel(r->l, &r->d);
  if (rc == SW_ENOTSUP) { /* not built: the entry ends as a plain exit, and stays counted */
    int e = swpy_rec_exit(r, t, t >= 0, 0);
    if (e < 0) rc = e;
  }
  swpy_rec_key_free(r);
  swpy_rec_put(&swpy_t, r);
  return rc;
}

int64_t swpy_token_remaining(int64_t token) {
  swpy_rec *r = swpy_rec_of(token);
  uint32_t g = atomic_load_explicit(&r->gen, memory_order_acquire);
  int64_t remaining = atomic_load_explicit(&r->remaining, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  /* the token's entry, in flight (even) or ended (odd), not yet reused */
  if (atomic_load_explicit(&r->gen, memory_order_relaxed) != g ||
      swpy_gen8(g & ~1u) != (uint32_t)token >> SWPY_INDEX_BITS)
    return -1;
  return remaining;
}

/* -------------------------------------------------------------- with */

/* The Python context current in this thread (an asyncio task's while it
 * runs, a greenlet's, or the thread's own), read without the GIL: only
 * this thread changes it. NULL until the thread's first contextvars use. */
static inline void *swpy_owner(void) {
  PyThreadState *ts = PyGILState_GetThisThreadState();
  return ts != NULL ? (void *)ts->context : NULL;
}

static inline void swpy_with_record(swpy_thread *t, swpy_rec *r, int64_t site, void *owner) {
  r->site = (uint32_t)site;
  r->owner = owner;
  r->next = t->with;
  t->with = r;
}

int64_t swpy_with_enter(int64_t site) {
  if (swpy_site_at(site)->clocked) return SWPY_CLOCKED;
  void *owner = swpy_owner();
  if (owner == NULL) return SWPY_NO_CONTEXT;
  swpy_thread *t = &swpy_t;
  int64_t rc;
  swpy_rec *r = swpy_site_entry(t, site, 1, &rc);
  if (r == NULL) return rc;
  swpy_with_record(t, r, site, owner);
  return 0;
}

int64_t swpy_with_enter_at(int64_t site, int64_t tm) {
  void *owner = swpy_owner();
  if (owner == NULL) return SWPY_NO_CONTEXT;
  const swpy_site *s = swpy_site_at(site);
  sw_limiter *l = swpy_site_limiter(s);
  swpy_thread *t = &swpy_t;
  swpy_rec *r = swpy_rec_get(t);
  if (r == NULL) return SW_ENOMEM;
  int e = sw_limiter_entry_at(l, tm, 1, s->flags, &t->d);
  if (e < 0 || t->d.verdict != SW_VERDICT_PASS) {
    swpy_rec_unget(t, r);
    return e < 0 ? e : SWPY_NOT_PASS;
  }
  r->l = l;
  r->n = 1;
  r->t0 = tm;
  swpy_with_record(t, r, site, owner);
  return 0;
}

int64_t swpy_with_push(int64_t site, sw_limiter *l, int64_t t0) {
  void *owner = swpy_owner();
  if (owner == NULL) return SWPY_NO_CONTEXT;
  swpy_thread *t = &swpy_t;
  swpy_rec *r = swpy_rec_get(t);
  if (r == NULL) return SW_ENOMEM;
  r->l = l;
  r->n = 1;
  r->t0 = t0;
  swpy_with_record(t, r, site, owner);
  return 0;
}

/* Unlink the latest entry of the site in this context; NULL if none. */
static inline swpy_rec *swpy_with_pop(swpy_thread *t, int64_t site) {
  void *owner = swpy_owner();
  for (swpy_rec **p = &t->with; *p != NULL; p = &(*p)->next) {
    swpy_rec *r = *p;
    if (r->site == (uint32_t)site && r->owner == owner) {
      *p = r->next;
      return r;
    }
  }
  return NULL;
}

static inline int64_t swpy_with_end(int64_t site, uint32_t flags) {
  if (swpy_site_at(site)->clocked) return SWPY_CLOCKED;
  swpy_thread *t = &swpy_t;
  swpy_rec *r = swpy_with_pop(t, site);
  if (r == NULL) return SWPY_NO_ENTRY;
  int rc = sw_limiter_exit(r->l, swpy_rt_ns(r->t0), 1, flags);
  swpy_rec_unget(t, r);
  return rc;
}

int64_t swpy_with_exit(int64_t site) { return swpy_with_end(site, 0); }
int64_t swpy_with_exit_err(int64_t site) { return swpy_with_end(site, SW_EXIT_ERROR); }

int64_t swpy_with_exit_at(int64_t site, int64_t tm, uint32_t flags) {
  swpy_thread *t = &swpy_t;
  swpy_rec *r = swpy_with_pop(t, site);
  if (r == NULL) return SWPY_NO_ENTRY;
  int rc = sw_limiter_exit_at(r->l, tm, swpy_rt(tm, r->t0), 1, flags);
  swpy_rec_unget(t, r);
  return rc;
}

/* ------------------------------------------------------------- keyed */

int64_t swpy_ksite_new(sw_keyed *k, int64_t period_ms, int64_t epoch) {
  if (period_ms < 0 || (period_ms == 0 && epoch != 0)) return SW_ERANGE;
  int64_t site = swpy_site_new(NULL, 0, period_ms == 0);
  if (site < 0) return site;
  swpy_site *s = swpy_site_at(site);
  s->period_ms = period_ms;
  s->epoch = epoch;
  atomic_store_explicit(&s->k, k, memory_order_release);
  return site;
}

/* Enter key with n units through a keyed site at tm (a custom clock's;
 * otherwise the site's clock): a token on a plain pass, else the result. */
static inline int64_t swpy_kentry(int64_t site, const void *key, size_t len, int64_t n,
                                  int64_t tm) {
  const swpy_site *s = swpy_site_at(site);
  sw_keyed *k = atomic_load_explicit(&s->k, memory_order_acquire);
  int64_t period = s->period_ms, epoch = s->epoch;
  swpy_thread *t = &swpy_t;
  swpy_rec *r = swpy_rec_get(t);
  if (r == NULL) return SW_ENOMEM;
  int e;
  if (period == 0) {
    e = sw_keyed_entry_at(k, tm, key, len, n, 0, &t->d);
    r->t0 = tm;
  } else {
    if (period == 1000 && epoch == 0)
      e = sw_keyed_entry(k, key, len, n, 0, &t->d);
    else
      e = sw_keyed_entry_at(k, swpy_scaled(period, epoch), key, len, n, 0, &t->d);
    r->t0 = sw_now_ns();
  }
  const sw_decision *d = &t->d;
  if (e < 0 || d->verdict != SW_VERDICT_PASS || d->full || d->would_block) {
    swpy_rec_unget(t, r);
    return e < 0 ? e : SWPY_NOT_PASS;
  }
  r->k = k;
  r->d = *d;
  r->n = n;
  r->period_ms = period;
  r->epoch = epoch;
  if (swpy_rec_key(r, key, len) < 0) { /* admitted, but no record of it: ended at once */
    r->k = NULL;
    if (period == 0)
      sw_keyed_exit_at(k, tm, key, len, 0, n, SW_EXIT_ERROR);
    else
      sw_keyed_exit(k, key, len, 0, n, SW_EXIT_ERROR);
    swpy_rec_unget(t, r);
    return SW_ENOMEM;
  }
  atomic_store_explicit(&r->remaining, d->remaining, memory_order_relaxed);
  return swpy_token_of(r);
}

int64_t swpy_kacquire(int64_t site, const char *key, size_t len, int64_t n) {
  return swpy_kentry(site, key, len, n, 0);
}

int64_t swpy_kacquire_at(int64_t site, int64_t t, const char *key, size_t len, int64_t n) {
  return swpy_kentry(site, key, len, n, t);
}

int64_t swpy_ktoken(int64_t site, const char *key, size_t len, int64_t t0, int64_t n,
                    int64_t remaining, const sw_decision *d) {
  const swpy_site *s = swpy_site_at(site);
  swpy_thread *t = &swpy_t;
  swpy_rec *r = swpy_rec_get(t);
  if (r == NULL) return SW_ENOMEM;
  r->k = NULL;
  if (swpy_rec_key(r, key, len) < 0) {
    swpy_rec_unget(t, r);
    return SW_ENOMEM;
  }
  r->k = atomic_load_explicit(&s->k, memory_order_acquire);
  r->d = *d;
  r->t0 = t0;
  r->n = n;
  r->period_ms = s->period_ms;
  r->epoch = s->epoch;
  atomic_store_explicit(&r->remaining, remaining, memory_order_relaxed);
  return swpy_token_of(r);
}

int64_t swpy_know(int64_t site) {
  const swpy_site *s = swpy_site_at(site);
  return s->period_ms == 0 ? SWPY_CLOCKED : swpy_scaled(s->period_ms, s->epoch);
}
