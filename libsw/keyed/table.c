/* SPDX-License-Identifier: Apache-2.0 */
/* The keyed table: its layout, its creation (heap or shared segment), and
 * its rule (keys and their places: places.c; layout and protocol: keyed.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../shm.h"
#include "keyed.h"


/* ------------------------------------------------------------- layout */

static uint64_t sw__kt_hdr_size(void) { return sw__round_up(sizeof(sw__kt_hdr), SW_CACHE_LINE); }

static uint32_t sw__kt_nbuckets(uint32_t capacity) {
  /* 80% of the slots full at capacity (keyed.h) */
  return (uint32_t)(((uint64_t)capacity * 5 / 4 + SW__KT_WAYS - 1) / SW__KT_WAYS);
}

static uint32_t sw__kt_kind(const sw__rule *r) {
  return r->grade == SW_GRADE_CONCURRENCY     ? SW__KT_CONCURRENCY
         : r->behavior == SW_BEHAVIOR_PACING ? SW__KT_PACING
                                             : SW__KT_REJECT;
}

/* A slot: the meta and the key words, rounded up to 16 bytes, then the
 * 16-byte state words (keyed.h). */
static uint32_t sw__kt_state_off(const sw__kt_config *c) {
  return (uint32_t)sw__round_up(8 + (uint64_t)c->key_bytes, 16);
}

static uint32_t sw__kt_slot_size(const sw__kt_config *c) {
  return sw__kt_state_off(c) + 16 * (c->windows + (sw__kt_kind(&c->rule) != SW__KT_REJECT));
}

/* Bytes of a table block for a configuration. */
static uint64_t sw__kt_size(const sw__kt_config *c, uint32_t *nb, uint32_t *nl) {
  *nb = sw__kt_nbuckets(c->capacity);
  *nl = *nb < SW__KT_MAX_LOCKS ? *nb : SW__KT_MAX_LOCKS;
  uint64_t locks = sw__round_up((uint64_t)*nl * sizeof(sw__kt_stripe), SW_CACHE_LINE);
  uint64_t tags = sw__round_up((uint64_t)*nb * SW__KT_WAYS, SW_CACHE_LINE);
  uint64_t slots = sw__round_up((uint64_t)*nb * SW__KT_WAYS * sw__kt_slot_size(c), SW_CACHE_LINE);
  return sw__kt_hdr_size() + locks + tags + slots;
}

/* The table's kind and the limits of a keyed rule. */
static int sw__kt_rule_check(const sw__rule *r, int64_t interval_ms, uint32_t *kind) {
  if (r->cluster)
    return sw__fail(SW_EINVAL, "SW_OPT_CLUSTER=1: a keyed table limits each key on this host; "
                    "fleet-wide limits are per limiter");
  if (r->behavior == SW_BEHAVIOR_WARM_UP || r->behavior == SW_BEHAVIOR_WARM_UP_PACING)
    return sw__fail(SW_EINVAL, "SW_OPT_BEHAVIOR=%d (%s): warm-up is per resource, not per key "
                    "(use a limiter or a registry)", r->behavior, sw__behavior_names[r->behavior]);
  *kind = sw__kt_kind(r);
  /* The most a window can count once admitted: (int)(pass / isec) + n <=
   * threshold bounds pass + n by threshold + isec (isec <= 1; n = the
   * threshold) or by threshold * isec + 1 (isec > 1; n = 1). */
  const double isec = (double)interval_ms / 1000.0;
  const double most = isec <= 1 ? r->threshold + isec : r->threshold * isec + 1;
  if (*kind == SW__KT_REJECT && most > (double)SW__KT_COUNT_MAX)
    return sw__fail(SW_ERANGE, "SW_OPT_THRESHOLD=%g: a keyed table counts at most %lld passes "
                    "per key and window, and this rule over %lld ms could admit %.0f",
                    r->threshold, (long long)SW__KT_COUNT_MAX, (long long)interval_ms, most);
  if (*kind == SW__KT_CONCURRENCY && r->threshold > 1e12)
    return sw__fail(SW_ERANGE, "SW_OPT_THRESHOLD=%g: at most 1e12 requests in flight per key",
                    r->threshold);
  return SW_OK;
}

