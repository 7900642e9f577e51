/* SPDX-License-Identifier: Apache-2.0 */
/* Shared files: create exclusively, refuse what is not libsw's, lock with a
 * bounded wait, validate, map (layout and protocol: shm.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define SW__SHM_FLAGS \
  (SW_SEGMENT_CREATE | SW_SEGMENT_RESET | SW_SEGMENT_READONLY | SW_SEGMENT_FOLLOW | \
   SW_SEGMENT_ATTACH)

static uint64_t sw__shm_hdr_size(void) { return sw__round_up(sizeof(sw__shm_hdr), SW_CACHE_LINE); }

/* ------------------------------------------------------------------ names */

/* A name without '/' is a POSIX shared memory object (in /dev/shm), limited
 * to SW_NAME_MAX bytes; anything else is a path. */
static int sw__shm_check_name(const char *name) {
  size_t len = strlen(name);
  bool path = strchr(name, '/') != NULL;
  if (len == 0 || (!path && len > SW_NAME_MAX) || len >= 4096)
    return sw__fail(SW_ERANGE, "segment name of %zu bytes: a shared memory name takes "
                    "1..%d bytes, a path 1..4095", len, SW_NAME_MAX);
  if (!path && (strcmp(name, ".") == 0 || strcmp(name, "..") == 0))
    return sw__fail(SW_ERANGE, "segment name \"%s\" is not a shared memory name: give a path "
                    "for a file elsewhere", name);
  return SW_OK;
}

/* Where the segment's file is: the path, or /dev/shm/name. */
static void sw__shm_path(const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, strchr(name, '/') ? "%s" : "/dev/shm/%s", name);
}

static const char *sw__file_type(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link"
       : "not a regular file";
}

SW_API int sw_segment_unlink(const char *name) {
  SW__CHECK_NULL(name, "segment name");
  int rc = sw__shm_check_name(name);
  if (rc < 0) return rc;
  char path[4096 + 16];
  sw__shm_path(name, path, sizeof path);
  struct stat st;
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    return sw__fail(SW_EFOREIGN, "%s is %s, not a segment: not removed", path,
                    sw__file_type(st.st_mode));
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

/* Open without blocking (a FIFO would) and, unless follow, without following
 * a symbolic link; the type is checked by the caller before anything else. */
static int sw__shm_fd(const char *name, int oflag, mode_t mode, bool follow) {
  oflag |= O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
  if (strchr(name, '/') == NULL) {
    char shm[SW_NAME_MAX + 2];
    snprintf(shm, sizeof shm, "/%s", name);
    return shm_open(shm, oflag, mode);
  }
  return open(name, oflag, mode);
}

static int sw__shm_open_error(const char *name, int e) {
  if (e == ELOOP)
    return sw__fail(SW_EPERM, "segment %s is a symbolic link: libsw follows links only with "
                    "SW_SEGMENT_FOLLOW", name);
  return sw__fail(e == ENOENT ? SW_ENOTFOUND : e == EACCES || e == EPERM ? SW_EPERM : SW_EIO,
                  "cannot open segment %s: %s", name, strerror(e));
}

/* ------------------------------------------------------------------- lock */

/* The pid holding a flock on the file of st (from /proc/locks), or 0. */
static long sw__flock_holder(const struct stat *st) {
  FILE *f = fopen("/proc/locks", "re");
  if (f == NULL) return 0;
  char line[256];
  long pid = 0;
  while (pid == 0 && fgets(line, sizeof line, f)) {
    char type[16];
    long p;
    unsigned maj, min;
    unsigned long ino;
    if (strstr(line, "->") != NULL) continue; /* a waiter, not a holder */
    if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", type, &p, &maj, &min, &ino) == 5 &&
        strcmp(type, "FLOCK") == 0 && maj == major(st->st_dev) && min == minor(st->st_dev) &&
        ino == (unsigned long)st->st_ino)
      pid = p;
  }
  fclose(f);
  return pid;
}

/* flock(op) with a bounded wait: SW_EBUSY naming the holder when another
 * process keeps the file locked longer than SW__SHM_LOCK_MS. */
