/* Host region registry: vkrt_host_register / vkrt_host_unregister, the import policies,
 * pre-staging into one anonymous copy shared by every device, and the describe output. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "import/import.h"
#include "import/host_maps.h"
#include "import/policy.h"

#define REG_USAGE                                                                        \
  (VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |                 \
   VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)

const char *vkrt_import_path_str(vkrt_import_path path) {
  switch (path) {
  case VKRT_IMPORT_PATH_IMPORTED: return "imported";
  case VKRT_IMPORT_PATH_PRESTAGED: return "prestaged";
  case VKRT_IMPORT_PATH_STAGED: return "staged";
  }
  return "?";
}

const char *vkrt_import_policy_str(vkrt_import_policy policy) {
  return vkrt_import_policy_name((uint32_t)policy);
}

vkrt_import_policy vkrt_import_policy_get(const vkrt_appliance *app) {
  if (app && app->registry)
    return (vkrt_import_policy)app->registry->policy;
  return (vkrt_import_policy)CONFIG_VKRT_IMPORT_POLICY_ID;
}

/* Host-pointer import usable on this device (extension present, not hidden, buffers with
 * HOST_ALLOCATION handles supported). */
static bool can_import(const struct vkrt_device *dev) {
  return dev->caps.external_memory_host && dev->vk.vkGetMemoryHostPointerPropertiesEXT &&
         (dev->caps.host_buffer_import_handles & VKRT_HANDLE_HOST_ALLOCATION) &&
         !vkrt_fault(dev, VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST);
}

/* ---- open / close ---------------------------------------------------------------------- */

vkrt_status vkrt_registry_open(struct vkrt_appliance *app) {
  struct vkrt_base *base = &app->base;
  struct vkrt_import_registry *reg = vkrt_calloc(base, 1, sizeof(*reg));
  if (!reg)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "import: out of host memory");
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  /* 16 uploading threads must not starve a registering one. */
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&reg->lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  pthread_mutex_init(&reg->drain_lock, NULL);
  pthread_cond_init(&reg->drain_cond, NULL);
  pthread_mutex_init(&reg->budget_lock, NULL);
  vkrt_region_table_init(&reg->table, base);
  reg->policy = CONFIG_VKRT_IMPORT_POLICY_ID;
  reg->chunk_cap = VKRT_IMPORT_CHUNK_CAP_BYTES;
  reg->prestage_threads = VKRT_PRESTAGE_THREADS;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  if (app->options.faults.import_policy_override) {
    uint32_t p = app->options.faults.import_policy_override - 1;
    if (p >= VKRT_IMPORT_POLICY_COUNT) {
      vkrt_free(base, reg);
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                        "import: policy override %u is not 1 + a vkrt_import_policy",
                        app->options.faults.import_policy_override);
    }
    reg->policy = p;
  }
  if (app->options.faults.import_chunk_cap)
    reg->chunk_cap = app->options.faults.import_chunk_cap;
#endif
  long page = sysconf(_SC_PAGESIZE);
  reg->page_size = page > 0 ? (uint64_t)page : 4096;
  const struct vkrt_caps *caps[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < app->device_count; d++)
    caps[d] = &app->devices[d].caps;
  reg->prestage_budget = vkrt_prestage_budget(VKRT_PRESTAGE_BUDGET_BYTES, caps, app->device_count);
  /* The caller's thread copies too, so threads - 1 helpers. */
  vkrt_copy_pool_init(&reg->copy_pool, reg->prestage_threads - 1);
  app->registry = reg;
  vkrt_log(base, VKRT_LOG_INFO,
           "import: policy %s, pre-stage budget %" PRIu64 " MiB, %u copy threads, chunk cap %" PRIu64
           " KiB",
           vkrt_import_policy_name(reg->policy), reg->prestage_budget >> 20, reg->prestage_threads,
           reg->chunk_cap >> 10);
  return VKRT_OK;
}

static void region_destroy(struct vkrt_appliance *app, struct vkrt_region *r);

void vkrt_registry_close(struct vkrt_appliance *app) {
  struct vkrt_import_registry *reg = app->registry;
  if (!reg)
    return;
  if (reg->table.count)
    vkrt_log(&app->base, VKRT_LOG_INFO, "import: %u region(s) still registered at close; "
             "unregistering them", reg->table.count);
  for (uint32_t i = reg->table.count; i-- > 0;)
    region_destroy(app, reg->table.entries[i].value);
  if (atomic_load(&reg->live_chunks) != 0)
    vkrt_log(&app->base, VKRT_LOG_ERROR, "import: %ld imported chunk(s) still alive at close",
             atomic_load(&reg->live_chunks));
  vkrt_region_table_finish(&reg->table);
  vkrt_copy_pool_finish(&reg->copy_pool);
  pthread_rwlock_destroy(&reg->lock);
  pthread_mutex_destroy(&reg->drain_lock);
  pthread_cond_destroy(&reg->drain_cond);
  pthread_mutex_destroy(&reg->budget_lock);
  vkrt_free(&app->base, reg);
  app->registry = NULL;
}

/* ---- chunk import ----------------------------------------------------------------------- */

