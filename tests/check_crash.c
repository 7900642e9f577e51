/* SPDX-License-Identifier: Apache-2.0 */
/* Crash safety: processes killed with SIGKILL at any point — including in
 * the middle of a window reset, a rule write, a registry insert or a
 * segment's creation — never stall the others nor corrupt counts.
 * Iterations scale with SW_STRESS (default 1). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static int64_t scale(int64_t n) { return n * sw_stress(); }

static void *shared_map(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(p, MAP_FAILED);
  return p;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Run check in a child bounded by alarm(): a hang fails the test. */
#define IN_BOUNDED_CHILD(...)                                                        \
  do {                                                                               \
    fflush(stderr);                                                                  \
    pid_t c_ = fork();                                                               \
    ck_assert_int_ge(c_, 0);                                                         \
    if (c_ == 0) {                                                                   \
      alarm(10);                                                                     \
      __VA_ARGS__;                                                                          \
      _exit(0);                                                                      \
    }                                                                                \
    int st_;                                                                         \
    ck_assert_int_eq(waitpid(c_, &st_, 0), c_);                                      \
    ck_assert_msg(WIFEXITED(st_) && WEXITSTATUS(st_) == 0, "check failed: status %d%s", \
                  st_, WIFSIGNALED(st_) && WTERMSIG(st_) == SIGALRM ? " (hung)" : ""); \
  } while (0)

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "line %d: %s (%s)\n", __LINE__, #cond, sw_last_error());     \
      _exit(2);                                                                      \
    }                                                                                \
  } while (0)

/* ---- a process killed inside reset_window_to -------------------------- */

/* A bucket whose reset announces itself and then dawdles, so that the
 * parent can kill the process while it holds the reset lock. */
typedef struct slow_bucket {
  _Atomic int64_t tag;
  _Atomic int64_t count;
} slow_bucket;

typedef struct control {
  _Atomic int in_reset; /* set by a reset in progress (shared with the parent) */
  _Atomic int slow;     /* 1: resets sleep 10 s (the victim), 0: fast */
} control;

static control *ctl;

static void slow_new(void *ctx, void *b, int64_t t) {
  slow_bucket *x = b;
  atomic_store(&x->count, 0);
  atomic_store(&x->tag, t - t % 100);
}
static void slow_reset(void *ctx, sw_window *w, int64_t start) {
  slow_bucket *x = w->bucket;
  atomic_store(&x->count, -999); /* half-written, as a crash would leave it */
  if (atomic_load(&ctl->slow)) {
    atomic_store(&ctl->in_reset, 1);
    sleep(10); /* killed here */
  }
  atomic_store(&x->count, 0);
  atomic_store(&x->tag, start);
}
static const sw_bucket_type slow_type = {
    .abi_version = SW_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sw_bucket_type),
    .name = "test.slow",
    .bucket_size = sizeof(slow_bucket),
    .bucket_align = 8,
    .new_empty_bucket = slow_new,
    .reset_window_to = slow_reset,
};

START_TEST(test_killed_inside_reset) {
  ctl = shared_map(sizeof *ctl);
  int64_t size = sw_leap_array_layout_size(&slow_type, 2, 200);
  ck_assert_int_gt(size, 0);
  void *mem = shared_map((size_t)size);
  ck_ok(sw_leap_array_init_at(mem, (uint64_t)size, &slow_type, 2, 200, SW_LEAP_ARRAY_SHARED));
  sw_leap_array *la;
  ck_ok(sw_leap_array_attach(&la, mem, (uint64_t)size, &slow_type, NULL));
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(la, 1000, &w)); /* slot 0 holds 1000 */
  ((slow_bucket *)w.bucket)->count = 5;

  /* The victim resets slot 0 to 1200 and is killed while holding the lock. */
  atomic_store(&ctl->slow, 1);
  pid_t victim = fork();
  if (victim == 0) {
    sw_leap_array *mine;
    if (sw_leap_array_attach(&mine, mem, (uint64_t)size, &slow_type, NULL) != SW_OK) _exit(3);
    sw_window v;
    sw_leap_array_current_window_at(mine, 1250, &v);
    _exit(0);
  }
  while (!atomic_load(&ctl->in_reset)) sleep_us(1000);
  /* While the victim holds the lock, another reset of the array gives up
   * after its bound (1 s) instead of waiting with it. */
  IN_BOUNDED_CHILD({
    sw_leap_array *mine;
    CHECK(sw_leap_array_attach(&mine, mem, (uint64_t)size, &slow_type, NULL) == SW_OK);
    sw_window v;
    CHECK(sw_leap_array_current_window_at(mine, 1250, &v) == SW_EBUSY);
    CHECK(strstr(sw_last_error(), "window reset lock held for more than 1000 ms") != NULL);
  });
  kill(victim, SIGKILL);
  waitpid(victim, NULL, 0);
  atomic_store(&ctl->slow, 0);

  /* Readers were never blocked: the stored window is still 1000, intact. */
  sw_window list[2];
  ck_assert_int_eq(sw_leap_array_list_all(la, list, 2), 1);
  ck_assert_int_eq(list[0].start_ms, 1000);
  ck_assert_int_eq(((slow_bucket *)list[0].bucket)->count, 5);

  /* A survivor takes the orphaned lock over and finishes the reset; in a
   * child, so that a stall would fail the test by its timeout. */
  pid_t survivor = fork();
  if (survivor == 0) {
    sw_leap_array *mine;
    if (sw_leap_array_attach(&mine, mem, (uint64_t)size, &slow_type, NULL) != SW_OK) _exit(3);
    sw_window v;
    if (sw_leap_array_current_window_at(mine, 1250, &v) != SW_OK) _exit(4);
    slow_bucket *x = v.bucket;
    if (v.start_ms != 1200 || x->tag != 1200 || x->count != 0 || v.flags) _exit(5);
    x->count += 1;
    _exit(0);
  }
  int status;
  ck_assert_int_eq(waitpid(survivor, &status, 0), survivor);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "survivor status %d", status);
  ck_assert_int_eq(sw_leap_array_list_all(la, list, 2), 1);
  ck_assert_int_eq(list[0].start_ms, 1200);
  ck_assert_int_eq(((slow_bucket *)list[0].bucket)->count, 1);
  sw_leap_array_free(la);
}
END_TEST

