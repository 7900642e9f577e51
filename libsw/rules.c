/* SPDX-License-Identifier: Apache-2.0 */
/* Flow rules as data: Sentinel's FlowRule JSON list <-> rule options, on
 * jansson (Debian's libjansson-dev, found by configure with pkg-config;
 * without it every function but the list's own returns SW_ENOTSUP).
 *
 * A rule is checked whole before it is kept: its fields (types, values
 * Sentinel allows), its options (sw_options_set's bounds) and, unless it
 * is a keyed table's or a cluster rule, a limiter made with it on the heap
 * (every combination the limiter refuses). A list with one bad rule is
 * refused whole, with a message naming the rule (its number from 1 and its
 * resource) and the field. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifdef SW_HAVE_JANSSON
#include <jansson.h>
#endif

typedef struct sw__rule_item {
  char *resource;
  sw_options *opts;
  int64_t keyed;    /* -1: not said */
  int64_t capacity; /* 0: not said */
} sw__rule_item;

/* The rules in order, and an index of their resources: open addressing
 * over nslots (a power of 2, at least twice the rules), each slot a rule's
 * position + 1 or 0 (empty). */
struct sw_rules {
  sw__rule_item *v;
  uint32_t n, cap;
  uint32_t *slots;
  uint32_t nslots;
};

#define SW__RULES_MAX 100000u /* rules in one list */

/* The rule keys a list carries (the others are not rules: geometry, segment). */
static const sw_option sw__rule_keys[] = {SW_OPT_GRADE,       SW_OPT_BEHAVIOR,  SW_OPT_THRESHOLD,
                                          SW_OPT_MAX_QUEUE_MS, SW_OPT_WARM_UP_SEC, SW_OPT_STRICT,
                                          SW_OPT_CLUSTER,     SW_OPT_DRY_RUN};
#define SW__NRULE_KEYS (sizeof sw__rule_keys / sizeof sw__rule_keys[0])

SW_API int sw_rules_create(sw_rules **out) {
  SW__CHECK_NULL(out, "out");
  *out = sw__calloc(1, sizeof **out);
  return *out ? SW_OK : sw__fail(SW_ENOMEM, "rule list");
}

SW_API void sw_rules_free(sw_rules *r) {
  if (r == NULL) return;
  for (uint32_t i = 0; i < r->n; i++) {
    sw__free(r->v[i].resource);
    sw_options_free(r->v[i].opts);
  }
  sw__free(r->v);
  sw__free(r->slots);
  sw__free(r);
}

SW_API uint32_t sw_rules_count(const sw_rules *r) {
  if (r == NULL) {
    sw__fail(SW_ENULL, "rules is NULL");
    return 0;
  }
  return r->n;
}

/* Copy the rule keys of from into to. */
static int sw__rule_copy(sw_options *to, const sw_options *from) {
  for (size_t k = 0; k < SW__NRULE_KEYS; k++) {
    double v;
    int rc = sw_options_get_double(from, sw__rule_keys[k], &v);
    if (rc == SW_OK) rc = sw_options_set_double(to, sw__rule_keys[k], v);
    if (rc < 0) return rc;
  }
  return SW_OK;
}

/* The slot of resource in r's index: the one holding it, or the empty one
 * where it goes. */
static uint32_t *sw__rules_slot(const sw_rules *r, const char *resource, size_t len) {
  uint32_t mask = r->nslots - 1, i = (uint32_t)sw__fnv(resource, len, SW__FNV_BASIS) & mask;
  while (r->slots[i] != 0 && strcmp(r->v[r->slots[i] - 1].resource, resource) != 0)
    i = (i + 1) & mask; /* never full: at most half the slots are taken */
  return &r->slots[i];
}

/* An index of nslots for r's rules (and one more): 0, or SW_ENOMEM. */
static int sw__rules_index(sw_rules *r, uint32_t nslots) {
  uint32_t *slots = sw__calloc(nslots, sizeof *slots);
  if (slots == NULL) return sw__fail(SW_ENOMEM, "rule list index");
  sw__free(r->slots);
  r->slots = slots;
  r->nslots = nslots;
  for (uint32_t i = 0; i < r->n; i++)
    *sw__rules_slot(r, r->v[i].resource, strlen(r->v[i].resource)) = i + 1;
  return SW_OK;
}

