/* Internal side of the ops: per-device pipeline cache, descriptor binding (push descriptors
 * or a per-stream-slot pool ring), grid splitting, and the per-kernel record functions
 * (stubs when a kernel is compiled out, so api.c needs no #ifdef). */
#pragma once
#include <math.h>

#include "device/device.h"
#include "ops/validate.h"
#include "vkrt_kernels/list.h"

/* Every kernel the ops know, whether or not this build embeds it: one slot per entry of
 * kernels/Sources (generated list). A slot whose kernel is compiled out resolves to no
 * pipeline ("not in this build"). */
enum vkrt_ops_kernel {
#define VKRT_OPS_KERNEL_SLOT(id, name, symbol, needs_16bit, needs_subgroup, needs_idot, needs_coopmat, \
                             needs_shuffle)                                                       \
  VKRT_OPS_##id,
  VKRT_KERNEL_LIST(VKRT_OPS_KERNEL_SLOT)
#undef VKRT_OPS_KERNEL_SLOT
  VKRT_OPS_KERNEL_COUNT
};

enum vkrt_ops_copy_path {
  VKRT_OPS_COPY_PATH_COMPUTE = 0, /* copy_vec4: 16-byte loads, grid-stride */
  VKRT_OPS_COPY_PATH_TRANSFER,    /* vkCmdCopyBuffer */
};

#define VKRT_OPS_MAX_BINDINGS 9
#define VKRT_OPS_MAX_SPEC 9      /* specialization constants 0..8 of a pipeline variant */
/* The matrix-vector kernels' push bits (accumulate; kernels/matvec_push.glsl, matvec.comp) */
#define VKRT_OPS_PUSH_ACCUMULATE 1u /* dst += the product */
#define VKRT_OPS_PUSH_SWIGLU 2u     /* gate/up row pairs, silu(g) u written (the fused kernels) */
#define VKRT_OPS_PUSH_NORM 4u       /* x RMS-normalized first (the fused kernels) */
struct vkrt_device;
/* A visitor of specialized pipelines (kernel, constants) */
typedef vkrt_status (*vkrt_ops_spec_fn)(struct vkrt_device *dev, int kernel,
                                        const uint32_t spec[VKRT_OPS_MAX_SPEC], void *ctx);
#define VKRT_OPS_MAX_VARIANTS 96 /* specialized pipelines per device */
#define VKRT_OPS_POOL_SETS 256 /* descriptor sets per stream slot without push descriptors */

struct vkrt_ops_pipeline {
  atomic_bool ready;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  uint32_t binding_count;
  uint32_t push_size;
  uint32_t local_size[3];
};

/* A pipeline of one kernel specialized with constant_id 0..5 = spec[0..5] (ids a shader
 * does not declare are ignored). */
struct vkrt_ops_variant {
  enum vkrt_ops_kernel kernel;
  uint32_t spec[VKRT_OPS_MAX_SPEC];
  struct vkrt_ops_pipeline p;
};

/* Matrix-vector shape of kernels/matvec.comp (specialization constants), chosen per device
 * and weight type at open (vkrt-bench cases --variants measures the alternatives). */
struct vkrt_matvec_config {
  uint32_t wg;       /* invocations per workgroup (splits K) */
  uint32_t rows;     /* rows of w per workgroup block */
  uint32_t unroll;   /* 16-byte chunks per row loaded before use */
  uint32_t blocks;   /* row blocks per workgroup (grid = blocks of N / this) */
};

/* Workgroup tile of the tiled matmul (kernels/matmul.comp specialization constants), chosen
 * per device at open; vkrt_matmul_tile_check says which are valid. */
struct vkrt_matmul_tile {
  uint32_t wg;     /* invocations per workgroup */
  uint32_t bm;     /* rows of w (n) per tile */
  uint32_t bn;     /* columns of x (m) per tile */
  uint32_t rm;     /* portable: rows per invocation; cooperative matrix: subgroups along m */
  uint32_t bk;     /* k per shared-memory step (a multiple of 32) */
  uint32_t stages; /* shared-memory buffers: 1, or 2 (one barrier per step) */
  uint32_t parts;  /* 0; the lab's timing of the kernel's parts (kernels/matmul.comp PARTS) */
  uint32_t order;  /* workgroups in strips of this many row tiles (0: x-fastest; ORDER) */
  uint32_t per_unit; /* workgroups of this tile resident per compute unit, for split K
                        (vkrt_matmul_split_k); 0: never split */
};

/* The tile sizes: for M up to the small tile's bn, up to the medium tile's, and beyond. */
enum { VKRT_MATMUL_SMALL, VKRT_MATMUL_MEDIUM, VKRT_MATMUL_LARGE, VKRT_MATMUL_SIZES };

/* The tiled matmul's setup per device (matmul_plan.c, pure over the capabilities): the
 * crossovers (M from which the tiled kernel runs, per weight type) and the tiles per size,
 * for the portable kernels [0] and the cooperative-matrix ones [1]. */
struct vkrt_matmul_setup {
  bool coopmat; /* the cooperative-matrix kernels can run here */
  uint32_t min_m[2][VKRT_TYPE_COUNT];
  struct vkrt_matmul_tile tile[2][VKRT_MATMUL_SIZES];
  /* NULL, or why the device's limits refuse a tile of the plan (vkrt_matmul_tile_check):
   * cooperative-matrix tiles then off, portable ones leave every M to the matrix-vector
   * kernels */
  const char *coopmat_refused, *portable_refused;
};

/* What one vkrt_op_matmul takes (vkrt_matmul_pick). */
struct vkrt_matmul_pick {
  bool tiled;   /* M at or past the crossover */
  bool coopmat; /* ... on the cooperative-matrix kernels */
  const struct vkrt_matmul_tile *tile;
};

/* Whether the device can run the cooperative-matrix kernels (VK_NV_cooperative_matrix with
 * 16x16x16 f16 products, 32-wide subgroups), and the defaults for it. */
bool vkrt_matmul_coopmat_capable(const struct vkrt_caps *caps);
void vkrt_matmul_setup_init(const struct vkrt_caps *caps, struct vkrt_matmul_setup *out);
/* NULL when `tile` is valid on this device (cooperative-matrix kernels when `coopmat`), else
 * why not. */
const char *vkrt_matmul_tile_check(const struct vkrt_caps *caps, bool coopmat,
                                   const struct vkrt_matmul_tile *tile);
/* The path for weight type t and M columns, cooperative matrices taken when `use_coopmat`
 * (and the setup says the device has them and the type has such a kernel: not f32). */
/* Whether N rows fill a device for a quantized one-column kernel that wants rows_per_unit rows
 * per compute unit (devices that do not report their units: yes). */
bool vkrt_quant_rows_fill(const struct vkrt_caps *caps, uint32_t N, uint32_t rows_per_unit);
struct vkrt_matmul_pick vkrt_matmul_pick(const struct vkrt_matmul_setup *setup, bool use_coopmat,
                                         vkrt_type t, uint32_t M);
/* Split K: how many pieces of K the tiled kernel's `groups` workgroups of tile t take (1: not
 * split) on a device of compute_units units, each piece k_chunk long (a multiple of t->bk;
 * *k_chunk = K when not split), at most max_splits. */
