/* Host region registry: open/close, register (plan, import per device, pre-stage where the
 * policy says), unregister (drain the users), lookups for uploads. Chunk imports: chunks.c;
 * pre-staging: prestage.c; describe: describe.c. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "import/import.h"
#include "import/registry.h"
#include "import/host_maps.h"
#include "import/policy.h"


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

vkrt_import_policy vkrt_registry_policy(const struct vkrt_import_registry *reg) {
  if (reg)
    return (vkrt_import_policy)reg->policy;
  return (vkrt_import_policy)CONFIG_VKRT_IMPORT_POLICY_ID;
}

/* ---- open / close ---------------------------------------------------------------------- */

vkrt_status vkrt_registry_open(struct vkrt_system *sys, struct vkrt_import_registry **out) {
  struct vkrt_base *base = &sys->base;
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
  if (sys->options.faults.import_policy_override) {
    uint32_t p = sys->options.faults.import_policy_override - 1;
    if (p >= VKRT_IMPORT_POLICY_COUNT) {
      vkrt_free(base, reg);
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                        "import: policy override %u is not 1 + a vkrt_import_policy",
                        sys->options.faults.import_policy_override);
    }
    reg->policy = p;
  }
  if (sys->options.faults.import_chunk_cap)
    reg->chunk_cap = sys->options.faults.import_chunk_cap;
#endif
  long page = sysconf(_SC_PAGESIZE);
  reg->page_size = page > 0 ? (uint64_t)page : 4096;
  const struct vkrt_caps *caps[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < sys->device_count; d++)
    caps[d] = &sys->devices[d].caps;
  reg->prestage_budget = vkrt_prestage_budget(VKRT_PRESTAGE_BUDGET_BYTES, caps, sys->device_count);
  /* The caller's thread copies too, so threads - 1 helpers. */
  vkrt_copy_pool_init(&reg->copy_pool, reg->prestage_threads - 1);
  reg->sys = sys;
  *out = reg;
  vkrt_log(base, VKRT_LOG_INFO,
           "import: policy %s, pre-stage budget %" PRIu64 " MiB, %u copy threads, chunk cap %" PRIu64
           " KiB",
           vkrt_import_policy_name(reg->policy), reg->prestage_budget >> 20, reg->prestage_threads,
           reg->chunk_cap >> 10);
  return VKRT_OK;
}

static void region_destroy(struct vkrt_import_registry *reg, struct vkrt_region *r);

void vkrt_registry_close(struct vkrt_import_registry *reg) {
  if (!reg)
    return;
  struct vkrt_system *sys = reg->sys;
  if (reg->table.count)
    vkrt_log(&sys->base, VKRT_LOG_INFO, "import: %u region(s) still registered at close; "
             "unregistering them", reg->table.count);
  for (uint32_t i = reg->table.count; i-- > 0;)
    region_destroy(reg, reg->table.entries[i].value);
  if (atomic_load(&reg->live_chunks) != 0)
    vkrt_log(&sys->base, VKRT_LOG_ERROR, "import: %ld imported chunk(s) still alive at close",
             atomic_load(&reg->live_chunks));
  vkrt_region_table_finish(&reg->table);
  vkrt_copy_pool_finish(&reg->copy_pool);
  pthread_rwlock_destroy(&reg->lock);
  pthread_mutex_destroy(&reg->drain_lock);
  pthread_cond_destroy(&reg->drain_cond);
  pthread_mutex_destroy(&reg->budget_lock);
  vkrt_free(&sys->base, reg);
}

/* ---- register / unregister ------------------------------------------------------------- */

static void region_destroy(struct vkrt_import_registry *reg, struct vkrt_region *r) {
  struct vkrt_system *sys = reg->sys;
  if (!r)
    return;
  for (uint32_t d = 0; d < sys->device_count; d++) {
    if (r->published && r->dev[d].chunks)
      atomic_fetch_sub(&reg->regions_by_path[d][r->dev[d].path], 1);
    vkrt_region_free_chunks(reg, &sys->devices[d], &r->dev[d]);
  }
  vkrt_prestage_free(reg, r);
  vkrt_free(&sys->base, r->chunks);
  vkrt_free(&sys->base, r);
}

