/* Chunk planner (pure): cuts a host range into import chunks a Vulkan device accepts.
 *
 * A device imports host memory in pieces no larger than min(maxMemoryAllocationSize,
 * maxBufferSize) (NVIDIA: 0xffe00000 vs 1 TiB, so < 4 GiB wins), whose start and size are
 * multiples of minImportedHostPointerAlignment. Each chunk's import range is its caller
 * bytes widened to that alignment. Widening to the page is always safe (mappings are
 * page-granular, so a page holding one caller byte is mapped); widening to an alignment
 * larger than the page may leave the caller's pages — such a chunk is marked not
 * importable and the region must take another path (pre-stage or staging). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vkrt/status.h"

struct vkrt_chunk_limits {
  uint64_t page_size;            /* host page size, power of two */
  uint64_t min_import_alignment; /* minImportedHostPointerAlignment, power of two (0 = page) */
  uint64_t max_allocation_size;  /* maxMemoryAllocationSize (0 = no limit) */
  uint64_t max_buffer_size;      /* maxBufferSize (0 = no limit) */
  uint64_t cap;                  /* test cap on one chunk (0 = none) */
};

struct vkrt_chunk {
  uint64_t begin, end;    /* caller bytes this chunk serves, as offsets into the region */
  uint64_t import_addr;   /* aligned host address the chunk's import starts at */
  uint64_t import_size;   /* aligned size of the import (what VkBuffer and memory get) */
  bool importable;        /* false: the aligned range leaves the caller's pages */
};

struct vkrt_chunk_plan_info {
  uint64_t alignment;   /* max(page size, min import alignment) */
  uint64_t chunk_limit; /* largest import size, a multiple of alignment */
  uint32_t count;       /* chunks needed */
  uint32_t unimportable;/* chunks whose aligned range leaves the caller's pages */
};

/* Plans [addr, addr + size). With chunks == NULL only fills *info (count the chunks first,
 * allocate, then call again with capacity >= info->count). Errors, with a reason in why:
 * zero size, a range past the end of the address space, a non-power-of-two alignment
 * (INVALID_ARGUMENT); a chunk limit below the alignment or more than UINT32_MAX chunks
 * (UNAVAILABLE). */
vkrt_status vkrt_chunk_plan(uint64_t addr, uint64_t size, const struct vkrt_chunk_limits *limits,
                            struct vkrt_chunk *chunks, uint32_t capacity,
                            struct vkrt_chunk_plan_info *info, char *why, size_t why_size);

/* Index of the chunk serving region offset `offset` (binary search; chunks sorted and
 * contiguous from offset 0). count must be > 0 and offset < the last chunk's end. */
uint32_t vkrt_chunk_find(const struct vkrt_chunk *chunks, uint32_t count, uint64_t offset);

/* The effective chunk limit of one device's limits, for describe output. 0 when the
 * limit is below the alignment. */
uint64_t vkrt_chunk_limit(const struct vkrt_chunk_limits *limits);