/* ---- random kills of workers counting through a shared segment -------- */

#define WORKERS 4
#define T_END INT64_C(4000000000000) /* the final window, far after all the churn */

typedef struct board {
  _Atomic int64_t done[WORKERS]; /* entries that returned, per worker */
  _Atomic int64_t clock;         /* shared time for the churn phase */
  _Atomic int final_phase;
} board;

static void worker(const char *seg_name, board *b, int id) {
  sw_segment *seg;
  if (sw_segment_open(&seg, seg_name, 8, NULL, 0) != SW_OK) _exit(3);
  sw_limiter *l;
  if (sw_registry_get(sw_segment_registry(seg), "shared", &l) != SW_OK) _exit(4);
  for (int64_t k = 0;; k++) {
    sw_decision d;
    if (!atomic_load(&b->final_phase)) {
      /* churn: time runs fast, so almost every call resets windows */
      int64_t t = atomic_fetch_add(&b->clock, 97);
      sw_limiter_entry_at(l, t, 1, 0, &d);
      sw_limiter_exit_at(l, t, 1, 1, 0);
    } else {
      if (sw_limiter_entry_at(l, T_END + k % 400, 1, 0, &d) != SW_OK) _exit(5);
      atomic_fetch_add(&b->done[id], 1); /* only after the call returned */
    }
  }
}

START_TEST(test_random_kills_keep_counts) {
  char name[64];
  snprintf(name, sizeof name, "sw-crash-%d", (int)getpid());
  sw_segment_unlink(name);
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 1e12));
  sw_segment *seg;
  ck_ok(sw_segment_open(&seg, name, 8, o, SW_SEGMENT_CREATE));
  sw_options_free(o);
  sw_limiter *l;
  ck_ok(sw_registry_get(sw_segment_registry(seg), "shared", &l));

  board *b = shared_map(sizeof *b);
  atomic_store(&b->clock, 1000000);
  pid_t pid[WORKERS];
  for (int i = 0; i < WORKERS; i++)
    if ((pid[i] = fork()) == 0) worker(name, b, i);

  unsigned seed = (unsigned)getpid();
  int kills = 0, final_kills = 0;
  const int rounds = (int)scale(120);
  for (int r = 0; r < rounds; r++) {
    if (r == rounds / 2) atomic_store(&b->final_phase, 1);
    sleep_us(500 + rand_r(&seed) % 3000);
    int i = rand_r(&seed) % WORKERS;
    kill(pid[i], SIGKILL);
    int status;
    waitpid(pid[i], &status, 0);
    ck_assert_msg(WIFSIGNALED(status), "worker %d exited with %d instead of running", i,
                  WEXITSTATUS(status));
    kills++;
    if (atomic_load(&b->final_phase)) final_kills++;
    if ((pid[i] = fork()) == 0) worker(name, b, i);
  }
  /* Survivors kept working: every worker makes progress after the last kill. */
  int64_t before[WORKERS];
  for (int i = 0; i < WORKERS; i++) before[i] = atomic_load(&b->done[i]);
  for (int spins = 0; spins < 20000; spins++) {
    int moved = 0;
    for (int i = 0; i < WORKERS; i++) moved += atomic_load(&b->done[i]) > before[i];
    if (moved == WORKERS) break;
    sleep_us(500);
  }
  for (int i = 0; i < WORKERS; i++) {
    ck_assert_msg(atomic_load(&b->done[i]) > before[i], "worker %d stalled", i);
    kill(pid[i], SIGKILL);
    waitpid(pid[i], NULL, 0);
  }
  final_kills += WORKERS;
  /* Every entry that returned is counted; at most one more per process
   * killed during the final phase (killed after counting, before 'done'). */
  int64_t done = 0;
  for (int i = 0; i < WORKERS; i++) done += atomic_load(&b->done[i]);
  sw_metric *sec = sw_node_second_metric(sw_limiter_node(l));
  sw_metric *min = sw_node_minute_metric(sw_limiter_node(l));
  int64_t counted = sw_metric_window_pass_at(sec, T_END);
  ck_assert_int_ge(counted, done);
  ck_assert_int_le(counted, done + final_kills);
  /* The per-minute array is counted right after the per-second one. */
  int64_t minute = sw_metric_pass_at(min, T_END + 500);
  ck_assert_int_ge(minute, done);
  ck_assert_int_le(minute, done + final_kills);
  fprintf(stderr, "crash test: %d kills, %lld entries returned, %lld counted\n", kills,
          (long long)done, (long long)counted);
  sw_segment_close(seg);
  sw_segment_unlink(name);
}
END_TEST

