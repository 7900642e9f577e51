/* SPDX-License-Identifier: Apache-2.0 */
/* Named limiters (sw_registry_*): creation on first use, lookups, names,
 * a fixed capacity with no eviction, creation order, the registry's rule as
 * every limiter's starting rule, and concurrent creation of one name
 * (meant to run under ThreadSanitizer too). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static sw_registry *registry_new(uint32_t capacity, const sw_options *o) {
  sw_registry *r = NULL;
  ck_ok(sw_registry_create(&r, capacity, o));
  ck_assert_ptr_nonnull(r);
  return r;
}

static sw_options *qps_rule(double threshold) {
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_GRADE, SW_GRADE_QPS));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, threshold));
  return o;
}

#define ck_msg_has(text)                                                                   \
  ck_assert_msg(strstr(sw_last_error(), (text)) != NULL, "message \"%s\" lacks \"%s\"",    \
                sw_last_error(), (text))

/* Creation: a capacity of 0 (or too large) is SW_ESIZE; bad node options
 * and bad rules are refused as sw_limiter_create refuses them. */
START_TEST(test_create) {
  sw_registry *r = (sw_registry *)&r;
  ck_sw(sw_registry_create(&r, 0, NULL), SW_ESIZE);
  ck_assert_ptr_null(r);
  ck_msg_has("capacity=0");
  ck_sw(sw_registry_create(&r, (1u << 24) + 1, NULL), SW_ESIZE);
  ck_sw(sw_registry_create(NULL, 4, NULL), SW_ENULL);

  sw_options *o = qps_rule(1);
  ck_ok(sw_options_set(o, SW_OPT_MINUTE_SAMPLE_COUNT, 7));
  ck_sw(sw_registry_create(&r, 4, o), SW_ESIZE);
  ck_msg_has("per-minute array:");
  sw_options_free(o);
  o = qps_rule(1);
  ck_ok(sw_options_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  ck_sw(sw_registry_create(&r, 4, o), SW_EINVAL);
  ck_msg_has("SW_GRADE_QPS");
  sw_options_free(o);

  r = registry_new(3, NULL);
  ck_assert_uint_eq(sw_registry_capacity(r), 3);
  ck_assert_uint_eq(sw_registry_count(r), 0);
  sw_registry_free(r);
  r = registry_new(1, NULL);
  ck_assert_uint_eq(sw_registry_capacity(r), 1);
  sw_registry_free(r);
  sw_registry_free(NULL);
}
END_TEST

/* get creates a limiter once and returns the same handle for the same
 * name; find answers 1 / 0 and never creates. */
START_TEST(test_get_and_find) {
  sw_registry *r = registry_new(8, NULL);
  sw_limiter *a = NULL, *a2 = NULL, *b = NULL, *f = NULL;
  ck_sw(sw_registry_find(r, "a", &f), 0);
  ck_assert_ptr_null(f);
  ck_assert_uint_eq(sw_registry_count(r), 0);
  ck_ok(sw_registry_get(r, "a", &a));
  ck_assert_ptr_nonnull(a);
  ck_ok(sw_registry_get(r, "a", &a2));
  ck_assert_ptr_eq(a, a2);
  ck_assert_uint_eq(sw_registry_count(r), 1);
  ck_sw(sw_registry_find(r, "a", &f), 1);
  ck_assert_ptr_eq(f, a);
  ck_sw(sw_registry_find(r, "b", &f), 0);
  ck_assert_uint_eq(sw_registry_count(r), 1);
  ck_ok(sw_registry_get(r, "b", &b));
  ck_assert_ptr_ne(a, b);
  ck_assert_ptr_ne(sw_limiter_node(a), sw_limiter_node(b));
  ck_assert_uint_eq(sw_registry_count(r), 2);
  /* names are compared whole: a prefix or a case change is another name */
  sw_limiter *ab, *A;
  ck_ok(sw_registry_get(r, "ab", &ab));
  ck_ok(sw_registry_get(r, "A", &A));
  ck_assert_ptr_ne(ab, a);
  ck_assert_ptr_ne(A, a);
  ck_assert_uint_eq(sw_registry_count(r), 4);
  /* separate statistics */
  sw_decision d;
  ck_ok(sw_limiter_entry_at(a, 1000, 3, 0, &d));
  ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(a), 1000) +
                          sw_node_block_qps_at(sw_limiter_node(a), 1000),
                      3);
  ck_assert_double_eq(sw_node_total_qps_at(sw_limiter_node(b), 1000), 0);
  sw_registry_free(r);
}
END_TEST

