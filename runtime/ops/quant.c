/* Quantized weights (Q8_0, Q4_K, Q6_K; ggml block layouts): vkrt_op_matmul with quantized w
 * on the matrix-vector kernels (kernels/matvec_q8_0.comp, matvec_q4_k.comp,
 * matvec_q_stream.comp; M > 1: matvec_q_cols.comp, 2, 4 or 8 columns of x per pass, grid y
 * walks groups of 8 beyond; Q6_K: matvec_q6_k.comp, one kernel per column count; with
 * VKRT_ACTIVATIONS_Q8 one column of any of them: matvec_q8x.comp), and
 * vkrt_op_copy dequantizing into f32/f16 (kernels/dequant.comp). Views of block types carry
 * byte offsets and strides (validate.c). matmul.c and copy.c hand block types here. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

/* kernels/matvec_push.glsl */
struct qmv_push {
  uint32_t N, M, blocks;
  uint32_t w_offset, w_row, w_stride2, w_stride3;
  uint32_t x_offset, x_col, x_stride2, x_stride3;
  uint32_t d_offset, d_stride0, d_col, d_stride2, d_stride3;
  uint32_t ne2, r2, r3;
  uint32_t accumulate; /* VKRT_OPS_PUSH_ACCUMULATE | VKRT_OPS_PUSH_SWIGLU | VKRT_OPS_PUSH_NORM */
  uint32_t norm_offset; /* VKRT_OPS_PUSH_NORM: the norm weight's first element, and eps */
  float eps;
  uint32_t base_x, base_y, base_z;
};
struct qmv_qkv_push { /* one column, one batch: a row's strides only (116 bytes) */
  uint32_t N, M, blocks;
  uint32_t w_offset, w_row, x_offset, d_offset, d_stride0;
  uint32_t accumulate, norm_offset;
  float eps;
  uint32_t q_rows, kv_rows, head_dim, n_dims;
  float theta_scale, freq_scale;
  uint32_t factors, factors_offset, pos_offset;
  uint32_t k_offset, k_row, v_offset, v_row; /* bytes */
  uint32_t cache_types;                      /* bit 0: K q8_0, bit 1: V q8_0 */
  uint32_t cache_rows;
  uint32_t base_x, base_y, base_z;
};

struct dequant_push {
  uint32_t ne[4];
  uint32_t src_stride[4];
  uint32_t dst_stride[4];
  uint32_t src_offset;
  uint32_t dst_offset;
  uint32_t total;
  uint32_t base_group;
};

#if IS_ENABLED(CONFIG_VKRT_KERNEL_Q8_0)
VKRT_KERNEL_MATVEC_Q8_0_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q8_0_VEC16_M8_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q8_0_COLS2_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q8_0_Q8X_QKV_CHECK_PUSH(struct qmv_qkv_push);
VKRT_KERNEL_DEQUANT_Q8_0_F32_CHECK_PUSH(struct dequant_push);
#endif
#if IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K)
VKRT_KERNEL_MATVEC_Q4_K_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q4_K_VEC16_M8_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q4_K_COLS2_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q4_K_Q8X_QKV_CHECK_PUSH(struct qmv_qkv_push);
VKRT_KERNEL_DEQUANT_Q4_K_F32_CHECK_PUSH(struct dequant_push);
#endif
#if IS_ENABLED(CONFIG_VKRT_KERNEL_Q6_K)
VKRT_KERNEL_MATVEC_Q6_K_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q6_K_COLS8_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_MATVEC_Q6_K_Q8X_CHECK_PUSH(struct qmv_push);
VKRT_KERNEL_DEQUANT_Q6_K_F32_CHECK_PUSH(struct dequant_push);
#endif

/* The matrix-vector variants vkrt-bench compares (names in vkrt_quant_variant_names). Each
 * reads the rows differently:
 *   words  : any row alignment (2-byte Q8_0 granules / 4-byte Q4_K words), ROWS rows looped
 *   vec16  : 16 bytes of every one of ROWS rows per invocation (rows and x 16-byte aligned)
 *   lanew  : words of every one of ROWS rows per invocation laid out so that x loads
 *            coalesce too (Q8_0: one word each; Q4_K: four, eight invocations per
 *            super-block) (rows 4-byte aligned, Q8_0 rows of an even block count; x 16-byte
 *            aligned);
 *            lanew-rows-a/-b: the same with 2 / 8 rows per workgroup
 *   kspace : 16 consecutive weights of every one of ROWS rows per invocation, x as four
 *            aligned vec4 (x 16-byte aligned; Q8_0 rows at any alignment, Q4_K rows 8-byte
 *            aligned); kspace-rows-a: 4 rows per workgroup
 *   prefetch: (vec16 layouts, counted as vec16) the next unit's loads issued before this
 *            unit's arithmetic. Q8_0: kspace's reads, 2 rows per workgroup; -rows-a 4 rows,
 *            -rows-b 1 row; -deep two units ahead. Q4_K (kernels/matvec_q_stream.comp): 4 x R
 *            rows per workgroup, lanes 8 g .. 8 g + 7 on rows g, g + 4, .. (R rows each) at the
 *            same 16-byte quant unit of a super-block, so one x load serves the four groups,
 *            quants turned into floats by exponent bits; R = 2, -rows-a R = 4, -rows-b R = 2
 *            with 8 groups of 32 splitting a row, -deep two super-blocks ahead
 *   stream : the same without the loads ahead (Q8_0: 16-byte pieces of 8 two-byte granules)
 *   prefetch-scales: Q4_K prefetch-rows-a with each super-block header read and decoded once
 *            per row (into shared memory, a step ahead) instead of by each of the 8 lanes on
 *            it; Q8_0 has no such header and runs prefetch-rows-a's kernel
 *   q8x    : x rounded to 8 bits per 32 values in shared memory, integer dot products
 *            (kernels/matvec_q8x.comp): M = 1 with K <= Q8X_MAX_K, or M > 1 columns 2, 4 or
 *            8 a pass over w (q8x_columns: K <= 12288), x 16-byte aligned, Q4_K rows 16-byte
 *            aligned, the device's shaderIntegerDotProduct. Changes the result by the
 *            rounding of x: taken unforced only with VKRT_ACTIVATIONS_Q8, for one column
 *            and, where vkrt_options.quant_activations_columns asks, for 2..8 columns from
 *            the type's q8x_columns_min_m (VKRT_QUANT_Q8X_COLUMNS_MIN_M_* has the
 *            measurements); a
 *            forced q8x on columns past its K runs kspace's M > 1 kernel. Q6_K has a
 *            one-column q8x kernel too (rows at any even byte), counted here, though the
 *            knob does not force it.
 * ROWS must match the -DROWS of kernels/Sources (the shader defaults: 2 for Q8_0, 4 for Q4_K). */
enum qmv_kind { QMV_WORDS, QMV_VEC16, QMV_LANEW, QMV_KSPACE, QMV_Q8X };
#define Q8X_MAX_K VKRT_ACTIVATIONS_Q8_MAX_K /* = KMAX of matvec_q8x.comp */
#define Q8X_ROWS 8u /* matvec_q8x.comp: rows a workgroup of 32-invocation subgroups walks at once */
struct qmv_variant {
  enum vkrt_ops_kernel m1, m8; /* M == 1, M > 1 (8 columns per workgroup) */
  uint32_t rows_m1, rows_m8;
  enum qmv_kind kind;
  uint32_t min_rows_per_unit; /* preferred for one column from N >= this x compute units */
  int cols;                   /* M > 1 on these multi-column kernels instead of m8 (COLS_*) */
};

