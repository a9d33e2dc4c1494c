/* libFuzzer harness over the argument validation behind the public API: tensor descriptors
 * of every type (and an invalid one) for every op, with fuzzed float parameters (eps, RoPE's,
 * attention's scale), the import chunk planner (upload ranges) and register/unregister sequences
 * on the region table, each checked against invariants so a wrong answer is a crash too. */
#include <assert.h>
#include <stdlib.h>

#include "base/base.h"
#include "device/device.h"
#include "fuzz_input.h"
#include "import/chunk_plan.h"
#include "import/region_table.h"
#include "ops/validate.h"

static struct vkrt_device devices[2] = {{.index = 0}, {.index = 1}};

static void fuzz_tensor(struct fuzz_input *in, vkrt_tensor *t, struct vkrt_buffer *bufs) {
  t->buffer = &bufs[fuzz_u8(in) % 3];
  t->offset = fuzz_u8(in) & 1 ? fuzz_u64(in) : fuzz_u8(in) * 4u;
  t->type = (vkrt_type)(fuzz_u8(in) % (VKRT_TYPE_COUNT + 1)); /* the last is invalid on purpose */
  for (int d = 0; d < 4; d++)
    t->ne[d] = fuzz_dim(in);
  for (int d = 0; d < 4; d++)
    t->nb[d] = fuzz_u8(in) & 1 ? fuzz_dim(in) : (int64_t)(fuzz_u8(in)) * 2;
}

/* A float as a fuzzer picks it: common values mostly, any bit pattern (NaN, infinities,
 * denormals) sometimes. */
