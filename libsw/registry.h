/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout of sw_registry: named limiters in one position-independent
 * block, so that the same table serves a process (heap) and a shared segment.
 *
 *   header (geometry, default rule, insert mutex)
 *   index[index_size]   open addressing by name hash: state, hash, block, name
 *   limiter blocks[capacity], allocated in creation order
 *
 * Lookups probe the index without a lock: an entry is published by a release
 * store of state READY after its limiter block is initialised. Inserts take a
 * robust mutex; one that died halfway leaves an entry BUSY, which the next
 * inserter (EOWNERDEAD) initialises again and publishes. */
#ifndef SW_REGISTRY_H
#define SW_REGISTRY_H

#include "limiter.h"

#define SW__REGISTRY_MAGIC 0x47525753u /* "SWRG" */
#define SW__REGISTRY_LAYOUT_VERSION 2u /* 2: pacing times in ns, 64-bit FNV folded */

enum { SW__ENTRY_EMPTY = 0, SW__ENTRY_BUSY = 1, SW__ENTRY_READY = 2 };

typedef struct sw__entry {
  _Atomic uint32_t state;
  uint32_t hash;
  uint32_t block;
  uint32_t pad_;
  char name[SW_NAME_MAX + 1];
} sw__entry;

typedef struct sw__registry_hdr {
  uint32_t magic;
  uint32_t layout_version;
  uint32_t capacity;
  uint32_t index_size; /* power of two >= 2 * capacity */
  uint64_t index_off, blocks_off, block_size, total_size;
  sw__node_geom geom;
  sw__rule rule[2]; /* the rule new limiters start with: rule[rule_idx], written */
  _Atomic uint32_t rule_idx; /* under the insert lock into the other copy, then flipped */
  _Atomic uint32_t count;
  pthread_mutex_t insert_lock;
} sw__registry_hdr;

struct sw_registry {
  sw__registry_hdr *hdr;
  sw__entry *index;
  unsigned char *blocks;
  sw_limiter *_Atomic *handles; /* per block, bound on first use */
  bool owns_block; /* heap registry: the block is ours to free */
  bool shared;     /* the block is in a shared segment (process-shared locks) */
  bool readonly;   /* mapped read-only: no inserts, no rule changes */
  const char *name; /* the segment's name, for messages (NULL: a heap registry) */
};

uint64_t sw__registry_size(uint32_t capacity, const sw__node_geom *g);
int sw__registry_init(void *mem, uint32_t capacity, const sw__node_geom *g, const sw__rule *r,
                      bool process_shared);
/* Bind a handle to an initialised block of size bytes, checking that its
 * header describes a layout that fits (SW_ECORRUPT otherwise). */
int sw__registry_bind(sw_registry *r, void *mem, uint64_t size);
/* Release the handles (not the block). */
void sw__registry_unbind(sw_registry *r);

#endif /* SW_REGISTRY_H */
