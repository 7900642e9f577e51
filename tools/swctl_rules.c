/* SPDX-License-Identifier: Apache-2.0 */
/* swctl rules: a segment's flow rules as Sentinel's FlowRule JSON (get),
 * changed live from a file (apply), or a file checked (check).
 *
 * apply is all or nothing as far as it can be: the file is parsed and
 * every rule checked (sw_rules_parse), then checked against the segment
 * (its kind, its capacity, room for new names) before the first rule is
 * written; a refusal changes nothing (exit status 3). Each rule is then
 * published with sw_limiter_set_rule / sw_keyed_set_rule: every process
 * attached sees it at its next entry, and the statistics are kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swctl.h"

#define SWCTL_RULES_FILE_MAX (16 << 20)

/* A keyed table's one resource in a rule list: its segment's name (of a
 * path, the file's name). */
static const char *swctl_resource_name(const char *segment) {
  const char *slash = strrchr(segment, '/');
  return slash ? slash + 1 : segment;
}

/* The list as JSON on stdout: 0, or 1. */
static int print_rules(const sw_rules *r) {
  int64_t n = sw_rules_json(r, NULL, 0);
  char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (text == NULL || sw_rules_json(r, text, (size_t)n + 1) < 0) {
    fprintf(stderr, "swctl: rules: %s\n", n < 0 ? sw_last_error() : "out of memory");
    free(text);
    return 1;
  }
  printf("%s\n", text);
  free(text);
  return ferror(stdout) ? 1 : 0;
}

/* The rules of a segment (a registry's limiters, or a keyed table's one
 * rule, named by its segment): 0, or 1. */
static int segment_rules(const char *segment, sw_rules *r) {
  sw_segment_info in;
  int rc = sw_segment_probe(segment, &in);
  sw_options *o = NULL;
  if (rc == SW_OK) rc = sw_options_create(&o);
  if (rc == SW_OK && in.kind == SW_SEGMENT_KIND_KEYED) {
    sw_keyed *k;
    if ((rc = sw_keyed_open(&k, segment, 0, NULL, SW_SEGMENT_READONLY)) == SW_OK) {
      if ((rc = sw_keyed_get_rule(k, o)) == SW_OK)
        rc = sw_rules_add(r, swctl_resource_name(segment), o, 1, in.capacity);
      sw_keyed_free(k);
    }
  } else if (rc == SW_OK) {
    sw_segment *seg;
    if ((rc = sw_segment_open(&seg, segment, 0, NULL, SW_SEGMENT_READONLY)) == SW_OK) {
      sw_registry *reg = sw_segment_registry(seg);
      for (uint32_t i = 0; rc == SW_OK && i < sw_registry_count(reg); i++) {
        sw_limiter *lim;
        const char *name;
        if ((rc = sw_registry_at(reg, i, &lim, &name)) == SW_OK &&
            (rc = sw_limiter_get_rule(lim, o)) == SW_OK)
          rc = sw_rules_add(r, name, o, -1, 0);
      }
      sw_segment_close(seg);
    }
  }
  sw_options_free(o);
  if (rc < 0) fprintf(stderr, "swctl: %s\n", sw_last_error());
  return rc < 0;
}

/* The rules of file, parsed and checked: NULL (said why) if refused. */
static sw_rules *file_rules(const char *file) {
  FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");
  if (f == NULL) {
    fprintf(stderr, "swctl: cannot read %s: %s\n", file, strerror(errno));
    return NULL;
  }
  char *text = malloc(SWCTL_RULES_FILE_MAX);
  size_t n = text ? fread(text, 1, SWCTL_RULES_FILE_MAX, f) : 0;
  int too_big = text && n == SWCTL_RULES_FILE_MAX, bad = ferror(f);
  if (f != stdin) fclose(f);
  sw_rules *r = NULL;
  if (text == NULL || bad || too_big)
    fprintf(stderr, "swctl: %s: %s\n", file,
            too_big ? "larger than 16 MiB" : bad ? "cannot read it" : "out of memory");
  else if (sw_rules_parse(&r, text, n) != SW_OK)
    fprintf(stderr, "swctl: %s: %s\n", file, sw_last_error());
  free(text);
  return r;
}

/* Refuse (exit 3) what does not fit the segment, before anything changes. */
#define REFUSE(...) (fprintf(stderr, "swctl: " __VA_ARGS__), fputs(": nothing changed\n", stderr), 3)

