/* vkrt_op_matmul (ggml mul_mat): the matrix-vector kernel for M <= 8 (decode and small
 * batches), the tiled kernel otherwise or when the matrix-vector kernel cannot take the
 * layout. The kernels are chosen by weight type from the tables below: a new weight type
 * adds a row (its kernel slots and record functions), nothing else. */
#include <string.h>

#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct matvec_push {
  uint32_t K, N, M;
  uint32_t k_vec;
  uint32_t w_row;
  uint32_t w_offset, x_offset, d_offset;
  uint32_t w_stride2, w_stride3, x_stride2, x_stride3, x_col;
  uint32_t d_stride0, d_stride1, d_stride2, d_stride3;
  uint32_t ne2, r2, r3;
  uint32_t nblocks, grid_x;
  uint32_t accumulate; /* bit 0: dst += result; the fused kernels: bits 1 swiglu, 2 norm */
  uint32_t norm_offset; /* the fused kernels: vec4 units */
  float eps;
  uint32_t base_x, base_y, base_z; /* last: vkrt_ops_dispatch_3d's grid split */
};
VKRT_KERNEL_MATVEC_F32_CHECK_PUSH(struct matvec_push);
VKRT_KERNEL_MATVEC_F32_FUSED_CHECK_PUSH(struct matvec_push);

struct matmul_push {
  uint32_t K, N, M;
  uint32_t w_stride[4];
  uint32_t x_stride[4];
  uint32_t d_stride[4];
  uint32_t w_offset, x_offset, d_offset;
  uint32_t ne2, r2, r3;
  uint32_t accumulate;
  uint32_t w_vec, x_vec; /* 16-byte unit loads of w rows / x columns */
  uint32_t d_vec;        /* cooperative matrices: whole 16x16 results stored straight to dst */
  uint32_t splits, k_chunk, d_split; /* split K: the pieces, k per piece, elements between
                                        the pieces' partial sums (1, K, 0: whole K) */
  uint32_t base_x, base_y, base_z;
};
VKRT_KERNEL_MATMUL_F32_CHECK_PUSH(struct matmul_push);
#if IS_ENABLED(CONFIG_VKRT_KERNEL_Q8_0)
VKRT_KERNEL_MATMUL_Q8_0_CHECK_PUSH(struct matmul_push);
#endif
#if IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL_COOPMAT_Q8_0)
VKRT_KERNEL_MATMUL_W16_Q8_0_CHECK_PUSH(struct matmul_push);
#endif
#if IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL_COOPMAT_Q4_K)
VKRT_KERNEL_MATMUL_W16_Q4_K_CHECK_PUSH(struct matmul_push);
#endif
#if IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL_COOPMAT_Q6_K)
VKRT_KERNEL_MATMUL_W16_Q6_K_CHECK_PUSH(struct matmul_push);
#endif
#if IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K)
VKRT_KERNEL_MATMUL_Q4_K_CHECK_PUSH(struct matmul_push);
#endif
#if IS_ENABLED(CONFIG_VKRT_KERNEL_Q6_K)
VKRT_KERNEL_MATMUL_Q6_K_CHECK_PUSH(struct matmul_push);
#endif

#define MATVEC_MAX_COLS 4 /* NCOLS of one dispatch (1, 2 or 4); more columns: more dispatches
                           * (H200: NCOLS 8 spilled, 4x4096x14336 f16 at 0.25 TB/s) */

/* f16 weights are read as 32-bit words holding two halves: the binding must cover the
 * whole word of the last half. */
static bool widen_to_words(struct vkrt_ops_view *w) {
  uint64_t range = vkrt_align_up(w->bind_range, 4);
  if (w->bind_offset + range > w->buffer->size)
    return false;
  w->bind_range = range;
  return true;
}

/* The matrix-vector kernel reads w and x in 16-byte units. */
static bool matvec_fits(const struct vkrt_ops_view *w, const struct vkrt_ops_view *x,
                        const char **why) {
  uint64_t ts = w->type_size;
  if (w->stride[0] != 1 || (x->stride[0] != 1 && x->ne[0] > 1)) {
    *why = "w or x not dense along K";
    return false;
  }
  if (((uint64_t)w->stride[1] * ts) % 16 || ((uint64_t)w->stride[2] * ts) % 16 ||
      ((uint64_t)w->stride[3] * ts) % 16 || ((uint64_t)w->offset * ts) % 16) {
    *why = "w rows not 16-byte aligned";
    return false;
  }
  if (((uint64_t)x->stride[2] * 4) % 16 || ((uint64_t)x->stride[3] * 4) % 16 ||
      ((uint64_t)x->offset * 4) % 16 || (x->ne[1] > 1 && ((uint64_t)x->stride[1] * 4) % 16)) {
    *why = "x not 16-byte aligned";
    return false;
  }
  return true;
}

static uint32_t pow2_at_least(uint32_t m) {
  uint32_t c = 1;
  while (c < m)
    c *= 2;
  return c;
}