/* The multi-column kernels (kernels/matvec_q_cols.comp): w read once per pass for M = 2,
 * 3..4 and 5..8 columns (beyond: groups of 8 on grid y), each with its rows per workgroup;
 * the prefetching variants take them for M > 1 (prefetch-rows-a: COLS_A, prefetch: COLS_B,
 * prefetch-deep: COLS_C), and Q8_0's kspace (COLS_B: x 16-byte aligned, rows at any
 * alignment; the default where rows are not 16-byte aligned). Q8_0: kspace's units (4 rows) or the stream lanes on 16-byte pieces
 * (_s4: 16 rows); the H200 (K 5120 x N 14336 unless said, CHANGELOG.md 2026-12-04) ran M = 2
 * 44.2 us on kspace's units against 53.6 on the pieces, M = 4 80.9 against 72.7 (K 4096:
 * 69.2 against 57.8), K 4096 M = 8 131.1 against 87.8 (8 rows a workgroup: 55.8, 77.8, 89.8).
 * Q4_K: the stream lanes with 16 rows per workgroup (M = 2 / 4 / 8: 30.8 / 59.0 / 110.9 us;
 * 8 rows 48.9 / 94.7 / 168.5, 4 rows 81.9 / 155.0 / 301.0). */
enum { COLS_NONE, COLS_A, COLS_B, COLS_C, COLS_KINDS };
struct qmv_cols {
  enum vkrt_ops_kernel k[3];
  uint32_t rows[3];
};
static const struct qmv_cols q8_0_cols[COLS_KINDS] = {
  [COLS_A] = {{VKRT_OPS_MATVEC_Q8_0_COLS2, VKRT_OPS_MATVEC_Q8_0_COLS4_S4,
               VKRT_OPS_MATVEC_Q8_0_COLS8_S4}, {4, 16, 16}},
  [COLS_B] = {{VKRT_OPS_MATVEC_Q8_0_COLS2, VKRT_OPS_MATVEC_Q8_0_COLS4,
               VKRT_OPS_MATVEC_Q8_0_COLS8}, {4, 4, 4}},
  [COLS_C] = {{VKRT_OPS_MATVEC_Q8_0_COLS2_S4, VKRT_OPS_MATVEC_Q8_0_COLS4_S4,
               VKRT_OPS_MATVEC_Q8_0_COLS8_S4}, {16, 16, 16}},
};
static const struct qmv_cols q4_k_cols[COLS_KINDS] = {
  [COLS_A] = {{VKRT_OPS_MATVEC_Q4_K_COLS2, VKRT_OPS_MATVEC_Q4_K_COLS4,
               VKRT_OPS_MATVEC_Q4_K_COLS8}, {16, 16, 16}},
  [COLS_B] = {{VKRT_OPS_MATVEC_Q4_K_COLS2_R2, VKRT_OPS_MATVEC_Q4_K_COLS4_R2,
               VKRT_OPS_MATVEC_Q4_K_COLS8_R2}, {8, 8, 8}},
  [COLS_C] = {{VKRT_OPS_MATVEC_Q4_K_COLS2_R1, VKRT_OPS_MATVEC_Q4_K_COLS4_R1,
               VKRT_OPS_MATVEC_Q4_K_COLS8_R1}, {4, 4, 4}},
};

/* The columns one multi-column kernel takes for M columns: 2, 4 or 8 (index 0, 1, 2). */
static unsigned cols_index(uint32_t M) {
  return M <= 2 ? 0 : M <= 4 ? 1 : 2;
}

/* Columns per workgroup of the q8x kernels (kernels/matvec_q8x.comp) for M > 1 columns of
 * K: 2, 4 or 8, the fewest passes over w whose rounded x fits their shared memory (24576
 * values: KMAX there; 32768 in the _wide kernels where the device's shared memory holds
 * their 40 KiB: 8 columns to K 4096, 4 to 8192), fewer columns a pass where K needs it; 0
 * when not even 2 fit (K over 12288, the kernels' limit on every device). */
#define Q8X_COLS_VALUES 24576u
#define Q8X_COLS_VALUES_WIDE 32768u
_Static_assert(Q8X_COLS_VALUES / 2 == VKRT_QUANT_Q8X_COLUMNS_MAX_K, "two columns' K");
_Static_assert(VKRT_ACTIVATIONS_Q8_COLUMNS_MAX_K == VKRT_QUANT_Q8X_COLUMNS_MAX_K, "public K");
struct q8x_cols {
  uint32_t cols; /* columns a pass (0: K too long) */
  bool wide;     /* the _wide kernel (32768 values) */
};

/* Whether the device runs the _wide q8x kernels for w's type (their shared memory). */
static bool q8x_wide_usable(const struct vkrt_device *dev, vkrt_type type) {
  return dev->ops->q8x_columns_wide &&
         vkrt_ops_kernel_usable(dev, type == VKRT_TYPE_Q4_K ? VKRT_OPS_MATVEC_Q4_K_Q8X_COLS8_WIDE
                                                            : VKRT_OPS_MATVEC_Q8_0_Q8X_COLS8_WIDE);
}

static struct q8x_cols q8x_columns_on(bool wide_usable, uint32_t M, uint64_t K) {
  uint32_t values = wide_usable ? Q8X_COLS_VALUES_WIDE : Q8X_COLS_VALUES;
  uint32_t c = 2u << cols_index(M);
  while (c > 2 && K > values / c)
    c >>= 1;
  if (K > VKRT_QUANT_Q8X_COLUMNS_MAX_K)
    return (struct q8x_cols){0, false};
  return (struct q8x_cols){c, K > Q8X_COLS_VALUES / c}; /* wide only where it saves a pass */
}

static uint32_t q8x_columns(uint32_t M, uint64_t K) {
  return q8x_columns_on(false, M, K).cols;
}

/* The q8x kernel for M columns of K on dev (M = 1: one column), its columns a pass. */
struct q8x_pick {
  enum vkrt_ops_kernel k;
  struct q8x_cols c;
};
/* One column on the q8x kernel of w's type: q4_K with four units in flight where the lab
 * asks for it (VKRT_LAB_Q8X_UNROLL_Q4_K) and the build has that kernel */
static enum vkrt_ops_kernel one_column_q8x(const struct vkrt_device *dev, vkrt_type type) {
  if (type == VKRT_TYPE_Q8_0)
    return VKRT_OPS_MATVEC_Q8_0_Q8X;
  bool u4 = vkrt_ops_forces(dev)->q8x_unroll_q4_k == 4 &&
            vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_Q4_K_Q8X_U4);
  return u4 ? VKRT_OPS_MATVEC_Q4_K_Q8X_U4 : VKRT_OPS_MATVEC_Q4_K_Q8X;
}

