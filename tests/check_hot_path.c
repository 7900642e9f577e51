/* SPDX-License-Identifier: Apache-2.0 */
/* The hot path (libsw/admit.h, the window hint, the clocks, the stripes):
 *  - the reject rule's decisions equal a plain model of Sentinel's rule over
 *    random geometries, thresholds, sizes and times, in both admission modes
 *    (the fast path decides most of them, the general path the others);
 *  - a stale hint never sends a count to the wrong window;
 *  - the window clock is coarse by default and pacing is not held to its
 *    ticks;
 *  - adds go to the stripe of the CPU the thread runs on. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/rseq.h>
#include <unistd.h>

#include "testutil.h"

/* ------------------------------------------------------------------ model */

#define MODEL_WINDOWS 4096

/* The reject rule over per-window passes: what libsw must decide. */
typedef struct model {
  int32_t n;
  int64_t wl;
  double isec, threshold;
  int64_t pass[MODEL_WINDOWS]; /* by window number, times < MODEL_WINDOWS * wl */
} model;

static int64_t model_pass(const model *m, int64_t t) { /* the interval ending at t */
  int64_t wid = t / m->wl, sum = 0;
  for (int64_t w = wid - m->n + 1; w <= wid; w++)
    if (w >= 0) sum += m->pass[w];
  return sum;
}

static int64_t model_left(double limit, int64_t used) {
  int64_t whole = (int64_t)limit;
  return whole > used ? whole - used : 0;
}

static bool model_fits(const model *m, int64_t pass, int64_t n) {
  return (double)(int64_t)((double)pass / m->isec) + (double)n <= m->threshold;
}

static sw_decision model_entry(model *m, int64_t t, int64_t n) {
  sw_decision d = {0};
  int64_t pass = model_pass(m, t), ws = t - t % m->wl;
  if (model_fits(m, pass, n)) {
    m->pass[t / m->wl] += n;
    d.verdict = SW_VERDICT_PASS;
    d.remaining = model_left(m->threshold, (int64_t)((double)(pass + n) / m->isec));
    return d;
  }
  d.verdict = SW_VERDICT_BLOCK;
  d.remaining = model_left(m->threshold, (int64_t)((double)pass / m->isec));
  if ((double)n > m->threshold) {
    d.retry_after_ms = -1;
    return d;
  }
  int64_t k = 1;
  for (; k <= 2 * m->n && !model_fits(m, model_pass(m, ws + k * m->wl), n); k++) {
  }
  d.retry_after_ms = ws + (k <= 2 * m->n ? k : 2 * m->n) * m->wl - t;
  return d;
}

/* Random geometries (2 windows most often, as Sentinel's; up to 20, past
 * the fast path's 16), thresholds (fractional too), sizes and steps of
 * time; exits interleaved. Every decision must equal the model's. */