/* The device's configuration for weight type t and `cols` x columns, and the kernel's
 * specialization constants for it. */
static struct vkrt_matvec_config matvec_spec(const struct vkrt_device *dev, vkrt_type t,
                                             uint32_t cols, uint32_t spec[VKRT_OPS_MAX_SPEC]) {
  struct vkrt_matvec_config cfg = vkrt_ops_matvec_config(dev, t, cols);
  memset(spec, 0, VKRT_OPS_MAX_SPEC * sizeof(uint32_t));
  spec[0] = cfg.wg;
  spec[1] = cfg.rows;
  spec[2] = cols;
  spec[3] = cfg.unroll;
  return cfg;
}

/* vkrt_op_matmul_fused's kernel for f16 or f32 w */
static enum vkrt_ops_kernel fused_dense_kernel(vkrt_type t) {
  return t == VKRT_TYPE_F16 ? VKRT_OPS_MATVEC_F16_FUSED : VKRT_OPS_MATVEC_F32_FUSED;
}

/* The fused kernels' configuration: one column, the rows of a block rounded up to even (a
 * block holds whole gate/up pairs). */
static struct vkrt_matvec_config fused_spec(const struct vkrt_device *dev, vkrt_type t,
                                            uint32_t spec[VKRT_OPS_MAX_SPEC]) {
  struct vkrt_matvec_config cfg = matvec_spec(dev, t, 1, spec);
  cfg.rows = spec[1] = (cfg.rows + 1) & ~1u;
  return cfg;
}

/* f16 and f32 weights: kernels/matvec.comp specialized with the device's configuration
 * for the type and column count (vkrt_ops_matvec_config) and NCOLS = M rounded up to a power
 * of two. bits: VKRT_OPS_PUSH_*; the fused kernels take one column (fused_spec), and with
 * VKRT_OPS_PUSH_NORM the norm's weight and eps. */
static vkrt_status record_matvec(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 enum vkrt_ops_kernel kernel, const struct vkrt_ops_view *d,
                                 const struct vkrt_ops_view *w, const struct vkrt_ops_view *x,
                                 uint32_t bits, const struct vkrt_ops_view *norm, float eps) {
  bool fused = kernel == fused_dense_kernel(w->type);
  uint32_t cols = VKRT_MIN(pow2_at_least(x->ne[1]), MATVEC_MAX_COLS);
  uint32_t spec[VKRT_OPS_MAX_SPEC];
  struct vkrt_matvec_config config =
      fused ? fused_spec(dev, w->type, spec) : matvec_spec(dev, w->type, cols, spec);
  const struct vkrt_matvec_config *cfg = &config;
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline_spec(dev, kernel, spec, &p);
  if (s != VKRT_OK)
    return s;
  /* binding 5 (the fused kernels): the norm's weight, x when there is none (bound, not read) */
  struct vkrt_ops_binding b[6] = {vkrt_ops_view_binding(w), vkrt_ops_view_binding(x),
                                  vkrt_ops_view_binding(d), vkrt_ops_view_binding(w),
                                  vkrt_ops_view_binding(x),
                                  vkrt_ops_view_binding(norm ? norm : x)};
  s = vkrt_ops_bind(dev, cmd, p, b, p->binding_count);
  if (s != VKRT_OK)
    return s;
  uint32_t per16 = 16 / w->type_size; /* elements of w per 16 bytes */
  uint32_t nblocks = (w->ne[1] + cfg->rows - 1) / cfg->rows;
  uint32_t grid = (nblocks + cfg->blocks - 1) / cfg->blocks;
  struct matvec_push push = {
      .K = w->ne[0],
      .N = w->ne[1],
      .M = x->ne[1],
      .k_vec = w->ne[0] / per16,
      .w_row = w->stride[1] / per16,
      .w_offset = w->offset / per16,
      .x_offset = x->offset / 4,
      .d_offset = d->offset,
      .w_stride2 = w->stride[2] / per16,
      .w_stride3 = w->stride[3] / per16,
      .x_stride2 = x->stride[2] / 4,
      .x_stride3 = x->stride[3] / 4,
      .x_col = x->stride[1] / 4,
      .d_stride0 = d->stride[0],
      .d_stride1 = d->stride[1],
      .d_stride2 = d->stride[2],
      .d_stride3 = d->stride[3],
      .ne2 = d->ne[2],
      .r2 = x->ne[2] / w->ne[2],
      .r3 = x->ne[3] / w->ne[3],
      .nblocks = nblocks,
      .grid_x = grid,
      .accumulate = bits,
      .norm_offset = norm ? norm->offset / 4 : 0,
      .eps = eps,
  };
  /* columns in groups of `cols`: each dispatch reads w once for its group */
  uint32_t x_offset = push.x_offset, d_offset = push.d_offset;
  for (uint32_t c0 = 0; c0 < x->ne[1]; c0 += cols) {
    push.M = VKRT_MIN(cols, x->ne[1] - c0);
    push.x_offset = x_offset + c0 * push.x_col;
    push.d_offset = d_offset + c0 * push.d_stride1;
    vkrt_ops_dispatch_3d(dev, cmd, p, &push, grid, 1, (uint64_t)d->ne[2] * d->ne[3]);
  }
  return VKRT_OK;
}

