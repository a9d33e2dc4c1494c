/* libvkrt lab: for benchmarks and tests; not a stable API.
 *
 * Applications use vkrt.h only. This header lets vkrt-bench (and tests) force the kernel
 * variants the library would otherwise choose, read which paths ran, time work recorded
 * into a device's stream with GPU timestamps, and measure the raw Vulkan submit floors next
 * to the library's, without including the runtime's internal headers or vulkan.h. Its
 * functions exist only in builds with CONFIG_VKRT_LAB=y (the sim boards, and appliance
 * boards configured for benches: `make <board>_defconfig lab.config`); an appliance image
 * has neither them nor this header. They, their knobs and their counters change whenever
 * the kernels do.
 *
 * Every function taking an appliance and a device index returns
 * VKRT_ERROR_INVALID_ARGUMENT (with the reason in vkrt_last_error) for a NULL appliance, a
 * device that does not exist or a bad argument. Forcing knobs apply to ops recorded after
 * the call; like recording, they are not thread-safe: set them from the thread recording
 * that device. */
#pragma once
#include "vkrt/vkrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device facts ---------------------------------------------------------------------- */

typedef struct vkrt_lab_device {
  bool is_cpu;                        /* a CPU device (lavapipe) */
  double timestamp_period_ns;         /* 0: the compute queue has no timestamps */
  uint64_t max_storage_buffer_range;  /* bytes one binding may cover */
  uint32_t max_compute_work_group_invocations;
  bool refuses_file_backed;           /* host import is there but the driver refuses
                                         file-backed pages (NVIDIA, RADV, or the fault acting
                                         as one): import-then-prestage pre-stages those */
  uint64_t min_imported_host_pointer_alignment; /* bytes (0: no host import) */
  uint32_t compute_units;             /* NVIDIA SMs, AMD CUs; 0: not reported (CPU devices) */
  uint32_t max_compute_shared_memory_size; /* bytes of shared memory a workgroup may use */
} vkrt_lab_device;

vkrt_status vkrt_lab_device_get(const vkrt_appliance *appliance, uint32_t device,
                                vkrt_lab_device *out);

/* A device stream's counters: which closing barrier its submitted command buffers took, and
 * how many a submit began ahead for the next op (while the GPU runs the one submitted). */
typedef struct vkrt_lab_stream {
  uint64_t submitted;   /* timeline values submitted (command buffers and empty submits) */
  uint64_t host_closes; /* command buffers closed with the barrier to the host: those in which
                           a command wrote a mapped buffer or memory libvkrt cannot name */
  uint64_t begun_ahead; /* command buffers begun by the submit before their first command */
  uint64_t prepared;    /* ... and those the submitter thread began while a collective's
                           submit went through it (the caller's thread did not) */
  uint64_t barriers;    /* commands after the first of their buffer recorded behind a barrier
                           (they touch what earlier commands wrote, or write what they read) */
  uint64_t barriers_elided; /* ... and without one: independent of the work since the last */
  uint64_t flushes;     /* pieces the stream submitted by itself while recording went on (the
                           overlap; VKRT_LAB_STREAM_FLUSH_OPS), counted in `submitted` too */
  uint64_t deferred;    /* submits made by the device's submitter thread, not the caller's:
                           those waiting on a collective's semaphore and those after them */
  /* The submitter thread (0 before the first collective): its CPU time, and the batches it
   * found while spinning, while dozing (polling in a sleep) and after it had gone to sleep
   * (a caller woke it) */
  uint64_t submitter_cpu_ns;
  uint64_t caught_spinning, caught_dozing, woken;
  uint64_t barriers_compute; /* barriers (of `barriers`) that waited for the compute stage
                                alone: only dispatches since the one before (the default,
                                VKRT_LAB_BARRIER_STAGES) */
  uint64_t tails; /* collectives' reduces and copies after their waits that the submitter
                     thread recorded into command buffers of its own (not the caller) */
} vkrt_lab_stream;

vkrt_status vkrt_lab_stream_get(const vkrt_appliance *appliance, uint32_t device,
                                vkrt_lab_stream *out);

/* ---- forcing knobs ------------------------------------------------------------------------ */

