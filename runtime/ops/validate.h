/* Pure descriptor validation for the ops: no Vulkan calls, no device, so it is unit-tested
 * with hand-built tensors (tests/unit/test_ops_validate.c). Each check turns the public
 * vkrt_tensor descriptors into views the kernels take (one storage-buffer binding and
 * 32-bit element offsets/strides) or fails with a message naming the op, the operand and
 * the reason. Buffers are only read for their size and device (never dereferenced
 * further), so tests may pass fake struct vkrt_buffer objects. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vkrt/vkrt.h"

/* M up to this takes the matrix-vector kernel (which also binds a large w in row slices) */
#define VKRT_OPS_MATVEC_MAX_M 8

/* Device limits the views must respect (from the capability snapshot). */
struct vkrt_ops_limits {
  uint64_t max_storage_buffer_range;           /* bytes one binding may span */
  uint64_t min_storage_buffer_offset_alignment; /* power of two */
};

/* A tensor as a kernel binds it: bytes [bind_offset, bind_offset + bind_range) of the
 * buffer, element `offset` within that range, strides in elements. */
struct vkrt_ops_view {
  struct vkrt_buffer *buffer;
  uint64_t bind_offset;
  uint64_t bind_range;
  uint64_t lo, hi;        /* bytes of the buffer the tensor can touch: [lo, hi) */
  uint32_t offset;        /* elements from bind_offset (block types: bytes) */
  uint32_t ne[4];
  uint32_t stride[4];     /* elements (block types: bytes) */
  uint32_t block;         /* elements per block: 1, or 32/256 for Q8_0/Q4_K and Q6_K */
  uint64_t elements;
  uint32_t type_size;     /* bytes per element (block types: per block) */
  vkrt_type type;
  bool contiguous;        /* dense, dim 0 innermost (dims of size 1 ignored) */
  bool fits_binding;      /* one binding covers it (else only ops that split dense ranges
                             over several bindings take it: dense copies, add) */
};

/* The most elements one op may touch: linear indices stay well inside 32 bits. */
#define VKRT_OPS_MAX_ELEMENTS (1ull << 31)

/* Checks one tensor and fills *out. `op` and `name` prefix the message ("vkrt_op_copy: src:
 * ..."). Sizes must be >= 1, strides >= 0 and multiples of the element size, the offset
 * aligned to the element size and the touched range inside the buffer. Whether one
 * binding covers it (maxStorageBufferRange, 32-bit element indices) is recorded in
 * fits_binding and enforced by the op checks below. `writable` adds the check that no two
 * elements share an address (a write would race). */
bool vkrt_ops_view_init(struct vkrt_ops_view *out, const struct vkrt_ops_limits *lim,
                        const char *op, const char *name, const vkrt_tensor *t, bool writable,
                        char *why, size_t why_size);

/* Binds [lo, hi) of a buffer with the alignment rules above; false (with a message) when
 * the range is too long for one binding. Used for raw ranges (contiguous copies, reduce).
 * *bind_offset is aligned down from lo to the offset alignment. */
bool vkrt_ops_bind_range(const struct vkrt_ops_limits *lim, uint64_t lo, uint64_t hi,
                         uint64_t *bind_offset, uint64_t *bind_range);

/* Shape, type and device agreement per op. Each fills `views` (dst first, then the
 * sources in argument order) on success. */
bool vkrt_ops_check_copy(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                         const vkrt_tensor *src, struct vkrt_ops_view views[2], char *why,
                         size_t why_size);
bool vkrt_ops_check_transpose(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                              const vkrt_tensor *src, struct vkrt_ops_view views[2], char *why,
                              size_t why_size);
bool vkrt_ops_check_concat(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *a, const vkrt_tensor *b, int dim,
                           struct vkrt_ops_view views[3], char *why, size_t why_size);
bool vkrt_ops_check_add(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                        const vkrt_tensor *const *srcs, uint32_t count,
                        struct vkrt_ops_view views[9], char *why, size_t why_size);
/* vkrt_op_matmul_fused: matmul's rules on one binding each, 2-D, with the fusion's norm
 * (f32 {K}, its eps) and swiglu (w's rows even, dst half of them); views dst, w, x, norm (x's
 * view without one); with qkv also pos, k_cache, v_cache (written) and the rope factors
 * (pos's view without them). */
bool vkrt_ops_check_matmul_fused(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                                 const vkrt_tensor *w, const vkrt_tensor *x,
                                 const vkrt_matmul_fusion *fusion, struct vkrt_ops_view views[8],
                                 char *why, size_t why_size);
bool vkrt_ops_check_matmul(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *w, const vkrt_tensor *x,
                           struct vkrt_ops_view views[3], char *why, size_t why_size);

/* dst = silu(gate) * up: f32, dense, one shape; dst disjoint from each source or exactly it. */
bool vkrt_ops_check_swiglu(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *gate, const vkrt_tensor *up,
                           struct vkrt_ops_view views[3], char *why, size_t why_size);

