/* SPDX-License-Identifier: Apache-2.0 */
/* A keyed table whose bytes are damaged under its users (a stray write, a
 * flipped bit): no call crashes, spins or reads outside the table; a
 * damaged key's place is mended, or its counts are lost, and the others
 * keep theirs. Each case damages one field of a slot found in the file by
 * its key's bytes (layout: libsw/keyed/keyed.h). The segment fuzzer
 * (tests/fuzz/segments) damages every byte at random. */
#include <signal.h>
#include <sys/mman.h>

#include "segutil.h"

#define T INT64_C(100000)
#define STATE_OFF 32 /* meta 8 + key 16, rounded up to 16 */

typedef struct table {
  char name[256];
  sw_keyed *k;
  unsigned char *map; /* the whole file, mapped again by the test */
  size_t size;
} table;

static void open_table(table *tb, int grade, uint32_t capacity) {
  file_name(tb->name, sizeof tb->name, "kdamage");
  sw_options *o = rule(5);
  ck_ok(sw_options_set(o, SW_OPT_GRADE, grade));
  ck_ok(sw_keyed_open(&tb->k, tb->name, capacity, o, SW_SEGMENT_RESET));
  sw_options_free(o);
  int fd = open(tb->name, O_RDWR);
  ck_assert_int_ge(fd, 0);
  struct stat st;
  ck_assert_int_eq(fstat(fd, &st), 0);
  tb->size = (size_t)st.st_size;
  tb->map = mmap(NULL, tb->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ck_assert_ptr_ne(tb->map, MAP_FAILED);
  close(fd);
}

static void close_table(table *tb) {
  munmap(tb->map, tb->size);
  sw_keyed_free(tb->k);
  ck_ok(sw_segment_unlink(tb->name));
}

/* The slot of a key of 5..8 bytes: 8 bytes before its key words. */
static unsigned char *slot_of(const table *tb, const char *key) {
  unsigned char word[16] = {0};
  memcpy(word, key, strlen(key));
  for (size_t off = 8; off + 16 <= tb->size; off += 8)
    if (memcmp(tb->map + off, word, 16) == 0) return tb->map + off - 8;
  ck_abort_msg("key %s not in the file", key);
  return NULL;
}

static uint64_t *u64(unsigned char *p, size_t off) { return (uint64_t *)(void *)(p + off); }

static sw_decision enter(table *tb, const char *key, int64_t n) {
  sw_decision d;
  ck_ok(sw_keyed_entry_at(tb->k, T, key, strlen(key), n, 0, &d));
  return d;
}

static int64_t kpass(const table *tb, const char *key) {
  sw_keyed_key s;
  int rc = sw_keyed_lookup_at(tb->k, T, key, strlen(key), &s);
  return rc == 1 ? s.pass : rc == 0 ? -1 : rc;
}

/* Two keys with their counts; one is damaged next. */
static void two_keys(table *tb) {
  enter(tb, "alice", 2);
  enter(tb, "bobby", 3);
  ck_assert_int_eq(kpass(tb, "alice"), 2);
  ck_assert_int_eq(kpass(tb, "bobby"), 3);
}

/* A key length of 255 in a meta (the slot holds 16 bytes): lookups, scans
 * and the top never copy more than the slot holds; the slot is no key. */
START_TEST(test_key_length) {
  table tb;
  open_table(&tb, SW_GRADE_QPS, 100);
  two_keys(&tb);
  *u64(slot_of(&tb, "alice"), 0) |= UINT64_C(0xff) << 22; /* meta: len:8 at bit 22 */
  sw_keyed_key keys[8];
  uint64_t cursor = 0;
  ck_assert_int_eq(sw_keyed_scan_at(tb.k, T, &cursor, keys, 8), 1); /* bobby only */
  ck_assert_int_eq(keys[0].len, 5);
  ck_assert_int_eq(sw_keyed_top_at(tb.k, T, SW_KEYED_BY_PASS, keys, 8, NULL), 1);
  ck_assert_int_eq(kpass(&tb, "alice"), -1);
  ck_assert_int_eq(kpass(&tb, "bobby"), 3);
  ck_assert_int_eq(enter(&tb, "alice", 1).verdict, SW_VERDICT_PASS); /* a new place */
  ck_assert_int_eq(kpass(&tb, "alice"), 1);
  close_table(&tb);
}
END_TEST

/* A flipped generation bit in a window word: the key's entries no longer
 * match its words; after a bounded number of tries the entry goes through
 * the bucket's lock, which empties the foreign word (that window's counts
 * are lost) — no spin, and the other key is untouched. */
START_TEST(test_window_generation) {
  table tb;
  open_table(&tb, SW_GRADE_QPS, 100);
  two_keys(&tb);
  unsigned char *slot = slot_of(&tb, "alice");
  for (int w = 0; w < 2; w++) *u64(slot, STATE_OFF + 16 * w + 8) ^= UINT64_C(1) << 32;
  alarm(10);
  ck_assert_int_eq(enter(&tb, "alice", 1).verdict, SW_VERDICT_PASS);
  ck_assert_int_eq(kpass(&tb, "alice"), 1); /* its 2 earlier passes are lost */
  ck_assert_int_eq(enter(&tb, "alice", 4).verdict, SW_VERDICT_PASS);
  ck_assert_int_eq(enter(&tb, "alice", 1).verdict, SW_VERDICT_BLOCK); /* exact again */
  ck_assert_int_eq(kpass(&tb, "bobby"), 3);
  alarm(0);
  close_table(&tb);
}
END_TEST

/* A live window word in the wrong place of its ring (its number belongs to
 * the other one): sealing cannot settle it and the decision would go round
 * for ever; it gives up after a bounded number of steps, the slot's words
 * are emptied under its lock, and the entry is decided. */
START_TEST(test_window_in_the_wrong_place) {
  table tb;
  open_table(&tb, SW_GRADE_QPS, 100);
  two_keys(&tb);
  unsigned char *slot = slot_of(&tb, "alice");
  const uint64_t wid = (uint64_t)(T / 500); /* even: its place is window word 0 */
  *u64(slot, STATE_OFF + 16) = wid << 32 | 7; /* word 1: window wid, 7 passes, unsealed */
  alarm(20);
  ck_assert_int_eq(enter(&tb, "alice", 1).verdict, SW_VERDICT_PASS);
  alarm(0);
  ck_assert_int_eq(kpass(&tb, "alice"), 1);
  ck_assert_int_eq(kpass(&tb, "bobby"), 3);
  close_table(&tb);
}
END_TEST

/* A tag byte cleared under a key: lookups no longer find it, and an
 * insert into its bucket would take its place as if it were empty; the
 * insert sees the meta, mends the bucket's tags, and finds the key, its
 * counts kept. (A table of one bucket: its 16 tag bytes are the cache line
 * just before its first slot, which the first key takes.) */
START_TEST(test_tag) {
  table tb;
  open_table(&tb, SW_GRADE_QPS, 12);
  two_keys(&tb);
  unsigned char *tags = slot_of(&tb, "alice") - 64;
  ck_assert(tags[0] != 0 && tags[1] != 0 && tags[2] == 0);
  tags[0] = 0;
  ck_assert_int_eq(kpass(&tb, "alice"), -1);
  ck_assert_int_eq(enter(&tb, "alice", 1).verdict, SW_VERDICT_PASS);
  ck_assert(tags[0] != 0);
  ck_assert_int_eq(kpass(&tb, "alice"), 3);
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(tb.k, &in));
  ck_assert_int_eq(in.keys, 2);
  close_table(&tb);
}
END_TEST

