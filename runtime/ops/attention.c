/* vkrt_op_attention: decode attention over a KV cache as flash-decoding. The split pass
 * (kernels/attention_split.comp) attends each query over one slice of the cache per
 * workgroup, for all the query heads of one KV head at once, and leaves per split and head
 * the max score, the exp sum and the weighted V in a scratch buffer made at open; the
 * combine pass (kernels/attention_combine.comp) merges the splits of each head. With one
 * split the split pass writes the result itself and no combine runs. How many splits:
 * vkrt_ops_attention_plan (validate.c), from the cache capacity n_ctx, since the attended
 * lengths are only known on the device, aiming at a few split workgroups per compute unit;
 * the passes cut each query's length, read on the device, into that many splits of equal
 * length, of the plan's min_split tokens at least (the split it would give a cache that
 * long), so a short query in a long cache still spreads over the splits (those past its
 * length exit at once). Queries whose
 * partials do not fit the scratch at once run in rounds, each pass asking the stream for its
 * operands so the scratch is reused in order. The split pass runs in tiles of cache rows
 * with an online softmax: K rows staged in shared memory, one invocation per token and part
 * of the row for the scores of all the group's heads, no reduction per token. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct attention_split_push {
  uint32_t q_off, q_s1, q_s2;
  uint32_t k_off, k_s1, k_s2;
  uint32_t v_off, v_s1, v_s2;
  uint32_t len_off, len_s0;
  uint32_t n_ctx, n_split;
  uint32_t min_split;
  uint32_t q0, n_head, head_groups, g_total;
  uint32_t ml_base;
  float scale;
  uint32_t direct;
  uint32_t d_off, d_s1, d_s2;
  uint32_t k_vec;
  uint32_t base_x, base_y, base_z;
};
struct attention_combine_push {
  uint32_t len_off, len_s0;
  uint32_t d_off, d_s1, d_s2;
  uint32_t n_ctx, n_split, min_split;
  uint32_t q0, n_head;
  uint32_t ml_base;
  uint32_t base_x, base_y, base_z;
};
VKRT_KERNEL_ATTENTION_COMBINE_CHECK_PUSH(struct attention_combine_push);
#if IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION_F16)
VKRT_KERNEL_ATTENTION_SPLIT_F16_CHECK_PUSH(struct attention_split_push);
#endif
VKRT_KERNEL_ATTENTION_SPLIT_Q8_0_CHECK_PUSH(struct attention_split_push);
#if IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION_F16)
VKRT_KERNEL_ATTENTION_ROWS_F16_CHECK_PUSH(struct attention_split_push);
#endif
VKRT_KERNEL_ATTENTION_ROWS_Q8_0_CHECK_PUSH(struct attention_split_push);
VKRT_KERNEL_ATTENTION_ROWS_Q8_0_Q8Q_CHECK_PUSH(struct attention_split_push);

#define COMBINE_WG 256 /* attention_combine.comp: a power of two */
#define COMBINE_SLICE 32 /* attention_combine.comp DS: head elements per workgroup */
/* ... and up to this many live splits its invocations merge one element each, split after
 * split, instead of the split groups and shared-memory trees: H100 (board nvidia-h200-x1),
 * Llama-3-8B q4_K at 64-128 cached tokens, --activations q8, q8_0 K/V: tg p50 2.752-2.761 ->
 * 2.722-2.734 ms; Llama-3.2-1B 0.871 -> 0.855-0.857 ms (3 and 2 rounds alternated). Where
 * every split of the plan fits that, the workgroups are those 32 invocations alone. */
#define COMBINE_IN_ORDER 32
/* Split workgroups per compute unit the plan aims for (VKRT_ATTENTION_WG invocations each),
 * with at most one split per compute unit. The H200 (132 SMs, one query, the tiled split
 * pass): head 128 over 8 KV heads at 32768 tokens ran 33 splits (2 workgroups per SM) in
 * 75.6 us, 66 in 78.4, 132 in 82.8, 263 in 91.8 (f16; q8_0 82.6 / 85.1 / 90.1 / 99.5);
 * head 256 over 2 KV heads at 20000 tokens 132 splits (2 per SM) in 42.9 us, 66 in 46.8,
 * 264 in 50.4 (best row passes of each). */