SW_API int sw_rules_add(sw_rules *r, const char *resource, const sw_options *opts, int64_t keyed,
                        int64_t capacity) {
  SW__CHECK_NULL(r, "rules");
  SW__CHECK_NULL(resource, "resource");
  size_t len = strlen(resource);
  if (len == 0 || len > SW_NAME_MAX)
    return sw__fail(SW_ERANGE, "resource of %zu bytes: a name takes 1..%d bytes", len, SW_NAME_MAX);
  if (keyed < -1 || keyed > 1)
    return sw__fail(SW_ERANGE, "keyed=%lld: want -1 (not said), 0 or 1", (long long)keyed);
  if (capacity < 0 || capacity > (1LL << 28))
    return sw__fail(SW_ERANGE, "capacity=%lld: want 0 (not said) or 1..2^28", (long long)capacity);
  if (2 * (r->n + 1) > r->nslots && sw__rules_index(r, r->nslots ? 2 * r->nslots : 16) < 0)
    return SW_ENOMEM;
  uint32_t *slot = sw__rules_slot(r, resource, len);
  if (*slot != 0)
    return sw__fail(SW_EEXIST, "resource \"%s\" already has rule %u", resource, *slot);
  if (r->n == SW__RULES_MAX)
    return sw__fail(SW_EFULL, "more than %u rules: the most one list holds", SW__RULES_MAX);
  if (r->n == r->cap) {
    uint32_t cap = r->cap ? 2 * r->cap : 8;
    sw__rule_item *v = sw__calloc(cap, sizeof *v);
    if (v == NULL) return sw__fail(SW_ENOMEM, "rule list");
    if (r->n) memcpy(v, r->v, r->n * sizeof *v);
    sw__free(r->v);
    r->v = v;
    r->cap = cap;
  }
  sw__rule_item it = {sw__strdup(resource), NULL, keyed, capacity};
  int rc = it.resource ? sw_options_create(&it.opts) : sw__fail(SW_ENOMEM, "resource");
  if (rc == SW_OK && opts) rc = sw__rule_copy(it.opts, opts);
  if (rc < 0) {
    sw__free(it.resource);
    sw_options_free(it.opts);
    return rc;
  }
  r->v[r->n++] = it;
  *slot = r->n;
  return SW_OK;
}

SW_API int sw_rules_at(const sw_rules *r, uint32_t i, const char **resource, sw_options *opts,
                       int64_t *keyed, int64_t *capacity) {
  SW__CHECK_NULL(r, "rules");
  if (i >= r->n) return sw__fail(SW_ERANGE, "rule %u of a list of %u", i, r->n);
  if (resource) *resource = r->v[i].resource;
  if (keyed) *keyed = r->v[i].keyed;
  if (capacity) *capacity = r->v[i].capacity;
  return opts ? sw__rule_copy(opts, r->v[i].opts) : SW_OK;
}

#ifdef SW_HAVE_JANSSON

/* --------------------------------------------------------------- parsing */

/* Fields of Sentinel's rule entities that say nothing to libsw: kept by
 * its dashboard and data sources, ignored here as Sentinel ignores ours. */
static const char *const sw__ignored[] = {"id", "app", "ip", "port", "gmtCreate", "gmtModified",
                                         "refResource", "clusterConfig"};

typedef struct sw__ctx {
  uint32_t i;       /* the rule's number, from 1 */
  const char *name; /* its resource, or "?" */
} sw__ctx;