static void free_device_chunks(struct vkrt_device *dev, struct vkrt_region_device *rd) {
  /* Either array may be missing: import_chunks lands here when allocating one of them fails. */
  for (uint32_t k = 0; k < rd->chunk_count; k++) {
    if (rd->buffers && rd->buffers[k])
      dev->vk.vkDestroyBuffer(dev->handle, rd->buffers[k], NULL);
    if (rd->memories && rd->memories[k]) {
      dev->vk.vkFreeMemory(dev->handle, rd->memories[k], NULL);
      atomic_fetch_sub(&dev->app->registry->live_chunks, 1);
    }
  }
  vkrt_free(&dev->app->base, rd->buffers);
  vkrt_free(&dev->app->base, rd->memories);
  rd->buffers = NULL;
  rd->memories = NULL;
  rd->chunks = NULL;
  rd->chunk_count = 0;
}

/* Who refuses file-backed pages, for messages: the driver, or the fault acting as one. */
static const char *refuser(const struct vkrt_device *dev) {
  return dev->caps.refuses_file_backed_fault ? "this device (VKRT_FAULT_REFUSE_FILE_BACKED)"
                                             : dev->caps.driver_name;
}

/* Imports one aligned host range as a VkBuffer bound to VkDeviceMemory. */
static VkResult import_one(struct vkrt_device *dev, uint64_t addr, uint64_t size, bool injectable,
                           VkBuffer *out_buffer, VkDeviceMemory *out_memory) {
  *out_buffer = VK_NULL_HANDLE;
  *out_memory = VK_NULL_HANDLE;
  if (injectable && vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS))
    return VK_ERROR_OUT_OF_DEVICE_MEMORY; /* what NVIDIA returns for file-backed pages */
  if (vkrt_fault(dev, VKRT_FAULT_REFUSE_FILE_BACKED) &&
      vkrt_host_range_file_backed(addr, addr + size))
    return VK_ERROR_OUT_OF_DEVICE_MEMORY; /* the refusing driver, faithfully */
  return vkrt_device_import_host_pointer(dev, (void *)(uintptr_t)addr, size, REG_USAGE, 0,
                                         out_buffer, out_memory);
}

/* NVIDIA 580.159 on the H200: an import issued right after a refused one (file-backed pages)
 * was refused too, even for anonymous memory that imports fine a moment later. So a refused
 * import is retried after the device's queues drain and a short pause; the attempts are
 * logged so the GPU runs show whether the retry is what helped. */
static VkResult import_one_settled(struct vkrt_device *dev, uint64_t addr, uint64_t size,
                                   bool injectable, VkBuffer *out_buffer,
                                   VkDeviceMemory *out_memory) {
  VkResult r = import_one(dev, addr, size, injectable, out_buffer, out_memory);
  if (injectable && vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS))
    return r;
  for (int attempt = 2; r == VK_ERROR_OUT_OF_DEVICE_MEMORY && attempt <= 3; attempt++) {
    pthread_mutex_lock(&dev->compute_queue_lock);
    bool separate = dev->transfer_lock && dev->transfer_lock != &dev->compute_queue_lock;
    if (separate)
      pthread_mutex_lock(dev->transfer_lock);
    dev->vk.vkDeviceWaitIdle(dev->handle);
    if (separate)
      pthread_mutex_unlock(dev->transfer_lock);
    pthread_mutex_unlock(&dev->compute_queue_lock);
    usleep(2000u * (unsigned)attempt);
    r = import_one(dev, addr, size, injectable, out_buffer, out_memory);
    vkrt_log(&dev->app->base, VKRT_LOG_INFO, "dev%u: host pointer import of %#" PRIx64 " (%" PRIu64
             " bytes) attempt %d after a refusal: %s", dev->index, addr, size, attempt,
             vkrt_vk_result_str(r));
  }
  return r;
}

/* Imports every chunk of a plan into dev. On failure frees what it made and reports the
 * failing chunk; VK_ERROR_OUT_OF_HOST_MEMORY when the arrays cannot be allocated. */
