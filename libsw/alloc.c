/* SPDX-License-Identifier: Apache-2.0 */
/* Every allocation of libsw goes through here, so that a program (or a
 * test) can supply its own allocator. Blocks are 64-byte aligned (windows
 * are laid out in cache lines); the caller's malloc need not be. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Atomic(sw_malloc_fn) sw__malloc_fn;
static _Atomic(sw_free_fn) sw__free_fn;

SW_API int sw_set_alloc_funcs(sw_malloc_fn malloc_fn, sw_free_fn free_fn) {
  if ((malloc_fn == NULL) != (free_fn == NULL))
    return sw__fail(SW_EINVAL, "malloc_fn and free_fn must both be set or both be NULL");
  atomic_store(&sw__malloc_fn, malloc_fn);
  atomic_store(&sw__free_fn, free_fn);
  return SW_OK;
}

/* [base pointer][padding][64-aligned block] */
void *sw__malloc(size_t n) {
  sw_malloc_fn fn = atomic_load_explicit(&sw__malloc_fn, memory_order_relaxed);
  size_t total;
  if (__builtin_add_overflow(n, SW_CACHE_LINE + sizeof(void *), &total)) return NULL;
  void *base = fn ? fn(total) : malloc(total);
  if (base == NULL) return NULL;
  uintptr_t p = ((uintptr_t)base + sizeof(void *) + SW_CACHE_LINE - 1) & ~(uintptr_t)(SW_CACHE_LINE - 1);
  ((void **)p)[-1] = base;
  return (void *)p;
}

bool sw__alloc_custom(void) {
  return atomic_load_explicit(&sw__malloc_fn, memory_order_relaxed) != NULL;
}

void *sw__calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) return NULL;
  void *p = sw__malloc(n);
  if (p) memset(p, 0, n);
  return p;
}

void sw__free(void *p) {
  if (p == NULL) return;
  sw_free_fn fn = atomic_load_explicit(&sw__free_fn, memory_order_relaxed);
  void *base = ((void **)p)[-1];
  if (fn)
    fn(base);
  else
    free(base);
}

int sw__alloc_pair(void **handle, size_t handle_size, void **block, uint64_t block_size,
                   const char *what) {
  *handle = sw__calloc(1, handle_size);
  *block = block_size <= SIZE_MAX ? sw__calloc(1, (size_t)block_size) : NULL;
  if (*handle && *block) return SW_OK;
  sw__free(*handle);
  sw__free(*block);
  *handle = *block = NULL;
  return sw__fail(SW_ENOMEM, "%s of %llu bytes", what, (unsigned long long)block_size);
}

char *sw__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = sw__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}
