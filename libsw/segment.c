/* Shared segments: a registry of limiters in a file or POSIX shared memory
 * object, mapped by every process that attaches (nginx workers, gunicorn
 * workers, C daemons) and updated by all of them.
 *
 *   segment header (magic, layout fingerprint, size, configuration and its
 *   checksum, boot id, state) | registry block (registry.h)
 *
 * Creation and validation run under flock(LOCK_EX) on the file, which the
 * kernel releases if the process dies; the hot path never takes it. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"

#define SW__SEG_MAGIC UINT64_C(0x31544e454d474553) /* "SEGMENT1" little-endian */
#define SW__SEG_READY 0x52454459u                 /* "READY" */

typedef struct sw__seg_config {
  uint32_t capacity;
  uint32_t pad_;
  sw__node_geom geom;
  sw__rule rule;
} sw__seg_config;

typedef struct sw__seg_hdr {
  uint64_t magic;
  uint64_t fingerprint; /* layout of every block, as this libsw lays it out */
  uint64_t total_size;
  uint64_t registry_off;
  uint64_t config_sum;
  sw__seg_config config;
  char boot_id[40];
  int64_t created_unix_ms;
  uint32_t creator_pid;
  _Atomic uint32_t state; /* SW__SEG_READY once initialised */
} sw__seg_hdr;

struct sw_segment {
  void *map;
  uint64_t size;
  sw_registry reg;
  char *path;
};


/* Changes whenever a block's layout changes: sizes and key offsets of every
 * structure that lives in a segment, and of the pthread mutex. */
static uint64_t sw__fingerprint(void) {
  const uint64_t v[] = {
      sizeof(sw__seg_hdr),          sizeof(sw__registry_hdr),   sizeof(sw__entry),
      sizeof(sw__limiter_hdr),      sizeof(sw__limiter_state),  sizeof(sw__node_hdr),
      sizeof(sw__metric_hdr),       sizeof(sw__la_block),       sizeof(sw__la_slot),
      sizeof(sw__mb_stripe),        sizeof(pthread_mutex_t),    sizeof(sw__rule),
      offsetof(sw__la_block, reset_lock), SW__LA_LAYOUT_VERSION, SW__REGISTRY_LAYOUT_VERSION,
      SW_CACHE_LINE};
  return sw__fnv(v, sizeof v, SW__FNV_BASIS);
}

static void sw__boot_id(char out[40]) {
  memset(out, 0, 40);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f == NULL) return;
  if (fgets(out, 40, f) == NULL) out[0] = '\0';
  out[strcspn(out, "\n")] = '\0';
  fclose(f);
}

/* A name without '/' is a POSIX shared memory object; anything else a path. */
/* POSIX shm names are limited to SW_NAME_MAX bytes here; paths to PATH_MAX. */
static int sw__seg_check_name(const char *name) {
  size_t len = strlen(name);
  if (len == 0 || (strchr(name, '/') == NULL && len > SW_NAME_MAX) || len >= 4096)
    return sw__fail(SW_ERANGE, "segment name of %zu bytes: a shared memory name takes "
                    "1..%d bytes, a path 1..4095", len, SW_NAME_MAX);
  return SW_OK;
}

static int sw__seg_open_fd(const char *name, int oflag, mode_t mode) {
  if (strchr(name, '/') == NULL) {
    char shm[SW_NAME_MAX + 2];
    snprintf(shm, sizeof shm, "/%s", name);
    return shm_open(shm, oflag, mode);
  }
  return open(name, oflag | O_CLOEXEC, mode);
}

SW_API int sw_segment_unlink(const char *name) {
  SW__CHECK_NULL(name, "segment name");
  int rc = sw__seg_check_name(name);
  if (rc < 0) return rc;
  if (strchr(name, '/') == NULL) {
    char shm[SW_NAME_MAX + 2];
    snprintf(shm, sizeof shm, "/%s", name);
    rc = shm_unlink(shm);
  } else {
    rc = unlink(name);
  }
  if (rc < 0 && errno != ENOENT)
    return sw__fail(errno == EACCES || errno == EPERM ? SW_EPERM : SW_EIO,
                    "cannot remove segment %s: %s", name, strerror(errno));
  return SW_OK;
}

static int sw__seg_init(sw__seg_hdr *h, uint64_t size, const sw__seg_config *cfg) {
  memset(h, 0, size);
  h->fingerprint = sw__fingerprint();
  h->total_size = size;
  h->registry_off = sw__round_up(sizeof *h, SW_CACHE_LINE);
  h->config = *cfg;
  h->config_sum = sw__fnv(&h->config, sizeof h->config, SW__FNV_BASIS);
  sw__boot_id(h->boot_id);
  h->creator_pid = (uint32_t)getpid();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->created_unix_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  int rc = sw__registry_init((char *)h + h->registry_off, cfg->capacity, &cfg->geom, &cfg->rule,
                             true);
  if (rc < 0) return rc;
  h->magic = SW__SEG_MAGIC;
  atomic_store_explicit(&h->state, SW__SEG_READY, memory_order_release);
  return SW_OK;
}