/* "user-2536" and "user-15615" have the same 32-bit hash: the probe must
 * compare names, not hashes. In a capacity-4 registry (an 8-slot index),
 * after one, the other is not found, and get makes it a second limiter. */
START_TEST(test_colliding_names) {
  sw_registry *r = registry_new(4, NULL);
  sw_limiter *a = NULL, *b = NULL, *f = NULL;
  ck_ok(sw_registry_get(r, "user-2536", &a));
  ck_sw(sw_registry_find(r, "user-15615", &f), 0);
  ck_ok(sw_registry_get(r, "user-15615", &b));
  ck_assert_ptr_ne(a, b);
  ck_assert_uint_eq(sw_registry_count(r), 2);
  ck_sw(sw_registry_find(r, "user-2536", &f), 1);
  ck_assert_ptr_eq(f, a);
  ck_sw(sw_registry_find(r, "user-15615", &f), 1);
  ck_assert_ptr_eq(f, b);
  sw_registry_free(r);
}
END_TEST

/* Names are 1..63 bytes: 63 is fine, 64 and "" are SW_ERANGE (get and find),
 * NULL is SW_ENULL; failures add nothing. */
START_TEST(test_names) {
  sw_registry *r = registry_new(4, NULL);
  char name[80];
  memset(name, 'x', sizeof name);
  name[SW_NAME_MAX] = '\0';
  ck_assert_uint_eq(strlen(name), 63);
  sw_limiter *l = NULL, *l2 = NULL;
  ck_ok(sw_registry_get(r, name, &l));
  ck_sw(sw_registry_find(r, name, &l2), 1);
  ck_assert_ptr_eq(l, l2);
  const char *stored = NULL;
  ck_ok(sw_registry_at(r, 0, NULL, &stored));
  ck_assert_str_eq(stored, name);

  name[SW_NAME_MAX] = 'x';
  name[SW_NAME_MAX + 1] = '\0';
  ck_sw(sw_registry_get(r, name, &l), SW_ERANGE);
  ck_msg_has("64 bytes");
  ck_sw(sw_registry_find(r, name, &l), SW_ERANGE);
  ck_sw(sw_registry_get(r, "", &l), SW_ERANGE);
  ck_msg_has("0 bytes");
  ck_sw(sw_registry_find(r, "", &l), SW_ERANGE);
  ck_sw(sw_registry_get(r, NULL, &l), SW_ENULL);
  ck_sw(sw_registry_find(r, NULL, &l), SW_ENULL);
  ck_sw(sw_registry_get(r, "ok", NULL), SW_ENULL);
  ck_sw(sw_registry_find(r, "ok", NULL), SW_ENULL);
  ck_sw(sw_registry_get(NULL, "ok", &l), SW_ENULL);
  ck_sw(sw_registry_find(NULL, "ok", &l), SW_ENULL);
  ck_assert_uint_eq(sw_registry_count(r), 1);
  /* any bytes but NUL: UTF-8, spaces, punctuation */
  ck_ok(sw_registry_get(r, "GET /api/v1/users?id=1", &l));
  ck_ok(sw_registry_get(r, "r\xc3\xa9sum\xc3\xa9 ", &l2));
  ck_assert_ptr_ne(l, l2);
  ck_assert_uint_eq(sw_registry_count(r), 3);
  sw_registry_free(r);
}
END_TEST

/* A full registry refuses new names with SW_EFULL and a message; nothing is
 * evicted and existing names keep working. */