/* ---- kills at exact points (the library's SW_TEST_KILL_AT) ------------- */

static int cancel_victim(const char *action, const char *seg_name);

/* What a victim process does before it is killed at its point. */
static int victim(const char *action, const char *seg_name) {
  sw_segment *seg;
  sw_limiter *l;
  if (strncmp(action, "cancel-", 7) == 0) return cancel_victim(action + 7, seg_name);
  uint32_t flags = strncmp(action, "create", 6) == 0 ? SW_SEGMENT_CREATE : 0;
  if (sw_segment_open(&seg, seg_name, 8, NULL, flags) != SW_OK) return 3;
  if (strcmp(action, "create-late") == 0) { /* another made the segment first: adopted */
    sw_limiter *a;
    sw_decision d;
    int got = sw_segment_created(seg) ? 6
              : sw_registry_find(sw_segment_registry(seg), "a", &a) != 1 ? 7
              : sw_limiter_entry_at(a, 150, 1, 0, &d) != SW_OK ? 8
              : sw_metric_pass_at(sw_node_second_metric(sw_limiter_node(a)), 150) != 2 ? 9 : 0;
    sw_segment_close(seg);
    return got;
  }
  if (strcmp(action, "rule") == 0) {
    sw_options *o;
    sw_options_create(&o);
    sw_options_set_double(o, SW_OPT_THRESHOLD, 20);
    if (sw_registry_get(sw_segment_registry(seg), "a", &l) != SW_OK) return 4;
    sw_limiter_set_rule(l, o);
  } else if (strcmp(action, "insert") == 0) {
    sw_registry_get(sw_segment_registry(seg), "b", &l);
  } else if (strncmp(action, "strict", 6) == 0) { /* an entry at t=400: 10 + its verdict */
    sw_decision d;
    /* strict-warm: an entry of 0 first, so that the handle knows the
     * window and the entry that stops takes the fast path (admit.h) */
    if (sw_registry_get(sw_segment_registry(seg), "a", &l) != SW_OK ||
        (strcmp(action, "strict-warm") == 0 && sw_limiter_entry_at(l, 400, 0, 0, &d) != SW_OK) ||
        sw_limiter_entry_at(l, 400, 1, 0, &d) != SW_OK)
      return 5;
    sw_segment_close(seg); /* (LeakSanitizer would change the exit status) */
    return 10 + d.verdict;
  }
  return 0; /* not killed: the parent reports it */
}

static sw_segment *segment_new(const char *name, double threshold) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, threshold));
  sw_segment *seg;
  sw_segment_unlink(name);
  ck_ok(sw_segment_open(&seg, name, 8, o, SW_SEGMENT_CREATE));
  sw_options_free(o);
  return seg;
}

/* A writer killed halfway through a rule write: every other process goes
 * on with the old rule, never waits, and the next write works. */
START_TEST(test_killed_inside_rule_write) {
  char name[64];
  snprintf(name, sizeof name, "sw-crash-rule-%d", (int)getpid());
  sw_segment *seg = segment_new(name, 10);
  sw_limiter *l;
  ck_ok(sw_registry_get(sw_segment_registry(seg), "a", &l));
  sw_test_killed_at("rule-write", "rule", name);
  IN_BOUNDED_CHILD({
    sw_decision d;
    sw_options *got;
    sw_options_create(&got);
    double th;
    CHECK(sw_limiter_entry_at(l, 5000, 1, 0, &d) == SW_OK && d.verdict == SW_VERDICT_PASS);
    CHECK(sw_limiter_get_rule(l, got) == SW_OK);
    CHECK(sw_options_get_double(got, SW_OPT_THRESHOLD, &th) == SW_OK && th == 10);
    sw_options_set_double(got, SW_OPT_THRESHOLD, 30);
    CHECK(sw_limiter_set_rule(l, got) == SW_OK);
    sw_options_set_double(got, SW_OPT_THRESHOLD, 0);
    CHECK(sw_limiter_get_rule(l, got) == SW_OK);
    CHECK(sw_options_get_double(got, SW_OPT_THRESHOLD, &th) == SW_OK && th == 30);
    for (int i = 1; i < 30; i++)
      CHECK(sw_limiter_entry_at(l, 5000, 1, 0, &d) == SW_OK && d.verdict == SW_VERDICT_PASS);
    CHECK(sw_limiter_entry_at(l, 5000, 1, 0, &d) == SW_OK && d.verdict == SW_VERDICT_BLOCK);
  });
  sw_segment_close(seg);
  sw_segment_unlink(name);
}
END_TEST

