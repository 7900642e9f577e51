/* SPDX-License-Identifier: Apache-2.0 */
/* Rules as data (libsw/rules.c): Sentinel's FlowRule JSON list parsed into
 * rule options and written back in the canonical form; a bad list refused
 * whole, naming the rule and the field; duplicates found in long lists, and
 * a list over its bound refused before it is parsed. And SW_SEGMENT_ATTACH, which
 * swctl rules apply opens segments with: read-write, whatever their
 * geometry, never creating one. Skipped (77) by a libsw without jansson. */
#include <string.h>

#include "segutil.h"

/* The example of Sentinel's dashboard (its FlowRuleEntity, as pushed to a
 * data source), unchanged. */
static const char dashboard[] =
    "[{\"id\": 1, \"app\": \"shop\", \"ip\": \"10.0.0.7\", \"port\": 8719, "
    "\"limitApp\": \"default\", \"resource\": \"GET:/api/orders\", \"grade\": 1, \"count\": 100.0, "
    "\"strategy\": 0, \"refResource\": null, \"controlBehavior\": 2, \"warmUpPeriodSec\": null, "
    "\"maxQueueingTimeMs\": 500, \"clusterMode\": false, \"clusterConfig\": null, "
    "\"gmtCreate\": 1700000000000, \"gmtModified\": 1700000000000},"
    " {\"resource\": \"checkout\", \"count\": 50, \"controlBehavior\": 1, \"warmUpPeriodSec\": 10},"
    " {\"resource\": \"uploads\", \"grade\": 0, \"count\": 4}]";

static sw_rules *parse(const char *json) {
  sw_rules *r = NULL;
  ck_ok(sw_rules_parse(&r, json, strlen(json)));
  ck_assert_ptr_nonnull(r);
  return r;
}

static char *to_json(const sw_rules *r) {
  int64_t n = sw_rules_json(r, NULL, 0);
  ck_assert_int_gt(n, 0);
  char *text = malloc((size_t)n + 1);
  ck_assert_int_eq(sw_rules_json(r, text, (size_t)n + 1), n);
  ck_assert_uint_eq(strlen(text), (size_t)n);
  return text;
}

static double opt(const sw_options *o, sw_option key) {
  double v;
  ck_ok(sw_options_get_double(o, key, &v));
  return v;
}

START_TEST(test_sentinel_dashboard_example) {
  sw_rules *r = parse(dashboard);
  ck_assert_uint_eq(sw_rules_count(r), 3);
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  const char *res;
  int64_t keyed, capacity;
  ck_ok(sw_rules_at(r, 0, &res, o, &keyed, &capacity));
  ck_assert_str_eq(res, "GET:/api/orders");
  ck_assert_double_eq(opt(o, SW_OPT_THRESHOLD), 100);
  ck_assert_double_eq(opt(o, SW_OPT_BEHAVIOR), SW_BEHAVIOR_PACING);
  ck_assert_double_eq(opt(o, SW_OPT_MAX_QUEUE_MS), 500);
  ck_assert_double_eq(opt(o, SW_OPT_WARM_UP_SEC), 10); /* null: Sentinel's default */
  ck_assert_int_eq(keyed, -1);
  ck_assert_int_eq(capacity, 0);
  ck_ok(sw_rules_at(r, 2, &res, o, NULL, NULL));
  ck_assert_str_eq(res, "uploads");
  ck_assert_double_eq(opt(o, SW_OPT_GRADE), SW_GRADE_CONCURRENCY);
  ck_assert_double_eq(opt(o, SW_OPT_STRICT), 1);
  ck_sw(sw_rules_at(r, 3, &res, o, NULL, NULL), SW_ERANGE);
  sw_options_free(o);
  sw_rules_free(r);
}
END_TEST

/* The canonical form parses into the same list and is written the same,
 * byte for byte; libsw's fields are kept. */
START_TEST(test_canonical_round_trip) {
  sw_rules *r = parse(dashboard);
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 0.5));
  ck_ok(sw_options_set(o, SW_OPT_DRY_RUN, 1));
  ck_ok(sw_options_set(o, SW_OPT_STRICT, 0));
  ck_ok(sw_rules_add(r, "per-client", o, 1, 1000));
  sw_options_free(o);
  char *first = to_json(r);
  ck_assert_ptr_nonnull(strstr(first, "\"count\": 0.5,"));
  ck_assert_ptr_nonnull(strstr(first, "\"keyed\": true,\n    \"capacity\": 1000"));
  ck_assert_ptr_nonnull(strstr(first, "\"dryRun\": true"));
  ck_assert_ptr_null(strstr(first, "gmtCreate")); /* the dashboard's bookkeeping: not ours */
  sw_rules *again = parse(first);
  char *second = to_json(again);
  ck_assert_str_eq(first, second);
  /* a buffer too small: cut, NUL-terminated, the whole length returned */
  char small[8];
  ck_assert_int_eq(sw_rules_json(r, small, sizeof small), (int64_t)strlen(first));
  ck_assert_str_eq(small, "[\n  {\n ");
  free(first);
  free(second);
  sw_rules_free(again);
  sw_rules_free(r);
}
END_TEST

