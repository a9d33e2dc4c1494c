/* The tiled matmul with K in pieces (vkrt_matmul_split_k plans how many): each piece's
 * workgroups write their partial sums into a scratch made at open, then the reduce kernel adds
 * the pieces (and dst itself for vkrt_op_matmul_add) into dst. Each step is its own piece of
 * the stream, so the hazards on the scratch (the previous call's reduce still reading it) get
 * their barrier like any buffer's. */
#include "ops/ops.h"
#include "ops/reduce.h"

vkrt_status vkrt_matmul_split_k_open(struct vkrt_device *dev) {
  struct vkrt_ops_state *ops = dev->ops;
  ops->matmul_split_k = NULL;
  uint64_t size = (uint64_t)CONFIG_VKRT_MATMUL_SPLIT_K_SCRATCH_KB * 1024;
  bool plans = false; /* a tile this device may split (the lab may force any) */
  for (int p = 0; p < 2; p++)
    for (int i = 0; i < VKRT_MATMUL_SIZES; i++)
      plans = plans || ops->matmul.tile[p][i].per_unit;
  if (!size || !(plans || IS_ENABLED(CONFIG_VKRT_LAB)))
    return VKRT_OK;
  return vkrt_ops_scratch_create(dev, size, &ops->matmul_split_k);
}

void vkrt_matmul_split_k_close(struct vkrt_device *dev) {
  vkrt_ops_scratch_destroy(&dev->ops->matmul_split_k);
}

uint32_t vkrt_matmul_split_k_take(struct vkrt_device *dev, const struct vkrt_matmul_tile *t,
                                  const struct vkrt_ops_view *d, uint32_t K, uint64_t groups,
                                  bool accumulate, uint32_t *k_chunk) {
  const struct vkrt_ops_state *ops = dev->ops;
  *k_chunk = K;
  /* the reduce adds dense ranges: dst dense f32, and dst itself one of its inputs when the
   * product is added to it */
  uint32_t most = accumulate ? VKRT_REDUCE_MAX_INPUTS - 1 : VKRT_REDUCE_MAX_INPUTS;
  uint64_t piece = d->elements * 4;
  if (!ops->matmul_split_k || !d->contiguous || d->type != VKRT_TYPE_F32 || !piece)
    return 1;
  most = (uint32_t)VKRT_MIN(most, ops->matmul_split_k->size / piece);
  uint32_t force = vkrt_ops_forces(dev)->matmul_split_k;
  if (force) { /* the lab's count, in pieces of whole steps */
    uint32_t pieces;
    *k_chunk = vkrt_matmul_split_k_chunk(K, t->bk, VKRT_MIN(force, most), &pieces);
    return pieces;
  }
  return most > 1 ? vkrt_matmul_split_k(dev->caps.compute_units, t, K, groups, most, k_chunk) : 1;
}

struct vkrt_ops_view vkrt_matmul_split_k_view(struct vkrt_device *dev,
                                              const struct vkrt_ops_view *d, uint32_t splits) {
  return vkrt_ops_scratch_view(dev->ops->matmul_split_k, d->ne, VKRT_TYPE_F32, 4, splits);
}

vkrt_status vkrt_matmul_split_k_reduce(struct vkrt_device *dev, const struct vkrt_ops_view *d,
                                       uint32_t splits, bool accumulate) {
  struct vkrt_buffer *scratch = dev->ops->matmul_split_k;
  uint64_t piece = d->elements * 4;
  struct vkrt_stream_access a[2] = {{d->buffer, d->lo, d->hi, true},
                                    {scratch, 0, piece * splits, false}};
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_ops_begin(dev, a, 2, &cmd);
  if (s != VKRT_OK)
    return s;
  VkBuffer srcs[VKRT_REDUCE_MAX_INPUTS];
  uint64_t offsets[VKRT_REDUCE_MAX_INPUTS];
  uint32_t n = 0;
  if (accumulate) /* in place: dst + the pieces */
    srcs[n] = d->buffer->handle, offsets[n++] = d->lo;
  for (uint32_t i = 0; i < splits; i++)
    srcs[n] = scratch->handle, offsets[n++] = piece * i;
  return vkrt_reduce_record(dev, cmd, VKRT_TYPE_F32, d->elements, d->buffer->handle, d->lo,
                            srcs, offsets, n);
}
