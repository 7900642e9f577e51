/* SPDX-License-Identifier: Apache-2.0 */
/* Circuit breakers: their block (breaker.h), on the heap or in a shared
 * segment of their own kind, and what reads it (stats, rule). The entry
 * and exit and every transition are in entry.c. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SW_BREAKER_INTERNALS
#include "../internal.h"
#include "../shm.h"
#include "breaker.h"

static uint64_t sw__brk_prefix(void) { return sw__round_up(sizeof(sw__brk_block), SW_CACHE_LINE); }

static const sw_bucket_type *sw__brk_type(const sw__brk_rule *r) {
  return r->strategy == SW_BREAKER_SLOW_RATIO ? &sw__brk_slow_type : &sw__brk_error_type;
}

uint64_t sw__brk_size(const sw__brk_rule *r) {
  uint64_t la = sw__la_block_size(r->sample_count, sw__brk_type(r)->bucket_size);
  return la ? sw__brk_prefix() + la : 0;
}

int sw__brk_init(void *mem, const sw__brk_rule *r, bool process_shared) {
  sw__brk_block *b = mem;
  int rc = sw__la_validate(sw__brk_type(r), r->sample_count, r->interval_ms);
  if (rc < 0) return rc;
  b->layout_version = SW__BRK_LAYOUT_VERSION;
  b->total_size = sw__brk_size(r);
  b->la_off = sw__brk_prefix();
  b->rule = *r;
  atomic_store(&b->state, sw__brk_word(SW_BREAKER_CLOSED, 0));
  rc = sw__la_block_init((sw__la_block *)((char *)mem + b->la_off), sw__brk_type(r),
                         r->sample_count, r->interval_ms, process_shared);
  if (rc < 0) return rc;
  b->magic = SW__BRK_MAGIC;
  return SW_OK;
}

int sw__brk_corrupt(const sw_breaker *b, const char *fmt, ...) {
  char detail[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return sw__fail(SW_ECORRUPT, "breaker%s%s: %s (a damaged segment: open it with "
                  "SW_SEGMENT_RESET to start a new breaker)", b->name[0] ? " " : "", b->name,
                  detail);
}

int sw__brk_bind(sw_breaker *b, void *mem, uint64_t size) {
  sw__brk_block *blk = mem;
  /* Only a segment's block can be damaged (its header was checked: it is
   * libsw's and of this kind), so every mismatch here is corruption. Each
   * field is checked against what sw__brk_rule_from can make, then the
   * rule is copied: nothing later reads it from the segment. */
  if (size < sizeof *blk || blk->magic != SW__BRK_MAGIC)
    return sw__brk_corrupt(b, "bad magic 0x%08x", size >= 4 ? blk->magic : 0);
  if (blk->layout_version != SW__BRK_LAYOUT_VERSION)
    return sw__fail(SW_EVERSION, "breaker%s%s laid out by another libsw (layout %u, this one %u)",
                    b->name[0] ? " " : "", b->name, blk->layout_version, SW__BRK_LAYOUT_VERSION);
  const sw__brk_rule r = blk->rule;
  const char *bad = r.strategy < 0 || r.strategy > SW_BREAKER_ERROR_COUNT ? "strategy"
                    : r.half_open_calls < 1 || r.half_open_calls > SW__BRK_PROBES_MAX
                        ? "half_open_calls"
                    : r.sample_count < 1 || r.sample_count > 100 ? "sample_count"
                    : r.interval_ms < 1 || r.interval_ms > 86400000 ||
                            r.interval_ms % r.sample_count != 0
                        ? "interval_ms"
                    : r.open_ms < 1 || r.open_ms > SW__BRK_OPEN_MS_MAX ? "open_ms"
                    : r.probe_timeout_ms < 1 || r.probe_timeout_ms > SW__BRK_PROBE_TIMEOUT_MAX
                        ? "probe_timeout_ms"
                    : r.min_requests < 1 || r.min_requests > INT32_MAX ? "min_requests"
                    : !(r.count >= 0 && r.count <= 1e15) ? "count"
                    : !(r.slow_ratio >= 0 && r.slow_ratio <= 1) ? "slow_ratio"
                    : r.max_rt_ms < 0 || r.max_rt_ms > INT32_MAX ? "max_rt_ms"
                                                                  : NULL;
  if (bad != NULL)
    return sw__brk_corrupt(b, "its rule's %s is out of range (strategy %d, %d half-open calls, "
                           "%d x %lld ms, open %lld ms, probe timeout %lld ms)", bad, r.strategy,
                           r.half_open_calls, r.sample_count, (long long)r.interval_ms,
                           (long long)r.open_ms, (long long)r.probe_timeout_ms);
  if (blk->la_off != sw__brk_prefix() || blk->total_size != sw__brk_size(&r) ||
      blk->total_size > size)
    return sw__brk_corrupt(b, "its header (%llu bytes, windows at %llu) does not match its rule "
                           "or the segment (%llu bytes)", (unsigned long long)blk->total_size,
                           (unsigned long long)blk->la_off, (unsigned long long)size);
  sw__la_block *la = (sw__la_block *)((char *)mem + blk->la_off);
  int rc = sw__la_check(la, sw__brk_type(&r), r.sample_count, r.interval_ms);
  if (rc < 0) return rc;
  b->blk = blk;
  b->rule = r;
  if ((rc = sw__la_bind(&b->la, la, sw__brk_type(&r), NULL)) < 0) return rc;
  b->la.borrowed = true;
  return SW_OK;
}

