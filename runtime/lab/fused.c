/* vkrt/vkrt_lab.h: the fused gate/up experiment. SwiGLU's gate and up products and the
 * silu(g) u between them in one dispatch (the q4_K stream kernel, its rows taken in gate/up
 * pairs), so a decode token has one dependent step fewer per layer than matmul + swiglu. */
#include "lab/lab.h"

vkrt_status vkrt_lab_matmul_swiglu(const vkrt_tensor *dst, const vkrt_tensor *w,
                                   const vkrt_tensor *x) {
  static const char *const op = "vkrt_lab_matmul_swiglu";
  if (!dst || !w || !x || !dst->buffer)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = dst->buffer->dev;
  vkrt_status s = vkrt_ops_open(dev);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_ops_limits *lim = &dev->ops->limits;
  struct vkrt_ops_view v[3];
  char why[VKRT_ERROR_MESSAGE_SIZE];
  if (!vkrt_ops_view_init(&v[0], lim, op, "dst", dst, true, why, sizeof(why)) ||
      !vkrt_ops_view_init(&v[1], lim, op, "w", w, false, why, sizeof(why)) ||
      !vkrt_ops_view_init(&v[2], lim, op, "x", x, false, why, sizeof(why)))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "%s", why);
  if (v[1].buffer->dev != dev || v[2].buffer->dev != dev)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "%s: dst, w and x must be on one device", op);
  if (dst->type != VKRT_TYPE_F32 || x->type != VKRT_TYPE_F32 || w->ne[0] != x->ne[0] ||
      w->ne[1] % 2 || dst->ne[0] * 2 != w->ne[1] || x->ne[1] != 1 || dst->ne[1] != 1 ||
      w->ne[2] != 1 || w->ne[3] != 1 || x->ne[2] != 1 || x->ne[3] != 1 || dst->ne[2] != 1 ||
      dst->ne[3] != 1)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "%s: w {K, 2F} (gate rows, then up rows), x {K, 1} f32 and dst {F, 1} f32, "
                      "not w {%lld, %lld}, x {%lld, %lld}, dst {%lld, %lld}", op,
                      (long long)w->ne[0], (long long)w->ne[1], (long long)x->ne[0],
                      (long long)x->ne[1], (long long)dst->ne[0], (long long)dst->ne[1]);
  VkCommandBuffer cmd;
  s = vkrt_ops_begin_views(dev, v, 3, &cmd);
  return s != VKRT_OK ? s : vkrt_quant_swiglu_record(dev, cmd, v);
}