/* An inserter killed after publishing its entry (before raising the count,
 * or before making the entry ready): the next inserter finishes the dead
 * one's name on its own block and puts its own name on another. */
START_TEST(test_killed_inside_registry_insert) {
  const char *points[] = {"registry-busy", "registry-ready"};
  for (int i = 0; i < 2; i++) {
    char name[64];
    snprintf(name, sizeof name, "sw-crash-insert-%d", (int)getpid());
    sw_segment *seg = segment_new(name, 1e9);
    sw_registry *r = sw_segment_registry(seg);
    sw_limiter *a;
    ck_ok(sw_registry_get(r, "a", &a));
    sw_test_killed_at(points[i], "insert", name);
    IN_BOUNDED_CHILD({
      sw_limiter *b, *c;
      sw_decision d;
      CHECK(sw_registry_get(r, "c", &c) == SW_OK);
      CHECK(sw_registry_find(r, "b", &b) == 1);
      CHECK(b != c && sw_registry_count(r) == 3);
      CHECK(sw_limiter_entry_at(c, 5000, 1, 0, &d) == SW_OK);
      sw_metric *sb = sw_node_second_metric(sw_limiter_node(b));
      sw_metric *sc = sw_node_second_metric(sw_limiter_node(c));
      CHECK(sw_metric_pass_at(sc, 5000) == 1 && sw_metric_pass_at(sb, 5000) == 0);
      const char *names[3];
      for (uint32_t k = 0; k < 3; k++) CHECK(sw_registry_at(r, k, NULL, &names[k]) == SW_OK);
      CHECK(strcmp(names[0], "a") == 0 && strcmp(names[1], "b") == 0 &&
            strcmp(names[2], "c") == 0);
    });
    sw_segment_close(seg);
    sw_segment_unlink(name);
  }
}
END_TEST

/* A creator killed at each step of a segment's creation leaves a file that
 * an open without CREATE refuses (truncated / never initialised) and one
 * with CREATE creates again, working. */
START_TEST(test_killed_inside_segment_creation) {
  const char *points[] = {"segment-created", "segment-marked", "segment-sized",
                          "segment-init"};
  for (int i = 0; i < 4; i++) {
    char name[64];
    snprintf(name, sizeof name, "sw-crash-create-%d", (int)getpid());
    sw_segment_unlink(name);
    sw_test_killed_at(points[i], "create", name);
    sw_segment *seg;
    ck_assert_int_eq(sw_segment_open(&seg, name, 8, NULL, 0), SW_ECORRUPT);
    ck_assert_int_eq(sw_segment_open(&seg, name, 8, NULL, SW_SEGMENT_READONLY), SW_ECORRUPT);
    ck_ok(sw_segment_open(&seg, name, 8, NULL, SW_SEGMENT_CREATE));
    ck_assert_int_eq(sw_segment_created(seg), 1);
    sw_limiter *l;
    ck_ok(sw_registry_get(sw_segment_registry(seg), "a", &l));
    sw_segment_close(seg);
    ck_ok(sw_segment_open(&seg, name, 8, NULL, 0));
    ck_assert_int_eq(sw_registry_count(sw_segment_registry(seg)), 1);
    sw_segment_close(seg);
    sw_segment_unlink(name);
  }
}
END_TEST

/* Two processes create a segment at once: the one whose O_EXCL made the
 * file stops before it takes the file's lock; the other finds the file
 * empty, creates the segment and counts in it. The first, resumed, adopts
 * that segment: it does not empty the file under the other's mapping (a
 * SIGBUS at its next touch) nor start the counts again. */
static pid_t stop_at(const char *point, const char *action, const char *seg_name);

