/* File loads (load.c): vkrt_load_file on an open registry; the pinned-chunk paths
 * (stream.c). */
#pragma once
#include "import/import.h"

#define VKRT_LOAD_MAX_CHUNKS 64 /* CONFIG_VKRT_LOAD_CHUNKS and vkrt_lab_load at most */

/* info must be zeroed by the caller. */
vkrt_status vkrt_load_run(struct vkrt_import_registry *reg, const char *path, int fd,
                          const vkrt_load_range *ranges, uint32_t count, vkrt_load_path force,
                          vkrt_progress_fn progress, void *progress_user, vkrt_load_info *info);
/* Fraction of the file's pages in the page cache (mincore over up to 64 windows of 4096
 * pages spread over the file); -1 when it cannot be told. */
double vkrt_load_resident(int fd, uint64_t size);

/* The knobs a load uses now: reg's, with the defaults for its path filled in (direct: the
 * O_DIRECT path's chunks). */
void vkrt_load_knobs_effective(const struct vkrt_load_knobs *knobs, bool direct,
                               struct vkrt_load_knobs *out);

/* The read, direct and memcpy paths for the ranges `order` lists (every one of size > 0),
 * all their devices at once: the file's needed bytes read once, in order, into pinned
 * chunks every device imports, chunk i + 1 read while chunk i is DMA'd. Fills info's
 * structure fields (read_bytes, threads, pinned_*, copies, timers). */
struct vkrt_load_stream {
  const char *name;             /* the file, for messages */
  int fd;                       /* buffered reads (and O_DIRECT's fallback) */
  int fd_direct;                /* >= 0: O_DIRECT reads */
  const uint8_t *map;           /* non-NULL: memcpy from this read-only mapping instead */
  uint64_t file_size;           /* at the start (a shorter read is a truncation) */
  uint64_t t0;                  /* vkrt_now_ns() at the call (info->setup_ns) */
  const vkrt_load_range *ranges;
  const uint32_t *order;
  uint32_t count;
  vkrt_progress_fn progress;    /* from the calling thread, after each chunk's submit */
  void *progress_user;
  uint64_t done, total;         /* progress: bytes so far (advanced here), bytes in all */
  int direct_errno;             /* out: why O_DIRECT was given up mid-load (0: it was not) */
  uint32_t host_copy_mask;      /* out: devices that took host-visible chunks of their own */
  char host_copy_why[VKRT_MAX_DEVICES][120];
};
vkrt_status vkrt_load_stream(struct vkrt_import_registry *reg, struct vkrt_load_stream *job,
                             vkrt_load_info *info);
