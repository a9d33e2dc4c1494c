/* The import part of vkrt_describe: policy, budget, per-device path and limits, and the
 * registered regions with what each device took for them. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "import/import.h"
#include "import/registry.h"
#include "import/load.h"
#include "import/policy.h"

/* Host-pointer import usable on this device (extension present, not hidden, buffers with
 * HOST_ALLOCATION handles supported). */
bool vkrt_import_usable(const struct vkrt_device *dev) {
  return dev->caps.external_memory_host && dev->vk.vkGetMemoryHostPointerPropertiesEXT &&
         (dev->caps.host_buffer_import_handles & VKRT_HANDLE_HOST_ALLOCATION) &&
         !vkrt_fault(dev, VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST);
}


size_t vkrt_import_describe(const struct vkrt_system *sys, const struct vkrt_import_registry *reg,
                            bool json, char *buf, size_t size) {
  struct vkrt_text o = {.buf = buf, .size = size};
  if (size)
    buf[0] = '\0';
  const uint32_t policy = reg ? reg->policy : CONFIG_VKRT_IMPORT_POLICY_ID;
  const uint64_t cap = reg ? reg->chunk_cap : VKRT_IMPORT_CHUNK_CAP_BYTES;
  const uint64_t page = reg ? reg->page_size : 4096;
  const uint64_t budget = reg ? reg->prestage_budget : VKRT_PRESTAGE_BUDGET_BYTES;
  const uint64_t used = reg ? vkrt_import_prestage_bytes(reg) : 0;
  const uint32_t regions = reg ? vkrt_import_region_count(reg) : 0;
  vkrt_upload_counters uc;
  vkrt_import_upload_counters(reg, &uc);
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
  for (uint32_t d = 0; d < sys->device_count; d++) {
    const struct vkrt_device *dev = &sys->devices[d];
    const bool usable = vkrt_import_usable(dev);
    char why[200];
    vkrt_import_path path = vkrt_import_expect(&dev->caps, usable, policy, why, sizeof(why));
    struct vkrt_chunk_limits l = vkrt_import_limits(&dev->caps, page, cap);
    uint64_t limit = vkrt_chunk_limit(&l);
    char load_why[600];
    const bool maps = path == VKRT_IMPORT_PATH_IMPORTED && usable &&
                      !vkrt_import_file_backed_refused(&dev->caps);
    const vkrt_load_path load = vkrt_load_choose(VKRT_LOAD_PATH_AUTO, maps, -1.0, true, load_why,
                                                 sizeof(load_why));
    if (load != VKRT_LOAD_PATH_MAPPED) {
      struct vkrt_load_knobs k, kd;
      const struct vkrt_load_knobs *set = reg ? &reg->load_knobs : &(struct vkrt_load_knobs){0};
      vkrt_load_knobs_effective(set, false, &k);
      vkrt_load_knobs_effective(set, true, &kd);
      const size_t len = strlen(load_why);
      vkrt_format(load_why + len, sizeof(load_why) - len, "; from the page cache %u chunks of %"
                  PRIu64 " KiB in flight (a ring the last-level cache holds) read in blocks of %"
                  PRIu64 " KiB, O_DIRECT %u of %" PRIu64 " KiB in blocks of %" PRIu64 " KiB; %u "
                  "threads (one retires chunks, the others read); rows under %" PRIu64 " bytes "
                  "%s%s%s", k.chunks, k.chunk_bytes >> 10, k.block_bytes >> 10,
                  kd.chunks, kd.chunk_bytes >> 10, kd.block_bytes >> 10, k.threads,
                  k.gather_below,
                  !k.no_gather && !k.no_row_images && dev->caps.row_image_max_width
                      ? "moved by one 2D copy per range and chunk into a linear image aliasing "
                        "their destination (no host packing; whole rows, dense destination, "
                        "4-byte multiples), else "
                      : "",
                  k.no_gather         ? "one DMA region each"
                  : k.pack_after_read ? "packed by the host for the DMA once the chunk is read"
                                      : "packed by the host for the DMA as each block is read",
                  !usable || policy == VKRT_IMPORT_POLICY_STAGING_ONLY
                      ? "; this device imports no host memory: host-visible chunks of its own, "
                        "a memcpy after each read"
                      : "");
    }
    uint32_t n[3] = {0, 0, 0};
    if (reg)
      for (int p = 0; p < 3; p++)
        n[p] = atomic_load(&((struct vkrt_import_registry *)reg)->regions_by_path[d][p]);
    if (json)
      vkrt_text_put(&o, "%s{\"device\": %u, \"file_backed_path\": \"%s\", \"why\": \"%s\", "
          "\"external_memory_host\": %s, \"min_imported_host_pointer_alignment\": %" PRIu64
          ", \"chunk_limit_bytes\": %" PRIu64 ", \"max_memory_allocation_size\": %" PRIu64
          ", \"max_buffer_size\": %" PRIu64 ", \"transfer_queue\": %s, "
          "\"regions_imported\": %u, \"regions_prestaged\": %u, \"file_load\": \"%s\", "
          "\"file_load_why\": \"%s\"}",
          d ? ", " : "", d, vkrt_import_path_str(path), why, usable ? "true" : "false",
          dev->caps.min_imported_host_pointer_alignment, limit, dev->caps.max_memory_allocation_size,
          dev->caps.max_buffer_size, dev->caps.has_transfer_queue ? "true" : "false",
          n[VKRT_IMPORT_PATH_IMPORTED], n[VKRT_IMPORT_PATH_PRESTAGED], vkrt_load_path_str(load),
          load_why);
    else
      vkrt_text_put(&o, "vkrt: dev%u import: %s (%s); external_memory_host %s, min alignment %" PRIu64
          ", chunk limit %" PRIu64 " = min(maxMemoryAllocationSize %" PRIu64 ", maxBufferSize %"
          PRIu64 "%s), uploads on the %s queue; regions imported %u, pre-staged %u\n",
          d, vkrt_import_path_str(path), why, usable ? "yes" : "no",
          dev->caps.min_imported_host_pointer_alignment, limit,
          dev->caps.max_memory_allocation_size, dev->caps.max_buffer_size,
          cap ? ", test cap" : "", dev->caps.has_transfer_queue ? "transfer" : "compute",
          n[VKRT_IMPORT_PATH_IMPORTED], n[VKRT_IMPORT_PATH_PRESTAGED]);
    if (!json)
      vkrt_text_put(&o, "vkrt: dev%u file loads (vkrt_load_file): %s (%s)\n", d,
                    vkrt_load_path_str(load), load_why);
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
      for (uint32_t d = 0; d < sys->device_count; d++) {
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