static struct q8x_pick q8x_kernel(const struct vkrt_device *dev, vkrt_type type, uint32_t M,
                                  uint64_t K) {
  static const enum vkrt_ops_kernel k[2][6] = {
      {VKRT_OPS_MATVEC_Q8_0_Q8X, VKRT_OPS_MATVEC_Q8_0_Q8X_COLS2, VKRT_OPS_MATVEC_Q8_0_Q8X_COLS4,
       VKRT_OPS_MATVEC_Q8_0_Q8X_COLS8, VKRT_OPS_MATVEC_Q8_0_Q8X_COLS4_WIDE,
       VKRT_OPS_MATVEC_Q8_0_Q8X_COLS8_WIDE},
      {VKRT_OPS_MATVEC_Q4_K_Q8X, VKRT_OPS_MATVEC_Q4_K_Q8X_COLS2, VKRT_OPS_MATVEC_Q4_K_Q8X_COLS4,
       VKRT_OPS_MATVEC_Q4_K_Q8X_COLS8, VKRT_OPS_MATVEC_Q4_K_Q8X_COLS4_WIDE,
       VKRT_OPS_MATVEC_Q4_K_Q8X_COLS8_WIDE}};
  const enum vkrt_ops_kernel *t = k[type == VKRT_TYPE_Q4_K];
  if (M == 1)
    return (struct q8x_pick){one_column_q8x(dev, type), {1, false}};
  struct q8x_cols c = q8x_columns_on(q8x_wide_usable(dev, type), M, K);
  unsigned i = cols_index(VKRT_MAX(c.cols, 2)); /* 0, 1, 2: 2, 4, 8 columns */
  return (struct q8x_pick){c.wide ? t[3 + i] : t[1 + i], c};
}

/* Q6_K (kernels/matvec_q6_k.comp): one kernel per column count, any even row alignment and
 * any x offset; for one column with x 16-byte aligned, the stream layout (STREAM: 4 R rows
 * per workgroup, the four lane groups sharing each x load). The lab's variant knob reaches
 * the stream forms by these variant numbers (1-based, of vkrt_quant_variant_names: words,
 * prefetch, prefetch-rows-a, prefetch-rows-b, stream); the others leave Q6_K to its choice.
 * Unforced: the first of the table that the device has and N fills (min_rows_per_unit).
 * The H200 (GPU us, K x N; words = the kernel before the stream ones): output 4096 x 128256
 * stream 206.3, prefetch-rows-a 210.2, prefetch 217.8, prefetch-rows-b 247.3, words 357.8;
 * down 14336 x 4096 prefetch-rows-b 30.2, prefetch 31.6, stream 32.5, prefetch-rows-a 34.9,
 * words 45.7; k-v 4096 x 1024 prefetch-rows-b 5.7, prefetch 6.0, stream 6.3, words 6.6,
 * prefetch-rows-a 10.0. With VKRT_ACTIVATIONS_Q8 and no forced Q6_K variant, one column
 * where q8x fits takes matvec_q8x.comp's Q6_K form (rows at any even byte too). */
#define Q6_K_ROWS 2u /* ROWS of matvec_q6_k.comp */
static const enum vkrt_ops_kernel q6_k_kernels[4] = {
    VKRT_OPS_MATVEC_Q6_K, VKRT_OPS_MATVEC_Q6_K_COLS2, VKRT_OPS_MATVEC_Q6_K_COLS4,
    VKRT_OPS_MATVEC_Q6_K_COLS8};
struct q6_k_variant {
  int variant;
  enum vkrt_ops_kernel k;
  uint32_t rows, min_rows_per_unit;
};
static const struct q6_k_variant q6_k_variants[] = {
  {14, VKRT_OPS_MATVEC_Q6_K_STREAM, 8, 32},
  {12, VKRT_OPS_MATVEC_Q6_K_PREFETCH_W8, 8, 0},
  {1, VKRT_OPS_MATVEC_Q6_K, Q6_K_ROWS, 0},
  {10, VKRT_OPS_MATVEC_Q6_K_PREFETCH, 8, 0},
  {11, VKRT_OPS_MATVEC_Q6_K_PREFETCH_R4, 16, 0},
};

/* The Q6_K variant the lab forces as `variant` (NULL: none of that number). */
static const struct q6_k_variant *q6_k_variant(int variant) {
  for (size_t i = 0; i < VKRT_ARRAY_SIZE(q6_k_variants); i++)
    if (q6_k_variants[i].variant == variant)
      return &q6_k_variants[i];
  return NULL;
}

bool vkrt_quant_q6_k_variant_usable(struct vkrt_device *dev, int variant) {
  const struct q6_k_variant *v = q6_k_variant(variant);
  return IS_ENABLED(CONFIG_VKRT_KERNEL_Q6_K) && v && vkrt_ops_kernel_usable(dev, v->k);
}

/* The stream layout's kernels for 2, 4 and 8 columns per pass (x 16-byte aligned), 8 rows per
 * workgroup. */
static const enum vkrt_ops_kernel q6_k_stream_cols[3] = {
    VKRT_OPS_MATVEC_Q6_K_STREAM_COLS2, VKRT_OPS_MATVEC_Q6_K_STREAM_COLS4,
    VKRT_OPS_MATVEC_Q6_K_STREAM_COLS8};
#define Q6_K_STREAM_COLS_ROWS 8u

enum vkrt_ops_kernel vkrt_quant_q6_k_kernel(uint32_t M) {
  return q6_k_kernels[M <= 1 ? 0 : 1 + cols_index(M)];
}

/* Columns per pass of the Q6_K kernel that takes M columns (groups of 8 beyond 8). */
static uint32_t q6_k_columns(uint32_t M) {
  return M <= 1 ? 1 : 2u << cols_index(M);
}

