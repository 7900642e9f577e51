/* SPDX-License-Identifier: Apache-2.0 */
/* A small, obviously correct model of libsw's metric leap arrays (Bucket and
 * Occupiable with its Future array): plain structs, no concurrency, no
 * striping, no double buffering. The fuzzer drives it and the real library
 * with the same operations and compares every answer. */
#ifndef SW_FUZZ_MODEL_H
#define SW_FUZZ_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <sw/sw.h>

#define MODEL_MAX_SLOTS 16

typedef struct model_window {
  bool used;
  int64_t start;
  int64_t c[SW_EVENT_COUNT];
  int64_t min_rt;
} model_window;

typedef struct model_future {
  bool used, sealed;
  int64_t start, pass;
} model_future;

typedef struct model {
  int32_t n;
  int64_t wl, interval, max_rt;
  bool occupiable;
  model_window w[MODEL_MAX_SLOTS];
  model_future f[MODEL_MAX_SLOTS];
} model;

static void model_init(model *m, int32_t n, int64_t wl, bool occupiable, int64_t max_rt) {
  *m = (model){.n = n, .wl = wl, .interval = n * wl, .max_rt = max_rt, .occupiable = occupiable};
}

static int model_idx(const model *m, int64_t t) { return (int)((t / m->wl) % m->n); }
static int64_t model_start(const model *m, int64_t t) { return t - t % m->wl; }

/* The future window of start (created, or reset from an older one); NULL if
 * the slot holds a newer one (the real array returns a detached window). */
static model_future *model_future_at(model *m, int64_t start) {
  model_future *f = &m->f[model_idx(m, start)];
  if (f->used && f->start > start) return NULL;
  if (!f->used || f->start < start) *f = (model_future){true, false, start, 0};
  return f;
}

/* The main window of t, made current (with the Occupiable carry); NULL when
 * the slot holds a newer window. */
static model_window *model_current(model *m, int64_t t) {
  int64_t ws = model_start(m, t);
  model_window *w = &m->w[model_idx(m, t)];
  if (w->used && w->start > ws) return NULL;
  if (!w->used || w->start < ws) {
    *w = (model_window){.used = true, .start = ws, .min_rt = m->max_rt};
    if (m->occupiable) {
      model_future *f = model_future_at(m, ws);
      if (f) {
        w->c[SW_EVENT_PASS] = f->pass;
        f->sealed = true;
      }
    }
  }
  return w;
}

static void model_add(model *m, int64_t t, sw_event ev, int64_t k) {
  model_window *w = model_current(m, t);
  if (w == NULL) return;
  w->c[ev] += k;
  if (ev == SW_EVENT_RT && k < w->min_rt) w->min_rt = k;
}

/* A borrow for the window of future_t. Passes borrowed for an older window
 * of its slot that no main window took are carried into that main window
 * first: a borrowed pass counts until its window leaves the interval, not
 * until the borrow slot is needed again. */
static void model_add_waiting(model *m, int64_t future_t, int64_t k) {
  int64_t start = model_start(m, future_t);
  const model_future *old = &m->f[model_idx(m, start)];
  if (old->used && !old->sealed && old->start < start) model_current(m, old->start);
  model_future *f = model_future_at(m, start);
  if (f == NULL) return;
  if (f->sealed)
    model_add(m, future_t, SW_EVENT_PASS, k); /* already carried: straight to the window */
  else
    f->pass += k;
}

/* The window that slot i must hold to be part of the interval ending at t. */
static int64_t model_want(const model *m, int64_t t, int i) {
  int64_t wid = t / m->wl;
  int64_t back = ((wid % m->n) - i + m->n) % m->n;
  return (wid - back) * m->wl;
}

static int64_t model_sum(const model *m, int64_t t, sw_event ev, bool max) {
  int64_t acc = 0;
  for (int i = 0; i < m->n; i++) {
    int64_t want = model_want(m, t, i), v;
    if (want < 0) continue;
    const model_window *w = &m->w[i];
    if (w->used && w->start == want)
      v = w->c[ev];
    else if (ev == SW_EVENT_PASS && m->occupiable && m->f[i].used && m->f[i].start == want)
      v = m->f[i].pass; /* borrowed, not yet carried */
    else
      continue;
    acc = max ? (v > acc ? v : acc) : acc + v;
  }
  return acc;
}

static int64_t model_min_rt(const model *m, int64_t t) {
  int64_t min = m->max_rt;
  for (int i = 0; i < m->n; i++) {
    int64_t want = model_want(m, t, i);
    if (want >= 0 && m->w[i].used && m->w[i].start == want && m->w[i].min_rt < min)
      min = m->w[i].min_rt;
  }
  return min > 1 ? min : 1;
}

static int64_t model_waiting(const model *m, int64_t t) {
  int64_t sum = 0;
  for (int i = 0; i < m->n; i++)
    if (m->occupiable && m->f[i].used && m->f[i].start > t) sum += m->f[i].pass;
  return sum;
}

/* PASS of the window starting at start: the main window's, or what was
 * borrowed for it while no main window holds it. */
static int64_t model_pass_of(const model *m, int64_t start) {
  int i = model_idx(m, start);
  if (m->w[i].used && m->w[i].start == start) return m->w[i].c[SW_EVENT_PASS];
  if (m->occupiable && m->f[i].used && m->f[i].start == start) return m->f[i].pass;
  return 0;
}

static int64_t model_window_pass(const model *m, int64_t t) {
  return model_pass_of(m, model_start(m, t));
}

static int64_t model_previous_pass(const model *m, int64_t t) {
  int64_t wid = t / m->wl, start = (wid - 1) * m->wl;
  if (wid == 0 || t - start > m->interval) return 0;
  return model_pass_of(m, start);
}

/* Starts of the stored windows of the interval ending at t, oldest first. */
static int model_list(const model *m, int64_t t, int64_t *starts) {
  int k = 0;
  int64_t ws = model_start(m, t);
  for (int64_t s = ws - (m->n - 1) * m->wl; s <= ws; s += m->wl) {
    if (s < 0) continue;
    const model_window *w = &m->w[model_idx(m, s)];
    if (w->used && w->start == s) starts[k++] = s;
  }
  return k;
}

#endif /* SW_FUZZ_MODEL_H */