START_TEST(test_full) {
  sw_registry *r = registry_new(2, NULL);
  sw_limiter *a, *b, *c = NULL, *f;
  ck_ok(sw_registry_get(r, "a", &a));
  ck_ok(sw_registry_get(r, "b", &b));
  ck_sw(sw_registry_get(r, "c", &c), SW_EFULL);
  ck_msg_has("full");
  ck_msg_has("c");
  ck_assert_uint_eq(sw_registry_count(r), 2);
  ck_sw(sw_registry_find(r, "c", &f), 0);
  ck_sw(sw_registry_find(r, "a", &f), 1);
  ck_assert_ptr_eq(f, a);
  ck_sw(sw_registry_find(r, "b", &f), 1);
  ck_assert_ptr_eq(f, b);
  ck_ok(sw_registry_get(r, "a", &f));
  ck_assert_ptr_eq(f, a);
  ck_sw(sw_registry_get(r, "d", &f), SW_EFULL);
  ck_assert_uint_eq(sw_registry_count(r), 2);
  const char *name;
  ck_ok(sw_registry_at(r, 0, NULL, &name));
  ck_assert_str_eq(name, "a");
  ck_ok(sw_registry_at(r, 1, NULL, &name));
  ck_assert_str_eq(name, "b");
  sw_registry_free(r);

  /* capacity 1 */
  r = registry_new(1, NULL);
  ck_ok(sw_registry_get(r, "only", &a));
  ck_sw(sw_registry_get(r, "other", &b), SW_EFULL);
  ck_ok(sw_registry_get(r, "only", &b));
  ck_assert_ptr_eq(a, b);
  sw_registry_free(r);
}
END_TEST

/* count / capacity / at: the i-th limiter in creation order, with its name
 * and the handle get returns; i >= count is SW_ERANGE. */
START_TEST(test_at_in_creation_order) {
  sw_registry *r = registry_new(16, NULL);
  const char *names[] = {"zeta", "alpha", "mu", "beta", "omega"};
  sw_limiter *handles[5];
  for (int i = 0; i < 5; i++) ck_ok(sw_registry_get(r, names[i], &handles[i]));
  ck_ok(sw_registry_get(r, "alpha", &handles[1])); /* again: no new entry */
  ck_assert_uint_eq(sw_registry_count(r), 5);
  ck_assert_uint_eq(sw_registry_capacity(r), 16);
  for (uint32_t i = 0; i < 5; i++) {
    sw_limiter *l = NULL;
    const char *name = NULL;
    ck_ok(sw_registry_at(r, i, &l, &name));
    ck_assert_str_eq(name, names[i]);
    ck_assert_ptr_eq(l, handles[i]);
    l = NULL;
    ck_ok(sw_registry_at(r, i, &l, NULL));
    ck_assert_ptr_eq(l, handles[i]);
  }
  sw_limiter *l;
  ck_sw(sw_registry_at(r, 5, &l, NULL), SW_ERANGE);
  ck_msg_has("5");
  ck_sw(sw_registry_at(r, UINT32_MAX, &l, NULL), SW_ERANGE);
  ck_sw(sw_registry_at(NULL, 0, &l, NULL), SW_ENULL);
  ck_assert_uint_eq(sw_registry_count(NULL), 0);
  ck_assert_uint_eq(sw_registry_capacity(NULL), 0);
  sw_registry_free(r);
}
END_TEST

/* Every limiter starts with the registry's rule and node geometry; each
 * can get its own rule with sw_limiter_set_rule without touching the
 * others or the rule later limiters start with. */
START_TEST(test_rules_per_limiter) {
  sw_options *o = qps_rule(5);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 2000));
  sw_registry *r = registry_new(8, o);
  sw_limiter *a, *b, *c;
  ck_ok(sw_registry_get(r, "a", &a));
  ck_ok(sw_registry_get(r, "b", &b));
  sw_options *got;
  ck_ok(sw_options_create(&got));
  double x;
  int64_t v;
  ck_ok(sw_limiter_get_rule(a, got));
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 5);
  ck_ok(sw_options_get(got, SW_OPT_GRADE, &v));
  ck_assert_int_eq(v, SW_GRADE_QPS);
  ck_assert_double_eq(sw_metric_interval_sec(sw_node_second_metric(sw_limiter_node(a))), 2);

  sw_options *seven = qps_rule(7);
  ck_ok(sw_limiter_set_rule(a, seven));
  ck_ok(sw_limiter_get_rule(a, got));
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 7);
  ck_ok(sw_limiter_get_rule(b, got));
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 5);
  ck_ok(sw_registry_get(r, "c", &c));
  ck_ok(sw_limiter_get_rule(c, got));
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 5);
  /* and they decide by their own rules: 5 vs 7 per second (2 s interval:
   * (int)(pass / 2) + 1 <= threshold admits 2 * threshold in one instant) */
  sw_decision d;
  int pa = 0, pb = 0;
  for (int i = 0; i < 30; i++) {
    ck_ok(sw_limiter_entry_at(a, 10000, 1, 0, &d));
    pa += d.verdict == SW_VERDICT_PASS;
    ck_ok(sw_limiter_entry_at(b, 10000, 1, 0, &d));
    pb += d.verdict == SW_VERDICT_PASS;
  }
  ck_assert_int_eq(pa, 14);
  ck_assert_int_eq(pb, 10);
  /* the registry's options are copied: freeing them changes nothing */
  sw_options_free(o);
  sw_limiter *e;
  ck_ok(sw_registry_get(r, "e", &e));
  ck_ok(sw_limiter_get_rule(e, got));
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 5);
  sw_options_free(seven);
  sw_options_free(got);
  sw_registry_free(r);
}
END_TEST