static const struct qmv_variant q8_0_variants[VKRT_QUANT_VARIANTS] = {
  {VKRT_OPS_MATVEC_Q8_0, VKRT_OPS_MATVEC_Q8_0_M8, 2, 2, QMV_WORDS},
  {VKRT_OPS_MATVEC_Q8_0_VEC16, VKRT_OPS_MATVEC_Q8_0_VEC16_M8, 2, 2, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q8_0_VEC16_R4, VKRT_OPS_MATVEC_Q8_0_VEC16_M8, 4, 2, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q8_0_VEC16_R8, VKRT_OPS_MATVEC_Q8_0_VEC16_M8, 8, 2, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q8_0_LANEW, VKRT_OPS_MATVEC_Q8_0_LANEW_M8, 4, 2, QMV_LANEW},
  {VKRT_OPS_MATVEC_Q8_0_LANEW_R2, VKRT_OPS_MATVEC_Q8_0_LANEW_M8, 2, 2, QMV_LANEW},
  {VKRT_OPS_MATVEC_Q8_0_LANEW_R8, VKRT_OPS_MATVEC_Q8_0_LANEW_M8, 8, 2, QMV_LANEW},
  {VKRT_OPS_MATVEC_Q8_0_KS, VKRT_OPS_MATVEC_Q8_0_KS_M8, 2, 2, QMV_KSPACE, 0, COLS_B},
  {VKRT_OPS_MATVEC_Q8_0_KS_R4, VKRT_OPS_MATVEC_Q8_0_KS_M8, 4, 2, QMV_KSPACE},
  {VKRT_OPS_MATVEC_Q8_0_PREFETCH, VKRT_OPS_MATVEC_Q8_0_KS_M8, 2, 2, QMV_VEC16, 0, COLS_B},
  {VKRT_OPS_MATVEC_Q8_0_PREFETCH_R4, VKRT_OPS_MATVEC_Q8_0_KS_M8, 4, 2, QMV_VEC16, 16, COLS_A},
  {VKRT_OPS_MATVEC_Q8_0_PREFETCH_R1, VKRT_OPS_MATVEC_Q8_0_KS_M8, 1, 2, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q8_0_PREFETCH2, VKRT_OPS_MATVEC_Q8_0_KS_M8, 2, 2, QMV_VEC16, 0, COLS_C},
  {VKRT_OPS_MATVEC_Q8_0_STREAM, VKRT_OPS_MATVEC_Q8_0_VEC16_M8, 8, 2, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q8_0_PREFETCH_R4, VKRT_OPS_MATVEC_Q8_0_KS_M8, 4, 2, QMV_VEC16, 0, COLS_A},
  {VKRT_OPS_MATVEC_Q8_0_Q8X, VKRT_OPS_MATVEC_Q8_0_KS_M8, Q8X_ROWS, 2, QMV_Q8X},
};
static const struct qmv_variant q4_k_variants[VKRT_QUANT_VARIANTS] = {
  {VKRT_OPS_MATVEC_Q4_K, VKRT_OPS_MATVEC_Q4_K_M8, 4, 4, QMV_WORDS},
  {VKRT_OPS_MATVEC_Q4_K_VEC16, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 4, 4, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q4_K_VEC16_R8, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 8, 4, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q4_K_VEC16_R2, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 2, 4, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q4_K_LANEW, VKRT_OPS_MATVEC_Q4_K_LANEW_M8, 4, 4, QMV_LANEW},
  {VKRT_OPS_MATVEC_Q4_K_LANEW_R2, VKRT_OPS_MATVEC_Q4_K_LANEW_M8, 2, 4, QMV_LANEW},
  {VKRT_OPS_MATVEC_Q4_K_LANEW_R8, VKRT_OPS_MATVEC_Q4_K_LANEW_M8, 8, 4, QMV_LANEW},
  {VKRT_OPS_MATVEC_Q4_K_KS, VKRT_OPS_MATVEC_Q4_K_KS_M8, 2, 2, QMV_KSPACE},
  {VKRT_OPS_MATVEC_Q4_K_KS_R4, VKRT_OPS_MATVEC_Q4_K_KS_M8, 4, 2, QMV_KSPACE},
  {VKRT_OPS_MATVEC_Q4_K_PREFETCH, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 8, 4, QMV_VEC16, 0, COLS_B},
  {VKRT_OPS_MATVEC_Q4_K_PREFETCH_R4, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 16, 4, QMV_VEC16, 16, COLS_A},
  {VKRT_OPS_MATVEC_Q4_K_PREFETCH_W8, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 8, 4, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q4_K_PREFETCH2, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 8, 4, QMV_VEC16, 0, COLS_C},
  {VKRT_OPS_MATVEC_Q4_K_STREAM, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 8, 4, QMV_VEC16},
  {VKRT_OPS_MATVEC_Q4_K_SCALES, VKRT_OPS_MATVEC_Q4_K_VEC16_M8, 16, 4, QMV_VEC16, 0, COLS_A},
  {VKRT_OPS_MATVEC_Q4_K_Q8X, VKRT_OPS_MATVEC_Q4_K_KS_M8, Q8X_ROWS, 2, QMV_Q8X},
};
/* The choice when not forced: the first eligible of these (1-based variant numbers), per
 * type (Q8_0, Q4_K), a variant with min_rows_per_unit taken for one column only where N gives
 * every compute unit that many rows (vkrt_quant_rows_fill); the last is always the words
 * kernel, which takes any layout. Measured on the H200, M = 1, timed like the peer
 * (vkrt-bench cases --variants over the decode shapes, CHANGELOG.md 2026-12-04), K x N:
 * Q8_0 prefetch-rows-a 26.7 us at 14336 x 4096 (kspace 30.0, kspace-rows-a 29.2, lanew
 * 31.4), 28.0 at 4096 x 14336 (kspace 30.6), 10.5 at 4096 x 4096 (kspace 11.5); Q4_K
 * prefetch-rows-a 20.3 / 20.4 / 8.4 us (vec16-rows-b 23.7 / 23.8 / 10.3); at 4096 x 1024 kspace
 * 5.8 / 5.2 us against prefetch-rows-a 6.3 / 6.5. (Q8_0 kspace fits every layout lanew and
 * vec16 fit.) Re-measured with prefetch-scales (one run, same method): Q4_K prefetch-rows-a
 * 8.34 / 5.14 (kspace) / 20.29 / 21.17 us at q-o / k-v / gate-up / down against
 * prefetch-scales 8.69 / 6.65 / 19.97 / 21.24: 1.6 % on gate-up only, inside the 20.0-20.5
 * spread of prefetch-rows-a across runs, so the order stays. */
const int vkrt_quant_preference[2][VKRT_QUANT_READ_PATTERNS - 1] = {{11, 8, 5, 1}, {11, 8, 6, 1}};

const char *const vkrt_quant_variant_names[VKRT_QUANT_VARIANTS] = {
  "words", "vec16", "vec16-rows-a", "vec16-rows-b", "lanew", "lanew-rows-a", "lanew-rows-b",
  "kspace", "kspace-rows-a", "prefetch", "prefetch-rows-a", "prefetch-rows-b", "prefetch-deep", "stream",
  "prefetch-scales", "q8x"};

const char *vkrt_quant_activations_path(const struct vkrt_device *dev) {
  if (!dev->ops || !dev->ops->quant_activations_q8)
    return "f32 (vkrt_options.quant_activations = VKRT_ACTIVATIONS_F32)";
  if (!dev->ops->integer_dot)
    return "f32: 8-bit activations were asked for, but the device lacks shaderIntegerDotProduct";
  if (!dev->ops->subgroup_shuffle)
    return "f32: 8-bit activations were asked for, but the device lacks subgroup shuffles in "
           "subgroups of 8 or more (the q8x kernels round x with them)";
  static const char one[] = "8-bit for one column of q8_0/q4_K/q6_K w, K <= 16384, x (and q4_K "
                            "rows) 16-byte aligned (q8x kernels: integer dot products; x "
                            "rounded with subgroup shuffles)";
  struct vkrt_ops_state *ops = dev->ops;
  const uint32_t *lo = ops->q8x_columns_min_m;
  bool wide = q8x_wide_usable(dev, VKRT_TYPE_Q8_0) || q8x_wide_usable(dev, VKRT_TYPE_Q4_K);
  uint32_t values = wide ? Q8X_COLS_VALUES_WIDE : Q8X_COLS_VALUES;
  if (ops->q8x_max_m < VKRT_MIN(lo[0], lo[1]))
    vkrt_format(ops->quant_activations_path, sizeof(ops->quant_activations_path),
                "%s; f32 otherwise (vkrt_options.quant_activations_columns = %u: small batches "
                "in f32 x; 8-bit columns from M %u (q8_0) and %u (q4_K) here)",
                one, ops->q8x_max_m, lo[0], lo[1]);
  else
    vkrt_format(ops->quant_activations_path, sizeof(ops->quant_activations_path),
                "%s; and small batches up to M %u (vkrt_options.quant_activations_columns) "
                "from M %u for q8_0 w and M %u for q4_K (where the 8-bit columns beat f32 x), "
                "K <= %u (8 columns a pass up to K %u, 4 up to %u, else 2%s); f32 otherwise",
                one, ops->q8x_max_m, lo[0], lo[1], Q8X_COLS_VALUES / 2, values / 8, values / 4,
                wide ? ": the 40 KiB kernels past K 3072 / 6144"
                     : "; the 40 KiB kernels' shared memory is past the device's");
  return ops->quant_activations_path;
}