/* One matrix-vector pass where w fits a binding; past one binding (validate.c let it through
 * for this path) w bound in slices of whole rows, each as large as a binding may be, one pass
 * per slice. */
static vkrt_status record_matvec_rows(struct vkrt_device *dev, VkCommandBuffer cmd,
                                      enum vkrt_ops_kernel kernel, const struct vkrt_ops_view *d,
                                      const struct vkrt_ops_view *w,
                                      const struct vkrt_ops_view *x, uint32_t bits,
                                      const struct vkrt_ops_view *norm, float eps) {
  if (w->fits_binding)
    return record_matvec(dev, cmd, kernel, d, w, x, bits, norm, eps);
  const struct vkrt_ops_limits *lim = &dev->ops->limits;
  uint64_t ts = w->type_size, row = (uint64_t)w->stride[1] * ts, k_bytes = (uint64_t)w->ne[0] * ts;
  uint64_t slack = VKRT_MAX(lim->min_storage_buffer_offset_alignment, 16) + 4; /* align + word */
  uint64_t fit = lim->max_storage_buffer_range - slack - k_bytes;
  uint64_t rows_per = VKRT_MIN(fit / row + 1, (uint64_t)UINT32_MAX / 16);
  vkrt_ops_count(dev, matvec_split, 1);
  for (uint64_t n0 = 0; n0 < w->ne[1]; n0 += rows_per) {
    struct vkrt_ops_view ws = *w, ds = *d;
    ws.ne[1] = (uint32_t)VKRT_MIN(rows_per, w->ne[1] - n0);
    uint64_t lo = w->lo + n0 * row, hi = lo + (ws.ne[1] - 1) * row + k_bytes;
    if (!vkrt_ops_bind_range(lim, lo, hi, &ws.bind_offset, &ws.bind_range))
      return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL,
                        "vkrt_op_matmul: w row slice [%llu, %llu) does not fit a binding",
                        (unsigned long long)lo, (unsigned long long)hi);
    ws.lo = lo;
    ws.hi = hi;
    ws.offset = (uint32_t)((lo - ws.bind_offset) / ts);
    ws.fits_binding = true;
    if (w->type == VKRT_TYPE_F16 && !widen_to_words(&ws))
      return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                        "vkrt_op_matmul: f16 w ends 2 bytes short of a 4-byte word at the end "
                        "of its buffer; the kernels read halves in pairs (pad the buffer by 2 bytes)");
    ds.offset = d->offset + (uint32_t)n0 * d->stride[0];
    ds.ne[0] = ws.ne[1];
    vkrt_status s = record_matvec(dev, cmd, kernel, &ds, &ws, x, bits, norm, eps);
    if (s != VKRT_OK)
      return s;
  }
  return VKRT_OK;
}

/* ---- the tiled kernel (kernels/matmul.comp) ------------------------------------------- */

/* Tiled kernels per weight type: the portable one and the cooperative-matrix one (f16 tiles
 * in shared memory; none for f32 weights, which would lose their precision). */
static const struct tiled_kind {
  bool present;
  enum vkrt_ops_kernel portable, coopmat;
  enum vkrt_ops_kernel w16; /* quantized w into f16 for the f16 cooperative-matrix tiles */
} tiled_kinds[VKRT_TYPE_COUNT] = {
  [VKRT_TYPE_F32] = {true, VKRT_OPS_MATMUL_F32, VKRT_OPS_KERNEL_COUNT, VKRT_OPS_KERNEL_COUNT},
  [VKRT_TYPE_F16] = {true, VKRT_OPS_MATMUL_F16, VKRT_OPS_MATMUL_F16_CM, VKRT_OPS_KERNEL_COUNT},
  [VKRT_TYPE_Q8_0] = {true, VKRT_OPS_MATMUL_Q8_0, VKRT_OPS_MATMUL_Q8_0_CM, VKRT_OPS_MATMUL_W16_Q8_0},
  [VKRT_TYPE_Q4_K] = {true, VKRT_OPS_MATMUL_Q4_K, VKRT_OPS_MATMUL_Q4_K_CM, VKRT_OPS_MATMUL_W16_Q4_K},
  [VKRT_TYPE_Q6_K] = {true, VKRT_OPS_MATMUL_Q6_K, VKRT_OPS_MATMUL_Q6_K_CM, VKRT_OPS_MATMUL_W16_Q6_K},
};

/* The path of a call with weight type t and M columns (vkrt_matmul_pick), cooperative
 * matrices only where their kernel is in this build. */
