/* SPDX-License-Identifier: Apache-2.0 */
/* Shared segments (sw_segment_*): attaching from several handles and
 * processes, exact counts and the strict threshold across processes, the
 * geometry check, every kind of bad file (never a crash), the lifecycle
 * (reopen, unlink, reset, reboot), mode and owner, read-only attaches, a
 * full segment and NULL arguments.
 *
 * Counts use explicit times (*_at) only; nothing sleeps or asserts on timing.
 * Corruption tests find their offsets in the file itself (the header's
 * registry offset, the READY word, the boot id, an entry's name bytes) and
 * check them against each other before changing a byte, so a layout change
 * makes them fail loudly instead of corrupting the wrong field.
 *
 * Every segment is named after the runner's pid, the test's pid and a tag:
 * "swck-<pid>-<pid>-<tag>" in /dev/shm or "<tmpdir>/<pid>-<tag>"; each test
 * unlinks its own and main() removes whatever a failed test left behind. */
#include <stddef.h>

#include "limiter.h" /* offsetof the rule lock, for the damaged-lock test */
#include "segutil.h"

/* ------------------------------------------------------------ layout */

#define SEG_MAGIC UINT64_C(0x31544e454d474553) /* "SEGMENT1" */
#define SEG_READY 0x52454459u                  /* "READY" */
#define REG_MAGIC 0x47525753u                  /* "SWRG" */
#define LIM_MAGIC 0x4d4c5753u                  /* "SWLM" */
#define NODE_MAGIC 0x444e5753u                 /* "SWND" */
/* segment header: magic, fingerprint, total_size, registry_off, config_sum,
 * then the configuration (capacity first) ... boot_id[40] ... state last */
#define OFF_FINGERPRINT 8
#define OFF_TOTAL_SIZE 16
#define OFF_REGISTRY 24
#define OFF_CONFIG_SUM 32
#define OFF_CONFIG 40
/* registry header: magic, layout_version, capacity, index_size, index_off,
 * blocks_off, block_size, total_size, ... count */
#define REG_CAPACITY 8
#define REG_INDEX_SIZE 12
#define REG_INDEX_OFF 16
#define REG_BLOCKS_OFF 24
#define REG_BLOCK_SIZE 32
#define REG_TOTAL_SIZE 40
/* index entry: state, hash, block, pad, name[64] */
#define ENTRY_NAME 16
#define ENTRY_SIZE (ENTRY_NAME + SW_NAME_MAX + 1)

typedef struct layout {
  uint64_t size, reg, state, hdr_size, boot; /* boot: 0 when there is no boot id */
  uint32_t capacity, index_size;
  uint64_t index_off, blocks_off, block_size; /* relative to reg */
} layout;

/* Read a valid segment's layout from its bytes, checking every offset
 * against the others. */
static layout layout_of(const char *name) {
  char path[256];
  seg_path(path, sizeof path, name);
  size_t size;
  unsigned char *b = slurp(path, &size);
  layout L;
  memset(&L, 0, sizeof L);
  L.size = size;
  ck_assert_uint_ge(size, 512);
  ck_assert_msg(rd_u64(b, 0) == SEG_MAGIC, "segment magic");
  ck_assert_uint_eq(rd_u64(b, OFF_TOTAL_SIZE), size);
  L.reg = rd_u64(b, OFF_REGISTRY);
  ck_assert_uint_eq(L.reg % 64, 0);
  ck_assert_uint_lt(L.reg, size);
  /* the state word is the header's last member: the last READY below the
   * registry; the header is 8-aligned */
  for (uint64_t off = 0; off + 4 <= L.reg; off += 4)
    if (rd_u32(b, off) == SEG_READY) L.state = off;
  ck_assert_uint_gt(L.state, OFF_CONFIG);
  L.hdr_size = (L.state + 4 + 7) / 8 * 8;
  ck_assert_uint_eq(L.reg, (L.hdr_size + 63) / 64 * 64);
  char boot[40];
  boot_id(boot);
  if (boot[0]) {
    unsigned char *p = memmem(b, L.state, boot, strlen(boot) + 1);
    ck_assert_msg(p != NULL, "boot id %s not in the header", boot);
    L.boot = (uint64_t)(p - b);
    /* the configuration runs from OFF_CONFIG to the boot id: its checksum */
    ck_assert_msg(fnv64(b + OFF_CONFIG, L.boot - OFF_CONFIG) == rd_u64(b, OFF_CONFIG_SUM),
                  "configuration [%d, %llu) does not match its checksum", OFF_CONFIG,
                  (unsigned long long)L.boot);
  }
  ck_assert_uint_eq(rd_u32(b, L.reg), REG_MAGIC);
  L.capacity = rd_u32(b, L.reg + REG_CAPACITY);
  ck_assert_uint_eq(L.capacity, rd_u32(b, OFF_CONFIG)); /* the segment's capacity */
  L.index_size = rd_u32(b, L.reg + REG_INDEX_SIZE);
  ck_assert_uint_ge(L.index_size, 2 * L.capacity);
  L.index_off = rd_u64(b, L.reg + REG_INDEX_OFF);
  L.blocks_off = rd_u64(b, L.reg + REG_BLOCKS_OFF);
  L.block_size = rd_u64(b, L.reg + REG_BLOCK_SIZE);
  ck_assert_uint_ge(L.blocks_off, L.index_off + (uint64_t)L.index_size * ENTRY_SIZE);
  ck_assert_uint_eq(L.reg + rd_u64(b, L.reg + REG_TOTAL_SIZE), size);
  ck_assert_uint_eq(L.reg + L.blocks_off + L.capacity * L.block_size, size);
  free(b);
  return L;
}

/* File offset of name's index entry (a READY entry with its hash). */
static uint64_t entry_in(const char *seg, const layout *L, const char *name) {
  char path[256];
  seg_path(path, sizeof path, seg);
  size_t size;
  unsigned char *b = slurp(path, &size);
  uint64_t first = L->reg + L->index_off, found = 0;
  for (uint32_t i = 0; i < L->index_size; i++) {
    uint64_t e = first + (uint64_t)i * ENTRY_SIZE;
    if (memcmp(b + e + ENTRY_NAME, name, strlen(name) + 1) == 0) {
      ck_assert_msg(found == 0, "%s twice in the index", name);
      found = e;
    }
  }
  ck_assert_msg(found != 0, "%s not in the index", name);
  ck_assert_uint_eq(rd_u32(b, found), 2); /* READY */
  ck_assert_uint_eq(rd_u32(b, found + 4), name_hash(name));
  ck_assert_uint_lt(rd_u32(b, found + 8), L->capacity);
  free(b);
  return found;
}

/* File offset of name's limiter block (its header starts with its magic). */
static uint64_t block_of(const char *seg, const layout *L, const char *name) {
  char path[256];
  seg_path(path, sizeof path, seg);
  size_t size;
  unsigned char *b = slurp(path, &size);
  uint64_t e = entry_in(seg, L, name);
  uint64_t off = L->reg + L->blocks_off + rd_u32(b, e + 8) * L->block_size;
  ck_assert_uint_eq(rd_u32(b, off), LIM_MAGIC);
  free(b);
  return off;
}

/* =================================================================== 1 */

/* A second handle in the same process and a forked child that opens the
 * segment again see the same limiters and counts; a name created through
 * one handle is found through every other. */
