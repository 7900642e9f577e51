/* SPDX-License-Identifier: Apache-2.0 */
/* Shared files: the common part of every libsw shared segment (a registry
 * of limiters, a keyed table, a circuit breaker). One position-independent file, mapped by each
 * process that attaches:
 *
 *   header (magic, kind, layout fingerprint, size, the kind's configuration
 *   and its checksum, boot id, creator, state) | the kind's block
 *
 * Creation is exclusive (O_EXCL) and marks the file as libsw's before it
 * grows: magic and kind are written first, then the file gets its size with
 * every page allocated (fallocate: a full tmpfs is SW_ENOMEM at the open,
 * never a SIGBUS at a later first touch), the state becomes READY last. A
 * file that is not libsw's is never taken over; one whose creator died
 * (libsw's magic, not READY) is created again by an open with CREATE. Opens
 * run under flock on the file (bounded wait), which the kernel releases if
 * the process dies; the hot path never takes it. */
#ifndef SW_SHM_H
#define SW_SHM_H

#include "internal.h"

#define SW__SHM_MAGIC UINT64_C(0x31544e454d474553) /* "SEGMENT1" little-endian */
#define SW__SHM_READY 0x52454459u                 /* "READY" */
#define SW__SHM_CONFIG_MAX 256u
#define SW__SHM_LOCK_MS 2000 /* longest wait for another process's flock */

enum { SW__SHM_REGISTRY = 1, SW__SHM_KEYED = 2, SW__SHM_BREAKER = 3 };
/* A breaker's layout as this libsw lays it out (breaker.c; sw_segment_probe). */
uint64_t sw__brk_fingerprint(void);

typedef struct sw__shm_hdr {
  uint64_t magic;
  uint64_t fingerprint; /* the kind's layout, as this libsw lays it out */
  uint64_t total_size;
  uint64_t body_off;
  uint64_t config_sum; /* FNV-1a of config */
  unsigned char config[SW__SHM_CONFIG_MAX]; /* the kind's, its capacity first */
  char boot_id[40];
  int64_t created_unix_ms;
  uint32_t creator_pid;
  uint32_t kind;
  _Atomic uint32_t state; /* SW__SHM_READY once initialised */
} sw__shm_hdr;

/* What a kind of segment brings to sw__shm_open. */
typedef struct sw__shm_kind {
  uint32_t kind;
  const char *what; /* "segment", "keyed table": for messages */
  uint64_t fingerprint;
  /* Initialise the kind's block (zeroed, body_size bytes) from config. */
  int (*init)(void *body, uint64_t body_size, const void *config);
  /* The kind's block size for a configuration, 0 if it is not valid. */
  uint64_t (*body_size)(const void *config);
  /* SW_EGEOMETRY (with a message) unless the configuration found (have)
   * serves what was asked for (want). */
  int (*matches)(const void *have, const void *want, const char *name);
} sw__shm_kind;

/* An open shared file. */
typedef struct sw__shm {
  void *map;
  uint64_t size;
  void *body;      /* map + body_off */
  bool created;    /* this open created the segment (or created it again) */
  bool readonly;
} sw__shm;

/* Open (and with SW_SEGMENT_CREATE create) the segment name of kind k.
 * config (config_len <= SW__SHM_CONFIG_MAX bytes) is what the caller wants;
 * NULL with SW_SEGMENT_READONLY: any. opts: SW_OPT_SEGMENT_*. The errors of
 * sw_segment_open. */
int sw__shm_open(sw__shm *out, const char *name, uint32_t flags, const sw_options *opts,
                 const sw__shm_kind *k, const void *config, uint32_t config_len);
/* Unmap. */
void sw__shm_close(sw__shm *s);
/* Unmap, and remove the file if this open created it (a failed constructor
 * leaves nothing behind). */
void sw__shm_abandon(sw__shm *s, const char *name);
/* What a listing says of a segment's file besides its header. */
typedef struct sw__shm_file {
  uint64_t size, allocated; /* bytes: the file's size, and what its file system holds */
  int64_t fs_free, fs_size; /* its file system's free bytes (-1: unknown) and size */
  uint32_t uid;
} sw__shm_file;
/* The header of the segment at name, read (pread) without a lock, a
 * mapping or a write: SW_EFOREIGN if it is not a regular file with libsw's
 * magic; *file: the file's size, owner and file system. For a listing
 * (sw_segment_probe). */
int sw__shm_peek(const char *name, sw__shm_hdr *out, sw__shm_file *file);
/* The header of an open segment. */
static inline const sw__shm_hdr *sw__shm_header(const sw__shm *s) { return s->map; }

#endif /* SW_SHM_H */
