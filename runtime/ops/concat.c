/* vkrt_op_concat: the generic kernel for dims 0..3, plus the fast path for dim 0 with one
 * source stored transposed (CONFIG_VKRT_CONCAT_TRANSPOSED_FAST_PATH): the generic kernel
 * would read that source with a stride of a whole column per invocation (5.6 ms vs ~130 us
 * on an RX 580), so the contiguous source goes through the copy kernel and the transposed
 * one through the tiled transpose, each straight into its part of dst. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct concat_push {
  uint32_t ne[4];
  uint32_t a_stride[4];
  uint32_t b_stride[4];
  uint32_t dst_stride[4];
  uint32_t a_offset;
  uint32_t b_offset;
  uint32_t dst_offset;
  uint32_t dim;
  uint32_t a_ne_dim;
  uint32_t total;
  uint32_t base_group;
};
VKRT_KERNEL_CONCAT_F32_CHECK_PUSH(struct concat_push);

struct concat_rows_push {
  uint32_t ne0, ne1, ne2;
  uint32_t a_stride[4];
  uint32_t b_stride[4];
  uint32_t dst_stride[4];
  uint32_t a_offset;
  uint32_t b_offset;
  uint32_t dst_offset;
  uint32_t dim;
  uint32_t a_ne_dim;
  uint32_t base_x, base_y, base_z;
};
VKRT_KERNEL_CONCAT_ROWS_F32_CHECK_PUSH(struct concat_rows_push);

#define ROWS_SEGMENT 1024 /* dst dim-0 elements per workgroup in concat_rows.comp */
#define ROWS_MIN_NE0 128

static vkrt_status record_rows(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3], int dim) {
  const struct vkrt_ops_view *dst = &views[0], *a = &views[1], *b = &views[2];
  struct vkrt_ops_binding bind[3] = {vkrt_ops_view_binding(a), vkrt_ops_view_binding(b),
                                     vkrt_ops_view_binding(dst)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(
      dev, cmd, dst->type == VKRT_TYPE_F16 ? VKRT_OPS_CONCAT_ROWS_F16 : VKRT_OPS_CONCAT_ROWS_F32,
      bind, 3, &p);
  if (s != VKRT_OK)
    return s;
  struct concat_rows_push push = {.ne0 = dst->ne[0],
                                  .ne1 = dst->ne[1],
                                  .ne2 = dst->ne[2],
                                  .a_offset = a->offset,
                                  .b_offset = b->offset,
                                  .dst_offset = dst->offset,
                                  .dim = (uint32_t)dim,
                                  .a_ne_dim = a->ne[dim]};
  for (int i = 0; i < 4; i++) {
    push.a_stride[i] = a->stride[i];
    push.b_stride[i] = b->stride[i];
    push.dst_stride[i] = dst->stride[i];
  }
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, (dst->ne[0] + ROWS_SEGMENT - 1) / ROWS_SEGMENT,
                       dst->ne[1], (uint64_t)dst->ne[2] * dst->ne[3]);
  return VKRT_OK;
}

vkrt_status vkrt_concat_record_generic(struct vkrt_device *dev, VkCommandBuffer cmd,
                                       const struct vkrt_ops_view views[3], int dim) {
  const struct vkrt_ops_view *dst = &views[0], *a = &views[1], *b = &views[2];
  if (dst->ne[0] >= ROWS_MIN_NE0)
    return record_rows(dev, cmd, views, dim);
  struct vkrt_ops_binding bind[3] = {vkrt_ops_view_binding(a), vkrt_ops_view_binding(b),
                                     vkrt_ops_view_binding(dst)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(
      dev, cmd, dst->type == VKRT_TYPE_F16 ? VKRT_OPS_CONCAT_F16 : VKRT_OPS_CONCAT_F32, bind, 3, &p);
  if (s != VKRT_OK)
    return s;
  struct concat_push push = {.a_offset = a->offset,
                             .b_offset = b->offset,
                             .dst_offset = dst->offset,
                             .dim = (uint32_t)dim,
                             .a_ne_dim = a->ne[dim],
                             .total = (uint32_t)dst->elements};
  for (int i = 0; i < 4; i++) {
    push.ne[i] = dst->ne[i];
    push.a_stride[i] = a->stride[i];
    push.b_stride[i] = b->stride[i];
    push.dst_stride[i] = dst->stride[i];
  }
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (dst->elements + 255) / 256);
  return VKRT_OK;
}