/* Plans [addr, addr + size) with limits every device accepts into a fresh array. */
vkrt_status vkrt_region_plan(struct vkrt_import_registry *reg, uint64_t addr, uint64_t size,
                               struct vkrt_chunk **out, uint32_t *count,
                               struct vkrt_chunk_plan_info *info, char *why, size_t why_size) {
  struct vkrt_system *sys = reg->sys;
  *out = NULL;
  *count = 0;
  const struct vkrt_caps *caps[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < sys->device_count; d++)
    caps[d] = &sys->devices[d].caps;
  struct vkrt_chunk_limits limits = vkrt_import_limits_common(
      caps, sys->device_count, reg->page_size, reg->chunk_cap);
  vkrt_status s = vkrt_chunk_plan(addr, size, &limits, NULL, 0, info, why, why_size);
  if (s != VKRT_OK)
    return s;
  struct vkrt_chunk *chunks = vkrt_calloc(&sys->base, info->count, sizeof(*chunks));
  if (!chunks) {
    vkrt_format(why, why_size, "out of host memory for %u chunks", info->count);
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  }
  s = vkrt_chunk_plan(addr, size, &limits, chunks, info->count, info, why, why_size);
  if (s != VKRT_OK) {
    vkrt_free(&sys->base, chunks);
    return s;
  }
  *out = chunks;
  *count = info->count;
  return VKRT_OK;
}

void vkrt_region_set_path(struct vkrt_region *r, uint32_t d, vkrt_import_path path, const char *fmt, ...) {
  r->dev[d].path = path;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason[d], sizeof(r->reason[d]), fmt, ap);
  va_end(ap);
}

/* Decides each device's path under the registry's policy: imports the caller's pages where
 * it may (chunks planned once for every device), marks in *prestage_mask the devices that
 * pre-stage instead, and the rest staged with why. Not OK: the policy forbids the fallback
 * (import-only) or the range cannot be planned. */
static vkrt_status import_per_policy(struct vkrt_import_registry *reg, struct vkrt_region *r,
                                     uint32_t *prestage_mask) {
  struct vkrt_system *sys = reg->sys;
  struct vkrt_base *base = &sys->base;
  const void *ptr = r->ptr;
  const uint64_t addr = (uint64_t)(uintptr_t)r->ptr, size = r->size;
  const uint32_t policy = reg->policy;
  vkrt_status s = VKRT_OK;

  if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY || policy == VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE) {
    char why[160];
    struct vkrt_chunk_plan_info pinfo;
    vkrt_status ps = vkrt_region_plan(reg, addr, size, &r->chunks, &r->chunk_count, &pinfo, why, sizeof(why));
    if (ps == VKRT_OK && pinfo.unimportable)
      vkrt_format(why, sizeof(why), "%u chunk(s) would import bytes outside the caller's pages "
                  "(import alignment %" PRIu64 " > page size %" PRIu64 ")", pinfo.unimportable,
                  pinfo.alignment, reg->page_size);
    const bool plannable = ps == VKRT_OK && !pinfo.unimportable;
    /* Asked once per region: only a driver known to refuse file-backed pages cares. */
    int file_backed = -1;
    if (ps == VKRT_ERROR_INVALID_ARGUMENT || ps == VKRT_ERROR_OUT_OF_HOST_MEMORY) {
      s = vkrt_error(base, ps, "host register: %p: %s", ptr, why);
      return s;
    }
    for (uint32_t d = 0; d < sys->device_count; d++) {
      struct vkrt_device *dev = &sys->devices[d];
      const char *cannot = NULL;
      if (!vkrt_import_usable(dev))
        cannot = "VK_EXT_external_memory_host unavailable";
      else if (!plannable)
        cannot = why;
      if (cannot) {
        if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY) {
          s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "dev%u: host register %p: cannot import "
                         "(%s); policy import-only", d, ptr, cannot);
          return s;
        }
        if (!vkrt_import_usable(dev)) {
          vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s; uploads use the staging ring", cannot);
        } else {
          vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "%s", cannot);
          *prestage_mask |= 1u << d;
        }
        continue;
      }
      if (vkrt_import_file_backed_refused(&dev->caps) && !vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS)) {
        if (file_backed < 0)
          file_backed = vkrt_host_range_file_backed(addr, addr + size);
        if (file_backed && policy == VKRT_IMPORT_POLICY_IMPORT_ONLY) {
          s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "dev%u: host register %p: file-backed pages, "
                         "which %s refuses to import; policy import-only (not tried: a refusal "
                         "made later imports fail on NVIDIA 580)", d, ptr, vkrt_import_refuser(dev));
          return s;
        }
        if (file_backed) {
          vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "file-backed pages, which %s refuses to import "
                   "(and a refusal made later imports fail on NVIDIA 580), so not tried",
                   vkrt_import_refuser(dev));
          *prestage_mask |= 1u << d;
          continue;
        }
      }
      uint32_t failed;
      VkResult vr = vkrt_region_import_chunks(reg, dev, &r->dev[d], r->chunks, r->chunk_count, addr, true, &failed);
      if (vr == VK_SUCCESS) {
        vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_IMPORTED, "caller's pages imported: %u chunk(s) of <= %"
                 PRIu64 " bytes", r->chunk_count, pinfo.chunk_limit);
        continue;
      }
      if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY) {
        s = vkrt_error(base, vkrt_vk_status(vr), "dev%u: host pointer import of %p chunk %u/%u "
                       "failed: %s; policy import-only", d, ptr, failed, r->chunk_count,
                       vkrt_vk_result_str(vr));
        return s;
      }
      vkrt_log(base, VKRT_LOG_WARN, "dev%u: host pointer import of %p chunk %u/%u failed: %s; "
               "falling back to prestage", d, ptr, failed, r->chunk_count, vkrt_vk_result_str(vr));
      vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "import failed at chunk %u/%u: %s", failed,
               r->chunk_count, vkrt_vk_result_str(vr));
      *prestage_mask |= 1u << d;
    }
  } else if (policy == VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE) {
    for (uint32_t d = 0; d < sys->device_count; d++) {
      if (vkrt_import_usable(&sys->devices[d])) {
        *prestage_mask |= 1u << d;
        r->reason[d][0] = '\0';
      } else {
        vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "VK_EXT_external_memory_host unavailable; "
                 "uploads use the staging ring");
      }
    }
  } else {
    for (uint32_t d = 0; d < sys->device_count; d++)
      vkrt_region_set_path(r, d, VKRT_IMPORT_PATH_STAGED, "policy staging-only: uploads use the staging ring");
  }
  return s;
}

