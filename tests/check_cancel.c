/* SPDX-License-Identifier: Apache-2.0 */
/* sw_limiter_cancel: all or nothing across several limits. Exact counts
 * after entry + cancel sequences for each behaviour and grade, both strict
 * modes; the receipts; threads entering and cancelling at once (exact
 * totals, under ThreadSanitizer too); the flooding client of issue 26; a
 * limiter in a shared segment cancelled from another process. Kills and
 * pauses inside a cancel: tests/check_crash.c. */
#include <pthread.h>
#include <string.h>

#include "testutil.h"
#include "receipt.h"

#define T INT64_C(1000000) /* a round second: windows [T, T + 500), [T + 500, T + 1000) */
#define PASS SW_VERDICT_PASS
#define BLOCK SW_VERDICT_BLOCK
#define WAIT SW_VERDICT_WAIT

static sw_limiter *lim(int grade, int behavior, double threshold, int strict) {
  sw_options *o;
  sw_limiter *l;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_GRADE, grade));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, behavior));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, threshold));
  ck_ok(sw_options_set(o, SW_OPT_STRICT, strict));
  ck_ok(sw_limiter_create(&l, o));
  sw_options_free(o);
  return l;
}

#define ENTER(l, t, n, flags, d, v)                                                        \
  do {                                                                                     \
    ck_ok(sw_limiter_entry_at((l), (t), (n), (flags), &(d)));                              \
    ck_assert_msg((d).verdict == (v), "entry at %lld: verdict %d, expected %d",            \
                  (long long)(t), (d).verdict, (v));                                       \
  } while (0)

#define CANCEL(l, d)                                                                       \
  do {                                                                                     \
    ck_ok(sw_limiter_cancel((l), &(d)));                                                   \
    ck_assert(((d).receipt[0] | (d).receipt[1]) == 0);                                     \
  } while (0)

/* What a limiter's node holds at t: per-second interval and window of t,
 * per-minute interval, in flight. */
typedef struct counts {
  int64_t pass, window, minute, in_flight;
} counts;

static counts counts_at(sw_limiter *l, int64_t t) {
  sw_node *node = sw_limiter_node(l);
  sw_metric *sec = sw_node_second_metric(node);
  return (counts){sw_metric_pass_at(sec, t), sw_metric_window_pass_at(sec, t),
                  sw_node_total_pass_at(node, t), sw_node_concurrency(node)};
}

#define ck_counts(l, t, p, w, m, f)                                                        \
  do {                                                                                     \
    counts c_ = counts_at((l), (t));                                                       \
    ck_assert_msg(c_.pass == (p) && c_.window == (w) && c_.minute == (m) &&                \
                      c_.in_flight == (f),                                                 \
                  "at %lld: pass %lld window %lld minute %lld in flight %lld, expected "   \
                  "%lld %lld %lld %lld", (long long)(t), (long long)c_.pass,               \
                  (long long)c_.window, (long long)c_.minute, (long long)c_.in_flight,     \
                  (long long)(p), (long long)(w), (long long)(m), (long long)(f));         \
  } while (0)

/* ------------------------------------------------------------------ reject */

/* Reject, QPS, both modes: a cancel gives back the entry's passes in both
 * arrays and its request in flight (none with SW_ENTRY_NO_EXIT), so the
 * limit admits again; a block, or a decision cancelled before, is a no-op;
 * a cancel after the window moved on gives back while the window is in
 * its ring, and nothing once its slot holds a newer window (the minute's
 * window still gives back). */