START_TEST(test_reject_matches_model) {
  static model m;
  unsigned seed = 12345u + (unsigned)_i;
  for (int round = 0; round < 60; round++) {
    static const int32_t counts[] = {2, 2, 2, 1, 3, 4, 5, 8, 16, 17, 20};
    static const int64_t lengths[] = {1, 7, 100, 500};
    memset(&m, 0, sizeof m);
    m.n = counts[rand_r(&seed) % (sizeof counts / sizeof counts[0])];
    m.wl = lengths[rand_r(&seed) % 4];
    m.isec = (double)(m.n * m.wl) / 1000.0;
    m.threshold = rand_r(&seed) % 4 == 0 ? 0.5 + rand_r(&seed) % 40 : 1 + rand_r(&seed) % 60;
    int strict = rand_r(&seed) % 2;
    sw_options *o;
    sw_limiter *l;
    ck_ok(sw_options_create(&o));
    ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, m.n));
    ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, m.n * m.wl));
    ck_ok(sw_options_set(o, SW_OPT_OCCUPY_TIMEOUT_MS, 0));
    ck_ok(sw_options_set(o, SW_OPT_STRICT, strict));
    ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, m.threshold));
    ck_ok(sw_limiter_create(&l, o));
    sw_options_free(o);
    int64_t t = rand_r(&seed) % 3 ? 0 : (int64_t)(rand_r(&seed) % 50) * m.wl;
    int64_t in_flight = 0;
    for (int i = 0; i < 400 && t < (MODEL_WINDOWS - 4 * m.n) * m.wl; i++) {
      int r = rand_r(&seed) % 10;
      if (r < 3) t += rand_r(&seed) % (3 * m.wl + 1); /* mostly within a window */
      if (r == 9 && in_flight > 0) {
        ck_ok(sw_limiter_exit_at(l, t, rand_r(&seed) % 50, 1, 0));
        in_flight--;
        continue;
      }
      int64_t n = rand_r(&seed) % 8 == 0 ? rand_r(&seed) % 30 : rand_r(&seed) % 3;
      sw_decision want = model_entry(&m, t, n), got;
      ck_ok(sw_limiter_entry_at(l, t, n, 0, &got));
      ck_assert_msg(got.verdict == want.verdict && got.retry_after_ms == want.retry_after_ms &&
                        got.remaining == want.remaining && got.wait_ms == 0,
                    "round %d (n %d, wl %lld, threshold %g, strict %d), entry %d of %lld at "
                    "%lld: got {verdict %d, retry %lld, remaining %lld}, the model "
                    "{%d, %lld, %lld}",
                    round, m.n, (long long)m.wl, m.threshold, strict, i, (long long)n,
                    (long long)t, got.verdict, (long long)got.retry_after_ms,
                    (long long)got.remaining, want.verdict, (long long)want.retry_after_ms,
                    (long long)want.remaining);
      if (got.verdict == SW_VERDICT_PASS) in_flight++;
    }
    ck_assert_int_eq(sw_metric_pass_at(sw_node_second_metric(sw_limiter_node(l)), t),
                     model_pass(&m, t));
    sw_limiter_free(l);
  }
}
END_TEST

/* ------------------------------------------------------------------- hint */

/* A handle's hint names the slot of the window it last found. When the
 * clock goes back to a time in another window, or another handle's writes
 * move the slot on to a newer window, the hint must not be trusted: every
 * count lands in its own window. */
START_TEST(test_stale_hint_counts_in_the_right_window) {
  sw_metric *m;
  ck_ok(sw_metric_create(&m, 2, 1000, NULL));
  ck_ok(sw_metric_add_pass_at(m, 1200, 1)); /* hint: window 1000, slot 0 */
  ck_ok(sw_metric_add_pass_at(m, 1700, 2)); /* window 1500, slot 1 */
  ck_ok(sw_metric_add_pass_at(m, 1250, 4)); /* back to 1000: its slot still holds it */
  ck_ok(sw_metric_add_pass_at(m, 2100, 8)); /* window 2000 replaces 1000 in slot 0 */
  ck_ok(sw_metric_add_pass_at(m, 1300, 16)); /* 1000 is gone: detached, not in 2000 */
  ck_assert_int_eq(sw_metric_window_pass_at(m, 2100), 8);
  ck_assert_int_eq(sw_metric_window_pass_at(m, 1700), 2);
  ck_assert_int_eq(sw_leap_array_detached_count(sw_metric_leap_array(m)), 1);
  ck_assert_int_eq(sw_metric_pass_at(m, 2100), 10);
  sw_metric_free(m);
}
END_TEST

/* A window of the interval that no entry wrote, but into which entries
 * borrowed (prioritized): its passes count. Window 10500 gets 10 borrowed
 * passes and no entry; an exit creates window 11000, so the entry at 11100
 * finds its window and could decide on the fast path: it must see the 10. */
