/* SPDX-License-Identifier: Apache-2.0 */
/* Keyed tables when a process dies, or stops for as long as it likes,
 * between any two of its shared writes: at every kill point of a change of
 * hands (keyed.h) — a new key into an empty place, into an idle key's
 * place, into an evicted key's place, for each kind of table; a repairer
 * killed while repairing; and an entry stopped before its CAS while its
 * place changes hands 102,400 times (25 x 4,096: a 12-bit generation would
 * have come back to the same value). After each: nothing hangs, every key
 * holds exactly its own counts and no other's, the table's key count is the
 * number of places holding keys, and no place is lost. */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "keyedutil.h"
#include "segutil.h"

#define T_OLD INT64_C(1000)     /* the old keys' entries */
#define T_NEW INT64_C(100000)   /* the newcomer's: old keys idle by then (1 s interval) */
#define T_LATER INT64_C(200000) /* every key idle again */

enum { EMPTY_PLACE, IDLE_KEYS, ACTIVE_KEYS };

typedef struct scenario {
  const char *name;
  int grade, behavior, fill; /* fill: what the newcomer's bucket holds */
} scenario;

static const scenario scenarios[] = {
    {"reject, empty place", SW_GRADE_QPS, SW_BEHAVIOR_REJECT, EMPTY_PLACE},
    {"reject, idle keys", SW_GRADE_QPS, SW_BEHAVIOR_REJECT, IDLE_KEYS},
    {"reject, active keys (evict)", SW_GRADE_QPS, SW_BEHAVIOR_REJECT, ACTIVE_KEYS},
    {"pacing, idle keys", SW_GRADE_QPS, SW_BEHAVIOR_PACING, IDLE_KEYS},
    {"pacing, active keys (evict)", SW_GRADE_QPS, SW_BEHAVIOR_PACING, ACTIVE_KEYS},
    {"concurrency, empty place", SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, EMPTY_PLACE},
    {"concurrency, idle keys", SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, IDLE_KEYS},
    {"concurrency, active keys (evict)", SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, ACTIVE_KEYS},
};

static sw_options *sc_opts(const scenario *sc) {
  sw_options *o = rule(1000);
  ck_ok(sw_options_set(o, SW_OPT_GRADE, sc->grade));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, sc->behavior));
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 1000));
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_EVICT));
  return o;
}




/* The victim: one entry of the newcomer, at the time the scenario gives
 * (and with "cancel", its cancel). */
static int victim(const char *seg, const char *when, const char *then) {
  sw_keyed *k;
  if (sw_keyed_open(&k, seg, 12, NULL, SW_SEGMENT_ATTACH) != SW_OK) return 3;
  sw_decision d;
  int rc = sw_keyed_entry_at(k, atoll(when), "newcomer", 8, 1, 0, &d);
  if (rc == SW_OK && strcmp(then, "cancel") == 0) rc = sw_keyed_cancel(k, &d);
  sw_keyed_free(k);
  return rc == SW_OK ? 0 : 4;
}

static pid_t spawn(const char *seg, int64_t t, const char *spec, const char *then) {
  char when[32];
  snprintf(when, sizeof when, "%lld", (long long)t);
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("SW_TEST_KILL_AT", spec, 1);
    execl("/proc/self/exe", "check_keyed_kills", "--victim", seg, when, then, (char *)NULL);
    _exit(99);
  }
  return pid;
}

static pid_t spawn_victim(const char *seg, int64_t t, const char *spec) {
  return spawn(seg, t, spec, "-");
}

/* The invariants, checked in a child with a time bound (a hang fails it):
 * every old key holds exactly `want` passes at its time t_old, but for at
 * most one (the key whose place was being taken: fewer, or gone); the
 * newcomer at most newcomer_max; the key count is the places holding keys;
 * and then 16 keys active at once all find a place. */