#define VKRT_MATMUL_MAX_SPLITS 8
uint32_t vkrt_matmul_split_k(uint32_t compute_units, const struct vkrt_matmul_tile *t, uint32_t K,
                             uint64_t groups, uint32_t max_splits, uint32_t *k_chunk);
/* K asked in s pieces of whole steps of bk: the k per piece, and in *pieces how many that
 * makes (s or fewer; 1 with the piece K itself). */
uint32_t vkrt_matmul_split_k_chunk(uint32_t K, uint32_t bk, uint32_t s, uint32_t *pieces);

/* Read patterns of the quantized matrix-vector kernels (quant.c). */
#define VKRT_QUANT_READ_PATTERNS 5

/* The choices the lab may force (vkrt_lab_set); all 0: the ops choose. */
struct vkrt_ops_forces {
  bool concat_generic;       /* never take the concat fast path */
  bool transpose_scalar;     /* never the element-pair transpose kernels */
  int transpose_variant;     /* f32: 0 = default, 1 = plain tile order, 2 = pairs */
  int quant_variant;         /* 0 = choose, 1 + i = variant i of vkrt_quant_variant_names */
  int matmul_kernel;         /* 0 = choose, 1 = matrix-vector only, 2 = tiled only */
  uint32_t attention_splits; /* 0 = plan them */
  uint32_t attention_unroll; /* row passes per tile of the split pass: 0 = plan them */
  int attention_kernel;      /* split pass: 0 = choose, 1 = tiles, 2 = a row per invocation */
  bool rebind_pipeline;      /* bind the pipeline before every dispatch, even one bound */
  bool matmul_x_f32;         /* cooperative-matrix tiles: x converted as loaded, never first */
  uint32_t matmul_split_k;   /* tiled matmul: 0 = plan the pieces of K, else this many */
  bool attention_last_merges; /* tiles: the last split of a row merges it (no combine pass) */
  uint32_t q8x_unroll_q4_k;  /* 4: one column of q4_K on the q8x kernel with four units in
                                flight (matvec_q4_k_q8x_u4), else the default's two */
};

/* Which paths ran (the lab's counters: tests assert them, the bench reports them). */
struct vkrt_ops_counters {
  uint64_t concat_fast, concat_generic, concat_split; /* split: one copy per source */
  uint64_t matvec, matmul_tiled, matmul_coopmat;
  uint64_t matmul_x16;      /* ... of which x was rounded to f16 first (matmul_x16.c) */
  uint64_t matmul_w16;      /* ... of which quantized w was dequantized to f16 first */
  uint64_t matmul_split_k;  /* ... of which K ran in pieces, reduced after (matmul_split_k.c) */
  uint64_t matvec_split;    /* matrix-vector with w bound in row slices (w > one binding) */
  uint64_t matmul_fallback; /* M past the crossover on the matrix-vector kernels because the
                               tiled one could not take w */
  uint64_t transpose_x2, reduce_vec4, copy_u4, copy_tiled;
  uint64_t quant_matvec, dequant;
  uint64_t quant_read[VKRT_QUANT_READ_PATTERNS]; /* words (Q6_K's f32-x kernels too), vec16,
                                                    lanew, kspace, q8x (Q6_K's too) */
  uint64_t argmax_split;    /* argmax rows over several workgroups + a combine pass */
  uint64_t sample_draws;    /* rows drawn by vkrt_op_sample (the Gumbel-max kernel) */
  uint64_t top_k_passes;    /* vkrt_op_top_k's dispatches: the slices' sorts, the merges */
  uint64_t attention, attention_splits, attention_rounds;
  uint64_t attention_rows;     /* split pass with a row per invocation (attention_rows.comp) */
  uint64_t attention_k16;      /* ... reading q8_0 K rows in 16-byte words */
  uint64_t attention_q8q;      /* ... scoring q8_0 K on queries rounded to 8 bits */
  uint64_t attention_direct;   /* one split: no combine pass */
  uint64_t attention_full_split; /* tiles of a split each: rows loaded with kv_len */
  uint64_t attention_last_merges; /* the last split of each row merged them: no combine pass */
  uint64_t matmul_fused_norm, matmul_fused_swiglu; /* vkrt_op_matmul_fused's folded steps */
  uint64_t matmul_fused_qkv; /* ... the q/k/v product with its RoPE and cache rows */
  uint64_t quant_q8x_wide; /* q8x columns in one pass of the 40 KiB (_wide) kernels */
  uint64_t matmul_w16_pieces; /* w16 calls in pieces of rows: their pieces */
};

/* The lab's part of a device's ops: made with the ops state only with CONFIG_VKRT_LAB. */
struct vkrt_ops_lab {
  struct vkrt_ops_forces force;
  struct vkrt_ops_counters count;
};