START_TEST(test_cancel_reject) {
  for (int strict = 0; strict < 2; strict++) {
    sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 3, strict);
    sw_decision a, b, c, x, y;
    ENTER(l, T + 100, 1, 0, a, PASS);
    ENTER(l, T + 100, 2, 0, b, PASS);
    ENTER(l, T + 100, 1, 0, x, BLOCK);
    ck_assert(x.receipt[0] == 0 && x.receipt[1] == 0);
    CANCEL(l, x); /* a block: nothing to give back */
    ck_counts(l, T + 100, 3, 3, 3, 2);
    CANCEL(l, b);
    ck_counts(l, T + 100, 1, 1, 1, 1);
    CANCEL(l, b); /* cancelled before: a no-op */
    ck_counts(l, T + 100, 1, 1, 1, 1);
    ENTER(l, T + 200, 2, SW_ENTRY_NO_EXIT, c, PASS); /* room again */
    ENTER(l, T + 200, 1, 0, y, BLOCK);
    CANCEL(l, c);
    ck_counts(l, T + 200, 1, 1, 1, 1); /* nothing was in flight for c */
    ck_assert_int_eq(sw_node_block_request_at(sw_limiter_node(l), T + 200), 2); /* blocks stay */
    /* the next window: a's window is still in the interval */
    ENTER(l, T + 600, 1, 0, c, PASS);
    CANCEL(l, a);
    ck_counts(l, T + 600, 1, 1, 1, 1);
    /* a newer window in a's old slot: c's window left, only the minute gives back */
    ENTER(l, T + 1100, 1, 0, a, PASS);
    ENTER(l, T + 1600, 1, 0, b, PASS); /* slot of c's window */
    ck_counts(l, T + 1600, 2, 1, 3, 3);
    CANCEL(l, c);
    ck_counts(l, T + 1600, 2, 1, 2, 2);
    ck_assert_int_eq(sw_node_total_pass_at(sw_limiter_node(l), T + 600), 0);
    sw_limiter_free(l);
  }
}
END_TEST

/* A strict entry whose time is behind a newer window is decided and
 * counted at the newer window (both arrays): its cancel gives back there. */
START_TEST(test_cancel_strict_behind_newer_window) {
  sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10, 1);
  sw_metric *sec = sw_node_second_metric(sw_limiter_node(l));
  sw_decision a, late;
  ENTER(l, T + 600, 1, 0, a, PASS); /* window T + 500 */
  ENTER(l, T + 400, 2, 0, late, PASS); /* behind: counted at T + 500 */
  ck_assert_int_eq(sw_metric_window_pass_at(sec, T + 500), 3);
  CANCEL(l, late);
  ck_assert_int_eq(sw_metric_window_pass_at(sec, T + 500), 1);
  ck_counts(l, T + 600, 1, 1, 1, 1);
  sw_limiter_free(l);
}
END_TEST

/* ----------------------------------------------------------- prioritized */

/* A borrowed pass given back: from the borrow array while it waits, from
 * its window once that is current (carried), and once its borrow slot was
 * reused (issue 24: carried into its main window first); the per-minute
 * OCCUPIED_PASS and PASS and the request in flight too. Both modes. */
START_TEST(test_cancel_borrowed) {
  for (int strict = 0; strict < 2; strict++) {
    sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10, strict);
    sw_node *node = sw_limiter_node(l);
    sw_metric *sec = sw_node_second_metric(node), *minute = sw_node_minute_metric(node);
    sw_decision d, w1, w2, p;
    for (int i = 0; i < 10; i++) ENTER(l, T + 600, 1, 0, d, PASS); /* window T + 500 */
    ENTER(l, T + 1300, 1, SW_ENTRY_PRIORITIZED, w1, WAIT);
    ck_assert_int_eq(w1.wait_ms, 200); /* borrows window T + 1500 */
    ENTER(l, T + 1300, 2, SW_ENTRY_PRIORITIZED, w2, WAIT);
    ck_assert_int_eq(sw_node_waiting_at(node, T + 1300), 3);
    ck_assert_int_eq(sw_metric_occupied_pass_at(minute, T + 1300), 3);
    CANCEL(l, w2);
    ck_assert_int_eq(sw_node_waiting_at(node, T + 1300), 1);
    ck_assert_int_eq(sw_metric_occupied_pass_at(minute, T + 1300), 1);
    ck_assert_int_eq(sw_node_total_pass_at(node, T + 1300), 11);
    ck_assert_int_eq(sw_node_concurrency(node), 11);
    /* window T + 1500 is current (its first entry carried w1's pass in) */
    ENTER(l, T + 1600, 1, 0, p, PASS);
    ck_assert_int_eq(sw_metric_window_pass_at(sec, T + 1600), 2);
    CANCEL(l, w1);
    ck_assert_int_eq(sw_metric_window_pass_at(sec, T + 1600), 1);
    ck_assert_int_eq(sw_metric_occupied_pass_at(minute, T + 1600), 0);
    ck_assert_int_eq(sw_node_total_pass_at(node, T + 1600), 11);
    ck_assert_int_eq(sw_node_concurrency(node), 11);
    sw_limiter_free(l);
  }
  /* borrowed for a window nobody entered, whose borrow slot is reused */
  for (int strict = 0; strict < 2; strict++) {
    sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 3, strict);
    sw_node *node = sw_limiter_node(l);
    sw_decision d, w1, w2;
    ENTER(l, T + 920, 3, 0, d, PASS);
    ENTER(l, T + 1030, 1, SW_ENTRY_PRIORITIZED, w1, WAIT); /* for T + 1500 */
    ENTER(l, T + 2000, 2, 0, d, PASS);
    ENTER(l, T + 2060, 1, SW_ENTRY_PRIORITIZED, w2, WAIT); /* for T + 2500, the same slot */
    ck_assert(sw_node_pass_qps_at(node, T + 2060) == 3.0);
    CANCEL(l, w1); /* now in main window T + 1500 */
    ck_assert(sw_node_pass_qps_at(node, T + 2060) == 2.0);
    ck_assert_int_eq(sw_node_waiting_at(node, T + 2060), 1);
    CANCEL(l, w2);
    ck_assert_int_eq(sw_node_waiting_at(node, T + 2060), 0);
    ck_assert_int_eq(sw_node_concurrency(node), 2);
    sw_limiter_free(l);
  }
}
END_TEST