uint32_t vkrt_quant_min_rows_per_unit(vkrt_type type, int variant) {
  unsigned i = (unsigned)variant - 1u;
  if ((type != VKRT_TYPE_Q8_0 && type != VKRT_TYPE_Q4_K) || i >= VKRT_QUANT_VARIANTS)
    return 0;
  return (type == VKRT_TYPE_Q8_0 ? q8_0_variants : q4_k_variants)[i].min_rows_per_unit;
}

enum vkrt_ops_kernel vkrt_quant_variant_kernel(vkrt_type type, int variant, uint32_t M) {
  unsigned i = (unsigned)variant - 1u; /* variant 0 (none) wraps past the end */
  if ((type != VKRT_TYPE_Q8_0 && type != VKRT_TYPE_Q4_K) || i >= VKRT_QUANT_VARIANTS)
    return VKRT_OPS_KERNEL_COUNT;
  const struct qmv_variant *v = &(type == VKRT_TYPE_Q8_0 ? q8_0_variants : q4_k_variants)[i];
  if (M > 1 && v->cols)
    return (type == VKRT_TYPE_Q8_0 ? q8_0_cols : q4_k_cols)[v->cols].k[cols_index(M)];
  return M == 1 ? v->m1 : v->m8;
}

static bool type_enabled(vkrt_type t) {
  switch (t) {
  case VKRT_TYPE_Q8_0: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q8_0);
  case VKRT_TYPE_Q4_K: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K);
  case VKRT_TYPE_Q6_K: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q6_K);
  default: return false;
  }
}

bool vkrt_quant_variant_usable(struct vkrt_device *dev, int variant) {
  bool usable = variant >= 1 && variant <= VKRT_QUANT_VARIANTS;
  for (int t = 0; usable && t < 2; t++) {
    vkrt_type type = t ? VKRT_TYPE_Q4_K : VKRT_TYPE_Q8_0;
    if (type_enabled(type))
      usable = vkrt_ops_kernel_usable(dev, vkrt_quant_variant_kernel(type, variant, 1));
  }
  /* q8x also stands for Q6_K's 8-bit-x kernel, which VKRT_ACTIVATIONS_Q8 takes unforced */
  if (usable && variant == VKRT_QUANT_VARIANTS && type_enabled(VKRT_TYPE_Q6_K))
    usable = vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_Q6_K_Q8X);
  return usable;
}

static vkrt_status compiled_out(struct vkrt_device *dev, vkrt_type t, const char *op) {
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "%s: %s kernels not in this build (CONFIG_VKRT_KERNEL_%s=n)", op,
                    vkrt_type_str(t),
                    t == VKRT_TYPE_Q8_0 ? "Q8_0" : t == VKRT_TYPE_Q4_K ? "Q4_K" : "Q6_K");
}

/* Every row of w (and every batch) starts a-byte aligned. */
static bool rows_aligned(const struct vkrt_ops_view *w, uint32_t a) {
  return w->offset % a == 0 && w->stride[1] % a == 0 && w->stride[2] % a == 0 &&
         w->stride[3] % a == 0;
}

static bool variant_fits(enum qmv_kind kind, const struct vkrt_ops_view *w,
                         const struct vkrt_ops_view *x) {
  uint32_t blocks = w->ne[0] / w->block;
  switch (kind) {
  case QMV_Q8X: /* x rounded into shared memory: K up to what it holds for M columns */
    if ((x->ne[1] == 1 ? w->ne[0] > Q8X_MAX_K : !q8x_columns(x->ne[1], w->ne[0])) ||
        (w->type == VKRT_TYPE_Q4_K && !rows_aligned(w, 16)))
      return false;
    return vkrt_ops_vec16_dense(x);
  case QMV_WORDS:
    return true;
  case QMV_VEC16: /* rows of whole 16-byte units starting 16-byte aligned */
    if (w->type == VKRT_TYPE_Q8_0 && blocks % 8)
      return false;
    return rows_aligned(w, 16) && vkrt_ops_vec16_dense(x);
  case QMV_KSPACE: /* x 16-byte aligned; Q4_K rows 8-byte aligned (Q8_0 rows: any) */
    if (w->type == VKRT_TYPE_Q4_K && !rows_aligned(w, 8))
      return false;
    return vkrt_ops_vec16_dense(x);
  case QMV_LANEW: /* rows of whole words starting 4-byte aligned, all in phase */
    if (w->type == VKRT_TYPE_Q8_0 && blocks % 2)
      return false;
    return rows_aligned(w, 4) && vkrt_ops_vec16_dense(x);
  }
  return false;
}


/* One matrix-vector dispatch of kernel k over w (bound in words) and x: `rows` rows of w and
 * `mt` columns of x per workgroup, counted under read pattern `kind`; with VKRT_OPS_PUSH_NORM in
 * `accumulate`, norm and eps the RMS norm's weight and epsilon. */
static vkrt_status record_qmv_norm(struct vkrt_device *dev, VkCommandBuffer cmd,
                                   enum vkrt_ops_kernel k, uint32_t rows, uint32_t mt,
                                   enum qmv_kind kind, const struct vkrt_ops_view *d,
                                   const struct vkrt_ops_view *w, const struct vkrt_ops_view *x,
                                   uint32_t accumulate, const struct vkrt_ops_view *norm,
                                   float eps) {
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, k, &p);
  if (s != VKRT_OK)
    return s;
  /* binding 3: VEC16 kernels read w as uvec4 there, the Q4_K stream kernels the norm's
   * weight (w when there is none: bound, not read); VEC16, LANEW and KSPACE read x as
   * vec2/vec4 */
  struct vkrt_ops_binding b[4] = {vkrt_ops_view_binding(w), vkrt_ops_view_binding(x),
                                  vkrt_ops_view_binding(d),
                                  vkrt_ops_view_binding(norm ? norm : w)};
  s = vkrt_ops_bind(dev, cmd, p, b, p->binding_count);
  if (s != VKRT_OK)
    return s;
  uint32_t M = x->ne[1];
  struct qmv_push push = {
      .N = w->ne[1],
      .M = M,
      .blocks = w->ne[0] / w->block,
      .w_offset = w->offset,
      .w_row = w->stride[1],
      .w_stride2 = w->stride[2],
      .w_stride3 = w->stride[3],
      .x_offset = x->offset,
      .x_col = x->stride[1],
      .x_stride2 = x->stride[2],
      .x_stride3 = x->stride[3],
      .d_offset = d->offset,
      .d_stride0 = d->stride[0],
      .d_col = d->stride[1],
      .d_stride2 = d->stride[2],
      .d_stride3 = d->stride[3],
      .ne2 = d->ne[2],
      .r2 = x->ne[2] / w->ne[2],
      .r3 = x->ne[3] / w->ne[3],
      .accumulate = accumulate,
      .norm_offset = norm ? (uint32_t)norm->offset : 0,
      .eps = eps,
  };
  /* q8x: every workgroup rounds all of x, then its subgroups walk rows (a gate/up pair each
   * under VKRT_OPS_PUSH_SWIGLU): at most ops->q8x_workgroups of them, not one per `rows` rows */
  uint64_t items = kind == QMV_Q8X && (accumulate & VKRT_OPS_PUSH_SWIGLU) ? w->ne[1] / 2 : w->ne[1];
  uint64_t groups = (items + rows - 1) / rows;
  if (kind == QMV_Q8X)
    groups = VKRT_MIN(groups, dev->ops->q8x_workgroups);
  vkrt_ops_count(dev, quant_read[kind], 1);
  vkrt_ops_count(dev, quant_matvec, 1);
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, groups, (M + mt - 1) / mt,
                       (uint64_t)d->ne[2] * d->ne[3]);
  return VKRT_OK;
}