typedef enum vkrt_lab_knob {
  VKRT_LAB_COPY_VEC4_MAX_GROUPS = 0, /* workgroups per copy_vec4 dispatch (>= 1) */
  VKRT_LAB_COPY_TRANSPOSED_TILED,    /* 0/1: copies of a transposed view take the tiled
                                        transpose (1) or the strided copy kernel (0) */
  VKRT_LAB_FORCE_CONCAT_GENERIC,     /* 0/1: never the concat fast path */
  VKRT_LAB_FORCE_TRANSPOSE_SCALAR,   /* 0/1: never the element-pair transpose kernels */
  VKRT_LAB_TRANSPOSE_VARIANT,        /* f32 transpose: 0 = default, else a variant */
  VKRT_LAB_QUANT_VARIANT,            /* Q8_0/Q4_K matrix-vector: 0 = choose, else a variant
                                        (Q6_K has one kernel per column count: not forced);
                                        the q8x variant (the last) on M > 1 columns takes the
                                        q8x kernels for 2, 4 or 8 columns a pass where K <=
                                        VKRT_LAB_Q8X_COLUMNS_MAX_K, kspace's M > 1 kernel
                                        elsewhere */
  VKRT_LAB_FORCE_MATMUL_KERNEL,      /* 0 = choose, 1 = matrix-vector only, 2 = tiled only */
  VKRT_LAB_STREAM_FLUSH_OPS,         /* the stream submits a piece after at most this many
                                        recorded commands (64; the first after an explicit
                                        submit after 4, doubling); 0 = never by itself */
  VKRT_LAB_MATMUL_TILED_MIN_M,       /* the crossover for every weight type and both tile
                                        kinds: M from which vkrt_op_matmul takes the tiled
                                        kernel (1..65536); 0 restores the device's per-type
                                        crossovers chosen at open (restore with 0, not with
                                        a value got, which is one type's); get: f16's on the
                                        tiles in use */
  VKRT_LAB_MATMUL_COOPMAT,           /* 0/1: the tiled kernel on cooperative matrices where
                                        the device has them (x rounded to f16); the default
                                        is vkrt_options.matmul_activations' choice */
  VKRT_LAB_ATTENTION_SPLITS,         /* vkrt_op_attention: 0 = plan the split count, else
                                        this many (kept within 1 token per split and what
                                        the shared memory and scratch allow) */
  VKRT_LAB_ATTENTION_UNROLL,         /* vkrt_op_attention: cache-row passes per tile of the
                                        split pass (loads in flight), 0 = plan (4, fewer
                                        where the shared memory is short), else 1..8 */
  VKRT_LAB_PIPELINE_REBIND,          /* 0/1: bind the pipeline before every dispatch (1), or
                                        skip the bind when the command buffer has it bound
                                        already (0, the default) */
  VKRT_LAB_ATTENTION_KERNEL,         /* vkrt_op_attention's split pass: 0 = the device's
                                        choice (vkrt-probe says which), 1 = tiles
                                        (attention_split.comp), 2 = a row per invocation
                                        (attention_rows.comp, where the device can) */
  VKRT_LAB_MATMUL_X16,               /* 0/1: the cooperative-matrix tiles read x rounded to
                                        f16 by a copy first (1, the default where the device
                                        has the scratch and x fits it), or round it as they
                                        load it (0); get: 1 where the path is on and the
                                        device has the scratch */
  VKRT_LAB_BARRIER_STAGES,           /* 0/1: a barrier between commands waits for the stages
                                        the commands since the last one used (0, the
                                        default: compute alone between dispatches), or for
                                        compute and transfer always (1) */
  VKRT_LAB_Q8X_WORKGROUPS,           /* the 8-bit-x matrix-vector kernels' grid: at most this
                                        many workgroups, each rounding x once (256) */
  VKRT_LAB_Q8X_COLUMNS_MIN_M_Q8_0,   /* the fewest columns of q8_0 w (2..9; 9: never) that
                                        take 8-bit x where vkrt_options.
                                        quant_activations_columns asks for small batches */
  VKRT_LAB_Q8X_COLUMNS_MIN_M_Q4_K,   /* ... of q4_K w */
  VKRT_LAB_MATMUL_SPLIT_K,           /* the tiled matmul's pieces of K: 0 = plan them (split
                                        where the grid does not fill the device), 1 = never
                                        split, 2..8 = this many where the call allows (dst
                                        dense, the scratch large enough, K long enough) */
  VKRT_LAB_MATMUL_SPLIT_K_PER_UNIT,  /* the workgroups per compute unit the split-K plan
                                        takes as resident, every tile: 0 = each tile's own
                                        estimate (0 on devices not measured: never split);
                                        get: the large tile's, on the tiles in use */
  VKRT_LAB_MATMUL_W16_MIN_M,         /* the cooperative-matrix large tile converts quantized
                                        w to f16 first from this many columns of x, every
                                        type (0 = each type's default; past any M: never);
                                        get: q4_K's, 0 where the device has no such scratch */
  VKRT_LAB_STREAM_SPIN_US,           /* a wait on the stream (vkrt_wait, vkrt_finish) spins
                                        on the timeline this long before it blocks in the
                                        driver (GPUs: vkrt_options.wait_spin_us, 2000 by
                                        default; CPU devices 0); the submitter
                                        thread polls no longer than this either */
  VKRT_LAB_Q8X_COLUMNS_WIDE,         /* 1 (the default): 4 and 8 columns of 8-bit x in one
                                        pass up to K 8192 / 4096 on the 40 KiB kernels where
                                        the device's shared memory holds them; 0: never (K
                                        past 6144 / 3072 in more passes) */
  VKRT_LAB_ATTENTION_LAST_MERGES,    /* 0/1: the tiles' split pass merges each workgroup row's
                                        splits in the last of them to finish (an arrival
                                        counter; no combine pass, no barrier before it), or
                                        the combine pass does (0, the default) */
  VKRT_LAB_Q8X_UNROLL_Q4_K,          /* one column of q4_K w on the 8-bit-x kernels (plain and
                                        fused): 4 = the build of four units in flight per
                                        invocation (a lab kernel), else the default's two */
  VKRT_LAB_ATTENTION_COMBINE_IN_ORDER, /* the most live splits the combine pass merges one
                                        invocation an element, split after split (32 by
                                        default; 0: never, the split groups and trees) */
  VKRT_LAB_MATMUL_W16_PIECES,        /* quantized w dequantized to f16 before the tiles
                                        (MATMUL_W16_MIN_M) in this many pieces of rows, 1..8,
                                        each piece's tiles running beside the next piece's
                                        conversion (0 = the default); 1: whole */
  VKRT_LAB_KNOB_COUNT
} vkrt_lab_knob;

