/* vkrt_op_set_rows: the KV-cache append, f32 rows written at device-side row indices into
 * an f32, f16 or q8_0 tensor (kernels/set_rows.comp): one invocation per element (q8_0: the
 * block's 32 share their max through shared memory). vkrt_op_rope_set_rows: the same
 * kernel's ROPE form, each source row's heads roped on the way. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

/* Both forms' push constants (set_rows.comp declares the rope fields in every form). */
struct set_rows_push {
  uint32_t n, total;
  uint32_t s_offset, s_stride0, s_stride1;
  uint32_t d_offset, d_stride0, d_stride1; /* elements; bytes for q8_0 */
  uint32_t r_offset, r_stride, n_rows;
  uint32_t s_stride_h, head_dim, n_dims, neox;
  uint32_t pos_offset, pos_stride;
  float theta_scale, freq_scale;
  uint32_t factors, factors_offset, factors_stride;
  uint32_t base_group;
};
VKRT_KERNEL_SET_ROWS_F32_CHECK_PUSH(struct set_rows_push);
#if IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS)
VKRT_KERNEL_ROPE_SET_ROWS_F32_CHECK_PUSH(struct set_rows_push);
#endif

/* [roped][dst type]; the other types are refused by the checks in validate.c */
static const enum vkrt_ops_kernel set_rows_kernels[2][VKRT_TYPE_COUNT] = {
  {[VKRT_TYPE_F32] = VKRT_OPS_SET_ROWS_F32, [VKRT_TYPE_F16] = VKRT_OPS_SET_ROWS_F16,
   [VKRT_TYPE_Q8_0] = VKRT_OPS_SET_ROWS_Q8_0, [VKRT_TYPE_Q4_K] = VKRT_OPS_KERNEL_COUNT,
   [VKRT_TYPE_I32] = VKRT_OPS_KERNEL_COUNT, [VKRT_TYPE_Q6_K] = VKRT_OPS_KERNEL_COUNT},
  {[VKRT_TYPE_F32] = VKRT_OPS_ROPE_SET_ROWS_F32, [VKRT_TYPE_F16] = VKRT_OPS_ROPE_SET_ROWS_F16,
   [VKRT_TYPE_Q8_0] = VKRT_OPS_ROPE_SET_ROWS_Q8_0, [VKRT_TYPE_Q4_K] = VKRT_OPS_KERNEL_COUNT,
   [VKRT_TYPE_I32] = VKRT_OPS_KERNEL_COUNT, [VKRT_TYPE_Q6_K] = VKRT_OPS_KERNEL_COUNT},
};

/* rope NULL: vkrt_op_set_rows, views dst, src {n, count}, rows; else vkrt_op_rope_set_rows,
 * views dst, src {head_dim, n_head, count}, rows, pos and (with factors) the factors. An
 * invocation per element. */
static vkrt_status record_rows(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view *views, const vkrt_rope_params *rope,
                               bool factors) {
  const struct vkrt_ops_view *d = &views[0], *src = &views[1], *rows = &views[2];
  const struct vkrt_ops_view *pos = rope ? &views[3] : rows, *f = factors ? &views[4] : src;
  enum vkrt_ops_kernel k = set_rows_kernels[rope != NULL][d->type];
  if (k == VKRT_OPS_KERNEL_COUNT)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL, "%s: %s rows",
                      rope ? "vkrt_op_rope_set_rows" : "vkrt_op_set_rows", vkrt_type_str(d->type));
  struct vkrt_ops_binding b[5] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(rows),
                                  vkrt_ops_view_binding(d), vkrt_ops_view_binding(pos),
                                  vkrt_ops_view_binding(f)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, k, b, rope ? 5 : 3, &p);
  if (s != VKRT_OK)
    return s;
  int token_dim = rope ? 2 : 1; /* src's dim of the rows */
  uint32_t n = rope ? src->ne[0] * src->ne[1] : src->ne[0];
  uint64_t total = (uint64_t)n * src->ne[token_dim];
  struct set_rows_push push = {
      .n = n, .total = (uint32_t)total,
      .s_offset = src->offset, .s_stride0 = src->stride[0], .s_stride1 = src->stride[token_dim],
      .d_offset = d->offset, .d_stride0 = d->stride[0], .d_stride1 = d->stride[1],
      .r_offset = rows->offset, .r_stride = rows->stride[0], .n_rows = d->ne[1]};
  if (rope) {
    push.s_stride_h = src->stride[1];
    push.head_dim = src->ne[0];
    push.n_dims = rope->n_dims;
    push.neox = rope->mode == VKRT_ROPE_NEOX;
    push.pos_offset = pos->offset;
    push.pos_stride = pos->stride[0];
    push.theta_scale = vkrt_rope_theta_scale(rope);
    push.freq_scale = rope->freq_scale;
    push.factors = factors;
    push.factors_offset = f->offset;
    push.factors_stride = f->stride[0];
  }
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (total + 255) / 256);
  return VKRT_OK;
}

#if IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS)
vkrt_status vkrt_rope_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                      const struct vkrt_ops_view views[5], bool factors,
                                      const vkrt_rope_params *params) {
  return record_rows(dev, cmd, views, params, factors);
}
#endif

vkrt_status vkrt_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 const struct vkrt_ops_view views[3]) {
  return record_rows(dev, cmd, views, NULL, false);
}
