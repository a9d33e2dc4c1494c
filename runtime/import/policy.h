/* Import policy decisions (pure functions over capability snapshots, unit-tested without a
 * GPU): which limits chunk a region, what path a device is expected to take, how much may
 * be pre-staged. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/caps.h"
#include "import/chunk_plan.h"
#include "vkrt/vkrt.h"

/* "import-only", "import-then-prestage", "always-prestage", "staging-only", "?" */
const char *vkrt_import_policy_name(uint32_t policy);

/* Chunk limits of one device; cap is the test cap in bytes (0 = none). */
struct vkrt_chunk_limits vkrt_import_limits(const struct vkrt_caps *caps, uint64_t page_size,
                                            uint64_t cap);
/* The limits every device in caps[0..count) accepts: the smallest size limits, the largest
 * alignment, so one chunk plan serves all of them. */
struct vkrt_chunk_limits vkrt_import_limits_common(const struct vkrt_caps *const *caps,
                                                   uint32_t count, uint64_t page_size,
                                                   uint64_t cap);

/* True when this driver is known to refuse importing file-backed pages (measured: NVIDIA
 * 580.x returns VK_ERROR_OUT_OF_DEVICE_MEMORY; RADV passes AMDGPU_GEM_USERPTR_ANONONLY), or
 * the device acts as one (VKRT_FAULT_REFUSE_FILE_BACKED). */
bool vkrt_import_file_backed_refused(const struct vkrt_caps *caps);

/* The path a device is expected to take for a file-backed region under `policy`, with the
 * reason in why. can_import: external_memory_host usable (not hidden by a fault). */
vkrt_import_path vkrt_import_expect(const struct vkrt_caps *caps, bool can_import,
                                    uint32_t policy, char *why, size_t why_size);

/* Pre-stage budget in bytes: the Kconfig budget, capped by the VK_EXT_memory_budget budget
 * of the heap host imports land in, on each device that reports one. */
uint64_t vkrt_prestage_budget(uint64_t config_bytes, const struct vkrt_caps *const *caps,
                              uint32_t count);

/* Below this page-cache share AUTO reads a file with O_DIRECT: the reads go to the disk
 * anyway, and bypassing the cache spares a copy and the cache's memory. */
#define VKRT_LOAD_DIRECT_BELOW 0.5

/* The path a file load takes on one device. force: the caller's choice (VKRT_LOAD_PATH_AUTO:
 * decide here); maps_import: the device imports file-backed pages under the policy (mapped
 * loads DMA straight from the page cache); resident: fraction of the file in the page cache
 * (< 0: not known); direct_ok: O_DIRECT opens on the file. Writes why. */
vkrt_load_path vkrt_load_choose(vkrt_load_path force, bool maps_import, double resident,
                                bool direct_ok, char *why, size_t why_size);