#define SW__BAD(c, field, ...) sw__bad(c, field, __VA_ARGS__)
static int sw__bad(const sw__ctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int sw__bad(const sw__ctx *c, const char *field, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return sw__fail(SW_EINVAL, "rule %u (resource \"%s\"): %s: %s", c->i, c->name, field, what);
}

/* A whole number field in lo..hi, or def when absent. */
static int sw__int_field(const sw__ctx *c, json_t *o, const char *field, int64_t lo, int64_t hi,
                         int64_t def, int64_t *out) {
  json_t *v = json_object_get(o, field);
  *out = def;
  if (v == NULL || json_is_null(v)) return SW_OK; /* Sentinel's dashboard writes nulls */
  if (!json_is_number(v))
    return SW__BAD(c, field, "want a whole number in %lld..%lld", (long long)lo, (long long)hi);
  double d = json_number_value(v);
  if (!(d >= (double)lo && d <= (double)hi)) /* before the cast: 1e300 has no int64_t */
    return SW__BAD(c, field, "%.17g is outside %lld..%lld", d, (long long)lo, (long long)hi);
  if (d != (double)(int64_t)d)
    return SW__BAD(c, field, "want a whole number in %lld..%lld", (long long)lo, (long long)hi);
  *out = (int64_t)d;
  return SW_OK;
}

/* A boolean field (0 / 1), or def when absent. */
static int sw__bool_field(const sw__ctx *c, json_t *o, const char *field, int64_t def,
                          int64_t *out) {
  json_t *v = json_object_get(o, field);
  *out = def;
  if (v == NULL || json_is_null(v)) return SW_OK;
  if (!json_is_boolean(v)) return SW__BAD(c, field, "want true or false");
  *out = json_is_true(v);
  return SW_OK;
}

static const char *const sw__known[] = {"resource", "limitApp", "grade", "count", "strategy",
                                       "controlBehavior", "warmUpPeriodSec", "maxQueueingTimeMs",
                                       "clusterMode", "strict", "dryRun", "keyed", "capacity"};

static int sw__parse_rule(sw_rules *r, json_t *o, uint32_t i) {
  sw__ctx c = {i, "?"};
  if (!json_is_object(o)) return SW__BAD(&c, "rule", "want a JSON object (a FlowRule)");
  json_t *res = json_object_get(o, "resource");
  if (!json_is_string(res) || json_string_length(res) == 0 ||
      json_string_length(res) > SW_NAME_MAX || memchr(json_string_value(res), 0, json_string_length(res)))
    return SW__BAD(&c, "resource", "want a name of 1..%d bytes", SW_NAME_MAX);
  c.name = json_string_value(res);
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    int known = 0;
    for (size_t k = 0; k < sizeof sw__known / sizeof *sw__known && !known; k++)
      known = strcmp(key, sw__known[k]) == 0;
    for (size_t k = 0; k < sizeof sw__ignored / sizeof *sw__ignored && !known; k++)
      known = strcmp(key, sw__ignored[k]) == 0;
    if (!known)
      return SW__BAD(&c, key, "not a field of a flow rule (Sentinel's FlowRule, or libsw's "
                     "strict, dryRun, keyed, capacity)");
  }
  json_t *app = json_object_get(o, "limitApp");
  if (app && !json_is_null(app) && (!json_is_string(app) || strcmp(json_string_value(app), "default") != 0))
    return SW__BAD(&c, "limitApp", "libsw limits every caller alike: want \"default\"");
  json_t *count = json_object_get(o, "count");
  if (count == NULL) return SW__BAD(&c, "count", "missing: the threshold");
  if (!json_is_number(count) || json_number_value(count) < 0)
    return SW__BAD(&c, "count", "want a number >= 0");
  int64_t grade, strategy, behavior, warm, queue, cluster, strict, dry, keyed, capacity;
  int rc;
  if ((rc = sw__int_field(&c, o, "grade", 0, 1, SW_GRADE_QPS, &grade)) < 0 ||
      (rc = sw__int_field(&c, o, "strategy", 0, 2, 0, &strategy)) < 0 ||
      (rc = sw__int_field(&c, o, "controlBehavior", 0, 3, SW_BEHAVIOR_REJECT, &behavior)) < 0 ||
      (rc = sw__int_field(&c, o, "warmUpPeriodSec", 1, 86400, 10, &warm)) < 0 ||
      (rc = sw__int_field(&c, o, "maxQueueingTimeMs", 0, 86400000, 500, &queue)) < 0 ||
      (rc = sw__bool_field(&c, o, "clusterMode", 0, &cluster)) < 0 ||
      (rc = sw__bool_field(&c, o, "strict", 1, &strict)) < 0 ||
      (rc = sw__bool_field(&c, o, "dryRun", 0, &dry)) < 0 ||
      (rc = sw__bool_field(&c, o, "keyed", -1, &keyed)) < 0 ||
      (rc = sw__int_field(&c, o, "capacity", 1, 1LL << 28, 0, &capacity)) < 0)
    return rc;
  if (strategy != 0)
    return SW__BAD(&c, "strategy", "%lld (%s) is not supported: libsw limits each resource by "
                   "itself (0, direct)", (long long)strategy, strategy == 1 ? "relate" : "chain");
  sw_options *opts;
  if ((rc = sw_options_create(&opts)) < 0) return rc;
  const struct {
    sw_option key;
    double value;
    const char *field;
  } set[] = {{SW_OPT_GRADE, (double)grade, "grade"},
             {SW_OPT_THRESHOLD, json_number_value(count), "count"},
             {SW_OPT_BEHAVIOR, (double)behavior, "controlBehavior"},
             {SW_OPT_WARM_UP_SEC, (double)warm, "warmUpPeriodSec"},
             {SW_OPT_MAX_QUEUE_MS, (double)queue, "maxQueueingTimeMs"},
             {SW_OPT_CLUSTER, (double)cluster, "clusterMode"},
             {SW_OPT_STRICT, (double)strict, "strict"},
             {SW_OPT_DRY_RUN, (double)dry, "dryRun"}};
  for (size_t k = 0; k < sizeof set / sizeof *set; k++)
    if (sw_options_set_double(opts, set[k].key, set[k].value) < 0) {
      char why[300];
      snprintf(why, sizeof why, "%s", sw_last_error());
      sw_options_free(opts);
      return SW__BAD(&c, set[k].field, "%s", why);
    }
  if (keyed != 1 && !cluster) { /* what a limiter refuses, refused now */
    sw_limiter *lim;
    if ((rc = sw_limiter_create(&lim, opts)) < 0) {
      char why[300];
      snprintf(why, sizeof why, "%s", sw_last_error());
      sw_options_free(opts);
      return sw__fail(rc, "rule %u (resource \"%s\"): %s", i, c.name, why);
    }
    sw_limiter_free(lim);
  }
  rc = sw_rules_add(r, c.name, opts, keyed, capacity);
  sw_options_free(opts);
  if (rc < 0) {
    char why[300];
    snprintf(why, sizeof why, "%s", sw_last_error());
    return sw__fail(rc, "rule %u: %s", i, why);
  }
  return SW_OK;
}

