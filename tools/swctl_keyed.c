/* SPDX-License-Identifier: Apache-2.0 */
/* A keyed table read as one resource: its rule and totals (since the table
 * was created: a keyed table keeps no history per second) and its key
 * counts, read at each poll; its top keys, from a streaming pass over the
 * table made before the poll takes the lock; and the change of its totals
 * between two polls as the resource's second (history, metric log, rates). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "swctl.h"

int swctl_keyed_open(swctl *c, const char *segment, uint32_t topn) {
  swctl_keyed *kt = calloc(1, sizeof *kt);
  swctl_resource *r = calloc(1, sizeof *r);
  sw_keyed_key *top = topn ? calloc(4 * (size_t)topn, sizeof *top) : NULL;
  int rc = kt && r && (top || !topn) ? sw_keyed_open(&kt->k, segment, 0, NULL, SW_SEGMENT_READONLY)
                                      : SW_ENOMEM;
  if (rc != SW_OK) {
    free(kt);
    free(r);
    free(top);
    return rc;
  }
  kt->topn = topn;
  kt->tops = top;
  for (int i = 0; top && i < 2; i++) {
    kt->shown.top[i] = top + i * topn;
    kt->next.top[i] = top + (2 + i) * topn;
  }
  r->name = segment; /* the table is its segment's only resource */
  r->keyed = kt->k;
  c->keyed = kt;
  c->res = r;
  c->capres = 1;
  return SW_OK;
}

void swctl_keyed_close(swctl *c) {
  if (c->keyed == NULL) return;
  sw_keyed_free(c->keyed->k);
  free(c->keyed->tops);
  free(c->keyed);
  c->keyed = NULL;
}

/* Give back the pages of the segment's mapping that a scan has read. They
 * stay in shared memory (they are the table), but each page read would
 * otherwise count in swctl's resident size, up to the whole table's. libsw
 * does not expose its mapping: it is found in /proc/self/maps by the
 * file's device and inode. MADV_DONTNEED on a shared mapping only unmaps:
 * a later read maps the same page again. */
static void drop_pages(const char *segment) {
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s%s", strchr(segment, '/') ? "" : "/dev/shm/", segment);
  FILE *maps = stat(path, &st) == 0 ? fopen("/proc/self/maps", "r") : NULL;
  if (maps == NULL) return;
  char line[4400];
  while (fgets(line, sizeof line, maps)) {
    unsigned long long lo, hi, ino;
    unsigned maj, mnr;
    if (sscanf(line, "%llx-%llx %*s %*s %x:%x %llu", &lo, &hi, &maj, &mnr, &ino) == 5 &&
        ino == (unsigned long long)st.st_ino && makedev(maj, mnr) == st.st_dev)
      madvise((void *)(uintptr_t)lo, (size_t)(hi - lo), MADV_DONTNEED);
  }
  fclose(maps);
}

int swctl_keyed_each(swctl *c, int64_t t, void (*fn)(void *user, const sw_keyed_key *keys, int n),
                     void *user) {
  swctl_keyed *kt = c->keyed;
  sw_keyed_key *keys = malloc(SWCTL_KEYED_CHUNK * sizeof *keys);
  if (keys == NULL) return SW_ENOMEM;
  uint64_t cursor = 0;
  int n, chunks = 0;
  while ((n = sw_keyed_scan_at(kt->k, t, &cursor, keys, SWCTL_KEYED_CHUNK)) > 0) {
    fn(user, keys, n);
    if (kt->drop_pages && ++chunks % 64 == 0) drop_pages(c->segment_name);
  }
  if (kt->drop_pages) drop_pages(c->segment_name);
  free(keys);
  return n;
}

/* The top lists: a min-heap each while scanning (the least of the top at
 * the root), sorted at the end. Ties go to the smaller key, so that the
 * lists do not depend on where keys sit in the table. */
static int64_t value(const sw_keyed_key *k, int by) { return by == SW_KEYED_BY_PASS ? k->pass : k->block; }

static int above(const sw_keyed_key *a, const sw_keyed_key *b, int by) {
  int64_t va = value(a, by), vb = value(b, by);
  if (va != vb) return va > vb;
  int d = memcmp(a->key, b->key, sizeof a->key);
  return d != 0 ? d < 0 : a->len < b->len;
}

static void sift_down(sw_keyed_key *h, int n, int i, int by) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && above(&h[m], &h[l], by)) m = l;
    if (r < n && above(&h[m], &h[r], by)) m = r;
    if (m == i) return;
    sw_keyed_key x = h[i];
    h[i] = h[m];
    h[m] = x;
    i = m;
  }
}

static void offer(swctl_keyed *kt, const sw_keyed_key *k, int by) {
  sw_keyed_key *h = kt->next.top[by];
  int *n = &kt->next.ntop[by];
  if (value(k, by) <= 0 || kt->topn == 0) return;
  if (*n < (int)kt->topn) {
    h[*n] = *k;
    for (int i = (*n)++; i > 0 && above(&h[(i - 1) / 2], &h[i], by); i = (i - 1) / 2) {
      sw_keyed_key x = h[i];
      h[i] = h[(i - 1) / 2];
      h[(i - 1) / 2] = x;
    }
  } else if (above(k, &h[0], by)) {
    h[0] = *k;
    sift_down(h, *n, 0, by);
  }
}