/* A device's ops: what the device can run, the pipeline cache and the plans chosen at open. */
struct vkrt_ops_state {
  struct vkrt_device *dev;
  struct vkrt_ops_limits limits;
  uint32_t max_groups[3];         /* maxComputeWorkGroupCount (tests may lower it) */
  uint32_t copy_vec4_max_groups;  /* grid-stride copy: workgroups per dispatch */
  uint32_t q8x_workgroups;        /* the q8x kernels' grid: workgroups at most */
  bool q8x_columns_wide;          /* 4 and 8 columns a pass on the 40 KiB kernels where usable */
  bool push_descriptor;           /* VK_KHR_push_descriptor usable */
  bool subgroup_arithmetic;       /* compute-stage subgroupAdd (matvec) */
  bool subgroup_shuffle;          /* compute-stage subgroup shuffles, subgroups of 8 or more */
  bool storage_16bit;             /* storageBuffer16BitAccess (f16 copy/transpose/...) */
  bool integer_dot;               /* shaderIntegerDotProduct (8-bit-activation quant kernels) */
  uint32_t max_invocations;       /* maxComputeWorkGroupInvocations: larger kernels unusable */
  uint32_t max_shared_bytes;      /* maxComputeSharedMemorySize: kernels needing more unusable */
  enum vkrt_ops_copy_path copy_path;
  bool copy_transposed_tiled;     /* transposed-view copies take the tiled transpose */
  pthread_mutex_t lock;           /* lazy pipeline creation */
  const struct vkrt_kernel_desc *desc[VKRT_OPS_KERNEL_COUNT]; /* NULL: compiled out */
  struct vkrt_ops_pipeline pipe[VKRT_OPS_KERNEL_COUNT];
  /* descriptor pool ring, one pool per stream command buffer (only without push
   * descriptors): a pool is reset when its slot is recorded anew. */
  VkDescriptorPool pool[VKRT_STREAM_DEPTH];
  uint64_t pool_epoch[VKRT_STREAM_DEPTH];
  bool pool_used[VKRT_STREAM_DEPTH];
  bool pipelines_at_open;          /* vkrt_ops_build_pipelines ran (vkrt_options.pipelines) */
  char pipelines_built[96];        /* ... how: "built at open on N threads in T ms" */
  /* vkrt_options.quant_activations == VKRT_ACTIVATIONS_Q8: M = 1 quant matvec rounds x to
   * 8 bits (the q8x kernels) where it can */
  bool quant_activations_q8;
  /* ... and for columns up to q8x_max_m (vkrt_options.quant_activations_columns; 1: one
   * column only), from q8x_columns_min_m[0] (Q8_0) / [1] (Q4_K) columns on */
  uint32_t q8x_max_m;
  uint32_t q8x_columns_min_m[2];
  char quant_activations_path[640]; /* vkrt_quant_activations_path's text */
  struct vkrt_matvec_config matvec[VKRT_TYPE_COUNT];      /* per weight type, M = 1 */
  struct vkrt_matvec_config matvec_cols[VKRT_TYPE_COUNT]; /* M > 1 (several x columns) */
  /* tiled matmul (matmul.c): crossovers and tiles (matmul_plan.c) */
  struct vkrt_matmul_setup matmul;
  bool use_coopmat; /* the cooperative-matrix kernels are taken (vkrt_options.matmul_activations
                       = VKRT_MATMUL_ACTIVATIONS_F16 where vkrt_ops_coopmat_usable; the lab's
                       knob) */
  bool matmul_fallback_logged;
  struct vkrt_ops_variant variant[VKRT_OPS_MAX_VARIANTS];
  atomic_uint variant_count;
  /* Device-local scratch made at open for ops that combine partial results in a second
   * pass (argmax: VKRT_OPS_SCRATCH_PARTIALS (value, index) pairs); NULL without them. */
  struct vkrt_buffer *scratch;
  struct vkrt_buffer *top_k_scratch; /* vkrt_op_top_k's lists: VKRT_OPS_TOP_K_KEYS keys */
  /* decode attention (attention.c) */
  struct vkrt_buffer *attention_scratch; /* split partials, made at open (NULL: compiled out) */
  struct vkrt_buffer *attention_arrivals; /* the merging splits' counters (attention.c) */
  bool attention_arrivals_zeroed;          /* their one fill is recorded */
  struct vkrt_buffer *matmul_x16;        /* x rounded to f16 for the cooperative-matrix tiles
                                            (NULL: none on this device) */
  struct vkrt_buffer *matmul_w16;        /* quantized w dequantized to f16 for them (NULL:
                                            none on this device) */
  uint32_t matmul_w16_min_m[VKRT_TYPE_COUNT]; /* ... from this many columns of x, by type */
  uint32_t matmul_w16_pieces;            /* ... in this many pieces of rows (1: whole) */
  struct vkrt_buffer *matmul_split_k;    /* the tiled matmul's partial sums of K's pieces
                                            (NULL: none on this device) */
  uint32_t attention_target_groups;      /* split-pass workgroups a plan aims for */
  uint32_t attention_combine_in_order;   /* live splits up to which the combine merges one
                                            invocation an element (attention.c) */
  uint32_t attention_max_splits;         /* and splits at most (0: no cap) */
  uint32_t attention_rows_target_groups; /* the same for the row-per-invocation split pass */
  struct vkrt_ops_lab *lab;              /* forces and counters (CONFIG_VKRT_LAB), else NULL */
};

/* The forcing knobs in effect on dev: the lab's, else none (every choice the ops' own, and
 * the compiler drops the forced paths). */
static inline const struct vkrt_ops_forces *vkrt_ops_forces(const struct vkrt_device *dev) {
  static const struct vkrt_ops_forces none;
  return IS_ENABLED(CONFIG_VKRT_LAB) ? &dev->ops->lab->force : &none;
}

/* Counts n of a path taken on dev in the lab's counters (nothing without the lab). */
#define vkrt_ops_count(dev, counter, n)                                                       \
  do {                                                                                        \
    if (IS_ENABLED(CONFIG_VKRT_LAB))                                                          \
      (dev)->ops->lab->count.counter += (n);                                                  \
  } while (0)

#define VKRT_OPS_SCRATCH_PARTIALS 8192u /* 8-byte partial results in ops->scratch */

/* One storage-buffer binding. */
struct vkrt_ops_binding {
  VkBuffer buffer;
  uint64_t offset;
  uint64_t range;
};

/* Kernel name of a slot ("copy_f16_f32") and the Kconfig symbol that embeds it. */
const char *vkrt_ops_kernel_name(enum vkrt_ops_kernel k);
const char *vkrt_ops_kernel_symbol(enum vkrt_ops_kernel k);

/* Creates / destroys dev's ops state (kernel table, descriptor pools; pipelines are made on
 * first use unless vkrt_ops_build_pipelines made them); vkrt_open opens it for every device,
 * vkrt_close closes it before the devices. */
vkrt_status vkrt_ops_open(struct vkrt_device *dev);
void vkrt_ops_close(struct vkrt_device *dev);
/* Builds every usable kernel's pipeline and the matrix-vector variants the device's
 * configuration uses, so no later dispatch creates one (vkrt_options.pipelines). */
vkrt_status vkrt_ops_build_pipelines(struct vkrt_device *dev);
/* For vkrt-probe: when dev's pipelines were built, and how many are ready now. */
const char *vkrt_ops_pipelines_when(const struct vkrt_device *dev);
uint32_t vkrt_ops_pipelines_ready(const struct vkrt_device *dev);

/* The ops state of dev (created by vkrt_ops_open). */
static inline struct vkrt_ops_state *vkrt_ops(struct vkrt_device *dev) { return dev->ops; }

/* Pipeline of kernel k, created at first use. UNSUPPORTED when compiled out, UNAVAILABLE
 * when the device lacks a feature the kernel needs (16-bit storage, subgroup arithmetic). */
vkrt_status vkrt_ops_pipeline(struct vkrt_device *dev, enum vkrt_ops_kernel k,
                              const struct vkrt_ops_pipeline **out);

/* Pipeline of kernel k specialized with constant_id i = spec[i], created at first use and
 * kept until close (same availability rules as vkrt_ops_pipeline). */
vkrt_status vkrt_ops_pipeline_spec(struct vkrt_device *dev, enum vkrt_ops_kernel k,
                                   const uint32_t spec[VKRT_OPS_MAX_SPEC],
                                   const struct vkrt_ops_pipeline **out);
/* Destroys every specialized pipeline (benches sweeping variants; device idle). */
void vkrt_ops_drop_variants(struct vkrt_device *dev);

/* True when kernel k is in this build and the device has what it needs (no error set):
 * lets optional paths (the concat fast path) fall back quietly. */
bool vkrt_ops_kernel_usable(const struct vkrt_device *dev, enum vkrt_ops_kernel k);
/* The cooperative-matrix tiles can run here: the device has cooperative matrices and the
 * build at least one of their kernels. */
bool vkrt_ops_coopmat_usable(const struct vkrt_device *dev);

/* Device limits the ops validate against (the test hooks may lower them). */
struct vkrt_ops_limits vkrt_ops_device_limits(struct vkrt_device *dev);

/* Binds the pipeline and its storage buffers into cmd: push descriptors when the device
 * has them, else a set from the pool of the stream slot being recorded (cmd must then be
 * the stream's command buffer). */
