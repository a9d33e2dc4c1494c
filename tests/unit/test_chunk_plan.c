/* Chunk planner and import policy decisions: pure functions over hand-built limits and
 * capability snapshots, no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "import/chunk_plan.h"
#include "import/policy.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)

static const struct vkrt_chunk_limits lavapipe = {
    .page_size = 4096, .min_import_alignment = 4096,
    .max_allocation_size = 1ull << 31, .max_buffer_size = 1ull << 31};

/* Plans and checks the invariants every plan must satisfy: chunks cover [0, size)
 * contiguously, each import range is aligned, within the limit, contains its caller bytes,
 * and (when importable) stays inside the caller's pages. */
static struct vkrt_chunk *plan_checked(uint64_t addr, uint64_t size,
                                       const struct vkrt_chunk_limits *l,
                                       struct vkrt_chunk_plan_info *info) {
  char why[256];
  assert_int_equal(vkrt_chunk_plan(addr, size, l, NULL, 0, info, why, sizeof(why)), VKRT_OK);
  assert_true(info->count > 0);
  struct vkrt_chunk *chunks = calloc(info->count, sizeof(*chunks));
  assert_non_null(chunks);
  struct vkrt_chunk_plan_info again;
  assert_int_equal(vkrt_chunk_plan(addr, size, l, chunks, info->count, &again, why, sizeof(why)),
                   VKRT_OK);
  assert_int_equal(again.count, info->count);
  assert_int_equal(again.unimportable, info->unimportable);
  const uint64_t a = info->alignment, page = l->page_size;
  const uint64_t map_lo = addr & ~(page - 1);
  const unsigned __int128 map_hi = ((unsigned __int128)addr + size + page - 1) & ~(unsigned __int128)(page - 1);
  uint64_t expect_begin = 0;
  uint32_t unimportable = 0;
  for (uint32_t i = 0; i < info->count; i++) {
    const struct vkrt_chunk *c = &chunks[i];
    assert_int_equal(c->begin, expect_begin);
    assert_true(c->end > c->begin);
    expect_begin = c->end;
    assert_int_equal(c->import_addr % a, 0);
    assert_true(c->import_size <= info->chunk_limit);
    assert_int_equal(c->import_size % a, 0);
    assert_true(c->import_addr <= addr + c->begin);
    assert_true((unsigned __int128)c->import_addr + c->import_size >= (unsigned __int128)addr + c->end);
    if (c->importable) {
      assert_true(c->import_addr >= map_lo);
      assert_true((unsigned __int128)c->import_addr + c->import_size <= map_hi);
    } else {
      unimportable++;
    }
    assert_int_equal(vkrt_chunk_find(chunks, info->count, c->begin), i);
    assert_int_equal(vkrt_chunk_find(chunks, info->count, c->end - 1), i);
  }
  assert_int_equal(expect_begin, size);
  assert_int_equal(unimportable, info->unimportable);
  return chunks;
}

static void unaligned_start_and_end(void **state) {
  (void)state;
  struct vkrt_chunk_plan_info info;
  struct vkrt_chunk *c = plan_checked(0x7f0000001234ull, 3 * 4096 + 100, &lavapipe, &info);
  assert_int_equal(info.count, 1);
  assert_int_equal(c[0].import_addr, 0x7f0000001000ull);
  assert_int_equal(c[0].import_size, 4 * 4096); /* 0x1000..0x5000 covers ..0x4334+100 */
  assert_true(c[0].importable);
  free(c);
}

static void one_byte(void **state) {
  (void)state;
  struct vkrt_chunk_plan_info info;
  struct vkrt_chunk *c = plan_checked(0x10000fffull, 1, &lavapipe, &info);
  assert_int_equal(info.count, 1);
  assert_int_equal(c[0].begin, 0);
  assert_int_equal(c[0].end, 1);
  assert_int_equal(c[0].import_addr, 0x10000000ull);
  assert_int_equal(c[0].import_size, 4096);
  free(c);
  /* One byte at a page start. */
  c = plan_checked(0x10001000ull, 1, &lavapipe, &info);
  assert_int_equal(c[0].import_addr, 0x10001000ull);
  assert_int_equal(c[0].import_size, 4096);
  free(c);
}