static void tally(void *user, const sw_keyed_key *keys, int n) {
  swctl_keyed *kt = user;
  for (int i = 0; i < n; i++) {
    if (keys[i].pass > 0 || keys[i].block > 0) kt->next.active++;
    offer(kt, &keys[i], SW_KEYED_BY_PASS);
    offer(kt, &keys[i], SW_KEYED_BY_BLOCK);
  }
}

void swctl_keyed_scan(swctl *c) {
  swctl_keyed *kt = c->keyed;
  int64_t t = sw_now_ms();
  if (kt->staged || (kt->scanned && t - kt->scanned < 10 * kt->scan_ms)) return;
  swctl_scan *s = &kt->next;
  s->active = 0;
  s->ntop[0] = s->ntop[1] = 0;
  swctl_keyed_each(c, t, tally, kt);
  for (int by = 0; by < 2; by++) /* most first: pop the least to the end */
    for (int n = s->ntop[by]; n > 1; n--) {
      sw_keyed_key x = s->top[by][0];
      s->top[by][0] = s->top[by][n - 1];
      s->top[by][n - 1] = x;
      sift_down(s->top[by], n - 1, 0, by);
    }
  kt->scanned = t;
  kt->scan_ms = sw_now_ms() - t;
  kt->staged = 1;
}

int swctl_keyed_poll(swctl *c) {
  swctl_keyed *kt = c->keyed;
  swctl_resource *r = &c->res[0];
  int64_t t = swctl_clock(c), since = kt->polled, ms = t - since;
  sw_keyed_info was = kt->info;
  sw_keyed_stats(kt->k, &kt->info);
  sw_options *o;
  if (sw_options_create(&o) == SW_OK) {
    sw_keyed_get_rule(kt->k, o);
    swctl_take_rule(r, o);
    sw_options_free(o);
  }
  kt->polled = t;
  if (c->lock == NULL) swctl_keyed_scan(c);
  if (kt->staged) {
    swctl_scan shown = kt->shown;
    kt->shown = kt->next;
    kt->next = shown;
    kt->staged = 0;
  }
  const sw_keyed_info *in = &kt->info;
  r->pass = in->pass;
  r->block = in->block;
  r->would_block = in->would_block;
  r->success = in->success;
  r->exception = in->exception;
  r->rt = in->rt;
  c->nres = 1;
  if (since == 0 || ms <= 0) return SW_OK; /* the first poll: no change to see yet */
  kt->span_ms = ms;
  sw_metric_record m = {.start_ms = since,
                        .pass = in->pass - was.pass,
                        .block = in->block - was.block,
                        .would_block = in->would_block - was.would_block,
                        .success = in->success - was.success,
                        .exception = in->exception - was.exception,
                        .rt = in->rt - was.rt};
  r->pass_qps = m.pass * 1000.0 / ms;
  r->block_qps = m.block * 1000.0 / ms;
  r->would_block_qps = m.would_block * 1000.0 / ms;
  r->avg_rt = m.success ? (double)m.rt / m.success : 0;
  if (m.pass || m.block || m.would_block || m.success || m.exception) {
    /* named by the wall-clock second it (mostly) covers */
    swctl_second s = {(since + c->wall_offset + 500) / 1000 * 1000, m, 0};
    swctl_add_second(c, 0, &s);
  }
  return SW_OK;
}

static int printable(const uint8_t *p, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (p[i] < 0x20 || p[i] > 0x7e) return 0;
  return n > 0;
}

static void hex(char *out, const uint8_t *p, uint32_t n) {
  static const char digits[] = "0123456789abcdef";
  for (uint32_t i = 0; i < n; i++) {
    *out++ = digits[p[i] >> 4];
    *out++ = digits[p[i] & 15];
  }
  *out = '\0';
}

/* 4 bytes are an IPv4 address even when printable (a per-IP table holds
 * some); 16 printable bytes are text (an IPv6 address almost never is). */
const char *swctl_key_text(const sw_keyed_key *key, char *out) {
  uint32_t n = key->len;
  if (n == 0) {
    memcpy(out, "digest:", 7);
    hex(out + 7, key->key, 16);
    return "digest";
  }
  if (n == 4 && inet_ntop(AF_INET, key->key, out, SWCTL_KEY_TEXT)) return "ipv4";
  if (printable(key->key, n)) {
    memcpy(out, key->key, n);
    out[n] = '\0';
    return "text";
  }
  if (n == 16 && inet_ntop(AF_INET6, key->key, out, SWCTL_KEY_TEXT)) return "ipv6";
  memcpy(out, "0x", 2);
  hex(out + 2, key->key, n > SW_KEYED_KEY_MAX ? SW_KEYED_KEY_MAX : n);
  return "hex";
}