/* vkrt_ops_pipeline of kernel k, then vkrt_ops_bind of b[0..count) to it. */
vkrt_status vkrt_ops_use(struct vkrt_device *dev, VkCommandBuffer cmd, enum vkrt_ops_kernel k,
                         const struct vkrt_ops_binding *b, uint32_t count,
                         const struct vkrt_ops_pipeline **out);
vkrt_status vkrt_ops_bind(struct vkrt_device *dev, VkCommandBuffer cmd,
                          const struct vkrt_ops_pipeline *p, const struct vkrt_ops_binding *b,
                          uint32_t count);

/* An f32 view read in 16-byte units: dense along dim 0, its binding and every row (column)
 * starting 16-byte aligned (x of the matrix-vector kernels, a fused product's norm). */
static inline bool vkrt_ops_vec16_dense(const struct vkrt_ops_view *v) {
  return v->bind_offset % 16 == 0 && v->offset % 4 == 0 && v->stride[1] % 4 == 0 &&
         v->stride[2] % 4 == 0 && v->stride[3] % 4 == 0 && v->stride[0] == 1;
}

/* vkrt_op_matmul_fused's refusals, shared by its f16/f32 (matmul.c) and quantized (quant.c)
 * kernels: VKRT_ERROR_UNSUPPORTED, "vkrt_op_matmul_fused: <reason> (<what to record
 * instead>)", nothing recorded. */
vkrt_status vkrt_ops_fused_refuse(struct vkrt_device *dev, const char *fmt, ...)
    VKRT_PRINTF(2, 3);
/* What every fused kernel takes: one column of x (a decode token); a norm weight read in
 * 16-byte units (views[3], when fusion->norm). VKRT_OK or the refusal. */
vkrt_status vkrt_ops_fused_one_column(struct vkrt_device *dev, const struct vkrt_ops_view *x);
vkrt_status vkrt_ops_fused_norm_loads(struct vkrt_device *dev, const struct vkrt_ops_view views[4],
                                      const vkrt_matmul_fusion *fusion);

/* Binding of a validated view. */
static inline struct vkrt_ops_binding vkrt_ops_view_binding(const struct vkrt_ops_view *v) {
  struct vkrt_ops_binding b = {v->buffer->handle, v->bind_offset, v->bind_range};
  return b;
}

/* Linear grid of `groups` workgroups, split into (x, y) dispatches within the device
 * limits; the push struct (p->push_size bytes) ends with uint32 base_group, the first
 * linear group of each dispatch (the shader adds wg.x + wg.y * numWorkGroups.x). */
void vkrt_ops_dispatch_linear(struct vkrt_device *dev, VkCommandBuffer cmd,
                              const struct vkrt_ops_pipeline *p, void *push, uint64_t groups);
/* The same through a given function table with the layout, push size and limits given:
 * no device state (a collective's tail, recorded on the submitter thread). */
void vkrt_ops_dispatch_linear_raw(const struct vkrt_device_table *vk, VkCommandBuffer cmd,
                                  VkPipelineLayout layout, uint32_t push_size, void *push,
                                  uint64_t groups, const uint32_t max_groups[2]);
/* Push descriptors of b[0..count) for `layout` through `vk` (the device has
 * VK_KHR_push_descriptor); no device state. */
void vkrt_ops_push_bindings(const struct vkrt_device_table *vk, VkCommandBuffer cmd,
                            VkPipelineLayout layout, const struct vkrt_ops_binding *b,
                            uint32_t count);
/* 3-D grid of gx * gy * gz workgroups, split per axis within the limits; the push struct
 * ends with uint32 base_x, base_y, base_z, the first group of each dispatch per axis. */
void vkrt_ops_dispatch_3d(struct vkrt_device *dev, VkCommandBuffer cmd,
                          const struct vkrt_ops_pipeline *p, void *push, uint64_t gx,
                          uint64_t gy, uint64_t gz);

/* A device-local scratch of up to `bytes` made at open for an op's intermediate results:
 * within one binding (maxStorageBufferRange) and one allocation; destroyed (NULL) at close. */
vkrt_status vkrt_ops_scratch_create(struct vkrt_device *dev, uint64_t bytes,
                                    struct vkrt_buffer **out);
void vkrt_ops_scratch_destroy(struct vkrt_buffer **scratch);
/* A dense tensor of shape ne and element type t (f32 or f16, `size` bytes each) at the
 * start of a scratch, `copies` of them one after another (the view is the first). */
struct vkrt_ops_view vkrt_ops_scratch_view(struct vkrt_buffer *scratch, const uint32_t ne[4],
                                           vkrt_type t, uint32_t size, uint32_t copies);
/* A conversion of src into f16 at the start of `scratch`: *out the dense f16 view shaped
 * like src, *cmd the stream's piece that reads src and writes the scratch (behind a barrier
 * where the previous call's tiles still read it). */
vkrt_status vkrt_ops_scratch_begin_f16(struct vkrt_device *dev, struct vkrt_buffer *scratch,
                                       const struct vkrt_ops_view *src,
                                       struct vkrt_ops_view *out, VkCommandBuffer *cmd);

/* The stream command buffer for an op touching `access` (its dst first), with a barrier
 * before it when earlier work since the last one is a hazard to it (vkrt_stream_next). */
vkrt_status vkrt_ops_begin(struct vkrt_device *dev, const struct vkrt_stream_access *access,
                           uint32_t count, VkCommandBuffer *cmd);
/* The same for an op's checked operands (dst first, then what it reads; bit i of
 * `also_written`: view i is written too), refused once the device is lost (api.c: every op,
 * and the lab's fused gate/up). */
vkrt_status vkrt_ops_begin_views(struct vkrt_device *dev, const struct vkrt_ops_view *views,
                                 uint32_t count, uint32_t also_written, VkCommandBuffer *cmd);

/* How the ops hand buffers to their kernels on this device, and why (vkrt-probe). */
const char *vkrt_ops_binding_path(const struct vkrt_device *dev);

/* Which contiguous device copy this device uses: "compute (copy_vec4, 16-byte loads)" or
 * "vkCmdCopyBuffer", and why; for vkrt-probe and vkrt-bench (valid before the first op). */
const char *vkrt_ops_copy_path(const struct vkrt_device *dev);
const char *vkrt_ops_copy_path_reason(const struct vkrt_device *dev);
/* Copies of a transposed view (vkrt_op_copy whose innermost destination dim is dim 1 of
 * the source, dense there): "tiled transpose" or "strided copy kernel", and why. */
bool vkrt_ops_transposed_copy_tiled(const struct vkrt_device *dev);
const char *vkrt_ops_transposed_copy_reason(const struct vkrt_device *dev);
/* The matrix-vector configuration for weight type t and `cols` x columns per dispatch
 * (valid before the first op). */
struct vkrt_matvec_config vkrt_ops_matvec_config(const struct vkrt_device *dev, vkrt_type t,
                                                 uint32_t cols);

/* The tiled matmul's plan for vkrt-probe: crossovers, tiles, cooperative matrices and why. */
void vkrt_ops_matmul_plan(const struct vkrt_device *dev, char *buf, size_t size);

/* Push constants of copy_vec4.comp (checked against the shader in copy.c). */
struct copy_vec4_push {
  uint32_t src_offset, dst_offset, count, pad; /* 16-byte units */
};