static VkResult import_chunks(struct vkrt_device *dev, struct vkrt_region_device *rd,
                              const struct vkrt_chunk *chunks, uint32_t count, uint64_t host_base,
                              bool injectable, uint32_t *failed_chunk) {
  struct vkrt_base *base = &dev->app->base;
  *failed_chunk = 0;
  rd->chunks = chunks;
  rd->chunk_count = count;
  rd->host_base = host_base;
  rd->buffers = vkrt_calloc(base, count, sizeof(VkBuffer));
  rd->memories = vkrt_calloc(base, count, sizeof(VkDeviceMemory));
  if (!rd->buffers || !rd->memories) {
    free_device_chunks(dev, rd);
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
  for (uint32_t k = 0; k < count; k++) {
    VkResult r = import_one_settled(dev, chunks[k].import_addr, chunks[k].import_size, injectable,
                            &rd->buffers[k], &rd->memories[k]);
    if (r == VK_SUCCESS)
      atomic_fetch_add(&dev->app->registry->live_chunks, 1);
    if (r != VK_SUCCESS) {
      *failed_chunk = k;
      free_device_chunks(dev, rd);
      return r;
    }
  }
  return VK_SUCCESS;
}

/* ---- pre-stage copy --------------------------------------------------------------------- */

#define COPY_BLOCK (4ull << 20)

struct copy_job {
  uint8_t *dst;
  const uint8_t *src;
  uint64_t size;
  atomic_uint_fast64_t next_block;
  atomic_uint_fast64_t done;
};

static void copy_blocks(struct copy_job *job, bool report, vkrt_progress_fn progress, void *user) {
  const uint64_t blocks = (job->size + COPY_BLOCK - 1) / COPY_BLOCK;
  for (;;) {
    uint64_t b = atomic_fetch_add(&job->next_block, 1);
    if (b >= blocks)
      return;
    uint64_t off = b * COPY_BLOCK;
    uint64_t n = VKRT_MIN(COPY_BLOCK, job->size - off);
    memcpy(job->dst + off, job->src + off, n);
    uint64_t done = atomic_fetch_add(&job->done, n) + n;
    if (report && progress)
      progress(user, done, job->size);
  }
}

static void *copy_thread(void *arg) {
  copy_blocks(arg, false, NULL, NULL);
  return NULL;
}

uint32_t vkrt_import_parallel_copy(void *dst, const void *src, uint64_t size, uint32_t threads,
                                   vkrt_progress_fn progress, void *progress_user) {
  struct copy_job job = {.dst = dst, .src = src, .size = size};
  atomic_init(&job.next_block, 0);
  atomic_init(&job.done, 0);
  uint64_t blocks = (size + COPY_BLOCK - 1) / COPY_BLOCK;
  if (threads > 64)
    threads = 64;
  if (threads > blocks)
    threads = (uint32_t)(blocks ? blocks : 1);
  if (threads == 0)
    threads = 1;
  pthread_t tid[64];
  uint32_t started = 0;
  for (uint32_t t = 1; t < threads; t++) {
    if (pthread_create(&tid[started], NULL, copy_thread, &job) != 0)
      break; /* fewer threads: the caller's thread still copies everything left */
    started++;
  }
  copy_blocks(&job, true, progress, progress_user);
  for (uint32_t t = 0; t < started; t++)
    pthread_join(tid[t], NULL);
  if (progress)
    progress(progress_user, size, size);
  return started + 1;
}

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

static void prestage_free(struct vkrt_appliance *app, struct vkrt_region *r) {
  struct vkrt_import_registry *reg = app->registry;
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
  vkrt_free(&app->base, r->prestage_chunks);
  r->prestage_chunks = NULL;
  r->prestage_chunk_count = 0;
}

/* ---- register / unregister ------------------------------------------------------------- */

static void region_destroy(struct vkrt_appliance *app, struct vkrt_region *r) {
  if (!r)
    return;
  for (uint32_t d = 0; d < app->device_count; d++) {
    if (r->published && r->dev[d].chunks)
      atomic_fetch_sub(&app->registry->regions_by_path[d][r->dev[d].path], 1);
    free_device_chunks(&app->devices[d], &r->dev[d]);
  }
  prestage_free(app, r);
  vkrt_free(&app->base, r->chunks);
  vkrt_free(&app->base, r);
}

/* Plans [addr, addr + size) with limits every device accepts into a fresh array. */
static vkrt_status plan_region(struct vkrt_appliance *app, uint64_t addr, uint64_t size,
                               struct vkrt_chunk **out, uint32_t *count,
                               struct vkrt_chunk_plan_info *info, char *why, size_t why_size) {
  *out = NULL;
  *count = 0;
  const struct vkrt_caps *caps[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < app->device_count; d++)
    caps[d] = &app->devices[d].caps;
  struct vkrt_chunk_limits limits = vkrt_import_limits_common(
      caps, app->device_count, app->registry->page_size, app->registry->chunk_cap);
  vkrt_status s = vkrt_chunk_plan(addr, size, &limits, NULL, 0, info, why, why_size);
  if (s != VKRT_OK)
    return s;
  struct vkrt_chunk *chunks = vkrt_calloc(&app->base, info->count, sizeof(*chunks));
  if (!chunks) {
    vkrt_format(why, why_size, "out of host memory for %u chunks", info->count);
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  }
  s = vkrt_chunk_plan(addr, size, &limits, chunks, info->count, info, why, why_size);
  if (s != VKRT_OK) {
    vkrt_free(&app->base, chunks);
    return s;
  }
  *out = chunks;
  *count = info->count;
  return VKRT_OK;
}

static void set_path(struct vkrt_region *r, uint32_t d, vkrt_import_path path, const char *fmt, ...)
    VKRT_PRINTF(4, 5);
static void set_path(struct vkrt_region *r, uint32_t d, vkrt_import_path path, const char *fmt, ...) {
  r->dev[d].path = path;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason[d], sizeof(r->reason[d]), fmt, ap);
  va_end(ap);
}

/* Pre-stages the region for the devices in `mask`: budget, allocation, threaded copy, then
 * one import of the copy per device. Devices it cannot serve end up staged, with why. */