vkrt_status vkrt_lab_set(vkrt_appliance *appliance, uint32_t device, vkrt_lab_knob knob,
                         int64_t value);
vkrt_status vkrt_lab_get(const vkrt_appliance *appliance, uint32_t device,
                         vkrt_lab_knob knob, int64_t *out);
/* A knob by its name, for command lines: "NAME=VALUE" (the enum name without VKRT_LAB_,
 * any case, e.g. "barrier_stages=1"), set on `device` as vkrt_lab_set does; or a tiled
 * matmul slot, "TILE_<PORTABLE|COOPMAT>_<SMALL|MEDIUM|LARGE>=wg,bm,bn,rm[,bk[,stages[,order]]]"
 * (e.g. "tile_coopmat_large=256,256,128,2"), set as vkrt_lab_matmul_tile_set does; or a
 * matrix-vector shape, "MATVEC_<F32|F16>=wg,rows,unroll[,blocks]", as vkrt_lab_matvec_set; an
 * unknown name or a value that is not a whole number (or such a list) fails with a message
 * listing the names. */
vkrt_status vkrt_lab_set_text(vkrt_appliance *appliance, uint32_t device, const char *assignment);

/* Test limits, below the device's: workgroups per dimension of one dispatch
 * (max_group_count, to split grids over several dispatches on small tensors; 0 = the
 * device's), push descriptors off (the descriptor-pool ring instead), and the bytes one
 * binding may cover (max_storage_buffer_range, to chunk copies over several bindings; 0 =
 * the device's, else a multiple of 16 of at least 1024). Values above the device's are
 * capped to it; all 0 / false restores the device's. Call with the device idle (after
 * vkrt_finish): switching the descriptor mode recreates the pipelines. */
vkrt_status vkrt_lab_limits_set(vkrt_appliance *appliance, uint32_t device,
                                uint32_t max_group_count, bool disable_push_descriptor,
                                uint64_t max_storage_buffer_range);

/* The variants of a variant knob (TRANSPOSE_VARIANT, QUANT_VARIANT), numbered 1..count (0
 * for the other knobs); the name of variant `value` (NULL outside 1..count: the transpose
 * kernel's name, or the quant read pattern, "-" when the quant kernels are compiled out);
 * whether this device can run it (transpose: its kernel is in the build and the device has
 * the features it needs; quant: the kernels are in the build, q8x's including Q6_K's, and
 * the op itself refuses a forced variant that w or x are not aligned for). */
int vkrt_lab_variant_count(vkrt_lab_knob knob);
const char *vkrt_lab_variant_name(vkrt_lab_knob knob, int64_t value);
bool vkrt_lab_variant_usable(vkrt_appliance *appliance, uint32_t device,
                             vkrt_lab_knob knob, int64_t value);
/* Whether QUANT_VARIANT `value` also forces a Q6_K kernel this device can run (words, and the
 * one-column stream kernels: prefetch, prefetch-rows-a, prefetch-rows-b, stream); the other
 * values leave Q6_K to its own choice. */
bool vkrt_lab_quant_q6_k_variant_usable(vkrt_appliance *appliance, uint32_t device,
                                        int64_t value);

/* How a quant matrix-vector variant reads the rows of w (the counters' quant_read index). */
typedef enum vkrt_lab_quant_read {
  VKRT_LAB_QUANT_READ_WORDS = 0, /* any row alignment, rows looped (Q6_K: its f32-x kernel
                                    per column count) */
  VKRT_LAB_QUANT_READ_VEC16,     /* 16 bytes of each row per invocation: rows and x 16-byte
                                    aligned, Q8_0 rows of a multiple of 8 blocks (Q6_K's
                                    one-column stream kernels: x 16-byte aligned, rows at
                                    any even byte) */
  VKRT_LAB_QUANT_READ_LANEW,     /* one word of each row per invocation: rows 4-byte
                                    aligned, Q8_0 rows of an even block count, x 16-byte
                                    aligned */
  VKRT_LAB_QUANT_READ_KSPACE,    /* 16 consecutive weights of each row per invocation: x
                                    16-byte aligned, Q4_K rows 8-byte aligned */
  VKRT_LAB_QUANT_READ_Q8X,       /* x rounded to 8 bits in shared memory, integer dot
                                    products (VKRT_ACTIVATIONS_Q8; M = 1, K <= 16384, x
                                    and Q4_K rows 16-byte aligned; Q6_K's too, rows at
                                    any even byte) */
  VKRT_LAB_QUANT_READ_COUNT
} vkrt_lab_quant_read;