static struct vkrt_matmul_pick tiled_pick(struct vkrt_device *dev, vkrt_type t, uint32_t M) {
  enum vkrt_ops_kernel k = tiled_kinds[t].coopmat;
  bool cm = dev->ops->use_coopmat && k != VKRT_OPS_KERNEL_COUNT && vkrt_ops_kernel_usable(dev, k);
  return vkrt_matmul_pick(&dev->ops->matmul, cm, t, M);
}

static void tile_spec(const struct vkrt_matmul_tile *t, bool x16, uint32_t spec[VKRT_OPS_MAX_SPEC]) {
  spec[0] = t->wg, spec[1] = t->bm, spec[2] = t->bn, spec[3] = t->rm, spec[4] = t->bk;
  spec[5] = t->stages, spec[6] = t->parts, spec[7] = x16, spec[8] = t->order;
}

/* Why the tiled kernel cannot take w (NULL: it can). Quantized w comes bound in words
 * (vkrt_ops_widen_words), offsets and strides in bytes. */
static const char *tiled_refusal(struct vkrt_device *dev, const struct vkrt_ops_view *w) {
  if (w->type >= VKRT_TYPE_COUNT || !tiled_kinds[w->type].present)
    return "no tiled kernel for this weight type";
  if (!vkrt_ops_kernel_usable(dev, tiled_kinds[w->type].portable))
    return "tiled kernel not in this build";
  if (!w->fits_binding)
    return "w spans more than one binding (maxStorageBufferRange); only the matrix-vector "
           "kernel binds it in row slices";
  /* Q4_K rows whole words; Q8_0 and Q6_K rows at any even byte (validate.c refuses odd ones) */
  uint32_t a = w->type == VKRT_TYPE_Q4_K ? 4 : w->block > 1 ? 2 : 1;
  if (w->offset % a || w->stride[1] % a || w->stride[2] % a || w->stride[3] % a)
    return w->type == VKRT_TYPE_Q4_K ? "q4_K rows not 4-byte aligned"
                                     : "quantized rows at odd bytes";
  return NULL;
}

/* Quantized w (bound in words, tiled_refusal passed) of a call with M columns on the large
 * cooperative-matrix tile: dequantized to f16 into the w scratch first (NULL) or why not. */
static const char *w16_refusal(const struct vkrt_device *dev, const struct vkrt_ops_view *w,
                               uint32_t M) {
  const struct vkrt_ops_state *ops = dev->ops;
  if (!ops->matmul_w16)
    return "no w scratch on this device (CONFIG_VKRT_MATMUL_W16_SCRATCH_KB = 0, or no "
           "cooperative matrices)";
  if (M < ops->matmul_w16_min_m[w->type])
    return "fewer columns than pay for the conversion";
  enum vkrt_ops_kernel k = tiled_kinds[w->type].w16;
  if (k == VKRT_OPS_KERNEL_COUNT || !vkrt_ops_kernel_usable(dev, k) ||
      !vkrt_ops_kernel_usable(dev, VKRT_OPS_MATMUL_F16_CM))
    return "no conversion to f16 or no f16 tiles for this type in this build";
  if (w->elements * 2 > ops->matmul_w16->size)
    return "w larger than the scratch (CONFIG_VKRT_MATMUL_W16_SCRATCH_KB)";
  return NULL;
}

/* Records the conversion of w's rows [n0, n0 + rows) into the same rows of the w scratch as
 * its own piece of the stream (the tiles' own decode, kernels/matmul.comp W16_COPY) and fills
 * *out with the dense f16 view of those rows; the piece writes only their bytes, so the tiles
 * of other rows run beside it. Rows in pieces only where w has one batch. */
static vkrt_status record_w16(struct vkrt_device *dev, const struct vkrt_ops_view *w,
                              uint32_t n0, uint32_t rows, struct vkrt_ops_view *out) {
  struct vkrt_buffer *scratch = dev->ops->matmul_w16;
  uint64_t K = w->ne[0];
  *out = vkrt_ops_scratch_view(scratch, w->ne, VKRT_TYPE_F16, 2, 1);
  out->offset = (uint32_t)(K * n0);
  out->ne[1] = rows;
  out->elements = K * rows * w->ne[2] * w->ne[3];
  out->lo = 2 * K * n0;
  out->hi = out->lo + 2 * out->elements;
  struct vkrt_stream_access a[2] = {{scratch, out->lo, out->hi, true},
                                    {w->buffer, w->lo, w->hi, false}};
  VkCommandBuffer cmd;
  const struct vkrt_ops_pipeline *p;
  struct vkrt_ops_binding b[2] = {vkrt_ops_view_binding(w), vkrt_ops_view_binding(out)};
  vkrt_status s = vkrt_ops_begin(dev, a, 2, &cmd);
  if (s == VKRT_OK)
    s = vkrt_ops_use(dev, cmd, tiled_kinds[w->type].w16, b, 2, &p);
  if (s != VKRT_OK)
    return s;
  struct matmul_push push = {.K = w->ne[0], .N = rows, .w_offset = w->offset + n0 * w->stride[1],
                             .d_offset = out->offset, .ne2 = w->ne[2]};
  for (int i = 0; i < 4; i++)
    push.w_stride[i] = w->stride[i];
  uint64_t units = (uint64_t)rows * (w->ne[0] / 8);
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, (units + 255) / 256, 1, (uint64_t)w->ne[2] * w->ne[3]);
  return VKRT_OK;
}

