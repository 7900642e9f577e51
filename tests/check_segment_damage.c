/* SPDX-License-Identifier: Apache-2.0 */
/* Damage the segment fuzzer (tests/fuzz/segments.sh) found in registry
 * segments, each made by hand: an index entry in no known state, a mutex
 * whose kind word is damaged, a damaged rule, window starts that are no
 * window's (found at attach, and written after it), a slot sequence at the
 * top of its range, counts whose sum overflows, a concurrency count at the
 * ends of its range. Each gives an error or a
 * wrong count, never a hang, a crash or undefined behaviour. The damage is
 * written through the mapping, found by the library's own layout headers. */
#include <math.h>
#include <signal.h>

#include "limiter.h"
#include "registry.h"
#include "segutil.h"

/* The limiter block of registry entry i (its handle not yet bound). */
static unsigned char *block(sw_segment *seg, uint32_t i) {
  sw_registry *r = sw_segment_registry(seg);
  return r->blocks + (uint64_t)i * r->hdr->block_size;
}

/* The header of a limiter block's per-second main array. */
static sw__la_block *second_array(unsigned char *lim) {
  unsigned char *node = lim + ((sw__limiter_hdr *)lim)->node_off;
  unsigned char *m = node + ((sw__node_hdr *)node)->second_off;
  return (sw__la_block *)(m + ((sw__metric_hdr *)m)->main_off);
}

static sw__la_slot *slot_of(sw__la_block *blk, uint32_t idx) {
  return (sw__la_slot *)((unsigned char *)blk + blk->slots_offset + idx * blk->slot_stride);
}

/* A segment with limiter "a" (entry 0) that passed n at T0. */
static sw_segment *with_a(char *name, size_t cap, const char *tag, const sw_options *o, int n) {
  file_name(name, cap, tag);
  sw_segment *seg = seg_open(name, 4, o, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, n);
  return seg;
}

/* An index entry whose state is none of EMPTY, BUSY, READY: never a
 * match (before, a get spun for ever looking for the BUSY entry). */