START_TEST(test_attach_again) {
  char name[80];
  shm_name(name, sizeof name, "attach");
  sw_segment_unlink(name);
  sw_options *o = rule(1e9);
  sw_segment *s1 = seg_open(name, 8, o, SW_SEGMENT_CREATE);
  ck_assert_str_eq(sw_segment_name(s1), name);
  ck_assert_int_eq(sw_segment_size(s1), file_size(name));
  sw_limiter *a1 = get(s1, "a");
  pass_n(a1, T0, 5);

  sw_segment *s2 = seg_open(name, 8, o, 0);
  ck_assert_ptr_ne(s1, s2);
  ck_assert_int_eq(sw_segment_size(s2), sw_segment_size(s1));
  sw_limiter *a2 = find(s2, "a");
  ck_assert_ptr_ne(a1, a2); /* two handles on one block */
  ck_assert_int_eq(window_pass(a2, T0), 5);
  pass_n(a2, T0 + 1, 3);
  ck_assert_int_eq(window_pass(a1, T0), 8);
  ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(a1), T0 + 100), 8);

  /* a new name through one handle is found through the other */
  absent(s2, "new-in-1");
  sw_limiter *n1 = get(s1, "new-in-1");
  sw_limiter *n2 = find(s2, "new-in-1");
  pass_n(n2, T0, 2);
  ck_assert_int_eq(window_pass(n1, T0), 2);
  absent(s1, "new-in-2");
  get(s2, "new-in-2");
  find(s1, "new-in-2");
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(s1)), 3);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(s2)), 3);

  /* a forked child: opens it again, and also uses the inherited handle */
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    sw_segment *s3 = NULL;
    CHILD_CHECK(sw_segment_open(&s3, name, 8, o, 0) == SW_OK, 2);
    sw_limiter *a3 = NULL;
    CHILD_CHECK(sw_registry_find(sw_segment_registry(s3), "a", &a3) == 1, 3);
    CHILD_CHECK(window_pass(a3, T0) == 8, 4);
    sw_decision d;
    for (int i = 0; i < 4; i++)
      CHILD_CHECK(sw_limiter_entry_at(a3, T0 + 2, 1, 0, &d) == SW_OK &&
                      d.verdict == SW_VERDICT_PASS, 5);
    CHILD_CHECK(sw_limiter_entry_at(a1, T0 + 3, 1, 0, &d) == SW_OK, 6); /* inherited */
    sw_limiter *c = NULL;
    CHILD_CHECK(sw_registry_get(sw_segment_registry(s3), "from-child", &c) == SW_OK, 7);
    CHILD_CHECK(sw_limiter_entry_at(c, T0, 2, 0, &d) == SW_OK, 8);
    CHILD_CHECK(sw_registry_find(sw_segment_registry(s3), "new-in-2", &c) == 1, 9);
    sw_segment_close(s3);
    _exit(0);
  }
  ck_assert_int_eq(wait_child(pid), 0);
  ck_assert_int_eq(window_pass(a1, T0), 13);
  ck_assert_int_eq(window_pass(a2, T0), 13);
  sw_limiter *c1 = find(s1, "from-child"), *c2 = find(s2, "from-child");
  ck_assert_int_eq(window_pass(c1, T0), 2);
  ck_assert_int_eq(window_pass(c2, T0), 2);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(s1)), 4);
  /* creation order is shared too */
  const char *order[] = {"a", "new-in-1", "new-in-2", "from-child"};
  for (uint32_t i = 0; i < 4; i++) {
    const char *nm = NULL;
    sw_limiter *l = NULL;
    ck_ok(sw_registry_at(sw_segment_registry(s2), i, &l, &nm));
    ck_assert_str_eq(nm, order[i]);
  }
  sw_segment_close(s2);
  ck_assert_int_eq(window_pass(a1, T0), 13); /* closing one handle leaves the other */
  sw_segment_close(s1);
  ck_ok(sw_segment_unlink(name));
  sw_options_free(o);
}
END_TEST

/* =================================================================== 2 */

#define K 4
#define N 2000

/* K processes x N entries on one resource in one 500 ms window: exactly
 * K x N passes, K x N in flight, in both arrays. */
START_TEST(test_exact_counts_across_processes) {
  char name[80];
  shm_name(name, sizeof name, "exact");
  sw_segment_unlink(name);
  sw_options *o = rule(1e12);
  sw_segment *seg = seg_open(name, 4, o, SW_SEGMENT_CREATE);
  int go[2];
  ck_assert_int_eq(pipe(go), 0);
  pid_t pids[K];
  flush_all();
  for (int k = 0; k < K; k++) {
    pids[k] = fork();
    ck_assert_int_ge(pids[k], 0);
    if (pids[k] == 0) {
      close(go[1]);
      char c;
      while (read(go[0], &c, 1) > 0) {
      } /* start together: wait for EOF */
      sw_segment *s = NULL;
      CHILD_CHECK(sw_segment_open(&s, name, 4, o, 0) == SW_OK, 2);
      sw_limiter *l = NULL;
      CHILD_CHECK(sw_registry_get(sw_segment_registry(s), "resource", &l) == SW_OK, 3);
      for (int i = 0; i < N; i++) {
        sw_decision d;
        int64_t t = T0 + (i * 7 + k * 13) % 500; /* anywhere in the window */
        CHILD_CHECK(sw_limiter_entry_at(l, t, 1, 0, &d) == SW_OK, 4);
        CHILD_CHECK(d.verdict == SW_VERDICT_PASS, 5);
      }
      sw_segment_close(s);
      _exit(0);
    }
  }
  close(go[0]);
  close(go[1]); /* go */
  for (int k = 0; k < K; k++) ck_assert_int_eq(wait_child(pids[k]), 0);

  sw_limiter *l = get(seg, "resource");
  sw_node *node = sw_limiter_node(l);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 1);
  ck_assert_int_eq(sw_metric_window_pass_at(sw_node_second_metric(node), T0), K * N);
  ck_assert_int_eq(sw_metric_window_pass_at(sw_node_second_metric(node), T0 + 499), K * N);
  ck_assert_double_eq(sw_node_pass_qps_at(node, T0 + 499), K * N);
  ck_assert_double_eq(sw_node_block_qps_at(node, T0 + 499), 0);
  ck_assert_int_eq(sw_node_total_pass_at(node, T0 + 499), K * N);
  ck_assert_int_eq(sw_node_concurrency(node), K * N);
  /* another attach reads the same */
  sw_segment *s2 = seg_open(name, 0, NULL, SW_SEGMENT_READONLY);
  ck_assert_double_eq(sw_node_pass_qps_at(sw_limiter_node(find(s2, "resource")), T0 + 250),
                      K * N);
  sw_segment_close(s2);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
  sw_options_free(o);
}
END_TEST

/* =================================================================== 3 */

/* Strict mode: 4 processes try 1000 entries each against a threshold of
 * 1000 in one window: exactly 1000 are admitted, never more. */