static vkrt_status record_qmv(struct vkrt_device *dev, VkCommandBuffer cmd, enum vkrt_ops_kernel k,
                              uint32_t rows, uint32_t mt, enum qmv_kind kind,
                              const struct vkrt_ops_view *d, const struct vkrt_ops_view *w,
                              const struct vkrt_ops_view *x, uint32_t accumulate) {
  return record_qmv_norm(dev, cmd, k, rows, mt, kind, d, w, x, accumulate, NULL, 0.0f);
}

/* Q6_K: a forced Q6_K variant; else one column under VKRT_ACTIVATIONS_Q8 where q8x fits
 * takes the q8x kernel; else with x 16-byte aligned a stream kernel (one column: the first of
 * q6_k_variants the device has and N fills; more: the stream kernel for that many columns,
 * whatever stream variant is forced); the rest matvec_q6_k.comp's kernel per column count
 * (the words variant forces those). */
static vkrt_status record_q6_k(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view *d, const struct vkrt_ops_view *w,
                               const struct vkrt_ops_view *x, bool accumulate) {
  uint32_t M = x->ne[1];
  const struct q6_k_variant *v = q6_k_variant(vkrt_ops_forces(dev)->quant_variant);
  if (!v && dev->ops->quant_activations_q8 && M == 1 && variant_fits(QMV_Q8X, w, x) &&
      vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_Q6_K_Q8X))
    return record_qmv(dev, cmd, VKRT_OPS_MATVEC_Q6_K_Q8X, Q8X_ROWS, 1, QMV_Q8X, d, w, x,
                      accumulate);
  for (size_t i = 0; !v && i < VKRT_ARRAY_SIZE(q6_k_variants); i++)
    if (vkrt_ops_kernel_usable(dev, q6_k_variants[i].k) &&
        vkrt_quant_rows_fill(&dev->caps, w->ne[1], q6_k_variants[i].min_rows_per_unit))
      v = &q6_k_variants[i];
  if (v && v->k != VKRT_OPS_MATVEC_Q6_K && vkrt_ops_vec16_dense(x)) {
    enum vkrt_ops_kernel k = M == 1 ? v->k : q6_k_stream_cols[cols_index(M)];
    if (vkrt_ops_kernel_usable(dev, k))
      return record_qmv(dev, cmd, k, M == 1 ? v->rows : Q6_K_STREAM_COLS_ROWS, q6_k_columns(M),
                        QMV_VEC16, d, w, x, accumulate);
  }
  return record_qmv(dev, cmd, vkrt_quant_q6_k_kernel(M), Q6_K_ROWS, q6_k_columns(M), QMV_WORDS,
                    d, w, x, accumulate);
}

vkrt_status vkrt_quant_matmul_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                     const struct vkrt_ops_view views[3], bool accumulate) {
  const struct vkrt_ops_view *d = &views[0], *x = &views[2];
  struct vkrt_ops_view w = views[1];
  const char *const op = accumulate ? "vkrt_op_matmul_add" : "vkrt_op_matmul";
  if (!type_enabled(w.type))
    return compiled_out(dev, w.type, op);
  if (!vkrt_ops_widen_words(dev, &w))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "%s: %s w ends 2 bytes short of a 4-byte word at the end of its buffer "
                      "(the kernels read 32-bit words; pad the buffer)", op, vkrt_type_str(w.type));
  if (x->stride[0] != 1 && x->ne[0] > 1)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "%s: x must be dense along K for %s weights", op, vkrt_type_str(w.type));
  uint32_t M = x->ne[1];
  if (w.type == VKRT_TYPE_Q6_K) /* its own kernels, reading words at any layout */
    return record_q6_k(dev, cmd, d, &w, x, accumulate);
  bool q8 = w.type == VKRT_TYPE_Q8_0;
  const struct qmv_variant *table = q8 ? q8_0_variants : q4_k_variants;
  const int *pref = vkrt_quant_preference[q8 ? 0 : 1];
  _Static_assert(QMV_Q8X + 1 == VKRT_QUANT_READ_PATTERNS, "q8x last, the others one preference each");
  int forced = vkrt_ops_forces(dev)->quant_variant, chosen = 1;
  const int q8x = VKRT_QUANT_VARIANTS; /* the last variant */
  struct q8x_pick q8x_k = q8x_kernel(dev, w.type, M, w.ne[0]);
  bool q8x_fits = variant_fits(QMV_Q8X, &w, x) && vkrt_ops_kernel_usable(dev, q8x_k.k);
  if (forced > 0) {
    chosen = (forced - 1) % VKRT_QUANT_VARIANTS + 1;
    /* a forced q8x on columns its kernels cannot hold runs kspace's M > 1 kernel */
    bool fits = chosen == q8x && M > 1 ? q8x_fits || variant_fits(QMV_KSPACE, &w, x)
                                       : variant_fits(table[chosen - 1].kind, &w, x);
    if (!fits)
      return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                        "%s: variant %s forced but w rows or x are not aligned for it%s", op,
                        vkrt_quant_variant_names[chosen - 1],
                        chosen == q8x ? " (or K is over 16384)" : "");
  } else if (dev->ops->quant_activations_q8 && q8x_fits &&
             (M == 1 || (M <= dev->ops->q8x_max_m &&
                         M >= dev->ops->q8x_columns_min_m[q8 ? 0 : 1]))) {
    chosen = q8x; /* M > 1 only where asked, from the type's measured crossover */
  } else {
    for (int i = 0; i < VKRT_QUANT_READ_PATTERNS - 1; i++) {
      const struct qmv_variant *c = &table[pref[i] - 1];
      if (variant_fits(c->kind, &w, x) &&
          (x->ne[1] > 1 || vkrt_quant_rows_fill(&dev->caps, w.ne[1], c->min_rows_per_unit))) {
        chosen = pref[i];
        break;
      }
    }
  }
  const struct qmv_variant *v = &table[chosen - 1];
  enum vkrt_ops_kernel k = vkrt_quant_variant_kernel(w.type, chosen, M);
  uint32_t rows = M == 1 ? v->rows_m1 : v->rows_m8, mt = M == 1 ? 1 : 8;
  if (M > 1 && v->cols) {
    rows = (q8 ? q8_0_cols : q4_k_cols)[v->cols].rows[cols_index(M)];
    mt = 2u << cols_index(M);
  }
  enum qmv_kind kind = v->kind;
  if (kind == QMV_Q8X && q8x_fits) { /* one column, or 2, 4, 8 per workgroup */
    k = q8x_k.k;
    rows = Q8X_ROWS;
    mt = q8x_k.c.cols;
    vkrt_ops_count(dev, quant_q8x_wide, q8x_k.c.wide);
  } else if (kind == QMV_Q8X) {
    kind = QMV_KSPACE;
  }
  return record_qmv(dev, cmd, k, rows, mt, kind, d, &w, x, accumulate);
}

