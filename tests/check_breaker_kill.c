/* SPDX-License-Identifier: Apache-2.0 */
/* A shared breaker whose processes die or pause anywhere (issue 24): for
 * every kill point between two shared writes of a transition, a probe's
 * lease, its end or its cancel (libsw/breaker/breaker.h lists them), a
 * process is SIGKILLed there, and another is SIGSTOPped there while this
 * one makes many transitions; then it goes on. Checked throughout: the
 * breaker reaches a decision within open_for + probe_timeout (never wedged
 * half-open, never refusing for ever), never more probes at once than
 * half_open_calls, and a late exit, done mark or cancel of the paused
 * process decides nothing of a later period. Then probes of earlier
 * periods, with and without more than 2^20 transitions between: they
 * decide nothing. Time is explicit: the processes are told their times. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static int g_main_pid;

#define OPEN_MS 100
#define PT 200 /* probe timeout */
#define STEP 10
#define T0 INT64_C(100000) /* the victim's time */
#define STEPS 300          /* driven while the victim is stopped, and after */
/* the longest a breaker may refuse every entry: the time window, then a
 * lost probe's timeout, at the driver's granularity */
#define DECIDE_WITHIN (OPEN_MS + PT + 2 * STEP)

static sw_options *kill_rule(int calls) {
  sw_options *o;
  if (sw_options_create(&o) != SW_OK) abort();
  sw_options_set(o, SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_COUNT);
  sw_options_set(o, SW_OPT_BREAKER_COUNT, 0); /* one error opens */
  sw_options_set(o, SW_OPT_BREAKER_MIN_REQUESTS, 1);
  sw_options_set_double(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, OPEN_MS / 1000.0);
  sw_options_set(o, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, PT);
  sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, calls);
  return o;
}

static sw_breaker *fresh(char *name, const char *tag, int calls) {
  snprintf(name, 64, "swbrkk-%d-%s", g_main_pid, tag);
  sw_options *o = kill_rule(calls);
  sw_breaker *b = NULL;
  ck_ok(sw_breaker_open(&b, name, o, SW_SEGMENT_RESET));
  sw_options_free(o);
  return b;
}

static sw_breaker_info info(const sw_breaker *b, int64_t t) {
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, t, &in));
  return in;
}

/* ------------------------------------------------------------- the victim */

/* What a victim does, at T0 (its calls go on, with T0, after a pause):
 *   probe-good / probe-bad / probe-cancel: enter; if it is a probe, end it
 *     at T0 + 1 well, badly, or cancelled;
 *   enter: enter, nothing more;
 *   trip: one failed exit (no entry): a closed breaker opens. */
static int victim(const char *name, const char *mode) {
  sw_breaker *b;
  sw_options *o = kill_rule(1);
  int rc = sw_breaker_open(&b, name, o, 0);
  sw_options_free(o);
  if (rc != SW_OK) return 3;
  sw_decision d;
  if (strcmp(mode, "trip") == 0) {
    rc = sw_breaker_exit_at(b, T0, NULL, 1, SW_EXIT_ERROR);
  } else if ((rc = sw_breaker_entry_at(b, T0, &d)) == SW_OK && d.probe != 0) {
    if (strcmp(mode, "probe-good") == 0) rc = sw_breaker_exit_at(b, T0 + 1, &d, 1, 0);
    if (strcmp(mode, "probe-bad") == 0) rc = sw_breaker_exit_at(b, T0 + 1, &d, 1, SW_EXIT_ERROR);
    if (strcmp(mode, "probe-cancel") == 0)
      rc = sw_breaker_exit_at(b, T0 + 1, &d, 0, SW_EXIT_CANCEL);
  }
  sw_breaker_free(b);
  return rc == SW_OK ? 0 : 4;
}

