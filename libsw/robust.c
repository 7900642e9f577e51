/* SPDX-License-Identifier: Apache-2.0 */
/* Robust mutexes: the locks of the rare paths (window resets, rule writes,
 * registry inserts). A process that dies holding one leaves it to the next
 * locker, which gets EOWNERDEAD, repairs what the dead one may have left
 * half done, and goes on: nobody is stalled. A holder that does not die (a
 * stopped process) or a lock word damaged in a shared segment can only
 * delay a locker by its bound: then SW_EBUSY. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "internal.h"

int sw__robust_init(pthread_mutex_t *m, bool process_shared) {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return sw__fail(SW_ENOMEM, "pthread_mutexattr_init");
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (process_shared) pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  int rc = pthread_mutex_init(m, &attr);
  pthread_mutexattr_destroy(&attr);
  return rc == 0 ? SW_OK : sw__fail(SW_ENOMEM, "pthread_mutex_init: %s", strerror(rc));
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SW__TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SW__TSAN 1
#endif

/* Wait for m until the deadline. ThreadSanitizer does not take a robust
 * mutex recovered by timedlock (EOWNERDEAD) as locked, only by trylock: its
 * builds poll trylock instead (same outcome, more wake-ups). */
static int sw__robust_wait(pthread_mutex_t *m, int timeout_ms) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
#ifdef SW__TSAN
  for (;;) {
    int rc = pthread_mutex_trylock(m);
    if (rc != EBUSY) return rc;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec > deadline.tv_sec ||
        (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
      return ETIMEDOUT;
    nanosleep(&(struct timespec){0, 20000}, NULL);
  }
#else
  /* timedlock counts on the real-time clock (a step of that clock moves the
   * bound); ThreadSanitizer knows it, not clocklock */
  return pthread_mutex_timedlock(m, &deadline);
#endif
}

#ifdef __GLIBC__
/* The kind word of a mutex as sw__robust_init makes it, private and shared.
 * A damaged one sends glibc into paths that assert or run instructions the
 * CPU lacks (lock elision): it is checked before every lock. */
static int sw__kinds[2];
static pthread_once_t sw__kinds_once = PTHREAD_ONCE_INIT;
static void sw__kinds_init(void) {
  for (int i = 0; i < 2; i++) {
    pthread_mutex_t m;
    if (sw__robust_init(&m, i) != SW_OK) continue;
    sw__kinds[i] = m.__data.__kind;
    pthread_mutex_destroy(&m);
  }
}
#endif

int sw__robust_check(const pthread_mutex_t *m, const char *what) {
#ifdef __GLIBC__
  pthread_once(&sw__kinds_once, sw__kinds_init);
  int kind = m->__data.__kind;
  if (sw__unlikely(kind != sw__kinds[0] && kind != sw__kinds[1]))
    return sw__fail(SW_ECORRUPT, "%s lock is damaged (mutex kind 0x%x, not a robust mutex's)",
                    what, (unsigned)kind);
#endif
  return SW_OK;
}

int sw__robust_lock(pthread_mutex_t *m, void (*repair)(void *), void *arg, const char *what,
                    int timeout_ms) {
  if (sw__robust_check(m, what) < 0) return SW_ECORRUPT;
  int rc = pthread_mutex_trylock(m);
  if (rc == EBUSY) rc = sw__robust_wait(m, timeout_ms);
  if (sw__likely(rc == 0)) return SW_OK;
  if (rc == EOWNERDEAD) {
    if (repair) repair(arg);
    pthread_mutex_consistent(m);
    return SW_OK;
  }
  if (rc == ETIMEDOUT)
    return sw__fail(SW_EBUSY, "%s lock held for more than %d ms (its holder is stopped, or the "
                    "lock word is damaged)", what, timeout_ms);
  return sw__fail(SW_ESTATE, "%s lock unusable: %s", what, strerror(rc));
}
