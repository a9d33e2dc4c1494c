#include <inttypes.h>
#include <stdio.h>

#include "import/chunk_plan.h"

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* Checked align-up: false when the result does not fit in 64 bits. */
static bool align_up_checked(uint64_t v, uint64_t a, uint64_t *out) {
  uint64_t t;
  if (__builtin_add_overflow(v, a - 1, &t))
    return false;
  *out = t & ~(a - 1);
  return true;
}

static uint64_t limit_of(const struct vkrt_chunk_limits *l, uint64_t alignment) {
  uint64_t limit = UINT64_MAX;
  if (l->max_allocation_size && l->max_allocation_size < limit)
    limit = l->max_allocation_size;
  if (l->max_buffer_size && l->max_buffer_size < limit)
    limit = l->max_buffer_size;
  if (l->cap && l->cap < limit)
    limit = l->cap;
  return limit & ~(alignment - 1);
}

static uint64_t alignment_of(const struct vkrt_chunk_limits *l) {
  return l->min_import_alignment > l->page_size ? l->min_import_alignment : l->page_size;
}

uint64_t vkrt_chunk_limit(const struct vkrt_chunk_limits *limits) {
  if (!is_pow2(limits->page_size) ||
      (limits->min_import_alignment && !is_pow2(limits->min_import_alignment)))
    return 0;
  return limit_of(limits, alignment_of(limits));
}

vkrt_status vkrt_chunk_plan(uint64_t addr, uint64_t size, const struct vkrt_chunk_limits *limits,
                            struct vkrt_chunk *chunks, uint32_t capacity,
                            struct vkrt_chunk_plan_info *info, char *why, size_t why_size) {
  *info = (struct vkrt_chunk_plan_info){0};
  if (why_size)
    why[0] = '\0';
  if (size == 0) {
    snprintf(why, why_size, "zero-size range");
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  if (!is_pow2(limits->page_size) ||
      (limits->min_import_alignment && !is_pow2(limits->min_import_alignment))) {
    snprintf(why, why_size, "page size %" PRIu64 " / import alignment %" PRIu64
             " is not a power of two", limits->page_size, limits->min_import_alignment);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  uint64_t end;
  if (__builtin_add_overflow(addr, size, &end)) {
    snprintf(why, why_size, "range 0x%" PRIx64 " + %" PRIu64 " wraps the address space", addr, size);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  const uint64_t page = limits->page_size;
  const uint64_t alignment = alignment_of(limits);
  const uint64_t limit = limit_of(limits, alignment);
  info->alignment = alignment;
  info->chunk_limit = limit;
  if (limit == 0) {
    snprintf(why, why_size, "chunk limit below the import alignment %" PRIu64, alignment);
    return VKRT_ERROR_UNAVAILABLE;
  }

  /* The caller's pages: [map_lo, map_hi). map_hi may not be representable when the range
   * ends in the last page of the address space; then it is "end of address space". */
  const uint64_t map_lo = addr & ~(page - 1);
  uint64_t map_hi = 0;
  const bool map_hi_ok = align_up_checked(end, page, &map_hi);
  const uint64_t a_lo = addr & ~(alignment - 1);
  uint64_t a_hi = 0;
  const bool a_hi_ok = align_up_checked(end, alignment, &a_hi);
  /* Span of the aligned range; when a_hi overflows, cover up to the end of the address
   * space (the last chunk is then not importable). */
  const uint64_t span_minus_1 = (a_hi_ok ? a_hi : 0) - 1 - a_lo; /* a_hi==0 means 2^64 */
  const uint64_t count64 = span_minus_1 / limit + 1;
  if (count64 > UINT32_MAX) {
    snprintf(why, why_size, "%" PRIu64 " chunks of %" PRIu64 " bytes exceed the chunk table",
             count64, limit);
    return VKRT_ERROR_UNAVAILABLE;
  }
  info->count = (uint32_t)count64;

  uint32_t unimportable = 0;
  for (uint64_t k = 0; k < count64; k++) {
    const uint64_t ia = a_lo + k * limit;
    /* ib = min(ia + limit, a_hi) where either may be 2^64 (not representable). */
    uint64_t ib;
    bool ib_ok = !__builtin_add_overflow(ia, limit, &ib);
    if (a_hi_ok && (!ib_ok || ib > a_hi)) {
      ib = a_hi;
      ib_ok = true;
    }
    const uint64_t cb = ia > addr ? ia : addr;
    const uint64_t ce = (ib_ok && ib < end) ? ib : end;
    /* Importable when the aligned range stays inside the caller's pages. */
    bool importable = ia >= map_lo && ib_ok && (!map_hi_ok || ib <= map_hi);
    if (!importable)
      unimportable++;
    if (chunks && k < capacity) {
      chunks[k] = (struct vkrt_chunk){
          .begin = cb - addr,
          .end = ce - addr,
          .import_addr = ia,
          .import_size = ib_ok ? ib - ia : 0 - ia,
          .importable = importable,
      };
    }
    /* Only the first and last chunk can leave the caller's pages: once the chunks that
     * follow are not stored (counting only, or past the capacity), skip to the last one, so
     * a plan of billions of chunks costs two iterations, not billions. */
    if (!(chunks && k + 1 < capacity) && k + 2 < count64)
      k = count64 - 2;
  }
  info->unimportable = unimportable;
  if (chunks && capacity < info->count) {
    snprintf(why, why_size, "chunk array holds %u, plan needs %u", capacity, info->count);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  return VKRT_OK;
}

uint32_t vkrt_chunk_find(const struct vkrt_chunk *chunks, uint32_t count, uint64_t offset) {
  uint32_t lo = 0, hi = count; /* invariant: answer in [lo, hi) */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (chunks[mid].begin <= offset)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}
