/* vkrt_op_get_rows: the embedding lookup, rows of an f32, f16, q8_0, q4_K or q6_K table
 * picked by device-side ids into f32 (kernels/dequant.comp built with GET_ROWS: the
 * dequantizing copy's decoders, with the row index read from ids). One invocation per
 * element. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct get_rows_push {
  uint32_t ne[4];
  uint32_t src_stride[4]; /* bytes */
  uint32_t dst_stride[4]; /* elements */
  uint32_t src_offset;    /* bytes */
  uint32_t dst_offset;
  uint32_t total;
  uint32_t ids_offset, ids_stride, n_rows;
  uint32_t base_group;
};
VKRT_KERNEL_GET_ROWS_F32_CHECK_PUSH(struct get_rows_push);

static const enum vkrt_ops_kernel get_rows_kernels[VKRT_TYPE_COUNT] = {
  [VKRT_TYPE_F32] = VKRT_OPS_GET_ROWS_F32,
  [VKRT_TYPE_F16] = VKRT_OPS_GET_ROWS_F16,
  [VKRT_TYPE_Q8_0] = VKRT_OPS_GET_ROWS_Q8_0,
  [VKRT_TYPE_Q4_K] = VKRT_OPS_GET_ROWS_Q4_K,
  [VKRT_TYPE_I32] = VKRT_OPS_KERNEL_COUNT, /* refused by vkrt_ops_check_get_rows */
  [VKRT_TYPE_Q6_K] = VKRT_OPS_GET_ROWS_Q6_K,
};

vkrt_status vkrt_get_rows_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                 const struct vkrt_ops_view views[3]) {
  const struct vkrt_ops_view *d = &views[0], *ids = &views[2];
  struct vkrt_ops_view table = views[1], *t = &table;
  enum vkrt_ops_kernel k = get_rows_kernels[t->type];
  if (k == VKRT_OPS_KERNEL_COUNT)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL, "vkrt_op_get_rows: %s table",
                      vkrt_type_str(t->type));
  /* The kernel reads the table in 32-bit words and addresses it in bytes, whatever its type. */
  uint32_t unit = t->block > 1 ? 1 : t->type_size;
  if (!vkrt_ops_widen_words(dev, t))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "vkrt_op_get_rows: the %s table ends 2 bytes short of a 4-byte word at the "
                      "end of its buffer (the kernel reads 32-bit words; pad the buffer)",
                      vkrt_type_str(t->type));
  struct vkrt_ops_binding b[3] = {vkrt_ops_view_binding(t), vkrt_ops_view_binding(d),
                                  vkrt_ops_view_binding(ids)};
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_use(dev, cmd, k, b, 3, &p);
  if (s != VKRT_OK)
    return s;
  struct get_rows_push push = {.ne = {d->ne[0], d->ne[1], 1, 1},
                               .src_stride = {t->stride[0] * unit, t->stride[1] * unit, 0, 0},
                               .dst_stride = {d->stride[0], d->stride[1], 0, 0},
                               .src_offset = t->offset, /* bytes once widened */
                               .dst_offset = d->offset,
                               .total = (uint32_t)d->elements,
                               .ids_offset = ids->offset,
                               .ids_stride = ids->stride[0],
                               .n_rows = t->ne[1]};
  vkrt_ops_dispatch_linear(dev, cmd, p, &push, (d->elements + 255) / 256);
  return VKRT_OK;
}
