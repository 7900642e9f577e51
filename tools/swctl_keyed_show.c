/* SPDX-License-Identifier: Apache-2.0 */
/* A keyed table shown as one resource: swctl list / top (text), its JSON
 * object (swctl dump's first line, the dashboard's data), and swctl dump's
 * line per key. */
#include <stdlib.h>
#include <string.h>

#include "swctl.h"

static const char *const by_name[] = {"PASSES", "BLOCKS"};

static void print_rule(const swctl_resource *r, const sw_keyed_info *in, FILE *out) {
  fprintf(out, "RULE        %s, %g %s per key, interval %lld ms in %u windows%s\n",
          swctl_rule_name(r->grade, r->behavior), r->threshold,
          r->grade == SW_GRADE_CONCURRENCY ? "in flight" : "per second",
          (long long)in->interval_ms, in->windows, r->dry_run ? " (dry run)" : "");
}

void swctl_keyed_print(swctl *c, FILE *out) {
  const swctl_keyed *kt = c->keyed;
  const sw_keyed_info *in = &kt->info;
  const swctl_resource *r = &c->res[0];
  char key[SWCTL_KEY_TEXT];
  fprintf(out, "%s: keyed table, %lld keys, capacity %u\n", c->segment_name,
          (long long)in->keys, in->capacity);
  print_rule(r, in, out);
  fprintf(out, "TOTALS      pass %lld  block %lld  would_block %lld  success %lld  exception %lld  "
               "avg_rt %.1f\n", (long long)in->pass, (long long)in->block,
          (long long)in->would_block, (long long)in->success, (long long)in->exception,
          in->success ? (double)in->rt / in->success : 0.0);
  if (kt->span_ms)
    fprintf(out, "PER SECOND  pass %.1f  block %.1f  would_block %.1f  avg_rt %.1f\n", r->pass_qps,
            r->block_qps, r->would_block_qps, r->avg_rt);
  fprintf(out, "KEYS        present %lld  active %lld  inserted %lld  reclaimed %lld  evicted %lld  "
               "refused %lld\n", (long long)in->keys, (long long)kt->shown.active,
          (long long)in->inserted, (long long)in->reclaimed, (long long)in->evicted,
          (long long)in->refused);
  fprintf(out, "MEMORY      capacity %u  places %u  key_bytes %u  bytes_per_key %lld  bytes %lld\n",
          in->capacity, in->slots, in->key_bytes, (long long)in->bytes_per_key,
          (long long)in->bytes);
  for (uint32_t by = 0; by < 2 && kt->topn; by++) {
    char title[64];
    snprintf(title, sizeof title, "TOP %u BY %s", kt->topn, by_name[by]);
    fprintf(out, "%-41s %9s %9s\n", title, "PASS", "BLOCK");
    for (int i = 0; i < kt->shown.ntop[by]; i++) {
      const sw_keyed_key *k = &kt->shown.top[by][i];
      swctl_key_text(k, key);
      fprintf(out, "  %-39s %9lld %9lld\n", key, (long long)k->pass, (long long)k->block);
    }
  }
}

/* {"key":...,"kind":...,"pass":N,"block":N ...; the caller closes it. */
static void key_json(swctl_buf *b, const sw_keyed_key *k) {
  char key[SWCTL_KEY_TEXT];
  const char *kind = swctl_key_text(k, key);
  swctl_append(b, "{\"key\":", 7);
  swctl_json_str(b, key);
  swctl_printf(b, ",\"kind\":\"%s\",\"pass\":%lld,\"block\":%lld", kind, (long long)k->pass,
               (long long)k->block);
}

void swctl_keyed_json(swctl *c, swctl_buf *b) {
  const swctl_keyed *kt = c->keyed;
  const sw_keyed_info *in = &kt->info;
  const swctl_resource *r = &c->res[0];
  swctl_printf(b, "\"type\":\"keyed\",\"rule\":\"%s\",\"threshold\":%.17g,\"dry_run\":%s,"
                  "\"interval_ms\":%lld,\"windows\":%u,\"capacity\":%u,\"places\":%u,"
                  "\"key_bytes\":%u,\"bytes\":%lld,\"bytes_per_key\":%lld,\"keys\":%lld,"
                  "\"active_keys\":%lld,\"inserted\":%lld,\"reclaimed\":%lld,\"evicted\":%lld,"
                  "\"refused\":%lld,\"pass\":%lld,\"block\":%lld,\"would_block\":%lld,"
                  "\"success\":%lld,\"exception\":%lld,\"rt\":%lld",
               swctl_rule_name(r->grade, r->behavior), r->threshold, r->dry_run ? "true" : "false",
               (long long)in->interval_ms, in->windows, in->capacity, in->slots, in->key_bytes,
               (long long)in->bytes, (long long)in->bytes_per_key, (long long)in->keys,
               (long long)kt->shown.active, (long long)in->inserted, (long long)in->reclaimed,
               (long long)in->evicted, (long long)in->refused, (long long)in->pass,
               (long long)in->block, (long long)in->would_block, (long long)in->success,
               (long long)in->exception, (long long)in->rt);
  for (uint32_t by = 0; by < 2; by++) {
    swctl_printf(b, ",\"top_%s\":[", by == SW_KEYED_BY_PASS ? "pass" : "block");
    for (int i = 0; i < kt->shown.ntop[by]; i++) {
      if (i) swctl_append(b, ",", 1);
      key_json(b, &kt->shown.top[by][i]);
      swctl_append(b, "}", 1);
    }
    swctl_append(b, "]", 1);
  }
}

struct dump {
  swctl *c;
  swctl_buf b;
};

static void key_lines(void *user, const sw_keyed_key *keys, int n) {
  struct dump *d = user;
  d->b.len = 0;
  for (int i = 0; i < n; i++) {
    key_json(&d->b, &keys[i]);
    swctl_printf(&d->b, ",\"in_flight\":%lld,\"last_pass_ms\":", (long long)keys[i].in_flight);
    if (keys[i].last_ms < 0)
      swctl_append(&d->b, "null}\n", 6);
    else
      swctl_printf(&d->b, "%lld}\n", (long long)(keys[i].last_ms + d->c->wall_offset));
  }
  fwrite(d->b.data, 1, d->b.len, stdout);
}

int swctl_keyed_dump(swctl *c) {
  struct dump d = {c, {0}};
  swctl_printf(&d.b, "{\"ts\":%lld,\"segment\":", (long long)(c->keyed->polled + c->wall_offset));
  swctl_json_str(&d.b, c->segment_name);
  swctl_printf(&d.b, ",\"resource\":");
  swctl_json_str(&d.b, c->res[0].name);
  swctl_append(&d.b, ",", 1);
  swctl_keyed_json(c, &d.b);
  swctl_append(&d.b, "}\n", 2);
  fwrite(d.b.data, 1, d.b.len, stdout);
  /* every key as seen at the poll's time, as the first line */
  int rc = swctl_keyed_each(c, c->keyed->polled, key_lines, &d);
  free(d.b.data);
  if (rc < 0) fprintf(stderr, "swctl: dump: %s\n", sw_last_error());
  return rc < 0 || ferror(stdout) ? 1 : 0;
}
