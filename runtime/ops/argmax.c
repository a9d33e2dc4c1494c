/* vkrt_op_argmax: the index of each row's largest element (kernels/argmax.comp). A long row
 * (a 128K vocabulary) is cut into chunks of ARGMAX_CHUNK, one workgroup each, whose
 * (value, index) results meet in the device's scratch buffer and are combined by a second
 * dispatch, one workgroup per row; short rows (or more rows than the scratch holds
 * partials for) take one workgroup per row and write dst directly. vkrt_op_sample is the
 * same passes over x / T plus Gumbel noise from the row's key (the kernel built with
 * SAMPLE): the largest of those is a draw from softmax(x / T). */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct argmax_push {
  uint32_t n, chunk, splits, mode;
  uint32_t x_offset, x_stride0, x_stride1;
  uint32_t d_offset, d_stride0;
  float inv_t;
  uint32_t k_offset, k_stride0, k_stride1;
  uint32_t base_x, base_y, base_z; /* last: vkrt_ops_dispatch_3d fills them */
};
VKRT_KERNEL_ARGMAX_F32_CHECK_PUSH(struct argmax_push);
VKRT_KERNEL_SAMPLE_F32_CHECK_PUSH(struct argmax_push);

/* Elements per workgroup of the split pass: 4 per invocation, so a 128256-entry row runs
 * on 126 workgroups (every SM of an H200) rather than one. */
#define ARGMAX_CHUNK 1024u
enum { ARGMAX_PARTS = 0, ARGMAX_COMBINE = 1, ARGMAX_DIRECT = 2 };

vkrt_status vkrt_argmax_open(struct vkrt_device *dev) {
  return vkrt_buffer_create_internal(dev, VKRT_OPS_SCRATCH_PARTIALS * 8ull, 0, 0,
                                     &dev->ops->scratch);
}

void vkrt_argmax_close(struct vkrt_device *dev) {
  vkrt_buffer_destroy(dev->ops->scratch);
  dev->ops->scratch = NULL;
}

vkrt_status vkrt_argmax_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                               const struct vkrt_ops_view views[3], float temperature) {
  struct vkrt_ops_state *ops = dev->ops;
  const struct vkrt_ops_view *d = &views[0], *x = &views[1], *key = &views[2];
  bool sample = temperature > 0; /* vkrt_op_sample: views[2] is the key */
  uint32_t n = x->ne[0], rows = x->ne[1];
  uint32_t splits = (n + ARGMAX_CHUNK - 1) / ARGMAX_CHUNK;
  if (splits > VKRT_OPS_SCRATCH_PARTIALS / rows)
    splits = VKRT_MAX(VKRT_OPS_SCRATCH_PARTIALS / rows, 1u);
  uint32_t chunk = (n + splits - 1) / splits;
  struct vkrt_ops_binding b[4] = {vkrt_ops_view_binding(x),
                                  {ops->scratch->handle, 0, ops->scratch->size},
                                  vkrt_ops_view_binding(d)};
  uint32_t bindings = 3;
  if (sample)
    b[bindings++] = vkrt_ops_view_binding(key);
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, sample ? VKRT_OPS_SAMPLE_F32 : VKRT_OPS_ARGMAX_F32, &p);
  if (s != VKRT_OK)
    return s;
  struct argmax_push push = {.n = n, .chunk = chunk, .splits = splits,
                             .mode = splits > 1 ? ARGMAX_PARTS : ARGMAX_DIRECT,
                             .x_offset = x->offset, .x_stride0 = x->stride[0],
                             .x_stride1 = x->stride[1],
                             .d_offset = d->offset, .d_stride0 = d->stride[0],
                             .inv_t = sample ? 1.0f / temperature : 1.0f};
  if (sample)
    push.k_offset = key->offset, push.k_stride0 = key->stride[0], push.k_stride1 = key->stride[1];
  uint64_t parts = (uint64_t)splits * rows * 8;
  if (splits > 1) {
    /* the partials are written: ordered after an earlier argmax's combine read them */
    struct vkrt_stream_access w = {ops->scratch, 0, parts, true};
    s = vkrt_ops_begin(dev, &w, 1, &cmd);
    if (s != VKRT_OK)
      return s;
  }
  s = vkrt_ops_bind(dev, cmd, p, b, bindings);
  if (s != VKRT_OK)
    return s;
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, splits, rows, 1);
  if (sample)
    vkrt_ops_count(dev, sample_draws, rows);
  if (splits == 1)
    return VKRT_OK;
  vkrt_ops_count(dev, argmax_split, 1);
  /* the combine reads the partials (a barrier after the split pass) and writes dst */
  struct vkrt_stream_access c[2] = {{d->buffer, d->lo, d->hi, true}, {ops->scratch, 0, parts, false}};
  s = vkrt_ops_begin(dev, c, 2, &cmd);
  if (s != VKRT_OK)
    return s;
  s = vkrt_ops_bind(dev, cmd, p, b, bindings);
  if (s != VKRT_OK)
    return s;
  push.mode = ARGMAX_COMBINE;
  vkrt_ops_dispatch_3d(dev, cmd, p, &push, 1, rows, 1);
  return VKRT_OK;
}
