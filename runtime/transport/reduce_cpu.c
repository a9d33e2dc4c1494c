/* The CPU side of the reduce every host-relayed transport shares: the sum in a fixed rank
 * order (f16 through base/numbers.h), and a small thread pool for large pieces. */
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/numbers.h"
#include "base/workers.h"
#include "transport/transport.h"

/* ---- the CPU reduce ----------------------------------------------------------------------- */

#define REDUCE_BLOCK 2048

void vkrt_collective_reduce_cpu(vkrt_type type, void *dst, const void *const *src, uint32_t n,
                                uint64_t count) {
  /* Element-wise ((s0 + s1) + s2) + ...: the same order for every element and every rank.
   * Blocked so each rank's pass streams through memory and vectorizes. */
  float acc[REDUCE_BLOCK];
  for (uint64_t i = 0; i < count; i += REDUCE_BLOCK) {
    size_t len = (size_t)VKRT_MIN((uint64_t)REDUCE_BLOCK, count - i);
    if (type == VKRT_TYPE_F32) {
      memcpy(acc, (const float *)src[0] + i, len * sizeof(float));
      for (uint32_t r = 1; r < n; r++) {
        const float *s = (const float *)src[r] + i;
        for (size_t j = 0; j < len; j++)
          acc[j] += s[j];
      }
      memcpy((float *)dst + i, acc, len * sizeof(float));
    } else {
      const uint16_t *s0 = (const uint16_t *)src[0] + i;
      for (size_t j = 0; j < len; j++)
        acc[j] = vkrt_f16_to_f32(s0[j]);
      for (uint32_t r = 1; r < n; r++) {
        const uint16_t *s = (const uint16_t *)src[r] + i;
        for (size_t j = 0; j < len; j++)
          acc[j] += vkrt_f16_to_f32(s[j]);
      }
      uint16_t *d = (uint16_t *)dst + i;
      for (size_t j = 0; j < len; j++)
        d[j] = vkrt_f32_to_f16(acc[j]);
    }
  }
}

/* ---- a small pool for large CPU reduces --------------------------------------------------
 * One thread sums ~3-6 GB/s; a large piece is split across a few threads (static ranges of
 * whole blocks). Each element is still summed in rank order by exactly one thread, so the
 * result is the same bits as vkrt_collective_reduce_cpu. */

#define POOL_MIN_BYTES (1ull << 20) /* below this, waking workers costs more than it saves */

struct vkrt_reduce_pool {
  struct vkrt_base *base;
  struct vkrt_workers workers;
};

struct reduce_job {
  vkrt_type type;
  void *dst;
  const void *const *src;
  uint32_t n;
  uint64_t count;
};

/* Part `part` of `parts`: a static range of whole blocks. */
static void reduce_part(void *arg, uint32_t part, uint32_t parts) {
  const struct reduce_job *j = arg;
  uint64_t blocks = (j->count + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
  uint64_t b0 = blocks * part / parts, b1 = blocks * (part + 1) / parts;
  uint64_t first = VKRT_MIN(b0 * REDUCE_BLOCK, j->count);
  uint64_t count = VKRT_MIN(b1 * REDUCE_BLOCK, j->count) - first;
  if (!count)
    return;
  size_t esize = j->type == VKRT_TYPE_F32 ? 4 : 2;
  const void *src[VKRT_MAX_DEVICES];
  for (uint32_t r = 0; r < j->n; r++)
    src[r] = (const uint8_t *)j->src[r] + first * esize;
  vkrt_collective_reduce_cpu(j->type, (uint8_t *)j->dst + first * esize, src, j->n, count);
}

vkrt_status vkrt_reduce_pool_create(struct vkrt_base *base, uint32_t threads,
                                    struct vkrt_reduce_pool **out) {
  *out = NULL;
  threads = VKRT_MIN(threads, (uint32_t)VKRT_REDUCE_POOL_MAX);
  if (threads < 2)
    return VKRT_OK; /* no pool: the caller sums alone */
  struct vkrt_reduce_pool *p = vkrt_calloc(base, 1, sizeof(*p));
  if (!p)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "reduce pool: out of host memory");
  p->base = base;
  vkrt_workers_init(&p->workers, threads - 1, "vkrt-reduce");
  *out = p;
  return VKRT_OK;
}

void vkrt_reduce_pool_destroy(struct vkrt_reduce_pool *p) {
  if (!p)
    return;
  vkrt_workers_finish(&p->workers);
  vkrt_free(p->base, p);
}

uint32_t vkrt_reduce_pool_threads(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 4 ? 1 : (uint32_t)VKRT_MIN(cpus / 2, (long)VKRT_REDUCE_POOL_MAX);
}

void vkrt_reduce_pool_run(struct vkrt_reduce_pool *p, vkrt_type type, void *dst,
                          const void *const *src, uint32_t n, uint64_t count) {
  uint64_t bytes = count * (type == VKRT_TYPE_F32 ? 4 : 2);
  if (!p || bytes < POOL_MIN_BYTES) {
    vkrt_collective_reduce_cpu(type, dst, src, n, count);
    return;
  }
  struct reduce_job job = {.type = type, .dst = dst, .src = src, .n = n, .count = count};
  vkrt_workers_run(&p->workers, reduce_part, &job);
}