START_TEST(test_strict_across_processes) {
  enum { PROCS = 4, TRIES = 1000, LIMIT = 1000 };
  char name[80];
  shm_name(name, sizeof name, "strict");
  sw_segment_unlink(name);
  sw_options *o = rule(LIMIT);
  ck_ok(sw_options_set(o, SW_OPT_STRICT, 1));
  sw_segment *seg = seg_open(name, 4, o, SW_SEGMENT_CREATE);
  int go[2], res[2];
  ck_assert_int_eq(pipe(go), 0);
  ck_assert_int_eq(pipe(res), 0);
  pid_t pids[PROCS];
  flush_all();
  for (int k = 0; k < PROCS; k++) {
    pids[k] = fork();
    ck_assert_int_ge(pids[k], 0);
    if (pids[k] == 0) {
      close(go[1]);
      close(res[0]);
      sw_segment *s = NULL;
      CHILD_CHECK(sw_segment_open(&s, name, 4, o, 0) == SW_OK, 2);
      sw_limiter *l = NULL;
      CHILD_CHECK(sw_registry_get(sw_segment_registry(s), "hot", &l) == SW_OK, 3);
      char c;
      while (read(go[0], &c, 1) > 0) {
      }
      int32_t passed = 0;
      for (int i = 0; i < TRIES; i++) {
        sw_decision d;
        CHILD_CHECK(sw_limiter_entry_at(l, T0 + (i + k) % 500, 1, 0, &d) == SW_OK, 4);
        CHILD_CHECK(d.verdict == SW_VERDICT_PASS || d.verdict == SW_VERDICT_BLOCK, 5);
        passed += d.verdict == SW_VERDICT_PASS;
      }
      CHILD_CHECK(write(res[1], &passed, sizeof passed) == (ssize_t)sizeof passed, 6);
      sw_segment_close(s);
      _exit(0);
    }
  }
  close(go[0]);
  close(res[1]);
  close(go[1]);
  int64_t admitted = 0;
  for (int k = 0; k < PROCS; k++) {
    int32_t p = -1;
    ck_assert_int_eq(read(res[0], &p, sizeof p), (ssize_t)sizeof p);
    ck_assert_int_ge(p, 0);
    admitted += p;
  }
  close(res[0]);
  for (int k = 0; k < PROCS; k++) ck_assert_int_eq(wait_child(pids[k]), 0);
  ck_assert_int_eq(admitted, LIMIT);
  sw_node *node = sw_limiter_node(find(seg, "hot"));
  ck_assert_int_eq(sw_metric_window_pass_at(sw_node_second_metric(node), T0), LIMIT);
  ck_assert_double_eq(sw_node_pass_qps_at(node, T0 + 499), LIMIT);
  ck_assert_double_eq(sw_node_block_qps_at(node, T0 + 499), PROCS * TRIES - LIMIT);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
  sw_options_free(o);
}
END_TEST

/* =================================================================== 4 */

/* Another capacity or window geometry is SW_EGEOMETRY (with or without
 * CREATE, and the segment is left as it was); READONLY attaches whatever
 * the geometry; RESET replaces it. */
START_TEST(test_geometry_mismatch) {
  char name[256];
  file_name(name, sizeof name, "geom");
  sw_segment *seg = seg_open(name, 8, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 3);
  sw_segment_close(seg);
  int64_t size = file_size(name);

  seg_refused(name, 9, D, 0, SW_EGEOMETRY, "8 names");
  ck_msg_has("9");
  seg_refused(name, 9, D, SW_SEGMENT_CREATE, SW_EGEOMETRY, "8 names");
  seg_refused(name, 7, D, 0, SW_EGEOMETRY, NULL);
  sw_options *g = NULL;
  ck_ok(sw_options_create(&g));
  ck_ok(sw_options_set(g, SW_OPT_SECOND_SAMPLE_COUNT, 4));
  seg_refused(name, 8, g, 0, SW_EGEOMETRY, "geometry");
  seg_refused(name, 8, g, SW_SEGMENT_CREATE, SW_EGEOMETRY, "geometry");
  sw_options *st = NULL;
  ck_ok(sw_options_create(&st));
  ck_ok(sw_options_set(st, SW_OPT_STRIPES, 1));
  seg_refused(name, 8, st, 0, SW_EGEOMETRY, "geometry");
  sw_options *mi = NULL;
  ck_ok(sw_options_create(&mi));
  ck_ok(sw_options_set(mi, SW_OPT_MINUTE_INTERVAL_MS, 120000));
  ck_ok(sw_options_set(mi, SW_OPT_MINUTE_SAMPLE_COUNT, 120));
  seg_refused(name, 8, mi, 0, SW_EGEOMETRY, "geometry");
  ck_assert_int_eq(file_size(name), size);

  /* read-only: any capacity and geometry, the segment's own are used */
  sw_segment *ro = seg_open(name, 9, g, SW_SEGMENT_READONLY);
  ck_assert_uint_eq(sw_registry_capacity(sw_segment_registry(ro)), 8);
  ck_assert_int_eq(window_pass(find(ro, "a"), T0), 3);
  ck_assert_int_eq(sw_metric_sample_count(sw_node_second_metric(sw_limiter_node(find(ro, "a")))),
                   2);
  sw_segment_close(ro);
  ro = seg_open(name, 0, NULL, SW_SEGMENT_READONLY);
  ck_assert_uint_eq(sw_registry_capacity(sw_segment_registry(ro)), 8);
  sw_segment_close(ro);

  /* the original geometry still attaches */
  seg = seg_open(name, 8, D, 0);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 3);
  sw_segment_close(seg);

  /* RESET builds a new one of the geometry asked for */
  seg = seg_open(name, 9, g, SW_SEGMENT_RESET);
  ck_assert_uint_eq(sw_registry_capacity(sw_segment_registry(seg)), 9);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 0);
  sw_limiter *a = get(seg, "a");
  ck_assert_int_eq(sw_metric_sample_count(sw_node_second_metric(sw_limiter_node(a))), 4);
  sw_segment_close(seg);
  seg_refused(name, 8, D, 0, SW_EGEOMETRY, "9 names");
  ck_ok(sw_segment_unlink(name));
  sw_options_free(g);
  sw_options_free(st);
  sw_options_free(mi);
}
END_TEST

/* =================================================================== 5 */

/* No such segment: SW_ENOTFOUND without CREATE (read-write or read-only),
 * and nothing is created. */
START_TEST(test_missing) {
  char name[256], shm[80];
  file_name(name, sizeof name, "missing");
  shm_name(shm, sizeof shm, "missing");
  const char *names[] = {name, shm};
  for (int i = 0; i < 2; i++) {
    seg_refused(names[i], 4, D, 0, SW_ENOTFOUND, "cannot open segment");
    ck_msg_has(names[i]);
    seg_refused(names[i], 4, NULL, SW_SEGMENT_READONLY, SW_ENOTFOUND, NULL);
    seg_refused(names[i], 4, NULL, SW_SEGMENT_READONLY | SW_SEGMENT_CREATE, SW_ENOTFOUND, NULL);
    ck_assert_int_eq(file_size(names[i]), -1);
  }
  /* a path in a directory that does not exist */
  char deep[300];
  snprintf(deep, sizeof deep, "%s/no-such-dir/seg", g_dir);
  seg_refused(deep, 4, D, SW_SEGMENT_CREATE, SW_ENOTFOUND, NULL);
  ck_ok(sw_segment_unlink(name)); /* missing: fine */
  ck_ok(sw_segment_unlink(shm));
}
END_TEST

/* An empty file is a truncated segment unless CREATE is given: read-only
 * and read-write without CREATE are SW_ECORRUPT and leave it empty; with
 * CREATE it becomes a segment. */
START_TEST(test_empty_file) {
  char name[256];
  file_name(name, sizeof name, "empty");
  write_file(name, "", 0);
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, "truncated");
  ck_assert_int_eq(file_size(name), 0);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "truncated");
  ck_assert_int_eq(file_size(name), 0);
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 1);
  sw_segment_close(seg);
  ck_assert_int_gt(file_size(name), 0);
  seg = seg_open(name, 4, D, 0);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 1);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* Shorter than a header (100 bytes, zeros or the start of a real segment):
 * SW_ECORRUPT "truncated" in every mode, CREATE included; the file is left. */