static int sw__shm_lock(int fd, int op, const char *name, const struct stat *st) {
  for (int waited = 0;; waited++) {
    if (flock(fd, op | LOCK_NB) == 0) return SW_OK;
    if (errno != EWOULDBLOCK && errno != EINTR)
      return sw__fail(SW_EIO, "cannot lock segment %s: %s", name, strerror(errno));
    if (waited >= SW__SHM_LOCK_MS) break;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  long pid = sw__flock_holder(st);
  if (pid > 0)
    return sw__fail(SW_EBUSY, "segment %s is locked by process %ld (flock held for more than "
                    "%d ms)", name, pid, SW__SHM_LOCK_MS);
  return sw__fail(SW_EBUSY, "segment %s is locked by another process (flock held for more "
                  "than %d ms)", name, SW__SHM_LOCK_MS);
}

/* ------------------------------------------------------------- validation */

static void sw__boot_id(char out[40]) {
  memset(out, 0, 40);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f == NULL) return;
  if (fgets(out, 40, f) == NULL) out[0] = '\0';
  out[strcspn(out, "\n")] = '\0';
  fclose(f);
}

static const char *sw__kind_name(uint32_t kind) {
  return kind == SW__SHM_REGISTRY ? "registry of limiters"
       : kind == SW__SHM_KEYED    ? "keyed table"
       : kind == SW__SHM_BREAKER  ? "circuit breaker"
                                  : "segment of an unknown kind";
}

/* A READY header against the file size and, unless want is NULL, the
 * configuration asked for. */
static int sw__shm_validate(const sw__shm_hdr *h, uint64_t size, const sw__shm_kind *k,
                            const void *want, const char *name) {
  if (h->kind != k->kind)
    return sw__fail(SW_ETYPE, "segment %s holds a %s, not a %s", name, sw__kind_name(h->kind),
                    sw__kind_name(k->kind));
  if (h->fingerprint != k->fingerprint)
    return sw__fail(SW_EVERSION, "segment %s was laid out by another libsw version "
                    "(layout 0x%016llx, this one 0x%016llx)", name,
                    (unsigned long long)h->fingerprint, (unsigned long long)k->fingerprint);
  if (h->config_sum != sw__fnv(h->config, sizeof h->config, SW__FNV_BASIS))
    return sw__fail(SW_ECORRUPT, "segment %s: configuration checksum mismatch", name);
  uint64_t body = k->body_size(h->config);
  if (h->total_size != size || h->body_off != sw__shm_hdr_size() || body == 0 ||
      h->total_size != h->body_off + body)
    return sw__fail(SW_ECORRUPT, "segment %s: header says %llu bytes, the file has %llu", name,
                    (unsigned long long)h->total_size, (unsigned long long)size);
  return want ? k->matches(h->config, want, name) : SW_OK;
}

/* ------------------------------------------------------------ reservation */

/* fallocate's unit, and the least it shrinks to while signals interrupt it
 * (a chunk interrupted is given back whole and done again) */
#define SW__SHM_RESERVE_CHUNK (8u << 20)
#define SW__SHM_RESERVE_MIN (64u << 10)
#define SW__SHM_EINTR_MAX 1000 /* interruptions in a row, then an error */

/* n bytes for a person: "812 bytes", "5.9 MiB". */
static const char *sw__human(char buf[32], uint64_t n) {
  if (n < 1024) snprintf(buf, 32, "%llu bytes", (unsigned long long)n);
  else if (n < (1u << 20)) snprintf(buf, 32, "%.1f KiB", (double)n / 1024);
  else if (n < (1ull << 30)) snprintf(buf, 32, "%.1f MiB", (double)n / (1 << 20));
  else snprintf(buf, 32, "%.1f GiB", (double)n / (1 << 30));
  return buf;
}

/* SW_ENOMEM for a segment of size bytes that its file system cannot hold:
 * the size, the free space, and the setting to change. why: the kernel's
 * answer, or NULL (the free space said so before anything was asked). */