/* ---------------------------------------------------------------- pacing */

static int64_t wait_of(sw_limiter *l, int64_t t) {
  sw_decision d;
  ck_ok(sw_limiter_entry_at(l, t, 1, 0, &d));
  ck_assert_int_ne(d.verdict, BLOCK);
  return d.wait_ms;
}

/* Pacing, 10 per second (cost 100 ms): the last entry of the queue gives
 * its place back (the next entry waits what it would have); an entry with
 * later ones queued after it keeps its place (they were told their times)
 * but gives back its passes. The first entry ever: back to a fresh queue. */
START_TEST(test_cancel_pacing) {
  sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10, 1);
  sw_decision p0, p1, p2, p3;
  ENTER(l, T, 1, 0, p0, PASS);
  CANCEL(l, p0);
  ck_counts(l, T, 0, 0, 0, 0);
  ENTER(l, T, 1, 0, p0, PASS); /* as if p0 had never come */
  ENTER(l, T, 1, 0, p1, WAIT);
  ENTER(l, T, 1, 0, p2, WAIT);
  ck_assert_int_eq(p2.wait_ms, 200);
  CANCEL(l, p2);
  ENTER(l, T, 1, 0, p3, WAIT);
  ck_assert_int_eq(p3.wait_ms, 200); /* p2's place */
  CANCEL(l, p1); /* p3 queued after it: the place stays */
  ck_counts(l, T, 2, 2, 2, 2);
  CANCEL(l, p3);
  ck_assert_int_eq(wait_of(l, T + 10), 190); /* p3's place back: 200 from T */
  /* a new behaviour restarts the queue: the receipt gives back passes only */
  ENTER(l, T + 10, 1, 0, p1, WAIT);
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP_PACING));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  ck_ok(sw_limiter_set_rule(l, o));
  sw_options_free(o);
  CANCEL(l, p1);
  ck_counts(l, T + 10, 2, 2, 2, 2);
  sw_limiter_free(l);
}
END_TEST

/* Warm-up + pacing: the place moves back by the entry's cost at the warm-up
 * rate (cold here: a third of the threshold); warm-up alone gives back its
 * passes as reject does. */
START_TEST(test_cancel_warm_up) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP_PACING));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 30));
  ck_ok(sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 1000));
  sw_limiter *l;
  ck_ok(sw_limiter_create(&l, o));
  sw_decision a, b;
  int64_t w0 = wait_of(l, T), w1 = wait_of(l, T);
  ENTER(l, T, 1, 0, a, WAIT);
  ENTER(l, T, 1, 0, b, WAIT);
  ck_assert(w0 == 0 && w1 > 0 && a.wait_ms > w1 && b.wait_ms > a.wait_ms);
  CANCEL(l, b);
  CANCEL(l, a);
  ck_assert_int_eq(wait_of(l, T), a.wait_ms);
  ck_counts(l, T, 3, 3, 3, 3);
  sw_limiter_free(l);

  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP));
  ck_ok(sw_limiter_create(&l, o));
  ENTER(l, T, 10, 0, a, PASS); /* cold: 10 of 30 */
  ENTER(l, T, 1, 0, b, BLOCK);
  CANCEL(l, a);
  ENTER(l, T, 10, 0, a, PASS);
  ck_counts(l, T, 10, 10, 10, 1);
  sw_limiter_free(l);
  sw_options_free(o);
}
END_TEST