/* A meta whose state bits say nothing (3): no lookup matches it, and its
 * key comes back in another place; when its bucket is full, the insert
 * that looks for a place to take mends the bucket and gives it back, and
 * the key count is the keys there are again. (One bucket of 16 places.) */
START_TEST(test_meta_state) {
  table tb;
  open_table(&tb, SW_GRADE_QPS, 12);
  two_keys(&tb);
  *u64(slot_of(&tb, "alice"), 0) |= UINT64_C(3) << 62;
  ck_assert_int_eq(kpass(&tb, "alice"), -1);
  ck_assert_int_eq(enter(&tb, "alice", 1).verdict, SW_VERDICT_PASS);
  ck_assert_int_eq(kpass(&tb, "alice"), 1);
  for (int i = 0; i < 14; i++) { /* 13 fill the bucket, the 14th needs the damaged place */
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    sw_decision d = enter(&tb, key, 1);
    ck_assert(d.verdict == SW_VERDICT_PASS && !d.full);
  }
  sw_keyed_info in;
  ck_ok(sw_keyed_stats(tb.k, &in));
  ck_assert_int_eq(in.keys, 16);
  ck_assert_int_eq(kpass(&tb, "bobby"), 3);
  close_table(&tb);
}
END_TEST

/* A concurrency key's in-flight count damaged to 2^63: its entries are
 * refused or healed, never counted past the word; exits of it do not spin. */
START_TEST(test_in_flight) {
  table tb;
  open_table(&tb, SW_GRADE_CONCURRENCY, 100);
  two_keys(&tb);
  *u64(slot_of(&tb, "alice"), STATE_OFF) = UINT64_C(1) << 63; /* aux lo: in flight */
  alarm(20);
  sw_decision d;
  ck_ok(sw_keyed_entry_at(tb.k, T, "alice", 5, 1, 0, &d));
  ck_ok(sw_keyed_exit_at(tb.k, T, "alice", 5, 1, 1, 0));
  alarm(0);
  ck_assert_int_eq(kpass(&tb, "bobby"), 3);
  close_table(&tb);
}
END_TEST

int main(void) {
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("keyed_damage");
  SW_TCASE(s, "slot", test_key_length, test_window_generation, test_window_in_the_wrong_place,
           test_tag, test_meta_state, test_in_flight);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