/* Decode attention: dst, q f32 {D, H, n_q} dense along D; k, v one type, f16 (rows 16-byte
 * aligned) or q8_0, {D, H_kv, n_ctx}; kv_len I32 {n_q}; H a multiple of H_kv; D a
 * multiple of 8 (q8_0: 32) up to VKRT_ATTENTION_MAX_HEAD_DIM; dst disjoint from the
 * sources. Views: dst, q, k, v, kv_len. */
#define VKRT_ATTENTION_MAX_HEAD_DIM 256
bool vkrt_ops_check_attention(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                              const vkrt_tensor *q, const vkrt_tensor *k, const vkrt_tensor *v,
                              const vkrt_tensor *kv_len, float scale,
                              struct vkrt_ops_view views[5], char *why, size_t why_size);

/* How vkrt_op_attention splits its work (kernels/attention_split.comp, pure so it is
 * unit-tested): a workgroup of VKRT_ATTENTION_WG invocations takes `heads_per_group` query
 * heads of one KV head (the largest divisor of n_head / n_head_kv up to
 * VKRT_ATTENTION_MAX_GROUP) and `split_len` cache tokens (at least one tile, the tokens its
 * row passes cover at once, unless the context is shorter; the split pass runs any length
 * in tiles with an online softmax); `splits` cover the capacity n_ctx, chosen so that
 * splits x KV heads x head groups x queries comes near `target_groups`, and no more than
 * `max_splits` of them (0: no cap)
 * (or `forced_splits` when nonzero, within those bounds). `unroll` row passes per tile
 * (forced_unroll, else VKRT_ATTENTION_UNROLL, halved while the weighted-V sums of the
 * heads and the rows in flight exceed VKRT_ATTENTION_REGS registers and while the shared memory,
 * `shared_bytes` of it, exceeds the device's). The split partials ((head_dim + 2) floats
 * per query head, split and query) must fit `scratch_bytes`: queries run in rounds of
 * `queries_per_round`, and splits are as many as one query's partials fit at most. */
#define VKRT_ATTENTION_WG 128
#define VKRT_ATTENTION_MAX_GROUP 8
#define VKRT_ATTENTION_UNROLL 4
/* The H200, 8 heads a group: head 256 at 20000 tokens 42.9 us with 2 passes, 56.7 with 4
 * (q8_0 40.3 / 54.2); head 64 the same with 2 or 4; 4 heads: 4 passes the best. */
#define VKRT_ATTENTION_REGS 80
#define VKRT_ATTENTION_MAX_UNROLL 8
struct vkrt_attention_plan {
  bool rows;                  /* attention_rows.comp (else attention_split.comp's tiles) */
  uint32_t subgroup;          /* rows: the subgroup size the kernel is built for */
  uint32_t wg;                /* invocations per split workgroup */
  uint32_t unroll;            /* tiles: row passes per tile (rows: 0) */
  uint32_t shared_bytes;      /* the split pass's shared memory */
  uint32_t heads_per_group;
  uint32_t head_groups;       /* workgroups per KV head */
  uint32_t split_len;         /* cache tokens per split (at the full capacity) */
  uint32_t min_split;         /* the passes cut a query of length L into splits of
                                 max(ceil(L / splits), min_split) tokens: the split this plan
                                 would give a cache of L tokens (1 when the count is forced) */
  uint32_t splits;            /* over the capacity n_ctx */
  bool full_split;            /* tiles: min_split x splits covers n_ctx, so every query is cut
                                 into splits of min_split whatever its length and the split
                                 pass loads its rows before kv_len returns */
  uint32_t queries_per_round;
  uint32_t rounds;
  uint64_t scratch_used;      /* bytes of one round's partials */
};
bool vkrt_ops_attention_plan(uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                             uint32_t n_q, uint32_t n_ctx, uint32_t target_groups,
                             uint32_t max_splits,
                             uint32_t forced_splits, uint32_t forced_unroll,
                             uint32_t shared_limit, uint64_t scratch_bytes,
                             struct vkrt_attention_plan *out, char *why, size_t why_size);
/* The same for the split pass with a row per invocation (kernels/attention_rows.comp), built
 * for subgroups of `subgroup` invocations (a power of two, 4..128: the device's, fixed): a
 * workgroup of VKRT_ATTENTION_ROWS_WG invocations (or one subgroup, when wider) takes
 * `heads_per_group` query heads of one KV head (the largest divisor of n_head / n_head_kv
 * whose weighted-V sums stay within VKRT_ATTENTION_ROWS_SUMS floats per invocation and whose
 * queries and probabilities fit the shared memory) and at least one run of `subgroup` tokens
 * per split; the splits aim at `target_groups` workgroups as above, no cap but the scratch.
 * `int8_queries`: room for the queries rounded to 8 bits too (the _q8q kernel). */
#define VKRT_ATTENTION_ROWS_WG 128
#define VKRT_ATTENTION_ROWS_SUMS 64
bool vkrt_ops_attention_rows_plan(uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                                  uint32_t n_q, uint32_t n_ctx, uint32_t subgroup,
                                  bool int8_queries, uint32_t target_groups, uint32_t forced_splits,
                                  uint32_t shared_limit, uint64_t scratch_bytes,
                                  struct vkrt_attention_plan *out, char *why, size_t why_size);