/* Validate a mapped header against the file size and, unless any_geometry,
 * the configuration asked for. */
static int sw__seg_validate(const sw__seg_hdr *h, uint64_t size, const sw__seg_config *want,
                            bool any_geometry, const char *name) {
  if (size < sizeof *h)
    return sw__fail(SW_ECORRUPT, "segment %s is truncated: %llu bytes, a header needs %zu", name,
                    (unsigned long long)size, sizeof *h);
  if (h->magic != SW__SEG_MAGIC)
    return sw__fail(SW_EFOREIGN, "%s is not a libsw segment (magic 0x%016llx)", name,
                    (unsigned long long)h->magic);
  if (atomic_load(&h->state) != SW__SEG_READY)
    return sw__fail(SW_ECORRUPT, "segment %s was never fully initialised", name);
  if (h->fingerprint != sw__fingerprint())
    return sw__fail(SW_EVERSION, "segment %s was laid out by another libsw version "
                    "(layout 0x%016llx, this one 0x%016llx)", name,
                    (unsigned long long)h->fingerprint, (unsigned long long)sw__fingerprint());
  if (h->config_sum != sw__fnv(&h->config, sizeof h->config, SW__FNV_BASIS))
    return sw__fail(SW_ECORRUPT, "segment %s: configuration checksum mismatch", name);
  if (h->total_size != size || h->registry_off != sw__round_up(sizeof *h, SW_CACHE_LINE) ||
      h->total_size != h->registry_off + sw__registry_size(h->config.capacity, &h->config.geom))
    return sw__fail(SW_ECORRUPT, "segment %s: header says %llu bytes, the file has %llu", name,
                    (unsigned long long)h->total_size, (unsigned long long)size);
  if (!any_geometry) {
    const sw__seg_config *have = &h->config;
    if (have->capacity != want->capacity)
      return sw__fail(SW_EGEOMETRY, "segment %s holds %u names, %u were asked for", name,
                      have->capacity, want->capacity);
    if (memcmp(&have->geom, &want->geom, sizeof have->geom) != 0)
      return sw__fail(SW_EGEOMETRY, "segment %s has another window geometry (per-second "
                      "%d x %lld ms, per-minute %d x %lld ms, %u stripes)", name,
                      have->geom.second_n, (long long)have->geom.second_interval,
                      have->geom.minute_n, (long long)have->geom.minute_interval,
                      have->geom.stripes);
  }
  return SW_OK;
}