static int sw__shm_no_room(int fd, const char *name, const sw__shm_kind *k, uint64_t size,
                           const char *why) {
  struct statvfs vfs;
  uint64_t avail = 0, total = 0;
  if (fstatvfs(fd, &vfs) == 0) {
    avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
  }
  /* what the file system would need: what others use now, and this segment */
  uint64_t need_mib = (total - (avail < total ? avail : total) + size + (1u << 20) - 1) >> 20;
  char fs[4096 + 16], hint[300], hs[32], ha[32], ht[32];
  if (strchr(name, '/') == NULL) {
    snprintf(fs, sizeof fs, "/dev/shm");
    snprintf(hint, sizeof hint, "give /dev/shm at least %llu MiB (docker run --shm-size=%llum; "
             "Kubernetes: an emptyDir with medium: Memory, sizeLimit: %lluMi, mounted at "
             "/dev/shm)", (unsigned long long)need_mib, (unsigned long long)need_mib,
             (unsigned long long)need_mib);
  } else {
    const char *slash = strrchr(name, '/');
    snprintf(fs, sizeof fs, "the file system of %.*s", (int)(slash == name ? 1 : slash - name),
             name);
    snprintf(hint, sizeof hint, "give it at least %llu MiB (a tmpfs: its size= mount option)",
             (unsigned long long)need_mib);
  }
  return sw__fail(SW_ENOMEM, "%s %s needs %llu bytes (%s); %s has %s free of %s: %s%s%s%s%s",
                  k->what, name, (unsigned long long)size, sw__human(hs, size), fs,
                  sw__human(ha, avail), sw__human(ht, total), hint,
                  k->kind == SW__SHM_BREAKER ? "" : " or create it with a smaller capacity",
                  why ? " (" : "", why ? why : "", why ? ")" : "");
}

/* A zero written into every page of [off, off + len) (the file grows to
 * off + len): what allocates the pages where fallocate cannot. 0 or errno. */
static int sw__shm_write_zeros(int fd, uint64_t off, uint64_t len) {
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), end = off + len;
  for (uint64_t p = off - off % page; p < end; p += page) {
    uint64_t last = (p + page < end ? p + page : end) - 1;
    if (last < off) continue;
    if (pwrite(fd, "", 1, (off_t)last) != 1) return errno ? errno : EIO;
  }
  return 0;
}

/* Give the file size bytes, every page of them allocated now, so that no
 * page is allocated at a first touch later, where a full file system is a
 * SIGBUS. fallocate, a chunk at a time; a signal (EINTR: tmpfs gives the
 * interrupted chunk back) halves the chunk, down to 64 KiB, so that a
 * profiler's signals slow the reservation down but do not stop it; 1,000
 * interruptions in a row are an error. A file system that cannot allocate
 * ahead (fallocate: EOPNOTSUPP — ramfs, some FUSE and NFS mounts) gets a
 * zero written into each page instead, which allocates it the same way.
 * On failure the file keeps its header (libsw's mark) and nothing else:
 * what was reserved is given back. */
static int sw__shm_reserve(int fd, const char *name, const sw__shm_kind *k, uint64_t size,
                           uint64_t keep) {
  bool emulate = false;
  uint64_t chunk = SW__SHM_RESERVE_CHUNK;
  int e = 0, interrupted = 0;
  for (uint64_t off = 0; off < size;) {
    uint64_t len = size - off < chunk ? size - off : chunk;
    errno = 0;
    e = emulate ? sw__shm_write_zeros(fd, off, len)
                : fallocate(fd, 0, (off_t)off, (off_t)len) == 0 ? 0 : errno;
    if (e == EINTR && ++interrupted < SW__SHM_EINTR_MAX) {
      if (chunk > SW__SHM_RESERVE_MIN) chunk /= 2;
      continue;
    }
    if (!emulate && (e == EOPNOTSUPP || e == ENOSYS)) {
      emulate = true;
      continue;
    }
    if (e != 0) break;
    interrupted = 0;
    off += len;
    SW__KILL_POINT("segment-reserving");
  }
  if (e == 0) return SW_OK;
  int give_back = ftruncate(fd, (off_t)keep); /* the pages reserved so far */
  (void)give_back;
  if (e == ENOSPC || e == ENOMEM || e == EDQUOT) {
    char why[128];
    snprintf(why, sizeof why, "%s: %s", emulate ? "writing its pages" : "fallocate", strerror(e));
    return sw__shm_no_room(fd, name, k, size, why);
  }
  return sw__fail(SW_EIO, "cannot reserve the %llu bytes of %s %s: %s%s",
                  (unsigned long long)size, k->what, name, strerror(e),
                  e == EINTR ? " (interrupted by signals 1000 times in a row)" : "");
}

