/* vkrt_op_swiglu: dst = silu(gate) * up element-wise (kernels/swiglu.comp), the gate of a
 * llama-style MLP between its gate/up and down projections. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct swiglu_push {
  uint32_t d_offset, g_offset, u_offset, count;
  uint32_t base_group;
};
VKRT_KERNEL_SWIGLU_F32_CHECK_PUSH(struct swiglu_push);

vkrt_status vkrt_swiglu_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3]) {
  const struct vkrt_ops_view *d = &views[0], *g = &views[1], *u = &views[2];
  struct vkrt_ops_binding b[3] = {vkrt_ops_view_binding(g), vkrt_ops_view_binding(u),
                                  vkrt_ops_view_binding(d)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, VKRT_OPS_SWIGLU_F32, b, 3, &p);
  if (s != VKRT_OK)
    return s;
  struct swiglu_push push = {.d_offset = d->offset, .g_offset = g->offset, .u_offset = u->offset,
                             .count = (uint32_t)d->elements};
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (d->elements + 255) / 256);
  return VKRT_OK;
}