START_TEST(test_truncated_header) {
  char name[256];
  file_name(name, sizeof name, "short");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  sw_segment_close(seg);
  size_t size;
  unsigned char *b = slurp(name, &size);
  write_file(name, b, 100);
  const uint32_t modes[] = {0, SW_SEGMENT_READONLY, SW_SEGMENT_CREATE};
  for (int i = 0; i < 3; i++) {
    seg_refused(name, 4, D, modes[i], SW_ECORRUPT, "truncated");
    ck_msg_has("100 bytes");
    ck_assert_int_eq(file_size(name), 100);
  }
  memset(b, 0, 100);
  write_file(name, b, 100);
  for (int i = 0; i < 3; i++) seg_refused(name, 4, D, modes[i], SW_ECORRUPT, "truncated");
  free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* Random bytes the size of a header, and a larger text file: SW_EFOREIGN in
 * every mode; CREATE never overwrites them. */
START_TEST(test_foreign) {
  char name[256];
  file_name(name, sizeof name, "foreign");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  sw_segment_close(seg);
  layout L = layout_of(name);
  unsigned char *junk = malloc(8192);
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < 8192; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    junk[i] = (unsigned char)x;
  }
  junk[0] |= 1; /* not magic 0 */
  const size_t sizes[] = {L.hdr_size, 8192};
  const uint32_t modes[] = {0, SW_SEGMENT_READONLY, SW_SEGMENT_CREATE};
  for (int s = 0; s < 2; s++) {
    write_file(name, junk, sizes[s]);
    for (int i = 0; i < 3; i++) {
      seg_refused(name, 4, D, modes[i], SW_EFOREIGN, "not a libsw segment");
      size_t n;
      unsigned char *now = slurp(name, &n);
      ck_assert_uint_eq(n, sizes[s]);
      ck_assert(memcmp(now, junk, n) == 0);
      free(now);
    }
  }
  char text[4096];
  for (size_t i = 0; i < sizeof text; i++) text[i] = "hello, world\n"[i % 13];
  write_file(name, text, sizeof text);
  seg_refused(name, 4, D, 0, SW_EFOREIGN, "magic");
  seg_refused(name, 4, D, SW_SEGMENT_CREATE, SW_EFOREIGN, NULL);
  /* RESET replaces whatever is there */
  seg = seg_open(name, 4, D, SW_SEGMENT_RESET);
  sw_segment_close(seg);
  seg = seg_open(name, 4, D, 0);
  sw_segment_close(seg);
  free(junk);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* Another layout fingerprint: SW_EVERSION in every mode (CREATE does not
 * overwrite another libsw's segment); RESET replaces it. */
START_TEST(test_version) {
  char name[256];
  file_name(name, sizeof name, "version");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  sw_segment_close(seg);
  layout L = layout_of(name);
  size_t n;
  unsigned char *b = slurp(name, &n);
  uint64_t fp = rd_u64(b, OFF_FINGERPRINT);
  free(b);
  poke_u64(name, OFF_FINGERPRINT, fp ^ UINT64_C(0x0100000000000001));
  seg_refused(name, 4, D, 0, SW_EVERSION, "another libsw version");
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_EVERSION, "layout");
  seg_refused(name, 4, D, SW_SEGMENT_CREATE, SW_EVERSION, NULL);
  b = slurp(name, &n);
  ck_assert_uint_eq(n, L.size);
  ck_assert_uint_eq(rd_u64(b, OFF_FINGERPRINT), fp ^ UINT64_C(0x0100000000000001));
  free(b);
  seg = seg_open(name, 4, D, SW_SEGMENT_RESET);
  sw_segment_close(seg);
  b = slurp(name, &n);
  ck_assert_uint_eq(rd_u64(b, OFF_FINGERPRINT), fp);
  free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A byte of the configuration changed: SW_ECORRUPT "checksum", read-only
 * too; the checksum itself changed: the same. */
START_TEST(test_config_checksum) {
  char name[256];
  file_name(name, sizeof name, "checksum");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  sw_segment_close(seg);
  layout L = layout_of(name);
  size_t n;
  unsigned char *b = slurp(name, &n);
  unsigned char orig = b[48];
  unsigned char flipped = (unsigned char)(orig ^ 0x01);
  ck_assert_uint_lt(48, L.boot ? L.boot : L.state); /* inside the configuration */
  poke(name, 48, &flipped, 1);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "checksum");
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, "checksum");
  seg_refused(name, 4, D, SW_SEGMENT_CREATE, SW_ECORRUPT, "checksum");
  poke(name, 48, &orig, 1);
  seg = seg_open(name, 4, D, 0); /* restored: fine again */
  sw_segment_close(seg);
  poke_u64(name, OFF_CONFIG_SUM, rd_u64(b, OFF_CONFIG_SUM) + 1);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "checksum");
  /* the capacity is part of the configuration too */
  poke_u64(name, OFF_CONFIG_SUM, rd_u64(b, OFF_CONFIG_SUM));
  poke_u32(name, OFF_CONFIG, 5);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "checksum");
  seg_refused(name, 5, D, 0, SW_ECORRUPT, "checksum");
  free(b);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A file truncated or extended after creation (or a header whose size
 * field lies): SW_ECORRUPT, read-only too. */
START_TEST(test_size_changed) {
  char name[256];
  file_name(name, sizeof name, "resized");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 2);
  sw_segment_close(seg);
  layout L = layout_of(name);
  const int64_t deltas[] = {-4096, 4096, -1, 1};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(truncate(name, (off_t)((int64_t)L.size + deltas[i])), 0);
    seg_refused(name, 4, D, 0, SW_ECORRUPT, "bytes");
    seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, NULL);
    seg_refused(name, 4, D, SW_SEGMENT_CREATE, SW_ECORRUPT, NULL);
    ck_assert_int_eq(file_size(name), (int64_t)L.size + deltas[i]);
    ck_assert_int_eq(truncate(name, (off_t)L.size), 0);
    seg = seg_open(name, 4, D, 0); /* back to its size: fine */
    sw_segment_close(seg);
  }
  poke_u64(name, OFF_TOTAL_SIZE, L.size + 4096);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "header says");
  poke_u64(name, OFF_TOTAL_SIZE, L.size);
  poke_u64(name, OFF_REGISTRY, L.reg + 64);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, NULL);
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, NULL);
  poke_u64(name, OFF_REGISTRY, L.reg);
  seg = seg_open(name, 4, D, 0);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 2);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A creator that died before finishing leaves the state word not READY:
 * without CREATE SW_ECORRUPT "never fully initialised" (read-only too);
 * with CREATE it is initialised again and works. With the magic zero it is
 * not libsw's: SW_EFOREIGN in every mode, CREATE included. */
START_TEST(test_never_ready) {
  char name[256];
  file_name(name, sizeof name, "unready");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 2);
  sw_segment_close(seg);
  layout L = layout_of(name);

  poke_u32(name, L.state, 0);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "never fully initialised");
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, "never fully initialised");
  seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 0);
  absent(seg, "a");
  pass_n(get(seg, "b"), T0, 1);
  sw_segment_close(seg);
  layout L2 = layout_of(name); /* READY again, same layout */
  ck_assert_uint_eq(L2.state, L.state);
  ck_assert_uint_eq(L2.size, L.size);
  seg = seg_open(name, 4, D, 0);
  ck_assert_int_eq(window_pass(find(seg, "b"), T0), 1);
  sw_segment_close(seg);

  /* magic zero: not libsw's (a creator marks the file before it sizes it),
   * so nothing takes it over, CREATE included; the bytes stay */
  poke_u64(name, 0, 0);
  poke_u32(name, L.state, 0);
  seg_refused(name, 4, D, 0, SW_EFOREIGN, NULL);
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_EFOREIGN, NULL);
  seg_refused(name, 4, D, SW_SEGMENT_CREATE, SW_EFOREIGN, "not a libsw segment");
  ck_assert_int_eq(file_size(name), (int64_t)L.size);
  poke_u64(name, 0, SEG_MAGIC);

  /* an unready segment of another capacity is rebuilt with the one asked for */
  poke_u32(name, L.state, 0);
  seg = seg_open(name, 6, D, SW_SEGMENT_CREATE);
  ck_assert_uint_eq(sw_registry_capacity(sw_segment_registry(seg)), 6);
  sw_segment_close(seg);
  seg = seg_open(name, 6, D, 0);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* The registry header inside (its capacity, magic, count) changed:
 * SW_ECORRUPT on every open, read-only included. */