#define PREFETCH_ROWS_A 11 /* the variant number (vkrt_quant_variant_names) */

/* vkrt_op_matmul_fused's kernels: under VKRT_ACTIVATIONS_Q8 the Q4_K or Q8_0 q8x kernel
 * where it fits (x g rounded to 8 bits, as every one-column product of such an appliance
 * rounds x; groups of 8 rows, 4 gate/up pairs); else, for Q4_K, the stream kernel of
 * prefetch-rows-a (the op's one-column choice on the H200), 16 rows a workgroup, so gate/up
 * pairs stay whole. */
static const struct qmv_variant *fused_variant(void) {
  return &q4_k_variants[PREFETCH_ROWS_A - 1];
}

static enum vkrt_ops_kernel qkv_kernel(vkrt_type type) {
  return type == VKRT_TYPE_Q8_0 ? VKRT_OPS_MATVEC_Q8_0_Q8X_QKV : VKRT_OPS_MATVEC_Q4_K_Q8X_QKV;
}

static bool fused_q8x(struct vkrt_device *dev, const struct vkrt_ops_view *w,
                      const struct vkrt_ops_view *x) {
  return dev->ops->quant_activations_q8 && x->ne[1] == 1 && variant_fits(QMV_Q8X, w, x) &&
         vkrt_ops_kernel_usable(dev, one_column_q8x(dev, w->type));
}

const char *vkrt_quant_qkv_path(const struct vkrt_device *dev) {
  bool q4_k = vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_Q4_K_Q8X_QKV);
  bool q8_0 = vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_Q8_0_Q8X_QKV);
  if (!dev->ops || !dev->ops->quant_activations_q8)
    return "none: the appliance rounds no x to 8 bits (VKRT_ACTIVATIONS_Q8 takes the q8x "
           "kernels; UNSUPPORTED)";
  if (q4_k && q8_0)
    return "q4_K and q8_0 w, one column: the q8x kernels, blocks of 32 rows a workgroup, each "
           "turned and stored by it";
  if (q4_k || q8_0)
    return q4_k ? "q4_K w, one column: the q8x kernel, blocks of 32 rows a workgroup; q8_0 "
                  "UNSUPPORTED"
                : "q8_0 w, one column: the q8x kernel, blocks of 32 rows a workgroup; q4_K "
                  "UNSUPPORTED";
  return "none: the q/k/v kernels are not in this build or the device lacks 16-bit storage, "
         "subgroup arithmetic and shuffles or integer dot products (UNSUPPORTED)";
}

const char *vkrt_quant_fused_path(const struct vkrt_device *dev) {
  bool q4_k_q8x = vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_Q4_K_Q8X);
  bool q8_0_q8x = vkrt_ops_kernel_usable(dev, VKRT_OPS_MATVEC_Q8_0_Q8X);
  bool stream = vkrt_ops_kernel_usable(dev, fused_variant()->m1);
  if (dev->ops && dev->ops->quant_activations_q8 && (q4_k_q8x || q8_0_q8x)) {
    if (q4_k_q8x && q8_0_q8x)
      return stream ? "q4_K and q8_0 w, one column: the q8x kernels, x g rounded to 8 bits (K "
                      "<= 16384; q4_K past it: the stream kernel, x in f32); other "
                      "quantized types UNSUPPORTED"
                    : "q4_K and q8_0 w, one column: the q8x kernels, x g rounded to 8 bits (K "
                      "<= 16384); other quantized types and K UNSUPPORTED";
    return q4_k_q8x ? "q4_K w, one column: the q8x kernel, x g rounded to 8 bits (K <= 16384); "
                      "other quantized types UNSUPPORTED"
                    : "q8_0 w, one column: the q8x kernel, x g rounded to 8 bits (K <= 16384); "
                      "other quantized types UNSUPPORTED";
  }
  return stream ? "q4_K w, one column: the stream kernel, x in f32 (x g staged in shared memory "
                  "up to K 4096); other quantized types UNSUPPORTED (q8_0 with 8-bit activations only)"
                : "none: the q4_K stream kernel is not in this build or not usable here "
                  "(UNSUPPORTED)";
}

vkrt_status vkrt_quant_fused_check(struct vkrt_device *dev, const struct vkrt_ops_view views[8],
                                   const vkrt_matmul_fusion *fusion) {
  const struct vkrt_ops_view *x = &views[2];
  struct vkrt_ops_view w = views[1];
  const struct qmv_variant *v = fused_variant();
  if (w.type != VKRT_TYPE_Q4_K && w.type != VKRT_TYPE_Q8_0)
    return vkrt_ops_fused_refuse(dev, "w is %s; the fused kernels take q4_K weights (and q8_0 "
                                      "where x is rounded to 8 bits)", vkrt_type_str(w.type));
  if (!type_enabled(w.type))
    return compiled_out(dev, w.type, "vkrt_op_matmul_fused");
  vkrt_status s = vkrt_ops_fused_one_column(dev, x);
  if (s != VKRT_OK)
    return s;
  bool widened = vkrt_ops_widen_words(dev, &w), q8x = widened && fused_q8x(dev, &w, x);
  if (w.type == VKRT_TYPE_Q8_0 && !q8x)
    return vkrt_ops_fused_refuse(dev, "q8_0 w takes the 8-bit-x kernel only: an appliance opened "
                                      "with VKRT_ACTIVATIONS_Q8, K up to %u, x dense and 16-byte "
                                      "aligned, a device with integer dot products and subgroup "
                                      "shuffles", (unsigned)Q8X_MAX_K);
  if (!q8x && !vkrt_ops_kernel_usable(dev, v->m1))
    return vkrt_ops_fused_refuse(dev, "dev%u cannot run the q4_K stream kernel", dev->index);
  if (!q8x && (!widened || !variant_fits(v->kind, &w, x)))
    return vkrt_ops_fused_refuse(dev, "w rows and x must start 16-byte aligned, x dense (the "
                                      "kernel's 16-byte loads)");
  if (fusion->qkv) {
    if (!q8x)
      return vkrt_ops_fused_refuse(dev, "fusion->qkv takes the 8-bit-x kernels only: an "
                                        "appliance opened with VKRT_ACTIVATIONS_Q8, K up to %u, "
                                        "x dense and 16-byte aligned, q4_K rows too",
                                   (unsigned)Q8X_MAX_K);
    enum vkrt_ops_kernel k = qkv_kernel(w.type);
    if (!vkrt_ops_kernel_usable(dev, k))
      return vkrt_ops_fused_refuse(dev, "dev%u cannot run the q/k/v kernel (16-bit storage, "
                                        "subgroup arithmetic and shuffles, integer dot products)",
                                   dev->index);
    if (dev->caps.max_push_constants_size < sizeof(struct qmv_qkv_push))
      return vkrt_ops_fused_refuse(dev, "dev%u takes %u bytes of push constants; the q/k/v "
                                        "kernel needs %zu", dev->index,
                                   dev->caps.max_push_constants_size,
                                   sizeof(struct qmv_qkv_push));
  }
  return vkrt_ops_fused_norm_loads(dev, views, fusion);
}