static void prestage_region(struct vkrt_appliance *app, struct vkrt_region *r, uint32_t mask,
                            vkrt_progress_fn progress, void *progress_user) {
  struct vkrt_import_registry *reg = app->registry;
  struct vkrt_base *base = &app->base;
  const struct vkrt_caps *caps[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < app->device_count; d++)
    caps[d] = &app->devices[d].caps;
  struct vkrt_chunk_limits limits =
      vkrt_import_limits_common(caps, app->device_count, reg->page_size, reg->chunk_cap);
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
    for (uint32_t d = 0; d < app->device_count; d++)
      if (mask & (1u << d))
        set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s", why);
    return;
  }
  r->prestage_bytes = bytes;

  /* Allocation (fault injection: any device asking for it may make it fail). */
  bool injected = false;
  for (uint32_t d = 0; d < app->device_count; d++)
    if ((mask & (1u << d)) && vkrt_fault(&app->devices[d], VKRT_FAULT_PRESTAGE_ALLOC_FAILS))
      injected = true;
  if (injected || !prestage_alloc(r, bytes, alignment, reg->page_size)) {
    vkrt_format(why, sizeof(why), "pre-stage allocation of %" PRIu64 " bytes failed%s; uploads "
                "use the staging ring", bytes, injected ? " (injected)" : "");
    vkrt_log(base, VKRT_LOG_WARN, "import: region %p: %s", (const void *)r->ptr, why);
    for (uint32_t d = 0; d < app->device_count; d++)
      if (mask & (1u << d))
        set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s", why);
    prestage_free(app, r);
    return;
  }

  /* The one copy. */
  uint64_t t0 = vkrt_now_ns();
  struct progress_relay relay = {.base = base, .fn = progress, .user = progress_user, .ptr = r->ptr,
                                .next_quarter = 1};
  uint32_t threads = vkrt_import_parallel_copy(r->prestage_base, r->ptr, r->size,
                                               reg->prestage_threads, relay_progress, &relay);
  uint64_t ns = vkrt_now_ns() - t0;
  if (bytes > r->size) /* the aligned tail is imported too: keep it defined */
    memset(r->prestage_base + r->size, 0, bytes - r->size);
  vkrt_log(base, VKRT_LOG_INFO, "import: region %p: pre-staged %" PRIu64 " bytes with %u threads "
           "in %.1f ms (%.2f GB/s)", (const void *)r->ptr, r->size, threads, (double)ns * 1e-6,
           ns ? (double)r->size / (double)ns : 0.0);

  struct vkrt_chunk_plan_info info;
  vkrt_status s = plan_region(app, (uint64_t)(uintptr_t)r->prestage_base, r->size,
                              &r->prestage_chunks, &r->prestage_chunk_count, &info, why,
                              sizeof(why));
  uint32_t served = 0;
  for (uint32_t d = 0; d < app->device_count; d++) {
    if (!(mask & (1u << d)))
      continue;
    struct vkrt_device *dev = &app->devices[d];
    if (s != VKRT_OK) {
      set_path(r, d, VKRT_IMPORT_PATH_STAGED, "pre-staged copy cannot be chunked: %s", why);
      continue;
    }
    uint32_t failed;
    VkResult vr = import_chunks(dev, &r->dev[d], r->prestage_chunks, r->prestage_chunk_count,
                                (uint64_t)(uintptr_t)r->prestage_base, false, &failed);
    if (vr != VK_SUCCESS) {
      set_path(r, d, VKRT_IMPORT_PATH_STAGED,
               "import of the pre-staged copy failed at chunk %u/%u: %s; uploads use the "
               "staging ring", failed, r->prestage_chunk_count, vkrt_vk_result_str(vr));
      vkrt_log(base, VKRT_LOG_WARN, "dev%u: region %p: %s", d, (const void *)r->ptr, r->reason[d]);
      continue;
    }
    served++;
    /* Keep the earlier reason (why import failed) in front when there is one. */
    char earlier[160];
    vkrt_format(earlier, sizeof(earlier), "%s", r->reason[d]);
    set_path(r, d, VKRT_IMPORT_PATH_PRESTAGED, "%s%spre-staged: one anonymous copy, %u chunk(s)",
             earlier, earlier[0] ? "; " : "", r->prestage_chunk_count);
  }
  if (!served)
    prestage_free(app, r);
}