START_TEST(test_entry_in_no_state) {
  alarm(20);
  char name[256];
  sw_segment *seg = with_a(name, sizeof name, "state", D, 2);
  sw_registry *r = sw_segment_registry(seg);
  uint32_t found = 0;
  for (uint32_t i = 0; i < r->hdr->index_size; i++)
    if (atomic_load(&r->index[i].state) == SW__ENTRY_READY) {
      atomic_store(&r->index[i].state, 7u);
      found++;
    }
  ck_assert_uint_eq(found, 1);
  sw_segment_close(seg);
  seg = seg_open(name, 4, D, 0);
  sw_limiter *l = NULL;
  ck_sw(sw_registry_find(sw_segment_registry(seg), "a", &l), 0);
  pass_n(get(seg, "a"), T0, 1); /* a new limiter under the name */
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A mutex whose kind says priority-protect: glibc asserted (or, with the
 * elision bit, ran an instruction the CPU lacks). Refused before locking. */
START_TEST(test_damaged_mutex_kind) {
  char name[256];
  sw_segment *seg = with_a(name, sizeof name, "kind", D, 1);
  sw_registry *r = sw_segment_registry(seg);
  r->hdr->insert_lock.__data.__kind = 0xc0; /* process-shared, priority-protect */
  sw_limiter *l = NULL;
  ck_sw(sw_registry_get(r, "b", &l), SW_ECORRUPT);
  ck_msg_has("lock is damaged");
  l = find(seg, "a");
  l->hdr->rule_lock.__data.__kind = 0x1c0;
  sw_options *o = rule(7);
  ck_sw(sw_limiter_set_rule(l, o), SW_ECORRUPT);
  ck_msg_has("rule lock is damaged");
  sw_options_free(o);
  pass_n(l, T0, 1); /* entries take no lock */
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* The published copy of a rule box, as doubles and words. */
static _Atomic uint64_t *published(sw__rule_box *b) { return b->rule[atomic_load(&b->ver) & 1]; }

static void set_threshold(sw__rule_box *b, double v) {
  uint64_t w;
  memcpy(&w, &v, sizeof w);
  atomic_store(&published(b)[offsetof(sw__rule, threshold) / 8], w);
}

/* A damaged rule (a NaN threshold; a queue time no rule has): the limiter
 * is refused when bound, naming the segment and the limiter; a damaged
 * default rule refuses the segment. */
START_TEST(test_damaged_rule) {
  char name[256];
  sw_segment *seg = with_a(name, sizeof name, "rule", D, 1);
  sw_segment_close(seg);
  seg = seg_open(name, 4, D, 0);
  set_threshold(&((sw__limiter_hdr *)block(seg, 0))->rule, NAN);
  sw_limiter *l = NULL;
  ck_sw(sw_registry_find(sw_segment_registry(seg), "a", &l), SW_ECORRUPT);
  ck_msg_has("the rule of limiter 0 is damaged");
  ck_msg_has(name);
  sw_segment_close(seg);

  seg = seg_open(name, 4, D, 0);
  sw__rule_box *box = &((sw__limiter_hdr *)block(seg, 0))->rule;
  set_threshold(box, 5);
  atomic_store(&published(box)[offsetof(sw__rule, max_queue_ms) / 8], UINT64_C(1) << 55);
  ck_sw(sw_registry_find(sw_segment_registry(seg), "a", &l), SW_ECORRUPT);
  sw__registry_hdr *h = sw_segment_registry(seg)->hdr;
  double nan = NAN;
  memcpy(&h->rule[atomic_load(&h->rule_idx) & 1].threshold, &nan, sizeof nan);
  sw_segment_close(seg);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "the rule of the registry");
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, "the rule of the registry");
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A slot whose window start is no window's, or whose sequence is near the
 * top of its range: the limiter is refused when bound. */
START_TEST(test_window_start_at_attach) {
  char name[256];
  sw_segment *seg = with_a(name, sizeof name, "start", D, 1);
  sw_segment_close(seg);
  const int64_t bad[] = {T0 + 1, -500, INT64_MIN};
  for (int i = 0; i < 4; i++) {
    seg = seg_open(name, 4, D, 0);
    sw__la_slot *s = slot_of(second_array(block(seg, 0)), (T0 / 500) % 2);
    uint64_t seq = atomic_load(&s->seq);
    int64_t start = atomic_load(&s->start[(seq >> 1) & 1]);
    ck_assert_int_eq(start, T0);
    if (i < 3) atomic_store(&s->start[(seq >> 1) & 1], bad[i]);
    else atomic_store(&s->seq, UINT64_MAX - 1);
    sw_limiter *l = NULL;
    ck_sw(sw_registry_find(sw_segment_registry(seg), "a", &l), SW_ECORRUPT);
    ck_msg_has(i < 3 ? "window start" : "sequence");
    ck_msg_has("limiter 0");
    if (i < 3) atomic_store(&s->start[(seq >> 1) & 1], start);
    else atomic_store(&s->seq, seq);
    sw_segment_close(seg);
  }
  seg = seg_open(name, 4, D, 0);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 1);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A window start that is no window's, written after the limiter was bound
 * (another process's damage): a strict entry that kept moving to that
 * "newer" window spun for ever; now it is refused after a bounded number
 * of rounds, and says why. */
START_TEST(test_window_start_after_attach) {
  alarm(20);
  char name[256];
  sw_segment *seg = with_a(name, sizeof name, "later", D, 1);
  sw_limiter *l = find(seg, "a");
  pass_n(l, T0 + 500, 1);
  sw__la_slot *s = sw__la_slot_at(&l->node.second.la, (T0 / 500) % 2);
  uint64_t seq = atomic_load(&s->seq);
  atomic_store(&s->start[(seq >> 1) & 1], T0 + 1501);
  sw_decision d;
  ck_ok(sw_limiter_entry_at(l, T0 + 600, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_msg_has("are damaged");
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* The torn-read rule compares sequences modulo 2^64: a sequence at the top
 * of the range is read as it is, not torn for ever. */
START_TEST(test_torn_rule_at_the_top) {
  ck_assert(!sw__la_torn(UINT64_MAX, UINT64_MAX));
  ck_assert(!sw__la_torn(UINT64_MAX - 1, UINT64_MAX - 1));
  ck_assert(!sw__la_torn(UINT64_MAX - 1, UINT64_MAX));
  ck_assert(sw__la_torn(UINT64_MAX - 3, UINT64_MAX));
  ck_assert(!sw__la_torn(6, 2)); /* moved back: not a newer body */
}
END_TEST

/* Counts whose sum over the stripes overflows: a wrong sum, no undefined
 * behaviour (UndefinedBehaviorSanitizer stopped here). */
START_TEST(test_counts_overflow) {
  char name[256];
  sw_options *o = rule(1e9);
  ck_ok(sw_options_set(o, SW_OPT_STRIPES, 2));
  sw_segment *seg = with_a(name, sizeof name, "sum", o, 1);
  sw_limiter *l = find(seg, "a");
  ck_ok(sw_limiter_exit_at(l, T0, 5, 1, 0));
  sw__la_slot *s = sw__la_slot_at(&l->node.second.la, (T0 / 500) % 2);
  sw__mb_stripe *st = sw__la_body(&l->node.second.la, s, (atomic_load(&s->seq) >> 1) & 1);
  for (int i = 0; i < 2; i++) atomic_store(&st[i].c[SW_EVENT_SUCCESS], INT64_MAX - 1);
  sw_metric *m = sw_node_second_metric(sw_limiter_node(l));
  sw_metric_success_at(m, T0); /* any value */
  sw_metric_record rec[4];
  ck_assert_int_ge(sw_metric_details_at(m, T0, rec, 4), 1);
  sw_segment_close(seg);
  sw_options_free(o);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A concurrency count damaged to the ends of its range: entries decide
 * (refused, or admitted with all units left), no overflow. */
START_TEST(test_concurrency_count_damaged) {
  char name[256];
  sw_options *o = rule(3);
  ck_ok(sw_options_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY));
  file_name(name, sizeof name, "conc");
  sw_segment *seg = seg_open(name, 4, o, SW_SEGMENT_CREATE);
  sw_limiter *l = get(seg, "a");
  const int64_t counts[] = {INT64_MIN, INT64_MAX, -1};
  for (int i = 0; i < 3; i++) {
    atomic_store(&l->node.live->concurrency, counts[i]);
    sw_decision d;
    ck_ok(sw_limiter_entry_at(l, T0, 1, 0, &d));
    ck_assert_int_eq(d.verdict, counts[i] > 0 ? SW_VERDICT_BLOCK : SW_VERDICT_PASS);
    ck_assert_int_ge(d.remaining, 0);
  }
  sw_segment_close(seg);
  sw_options_free(o);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

int main(void) {
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("segment_damage");
  SW_TCASE(s, "registry", test_entry_in_no_state, test_damaged_rule,
           test_concurrency_count_damaged);
  SW_TCASE(s, "locks", test_damaged_mutex_kind);
  SW_TCASE(s, "windows", test_window_start_at_attach, test_window_start_after_attach,
           test_torn_rule_at_the_top, test_counts_overflow);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
