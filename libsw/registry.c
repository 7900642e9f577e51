/* SPDX-License-Identifier: Apache-2.0 */
/* Limiters by name with a fixed capacity (layout: registry.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

#define SW__REGISTRY_CHECK(r)                                                        \
  do {                                                                               \
    if (sw__unlikely((r) == NULL)) return sw__fail(SW_ENULL, "registry is NULL");    \
  } while (0)

static uint32_t sw__hash(const char *s) { /* FNV-1a, folded to 32 bits */
  uint64_t h = sw__fnv(s, strlen(s), SW__FNV_BASIS);
  return (uint32_t)(h ^ (h >> 32));
}

static uint32_t sw__index_size(uint32_t capacity) {
  uint32_t n = 2;
  while (n < 2 * capacity) n <<= 1;
  return n;
}

uint64_t sw__registry_size(uint32_t capacity, const sw__node_geom *g) {
  uint64_t hdr = sw__round_up(sizeof(sw__registry_hdr), SW_CACHE_LINE);
  uint64_t index = sw__round_up((uint64_t)sw__index_size(capacity) * sizeof(sw__entry),
                                SW_CACHE_LINE);
  uint64_t blocks, block = sw__limiter_size(g);
  if (__builtin_mul_overflow(block, (uint64_t)capacity, &blocks) || blocks > (UINT64_C(1) << 40))
    return 0;
  return hdr + index + blocks;
}

int sw__registry_init(void *mem, uint32_t capacity, const sw__node_geom *g, const sw__rule *r,
                      bool process_shared) {
  sw__registry_hdr *h = mem;
  int rc = sw__robust_init(&h->insert_lock, process_shared);
  if (rc < 0) return rc;
  h->capacity = capacity;
  h->index_size = sw__index_size(capacity);
  h->index_off = sw__round_up(sizeof(sw__registry_hdr), SW_CACHE_LINE);
  h->blocks_off = h->index_off + sw__round_up((uint64_t)h->index_size * sizeof(sw__entry),
                                              SW_CACHE_LINE);
  h->block_size = sw__limiter_size(g);
  h->total_size = sw__registry_size(capacity, g);
  h->geom = *g;
  h->rule[0] = *r;
  h->layout_version = SW__REGISTRY_LAYOUT_VERSION;
  h->magic = SW__REGISTRY_MAGIC;
  return SW_OK;
}

/* Where a registry is, for messages about what is found damaged in it. */
static const char *sw__where(const sw_registry *r) { return r->name ? r->name : "(heap)"; }

/* SW_ECORRUPT unless r is a rule sw__rule_from makes (read from a segment:
 * every value in range, the derived ones as computed), naming what. */
static int sw__rule_sane(const sw_registry *reg, const sw__rule *r, const char *what,
                         uint32_t i) {
  sw_options *o = NULL;
  sw__rule again;
  int rc = sw_options_create(&o);
  if (rc < 0) return rc;
  sw__rule_to(r, o);
  rc = sw__rule_from(o, &again);
  sw_options_free(o);
  if (rc < 0 || memcmp(&again, r, sizeof again) != 0)
    return sw__fail(SW_ECORRUPT, "segment %s: the rule of %s %u is damaged (grade %d, "
                    "behaviour %d, threshold %g)", sw__where(reg), what, i, r->grade,
                    r->behavior, r->threshold);
  return SW_OK;
}

int sw__registry_bind(sw_registry *r, void *mem, uint64_t size) {
  sw__registry_hdr *h = mem;
  if (h->magic != SW__REGISTRY_MAGIC)
    return sw__fail(SW_ECORRUPT, "registry header has magic 0x%08x", h->magic);
  if (h->layout_version != SW__REGISTRY_LAYOUT_VERSION)
    return sw__fail(SW_EVERSION, "registry layout version %u, this libsw has %u",
                    h->layout_version, SW__REGISTRY_LAYOUT_VERSION);
  if (sw__node_geom_validate(&h->geom) < 0)
    return sw__fail(SW_ECORRUPT, "registry geometry is invalid: %s", sw_last_error());
  if (h->capacity == 0 || h->capacity > (1u << 24) || h->index_size != sw__index_size(h->capacity) ||
      h->block_size != sw__limiter_size(&h->geom) ||
      h->total_size != sw__registry_size(h->capacity, &h->geom) || h->total_size > size ||
      h->index_off != sw__round_up(sizeof(sw__registry_hdr), SW_CACHE_LINE) ||
      h->blocks_off != h->total_size - (uint64_t)h->capacity * h->block_size ||
      atomic_load(&h->count) > h->capacity)
    return sw__fail(SW_ECORRUPT, "registry header describes a layout that does not fit "
                    "(capacity %u, %llu of %llu bytes)", h->capacity,
                    (unsigned long long)h->total_size, (unsigned long long)size);
  int rc = sw__rule_sane(r, &h->rule[atomic_load(&h->rule_idx) & 1], "the registry", 0);
  if (rc < 0) return rc;
  r->hdr = h;
  r->index = (sw__entry *)((char *)mem + h->index_off);
  r->blocks = (unsigned char *)mem + h->blocks_off;
  r->handles = sw__calloc(h->capacity, sizeof *r->handles);
  return r->handles ? SW_OK : sw__fail(SW_ENOMEM, "registry handles");
}

