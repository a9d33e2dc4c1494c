#include <string.h>

#include "base/base.h"
#include "import/region_table.h"

void vkrt_region_table_init(struct vkrt_region_table *table, struct vkrt_base *base) {
  *table = (struct vkrt_region_table){.base = base};
}

void vkrt_region_table_finish(struct vkrt_region_table *table) {
  vkrt_free(table->base, table->entries);
  *table = (struct vkrt_region_table){.base = table->base};
}

vkrt_status vkrt_region_table_reserve(struct vkrt_region_table *table, uint32_t extra) {
  if (extra > UINT32_MAX - table->count)
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  uint32_t need = table->count + extra;
  if (need <= table->capacity)
    return VKRT_OK;
  uint32_t capacity = table->capacity ? table->capacity : 16;
  while (capacity < need)
    capacity = capacity > UINT32_MAX / 2 ? need : capacity * 2;
  struct vkrt_region_entry *entries = vkrt_alloc(table->base, (size_t)capacity * sizeof(*entries));
  if (!entries)
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  if (table->count)
    memcpy(entries, table->entries, (size_t)table->count * sizeof(*entries));
  vkrt_free(table->base, table->entries);
  table->entries = entries;
  table->capacity = capacity;
  return VKRT_OK;
}

/* Number of entries with begin <= addr (so the candidate is that count - 1). */
static uint32_t upper_bound(const struct vkrt_region_table *table, uint64_t addr) {
  uint32_t lo = 0, hi = table->count;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (table->entries[mid].begin <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int64_t vkrt_region_table_find(const struct vkrt_region_table *table, uint64_t addr) {
  uint32_t n = upper_bound(table, addr);
  if (n == 0)
    return -1;
  const struct vkrt_region_entry *e = &table->entries[n - 1];
  return addr < e->end ? (int64_t)(n - 1) : -1;
}

void *vkrt_region_table_lookup(const struct vkrt_region_table *table, uint64_t addr,
                               uint64_t size) {
  uint64_t last;
  if (size == 0 || __builtin_add_overflow(addr, size - 1, &last))
    return NULL;
  int64_t i = vkrt_region_table_find(table, addr);
  if (i < 0)
    return NULL;
  const struct vkrt_region_entry *e = &table->entries[i];
  return last < e->end ? e->value : NULL; /* range-checked at the end too */
}

int64_t vkrt_region_table_find_overlap(const struct vkrt_region_table *table, uint64_t begin,
                                       uint64_t end) {
  if (end <= begin)
    return -1;
  /* The only candidates: the last entry starting at or before begin, and the first
   * entry starting after it (which overlaps when it starts before end). */
  uint32_t n = upper_bound(table, begin);
  if (n > 0 && table->entries[n - 1].end > begin)
    return n - 1;
  if (n < table->count && table->entries[n].begin < end)
    return n;
  return -1;
}

vkrt_status vkrt_region_table_insert(struct vkrt_region_table *table, uint64_t begin,
                                     uint64_t size, void *value) {
  uint64_t end;
  if (size == 0 || __builtin_add_overflow(begin, size, &end))
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (vkrt_region_table_find_overlap(table, begin, end) >= 0)
    return VKRT_ERROR_ALREADY_EXISTS;
  if (table->count >= table->capacity)
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  uint32_t at = upper_bound(table, begin);
  memmove(&table->entries[at + 1], &table->entries[at],
          (size_t)(table->count - at) * sizeof(*table->entries));
  table->entries[at] = (struct vkrt_region_entry){.begin = begin, .end = end, .value = value};
  table->count++;
  return VKRT_OK;
}

void *vkrt_region_table_remove(struct vkrt_region_table *table, uint64_t begin) {
  int64_t i = vkrt_region_table_find(table, begin);
  if (i < 0 || table->entries[i].begin != begin)
    return NULL;
  void *value = table->entries[i].value;
  memmove(&table->entries[i], &table->entries[i + 1],
          (size_t)(table->count - (uint32_t)i - 1) * sizeof(*table->entries));
  table->count--;
  return value;
}
