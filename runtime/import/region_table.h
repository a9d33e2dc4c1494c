/* Region table: registered host ranges sorted by start, never overlapping, looked up in
 * O(log n). Not locked: the registry wraps it in a reader/writer lock. Storage grows only
 * in vkrt_region_table_reserve (register time), so insert/lookup/remove never allocate. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "vkrt/status.h"

struct vkrt_base;

struct vkrt_region_entry {
  uint64_t begin, end; /* [begin, end), end > begin */
  void *value;
};

struct vkrt_region_table {
  struct vkrt_base *base;
  struct vkrt_region_entry *entries;
  uint32_t count, capacity;
};

void vkrt_region_table_init(struct vkrt_region_table *table, struct vkrt_base *base);
void vkrt_region_table_finish(struct vkrt_region_table *table);

/* Makes room for `extra` more entries (the only call that allocates). */
vkrt_status vkrt_region_table_reserve(struct vkrt_region_table *table, uint32_t extra);

/* Index of the entry containing addr, or -1. */
int64_t vkrt_region_table_find(const struct vkrt_region_table *table, uint64_t addr);

/* Value of the entry containing all of [addr, addr + size) (size > 0), or NULL when no
 * single entry holds both the first and the last byte. */
void *vkrt_region_table_lookup(const struct vkrt_region_table *table, uint64_t addr, uint64_t size);

/* Index of an entry overlapping [begin, end), or -1. */
int64_t vkrt_region_table_find_overlap(const struct vkrt_region_table *table, uint64_t begin,
                                       uint64_t end);

/* Inserts [begin, begin + size). INVALID_ARGUMENT for zero size or a range that wraps,
 * ALREADY_EXISTS when it overlaps an entry, OUT_OF_HOST_MEMORY when not reserved. */
vkrt_status vkrt_region_table_insert(struct vkrt_region_table *table, uint64_t begin,
                                     uint64_t size, void *value);

/* Removes the entry starting exactly at begin; returns its value or NULL (not found). */
void *vkrt_region_table_remove(struct vkrt_region_table *table, uint64_t begin);