/* ----------------------------------------------------- concurrency grade */

START_TEST(test_cancel_concurrency_grade) {
  for (int strict = 0; strict < 2; strict++) {
    sw_limiter *l = lim(SW_GRADE_CONCURRENCY, SW_BEHAVIOR_REJECT, 2, strict);
    sw_decision a, b, x;
    ENTER(l, T, 1, 0, a, PASS);
    ENTER(l, T, 1, 0, b, PASS);
    ENTER(l, T, 1, 0, x, BLOCK);
    CANCEL(l, b);
    ck_counts(l, T, 1, 1, 1, 1);
    ENTER(l, T, 1, 0, x, PASS); /* b's place is free */
    ck_ok(sw_limiter_exit_at(l, T + 10, 10, 1, 0));
    ck_ok(sw_limiter_exit_at(l, T + 10, 10, 1, 0));
    ck_counts(l, T + 10, 2, 2, 2, 0);
    sw_limiter_free(l);
  }
}
END_TEST

/* A dry-run rule's would-be block went ahead as a pass: its cancel gives
 * back the pass, the WOULD_BLOCK and the request in flight. */
START_TEST(test_cancel_dry_run) {
  sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1, 1);
  ck_ok(sw_limiter_set_dry_run(l, 1));
  sw_decision a, b;
  ENTER(l, T, 1, 0, a, PASS);
  ENTER(l, T, 1, 0, b, PASS);
  ck_assert_int_eq(b.would_block, 1);
  sw_node *node = sw_limiter_node(l);
  ck_assert(sw_node_would_block_qps_at(node, T) == 1.0);
  CANCEL(l, b);
  ck_assert(sw_node_would_block_qps_at(node, T) == 0.0);
  ck_counts(l, T, 1, 1, 1, 1);
  sw_metric_record rec[2];
  ck_assert_int_eq(sw_metric_details_at(sw_node_minute_metric(node), T, rec, 2), 1);
  ck_assert_int_eq(rec[0].would_block, 0);
  sw_limiter_free(l);
}
END_TEST

/* ---------------------------------------------------------------- errors */

/* The tag bits of a receipt (receipt.h): two limiters whose tags differ. */
static uint64_t tag_of(const sw_decision *d) {
  uint64_t r1 = (uint64_t)d->receipt[1];
  return (r1 >> SW__RC_KIND_SHIFT & 3) == SW__RC_PASS ? r1 & SW__RC_TAG : r1 & SW__RC_OWN_TAG;
}

/* Another limiter's decision, or words that are no receipt: SW_EINVAL,
 * nothing given back, the receipt kept. Receipts of borrowed and paced
 * entries keep 7 bits of the tag: the other limiters here are made again
 * until theirs differ (1 in 128 would not). */
START_TEST(test_cancel_refuses_foreign_decisions) {
  sw_limiter *a = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10, 1);
  sw_decision d, f, w, q0, q, e;
  ENTER(a, T - 400, 1, 0, d, PASS);
  ENTER(a, T - 400, 9, 0, f, PASS);
  ENTER(a, T + 100, 1, SW_ENTRY_PRIORITIZED, w, WAIT);
  sw_limiter *b = NULL, *p = NULL;
  do {
    sw_limiter_free(b);
    sw_limiter_free(p);
    b = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 10, 1);
    p = lim(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 10, 1);
    ENTER(b, T, 1, 0, e, PASS);
    ENTER(p, T, 1, 0, q0, PASS);
    ENTER(p, T, 1, 0, q, WAIT);
    sw_decision pa = d; /* a's tags in the form of b's and p's kinds */
    pa.receipt[1] = w.receipt[1];
    const uint64_t high = SW__RC_OWN_TAG & ~SW__RC_WOULD_BLOCK; /* in both kinds of tag */
    if (tag_of(&q) != tag_of(&pa) && tag_of(&e) != tag_of(&d) &&
        ((uint64_t)(e.receipt[1] ^ d.receipt[1]) & high))
      break;
  } while (1);
  sw_decision kept = d;
  ck_sw(sw_limiter_cancel(b, &d), SW_EINVAL);
  ck_assert(strstr(sw_last_error(), "is not one of this limiter's") != NULL);
  ck_assert(memcmp(&kept, &d, sizeof d) == 0);
  ck_sw(sw_limiter_cancel(b, &w), SW_EINVAL);
  ck_sw(sw_limiter_cancel(a, &q), SW_EINVAL);
  ck_sw(sw_limiter_cancel(a, &e), SW_EINVAL);
  ck_counts(b, T, 1, 1, 1, 1);
  ck_counts(p, T, 2, 2, 2, 2);
  sw_decision junk = d;
  junk.receipt[1] &= ~(int64_t)(3 << SW__RC_KIND_SHIFT); /* kind 0 */
  ck_sw(sw_limiter_cancel(a, &junk), SW_EINVAL);
  ck_counts(a, T + 100, 10, 0, 11, 3);
  CANCEL(a, d);
  CANCEL(a, w);
  ck_counts(a, T + 100, 9, 0, 9, 1);
  ck_assert_int_eq(sw_node_waiting_at(sw_limiter_node(a), T + 100), 0);
  ck_sw(sw_limiter_cancel(NULL, &d), SW_ENULL);
  ck_sw(sw_limiter_cancel(a, NULL), SW_ENULL);
  sw_limiter_free(a);
  sw_limiter_free(b);
  sw_limiter_free(p);
}
END_TEST