static void exactly_one_chunk(void **state) {
  (void)state;
  struct vkrt_chunk_limits l = lavapipe;
  l.cap = 64 * KIB;
  struct vkrt_chunk_plan_info info;
  /* Aligned and exactly the cap: one chunk; one byte more: two. */
  struct vkrt_chunk *c = plan_checked(0x200000ull, 64 * KIB, &l, &info);
  assert_int_equal(info.count, 1);
  assert_int_equal(c[0].import_size, 64 * KIB);
  free(c);
  c = plan_checked(0x200000ull, 64 * KIB + 1, &l, &info);
  assert_int_equal(info.count, 2);
  assert_int_equal(c[1].begin, 64 * KIB);
  assert_int_equal(c[1].import_size, 4096);
  free(c);
  /* Unaligned start: 64 KiB of data spans two 64 KiB windows. */
  c = plan_checked(0x200010ull, 64 * KIB, &l, &info);
  assert_int_equal(info.count, 2);
  assert_int_equal(c[0].end, 64 * KIB - 0x10);
  free(c);
}

static void many_chunks_under_cap(void **state) {
  (void)state;
  struct vkrt_chunk_limits l = lavapipe;
  l.cap = 64 * KIB;
  struct vkrt_chunk_plan_info info;
  struct vkrt_chunk *c = plan_checked(0x7f1234560789ull, 10 * MIB + 12345, &l, &info);
  assert_int_equal(info.chunk_limit, 64 * KIB);
  assert_true(info.count >= 161);
  assert_int_equal(info.unimportable, 0);
  for (uint32_t i = 1; i + 1 < info.count; i++)
    assert_int_equal(c[i].import_size, 64 * KIB);
  free(c);
  /* A cap that is not a multiple of the alignment is rounded down to it. */
  l.cap = 64 * KIB + 100;
  c = plan_checked(0x100000ull, 1 * MIB, &l, &info);
  assert_int_equal(info.chunk_limit, 64 * KIB);
  assert_int_equal(info.count, 16);
  free(c);
}

static void region_ends_on_last_page_of_file(void **state) {
  (void)state;
  /* A 10000-byte file mapped at 0x40000000: pages 0..2 are mapped, byte 12288 is not. */
  struct vkrt_chunk_plan_info info;
  struct vkrt_chunk *c = plan_checked(0x40000000ull, 10000, &lavapipe, &info);
  assert_int_equal(info.count, 1);
  assert_true(c[0].importable);
  assert_int_equal(c[0].import_addr + c[0].import_size, 0x40000000ull + 12288);
  free(c);
  /* With a 64 KiB import alignment the aligned end (64 KiB) leaves the three mapped pages:
   * that chunk must not be imported. */
  struct vkrt_chunk_limits big = lavapipe;
  big.min_import_alignment = 64 * KIB;
  c = plan_checked(0x40000000ull, 10000, &big, &info);
  assert_int_equal(info.count, 1);
  assert_false(c[0].importable);
  assert_int_equal(info.unimportable, 1);
  free(c);
  /* Same alignment, a mapping starting mid-window: the first chunk is not importable, the
   * middle ones are, the last one is not. */
  big.cap = 64 * KIB;
  c = plan_checked(0x40003000ull, 200 * KIB, &big, &info);
  assert_int_equal(info.count, 4);
  assert_false(c[0].importable);
  assert_true(c[1].importable);
  assert_true(c[2].importable);
  assert_false(c[3].importable);
  free(c);
  /* Whole 64 KiB windows: everything importable. */
  c = plan_checked(0x40000000ull, 256 * KIB, &big, &info);
  assert_int_equal(info.unimportable, 0);
  free(c);
}

static void nvidia_limits(void **state) {
  (void)state;
  const struct vkrt_chunk_limits h200 = {
      .page_size = 4096, .min_import_alignment = 4096,
      .max_allocation_size = 0xffe00000ull, .max_buffer_size = 1ull << 40};
  assert_int_equal(vkrt_chunk_limit(&h200), 0xffe00000ull);
  struct vkrt_chunk_plan_info info;
  char why[128];
  /* 140 GiB of weights: chunk count only (no array). */
  assert_int_equal(vkrt_chunk_plan(0x7f0000000000ull, 140 * GIB, &h200, NULL, 0, &info, why,
                                   sizeof(why)), VKRT_OK);
  assert_int_equal(info.chunk_limit, 0xffe00000ull);
  assert_true(info.chunk_limit < 4 * GIB);
  assert_int_equal(info.count, (140 * GIB + 0xffe00000ull - 1) / 0xffe00000ull);
  struct vkrt_chunk *c = plan_checked(0x7f0000000123ull, 9 * GIB, &h200, &info);
  for (uint32_t i = 0; i < info.count; i++)
    assert_true(c[i].import_size < 4 * GIB);
  free(c);
  /* Common limits across devices: the smallest size limit and the largest alignment win. */
  struct vkrt_caps a = {.min_imported_host_pointer_alignment = 4096,
                        .max_memory_allocation_size = 0xffe00000ull, .max_buffer_size = 1ull << 40};
  struct vkrt_caps b = {.min_imported_host_pointer_alignment = 65536,
                        .max_memory_allocation_size = 1ull << 34, .max_buffer_size = 1ull << 31};
  const struct vkrt_caps *both[] = {&a, &b};
  struct vkrt_chunk_limits l = vkrt_import_limits_common(both, 2, 4096, 0);
  assert_int_equal(l.min_import_alignment, 65536);
  assert_int_equal(vkrt_chunk_limit(&l), 1ull << 31);
  /* maxMemoryAllocationSize binds when it is the smallest limit (the H200's 4 GiB - 2 MiB,
   * on the second device): the common plan must not make chunks one device cannot allocate. */
  struct vkrt_caps big = {.min_imported_host_pointer_alignment = 4096,
                          .max_memory_allocation_size = 1ull << 34, .max_buffer_size = 1ull << 40};
  const struct vkrt_caps *big_then_h200[] = {&big, &a};
  l = vkrt_import_limits_common(big_then_h200, 2, 4096, 0);
  assert_int_equal(l.max_allocation_size, 0xffe00000ull);
  assert_int_equal(vkrt_chunk_limit(&l), 0xffe00000ull);
}

