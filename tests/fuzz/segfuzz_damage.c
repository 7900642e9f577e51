/* SPDX-License-Identifier: Apache-2.0 */
/* Seeded damage of a segment's bytes: random flips anywhere, and targeted
 * damage of the words that snapshots of real segments show to be headers,
 * sizes and offsets, or state (counts, generations, window and state
 * words). Where those words are is learnt by diffing, so the damage
 * follows any layout the library adopts; only the common header's
 * checksum is re-sealed by its declaration (libsw/shm.h). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segfuzz.h"
#include "shm.h"

/* ------------------------------------------------------------ generator */

uint64_t fz_next(fz_rng *r) { /* splitmix64 */
  uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

uint64_t fz_below(fz_rng *r, uint64_t n) { return fz_next(r) % n; }

fz_rng fz_rng_for(uint64_t seed, const char *kind, uint64_t index) {
  fz_rng r = {sw__fnv(kind, strlen(kind), seed ^ SW__FNV_BASIS)};
  r.s ^= index * UINT64_C(0xd1b54a32d192ed03);
  fz_next(&r);
  return r;
}

/* ------------------------------------------------------------ snapshots */

fz_bytes fz_read_file(const char *path) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) fz_die("cannot read %s", path);
  fz_bytes b = {malloc((size_t)st.st_size + 1), (size_t)st.st_size};
  if (b.p == NULL || pread(fd, b.p, b.n, 0) != (ssize_t)b.n) fz_die("cannot read %s", path);
  close(fd);
  return b;
}

void fz_bytes_free(fz_bytes *b) {
  free(b->p);
  b->p = NULL;
  b->n = 0;
}

static uint64_t word_at(const fz_bytes *b, size_t off) {
  uint64_t w = 0;
  if (off + 8 <= b->n) memcpy(&w, b->p + off, 8);
  return w;
}

static void add_target(fz_targets *tg, int cls, size_t off) {
  if (tg->n[cls] % 1024 == 0) {
    uint32_t *p = realloc(tg->off[cls], (tg->n[cls] + 1024) * sizeof *p);
    if (p == NULL) fz_die("out of memory");
    tg->off[cls] = p;
  }
  tg->off[cls][tg->n[cls]++] = (uint32_t)off;
}

void fz_find_targets(fz_targets *tg, const fz_bytes *fresh, const fz_bytes *other,
                     const fz_bytes *states, int nstates) {
  memset(tg, 0, sizeof *tg);
  const fz_bytes *last = &states[nstates - 1];
  for (size_t off = 0; off + 8 <= last->n; off += 8) {
    uint64_t f = word_at(fresh, off);
    if (f != 0) add_target(tg, FZ_STRUCT, off);
    if (f != 0 && f != word_at(other, off)) add_target(tg, FZ_LAYOUT, off);
    uint64_t prev = f;
    for (int i = 0; i < nstates; i++) {
      uint64_t w = word_at(&states[i], off);
      if (w != prev) {
        add_target(tg, FZ_STATE, off);
        break;
      }
      prev = w;
    }
  }
}

/* --------------------------------------------------------------- damage */

typedef struct fz_desc {
  char *p;
  size_t cap, len;
} fz_desc;