/* --------------------------------------------------------- all or nothing */

/* Issue 26: a site limit (100/s) entered before a per-client limit (2/s).
 * A client flooding 1,000 requests is refused by its own limit, and the
 * site limit counts none of those refused requests (they are cancelled
 * there), so 98 other clients still pass in the same second. Without the
 * cancels the flood would use up the site's 100 and refuse them. */
static int request(sw_limiter *site, sw_limiter *client, int64_t t) {
  sw_decision ds, dc;
  ck_ok(sw_limiter_entry_at(site, t, 1, SW_ENTRY_NO_EXIT, &ds));
  if (ds.verdict == BLOCK) return 0;
  ck_ok(sw_limiter_entry_at(client, t, 1, SW_ENTRY_NO_EXIT, &dc));
  if (dc.verdict == BLOCK) {
    ck_ok(sw_limiter_cancel(site, &ds));
    return 0;
  }
  return 1;
}

START_TEST(test_all_or_nothing_flooding_client) {
  for (int strict = 0; strict < 2; strict++) {
    sw_limiter *site = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 100, strict);
    sw_limiter *flooder = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 2, strict);
    int passed = 0;
    for (int i = 0; i < 1000; i++) passed += request(site, flooder, T + i / 4);
    ck_assert_int_eq(passed, 2);
    ck_assert(sw_node_pass_qps_at(sw_limiter_node(site), T + 300) == 2.0);
    for (int c = 0; c < 98; c++) {
      sw_limiter *client = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 2, strict);
      ck_assert_msg(request(site, client, T + 300 + c), "client %d refused", c);
      sw_limiter_free(client);
    }
    ck_assert(sw_node_pass_qps_at(sw_limiter_node(site), T + 500) == 100.0);
    sw_limiter_free(site);
    sw_limiter_free(flooder);
  }
}
END_TEST

/* --------------------------------------------------------------- threads */

#define THREADS 4

typedef struct worker {
  pthread_t tid;
  sw_limiter *l;
  pthread_barrier_t *start;
  int64_t tries, kept, cancelled, t;
  uint32_t flags;
} worker;

/* Enter, and cancel every other admitted entry. */
static void *cancel_worker(void *arg) {
  worker *w = arg;
  pthread_barrier_wait(w->start);
  for (int64_t i = 0; i < w->tries; i++) {
    sw_decision d;
    if (sw_limiter_entry_at(w->l, w->t + i % 7, 1, w->flags, &d) != SW_OK ||
        d.verdict == BLOCK)
      continue;
    if (i % 2 && sw_limiter_cancel(w->l, &d) == SW_OK) {
      w->cancelled++;
    } else {
      w->kept++;
    }
  }
  return NULL;
}

static int64_t run_workers(sw_limiter *l, int64_t t, uint32_t flags, int64_t tries) {
  pthread_barrier_t b;
  worker w[THREADS];
  pthread_barrier_init(&b, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){.l = l, .start = &b, .tries = tries, .t = t, .flags = flags};
    ck_assert_int_eq(pthread_create(&w[i].tid, NULL, cancel_worker, &w[i]), 0);
  }
  int64_t kept = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(w[i].tid, NULL);
    kept += w[i].kept;
  }
  pthread_barrier_destroy(&b);
  return kept;
}