START_TEST(test_corrupt_registry_header) {
  char name[256];
  file_name(name, sizeof name, "reghdr");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  get(seg, "a");
  sw_segment_close(seg);
  layout L = layout_of(name);
  ck_assert_uint_eq(L.capacity, 4);

  const uint32_t caps[] = {5, 0, 1000000, UINT32_MAX};
  for (int i = 0; i < 4; i++) {
    poke_u32(name, L.reg + REG_CAPACITY, caps[i]);
    seg_refused(name, 4, D, 0, SW_ECORRUPT, "registry header");
    seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, "registry header");
    seg_refused(name, 4, D, SW_SEGMENT_CREATE, SW_ECORRUPT, NULL);
  }
  poke_u32(name, L.reg + REG_CAPACITY, 4);
  seg = seg_open(name, 4, D, 0);
  sw_segment_close(seg);

  poke_u32(name, L.reg, 0xdeadbeefu);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "magic");
  poke_u32(name, L.reg, REG_MAGIC);
  /* the registry's own layout version (right after its magic) */
  size_t n;
  unsigned char *b = slurp(name, &n);
  uint32_t version = rd_u32(b, L.reg + 4);
  free(b);
  poke_u32(name, L.reg + 4, version + 1);
  seg_refused(name, 4, D, 0, SW_EVERSION, "registry layout version");
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_EVERSION, NULL);
  poke_u32(name, L.reg + 4, version);
  poke_u64(name, L.reg + REG_BLOCK_SIZE, L.block_size - 64);
  seg_refused(name, 4, D, 0, SW_ECORRUPT, "registry header");
  poke_u64(name, L.reg + REG_BLOCK_SIZE, L.block_size);
  poke_u64(name, L.reg + REG_INDEX_OFF, L.index_off + 64);
  seg_refused(name, 4, NULL, SW_SEGMENT_READONLY, SW_ECORRUPT, "registry header");
  poke_u64(name, L.reg + REG_INDEX_OFF, L.index_off);
  seg = seg_open(name, 4, D, 0);
  find(seg, "a");
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* Corrupt index entries: a block index out of range, a name without NUL.
 * Lookups of those names fail cleanly (not found or an error) and never
 * crash; the other names keep working; sw_registry_at never hands out a
 * name without its NUL. */
START_TEST(test_corrupt_index_entry) {
  char name[256];
  file_name(name, sizeof name, "index");
  sw_segment *seg = seg_open(name, 8, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "good"), T0, 3);
  pass_n(get(seg, "victim-block"), T0, 1);
  pass_n(get(seg, "victim-name"), T0, 1);
  sw_segment_close(seg);
  layout L = layout_of(name);
  uint64_t eb = entry_in(name, &L, "victim-block");
  uint64_t en = entry_in(name, &L, "victim-name");
  poke_u32(name, eb + 8, L.capacity + 100);
  char z[SW_NAME_MAX + 1];
  memset(z, 'Z', sizeof z);
  poke(name, en + ENTRY_NAME, z, sizeof z);

  for (int pass = 0; pass < 2; pass++) {
    seg = seg_open(name, 8, NULL, pass ? SW_SEGMENT_READONLY : 0);
    sw_registry *r = sw_segment_registry(seg);
    sw_limiter *l = NULL;
    ck_assert_int_le(sw_registry_find(r, "victim-block", &l), 0);
    ck_assert_int_le(sw_registry_find(r, "victim-name", &l), 0);
    z[SW_NAME_MAX] = '\0';
    ck_assert_int_le(sw_registry_find(r, z, &l), 0);
    ck_assert_int_eq(window_pass(find(seg, "good"), T0), 3);
    for (uint32_t i = 0; i < sw_registry_count(r); i++) {
      const char *nm = NULL;
      int rc = sw_registry_at(r, i, &l, &nm);
      ck_assert_msg(rc <= 0, "at(%u) returned %d", i, rc);
      if (rc == SW_OK) {
        ck_assert_ptr_nonnull(nm);
        ck_assert_msg(memchr(nm, 0, SW_NAME_MAX + 1) != NULL,
                      "sw_registry_at(%u) returned a name without its NUL", i);
      }
    }
    sw_segment_close(seg);
  }
  /* read-write: getting the names again is clean (a new limiter, or an error) */
  seg = seg_open(name, 8, D, 0);
  sw_registry *r = sw_segment_registry(seg);
  sw_limiter *l = NULL;
  int rc = sw_registry_get(r, "victim-block", &l);
  ck_assert_msg(rc == SW_OK || rc < 0, "get: %d", rc);
  if (rc == SW_OK) pass_n(l, T0, 1);
  rc = sw_registry_get(r, "victim-name", &l);
  if (rc == SW_OK) pass_n(l, T0, 1);
  pass_n(get(seg, "fresh"), T0, 1);
  ck_assert_int_eq(window_pass(find(seg, "good"), T0), 3);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A corrupt limiter block header (or node header): getting or finding that
 * name is SW_ECORRUPT; the other names keep working. */
START_TEST(test_corrupt_limiter_block) {
  char name[256];
  file_name(name, sizeof name, "block");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "good"), T0, 2);
  get(seg, "bad-limiter");
  get(seg, "bad-node");
  sw_segment_close(seg);
  layout L = layout_of(name);
  uint64_t bl = block_of(name, &L, "bad-limiter");
  uint64_t bn = block_of(name, &L, "bad-node");
  size_t n;
  unsigned char *b = slurp(name, &n);
  uint64_t node_off = rd_u64(b, bn + 8);
  ck_assert_uint_lt(node_off, L.block_size);
  ck_assert_uint_eq(rd_u32(b, bn + node_off), NODE_MAGIC);
  free(b);
  poke_u32(name, bl, 0x12345678u);
  poke_u32(name, bn + node_off, 0x12345678u);

  for (int pass = 0; pass < 2; pass++) {
    seg = seg_open(name, 4, NULL, pass ? SW_SEGMENT_READONLY : 0);
    sw_registry *r = sw_segment_registry(seg);
    sw_limiter *l = NULL;
    ck_sw(sw_registry_get(r, "bad-limiter", &l), SW_ECORRUPT);
    ck_msg_has("limiter header");
    ck_sw(sw_registry_find(r, "bad-limiter", &l), SW_ECORRUPT);
    ck_sw(sw_registry_get(r, "bad-node", &l), SW_ECORRUPT);
    ck_msg_has("node header");
    ck_sw(sw_registry_at(r, 1, &l, NULL), SW_ECORRUPT);
    const char *nm = NULL;
    ck_ok(sw_registry_at(r, 1, NULL, &nm)); /* the name alone needs no block */
    ck_assert_str_eq(nm, "bad-limiter");
    ck_assert_int_eq(window_pass(get(seg, "good"), T0), 2);
    if (!pass) pass_n(get(seg, "fresh"), T0, 1);
    sw_segment_close(seg);
  }
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A byte flipped in a limiter's rule lock (the lock word now names a
 * thread that never unlocks): a rule write gives up after 2 s with
 * SW_EBUSY, entries and rule reads never touch the lock. */