/* The pieces of rows a call with quantized w converted first takes (VKRT_MATMUL_W16_PIECES):
 * whole row tiles each, none without a second one; w with batches is converted whole. */
static uint32_t w16_pieces(const struct vkrt_device *dev, const struct vkrt_ops_view *w,
                           uint64_t row_tiles) {
  if (w->ne[2] * w->ne[3] != 1)
    return 1;
  return (uint32_t)VKRT_MAX(1, VKRT_MIN(dev->ops->matmul_w16_pieces, row_tiles));
}

/* Every row (or column) of v, `per` elements to 16 bytes, starts 16-byte aligned in its
 * binding and K is a multiple of 8: the kernel's units of 8 are whole 16-byte loads. */
static bool rows_vec16(const struct vkrt_ops_view *v, uint32_t per) {
  return v->bind_offset % 16 == 0 && v->ne[0] % 8 == 0 && (v->stride[0] == 1 || v->ne[0] == 1) &&
         v->offset % per == 0 && (v->stride[1] % per == 0 || v->ne[1] == 1) &&
         v->stride[2] % per == 0 && v->stride[3] % per == 0;
}

static vkrt_status record_tiled(struct vkrt_device *dev, VkCommandBuffer cmd,
                                const struct vkrt_ops_view *d, const struct vkrt_ops_view *w,
                                const struct vkrt_ops_view *x, bool accumulate) {
  struct vkrt_matmul_pick pick = tiled_pick(dev, w->type, x->ne[1]);
  const struct vkrt_matmul_tile *t = pick.tile;
  bool cm = pick.coopmat;
  /* cooperative matrices round x to f16 anyway: once, first, where the scratch takes it,
   * for M on the large tile. H200 (vkrt-bench cases --tiles, K 4096 x N 14336): M 512 f16
   * 472 us against 654 (q8_0 598 / 625, q4_K 740 / 795; K 14336 f16 553 / 902); M 32 on
   * the medium tile f16 105 us against 88 (the copy and its barrier cost more than the
   * loads save there). */
  bool large_cm = cm && t == &dev->ops->matmul.tile[1][VKRT_MATMUL_LARGE];
  bool x16 = large_cm && !vkrt_matmul_x16_refusal(dev, x);
  /* quantized w dequantized once into f16 for the f16 tiles where many columns share it
   * (from VKRT_MATMUL_W16_MIN_M_* columns, measured there) */
  bool w16 = large_cm && w->block > 1 && !w16_refusal(dev, w, x->ne[1]);
  uint32_t spec[VKRT_OPS_MAX_SPEC];
  tile_spec(t, x16, spec);
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline_spec(dev, w16  ? tiled_kinds[VKRT_TYPE_F16].coopmat
                                              : cm ? tiled_kinds[w->type].coopmat
                                                   : tiled_kinds[w->type].portable, spec, &p);
  if (s != VKRT_OK)
    return s;
  uint64_t gx = (w->ne[1] + t->bm - 1) / t->bm, gy = (x->ne[1] + t->bn - 1) / t->bn;
  uint64_t gz = (uint64_t)d->ne[2] * d->ne[3];
  uint32_t k_chunk, splits = vkrt_matmul_split_k_take(dev, t, d, w->ne[0], gx * gy * gz,
                                                      accumulate, &k_chunk);
  const struct vkrt_ops_view *dst = d;
  struct vkrt_ops_view xh, parts;
  if (splits > 1) {
    parts = vkrt_matmul_split_k_view(dev, d, splits);
    dst = &parts;
    vkrt_ops_count(dev, matmul_split_k, 1);
  }
  uint32_t pieces = w16 && splits == 1 ? w16_pieces(dev, w, gx) : 1;
  uint32_t piece_rows = (uint32_t)(((gx + pieces - 1) / pieces) * t->bm);
  pieces = (uint32_t)((w->ne[1] + piece_rows - 1) / piece_rows); /* none left empty */
  if (w16) {
    vkrt_ops_count(dev, matmul_w16, 1);
    if (pieces > 1)
      vkrt_ops_count(dev, matmul_w16_pieces, pieces);
  }
  vkrt_ops_count(dev, matmul_tiled, 1);
  if (cm)
    vkrt_ops_count(dev, matmul_coopmat, 1);
  bool in_kernel_add = accumulate && splits == 1; /* split: the reduce adds dst */
  for (uint32_t i = 0; i < pieces; i++) {
    uint32_t n0 = i * piece_rows, rows = VKRT_MIN(piece_rows, w->ne[1] - n0);
    struct vkrt_ops_view wp = *w;
    uint32_t d_offset = dst->offset + n0 * dst->stride[0];
    if (w16) {
      s = record_w16(dev, w, n0, rows, &wp);
      if (s != VKRT_OK)
        return s;
    }
    if (x16 && i == 0) {
      s = vkrt_matmul_x16_convert(dev, x, &xh);
      if (s != VKRT_OK)
        return s;
      x = &xh;
      vkrt_ops_count(dev, matmul_x16, 1);
    }
    if (w16 || x16 || splits > 1) {
      /* the tiles: a piece of their own after the rounding (reads w and the scratch), or
       * writing the pieces' scratch */
      struct vkrt_stream_access a[3] = {{dst->buffer, dst->lo, dst->hi, true},
                                        {wp.buffer, wp.lo, wp.hi, false},
                                        {x->buffer, x->lo, x->hi, false}};
      s = vkrt_ops_begin(dev, a, 3, &cmd);
      if (s != VKRT_OK)
        return s;
    }
    /* bindings 3 and 4: x as vec4 (f16 units with x16), f32/f16 w as 16-byte units */
    struct vkrt_ops_binding b[5] = {vkrt_ops_view_binding(&wp), vkrt_ops_view_binding(x),
                                    vkrt_ops_view_binding(dst), vkrt_ops_view_binding(x),
                                    vkrt_ops_view_binding(&wp)};
    s = vkrt_ops_bind(dev, cmd, p, b, p->binding_count);
    if (s != VKRT_OK)
      return s;
    struct matmul_push push = {
        .K = wp.ne[0],
        .N = rows,
        .M = x->ne[1],
        .w_offset = wp.offset,
        .x_offset = x->offset,
        .d_offset = d_offset,
        .ne2 = d->ne[2],
        .r2 = x->ne[2] / wp.ne[2],
        .r3 = x->ne[3] / wp.ne[3],
        .accumulate = in_kernel_add,
        .splits = splits,
        .k_chunk = k_chunk,
        .d_split = splits > 1 ? (uint32_t)d->elements : 0,
        .w_vec = wp.block == 1 && rows_vec16(&wp, 16 / wp.type_size),
        .x_vec = !x16 && rows_vec16(x, 4),
        /* whole 16x16 results as cooperative-matrix stores: dst dense along N, every
         * column 16-byte aligned in a 16-byte aligned binding, nothing to add */
        .d_vec = cm && !in_kernel_add && dst->bind_offset % 16 == 0 && dst->stride[0] == 1 &&
                 d_offset % 4 == 0 && dst->stride[1] % 4 == 0 && dst->stride[2] % 4 == 0 &&
                 dst->stride[3] % 4 == 0 && (splits == 1 || d->elements % 4 == 0),
    };
    for (int j = 0; j < 4; j++) {
      push.w_stride[j] = wp.stride[j];
      push.x_stride[j] = x->stride[j];
      push.d_stride[j] = dst->stride[j];
    }
    vkrt_ops_dispatch_3d(dev, cmd, p, &push, (rows + t->bm - 1) / t->bm, gy, gz * splits);
  }
  return splits > 1 ? vkrt_matmul_split_k_reduce(dev, d, splits, accumulate) : VKRT_OK;
}

