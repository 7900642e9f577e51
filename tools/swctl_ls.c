/* SPDX-License-Identifier: Apache-2.0 */
/* Finding segments: swctl ls (every libsw segment of a directory, known by
 * its header's magic: sw_segment_probe), and the SEGMENT arguments of the
 * other commands — names, paths, globs, --all. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "swctl.h"

#define SHM_DIR "/dev/shm"

/* The name to open the file dir/entry by: a shared memory name in /dev/shm,
 * else the path. Caller frees. */
static char *segment_arg(const char *dir, const char *entry) {
  size_t n = strlen(dir) + strlen(entry) + 2;
  char *s = malloc(n);
  if (s == NULL) return NULL;
  if (strcmp(dir, SHM_DIR) == 0 || strcmp(dir, SHM_DIR "/") == 0)
    snprintf(s, n, "%s", entry);
  else
    snprintf(s, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", entry);
  return s;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int swctl_list_add(swctl_list *l, char *name) {
  if (name == NULL) return -1;
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0) {
      free(name); /* named twice: once */
      return 0;
    }
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    char **p = realloc(l->names, (size_t)cap * sizeof *p);
    if (p == NULL) {
      free(name);
      return -1;
    }
    l->names = p;
    l->cap = cap;
  }
  l->names[l->n++] = name;
  return 0;
}

void swctl_list_free(swctl_list *l) {
  for (int i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  memset(l, 0, sizeof *l);
}

/* What swctl can read: a finished segment of a kind and layout it knows. */
static int readable(const sw_segment_info *in) {
  return in->ready && in->current &&
         (in->kind == SW_SEGMENT_KIND_REGISTRY || in->kind == SW_SEGMENT_KIND_KEYED ||
          in->kind == SW_SEGMENT_KIND_BREAKER);
}

/* The libsw segments of dir whose name matches pattern (NULL: all), sorted,
 * added to l; with only_readable, those swctl can read. 0, or -1 if dir
 * cannot be read (said on stderr). */
static int scan_dir(const char *dir, const char *pattern, int only_readable, swctl_list *l) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    fprintf(stderr, "swctl: cannot read %s: %s\n", dir, strerror(errno));
    return -1;
  }
  swctl_list found = {0};
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || (pattern && fnmatch(pattern, e->d_name, 0) != 0)) continue;
    if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN) continue;
    char *name = segment_arg(dir, e->d_name);
    sw_segment_info in;
    if (name && sw_segment_probe(name, &in) == SW_OK && (!only_readable || readable(&in)))
      swctl_list_add(&found, name);
    else
      free(name); /* not libsw's (or gone, or unreadable): not a segment to list */
  }
  closedir(d);
  if (found.n) qsort(found.names, (size_t)found.n, sizeof *found.names, by_name);
  for (int i = 0; i < found.n; i++) swctl_list_add(l, found.names[i]);
  free(found.names);
  return 0;
}

int swctl_find(const char *const *args, int nargs, int all, swctl_list *out) {
  memset(out, 0, sizeof *out);
  if (all && scan_dir(SHM_DIR, NULL, 1, out) < 0) return -1;
  for (int i = 0; i < nargs; i++) {
    const char *a = args[i];
    if (strpbrk(a, "*?[") == NULL) { /* a name or a path: opened as it is */
      swctl_list_add(out, strdup(a));
      continue;
    }
    const char *slash = strrchr(a, '/');
    if (slash == NULL) { /* a pattern of shared memory names */
      if (scan_dir(SHM_DIR, a, 1, out) < 0) return -1;
      continue;
    }
    glob_t g;
    int rc = glob(a, 0, NULL, &g);
    for (size_t k = 0; rc == 0 && k < g.gl_pathc; k++) {
      sw_segment_info in;
      if (sw_segment_probe(g.gl_pathv[k], &in) == SW_OK && readable(&in))
        swctl_list_add(out, strdup(g.gl_pathv[k]));
    }
    globfree(&g);
  }
  return 0;
}

/* ---------------------------------------------------------------- swctl ls */

typedef struct ls_row {
  const char *name;
  sw_segment_info in;
  int64_t in_use; /* names or keys; -1: unknown (another layout, unreadable) */
  int alive;      /* its creator still runs */
} ls_row;

static void read_row(ls_row *r) {
  r->in_use = -1;
  r->alive = r->in.creator_pid && (kill((pid_t)r->in.creator_pid, 0) == 0 || errno == EPERM);
  if (!r->in.ready || !r->in.current) return;
  if (r->in.kind == SW_SEGMENT_KIND_REGISTRY) {
    sw_segment *seg;
    if (sw_segment_open(&seg, r->name, 0, NULL, SW_SEGMENT_READONLY) == SW_OK) {
      r->in_use = sw_registry_count(sw_segment_registry(seg));
      sw_segment_close(seg);
    }
  } else if (r->in.kind == SW_SEGMENT_KIND_KEYED) {
    sw_keyed *k;
    sw_keyed_info ki;
    if (sw_keyed_open(&k, r->name, 0, NULL, SW_SEGMENT_READONLY) == SW_OK) {
      if (sw_keyed_stats(k, &ki) == SW_OK) r->in_use = ki.keys;
      sw_keyed_free(k);
    }
  }
}