void sw__registry_unbind(sw_registry *r) {
  for (uint32_t i = 0; r->handles && i < r->hdr->capacity; i++) {
    if (r->handles[i]) sw__limiter_release(r->handles[i]);
    sw__free(r->handles[i]);
  }
  sw__free(r->handles);
  r->handles = NULL;
}

SW_API int sw_registry_create(sw_registry **out, uint32_t capacity, const sw_options *opts) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  if (capacity == 0 || capacity > (1u << 24))
    return sw__fail(SW_ESIZE, "capacity=%u is outside 1..%u", capacity, 1u << 24);
  sw__node_geom g;
  sw__rule rule;
  int rc = sw__node_geom_from(opts, &g);
  if (rc < 0 || (rc = sw__rule_from(opts, &rule)) < 0) return rc;
  uint64_t size = sw__registry_size(capacity, &g);
  if (size == 0)
    return sw__fail(SW_EOVERFLOW, "capacity=%u limiters of %llu bytes need more than 1 TiB",
                    capacity, (unsigned long long)sw__limiter_size(&g));
  sw_registry *r;
  void *mem;
  if ((rc = sw__alloc_pair((void **)&r, sizeof *r, (void **)&mem, size, "registry")) < 0) return rc;
  if ((rc = sw__registry_init(mem, capacity, &g, &rule, false)) < 0 ||
      (rc = sw__registry_bind(r, mem, size)) < 0) {
    sw__free(r);
    sw__free(mem);
    return rc;
  }
  r->owns_block = true;
  *out = r;
  return SW_OK;
}

SW_API void sw_registry_free(sw_registry *r) {
  if (r == NULL || r->shared) return; /* a segment's registry belongs to the segment */
  if (r->owns_block) {
    for (uint32_t i = 0; i < atomic_load(&r->hdr->count); i++)
      sw__limiter_fini(r->blocks + (uint64_t)i * r->hdr->block_size);
    pthread_mutex_destroy(&r->hdr->insert_lock);
  }
  sw__registry_unbind(r);
  if (r->owns_block) sw__free(r->hdr);
  sw__free(r);
}

static int sw__check_name(const char *name, size_t *len) {
  SW__CHECK_NULL(name, "name");
  *len = strlen(name);
  if (*len == 0 || *len > SW_NAME_MAX)
    return sw__fail(SW_ERANGE, "name of %zu bytes is outside 1..%d", *len, SW_NAME_MAX);
  return SW_OK;
}

/* The handle of block i, bound on first use. */
static sw_limiter *sw__handle(sw_registry *r, uint32_t i) {
  sw_limiter *l = atomic_load_explicit(&r->handles[i], memory_order_acquire);
  if (l) return l;
  sw_limiter *mine = sw__malloc(sizeof *mine);
  if (mine == NULL) {
    sw__fail(SW_ENOMEM, "limiter handle");
    return NULL;
  }
  void *mem = r->blocks + (uint64_t)i * r->hdr->block_size;
  sw__rule rule;
  int rc = sw__limiter_check(mem, &r->hdr->geom);
  if (rc < 0)
    rc = sw__fail(rc, "segment %s, limiter %u: %s", sw__where(r), i, sw_last_error());
  if (rc == SW_OK) {
    sw__rule_box_load(&((sw__limiter_hdr *)mem)->rule, &rule, true);
    rc = sw__rule_sane(r, &rule, "limiter", i);
  }
  if (rc < 0 || sw__limiter_bind(mine, mem) < 0) {
    sw__free(mine);
    return NULL;
  }
  if (r->readonly) sw__limiter_set_readonly(mine);
  mine->borrowed = true;
  if (atomic_compare_exchange_strong(&r->handles[i], &l, mine)) return mine;
  sw__free(mine); /* another thread bound it first */
  return l;
}