START_TEST(test_damaged_rule_lock) {
  char name[256];
  file_name(name, sizeof name, "lockword");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  get(seg, "a");
  sw_segment_close(seg);
  layout L = layout_of(name);
  uint64_t word = block_of(name, &L, "a") + offsetof(sw__limiter_hdr, rule_lock);
  size_t n;
  unsigned char *b = slurp(name, &n);
  ck_assert_uint_eq(rd_u32(b, word), 0); /* unlocked */
  free(b);
  unsigned char flipped = 0x5a;
  poke(name, word + 1, &flipped, 1);
  seg = seg_open(name, 4, D, 0);
  sw_limiter *l = find(seg, "a");
  pass_n(l, T0, 1);
  sw_options *o = rule(5);
  ck_ok(sw_limiter_get_rule(l, o));
  ck_sw(sw_limiter_set_rule(l, o), SW_EBUSY);
  ck_msg_has("rule lock held for more than 2000 ms");
  sw_options_free(o);
  sw_segment_close(seg);
  poke_u32(name, word, 0);
  seg = seg_open(name, 4, D, 0);
  o = rule(5);
  ck_ok(sw_limiter_set_rule(find(seg, "a"), o));
  sw_options_free(o);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* =================================================================== 6 */

/* Close and reopen (a restarted process) keeps the counts; CREATE on an
 * existing segment attaches to it. */
START_TEST(test_reopen_keeps_counts) {
  char name[80];
  shm_name(name, sizeof name, "reopen");
  sw_segment_unlink(name);
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 7);
  sw_segment_close(seg);
  seg = seg_open(name, 4, D, 0);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 7);
  pass_n(find(seg, "a"), T0, 1);
  sw_segment_close(seg);
  seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 8);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 1);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* unlink removes the name: the open handle keeps its segment, an open
 * without CREATE finds nothing, CREATE makes a fresh one. */
START_TEST(test_unlink_then_create) {
  char shm[80], file[256];
  shm_name(shm, sizeof shm, "unlink");
  file_name(file, sizeof file, "unlink");
  const char *names[] = {shm, file};
  for (int i = 0; i < 2; i++) {
    const char *name = names[i];
    sw_segment_unlink(name);
    sw_segment *old = seg_open(name, 4, D, SW_SEGMENT_CREATE);
    sw_limiter *a = get(old, "a");
    pass_n(a, T0, 5);
    ck_ok(sw_segment_unlink(name));
    ck_assert_int_eq(file_size(name), -1);
    seg_refused(name, 4, D, 0, SW_ENOTFOUND, NULL);
    pass_n(a, T0, 1); /* still mapped */
    ck_assert_int_eq(window_pass(a, T0), 6);
    sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
    ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 0);
    absent(seg, "a");
    sw_limiter *a2 = get(seg, "a");
    ck_assert_int_eq(window_pass(a2, T0), 0);
    pass_n(a2, T0, 2);
    ck_assert_int_eq(window_pass(a, T0), 6);
    sw_segment_close(old);
    sw_segment_close(seg);
    seg = seg_open(name, 4, D, 0);
    ck_assert_int_eq(window_pass(find(seg, "a"), T0), 2);
    sw_segment_close(seg);
    ck_ok(sw_segment_unlink(name));
    ck_ok(sw_segment_unlink(name)); /* already gone: fine */
  }
}
END_TEST

/* RESET replaces the segment by an empty one; a handle already open keeps
 * the old one (and its data); later opens get the new one. */
START_TEST(test_reset) {
  char name[80];
  shm_name(name, sizeof name, "reset");
  sw_segment_unlink(name);
  sw_segment *old = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  sw_limiter *a = get(old, "a");
  pass_n(a, T0, 4);
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_RESET);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 0);
  absent(seg, "a");
  sw_limiter *a2 = get(seg, "a");
  ck_assert_int_eq(window_pass(a2, T0), 0);
  pass_n(a2, T0, 1);
  pass_n(a, T0, 1);
  ck_assert_int_eq(window_pass(a, T0), 5);
  ck_assert_int_eq(window_pass(a2, T0), 1);
  get(old, "only-old");
  absent(seg, "only-old");
  sw_segment *later = seg_open(name, 4, D, 0);
  ck_assert_int_eq(window_pass(find(later, "a"), T0), 1);
  absent(later, "only-old");
  sw_segment_close(later);
  sw_segment_close(old);
  sw_segment_close(seg);
  /* RESET of a segment that does not exist creates it */
  ck_ok(sw_segment_unlink(name));
  seg = seg_open(name, 4, D, SW_SEGMENT_RESET);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* A segment written under another boot id is reset by the next read-write
 * open (not by a read-only one). */
START_TEST(test_boot_id_change) {
  char boot[40];
  boot_id(boot);
  if (boot[0] == '\0') {
    fprintf(stderr, "test_boot_id_change: no boot id on this system, skipped\n");
    return;
  }
  char name[256];
  file_name(name, sizeof name, "boot");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 6);
  sw_segment_close(seg);
  layout L = layout_of(name);
  ck_assert_uint_ne(L.boot, 0);
  char other[40];
  memset(other, 0, sizeof other);
  snprintf(other, sizeof other, "%s", boot);
  other[0] = other[0] == '0' ? '1' : '0';
  poke(name, L.boot, other, sizeof other);

  seg = seg_open(name, 0, NULL, SW_SEGMENT_READONLY); /* reading resets nothing */
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 6);
  sw_segment_close(seg);
  seg = seg_open(name, 4, D, 0);
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 0);
  absent(seg, "a");
  pass_n(get(seg, "a"), T0, 1);
  sw_segment_close(seg);
  size_t n;
  unsigned char *b = slurp(name, &n);
  ck_assert_str_eq((const char *)b + L.boot, boot); /* this boot's id again */
  free(b);
  seg = seg_open(name, 4, D, 0); /* and no further reset */
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 1);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* =================================================================== 7 */

static int mode_of(const char *name) {
  char path[256];
  seg_path(path, sizeof path, name);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  return (int)(st.st_mode & 0777);
}

/* SW_OPT_SEGMENT_MODE is applied whatever the umask (default 0600); an
 * existing segment's mode is left alone. */
START_TEST(test_mode) {
  mode_t old = umask(077);
  char shm[80], file[256];
  shm_name(shm, sizeof shm, "mode");
  file_name(file, sizeof file, "mode");
  const char *names[] = {shm, file};
  for (int i = 0; i < 2; i++) {
    const char *name = names[i];
    sw_segment_unlink(name);
    sw_options *o = NULL;
    ck_ok(sw_options_create(&o));
    ck_ok(sw_options_set(o, SW_OPT_SEGMENT_MODE, 0640));
    sw_segment *seg = seg_open(name, 2, o, SW_SEGMENT_CREATE);
    ck_assert_int_eq(mode_of(name), 0640);
    sw_segment_close(seg);
    /* attaching with another mode changes nothing */
    ck_ok(sw_options_set(o, SW_OPT_SEGMENT_MODE, 0666));
    seg = seg_open(name, 2, o, SW_SEGMENT_CREATE);
    ck_assert_int_eq(mode_of(name), 0640);
    sw_segment_close(seg);
    /* RESET makes a new one with the mode asked for */
    seg = seg_open(name, 2, o, SW_SEGMENT_RESET);
    ck_assert_int_eq(mode_of(name), 0666);
    sw_segment_close(seg);
    ck_ok(sw_segment_unlink(name));
    seg = seg_open(name, 2, D, SW_SEGMENT_CREATE);
    ck_assert_int_eq(mode_of(name), 0600);
    sw_segment_close(seg);
    ck_ok(sw_segment_unlink(name));
    sw_options_free(o);
  }
  umask(old);
}
END_TEST

/* As root: SW_OPT_SEGMENT_UID / GID give the segment away; the new owner
 * can use it; a segment the caller may not read is SW_EPERM; a non-root
 * creator cannot give a segment away (SW_EPERM). Skipped unless root. */