#define SPLIT_GROUPS_PER_CU 2
/* Arrival counters of the splits that merge themselves (the lab's ATTENTION_LAST_MERGES): one
 * per workgroup row (KV head x head group x query of a round) */
#define ATTENTION_ARRIVALS 1024u
/* The same for the split pass with a row per invocation (attention_rows.comp), whose
 * workgroups hold no tile: enough of them for the loads of several subgroups per SM. */
#define ROWS_GROUPS_PER_CU 4

vkrt_status vkrt_attention_open(struct vkrt_device *dev) {
  struct vkrt_ops_state *ops = dev->ops;
  /* Workgroups of the split pass to aim for: a few per compute unit on GPUs (where the
   * device says how many it has; 512 otherwise), fewer on CPU devices, whose workgroups run
   * on a handful of threads. */
  uint32_t cus = dev->caps.compute_units;
  ops->attention_target_groups = dev->caps.is_cpu ? 16 : cus ? SPLIT_GROUPS_PER_CU * cus : 512;
  ops->attention_max_splits = dev->caps.is_cpu ? 0 : cus;
  ops->attention_rows_target_groups = dev->caps.is_cpu ? 16 : cus ? ROWS_GROUPS_PER_CU * cus : 1024;
  ops->attention_combine_in_order = COMBINE_IN_ORDER;
  vkrt_status s = vkrt_ops_scratch_create(dev, (uint64_t)CONFIG_VKRT_ATTENTION_SCRATCH_KB * 1024,
                                          &ops->attention_scratch);
  if (s == VKRT_OK)
    s = vkrt_ops_scratch_create(dev, ATTENTION_ARRIVALS * sizeof(uint32_t),
                                &ops->attention_arrivals);
  return s;
}

void vkrt_attention_close(struct vkrt_device *dev) {
  vkrt_ops_scratch_destroy(&dev->ops->attention_scratch);
  vkrt_ops_scratch_destroy(&dev->ops->attention_arrivals);
}

/* Whether the row-per-invocation split pass can run on dev: subgroup arithmetic, and one
 * subgroup size the kernel can be built for (the device's, not varied per pipeline). */
static bool rows_possible(const struct vkrt_device *dev, const char **why_not) {
  const struct vkrt_caps *c = &dev->caps;
  const char *r = vkrt_ops_kernel_usable(dev, VKRT_OPS_ATTENTION_ROWS_Q8_0)
                      ? NULL : "tiles: the row kernel needs compute subgroup arithmetic";
  if (!r && c->min_subgroup_size != c->max_subgroup_size)
    r = "tiles: the device varies its subgroup size per pipeline";
  if (!r && (c->subgroup_size < 4 || c->subgroup_size > 128 ||
             (c->subgroup_size & (c->subgroup_size - 1))))
    r = "tiles: the row kernel is built for subgroups of 4..128 invocations, a power of two";
  *why_not = r;
  return !r;
}

/* The row kernel is the default wherever it runs, for up to ROWS_MAX_PER_KV query heads per
 * KV head; above, the tiles, which stage a K row once for all the group's heads in shared
 * memory (the row kernel reads each head's query from shared memory per K chunk). H200
 * (board nvidia-h200-x1), the KV-cache layout, best split count of each: head 128, 4 heads
 * per KV head, 32768 tokens: rows 66.0 us (f16) / 73.6 (q8_0) against the tiles' 76.2 /
 * 82.7; head 256, 8 per KV head, 20000 tokens: rows 46.4 / 54.0 against 43.6 / 46.4; head 64,
 * 8 per KV head, 7680 tokens: rows 21.3 / 21.5 against 12.7 / 13.1. Lavapipe (2 CPU cores)
 * head 256 at 20000 tokens: rows 97-116 ms against 180-229 ms. */
#define ROWS_MAX_PER_KV 4
/* ... and on GPUs from this many cached tokens (the capacity the plan sees): below, the
 * tiles win there. CPU devices keep the rows at every length (lavapipe, above; its short
 * contexts unmeasured).
 * H200, head 128, 4 per KV head, best split count of each, tiles against rows, q8_0 (f16):
 * 64 tokens 6.2 (6.9) against 9.8 (11.0) us; 544 10.9 (11.0) against 15.3 (16.7); 2048 13.6
 * against 17.8; 4096 17.7 (16.5) against 19.8 (18.6); 8192 25.4 against 26.6; 16384 43.3
 * (44.0) against 40.9 (41.4). */