/* -------------------------------------------------------------- creation */

/* Make the (locked) file a new segment: empty it, mark it libsw's (magic,
 * kind, not READY), size it with its pages reserved, initialise the kind's
 * block, then READY. A process killed at any point leaves a file that the
 * next CREATE takes over. */
static int sw__shm_create(int fd, sw__shm *s, const char *name, const sw__shm_kind *k,
                          const void *config, uint32_t config_len, uint64_t size, mode_t mode,
                          int64_t uid, int64_t gid) {
  if (ftruncate(fd, 0) < 0) /* a file taken over: its old pages go */
    return sw__fail(SW_EIO, "cannot empty segment %s: %s", name, strerror(errno));
  /* owner and mode first: a failure leaves an empty file, not a filled one */
  if ((uid >= 0 || gid >= 0) && fchown(fd, (uid_t)uid, (gid_t)gid) < 0)
    return sw__fail(SW_EPERM, "cannot give segment %s to %lld:%lld: %s", name, (long long)uid,
                    (long long)gid, strerror(errno));
  if (fchmod(fd, mode) < 0) /* the umask must not narrow what was asked for */
    return sw__fail(SW_EPERM, "cannot set mode %llo on segment %s: %s", (unsigned long long)mode,
                    name, strerror(errno));
  /* said before anything is written (the reservation below is the proof);
   * a file system without a size (ramfs: 0 blocks) is not judged by it */
  struct statvfs vfs;
  if (fstatvfs(fd, &vfs) == 0 && vfs.f_blocks > 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < size)
    return sw__shm_no_room(fd, name, k, size, NULL);
  sw__shm_hdr h;
  memset(&h, 0, sizeof h);
  h.magic = SW__SHM_MAGIC;
  h.kind = k->kind;
  h.fingerprint = k->fingerprint;
  h.total_size = size;
  h.body_off = sw__shm_hdr_size();
  memcpy(h.config, config, config_len);
  h.config_sum = sw__fnv(h.config, sizeof h.config, SW__FNV_BASIS);
  sw__boot_id(h.boot_id);
  h.creator_pid = (uint32_t)getpid();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h.created_unix_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
    return sw__fail(SW_EIO, "cannot write segment %s: %s", name, strerror(errno));
  SW__KILL_POINT("segment-marked");
  /* its size, every page allocated: a full file system is an error now */
  int rc = sw__shm_reserve(fd, name, k, size, sizeof h);
  if (rc < 0) return rc;
  SW__KILL_POINT("segment-sized");
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    return sw__fail(SW_EIO, "cannot map segment %s: %s", name, strerror(errno));
  rc = k->init((char *)map + h.body_off, size - h.body_off, config);
  if (rc < 0) {
    munmap(map, size);
    return rc;
  }
  SW__KILL_POINT("segment-init");
  atomic_store_explicit(&((sw__shm_hdr *)map)->state, SW__SHM_READY, memory_order_release);
  *s = (sw__shm){map, size, (char *)map + h.body_off, true, false};
  return SW_OK;
}

/* ------------------------------------------------------------------ open */