static void overflow_near_uint64_max(void **state) {
  (void)state;
  struct vkrt_chunk_plan_info info;
  char why[128];
  /* Wrapping range. */
  assert_int_equal(vkrt_chunk_plan(UINT64_MAX - 10, 20, &lavapipe, NULL, 0, &info, why, sizeof(why)),
                   VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "wraps"));
  /* Ends exactly at 2^64 - 1: the aligned end is 2^64, not representable. The planner must
   * not wrap; the last chunk reports itself not importable rather than lying. */
  struct vkrt_chunk *c = plan_checked(UINT64_MAX - 8191, 8191, &lavapipe, &info);
  assert_int_equal(info.count, 1);
  assert_false(c[0].importable);
  free(c);
  /* Many chunks up to the top of the address space. */
  struct vkrt_chunk_limits l = lavapipe;
  l.cap = 64 * KIB;
  c = plan_checked(UINT64_MAX - MIB + 1, MIB - 1, &l, &info);
  assert_int_equal(info.count, 16);
  assert_false(c[15].importable);
  assert_true(c[14].importable);
  free(c);
}

static void bad_inputs(void **state) {
  (void)state;
  struct vkrt_chunk_plan_info info;
  char why[128];
  assert_int_equal(vkrt_chunk_plan(0x1000, 0, &lavapipe, NULL, 0, &info, why, sizeof(why)),
                   VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "zero"));
  struct vkrt_chunk_limits l = lavapipe;
  l.min_import_alignment = 3000;
  assert_int_equal(vkrt_chunk_plan(0x1000, 10, &l, NULL, 0, &info, why, sizeof(why)),
                   VKRT_ERROR_INVALID_ARGUMENT);
  l = lavapipe;
  l.cap = 100; /* below one page */
  assert_int_equal(vkrt_chunk_plan(0x1000, 10, &l, NULL, 0, &info, why, sizeof(why)),
                   VKRT_ERROR_UNAVAILABLE);
  /* Too many chunks for the table. */
  l = lavapipe;
  l.cap = 4096;
  assert_int_equal(vkrt_chunk_plan(0, 1ull << 60, &l, NULL, 0, &info, why, sizeof(why)),
                   VKRT_ERROR_UNAVAILABLE);
  /* Capacity smaller than the plan. */
  struct vkrt_chunk one;
  l.cap = 64 * KIB;
  assert_int_equal(vkrt_chunk_plan(0x100000, MIB, &l, &one, 1, &info, why, sizeof(why)),
                   VKRT_ERROR_INVALID_ARGUMENT);
}

static void random_plans(void **state) {
  (void)state;
  srand(1234);
  for (int i = 0; i < 2000; i++) {
    struct vkrt_chunk_limits l = lavapipe;
    l.min_import_alignment = 4096ull << (rand() % 5);
    l.cap = (uint64_t)(1 + rand() % 64) * 4096 * (rand() % 2);
    uint64_t addr = ((uint64_t)rand() << 20) ^ (uint64_t)rand();
    uint64_t size = 1 + (uint64_t)rand() % (4 * MIB);
    struct vkrt_chunk_plan_info info;
    if (l.cap && l.cap < l.min_import_alignment) {
      char why[128];
      assert_int_equal(vkrt_chunk_plan(addr, size, &l, NULL, 0, &info, why, sizeof(why)),
                       VKRT_ERROR_UNAVAILABLE);
      continue;
    }
    struct vkrt_chunk *c = plan_checked(addr, size, &l, &info);
    free(c);
  }
}