/* Probe for name: the READY entry, or NULL; *slot gets the first EMPTY slot. */
static sw__entry *sw__probe(sw_registry *r, const char *name, uint32_t hash, uint32_t *empty,
                            bool *busy) {
  const uint32_t mask = r->hdr->index_size - 1;
  *busy = false;
  for (uint32_t i = hash & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
    sw__entry *e = &r->index[i];
    uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
    if (st == SW__ENTRY_EMPTY) {
      *empty = i;
      return NULL;
    }
    if ((st != SW__ENTRY_BUSY && st != SW__ENTRY_READY) || e->block >= r->hdr->capacity ||
        memchr(e->name, 0, sizeof e->name) == NULL)
      continue; /* a corrupt entry (shared segment): never matches */
    if (e->hash == hash && strcmp(e->name, name) == 0) {
      if (st == SW__ENTRY_READY) return e;
      *busy = true; /* being inserted (or its inserter died): take the lock */
    }
  }
  *empty = UINT32_MAX; /* no empty slot: only possible in a corrupt index */
  return NULL;
}


SW_API int sw_registry_find(sw_registry *r, const char *name, sw_limiter **out) {
  SW__REGISTRY_CHECK(r);
  SW__CHECK_NULL(out, "out");
  size_t len;
  int rc = sw__check_name(name, &len);
  if (rc < 0) return rc;
  uint32_t empty;
  bool busy;
  sw__entry *e = sw__probe(r, name, sw__hash(name), &empty, &busy);
  if (e == NULL) return 0;
  return (*out = sw__handle(r, e->block)) ? 1 : sw__last_code();
}

/* The rule new limiters start with (read under the insert lock). */
static const sw__rule *sw__registry_rule(const sw_registry *r) {
  return &r->hdr->rule[atomic_load(&r->hdr->rule_idx) & 1];
}

/* Finish an entry left BUSY by an inserter that died or failed (under the
 * insert lock): its block is counted, initialised again, and published. An
 * inserter publishes BUSY before it raises count, so count may still be
 * short of the block: raising it here keeps the next insert off that block. */
static int sw__finish(sw_registry *r, uint32_t i, const sw__rule *rule) {
  sw__entry *e = &r->index[i];
  if (atomic_load(&r->hdr->count) <= e->block) atomic_store(&r->hdr->count, e->block + 1);
  void *mem = r->blocks + (uint64_t)e->block * r->hdr->block_size;
  memset(mem, 0, r->hdr->block_size);
  int rc = sw__limiter_init(mem, &r->hdr->geom, rule, r->shared);
  if (rc < 0) return rc;
  SW__KILL_POINT("registry-ready");
  ((sw__limiter_hdr *)mem)->registry_entry = i + 1;
  atomic_store_explicit(&e->state, SW__ENTRY_READY, memory_order_release);
  return SW_OK;
}

/* Robust-lock repair: finish every entry a dead inserter left BUSY. */
static void sw__recover(void *arg) {
  sw_registry *r = arg;
  for (uint32_t i = 0; i < r->hdr->index_size; i++) {
    sw__entry *e = &r->index[i];
    if (atomic_load(&e->state) == SW__ENTRY_BUSY && e->block < r->hdr->capacity)
      sw__finish(r, i, sw__registry_rule(r));
  }
}

/* The BUSY entry of name (sw__probe said there is one), or NULL. */
static sw__entry *sw__busy_entry(sw_registry *r, const char *name, uint32_t hash) {
  const uint32_t mask = r->hdr->index_size - 1;
  for (uint32_t i = hash & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
    sw__entry *e = &r->index[i];
    if (atomic_load(&e->state) == SW__ENTRY_BUSY && e->block < r->hdr->capacity &&
        e->hash == hash && strcmp(e->name, name) == 0)
      return e;
  }
  return NULL;
}

static int sw__lock(pthread_mutex_t *m, sw_registry *r) {
  return sw__robust_lock(m, sw__recover, r, "registry", SW__WRITE_LOCK_MS);
}

SW_API int sw_registry_get(sw_registry *r, const char *name, sw_limiter **out) {
  return sw_registry_get_ex(r, name, NULL, out);
}