/* Contiguous byte copy on the device's preferred path (or `path` when >= 0: the bench
 * compares both). Records into cmd with no barrier. */
vkrt_status vkrt_ops_copy_bytes(struct vkrt_device *dev, VkCommandBuffer cmd, VkBuffer dst,
                                uint64_t dst_offset, VkBuffer src, uint64_t src_offset,
                                uint64_t size, int path);

/* Kernels that read a tensor in 32-bit words (block types, f16 rows of any length) bind it
 * from a 16-byte boundary to the next one past its end (or the end of the buffer, which must
 * then be a whole word); v->offset becomes bytes from the new binding start. False when the
 * buffer ends short of a word or the range is too long for one binding. */
bool vkrt_ops_widen_words(struct vkrt_device *dev, struct vkrt_ops_view *v);

#if IS_ENABLED(CONFIG_VKRT_LAB)
/* The lab's limits (vkrt_lab_limits_set): lower the workgroup-count limits (to exercise grid
 * splitting on small tensors), turn push descriptors off (to exercise the pool ring), cap one
 * binding's range (to exercise range chunking). 0 / false restore. Call with the device idle
 * (after vkrt_finish): switching the descriptor mode recreates the pipelines. */
void vkrt_ops_test_limits(struct vkrt_device *dev, uint32_t max_group_count,
                          bool disable_push_descriptor, uint64_t max_storage_buffer_range);
#endif

/* ---- per-kernel record functions (validated views in; dst first) --------------------- */

#if IS_ENABLED(CONFIG_VKRT_KERNEL_COPY)
vkrt_status vkrt_copy_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct vkrt_ops_view *dst, const struct vkrt_ops_view *src);
#else
static inline vkrt_status vkrt_copy_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                           const struct vkrt_ops_view *dst,
                                           const struct vkrt_ops_view *src) {
  (void)cmd, (void)dst, (void)src;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "copy kernel not in this build (CONFIG_VKRT_KERNEL_COPY=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE)
vkrt_status vkrt_transpose_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                  const struct vkrt_ops_view *dst,
                                  const struct vkrt_ops_view *src);
#else
static inline vkrt_status vkrt_transpose_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                                const struct vkrt_ops_view *dst,
                                                const struct vkrt_ops_view *src) {
  (void)cmd, (void)dst, (void)src;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "transpose kernel not in this build (CONFIG_VKRT_KERNEL_TRANSPOSE=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_CONCAT)
vkrt_status vkrt_concat_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3], int dim);
/* The fast path alone (for the bench); UNAVAILABLE when the inputs are not eligible. */
vkrt_status vkrt_concat_record_fast(struct vkrt_device *dev, VkCommandBuffer cmd,
                                    const struct vkrt_ops_view views[3], int dim);
vkrt_status vkrt_concat_record_generic(struct vkrt_device *dev, VkCommandBuffer cmd,
                                       const struct vkrt_ops_view views[3], int dim);
#else
static inline vkrt_status vkrt_concat_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                             const struct vkrt_ops_view views[3], int dim) {
  (void)cmd, (void)views, (void)dim;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "concat kernel not in this build (CONFIG_VKRT_KERNEL_CONCAT=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE)
vkrt_status vkrt_add_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                            const struct vkrt_ops_view *views, uint32_t count);
#else
static inline vkrt_status vkrt_add_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                          const struct vkrt_ops_view *views, uint32_t count) {
  (void)cmd, (void)views, (void)count;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "reduce kernel not in this build (CONFIG_VKRT_KERNEL_REDUCE=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL)
vkrt_status vkrt_matmul_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3], bool accumulate);
/* Calls fn for every specialized pipeline the device's matrix products take (the
 * matrix-vector shapes and the tiles chosen at open); stops at the first failure. */
vkrt_status vkrt_matmul_pipeline_specs(struct vkrt_device *dev, vkrt_ops_spec_fn fn, void *ctx);
/* vkrt_op_matmul_fused on views dst, w, x, norm (validated) with f16 or f32 w (quantized w:
 * vkrt_quant_fused_*): whether the fused matrix-vector kernel takes them (VKRT_OK) or why not
 * (UNSUPPORTED, nothing recorded), then the one dispatch. */
vkrt_status vkrt_matmul_fused_check(struct vkrt_device *dev, const struct vkrt_ops_view views[8],
                                    const vkrt_matmul_fusion *fusion);
vkrt_status vkrt_matmul_fused_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                     const struct vkrt_ops_view views[8],
                                     const vkrt_matmul_fusion *fusion);
/* Which kernel vkrt_op_matmul_fused takes for f16 and f32 w on this device (vkrt-probe). */
const char *vkrt_matmul_fused_path(const struct vkrt_device *dev);
#else
static inline vkrt_status vkrt_matmul_pipeline_specs(struct vkrt_device *dev, vkrt_ops_spec_fn fn,
                                                     void *ctx) {
  (void)dev, (void)fn, (void)ctx;
  return VKRT_OK;
}
static inline vkrt_status vkrt_matmul_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                             const struct vkrt_ops_view views[3],
                                             bool accumulate) {
  (void)cmd, (void)views, (void)accumulate;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "matmul kernel not in this build (CONFIG_VKRT_KERNEL_MATMUL=n)");
}
static inline vkrt_status vkrt_matmul_fused_check(struct vkrt_device *dev,
                                                  const struct vkrt_ops_view views[8],
                                                  const vkrt_matmul_fusion *fusion) {
  (void)fusion;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_matmul_fused: %s w: matmul kernel not in this build "
                    "(CONFIG_VKRT_KERNEL_MATMUL=n)", vkrt_type_str(views[1].type));
}
static inline vkrt_status vkrt_matmul_fused_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                                   const struct vkrt_ops_view views[8],
                                                   const vkrt_matmul_fusion *fusion) {
  (void)cmd;
  return vkrt_matmul_fused_check(dev, views, fusion);
}
static inline const char *vkrt_matmul_fused_path(const struct vkrt_device *dev) {
  (void)dev;
  return "none: the matmul kernel is not in this build (UNSUPPORTED)";
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_SWIGLU)
vkrt_status vkrt_swiglu_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3]);
#else
static inline vkrt_status vkrt_swiglu_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                             const struct vkrt_ops_view views[3]) {
  (void)cmd, (void)views;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "swiglu kernel not in this build (CONFIG_VKRT_KERNEL_SWIGLU=n)");
}
#endif

/* Decode attention (attention.c): the split scratch made at open and freed at close, and
 * the op, which asks the stream for its two passes itself (the scratch is one of their
 * operands, so its reuse by the next attention is ordered like any buffer's). */
#if IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION)
vkrt_status vkrt_attention_open(struct vkrt_device *dev);
void vkrt_attention_close(struct vkrt_device *dev);
vkrt_status vkrt_attention_record(struct vkrt_device *dev, const struct vkrt_ops_view views[5],
                                  float scale);
/* The split pass attentions take on dev (*rows: attention_rows.comp, else the tiles) and
 * why, for vkrt-probe and the lab. */