static int sw__kt_config_from(const sw_options *opts, uint32_t capacity, sw__kt_config *c) {
  memset(c, 0, sizeof *c);
  if (capacity == 0 || capacity > (1u << 28))
    return sw__fail(SW_ESIZE, "capacity=%u is outside 1..%u", capacity, 1u << 28);
  int64_t v, sample;
  c->capacity = capacity;
  sw_options_get(opts, SW_OPT_KEY_BYTES, &v);
  c->key_bytes = (uint32_t)sw__round_up((uint64_t)v, 8);
  sw_options_get(opts, SW_OPT_KEYED_ON_FULL, &v);
  c->on_full = (uint32_t)v;
  sw_options_get(opts, SW_OPT_SECOND_SAMPLE_COUNT, &sample);
  sw_options_get(opts, SW_OPT_SECOND_INTERVAL_MS, &c->interval_ms);
  if (sample > SW__KT_MAX_WINDOWS)
    return sw__fail(SW_ERANGE, "SW_OPT_SECOND_SAMPLE_COUNT=%lld: a keyed rule has 1..%d windows",
                    (long long)sample, SW__KT_MAX_WINDOWS);
  if (c->interval_ms % sample != 0)
    return sw__fail(SW_ESIZE, "SW_OPT_SECOND_SAMPLE_COUNT=%lld does not divide "
                    "SW_OPT_SECOND_INTERVAL_MS=%lld", (long long)sample,
                    (long long)c->interval_ms);
  c->windows = (uint32_t)sample;
  uint32_t kind;
  int rc = sw__rule_from(opts, &c->rule);
  return rc < 0 ? rc : sw__kt_rule_check(&c->rule, c->interval_ms, &kind);
}

static void sw__kt_seed(uint64_t seed[2]) {
  if (getrandom(seed, 2 * sizeof seed[0], GRND_NONBLOCK) == (ssize_t)(2 * sizeof seed[0])) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  seed[0] = sw__mum((uint64_t)ts.tv_nsec ^ SW__P0, (uint64_t)getpid() ^ SW__P1);
  seed[1] = sw__mum(seed[0] ^ (uint64_t)ts.tv_sec, SW__P2);
}

/* Initialise a zeroed block of sw__kt_size bytes. */
static int sw__kt_init(void *mem, uint64_t size, const void *config_, bool shared) {
  const sw__kt_config *c = config_;
  sw__kt_hdr *h = mem;
  uint32_t nb, nl;
  h->cfg = *c;
  h->total_size = sw__kt_size(c, &nb, &nl);
  if (h->total_size > size) return sw__fail(SW_ECORRUPT, "keyed table larger than its memory");
  h->nbuckets = nb;
  h->nlocks = nl;
  h->slot_size = sw__kt_slot_size(c);
  sw__kt_rule_check(&c->rule, c->interval_ms, &h->kind);
  h->wl = c->interval_ms / c->windows;
  sw__kt_seed(h->seed);
  h->locks_off = sw__kt_hdr_size();
  h->tags_off = h->locks_off + sw__round_up((uint64_t)nl * sizeof(sw__kt_stripe), SW_CACHE_LINE);
  h->slots_off = h->tags_off + sw__round_up((uint64_t)nb * SW__KT_WAYS, SW_CACHE_LINE);
  int rc = sw__robust_init(&h->rule_lock, shared);
  sw__kt_stripe *locks = (sw__kt_stripe *)((char *)mem + h->locks_off);
  for (uint32_t i = 0; rc == SW_OK && i < nl; i++) rc = sw__robust_init(&locks[i].m, shared);
  if (rc < 0) return rc;
  sw__rule_box_store(&h->rule, &c->rule);
  h->layout_version = SW__KT_LAYOUT_VERSION;
  atomic_thread_fence(memory_order_release);
  h->magic = SW__KT_MAGIC;
  return SW_OK;
}

