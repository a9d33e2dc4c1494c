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
                               const struct vkrt_ops_view *dst, const struct vkrt_ops_view *src,
                               enum vkrt_ops_kernel kernel) {
  struct vkrt_ops_binding b[2] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(dst)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, kernel, b, 2, &p);
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

/* Dense rows whose starts are 16-byte aligned move as 16-byte units (the strided copy of
 * the concat fast path is such a copy): the same view in units of 16 bytes. */
static bool as_units16(const struct vkrt_ops_view *v, struct vkrt_ops_view *out) {
  uint32_t u = 16 / v->type_size;
  if (v->stride[0] != 1 || v->ne[0] % u || v->offset % u || v->bind_offset % 16)
    return false;
  for (int i = 1; i < 4; i++)
    if (v->stride[i] % u)
      return false;
  *out = *v;
  out->ne[0] = v->ne[0] / u;
  out->offset = v->offset / u;
  for (int i = 1; i < 4; i++)
    out->stride[i] = v->stride[i] / u;
  out->type_size = 16;
  return true;
}

static const enum vkrt_ops_kernel copy_kernels[2][2] = {
  [VKRT_TYPE_F32] = {[VKRT_TYPE_F32] = VKRT_OPS_COPY_F32_F32, [VKRT_TYPE_F16] = VKRT_OPS_COPY_F32_F16},
  [VKRT_TYPE_F16] = {[VKRT_TYPE_F32] = VKRT_OPS_COPY_F16_F32, [VKRT_TYPE_F16] = VKRT_OPS_COPY_F16_F16},
};

/* A transposed view: the destination's innermost dim is strided in the source while the
 * source is dense along dim 1. The same copy is a transpose of the source seen with dims
 * 0 and 1 swapped (dense along its dim 0), which the tiled kernel does coalesced. */
static bool transposed_view(struct vkrt_device *dev, const struct vkrt_ops_view *dst,
                            const struct vkrt_ops_view *src) {
  if (!dev->ops->copy_transposed_tiled || dst->type != src->type || dst->stride[0] != 1 ||
      src->stride[0] == 1 || src->stride[1] != 1 || dst->ne[0] < 2 || dst->ne[1] < 2)
    return false;
  return vkrt_ops_kernel_usable(dev, src->type == VKRT_TYPE_F16 ? VKRT_OPS_TRANSPOSE_F16
                                                                : VKRT_OPS_TRANSPOSE_F32);
}

/* The kernel tables' row for a type: i32 (only ever copied to i32) moves as f32 words,
 * whose same-type kernels copy bits, never floats. */
static vkrt_type word_type(vkrt_type t) { return t == VKRT_TYPE_I32 ? VKRT_TYPE_F32 : t; }

vkrt_status vkrt_copy_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct vkrt_ops_view *dst, const struct vkrt_ops_view *src) {
  bool same_dense = dst->type == src->type && dst->contiguous && src->contiguous;
  if (src->block > 1 && !same_dense) /* dequantizing copy: quant.c */
    return vkrt_quant_copy_record(dev, cmd, dst, src);
  if (same_dense)
    return vkrt_ops_copy_bytes(dev, cmd, dst->buffer->handle, dst->lo, src->buffer->handle,
                               src->lo, dst->hi - dst->lo, -1);
  if (IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE) && transposed_view(dev, dst, src)) {
    struct vkrt_ops_view swapped = *src;
    swapped.ne[0] = src->ne[1], swapped.ne[1] = src->ne[0];
    swapped.stride[0] = src->stride[1], swapped.stride[1] = src->stride[0];
    swapped.contiguous = false;
    vkrt_ops_count(dev, copy_tiled, 1);
    return vkrt_transpose_record(dev, cmd, dst, &swapped);
  }
  if (dst->ne[0] >= ROWS_MIN_NE0) {
    struct vkrt_ops_view su, du;
    if (dst->type == src->type && as_units16(src, &su) && as_units16(dst, &du) &&
        vkrt_ops_kernel_usable(dev, VKRT_OPS_COPY_ROWS_U4)) {
      vkrt_ops_count(dev, copy_u4, 1);
      return record_rows(dev, cmd, &du, &su, VKRT_OPS_COPY_ROWS_U4);
    }
    return record_rows(dev, cmd, dst, src, copy_rows_kernels[word_type(src->type)][word_type(dst->type)]);
  }
  struct vkrt_ops_binding b[2] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(dst)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, copy_kernels[word_type(src->type)][word_type(dst->type)],
                                b, 2, &p);
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