/* Logs the final decisions and fills *info (may be NULL). */
static void report_region(struct vkrt_import_registry *reg, const struct vkrt_region *r,
                          vkrt_register_info *info) {
  struct vkrt_system *sys = reg->sys;
  struct vkrt_base *base = &sys->base;
  const void *ptr = r->ptr;
  const uint64_t size = r->size;
  const char *pname = vkrt_import_policy_name(reg->policy);
  /* Decisions are final: report them, then publish (after publishing, another thread may
   * already unregister the region). */
  for (uint32_t d = 0; d < sys->device_count; d++) {
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
    for (uint32_t d = 0; d < sys->device_count && d < VKRT_MAX_DEVICES; d++) {
      info->path[d] = r->dev[d].path;
      vkrt_format(info->reason[d], sizeof(info->reason[d]), "%s", r->reason[d]);
      if (r->dev[d].chunk_count > info->chunk_count)
        info->chunk_count = r->dev[d].chunk_count;
    }
  }
}

/* Inserts r into the table (after this, another thread may already unregister it). */
static vkrt_status publish_region(struct vkrt_import_registry *reg, struct vkrt_region *r) {
  struct vkrt_system *sys = reg->sys;
  vkrt_status s;
  pthread_rwlock_wrlock(&reg->lock);
  s = vkrt_region_table_reserve(&reg->table, 1);
  if (s == VKRT_OK)
    s = vkrt_region_table_insert(&reg->table, (uint64_t)(uintptr_t)r->ptr, r->size, r);
  if (s == VKRT_OK) {
    r->published = true;
    for (uint32_t d = 0; d < sys->device_count; d++)
      if (r->dev[d].chunks)
        atomic_fetch_add(&reg->regions_by_path[d][r->dev[d].path], 1);
  }
  pthread_rwlock_unlock(&reg->lock);
  return s;
}

vkrt_status vkrt_registry_register(struct vkrt_import_registry *reg, const void *ptr, uint64_t size,
                               vkrt_progress_fn progress, void *progress_user,
                               vkrt_register_info *info) {
  if (!reg)
    return VKRT_ERROR_INVALID_ARGUMENT; /* info: cleared by vkrt_host_register */
  struct vkrt_system *sys = reg->sys;
  struct vkrt_base *base = &sys->base;
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
  uint32_t prestage_mask = 0;
  vkrt_status s = import_per_policy(reg, r, &prestage_mask);
  if (s != VKRT_OK)
    goto fail;
  if (prestage_mask)
    vkrt_prestage_region(reg, r, prestage_mask, progress, progress_user);
  /* Chunks over the caller's pages no device uses are not kept. */
  bool direct_used = false;
  for (uint32_t d = 0; d < sys->device_count; d++)
    direct_used |= r->dev[d].path == VKRT_IMPORT_PATH_IMPORTED;
  if (!direct_used) {
    vkrt_free(base, r->chunks);
    r->chunks = NULL;
    r->chunk_count = 0;
  }

  /* Decisions are final: report them, then publish. */
  report_region(reg, r, info);
  s = publish_region(reg, r);
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
  region_destroy(reg, r);
  return s;
}