static void policy_decisions(void **state) {
  (void)state;
  char why[200];
  struct vkrt_caps nv = {.vendor_id = 0x10de, .external_memory_host = true};
  struct vkrt_caps lvp = {.vendor_id = 0x10005, .is_cpu = true, .external_memory_host = true};
  struct vkrt_caps radv = {.vendor_id = 0x1002, .external_memory_host = true};
  strcpy(radv.driver_name, "radv");
  assert_true(vkrt_import_file_backed_refused(&nv));
  assert_true(vkrt_import_file_backed_refused(&radv));
  assert_false(vkrt_import_file_backed_refused(&lvp));
  assert_int_equal(vkrt_import_expect(&nv, true, 1, why, sizeof(why)), VKRT_IMPORT_PATH_PRESTAGED);
  assert_non_null(strstr(why, "import-then-prestage"));
  assert_int_equal(vkrt_import_expect(&lvp, true, 1, why, sizeof(why)), VKRT_IMPORT_PATH_IMPORTED);
  assert_int_equal(vkrt_import_expect(&lvp, true, 2, why, sizeof(why)), VKRT_IMPORT_PATH_PRESTAGED);
  assert_int_equal(vkrt_import_expect(&lvp, true, 3, why, sizeof(why)), VKRT_IMPORT_PATH_STAGED);
  assert_int_equal(vkrt_import_expect(&lvp, false, 1, why, sizeof(why)), VKRT_IMPORT_PATH_STAGED);
  assert_non_null(strstr(why, "VK_EXT_external_memory_host"));
  assert_int_equal(vkrt_import_expect(&lvp, false, 2, why, sizeof(why)), VKRT_IMPORT_PATH_STAGED);
  assert_string_equal(vkrt_import_policy_name(0), "import-only");
  assert_string_equal(vkrt_import_policy_name(3), "staging-only");
}

/* File loads: mapped where file pages import, else read while the page cache holds the
 * file and O_DIRECT once it does not (when O_DIRECT works); forced paths as asked. */
static void load_decisions(void **state) {
  (void)state;
  char why[300];
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_AUTO, true, 0.0, true, why, sizeof(why)),
                   VKRT_LOAD_PATH_MAPPED);
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_AUTO, false, 0.9, true, why, sizeof(why)),
                   VKRT_LOAD_PATH_READ);
  assert_non_null(strstr(why, "90%"));
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_AUTO, false, 0.1, true, why, sizeof(why)),
                   VKRT_LOAD_PATH_DIRECT);
  assert_non_null(strstr(why, "O_DIRECT"));
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_AUTO, false, 0.1, false, why, sizeof(why)),
                   VKRT_LOAD_PATH_READ);
  assert_non_null(strstr(why, "O_DIRECT does not open"));
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_AUTO, false, -1.0, true, why, sizeof(why)),
                   VKRT_LOAD_PATH_READ);
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_DIRECT, true, 1.0, false, why, sizeof(why)),
                   VKRT_LOAD_PATH_READ);
  assert_non_null(strstr(why, "forced"));
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_DIRECT, true, 1.0, true, why, sizeof(why)),
                   VKRT_LOAD_PATH_DIRECT);
  assert_int_equal(vkrt_load_choose(VKRT_LOAD_PATH_MAPPED, false, 0.0, true, why, sizeof(why)),
                   VKRT_LOAD_PATH_MAPPED);
}

static void prestage_budget(void **state) {
  (void)state;
  struct vkrt_caps a = {.memory_budget = true, .type_count = 2, .heap_count = 2,
                        .host_import_memory_type_bits = 0x2, .type_heap = {0, 1},
                        .heap_budget = {100 * GIB, 6 * GIB}};
  struct vkrt_caps b = {.memory_budget = false};
  const struct vkrt_caps *both[] = {&b, &a};
  assert_int_equal(vkrt_prestage_budget(16 * GIB, both, 1), 16 * GIB);
  assert_int_equal(vkrt_prestage_budget(16 * GIB, both, 2), 6 * GIB);
  assert_int_equal(vkrt_prestage_budget(1 * GIB, both, 2), 1 * GIB);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unaligned_start_and_end),
      cmocka_unit_test(one_byte),
      cmocka_unit_test(exactly_one_chunk),
      cmocka_unit_test(many_chunks_under_cap),
      cmocka_unit_test(region_ends_on_last_page_of_file),
      cmocka_unit_test(nvidia_limits),
      cmocka_unit_test(overflow_near_uint64_max),
      cmocka_unit_test(bad_inputs),
      cmocka_unit_test(random_plans),
      cmocka_unit_test(policy_decisions),
      cmocka_unit_test(load_decisions),
      cmocka_unit_test(prestage_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
