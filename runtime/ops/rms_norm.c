/* vkrt_op_rms_norm: x / sqrt(mean(x^2) + eps) * w per row, one workgroup per row
 * (kernels/rms_norm.comp): the norm before each llama-style attention and MLP block. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct rms_norm_push {
  uint32_t n, ne1, ne2;
  uint32_t x_offset, x_stride[4];
  uint32_t d_offset, d_stride[4];
  uint32_t w_offset, w_stride0, has_w;
  float eps;
  uint32_t base_x, base_y, base_z;
};
VKRT_KERNEL_RMS_NORM_F32_CHECK_PUSH(struct rms_norm_push);

vkrt_status vkrt_rms_norm_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 const struct vkrt_ops_view views[3], bool has_w, float eps) {
  const struct vkrt_ops_view *d = &views[0], *x = &views[1], *w = &views[2];
  /* Without weights the w binding is x again (never read). */
  struct vkrt_ops_binding b[3] = {vkrt_ops_view_binding(x),
                                  vkrt_ops_view_binding(has_w ? w : x), vkrt_ops_view_binding(d)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, VKRT_OPS_RMS_NORM_F32, b, 3, &p);
  if (s != VKRT_OK)
    return s;
  struct rms_norm_push push = {.n = x->ne[0], .ne1 = x->ne[1], .ne2 = x->ne[2],
                               .x_offset = x->offset, .d_offset = d->offset,
                               .w_offset = has_w ? w->offset : 0,
                               .w_stride0 = has_w ? w->stride[0] : 0, .has_w = has_w, .eps = eps};
  for (int i = 0; i < 4; i++) {
    push.x_stride[i] = x->stride[i];
    push.d_stride[i] = d->stride[i];
  }
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, 1, x->ne[1], (uint64_t)x->ne[2] * x->ne[3]);
  return VKRT_OK;
}