START_TEST(test_segment_created_by_two_at_once) {
  char name[64];
  snprintf(name, sizeof name, "sw-crash-twice-%d", (int)getpid());
  sw_segment_unlink(name);
  pid_t first = stop_at("segment-created", "create-late", name);
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 8));
  sw_segment *seg;
  ck_ok(sw_segment_open(&seg, name, 8, o, SW_SEGMENT_CREATE));
  ck_assert_int_eq(sw_segment_created(seg), 1);
  sw_limiter *a;
  sw_decision d;
  ck_ok(sw_registry_get(sw_segment_registry(seg), "a", &a));
  ck_ok(sw_limiter_entry_at(a, 100, 1, 0, &d));
  kill(first, SIGCONT);
  int status;
  ck_assert_int_eq(waitpid(first, &status, 0), first);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the late creator: status %d",
                status);
  ck_assert_int_eq(sw_metric_pass_at(sw_node_second_metric(sw_limiter_node(a)), 150), 2);
  sw_segment_close(seg);
  sw_options_free(o);
  sw_segment_unlink(name);
}
END_TEST

/* Start a victim that stops itself (SIGSTOP) the nth time it reaches
 * point, holding a lock. */
static pid_t stop_at_nth(const char *point, int nth, const char *action, const char *seg_name) {
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s:%d:stop", point, nth);
    setenv("SW_TEST_KILL_AT", spec, 1);
    execl("/proc/self/exe", "check_crash", "--victim", action, seg_name, (char *)NULL);
    _exit(99);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
  ck_assert_msg(WIFSTOPPED(status), "victim of %s did not stop there: status %d", point, status);
  return pid;
}

static pid_t stop_at(const char *point, const char *action, const char *seg_name) {
  return stop_at_nth(point, 1, action, seg_name);
}