vkrt_status vkrt_host_register(vkrt_appliance *app, const void *ptr, uint64_t size,
                               vkrt_progress_fn progress, void *progress_user,
                               vkrt_register_info *info) {
  if (info)
    memset(info, 0, sizeof(*info));
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_base *base = &app->base;
  struct vkrt_import_registry *reg = app->registry;
  if (!reg)
    return vkrt_error(base, VKRT_ERROR_INTERNAL, "host register: import module not open");
  if (!ptr)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "host register: NULL pointer");
  if (size == 0)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "host register: %p: zero size", ptr);
  const uint64_t addr = (uint64_t)(uintptr_t)ptr;
  uint64_t end;
  if (!vkrt_add_u64(addr, size, &end))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "host register: %p + %" PRIu64 " wraps the address space", ptr, size);

  /* Refuse overlaps before doing any work (checked again at insert). */
  pthread_rwlock_rdlock(&reg->lock);
  int64_t ov = vkrt_region_table_find_overlap(&reg->table, addr, end);
  uint64_t ov_b = ov >= 0 ? reg->table.entries[ov].begin : 0, ov_e = ov >= 0 ? reg->table.entries[ov].end : 0;
  pthread_rwlock_unlock(&reg->lock);
  if (ov >= 0)
    return vkrt_error(base, VKRT_ERROR_ALREADY_EXISTS,
                      "host register: [%p, +%" PRIu64 ") overlaps the registered region [0x%" PRIx64
                      ", 0x%" PRIx64 ")", ptr, size, ov_b, ov_e);

  struct vkrt_region *r = vkrt_calloc(base, 1, sizeof(*r));
  if (!r)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "host register: out of host memory");
  r->ptr = ptr;
  r->size = size;
  atomic_init(&r->users, 0);
  const uint32_t policy = reg->policy;
  const char *pname = vkrt_import_policy_name(policy);
  vkrt_status s = VKRT_OK;
  uint32_t prestage_mask = 0;

  if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY || policy == VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE) {
    char why[160];
    struct vkrt_chunk_plan_info pinfo;
    vkrt_status ps = plan_region(app, addr, size, &r->chunks, &r->chunk_count, &pinfo, why, sizeof(why));
    if (ps == VKRT_OK && pinfo.unimportable)
      vkrt_format(why, sizeof(why), "%u chunk(s) would import bytes outside the caller's pages "
                  "(import alignment %" PRIu64 " > page size %" PRIu64 ")", pinfo.unimportable,
                  pinfo.alignment, reg->page_size);
    const bool plannable = ps == VKRT_OK && !pinfo.unimportable;
    /* Asked once per region: only a driver known to refuse file-backed pages cares. */
    int file_backed = -1;
    if (ps == VKRT_ERROR_INVALID_ARGUMENT || ps == VKRT_ERROR_OUT_OF_HOST_MEMORY) {
      s = vkrt_error(base, ps, "host register: %p: %s", ptr, why);
      goto fail;
    }
    for (uint32_t d = 0; d < app->device_count; d++) {
      struct vkrt_device *dev = &app->devices[d];
      const char *cannot = NULL;
      if (!can_import(dev))
        cannot = "VK_EXT_external_memory_host unavailable";
      else if (!plannable)
        cannot = why;
      if (cannot) {
        if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY) {
          s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "dev%u: host register %p: cannot import "
                         "(%s); policy import-only", d, ptr, cannot);
          goto fail;
        }
        if (!can_import(dev)) {
          set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s; uploads use the staging ring", cannot);
        } else {
          set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s", cannot);
          prestage_mask |= 1u << d;
        }
        continue;
      }
      if (vkrt_import_file_backed_refused(&dev->caps) && !vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS)) {
        if (file_backed < 0)
          file_backed = vkrt_host_range_file_backed(addr, addr + size);
        if (file_backed && policy == VKRT_IMPORT_POLICY_IMPORT_ONLY) {
          s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "dev%u: host register %p: file-backed pages, "
                         "which %s refuses to import; policy import-only (not tried: a refusal "
                         "made later imports fail on NVIDIA 580)", d, ptr, refuser(dev));
          goto fail;
        }
        if (file_backed) {
          set_path(r, d, VKRT_IMPORT_PATH_STAGED, "file-backed pages, which %s refuses to import "
                   "(and a refusal made later imports fail on NVIDIA 580), so not tried",
                   refuser(dev));
          prestage_mask |= 1u << d;
          continue;
        }
      }
      uint32_t failed;
      VkResult vr = import_chunks(dev, &r->dev[d], r->chunks, r->chunk_count, addr, true, &failed);
      if (vr == VK_SUCCESS) {
        set_path(r, d, VKRT_IMPORT_PATH_IMPORTED, "caller's pages imported: %u chunk(s) of <= %"
                 PRIu64 " bytes", r->chunk_count, pinfo.chunk_limit);
        continue;
      }
      if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY) {
        s = vkrt_error(base, vkrt_vk_status(vr), "dev%u: host pointer import of %p chunk %u/%u "
                       "failed: %s; policy import-only", d, ptr, failed, r->chunk_count,
                       vkrt_vk_result_str(vr));
        goto fail;
      }
      vkrt_log(base, VKRT_LOG_WARN, "dev%u: host pointer import of %p chunk %u/%u failed: %s; "
               "falling back to prestage", d, ptr, failed, r->chunk_count, vkrt_vk_result_str(vr));
      set_path(r, d, VKRT_IMPORT_PATH_STAGED, "import failed at chunk %u/%u: %s", failed,
               r->chunk_count, vkrt_vk_result_str(vr));
      prestage_mask |= 1u << d;
    }
  } else if (policy == VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE) {
    for (uint32_t d = 0; d < app->device_count; d++) {
      if (can_import(&app->devices[d])) {
        prestage_mask |= 1u << d;
        r->reason[d][0] = '\0';
      } else {
        set_path(r, d, VKRT_IMPORT_PATH_STAGED, "VK_EXT_external_memory_host unavailable; "
                 "uploads use the staging ring");
      }
    }
  } else {
    for (uint32_t d = 0; d < app->device_count; d++)
      set_path(r, d, VKRT_IMPORT_PATH_STAGED, "policy staging-only: uploads use the staging ring");
  }
  if (prestage_mask)
    prestage_region(app, r, prestage_mask, progress, progress_user);
  /* Chunks over the caller's pages no device uses are not kept. */
  bool direct_used = false;
  for (uint32_t d = 0; d < app->device_count; d++)
    direct_used |= r->dev[d].path == VKRT_IMPORT_PATH_IMPORTED;
  if (!direct_used) {
    vkrt_free(base, r->chunks);
    r->chunks = NULL;
    r->chunk_count = 0;
  }

  /* Decisions are final: report them, then publish (after publishing, another thread may
   * already unregister the region). */
  for (uint32_t d = 0; d < app->device_count; d++) {
    vkrt_log(base, VKRT_LOG_INFO, "dev%u: host region [%p, +%" PRIu64 "): %s (policy %s): %s", d,
             ptr, size, vkrt_import_path_str(r->dev[d].path), pname, r->reason[d]);
    if (r->dev[d].chunks && CONFIG_VKRT_LOG_LEVEL >= VKRT_LOG_DEBUG) {
      for (uint32_t k = 0; k < r->dev[d].chunk_count; k++) {
        const struct vkrt_chunk *c = &r->dev[d].chunks[k];
        vkrt_log(base, VKRT_LOG_DEBUG, "dev%u: region %p chunk %u: bytes [%" PRIu64 ", %" PRIu64
                 ") %s from 0x%" PRIx64 " +%" PRIu64, d, ptr, k, c->begin, c->end,
                 vkrt_import_path_str(r->dev[d].path), c->import_addr, c->import_size);
      }
    }
  }
  if (info) {
    for (uint32_t d = 0; d < app->device_count && d < VKRT_MAX_DEVICES; d++) {
      info->path[d] = r->dev[d].path;
      vkrt_format(info->reason[d], sizeof(info->reason[d]), "%s", r->reason[d]);
      if (r->dev[d].chunk_count > info->chunk_count)
        info->chunk_count = r->dev[d].chunk_count;
    }
  }
  pthread_rwlock_wrlock(&reg->lock);
  s = vkrt_region_table_reserve(&reg->table, 1);
  if (s == VKRT_OK)
    s = vkrt_region_table_insert(&reg->table, addr, size, r);
  if (s == VKRT_OK) {
    r->published = true;
    for (uint32_t d = 0; d < app->device_count; d++)
      if (r->dev[d].chunks)
        atomic_fetch_add(&reg->regions_by_path[d][r->dev[d].path], 1);
  }
  pthread_rwlock_unlock(&reg->lock);
  if (s != VKRT_OK) {
    if (info)
      memset(info, 0, sizeof(*info));
    s = vkrt_error(base, s, "host register: [%p, +%" PRIu64 ") %s", ptr, size,
                   s == VKRT_ERROR_ALREADY_EXISTS ? "overlaps a region registered meanwhile"
                                                  : "cannot grow the region table");
    goto fail;
  }
  return VKRT_OK;