/* M at or past the crossover, but the tiled kernel cannot take it: the matrix-vector kernels
 * run it (reading w once per 8 columns or fewer); counted, and logged once per device. */
static void tiled_fallback(struct vkrt_device *dev, const struct vkrt_ops_view *w, uint32_t M,
                           const char *why) {
  struct vkrt_ops_state *ops = dev->ops;
  vkrt_ops_count(dev, matmul_fallback, 1);
  if (!ops->matmul_fallback_logged) {
    ops->matmul_fallback_logged = true;
    vkrt_log(&dev->sys->base, VKRT_LOG_WARN,
             "dev%u: vkrt_op_matmul: %s w, M = %u: tiled kernel not possible (%s); running the "
             "matrix-vector kernels instead (logged once; vkrt_lab counters: matmul_fallback)",
             dev->index, vkrt_type_str(w->type), M, why);
  }
}

/* Matrix-vector kernels per weight type (f32, f16; quantized ones: quant.c). matvec: the
 * layouts matvec_fits accepts. */
static const struct matmul_kind {
  enum vkrt_ops_kernel matvec_kernel;
  bool present;
} matmul_kinds[VKRT_TYPE_COUNT] = {
  [VKRT_TYPE_F32] = {VKRT_OPS_MATVEC_F32, true},
  [VKRT_TYPE_F16] = {VKRT_OPS_MATVEC_F16, true},
};

/* Every pipeline the device's configuration uses with specialization constants: the
 * matrix-vector shapes and the tiled kernels' tiles (vkrt_ops_build_pipelines). */