/* More than max elements in the array the text starts with (counted by its
 * commas outside strings and nested values, never parsed): 1, else 0. A
 * text that is not an array, or not JSON, is jansson's to say. */
static int sw__json_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int sw__over_bound(const char *json, size_t len, uint32_t max) {
  size_t i = 0;
  while (i < len && sw__json_space(json[i])) i++;
  if (i == len || json[i] != '[') return 0;
  uint32_t elements = 0;
  int depth = 0, in_string = 0, empty = 1;
  for (; i < len; i++) {
    char c = json[i];
    if (in_string) {
      if (c == '\\') i++;
      else if (c == '"') in_string = 0;
      continue;
    }
    if (depth == 1 && empty && !sw__json_space(c) && c != ']') { /* the first element */
      empty = 0;
      elements = 1;
    }
    if (c == '"') in_string = 1;
    else if (c == '[' || c == '{') depth++;
    else if ((c == ']' || c == '}') && --depth == 0) break;
    else if (c == ',' && depth == 1 && ++elements > max) return 1;
  }
  return elements > max;
}

SW_API int sw_rules_parse(sw_rules **out, const char *json, size_t len) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(json, "json");
  if (sw__over_bound(json, len, SW__RULES_MAX)) /* refused before it is parsed */
    return sw__fail(SW_EFULL, "rules: more than %u rules in the list: the most one list holds "
                    "(split them among segments)", SW__RULES_MAX);
  json_error_t e;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &e);
  if (root == NULL)
    return sw__fail(SW_EINVAL, "rules: not JSON: line %d, column %d: %s", e.line, e.column, e.text);
  if (!json_is_array(root)) {
    json_decref(root);
    return sw__fail(SW_EINVAL, "rules: want a JSON array of flow rules (Sentinel's FlowRule list)");
  }
  sw_rules *r;
  int rc = sw_rules_create(&r);
  for (size_t i = 0; rc == SW_OK && i < json_array_size(root); i++)
    rc = sw__parse_rule(r, json_array_get(root, i), (uint32_t)i + 1);
  json_decref(root);
  if (rc < 0) {
    sw_rules_free(r);
    return rc;
  }
  *out = r;
  return SW_OK;
}