static int sw__kt_init_shared(void *mem, uint64_t size, const void *config) {
  return sw__kt_init(mem, size, config, true);
}

/* Bind a handle to a block, checking its header against its size. */
static int sw__kt_bind(sw_keyed *k, void *mem, uint64_t size) {
  sw__kt_hdr *h = mem;
  uint32_t nb, nl, kind;
  if (h->magic != SW__KT_MAGIC)
    return sw__fail(SW_ECORRUPT, "keyed table header has magic 0x%08x", h->magic);
  if (h->layout_version != SW__KT_LAYOUT_VERSION)
    return sw__fail(SW_EVERSION, "keyed table layout version %u, this libsw has %u",
                    h->layout_version, SW__KT_LAYOUT_VERSION);
  const sw__kt_config *c = &h->cfg;
  if (c->capacity == 0 || c->capacity > (1u << 28) || c->key_bytes < 16 ||
      c->key_bytes > SW__KT_MAX_KEY || c->key_bytes % 8 || c->windows == 0 ||
      c->windows > SW__KT_MAX_WINDOWS || c->interval_ms <= 0 ||
      c->interval_ms % c->windows != 0 || c->on_full > SW_FULL_CLOSED ||
      sw__kt_rule_check(&c->rule, c->interval_ms, &kind) < 0 || kind != h->kind ||
      h->total_size != sw__kt_size(c, &nb, &nl) || h->total_size > size || h->nbuckets != nb ||
      h->nlocks != nl || h->slot_size != sw__kt_slot_size(c) ||
      h->wl != c->interval_ms / c->windows || h->locks_off != sw__kt_hdr_size() ||
      h->tags_off != h->locks_off + sw__round_up((uint64_t)nl * sizeof(sw__kt_stripe),
                                                 SW_CACHE_LINE) ||
      h->slots_off != h->tags_off + sw__round_up((uint64_t)nb * SW__KT_WAYS, SW_CACHE_LINE))
    return sw__fail(SW_ECORRUPT, "keyed table header describes a layout that does not fit "
                    "(%llu of %llu bytes)", (unsigned long long)h->total_size,
                    (unsigned long long)size);
  k->hdr = h;
  k->locks = (sw__kt_stripe *)((char *)mem + h->locks_off);
  k->tags = (_Atomic uint64_t *)((char *)mem + h->tags_off);
  k->slots = (unsigned char *)mem + h->slots_off;
  k->nbuckets = nb;
  k->nlocks = nl;
  k->slot_size = h->slot_size;
  k->key_words = c->key_bytes / 8;
  k->windows = c->windows;
  k->state_off = sw__kt_state_off(c);
  k->win_off = k->state_off + 16 * (h->kind != SW__KT_REJECT);
  k->unit_interval = c->interval_ms == 1000;
  k->kind = h->kind;
  k->wl = h->wl;
  k->isec = (double)c->interval_ms / 1000.0;
  return SW_OK;
}

/* ---------------------------------------------------------- construction */