static void say(fz_desc *d, const char *fmt, ...) {
  if (d->len + 1 >= d->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(d->p + d->len, d->cap - d->len, fmt, ap);
  va_end(ap);
  if (n > 0) d->len = d->len + (size_t)n < d->cap ? d->len + (size_t)n : d->cap - 1;
}

static const char *const class_names[FZ_NCLASS] = {"struct", "layout", "state"};

/* One targeted change of the word at off (8 bytes, inside the buffer). */
static void damage_word(unsigned char *b, size_t off, const fz_base *base, fz_rng *r,
                        fz_desc *d) {
  uint64_t w;
  memcpy(&w, b + off, 8);
  unsigned op = (unsigned)fz_below(r, 12), byte = (unsigned)fz_below(r, 8);
  unsigned half = (unsigned)fz_below(r, 2);
  uint32_t h32;
  switch (op) {
  case 0: w ^= UINT64_C(1) << fz_below(r, 64); break;       /* any bit */
  case 1: w ^= UINT64_C(1) << (48 + fz_below(r, 16)); break; /* the top: generations, states */
  case 2: w |= UINT64_C(0xff) << (8 * byte); break;          /* a byte to 255 (a length) */
  case 3: w &= ~(UINT64_C(0xff) << (8 * byte)); break;       /* a byte to 0 */
  case 4: w = 0; break;
  case 5: w = ~UINT64_C(0); break;
  case 6: { /* a 32-bit half to an extreme */
    static const uint32_t ext[] = {0xffffffffu, 0x80000000u, 0x7fffffffu, 0x10000u};
    h32 = ext[fz_below(r, 4)];
    memcpy((unsigned char *)&w + 4 * half, &h32, 4);
    break;
  }
  case 7: w += fz_below(r, 7) - 3; break; /* off by a little */
  case 8: { /* the value of another word of the same class (stale, misplaced) */
    const fz_targets *tg = &base->tg;
    int cls = (int)fz_below(r, FZ_NCLASS);
    if (tg->n[cls]) memcpy(&w, base->bytes.p + tg->off[cls][fz_below(r, tg->n[cls])], 8);
    break;
  }
  case 9: w = fz_next(r); break;
  case 10: w <<= 1 + fz_below(r, 8); break; /* a size or count grown */
  default: /* a 32-bit half to a small number (a count, an index) */
    h32 = (uint32_t)fz_below(r, 300);
    memcpy((unsigned char *)&w + 4 * half, &h32, 4);
    break;
  }
  memcpy(b + off, &w, 8);
  say(d, " w%zu:%u", off, op);
}

/* The common header's configuration checksum, as its creator would have
 * written it: damage to the configuration then reaches the kind's checks. */
static void reseal(unsigned char *b, size_t n) {
  if (n < sizeof(sw__shm_hdr)) return;
  sw__shm_hdr h;
  memcpy(&h, b, sizeof h);
  h.config_sum = sw__fnv(h.config, sizeof h.config, SW__FNV_BASIS);
  memcpy(b + offsetof(sw__shm_hdr, config_sum), &h.config_sum, sizeof h.config_sum);
}

void fz_damage(const fz_base *base, fz_rng *r, unsigned char **out, size_t *out_n, char *desc,
               size_t desc_cap) {
  size_t n = base->bytes.n;
  unsigned char *b = malloc(n + 8192);
  if (b == NULL) fz_die("out of memory");
  memcpy(b, base->bytes.p, n);
  fz_desc d = {desc, desc_cap, 0};
  desc[0] = '\0';
  uint64_t roll = fz_below(r, 100);
  unsigned nmut = roll < 50 ? 1 : roll < 85 ? 2 + (unsigned)fz_below(r, 3)
                                            : 5 + (unsigned)fz_below(r, 28);
  bool header = false, resized = false;
  for (unsigned m = 0; m < nmut && n > 0; m++) {
    uint64_t how = fz_below(r, 100);
    if (how < 20) { /* a bit anywhere */
      size_t off = fz_below(r, n);
      b[off] ^= (unsigned char)(1u << fz_below(r, 8));
      header |= off < sizeof(sw__shm_hdr);
      say(&d, " bit%zu", off);
    } else if (how < 30) { /* a byte anywhere */
      size_t off = fz_below(r, n);
      b[off] = (unsigned char)fz_next(r);
      header |= off < sizeof(sw__shm_hdr);
      say(&d, " byte%zu", off);
    } else if (how < 85) { /* a word the snapshots point at */
      uint64_t c = fz_below(r, 100);
      int cls = c < 55 ? FZ_STATE : c < 80 ? FZ_LAYOUT : FZ_STRUCT;
      if (base->tg.n[cls] == 0) cls = FZ_STRUCT;
      if (base->tg.n[cls] == 0) continue;
      size_t off = base->tg.off[cls][fz_below(r, base->tg.n[cls])];
      if (off + 8 > n) continue;
      say(&d, " %s", class_names[cls]);
      damage_word(b, off, base, r, &d);
      header |= off < sizeof(sw__shm_hdr);
    } else if (how < 95) { /* a range: zeroed, filled, random, or a copy of another */
      size_t len = 1 + fz_below(r, 256), off = fz_below(r, n);
      if (off + len > n) len = n - off;
      unsigned op = (unsigned)fz_below(r, 4);
      if (op == 0) memset(b + off, 0, len);
      else if (op == 1) memset(b + off, 0xff, len);
      else if (op == 2) for (size_t i = 0; i < len; i++) b[off + i] = (unsigned char)fz_next(r);
      else {
        if (len > base->bytes.n) len = base->bytes.n;
        size_t from = fz_below(r, base->bytes.n - len + 1);
        memmove(b + off, base->bytes.p + from, len);
      }
      header |= off < sizeof(sw__shm_hdr);
      say(&d, " range%zu+%zu:%u", off, len, op);
    } else if (!resized) { /* the file shorter or longer */
      resized = true;
      if (fz_below(r, 2)) {
        n = fz_below(r, n);
        say(&d, " trunc%zu", n);
      } else {
        size_t more = 1 + fz_below(r, 8192);
        memset(b + n, 0, more);
        n += more;
        say(&d, " grow%zu", n);
      }
    }
  }
  if (header && fz_below(r, 2)) {
    reseal(b, n);
    say(&d, " resealed");
  }
  *out = b;
  *out_n = n;
}
