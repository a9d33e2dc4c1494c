#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static void *system_alloc(void *user, size_t size, size_t alignment) {
  (void)user;
  if (alignment < sizeof(void *))
    alignment = sizeof(void *);
  void *p = NULL;
  return posix_memalign(&p, alignment, size ? size : 1) == 0 ? p : NULL;
}

static void *system_realloc(void *user, void *ptr, size_t size, size_t alignment) {
  (void)user;
  if (alignment <= 16)
    return realloc(ptr, size);
  return NULL; /* libvkrt never reallocates over-aligned blocks */
}

static void system_free(void *user, void *ptr) {
  (void)user;
  free(ptr);
}

vkrt_allocator vkrt_allocator_system(void) {
  return (vkrt_allocator){.alloc = system_alloc, .realloc = system_realloc, .free = system_free};
}

/* Counted even when not armed, so tests can learn how many allocations a call makes. */
static bool injected_failure(struct vkrt_base *base) {
  if (!IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION))
    return false;
  unsigned n = atomic_fetch_add(&base->host_alloc_count, 1) + 1;
  return base->host_alloc_fail_at != 0 && n == base->host_alloc_fail_at;
}

void *vkrt_alloc_aligned(struct vkrt_base *base, size_t size, size_t alignment) {
  if (injected_failure(base))
    return NULL;
  void *p = base->allocator.alloc(base->allocator.user, size, alignment);
  if (p)
    atomic_fetch_add(&base->live_allocations, 1);
  return p;
}

void *vkrt_alloc(struct vkrt_base *base, size_t size) { return vkrt_alloc_aligned(base, size, 16); }

void *vkrt_calloc(struct vkrt_base *base, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total))
    return NULL;
  void *p = vkrt_alloc(base, total);
  if (p)
    memset(p, 0, total);
  return p;
}

void vkrt_free(struct vkrt_base *base, void *ptr) {
  if (!ptr)
    return;
  atomic_fetch_sub(&base->live_allocations, 1);
  base->allocator.free(base->allocator.user, ptr);
}