/* The K up to which the forced q8x variant takes 8-bit x on M > 1 columns (its kernels hold
 * the rounded x of 2, 4 or 8 columns in shared memory: 24576 values). Not taken unforced
 * until timed against the f32-x kernels for several columns. */
#define VKRT_LAB_Q8X_COLUMNS_MAX_K 12288

/* The read pattern of QUANT_VARIANT `variant` (1..count); -1 outside. */
int vkrt_lab_quant_read_of(int64_t variant);
/* The variant an unforced Q8_0 or Q4_K matrix-vector tries at `rank` (0 first; the op takes
 * the first whose read pattern w and x fit, the last being the words kernel; with
 * VKRT_ACTIVATIONS_Q8 the q8x variant is tried before them); 0 for another type, a rank
 * outside 0..VKRT_LAB_QUANT_READ_COUNT-2, or the quant kernels compiled out. */
int vkrt_lab_quant_preference(vkrt_type type, int rank);
/* Rows per compute unit a preferred one-column variant needs before the op takes it (0: none;
 * fewer rows take the next preference): the 16-row kernels leave units idle on small N. */
uint32_t vkrt_lab_quant_min_rows_per_unit(vkrt_type type, int64_t variant);

/* The matrix-vector shape (specialization constants of kernels/matvec.comp) used for f32
 * and f16 weights, chosen per device at open. set: every field >= 1 and wg at most
 * max_compute_work_group_invocations; when the table of specialized pipelines is nearly
 * full it finishes the device (vkrt_finish) and drops them, so a sweep may set any number
 * of shapes. */
typedef struct vkrt_lab_matvec {
  uint32_t wg;     /* invocations per workgroup (splits K) */
  uint32_t rows;   /* rows of w per workgroup block */
  uint32_t unroll; /* 16-byte chunks per row loaded before use */
  uint32_t blocks; /* row blocks per workgroup */
} vkrt_lab_matvec;

vkrt_status vkrt_lab_matvec_get(const vkrt_appliance *appliance, uint32_t device,
                                vkrt_type type, vkrt_lab_matvec *out);
vkrt_status vkrt_lab_matvec_set(vkrt_appliance *appliance, uint32_t device, vkrt_type type,
                                const vkrt_lab_matvec *config);

/* The tiled matmul's workgroup tiles (specialization constants of kernels/matmul.comp),
 * chosen per device at open: the portable kernel's and the cooperative-matrix kernel's, each
 * for M up to the small tile's bn, up to the medium tile's bn, and larger M. set: a tile the
 * kernel takes (every field >= 1, bk 0 meaning 32 and stages 0 meaning 1; bk 32, 64, 96 or
 * 128; stages 1 or 2; at most 16 units of 8 k of w and x per invocation; portable: rm divides bm, bm / rm divides wg and wg / (bm / rm) divides bn;
 * cooperative matrix: wg = 32 x a multiple of rm, bm a multiple of 16 x wg / 32 / rm, bn of
 * 16 x rm; within the device's shared memory); like vkrt_lab_matvec_set it drops the
 * specialized pipelines when their table is nearly full. */
typedef struct vkrt_lab_matmul_tile {
  uint32_t wg; /* invocations per workgroup */
  uint32_t bm; /* rows of w per tile */
  uint32_t bn; /* columns of x per tile */
  uint32_t rm; /* portable: rows per invocation; cooperative matrix: subgroups along m */
  uint32_t bk;     /* k per shared-memory step (0: 32) */
  uint32_t stages; /* shared-memory buffers (0: 1); 2 alternate, one barrier per step */
  uint32_t parts;  /* 0: the kernel; for timing its parts apart (results wrong): 1 without
                      the multiply, 2 without the loads after the first k step */
  uint32_t order;  /* 0: workgroups x-fastest (along w's rows); w: in strips of w row tiles,
                      each strip's column tiles together (its w rows shared in L2) */
} vkrt_lab_matmul_tile;

typedef enum vkrt_lab_tile_slot {
  VKRT_LAB_TILE_PORTABLE_SMALL = 0, VKRT_LAB_TILE_PORTABLE_MEDIUM, VKRT_LAB_TILE_PORTABLE_LARGE,
  VKRT_LAB_TILE_COOPMAT_SMALL, VKRT_LAB_TILE_COOPMAT_MEDIUM, VKRT_LAB_TILE_COOPMAT_LARGE,
  VKRT_LAB_TILE_SLOT_COUNT
} vkrt_lab_tile_slot;