START_TEST(test_borrowed_only_window_counts) {
  sw_options *o;
  sw_limiter *l;
  sw_decision d;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  ck_ok(sw_limiter_create(&l, o));
  sw_options_free(o);
  for (int i = 0; i < 10; i++) ck_ok(sw_limiter_entry_at(l, 9600, 1, 0, &d));
  for (int i = 0; i < 10; i++) {
    ck_ok(sw_limiter_entry_at(l, 10300, 1, SW_ENTRY_PRIORITIZED, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_WAIT);
  }
  ck_ok(sw_limiter_exit_at(l, 11000, 1, 1, 0));
  ck_ok(sw_limiter_entry_at(l, 11100, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 400); /* 10500 leaves at 11500 */
  ck_ok(sw_limiter_entry_at(l, 11500, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  sw_limiter_free(l);
}
END_TEST

/* A block decided on the fast path says when a retry passes, counting the
 * passes borrowed for the windows to come: 5 in window 9500, 5 in 10000,
 * 5 borrowed for 10500 at 10300. An entry at 10300 is blocked; at 10500
 * the interval still holds 10 (10000's 5 and the 5 borrowed), at 11000
 * only the borrowed 5: the retry is at 11000, not 10500. */
START_TEST(test_retry_after_counts_borrowed_passes) {
  sw_options *o;
  sw_limiter *l;
  sw_decision d;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  ck_ok(sw_limiter_create(&l, o));
  sw_options_free(o);
  for (int i = 0; i < 5; i++) ck_ok(sw_limiter_entry_at(l, 9600, 1, 0, &d));
  for (int i = 0; i < 5; i++) ck_ok(sw_limiter_entry_at(l, 10100, 1, 0, &d));
  for (int i = 0; i < 5; i++) {
    ck_ok(sw_limiter_entry_at(l, 10300, 1, SW_ENTRY_PRIORITIZED, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_WAIT);
  }
  ck_ok(sw_limiter_entry_at(l, 10300, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 700);
  ck_ok(sw_limiter_entry_at(l, 10999, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_ok(sw_limiter_entry_at(l, 11000, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  sw_limiter_free(l);
}
END_TEST

/* SW_ENTRY_NO_EXIT: the entry's passes count, no request in flight does,
 * whatever admits it (the fast path, a dry-run block, a prioritized wait,
 * pacing); an exit then finds none in flight. A reject or pacing table
 * takes the flag and changes nothing. */
START_TEST(test_no_exit_counts_nothing_in_flight) {
  static const int behaviors[] = {SW_BEHAVIOR_REJECT, SW_BEHAVIOR_PACING};
  for (int b = 0; b < 2; b++)
    for (int dry = 0; dry < 2; dry++) {
      sw_options *o;
      sw_limiter *l;
      sw_decision d;
      ck_ok(sw_options_create(&o));
      ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, behaviors[b]));
      ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 2));
      ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 1000));
      ck_ok(sw_options_set(o, SW_OPT_DRY_RUN, dry));
      ck_ok(sw_limiter_create(&l, o));
      sw_options_free(o);
      sw_node *node = sw_limiter_node(l);
      int admitted = 0;
      for (int i = 0; i < 6; i++) {
        uint32_t flags = SW_ENTRY_NO_EXIT | (i == 5 ? SW_ENTRY_PRIORITIZED : 0);
        ck_ok(sw_limiter_entry_at(l, 1000 + 10 * i, 1, flags, &d));
        admitted += d.verdict != SW_VERDICT_BLOCK;
      }
      ck_assert_int_ge(admitted, 2); /* pacing queues, a dry run lets everything through */
      ck_assert_int_eq(sw_node_concurrency(node), 0);
      ck_assert_int_eq(sw_node_total_pass_at(node, 1100), admitted);
      ck_sw(sw_limiter_exit_at(l, 1100, 1, 1, 0), SW_ESTATE);
      ck_ok(sw_limiter_entry_at(l, 1100, 0, 0, &d)); /* without the flag: in flight */
      ck_assert_int_eq(sw_node_concurrency(node), 1);
      sw_limiter_free(l);
    }
  sw_keyed *k;
  sw_decision d;
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 5));
  ck_ok(sw_keyed_create(&k, 4, o));
  sw_options_free(o);
  ck_ok(sw_keyed_entry_at(k, 1000, "a", 1, 1, SW_ENTRY_NO_EXIT, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  sw_keyed_free(k);
}
END_TEST

/* ----------------------------------------------------------------- clocks */

/* Pacing at 10,000 a second with no queue admits one request every 0.1 ms
 * of the duration clock, so several within one tick of the coarse window
 * clock. Paced on the window clock it could admit only one per tick: two
 * admissions with the same sw_now_ms() never happen. The same for a keyed
 * table's pacing per key. (Nothing here depends on the machine's speed:
 * the loop ends at the first pair, which takes 0.2 ms of running.) */
static sw_options *pacing_opts(void) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10000));
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 0));
  return o;
}

