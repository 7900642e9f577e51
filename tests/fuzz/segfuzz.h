/* SPDX-License-Identifier: Apache-2.0 */
/* The segment fuzzer (tests/fuzz/segments.sh): damaged copies of real
 * segments of every kind, each opened in every mode and driven through the
 * public calls of its kind and swctl's reads, in a forked child whose every
 * call has a time bound.
 *
 *   segfuzz_main.c     options, the copies, the children, the counts, saving failures
 *   segfuzz_damage.c   the generator, where to damage (by diffing snapshots), the damage
 *   segfuzz_registry.c segfuzz_keyed.c segfuzz_breaker.c   each kind: make, drive
 */
#ifndef SEGFUZZ_H
#define SEGFUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sw/sw.h>

/* Time of the state the kinds make, and of the custom clock (ms). */
#define FZ_T0 INT64_C(100000000)
#define FZ_NOW (FZ_T0 + 9000)

/* ------------------------------------------------------------ generator */

typedef struct fz_rng {
  uint64_t s;
} fz_rng;
uint64_t fz_next(fz_rng *r);
/* 0..n-1 (n > 0) */
uint64_t fz_below(fz_rng *r, uint64_t n);
/* The generator of copy index of kind at seed: independent of any other copy. */
fz_rng fz_rng_for(uint64_t seed, const char *kind, uint64_t index);

/* ------------------------------------------------------------ snapshots */

typedef struct fz_bytes {
  unsigned char *p;
  size_t n;
} fz_bytes;
/* The file at path, read whole (exits on failure). */
fz_bytes fz_read_file(const char *path);
void fz_bytes_free(fz_bytes *b);

/* Where to damage, found by comparing snapshots of real segments, never
 * from a layout: offsets of 8-byte words. */
enum {
  FZ_STRUCT, /* nonzero before any count: magics, headers, sizes, seeds, locks */
  FZ_LAYOUT, /* differ between fresh segments of two configurations: sizes, counts, offsets */
  FZ_STATE,  /* changed while the segment was used: counts, generations, window and state words */
  FZ_NCLASS
};
typedef struct fz_targets {
  uint32_t *off[FZ_NCLASS];
  size_t n[FZ_NCLASS];
} fz_targets;

/* One base segment of a kind: its final bytes and where to damage them. */
typedef struct fz_base {
  char variant[32];
  fz_bytes bytes;
  fz_targets tg;
} fz_base;

/* Build the targets: fresh (created, its structure made, nothing counted),
 * other (the same with another configuration), states[0..n) (snapshots as
 * the segment was used, in order, the last one the base). */
void fz_find_targets(fz_targets *tg, const fz_bytes *fresh, const fz_bytes *other,
                     const fz_bytes *states, int nstates);

/* A damaged copy of base into out (malloc'd, *out_n bytes; the file may be
 * shorter or longer than the base). desc gets a short description of what
 * was done (for the failure log). */
void fz_damage(const fz_base *base, fz_rng *r, unsigned char **out, size_t *out_n, char *desc,
               size_t desc_cap);

/* -------------------------------------------------------------- results */

#define FZ_NRC 32 /* -rc of sw_err, 0 for SW_OK and values >= 0; the last: other negatives
                     (a count read back damaged) */
enum { FZ_MODE_CREATE, FZ_MODE_ATTACH, FZ_MODE_READONLY, FZ_NMODES };
extern const char *const fz_mode_names[FZ_NMODES];
extern const uint32_t fz_mode_flags[FZ_NMODES];

/* What a child did with one copy, in memory shared with the parent (so
 * that what a dying child did is known). */
typedef struct fz_res {
  int32_t open_rc[FZ_NMODES]; /* 1: not reached */
  uint32_t calls;
  uint32_t slow;              /* calls that took 1 s or more (a bounded lock wait): the
                                 first one ends the copy, whose next calls would wait too */
  uint32_t rc_count[FZ_NRC];
  char step[120];             /* the call under way */
} fz_res;

/* The child's current result (set by the main loop before a drive). */
extern fz_res *fz_cur;
/* Seconds a call may take before the child counts as hung. */
extern unsigned fz_call_bound;

/* Before a call: name it and arm its time bound. */
void fz_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* After it: count its return code (negative: an sw_err). */
int64_t fz_end(int64_t rc);
/* A call, named and bounded: FZ(expr, "name %d", x) evaluates to expr's value. */
#define FZ(expr, ...) (fz_begin(__VA_ARGS__), fz_end((int64_t)(expr)))
/* A call returning a double (negative: an sw_err). */
#define FZD(expr, ...) (fz_begin(__VA_ARGS__), fz_end_d((double)(expr)))
double fz_end_d(double v);

/* ---------------------------------------------------------------- kinds */

typedef struct fz_kind {
  const char *name;
  int nvariants;
  /* Make base variant v in directory dir (the parent, before any copy). */
  void (*make)(int v, const char *dir, fz_base *out);
  /* Open path in mode and drive it through every call (in the child). */
  void (*drive)(int v, const char *path, int mode);
} fz_kind;

extern const fz_kind fz_registry_kind, fz_keyed_kind, fz_breaker_kind;

/* Helpers of the kinds. */
void fz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define FZ_MUST(expr)                                                                      \
  do {                                                                                     \
    int fz_rc_ = (int)(expr);                                                              \
    if (fz_rc_ < 0) fz_die("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #expr,               \
                           sw_err_name(fz_rc_), sw_last_error());                          \
  } while (0)
sw_options *fz_opts(void);
void fz_set(sw_options *o, sw_option key, double v);
/* Sleep past the next millisecond (creation times then always differ). */
void fz_tick(void);
/* sw_segment_probe of path, as every kind's drive does. */
void fz_probe(const char *path);

#endif /* SEGFUZZ_H */