/* ---------------------------------------------------------------- threads */

#define THREADS 4
#define NAMES 64

typedef struct getter {
  pthread_t tid;
  sw_registry *r;
  pthread_barrier_t *start;
  int id;
  int rc;
  sw_limiter *got[NAMES];
} getter;

static void *get_shared(void *arg) {
  getter *g = arg;
  pthread_barrier_wait(g->start);
  g->rc = sw_registry_get(g->r, "shared", &g->got[0]);
  if (g->rc == SW_OK) {
    sw_decision d;
    g->rc = sw_limiter_entry_at(g->got[0], 1000, 1, 0, &d);
  }
  return NULL;
}

/* 4 threads get the same new name at once: exactly one entry is created
 * and all get the same handle. Repeated on fresh registries. */
START_TEST(test_concurrent_get_same_name) {
  for (int round = 0; round < 50; round++) {
    sw_registry *r = registry_new(4, NULL);
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, THREADS);
    getter g[THREADS];
    for (int i = 0; i < THREADS; i++) {
      memset(&g[i], 0, sizeof g[i]);
      g[i].r = r;
      g[i].start = &b;
      g[i].id = i;
      ck_assert_int_eq(pthread_create(&g[i].tid, NULL, get_shared, &g[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(g[i].tid, NULL);
    pthread_barrier_destroy(&b);
    for (int i = 0; i < THREADS; i++) {
      ck_assert_int_eq(g[i].rc, SW_OK);
      ck_assert_ptr_eq(g[i].got[0], g[0].got[0]);
    }
    ck_assert_uint_eq(sw_registry_count(r), 1);
    /* the four entries all went to the one limiter */
    ck_assert_double_eq(sw_node_total_qps_at(sw_limiter_node(g[0].got[0]), 1000), THREADS);
    sw_registry_free(r);
  }
}
END_TEST

static void *get_many(void *arg) {
  getter *g = arg;
  char name[16];
  pthread_barrier_wait(g->start);
  for (int k = 0; k < NAMES; k++) {
    /* each thread walks the names in its own order */
    int i = g->id % 2 ? NAMES - 1 - k : (k * 7 + g->id) % NAMES;
    snprintf(name, sizeof name, "name-%d", i);
    int rc = sw_registry_get(g->r, name, &g->got[i]);
    if (rc != SW_OK) g->rc = rc;
    sw_limiter *f = NULL;
    if (sw_registry_find(g->r, name, &f) != 1 || f != g->got[i]) g->rc = SW_ESTATE;
  }
  return NULL;
}

/* 4 threads create 64 names in different orders while others look them up:
 * 64 entries, one handle per name, every name at its own index. */
START_TEST(test_concurrent_get_many_names) {
  for (int round = 0; round < 10; round++) {
    sw_registry *r = registry_new(NAMES, NULL);
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, THREADS);
    getter g[THREADS];
    for (int i = 0; i < THREADS; i++) {
      memset(&g[i], 0, sizeof g[i]);
      g[i].r = r;
      g[i].start = &b;
      g[i].id = i;
      ck_assert_int_eq(pthread_create(&g[i].tid, NULL, get_many, &g[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(g[i].tid, NULL);
    pthread_barrier_destroy(&b);
    for (int i = 0; i < THREADS; i++) ck_assert_int_eq(g[i].rc, SW_OK);
    ck_assert_uint_eq(sw_registry_count(r), NAMES);
    for (int k = 0; k < NAMES; k++)
      for (int i = 1; i < THREADS; i++) ck_assert_ptr_eq(g[i].got[k], g[0].got[k]);
    /* at() lists each name once, with its handle */
    int seen[NAMES] = {0};
    for (uint32_t i = 0; i < NAMES; i++) {
      sw_limiter *l;
      const char *name;
      ck_ok(sw_registry_at(r, i, &l, &name));
      int k = -1;
      ck_assert_int_eq(sscanf(name, "name-%d", &k), 1);
      ck_assert(k >= 0 && k < NAMES);
      ck_assert_int_eq(seen[k]++, 0);
      ck_assert_ptr_eq(l, g[0].got[k]);
    }
    sw_registry_free(r);
  }
}
END_TEST

/* A name created with its own rule starts with it; an existing name keeps
 * the rule it has; a bad rule creates nothing. */
START_TEST(test_get_ex_creates_with_rule) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 10));
  sw_registry *r;
  ck_ok(sw_registry_create(&r, 4, o));
  sw_options *mine;
  ck_ok(sw_options_create(&mine));
  ck_ok(sw_options_set_double(mine, SW_OPT_THRESHOLD, 2));
  sw_limiter *l, *again;
  ck_ok(sw_registry_get_ex(r, "vip", mine, &l));
  sw_decision d;
  int passed = 0;
  for (int i = 0; i < 5; i++) {
    ck_ok(sw_limiter_entry_at(l, 1000, 1, 0, &d));
    passed += d.verdict == SW_VERDICT_PASS;
  }
  ck_assert_int_eq(passed, 2);
  ck_ok(sw_registry_get_ex(r, "vip", o, &again)); /* exists: rule unchanged */
  ck_assert_ptr_eq(again, l);
  ck_ok(sw_limiter_entry_at(l, 1000, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_ok(sw_options_set(mine, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  ck_ok(sw_options_set(mine, SW_OPT_GRADE, SW_GRADE_CONCURRENCY));
  ck_sw(sw_registry_get_ex(r, "bad", mine, &l), SW_EINVAL);
  ck_assert_int_eq(sw_registry_count(r), 1);
  sw_registry_free(r);
  sw_options_free(mine);
  sw_options_free(o);
}
END_TEST

/* A new rule for the whole registry: existing names get it (keeping their
 * counts), and so do names created afterwards. sw_registry_at finds every
 * name by its block. */
START_TEST(test_set_rule_for_all) {
  sw_options *o;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 1));
  sw_registry *r;
  ck_ok(sw_registry_create(&r, 8, o));
  sw_limiter *a, *b;
  sw_decision d;
  ck_ok(sw_registry_get(r, "a", &a));
  ck_ok(sw_limiter_entry_at(a, 1000, 1, 0, &d));
  ck_ok(sw_limiter_entry_at(a, 1000, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 3));
  ck_ok(sw_registry_set_rule(r, o));
  ck_ok(sw_limiter_entry_at(a, 1000, 1, 0, &d)); /* 1 passed before: 2 of 3 */
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  ck_ok(sw_registry_get(r, "b", &b));
  int passed = 0;
  for (int i = 0; i < 5; i++) {
    ck_ok(sw_limiter_entry_at(b, 1000, 1, 0, &d));
    passed += d.verdict == SW_VERDICT_PASS;
  }
  ck_assert_int_eq(passed, 3);
  const char *name;
  for (uint32_t i = 0; i < 2; i++) {
    ck_ok(sw_registry_at(r, i, NULL, &name));
    ck_assert_str_eq(name, i == 0 ? "a" : "b");
  }
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING));
  ck_ok(sw_options_set(o, SW_OPT_GRADE, SW_GRADE_CONCURRENCY));
  ck_sw(sw_registry_set_rule(r, o), SW_EINVAL);
  ck_sw(sw_registry_set_rule(NULL, o), SW_ENULL);
  sw_registry_free(r);
  sw_options_free(o);
}
END_TEST

int main(void) {
  Suite *s = suite_create("registry");
  SW_TCASE(s, "core", test_set_rule_for_all, test_get_ex_creates_with_rule, test_create, test_get_and_find, test_colliding_names, test_names, test_full,
           test_at_in_creation_order, test_rules_per_limiter);
  SW_TCASE(s, "threads", test_concurrent_get_same_name, test_concurrent_get_many_names);
  return sw_test_run(s);
}