int sw__shm_open(sw__shm *out, const char *name, uint32_t flags, const sw_options *opts,
                 const sw__shm_kind *k, const void *config, uint32_t config_len) {
  memset(out, 0, sizeof *out);
  const bool readonly = flags & SW_SEGMENT_READONLY, follow = flags & SW_SEGMENT_FOLLOW;
  /* attach: read-write, to what exists whatever its configuration (config NULL) */
  const bool attach = !readonly && (flags & SW_SEGMENT_ATTACH);
  const bool create = !readonly && !attach && (flags & (SW_SEGMENT_CREATE | SW_SEGMENT_RESET));
  if (flags & ~SW__SHM_FLAGS) return sw__fail(SW_EINVAL, "unknown segment flags 0x%x", flags);
  int rc = sw__shm_check_name(name);
  if (rc < 0) return rc;
  int64_t mode, uid, gid, max_mb;
  sw_options_get(opts, SW_OPT_SEGMENT_MODE, &mode);
  sw_options_get(opts, SW_OPT_SEGMENT_UID, &uid);
  sw_options_get(opts, SW_OPT_SEGMENT_GID, &gid);
  sw_options_get(opts, SW_OPT_SEGMENT_MAX_MB, &max_mb);
  uint64_t size = 0;
  if (!readonly && !attach) {
    size = sw__shm_hdr_size() + k->body_size(config);
    if (size > (uint64_t)max_mb << 20)
      return sw__fail(SW_ESIZE, "a %s of %llu MiB is larger than SW_OPT_SEGMENT_MAX_MB=%lld: "
                      "raise it to create a segment this large", k->what,
                      (unsigned long long)((size + (1u << 20) - 1) >> 20), (long long)max_mb);
  }
  if ((flags & SW_SEGMENT_RESET) && !readonly && !attach && (rc = sw_segment_unlink(name)) < 0) return rc;

  /* Refuse what is not a regular file before opening it (a device's open can
   * have effects); the descriptor is checked again below. */
  char path[4096 + 16];
  sw__shm_path(name, path, sizeof path);
  struct stat st;
  if ((follow ? stat(path, &st) : lstat(path, &st)) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISLNK(st.st_mode)) return sw__shm_open_error(name, ELOOP);
    return sw__fail(SW_EFOREIGN, "segment %s is %s, not a regular file", name,
                    sw__file_type(st.st_mode));
  }
  int fd = -1;
  bool created = false;
  if (create) { /* exclusively: never adopt what someone else made first */
    fd = sw__shm_fd(name, O_RDWR | O_CREAT | O_EXCL, (mode_t)mode, follow);
    if (fd >= 0) created = true;
    else if (errno != EEXIST) return sw__shm_open_error(name, errno);
  }
  if (fd < 0 && (fd = sw__shm_fd(name, readonly ? O_RDONLY : O_RDWR, 0, follow)) < 0)
    return sw__shm_open_error(name, errno);
  if (created) SW__KILL_POINT("segment-created");
  if (fstat(fd, &st) < 0) {
    rc = sw__fail(SW_EIO, "cannot stat segment %s: %s", name, strerror(errno));
    goto fail;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = sw__fail(SW_EFOREIGN, "segment %s is %s, not a regular file", name,
                  sw__file_type(st.st_mode));
    goto fail;
  }
  if (create && !created && st.st_uid != geteuid() && (uid < 0 || st.st_uid != (uid_t)uid)) {
    rc = sw__fail(SW_EPERM, "segment %s belongs to uid %u, not to this process (uid %u) nor to "
                  "SW_OPT_SEGMENT_UID: not adopted", name, (unsigned)st.st_uid,
                  (unsigned)geteuid());
    goto fail;
  }
  if ((rc = sw__shm_lock(fd, readonly ? LOCK_SH : LOCK_EX, name, &st)) < 0) goto fail;
  if (fstat(fd, &st) < 0) {
    rc = sw__fail(SW_EIO, "cannot stat segment %s: %s", name, strerror(errno));
    goto fail;
  }
  uint64_t have = (uint64_t)st.st_size;
  /* Made by our O_EXCL, but another creator took the lock first, found the
   * file empty and made the segment: adopt it. Emptying it again would be a
   * SIGBUS in the other's mapping and its counts lost. */
  if (created && have > 0) created = false;
  sw__shm_hdr probe;
  memset(&probe, 0, sizeof probe);
  bool fresh = created;
  if (!fresh) {
    if (have == 0 && create) {
      fresh = true; /* empty and ours: nothing to lose (a creator killed right after O_EXCL) */
    } else if (have < sizeof probe) {
      rc = sw__fail(SW_ECORRUPT, "segment %s is truncated: %llu bytes, a header needs %zu",
                    name, (unsigned long long)have, sizeof probe);
      goto fail;
    } else if (pread(fd, &probe, sizeof probe, 0) != (ssize_t)sizeof probe) {
      rc = sw__fail(SW_EIO, "cannot read segment %s: %s", name, strerror(errno));
      goto fail;
    } else if (probe.magic != SW__SHM_MAGIC) {
      rc = sw__fail(SW_EFOREIGN, "%s is not a libsw segment (magic 0x%016llx)", name,
                    (unsigned long long)probe.magic);
      goto fail;
    } else if (probe.state != SW__SHM_READY) {
      if (!create) {
        rc = sw__fail(SW_ECORRUPT, "segment %s was never fully initialised (its creator, "
                      "process %u, was interrupted): open it with SW_SEGMENT_CREATE to create "
                      "it again", name, probe.creator_pid);
        goto fail;
      }
      if (probe.kind != k->kind) {
        rc = sw__fail(SW_ETYPE, "segment %s was being created as a %s, not a %s", name,
                      sw__kind_name(probe.kind), sw__kind_name(k->kind));
        goto fail;
      }
      fresh = true; /* libsw's own, interrupted: create it again */
    }
  }
  if (!fresh) {
    /* Map and validate what is there; a segment written before the last
     * reboot (its monotonic times are meaningless now) is created again. */
    void *map = mmap(NULL, have, readonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      rc = sw__fail(SW_EIO, "cannot map segment %s: %s", name, strerror(errno));
      goto fail;
    }
    rc = sw__shm_validate(map, have, k, readonly || attach ? NULL : config, name);
    char boot[40];
    sw__boot_id(boot);
    if (rc == SW_OK && !readonly && !attach && boot[0] && strncmp(boot, probe.boot_id, sizeof boot) != 0) {
      munmap(map, have);
      fresh = true;
    } else if (rc < 0) {
      munmap(map, have);
      goto fail;
    } else {
      *out = (sw__shm){map, have, (char *)map + probe.body_off, false, readonly};
    }
  }
  if (fresh && (rc = sw__shm_create(fd, out, name, k, config, config_len, size, (mode_t)mode,
                                    uid, gid)) < 0)
    goto fail;
  out->created = fresh;
  flock(fd, LOCK_UN);
  close(fd); /* the mapping stays */
  return SW_OK;