/* Start a victim stopped (stop) or killed at its n-th pass of point. */
static pid_t run_victim(const char *point, int n, bool stop, const char *name,
                        const char *mode) {
  char at[96];
  snprintf(at, sizeof at, "%s:%d%s", point, n, stop ? ":stop" : "");
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("SW_TEST_KILL_AT", at, 1);
    execl("/proc/self/exe", "victim", "--victim", name, mode, (char *)NULL);
    _exit(99);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
  if (stop)
    ck_assert_msg(WIFSTOPPED(status), "victim (%s) did not stop at %s: status %d", mode, point,
                  status);
  else
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "victim (%s) was not killed at %s: status %d", mode, point, status);
  return pid;
}

/* ------------------------------------------------------------- the driver */

/* This process's traffic, one step of STEP ms at a time: each step ends
 * the probes it holds (half of them badly), then enters twice; a pass that
 * is not a probe ends at once, one in three badly (one error opens). */
typedef struct driver {
  sw_breaker *b;
  int calls;
  int64_t t, last_pass;
  uint32_t rng;
  sw_decision held[2];
  int nheld;
  int64_t victim_lease_until; /* a lease the victim may hold: live until then */
  int64_t transitions_seen;
} driver;

static uint32_t rnd(driver *dr) {
  dr->rng = dr->rng * 1103515245u + 12345u;
  return dr->rng >> 16;
}

static int64_t transitions(const sw_breaker_info *in) {
  return in->opened + in->half_opened + in->closed + in->reopened;
}

static void step(driver *dr, bool keep_probes) {
  const int64_t t = dr->t;
  if (!keep_probes) {
    for (int i = 0; i < dr->nheld; i++)
      ck_ok(sw_breaker_exit_at(dr->b, t, &dr->held[i], 1, rnd(dr) % 2 ? SW_EXIT_ERROR : 0));
    dr->nheld = 0;
  }
  for (int k = 0; k < 2; k++) {
    sw_decision d;
    ck_ok(sw_breaker_entry_at(dr->b, t, &d));
    if (d.verdict == SW_VERDICT_BLOCK) {
      ck_assert_msg(t - dr->last_pass <= DECIDE_WITHIN,
                    "no decision: every entry refused from %lld to %lld (retry after %lld)",
                    (long long)dr->last_pass, (long long)t, (long long)d.retry_after_ms);
      continue;
    }
    dr->last_pass = t;
    if (d.probe != 0) {
      ck_assert_int_lt(dr->nheld, 2);
      dr->held[dr->nheld++] = d;
    } else {
      ck_ok(sw_breaker_exit_at(dr->b, t, &d, 1, rnd(dr) % 3 == 0 ? SW_EXIT_ERROR : 0));
    }
  }
  /* probes at once: ours (each taken at most a step ago: live) and the victim's */
  const int live = dr->nheld + (t < dr->victim_lease_until);
  ck_assert_msg(live <= dr->calls, "t=%lld: %d probes at once, %d allowed", (long long)t, live,
                dr->calls);
  dr->t += STEP;
}

static void drive(driver *dr, int steps) {
  for (int i = 0; i < steps; i++) step(dr, false);
}

/* Drive until this process holds a probe (the breaker half-open, every
 * place held), and keep it. */
static void settle_holding_probe(driver *dr) {
  for (int i = 0; dr->nheld == 0 || dr->nheld < dr->calls; i++) {
    ck_assert_int_lt(i, 1000);
    step(dr, dr->nheld > 0);
  }
}

/* ------------------------------------------------------------ the points */

typedef struct point {
  const char *name;
  const char *setup;   /* "open": open until T0; "closed" */
  const char *mode;    /* the victim's (see victim) */
  bool holds_lease;    /* stopped there, the victim holds a live lease */
  int counter;         /* the transition it has made and not counted yet, or -1 */
} point;

enum { C_OPENED, C_HALF_OPENED, C_CLOSED, C_REOPENED };