vkrt_status vkrt_lab_matmul_tile_get(const vkrt_appliance *appliance, uint32_t device,
                                     vkrt_lab_tile_slot slot, vkrt_lab_matmul_tile *out);
vkrt_status vkrt_lab_matmul_tile_set(vkrt_appliance *appliance, uint32_t device,
                                     vkrt_lab_tile_slot slot,
                                     const vkrt_lab_matmul_tile *tile);
/* Whether the device runs the cooperative-matrix kernels (knob or not). */
bool vkrt_lab_matmul_coopmat_usable(const vkrt_appliance *appliance, uint32_t device);

/* ---- what ran ----------------------------------------------------------------------------- */

/* Kernel paths taken since open, per device (compare before and after an op). */
typedef struct vkrt_lab_counters {
  uint64_t matvec, matmul_tiled, matvec_split;
  uint64_t concat_fast, concat_generic, concat_split;
  uint64_t transpose_x2, copy_u4, copy_tiled, reduce_vec4;
  uint64_t quant_matvec, dequant;
  uint64_t quant_read[VKRT_LAB_QUANT_READ_COUNT]; /* quant_matvec by read pattern */
  uint64_t matmul_coopmat;  /* matmul_tiled calls on the cooperative-matrix kernels */
  uint64_t matmul_x16;      /* ... of which x was rounded to f16 first, into a scratch */
  uint64_t matmul_w16;      /* matmul_coopmat calls whose quantized w was dequantized to f16
                               first, into a scratch */
  uint64_t matmul_split_k;  /* matmul_tiled calls whose K ran in pieces on more workgroups,
                               the partial sums reduced after (a grid short of the device) */
  uint64_t matmul_fallback; /* M past the crossover on the matrix-vector kernels because the
                               tiled one could not take w (logged once per device) */
  uint64_t pipelines_ready; /* compute pipelines built so far, specialized ones included (at
                               vkrt_open on GPUs, on first use on CPU devices) */
  uint64_t argmax_split; /* argmax calls whose rows ran on several workgroups each, then a
                            combine pass */
  uint64_t sample_draws; /* rows drawn on the device by vkrt_op_sample */
  uint64_t top_k_passes;     /* vkrt_op_top_k dispatches: the row slices' sorts and the merges
                                of their lists */
  uint64_t attention;        /* vkrt_op_attention calls recorded */
  uint64_t attention_splits; /* ... the sum of their split counts */
  uint64_t attention_rounds; /* ... the sum of their rounds (split + combine pass pairs) */
  uint64_t attention_rows;   /* ... those whose split pass ran a row per invocation */
  uint64_t attention_k16;    /* ... of them, those that read q8_0 K rows in 16-byte words
                                (rows 4-byte aligned, 16-byte steps between tokens) */
  uint64_t attention_q8q;    /* ... of them, those whose q8_0 scores took integer dot
                                products on queries rounded to 8 bits (VKRT_ACTIVATIONS_Q8) */
  uint64_t attention_direct;   /* ... those with one split, written by the split pass alone
                                  (no combine pass) */
  uint64_t attention_full_split; /* ... those whose tiles cut every query into splits of one
                                    tile whatever its length (the rows loaded before kv_len
                                    returns) */
  uint64_t attention_last_merges; /* ... those whose last split merged the splits (no combine
                                     pass) */
  uint64_t matmul_fused_norm;   /* vkrt_op_matmul_fused dispatches with the RMS norm folded in */
  uint64_t matmul_fused_swiglu; /* ... with the SwiGLU */
  uint64_t matmul_fused_qkv;    /* ... a q/k/v product with its RoPE and KV-cache rows */
  uint64_t quant_q8x_wide; /* quant_matvec calls on the q8x kernels for 4 or 8 columns a pass
                              that hold 32768 rounded values (40 KiB of shared memory, where
                              the device has it): K past 6144 / 3072 in one pass */
  uint64_t matmul_w16_pieces; /* the pieces of rows of matmul_w16 calls converted and
                                 multiplied in turn (each piece's tiles overlap the next
                                 piece's conversion); calls taken whole count none */
} vkrt_lab_counters;

/* How vkrt_op_attention would split an attention of these shapes on this device (with the
 * ATTENTION_SPLITS and ATTENTION_UNROLL knobs as set): query heads per workgroup (sharing one
 * KV head), workgroups per KV head, cache tokens per split, splits over the capacity n_ctx,
 * queries per round and rounds (queries whose split partials fit the scratch at once), row
 * passes per tile. A context the scratch cannot hold, or a forced unroll the shared memory
 * cannot, is refused with the reason. */
