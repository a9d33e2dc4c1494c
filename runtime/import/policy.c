#include <stdio.h>
#include <string.h>

#include "import/policy.h"

const char *vkrt_import_policy_name(uint32_t policy) {
  static const char *const names[] = {"import-only", "import-then-prestage", "always-prestage",
                                      "staging-only"};
  return policy < 4 ? names[policy] : "?";
}

struct vkrt_chunk_limits vkrt_import_limits(const struct vkrt_caps *caps, uint64_t page_size,
                                            uint64_t cap) {
  return (struct vkrt_chunk_limits){
      .page_size = page_size,
      .min_import_alignment = caps->min_imported_host_pointer_alignment,
      .max_allocation_size = caps->max_memory_allocation_size,
      .max_buffer_size = caps->max_buffer_size,
      .cap = cap,
  };
}

static uint64_t min_nonzero(uint64_t a, uint64_t b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a < b ? a : b;
}

struct vkrt_chunk_limits vkrt_import_limits_common(const struct vkrt_caps *const *caps,
                                                   uint32_t count, uint64_t page_size,
                                                   uint64_t cap) {
  struct vkrt_chunk_limits l = {.page_size = page_size, .cap = cap};
  for (uint32_t i = 0; i < count; i++) {
    if (caps[i]->min_imported_host_pointer_alignment > l.min_import_alignment)
      l.min_import_alignment = caps[i]->min_imported_host_pointer_alignment;
    l.max_allocation_size = min_nonzero(l.max_allocation_size, caps[i]->max_memory_allocation_size);
    l.max_buffer_size = min_nonzero(l.max_buffer_size, caps[i]->max_buffer_size);
  }
  return l;
}

bool vkrt_import_file_backed_refused(const struct vkrt_caps *caps) {
  if (caps->vendor_id == 0x10de || caps->refuses_file_backed_fault)
    return true;
  /* RADV reports driverName "radv"; AMD's own drivers are not measured. */
  return caps->vendor_id == 0x1002 && strstr(caps->driver_name, "radv") != NULL;
}

vkrt_import_path vkrt_import_expect(const struct vkrt_caps *caps, bool can_import,
                                    uint32_t policy, char *why, size_t why_size) {
  const char *name = vkrt_import_policy_name(policy);
  const bool refused = vkrt_import_file_backed_refused(caps);
  switch (policy) {
  case 3:
    snprintf(why, why_size, "policy %s: uploads go through the staging ring", name);
    return VKRT_IMPORT_PATH_STAGED;
  case 2:
    if (!can_import) {
      snprintf(why, why_size, "policy %s, but VK_EXT_external_memory_host is unavailable", name);
      return VKRT_IMPORT_PATH_STAGED;
    }
    snprintf(why, why_size, "policy %s: one anonymous copy imported into every device", name);
    return VKRT_IMPORT_PATH_PRESTAGED;
  case 0:
  case 1:
  default:
    if (!can_import) {
      snprintf(why, why_size, "policy %s, but VK_EXT_external_memory_host is unavailable: %s", name,
               policy == 0 ? "registration fails" : "uploads go through the staging ring");
      return VKRT_IMPORT_PATH_STAGED;
    }
    if (refused) {
      snprintf(why, why_size, "policy %s; file-backed import fails on this driver (%s), %s",
               name, caps->refuses_file_backed_fault ? "fault injected" : "measured",
               policy == 0 ? "so registering a file mapping fails (not tried)"
                           : "so file mappings are pre-staged, anonymous memory imported");
      return policy == 0 ? VKRT_IMPORT_PATH_IMPORTED : VKRT_IMPORT_PATH_PRESTAGED;
    }
    snprintf(why, why_size, "policy %s; %s", name,
             caps->is_cpu ? "file-backed import works on this driver (lavapipe, measured)"
                          : "file-backed import not measured on this driver; tried first");
    return VKRT_IMPORT_PATH_IMPORTED;
  }
}

uint64_t vkrt_prestage_budget(uint64_t config_bytes, const struct vkrt_caps *const *caps,
                              uint32_t count) {
  uint64_t budget = config_bytes;
  for (uint32_t i = 0; i < count; i++) {
    const struct vkrt_caps *c = caps[i];
    if (!c->memory_budget)
      continue;
    /* The heap imported host memory counts against: that of the first importable type. */
    for (uint32_t t = 0; t < c->type_count && t < VKRT_CAPS_MAX_TYPES; t++) {
      if (!(c->host_import_memory_type_bits & (1u << t)))
        continue;
      uint32_t heap = c->type_heap[t];
      if (heap < c->heap_count && c->heap_budget[heap] && c->heap_budget[heap] < budget)
        budget = c->heap_budget[heap];
      break;
    }
  }
  return budget;
}

vkrt_load_path vkrt_load_choose(vkrt_load_path force, bool maps_import, double resident,
                                bool direct_ok, char *why, size_t why_size) {
  static const char stream[] = "into pinned chunks every device imports (chunk i + 1 read "
                               "while chunk i is DMA'd to every device)";
  switch (force) {
  case VKRT_LOAD_PATH_MAPPED:
    snprintf(why, why_size, "forced by the caller");
    return force;
  case VKRT_LOAD_PATH_READ:
    snprintf(why, why_size, "forced by the caller: pread %s", stream);
    return force;
  case VKRT_LOAD_PATH_MEMCPY:
    snprintf(why, why_size, "forced by the caller: memcpy from a read-only mapping %s", stream);
    return force;
  case VKRT_LOAD_PATH_DIRECT:
    if (direct_ok) {
      snprintf(why, why_size, "forced by the caller: O_DIRECT pread %s", stream);
      return force;
    }
    snprintf(why, why_size, "direct forced, but O_DIRECT does not open this file: pread "
             "through the page cache %s", stream);
    return VKRT_LOAD_PATH_READ;
  default:
    break;
  }
  if (maps_import) {
    snprintf(why, why_size, "the device imports file-backed pages: DMA straight from the "
             "mapping, no copy");
    return VKRT_LOAD_PATH_MAPPED;
  }
  if (resident < 0) {
    snprintf(why, why_size, "file-backed pages are not imported here: pread %s; O_DIRECT when "
             "the page cache holds under %.0f%% of the file", stream, VKRT_LOAD_DIRECT_BELOW * 100);
    return VKRT_LOAD_PATH_READ;
  }
  if (resident < VKRT_LOAD_DIRECT_BELOW && direct_ok) {
    snprintf(why, why_size, "the page cache holds %.0f%% of the file: O_DIRECT pread %s",
             resident * 100, stream);
    return VKRT_LOAD_PATH_DIRECT;
  }
  snprintf(why, why_size, "the page cache holds %.0f%% of the file%s: pread %s", resident * 100,
           resident < VKRT_LOAD_DIRECT_BELOW ? " but O_DIRECT does not open it" : "", stream);
  return VKRT_LOAD_PATH_READ;
}