static void check_after(sw_keyed *k, const scenario *sc, const char *what, int64_t t_old,
                        int64_t want, int64_t newcomer_max) {
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    alarm(20);
    int taken = 0;
    for (int i = 0; i < (sc->fill == EMPTY_PLACE ? 8 : 16); i++) {
      char key[8];
      snprintf(key, sizeof key, "old%d", i);
      int64_t p = kt_pass(k, t_old, key);
      if (p != want) CHILD_CHECK(sc->fill != EMPTY_PLACE && p < want && !taken++, 11);
    }
    CHILD_CHECK(kt_pass(k, T_NEW, "newcomer") <= newcomer_max, 12);
    sw_keyed_info in;
    CHILD_CHECK(sw_keyed_stats(k, &in) == SW_OK, 13);
    CHILD_CHECK(in.keys == kt_scanned(k, T_NEW), 14);
    if (sc->grade == SW_GRADE_CONCURRENCY) /* the newcomer's request ends */
      while (sw_keyed_exit_at(k, T_LATER, "newcomer", 8, 1, 1, 0) == SW_OK) {
      }
    for (int i = 0; i < 16; i++) { /* no place lost */
      char key[8];
      snprintf(key, sizeof key, "new%d", i);
      sw_decision d;
      CHILD_CHECK(sw_keyed_entry_at(k, T_LATER, key, strlen(key), 1, 0, &d) == SW_OK, 15);
      CHILD_CHECK(d.verdict != SW_VERDICT_BLOCK && !d.full, 16);
      CHILD_CHECK(kt_pass(k, T_LATER, key) == 1, 17);
    }
    CHILD_CHECK(sw_keyed_stats(k, &in) == SW_OK && in.keys == 16, 18);
    CHILD_CHECK(kt_scanned(k, T_LATER) == 16, 19);
    _exit(0);
  }
  int rc = wait_child(pid);
  ck_assert_msg(rc == 0, "%s, %s: invariant %d failed", sc->name, what, rc);
}

/* When the old keys were entered: long before the newcomer, or just before. */
static int64_t t_old(const scenario *sc) { return sc->fill == ACTIVE_KEYS ? T_NEW - 10 : T_OLD; }

/* A table of one bucket (16 places): the old keys as the scenario says. */
static sw_keyed *prepare(const char *name, const scenario *sc) {
  sw_options *o = sc_opts(sc);
  sw_keyed *k = NULL;
  ck_ok(sw_keyed_open(&k, name, 12, o, SW_SEGMENT_RESET));
  sw_options_free(o);
  const int n = sc->fill == EMPTY_PLACE ? 8 : 16;
  for (int i = 0; i < n; i++) {
    char key[8];
    snprintf(key, sizeof key, "old%d", i);
    kt_enter(k, t_old(sc), key, 1);
    if (sc->grade == SW_GRADE_CONCURRENCY) /* nothing in flight: evictable too */
      ck_ok(sw_keyed_exit_at(k, t_old(sc), key, strlen(key), 1, 1, 0));
  }
  return k;
}

/* The kill points one scenario's insert goes through, in order. */
static int points_of(const scenario *sc, char out[][32]) {
  int n = 0;
  const int words = 2 + (sc->grade == SW_GRADE_CONCURRENCY || sc->behavior == SW_BEHAVIOR_PACING);
  if (sc->fill == IDLE_KEYS) snprintf(out[n++], 32, "keyed-reclaim");
  if (sc->fill != EMPTY_PLACE) {
    for (int i = 1; i <= words; i++) snprintf(out[n++], 32, "keyed-move:%d", i);
    snprintf(out[n++], 32, "keyed-moved");
  }
  snprintf(out[n++], 32, "keyed-busy");
  snprintf(out[n++], 32, "keyed-fill");
  if (sc->grade == SW_GRADE_QPS && sc->behavior == SW_BEHAVIOR_REJECT)
    snprintf(out[n++], 32, "keyed-sealed");
  if (sc->grade == SW_GRADE_QPS) /* its first admission, counted by the insert */
    snprintf(out[n++], 32, "keyed-first");
  snprintf(out[n++], 32, "keyed-tag");
  snprintf(out[n++], 32, "keyed-ready");
  if (sc->grade == SW_GRADE_CONCURRENCY) snprintf(out[n++], 32, "keyed-cas");
  return n;
}

/* Killed at each point: the next locker repairs, nothing is lost or
 * misplaced, the newcomer counted nothing (but its first admission, made
 * with its insert, when its key was in: keyed-ready). */
