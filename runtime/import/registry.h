/* Pieces of the registry shared by its files (registry.c, chunks.c, prestage.c,
 * describe.c); internal to runtime/import. */
#pragma once
#include "import/import.h"

/* Host-pointer import usable on this device (extension present, not hidden, buffers with
 * HOST_ALLOCATION handles supported). */
bool vkrt_import_usable(const struct vkrt_device *dev);

/* chunks.c: imports every chunk of a plan into dev (rd takes the arrays). On failure frees
 * what it made and reports the failing chunk; VK_ERROR_OUT_OF_HOST_MEMORY when the arrays
 * cannot be allocated. injectable: VKRT_FAULT_IMPORT_FAILS applies. */
VkResult vkrt_region_import_chunks(struct vkrt_import_registry *reg, struct vkrt_device *dev,
                                   struct vkrt_region_device *rd, const struct vkrt_chunk *chunks,
                                   uint32_t count, uint64_t host_base, bool injectable,
                                   uint32_t *failed_chunk);
/* Who refuses file-backed pages, for messages: the driver, or the fault acting as one. */
const char *vkrt_import_refuser(const struct vkrt_device *dev);
/* Destroys rd's buffers and memories (either array may be missing). */
void vkrt_region_free_chunks(struct vkrt_import_registry *reg, struct vkrt_device *dev,
                             struct vkrt_region_device *rd);

/* registry.c: plans [addr, addr + size) with limits every device accepts into a fresh
 * array; sets device d's path and reason. */
vkrt_status vkrt_region_plan(struct vkrt_import_registry *reg, uint64_t addr, uint64_t size,
                             struct vkrt_chunk **out, uint32_t *count,
                             struct vkrt_chunk_plan_info *info, char *why, size_t why_size);
void vkrt_region_set_path(struct vkrt_region *r, uint32_t d, vkrt_import_path path,
                          const char *fmt, ...) VKRT_PRINTF(4, 5);

/* prestage.c: pre-stages r for the devices in `mask` (budget, allocation, threaded copy,
 * one import of the copy per device); devices it cannot serve end up staged, with why. */
void vkrt_prestage_region(struct vkrt_import_registry *reg, struct vkrt_region *r, uint32_t mask,
                          vkrt_progress_fn progress, void *progress_user);
/* Unmaps the copy, returns its bytes to the budget, frees its chunk plan. */
void vkrt_prestage_free(struct vkrt_import_registry *reg, struct vkrt_region *r);