START_TEST(test_pacing_uses_the_duration_clock) {
  sw_options *o = pacing_opts();
  sw_limiter *l;
  sw_keyed *k;
  ck_ok(sw_limiter_create(&l, o));
  ck_ok(sw_keyed_create(&k, 16, o));
  sw_options_free(o);
  ck_assert_int_ge(sw_clock_resolution_ns(), 1000000);
  int64_t last = -1, key_last = -1;
  bool two = false, key_two = false;
  int64_t end = sw_now_ns() + 20 * INT64_C(1000000000);
  while (!(two && key_two) && sw_now_ns() < end) {
    sw_decision d;
    int64_t ms = sw_now_ms();
    ck_ok(sw_limiter_entry(l, 1, 0, &d));
    if (d.verdict == SW_VERDICT_PASS) {
      two = two || (ms == last && ms == sw_now_ms());
      last = ms;
      ck_ok(sw_limiter_exit(l, 0, 1, 0));
    }
    ms = sw_now_ms();
    ck_ok(sw_keyed_entry(k, "ip", 2, 1, 0, &d));
    if (d.verdict == SW_VERDICT_PASS) {
      key_two = key_two || (ms == key_last && ms == sw_now_ms());
      key_last = ms;
    }
  }
  ck_assert_msg(two, "no two paced admissions within one tick of the window clock in 20 s");
  ck_assert_msg(key_two, "no two paced admissions of a key within one tick in 20 s");
  sw_limiter_free(l);
  sw_keyed_free(k);
}
END_TEST

/* ---------------------------------------------------------------- stripes */

typedef struct pinned {
  int cpu;
  sw_metric *m;
  int ok;
} pinned;

static void *add_on_cpu(void *arg) {
  pinned *p = arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(p->cpu, &set);
  p->ok = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 &&
          sched_getcpu() == p->cpu && sw_metric_add_pass_at(p->m, 1000, 1 + p->cpu) == SW_OK;
  return NULL;
}

/* A thread on CPU k adds to stripe k (mod the stripes): two CPUs never
 * share a line. The bucket's layout (stripes of one cache line, PASS
 * first) is read directly. Where glibc could not register rseq (valgrind),
 * the stripe comes from the thread instead, and there is nothing to check. */
START_TEST(test_adds_go_to_the_cpu_stripe) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || __rseq_size == 0) return;
  sw_options *o;
  sw_metric *m;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_STRIPES, 4));
  ck_ok(sw_metric_create(&m, 2, 1000, o));
  sw_options_free(o);
  int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN) < 4 ? (int)sysconf(_SC_NPROCESSORS_ONLN) : 4;
  for (int c = 0; c < cpus; c++) {
    pinned p = {c, m, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, add_on_cpu, &p), 0);
    pthread_join(th, NULL);
    if (!p.ok) return; /* this CPU is not ours to pin to */
  }
  sw_window w;
  ck_ok(sw_leap_array_current_window_at(sw_metric_leap_array(m), 1000, &w));
  const int64_t *word = w.bucket; /* 8 words a stripe */
  for (int c = 0; c < cpus; c++)
    ck_assert_msg(word[8 * c + SW_EVENT_PASS] == 1 + c, "stripe %d holds %lld, not CPU %d's %d",
                  c, (long long)word[8 * c + SW_EVENT_PASS], c, 1 + c);
  sw_metric_free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("hot_path");
  TCase *tc = tcase_create("model");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_reject_matches_model, 0, 8);
  suite_add_tcase(s, tc);
  SW_TCASE(s, "hint", test_stale_hint_counts_in_the_right_window,
           test_borrowed_only_window_counts, test_retry_after_counts_borrowed_passes,
           test_no_exit_counts_nothing_in_flight);
  SW_TCASE(s, "clocks", test_pacing_uses_the_duration_clock);
  SW_TCASE(s, "stripes", test_adds_go_to_the_cpu_stripe);
  return sw_test_run(s);
}
