/* x rounded to f16 once per call before the cooperative-matrix tiles read it: the tiles
 * then load 16-byte units of 8 halves with nothing to convert, half the bytes per k step of
 * f32 x (kernels/matmul.comp X16). The rounding is the copy kernel's f32 -> f16 into a
 * scratch buffer made at open, recorded as its own piece of the stream, so the hazards on
 * the scratch (the previous call's tiles still reading it) get their barrier like any
 * buffer's. The scratch of quantized w dequantized to f16 (w16, matmul.c) is made here too. */
#include "ops/ops.h"

vkrt_status vkrt_matmul_x16_open(struct vkrt_device *dev) {
  struct vkrt_ops_state *ops = dev->ops;
  ops->matmul_x16 = ops->matmul_w16 = NULL;
  vkrt_matmul_w16_min_m_init(ops->matmul_w16_min_m);
  ops->matmul_w16_pieces = VKRT_MATMUL_W16_PIECES;
  uint64_t size = (uint64_t)CONFIG_VKRT_MATMUL_X16_SCRATCH_KB * 1024;
  uint64_t w_size = (uint64_t)CONFIG_VKRT_MATMUL_W16_SCRATCH_KB * 1024;
  if (!ops->matmul.coopmat)
    return VKRT_OK; /* the tiles convert x as they load it */
  vkrt_status s = size ? vkrt_ops_scratch_create(dev, size, &ops->matmul_x16) : VKRT_OK;
  if (s == VKRT_OK && w_size)
    s = vkrt_ops_scratch_create(dev, w_size, &ops->matmul_w16);
  return s;
}

void vkrt_matmul_x16_close(struct vkrt_device *dev) {
  vkrt_ops_scratch_destroy(&dev->ops->matmul_x16);
  vkrt_ops_scratch_destroy(&dev->ops->matmul_w16);
}

const char *vkrt_matmul_x16_refusal(const struct vkrt_device *dev, const struct vkrt_ops_view *x) {
  const struct vkrt_ops_state *ops = dev->ops;
  if (!ops->matmul_x16)
    return "no scratch on this device (CONFIG_VKRT_MATMUL_X16_SCRATCH_KB = 0, or no "
           "cooperative matrices)";
  if (vkrt_ops_forces(dev)->matmul_x_f32)
    return "x kept f32 (lab)";
  if (x->ne[0] % 8)
    return "K not a multiple of 8";
  if (x->stride[0] != 1 && x->ne[0] > 1)
    return "x not dense along K";
  if (x->elements * 2 > ops->matmul_x16->size)
    return "x larger than the scratch (CONFIG_VKRT_MATMUL_X16_SCRATCH_KB)";
  if (!vkrt_ops_kernel_usable(dev, VKRT_OPS_COPY_ROWS_F32_F16) ||
      !vkrt_ops_kernel_usable(dev, VKRT_OPS_COPY_F32_F16))
    return "f32 -> f16 copy kernels unusable on this device";
  return NULL;
}

vkrt_status vkrt_matmul_x16_convert(struct vkrt_device *dev, const struct vkrt_ops_view *x,
                                    struct vkrt_ops_view *out) {
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_ops_scratch_begin_f16(dev, dev->ops->matmul_x16, x, out, &cmd);
  if (s != VKRT_OK)
    return s;
  return vkrt_copy_record(dev, cmd, out, x);
}