static const point points[] = {
    {"breaker-half-open", "open", "probe-bad", false, C_HALF_OPENED},
    {"breaker-lease-clock", "open", "probe-bad", false, -1},
    {"breaker-lease", "open", "probe-bad", true, -1},
    {"breaker-probe", "open", "probe-bad", true, -1},
    {"breaker-reopened", "open", "probe-bad", false, C_REOPENED},
    {"breaker-probe-end", "open", "probe-good", true, -1},
    {"breaker-probe-done", "open", "probe-good", false, -1},
    {"breaker-close-cleared", "open", "probe-good", false, -1},
    {"breaker-closed", "open", "probe-good", false, C_CLOSED},
    {"breaker-cancel", "open", "probe-cancel", true, -1},
    {"breaker-opened", "closed", "trip", false, C_OPENED},
};
#define NPOINTS ((int)(sizeof points / sizeof points[0]))

static int64_t counter(const sw_breaker_info *in, int c) {
  return c == C_OPENED ? in->opened : c == C_HALF_OPENED ? in->half_opened
                                    : c == C_CLOSED      ? in->closed
                                                         : in->reopened;
}

/* The breaker open until T0, with one failure at T0 - OPEN_MS. */
static void setup(sw_breaker *b, const char *how) {
  if (strcmp(how, "open") == 0) {
    ck_ok(sw_breaker_exit_at(b, T0 - OPEN_MS, NULL, 1, SW_EXIT_ERROR));
    ck_assert_int_eq(info(b, T0 - 1).next_probe_ms, T0);
  }
}

static driver driver_for(sw_breaker *b, int calls, const point *p, uint32_t seed) {
  driver dr = {.b = b, .calls = calls, .t = T0 + 1, .last_pass = T0, .rng = seed};
  if (p && p->holds_lease) dr.victim_lease_until = T0 + PT;
  return dr;
}