const char *vkrt_attention_kernel_choice(const struct vkrt_device *dev, bool *rows);
/* The plan of an attention over these shapes on dev (vkrt_lab_attention_plan). Under
 * VKRT_ACTIVATIONS_Q8 the row kernel's plan keeps room for the queries rounded to 8 bits
 * (what the q8_0 cache's kernel declares) whatever the cache type. */
bool vkrt_attention_plan_for(struct vkrt_device *dev, uint32_t head_dim, uint32_t n_head,
                             uint32_t n_head_kv, uint32_t n_q, uint32_t n_ctx,
                             struct vkrt_attention_plan *out, char *why, size_t why_size);
#else
static inline vkrt_status vkrt_attention_open(struct vkrt_device *dev) {
  (void)dev;
  return VKRT_OK;
}
static inline void vkrt_attention_close(struct vkrt_device *dev) { (void)dev; }
static inline vkrt_status vkrt_attention_record(struct vkrt_device *dev,
                                                const struct vkrt_ops_view views[5],
                                                float scale) {
  (void)views, (void)scale;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_attention: kernel not in this build (CONFIG_VKRT_KERNEL_ATTENTION=n)");
}
static inline const char *vkrt_attention_kernel_choice(const struct vkrt_device *dev, bool *rows) {
  (void)dev;
  *rows = false;
  return "not in this build (CONFIG_VKRT_KERNEL_ATTENTION=n)";
}
static inline bool vkrt_attention_plan_for(struct vkrt_device *dev, uint32_t head_dim,
                                           uint32_t n_head, uint32_t n_head_kv, uint32_t n_q,
                                           uint32_t n_ctx, struct vkrt_attention_plan *out,
                                           char *why, size_t why_size) {
  (void)dev, (void)head_dim, (void)n_head, (void)n_head_kv, (void)n_q, (void)n_ctx, (void)out;
  vkrt_format(why, why_size, "vkrt_op_attention: kernel not in this build "
                             "(CONFIG_VKRT_KERNEL_ATTENTION=n)");
  return false;
}
#endif

/* Quantized weights (quant.c): matmul with Q8_0/Q4_K/Q6_K w, and the dequantizing copy. The
 * variants below are Q8_0's and Q4_K's; Q6_K has one kernel per column count and, for one
 * column, stream kernels some variant numbers force. */
#define VKRT_QUANT_VARIANTS 16
/* The q8x kernels' grid: workgroups at most (each rounds all of x once; VKRT_LAB_Q8X_WORKGROUPS). */
#define VKRT_QUANT_Q8X_WORKGROUPS 256u
/* The fewest columns of Q8_0 and of Q4_K w for which the q8x kernels take a small batch
 * (vkrt_options.quant_activations_columns; VKRT_LAB_Q8X_COLUMNS_MIN_M_*). H100, N 14336,
 * the 512-invocation q8x columns against the f32-x column kernels (us, two runs alike):
 *   q8_0 K 4096 M 2 / 3 / 4 / 5 / 8: 32.2 / 41.3 / 41.9 / 76.6 / 78.4 against 38.2 / 57.1 /
 *        57.8 / 86.5 / 87.4; K 5120: 40.1 / 51.1 / 51.8 / 96.3 / 98.6 against 45.1 / 71.6 /
 *        72.6 / 106.2 / 106.6
 *   q4_K K 4096: 23.3 / 37.1 / 37.7 / 70.8 / 72.7 against 25.5 / 46.8 / 47.2 / 88.8 / 89.9;
 *        K 5120: 34.1 / 53.3 / 54.3 / 102.4 / 104.4 against 33.6 / 60.7 / 61.5 / 112.1 / 113.5
 * so from two columns for both (q4_K K 5120 M 2 the one loss, by 1.5 %). */
#define VKRT_QUANT_Q8X_COLUMNS_MIN_M_Q8_0 2u
#define VKRT_QUANT_Q8X_COLUMNS_MIN_M_Q4_K 2u
/* The K up to which the q8x kernels for 2, 4 or 8 columns hold the rounded x (24576 values
 * of shared memory: 12288 for two columns; vkrt_lab.h's VKRT_LAB_Q8X_COLUMNS_MAX_K). */
#define VKRT_QUANT_Q8X_COLUMNS_MAX_K 12288u
/* The read pattern (0 words, 1 vec16, 2 lanew, 3 kspace, 4 q8x) of 1-based variant v (the
 * prefetch and stream variants 10..15 take the vec16 layouts: rows and x 16-byte aligned;
 * q8x is the last). */
#define VKRT_QUANT_VARIANT_KIND(v) \
  ((v) == 1 ? 0 : (v) == VKRT_QUANT_VARIANTS ? 4 : (v) >= 10 ? 1 : (v) >= 8 ? 3 : (v) >= 5 ? 2 : 1)
#if IS_ENABLED(CONFIG_VKRT_KERNEL_QUANT)
extern const char *const vkrt_quant_variant_names[VKRT_QUANT_VARIANTS];
/* Default variant order per type (Q8_0, Q4_K): 1-based variant numbers, the first that fits. */
extern const int vkrt_quant_preference[2][VKRT_QUANT_READ_PATTERNS - 1];
/* dst = w x, or dst += w x with accumulate (vkrt_op_matmul_add), on the matrix-vector kernels. */
vkrt_status vkrt_quant_matmul_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                     const struct vkrt_ops_view views[3], bool accumulate);
/* vkrt_op_matmul_fused on views dst, w, x, norm (validated): whether the fused q4_K kernel
 * takes them (VKRT_OK) or why not (UNSUPPORTED, nothing recorded), then the one dispatch. */
vkrt_status vkrt_quant_fused_check(struct vkrt_device *dev, const struct vkrt_ops_view views[8],
                                   const vkrt_matmul_fusion *fusion);
/* Which kernels take vkrt_matmul_fusion.qkv on this device (vkrt-probe). */
const char *vkrt_quant_qkv_path(const struct vkrt_device *dev);
vkrt_status vkrt_quant_fused_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                    const struct vkrt_ops_view views[8],
                                    const vkrt_matmul_fusion *fusion);
/* The kernel variant `variant` (1-based) of type Q8_0 or Q4_K runs for M columns of x
 * (VKRT_OPS_KERNEL_COUNT outside); the forcing-only ones are compiled with the lab only. */
enum vkrt_ops_kernel vkrt_quant_variant_kernel(vkrt_type type, int variant, uint32_t M);
/* The Q6_K kernel the op takes for M columns of x (one per column count: 1, 2, 4, 8). */
enum vkrt_ops_kernel vkrt_quant_q6_k_kernel(uint32_t M);
/* Whether `variant` forces a Q6_K kernel (one column, x 16-byte aligned) that dev can run. */
bool vkrt_quant_q6_k_variant_usable(struct vkrt_device *dev, int variant);
/* Whether dev can run variant `variant` for every quantized type in the build (its kernels are
 * compiled in and the device has what they need; q8x: Q6_K's 8-bit-x kernel too); the op
 * still refuses a forced variant that w or x are not aligned for. */