static int apply_keyed(const char *segment, const sw_rules *r, const sw_segment_info *in) {
  const char *res;
  int64_t keyed, capacity;
  sw_options *o;
  if (sw_rules_count(r) != 1)
    return REFUSE("%s is a keyed table: it has one rule, the file has %u", segment,
                  sw_rules_count(r));
  if (sw_options_create(&o) != SW_OK) return 1;
  sw_rules_at(r, 0, &res, o, &keyed, &capacity);
  int rc = 0;
  if (strcmp(res, swctl_resource_name(segment)) != 0)
    rc = REFUSE("rule 1: resource \"%s\": the keyed table's resource is \"%s\"", res,
                swctl_resource_name(segment));
  else if (keyed == 0)
    rc = REFUSE("rule 1 (resource \"%s\"): keyed: false, but %s is a keyed table", res, segment);
  else if (capacity && capacity != in->capacity)
    rc = REFUSE("rule 1 (resource \"%s\"): capacity: %lld, but the table holds %u keys "
                "(a capacity cannot change live)", res, (long long)capacity, in->capacity);
  sw_keyed *k = NULL;
  if (rc == 0 && sw_keyed_open(&k, segment, 0, NULL, SW_SEGMENT_ATTACH) != SW_OK) {
    fprintf(stderr, "swctl: %s\n", sw_last_error());
    rc = 1;
  }
  if (rc == 0 && sw_keyed_set_rule(k, o) != SW_OK) /* one rule: all or nothing */
    rc = REFUSE("rule 1 (resource \"%s\"): %s", res, sw_last_error());
  sw_keyed_free(k);
  sw_options_free(o);
  return rc;
}

static int apply_registry(const char *segment, const sw_rules *r, const sw_segment_info *in) {
  sw_segment *seg;
  if (sw_segment_open(&seg, segment, 0, NULL, SW_SEGMENT_ATTACH) != SW_OK) {
    fprintf(stderr, "swctl: %s\n", sw_last_error());
    return 1;
  }
  sw_registry *reg = sw_segment_registry(seg);
  uint32_t n = sw_rules_count(r), fresh = 0;
  int rc = 0;
  for (uint32_t i = 0; rc == 0 && i < n; i++) {
    const char *res;
    int64_t keyed, capacity;
    sw_limiter *lim;
    sw_rules_at(r, i, &res, NULL, &keyed, &capacity);
    if (keyed == 1)
      rc = REFUSE("rule %u (resource \"%s\"): keyed: true, but %s is a registry of limiters",
                  i + 1, res, segment);
    else if (capacity && capacity != in->capacity)
      rc = REFUSE("rule %u (resource \"%s\"): capacity: %lld, but the segment holds %u names "
                  "(a capacity cannot change live)", i + 1, res, (long long)capacity,
                  in->capacity);
    else if (sw_registry_find(reg, res, &lim) == 0)
      fresh++;
  }
  if (rc == 0 && sw_registry_count(reg) + fresh > sw_registry_capacity(reg)) {
    /* name what it holds: a resource misspelt is the usual cause */
    char held[256] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < sw_registry_count(reg) && used < sizeof(held) - 80; i++) {
      const char *name;
      sw_limiter *lim;
      if (sw_registry_at(reg, i, &lim, &name) == SW_OK)
        used += (size_t)snprintf(held + used, sizeof(held) - used, "%s\"%s\"", i ? ", " : "",
                                 name);
    }
    rc = REFUSE("%u new resources do not fit: %s holds %u of %u names (%s%s); a rule changes a "
                "resource it holds when it names it", fresh, segment, sw_registry_count(reg),
                sw_registry_capacity(reg), held, used >= sizeof(held) - 80 ? ", ..." : "");
  }
  sw_options *o = NULL;
  if (rc == 0 && sw_options_create(&o) != SW_OK) rc = 1;
  for (uint32_t i = 0; rc == 0 && i < n; i++) {
    const char *res;
    sw_limiter *lim;
    sw_rules_at(r, i, &res, o, NULL, NULL);
    int err = sw_registry_find(reg, res, &lim) == 1 ? sw_limiter_set_rule(lim, o)
                                                    : sw_registry_get_ex(reg, res, o, &lim);
    if (err < 0) { /* checked before: only a lock held by a stopped process, or the like */
      fprintf(stderr, "swctl: rule %u (resource \"%s\"): %s; rules 1..%u were applied\n", i + 1,
              res, sw_last_error(), i);
      rc = 1;
    }
  }
  sw_options_free(o);
  sw_segment_close(seg);
  return rc;
}

int swctl_rules(const char *what, const char *segment, const char *file) {
  sw_rules *r = NULL;
  int rc;
  if (strcmp(what, "check") == 0) { /* segment is the file */
    r = file_rules(segment);
    rc = r ? print_rules(r) : 3;
  } else if (strcmp(what, "get") == 0) {
    rc = sw_rules_create(&r) == SW_OK ? segment_rules(segment, r) : 1;
    if (rc == 0) rc = print_rules(r);
  } else {
    sw_segment_info in;
    if (sw_segment_probe(segment, &in) != SW_OK) {
      fprintf(stderr, "swctl: %s\n", sw_last_error());
      return 1;
    }
    r = file_rules(file);
    if (r == NULL) return 3;
    rc = in.kind == SW_SEGMENT_KIND_KEYED ? apply_keyed(segment, r, &in)
                                          : apply_registry(segment, r, &in);
  }
  sw_rules_free(r);
  return rc;
}
