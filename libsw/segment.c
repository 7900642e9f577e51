/* SPDX-License-Identifier: Apache-2.0 */
/* Shared segments of limiters: a registry (registry.h) in a shared file
 * (shm.h), mapped by every process that attaches (nginx workers, gunicorn
 * workers, C daemons) and updated by all of them. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "keyed/keyed.h"
#include "registry.h"
#include "shm.h"

/* The configuration a registry segment is created with (checksummed in
 * the header; its capacity first). */
typedef struct sw__seg_config {
  uint32_t capacity;
  uint32_t pad_;
  sw__node_geom geom;
  sw__rule rule;
} sw__seg_config;
_Static_assert(sizeof(sw__seg_config) <= SW__SHM_CONFIG_MAX, "fits the header");

struct sw_segment {
  sw__shm shm;
  sw_registry reg;
  char *path;
};

/* Changes whenever a block's layout changes: sizes and key offsets of every
 * structure that lives in a segment, and of the pthread mutex. */
static uint64_t sw__fingerprint(void) {
  const uint64_t v[] = {
      sizeof(sw__shm_hdr),          sizeof(sw__registry_hdr),   sizeof(sw__entry),
      sizeof(sw__limiter_hdr),      sizeof(sw__limiter_state),  sizeof(sw__node_hdr),
      sizeof(sw__metric_hdr),       sizeof(sw__la_block),       sizeof(sw__la_slot),
      sizeof(sw__mb_stripe),        sizeof(pthread_mutex_t),    sizeof(sw__rule),
      offsetof(sw__la_block, reset_lock), SW__LA_LAYOUT_VERSION, SW__REGISTRY_LAYOUT_VERSION,
      SW_CACHE_LINE,                sizeof(sw__seg_config)};
  return sw__fnv(v, sizeof v, SW__FNV_BASIS);
}

static uint64_t sw__seg_body_size(const void *config) {
  const sw__seg_config *c = config;
  if (c->capacity == 0 || c->capacity > (1u << 24) || sw__node_geom_validate(&c->geom) < 0)
    return 0;
  return sw__registry_size(c->capacity, &c->geom);
}

static int sw__seg_init(void *body, uint64_t size, const void *config) {
  const sw__seg_config *c = config;
  return sw__registry_init(body, c->capacity, &c->geom, &c->rule, true);
}

static int sw__seg_matches(const void *have_, const void *want_, const char *name) {
  const sw__seg_config *have = have_, *want = want_;
  if (have->capacity != want->capacity)
    return sw__fail(SW_EGEOMETRY, "segment %s holds %u names, %u were asked for", name,
                    have->capacity, want->capacity);
  if (memcmp(&have->geom, &want->geom, sizeof have->geom) != 0)
    return sw__fail(SW_EGEOMETRY, "segment %s has another window geometry (per-second "
                    "%d x %lld ms, per-minute %d x %lld ms, %u stripes)", name,
                    have->geom.second_n, (long long)have->geom.second_interval,
                    have->geom.minute_n, (long long)have->geom.minute_interval,
                    have->geom.stripes);
  return SW_OK;
}

static sw__shm_kind sw__seg_kind(void) {
  return (sw__shm_kind){SW__SHM_REGISTRY, "segment", sw__fingerprint(), sw__seg_init,
                        sw__seg_body_size, sw__seg_matches};
}