#define ROWS_MIN_CTX 16384

/* Whether the row kernel scores a q8_0 cache on queries rounded to 8 bits (integer dot
 * products): the appliance asked for 8-bit activations and the device has the kernel
 * (shaderIntegerDotProduct). */
static bool int8_queries(const struct vkrt_device *dev) {
  return dev->ops->quant_activations_q8 &&
         vkrt_ops_kernel_usable(dev, VKRT_OPS_ATTENTION_ROWS_Q8_0_Q8Q);
}

const char *vkrt_attention_kernel_choice(const struct vkrt_device *dev, bool *rows) {
  const char *why_not;
  bool can = rows_possible(dev, &why_not);
  int forced = vkrt_ops_forces(dev)->attention_kernel;
  *rows = can && forced != 1;
  if (forced == 1)
    return "tiles forced";
  if (!can)
    return why_not;
#define ROWS_WHEN "rows up to 4 query heads per KV head (on GPUs from 16384 cached tokens), " \
                  "tiles otherwise: the device has subgroup arithmetic at a fixed size"
#define ROWS_Q8Q "; the rows score q8_0 K on queries rounded to 8 bits (integer dot products: " \
                 "8-bit activations)"
  if (int8_queries(dev))
    return forced == 2 ? "rows forced" ROWS_Q8Q : ROWS_WHEN ROWS_Q8Q;
  return forced == 2 ? "rows forced" : ROWS_WHEN;
#undef ROWS_WHEN
#undef ROWS_Q8Q
}

bool vkrt_attention_plan_for(struct vkrt_device *dev, uint32_t head_dim, uint32_t n_head,
                             uint32_t n_head_kv, uint32_t n_q, uint32_t n_ctx,
                             struct vkrt_attention_plan *out, char *why, size_t why_size) {
  struct vkrt_ops_state *ops = dev->ops;
  uint64_t scratch = VKRT_MIN(ops->attention_scratch->size, ops->limits.max_storage_buffer_range);
  bool rows;
  vkrt_attention_kernel_choice(dev, &rows);
  if (rows && vkrt_ops_forces(dev)->attention_kernel != 2 && n_head_kv &&
      (n_head / n_head_kv > ROWS_MAX_PER_KV || (!dev->caps.is_cpu && n_ctx < ROWS_MIN_CTX)))
    rows = false;
  if (rows)
    return vkrt_ops_attention_rows_plan(head_dim, n_head, n_head_kv, n_q, n_ctx,
                                        dev->caps.subgroup_size, int8_queries(dev),
                                        ops->attention_rows_target_groups,
                                        vkrt_ops_forces(dev)->attention_splits,
                                        dev->caps.max_compute_shared_memory_size, scratch, out,
                                        why, why_size);
  return vkrt_ops_attention_plan(head_dim, n_head, n_head_kv, n_q, n_ctx,
                                 ops->attention_target_groups, ops->attention_max_splits,
                                 vkrt_ops_forces(dev)->attention_splits,
                                 vkrt_ops_forces(dev)->attention_unroll,
                                 dev->caps.max_compute_shared_memory_size, scratch, out, why,
                                 why_size);
}