SW_API int sw_segment_open(sw_segment **out, const char *name, uint32_t capacity,
                           const sw_options *opts, uint32_t flags) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(name, "segment name");
  const bool readonly = flags & SW_SEGMENT_READONLY;
  int rc = sw__seg_check_name(name);
  if (rc < 0) return rc;
  if (flags & ~(SW_SEGMENT_CREATE | SW_SEGMENT_RESET | SW_SEGMENT_READONLY))
    return sw__fail(SW_EINVAL, "unknown segment flags 0x%x", flags);
  sw__seg_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.capacity = capacity;
  if (!readonly) {
    if (capacity == 0 || capacity > (1u << 24))
      return sw__fail(SW_ESIZE, "capacity=%u is outside 1..%u", capacity, 1u << 24);
    if ((rc = sw__node_geom_from(opts, &cfg.geom)) < 0 || (rc = sw__rule_from(opts, &cfg.rule)) < 0)
      return rc;
    if (sw__registry_size(capacity, &cfg.geom) == 0)
      return sw__fail(SW_EOVERFLOW, "capacity=%u limiters of %llu bytes need more than 1 TiB",
                      capacity, (unsigned long long)sw__limiter_size(&cfg.geom));
  }
  int64_t mode, uid, gid;
  sw_options_get(opts, SW_OPT_SEGMENT_MODE, &mode);
  sw_options_get(opts, SW_OPT_SEGMENT_UID, &uid);
  sw_options_get(opts, SW_OPT_SEGMENT_GID, &gid);
  if ((flags & SW_SEGMENT_RESET) && !readonly) {
    if ((rc = sw_segment_unlink(name)) < 0) return rc;
    flags |= SW_SEGMENT_CREATE;
  }

  int oflag = readonly ? O_RDONLY : O_RDWR | ((flags & SW_SEGMENT_CREATE) ? O_CREAT : 0);
  int fd = sw__seg_open_fd(name, oflag, (mode_t)mode);
  if (fd < 0) {
    int e = errno;
    return sw__fail(e == ENOENT ? SW_ENOTFOUND : e == EACCES || e == EPERM ? SW_EPERM : SW_EIO,
                    "cannot open segment %s: %s", name, strerror(e));
  }
  if (flock(fd, readonly ? LOCK_SH : LOCK_EX) < 0) {
    rc = sw__fail(SW_EIO, "cannot lock segment %s: %s", name, strerror(errno));
    close(fd);
    return rc;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    rc = sw__fail(SW_EIO, "cannot stat segment %s: %s", name, strerror(errno));
    close(fd);
    return rc;
  }
  uint64_t size = (uint64_t)st.st_size;
  bool fresh = size == 0 && !readonly && (flags & SW_SEGMENT_CREATE);
  if (!fresh && !readonly && (flags & SW_SEGMENT_CREATE) && size >= sizeof(sw__seg_hdr)) {
    /* A creator that died before finishing left it unready: start it again. */
    sw__seg_hdr probe;
    if (pread(fd, &probe, sizeof probe, 0) == (ssize_t)sizeof probe &&
        (probe.magic == 0 || probe.magic == SW__SEG_MAGIC) && probe.state != SW__SEG_READY)
      fresh = true;
  }
  if (fresh) {
    /* Owner and mode first: a failure leaves an empty file, not a zeroed one. */
    if ((uid >= 0 || gid >= 0) && fchown(fd, (uid_t)uid, (gid_t)gid) < 0) {
      rc = sw__fail(SW_EPERM, "cannot give segment %s to %lld:%lld: %s", name, (long long)uid,
                    (long long)gid, strerror(errno));
      close(fd);
      return rc;
    }
    if (fchmod(fd, (mode_t)mode) < 0) { /* the umask must not narrow what was asked for */
      rc = sw__fail(SW_EPERM, "cannot set mode %llo on segment %s: %s", (unsigned long long)mode,
                    name, strerror(errno));
      close(fd);
      return rc;
    }
    size = sw__round_up(sizeof(sw__seg_hdr), SW_CACHE_LINE) + sw__registry_size(capacity, &cfg.geom);
    if (ftruncate(fd, (off_t)size) < 0) {
      rc = sw__fail(SW_EIO, "cannot size segment %s to %llu bytes: %s", name,
                    (unsigned long long)size, strerror(errno));
      close(fd);
      return rc;
    }
  } else if (size < sizeof(sw__seg_hdr)) {
    close(fd);
    return sw__fail(SW_ECORRUPT, "segment %s is truncated: %llu bytes, a header needs %zu",
                    name, (unsigned long long)size, sizeof(sw__seg_hdr));
  }
  void *map = mmap(NULL, size, readonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    rc = sw__fail(SW_EIO, "cannot map segment %s: %s", name, strerror(errno));
    close(fd);
    return rc;
  }
  sw__seg_hdr *h = map;
  if (fresh) {
    rc = sw__seg_init(h, size, &cfg);
  } else {
    rc = sw__seg_validate(h, size, &cfg, readonly, name);
    char boot[40];
    sw__boot_id(boot);
    /* An unknown boot id (no /proc) never resets a segment in use. */
    if (rc == SW_OK && !readonly && boot[0] && strncmp(boot, h->boot_id, sizeof boot) != 0) {
      /* Written before a reboot: its monotonic times are meaningless now. */
      rc = sw__seg_init(h, size, &cfg);
    }
  }
  sw_segment *seg = NULL;
  if (rc == SW_OK && (seg = sw__calloc(1, sizeof *seg)) == NULL) rc = sw__fail(SW_ENOMEM, "segment");
  if (rc == SW_OK) {
    seg->map = map;
    seg->size = size;
    seg->reg.shared = true;
    seg->reg.readonly = readonly;
    rc = sw__registry_bind(&seg->reg, (char *)map + h->registry_off, size - h->registry_off);
    if (rc == SW_OK && (seg->path = sw__strdup(name)) == NULL) rc = sw__fail(SW_ENOMEM, "name");
  }
  flock(fd, LOCK_UN);
  close(fd); /* the mapping stays */
  if (rc < 0) {
    if (seg) sw__registry_unbind(&seg->reg);
    sw__free(seg ? seg->path : NULL);
    sw__free(seg);
    munmap(map, size);
    return rc;
  }
  *out = seg;
  return SW_OK;
}

SW_API void sw_segment_close(sw_segment *seg) {
  if (seg == NULL) return;
  sw__registry_unbind(&seg->reg);
  munmap(seg->map, seg->size);
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
  return seg ? (int64_t)seg->size : sw__fail(SW_ENULL, "segment is NULL");
}
