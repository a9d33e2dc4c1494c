/* vkrt_op_top_k: each row's k largest elements and their indices (kernels/top_k.comp). A row
 * is cut into slices of VKRT_OPS_TOP_K_SORT elements, one workgroup each, that sort their
 * slice in shared memory and keep k keys; then passes of workgroups merge as many lists as
 * VKRT_OPS_TOP_K_SORT keys hold, until one list is left for a row, which that pass writes to
 * values and ids. The lists live in a scratch buffer made at open, the passes reading one of
 * its two regions and writing the other; rows whose lists do not fit it at once run in
 * rounds. */
#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct top_k_push {
  uint32_t n, k, per, mode, last;
  uint32_t x_offset, x_stride0, x_stride1;
  uint32_t in_base, in_row;
  uint32_t out_base, out_row;
  uint32_t v_offset, v_stride0, v_stride1;
  uint32_t i_offset, i_stride0, i_stride1;
  uint32_t base_x, base_y, base_z; /* last: vkrt_ops_dispatch_3d fills them */
};
VKRT_KERNEL_TOP_K_F32_CHECK_PUSH(struct top_k_push);

vkrt_status vkrt_top_k_open(struct vkrt_device *dev) {
  return vkrt_buffer_create_internal(dev, VKRT_OPS_TOP_K_KEYS * 8ull, 0, 0,
                                     &dev->ops->top_k_scratch);
}

void vkrt_top_k_close(struct vkrt_device *dev) {
  vkrt_buffer_destroy(dev->ops->top_k_scratch);
  dev->ops->top_k_scratch = NULL;
}

vkrt_status vkrt_top_k_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                              const struct vkrt_ops_view views[3]) {
  const struct vkrt_ops_view *val = &views[0], *ids = &views[1], *x = &views[2];
  struct vkrt_buffer *scratch = dev->ops->top_k_scratch;
  const uint32_t n = x->ne[0], rows = x->ne[1], k = val->ne[0];
  const uint32_t lists = vkrt_ops_top_k_lists(n), per_merge = VKRT_OPS_TOP_K_SORT / k;
  const uint32_t round = VKRT_OPS_TOP_K_KEYS / vkrt_ops_top_k_row_keys(n, k);
  /* region a: the first pass's lists, lists * k keys a row; region b after it, for the
   * lists of the first merge (fewer), which later merges write to a again */
  const uint32_t row_a = lists * k, row_b = (lists + per_merge - 1) / per_merge * k;
  const uint32_t base_b = round * row_a;
  const uint64_t used = ((uint64_t)base_b + (uint64_t)round * row_b) * 8;
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, VKRT_OPS_TOP_K_F32, &p);
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_binding b[4] = {vkrt_ops_view_binding(x),
                                  {scratch->handle, 0, scratch->size},
                                  vkrt_ops_view_binding(val), vkrt_ops_view_binding(ids)};
  struct top_k_push push = {.k = k, .x_stride0 = x->stride[0], .x_stride1 = x->stride[1],
                            .v_stride0 = val->stride[0], .v_stride1 = val->stride[1],
                            .i_stride0 = ids->stride[0], .i_stride1 = ids->stride[1]};
  for (uint32_t r0 = 0; r0 < rows; r0 += round) {
    const uint32_t nr = VKRT_MIN(round, rows - r0);
    push.x_offset = x->offset + r0 * x->stride[1];
    push.v_offset = val->offset + r0 * val->stride[1];
    push.i_offset = ids->offset + r0 * ids->stride[1];
    /* count lists of a row in region `in` (0: a, 1: b); the first pass reads x */
    uint32_t count = 0, in = 0;
    for (bool first = true; first || count > 1; first = false) {
      const uint32_t groups = first ? lists : (count + per_merge - 1) / per_merge;
      const uint32_t out = first ? 0 : !in;
      push.n = first ? n : count;
      push.per = first ? VKRT_OPS_TOP_K_SORT : per_merge;
      push.mode = first ? 0 : 1;
      push.last = groups == 1;
      push.in_base = in ? base_b : 0, push.in_row = in ? row_b : row_a;
      push.out_base = out ? base_b : 0, push.out_row = out ? row_b : row_a;
      /* the lists written after earlier passes (and an earlier top-k) read them; the last
       * pass writes values and ids */
      struct vkrt_stream_access a[4] = {{scratch, 0, used, true},
                                        {x->buffer, x->lo, x->hi, false},
                                        {val->buffer, val->lo, val->hi, true},
                                        {ids->buffer, ids->lo, ids->hi, true}};
      s = vkrt_ops_begin(dev, a, 4, &cmd);
      if (s == VKRT_OK)
        s = vkrt_ops_bind(dev, cmd, p, b, 4);
      if (s != VKRT_OK)
        return s;
      vkrt_ops_dispatch_3d(dev, cmd, p, &push, groups, nr, 1);
      vkrt_ops_count(dev, top_k_passes, 1);
      count = groups;
      in = out;
    }
  }
  return VKRT_OK;
}
