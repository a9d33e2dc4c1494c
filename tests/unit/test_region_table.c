/* Region table: sorted, non-overlapping, O(log n) lookup range-checked at both ends,
 * checked against a brute-force model on random operations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/base.h"
#include "import/region_table.h"

struct fixture {
  struct vkrt_base base;
  struct vkrt_region_table table;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  vkrt_options options;
  memset(&options, 0, sizeof(options)); /* system allocator, no log */
  vkrt_base_init(&f->base, &options);
  vkrt_region_table_init(&f->table, &f->base);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  vkrt_region_table_finish(&f->table);
  assert_int_equal(atomic_load(&f->base.live_allocations), 0);
  vkrt_base_finish(&f->base);
  free(f);
  return 0;
}

static void insert_lookup_remove(void **state) {
  struct fixture *f = *state;
  struct vkrt_region_table *t = &f->table;
  int a, b, c;
  assert_int_equal(vkrt_region_table_reserve(t, 3), VKRT_OK);
  assert_int_equal(vkrt_region_table_insert(t, 1000, 100, &b), VKRT_OK);
  assert_int_equal(vkrt_region_table_insert(t, 100, 100, &a), VKRT_OK);
  assert_int_equal(vkrt_region_table_insert(t, 5000, 1, &c), VKRT_OK);
  assert_int_equal(t->count, 3);
  assert_int_equal(t->entries[0].begin, 100);
  assert_int_equal(t->entries[1].begin, 1000);
  assert_int_equal(t->entries[2].begin, 5000);

  /* Start and end both checked. */
  assert_ptr_equal(vkrt_region_table_lookup(t, 100, 100), &a);
  assert_ptr_equal(vkrt_region_table_lookup(t, 150, 50), &a);
  assert_null(vkrt_region_table_lookup(t, 150, 51));  /* last byte 200 is outside */
  assert_null(vkrt_region_table_lookup(t, 99, 2));    /* first byte outside */
  assert_null(vkrt_region_table_lookup(t, 200, 1));   /* end is exclusive */
  assert_null(vkrt_region_table_lookup(t, 150, 0));   /* empty range */
  assert_null(vkrt_region_table_lookup(t, UINT64_MAX, 2)); /* wraps */
  assert_ptr_equal(vkrt_region_table_lookup(t, 5000, 1), &c);
  assert_null(vkrt_region_table_lookup(t, 5001, 1));
  assert_null(vkrt_region_table_lookup(t, 0, 1));
  /* A range spanning two adjacent regions is in neither. */
  assert_null(vkrt_region_table_lookup(t, 150, 900));

  /* Overlaps: either side, inside, covering; touching is fine. */
  assert_int_equal(vkrt_region_table_insert(t, 50, 51, &a), VKRT_ERROR_ALREADY_EXISTS);
  assert_int_equal(vkrt_region_table_insert(t, 199, 10, &a), VKRT_ERROR_ALREADY_EXISTS);
  assert_int_equal(vkrt_region_table_insert(t, 120, 10, &a), VKRT_ERROR_ALREADY_EXISTS);
  assert_int_equal(vkrt_region_table_insert(t, 0, 10000, &a), VKRT_ERROR_ALREADY_EXISTS);
  assert_int_equal(vkrt_region_table_insert(t, 100, 100, &a), VKRT_ERROR_ALREADY_EXISTS);
  assert_int_equal(vkrt_region_table_insert(t, 300, 0, &a), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_region_table_insert(t, UINT64_MAX - 5, 10, &a), VKRT_ERROR_INVALID_ARGUMENT);
  /* Past the reserved capacity an insert is refused rather than allocating. */
  uint32_t fill = 0;
  while (t->count < t->capacity)
    assert_int_equal(vkrt_region_table_insert(t, 100000 + 10 * fill++, 5, &c), VKRT_OK);
  assert_int_equal(vkrt_region_table_insert(t, 200, 50, &a), VKRT_ERROR_OUT_OF_HOST_MEMORY);
  while (fill)
    assert_ptr_equal(vkrt_region_table_remove(t, 100000 + 10 * --fill), &c);
  assert_int_equal(vkrt_region_table_insert(t, 200, 800, &a), VKRT_OK); /* touches both */

  /* Remove needs the exact start. */
  assert_null(vkrt_region_table_remove(t, 101));
  assert_null(vkrt_region_table_remove(t, 7));
  assert_ptr_equal(vkrt_region_table_remove(t, 1000), &b);
  assert_null(vkrt_region_table_remove(t, 1000));
  assert_null(vkrt_region_table_lookup(t, 1000, 1));
  assert_int_equal(t->count, 3);
  assert_ptr_equal(vkrt_region_table_remove(t, 100), &a);
  assert_ptr_equal(vkrt_region_table_remove(t, 200), &a);
  assert_ptr_equal(vkrt_region_table_remove(t, 5000), &c);
  assert_int_equal(t->count, 0);
  assert_null(vkrt_region_table_lookup(t, 100, 1));
}

#define MODEL_SLOTS 512

static void random_against_model(void **state) {
  struct fixture *f = *state;
  struct vkrt_region_table *t = &f->table;
  /* Model: slot i may hold the region [i*64 + off, +len) with off+len <= 64*span. */
  static uint64_t begin[MODEL_SLOTS], end[MODEL_SLOTS];
  static bool used[MODEL_SLOTS];
  memset(used, 0, sizeof(used));
  srand(42);
  uint32_t live = 0;
  for (int it = 0; it < 20000; it++) {
    int op = rand() % 3;
    uint64_t b = (uint64_t)(rand() % (MODEL_SLOTS * 64));
    uint64_t len = 1 + (uint64_t)(rand() % 200);
    if (op == 0) {
      bool overlaps = false;
      for (int i = 0; i < MODEL_SLOTS; i++)
        if (used[i] && begin[i] < b + len && b < end[i])
          overlaps = true;
      assert_int_equal(vkrt_region_table_reserve(t, 1), VKRT_OK);
      int slot = -1;
      for (int i = 0; i < MODEL_SLOTS && slot < 0; i++)
        if (!used[i])
          slot = i;
      if (slot < 0)
        continue;
      vkrt_status s = vkrt_region_table_insert(t, b, len, &used[slot]);
      assert_int_equal(s, overlaps ? VKRT_ERROR_ALREADY_EXISTS : VKRT_OK);
      if (!overlaps) {
        used[slot] = true;
        begin[slot] = b;
        end[slot] = b + len;
        live++;
      }
    } else if (op == 1) {
      void *expect = NULL;
      for (int i = 0; i < MODEL_SLOTS; i++)
        if (used[i] && begin[i] <= b && b + len <= end[i])
          expect = &used[i];
      assert_ptr_equal(vkrt_region_table_lookup(t, b, len), expect);
    } else {
      int slot = rand() % MODEL_SLOTS;
      uint64_t at = used[slot] ? begin[slot] : b;
      void *expect = NULL;
      for (int i = 0; i < MODEL_SLOTS; i++)
        if (used[i] && begin[i] == at)
          expect = &used[i];
      assert_ptr_equal(vkrt_region_table_remove(t, at), expect);
      if (expect) {
        *(bool *)expect = false;
        live--;
      }
    }
    assert_int_equal(t->count, live);
  }
  for (uint32_t i = 1; i < t->count; i++)
    assert_true(t->entries[i - 1].end <= t->entries[i].begin);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(insert_lookup_remove, setup, teardown),
      cmocka_unit_test_setup_teardown(random_against_model, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