static void kill_stopped(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* A strict admission that read its window's interval and is about to
 * count while another process admits at the next window: the newer
 * admission sealed the older window first, so the late one fails its CAS
 * and decides again at the newer window. Threshold 2: it is blocked (the
 * interval holds 2; without the seal, 3). Threshold 3: it passes, counted
 * in the newer window (not refused for finding the sealed word). The late
 * admission on the general path (a fresh handle) and on the fast path (a
 * handle that knows the window: its first entry, of 0, passes the point
 * too); the newer one on the general path (it creates its window) and on
 * the fast path (an exit created the window first: the fast path must
 * not count with an older window unsealed). */
START_TEST(test_strict_admission_across_a_boundary) {
  for (int run = 0; run < 8; run++) {
    const int threshold = 2 + run % 2, warm = run / 2 % 2, newer_fast = run / 4;
    char name[64];
    snprintf(name, sizeof name, "sw-crash-seal-%d-%d", (int)getpid(), run);
    sw_segment *seg = segment_new(name, threshold);
    sw_limiter *l;
    ck_ok(sw_registry_get(sw_segment_registry(seg), "a", &l));
    sw_decision d;
    ck_ok(sw_limiter_entry_at(l, 100, 1, 0, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
    pid_t late = warm ? stop_at_nth("strict-cas", 2, "strict-warm", name)
                      : stop_at("strict-cas", "strict", name); /* read 1 pass at t=400 */
    if (newer_fast) ck_ok(sw_limiter_exit_at(l, 550, 0, 1, 0)); /* creates window 500 */
    ck_ok(sw_limiter_entry_at(l, 600, 1, 0, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
    kill(late, SIGCONT);
    int status;
    ck_assert_int_eq(waitpid(late, &status, 0), late);
    const int want = threshold == 2 ? SW_VERDICT_BLOCK : SW_VERDICT_PASS;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 10 + want,
                  "threshold %d (late: %s path, newer: %s path), the late admission: "
                  "status %d", threshold, warm ? "fast" : "general",
                  newer_fast ? "fast" : "general", status);
    sw_metric *sec = sw_node_second_metric(sw_limiter_node(l));
    ck_assert_int_eq(sw_metric_pass_at(sec, 600), 2 + (threshold == 3));
    ck_assert_int_eq(sw_metric_window_pass_at(sec, 600), 1 + (threshold == 3));
    sw_segment_close(seg);
    sw_segment_unlink(name);
  }
}
END_TEST

/* A process stopped while it holds a limiter's rule lock (or a damaged lock
 * word) delays a rule writer by 2 s at most: SW_EBUSY, and readers and
 * entries never wait; once the holder dies, writes work again. */
START_TEST(test_rule_lock_held_by_stopped_process) {
  char name[64];
  snprintf(name, sizeof name, "sw-crash-rulestop-%d", (int)getpid());
  sw_segment *seg = segment_new(name, 10);
  sw_limiter *l;
  ck_ok(sw_registry_get(sw_segment_registry(seg), "a", &l));
  pid_t victim = stop_at("rule-write", "rule", name);
  IN_BOUNDED_CHILD({
    sw_decision d;
    sw_options *o;
    sw_options_create(&o);
    CHECK(sw_limiter_entry_at(l, 5000, 1, 0, &d) == SW_OK && d.verdict == SW_VERDICT_PASS);
    CHECK(sw_limiter_get_rule(l, o) == SW_OK);
    CHECK(sw_limiter_set_rule(l, o) == SW_EBUSY);
    CHECK(strstr(sw_last_error(), "rule lock held for more than 2000 ms") != NULL);
  });
  kill_stopped(victim);
  IN_BOUNDED_CHILD({
    sw_options *o;
    sw_options_create(&o);
    sw_options_set_double(o, SW_OPT_THRESHOLD, 40);
    CHECK(sw_limiter_set_rule(l, o) == SW_OK);
  });
  sw_segment_close(seg);
  sw_segment_unlink(name);
}
END_TEST

/* The same for the registry's insert lock: lookups of existing names go on,
 * a new name waits 2 s at most (SW_EBUSY); after the holder dies, its name
 * is finished and new names are added. */
START_TEST(test_insert_lock_held_by_stopped_process) {
  char name[64];
  snprintf(name, sizeof name, "sw-crash-insstop-%d", (int)getpid());
  sw_segment *seg = segment_new(name, 1e9);
  sw_registry *r = sw_segment_registry(seg);
  sw_limiter *a;
  ck_ok(sw_registry_get(r, "a", &a));
  pid_t victim = stop_at("registry-busy", "insert", name);
  IN_BOUNDED_CHILD({
    sw_limiter *x;
    CHECK(sw_registry_find(r, "a", &x) == 1 && x == a);
    CHECK(sw_registry_get(r, "c", &x) == SW_EBUSY);
    CHECK(strstr(sw_last_error(), "registry lock held") != NULL);
  });
  kill_stopped(victim);
  IN_BOUNDED_CHILD({
    sw_limiter *x;
    CHECK(sw_registry_get(r, "c", &x) == SW_OK);
    CHECK(sw_registry_find(r, "b", &x) == 1 && sw_registry_count(r) == 3);
  });
  sw_segment_close(seg);
  sw_segment_unlink(name);
}
END_TEST

/* ---- a cancel killed or stopped between its writes ---------------------- */

#define CT INT64_C(1000000) /* a round second */

/* The cancel victims, on limiter "a" (the parent set its rule and filled
 * it): an entry, then its cancel; 20 when both went as expected.
 *   pass:   reject, 3 units at CT + 100
 *   borrow: a prioritized entry at CT + 100 (the parent filled the interval)
 *   pacing: pacing 10/s, two entries at CT (pass, wait 100 ms), the second
 *           cancelled
 *   one:    reject, 1 unit at CT + 100 */
static int cancel_victim(const char *what, const char *seg_name) {
  sw_segment *seg;
  sw_limiter *l;
  sw_decision d;
  if (sw_segment_open(&seg, seg_name, 8, NULL, SW_SEGMENT_ATTACH) != SW_OK ||
      sw_registry_get(sw_segment_registry(seg), "a", &l) != SW_OK)
    return 3;
  int rc;
  if (strcmp(what, "pass") == 0)
    rc = sw_limiter_entry_at(l, CT + 100, 3, 0, &d) == SW_OK && d.verdict == SW_VERDICT_PASS;
  else if (strcmp(what, "borrow") == 0)
    rc = sw_limiter_entry_at(l, CT + 100, 1, SW_ENTRY_PRIORITIZED, &d) == SW_OK &&
         d.verdict == SW_VERDICT_WAIT;
  else if (strcmp(what, "pacing") == 0)
    rc = sw_limiter_entry_at(l, CT, 1, 0, &d) == SW_OK && d.verdict == SW_VERDICT_PASS &&
         sw_limiter_entry_at(l, CT, 1, 0, &d) == SW_OK && d.verdict == SW_VERDICT_WAIT;
  else
    rc = sw_limiter_entry_at(l, CT + 100, 1, 0, &d) == SW_OK && d.verdict == SW_VERDICT_PASS;
  if (!rc) return 4;
  if (sw_limiter_cancel(l, &d) != SW_OK) return 5;
  sw_segment_close(seg);
  return 20;
}

/* A segment whose limiter "a" is ready for the victim `what`. */
static sw_segment *cancel_segment(const char *name, const char *what, int stripes,
                                  sw_limiter **a) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, strcmp(what, "borrow") == 0 ? 10 : 100));
  if (strcmp(what, "pacing") == 0) ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  if (strcmp(what, "pacing") == 0) ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  ck_ok(sw_options_set(o, SW_OPT_STRIPES, stripes));
  sw_segment *seg;
  sw_segment_unlink(name);
  ck_ok(sw_segment_open(&seg, name, 8, o, SW_SEGMENT_CREATE));
  sw_options_free(o);
  ck_ok(sw_registry_get(sw_segment_registry(seg), "a", a));
  sw_decision d;
  if (strcmp(what, "borrow") == 0) { /* a full interval: the victim borrows 400 ms ahead */
    ck_ok(sw_limiter_entry_at(*a, CT - 400, 10, SW_ENTRY_NO_EXIT, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  }
  return seg;
}

typedef struct cancel_state {
  int64_t window, minute, in_flight, waiting, occupied;
} cancel_state;

static cancel_state cancel_state_of(sw_limiter *l, int64_t t) {
  sw_node *n = sw_limiter_node(l);
  return (cancel_state){sw_metric_window_pass_at(sw_node_second_metric(n), t),
                        sw_node_total_pass_at(n, t), sw_node_concurrency(n),
                        sw_node_waiting_at(n, t),
                        sw_metric_occupied_pass_at(sw_node_minute_metric(n), t)};
}

#define ck_cancel_state(l, t, w, m, f, wt, oc, what)                                      \
  do {                                                                                     \
    cancel_state s_ = cancel_state_of((l), (t));                                           \
    ck_assert_msg(s_.window == (w) && s_.minute == (m) && s_.in_flight == (f) &&           \
                      s_.waiting == (wt) && s_.occupied == (oc),                           \
                  "%s: window %lld minute %lld in flight %lld waiting %lld occupied %lld, " \
                  "expected %d %d %d %d %d", what, (long long)s_.window,                   \
                  (long long)s_.minute, (long long)s_.in_flight, (long long)s_.waiting,    \
                  (long long)s_.occupied, (w), (m), (f), (wt), (oc));                      \
  } while (0)

/* The next pacing entry's wait at CT (the queue the victim left). */
static int64_t pacing_wait(sw_limiter *l) {
  sw_decision d;
  ck_ok(sw_limiter_entry_at(l, CT, 1, SW_ENTRY_NO_EXIT, &d));
  return d.wait_ms;
}

/* Every write of a cancel, killed there: the give-backs before it are
 * done, those after it are not (the entry stays counted in part), no count
 * goes wrong elsewhere, and the others go on entering and cancelling. */
START_TEST(test_killed_inside_cancel) {
  static const struct {
    const char *what, *point;
    int window, minute, in_flight, waiting, occupied, wait;
  } k[] = {
      {"pass", "cancel-second", 3, 3, 1, 0, 0, 0},
      {"pass", "cancel-minute", 0, 3, 1, 0, 0, 0},
      {"pass", "cancel-in-flight", 0, 0, 1, 0, 0, 0},
      {"borrow", "cancel-future", 0, 11, 1, 1, 1, 0},
      {"borrow", "cancel-minute", 0, 11, 1, 0, 1, 0},
      {"borrow", "cancel-in-flight", 0, 10, 1, 0, 0, 0},
      {"pacing", "cancel-second", 2, 2, 2, 0, 0, 200},
      {"pacing", "cancel-minute", 1, 2, 2, 0, 0, 200},
      {"pacing", "cancel-queue", 1, 1, 2, 0, 0, 200},
      {"pacing", "cancel-in-flight", 1, 1, 2, 0, 0, 100},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    char name[64], action[32];
    snprintf(name, sizeof name, "sw-crash-cancel-%d", (int)getpid());
    snprintf(action, sizeof action, "cancel-%s", k[i].what);
    sw_limiter *a;
    sw_segment *seg = cancel_segment(name, k[i].what, 4, &a);
    sw_test_killed_at(k[i].point, action, name);
    const int64_t t = strcmp(k[i].what, "pacing") == 0 ? CT : CT + 100;
    char what[64];
    snprintf(what, sizeof what, "%s killed at %s", k[i].what, k[i].point);
    ck_cancel_state(a, t, k[i].window, k[i].minute, k[i].in_flight, k[i].waiting,
                    k[i].occupied, what);
    if (k[i].wait) ck_assert_int_eq(pacing_wait(a), k[i].wait);
    IN_BOUNDED_CHILD({ /* the others go on: an entry and its cancel, in full */
      sw_segment *mine;
      sw_limiter *x;
      sw_decision d;
      CHECK(sw_segment_open(&mine, name, 8, NULL, SW_SEGMENT_ATTACH) == SW_OK);
      CHECK(sw_registry_get(sw_segment_registry(mine), "a", &x) == SW_OK);
      cancel_state before = cancel_state_of(x, t);
      const uint32_t flags = strcmp(k[i].what, "borrow") == 0 ? SW_ENTRY_PRIORITIZED : 0;
      CHECK(sw_limiter_entry_at(x, t, 1, flags, &d) == SW_OK && d.verdict != SW_VERDICT_BLOCK);
      CHECK(sw_limiter_cancel(x, &d) == SW_OK);
      cancel_state after = cancel_state_of(x, t);
      CHECK(memcmp(&before, &after, sizeof before) == 0);
    });
    sw_segment_close(seg);
    sw_segment_unlink(name);
  }
}
END_TEST

/* Every write of a cancel, the process stopped there: the others never
 * wait for it (entries, cancels and window resets go on), and once it goes
 * on, the cancel is whole. */
START_TEST(test_cancel_stopped_at_each_write) {
  static const struct {
    const char *what, *point;
  } k[] = {{"pass", "cancel-second"},    {"pass", "cancel-minute"},
           {"pass", "cancel-in-flight"}, {"borrow", "cancel-future"},
           {"borrow", "cancel-minute"},  {"pacing", "cancel-queue"}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    char name[64], action[32], what[64];
    snprintf(name, sizeof name, "sw-crash-cstop-%d", (int)getpid());
    snprintf(action, sizeof action, "cancel-%s", k[i].what);
    snprintf(what, sizeof what, "%s stopped at %s", k[i].what, k[i].point);
    sw_limiter *a;
    sw_segment *seg = cancel_segment(name, k[i].what, 4, &a);
    const int64_t t = strcmp(k[i].what, "pacing") == 0 ? CT : CT + 100;
    cancel_state before = cancel_state_of(a, t);
    pid_t late = stop_at(k[i].point, action, name);
    IN_BOUNDED_CHILD({
      sw_segment *mine;
      sw_limiter *x, *y;
      sw_decision d;
      CHECK(sw_segment_open(&mine, name, 8, NULL, SW_SEGMENT_ATTACH) == SW_OK);
      CHECK(sw_registry_get(sw_segment_registry(mine), "a", &x) == SW_OK);
      CHECK(sw_registry_get(sw_segment_registry(mine), "b", &y) == SW_OK);
      for (int64_t at = t; at < t + 5000; at += 250) { /* new windows: resets */
        CHECK(sw_limiter_entry_at(y, at, 1, 0, &d) == SW_OK && d.verdict != SW_VERDICT_BLOCK);
        CHECK(sw_limiter_cancel(y, &d) == SW_OK);
      }
      CHECK(sw_limiter_entry_at(x, t, 1, SW_ENTRY_NO_EXIT, &d) == SW_OK);
      CHECK(sw_limiter_cancel(x, &d) == SW_OK);
    });
    kill(late, SIGCONT);
    int status;
    ck_assert_int_eq(waitpid(late, &status, 0), late);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 20, "%s: status %d", what, status);
    const int kept = strcmp(k[i].what, "pacing") == 0; /* its first entry stays */
    ck_cancel_state(a, t, (int)before.window + kept, (int)before.minute + kept,
                    (int)before.in_flight + kept, (int)before.waiting, (int)before.occupied,
                    what);
    sw_segment_close(seg);
    sw_segment_unlink(name);
  }
}
END_TEST

/* A cancel stopped between its check of the window and its CAS while the
 * slot is reset twice: the body it holds now counts a newer window. When
 * that window's word happens to hold the value the cancel read, the CAS
 * succeeds there, and the cancel, seeing the slot moved on, puts it back;
 * otherwise the CAS fails and the cancel finds the slot moved on. Either
 * way the newer window keeps its count exactly (one stripe: the words meet). */
START_TEST(test_cancel_stopped_across_two_resets) {
  for (int same = 0; same < 2; same++) {
    char name[64];
    snprintf(name, sizeof name, "sw-crash-creset-%d", (int)getpid());
    sw_limiter *a;
    sw_segment *seg = cancel_segment(name, "one", 1, &a);
    pid_t late = stop_at("cancel-second", "cancel-one", name); /* read 1 in window CT */
    sw_decision d;
    ck_ok(sw_limiter_entry_at(a, CT + 1100, 1, SW_ENTRY_NO_EXIT, &d)); /* slot 0: reset */
    ck_ok(sw_limiter_entry_at(a, CT + 2100, same ? 1 : 2, SW_ENTRY_NO_EXIT, &d)); /* again */
    kill(late, SIGCONT);
    int status;
    ck_assert_int_eq(waitpid(late, &status, 0), late);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 20, "status %d", status);
    sw_metric *sec = sw_node_second_metric(sw_limiter_node(a));
    ck_assert_int_eq(sw_metric_window_pass_at(sec, CT + 2100), (same ? 1 : 2));
    ck_assert_int_eq(sw_node_total_pass_at(sw_limiter_node(a), CT + 2100), (same ? 2 : 3));
    ck_assert_int_eq(sw_node_concurrency(sw_limiter_node(a)), 0);
    sw_segment_close(seg);
    sw_segment_unlink(name);
  }
}
END_TEST

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--victim") == 0) return victim(argv[2], argv[3]);
  Suite *s = suite_create("crash");
  SW_TCASE(s, "sigkill", test_killed_inside_reset, test_random_kills_keep_counts);
  SW_TCASE(s, "kill points", test_killed_inside_rule_write, test_killed_inside_registry_insert,
           test_killed_inside_segment_creation, test_segment_created_by_two_at_once,
           test_rule_lock_held_by_stopped_process,
           test_insert_lock_held_by_stopped_process, test_strict_admission_across_a_boundary);
  SW_TCASE(s, "cancel", test_killed_inside_cancel, test_cancel_stopped_at_each_write,
           test_cancel_stopped_across_two_resets);
  return sw_test_run(s);
}