vkrt_status vkrt_attention_record(struct vkrt_device *dev, const struct vkrt_ops_view views[5],
                                  float scale) {
  struct vkrt_ops_state *ops = dev->ops;
  const struct vkrt_ops_view *dst = &views[0], *q = &views[1], *len = &views[4];
  struct vkrt_ops_view k = views[2], v = views[3];
  bool f16 = k.type == VKRT_TYPE_F16;
  uint32_t D = q->ne[0], H = q->ne[1], NQ = q->ne[2], HKV = k.ne[1], n_ctx = k.ne[2];
  struct vkrt_attention_plan plan;
  char why[VKRT_ERROR_MESSAGE_SIZE];
  if (!vkrt_attention_plan_for(dev, D, H, HKV, NQ, n_ctx, &plan, why, sizeof(why)))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "dev%u: %s", dev->index, why);
  /* f16 in 16-byte words (validate.c checked the rows' alignment), q8_0 in 32-bit words:
   * bound from a 16-byte boundary, offsets in bytes */
  if (!vkrt_ops_widen_words(dev, &k) || !vkrt_ops_widen_words(dev, &v))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: vkrt_op_attention: the q8_0 cache is read in 32-bit words: the "
                      "buffers of k and v must extend to the 4-byte boundary after them",
                      dev->index);
  const struct vkrt_ops_pipeline *split, *combine = NULL;
  uint32_t split_spec[VKRT_OPS_MAX_SPEC] = {plan.wg, plan.heads_per_group, D,
                                           plan.rows ? plan.subgroup : plan.unroll,
                                           plan.full_split};
  uint32_t in_order = ops->attention_combine_in_order;
  uint32_t combine_spec[VKRT_OPS_MAX_SPEC] = {plan.splits <= in_order ? COMBINE_SLICE : COMBINE_WG,
                                             D, in_order, 0};
  bool q8q = plan.rows && !f16 && int8_queries(dev);
  enum vkrt_ops_kernel sk = plan.rows ? (f16   ? VKRT_OPS_ATTENTION_ROWS_F16
                                         : q8q ? VKRT_OPS_ATTENTION_ROWS_Q8_0_Q8Q
                                               : VKRT_OPS_ATTENTION_ROWS_Q8_0)
                                      : (f16 ? VKRT_OPS_ATTENTION_SPLIT_F16 : VKRT_OPS_ATTENTION_SPLIT_Q8_0);
  bool direct = plan.splits == 1; /* the split pass writes dst: no combine */
  /* the tiles' last split of each workgroup row merges the row's splits itself (no combine
   * pass) where the lab asks and the arrival counters cover the rows */
  bool last_merges = !direct && !plan.rows && vkrt_ops_forces(dev)->attention_last_merges &&
                     (uint64_t)plan.queries_per_round * HKV * plan.head_groups <=
                         ATTENTION_ARRIVALS;
  vkrt_status s = vkrt_ops_pipeline_spec(dev, sk, split_spec, &split);
  if (s == VKRT_OK && !direct && !last_merges)
    s = vkrt_ops_pipeline_spec(dev, VKRT_OPS_ATTENTION_COMBINE, combine_spec, &combine);
  if (s == VKRT_OK && last_merges && !ops->attention_arrivals_zeroed) {
    /* zero once: the merging split zeroes its row's counter after each run */
    s = vkrt_cmd_fill(ops->attention_arrivals, 0, ops->attention_arrivals->size, 0);
    ops->attention_arrivals_zeroed = s == VKRT_OK;
  }
  if (s != VKRT_OK)
    return s;

  /* the kernel's K/V addresses: f16 in 16-byte words; q8_0 in bytes (it splits them into
   * words itself). Views: offsets in bytes after widening, strides in f16 elements or q8_0
   * bytes. */
  uint32_t kv_unit = f16 ? 16 : 1, kv_div = f16 ? 8 : 1;
  struct attention_split_push sp = {
      .q_off = q->offset, .q_s1 = q->stride[1], .q_s2 = q->stride[2],
      .k_off = k.offset / kv_unit, .k_s1 = k.stride[1] / kv_div, .k_s2 = k.stride[2] / kv_div,
      .v_off = v.offset / kv_unit, .v_s1 = v.stride[1] / kv_div, .v_s2 = v.stride[2] / kv_div,
      .len_off = len->offset, .len_s0 = len->stride[0],
      .n_ctx = n_ctx, .n_split = plan.splits, .min_split = plan.min_split,
      .n_head = H, .head_groups = plan.head_groups, .g_total = H / HKV,
      .ml_base = (uint32_t)(plan.scratch_used / sizeof(float) / (D + 2) * D),
      .scale = scale, .direct = direct ? 1u : last_merges ? 2u : 0u,
      .d_off = dst->offset, .d_s1 = dst->stride[1], .d_s2 = dst->stride[2]};
  /* the row kernel reads q8_0 K rows in 16-byte words where every row starts 4-byte aligned
   * and the rows of one KV head share their 16-byte phase (offsets in bytes here) */
  sp.k_vec = plan.rows && !f16 && D % 64 == 0 && k.offset % 4 == 0 && k.stride[1] % 4 == 0 &&
             k.stride[2] % 16 == 0;
  struct attention_combine_push cp = {
      .len_off = len->offset, .len_s0 = len->stride[0],
      .d_off = dst->offset, .d_s1 = dst->stride[1], .d_s2 = dst->stride[2],
      .n_ctx = n_ctx, .n_split = plan.splits, .min_split = plan.min_split,
      .n_head = H, .ml_base = sp.ml_base};
  struct vkrt_buffer *scratch = ops->attention_scratch;
  for (uint32_t q0 = 0; q0 < NQ; q0 += plan.queries_per_round) {
    uint32_t nq = VKRT_MIN(plan.queries_per_round, NQ - q0);
    /* the round's partials: o [0, ml_base) floats, then (m, l) pairs */
    uint64_t entries = (uint64_t)nq * plan.splits * H;
    uint64_t used = (sp.ml_base + 2 * entries) * sizeof(float);
    /* split pass: reads q, k, v, kv_len, writes the scratch (after the previous round's or
     * attention's combine read it: the stream puts the barrier there), or dst when direct */
    struct vkrt_buffer *arrivals = ops->attention_arrivals;
    struct vkrt_stream_access a1[7] = {{scratch, 0, used, true},
                                       {q->buffer, q->lo, q->hi, false},
                                       {k.buffer, k.lo, k.hi, false},
                                       {v.buffer, v.lo, v.hi, false},
                                       {len->buffer, len->lo, len->hi, false},
                                       {dst->buffer, dst->lo, dst->hi, true},
                                       {arrivals, 0, arrivals->size, true}};
    if (direct)
      a1[0] = (struct vkrt_stream_access){dst->buffer, dst->lo, dst->hi, true};
    VkCommandBuffer cmd;
    s = vkrt_ops_begin(dev, a1, last_merges ? 7 : 5, &cmd);
    if (s != VKRT_OK)
      return s;
    /* binding 5: the row kernel's k again, as 16-byte words (q8_0); the tiles' dst, with
     * their arrival counters at 6 (bound, not used, unless the last split merges) */
    struct vkrt_ops_binding b1[7] = {vkrt_ops_view_binding(q), vkrt_ops_view_binding(len),
                                     vkrt_ops_view_binding(&k), vkrt_ops_view_binding(&v),
                                     direct ? vkrt_ops_view_binding(dst)
                                            : (struct vkrt_ops_binding){scratch->handle, 0, used},
                                     plan.rows ? vkrt_ops_view_binding(&k)
                                               : vkrt_ops_view_binding(dst),
                                     {arrivals->handle, 0, arrivals->size}};
    s = vkrt_ops_bind(dev, cmd, split, b1, split->binding_count);
    if (s != VKRT_OK)
      return s;
    sp.q0 = q0;
    vkrt_ops_dispatch_3d(dev, cmd, split, &sp, (uint64_t)HKV * plan.head_groups, plan.splits, nq);
    vkrt_ops_count(dev, attention_rounds, 1);
    if (direct || last_merges)
      continue;
    /* combine: reads the scratch and kv_len, writes dst */
    struct vkrt_stream_access a2[3] = {{dst->buffer, dst->lo, dst->hi, true},
                                       {scratch, 0, used, false},
                                       {len->buffer, len->lo, len->hi, false}};
    s = vkrt_ops_begin(dev, a2, 3, &cmd);
    if (s != VKRT_OK)
      return s;
    struct vkrt_ops_binding b2[3] = {vkrt_ops_view_binding(len), {scratch->handle, 0, used},
                                     vkrt_ops_view_binding(dst)};
    s = vkrt_ops_bind(dev, cmd, combine, b2, 3);
    if (s != VKRT_OK)
      return s;
    cp.q0 = q0;
    vkrt_ops_dispatch_3d(dev, cmd, combine, &cp, H, nq, (D + COMBINE_SLICE - 1) / COMBINE_SLICE);
  }
  vkrt_ops_count(dev, attention, 1);
  vkrt_ops_count(dev, attention_splits, plan.splits);
  vkrt_ops_count(dev, attention_direct, direct);
  vkrt_ops_count(dev, attention_last_merges, last_merges);
  vkrt_ops_count(dev, attention_full_split, split_spec[4] != 0); /* the pipeline's own path */
  vkrt_ops_count(dev, attention_rows, plan.rows);
  vkrt_ops_count(dev, attention_k16, sp.k_vec);
  vkrt_ops_count(dev, attention_q8q, q8q);
  return VKRT_OK;
}