vkrt_status vkrt_registry_unregister(struct vkrt_import_registry *reg, const void *ptr) {
  if (!reg)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_system *sys = reg->sys;
  if (!ptr)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT, "host unregister: NULL pointer");
  const uint64_t addr = (uint64_t)(uintptr_t)ptr;
  pthread_rwlock_wrlock(&reg->lock);
  struct vkrt_region *r = vkrt_region_table_remove(&reg->table, addr);
  int64_t inside = r ? -1 : vkrt_region_table_find(&reg->table, addr);
  uint64_t inside_begin = inside >= 0 ? reg->table.entries[inside].begin : 0;
  pthread_rwlock_unlock(&reg->lock);
  if (!r) {
    if (inside >= 0)
      return vkrt_error(&sys->base, VKRT_ERROR_NOT_FOUND, "host unregister: %p is inside the "
                        "region registered at 0x%" PRIx64 ", not its start", ptr, inside_begin);
    return vkrt_error(&sys->base, VKRT_ERROR_NOT_FOUND, "host unregister: %p was never registered",
                      ptr);
  }
  /* Out of the table: no new upload can find it. Wait for the ones DMAing from it. */
  pthread_mutex_lock(&reg->drain_lock);
  while (atomic_load(&r->users) != 0)
    pthread_cond_wait(&reg->drain_cond, &reg->drain_lock);
  pthread_mutex_unlock(&reg->drain_lock);
  vkrt_log(&sys->base, VKRT_LOG_DEBUG, "host region %p unregistered", ptr);
  region_destroy(reg, r);
  return VKRT_OK;
}

struct vkrt_region *vkrt_region_acquire(struct vkrt_import_registry *reg, uint32_t device,
                                        const void *src, uint64_t size) {
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
void vkrt_region_release(struct vkrt_import_registry *reg, struct vkrt_region *r) {
  if (atomic_fetch_sub(&r->users, 1) != 1)
    return;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  /* The window in which a concurrent unregister may free the region: the delay widens it
   * (stress test), the hook runs an unregister inside it (the interleaving made certain). */
  if (reg->sys->options.faults.release_delay_us)
    nanosleep(&(struct timespec){.tv_nsec = (long)reg->sys->options.faults.release_delay_us * 1000},
              NULL);
  if (reg->sys->options.faults.release_hook)
    reg->sys->options.faults.release_hook(reg->sys->options.faults.release_hook_user);
#endif
  pthread_mutex_lock(&reg->drain_lock);
  pthread_cond_broadcast(&reg->drain_cond);
  pthread_mutex_unlock(&reg->drain_lock);
}

uint64_t vkrt_import_prestage_bytes(const struct vkrt_import_registry *creg) {
  struct vkrt_import_registry *reg = (struct vkrt_import_registry *)creg; /* locks only */
  if (!reg)
    return 0;
  pthread_mutex_lock(&reg->budget_lock);
  uint64_t v = reg->prestage_used;
  pthread_mutex_unlock(&reg->budget_lock);
  return v;
}

long vkrt_import_live_chunks(const struct vkrt_import_registry *reg) {
  return reg ? atomic_load(&((struct vkrt_import_registry *)reg)->live_chunks) : 0;
}

uint32_t vkrt_import_region_count(const struct vkrt_import_registry *creg) {
  struct vkrt_import_registry *reg = (struct vkrt_import_registry *)creg; /* locks only */
  if (!reg)
    return 0;
  pthread_rwlock_rdlock(&reg->lock);
  uint32_t n = reg->table.count;
  pthread_rwlock_unlock(&reg->lock);
  return n;
}


void vkrt_import_upload_counters(const struct vkrt_import_registry *creg,
                                 vkrt_upload_counters *out) {
  struct vkrt_import_registry *reg = (struct vkrt_import_registry *)creg; /* atomics only */
  memset(out, 0, sizeof(*out));
  if (!reg)
    return;
  out->imported_bytes = atomic_load(&reg->path_bytes[VKRT_IMPORT_PATH_IMPORTED]);
  out->imported_copies = atomic_load(&reg->path_copies[VKRT_IMPORT_PATH_IMPORTED]);
  out->prestaged_bytes = atomic_load(&reg->path_bytes[VKRT_IMPORT_PATH_PRESTAGED]);
  out->prestaged_copies = atomic_load(&reg->path_copies[VKRT_IMPORT_PATH_PRESTAGED]);
  out->staged_bytes = atomic_load(&reg->path_bytes[VKRT_IMPORT_PATH_STAGED]);
  out->staged_copies = atomic_load(&reg->path_copies[VKRT_IMPORT_PATH_STAGED]);
  out->straddles_split = atomic_load(&reg->straddles_split);
  out->copies_past_chunk = atomic_load(&reg->copies_past_chunk);
}
