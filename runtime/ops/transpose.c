/* vkrt_op_transpose: shared-memory tiled transpose of dims 0 and 1 (transpose.comp). */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct transpose_push {
  uint32_t ne0, ne1, ne2;
  uint32_t src_stride[4];
  uint32_t dst_stride[4];
  uint32_t src_offset;
  uint32_t dst_offset;
  uint32_t base_x, base_y, base_z;
};
VKRT_KERNEL_TRANSPOSE_F32_CHECK_PUSH(struct transpose_push);

#define TILE 32u /* transpose.comp */

vkrt_status vkrt_transpose_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                  const struct vkrt_ops_view *dst,
                                  const struct vkrt_ops_view *src) {
  if (dst->type != src->type) {
    /* A converting transpose is a strided copy from the permuted source (uncoalesced on
     * one side; the tiled kernel moves one type). */
    struct vkrt_ops_view permuted = *src;
    permuted.ne[0] = src->ne[1], permuted.ne[1] = src->ne[0];
    permuted.stride[0] = src->stride[1], permuted.stride[1] = src->stride[0];
    permuted.contiguous = false;
    return vkrt_copy_record(dev, cmd, dst, &permuted);
  }
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(
      dev, src->type == VKRT_TYPE_F16 ? VKRT_OPS_TRANSPOSE_F16 : VKRT_OPS_TRANSPOSE_F32, &p);
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_binding b[2] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(dst)};
  s = vkrt_ops_bind(dev, cmd, p, b, 2);
  if (s != VKRT_OK)
    return s;
  struct transpose_push push = {.ne0 = src->ne[0],
                                .ne1 = src->ne[1],
                                .ne2 = src->ne[2],
                                .src_offset = src->offset,
                                .dst_offset = dst->offset};
  for (int i = 0; i < 4; i++) {
    push.src_stride[i] = src->stride[i];
    push.dst_stride[i] = dst->stride[i];
  }
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, (src->ne[0] + TILE - 1) / TILE,
                       (src->ne[1] + TILE - 1) / TILE, (uint64_t)src->ne[2] * src->ne[3]);
  return VKRT_OK;
}