typedef struct vkrt_lab_attention {
  uint32_t heads_per_group, head_groups, split_len, splits, queries_per_round, rounds;
  uint32_t unroll;        /* cache-row passes per tile of the split pass (0: rows) */
  uint32_t shared_bytes;  /* the split pass's shared memory */
  uint64_t scratch_bytes; /* the device's split scratch (CONFIG_VKRT_ATTENTION_SCRATCH_KB) */
  bool direct;            /* one split: the split pass writes the result, no combine pass */
  bool rows;              /* the split pass runs a row per invocation (else tiles) */
  uint32_t subgroup;      /* rows: the subgroup size it is built for */
  bool full_split;        /* tiles: every query cut into splits of one tile whatever its
                             length (the split pass loads its rows before kv_len returns) */
} vkrt_lab_attention;

vkrt_status vkrt_lab_attention_plan(const vkrt_appliance *appliance, uint32_t device,
                                    uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                                    uint32_t n_q, uint32_t n_ctx, vkrt_lab_attention *out);

vkrt_status vkrt_lab_counters_get(const vkrt_appliance *appliance, uint32_t device,
                                  vkrt_lab_counters *out);

/* The contiguous device copy this device prefers: "compute (copy_vec4, 16-byte loads)" or
 * "vkCmdCopyBuffer" (never NULL; "?" for a bad device). */
const char *vkrt_lab_copy_path(const vkrt_appliance *appliance, uint32_t device);

typedef enum vkrt_lab_copy {
  VKRT_LAB_COPY_PREFERRED = -1, /* the device's choice */
  VKRT_LAB_COPY_COMPUTE = 0,    /* copy_vec4: 16-byte loads, grid-stride */
  VKRT_LAB_COPY_TRANSFER = 1,   /* vkCmdCopyBuffer */
} vkrt_lab_copy;

/* A contiguous byte copy recorded into the stream of the buffers' device on the given path,
 * with no barrier before it (the bench's copy reference; on the compute path an unaligned
 * head and tail go through vkCmdCopyBuffer). */
vkrt_status vkrt_lab_cmd_copy_bytes(vkrt_buffer *dst, uint64_t dst_offset, vkrt_buffer *src,
                                    uint64_t src_offset, uint64_t size, vkrt_lab_copy path);

/* ---- GPU timestamps around recorded work ------------------------------------------------- */

typedef struct vkrt_lab_timer vkrt_lab_timer;

/* Two timestamp queries on one device; VKRT_ERROR_UNSUPPORTED when the device has no
 * timestamps (callers time with the wall clock instead). */
vkrt_status vkrt_lab_timer_create(vkrt_appliance *appliance, uint32_t device,
                                  vkrt_lab_timer **out);
void vkrt_lab_timer_destroy(vkrt_lab_timer *timer);
/* Records the reset of the queries and the first timestamp (top of pipe) into the device's
 * stream. */
vkrt_status vkrt_lab_timer_begin(vkrt_lab_timer *timer);
/* Records the second timestamp (bottom of pipe), after a full stream barrier when `barrier`
 * (so back-to-back ops are all complete before it). */
vkrt_status vkrt_lab_timer_end(vkrt_lab_timer *timer, bool barrier);
/* Seconds between the two, once the stream was submitted and waited (vkrt_finish). */
vkrt_status vkrt_lab_timer_seconds(vkrt_lab_timer *timer, double *out);

/* ---- host time inside the Vulkan recording calls (vkrt-bench record --calls) ------------- */

typedef enum vkrt_lab_vk_call {
  VKRT_LAB_VK_BIND_PIPELINE,
  VKRT_LAB_VK_PUSH_DESCRIPTORS,
  VKRT_LAB_VK_BIND_DESCRIPTOR_SETS,
  VKRT_LAB_VK_PUSH_CONSTANTS,
  VKRT_LAB_VK_DISPATCH,
  VKRT_LAB_VK_BARRIER,
  VKRT_LAB_VK_FILL,
  VKRT_LAB_VK_COPY,
  VKRT_LAB_VK_BEGIN,
  VKRT_LAB_VK_RESET_POOL,
  VKRT_LAB_VK_ALLOCATE_SETS,         /* the descriptor-pool ring (no push descriptors) */
  VKRT_LAB_VK_UPDATE_SETS,
  VKRT_LAB_VK_RESET_DESCRIPTOR_POOL,
  VKRT_LAB_VK_CALL_COUNT
} vkrt_lab_vk_call;

typedef struct vkrt_lab_vk_calls {
  uint64_t count[VKRT_LAB_VK_CALL_COUNT]; /* calls of each entry point */
  uint64_t ns[VKRT_LAB_VK_CALL_COUNT];    /* host ns inside them (the driver's) */
  uint64_t marks;      /* ops marked (vkrt_lab_vk_calls_mark(true)) */
  uint64_t before_ns;  /* from a mark to the first call after it: libvkrt's checks, hazard
                          tracking and pipeline lookup before the op's first command */
  uint64_t between_ns; /* between the calls after one mark: libvkrt's glue */
  uint64_t after_ns;   /* from the last call to the next mark: the op's return and the
                          caller's loop */
  double clock_ns;     /* one clock read (each call's figure includes about one; each
                          wrapped call adds about two to the op's time) */
} vkrt_lab_vk_calls;