/* Threads entering and cancelling at once: every count is the kept
 * entries', exactly; strict mode never holds more than the threshold;
 * borrowed passes and pacing likewise. */
START_TEST(test_cancel_under_threads) {
  const int64_t tries = 20000;
  for (int strict = 0; strict < 2; strict++) {
    sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1e9, strict);
    int64_t kept = run_workers(l, T + 100, 0, tries);
    ck_counts(l, T + 100, kept, kept, kept, kept);
    sw_limiter_free(l);
    l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 500, strict);
    kept = run_workers(l, T + 100, SW_ENTRY_NO_EXIT, tries);
    ck_counts(l, T + 100, kept, kept, kept, 0);
    if (strict) ck_assert_int_le(kept, 500);
    sw_limiter_free(l);
    /* borrowing: the interval is full, every entry borrows or is refused */
    l = lim(SW_GRADE_QPS, SW_BEHAVIOR_REJECT, 1000, strict);
    sw_decision d;
    ENTER(l, T + 600, 1000, SW_ENTRY_NO_EXIT, d, PASS);
    kept = run_workers(l, T + 700, SW_ENTRY_PRIORITIZED | SW_ENTRY_NO_EXIT, tries / 4);
    ck_assert_int_eq(sw_node_waiting_at(sw_limiter_node(l), T + 700), kept);
    ck_assert_int_eq(sw_metric_occupied_pass_at(sw_node_minute_metric(sw_limiter_node(l)),
                                                T + 700), kept);
    if (strict) ck_assert_int_le(kept, 1000);
    sw_limiter_free(l);
  }
  sw_limiter *l = lim(SW_GRADE_QPS, SW_BEHAVIOR_PACING, 1e6, 1); /* 1 us apart */
  int64_t kept = run_workers(l, T + 100, 0, tries / 4);
  ck_counts(l, T + 100, kept, kept, kept, kept);
  sw_limiter_free(l);
}
END_TEST

/* ---------------------------------------------------------------- shared */

/* A limiter in a shared segment: a decision made through one process's
 * handle is cancelled through another's (mapped elsewhere); a decision of
 * another limiter of the segment is refused. */
START_TEST(test_cancel_across_processes) {
  char name[64];
  snprintf(name, sizeof name, "swck-%d-cancel", (int)getpid());
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  sw_segment *seg;
  sw_segment_unlink(name);
  ck_ok(sw_segment_open(&seg, name, 4, o, SW_SEGMENT_CREATE));
  sw_options_free(o);
  sw_limiter *a, *b;
  ck_ok(sw_registry_get(sw_segment_registry(seg), "a", &a));
  ck_ok(sw_registry_get(sw_segment_registry(seg), "b", &b));
  sw_decision d, other;
  ENTER(a, T, 3, 0, d, PASS);
  ENTER(b, T, 1, 0, other, PASS);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    sw_segment *mine;
    sw_limiter *x;
    int ok = sw_segment_open(&mine, name, 4, NULL, 0) == SW_OK &&
             sw_registry_get(sw_segment_registry(mine), "a", &x) == SW_OK &&
             sw_limiter_cancel(x, &other) == SW_EINVAL && sw_limiter_cancel(x, &d) == SW_OK;
    _exit(ok ? 0 : 1);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
  ck_counts(a, T, 0, 0, 0, 0);
  ck_counts(b, T, 1, 1, 1, 1);
  sw_segment *ro;
  sw_limiter *r;
  ck_ok(sw_segment_open(&ro, name, 4, NULL, SW_SEGMENT_READONLY));
  ck_ok(sw_registry_get(sw_segment_registry(ro), "b", &r));
  ck_sw(sw_limiter_cancel(r, &other), SW_EPERM);
  sw_segment_close(ro);
  sw_segment_close(seg);
  sw_segment_unlink(name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cancel");
  SW_TCASE(s, "behaviours", test_cancel_reject, test_cancel_strict_behind_newer_window,
           test_cancel_borrowed, test_cancel_pacing, test_cancel_warm_up,
           test_cancel_concurrency_grade, test_cancel_dry_run,
           test_cancel_refuses_foreign_decisions);
  SW_TCASE(s, "all or nothing", test_all_or_nothing_flooding_client);
  SW_TCASE(s, "threads", test_cancel_under_threads);
  SW_TCASE(s, "shared", test_cancel_across_processes);
  return sw_test_run(s);
}
