/* SPDX-License-Identifier: Apache-2.0 */
/* Keyed tables in shared segments: processes sharing every key exactly,
 * strict per key across processes, read-only attaches, a million keys in a
 * file reserved whole, and processes killed anywhere — at random, and at exact
 * points of an insert — leaving the table usable and its counts right. */
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#include "segutil.h"

static sw_options *kopts(double threshold, int on_full) {
  sw_options *o = rule(threshold);
  ck_ok(sw_options_set(o, SW_OPT_KEYED_ON_FULL, on_full));
  return o;
}

static sw_keyed *kopen(const char *name, uint32_t cap, const sw_options *o, uint32_t flags) {
  sw_keyed *k = NULL;
  ck_ok(sw_keyed_open(&k, name, cap, o, flags));
  ck_assert_ptr_nonnull(k);
  return k;
}

static int64_t kpass(const sw_keyed *k, int64_t t, const char *key) {
  sw_keyed_key s;
  int rc = sw_keyed_lookup_at(k, t, key, strlen(key), &s);
  return rc == 1 ? s.pass : rc == 0 ? -1 : rc;
}

static void *shared_map(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(p, MAP_FAILED);
  return p;
}

/* 4 processes x 500 entries on each of 20 keys, one window: every key
 * counts exactly 2000; with threshold 700 per key, exactly 700 pass. */