/* While a profile runs the device's recording entry points go through timing wrappers; one
 * device at a time, from the thread recording it. Only calls inside marked ops count: _mark(true) before
 * each op, _mark(false) after the last (what follows, a submit, is not counted). _stop
 * restores the table and returns the sums. */
vkrt_status vkrt_lab_vk_calls_start(vkrt_appliance *appliance, uint32_t device);
void vkrt_lab_vk_calls_mark(bool op_follows);
vkrt_status vkrt_lab_vk_calls_stop(vkrt_appliance *appliance, uint32_t device,
                                   vkrt_lab_vk_calls *out);
const char *vkrt_lab_vk_call_name(vkrt_lab_vk_call call);

/* ---- raw Vulkan submit floors (vkrt-bench sync) ------------------------------------------ */

typedef enum vkrt_lab_raw_kind {
  VKRT_LAB_RAW_SPIN = 0,        /* empty submit signalling a private timeline semaphore,
                                   waited by spinning on vkGetSemaphoreCounterValue */
  VKRT_LAB_RAW_WAIT_SEMAPHORES, /* the same, waited by vkWaitSemaphores */
  VKRT_LAB_RAW_FENCE,           /* empty submit with a fence: vkWaitForFences + reset */
  VKRT_LAB_RAW_FILL_SPIN,       /* a pre-recorded 4-byte vkCmdFillBuffer + host barrier,
                                   timeline spin */
  VKRT_LAB_RAW_UPDATE_SPIN,     /* the same with vkCmdUpdateBuffer of 4 bytes */
  VKRT_LAB_RAW_FILL_BARE_SPIN,  /* the fill without the host barrier */
  VKRT_LAB_RAW_FILL_DEVICE_SPIN,   /* the fill + a compute/transfer-only barrier (what
                                      libvkrt closes with when the host reads nothing) */
  VKRT_LAB_RAW_UPDATE_DEVICE_SPIN, /* the update + that barrier */
  VKRT_LAB_RAW_LEAD_FILL_SPIN,     /* that barrier first, then the fill, nothing after */
  VKRT_LAB_RAW_KIND_COUNT
} vkrt_lab_raw_kind;

typedef struct vkrt_lab_raw vkrt_lab_raw;

/* A private timeline semaphore, fence and command pool on the device of `fill_target`,
 * whose first 4 bytes the FILL_SPIN command buffer fills; submits go to the device's own
 * compute queue (under its lock), bypassing the stream. */
vkrt_status vkrt_lab_raw_create(vkrt_buffer *fill_target, vkrt_lab_raw **out);
void vkrt_lab_raw_destroy(vkrt_lab_raw *raw);
/* One submit + wait round trip of the given kind. */
vkrt_status vkrt_lab_raw_round_trip(vkrt_lab_raw *raw, vkrt_lab_raw_kind kind);

/* Hand-over floors (vkrt-bench allreduce --latency): empty work on device `from`'s compute
 * queue, then empty work on a second queue after it, the host spinning until the second is
 * done. The second queue is device `to`'s compute queue, or, when from == to, the device's
 * transfer queue (VKRT_ERROR_UNAVAILABLE when it has none of its own). gpu_wait: the second
 * submit waits on the first's timeline semaphore on the GPU (between devices a timeline
 * shared as an opaque FD: UNAVAILABLE without the semaphore FD functions); otherwise the
 * host spins on the first, then submits the second (a host relay). from == to with a plain
 * spin is the one-queue floor of vkrt_lab_raw (VKRT_LAB_RAW_SPIN). */
typedef struct vkrt_lab_handover vkrt_lab_handover;
vkrt_status vkrt_lab_handover_create(vkrt_appliance *appliance, uint32_t from, uint32_t to,
                                     bool gpu_wait, vkrt_lab_handover **out);
void vkrt_lab_handover_destroy(vkrt_lab_handover *handover);
vkrt_status vkrt_lab_handover_round_trip(vkrt_lab_handover *handover);

/* ---- host regions (registration) --------------------------------------------------------- */

typedef struct vkrt_lab_import {
  uint32_t regions;        /* registered host regions */
  uint64_t live_chunks;    /* imported chunks not yet released (all devices; a chunk is
                              released after the last upload using it, so 0 some time after
                              the last unregister) */
  uint64_t prestage_bytes; /* bytes of pre-staged copies held */
  uint64_t prestage_budget; /* bytes pre-staged copies may hold (Kconfig, capped by the
                               devices' memory budget, or vkrt_lab_prestage_budget_set) */
  uint64_t load_pinned_bytes; /* pinned chunk memory of vkrt_load_file calls in progress */
} vkrt_lab_import;

