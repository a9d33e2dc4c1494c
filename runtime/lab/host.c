/* vkrt/vkrt_lab.h: the host regions of the import registry (counts, the pre-stage budget, a
 * coarser import alignment, its describe part), the pre-stage copy and the file loads' knobs. */
#include "import/import.h"
#include "import/load.h"
#include "lab/lab.h"

/* The appliance's registry (opened by vkrt_open); `arg` as in tuning_device. */
static vkrt_status lab_registry(const vkrt_appliance *app, const void *arg,
                                struct vkrt_import_registry **out) {
  *out = NULL;
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  const struct vkrt_base *base = &app->sys.base;
  if (!arg)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "lab: a pointer argument is NULL");
  if (!app->registry)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "lab: no host registry is open");
  *out = app->registry;
  return VKRT_OK;
}

vkrt_status vkrt_lab_import_get(const vkrt_appliance *app, vkrt_lab_import *out) {
  struct vkrt_import_registry *reg;
  vkrt_status s = lab_registry(app, out, &reg);
  if (s != VKRT_OK)
    return s;
  pthread_mutex_lock(&reg->budget_lock);
  const uint64_t budget = reg->prestage_budget;
  pthread_mutex_unlock(&reg->budget_lock);
  *out = (vkrt_lab_import){.regions = vkrt_import_region_count(reg),
                           .live_chunks = (uint64_t)vkrt_import_live_chunks(reg),
                           .prestage_bytes = vkrt_import_prestage_bytes(reg),
                           .prestage_budget = budget,
                           .load_pinned_bytes = atomic_load(&reg->load_pinned)};
  return VKRT_OK;
}

vkrt_status vkrt_lab_load_set(vkrt_appliance *app, const vkrt_lab_load *load) {
  struct vkrt_import_registry *reg;
  vkrt_status s = lab_registry(app, load, &reg);
  if (s != VKRT_OK)
    return s;
  const uint64_t chunk = load->chunk_bytes, block = load->block_bytes;
  if (load->threads > VKRT_WORKERS_MAX || load->chunks == 1 ||
      load->chunks > VKRT_LOAD_MAX_CHUNKS || chunk % 4096 || block % 4096 ||
      chunk > (1ull << 31) || (block && chunk && block > chunk) ||
      load->submit_batch > VKRT_LOAD_MAX_CHUNKS / 2)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INVALID_ARGUMENT, "lab: load knobs: threads "
                      "<= %d, chunks 2..%d, chunk and block multiples of 4 KiB (chunk <= 2 GiB, "
                      "block <= chunk), submit batch <= %d; 0 for a default", VKRT_WORKERS_MAX,
                      VKRT_LOAD_MAX_CHUNKS, VKRT_LOAD_MAX_CHUNKS / 2);
  reg->load_knobs = (struct vkrt_load_knobs){.threads = load->threads, .chunks = load->chunks,
                                             .chunk_bytes = chunk, .block_bytes = block,
                                             .gather_below = load->gather_below,
                                             .no_gather = load->no_gather,
                                             .pack_after_read = load->pack_after_read,
                                             .no_row_images = load->no_row_images,
                                             .submit_batch = load->submit_batch};
  return VKRT_OK;
}

vkrt_status vkrt_lab_load_get(const vkrt_appliance *app, vkrt_lab_load *out) {
  struct vkrt_import_registry *reg;
  vkrt_status s = lab_registry(app, out, &reg);
  if (s != VKRT_OK)
    return s;
  struct vkrt_load_knobs k;
  vkrt_load_knobs_effective(&reg->load_knobs, false, &k);
  *out = (vkrt_lab_load){.threads = k.threads, .chunk_bytes = k.chunk_bytes, .chunks = k.chunks,
                         .block_bytes = k.block_bytes, .gather_below = k.gather_below,
                         .no_gather = k.no_gather, .pack_after_read = k.pack_after_read,
                         .no_row_images = k.no_row_images, .submit_batch = k.submit_batch};
  return VKRT_OK;
}

vkrt_status vkrt_lab_prestage_budget_set(vkrt_appliance *app, uint64_t bytes) {
  struct vkrt_import_registry *reg;
  vkrt_status s = lab_registry(app, app, &reg);
  if (s != VKRT_OK)
    return s;
  pthread_mutex_lock(&reg->budget_lock);
  reg->prestage_budget = bytes;
  pthread_mutex_unlock(&reg->budget_lock);
  return VKRT_OK;
}

vkrt_status vkrt_lab_import_alignment_set(vkrt_appliance *app, uint32_t device, uint64_t bytes) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, app, &dev);
  if (s != VKRT_OK)
    return s;
  struct vkrt_caps *c = &dev->caps;
  if (!c->external_memory_host)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: dev%u has no host import to align", dev->index);
  if (!bytes || (bytes & (bytes - 1)) || bytes < c->min_imported_host_pointer_alignment)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: an import alignment is a power of two >= %llu bytes, not %llu",
                      (unsigned long long)c->min_imported_host_pointer_alignment,
                      (unsigned long long)bytes);
  c->min_imported_host_pointer_alignment = bytes;
  return VKRT_OK;
}

size_t vkrt_lab_import_describe(const vkrt_appliance *app, bool json, char *buf,
                                size_t buf_size) {
  if (buf && buf_size)
    buf[0] = '\0';
  return app ? vkrt_import_describe(&app->sys, app->registry, json, buf, buf ? buf_size : 0) : 0;
}

/* ---- host copies ---------------------------------------------------------------------- */

uint32_t vkrt_lab_parallel_copy(void *dst, const void *src, uint64_t size, uint32_t threads) {
  return vkrt_import_parallel_copy(dst, src, size, threads, NULL, NULL);
}