/* One bad rule refuses the list: *out stays NULL, the message names the
 * rule (its number and resource) and the field. */
START_TEST(test_bad_lists_name_rule_and_field) {
  static const struct {
    const char *json, *words;
  } bad[] = {
      {"[{\"resource\": \"a\", \"count\": 1},", "not JSON: line 1"},
      {"[{\"resource\": \"a\", \"count\": 1}, {\"resource\": \"b\", \"count\": -1}]",
       "rule 2 (resource \"b\"): count: want a number >= 0"},
      {"[{\"resource\": \"a\", \"count\": 1, \"grade\": 2}]",
       "rule 1 (resource \"a\"): grade: 2 is outside 0..1"},
      {"[{\"resource\": \"a\", \"count\": 1, \"controlBehavior\": 1.5}]",
       "rule 1 (resource \"a\"): controlBehavior: want a whole number"},
      {"[{\"resource\": \"a\", \"count\": 1, \"dryRun\": 1}]",
       "rule 1 (resource \"a\"): dryRun: want true or false"},
      {"[{\"resource\": \"a\", \"count\": 1, \"cuont\": 2}]", "rule 1 (resource \"a\"): cuont: not a field"},
      {"[{\"resource\": \"a\", \"count\": 1, \"strategy\": 2}]", "strategy: 2 (chain) is not supported"},
      {"[{\"resource\": \"a\", \"count\": 1, \"limitApp\": \"other\"}]", "limitApp: libsw limits every caller"},
      {"[{\"resource\": \"a\", \"count\": 1}, {\"resource\": \"a\", \"count\": 2}]",
       "rule 2: resource \"a\" already has rule 1"},
      {"[{\"resource\": \"a\", \"count\": 1, \"count\": 2}]", "duplicate"},
      {"[{\"resource\": \"\", \"count\": 1}]", "rule 1 (resource \"?\"): resource: want a name"},
      {"[{\"resource\": \"a\", \"count\": 1, \"grade\": 1e300}]", "grade: 1.0000000000000001e+300 is outside 0..1"},
      {"[{\"resource\": \"a\", \"count\": 1, \"warmUpPeriodSec\": -1e300}]", "warmUpPeriodSec: -1"},
      {"[{\"resource\": \"a\", \"count\": 1e300}]", "rule 1 (resource \"a\"): count:"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sw_rules *r = (sw_rules *)&r;
    int rc = sw_rules_parse(&r, bad[i].json, strlen(bad[i].json));
    ck_assert_msg(rc < 0, "accepted: %s", bad[i].json);
    ck_assert_ptr_null(r);
    ck_msg_has(bad[i].words);
  }
}
END_TEST

/* ------------------------------------------------------ large lists */

#define RULES_MAX 100000 /* the most one list holds (rules.c) */

/* A list of n rules, resource "r<i>" (tricky: "r<i>,]\"[", commas and
 * brackets inside the string); rule bad (from 1; 0: none) is the text
 * bad_rule instead. Caller frees. */
static char *many_rules(long n, int tricky, long bad, const char *bad_rule, size_t *len) {
  size_t cap = (size_t)n * 48 + strlen(bad_rule) + 16;
  char *json = malloc(cap);
  ck_assert_ptr_nonnull(json);
  size_t at = 0;
  json[at++] = '[';
  for (long i = 1; i <= n; i++) {
    if (i > 1) json[at++] = ',';
    if (i == bad) at += (size_t)snprintf(json + at, cap - at, "%s", bad_rule);
    else at += (size_t)snprintf(json + at, cap - at, "{\"resource\":\"r%ld%s\",\"count\":1}", i,
                                tricky ? ",]\\\"[" : "");
  }
  json[at++] = ']';
  json[at] = '\0';
  *len = at;
  return json;
}

/* A duplicate found in a long list names both rules; the index of the
 * resources holds across its growth (each name added again: SW_EEXIST
 * naming its own rule). */
START_TEST(test_duplicates_in_long_lists) {
  size_t len;
  char *json = many_rules(5000, 0, 4000, "{\"resource\":\"r1234\",\"count\":2}", &len);
  sw_rules *r = (sw_rules *)&r;
  ck_sw(sw_rules_parse(&r, json, len), SW_EEXIST);
  ck_assert_ptr_null(r);
  ck_msg_has("rule 4000: resource \"r1234\" already has rule 1234");
  free(json);
  ck_ok(sw_rules_create(&r));
  char name[32];
  for (int i = 0; i < 3000; i++) {
    snprintf(name, sizeof name, "name-%d", i);
    ck_ok(sw_rules_add(r, name, NULL, -1, 0));
  }
  for (int i = 0; i < 3000; i++) {
    snprintf(name, sizeof name, "name-%d", i);
    ck_sw(sw_rules_add(r, name, NULL, -1, 0), SW_EEXIST);
    char want[64];
    snprintf(want, sizeof want, "already has rule %d", i + 1);
    ck_msg_has(want);
  }
  ck_assert_uint_eq(sw_rules_count(r), 3000);
  const char *res;
  ck_ok(sw_rules_at(r, 2999, &res, NULL, NULL, NULL));
  ck_assert_str_eq(res, "name-2999");
  sw_rules_free(r);
}
END_TEST

/* The bound: a list of 100,000 elements is parsed (its first rule, bad,
 * is what refuses it: commas and brackets inside strings are not
 * elements); one of 100,001 is refused before any rule is parsed — a
 * malformed element past the bound, or a bad value before it, is never
 * reached: the message names the bound. sw_rules_add stops at the bound. */
START_TEST(test_bound_before_parsing) {
  static const char bad_count[] = "{\"resource\":\"x\",\"count\":-1}";
  size_t len;
  char *json = many_rules(RULES_MAX, 1, 1, bad_count, &len);
  sw_rules *r = (sw_rules *)&r;
  ck_sw(sw_rules_parse(&r, json, len), SW_EINVAL);
  ck_msg_has("rule 1 (resource \"x\"): count");
  free(json);
  /* a bad value past the bound and before it; bad JSON past it (before
   * it, an unclosed brace hides the elements after it: jansson says) */
  const struct {
    const char *text;
    long at;
  } bad[] = {{bad_count, RULES_MAX + 1}, {bad_count, 2}, {"{bad json", RULES_MAX + 1}};
  for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
    json = many_rules(RULES_MAX + 1, 1, bad[b].at, bad[b].text, &len);
    r = (sw_rules *)&r;
    ck_sw(sw_rules_parse(&r, json, len), SW_EFULL);
    ck_assert_ptr_null(r);
    ck_msg_has("more than 100000 rules in the list");
    free(json);
  }
  ck_ok(sw_rules_create(&r));
  char name[32];
  for (int i = 0; i < RULES_MAX; i++) {
    snprintf(name, sizeof name, "n%d", i);
    ck_ok(sw_rules_add(r, name, NULL, -1, 0));
  }
  ck_sw(sw_rules_add(r, "one more", NULL, -1, 0), SW_EFULL);
  ck_msg_has("more than 100000 rules");
  ck_assert_uint_eq(sw_rules_count(r), RULES_MAX);
  sw_rules_free(r);
}
END_TEST