/* SIGKILL at each point: whatever the victim left, the others go on. */
START_TEST(test_killed_at_every_point) {
  const point *p = &points[_i];
  char name[64];
  sw_breaker *b = fresh(name, "k", 1);
  setup(b, p->setup);
  run_victim(p->name, 1, false, name, p->mode);
  driver dr = driver_for(b, 1, p, 7u + (uint32_t)_i);
  drive(&dr, STEPS);
  sw_breaker_info in = info(b, dr.t);
  ck_assert_msg(transitions(&in) > 20, "%s: only %lld transitions", p->name,
                (long long)transitions(&in));
  sw_breaker_free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* SIGSTOP at each point while this process makes many transitions; then
 * the victim goes on with its old view: it decides nothing (the state,
 * its times and the probes in flight are as they were; only the counter
 * of its own transition, if it made one, moves), and the breaker still
 * needs its own probes to close. */
START_TEST(test_stopped_at_every_point) {
  const point *p = &points[_i];
  char name[64];
  sw_breaker *b = fresh(name, "s", 1);
  setup(b, p->setup);
  pid_t pid = run_victim(p->name, 1, true, name, p->mode);
  driver dr = driver_for(b, 1, p, 11u + (uint32_t)_i);
  drive(&dr, STEPS);
  settle_holding_probe(&dr);
  const sw_breaker_info before = info(b, dr.t);
  ck_assert_msg(transitions(&before) > 20, "%s: only %lld transitions while stopped", p->name,
                (long long)transitions(&before));
  ck_assert_int_eq(before.state, SW_BREAKER_HALF_OPEN);
  ck_assert_int_eq(kill(pid, SIGCONT), 0);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: victim status %d", p->name,
                status);
  const sw_breaker_info after = info(b, dr.t);
  ck_assert_msg(after.state == before.state && after.state_since_ms == before.state_since_ms &&
                    after.next_probe_ms == before.next_probe_ms,
                "%s: the late victim moved the breaker: state %d since %lld -> %d since %lld",
                p->name, before.state, (long long)before.state_since_ms, after.state,
                (long long)after.state_since_ms);
  ck_assert_int_eq(after.probes_in_flight, before.probes_in_flight);
  ck_assert_int_eq(after.probes, before.probes);
  ck_assert_int_eq(after.probes_lost, before.probes_lost);
  for (int c = C_OPENED; c <= C_REOPENED; c++)
    ck_assert_msg(counter(&after, c) == counter(&before, c) + (c == p->counter),
                  "%s: counter %d went from %lld to %lld", p->name, c,
                  (long long)counter(&before, c), (long long)counter(&after, c));
  /* our probe still decides: a good one closes */
  ck_ok(sw_breaker_exit_at(b, dr.t, &dr.held[0], 1, 0));
  dr.nheld = 0;
  ck_assert_int_eq(info(b, dr.t).state, SW_BREAKER_CLOSED);
  dr.victim_lease_until = 0;
  dr.last_pass = dr.t;
  drive(&dr, STEPS);
  sw_breaker_free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* The wedge of issue 24: a closer killed after its good probe marked its
 * place done, before the CAS to CLOSED, left every place done: every entry
 * was refused (retry after 1 ms, no probe in flight) until the segment was
 * reset. The next entry closes it now, counted and told once. */
static int g_told;
static void count_closes(void *user, int32_t from, int32_t to, int64_t t, double value) {
  (void)user;
  (void)t;
  (void)value;
  if (from == SW_BREAKER_HALF_OPEN && to == SW_BREAKER_CLOSED) g_told++;
}

START_TEST(test_wedge_closed_by_the_next_entry) {
  char name[64];
  sw_breaker *b = fresh(name, "wedge", 1);
  setup(b, "open");
  run_victim("breaker-probe-done", 1, false, name, "probe-good");
  sw_breaker_info in = info(b, T0 + 1);
  ck_assert_int_eq(in.state, SW_BREAKER_HALF_OPEN);
  ck_assert_int_eq(in.probes_in_flight, 0);
  g_told = 0;
  ck_ok(sw_breaker_set_listener(b, count_closes, NULL));
  sw_decision d;
  ck_ok(sw_breaker_entry_at(b, T0 + 2, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  ck_assert_int_eq(d.probe, 0); /* closed: an ordinary pass */
  in = info(b, T0 + 2);
  ck_assert_int_eq(in.state, SW_BREAKER_CLOSED);
  ck_assert_int_eq(in.closed, 1);
  ck_assert_int_eq(g_told, 1);
  /* a helper killed in turn, after its clear or after its CAS */
  for (int k = 0; k < 2; k++) {
    const int64_t t = T0 + 1000 * (k + 1);
    ck_ok(sw_breaker_exit_at(b, t, NULL, 1, SW_EXIT_ERROR)); /* open until t + OPEN_MS */
    ck_ok(sw_breaker_entry_at(b, t + OPEN_MS, &d)); /* a probe, whose end a child makes */
    ck_assert(d.probe != 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* dies after its done mark: sw__kill_armed is read at load, so exec */
      char word[32];
      snprintf(word, sizeof word, "%lld", (long long)d.probe);
      setenv("SW_TEST_KILL_AT", "breaker-probe-done", 1);
      execl("/proc/self/exe", "victim", "--victim-end", name, word, (char *)NULL);
      _exit(99);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    run_victim(k == 0 ? "breaker-close-cleared" : "breaker-closed", 1, false, name, "enter");
    in = info(b, t + OPEN_MS + 1);
    ck_assert_int_eq(in.state, k == 0 ? SW_BREAKER_HALF_OPEN : SW_BREAKER_CLOSED);
    ck_ok(sw_breaker_entry_at(b, t + OPEN_MS + 1, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
    ck_assert_int_eq(info(b, t + OPEN_MS + 1).state, SW_BREAKER_CLOSED);
  }
  /* closes: the first, then the one helped after a clear; the helper
   * killed after its CAS did not count its own */
  ck_assert_int_eq(info(b, T0 + 5000).closed, 2);
  sw_breaker_free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* ------------------------------------------------------ earlier periods */

/* A breaker of this process (two probes a period); opened: by an error
 * at T0 - OPEN_MS, so that it is half-open from T0. */
static sw_breaker *heap_breaker(bool opened) {
  sw_options *o = kill_rule(2);
  sw_breaker *b;
  ck_ok(sw_breaker_create(&b, o));
  sw_options_free(o);
  if (opened) ck_ok(sw_breaker_exit_at(b, T0 - OPEN_MS, NULL, 1, SW_EXIT_ERROR));
  return b;
}

/* A probe of an earlier half-open period never decides the current one:
 * two probes of one period, the first reopens it; the next period begins
 * before anyone takes the second's place, and the second then fails. */
START_TEST(test_earlier_probe_decides_nothing) {
  sw_breaker *b = heap_breaker(true); /* half-open from T0 */
  sw_decision a, late, d;
  ck_ok(sw_breaker_entry_at(b, T0, &a));
  ck_ok(sw_breaker_entry_at(b, T0 + 1, &late));
  ck_assert(a.probe != 0 && late.probe != 0);
  ck_ok(sw_breaker_exit_at(b, T0 + 2, &a, 1, SW_EXIT_ERROR)); /* open until T0 + 2 + OPEN_MS */
  ck_ok(sw_breaker_entry_at(b, T0 + 2 + OPEN_MS, &d));       /* the next period's probe */
  ck_assert(d.probe != 0);
  ck_ok(sw_breaker_exit_at(b, T0 + 3 + OPEN_MS, &late, 1, SW_EXIT_ERROR));
  sw_breaker_info in = info(b, T0 + 3 + OPEN_MS);
  ck_assert_int_eq(in.state, SW_BREAKER_HALF_OPEN);
  ck_assert_int_eq(in.reopened, 1);
  /* nor does its good end count as one of the current period's */
  ck_ok(sw_breaker_exit_at(b, T0 + 3 + OPEN_MS, &late, 1, 0));
  ck_ok(sw_breaker_exit_at(b, T0 + 3 + OPEN_MS, &d, 1, 0));
  ck_assert_int_eq(info(b, T0 + 3 + OPEN_MS).state, SW_BREAKER_HALF_OPEN);
  sw_breaker_free(b);
}
END_TEST

/* A probe taken late in its period (its caller's time ahead of the next
 * period's starter's) still belongs to its own period only: the next period
 * begins after every time a prober announced. */
START_TEST(test_late_lease_decides_nothing_later) {
  sw_breaker *b = heap_breaker(true); /* half-open from T0 */
  sw_decision a, late, d;
  ck_ok(sw_breaker_entry_at(b, T0, &a));
  ck_ok(sw_breaker_entry_at(b, T0 + 150, &late)); /* a caller whose clock is ahead */
  ck_assert(late.probe != 0);
  ck_ok(sw_breaker_exit_at(b, T0 + 1, &a, 1, SW_EXIT_ERROR)); /* open until T0 + 1 + OPEN_MS */
  ck_ok(sw_breaker_entry_at(b, T0 + 1 + OPEN_MS, &d));
  ck_assert(d.probe != 0);
  sw_breaker_info in = info(b, T0 + 1 + OPEN_MS);
  ck_assert_int_eq(in.state_since_ms, T0 + 151); /* after the late prober's time */
  ck_ok(sw_breaker_exit_at(b, T0 + 2 + OPEN_MS, &late, 1, SW_EXIT_ERROR));
  ck_assert_int_eq(info(b, T0 + 2 + OPEN_MS).state, SW_BREAKER_HALF_OPEN);
  ck_ok(sw_breaker_exit_at(b, T0 + 2 + OPEN_MS, &d, 1, SW_EXIT_ERROR));
  ck_assert_int_eq(info(b, T0 + 2 + OPEN_MS).state, SW_BREAKER_OPEN);
  sw_breaker_free(b);
}
END_TEST

/* An exit with a stale time (a caller's clock read long before) moves no
 * time back: a period that began at clock + 1, after a late prober's time,
 * reopens no earlier than that, so the next period begins after it and its
 * words are not the earlier period's. */
START_TEST(test_stale_exit_moves_no_time_back) {
  sw_breaker *b = heap_breaker(true); /* half-open from T0 */
  sw_decision a, late, p1, p2, d;
  ck_ok(sw_breaker_entry_at(b, T0, &a));
  ck_ok(sw_breaker_entry_at(b, T0 + 150, &late)); /* the clock: T0 + 150 */
  ck_ok(sw_breaker_exit_at(b, T0 + 1, &a, 1, SW_EXIT_ERROR)); /* open until T0 + 101 */
  ck_ok(sw_breaker_entry_at(b, T0 + 101, &p1)); /* a period from T0 + 151 */
  ck_ok(sw_breaker_entry_at(b, T0 + 101, &p2));
  ck_assert(p1.probe != 0 && p2.probe != 0);
  ck_assert_int_eq(info(b, T0 + 101).state_since_ms, T0 + 151);
  ck_ok(sw_breaker_exit_at(b, T0 + 2, &p1, 1, SW_EXIT_ERROR)); /* stale: open until T0 + 251 */
  sw_breaker_info in = info(b, T0 + 2);
  ck_assert_int_eq(in.state, SW_BREAKER_OPEN);
  ck_assert_int_eq(in.next_probe_ms, T0 + 151 + OPEN_MS);
  ck_ok(sw_breaker_entry_at(b, in.next_probe_ms, &d));
  ck_assert(d.probe != 0);
  ck_ok(sw_breaker_exit_at(b, in.next_probe_ms, &p2, 1, SW_EXIT_ERROR)); /* the last period's */
  ck_assert_int_eq(info(b, in.next_probe_ms).state, SW_BREAKER_HALF_OPEN);
  sw_breaker_free(b);
}
END_TEST

/* Done marks of an earlier period are not the current one's: a period that
 * closed with its two places done, then a period whose first good probe
 * alone does not close it. */
START_TEST(test_earlier_done_marks_count_nothing) {
  sw_breaker *b = heap_breaker(false);
  int64_t t = T0;
  for (int round = 0; round < 3; round++) {
    ck_ok(sw_breaker_exit_at(b, t, NULL, 1, SW_EXIT_ERROR));
    t += OPEN_MS;
    sw_decision p[2];
    ck_ok(sw_breaker_entry_at(b, t, &p[0]));
    ck_assert(p[0].probe != 0);
    ck_ok(sw_breaker_exit_at(b, t, &p[0], 1, 0));
    ck_assert_msg(info(b, t).state == SW_BREAKER_HALF_OPEN,
                  "round %d: one good probe of two closed the breaker", round);
    ck_ok(sw_breaker_entry_at(b, t, &p[1]));
    ck_assert(p[1].probe != 0);
    ck_ok(sw_breaker_exit_at(b, t, &p[1], 1, 0));
    ck_assert_int_eq(info(b, t).state, SW_BREAKER_CLOSED);
    t += 1;
  }
  sw_breaker_free(b);
}
END_TEST

/* A probe held across more than 2^20 transitions (a process paused that
 * long: 20 bits held the period in libsw 0.1's words, and the words came
 * back bit for bit), here with explicit times in one process: its late end,
 * bad or good, decides nothing. Each period ends at a time in the past (a
 * caller's stale clock), so only the breaker's own clock moves forward. */
START_TEST(test_probe_paused_across_2_20_transitions) {
  sw_breaker *b = heap_breaker(true); /* half-open from T0 */
  sw_decision a, paused, d;
  ck_ok(sw_breaker_entry_at(b, T0, &a));
  ck_ok(sw_breaker_entry_at(b, T0, &paused)); /* place 1, never taken again below */
  ck_assert(paused.probe != 0);
  ck_ok(sw_breaker_exit_at(b, T0, &a, 1, SW_EXIT_ERROR));
  int64_t t = T0;
  const int64_t cycles = INT64_C(1) << 19; /* 2 transitions each: 2^20, back to its period's bits */
  for (int64_t k = 0; k < cycles; k++) {
    sw_breaker_info in;
    ck_ok(sw_breaker_stats_at(b, T0, &in));
    if (in.next_probe_ms > t) t = in.next_probe_ms;
    ck_ok(sw_breaker_entry_at(b, t, &d)); /* OPEN -> HALF_OPEN, and the probe */
    if (k == cycles - 1) break;
    ck_ok(sw_breaker_exit_at(b, T0, &d, 1, SW_EXIT_ERROR)); /* HALF_OPEN -> OPEN */
  }
  ck_assert(d.probe != 0);
  sw_breaker_info in = info(b, t);
  ck_assert_int_eq(in.half_opened + in.reopened + in.opened, (INT64_C(1) << 20) + 2);
  ck_assert_int_eq(in.state, SW_BREAKER_HALF_OPEN);
  ck_ok(sw_breaker_exit_at(b, t, &paused, 1, SW_EXIT_ERROR)); /* late and bad */
  ck_assert_int_eq(info(b, t).state, SW_BREAKER_HALF_OPEN);
  ck_assert_int_eq(info(b, t).reopened, in.reopened);
  ck_ok(sw_breaker_exit_at(b, t, &paused, 1, 0)); /* late and good: not one of the two */
  ck_ok(sw_breaker_exit_at(b, t, &d, 1, 0));
  ck_assert_int_eq(info(b, t).state, SW_BREAKER_HALF_OPEN);
  ck_ok(sw_breaker_exit_at(b, t, &paused, 0, SW_EXIT_CANCEL)); /* late cancel: frees nothing */
  ck_assert_int_eq(info(b, t).probes_in_flight, 0);
  sw_decision e;
  ck_ok(sw_breaker_entry_at(b, t, &e)); /* the second place: free, a probe */
  ck_assert(e.probe != 0);
  ck_ok(sw_breaker_exit_at(b, t, &e, 1, 0));
  ck_assert_int_eq(info(b, t).state, SW_BREAKER_CLOSED);
  sw_breaker_free(b);
}
END_TEST

/* A second kind of victim: ends (well) the probe whose word is given, at T0 + 2. */
static int end_victim(const char *name, const char *word) {
  sw_breaker *b;
  sw_options *o = kill_rule(1);
  int rc = sw_breaker_open(&b, name, o, 0);
  sw_options_free(o);
  if (rc != SW_OK) return 3;
  sw_decision d = {.probe = atoll(word)};
  rc = sw_breaker_exit_at(b, T0 + 2, &d, 1, 0);
  sw_breaker_free(b);
  return rc == SW_OK ? 0 : 4;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--victim") == 0) return victim(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--victim-end") == 0) return end_victim(argv[2], argv[3]);
  g_main_pid = (int)getpid();
  Suite *s = suite_create("breaker_kill");
  TCase *tc = tcase_create("every point");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_killed_at_every_point, 0, NPOINTS);
  tcase_add_loop_test(tc, test_stopped_at_every_point, 0, NPOINTS);
  tcase_add_test(tc, test_wedge_closed_by_the_next_entry);
  suite_add_tcase(s, tc);
  SW_TCASE(s, "earlier periods", test_earlier_probe_decides_nothing,
           test_late_lease_decides_nothing_later, test_stale_exit_moves_no_time_back,
           test_earlier_done_marks_count_nothing,
           test_probe_paused_across_2_20_transitions);
  return sw_test_run(s);
}