vkrt_status vkrt_concat_record_fast(struct vkrt_device *dev, VkCommandBuffer cmd,
                                    const struct vkrt_ops_view views[3], int dim) {
  const char *why_not = NULL;
  int t = vkrt_ops_concat_fast_path_source(views, dim, &why_not);
  if (!t)
    return VKRT_ERROR_UNAVAILABLE; /* quiet: the caller falls back to the generic kernel */
  bool f16 = views[0].type == VKRT_TYPE_F16;
  enum vkrt_ops_kernel transpose = f16 ? VKRT_OPS_TRANSPOSE_F16 : VKRT_OPS_TRANSPOSE_F32;
  enum vkrt_ops_kernel copy = f16 ? VKRT_OPS_COPY_F16_F16 : VKRT_OPS_COPY_F32_F32;
  /* Both kernels must be there before anything is recorded: a half-recorded fast path
   * cannot fall back. */
  if (!vkrt_ops_kernel_usable(dev, transpose) || !vkrt_ops_kernel_usable(dev, copy) ||
      !vkrt_ops_kernel_usable(dev, VKRT_OPS_COPY_VEC4))
    return VKRT_ERROR_UNAVAILABLE;
  const struct vkrt_ops_view *dst = &views[0], *tr = &views[t], *co = &views[3 - t];
  /* dst sub-regions along dim 0: a at element 0, b at a.ne[0]. Offsets stay inside the
   * dst binding, so the 32-bit offset limits of the views hold for the parts. */
  uint32_t tr_start = t == 1 ? 0 : views[1].ne[0];
  uint32_t co_start = t == 1 ? views[1].ne[0] : 0;

  struct vkrt_ops_view co_dst = *dst;
  co_dst.offset = dst->offset + co_start * dst->stride[0];
  co_dst.ne[0] = co->ne[0];
  co_dst.contiguous = co->ne[0] == dst->ne[0];
  co_dst.elements = co->elements;
  co_dst.lo = dst->lo + (uint64_t)co_start * dst->type_size;

  /* The transposed source read as its storage order: T[i1, i0] with dim 0 innermost. */
  struct vkrt_ops_view tr_src = *tr;
  tr_src.ne[0] = tr->ne[1], tr_src.ne[1] = tr->ne[0];
  tr_src.stride[0] = tr->stride[1], tr_src.stride[1] = tr->stride[0];
  struct vkrt_ops_view tr_dst = *dst;
  tr_dst.offset = dst->offset + tr_start * dst->stride[0];
  tr_dst.ne[0] = tr->ne[0];
  tr_dst.contiguous = false;
  tr_dst.elements = tr->elements;

  vkrt_status s = vkrt_copy_record(dev, cmd, &co_dst, co);
  if (s == VKRT_OK)
    s = vkrt_transpose_record(dev, cmd, &tr_dst, &tr_src);
  return s;
}

static bool stored_transposed(const struct vkrt_ops_view *v) {
  return v->ne[0] > 1 && v->ne[1] > 1 && v->stride[1] == 1 && v->stride[0] != 1;
}

/* Any other concat with a source stored transposed (both sources, or dims 1..3): one copy
 * per source into its part of dst, each choosing its kernel from its layout (the tiled
 * transpose for a transposed source where the device prefers it, 16-byte rows for a
 * dense one). UNAVAILABLE when not eligible. */
static vkrt_status record_split(struct vkrt_device *dev, VkCommandBuffer cmd,
                                const struct vkrt_ops_view views[3], int dim) {
  const struct vkrt_ops_view *dst = &views[0], *a = &views[1], *b = &views[2];
  if (!dev->ops->copy_transposed_tiled || (!stored_transposed(a) && !stored_transposed(b)) ||
      dst->stride[0] != 1)
    return VKRT_ERROR_UNAVAILABLE;
  struct vkrt_ops_view da = *dst, db = *dst;
  da.ne[dim] = a->ne[dim];
  db.ne[dim] = b->ne[dim];
  db.offset = dst->offset + a->ne[dim] * dst->stride[dim];
  da.elements = a->elements;
  db.elements = b->elements;
  da.contiguous = db.contiguous = false;
  vkrt_status s = vkrt_copy_record(dev, cmd, &da, a);
  return s == VKRT_OK ? vkrt_copy_record(dev, cmd, &db, b) : s;
}

vkrt_status vkrt_concat_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3], int dim) {
  if (IS_ENABLED(CONFIG_VKRT_CONCAT_TRANSPOSED_FAST_PATH) &&
      !vkrt_ops_forces(dev)->concat_generic) {
    vkrt_status s = vkrt_concat_record_fast(dev, cmd, views, dim);
    if (s == VKRT_OK)
      vkrt_ops_count(dev, concat_fast, 1);
    if (s != VKRT_ERROR_UNAVAILABLE)
      return s;
    s = record_split(dev, cmd, views, dim);
    if (s == VKRT_OK)
      vkrt_ops_count(dev, concat_split, 1);
    if (s != VKRT_ERROR_UNAVAILABLE)
      return s;
  }
  vkrt_status s = vkrt_concat_record_generic(dev, cmd, views, dim);
  if (s == VKRT_OK)
    vkrt_ops_count(dev, concat_generic, 1);
  return s;
}