SW_API int sw_registry_get_ex(sw_registry *r, const char *name, const sw_options *opts,
                              sw_limiter **out) {
  int rc = sw_registry_find(r, name, out);
  if (rc != 0) return rc < 0 ? rc : SW_OK;
  if (r->readonly)
    return sw__fail(SW_EPERM, "%s is not in the registry, which is attached read-only", name);
  sw__rule custom;
  if (opts && (rc = sw__rule_from(opts, &custom)) < 0) return rc;
  if ((rc = sw__lock(&r->hdr->insert_lock, r)) < 0) return rc;
  const sw__rule *rule = opts ? &custom : sw__registry_rule(r);
  uint32_t hash = sw__hash(name), empty;
  bool busy;
  sw__entry *e = sw__probe(r, name, hash, &empty, &busy); /* again, under the lock */
  if (e == NULL && busy) { /* left BUSY by an inserter that failed: finish it */
    e = sw__busy_entry(r, name, hash);
    rc = e == NULL ? sw__fail(SW_ECORRUPT, "segment %s: the registry entry of %s being "
                              "inserted is no longer there (damaged)", sw__where(r), name)
                   : sw__finish(r, (uint32_t)(e - r->index), rule);
    if (rc < 0) e = NULL;
  } else if (e == NULL) {
    uint32_t block = atomic_load(&r->hdr->count);
    if (empty == UINT32_MAX) {
      rc = sw__fail(SW_ECORRUPT, "segment %s: the registry index has no free slot for %u "
                    "names (damaged)", sw__where(r), block);
    } else if (block >= r->hdr->capacity) {
      rc = sw__fail(SW_EFULL, "registry is full: %u of %u names taken, %s not added", block,
                    r->hdr->capacity, name);
    } else {
      e = &r->index[empty];
      e->hash = hash;
      e->block = block;
      strcpy(e->name, name);
      atomic_store_explicit(&e->state, SW__ENTRY_BUSY, memory_order_release);
      SW__KILL_POINT("registry-busy");
      if ((rc = sw__finish(r, empty, rule)) < 0) e = NULL;
    }
  }
  pthread_mutex_unlock(&r->hdr->insert_lock);
  if (e == NULL) return rc;
  return (*out = sw__handle(r, e->block)) ? SW_OK : sw__last_code();
}

SW_API int sw_registry_set_rule(sw_registry *r, const sw_options *opts) {
  SW__REGISTRY_CHECK(r);
  SW__CHECK_WRITABLE(r);
  sw__rule rule;
  int rc = sw__rule_from(opts, &rule);
  if (rc < 0 || (rc = sw__lock(&r->hdr->insert_lock, r)) < 0) return rc;
  uint32_t idx = atomic_load(&r->hdr->rule_idx) + 1; /* a writer killed here leaves */
  r->hdr->rule[idx & 1] = rule;                       /* the published copy intact */
  atomic_store(&r->hdr->rule_idx, idx);
  uint32_t count = atomic_load(&r->hdr->count);
  pthread_mutex_unlock(&r->hdr->insert_lock);
  for (uint32_t i = 0; i < count && rc == SW_OK; i++) {
    sw_limiter *l = sw__handle(r, i);
    rc = l ? sw_limiter_set_rule(l, opts) : sw__last_code();
  }
  return rc;
}

SW_API uint32_t sw_registry_capacity(const sw_registry *r) {
  if (r == NULL) sw__fail(SW_ENULL, "registry is NULL");
  return r ? r->hdr->capacity : 0;
}

SW_API uint32_t sw_registry_count(const sw_registry *r) {
  if (r == NULL) sw__fail(SW_ENULL, "registry is NULL");
  return r ? atomic_load(&r->hdr->count) : 0;
}

SW_API int sw_registry_at(sw_registry *r, uint32_t i, sw_limiter **out, const char **name) {
  SW__REGISTRY_CHECK(r);
  if (i >= atomic_load(&r->hdr->count))
    return sw__fail(SW_ERANGE, "index %u, registry holds %u", i, atomic_load(&r->hdr->count));
  /* The block says where its entry is; a block that does not (corrupt, or
   * not yet ready) is looked for the slow way. */
  uint32_t hint = ((const sw__limiter_hdr *)(r->blocks + (uint64_t)i * r->hdr->block_size))
                      ->registry_entry;
  uint32_t first = hint >= 1 && hint <= r->hdr->index_size ? hint - 1 : 0;
  for (uint32_t j = 0; j < r->hdr->index_size; j++) {
    sw__entry *e = &r->index[(first + j) % r->hdr->index_size];
    if (atomic_load_explicit(&e->state, memory_order_acquire) == SW__ENTRY_READY &&
        e->block == i) {
      if (memchr(e->name, 0, sizeof e->name) == NULL)
        return sw__fail(SW_ECORRUPT, "entry %u of the registry has no terminated name", i);
      if (name) *name = e->name;
      if (out && (*out = sw__handle(r, i)) == NULL) return sw__last_code();
      return SW_OK;
    }
  }
  return sw__fail(SW_ENOTFOUND, "limiter %u is not ready", i);
}