static const char *kind_name(uint32_t kind) {
  return kind == SW_SEGMENT_KIND_REGISTRY  ? "registry"
         : kind == SW_SEGMENT_KIND_KEYED   ? "keyed"
         : kind == SW_SEGMENT_KIND_BREAKER ? "breaker"
                                           : "unknown";
}

static const char *layout_name(const sw_segment_info *in) {
  return !in->ready ? "not-ready" : in->current ? "current" : "other";
}

static void row_json(swctl_buf *b, const ls_row *r) {
  swctl_append(b, "{\"segment\":", 11);
  swctl_json_str(b, r->name);
  swctl_printf(b, ",\"kind\":\"%s\",\"size\":%lld,\"allocated\":%lld,\"fs_free\":%lld,"
                  "\"fs_size\":%lld,\"capacity\":%u,\"in_use\":", kind_name(r->in.kind),
               (long long)r->in.size, (long long)r->in.allocated, (long long)r->in.fs_free,
               (long long)r->in.fs_size, r->in.capacity);
  if (r->in_use < 0)
    swctl_append(b, "null", 4);
  else
    swctl_printf(b, "%lld", (long long)r->in_use);
  swctl_printf(b, ",\"creator_pid\":%u,\"creator_alive\":%s,\"owner_uid\":%u,\"created_ms\":%lld,"
                  "\"layout\":\"%s\",\"layout_fingerprint\":\"%016llx\"}",
               r->in.creator_pid, r->alive ? "true" : "false", r->in.owner_uid,
               (long long)r->in.created_unix_ms, layout_name(&r->in),
               (unsigned long long)r->in.layout);
}

/* Bytes as ls -h says them: "146M", "2.3M", "23G"; "-" below 0. */
static void mib_text(char *buf, size_t cap, int64_t bytes) {
  double mib = (double)bytes / (1 << 20);
  if (bytes < 0) snprintf(buf, cap, "-");
  else if (mib >= 1024) snprintf(buf, cap, mib >= 10240 ? "%.0fG" : "%.1fG", mib / 1024);
  else snprintf(buf, cap, mib >= 10 ? "%.0fM" : "%.1fM", mib);
}

static void row_text(const ls_row *r, int width) {
  char size[32], fs_free[32], use[32], created[32], creator[32];
  mib_text(size, sizeof size, r->in.size);
  if (r->in.allocated < r->in.size) /* not reserved (an older libsw made it): sparse */
    snprintf(size + strlen(size), sizeof size - strlen(size), "*");
  /* a file system without a size (ramfs) has no free space to say */
  mib_text(fs_free, sizeof fs_free, r->in.fs_size > 0 ? r->in.fs_free : -1);
  if (r->in_use < 0)
    snprintf(use, sizeof use, "-");
  else
    snprintf(use, sizeof use, "%lld", (long long)r->in_use);
  time_t secs = (time_t)(r->in.created_unix_ms / 1000);
  struct tm tm;
  if (localtime_r(&secs, &tm) == NULL || strftime(created, sizeof created, "%Y-%m-%d %H:%M", &tm) == 0)
    snprintf(created, sizeof created, "-");
  snprintf(creator, sizeof creator, "%u%s", r->in.creator_pid, r->alive ? "" : " (gone)");
  printf("%-*s %-8s %7s %7s %9u %9s %-12s %5u  %-16s %s\n", width, r->name, kind_name(r->in.kind),
         size, fs_free, r->in.capacity, use, creator, r->in.owner_uid, created, layout_name(&r->in));
}

int swctl_ls(const char *const *dirs, int ndirs, int json) {
  static const char *const shm[] = {SHM_DIR};
  if (ndirs == 0) {
    dirs = shm;
    ndirs = 1;
  }
  swctl_list l = {0};
  int rc = 0;
  for (int i = 0; i < ndirs; i++)
    if (scan_dir(dirs[i], NULL, 0, &l) < 0) rc = 1;
  int width = 7; /* "SEGMENT" */
  for (int i = 0; i < l.n; i++)
    if ((int)strlen(l.names[i]) > width) width = (int)strlen(l.names[i]);
  swctl_buf b = {0};
  if (json) swctl_append(&b, "[", 1);
  else printf("%-*s %-8s %7s %7s %9s %9s %-12s %5s  %-16s %s\n", width, "SEGMENT", "KIND", "SIZE",
              "FS_FREE", "CAPACITY", "IN_USE", "CREATOR", "UID", "CREATED", "LAYOUT");
  for (int i = 0; i < l.n; i++) {
    ls_row r = {.name = l.names[i]};
    if (sw_segment_probe(r.name, &r.in) != SW_OK) continue; /* removed since */
    read_row(&r);
    if (json) {
      if (b.len > 1) swctl_append(&b, ",", 1);
      row_json(&b, &r);
    } else {
      row_text(&r, width);
    }
  }
  if (json) {
    swctl_append(&b, "]\n", 2);
    fwrite(b.data, 1, b.len, stdout);
  }
  free(b.data);
  swctl_list_free(&l);
  return rc || ferror(stdout) ? 1 : 0;
}