fail:
  region_destroy(app, r);
  return s;
}

vkrt_status vkrt_host_unregister(vkrt_appliance *app, const void *ptr) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_import_registry *reg = app->registry;
  if (!reg)
    return vkrt_error(&app->base, VKRT_ERROR_INTERNAL, "host unregister: import module not open");
  if (!ptr)
    return vkrt_error(&app->base, VKRT_ERROR_INVALID_ARGUMENT, "host unregister: NULL pointer");
  const uint64_t addr = (uint64_t)(uintptr_t)ptr;
  pthread_rwlock_wrlock(&reg->lock);
  struct vkrt_region *r = vkrt_region_table_remove(&reg->table, addr);
  int64_t inside = r ? -1 : vkrt_region_table_find(&reg->table, addr);
  uint64_t inside_begin = inside >= 0 ? reg->table.entries[inside].begin : 0;
  pthread_rwlock_unlock(&reg->lock);
  if (!r) {
    if (inside >= 0)
      return vkrt_error(&app->base, VKRT_ERROR_NOT_FOUND, "host unregister: %p is inside the "
                        "region registered at 0x%" PRIx64 ", not its start", ptr, inside_begin);
    return vkrt_error(&app->base, VKRT_ERROR_NOT_FOUND, "host unregister: %p was never registered",
                      ptr);
  }
  /* Out of the table: no new upload can find it. Wait for the ones DMAing from it. */
  pthread_mutex_lock(&reg->drain_lock);
  while (atomic_load(&r->users) != 0)
    pthread_cond_wait(&reg->drain_cond, &reg->drain_lock);
  pthread_mutex_unlock(&reg->drain_lock);
  vkrt_log(&app->base, VKRT_LOG_DEBUG, "host region %p unregistered", ptr);
  region_destroy(app, r);
  return VKRT_OK;
}

struct vkrt_region *vkrt_region_acquire(struct vkrt_appliance *app, uint32_t device,
                                        const void *src, uint64_t size) {
  struct vkrt_import_registry *reg = app->registry;
  if (!reg)
    return NULL;
  pthread_rwlock_rdlock(&reg->lock);
  struct vkrt_region *r = vkrt_region_table_lookup(&reg->table, (uint64_t)(uintptr_t)src, size);
  if (r && r->dev[device].chunks)
    atomic_fetch_add(&r->users, 1);
  else
    r = NULL;
  pthread_rwlock_unlock(&reg->lock);
  return r;
}

/* The last user wakes the drain waiters without touching the region again: once `users`
 * reaches 0 an unregister may free it at once (reading r->removed after the decrement was a
 * use-after-free). The broadcast takes drain_lock, which unregister holds between its check of
 * `users` and its wait, so the wakeup cannot be lost. */