SW_API int sw_breaker_create(sw_breaker **out, const sw_options *opts) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  sw__brk_rule r;
  int rc = sw__brk_rule_from(opts, &r);
  if (rc < 0) return rc;
  uint64_t size = sw__brk_size(&r);
  sw_breaker *b;
  void *mem;
  if ((rc = sw__alloc_pair((void **)&b, sizeof *b, &mem, size, "breaker")) < 0) return rc;
  if ((rc = sw__brk_init(mem, &r, false)) < 0 || (rc = sw__brk_bind(b, mem, size)) < 0) {
    sw__free(b);
    sw__free(mem);
    return rc;
  }
  *out = b;
  return SW_OK;
}

/* ---------------------------------------------------------------- shared */

uint64_t sw__brk_fingerprint(void) {
  const uint64_t v[] = {sizeof(sw__shm_hdr),    sizeof(sw__brk_block), sizeof(sw__brk_rule),
                        offsetof(sw__brk_block, state), offsetof(sw__brk_block, clock),
                        offsetof(sw__brk_block, probe),
                        offsetof(sw__brk_block, count), sizeof(sw__la_block),
                        sizeof(sw__la_slot),     sizeof(pthread_mutex_t),
                        SW__BRK_LAYOUT_VERSION, SW__LA_LAYOUT_VERSION, SW_CACHE_LINE};
  return sw__fnv(v, sizeof v, SW__FNV_BASIS);
}

static uint64_t sw__brk_body_size(const void *config) {
  const sw__brk_rule *r = config;
  if (r->strategy < 0 || r->strategy > SW_BREAKER_ERROR_COUNT || r->sample_count < 1 ||
      r->sample_count > 100 || r->interval_ms < 1 || r->interval_ms % r->sample_count != 0 ||
      r->half_open_calls < 1 || r->half_open_calls > SW__BRK_PROBES_MAX)
    return 0;
  return sw__brk_size(r);
}

static int sw__brk_init_shared(void *body, uint64_t size, const void *config) {
  (void)size;
  return sw__brk_init(body, config, true);
}

static int sw__brk_matches(const void *have_, const void *want_, const char *name) {
  const sw__brk_rule *have = have_, *want = want_;
  if (have->interval_ms != want->interval_ms || have->sample_count != want->sample_count ||
      have->half_open_calls != want->half_open_calls || have->strategy != want->strategy)
    return sw__fail(SW_EGEOMETRY, "breaker %s counts strategy %d over %d x %lld ms with %d "
                    "half-open calls; strategy %d over %d x %lld ms with %d were asked for", name,
                    have->strategy, have->sample_count,
                    (long long)(have->interval_ms / have->sample_count), have->half_open_calls,
                    want->strategy, want->sample_count,
                    (long long)(want->interval_ms / want->sample_count), want->half_open_calls);
  return SW_OK;
}

SW_API int sw_breaker_open(sw_breaker **out, const char *name, const sw_options *opts,
                           uint32_t flags) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(name, "segment name");
  const bool readonly = flags & SW_SEGMENT_READONLY;
  sw__brk_rule r;
  int rc;
  if (!readonly && (rc = sw__brk_rule_from(opts, &r)) < 0) return rc;
  sw_breaker *b = sw__calloc(1, sizeof *b);
  sw__shm *shm = sw__calloc(1, sizeof *shm);
  if (b == NULL || shm == NULL) {
    sw__free(b);
    sw__free(shm);
    return sw__fail(SW_ENOMEM, "breaker handle");
  }
  snprintf(b->name, sizeof b->name, "%s", name);
  const sw__shm_kind kind = {SW__SHM_BREAKER, "breaker", sw__brk_fingerprint(),
                             sw__brk_init_shared, sw__brk_body_size, sw__brk_matches};
  rc = sw__shm_open(shm, name, flags, opts, &kind, readonly ? NULL : &r, sizeof r);
  if (rc == SW_OK &&
      (rc = sw__brk_bind(b, shm->body, shm->size - sw__shm_header(shm)->body_off)) < 0)
    sw__shm_abandon(shm, name);
  if (rc < 0) {
    sw__free(shm);
    sw__free(b);
    return rc;
  }
  b->shm = shm;
  b->readonly = b->la.readonly = readonly;
  *out = b;
  return SW_OK;
}

