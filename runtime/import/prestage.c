/* Pre-staging: one anonymous, aligned copy of a region (copied by several threads, with
 * progress), imported by every device the policy sends there, within the budget. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "import/import.h"
#include "import/registry.h"
#include "import/policy.h"

struct progress_relay {
  struct vkrt_base *base;
  vkrt_progress_fn fn;
  void *user;
  const void *ptr;
  uint32_t next_quarter;
};

/* Forwards progress to the caller and logs every quarter of a large copy. */
static void relay_progress(void *user, uint64_t done, uint64_t total) {
  struct progress_relay *p = user;
  if (p->fn)
    p->fn(p->user, done, total);
  if (total >= (64ull << 20)) {
    uint32_t quarter = (uint32_t)(done * 4 / total);
    if (quarter >= p->next_quarter && p->next_quarter <= 4) {
      vkrt_log(p->base, VKRT_LOG_INFO, "import: pre-staging %p: %u%% (%" PRIu64 " of %" PRIu64
               " MiB)", p->ptr, quarter * 25, done >> 20, total >> 20);
      p->next_quarter = quarter + 1;
    }
  }
}

/* Anonymous, aligned, host memory for a pre-staged copy: mmap so the pages are private
 * anonymous memory every driver imports (and huge copies do not go through malloc). */
static bool prestage_alloc(struct vkrt_region *r, uint64_t bytes, uint64_t alignment,
                           uint64_t page) {
  size_t extra = alignment > page ? (size_t)(alignment - page) : 0;
  if (bytes > SIZE_MAX - extra)
    return false;
  size_t map_size = (size_t)bytes + extra;
  void *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return false;
  r->prestage_map = map;
  r->prestage_map_size = map_size;
  r->prestage_base = (uint8_t *)(uintptr_t)vkrt_align_up((uintptr_t)map, alignment);
  return true;
}

void vkrt_prestage_free(struct vkrt_import_registry *reg, struct vkrt_region *r) {
  struct vkrt_system *sys = reg->sys;
  if (r->prestage_map)
    munmap(r->prestage_map, r->prestage_map_size);
  r->prestage_map = NULL;
  r->prestage_base = NULL;
  if (r->prestage_bytes) {
    pthread_mutex_lock(&reg->budget_lock);
    reg->prestage_used -= r->prestage_bytes;
    pthread_mutex_unlock(&reg->budget_lock);
    r->prestage_bytes = 0;
  }
  vkrt_free(&sys->base, r->prestage_chunks);
  r->prestage_chunks = NULL;
  r->prestage_chunk_count = 0;
}

/* Pre-stages the region for the devices in `mask`: budget, allocation, threaded copy, then
 * one import of the copy per device. Devices it cannot serve end up staged, with why. */