void vkrt_region_release(struct vkrt_appliance *app, struct vkrt_region *r) {
  if (atomic_fetch_sub(&r->users, 1) != 1)
    return;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  /* Widens the window a concurrent unregister has to free the region (stress test). */
  if (app->options.faults.release_delay_us)
    nanosleep(&(struct timespec){.tv_nsec = (long)app->options.faults.release_delay_us * 1000},
              NULL);
#endif
  struct vkrt_import_registry *reg = app->registry;
  pthread_mutex_lock(&reg->drain_lock);
  pthread_cond_broadcast(&reg->drain_cond);
  pthread_mutex_unlock(&reg->drain_lock);
}

uint64_t vkrt_import_prestage_bytes(const struct vkrt_appliance *app) {
  struct vkrt_import_registry *reg = app->registry;
  if (!reg)
    return 0;
  pthread_mutex_lock(&reg->budget_lock);
  uint64_t v = reg->prestage_used;
  pthread_mutex_unlock(&reg->budget_lock);
  return v;
}

vkrt_status vkrt_upload_counters_get(const vkrt_appliance *app, vkrt_upload_counters *out) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!out)
    return vkrt_error((struct vkrt_base *)&app->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "upload counters: out is NULL");
  memset(out, 0, sizeof(*out));
  struct vkrt_import_registry *reg = app->registry;
  if (!reg)
    return VKRT_OK;
  out->imported_bytes = atomic_load(&reg->path_bytes[VKRT_IMPORT_PATH_IMPORTED]);
  out->imported_copies = atomic_load(&reg->path_copies[VKRT_IMPORT_PATH_IMPORTED]);
  out->prestaged_bytes = atomic_load(&reg->path_bytes[VKRT_IMPORT_PATH_PRESTAGED]);
  out->prestaged_copies = atomic_load(&reg->path_copies[VKRT_IMPORT_PATH_PRESTAGED]);
  out->staged_bytes = atomic_load(&reg->path_bytes[VKRT_IMPORT_PATH_STAGED]);
  out->staged_copies = atomic_load(&reg->path_copies[VKRT_IMPORT_PATH_STAGED]);
  out->straddles_split = atomic_load(&reg->straddles_split);
  out->copies_past_chunk = atomic_load(&reg->copies_past_chunk);
  return VKRT_OK;
}

long vkrt_import_live_chunks(const struct vkrt_appliance *app) {
  return app->registry ? atomic_load(&app->registry->live_chunks) : 0;
}

uint32_t vkrt_import_region_count(const struct vkrt_appliance *app) {
  struct vkrt_import_registry *reg = app->registry;
  if (!reg)
    return 0;
  pthread_rwlock_rdlock(&reg->lock);
  uint32_t n = reg->table.count;
  pthread_rwlock_unlock(&reg->lock);
  return n;
}

/* ---- describe ------------------------------------------------------------------------- */