SW_API int sw_keyed_create(sw_keyed **out, uint32_t capacity, const sw_options *opts) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  sw__kt_config c;
  uint32_t nb, nl;
  int rc = sw__kt_config_from(opts, capacity, &c);
  if (rc < 0) return rc;
  uint64_t size = sw__kt_size(&c, &nb, &nl);
  sw_keyed *k = sw__calloc(1, sizeof *k);
  if (k == NULL) return sw__fail(SW_ENOMEM, "keyed table handle");
  void *mem;
  /* An anonymous mapping is zero and untouched: memory grows with the keys.
   * A program's own allocator gets an ordinary (zeroed) block. */
  if (sw__alloc_custom()) {
    mem = size <= SIZE_MAX ? sw__calloc(1, (size_t)size) : NULL;
  } else {
    mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    k->heap = mem != MAP_FAILED;
    if (mem == MAP_FAILED) mem = NULL;
  }
  if (mem == NULL) {
    sw__free(k);
    return sw__fail(SW_ENOMEM, "keyed table of %llu bytes", (unsigned long long)size);
  }
  if ((rc = sw__kt_init(mem, size, &c, false)) < 0 || (rc = sw__kt_bind(k, mem, size)) < 0) {
    if (k->heap) munmap(mem, size);
    else sw__free(mem);
    sw__free(k);
    return rc;
  }
  k->created = true;
  *out = k;
  return SW_OK;
}

uint64_t sw__kt_fingerprint(void) {
  const uint64_t v[] = {sizeof(sw__shm_hdr), sizeof(sw__kt_hdr),   sizeof(sw__kt_config),
                        sizeof(sw__rule),    sizeof(sw__kt_stripe),  sizeof(sw__kt_totals),
                        sizeof(sw__kt_w),    SW__KT_WAYS,          SW__KT_LAYOUT_VERSION,
                        SW_CACHE_LINE};
  return sw__fnv(v, sizeof v, SW__FNV_BASIS);
}

static uint64_t sw__kt_body_size(const void *config) {
  const sw__kt_config *c = config;
  uint32_t nb, nl, kind;
  if (c->capacity == 0 || c->capacity > (1u << 28) || c->key_bytes < 16 ||
      c->key_bytes > SW__KT_MAX_KEY || c->windows == 0 || c->windows > SW__KT_MAX_WINDOWS ||
      c->interval_ms <= 0 || c->interval_ms % c->windows != 0 ||
      sw__kt_rule_check(&c->rule, c->interval_ms, &kind) < 0)
    return 0;
  return sw__kt_size(c, &nb, &nl);
}

static int sw__kt_matches(const void *have_, const void *want_, const char *name) {
  const sw__kt_config *have = have_, *want = want_;
  if (have->capacity != want->capacity || have->key_bytes != want->key_bytes ||
      have->windows != want->windows || have->interval_ms != want->interval_ms)
    return sw__fail(SW_EGEOMETRY, "keyed table %s holds %u keys of %u bytes over %u x %lld ms; "
                    "%u keys of %u bytes over %u x %lld ms were asked for", name, have->capacity,
                    have->key_bytes, have->windows, (long long)(have->interval_ms / have->windows),
                    want->capacity, want->key_bytes, want->windows,
                    (long long)(want->interval_ms / want->windows));
  uint32_t kh, kw;
  sw__kt_rule_check(&have->rule, have->interval_ms, &kh);
  sw__kt_rule_check(&want->rule, want->interval_ms, &kw);
  if (kh != kw)
    return sw__fail(SW_EGEOMETRY, "keyed table %s keeps %s state per key, the rule asked for "
                    "needs %s", name, kh == SW__KT_PACING ? "pacing" : kh ? "concurrency" : "window",
                    kw == SW__KT_PACING ? "pacing" : kw ? "concurrency" : "window");
  return SW_OK;
}

