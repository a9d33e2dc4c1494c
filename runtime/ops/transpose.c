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
#if IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE_LAB) /* forcing-only: with the lab */
VKRT_KERNEL_TRANSPOSE_X2_F32_CHECK_PUSH(struct transpose_push);
#endif


/* The pair kernels move two elements at a time: dims 0 dense, every pair aligned. */
static bool pairs_fit(const struct vkrt_ops_view *v) {
  if (v->ne[0] < 2 || v->ne[1] < 2 || v->stride[0] != 1 || v->bind_offset % (2 * v->type_size))
    return false;
  return !(v->offset % 2 || v->stride[1] % 2 || v->stride[2] % 2 || v->stride[3] % 2);
}

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
  enum vkrt_ops_kernel k = VKRT_OPS_TRANSPOSE_F32;
  bool f16 = src->type == VKRT_TYPE_F16;
  enum vkrt_ops_kernel pair_kernel = f16 ? VKRT_OPS_TRANSPOSE_X2_F16 : VKRT_OPS_TRANSPOSE_X2_F32;
  /* Pairs pay for f16 (H200: 2.46 vs 2.30 TB/s); for f32 they lose to the one-element
   * tiles (1.9 vs 3.5 TB/s), so f32 takes them only when asked (vkrt-bench). A persistent
   * variant that loads its next tile during the writes measured no better (0.83 of the
   * copy kernel) and was dropped. */
  const struct vkrt_ops_forces *force = vkrt_ops_forces(dev);
  int variant = force->transpose_variant;
  bool pairs = !force->transpose_scalar && (f16 ? variant == 0 : variant == 2) &&
               pairs_fit(src) && pairs_fit(dst) && vkrt_ops_kernel_usable(dev, pair_kernel);
  if (pairs)
    k = pair_kernel;
  else if (f16)
    k = VKRT_OPS_TRANSPOSE_F16;
  else if (variant == 1)
    k = VKRT_OPS_TRANSPOSE_F32_PLAIN;
  vkrt_status s = vkrt_ops_pipeline(dev, k, &p);
  if (s == VKRT_OK && pairs)
    vkrt_ops_count(dev, transpose_x2, 1);
  if (s != VKRT_OK)
    return s;
  /* word and 16-bit views of the same ranges (the pair kernel uses all four) */
  struct vkrt_ops_binding b[4] = {vkrt_ops_view_binding(src), vkrt_ops_view_binding(dst),
                                  vkrt_ops_view_binding(src), vkrt_ops_view_binding(dst)};
  s = vkrt_ops_bind(dev, cmd, p, b, pairs ? 4 : 2);
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
  /* square tiles: local_size_x elements (transpose.comp), 64 for the pair kernels */
  uint32_t tile = pairs ? 64 : p->local_size[0];
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, (src->ne[0] + tile - 1) / tile,
                       (src->ne[1] + tile - 1) / tile, (uint64_t)src->ne[2] * src->ne[3]);
  return VKRT_OK;
}