bool vkrt_quant_variant_usable(struct vkrt_device *dev, int variant);
/* Rows per compute unit the one-column kernel of `variant` needs to be preferred (0: none). */
uint32_t vkrt_quant_min_rows_per_unit(vkrt_type type, int variant);
/* How quantized matvec takes x on this device, and why (vkrt-probe, describe). */
const char *vkrt_quant_activations_path(const struct vkrt_device *dev);
/* Which kernel vkrt_op_matmul_fused takes on this device, for which weights (vkrt-probe). */
const char *vkrt_quant_fused_path(const struct vkrt_device *dev);
vkrt_status vkrt_quant_copy_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                   const struct vkrt_ops_view *dst,
                                   const struct vkrt_ops_view *src);
#else
/* No variants without the kernels; test_quant and vkrt-bench quant still compile and report
 * the ops' VKRT_ERROR_UNSUPPORTED. */
static const char *const vkrt_quant_variant_names[VKRT_QUANT_VARIANTS] = {
    "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"};
static const int vkrt_quant_preference[2][VKRT_QUANT_READ_PATTERNS - 1];
static inline uint32_t vkrt_quant_min_rows_per_unit(vkrt_type type, int variant) {
  (void)type;
  (void)variant;
  return 0;
}
static inline const char *vkrt_quant_activations_path(const struct vkrt_device *dev) {
  (void)dev;
  return "none: no quantized kernels in this build";
}
static inline const char *vkrt_quant_fused_path(const struct vkrt_device *dev) {
  (void)dev;
  return "none: no quantized kernels in this build (UNSUPPORTED)";
}
static inline const char *vkrt_quant_qkv_path(const struct vkrt_device *dev) {
  (void)dev;
  return "none: the q4_K and q8_0 kernels are not in this build (UNSUPPORTED)";
}
static inline enum vkrt_ops_kernel vkrt_quant_variant_kernel(vkrt_type type, int variant,
                                                             uint32_t M) {
  (void)type, (void)variant, (void)M;
  return VKRT_OPS_KERNEL_COUNT;
}
static inline enum vkrt_ops_kernel vkrt_quant_q6_k_kernel(uint32_t M) {
  (void)M;
  return VKRT_OPS_KERNEL_COUNT;
}
static inline bool vkrt_quant_variant_usable(struct vkrt_device *dev, int variant) {
  (void)dev, (void)variant;
  return false;
}
static inline bool vkrt_quant_q6_k_variant_usable(struct vkrt_device *dev, int variant) {
  (void)dev, (void)variant;
  return false;
}
static inline vkrt_status vkrt_quant_matmul_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                                   const struct vkrt_ops_view views[3],
                                                   bool accumulate) {
  (void)cmd, (void)accumulate;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_matmul: %s kernels not in this build (CONFIG_VKRT_KERNEL_Q8_0=n, "
                    "CONFIG_VKRT_KERNEL_Q4_K=n, CONFIG_VKRT_KERNEL_Q6_K=n)",
                    vkrt_type_str(views[1].type));
}
static inline vkrt_status vkrt_quant_fused_check(struct vkrt_device *dev,
                                                 const struct vkrt_ops_view views[8],
                                                 const vkrt_matmul_fusion *fusion) {
  (void)views, (void)fusion;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_matmul_fused: q4_K and q8_0 kernels not in this build "
                    "(CONFIG_VKRT_KERNEL_Q4_K=n, CONFIG_VKRT_KERNEL_Q8_0=n)");
}
static inline vkrt_status vkrt_quant_fused_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                                  const struct vkrt_ops_view views[8],
                                                  const vkrt_matmul_fusion *fusion) {
  (void)cmd;
  return vkrt_quant_fused_check(dev, views, fusion);
}
static inline vkrt_status vkrt_quant_copy_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                                 const struct vkrt_ops_view *dst,
                                                 const struct vkrt_ops_view *src) {
  (void)cmd, (void)dst;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_copy: %s kernels not in this build (CONFIG_VKRT_KERNEL_Q8_0=n, "
                    "CONFIG_VKRT_KERNEL_Q4_K=n, CONFIG_VKRT_KERNEL_Q6_K=n)",
                    vkrt_type_str(src->type));
}
#endif

/* ---- transformer decode ops (rms_norm.c, rope.c, get_rows.c, set_rows.c, argmax.c) ---- */

#if IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM)
vkrt_status vkrt_rms_norm_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 const struct vkrt_ops_view views[3], bool has_w, float eps);
#else
static inline vkrt_status vkrt_rms_norm_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                               const struct vkrt_ops_view views[3], bool has_w,
                                               float eps) {
  (void)cmd, (void)views, (void)has_w, (void)eps;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_rms_norm: kernel not in this build (CONFIG_VKRT_KERNEL_RMS_NORM=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE)
/* views: dst, x, pos and, when `factors`, the frequency factors */
vkrt_status vkrt_rope_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct vkrt_ops_view views[4], bool factors,
                             const vkrt_rope_params *params);
#else
static inline vkrt_status vkrt_rope_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                           const struct vkrt_ops_view views[4], bool factors,
                                           const vkrt_rope_params *params) {
  (void)cmd, (void)views, (void)factors, (void)params;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_rope: kernel not in this build (CONFIG_VKRT_KERNEL_ROPE=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_GET_ROWS)
vkrt_status vkrt_get_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 const struct vkrt_ops_view views[3]);
#else
static inline vkrt_status vkrt_get_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                               const struct vkrt_ops_view views[3]) {
  (void)cmd, (void)views;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_get_rows: kernel not in this build (CONFIG_VKRT_KERNEL_GET_ROWS=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_SET_ROWS)
vkrt_status vkrt_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 const struct vkrt_ops_view views[3]);
#else
static inline vkrt_status vkrt_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                               const struct vkrt_ops_view views[3]) {
  (void)cmd, (void)views;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_set_rows: kernel not in this build (CONFIG_VKRT_KERNEL_SET_ROWS=n)");
}
#endif

/* ggml's theta_scale: theta_p = pos * freq_scale * theta_scale^p */
static inline float vkrt_rope_theta_scale(const vkrt_rope_params *params) {
  return powf(params->freq_base, -2.0f / (float)params->n_dims);
}

#if IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS)
/* views: dst, src, rows, pos, factors (factors only when `factors`). */
vkrt_status vkrt_rope_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                      const struct vkrt_ops_view views[5], bool factors,
                                      const vkrt_rope_params *params);
#else
static inline vkrt_status vkrt_rope_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                                    const struct vkrt_ops_view views[5],
                                                    bool factors, const vkrt_rope_params *params) {
  (void)cmd, (void)views, (void)factors, (void)params;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_rope_set_rows: kernel not in this build "
                    "(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS=n)");
}
#endif

/* Quantized w dequantized to f16 before the cooperative-matrix tiles from this many columns
 * of x (the lab's MATMUL_W16_MIN_M sets every type's). H100, vkrt-bench cases with f16 x, K
 * 4096 x N 14336, GPU us, whole conversion and f16 tiles against the tiles decoding as they
 * load, two rounds within 2 %: q4_K M 64 194.8 / 188.6, 128 192.3 / 194.0, 256 302.0 / 359.7,
 * 512 524.6 / 732.8 (K 14336 x N 4096 M 512: 501.9 / 669.3); q6_K 128 198.4 / 171.2, 256
 * 307.4 / 306.5, 512 530.7 / 623.5; q8_0 256 309.0 / 298.7, 512 528.6 / 610.5 (the f16 tiles
 * alone at M 512: 466 us; the conversion ~60 us). */