/* vkrt_matmul_fusion.qkv on the q8x kernel of w's type: blocks of 32 rows per workgroup,
 * each finished with its RoPE and cache rows (kernels/matvec_q8x.comp QKV) */
static vkrt_status record_q8x_qkv(struct vkrt_device *dev, VkCommandBuffer cmd,
                                  const struct vkrt_ops_view views[8],
                                  const struct vkrt_ops_view *w,
                                  const vkrt_matmul_fusion *fusion, uint32_t bits) {
  const vkrt_qkv_fusion *q = fusion->qkv;
  const struct vkrt_ops_view *d = &views[0], *x = &views[2], *pos = &views[4];
  const struct vkrt_ops_view *kc = &views[5], *vc = &views[6], *f = &views[7];
  const struct vkrt_ops_view *norm = fusion->norm ? &views[3] : NULL;
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, qkv_kernel(w->type), &p);
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_binding b[8] = {
      vkrt_ops_view_binding(w),   vkrt_ops_view_binding(x),  vkrt_ops_view_binding(d),
      vkrt_ops_view_binding(norm ? norm : w), vkrt_ops_view_binding(pos),
      vkrt_ops_view_binding(kc),  vkrt_ops_view_binding(vc), vkrt_ops_view_binding(f)};
  s = vkrt_ops_bind(dev, cmd, p, b, p->binding_count);
  if (s != VKRT_OK)
    return s;
  struct qmv_qkv_push push = {.N = w->ne[1], .M = 1, .blocks = w->ne[0] / w->block,
                              .w_offset = w->offset, .w_row = w->stride[1],
                              .x_offset = x->offset, .d_offset = d->offset,
                              .d_stride0 = d->stride[0], .accumulate = bits,
                              .norm_offset = norm ? (uint32_t)norm->offset : 0,
                              .eps = fusion->eps};
  push.q_rows = q->n_head * q->head_dim;
  push.kv_rows = q->n_head_kv * q->head_dim;
  push.head_dim = q->head_dim;
  push.n_dims = q->rope.n_dims;
  push.theta_scale = vkrt_rope_theta_scale(&q->rope);
  push.freq_scale = q->rope.freq_scale;
  push.factors = q->rope_factors ? VKRT_MAX(f->stride[0], 1u) : 0;
  push.factors_offset = q->rope_factors ? f->offset : 0;
  push.pos_offset = pos->offset;
  /* caches: byte offsets from their bindings (f16 views count elements, q8_0 bytes) */
  uint32_t k_unit = kc->block > 1 ? 1 : kc->type_size, v_unit = vc->block > 1 ? 1 : vc->type_size;
  push.k_offset = kc->offset * k_unit;
  push.k_row = kc->stride[1] * k_unit;
  push.v_offset = vc->offset * v_unit;
  push.v_row = vc->stride[1] * v_unit;
  push.cache_types = (kc->type == VKRT_TYPE_Q8_0 ? 1u : 0u) | (vc->type == VKRT_TYPE_Q8_0 ? 2u : 0u);
  push.cache_rows = VKRT_MIN(kc->ne[1], vc->ne[1]);
  uint64_t blocks = w->ne[1] / 32;
  vkrt_ops_count(dev, quant_read[QMV_Q8X], 1);
  vkrt_ops_count(dev, quant_matvec, 1);
  vkrt_ops_count(dev, matmul_fused_qkv, 1);
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, VKRT_MIN(blocks, dev->ops->q8x_workgroups), 1, 1);
  return VKRT_OK;
}

vkrt_status vkrt_quant_fused_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                    const struct vkrt_ops_view views[8],
                                    const vkrt_matmul_fusion *fusion) {
  const struct qmv_variant *v = fused_variant();
  struct vkrt_ops_view w = views[1];
  vkrt_ops_widen_words(dev, &w); /* checked by vkrt_quant_fused_check */
  uint32_t bits = (fusion->swiglu ? VKRT_OPS_PUSH_SWIGLU : 0) | (fusion->norm ? VKRT_OPS_PUSH_NORM : 0);
  vkrt_ops_count(dev, matmul_fused_norm, fusion->norm != NULL);
  vkrt_ops_count(dev, matmul_fused_swiglu, fusion->swiglu != 0);
  const struct vkrt_ops_view *norm = fusion->norm ? &views[3] : NULL;
  if (fusion->qkv) /* checked by vkrt_quant_fused_check: the q8x kernels take it */
    return record_q8x_qkv(dev, cmd, views, &w, fusion, bits);
  if (fused_q8x(dev, &w, &views[2]))
    return record_qmv_norm(dev, cmd, one_column_q8x(dev, w.type), Q8X_ROWS, 1, QMV_Q8X, &views[0],
                           &w, &views[2], bits, norm, fusion->eps);
  return record_qmv_norm(dev, cmd, v->m1, v->rows_m1, 1, v->kind, &views[0], &w, &views[2], bits,
                         norm, fusion->eps);
}

vkrt_status vkrt_quant_copy_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                   const struct vkrt_ops_view *dst,
                                   const struct vkrt_ops_view *src_view) {
  static const char *const op = "vkrt_op_copy";
  struct vkrt_ops_view src = *src_view;
  if (!type_enabled(src.type))
    return compiled_out(dev, src.type, op);
  if (!vkrt_ops_widen_words(dev, &src))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "%s: %s src ends 2 bytes short of a 4-byte word at the end of its buffer "
                      "(the kernel reads 32-bit words; pad the buffer)", op, vkrt_type_str(src.type));
  bool f16 = dst->type == VKRT_TYPE_F16;
  enum vkrt_ops_kernel k = src.type == VKRT_TYPE_Q8_0
                               ? (f16 ? VKRT_OPS_DEQUANT_Q8_0_F16 : VKRT_OPS_DEQUANT_Q8_0_F32)
                           : src.type == VKRT_TYPE_Q4_K
                               ? (f16 ? VKRT_OPS_DEQUANT_Q4_K_F16 : VKRT_OPS_DEQUANT_Q4_K_F32)
                               : (f16 ? VKRT_OPS_DEQUANT_Q6_K_F16 : VKRT_OPS_DEQUANT_Q6_K_F32);
  struct vkrt_ops_binding b[2] = {vkrt_ops_view_binding(&src), vkrt_ops_view_binding(dst)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, k, b, 2, &p);
  if (s != VKRT_OK)
    return s;
  struct dequant_push push = {.src_offset = src.offset,
                              .dst_offset = dst->offset,
                              .total = (uint32_t)dst->elements};
  for (int i = 0; i < 4; i++) {
    push.ne[i] = dst->ne[i];
    push.src_stride[i] = src.stride[i];
    push.dst_stride[i] = dst->stride[i];
  }
  vkrt_ops_count(dev, dequant, 1);
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (dst->elements + 255) / 256);
  return VKRT_OK;
}