/* Bytes of shared memory the split pass takes (as attention_split.comp declares it). */
uint32_t vkrt_ops_attention_shared(uint32_t head_dim, uint32_t heads_per_group, uint32_t unroll);

/* Concat fast path eligibility (dim 0, one source stored transposed, the other source and
 * dst contiguous, same type). Returns 0 when not eligible, 1 when a is the transposed
 * source, 2 when b is; *why_not says which condition failed (for the bench and logs). */
int vkrt_ops_concat_fast_path_source(const struct vkrt_ops_view views[3], int dim,
                                     const char **why_not);

/* Splits `groups` linear workgroups into dispatches of at most max_x * max_y groups laid
 * out as (x, y); returns the number of dispatches. *x, *y describe the dispatch that starts
 * at linear group `first` (pure helper shared by the linear kernels and tested alone). */
void vkrt_ops_linear_split(uint64_t groups, uint64_t first, uint32_t max_x, uint32_t max_y,
                           uint32_t *x, uint32_t *y);

/* ---- transformer decode ops (views: dst first, then the sources in argument order) ---- */

/* rms_norm: x, dst f32 of one shape (dst disjoint from x or exactly x); w NULL or f32 {n};
 * eps finite and >= 0. views[2] is zeroed when w is NULL. */
bool vkrt_ops_check_rms_norm(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                             const vkrt_tensor *x, const vkrt_tensor *w, float eps,
                             struct vkrt_ops_view views[3], char *why, size_t why_size);
/* rope: x, dst f32 {head_dim, n_head, n_tokens} (dst disjoint from x or exactly x); pos I32
 * {n_tokens}; mode normal or neox, n_dims even in [2, head_dim], freq_base > 0 and
 * freq_scale finite; factors (vkrt_op_rope_ext, NULL without) f32 {>= n_dims / 2}, not dst. */
bool vkrt_ops_check_rope(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                         const vkrt_tensor *x, const vkrt_tensor *pos, const vkrt_tensor *factors,
                         const vkrt_rope_params *params, struct vkrt_ops_view views[4],
                         char *why, size_t why_size);
/* get_rows: table f32/f16/q8_0/q4_K/q6_K {n_embd, n_rows}; ids I32 {n}; dst f32 {n_embd, n}. */
bool vkrt_ops_check_get_rows(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                             const vkrt_tensor *table, const vkrt_tensor *ids,
                             struct vkrt_ops_view views[3], char *why, size_t why_size);
/* set_rows: src f32 {n, count}; rows I32 {count}; dst f32/f16/q8_0 {n, n_rows}. */
bool vkrt_ops_check_set_rows(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                             const vkrt_tensor *src, const vkrt_tensor *rows,
                             struct vkrt_ops_view views[3], char *why, size_t why_size);
/* rope_set_rows: src f32 {head_dim, n_head, n}; rows, pos I32 {n}; dst f32/f16/q8_0
 * {head_dim * n_head, n_rows}, disjoint from every source; params and factors as rope's. */
bool vkrt_ops_check_rope_set_rows(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                                  const vkrt_tensor *src, const vkrt_tensor *rows,
                                  const vkrt_tensor *pos, const vkrt_tensor *factors,
                                  const vkrt_rope_params *params, struct vkrt_ops_view views[5],
                                  char *why, size_t why_size);
/* top_k (kernels/top_k.comp): a workgroup sorts VKRT_OPS_TOP_K_SORT keys; the lists of a row
 * of n elements: one per slice of that many, then merges of VKRT_OPS_TOP_K_SORT / k lists a
 * workgroup; the scratch (VKRT_OPS_TOP_K_KEYS 8-byte keys) holds a row's first lists and
 * those of its first merge. */
#define VKRT_OPS_TOP_K_SORT 2048u
#define VKRT_OPS_TOP_K_KEYS 32768u
#define VKRT_OPS_TOP_K_MAX 64u
uint32_t vkrt_ops_top_k_lists(uint32_t n);
uint32_t vkrt_ops_top_k_row_keys(uint32_t n, uint32_t k);
/* top_k: x f32 {n, rows}; values f32 {k, rows}; ids I32 {k, rows}; 1 <= k <= min(n,
 * VKRT_OPS_TOP_K_MAX); a row's lists within the scratch; values, ids and x disjoint. */
bool vkrt_ops_check_top_k(const struct vkrt_ops_limits *lim, const vkrt_tensor *values,
                          const vkrt_tensor *ids, const vkrt_tensor *x,
                          struct vkrt_ops_view views[3], char *why, size_t why_size);
/* argmax: x f32 {n, rows}; dst I32 {rows}. With key (vkrt_op_sample): key I32 {2, rows},
 * temperature finite and > 0. */
bool vkrt_ops_check_argmax(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *x, const vkrt_tensor *key, float temperature,
                           struct vkrt_ops_view views[3], char *why, size_t why_size);
