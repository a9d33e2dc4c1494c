/* vkrt_op_copy: strided 4-D copy with f32 <-> f16 conversion; dense same-type copies take
 * the device's contiguous path (compute copy_vec4 or vkCmdCopyBuffer, see ops.c). */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct copy_push {
  uint32_t ne[4];
  uint32_t src_stride[4];
  uint32_t dst_stride[4];
  uint32_t src_offset;
  uint32_t dst_offset;
  uint32_t total;
  uint32_t base_group;
};
VKRT_KERNEL_COPY_F32_F32_CHECK_PUSH(struct copy_push);

VKRT_KERNEL_COPY_VEC4_CHECK_PUSH(struct copy_vec4_push); /* pushed by ops.c */

struct copy_rows_push {
  uint32_t ne0, ne1, ne2;
  uint32_t src_stride[4];
  uint32_t dst_stride[4];
  uint32_t src_offset;
  uint32_t dst_offset;
  uint32_t base_x, base_y, base_z;
};
VKRT_KERNEL_COPY_ROWS_F32_F32_CHECK_PUSH(struct copy_rows_push);

#define ROWS_SEGMENT 1024 /* elements of dim 0 per workgroup in copy_rows.comp */
#define ROWS_MIN_NE0 128  /* shorter rows waste most of a copy_rows workgroup */

static const enum vkrt_ops_kernel copy_rows_kernels[2][2] = {
  [VKRT_TYPE_F32] = {[VKRT_TYPE_F32] = VKRT_OPS_COPY_ROWS_F32_F32, [VKRT_TYPE_F16] = VKRT_OPS_COPY_ROWS_F32_F16},
  [VKRT_TYPE_F16] = {[VKRT_TYPE_F32] = VKRT_OPS_COPY_ROWS_F16_F32, [VKRT_TYPE_F16] = VKRT_OPS_COPY_ROWS_F16_F16},
};

static vkrt_status record_rows(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view *dst, const struct vkrt_ops_view *src) {
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, copy_rows_kernels[src->type][dst->type], &p);
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_binding b[2] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(dst)};
  s = vkrt_ops_bind(dev, cmd, p, b, 2);
  if (s != VKRT_OK)
    return s;
  struct copy_rows_push push = {.ne0 = dst->ne[0],
                                .ne1 = dst->ne[1],
                                .ne2 = dst->ne[2],
                                .src_offset = src->offset,
                                .dst_offset = dst->offset};
  for (int i = 0; i < 4; i++) {
    push.src_stride[i] = src->stride[i];
    push.dst_stride[i] = dst->stride[i];
  }
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, (dst->ne[0] + ROWS_SEGMENT - 1) / ROWS_SEGMENT,
                       dst->ne[1], (uint64_t)dst->ne[2] * dst->ne[3]);
  return VKRT_OK;
}

static const enum vkrt_ops_kernel copy_kernels[2][2] = {
  [VKRT_TYPE_F32] = {[VKRT_TYPE_F32] = VKRT_OPS_COPY_F32_F32, [VKRT_TYPE_F16] = VKRT_OPS_COPY_F32_F16},
  [VKRT_TYPE_F16] = {[VKRT_TYPE_F32] = VKRT_OPS_COPY_F16_F32, [VKRT_TYPE_F16] = VKRT_OPS_COPY_F16_F16},
};

vkrt_status vkrt_copy_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct vkrt_ops_view *dst, const struct vkrt_ops_view *src) {
  if (dst->type == src->type && dst->contiguous && src->contiguous)
    return vkrt_ops_copy_bytes(dev, cmd, dst->buffer->handle, dst->lo, src->buffer->handle,
                               src->lo, dst->elements * dst->type_size, -1);
  if (dst->ne[0] >= ROWS_MIN_NE0)
    return record_rows(dev, cmd, dst, src);
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, copy_kernels[src->type][dst->type], &p);
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_binding b[2] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(dst)};
  s = vkrt_ops_bind(dev, cmd, p, b, 2);
  if (s != VKRT_OK)
    return s;
  struct copy_push push = {.src_offset = src->offset,
                           .dst_offset = dst->offset,
                           .total = (uint32_t)dst->elements};
  for (int i = 0; i < 4; i++) {
    push.ne[i] = dst->ne[i];
    push.src_stride[i] = src->stride[i];
    push.dst_stride[i] = dst->stride[i];
  }
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (dst->elements + 255) / 256);
  return VKRT_OK;
}