START_TEST(test_processes_share_keys_exactly) {
  const double thresholds[] = {1e6, 700};
  for (int round = 0; round < 2; round++) {
    char name[64];
    shm_name(name, sizeof name, "kshare");
    sw_options *o = kopts(thresholds[round], SW_FULL_CLOSED);
    sw_keyed *k = kopen(name, 100, o, SW_SEGMENT_RESET);
    ck_assert_int_eq(sw_keyed_created(k), 1);
    _Atomic int64_t *passed = shared_map(20 * sizeof *passed);
    flush_all();
    pid_t pid[4];
    for (int p = 0; p < 4; p++) {
      if ((pid[p] = fork()) == 0) {
        sw_keyed *mine;
        CHILD_CHECK(sw_keyed_open(&mine, name, 100, o, 0) == SW_OK, 2);
        CHILD_CHECK(sw_keyed_created(mine) == 0, 3);
        for (int i = 0; i < 500; i++)
          for (int key = 0; key < 20; key++) {
            char kb[8];
            snprintf(kb, sizeof kb, "c%d", key);
            sw_decision d;
            CHILD_CHECK(sw_keyed_entry_at(mine, 50000, kb, strlen(kb), 1, 0, &d) == SW_OK, 4);
            if (d.verdict == SW_VERDICT_PASS) atomic_fetch_add(&passed[key], 1);
          }
        _exit(0);
      }
    }
    for (int p = 0; p < 4; p++) ck_assert_int_eq(wait_child(pid[p]), 0);
    for (int key = 0; key < 20; key++) {
      char kb[8];
      snprintf(kb, sizeof kb, "c%d", key);
      int64_t want = round == 0 ? 2000 : 700;
      ck_assert_int_eq(atomic_load(&passed[key]), want);
      ck_assert_int_eq(kpass(k, 50000, kb), want);
    }
    munmap((void *)passed, 20 * sizeof *passed);
    sw_keyed_free(k);
    sw_options_free(o);
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

/* A read-only attach reads every key and refuses writes. */
START_TEST(test_readonly) {
  char name[64];
  shm_name(name, sizeof name, "kro");
  sw_options *o = kopts(10, SW_FULL_EVICT);
  sw_keyed *k = kopen(name, 100, o, SW_SEGMENT_RESET);
  sw_decision d;
  ck_ok(sw_keyed_entry_at(k, 5000, "a", 1, 3, 0, &d));
  sw_keyed *ro = kopen(name, 0, NULL, SW_SEGMENT_READONLY);
  ck_assert_int_eq(kpass(ro, 5000, "a"), 3);
  ck_sw(sw_keyed_entry_at(ro, 5000, "a", 1, 1, 0, &d), SW_EPERM);
  ck_sw(sw_keyed_entry_at(ro, 5000, "new", 3, 1, 0, &d), SW_EPERM);
  ck_sw(sw_keyed_exit_at(ro, 5000, "a", 1, 1, 1, 0), SW_EPERM);
  ck_sw(sw_keyed_set_rule(ro, o), SW_EPERM);
  ck_sw(sw_keyed_set_dry_run(ro, 1), SW_EPERM);
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(ro, &in));
  ck_assert_int_eq(in.keys, 1);
  ck_assert_int_eq(in.pass, 3);
  sw_keyed_free(ro);
  sw_keyed_free(k);
  sw_options_free(o);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A million distinct IPv4 keys in a segment: each limited exactly, the
 * file about 81 bytes per key, all of it reserved at creation. */
START_TEST(test_million_keys_in_a_segment) {
  char name[256];
  file_name(name, sizeof name, "kmillion");
  sw_options *o = kopts(2, SW_FULL_CLOSED);
  sw_keyed *k = kopen(name, 1000000, o, SW_SEGMENT_CREATE);
  struct stat st;
  ck_assert_int_eq(stat(name, &st), 0);
  ck_assert_int_le(st.st_size, 82 * 1000000);
  ck_assert_int_ge((int64_t)st.st_blocks * 512, st.st_size); /* reserved: no SIGBUS later */
  int64_t wrong = 0;
  for (uint32_t i = 0; i < 1000000; i++) {
    uint32_t ip = 0xc0a80000u + i * 13u;
    unsigned char key[4] = {ip >> 24, ip >> 16, ip >> 8, ip};
    for (int j = 0; j < 3; j++) {
      sw_decision d;
      ck_ok(sw_keyed_entry_at(k, 90000, key, 4, 1, 0, &d));
      wrong += d.verdict != (j < 2 ? SW_VERDICT_PASS : SW_VERDICT_BLOCK);
    }
  }
  ck_assert_int_eq(wrong, 0);
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(k, &in));
  ck_assert_int_eq(in.keys, 1000000);
  ck_assert_int_eq(in.evicted + in.refused, 0);
  sw_keyed_free(k);
  sw_options_free(o);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* ------------------------------------------------------------------ kills */

/* A process that fills a table with idle keys, then inserts a new one that
 * takes an idle key's place (and is killed at the point its environment
 * names, inside the bucket's lock). */
static int victim(const char *seg_name) {
  sw_keyed *k;
  if (sw_keyed_open(&k, seg_name, 12, NULL, 0) != SW_OK) return 3;
  sw_decision d;
  sw_keyed_entry_at(k, 100000, "newcomer", 8, 1, 0, &d);
  sw_keyed_free(k); /* (LeakSanitizer would change the exit status) */
  return 0; /* not killed: the parent reports it */
}

static void kill_at(const char *point, const char *seg_name) {
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("SW_TEST_KILL_AT", point, 1);
    execl("/proc/self/exe", "check_keyed_segment", "--victim", seg_name, (char *)NULL);
    _exit(99);
  }
  ck_assert_int_eq(wait_child(pid), 128 + SIGKILL);
}

/* Killed while giving an idle key's place to a new one (moving its words,
 * or writing the new key): the next locker of that bucket repairs it; the
 * old keys and the new one then work, each exactly, and nothing hangs. */
START_TEST(test_killed_inside_an_insert) {
  const char *points[] = {"keyed-move", "keyed-fill"};
  for (int p = 0; p < 2; p++) {
    char name[64];
    shm_name(name, sizeof name, "kkill");
    sw_options *o = kopts(5, SW_FULL_CLOSED);
    sw_keyed *k = kopen(name, 12, o, SW_SEGMENT_RESET); /* one bucket of 16 */
    for (int i = 0; i < 16; i++) {
      char key[8];
      snprintf(key, sizeof key, "old%d", i);
      sw_decision d;
      ck_ok(sw_keyed_entry_at(k, 1000, key, strlen(key), 1, 0, &d));
    }
    kill_at(points[p], name);
    flush_all();
    pid_t check = fork();
    if (check == 0) {
      alarm(10);
      sw_decision d;
      for (int i = 0; i < 6; i++) {
        CHILD_CHECK(sw_keyed_entry_at(k, 100000, "newcomer", 8, 1, 0, &d) == SW_OK, 2);
        CHILD_CHECK(d.verdict == (i < 5 ? SW_VERDICT_PASS : SW_VERDICT_BLOCK), 3);
      }
      for (int i = 0; i < 16; i++) { /* every old key can come back, exactly */
        char key[8];
        snprintf(key, sizeof key, "old%d", i);
        CHILD_CHECK(sw_keyed_entry_at(k, 100000, key, strlen(key), 5, 0, &d) == SW_OK, 4);
        CHILD_CHECK(d.verdict == SW_VERDICT_PASS || i >= 15, 5);
      }
      CHILD_CHECK(kpass(k, 100000, "newcomer") == 5, 6);
      /* no place was lost: 16 keys active at once all find one */
      for (int i = 0; i < 16; i++) {
        char key[8];
        snprintf(key, sizeof key, "new%d", i);
        CHILD_CHECK(sw_keyed_entry_at(k, 200000, key, strlen(key), 1, 0, &d) == SW_OK, 7);
        CHILD_CHECK(d.verdict == SW_VERDICT_PASS && !d.full, 8);
      }
      _exit(0);
    }
    ck_assert_msg(wait_child(check) == 0, "after a kill at %s", points[p]);
    sw_keyed_free(k);
    sw_options_free(o);
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

/* An idle key entered again while a new key is taking its place: the
 * inserter, stopped after choosing the idle key and before moving its
 * words, finds it active and leaves it; its count is not lost. */
START_TEST(test_idle_key_entered_while_reclaimed) {
  char name[64];
  shm_name(name, sizeof name, "kback");
  sw_options *o = kopts(5, SW_FULL_CLOSED);
  sw_keyed *k = kopen(name, 12, o, SW_SEGMENT_RESET); /* one bucket of 16 */
  sw_decision d;
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "old%d", i);
    ck_ok(sw_keyed_entry_at(k, 1000, key, strlen(key), 1, 0, &d));
  }
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    setenv("SW_TEST_KILL_AT", "keyed-reclaim:1:stop", 1);
    execl("/proc/self/exe", "check_keyed_segment", "--victim", name, (char *)NULL);
    _exit(99);
  }
  int st;
  ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
  ck_assert(WIFSTOPPED(st)); /* holding the bucket's lock, old0 chosen */
  for (int i = 0; i < 16; i++) { /* every old key comes back: old0 among them */
    char key[8];
    snprintf(key, sizeof key, "old%d", i);
    ck_ok(sw_keyed_entry_at(k, 100000, key, strlen(key), 1, 0, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  }
  kill(pid, SIGCONT);
  ck_assert_int_eq(wait_child(pid), 0);
  for (int i = 0; i < 16; i++) {
    char key[8];
    snprintf(key, sizeof key, "old%d", i);
    ck_assert_msg(kpass(k, 100000, key) == 1, "%s lost its pass", key);
  }
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(k, &in));
  ck_assert_int_eq(in.reclaimed, 0);
  ck_assert_int_eq(in.refused, 1); /* the newcomer: every key active again */
  sw_keyed_free(k);
  sw_options_free(o);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

#define WORKERS 4
#define T_END INT64_C(1000000000) /* after the churn, in the same epoch of the clock */

typedef struct board {
  _Atomic int64_t done[WORKERS];
  _Atomic int64_t clock;
  _Atomic int final_phase;
} board;

static void worker(const char *seg_name, board *b, int id) {
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a test that failed */
  sw_keyed *k;
  if (sw_keyed_open(&k, seg_name, 64, NULL, 0) != SW_OK) _exit(3);
  uint32_t r = (uint32_t)getpid() * 2654435761u;
  for (int64_t i = 0;; i++) {
    sw_decision d;
    char key[32];
    if (!atomic_load(&b->final_phase)) {
      /* churn: time runs fast and keys are many, so places change hands */
      r = r * 1103515245u + 12345u;
      snprintf(key, sizeof key, "k%u", (r >> 8) % 300);
      sw_keyed_entry_at(k, atomic_fetch_add(&b->clock, 7), key, strlen(key), 1, 0, &d);
    } else {
      /* a key per 500,000 entries: each stays under the 2^20 a window counts */
      snprintf(key, sizeof key, "f%d-%lld", id, (long long)(atomic_load(&b->done[id]) / 500000));
      int rc = sw_keyed_entry_at(k, T_END, key, strlen(key), 1, 0, &d);
      if (rc != SW_OK) {
        fprintf(stderr, "worker %d: %s (%s)\n", id, sw_err_name(rc), sw_last_error());
        _exit(5);
      }
      atomic_fetch_add(&b->done[id], 1); /* only after the call returned */
    }
  }
}

/* Workers killed at random moments, again and again, while places change
 * hands, then in one final window: every worker keeps going, and each
 * final key counts every entry that returned (at most one more per kill). */
START_TEST(test_random_kills) {
  char name[64];
  shm_name(name, sizeof name, "krandom");
  /* closed, not evict: a churn key arriving late must not evict a final key
   * (an eviction loses an active key's counts by design) */
  sw_options *o = kopts(1e6, SW_FULL_CLOSED);
  sw_keyed *k = kopen(name, 64, o, SW_SEGMENT_RESET);
  board *b = shared_map(sizeof *b);
  atomic_store(&b->clock, 1000000);
  pid_t pid[WORKERS];
  flush_all();
  for (int i = 0; i < WORKERS; i++)
    if ((pid[i] = fork()) == 0) worker(name, b, i);
  unsigned seed = (unsigned)getpid();
  const char *s = getenv("SW_STRESS");
  const int rounds = 120 * (s && atoi(s) > 0 ? atoi(s) : 1);
  int final_kills[WORKERS] = {0};
  for (int r = 0; r < rounds; r++) {
    if (r == rounds / 2) atomic_store(&b->final_phase, 1);
    struct timespec ts = {0, (long)(500 + rand_r(&seed) % 3000) * 1000};
    nanosleep(&ts, NULL);
    int i = rand_r(&seed) % WORKERS;
    kill(pid[i], SIGKILL);
    ck_assert_int_eq(wait_child(pid[i]), 128 + SIGKILL);
    if (atomic_load(&b->final_phase)) final_kills[i]++;
    if ((pid[i] = fork()) == 0) worker(name, b, i);
  }
  int64_t before[WORKERS];
  for (int i = 0; i < WORKERS; i++) before[i] = atomic_load(&b->done[i]);
  for (int spins = 0; spins < 20000; spins++) {
    int moved = 0;
    for (int i = 0; i < WORKERS; i++) moved += atomic_load(&b->done[i]) > before[i];
    if (moved == WORKERS) break;
    struct timespec ts = {0, 500000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < WORKERS; i++) {
    ck_assert_msg(atomic_load(&b->done[i]) > before[i], "worker %d stalled", i);
    kill(pid[i], SIGKILL);
    wait_child(pid[i]);
    final_kills[i]++;
    int64_t done = atomic_load(&b->done[i]), have = 0;
    for (int64_t e = 0; e <= done / 500000; e++) {
      char key[32];
      snprintf(key, sizeof key, "f%d-%lld", i, (long long)e);
      int64_t p = kpass(k, T_END, key);
      have += p > 0 ? p : 0;
    }
    ck_assert_msg(have >= done && have <= done + final_kills[i],
                  "worker %d: %lld entries returned, %lld counted", i, (long long)done,
                  (long long)have);
  }
  munmap(b, sizeof *b);
  sw_keyed_free(k);
  sw_options_free(o);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--victim") == 0) return victim(argv[2]);
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("keyed_segment");
  SW_TCASE(s, "processes", test_processes_share_keys_exactly, test_readonly,
           test_million_keys_in_a_segment);
  SW_TCASE(s, "kills", test_killed_inside_an_insert, test_idle_key_entered_while_reclaimed,
           test_random_kills);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