START_TEST(test_owner_and_permissions) {
  if (geteuid() != 0) {
    fprintf(stderr, "test_owner_and_permissions: needs root, skipped\n");
    return;
  }
  char name[256];
  file_name(name, sizeof name, "owner");
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_SEGMENT_UID, 65534));
  ck_ok(sw_options_set(o, SW_OPT_SEGMENT_GID, 65534));
  ck_ok(sw_options_set(o, SW_OPT_SEGMENT_MODE, 0600));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, 1e9));
  sw_segment *seg = seg_open(name, 2, o, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 1);
  sw_segment_close(seg);
  struct stat st;
  ck_assert_int_eq(stat(name, &st), 0);
  ck_assert_int_eq(st.st_uid, 65534);
  ck_assert_int_eq(st.st_gid, 65534);
  ck_assert_int_eq(st.st_mode & 0777, 0600);

  /* the owner (uid 65534) attaches read-write and counts */
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    drop_to_nobody();
    sw_segment *s = NULL;
    CHILD_CHECK(sw_segment_open(&s, name, 2, NULL, 0) == SW_OK, 2);
    sw_limiter *l = NULL;
    CHILD_CHECK(sw_registry_get(sw_segment_registry(s), "a", &l) == SW_OK, 3);
    sw_decision d;
    CHILD_CHECK(sw_limiter_entry_at(l, T0, 1, 0, &d) == SW_OK, 4);
    CHILD_CHECK(sw_registry_get(sw_segment_registry(s), "b", &l) == SW_OK, 5);
    sw_segment_close(s);
    _exit(0);
  }
  ck_assert_int_eq(wait_child(pid), 0);
  seg = seg_open(name, 2, D, 0);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 2);
  find(seg, "b");
  sw_segment_close(seg);

  /* not readable by the caller: SW_EPERM, read-write and read-only */
  ck_assert_int_eq(chmod(name, 0), 0);
  flush_all();
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    drop_to_nobody();
    sw_segment *s = (sw_segment *)&s;
    CHILD_CHECK(sw_segment_open(&s, name, 2, NULL, 0) == SW_EPERM, 2);
    CHILD_CHECK(strstr(sw_last_error(), "cannot open") != NULL, 3);
    CHILD_CHECK(s == NULL, 4);
    CHILD_CHECK(sw_segment_open(&s, name, 2, NULL, SW_SEGMENT_READONLY) == SW_EPERM, 5);
    CHILD_CHECK(sw_segment_open(&s, name, 2, NULL, SW_SEGMENT_CREATE) == SW_EPERM, 6);
    _exit(0);
  }
  ck_assert_int_eq(wait_child(pid), 0);
  ck_assert_int_eq(chmod(name, 0600), 0);

  /* a shm segment given to 65534 with another gid only */
  char shm[80];
  shm_name(shm, sizeof shm, "owner");
  sw_segment_unlink(shm);
  sw_options *g = NULL;
  ck_ok(sw_options_create(&g));
  ck_ok(sw_options_set(g, SW_OPT_SEGMENT_GID, 65534));
  ck_ok(sw_options_set(g, SW_OPT_SEGMENT_MODE, 0660));
  seg = seg_open(shm, 2, g, SW_SEGMENT_CREATE);
  sw_segment_close(seg);
  char path[256];
  seg_path(path, sizeof path, shm);
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_uid, 0);
  ck_assert_int_eq(st.st_gid, 65534);
  ck_assert_int_eq(st.st_mode & 0777, 0660);
  ck_ok(sw_segment_unlink(shm));

  /* a non-root creator cannot give a segment to root */
  char dir[256], given[300];
  snprintf(dir, sizeof dir, "%s/%d-open", g_dir, (int)getpid());
  ck_assert_int_eq(mkdir(dir, 0777), 0);
  ck_assert_int_eq(chmod(dir, 0777), 0);
  snprintf(given, sizeof given, "%s/seg", dir);
  flush_all();
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    drop_to_nobody();
    sw_options *u = NULL;
    CHILD_CHECK(sw_options_create(&u) == SW_OK, 2);
    CHILD_CHECK(sw_options_set(u, SW_OPT_SEGMENT_UID, 0) == SW_OK, 3);
    sw_segment *s = (sw_segment *)&s;
    CHILD_CHECK(sw_segment_open(&s, given, 2, u, SW_SEGMENT_CREATE) == SW_EPERM, 4);
    CHILD_CHECK(strstr(sw_last_error(), "cannot give") != NULL, 5);
    CHILD_CHECK(s == NULL, 6);
    _exit(0);
  }
  ck_assert_int_eq(wait_child(pid), 0);
  unlink(given);
  rmdir(dir);
  ck_ok(sw_segment_unlink(name));
  sw_options_free(o);
  sw_options_free(g);
}
END_TEST

/* =================================================================== 8 */

/* Read-only attach (what swctl does): every read works and sees the
 * writers' counts; existing names are found (get too); a new name is
 * SW_EPERM and adds nothing. */
START_TEST(test_readonly_reads) {
  char name[80];
  shm_name(name, sizeof name, "ro");
  sw_segment_unlink(name);
  sw_options *o = rule(50);
  sw_segment *rw = seg_open(name, 4, o, SW_SEGMENT_CREATE);
  sw_limiter *a = get(rw, "a");
  pass_n(a, T0, 5);
  ck_ok(sw_limiter_exit_at(a, T0 + 10, 7, 1, 0));
  get(rw, "b");

  sw_segment *ro = seg_open(name, 0, NULL, SW_SEGMENT_READONLY);
  ck_assert_int_eq(sw_segment_size(ro), sw_segment_size(rw));
  sw_registry *r = sw_segment_registry(ro);
  ck_assert_uint_eq(sw_registry_count(r), 2);
  ck_assert_uint_eq(sw_registry_capacity(r), 4);
  sw_limiter *ra = find(ro, "a");
  sw_node *node = sw_limiter_node(ra);
  ck_assert_int_eq(window_pass(ra, T0), 5);
  ck_assert_double_eq(sw_node_pass_qps_at(node, T0 + 100), 5);
  ck_assert_double_eq(sw_node_success_qps_at(node, T0 + 100), 1);
  ck_assert_double_eq(sw_node_avg_rt_at(node, T0 + 100), 7);
  ck_assert_int_eq(sw_node_total_pass_at(node, T0 + 100), 5);
  ck_assert_int_eq(sw_node_concurrency(node), 4);
  sw_metric_record rec[4];
  ck_assert_int_eq(sw_metric_details_at(sw_node_second_metric(node), T0 + 100, rec, 4), 1);
  ck_assert_int_eq(rec[0].pass, 5);
  sw_options *got = NULL;
  ck_ok(sw_options_create(&got));
  ck_ok(sw_limiter_get_rule(ra, got));
  double x;
  ck_ok(sw_options_get_double(got, SW_OPT_THRESHOLD, &x));
  ck_assert_double_eq(x, 50);
  sw_limiter *l = NULL;
  ck_ok(sw_registry_get(r, "a", &l)); /* existing: fine */
  ck_assert_ptr_eq(l, ra);
  const char *nm = NULL;
  ck_ok(sw_registry_at(r, 1, &l, &nm));
  ck_assert_str_eq(nm, "b");
  ck_sw(sw_registry_get(r, "new", &l), SW_EPERM);
  ck_msg_has("read-only");
  ck_msg_has("new");
  ck_assert_uint_eq(sw_registry_count(r), 2);
  ck_sw(sw_registry_find(r, "new", &l), 0);
  /* later writes show through the read-only mapping */
  pass_n(a, T0 + 1, 2);
  ck_assert_int_eq(window_pass(ra, T0), 7);
  get(rw, "c");
  find(ro, "c");
  sw_segment_close(ro);
  sw_segment_close(rw);
  ck_ok(sw_segment_unlink(name));
  sw_options_free(o);
  sw_options_free(got);
}
END_TEST

/* Writes through a read-only attach are refused with an error, never a
 * crash (the mapping is PROT_READ): each one runs in a child so that a
 * SIGSEGV is reported as a failure of that call. */
