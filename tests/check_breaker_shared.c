/* SPDX-License-Identifier: Apache-2.0 */
/* Circuit breakers shared by processes and threads: one breaker in a
 * segment for every process; four processes on a failing upstream all see
 * it open within one stat interval; exactly one probe goes through in
 * half-open across all of them; the prober killed with SIGKILL (by the
 * test, or at the library's kill points) delays recovery by exactly the
 * probe timeout; corrupt and foreign segments are refused; and threads
 * racing on one breaker lose no count and let exactly the permitted probes
 * through (run under ThreadSanitizer by tests/run-all.sh). Time is explicit
 * everywhere: the processes step through a clock the test advances. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static int g_main_pid;

static void seg_name(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "swbrk-%d-%d-%s", g_main_pid, (int)getpid(), tag);
}

/* A rule (plain calls: victims run outside Check's runner). */
static sw_options *rule_opts(int strategy, double count, int64_t min_requests, double window_sec,
                             int64_t probe_timeout_ms) {
  sw_options *o;
  if (sw_options_create(&o) != SW_OK) abort();
  sw_options_set(o, SW_OPT_BREAKER_STRATEGY, strategy);
  sw_options_set_double(o, SW_OPT_BREAKER_COUNT, count);
  sw_options_set(o, SW_OPT_BREAKER_MIN_REQUESTS, min_requests);
  sw_options_set_double(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, window_sec);
  sw_options_set(o, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, probe_timeout_ms);
  return o;
}

static sw_breaker *open_shared(const char *name, const sw_options *o, uint32_t flags) {
  sw_breaker *b = NULL;
  ck_ok(sw_breaker_open(&b, name, o, flags));
  return b;
}

/* A new breaker named after tag (into name[64]) with the rule o, which it frees. */
static sw_breaker *fresh(char *name, const char *tag, sw_options *o) {
  seg_name(name, 64, tag);
  sw_breaker *b = open_shared(name, o, SW_SEGMENT_RESET);
  sw_options_free(o);
  return b;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static int state_at(const sw_breaker *b, int64_t t) {
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, t, &in));
  return in.state;
}

/* ------------------------------------------------------ one breaker, two maps */