START_TEST(test_killed_at_every_point) {
  const scenario *sc = &scenarios[_i];
  char points[16][32];
  const int np = points_of(sc, points);
  for (int p = 0; p < np; p++) {
    char name[64], spec[64];
    shm_name(name, sizeof name, "kkp");
    sw_keyed *k = prepare(name, sc);
    snprintf(spec, sizeof spec, "%.31s", points[p]);
    pid_t pid = spawn_victim(name, T_NEW, spec);
    ck_assert_msg(wait_child(pid) == 128 + SIGKILL, "%s: not killed at %s", sc->name, spec);
    check_after(k, sc, spec, t_old(sc), 1,
                sc->grade == SW_GRADE_QPS && strcmp(spec, "keyed-ready") == 0);
    sw_keyed_free(k);
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

/* Stopped at each point (holding the bucket's lock but for keyed-cas):
 * the old keys' entries go on meanwhile, without a lock; continued, the
 * newcomer's entry finishes, and it counts exactly once or was refused. */
START_TEST(test_stopped_at_every_point) {
  const scenario *sc = &scenarios[_i];
  char points[16][32];
  const int np = points_of(sc, points);
  for (int p = 0; p < np; p++) {
    char name[64], spec[64];
    shm_name(name, sizeof name, "ksp");
    sw_keyed *k = prepare(name, sc);
    snprintf(spec, sizeof spec, strchr(points[p], ':') ? "%.31s:stop" : "%.31s:1:stop", points[p]);
    pid_t pid = spawn_victim(name, T_NEW, spec);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
    ck_assert_msg(WIFSTOPPED(st), "%s: not stopped at %s", sc->name, spec);
    /* entries of the old keys while it stands still (lock-free; the key
     * whose place it is taking may have its words moving: such an entry
     * waits for the lock 2 s, then reports SW_EBUSY and counts nothing) */
    int busy = 0;
    /* (old0, whose place it takes, only once: its entry's wait is 2 s) */
    const int from =
        sc->fill == EMPTY_PLACE || (_i == 1 && strcmp(points[p], "keyed-move:1") == 0) ? 0 : 1;
    for (int i = from; i < (sc->fill == EMPTY_PLACE ? 8 : 16); i++) {
      char key[8];
      snprintf(key, sizeof key, "old%d", i);
      sw_decision d;
      int rc = sw_keyed_entry_at(k, T_NEW, key, strlen(key), 1, 0, &d);
      ck_assert_msg(rc == SW_OK || (rc == SW_EBUSY && !busy++), "%s at %s: %s", sc->name, spec,
                    sw_err_name(rc));
      if (sc->grade == SW_GRADE_CONCURRENCY && rc == SW_OK)
        ck_ok(sw_keyed_exit_at(k, T_NEW, key, strlen(key), 1, 1, 0));
    }
    kill(pid, SIGCONT);
    ck_assert_msg(wait_child(pid) == 0, "%s: victim failed after %s", sc->name, spec);
    /* each old key: its entry at T_NEW (and its earlier one if that was in
     * the interval), but for the one whose place was taken (old0, maybe
     * not entered while it stood still) */
    check_after(k, sc, spec, T_NEW, sc->fill == ACTIVE_KEYS ? 2 : 1, 1);
    sw_keyed_free(k);
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

/* A repairer killed while it repairs a dead inserter's bucket: the next
 * locker repairs again, and the table is whole. */
START_TEST(test_repairer_killed) {
  const scenario *sc = &scenarios[1];
  char name[64];
  shm_name(name, sizeof name, "krep");
  sw_keyed *k = prepare(name, sc);
  ck_assert_int_eq(wait_child(spawn_victim(name, T_NEW, "keyed-fill")), 128 + SIGKILL);
  /* the second process takes the dead inserter's lock and dies repairing */
  ck_assert_int_eq(wait_child(spawn_victim(name, T_NEW, "keyed-repair")), 128 + SIGKILL);
  check_after(k, sc, "keyed-repair", t_old(sc), 1, 0);
  sw_keyed_free(k);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* An eviction that chose a concurrency key with nothing in flight, then
 * stopped before moving its words: the key's entry comes meanwhile (a
 * request in flight); continued, the eviction finds it in the move's CAS
 * and leaves the key, whose exit then finds it. */
START_TEST(test_eviction_meets_an_entry) {
  const scenario *sc = &scenarios[7]; /* concurrency, active keys (evict) */
  char name[64];
  shm_name(name, sizeof name, "kevict");
  sw_keyed *k = prepare(name, sc); /* 16 keys, nothing in flight */
  pid_t pid = spawn_victim(name, T_NEW, "keyed-evict:1:stop");
  int st;
  ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
  ck_assert(WIFSTOPPED(st));
  for (int i = 0; i < 16; i++) { /* each key: a request in flight */
    char key[8];
    snprintf(key, sizeof key, "old%d", i);
    ck_assert_int_eq(kt_enter(k, T_NEW, key, 1).verdict, SW_VERDICT_PASS);
  }
  kill(pid, SIGCONT);
  ck_assert_int_eq(wait_child(pid), 0); /* refused: every key has a request in flight */
  ck_assert_int_eq(kt_pass(k, T_NEW, "newcomer"), -1);
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "old%d", i);
    ck_assert_msg(sw_keyed_exit_at(k, T_NEW, key, strlen(key), 1, 1, 0) == SW_OK,
                  "%s lost its request in flight", key);
  }
  sw_keyed_free(k);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A cancel killed between its steps has given back some of the entry and
 * nothing more: the newcomer's pass (reject, concurrency) or its queue
 * place (pacing); no other key loses anything; a stopped one delays
 * nobody and, continued, gives back the rest. */
START_TEST(test_cancel_killed_and_stopped) {
  const int kinds[] = {0, 3, 5}; /* reject, pacing, concurrency (an empty place or idle keys) */
  for (int i = 0; i < 3; i++) {
    const scenario *sc = &scenarios[kinds[i]];
    for (int stop = 0; stop < 2; stop++) {
      char name[64];
      shm_name(name, sizeof name, "kcancel");
      sw_keyed *k = prepare(name, sc);
      pid_t pid = spawn(name, T_NEW, stop ? "keyed-cancel:1:stop" : "keyed-cancel", "cancel");
      int st;
      ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
      if (stop) {
        ck_assert(WIFSTOPPED(st));
        ck_assert_int_eq(kt_enter(k, T_NEW, "old1", 1).verdict, SW_VERDICT_PASS); /* nobody waits */
        kill(pid, SIGCONT);
        ck_assert_int_eq(wait_child(pid), 0);
      } else {
        ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
      }
      sw_keyed_key s;
      ck_assert_int_eq(sw_keyed_lookup_at(k, T_NEW, "newcomer", 8, &s), 1);
      const bool queue = sc->behavior == SW_BEHAVIOR_PACING; /* given back first */
      ck_assert_msg(s.pass == (queue && !stop), "%s, %s: pass %lld", sc->name,
                    stop ? "stopped" : "killed", (long long)s.pass);
      ck_assert_int_le(s.in_flight, stop ? 0 : 1);
      if (sc->fill != EMPTY_PLACE) ck_assert_int_eq(kt_pass(k, T_NEW, "old1"), stop);
      sw_keyed_free(k);
      ck_ok(sw_segment_unlink(name));
    }
  }
}
END_TEST

/* Two processes enter one new key at once: one inserts it (stopped here
 * inside the bucket's lock), the other finds it under the lock when it
 * gets it and counts in it — one insert, both passes, in one place. */
typedef struct entry_arg {
  sw_keyed *k;
  int rc;
  sw_decision d;
} entry_arg;

static void *enter_newcomer(void *arg) {
  entry_arg *a = arg;
  a->rc = sw_keyed_entry_at(a->k, T_NEW, "newcomer", 8, 1, 0, &a->d);
  return NULL;
}

START_TEST(test_same_new_key_twice) {
  const scenario *sc = &scenarios[0]; /* reject, an empty place */
  char name[64];
  shm_name(name, sizeof name, "ktwice");
  sw_keyed *k = prepare(name, sc);
  pid_t pid = spawn_victim(name, T_NEW, "keyed-busy:1:stop");
  int st;
  ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
  ck_assert(WIFSTOPPED(st));
  entry_arg a = {.k = k};
  pthread_t tid;
  ck_assert_int_eq(pthread_create(&tid, NULL, enter_newcomer, &a), 0);
  struct timespec ts = {0, 200 * 1000000L}; /* it waits for the bucket's lock */
  nanosleep(&ts, NULL);
  kill(pid, SIGCONT);
  ck_assert_int_eq(wait_child(pid), 0);
  pthread_join(tid, NULL);
  ck_assert_int_eq(a.rc, SW_OK);
  ck_assert_int_eq(a.d.verdict, SW_VERDICT_PASS);
  ck_assert_int_eq(kt_pass(k, T_NEW, "newcomer"), 2);
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(k, &in));
  ck_assert_int_eq(in.inserted, 8 + 1); /* the 8 old keys and the newcomer, once */
  ck_assert_int_eq(in.keys, 9);
  sw_keyed_free(k);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* An entry stopped between reading its key's words and its CAS, while its
 * place changes hands 102,400 times (each time a new key whose entry is
 * blocked, so its window words look as the stopped entry saw its own):
 * continued, the entry counts in its own key, never in the place's latest.
 * The newcomer is there already, in the bucket's first place: _i 0, last
 * seen long ago (its older window not sealed: the general path, its place
 * idle); 1, seen at the entry's time (the fast path), its place taken when
 * it has gone idle. */
START_TEST(test_entry_stopped_across_reuses) {
  const int fast = _i;
  char name[64];
  shm_name(name, sizeof name, "kreuse");
  sw_options *o = rule(5);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, SW_FULL_EVICT));
  sw_keyed *k = NULL;
  ck_ok(sw_keyed_open(&k, name, 12, o, SW_SEGMENT_RESET));
  sw_options_free(o);
  kt_enter(k, fast ? T_NEW : T_OLD, "newcomer", 1); /* the bucket's first place */
  /* 15 more keys fill the others */
  pid_t pid = spawn_victim(name, T_NEW, "keyed-cas:1:stop");
  int st;
  ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
  ck_assert(WIFSTOPPED(st));
  sw_keyed_key first;
  uint64_t cursor = 0;
  ck_assert_int_eq(sw_keyed_scan_at(k, T_NEW, &cursor, &first, 1), 1);
  ck_assert_int_eq(first.len, 8);
  for (int i = 0; i < 15; i++) {
    char key[8];
    snprintf(key, sizeof key, "full%d", i);
    kt_enter(k, T_NEW, key, 1);
  }
  /* 102,400 keys in turn take the newcomer's place: each entry blocked
   * (n over the threshold), so each key is idle at once and its place is
   * the first idle one (after the newcomer's interval, if it counted) */
  const int64_t t = fast ? T_NEW + 1000 : T_NEW;
  char key[24];
  for (int i = 0; i < 102400; i++) {
    snprintf(key, sizeof key, "reuse%06d", i);
    sw_decision d;
    ck_ok(sw_keyed_entry_at(k, t, key, strlen(key), 100, 0, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  }
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(k, &in));
  ck_assert_int_ge(in.reclaimed, 102400);
  kill(pid, SIGCONT);
  ck_assert_int_eq(wait_child(pid), 0);
  ck_assert_int_le(kt_pass(k, t, key), 0); /* the place's latest key (gone, or holding none) */
  ck_assert_int_eq(kt_pass(k, T_NEW, "newcomer"), 1); /* its one pass at T_NEW, in its own key */
  for (int i = 0; i < 15; i++) {
    char fk[8];
    snprintf(fk, sizeof fk, "full%d", i);
    ck_assert_int_eq(kt_pass(k, T_NEW, fk), 1);
  }
  sw_keyed_free(k);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--victim") == 0) return victim(argv[2], argv[3], argv[4]);
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("keyed_kills");
  TCase *tc = tcase_create("points");
  tcase_set_timeout(tc, 600);
  const int n = (int)(sizeof scenarios / sizeof scenarios[0]);
  tcase_add_loop_test(tc, test_killed_at_every_point, 0, n);
  tcase_add_loop_test(tc, test_stopped_at_every_point, 0, n);
  tcase_add_test(tc, test_repairer_killed);
  tcase_add_test(tc, test_eviction_meets_an_entry);
  tcase_add_test(tc, test_cancel_killed_and_stopped);
  tcase_add_test(tc, test_same_new_key_twice);
  tcase_add_loop_test(tc, test_entry_stopped_across_reuses, 0, 2);
  suite_add_tcase(s, tc);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
