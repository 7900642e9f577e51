/* SPDX-License-Identifier: Apache-2.0 */
/* Kill points for the crash tests (tests/check_crash.c): with
 * SW_TEST_KILL_AT=point[:n[:stop]] in its environment, a process kills itself
 * with SIGKILL (or stops itself with SIGSTOP) the n-th time (default: the
 * first) it reaches the named point of a rare path (a rule write, a registry
 * insert, a segment's creation), so a test can prove that every other
 * process goes on from exactly there. The variable is read once, when the
 * library is loaded; unset, a point costs one load and one branch. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool sw__kill_armed;
static char sw__kill_name[64];
static _Atomic long sw__kill_countdown;
static int sw__kill_signal = SIGKILL;

__attribute__((constructor)) static void sw__kill_init(void) {
  const char *v = getenv("SW_TEST_KILL_AT");
  if (v == NULL || *v == '\0') return;
  size_t len = strcspn(v, ":");
  if (len >= sizeof sw__kill_name) return;
  memcpy(sw__kill_name, v, len);
  sw__kill_name[len] = '\0';
  long n = v[len] == ':' ? atol(v + len + 1) : 1;
  const char *action = strchr(v + len + (v[len] == ':'), ':');
  if (action && strcmp(action, ":stop") == 0) sw__kill_signal = SIGSTOP;
  atomic_store(&sw__kill_countdown, n > 0 ? n : 1);
  sw__kill_armed = true;
}

void sw__kill_point(const char *point) {
  if (strcmp(point, sw__kill_name) == 0 && atomic_fetch_sub(&sw__kill_countdown, 1) == 1)
    raise(sw__kill_signal);
}