vkrt_status vkrt_lab_import_get(const vkrt_appliance *appliance, vkrt_lab_import *out);
/* The pinned-chunk file loads (vkrt_load_file's read, direct and memcpy paths): helper
 * threads, one chunk's file bytes, chunks in the ring, one read (pread or memcpy), and the
 * row width below which rows of a strided range are packed by the host into one DMA region
 * per chunk (no_gather: never; each row is then its own region), packed by each reader right
 * after reading its block unless pack_after_read (then once the whole chunk is read, by the
 * submitting thread and the readers, before the chunk is submitted). 0 in a field: the default
 * (Kconfig; threads: one per online CPU but the caller's, one of them waiting for the chunks
 * to retire and the others reading; chunk: CONFIG_VKRT_LOAD_CHUNK_KB, on the direct path
 * CONFIG_VKRT_LOAD_DIRECT_CHUNK_KB; block: an eighth of the chunk, at most 4 MiB; gather:
 * below 64 KiB). set checks the values (chunk and block multiples of 4 KiB, block <= chunk)
 * and applies them to the loads that start after it; get gives the values a read or memcpy
 * load would use now. */
typedef struct vkrt_lab_load {
  uint32_t threads;
  uint64_t chunk_bytes;
  uint32_t chunks;
  uint64_t block_bytes;
  uint64_t gather_below;
  bool no_gather;
  bool pack_after_read;
  bool no_row_images; /* narrow rows packed by the host even where a row image could take them */
  uint32_t submit_batch; /* chunks per submission, each device's in one vkQueueSubmit (0 or 1:
                            each chunk once read; at most half the chunks) */
} vkrt_lab_load;

vkrt_status vkrt_lab_load_set(vkrt_appliance *appliance, const vkrt_lab_load *load);
vkrt_status vkrt_lab_load_get(const vkrt_appliance *appliance, vkrt_lab_load *out);

/* Replaces the pre-stage budget (any number of bytes; 0 pre-stages nothing): registrations
 * after the call that would exceed it take the staging ring. */
vkrt_status vkrt_lab_prestage_budget_set(vkrt_appliance *appliance, uint64_t bytes);
/* Acts as if the device required host imports aligned to `bytes` (a power of two, at least
 * the alignment it reports; the device needs host import): registrations after the call plan
 * their chunks with it, pre-staging or refusing what would import bytes outside the
 * caller's pages. */
vkrt_status vkrt_lab_import_alignment_set(vkrt_appliance *appliance, uint32_t device,
                                          uint64_t bytes);
/* The import module's part of vkrt_describe alone (policy, per-device import facts, the
 * registered regions), as text lines or a JSON member ("\"import\": {...}"); returns the
 * length needed (excluding NUL) like snprintf. */
size_t vkrt_lab_import_describe(const vkrt_appliance *appliance, bool json, char *buf,
                                size_t buf_size);

/* ---- a chain of dependent products: barriers against arrival counters (vkrt-bench chain) -- */

/* What orders the links of the chain (kernels/lab_chain.comp). */
typedef enum vkrt_lab_chain_order {
  VKRT_LAB_CHAIN_BARRIERS,       /* a pipeline barrier between the links' dispatches */
  VKRT_LAB_CHAIN_COUNTERS,       /* none: each workgroup waits for the link before's arrival
                                    counter to hold its whole grid, then reads x */
  VKRT_LAB_CHAIN_COUNTERS_EARLY, /* the same, each subgroup's first weights loaded first */
  VKRT_LAB_CHAIN_UNORDERED,      /* neither: the links race (a wrong result), the floor a
                                    perfect overlap would reach */
  VKRT_LAB_CHAIN_ORDER_COUNT
} vkrt_lab_chain_order;

typedef struct vkrt_lab_chain {
  uint32_t n;        /* rows and columns of each link's f16 matrix: 256..8192, a multiple of 256 */
  uint32_t links;    /* dependent products: link i computes y = W_(i % matrices) x, its x the
                        output of link i - 1 */
  uint32_t matrices; /* distinct matrices in w, n x n halves each, one after the other */
  vkrt_lab_chain_order order;
} vkrt_lab_chain;

/* Records the chain into the stream of the buffers' device (all three on one device): the
 * counters zeroed, then one dispatch a link. w: the matrices; xy: 2 n floats, x of link 0 in
 * the first half, link i's y in half (i + 1) % 2; counters: links + 1 words, the last set
 * when a wait gave up (its result is then void). Needs the lab_chain_f16 kernel
 * (CONFIG_VKRT_LAB_KERNEL_VARIANTS) and subgroup arithmetic: VKRT_ERROR_UNSUPPORTED
 * otherwise. */
vkrt_status vkrt_lab_chain_record(vkrt_buffer *w, vkrt_buffer *xy, vkrt_buffer *counters,
                                  const vkrt_lab_chain *chain);

/* ---- host copies -------------------------------------------------------------------------- */

/* The pre-stage copy registration uses: size bytes from src to dst with up to `threads`
 * threads (page faults on both sides included); returns the threads used. */
uint32_t vkrt_lab_parallel_copy(void *dst, const void *src, uint64_t size, uint32_t threads);

#ifdef __cplusplus
}
#endif
