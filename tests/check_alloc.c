/* SPDX-License-Identifier: Apache-2.0 */
/* Allocation failure: an allocator that fails the k-th allocation, for every
 * k in turn. Every call must report SW_ENOMEM (or succeed), and once the
 * scenario has freed what it got, no allocation may be left. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static long fail_at = -1; /* the allocation to fail (0-based); -1: none */
static long allocations, live;

static void *test_malloc(size_t n) {
  if (allocations++ == fail_at) return NULL;
  void *p = malloc(n);
  if (p) live++;
  return p;
}

static void test_free(void *p) {
  if (p) live--;
  free(p);
}

/* Each step either works or fails with SW_ENOMEM; returns the first error. */
#define STEP(call)                                                                \
  do {                                                                            \
    int rc_ = (int)(call);                                                        \
    if (rc_ < 0) {                                                                \
      ck_assert_msg(rc_ == SW_ENOMEM, "%s returned %s with allocation %ld failing: %s", \
                    #call, sw_err_name(rc_), fail_at, sw_last_error());           \
      goto done;                                                                  \
    }                                                                             \
  } while (0)

/* Everything that allocates, end to end. Returns 1 once it ran to the end. */
static int scenario(const char *seg_name) {
  int finished = 0;
  sw_options *o = NULL;
  sw_leap_array *la = NULL;
  sw_metric *m = NULL;
  sw_sliding_view *v = NULL;
  sw_node *node = NULL;
  sw_limiter *l = NULL, *named;
  sw_registry *reg = NULL;
  sw_segment *seg = NULL;
  sw_window w;
  sw_metric_record rec[100];

  STEP(sw_options_create(&o));
  STEP(sw_options_set(o, SW_OPT_OCCUPIABLE, 1));
  STEP(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 100, 1000));
  STEP(sw_leap_array_current_window_at(la, 5000, &w));
  STEP(sw_leap_array_current_window_at(la, 100, &w)); /* detached: thread scratch */
  STEP(sw_metric_create(&m, 100, 1000, o)); /* > 64 windows: reads allocate */
  STEP(sw_metric_add_pass_at(m, 5000, 1));
  STEP(sw_metric_add_waiting(m, 5100, 1));
  STEP(sw_metric_min_rt_at(m, 5000));
  STEP(sw_metric_waiting_at(m, 5000));
  STEP(sw_metric_details_at(m, 5000, rec, 100));
  STEP(sw_sliding_view_create(&v, m, 10, 1000));
  STEP(sw_sliding_view_sum_at(v, 5000, SW_EVENT_PASS));
  STEP(sw_sliding_view_second_metrics_on_condition_at(v, 5000, NULL, NULL, rec, 100));
  STEP(sw_node_create(&node, NULL));
  STEP(sw_node_metrics_at(node, 5000, 0, rec, 100));
  STEP(sw_options_set_double(o, SW_OPT_THRESHOLD, 5));
  STEP(sw_limiter_create(&l, o));
  sw_decision d;
  for (int i = 0; i < 7; i++) STEP(sw_limiter_entry_at(l, 5000, 1, SW_ENTRY_PRIORITIZED, &d));
  STEP(sw_registry_create(&reg, 4, o));
  STEP(sw_registry_get(reg, "a", &named));
  STEP(sw_registry_get(reg, "b", &named));
  STEP(sw_segment_open(&seg, seg_name, 4, o, SW_SEGMENT_CREATE));
  STEP(sw_registry_get(sw_segment_registry(seg), "c", &named));
  finished = 1;
done:
  sw_segment_close(seg);
  sw_registry_free(reg);
  sw_limiter_free(l);
  sw_node_free(node);
  sw_sliding_view_free(v);
  sw_metric_free(m);
  sw_leap_array_free(la);
  sw_options_free(o);
  return finished;
}

static void *scenario_thread(void *name) {
  return (void *)(intptr_t)scenario(name);
}

START_TEST(test_every_allocation_fails_in_turn) {
  char name[64];
  snprintf(name, sizeof name, "sw-alloc-%d", (int)getpid());
  ck_ok(sw_set_alloc_funcs(test_malloc, test_free));
  int done = 0;
  long k;
  for (k = 0; !done && k < 10000; k++) {
    sw_segment_unlink(name);
    fail_at = k;
    allocations = 0;
    /* In a thread of its own, whose exit frees its detached-window scratch. */
    pthread_t tid;
    void *result;
    ck_assert_int_eq(pthread_create(&tid, NULL, scenario_thread, name), 0);
    pthread_join(tid, &result);
    done = result != NULL;
    ck_assert_msg(live == 0, "failing allocation %ld leaked %ld blocks", k, live);
  }
  ck_assert_msg(done, "the scenario never completed");
  fprintf(stderr, "allocation failure: %ld allocation points tried\n", k - 1);
  sw_segment_unlink(name);
  ck_ok(sw_set_alloc_funcs(NULL, NULL));
  ck_sw(sw_set_alloc_funcs(test_malloc, NULL), SW_EINVAL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("alloc");
  SW_TCASE(s, "chaos", test_every_allocation_fails_in_turn);
  return sw_test_run(s);
}
