/* SPDX-License-Identifier: Apache-2.0 */
/* Shared memory against keys seen: a keyed table in a shared segment
 * (/dev/shm; capacity 100,000 by default, the default rule's 2 x 500 ms,
 * 16-byte keys), filled with 10^3, 10^4, 10^5 distinct keys (at most its
 * capacity). At creation and after each, the memory of the segment:
 *   reserved_kib  what its file holds on /dev/shm (st_blocks): all of it from
 *                 creation, since segments reserve their pages;
 *   touched_kib   the pages of the segment this process has touched (the Rss
 *                 of its mapping, /proc/self/smaps): what a segment without
 *                 reservation (libsw before issue 24: a sparse file) holds;
 * and what sw_keyed_stats says the table takes (bytes, bytes_per_key).
 *   bench_memory [CAPACITY]
 * Prints one line per point: case=memory capacity=... keys=... ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sw/sw.h>

/* The Rss of this process's mapping of path, in KiB (-1: none). */
static long mapping_rss_kib(const char *path) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return -1;
  char line[512];
  long rss = -1;
  int inside = 0;
  while (fgets(line, sizeof line, f)) {
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n') line[--n] = '\0';
    if (strchr(line, '-') && strchr(line, ' ') && line[0] != ' ' && strstr(line, ":") &&
        !strstr(line, "kB")) { /* a mapping's first line: address range ... path */
      inside = n >= strlen(path) && strcmp(line + n - strlen(path), path) == 0;
      continue;
    }
    long kib;
    if (inside && sscanf(line, "Rss: %ld kB", &kib) == 1) rss = rss < 0 ? kib : rss + kib;
  }
  fclose(f);
  return rss;
}

/* The i-th 16-byte key: 2001:db8:: and 12 bytes mixed from i (an IPv6 address). */
static void key16(uint32_t i, unsigned char k[16]) {
  static const unsigned char prefix[4] = {0x20, 0x01, 0x0d, 0xb8};
  memcpy(k, prefix, 4);
  uint64_t x = i * UINT64_C(0x9e3779b97f4a7c15);
  for (int b = 0; b < 12; b++) {
    x ^= x >> 29;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    k[4 + b] = (unsigned char)(x >> 56);
  }
}

static void report(sw_keyed *k, const char *path, uint32_t capacity, uint32_t keys) {
  sw_keyed_info in;
  struct stat st;
  if (sw_keyed_stats(k, &in) < 0 || stat(path, &st) < 0) return;
  printf("case=memory capacity=%u keys=%u key_bytes=%u bytes_per_key=%lld table_bytes=%lld "
         "file_bytes=%lld reserved_kib=%lld touched_kib=%ld\n",
         capacity, keys, in.key_bytes, (long long)in.bytes_per_key, (long long)in.bytes,
         (long long)st.st_size, (long long)st.st_blocks / 2, mapping_rss_kib(path));
}

int main(int argc, char **argv) {
  uint32_t capacity = argc > 1 ? (uint32_t)atol(argv[1]) : 100000;
  if (capacity == 0) return 2;
  char name[64], path[80];
  snprintf(name, sizeof name, "swbench-memory-%d", (int)getpid());
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  sw_options *o;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 100);
  sw_options_set(o, SW_OPT_KEY_BYTES, 16);
  sw_keyed *k;
  int rc = sw_keyed_open(&k, name, capacity, o, SW_SEGMENT_RESET);
  sw_options_free(o);
  if (rc < 0) {
    fprintf(stderr, "bench_memory: %s\n", sw_last_error());
    return 1;
  }
  report(k, path, capacity, 0);
  uint32_t seen = 0;
  for (uint32_t target = 1000; target <= capacity && target <= 100000; target *= 10) {
    for (; seen < target; seen++) {
      unsigned char key[16];
      sw_decision d;
      key16(seen, key);
      sw_keyed_entry_at(k, 1000000, key, sizeof key, 1, 0, &d);
    }
    report(k, path, capacity, seen);
  }
  sw_keyed_free(k);
  sw_segment_unlink(name);
  return 0;
}
