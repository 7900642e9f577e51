/* SPDX-License-Identifier: Apache-2.0 */
/* Internal helpers shared by the libsw sources (never installed). Internal
 * functions are named sw__* and are hidden by -fvisibility=hidden. */
#ifndef SW_INTERNAL_H
#define SW_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sw/sw.h"

#define SW_CACHE_LINE 64u

#define sw__likely(x) __builtin_expect(!!(x), 1)
#define sw__unlikely(x) __builtin_expect(!!(x), 0)

/* Record a detail message for sw_last_error() and return err. */
int sw__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Allocation through the allocator of sw_set_alloc_funcs; 64-byte aligned. */
void *sw__malloc(size_t n);
void *sw__calloc(size_t count, size_t size);
void sw__free(void *p);
char *sw__strdup(const char *s);
/* True when sw_set_alloc_funcs installed an allocator of the program's. */
bool sw__alloc_custom(void);
/* A zeroed handle and a zeroed block for an object that owns its memory;
 * SW_ENOMEM naming what, with nothing allocated, otherwise. */
int sw__alloc_pair(void **handle, size_t handle_size, void **block, uint64_t block_size,
                   const char *what);

/* Robust mutexes (robust.c). sw__robust_lock runs repair(arg), when given,
 * before taking over a lock whose owner died, and gives up with SW_EBUSY
 * after timeout_ms. */
#include <pthread.h>
#define SW__RESET_LOCK_MS 1000 /* a window reset waits at most this */
#define SW__WRITE_LOCK_MS 2000 /* a rule write or a registry insert */
int sw__robust_init(pthread_mutex_t *m, bool process_shared);
int sw__robust_lock(pthread_mutex_t *m, void (*repair)(void *), void *arg, const char *what,
                    int timeout_ms);
/* SW_ECORRUPT (naming what) when m's kind is not one sw__robust_init makes:
 * a damaged kind makes glibc assert or fault. sw__robust_lock checks it;
 * a caller that locks a shared mutex otherwise (trylock) checks it first. */
int sw__robust_check(const pthread_mutex_t *m, const char *what);

/* A kill point of the crash tests (kill_point.c): SIGKILL here when the
 * environment's SW_TEST_KILL_AT names it. Rare paths only. */
extern bool sw__kill_armed;
void sw__kill_point(const char *point);
#define SW__KILL_POINT(name)                                                    \
  do {                                                                          \
    if (sw__unlikely(sw__kill_armed)) sw__kill_point(name);                     \
  } while (0)

/* The code of the last sw__fail on this thread (for paths that return NULL). */
int sw__last_code(void);

/* Round n up to a multiple of the power of two a. */
static inline uint64_t sw__round_up(uint64_t n, uint64_t a) { return (n + a - 1) & ~(a - 1); }

/* FNV-1a over bytes, from h (start with SW__FNV_BASIS). */
#define SW__FNV_BASIS UINT64_C(14695981039346656037)
static inline uint64_t sw__fnv(const void *p, size_t n, uint64_t h) {
  for (const unsigned char *b = p; n--; b++) h = (h ^ *b) * UINT64_C(1099511628211);
  return h;
}
static inline bool sw__is_pow2(uint64_t n) { return n && !(n & (n - 1)); }

/* Saturating int64 addition for sums of non-negative counters. */
static inline int64_t sw__sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Validate the arguments common to every *_at call. */
#define SW__CHECK_TIME(t)                                                       \
  do {                                                                          \
    if (sw__unlikely((t) < 0))                                                  \
      return sw__fail(SW_ETIME, "time %lld ms is negative", (long long)(t));   \
  } while (0)

/* Handles bound to a read-only mapping refuse writes. */
#define SW__CHECK_WRITABLE(h)                                                   \
  do {                                                                          \
    if (sw__unlikely((h)->readonly))                                            \
      return sw__fail(SW_EPERM, "attached read-only: no writes");               \
  } while (0)

#define SW__CHECK_NULL(p, name)                                                 \
  do {                                                                          \
    if (sw__unlikely((p) == NULL)) return sw__fail(SW_ENULL, "%s is NULL", name); \
  } while (0)

/* The stripe of a striped counter to add to: the CPU the thread runs on,
 * read from glibc's rseq area (the kernel keeps it current), so that two
 * threads or processes running at once on two CPUs never add to one line.
 * Where there is no rseq (valgrind, glibc.pthread.rseq=0, other libcs: the
 * area's cpu_id is then < 0), a hash of the thread's own address. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)) && \
    defined(__has_include)
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define SW__HAVE_RSEQ 1
#endif
#endif
static inline uint32_t sw__stripe_hint(void) {
  const char *tp = __builtin_thread_pointer();
#ifdef SW__HAVE_RSEQ
  int32_t cpu = (int32_t) * (const volatile uint32_t *)(tp + __rseq_offset +
                                                         offsetof(struct rseq, cpu_id));
  if (sw__likely(cpu >= 0)) return (uint32_t)cpu;
#endif
  return (uint32_t)(((uintptr_t)tp >> 12) * UINT64_C(0x9e3779b97f4a7c15) >> 40);
}

/* The window clock (clock.c; see sw_now_ms), inlined into the library's
 * own entries. */
#include <time.h>
extern _Atomic(sw_clock_fn) sw__custom_fn;
extern void *_Atomic sw__custom_user;
extern atomic_int sw__window_id;
static inline int64_t sw__now_ms(void) {
  sw_clock_fn fn = atomic_load_explicit(&sw__custom_fn, memory_order_acquire);
  if (sw__unlikely(fn != NULL))
    return fn(atomic_load_explicit(&sw__custom_user, memory_order_relaxed));
  struct timespec ts;
  clock_gettime(atomic_load_explicit(&sw__window_id, memory_order_relaxed), &ts);
  return (int64_t)ts.tv_sec * 1000 + (int64_t)((uint64_t)ts.tv_nsec / 1000000);
}

#endif /* SW_INTERNAL_H */