fail:
  if (created) sw_segment_unlink(name); /* ours, still locked: leave nothing behind */
  close(fd);
  memset(out, 0, sizeof *out);
  return rc;
}

int sw__shm_peek(const char *name, sw__shm_hdr *out, sw__shm_file *file) {
  int rc = sw__shm_check_name(name);
  if (rc < 0) return rc;
  char path[4096 + 16];
  sw__shm_path(name, path, sizeof path);
  struct stat st;
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return sw__fail(SW_EFOREIGN, "%s is %s, not a segment", path, sw__file_type(st.st_mode));
  int fd = sw__shm_fd(name, O_RDONLY, 0, false);
  if (fd < 0) return sw__shm_open_error(name, errno);
  ssize_t n = -1;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    rc = sw__fail(SW_EFOREIGN, "%s is not a regular file", path);
  } else if ((n = pread(fd, out, sizeof *out, 0)) != (ssize_t)sizeof *out) {
    rc = n < 0 ? sw__fail(SW_EIO, "cannot read %s: %s", path, strerror(errno))
               : sw__fail(SW_EFOREIGN, "%s is not a libsw segment (%lld bytes)", path,
                          (long long)st.st_size);
  } else if (out->magic != SW__SHM_MAGIC) {
    rc = sw__fail(SW_EFOREIGN, "%s is not a libsw segment (magic 0x%016llx)", path,
                  (unsigned long long)out->magic);
  }
  struct statvfs vfs;
  const bool fs = fstatvfs(fd, &vfs) == 0;
  *file = (sw__shm_file){(uint64_t)st.st_size, (uint64_t)st.st_blocks * 512,
                         fs ? (int64_t)((uint64_t)vfs.f_bavail * vfs.f_frsize) : -1,
                         fs ? (int64_t)((uint64_t)vfs.f_blocks * vfs.f_frsize) : -1,
                         (uint32_t)st.st_uid};
  close(fd);
  return rc;
}

void sw__shm_close(sw__shm *s) {
  if (s->map) munmap(s->map, s->size);
  memset(s, 0, sizeof *s);
}

void sw__shm_abandon(sw__shm *s, const char *name) {
  bool created = s->created;
  sw__shm_close(s);
  if (created) sw_segment_unlink(name);
}