/* ---------------------------------------------------------------- writing */

static json_t *sw__rule_json(const sw__rule_item *it) {
  int64_t grade, behavior, warm, queue, cluster, strict, dry;
  double count;
  sw_options_get(it->opts, SW_OPT_GRADE, &grade);
  sw_options_get_double(it->opts, SW_OPT_THRESHOLD, &count);
  sw_options_get(it->opts, SW_OPT_BEHAVIOR, &behavior);
  sw_options_get(it->opts, SW_OPT_WARM_UP_SEC, &warm);
  sw_options_get(it->opts, SW_OPT_MAX_QUEUE_MS, &queue);
  sw_options_get(it->opts, SW_OPT_CLUSTER, &cluster);
  sw_options_get(it->opts, SW_OPT_STRICT, &strict);
  sw_options_get(it->opts, SW_OPT_DRY_RUN, &dry);
  json_t *o = json_object();
  if (o == NULL) return NULL;
  json_object_set_new(o, "resource", json_string(it->resource));
  json_object_set_new(o, "limitApp", json_string("default"));
  json_object_set_new(o, "grade", json_integer(grade));
  json_object_set_new(o, "count", count < 9e15 && count == (double)(int64_t)count
                                      ? json_integer((json_int_t)count) : json_real(count));
  json_object_set_new(o, "strategy", json_integer(0));
  json_object_set_new(o, "controlBehavior", json_integer(behavior));
  json_object_set_new(o, "warmUpPeriodSec", json_integer(warm));
  json_object_set_new(o, "maxQueueingTimeMs", json_integer(queue));
  json_object_set_new(o, "clusterMode", json_boolean(cluster));
  json_object_set_new(o, "strict", json_boolean(strict));
  json_object_set_new(o, "dryRun", json_boolean(dry));
  if (it->keyed >= 0) json_object_set_new(o, "keyed", json_boolean(it->keyed));
  if (it->capacity > 0) json_object_set_new(o, "capacity", json_integer(it->capacity));
  return o;
}

SW_API int64_t sw_rules_json(const sw_rules *r, char *buf, size_t cap) {
  SW__CHECK_NULL(r, "rules");
  if (buf == NULL && cap > 0) return sw__fail(SW_ENULL, "buf is NULL with cap=%zu", cap);
  json_t *root = json_array();
  for (uint32_t i = 0; root && i < r->n; i++) {
    json_t *o = sw__rule_json(&r->v[i]);
    if (o == NULL || json_array_append_new(root, o) < 0) {
      json_decref(root);
      root = NULL;
    }
  }
  char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                           JSON_REAL_PRECISION(15)) : NULL;
  json_decref(root);
  if (text == NULL) return sw__fail(SW_ENOMEM, "rules as JSON");
  size_t len = strlen(text);
  if (cap > 0) {
    size_t n = len + 1 < cap ? len : cap - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
  }
  free(text);
  return (int64_t)len;
}

#else /* !SW_HAVE_JANSSON */

SW_API int sw_rules_parse(sw_rules **out, const char *json, size_t len) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(json, "json");
  (void)len;
  return sw__fail(SW_ENOTSUP, "rules from JSON: this libsw was built without jansson "
                  "(install libjansson-dev, then configure and build again)");
}

SW_API int64_t sw_rules_json(const sw_rules *r, char *buf, size_t cap) {
  SW__CHECK_NULL(r, "rules");
  (void)buf;
  (void)cap;
  return sw__fail(SW_ENOTSUP, "rules as JSON: this libsw was built without jansson "
                  "(install libjansson-dev, then configure and build again)");
}

#endif
