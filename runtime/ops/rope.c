/* vkrt_op_rope / vkrt_op_rope_ext: rotary position embedding of every head of every token in
 * one dispatch (kernels/rope.comp), positions read on the device from an i32 tensor, with
 * ggml's per-pair frequency factors or without. */
#include <math.h>

#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct rope_push {
  uint32_t pairs, n_head, total;
  uint32_t head_dim, n_dims, neox;
  uint32_t x_offset, x_stride[3];
  uint32_t d_offset, d_stride[3];
  uint32_t pos_offset, pos_stride;
  float theta_scale, freq_scale;
  uint32_t factors, factors_offset, factors_stride;
  uint32_t base_group;
};
VKRT_KERNEL_ROPE_F32_CHECK_PUSH(struct rope_push);

vkrt_status vkrt_rope_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct vkrt_ops_view views[4], bool factors,
                             const vkrt_rope_params *params) {
  const struct vkrt_ops_view *d = &views[0], *x = &views[1], *pos = &views[2];
  const struct vkrt_ops_view *f = factors ? &views[3] : x; /* bound, not read, without */
  struct vkrt_ops_binding b[4] = {vkrt_ops_view_binding(x), vkrt_ops_view_binding(pos),
                                  vkrt_ops_view_binding(d), vkrt_ops_view_binding(f)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, VKRT_OPS_ROPE_F32, b, 4, &p);
  if (s != VKRT_OK)
    return s;
  uint32_t pairs = (x->ne[0] + 1) / 2;
  uint64_t total = (uint64_t)pairs * x->ne[1] * x->ne[2]; /* <= elements < 2^31 */
  struct rope_push push = {.pairs = pairs, .n_head = x->ne[1], .total = (uint32_t)total,
                           .head_dim = x->ne[0], .n_dims = params->n_dims,
                           .neox = params->mode == VKRT_ROPE_NEOX,
                           .x_offset = x->offset, .d_offset = d->offset,
                           .pos_offset = pos->offset, .pos_stride = pos->stride[0],
                           .theta_scale = vkrt_rope_theta_scale(params),
                           .freq_scale = params->freq_scale, .factors = factors,
                           .factors_offset = f->offset, .factors_stride = f->stride[0]};
  for (int i = 0; i < 3; i++) {
    push.x_stride[i] = x->stride[i];
    push.d_stride[i] = d->stride[i];
  }
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (total + 255) / 256);
  return VKRT_OK;
}
