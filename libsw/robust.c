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

int sw__robust_lock(pthread_mutex_t *m, void (*repair)(void *), void *arg, const char *what,
                    int timeout_ms) {
  int rc = pthread_mutex_trylock(m);
  if (rc == EBUSY) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
    rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &deadline);
  }
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