vkrt_status vkrt_matmul_pipeline_specs(struct vkrt_device *dev, vkrt_ops_spec_fn fn, void *ctx) {
  for (int t = 0; t < VKRT_TYPE_COUNT; t++) {
    enum vkrt_ops_kernel k = matmul_kinds[t].matvec_kernel;
    if (!matmul_kinds[t].present || !vkrt_ops_kernel_usable(dev, k))
      continue;
    for (uint32_t cols = 1; cols <= MATVEC_MAX_COLS; cols *= 2) {
      uint32_t spec[VKRT_OPS_MAX_SPEC];
      matvec_spec(dev, (vkrt_type)t, cols, spec);
      vkrt_status s = fn(dev, (int)k, spec, ctx);
      if (s != VKRT_OK)
        return s;
    }
    uint32_t spec[VKRT_OPS_MAX_SPEC];
    fused_spec(dev, (vkrt_type)t, spec);
    k = fused_dense_kernel((vkrt_type)t);
    vkrt_status s = vkrt_ops_kernel_usable(dev, k) ? fn(dev, (int)k, spec, ctx) : VKRT_OK;
    if (s != VKRT_OK)
      return s;
  }
  for (int t = 0; t < VKRT_TYPE_COUNT; t++) {
    if (!tiled_kinds[t].present || !vkrt_ops_kernel_usable(dev, tiled_kinds[t].portable))
      continue;
    for (int cm = 0; cm < 2; cm++) {
      if (cm && (!dev->ops->use_coopmat || !dev->ops->matmul.coopmat ||
                 tiled_kinds[t].coopmat == VKRT_OPS_KERNEL_COUNT ||
                 !vkrt_ops_kernel_usable(dev, tiled_kinds[t].coopmat)))
        continue;
      for (int size = 0; size < VKRT_MATMUL_SIZES; size++) {
        /* f16 x too: the large cooperative-matrix tile, where the device has the scratch */
        bool x16_too = cm && size == VKRT_MATMUL_LARGE && dev->ops->matmul_x16;
        for (int x16 = 0; x16 <= x16_too; x16++) {
          uint32_t spec[VKRT_OPS_MAX_SPEC];
          tile_spec(&dev->ops->matmul.tile[cm][size], x16, spec);
          vkrt_status s =
              fn(dev, (int)(cm ? tiled_kinds[t].coopmat : tiled_kinds[t].portable), spec, ctx);
          if (s != VKRT_OK)
            return s;
        }
      }
    }
  }
  return VKRT_OK;
}

/* The path per call: M below the device's crossover (vkrt_matmul_pick: per weight type, and
 * per portable or cooperative-matrix tiles) takes the matrix-vector kernels where the layout allows, else the tiled kernel; M at
 * or past it the tiled kernel, falling back (visibly) to the matrix-vector kernels when the
 * tiled one cannot take w. force_matmul_kernel: 1 matrix-vector only, 2 tiled only. */
vkrt_status vkrt_matmul_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3], bool accumulate) {
  const struct vkrt_ops_view *d = &views[0], *x = &views[2];
  struct vkrt_ops_view w = views[1];
  int force = vkrt_ops_forces(dev)->matmul_kernel;
  uint32_t M = x->ne[1];
  bool past = w.type < VKRT_TYPE_COUNT && tiled_pick(dev, w.type, M).tiled;
  if (w.block > 1) { /* quantized weights: matrix-vector kernels in quant.c */
    const char *refusal = NULL;
    if (force != 1 && (force == 2 || past)) {
      refusal = tiled_refusal(dev, &w);
      if (!refusal && !vkrt_ops_widen_words(dev, &w))
        refusal = "w ends short of a 4-byte word at the end of its buffer";
      if (!refusal && x->stride[0] != 1 && x->ne[0] > 1)
        refusal = "x not dense along K";
      if (!refusal)
        return record_tiled(dev, cmd, d, &w, x, accumulate);
      if (force == 2)
        return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                          "vkrt_op_matmul: tiled kernel forced but not possible: %s", refusal);
      tiled_fallback(dev, &w, M, refusal);
    }
    return vkrt_quant_matmul_record(dev, cmd, views, accumulate);
  }
  const struct matmul_kind *kind = &matmul_kinds[w.type];
  if (w.type == VKRT_TYPE_F16 && w.fits_binding && !widen_to_words(&w))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "vkrt_op_matmul: f16 w ends 2 bytes short of a 4-byte word at the end of "
                      "its buffer; the kernels read halves in pairs (pad the buffer by 2 bytes)");
  const char *why = "M past the crossover";
  bool matvec = (!past || force == 1) && matvec_fits(&w, x, &why);
  if (matvec && (!kind->present || !vkrt_ops_kernel_usable(dev, kind->matvec_kernel))) {
    matvec = false;
    why = "matrix-vector kernel unusable on this device";
  }
  if (force == 1 && !matvec)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "vkrt_op_matmul: matrix-vector kernel forced but not possible: %s", why);
  const char *refusal = tiled_refusal(dev, &w);
  if (!matvec || force == 2) {
    if (!refusal)
      return record_tiled(dev, cmd, d, &w, x, accumulate);
    if (force == 2 || !past || !matvec_fits(&w, x, &why) || !kind->present ||
        !vkrt_ops_kernel_usable(dev, kind->matvec_kernel))
      return vkrt_error(&dev->sys->base, w.fits_binding ? VKRT_ERROR_UNAVAILABLE
                                                        : VKRT_ERROR_INVALID_ARGUMENT,
                        "vkrt_op_matmul: w spans %llu bytes; the tiled kernel cannot take it (%s) "
                        "and the matrix-vector kernel cannot either: %s",
                        (unsigned long long)(w.hi - w.lo), refusal,
                        force == 2 ? "tiled kernel forced" : why);
    tiled_fallback(dev, &w, M, refusal);
  }
  vkrt_ops_count(dev, matvec, 1);
  return record_matvec_rows(dev, cmd, kind->matvec_kernel, d, &w, x,
                            accumulate ? VKRT_OPS_PUSH_ACCUMULATE : 0, NULL, 0.0f);
}