void vkrt_prestage_region(struct vkrt_import_registry *reg, struct vkrt_region *r, uint32_t mask,
                            vkrt_progress_fn progress, void *progress_user) {
  struct vkrt_system *sys = reg->sys;
  struct vkrt_base *base = &sys->base;
  const struct vkrt_caps *caps[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < sys->device_count; d++)
    caps[d] = &sys->devices[d].caps;
  struct vkrt_chunk_limits limits =
      vkrt_import_limits_common(caps, sys->device_count, reg->page_size, reg->chunk_cap);
  const uint64_t alignment = VKRT_MAX(limits.page_size, limits.min_import_alignment);
  const uint64_t bytes = vkrt_align_up(r->size, alignment);
  char why[160];

  /* Budget. */
  pthread_mutex_lock(&reg->budget_lock);
  const uint64_t used = reg->prestage_used;
  const bool over = bytes > reg->prestage_budget || used > reg->prestage_budget - bytes;
  if (!over)
    reg->prestage_used += bytes;
  pthread_mutex_unlock(&reg->budget_lock);
  if (over) {
    vkrt_format(why, sizeof(why),
                "over the pre-stage budget (%" PRIu64 " MiB in use + %" PRIu64 " MiB > %" PRIu64
                " MiB); uploads use the staging ring", used >> 20, (bytes + (1 << 20) - 1) >> 20,
                reg->prestage_budget >> 20);
    vkrt_log(base, VKRT_LOG_WARN, "import: region %p: %s", (const void *)r->ptr, why);
    for (uint32_t d = 0; d < sys->device_count; d++)
      if (mask & (1u << d))
        vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s", why);
    return;
  }
  r->prestage_bytes = bytes;

  /* Allocation (fault injection: any device asking for it may make it fail). */
  bool injected = false;
  for (uint32_t d = 0; d < sys->device_count; d++)
    if ((mask & (1u << d)) && vkrt_fault(&sys->devices[d], VKRT_FAULT_PRESTAGE_ALLOC_FAILS))
      injected = true;
  if (injected || !prestage_alloc(r, bytes, alignment, reg->page_size)) {
    vkrt_format(why, sizeof(why), "pre-stage allocation of %" PRIu64 " bytes failed%s; uploads "
                "use the staging ring", bytes, injected ? " (injected)" : "");
    vkrt_log(base, VKRT_LOG_WARN, "import: region %p: %s", (const void *)r->ptr, why);
    for (uint32_t d = 0; d < sys->device_count; d++)
      if (mask & (1u << d))
        vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s", why);
    vkrt_prestage_free(reg, r);
    return;
  }

  /* The one copy. */
  uint64_t t0 = vkrt_now_ns();
  struct progress_relay relay = {.base = base, .fn = progress, .user = progress_user, .ptr = r->ptr,
                                .next_quarter = 1};
  uint32_t threads = vkrt_copy_pool_copy(&reg->copy_pool, r->prestage_base, r->ptr, r->size,
                                         relay_progress, &relay);
  uint64_t ns = vkrt_now_ns() - t0;
  if (bytes > r->size) /* the aligned tail is imported too: keep it defined */
    memset(r->prestage_base + r->size, 0, bytes - r->size);
  vkrt_log(base, VKRT_LOG_INFO, "import: region %p: pre-staged %" PRIu64 " bytes with %u threads "
           "in %.1f ms (%.2f GB/s)", (const void *)r->ptr, r->size, threads, (double)ns * 1e-6,
           ns ? (double)r->size / (double)ns : 0.0);

  struct vkrt_chunk_plan_info info;
  vkrt_status s = vkrt_region_plan(reg, (uint64_t)(uintptr_t)r->prestage_base, r->size,
                              &r->prestage_chunks, &r->prestage_chunk_count, &info, why,
                              sizeof(why));
  uint32_t served = 0;
  for (uint32_t d = 0; d < sys->device_count; d++) {
    if (!(mask & (1u << d)))
      continue;
    struct vkrt_device *dev = &sys->devices[d];
    if (s != VKRT_OK) {
      vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "pre-staged copy cannot be chunked: %s", why);
      continue;
    }
    uint32_t failed;
    VkResult vr = vkrt_region_import_chunks(reg, dev, &r->dev[d], r->prestage_chunks, r->prestage_chunk_count,
                                (uint64_t)(uintptr_t)r->prestage_base, false, &failed);
    if (vr != VK_SUCCESS) {
      vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED,
               "import of the pre-staged copy failed at chunk %u/%u: %s; uploads use the "
               "staging ring", failed, r->prestage_chunk_count, vkrt_vk_result_str(vr));
      vkrt_log(base, VKRT_LOG_WARN, "dev%u: region %p: %s", d, (const void *)r->ptr, r->reason[d]);
      continue;
    }
    served++;
    /* Keep the earlier reason (why import failed) in front when there is one. */
    char earlier[160];
    vkrt_format(earlier, sizeof(earlier), "%s", r->reason[d]);
    vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_PRESTAGED, "%s%spre-staged: one anonymous copy, %u chunk(s)",
             earlier, earlier[0] ? "; " : "", r->prestage_chunk_count);
  }
  if (!served)
    vkrt_prestage_free(reg, r);
}