/* A segment of any capacity and geometry, attached read-write by name
 * alone: a rule written there is every process's. */
START_TEST(test_attach_any_geometry) {
  char name[80];
  shm_name(name, sizeof name, "attach");
  sw_segment_unlink(name);
  seg_refused(name, 0, NULL, SW_SEGMENT_ATTACH, SW_ENOTFOUND, NULL); /* never creates */
  ck_assert_int_eq(file_size(name), -1);
  sw_options *o = rule(50);
  ck_ok(sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 4));
  sw_segment *made = seg_open(name, 7, o, SW_SEGMENT_CREATE);
  sw_limiter *a = get(made, "a");
  pass_n(a, T0, 3);
  sw_segment *any = seg_open(name, 0, NULL, SW_SEGMENT_ATTACH);
  ck_assert_uint_eq(sw_registry_capacity(sw_segment_registry(any)), 7);
  sw_options *five = rule(5);
  ck_ok(sw_limiter_set_rule(find(any, "a"), five));
  sw_options *got = NULL;
  ck_ok(sw_options_create(&got));
  ck_ok(sw_limiter_get_rule(a, got)); /* the creator's handle sees it */
  ck_assert_double_eq(opt(got, SW_OPT_THRESHOLD), 5);
  sw_options_free(got);
  ck_assert_int_eq(window_pass(a, T0), 3);          /* statistics kept */
  sw_segment_close(any);
  sw_segment_close(made);
  sw_options_free(five);
  sw_options_free(o);
  sw_segment_unlink(name);
}
END_TEST

int main(void) {
  sw_rules *probe = NULL;
  if (sw_rules_parse(&probe, "[]", 2) == SW_ENOTSUP) return 77; /* built without jansson */
  sw_rules_free(probe);
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("rules");
  SW_TCASE(s, "json", test_sentinel_dashboard_example, test_canonical_round_trip,
           test_bad_lists_name_rule_and_field);
  SW_TCASE(s, "large lists", test_duplicates_in_long_lists, test_bound_before_parsing);
  SW_TCASE(s, "attach", test_attach_any_geometry);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