SW_API void sw_breaker_free(sw_breaker *b) {
  if (b == NULL) return;
  if (b->shm) {
    sw__shm_close(b->shm);
    sw__free(b->shm);
  } else {
    pthread_mutex_destroy(&b->la.blk->reset_lock);
    sw__free(b->blk);
  }
  sw__free(b);
}

SW_API int sw_breaker_set_listener(sw_breaker *b, sw_breaker_listener_fn fn, void *user) {
  SW__CHECK_NULL(b, "breaker");
  b->listener = fn;
  b->listener_user = user;
  return SW_OK;
}

SW_API int sw_breaker_get_rule(const sw_breaker *b, sw_options *opts) {
  SW__CHECK_NULL(b, "breaker");
  SW__CHECK_NULL(opts, "options");
  sw__brk_rule_to(&b->rule, opts);
  return SW_OK;
}

/* --------------------------------------------------------------- windows */

/* Both counters over the windows of the interval ending at t, through the
 * leap array's generic sum (each read by itself, as Sentinel's sums). The
 * bad ones are read first: an exit adds to the total before it adds a bad
 * one, so exits racing with the read raise the total read after, not the
 * bad count (where the relaxed adds are seen in order, as on x86, a ratio
 * is never over 1). */
void sw__brk_sums(const sw_breaker *b, int64_t t, int64_t *total, int64_t *bad) {
  if (sw_leap_array_sum_at(&b->la, t, 1, bad) < 0) *bad = 0;
  if (sw_leap_array_sum_at(&b->la, t, 0, total) < 0) *total = 0;
}

void sw__brk_clear_windows(sw_breaker *b, int64_t t) {
  const sw_leap_array *la = &b->la;
  for (uint32_t idx = 0; idx < (uint32_t)la->n; idx++) {
    sw__la_slot *s = sw__la_slot_at(la, idx);
    uint64_t seq;
    sw_window w = {0, la->wl, NULL, 0, idx};
    /* (the interval selection takes no window that began after t) */
    if (sw__la_active(s, &seq, &w.start_ms) &&
        sw__la_selected(la, SW__SEL_INTERVAL, t, &w, NULL, NULL))
      sw__brk_bucket_clear(sw__la_body(la, s, (seq >> 1) & 1));
  }
}

SW_API int sw_breaker_stats_at(const sw_breaker *b, int64_t t, sw_breaker_info *out) {
  SW__CHECK_NULL(b, "breaker");
  SW__CHECK_NULL(out, "out");
  SW__CHECK_TIME(t);
  if (t > SW__BRK_TIME_MAX)
    return sw__fail(SW_ETIME, "time %lld ms is past a breaker's last time (2^42 ms)",
                    (long long)t);
  memset(out, 0, sizeof *out);
  const sw__brk_block *blk = b->blk;
  const uint64_t w = atomic_load(&blk->state);
  if (sw__brk_state(w) == 3)
    return sw__brk_corrupt(b, "its state word 0x%016llx holds no state", (unsigned long long)w);
  out->state = (int32_t)sw__brk_state(w);
  out->strategy = b->rule.strategy;
  out->next_probe_ms = -1;
  if (out->state == SW_BREAKER_OPEN) {
    out->next_probe_ms = sw__brk_time(w);
    out->state_since_ms = out->next_probe_ms - b->rule.open_ms;
  } else {
    out->state_since_ms = sw__brk_time(w);
  }
  sw__brk_sums(b, t, &out->total, &out->bad);
  out->ratio = out->total > 0 ? (double)out->bad / (double)out->total : 0.0;
  if (out->state == SW_BREAKER_HALF_OPEN)
    for (int i = 0; i < b->rule.half_open_calls; i++) {
      const uint64_t p = atomic_load(&blk->probe[i]);
      if (sw__brk_of(b, w, p) && !(p & SW__BRK_DONE) && sw__brk_deadline(p) > t)
        out->probes_in_flight++;
    }
  out->opened = atomic_load(&blk->count[SW__BRK_OPENED]);
  out->half_opened = atomic_load(&blk->count[SW__BRK_HALF_OPENED]);
  out->closed = atomic_load(&blk->count[SW__BRK_CLOSED]);
  out->reopened = atomic_load(&blk->count[SW__BRK_REOPENED]);
  out->probes = atomic_load(&blk->count[SW__BRK_PROBES]);
  out->probes_lost = atomic_load(&blk->count[SW__BRK_LOST]);
  out->blocked = atomic_load(&blk->count[SW__BRK_BLOCKED]);
  return SW_OK;
}
