/* File loads (load.c): vkrt_load_file on an open registry. */
#pragma once
#include "import/import.h"

/* info must be zeroed by the caller. */
vkrt_status vkrt_load_run(struct vkrt_import_registry *reg, const char *path, int fd,
                          const vkrt_load_range *ranges, uint32_t count, vkrt_load_path force,
                          vkrt_progress_fn progress, void *progress_user, vkrt_load_info *info);
/* Fraction of the file's pages in the page cache (mincore over up to 64 windows of 4096
 * pages spread over the file); -1 when it cannot be told. */
double vkrt_load_resident(int fd, uint64_t size);
