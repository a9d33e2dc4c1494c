/* vkrt_op_set_rows: the KV-cache append, f32 rows written at device-side row indices into
 * an f32, f16 or q8_0 tensor (kernels/set_rows.comp): one invocation per element (q8_0: the
 * block's 32 share their max through shared memory). vkrt_op_rope_set_rows: the same kernel's ROPE form, each source row's
 * heads roped on the way. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct set_rows_push {
  uint32_t n, total;
  uint32_t s_offset, s_stride0, s_stride1;
  uint32_t d_offset, d_stride0, d_stride1; /* elements; bytes for q8_0 */
  uint32_t r_offset, r_stride, n_rows;
  uint32_t base_group;
};
VKRT_KERNEL_SET_ROWS_F32_CHECK_PUSH(struct set_rows_push);

static const enum vkrt_ops_kernel set_rows_kernels[VKRT_TYPE_COUNT] = {
  [VKRT_TYPE_F32] = VKRT_OPS_SET_ROWS_F32,
  [VKRT_TYPE_F16] = VKRT_OPS_SET_ROWS_F16,
  [VKRT_TYPE_Q8_0] = VKRT_OPS_SET_ROWS_Q8_0,
  [VKRT_TYPE_Q4_K] = VKRT_OPS_KERNEL_COUNT, /* refused by vkrt_ops_check_set_rows */
  [VKRT_TYPE_I32] = VKRT_OPS_KERNEL_COUNT,
  [VKRT_TYPE_Q6_K] = VKRT_OPS_KERNEL_COUNT, /* refused by vkrt_ops_check_set_rows */
};

#if IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS)
struct rope_set_rows_push {
  uint32_t n, total;
  uint32_t s_offset, s_stride0, s_stride1;
  uint32_t d_offset, d_stride0, d_stride1;
  uint32_t r_offset, r_stride, n_rows;
  uint32_t s_stride_h, head_dim, n_dims, neox;
  uint32_t pos_offset, pos_stride;
  float theta_scale, freq_scale;
  uint32_t factors, factors_offset, factors_stride;
  uint32_t base_group;
};
VKRT_KERNEL_ROPE_SET_ROWS_F32_CHECK_PUSH(struct rope_set_rows_push);

static const enum vkrt_ops_kernel rope_set_rows_kernels[VKRT_TYPE_COUNT] = {
  [VKRT_TYPE_F32] = VKRT_OPS_ROPE_SET_ROWS_F32,
  [VKRT_TYPE_F16] = VKRT_OPS_ROPE_SET_ROWS_F16,
  [VKRT_TYPE_Q8_0] = VKRT_OPS_ROPE_SET_ROWS_Q8_0,
  [VKRT_TYPE_Q4_K] = VKRT_OPS_KERNEL_COUNT, /* refused by vkrt_ops_check_rope_set_rows */
  [VKRT_TYPE_I32] = VKRT_OPS_KERNEL_COUNT,
  [VKRT_TYPE_Q6_K] = VKRT_OPS_KERNEL_COUNT,
};

vkrt_status vkrt_rope_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                      const struct vkrt_ops_view views[5], bool factors,
                                      const vkrt_rope_params *params) {
  const struct vkrt_ops_view *d = &views[0], *src = &views[1], *rows = &views[2];
  const struct vkrt_ops_view *pos = &views[3], *f = factors ? &views[4] : src;
  enum vkrt_ops_kernel k = rope_set_rows_kernels[d->type];
  if (k == VKRT_OPS_KERNEL_COUNT)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL, "vkrt_op_rope_set_rows: %s rows",
                      vkrt_type_str(d->type));
  struct vkrt_ops_binding b[5] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(rows),
                                  vkrt_ops_view_binding(d), vkrt_ops_view_binding(pos),
                                  vkrt_ops_view_binding(f)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, k, b, 5, &p);
  if (s != VKRT_OK)
    return s;
  uint32_t n = src->ne[0] * src->ne[1];
  uint64_t total = (uint64_t)n * src->ne[2]; /* an invocation per element */
  struct rope_set_rows_push push = {
      .n = n, .total = (uint32_t)total,
      .s_offset = src->offset, .s_stride0 = src->stride[0], .s_stride1 = src->stride[2],
      .d_offset = d->offset, .d_stride0 = d->stride[0], .d_stride1 = d->stride[1],
      .r_offset = rows->offset, .r_stride = rows->stride[0], .n_rows = d->ne[1],
      .s_stride_h = src->stride[1], .head_dim = src->ne[0], .n_dims = params->n_dims,
      .neox = params->mode == VKRT_ROPE_NEOX,
      .pos_offset = pos->offset, .pos_stride = pos->stride[0],
      .theta_scale = vkrt_rope_theta_scale(params),
      .freq_scale = params->freq_scale, .factors = factors,
      .factors_offset = f->offset, .factors_stride = f->stride[0]};
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (total + 255) / 256);
  return VKRT_OK;
}
#endif

vkrt_status vkrt_set_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 const struct vkrt_ops_view views[3]) {
  const struct vkrt_ops_view *d = &views[0], *src = &views[1], *rows = &views[2];
  enum vkrt_ops_kernel k = set_rows_kernels[d->type];
  if (k == VKRT_OPS_KERNEL_COUNT)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL, "vkrt_op_set_rows: %s rows",
                      vkrt_type_str(d->type));
  struct vkrt_ops_binding b[3] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(rows),
                                  vkrt_ops_view_binding(d)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, k, b, 3, &p);
  if (s != VKRT_OK)
    return s;
  uint64_t total = (uint64_t)src->ne[0] * src->ne[1]; /* an invocation per element */
  struct set_rows_push push = {.n = src->ne[0], .total = (uint32_t)total,
                               .s_offset = src->offset, .s_stride0 = src->stride[0],
                               .s_stride1 = src->stride[1],
                               .d_offset = d->offset, .d_stride0 = d->stride[0],
                               .d_stride1 = d->stride[1],
                               .r_offset = rows->offset, .r_stride = rows->stride[0],
                               .n_rows = d->ne[1]};
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (total + 255) / 256);
  return VKRT_OK;
}