size_t vkrt_import_describe(const struct vkrt_appliance *app, bool json, char *buf, size_t size) {
  struct vkrt_text o = {.buf = buf, .size = size};
  if (size)
    buf[0] = '\0';
  const struct vkrt_import_registry *reg = app->registry;
  const uint32_t policy = reg ? reg->policy : CONFIG_VKRT_IMPORT_POLICY_ID;
  const uint64_t cap = reg ? reg->chunk_cap : VKRT_IMPORT_CHUNK_CAP_BYTES;
  const uint64_t page = reg ? reg->page_size : 4096;
  const uint64_t budget = reg ? reg->prestage_budget : VKRT_PRESTAGE_BUDGET_BYTES;
  const uint64_t used = reg ? vkrt_import_prestage_bytes(app) : 0;
  const uint32_t regions = reg ? vkrt_import_region_count(app) : 0;
  vkrt_upload_counters uc;
  vkrt_upload_counters_get(app, &uc);
  if (json)
    vkrt_text_put(&o, "\"import\": {\"policy\": \"%s\", \"prestage_budget_bytes\": %" PRIu64
        ", \"prestage_bytes_in_use\": %" PRIu64 ", \"prestage_threads\": %u, \"chunk_cap_bytes\": %"
        PRIu64 ", \"staging_slot_bytes\": %llu, \"staging_slots\": %d, \"upload_contexts\": %d, "
        "\"regions\": %u, \"upload_counters\": {\"imported_bytes\": %" PRIu64
        ", \"imported_copies\": %" PRIu64 ", \"prestaged_bytes\": %" PRIu64
        ", \"prestaged_copies\": %" PRIu64 ", \"staged_bytes\": %" PRIu64
        ", \"staged_copies\": %" PRIu64 ", \"straddles_split\": %" PRIu64
        ", \"copies_past_chunk\": %" PRIu64 "}, \"devices\": [",
        vkrt_import_policy_name(policy), budget, used, reg ? reg->prestage_threads : 0, cap,
        (unsigned long long)CONFIG_VKRT_STAGING_SLOT_KB << 10, CONFIG_VKRT_STAGING_SLOTS,
        CONFIG_VKRT_UPLOAD_CONTEXTS, regions, uc.imported_bytes, uc.imported_copies,
        uc.prestaged_bytes, uc.prestaged_copies, uc.staged_bytes, uc.staged_copies,
        uc.straddles_split, uc.copies_past_chunk);
  else
    vkrt_text_put(&o, "vkrt: import policy %s, pre-stage budget %" PRIu64 " MiB (%" PRIu64 " MiB in use), "
        "staging ring %d x %d KiB, %d upload contexts per device, %u region(s) registered; "
        "uploads: %" PRIu64 " B in %" PRIu64 " copies from imported chunks, %" PRIu64 " B in %"
        PRIu64 " from pre-staged chunks, %" PRIu64 " B in %" PRIu64 " through staging, %" PRIu64
        " straddles split, %" PRIu64 " copies past a chunk\n",
        vkrt_import_policy_name(policy), budget >> 20, used >> 20, CONFIG_VKRT_STAGING_SLOTS,
        CONFIG_VKRT_STAGING_SLOT_KB, CONFIG_VKRT_UPLOAD_CONTEXTS, regions, uc.imported_bytes,
        uc.imported_copies, uc.prestaged_bytes, uc.prestaged_copies, uc.staged_bytes,
        uc.staged_copies, uc.straddles_split, uc.copies_past_chunk);
  for (uint32_t d = 0; d < app->device_count; d++) {
    const struct vkrt_device *dev = &app->devices[d];
    const bool usable = can_import(dev);
    char why[200];
    vkrt_import_path path = vkrt_import_expect(&dev->caps, usable, policy, why, sizeof(why));
    struct vkrt_chunk_limits l = vkrt_import_limits(&dev->caps, page, cap);
    uint64_t limit = vkrt_chunk_limit(&l);
    uint32_t n[3] = {0, 0, 0};
    if (reg)
      for (int p = 0; p < 3; p++)
        n[p] = atomic_load(&((struct vkrt_import_registry *)reg)->regions_by_path[d][p]);
    if (json)
      vkrt_text_put(&o, "%s{\"device\": %u, \"file_backed_path\": \"%s\", \"why\": \"%s\", "
          "\"external_memory_host\": %s, \"min_imported_host_pointer_alignment\": %" PRIu64
          ", \"chunk_limit_bytes\": %" PRIu64 ", \"max_memory_allocation_size\": %" PRIu64
          ", \"max_buffer_size\": %" PRIu64 ", \"transfer_queue\": %s, "
          "\"regions_imported\": %u, \"regions_prestaged\": %u}",
          d ? ", " : "", d, vkrt_import_path_str(path), why, usable ? "true" : "false",
          dev->caps.min_imported_host_pointer_alignment, limit, dev->caps.max_memory_allocation_size,
          dev->caps.max_buffer_size, dev->caps.has_transfer_queue ? "true" : "false",
          n[VKRT_IMPORT_PATH_IMPORTED], n[VKRT_IMPORT_PATH_PRESTAGED]);
    else
      vkrt_text_put(&o, "vkrt: dev%u import: %s (%s); external_memory_host %s, min alignment %" PRIu64
          ", chunk limit %" PRIu64 " = min(maxMemoryAllocationSize %" PRIu64 ", maxBufferSize %"
          PRIu64 "%s), uploads on the %s queue; regions imported %u, pre-staged %u\n",
          d, vkrt_import_path_str(path), why, usable ? "yes" : "no",
          dev->caps.min_imported_host_pointer_alignment, limit,
          dev->caps.max_memory_allocation_size, dev->caps.max_buffer_size,
          cap ? ", test cap" : "", dev->caps.has_transfer_queue ? "transfer" : "compute",
          n[VKRT_IMPORT_PATH_IMPORTED], n[VKRT_IMPORT_PATH_PRESTAGED]);
  }
  /* The registered regions and what each device took for them (first few). */
  if (json)
    vkrt_text_put(&o, "], \"registered\": [");
  if (reg) {
    struct vkrt_import_registry *wreg = (struct vkrt_import_registry *)reg;
    pthread_rwlock_rdlock(&wreg->lock);
    const uint32_t shown = VKRT_MIN(reg->table.count, 32u);
    for (uint32_t i = 0; i < shown; i++) {
      const struct vkrt_region *r = reg->table.entries[i].value;
      if (json)
        vkrt_text_put(&o, "%s{\"ptr\": \"%p\", \"size\": %" PRIu64 ", \"devices\": [", i ? ", " : "",
            (const void *)r->ptr, r->size);
      else
        vkrt_text_put(&o, "vkrt: region [%p, +%" PRIu64 "):", (const void *)r->ptr, r->size);
      for (uint32_t d = 0; d < app->device_count; d++) {
        if (json)
          vkrt_text_put(&o, "%s{\"path\": \"%s\", \"chunks\": %u, \"why\": \"%s\"}", d ? ", " : "",
              vkrt_import_path_str(r->dev[d].path), r->dev[d].chunk_count, r->reason[d]);
        else
          vkrt_text_put(&o, "%s dev%u %s (%u chunks: %s)", d ? ";" : "", d,
              vkrt_import_path_str(r->dev[d].path), r->dev[d].chunk_count, r->reason[d]);
      }
      vkrt_text_put(&o, json ? "]}" : "\n");
    }
    if (!json && reg->table.count > shown)
      vkrt_text_put(&o, "vkrt: ... and %u more region(s)\n", reg->table.count - shown);
    pthread_rwlock_unlock(&wreg->lock);
  }
  if (json)
    vkrt_text_put(&o, "]}");
  return o.len;
}