START_TEST(test_readonly_writes_refused) {
  char name[80];
  shm_name(name, sizeof name, "rowrite");
  sw_segment_unlink(name);
  sw_segment *rw = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(rw, "a"), T0, 1);
  const char *what[] = {"sw_limiter_entry_at", "sw_limiter_exit_at", "sw_limiter_set_rule",
                        "sw_node_add_pass_at"};
  char failures[512] = "";
  for (int w = 0; w < 4; w++) {
    flush_all();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      sw_segment *ro = NULL;
      CHILD_CHECK(sw_segment_open(&ro, name, 0, NULL, SW_SEGMENT_READONLY) == SW_OK, 2);
      sw_limiter *l = NULL;
      CHILD_CHECK(sw_registry_find(sw_segment_registry(ro), "a", &l) == 1, 3);
      sw_decision d;
      int rc = 0;
      if (w == 0) rc = sw_limiter_entry_at(l, T0, 1, 0, &d);
      if (w == 1) rc = sw_limiter_exit_at(l, T0, 1, 1, 0);
      if (w == 2) rc = sw_limiter_set_rule(l, D);
      if (w == 3) rc = sw_node_add_pass_at(sw_limiter_node(l), T0, 1);
      CHILD_CHECK(rc == SW_EPERM, 4);
      _exit(0);
    }
    int st = wait_child(pid);
    if (st != 0)
      snprintf(failures + strlen(failures), sizeof failures - strlen(failures), " %s: %s %d;",
               what[w], st > 128 ? "killed by signal" : "exit", st > 128 ? st - 128 : st);
  }
  ck_assert_msg(failures[0] == '\0', "writes through a read-only attach:%s", failures);
  ck_assert_int_eq(window_pass(find(rw, "a"), T0), 1);
  sw_segment_close(rw);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* =================================================================== 9 */

/* Capacity 3: the 4th name is SW_EFULL (through any handle); existing
 * names keep working. */
START_TEST(test_full) {
  char name[80];
  shm_name(name, sizeof name, "full");
  sw_segment_unlink(name);
  sw_segment *seg = seg_open(name, 3, D, SW_SEGMENT_CREATE);
  sw_limiter *l[3];
  const char *names[] = {"one", "two", "three"};
  for (int i = 0; i < 3; i++) l[i] = get(seg, names[i]);
  sw_limiter *x = NULL;
  ck_sw(sw_registry_get(sw_segment_registry(seg), "four", &x), SW_EFULL);
  ck_msg_has("full");
  ck_msg_has("four");
  ck_assert_uint_eq(sw_registry_count(sw_segment_registry(seg)), 3);
  absent(seg, "four");
  sw_segment *other = seg_open(name, 3, D, 0);
  ck_sw(sw_registry_get(sw_segment_registry(other), "five", &x), SW_EFULL);
  for (int i = 0; i < 3; i++) {
    pass_n(l[i], T0, i + 1);
    ck_assert_int_eq(window_pass(find(other, names[i]), T0), i + 1);
    ck_assert_ptr_eq(get(seg, names[i]), l[i]);
  }
  sw_segment_close(other);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* ================================================================== 10 */

/* NULL arguments are SW_ENULL; a capacity of 0 (or too large) SW_ESIZE;
 * bad node options are refused before anything is created; the accessors
 * accept NULL; sw_registry_free on a segment's registry is a no-op. */
START_TEST(test_arguments) {
  char name[80];
  shm_name(name, sizeof name, "args");
  sw_segment_unlink(name);
  sw_segment *seg = (sw_segment *)&seg;
  ck_sw(sw_segment_open(NULL, name, 4, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  ck_sw(sw_segment_open(&seg, NULL, 4, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  ck_assert_ptr_null(seg);
  ck_msg_has("name");
  ck_sw(sw_segment_unlink(NULL), SW_ENULL);
  seg = (sw_segment *)&seg;
  ck_sw(sw_segment_open(&seg, name, 0, NULL, SW_SEGMENT_CREATE), SW_ESIZE);
  ck_assert_ptr_null(seg);
  ck_msg_has("capacity=0");
  ck_sw(sw_segment_open(&seg, name, (1u << 24) + 1, NULL, SW_SEGMENT_CREATE), SW_ESIZE);
  ck_sw(sw_segment_open(&seg, name, 0, NULL, 0), SW_ESIZE);
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_MINUTE_SAMPLE_COUNT, 7));
  ck_sw(sw_segment_open(&seg, name, 4, o, SW_SEGMENT_CREATE), SW_ESIZE);
  ck_msg_has("per-minute array");
  sw_options_free(o);
  ck_assert_int_eq(file_size(name), -1); /* nothing created by a refused open */

  ck_assert_ptr_null(sw_segment_registry(NULL));
  ck_assert_ptr_null(sw_segment_name(NULL));
  ck_sw(sw_segment_size(NULL), SW_ENULL);
  sw_segment_close(NULL);

  seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  sw_registry *r = sw_segment_registry(seg);
  sw_limiter *a = get(seg, "a");
  pass_n(a, T0, 1);
  sw_registry_free(r); /* the segment's: ignored */
  ck_assert_ptr_eq(sw_segment_registry(seg), r);
  ck_assert_uint_eq(sw_registry_count(r), 1);
  ck_assert_ptr_eq(get(seg, "a"), a);
  pass_n(a, T0, 1);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 2);
  get(seg, "b");
  sw_limiter *l = NULL;
  ck_sw(sw_registry_get(r, NULL, &l), SW_ENULL);
  ck_sw(sw_registry_get(r, "x", NULL), SW_ENULL);
  ck_sw(sw_registry_get(r, "", &l), SW_ERANGE);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* Shared memory names are 1..63 bytes: a longer one is refused by open and
 * by unlink, which must never remove the segment its first 63 bytes name. */
START_TEST(test_long_names) {
  char name[80], longer[90];
  shm_name(name, sizeof name, "long");
  size_t len = strlen(name);
  ck_assert_uint_lt(len, SW_NAME_MAX);
  memset(name + len, 'x', SW_NAME_MAX - len);
  name[SW_NAME_MAX] = '\0';
  snprintf(longer, sizeof longer, "%sy", name);
  sw_segment_unlink(name);
  sw_segment *seg = seg_open(name, 2, D, SW_SEGMENT_CREATE);
  sw_segment_close(seg);
  sw_segment *s = (sw_segment *)&s;
  ck_assert_int_lt(sw_segment_open(&s, longer, 2, NULL, SW_SEGMENT_CREATE), 0);
  ck_assert_ptr_null(s);
  int rc = sw_segment_unlink(longer);
  ck_assert_msg(file_size(name) > 0, "sw_segment_unlink(64-byte name) removed the segment "
                "named by its first 63 bytes");
  ck_assert_msg(rc < 0, "sw_segment_unlink(64-byte name) returned %d", rc);
  seg = seg_open(name, 2, D, 0);
  sw_segment_close(seg);
  ck_ok(sw_segment_unlink(name));
  ck_assert_int_eq(file_size(name), -1);
}
END_TEST

/* ----------------------------------------------------------------- main */

int main(void) {
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("segment");
  SW_TCASE(s, "attach", test_attach_again, test_exact_counts_across_processes,
           test_strict_across_processes, test_geometry_mismatch);
  SW_TCASE(s, "bad files", test_missing, test_empty_file, test_truncated_header, test_foreign,
           test_version, test_config_checksum, test_size_changed, test_never_ready,
           test_corrupt_registry_header, test_corrupt_index_entry,
           test_corrupt_limiter_block, test_damaged_rule_lock);
  SW_TCASE(s, "lifecycle", test_reopen_keeps_counts, test_unlink_then_create, test_reset,
           test_boot_id_change);
  SW_TCASE(s, "access", test_mode, test_owner_and_permissions, test_readonly_reads,
           test_readonly_writes_refused);
  SW_TCASE(s, "limits", test_full, test_arguments, test_long_names);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