/* ---- vkrt_op_matmul_fused on f32 and f16 w (kernels/matvec.comp FUSED) ----------------- */

vkrt_status vkrt_matmul_fused_check(struct vkrt_device *dev, const struct vkrt_ops_view views[8],
                                    const vkrt_matmul_fusion *fusion) {
  struct vkrt_ops_view w = views[1];
  const struct vkrt_ops_view *x = &views[2];
  if (fusion->qkv)
    return vkrt_ops_fused_refuse(dev, "fusion->qkv: %s w; the q/k/v kernels take q4_K and q8_0 "
                                      "w (record the product, vkrt_op_rope_ext, "
                                      "vkrt_op_rope_set_rows and vkrt_op_set_rows)",
                                 vkrt_type_str(w.type));
  if (!vkrt_ops_kernel_usable(dev, fused_dense_kernel(w.type)))
    return vkrt_ops_fused_refuse(dev, "dev%u cannot run the fused %s kernel (not in this build, "
                                      "or no subgroup arithmetic)", dev->index,
                                 vkrt_type_str(w.type));
  vkrt_status s = vkrt_ops_fused_one_column(dev, x);
  if (s != VKRT_OK)
    return s;
  const char *why = NULL;
  if (!w.fits_binding && fusion->swiglu) /* slices of rows would part gate and up rows */
    why = "with swiglu, w spans more than one binding (maxStorageBufferRange)";
  else if (!matvec_fits(&w, x, &why))
    ;
  else if (w.ne[0] % (16 / w.type_size))
    why = w.type == VKRT_TYPE_F16 ? "K not a multiple of 8 (whole 16-byte chunks)"
                                  : "K not a multiple of 4 (whole 16-byte chunks)";
  else if (w.type == VKRT_TYPE_F16 && w.fits_binding && !widen_to_words(&w))
    why = "f16 w ends 2 bytes short of a 4-byte word at the end of its buffer";
  if (why)
    return vkrt_ops_fused_refuse(dev, "%s w: %s", vkrt_type_str(w.type), why);
  return vkrt_ops_fused_norm_loads(dev, views, fusion);
}

vkrt_status vkrt_matmul_fused_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                     const struct vkrt_ops_view views[8],
                                     const vkrt_matmul_fusion *fusion) {
  struct vkrt_ops_view w = views[1];
  if (w.type == VKRT_TYPE_F16 && w.fits_binding)
    widen_to_words(&w); /* checked by vkrt_matmul_fused_check */
  uint32_t bits = (fusion->swiglu ? VKRT_OPS_PUSH_SWIGLU : 0) |
                  (fusion->norm ? VKRT_OPS_PUSH_NORM : 0);
  const struct vkrt_ops_view *norm = fusion->norm ? &views[3] : NULL;
  vkrt_ops_count(dev, matmul_fused_norm, fusion->norm != NULL);
  vkrt_ops_count(dev, matmul_fused_swiglu, fusion->swiglu != 0);
  vkrt_ops_count(dev, matvec, 1);
  /* a large output head past one binding: slices of rows, each with the norm */
  return record_matvec_rows(dev, cmd, fused_dense_kernel(w.type), &views[0], &w, &views[2], bits,
                            norm, fusion->eps);
}

const char *vkrt_matmul_fused_path(const struct vkrt_device *dev) {
  bool f16 = vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_F16_FUSED);
  bool f32 = vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_F32_FUSED);
  if (f16 && f32)
    return "f16 and f32 w, one column: the matrix-vector kernel, x times the norm weight as it "
           "is loaded, its squares summed on the way";
  if (f16 || f32)
    return f16 ? "f16 w, one column: the matrix-vector kernel (f32 w UNSUPPORTED)"
               : "f32 w, one column: the matrix-vector kernel (f16 w UNSUPPORTED)";
  return "none: the fused matrix-vector kernels are not in this build or not usable here "
         "(UNSUPPORTED)";
}