static float fuzz_float(struct fuzz_input *in) {
  static const float common[] = {0.0f, 1.0f, -1.0f, 1e-5f, 10000.0f, 0.125f, 1e30f};
  uint8_t kind = fuzz_u8(in);
  if (kind & 1)
    return common[(kind >> 1) % (sizeof(common) / sizeof(common[0]))];
  uint32_t bits = fuzz_u32(in);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* RoPE's parameters: any mode, n_dims small or any, any freq_base and freq_scale. */
static vkrt_rope_params fuzz_rope_params(struct fuzz_input *in) {
  return (vkrt_rope_params){.mode = fuzz_u8(in) % 4,
                            .n_dims = fuzz_u8(in) & 1 ? fuzz_u32(in) : fuzz_u8(in),
                            .freq_base = fuzz_float(in), .freq_scale = fuzz_float(in)};
}

/* Every accepted view must stay inside its buffer and its binding range, which fits one
 * binding unless the op takes it in several (copy, matmul's w: fits_binding false). */
static void check_views(const struct vkrt_ops_view *v, int n, const struct vkrt_ops_limits *lim) {
  for (int i = 0; i < n; i++) {
    assert(v[i].lo <= v[i].hi);
    assert(v[i].hi <= v[i].buffer->size);
    assert(v[i].bind_offset <= v[i].lo && v[i].hi <= v[i].bind_offset + v[i].bind_range);
    assert(!v[i].fits_binding || v[i].bind_range <= lim->max_storage_buffer_range);
    assert(v[i].bind_offset % lim->min_storage_buffer_offset_alignment == 0);
  }
}

static void fuzz_ops(struct fuzz_input *in) {
  struct vkrt_buffer bufs[3] = {
      {.dev = &devices[0], .size = fuzz_u8(in) & 1 ? fuzz_u64(in) : fuzz_u32(in) % (1u << 20)},
      {.dev = &devices[0], .size = fuzz_u32(in)},
      {.dev = &devices[1], .size = fuzz_u32(in) % 65536},
  };
  struct vkrt_ops_limits lim = {
      .max_storage_buffer_range = fuzz_u8(in) & 1 ? (1ull << 27) : 0xffffffffull,
      .min_storage_buffer_offset_alignment = 1ull << (fuzz_u8(in) % 9),
  };
  vkrt_tensor t[9];
  for (int i = 0; i < 5; i++)
    fuzz_tensor(in, &t[i], bufs);
  struct vkrt_ops_view views[9];
  char why[256];
  switch (fuzz_u8(in) % 14) {
  case 0:
    if (vkrt_ops_check_copy(&lim, &t[0], &t[1], views, why, sizeof(why)))
      check_views(views, 2, &lim);
    break;
  case 1:
    if (vkrt_ops_check_transpose(&lim, &t[0], &t[1], views, why, sizeof(why)))
      check_views(views, 2, &lim);
    break;
  case 2: {
    int dim = (int)(int8_t)fuzz_u8(in) % 6;
    if (vkrt_ops_check_concat(&lim, &t[0], &t[1], &t[2], dim, views, why, sizeof(why))) {
      check_views(views, 3, &lim);
      const char *why_not = NULL;
      (void)vkrt_ops_concat_fast_path_source(views, dim, &why_not);
    }
    break;
  }
  case 3: {
    uint32_t count = fuzz_u8(in) % 10;
    const vkrt_tensor *srcs[8] = {&t[1], &t[2], &t[3], &t[1], &t[2], &t[3], &t[1], &t[2]};
    if (vkrt_ops_check_add(&lim, &t[0], srcs, count, views, why, sizeof(why)))
      check_views(views, (int)count + 1, &lim);
    break;
  }
  case 4:
    if (vkrt_ops_check_matmul(&lim, &t[0], &t[1], &t[2], views, why, sizeof(why)))
      check_views(views, 3, &lim);
    break;
  case 5:
    if (vkrt_ops_check_swiglu(&lim, &t[0], &t[1], &t[2], views, why, sizeof(why)))
      check_views(views, 3, &lim);
    break;
  case 6: {
    const vkrt_tensor *w = fuzz_u8(in) & 1 ? &t[2] : NULL;
    if (vkrt_ops_check_rms_norm(&lim, &t[0], &t[1], w, fuzz_float(in), views, why, sizeof(why)))
      check_views(views, w ? 3 : 2, &lim);
    break;
  }
  case 7: {
    vkrt_rope_params rp = fuzz_rope_params(in);
    const vkrt_tensor *factors = fuzz_u8(in) & 1 ? &t[3] : NULL;
    if (vkrt_ops_check_rope(&lim, &t[0], &t[1], &t[2], factors, fuzz_u8(in) & 7 ? &rp : NULL,
                            views, why, sizeof(why)))
      check_views(views, factors ? 4 : 3, &lim);
    break;
  }
  case 8:
    if (vkrt_ops_check_get_rows(&lim, &t[0], &t[1], &t[2], views, why, sizeof(why)))
      check_views(views, 3, &lim);
    break;
  case 9:
    if (vkrt_ops_check_set_rows(&lim, &t[0], &t[1], &t[2], views, why, sizeof(why)))
      check_views(views, 3, &lim);
    break;
  case 10: { /* argmax, or sample with a key and a fuzzed temperature */
    const vkrt_tensor *key = fuzz_u8(in) & 1 ? &t[2] : NULL;
    float temperature = key ? fuzz_float(in) : 0;
    if (vkrt_ops_check_argmax(&lim, &t[0], &t[1], key, temperature, views, why, sizeof(why)))
      check_views(views, key ? 3 : 2, &lim);
    break;
  }
  case 11: {
    vkrt_rope_params rp = fuzz_rope_params(in);
    const vkrt_tensor *factors = fuzz_u8(in) & 1 ? &t[4] : NULL;
    if (vkrt_ops_check_rope_set_rows(&lim, &t[0], &t[1], &t[2], &t[3], factors,
                                     fuzz_u8(in) & 7 ? &rp : NULL, views, why, sizeof(why)))
      check_views(views, factors ? 5 : 4, &lim);
    break;
  }
  default:
    if (vkrt_ops_check_attention(&lim, &t[0], &t[1], &t[2], &t[3], &t[4], fuzz_float(in), views,
                                 why, sizeof(why)))
      check_views(views, 5, &lim);
    break;
  }
}

static void fuzz_chunks(struct fuzz_input *in) {
  struct vkrt_chunk_limits lim = {
      .page_size = 4096,
      .min_import_alignment = fuzz_u8(in) & 1 ? 4096ull << (fuzz_u8(in) % 5) : 0,
      .max_allocation_size = fuzz_u8(in) & 1 ? fuzz_u64(in) : 0xffe00000ull,
      .max_buffer_size = fuzz_u8(in) & 1 ? fuzz_u64(in) : 1ull << 40,
      .cap = fuzz_u8(in) & 1 ? fuzz_u32(in) : 0,
  };
  uint64_t addr = fuzz_u8(in) & 1 ? fuzz_u64(in) : 0x7f0000000000ull + fuzz_u32(in);
  uint64_t size = fuzz_u8(in) & 1 ? fuzz_u64(in) : fuzz_u32(in);
  struct vkrt_chunk chunks[64];
  struct vkrt_chunk_plan_info info;
  char why[256];
  if (vkrt_chunk_plan(addr, size, &lim, chunks, 64, &info, why, sizeof(why)) != VKRT_OK)
    return;
  /* Chunks tile [0, size) in order; imports are aligned and within the chunk limit. */
  uint64_t expect = 0;
  uint32_t n = info.count < 64 ? info.count : 64;
  for (uint32_t i = 0; i < n; i++) {
    assert(chunks[i].begin == expect && chunks[i].end > chunks[i].begin);
    expect = chunks[i].end;
    assert(chunks[i].import_size <= info.chunk_limit);
    if (chunks[i].importable) {
      assert(chunks[i].import_addr % info.alignment == 0);
      assert(chunks[i].import_addr <= addr + chunks[i].begin);
      assert(addr + chunks[i].end <= chunks[i].import_addr + chunks[i].import_size);
    }
    assert(vkrt_chunk_find(chunks, n, chunks[i].begin) == i);
  }
  if (info.count <= 64)
    assert(expect == size);
}

static void fuzz_regions(struct fuzz_input *in) {
  static struct vkrt_base base;
  static bool base_ready;
  if (!base_ready) {
    vkrt_options o;
    vkrt_options_initialize(&o);
    vkrt_base_init(&base, &o);
    base_ready = true;
  }
  struct vkrt_region_table table;
  vkrt_region_table_init(&table, &base);
  if (vkrt_region_table_reserve(&table, 32) != VKRT_OK)
    abort();
  /* Reference model: a plain array of live ranges. */
  uint64_t rb[32], re[32];
  int live = 0;
  for (int step = 0; step < 64 && in->pos < in->size; step++) {
    uint64_t begin = (uint64_t)fuzz_u8(in) * 4096 + (fuzz_u8(in) & 1 ? fuzz_u8(in) : 0);
    uint64_t size = fuzz_u8(in) & 1 ? fuzz_u64(in) : (uint64_t)fuzz_u8(in) * 512;
    switch (fuzz_u8(in) % 3) {
    case 0: {
      bool overlaps = false, wraps = size == 0 || begin + size < begin;
      for (int i = 0; i < live && !wraps; i++)
        overlaps |= begin < re[i] && rb[i] < begin + size;
      vkrt_status s = vkrt_region_table_insert(&table, begin, size, (void *)(uintptr_t)(begin + 1));
      if (wraps)
        assert(s == VKRT_ERROR_INVALID_ARGUMENT);
      else if (overlaps)
        assert(s == VKRT_ERROR_ALREADY_EXISTS);
      else if (live < 32)
        assert(s == VKRT_OK);
      if (s == VKRT_OK) {
        rb[live] = begin;
        re[live++] = begin + size;
      }
      break;
    }
    case 1: {
      void *v = vkrt_region_table_remove(&table, begin);
      int found = -1;
      for (int i = 0; i < live; i++)
        if (rb[i] == begin)
          found = i;
      assert((v != NULL) == (found >= 0));
      if (found >= 0) {
        rb[found] = rb[live - 1];
        re[found] = re[--live];
      }
      break;
    }
    default: {
      uint64_t len = size % 100000 + 1;
      void *v = vkrt_region_table_lookup(&table, begin, len);
      int holder = -1;
      for (int i = 0; i < live; i++)
        if (rb[i] <= begin && begin + len <= re[i] && begin + len > begin)
          holder = i;
      assert((v != NULL) == (holder >= 0));
      if (v)
        assert(v == (void *)(uintptr_t)(rb[holder] + 1));
      break;
    }
    }
  }
  vkrt_region_table_finish(&table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_input in = {.data = data, .size = size};
  switch (fuzz_u8(&in) % 3) {
  case 0: fuzz_ops(&in); break;
  case 1: fuzz_chunks(&in); break;
  default: fuzz_regions(&in); break;
  }
  return 0;
}