SW_API int sw_keyed_open(sw_keyed **out, const char *name, uint32_t capacity,
                         const sw_options *opts, uint32_t flags) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(name, "segment name");
  const bool readonly = flags & SW_SEGMENT_READONLY;
  const bool any = readonly || (flags & SW_SEGMENT_ATTACH); /* whatever its configuration */
  sw__kt_config c;
  int rc;
  if (!any && (rc = sw__kt_config_from(opts, capacity, &c)) < 0) return rc;
  sw_keyed *k = sw__calloc(1, sizeof *k);
  sw__shm *shm = sw__calloc(1, sizeof *shm);
  if (k == NULL || shm == NULL || (k->name = sw__strdup(name)) == NULL) {
    sw__free(shm);
    if (k) sw__free(k->name);
    sw__free(k);
    return sw__fail(SW_ENOMEM, "keyed table handle");
  }
  const sw__shm_kind kind = {SW__SHM_KEYED, "keyed table", sw__kt_fingerprint(),
                             sw__kt_init_shared, sw__kt_body_size, sw__kt_matches};
  rc = sw__shm_open(shm, name, flags, opts, &kind, any ? NULL : &c, sizeof c);
  if (rc == SW_OK &&
      (rc = sw__kt_bind(k, shm->body, shm->size - sw__shm_header(shm)->body_off)) < 0)
    sw__shm_abandon(shm, name);
  if (rc < 0) {
    sw__free(shm);
    sw__free(k->name);
    sw__free(k);
    return rc;
  }
  k->shm = shm;
  k->readonly = readonly;
  k->created = shm->created;
  *out = k;
  return SW_OK;
}

SW_API void sw_keyed_free(sw_keyed *k) {
  if (k == NULL) return;
  if (k->shm) {
    sw__shm_close(k->shm);
    sw__free(k->shm);
  } else {
    pthread_mutex_destroy(&k->hdr->rule_lock);
    for (uint32_t i = 0; i < k->nlocks; i++) pthread_mutex_destroy(&k->locks[i].m);
    if (k->heap) munmap(k->hdr, k->hdr->total_size);
    else sw__free(k->hdr);
  }
  sw__free(k->name);
  sw__free(k);
}

SW_API int sw_keyed_created(const sw_keyed *k) {
  return k ? k->created : sw__fail(SW_ENULL, "keyed table is NULL");
}

/* ------------------------------------------------------------------ rules */

SW_API int sw_keyed_set_rule(sw_keyed *k, const sw_options *opts) {
  SW__CHECK_NULL(k, "keyed table");
  SW__CHECK_WRITABLE(k);
  sw__rule r;
  uint32_t kind;
  int rc = sw__rule_from(opts, &r);
  if (rc < 0 || (rc = sw__kt_rule_check(&r, k->hdr->cfg.interval_ms, &kind)) < 0) return rc;
  if (kind != k->kind)
    return sw__fail(SW_EINVAL, "a keyed table keeps the kind of state it was created with "
                    "(%s): this rule needs %s", k->kind == SW__KT_PACING ? "pacing"
                    : k->kind ? "concurrency" : "windows", kind == SW__KT_PACING ? "pacing"
                    : kind ? "concurrency" : "windows");
  if ((rc = sw__robust_lock(&k->hdr->rule_lock, NULL, NULL, "rule", SW__WRITE_LOCK_MS)) < 0)
    return rc;
  sw__rule_box_store(&k->hdr->rule, &r);
  pthread_mutex_unlock(&k->hdr->rule_lock);
  return SW_OK;
}

SW_API int sw_keyed_get_rule(const sw_keyed *k, sw_options *opts) {
  SW__CHECK_NULL(k, "keyed table");
  SW__CHECK_NULL(opts, "options");
  sw__rule r;
  sw__rule_box_load(&k->hdr->rule, &r, true);
  sw__rule_to(&r, opts);
  return SW_OK;
}

SW_API int sw_keyed_set_dry_run(sw_keyed *k, int on) {
  SW__CHECK_NULL(k, "keyed table");
  SW__CHECK_WRITABLE(k);
  if (on != 0 && on != 1) return sw__fail(SW_EINVAL, "dry-run on=%d: want 0 or 1", on);
  int rc = sw__robust_lock(&k->hdr->rule_lock, NULL, NULL, "rule", SW__WRITE_LOCK_MS);
  if (rc < 0) return rc;
  sw__rule r;
  sw__rule_box_load(&k->hdr->rule, &r, true);
  r.dry_run = (int16_t)on;
  sw__rule_box_store(&k->hdr->rule, &r);
  pthread_mutex_unlock(&k->hdr->rule_lock);
  return SW_OK;
}