START_TEST(test_two_handles_one_breaker) {
  char name[64];
  seg_name(name, sizeof name, "two");
  sw_options *o = rule_opts(SW_BREAKER_ERROR_COUNT, 1, 1, 1, 500);
  sw_breaker *a = open_shared(name, o, SW_SEGMENT_RESET);
  /* another process's rule beyond the geometry does not matter: the creator's holds */
  ck_ok(sw_options_set_double(o, SW_OPT_BREAKER_COUNT, 100));
  sw_breaker *b = open_shared(name, o, 0);
  sw_options_free(o);
  ck_ok(sw_breaker_exit_at(a, 1000, NULL, 1, SW_EXIT_ERROR));
  ck_ok(sw_breaker_exit_at(b, 1000, NULL, 1, SW_EXIT_ERROR)); /* 2 > 1: opens, through b */
  ck_assert_int_eq(state_at(a, 1000), SW_BREAKER_OPEN);
  sw_decision d;
  ck_ok(sw_breaker_entry_at(a, 1500, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 500);
  sw_breaker_free(a);
  sw_breaker_free(b);
  /* a reader sees it too, and may not write */
  sw_breaker *ro = open_shared(name, NULL, SW_SEGMENT_READONLY);
  ck_assert_int_eq(state_at(ro, 1500), SW_BREAKER_OPEN);
  ck_sw(sw_breaker_entry_at(ro, 1500, &d), SW_EPERM);
  sw_breaker_free(ro);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A segment whose breaker block was damaged, or a file that is not a
 * segment, is refused with a specific error, never a crash. */
START_TEST(test_corrupt_and_foreign) {
  char name[64], path[128];
  seg_name(name, sizeof name, "corrupt");
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  sw_breaker *b = open_shared(name, NULL, SW_SEGMENT_RESET);
  sw_breaker_free(b);
  /* the breaker block starts right after the 64-byte-rounded header: damage its magic */
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  unsigned char buf[4096];
  const ssize_t len = pread(fd, buf, sizeof buf, 0);
  ck_assert_int_gt(len, 256);
  uint32_t magic = 0x4b525753u; /* "SWRK" */
  unsigned char *at = memmem(buf, (size_t)len, &magic, sizeof magic);
  ck_assert_ptr_nonnull(at);
  ck_assert_int_eq(pwrite(fd, "XXXX", 4, at - buf), 4);
  close(fd);
  ck_sw(sw_breaker_open(&b, name, NULL, 0), SW_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "bad magic"));
  ck_sw(sw_breaker_open(&b, name, NULL, SW_SEGMENT_READONLY), SW_ECORRUPT);
  /* truncated */
  ck_assert_int_eq(truncate(path, 100), 0);
  ck_sw(sw_breaker_open(&b, name, NULL, 0), SW_ECORRUPT);
  /* not libsw's at all */
  fd = open(path, O_RDWR | O_TRUNC);
  memset(buf, 0x5a, sizeof buf);
  ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
  close(fd);
  ck_sw(sw_breaker_open(&b, name, NULL, SW_SEGMENT_CREATE), SW_EFOREIGN);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* ------------------------------------------------ four processes, one clock */

#define NPROC 4
#define T_START INT64_C(100000)
#define T_FAIL INT64_C(100500)     /* the upstream starts failing */
#define STEP 10
#define INTERVAL 1000
#define WINDOW_MS 2000
#define PROBE_TIMEOUT 300
#define MAX_STEPS 1000
#define T_OPEN (T_FAIL + 500)      /* 101000: the first window of errors only */
#define T_HEAL (T_OPEN + WINDOW_MS) /* the upstream is healthy again by the first probe */

/* The rule of the four processes' breaker (each opens it with the same). */
static sw_options *four_rule(void) {
  sw_options *o = rule_opts(SW_BREAKER_ERROR_RATIO, 0.5, 10, WINDOW_MS / 1000.0, PROBE_TIMEOUT);
  sw_options_set(o, SW_OPT_BREAKER_STAT_INTERVAL_MS, INTERVAL);
  return o;
}

typedef struct clockwork {
  _Atomic int failed;   /* a worker's error: the code it exits with */
  _Atomic int64_t t;
  _Atomic int step;     /* advanced by the parent; -1: stop */
  _Atomic int acks;     /* children done with the step */
  _Atomic int victim;   /* pid of the first prober, which the parent kills */
  _Atomic int64_t first_block[NPROC];
  _Atomic int passes[MAX_STEPS];
  _Atomic int probes[MAX_STEPS];
} clockwork;

/* A worker: waits for each step of the clock, then calls the upstream
 * through the breaker 3 times (once from the first probe time on). */
#define WORKER_FAIL(code)                                                         \
  do {                                                                            \
    fprintf(stderr, "worker %d: %s\n", id, sw_last_error());                     \
    atomic_store(&cw->failed, code);                                              \
    _exit(code);                                                                  \
  } while (0)

static void worker(clockwork *cw, int id, const char *name) {
  sw_breaker *b;
  sw_options *o = four_rule();
  if (sw_breaker_open(&b, name, o, 0) != SW_OK) WORKER_FAIL(3);
  sw_options_free(o);
  int seen = 0;
  for (;;) {
    int step;
    while ((step = atomic_load(&cw->step)) == seen) sleep_us(50);
    if (step < 0) break;
    seen = step;
    const int64_t t = atomic_load(&cw->t);
    const int calls = t < T_HEAL ? 3 : 1;
    for (int i = 0; i < calls; i++) {
      sw_decision d;
      if (sw_breaker_entry_at(b, t, &d) != SW_OK) WORKER_FAIL(4);
      if (d.verdict == SW_VERDICT_BLOCK) {
        int64_t none = 0;
        atomic_compare_exchange_strong(&cw->first_block[id], &none, t);
        continue;
      }
      atomic_fetch_add(&cw->passes[step], 1);
      if (d.probe != 0) {
        atomic_fetch_add(&cw->probes[step], 1);
        int zero = 0;
        if (atomic_compare_exchange_strong(&cw->victim, &zero, (int)getpid())) {
          atomic_fetch_add(&cw->acks, 1); /* holds the probe until killed */
          for (;;) pause();
        }
      }
      /* the upstream: failing from T_FAIL until the probes, healthy after */
      const bool failed = t >= T_FAIL && t < T_HEAL;
      if (sw_breaker_exit_at(b, t, &d, 5, failed ? SW_EXIT_ERROR : 0) != SW_OK) WORKER_FAIL(5);
    }
    atomic_fetch_add(&cw->acks, 1);
  }
  sw_breaker_free(b);
  _exit(0);
}

START_TEST(test_four_processes) {
  char name[64];
  sw_breaker *b = fresh(name, "four", four_rule());
  clockwork *cw = mmap(NULL, sizeof *cw, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
  ck_assert_ptr_ne(cw, MAP_FAILED);
  memset(cw, 0, sizeof *cw);
  pid_t kids[NPROC];
  for (int i = 0; i < NPROC; i++) {
    fflush(stderr);
    if ((kids[i] = fork()) == 0) worker(cw, i, name);
    ck_assert_int_gt(kids[i], 0);
  }
  int alive = NPROC, victim_step = -1;
  const int64_t t_end = T_FAIL + INTERVAL + WINDOW_MS + 2 * PROBE_TIMEOUT;
  int step = 0;
  for (int64_t t = T_START; t <= t_end; t += STEP) {
    ck_assert_int_lt(step + 1, MAX_STEPS);
    atomic_store(&cw->acks, 0);
    atomic_store(&cw->t, t);
    atomic_store(&cw->step, ++step);
    for (long waited = 0; atomic_load(&cw->acks) < alive; waited++) {
      ck_assert_msg(atomic_load(&cw->failed) == 0, "a worker failed (%d)", atomic_load(&cw->failed));
      ck_assert_msg(waited < 2000000, "step at t=%lld: %d of %d workers done", (long long)t,
                    atomic_load(&cw->acks), alive);
      sleep_us(20);
    }
    if (victim_step < 0 && atomic_load(&cw->victim) != 0) {
      victim_step = step;
      ck_assert_int_eq(kill(atomic_load(&cw->victim), SIGKILL), 0);
      int status;
      ck_assert_int_eq(waitpid(atomic_load(&cw->victim), &status, 0), atomic_load(&cw->victim));
      ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
      alive--;
    }
  }
  atomic_store(&cw->step, -1);
  for (int i = 0; i < NPROC; i++) {
    if (kids[i] == atomic_load(&cw->victim)) continue;
    int status;
    ck_assert_int_eq(waitpid(kids[i], &status, 0), kids[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker %d: status %d", i,
                  status);
  }
  /* opened once, at the first window whose errors pass 50% of 10 or more:
   * the window [101000, 102000) after the healthy half of [100000, 101000) */
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, t_end, &in));
  ck_assert_int_eq(in.opened, 1);
  const int64_t opened_at = T_OPEN;
  for (int i = 0; i < NPROC; i++) {
    const int64_t fb = atomic_load(&cw->first_block[i]);
    ck_assert_msg(fb >= opened_at && fb <= T_FAIL + INTERVAL + STEP,
                  "worker %d first refused at %lld", i, (long long)fb);
  }
  /* one probe across all four at 103000, none until its timeout, then one */
  const int probe_step = (int)((opened_at + WINDOW_MS - T_START) / STEP) + 1;
  for (int s = probe_step - 5; s <= probe_step + PROBE_TIMEOUT / STEP + 2; s++) {
    const int want = s < probe_step ? 0 : s == probe_step || s == probe_step + PROBE_TIMEOUT / STEP;
    ck_assert_msg(atomic_load(&cw->probes[s]) == want, "step %d (t=%lld): %d probes, want %d", s,
                  (long long)(T_START + (s - 1) * STEP), atomic_load(&cw->probes[s]), want);
  }
  ck_assert_int_eq(victim_step, probe_step);
  /* recovery at exactly the probe timeout: the second probe closed it, and
   * then everyone passes */
  ck_assert_int_eq(in.state, SW_BREAKER_CLOSED);
  ck_assert_int_eq(in.state_since_ms, opened_at + WINDOW_MS + PROBE_TIMEOUT);
  ck_assert_int_eq(in.half_opened, 1);
  ck_assert_int_eq(in.closed, 1);
  ck_assert_int_eq(in.reopened, 0);
  ck_assert_int_eq(in.probes, 2);
  ck_assert_int_eq(in.probes_lost, 1);
  const int after = probe_step + PROBE_TIMEOUT / STEP + 1;
  ck_assert_int_eq(atomic_load(&cw->passes[after]), alive);
  sw_breaker_free(b);
  munmap(cw, sizeof *cw);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* ------------------------------------------------ killed at the library's points */

static sw_options *kill_rule(void) {
  return rule_opts(SW_BREAKER_ERROR_COUNT, 0, 1, 1, PROBE_TIMEOUT);
}

/* A victim attaches and enters at t (argv); it dies at its kill point. */
static int victim(const char *name, const char *t) {
  sw_breaker *b;
  if (sw_breaker_open(&b, name, kill_rule(), 0) != SW_OK) return 3;
  sw_decision d;
  sw_breaker_entry_at(b, atoll(t), &d);
  return 0; /* not killed: the parent reports it */
}

static void kill_at(const char *point, const char *name, int64_t t) {
  char ts[32];
  snprintf(ts, sizeof ts, "%lld", (long long)t);
  sw_test_killed_at(point, name, ts);
}

/* A second victim attaches and ends, at t, the probe whose word is given;
 * it stops (SIGSTOP) at its kill point, between finding its slot and
 * marking it done. */
static int exit_victim(const char *name, const char *word) {
  sw_breaker *b;
  sw_options *o = kill_rule();
  sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, 2);
  int rc = sw_breaker_open(&b, name, o, 0);
  sw_options_free(o);
  if (rc != SW_OK) return 3;
  sw_decision d = {.probe = atoll(word)};
  rc = sw_breaker_exit_at(b, 2001, &d, 1, 0);
  sw_breaker_free(b);
  return rc == SW_OK ? 0 : 4;
}

/* Two probes taken in the same ms have the same word. When the exit of one
 * marks the slot the other had found first, the other marks the next slot
 * holding the word: both are counted, and the breaker closes. */
START_TEST(test_same_ms_probes_end_together) {
  char name[64];
  sw_options *o = kill_rule();
  ck_ok(sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, 2));
  sw_breaker *b = fresh(name, "samems", o);
  ck_ok(sw_breaker_exit_at(b, 1000, NULL, 1, SW_EXIT_ERROR)); /* open until 2000 */
  sw_decision d[2];
  ck_ok(sw_breaker_entry_at(b, 2000, &d[0]));
  ck_ok(sw_breaker_entry_at(b, 2000, &d[1]));
  ck_assert(d[0].probe != 0 && d[0].probe == d[1].probe);
  char word[32];
  snprintf(word, sizeof word, "%lld", (long long)d[1].probe);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("SW_TEST_KILL_AT", "breaker-probe-end:1:stop", 1);
    execl("/proc/self/exe", "victim", "--victim-exit", name, word, (char *)NULL);
    _exit(99);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
  ck_assert_msg(WIFSTOPPED(status), "the victim did not stop at its kill point: %d", status);
  ck_ok(sw_breaker_exit_at(b, 2001, &d[0], 1, 0)); /* marks the slot the victim found */
  ck_assert_int_eq(state_at(b, 2001), SW_BREAKER_HALF_OPEN);
  ck_assert_int_eq(kill(pid, SIGCONT), 0);
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "victim status %d", status);
  ck_assert_int_eq(state_at(b, 2001), SW_BREAKER_CLOSED);
  sw_breaker_free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* Killed right after taking the probe: everyone else is refused until the
 * probe's timeout, then the next entry probes; killed between the move to
 * half-open and taking a probe: the next entry probes at once. */
START_TEST(test_killed_at_kill_points) {
  char name[64];
  sw_breaker *b = fresh(name, "kill", kill_rule());
  ck_ok(sw_breaker_exit_at(b, 1000, NULL, 1, SW_EXIT_ERROR)); /* open until 2000 */
  kill_at("breaker-probe", name, 2000);
  sw_decision d;
  ck_ok(sw_breaker_entry_at(b, 2000 + PROBE_TIMEOUT - 1, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 1);
  ck_ok(sw_breaker_entry_at(b, 2000 + PROBE_TIMEOUT, &d));
  ck_assert(d.probe != 0);
  ck_ok(sw_breaker_exit_at(b, 2000 + PROBE_TIMEOUT, &d, 1, SW_EXIT_ERROR)); /* open again */
  ck_assert_int_eq(state_at(b, 2300), SW_BREAKER_OPEN);
  kill_at("breaker-half-open", name, 3300);
  ck_assert_int_eq(state_at(b, 3300), SW_BREAKER_HALF_OPEN);
  ck_ok(sw_breaker_entry_at(b, 3300, &d)); /* no probe was taken: this one probes */
  ck_assert(d.probe != 0);
  ck_ok(sw_breaker_exit_at(b, 3301, &d, 1, 0));
  ck_assert_int_eq(state_at(b, 3301), SW_BREAKER_CLOSED);
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(b, 3301, &in));
  ck_assert_int_eq(in.probes, 3);
  ck_assert_int_eq(in.probes_lost, 1);
  sw_breaker_free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* ------------------------------------------------------ damaged fields */

/* Where the fields are, from the block's magic ("SWRK"; the layout of
 * libsw/breaker/breaker.h, checked below against values this test wrote). */
enum { AT_SAMPLES = 28, AT_PROBE_TIMEOUT = 80, AT_CALLS = 88, AT_LA_OFF = 16, AT_TOTAL = 8,
       AT_STATE = 128, AT_CLOCK = 192, AT_PROBE0 = 200 };

/* A breaker segment (3 half-open calls, probe timeout 300 ms) whose
 * block's offset in the file is returned; path gets its file. */
static long damaged_fixture(char *name, char *path, const char *tag) {
  seg_name(name, 64, tag);
  snprintf(path, 128, "/dev/shm/%s", name);
  sw_options *o = kill_rule();
  ck_ok(sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, 3));
  sw_breaker *b = open_shared(name, o, SW_SEGMENT_RESET);
  sw_options_free(o);
  sw_breaker_free(b);
  int fd = open(path, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  unsigned char buf[4096];
  const ssize_t len = pread(fd, buf, sizeof buf, 0);
  close(fd);
  const uint32_t magic = 0x4b525753u;
  unsigned char *at = memmem(buf, (size_t)len, &magic, sizeof magic);
  ck_assert_ptr_nonnull(at);
  int32_t calls;
  int64_t timeout;
  memcpy(&calls, at + AT_CALLS, 4);
  memcpy(&timeout, at + AT_PROBE_TIMEOUT, 8);
  ck_assert_int_eq(calls, 3);
  ck_assert_int_eq(timeout, PROBE_TIMEOUT);
  return (long)(at - buf);
}

static void poke_at(const char *path, long off, const void *v, size_t n) {
  int fd = open(path, O_WRONLY);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(pwrite(fd, v, n, off), (ssize_t)n);
  close(fd);
}

/* SW_ECORRUPT naming the segment and the field. */
#define ck_corrupt(call, name, what)                                                          \
  do {                                                                                        \
    ck_sw(call, SW_ECORRUPT);                                                                 \
    ck_assert_msg(strstr(sw_last_error(), name) && strstr(sw_last_error(), what),            \
                  "message \"%s\" lacks \"%s\" or \"%s\"", sw_last_error(), name, what);         \
  } while (0)

/* Damaged rule fields and offsets are refused at open, in every mode,
 * each naming the segment and the field (a half_open_calls of 40 would
 * have read past the probe places). */
START_TEST(test_damaged_header_fields) {
  static const struct {
    int at;
    int64_t value;
    int size;
    const char *what;
  } cases[] = {{AT_CALLS, 40, 4, "half_open_calls"},
               {AT_CALLS, 0, 4, "half_open_calls"},
               {AT_SAMPLES, 0, 4, "sample_count"},
               {AT_SAMPLES, 1000, 4, "sample_count"},
               {AT_PROBE_TIMEOUT, INT64_C(1) << 50, 8, "probe_timeout_ms"},
               {AT_PROBE_TIMEOUT, -1, 8, "probe_timeout_ms"},
               {AT_LA_OFF, 12345, 8, "header"},
               {AT_TOTAL, INT64_C(1) << 40, 8, "header"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[64], path[128];
    const long blk = damaged_fixture(name, path, "dmg");
    poke_at(path, blk + cases[i].at, &cases[i].value, (size_t)cases[i].size);
    const uint32_t modes[] = {0, SW_SEGMENT_READONLY, SW_SEGMENT_CREATE};
    for (int m = 0; m < 3; m++) {
      sw_breaker *b = (sw_breaker *)&b;
      sw_options *o = kill_rule();
      ck_assert_int_eq(sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, 3), SW_OK);
      ck_corrupt(sw_breaker_open(&b, name, m == 1 ? NULL : o, modes[m]), name, cases[i].what);
      ck_assert_ptr_null(b);
      sw_options_free(o);
    }
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

/* Every public call on a breaker whose shared words were damaged after it
 * was opened: a clear error or a decision, never a crash or a hang. */
static char g_corrupt_msg[512]; /* the last SW_ECORRUPT's message */

static void every_call(sw_breaker *b, int64_t t, int *corrupt) {
  sw_decision d = {0};
  sw_breaker_info in;
  sw_options *o;
  ck_assert_int_eq(sw_options_create(&o), SW_OK);
  for (int i = 0; i < 7; i++) {
    const int rc = i == 0   ? sw_breaker_entry_at(b, t, &d)
                   : i == 1 ? sw_breaker_exit_at(b, t + 1, &d, 1, SW_EXIT_ERROR)
                   : i == 2 ? sw_breaker_exit_at(b, t + 1, &d, 0, SW_EXIT_CANCEL)
                   : i == 3 ? sw_breaker_exit_at(b, t + 1, NULL, 1, 0)
                   : i == 4 ? sw_breaker_stats_at(b, t, &in)
                   : i == 5 ? sw_breaker_get_rule(b, o)
                            : sw_breaker_set_listener(b, NULL, NULL);
    ck_assert_msg(rc == SW_OK || rc == SW_ECORRUPT, "call %d: %s (%s)", i, sw_err_name(rc),
                  sw_last_error());
    if (rc == SW_ECORRUPT) {
      (*corrupt)++;
      snprintf(g_corrupt_msg, sizeof g_corrupt_msg, "%s", sw_last_error());
    }
  }
  sw_options_free(o);
}

START_TEST(test_damaged_shared_words) {
  static const struct {
    int at;
    uint64_t value;
    bool corrupt; /* some call must say so */
    const char *what;
  } cases[] = {
      {AT_STATE, 3, true, "state word"},                              /* state 3: none */
      {AT_STATE, UINT64_MAX, true, "state word"},                     /* state 3, huge time */
      {AT_STATE, (UINT64_C(1) << 61) << 2, true, "state word"},       /* closed, time past any */
      {AT_STATE, (UINT64_C(1000) << 2) | 1, false, NULL},             /* open until 1000 */
      {AT_CLOCK, INT64_MAX, true, "clock word"},                      /* and open: half-open */
      {AT_PROBE0, UINT64_MAX, false, NULL},                           /* a place: done, far */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[64], path[128];
    const long blk = damaged_fixture(name, path, "word");
    sw_options *o = kill_rule();
    ck_ok(sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, 3));
    sw_breaker *b = open_shared(name, o, 0);
    sw_options_free(o);
    if (cases[i].at == AT_CLOCK || cases[i].at == AT_PROBE0) {
      ck_ok(sw_breaker_exit_at(b, 1000, NULL, 1, SW_EXIT_ERROR)); /* open until 2000 */
      if (cases[i].at == AT_PROBE0) {
        sw_decision d;
        ck_ok(sw_breaker_entry_at(b, 2000, &d)); /* half-open, a probe in place 0 */
      }
    }
    poke_at(path, blk + cases[i].at, &cases[i].value, 8);
    int corrupt = 0;
    for (int64_t t = 2000; t <= 4000; t += 500) every_call(b, t, &corrupt);
    if (cases[i].corrupt) {
      ck_assert_msg(corrupt > 0, "case %zu: no call reported the damage", i);
      ck_assert_msg(strstr(g_corrupt_msg, name) && strstr(g_corrupt_msg, cases[i].what),
                    "case %zu: \"%s\"", i, g_corrupt_msg);
    }
    sw_breaker_free(b);
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

/* ----------------------------------------------------------------- threads */

#define NTHREADS 4
#define PER_THREAD 20000

typedef struct race {
  sw_breaker *b;
  pthread_barrier_t go;
  _Atomic int passes;
  int64_t t;
} race;

static void *exits(void *arg) {
  race *r = arg;
  pthread_barrier_wait(&r->go);
  for (int i = 0; i < PER_THREAD; i++) {
    sw_decision d;
    ck_ok(sw_breaker_entry_at(r->b, 5000, &d));
    ck_ok(sw_breaker_exit_at(r->b, 5000, &d, i % 4 == 0 ? 100 : 1, 0));
  }
  return NULL;
}

/* Threads counting into one window lose nothing. */
START_TEST(test_threads_exact_counts) {
  sw_options *o = rule_opts(SW_BREAKER_SLOW_RATIO, 50, INT32_MAX, 1, 100);
  race r = {0};
  ck_ok(sw_breaker_create(&r.b, o));
  sw_options_free(o);
  pthread_barrier_init(&r.go, NULL, NTHREADS);
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, exits, &r);
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  sw_breaker_info in;
  ck_ok(sw_breaker_stats_at(r.b, 5000, &in));
  ck_assert_int_eq(in.total, NTHREADS * PER_THREAD);
  ck_assert_int_eq(in.bad, NTHREADS * PER_THREAD / 4);
  ck_assert_int_eq(in.state, SW_BREAKER_CLOSED);
  pthread_barrier_destroy(&r.go);
  sw_breaker_free(r.b);
}
END_TEST

static void *probers(void *arg) {
  race *r = arg;
  pthread_barrier_wait(&r->go);
  sw_decision d;
  ck_ok(sw_breaker_entry_at(r->b, r->t, &d));
  if (d.verdict == SW_VERDICT_PASS) {
    ck_assert(d.probe != 0);
    atomic_fetch_add(&r->passes, 1);
  }
  pthread_barrier_wait(&r->go); /* every entry decided before any probe ends */
  if (d.verdict == SW_VERDICT_PASS) ck_ok(sw_breaker_exit_at(r->b, r->t, &d, 1, 0));
  return NULL;
}

/* Threads racing for the probes of a half-open breaker: exactly the
 * permitted number pass, round after round, and they close it. */
START_TEST(test_threads_racing_for_probes) {
  for (int calls = 1; calls <= 3; calls += 2) {
    sw_options *o = rule_opts(SW_BREAKER_ERROR_COUNT, 0, 1, 1, 100000);
    ck_ok(sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, calls));
    race r = {0};
    ck_ok(sw_breaker_create(&r.b, o));
    sw_options_free(o);
    pthread_barrier_init(&r.go, NULL, 2 * NTHREADS);
    for (int round = 0; round < 50; round++) {
      const int64_t t0 = 10000 + round * 2000;
      ck_ok(sw_breaker_exit_at(r.b, t0, NULL, 1, SW_EXIT_ERROR)); /* open until t0 + 1000 */
      ck_assert_int_eq(state_at(r.b, t0), SW_BREAKER_OPEN);
      r.t = t0 + 1000;
      atomic_store(&r.passes, 0);
      pthread_t th[2 * NTHREADS];
      for (int i = 0; i < 2 * NTHREADS; i++) pthread_create(&th[i], NULL, probers, &r);
      for (int i = 0; i < 2 * NTHREADS; i++) pthread_join(th[i], NULL);
      ck_assert_int_eq(atomic_load(&r.passes), calls);
      ck_assert_int_eq(state_at(r.b, r.t), SW_BREAKER_CLOSED);
    }
    sw_breaker_info in;
    ck_ok(sw_breaker_stats_at(r.b, 200000, &in));
    ck_assert_int_eq(in.opened, 50);
    ck_assert_int_eq(in.closed, 50);
    ck_assert_int_eq(in.probes, 50 * calls);
    ck_assert_int_eq(in.blocked, 50 * (2 * NTHREADS - calls));
    pthread_barrier_destroy(&r.go);
    sw_breaker_free(r.b);
  }
}
END_TEST

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--victim") == 0) return victim(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--victim-exit") == 0) return exit_victim(argv[2], argv[3]);
  g_main_pid = (int)getpid();
  Suite *s = suite_create("breaker_shared");
  SW_TCASE(s, "segment", test_two_handles_one_breaker, test_corrupt_and_foreign,
           test_damaged_header_fields, test_damaged_shared_words);
  SW_TCASE(s, "processes", test_four_processes, test_killed_at_kill_points,
           test_same_ms_probes_end_together);
  SW_TCASE(s, "threads", test_threads_exact_counts, test_threads_racing_for_probes);
  return sw_test_run(s);
}