SW_API int sw_segment_open(sw_segment **out, const char *name, uint32_t capacity,
                           const sw_options *opts, uint32_t flags) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(name, "segment name");
  const bool readonly = flags & SW_SEGMENT_READONLY;
  const bool any = readonly || (flags & SW_SEGMENT_ATTACH); /* whatever its configuration */
  sw__seg_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.capacity = capacity;
  int rc;
  if (!any) {
    if (capacity == 0 || capacity > (1u << 24))
      return sw__fail(SW_ESIZE, "capacity=%u is outside 1..%u", capacity, 1u << 24);
    if ((rc = sw__node_geom_from(opts, &cfg.geom)) < 0 || (rc = sw__rule_from(opts, &cfg.rule)) < 0)
      return rc;
    if (sw__registry_size(capacity, &cfg.geom) == 0)
      return sw__fail(SW_EOVERFLOW, "capacity=%u limiters of %llu bytes need more than 1 TiB",
                      capacity, (unsigned long long)sw__limiter_size(&cfg.geom));
  }
  sw_segment *seg = sw__calloc(1, sizeof *seg);
  if (seg == NULL) return sw__fail(SW_ENOMEM, "segment");
  const sw__shm_kind kind = sw__seg_kind();
  rc = sw__shm_open(&seg->shm, name, flags, opts, &kind, any ? NULL : &cfg, sizeof cfg);
  if (rc == SW_OK) {
    seg->reg.shared = true;
    seg->reg.readonly = readonly;
    seg->reg.name = seg->path = sw__strdup(name);
    rc = seg->path == NULL ? sw__fail(SW_ENOMEM, "name")
                           : sw__registry_bind(&seg->reg, seg->shm.body,
                                               seg->shm.size - sw__shm_header(&seg->shm)->body_off);
    if (rc < 0) {
      sw__registry_unbind(&seg->reg);
      sw__shm_abandon(&seg->shm, name);
    }
  }
  if (rc < 0) {
    sw__free(seg->path);
    sw__free(seg);
    return rc;
  }
  *out = seg;
  return SW_OK;
}

SW_API void sw_segment_close(sw_segment *seg) {
  if (seg == NULL) return;
  sw__registry_unbind(&seg->reg);
  sw__shm_close(&seg->shm);
  sw__free(seg->path);
  sw__free(seg);
}

SW_API sw_registry *sw_segment_registry(sw_segment *seg) {
  if (seg == NULL) sw__fail(SW_ENULL, "segment is NULL");
  return seg ? &seg->reg : NULL;
}

SW_API const char *sw_segment_name(const sw_segment *seg) {
  if (seg == NULL) sw__fail(SW_ENULL, "segment is NULL");
  return seg ? seg->path : NULL;
}

SW_API int64_t sw_segment_size(const sw_segment *seg) {
  return seg ? (int64_t)seg->shm.size : sw__fail(SW_ENULL, "segment is NULL");
}

SW_API int sw_segment_created(const sw_segment *seg) {
  return seg ? seg->shm.created : sw__fail(SW_ENULL, "segment is NULL");
}

SW_API int sw_segment_probe(const char *name, sw_segment_info *out) {
  SW__CHECK_NULL(name, "segment name");
  SW__CHECK_NULL(out, "out");
  memset(out, 0, sizeof *out);
  sw__shm_hdr h;
  sw__shm_file f;
  int rc = sw__shm_peek(name, &h, &f);
  if (rc < 0) return rc;
  uint32_t capacity;
  memcpy(&capacity, h.config, sizeof capacity); /* every kind's configuration starts with it */
  out->kind = h.kind == SW__SHM_REGISTRY || h.kind == SW__SHM_KEYED || h.kind == SW__SHM_BREAKER
                  ? h.kind
                  : 0;
  out->ready = h.state == SW__SHM_READY;
  out->current = (h.kind == SW__SHM_REGISTRY && h.fingerprint == sw__fingerprint()) ||
                 (h.kind == SW__SHM_KEYED && h.fingerprint == sw__kt_fingerprint()) ||
                 (h.kind == SW__SHM_BREAKER && h.fingerprint == sw__brk_fingerprint());
  if (h.kind == SW__SHM_BREAKER) capacity = 0; /* its configuration is its rule */
  out->creator_pid = h.creator_pid;
  out->owner_uid = f.uid;
  out->capacity = out->ready ? capacity : 0;
  out->layout = h.fingerprint;
  out->size = (int64_t)f.size;
  out->created_unix_ms = h.created_unix_ms;
  out->allocated = (int64_t)f.allocated;
  out->fs_free = f.fs_free;
  out->fs_size = f.fs_size;
  return SW_OK;
}
