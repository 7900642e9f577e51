/* SPDX-License-Identifier: Apache-2.0 */
/* Keyed table benchmarks: ns per entry (wall clock) and, under callgrind,
 * instructions per entry (run_case only: see bench/run.sh).
 *   existing KEYS THREADS OPS [heap|shm|procs]  entries of KEYS existing 4-byte keys, in a
 *                                         scrambled order (each thread its own keys; procs:
 *                                         THREADS processes on one shared segment)
 *   new      KEYS THREADS OPS [heap|shm]  every entry a key never seen (a table of OPS)
 *   clock    KEYS 1 OPS                    existing keys through sw_keyed_entry (clock read)
 *   memory   KEYS                          resident memory after KEYS distinct keys in a
 *                                          table of 1,000,000 (heap and shm)
 * Prints one line per run: case=... keys=... threads=... ns_per_op=... mops_total=... */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sw/sw.h>

#include "bench.h"

typedef struct job {
  pthread_t tid;
  const char *name;
  sw_keyed *k;
  uint32_t keys, first; /* this thread's keys: first .. first + keys - 1 */
  long ops;
  int64_t sink;
} job;

static inline void ipv4(uint32_t i, unsigned char key[4]) {
  uint32_t ip = 0x0a000000u + (uint32_t)((uint64_t)i * 2654435761u % 0x00ffffffu); /* 10.x.y.z */
  key[0] = (unsigned char)(ip >> 24);
  key[1] = (unsigned char)(ip >> 16);
  key[2] = (unsigned char)(ip >> 8);
  key[3] = (unsigned char)ip;
}

/* Kept out of line so callgrind --toggle-collect=run_case sees only the entries. */
__attribute__((noinline)) void run_case(job *j);
__attribute__((noinline)) void run_case(job *j) {
  sw_decision d;
  unsigned char key[4];
  int64_t sink = 0;
  const int64_t t = 1000000;
  if (strcmp(j->name, "new") == 0) {
    for (long i = 0; i < j->ops; i++) {
      ipv4(j->first + (uint32_t)i, key);
      sw_keyed_entry_at(j->k, t, key, 4, 1, 0, &d);
      sink += d.verdict;
    }
  } else {
    const int clocked = strcmp(j->name, "clock") == 0;
    uint32_t x = 12345;
    for (long i = 0; i < j->ops; i++) {
      x = x * 1664525u + 1013904223u; /* an order the prefetcher cannot guess */
      ipv4(j->first + x % j->keys, key);
      if (clocked) sw_keyed_entry(j->k, key, 4, 1, 0, &d);
      else sw_keyed_entry_at(j->k, t, key, 4, 1, 0, &d);
      sink += d.verdict;
    }
  }
  j->sink = sink;
}

static void *thread_main(void *arg) {
  run_case(arg);
  return NULL;
}

static sw_keyed *table(uint32_t capacity, const char *storage, char *name, size_t n) {
  sw_options *o;
  sw_keyed *k = NULL;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 1e6); /* every entry passes */
  int rc;
  if (strcmp(storage, "heap") != 0) {
    snprintf(name, n, "sw-bench-keyed-%d", (int)getpid());
    rc = sw_keyed_open(&k, name, capacity, o, SW_SEGMENT_RESET);
  } else {
    name[0] = '\0';
    rc = sw_keyed_create(&k, capacity, o);
  }
  sw_options_free(o);
  if (rc < 0) {
    fprintf(stderr, "setup: %s\n", sw_last_error());
    exit(1);
  }
  return k;
}

static long resident_kib(void) {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
  if (f) fclose(f);
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int memory(uint32_t keys) {
  const char *storages[] = {"heap", "shm"};
  for (int s = 0; s < 2; s++) {
    char name[64];
    long before = resident_kib();
    sw_keyed *k = table(1000000, storages[s], name, sizeof name);
    long created = resident_kib();
    job j = {.name = "new", .k = k, .first = 0, .ops = keys};
    run_case(&j);
    long after = resident_kib();
    sw_keyed_info in;
    sw_keyed_stats(k, &in);
    printf("case=memory storage=%s capacity=1000000 keys=%u table_bytes=%lld bytes_per_key=%lld "
           "resident_at_creation_kib=%ld resident_growth_kib=%ld resident_bytes_per_key=%.1f\n",
           storages[s], keys, (long long)in.bytes, (long long)in.bytes_per_key,
           created - before, after - created, (double)(after - created) * 1024 / keys);
    sw_keyed_free(k);
    if (name[0]) sw_segment_unlink(name);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s existing|new|clock|memory KEYS [THREADS OPS [heap|shm]]\n",
            argv[0]);
    return 2;
  }
  const char *name = argv[1];
  uint32_t keys = (uint32_t)atol(argv[2]);
  if (strcmp(name, "memory") == 0) return memory(keys);
  if (argc < 5) return 2;
  int threads = atoi(argv[3]);
  long ops = atol(argv[4]);
  const char *storage = argc > 5 ? argv[5] : "heap";
  const int fresh = strcmp(name, "new") == 0;
  char seg[64];
  sw_keyed *k = table(fresh ? (uint32_t)(ops * threads) : keys * threads, storage, seg, sizeof seg);
  job *jobs = calloc((size_t)threads, sizeof *jobs);
  for (int i = 0; i < threads; i++) {
    jobs[i] = (job){.name = name, .k = k, .keys = keys, .first = (uint32_t)i * (fresh ? (uint32_t)ops : keys), .ops = ops};
    if (!fresh) { /* insert this thread's keys before timing */
      job pre = {.name = "new", .k = k, .first = jobs[i].first, .ops = keys};
      run_case(&pre);
    }
  }
  const int procs = strcmp(storage, "procs") == 0;
  pid_t pids[64];
  double t0 = now_s();
  for (int i = 0; i < threads && i < 64; i++) {
    if (procs) {
      if ((pids[i] = fork()) == 0) {
        run_case(&jobs[i]);
        _exit(0);
      }
    } else if (threads == 1) {
      run_case(&jobs[i]);
    } else {
      pthread_create(&jobs[i].tid, NULL, thread_main, &jobs[i]);
    }
  }
  for (int i = 0; i < threads && i < 64; i++) {
    if (procs) waitpid(pids[i], NULL, 0);
    else if (threads > 1) pthread_join(jobs[i].tid, NULL);
  }
  double dt = now_s() - t0;
  printf("case=%s storage=%s keys=%u threads=%d ops=%ld ns_per_op=%.2f mops_total=%.2f\n", name,
         storage, keys, threads, ops, dt * 1e9 / (double)ops, (double)ops * threads / dt / 1e6);
  free(jobs);
  sw_keyed_free(k);
  if (seg[0]) sw_segment_unlink(seg);
  return 0;
}