#define VKRT_MATMUL_W16_MIN_M_Q8_0 512
#define VKRT_MATMUL_W16_MIN_M_Q4_K 256
#define VKRT_MATMUL_W16_MIN_M_Q6_K 512
/* Every type's (other types: never, UINT32_MAX). */
void vkrt_matmul_w16_min_m_init(uint32_t min_m[VKRT_TYPE_COUNT]);
/* The conversion and the tiles in pieces of rows, in turn: piece i + 1 converted while piece
 * i's tiles run, so only the first piece's conversion is waited for (a barrier orders each
 * piece's tiles after its conversion and after the previous piece's tiles). */
#define VKRT_MATMUL_W16_PIECES 1
#define VKRT_MATMUL_W16_MAX_PIECES 8

#if IS_ENABLED(CONFIG_VKRT_MATMUL_X16)
/* x rounded to f16 before the cooperative-matrix tiles (matmul_x16.c): the scratch made at
 * open on devices with cooperative matrices, released at close. */
vkrt_status vkrt_matmul_x16_open(struct vkrt_device *dev);
void vkrt_matmul_x16_close(struct vkrt_device *dev);
/* Whether x can go through the scratch (NULL) or why not. */
const char *vkrt_matmul_x16_refusal(const struct vkrt_device *dev, const struct vkrt_ops_view *x);
/* Records x's rounding into the scratch as its own piece of the stream and fills *out with
 * the f16 view the tiles read (dense along K, strides in halves). */
vkrt_status vkrt_matmul_x16_convert(struct vkrt_device *dev, const struct vkrt_ops_view *x,
                                    struct vkrt_ops_view *out);
#else
static inline vkrt_status vkrt_matmul_x16_open(struct vkrt_device *dev) {
  (void)dev;
  return VKRT_OK;
}
static inline void vkrt_matmul_x16_close(struct vkrt_device *dev) { (void)dev; }
static inline const char *vkrt_matmul_x16_refusal(const struct vkrt_device *dev,
                                                  const struct vkrt_ops_view *x) {
  (void)dev, (void)x;
  return "not in this build (CONFIG_VKRT_MATMUL_X16=n)";
}
static inline vkrt_status vkrt_matmul_x16_convert(struct vkrt_device *dev,
                                                  const struct vkrt_ops_view *x,
                                                  struct vkrt_ops_view *out) {
  (void)x, (void)out;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL, "x16 conversion not in this build");
}

#endif

#if IS_ENABLED(CONFIG_VKRT_MATMUL_SPLIT_K)
/* The tiled matmul with K in pieces (matmul_split_k.c): the scratch of partial sums made at
 * open (on devices whose tiles may split, and in lab builds), released at close. */
vkrt_status vkrt_matmul_split_k_open(struct vkrt_device *dev);
void vkrt_matmul_split_k_close(struct vkrt_device *dev);
/* The pieces of K a call of tile t with `groups` workgroups takes into dst d (1: whole K,
 * *k_chunk = K): the plan (vkrt_matmul_split_k) or the lab's count, within what the reduce
 * and the scratch take; dst must be dense f32. */
uint32_t vkrt_matmul_split_k_take(struct vkrt_device *dev, const struct vkrt_matmul_tile *t,
                                  const struct vkrt_ops_view *d, uint32_t K, uint64_t groups,
                                  bool accumulate, uint32_t *k_chunk);
/* The scratch as the tiles' dst: `splits` dense copies of d's shape, one after another. */
struct vkrt_ops_view vkrt_matmul_split_k_view(struct vkrt_device *dev,
                                              const struct vkrt_ops_view *d, uint32_t splits);
/* Records dst (+ dst when accumulate) = the pieces' sum as its own piece of the stream. */
vkrt_status vkrt_matmul_split_k_reduce(struct vkrt_device *dev, const struct vkrt_ops_view *d,
                                       uint32_t splits, bool accumulate);
#else
static inline vkrt_status vkrt_matmul_split_k_open(struct vkrt_device *dev) {
  (void)dev;
  return VKRT_OK;
}
static inline void vkrt_matmul_split_k_close(struct vkrt_device *dev) { (void)dev; }
static inline uint32_t vkrt_matmul_split_k_take(struct vkrt_device *dev,
                                                const struct vkrt_matmul_tile *t,
                                                const struct vkrt_ops_view *d, uint32_t K,
                                                uint64_t groups, bool accumulate,
                                                uint32_t *k_chunk) {
  (void)dev, (void)t, (void)d, (void)groups, (void)accumulate;
  *k_chunk = K;
  return 1;
}
static inline struct vkrt_ops_view vkrt_matmul_split_k_view(struct vkrt_device *dev,
                                                            const struct vkrt_ops_view *d,
                                                            uint32_t splits) {
  (void)dev, (void)splits;
  return *d;
}
static inline vkrt_status vkrt_matmul_split_k_reduce(struct vkrt_device *dev,
                                                     const struct vkrt_ops_view *d,
                                                     uint32_t splits, bool accumulate) {
  (void)d, (void)splits, (void)accumulate;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL, "split K not in this build");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_TOP_K)
/* The scratch buffer of the lists (at open) and its release (at close). */
vkrt_status vkrt_top_k_open(struct vkrt_device *dev);
void vkrt_top_k_close(struct vkrt_device *dev);
vkrt_status vkrt_top_k_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                              const struct vkrt_ops_view views[3]);
#else
static inline vkrt_status vkrt_top_k_open(struct vkrt_device *dev) {
  (void)dev;
  return VKRT_OK;
}
static inline void vkrt_top_k_close(struct vkrt_device *dev) { (void)dev; }
static inline vkrt_status vkrt_top_k_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                            const struct vkrt_ops_view views[3]) {
  (void)cmd, (void)views;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_top_k: kernel not in this build (CONFIG_VKRT_KERNEL_TOP_K=n)");
}
#endif

#if IS_ENABLED(CONFIG_VKRT_KERNEL_ARGMAX)
/* The scratch buffer of the combine pass (at open) and its release (at close). */
vkrt_status vkrt_argmax_open(struct vkrt_device *dev);
void vkrt_argmax_close(struct vkrt_device *dev);
/* temperature > 0: vkrt_op_sample, views[2] the key */
vkrt_status vkrt_argmax_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3], float temperature);
#else
static inline vkrt_status vkrt_argmax_open(struct vkrt_device *dev) {
  (void)dev;
  return VKRT_OK;
}
static inline void vkrt_argmax_close(struct vkrt_device *dev) { (void)dev; }
static inline vkrt_status vkrt_argmax_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                             const struct vkrt_ops_view views[3],
                                             float temperature) {
  (void)cmd, (void)views;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "%s: kernel not in this build (CONFIG_VKRT_KERNEL_ARGMAX=n)",
                    temperature > 0 ? "vkrt_op_sample" : "vkrt_op_argmax");
}
#endif
