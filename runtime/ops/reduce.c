/* The reduce kernel: vkrt_op_add and vkrt_reduce_record (the collectives' sum). */
#include "ops/reduce.h"

#include "ops/ops.h"
#include "vkrt_kernels/registry.h"

struct reduce_push {
  uint32_t src_offset[8];
  uint32_t dst_offset;
  uint32_t src_count;
  uint32_t count;
  uint32_t base_group;
};
VKRT_KERNEL_REDUCE_F32_CHECK_PUSH(struct reduce_push);
VKRT_KERNEL_REDUCE_VEC4_F32_CHECK_PUSH(struct reduce_push);

vkrt_status vkrt_reduce_prepare(struct vkrt_device *dev, vkrt_type type) {
  if (type != VKRT_TYPE_F32 && type != VKRT_TYPE_F16)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: reduce: invalid type %d", dev->index, (int)type);
  const struct vkrt_ops_pipeline *p;
  return vkrt_ops_pipeline(dev, type == VKRT_TYPE_F16 ? VKRT_OPS_REDUCE_F16 : VKRT_OPS_REDUCE_F32,
                           &p);
}

/* One kernel over `count` units of `unit` bytes, starting `skip` bytes into every
 * operand, in passes whose bindings (plus alignment slop) fit maxStorageBufferRange. */
static vkrt_status reduce_pass(struct vkrt_device *dev, VkCommandBuffer cmd,
                               enum vkrt_ops_kernel kernel, uint64_t unit, uint64_t count,
                               VkBuffer dst, uint64_t dst_offset, const VkBuffer *srcs,
                               const uint64_t *src_offsets, uint32_t src_count, uint64_t skip) {
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, kernel, &p);
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_state *ops = dev->ops;
  uint64_t align = ops->limits.min_storage_buffer_offset_alignment;
  uint64_t range = ops->limits.max_storage_buffer_range;
  uint64_t chunk = range > align + unit ? (range - align) / unit : 1;
  chunk = VKRT_MIN(chunk, 1ull << 30); /* linear indices stay far from 2^32 */
  for (uint64_t done = 0; done < count;) {
    uint64_t n = VKRT_MIN(count - done, chunk);
    struct vkrt_ops_binding b[VKRT_REDUCE_MAX_INPUTS + 1];
    struct reduce_push push = {.src_count = src_count, .count = (uint32_t)n};
    for (uint32_t i = 0; i <= VKRT_REDUCE_MAX_INPUTS; i++) {
      bool is_dst = i == VKRT_REDUCE_MAX_INPUTS;
      uint32_t from = (is_dst || i < src_count) ? i : 0; /* unused inputs alias input 0 */
      uint64_t lo = (is_dst ? dst_offset : src_offsets[from]) + skip + done * unit;
      b[i].buffer = is_dst ? dst : srcs[from];
      b[i].offset = vkrt_align_down(lo, align);
      b[i].range = lo + n * unit - b[i].offset;
      uint32_t rel = (uint32_t)((lo - b[i].offset) / unit); /* exact: lo is unit-aligned */
      if (is_dst)
        push.dst_offset = rel;
      else
        push.src_offset[i] = rel;
    }
    s = vkrt_ops_bind(dev, cmd, p, b, VKRT_REDUCE_MAX_INPUTS + 1);
    if (s != VKRT_OK)
      return s;
    vkrt_ops_dispatch_linear(dev, cmd, p, &push, (n + 255) / 256);
    done += n;
  }
  return VKRT_OK;
}

vkrt_status vkrt_reduce_record(struct vkrt_device *dev, VkCommandBuffer cmd, vkrt_type type,
                               uint64_t count, VkBuffer dst, uint64_t dst_offset,
                               const VkBuffer *srcs, const uint64_t *src_offsets,
                               uint32_t src_count) {
  struct vkrt_base *base = &dev->sys->base;
  if (type != VKRT_TYPE_F32 && type != VKRT_TYPE_F16)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "dev%u: reduce: invalid type %d",
                      dev->index, (int)type);
  if (src_count < 1 || src_count > VKRT_REDUCE_MAX_INPUTS || !srcs || !src_offsets)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: reduce: %u sources; 1..%d are supported", dev->index, src_count,
                      VKRT_REDUCE_MAX_INPUTS);
  if (count < 1 || !dst)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: reduce: empty count or no dst buffer", dev->index);
  uint64_t ts = vkrt_type_size(type);
  if (dst_offset % ts)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: reduce: dst offset %llu not aligned to the element size",
                      dev->index, (unsigned long long)dst_offset);
  for (uint32_t i = 0; i < src_count; i++)
    if (!srcs[i] || src_offsets[i] % ts)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                        "dev%u: reduce: source %u has no buffer or an offset not aligned to "
                        "the element size", dev->index, i);
  /* Four elements per invocation where every operand is aligned to four elements (the
   * collectives' slots are); the tail and unaligned operands take the scalar kernel. */
  bool f16 = type == VKRT_TYPE_F16;
  uint64_t unit4 = 4 * ts;
  enum vkrt_ops_kernel vec_kernel = f16 ? VKRT_OPS_REDUCE_VEC4_F16 : VKRT_OPS_REDUCE_VEC4_F32;
  bool vec = count >= 4 && dst_offset % unit4 == 0 && vkrt_ops_kernel_usable(dev, vec_kernel);
  for (uint32_t i = 0; vec && i < src_count; i++)
    vec = src_offsets[i] % unit4 == 0;
  uint64_t quads = vec ? count / 4 : 0, rest = count - quads * 4;
  vkrt_status s = VKRT_OK;
  if (quads)
    vkrt_ops_count(dev, reduce_vec4, 1);
  if (quads)
    s = reduce_pass(dev, cmd, vec_kernel, unit4, quads, dst, dst_offset, srcs, src_offsets,
                    src_count, 0);
  if (s == VKRT_OK && rest)
    s = reduce_pass(dev, cmd, f16 ? VKRT_OPS_REDUCE_F16 : VKRT_OPS_REDUCE_F32, ts, rest, dst,
                    dst_offset, srcs, src_offsets, src_count, quads * unit4);
  return s;
}

vkrt_status vkrt_add_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                            const struct vkrt_ops_view *views, uint32_t count) {
  VkBuffer srcs[VKRT_REDUCE_MAX_INPUTS];
  uint64_t offsets[VKRT_REDUCE_MAX_INPUTS];
  for (uint32_t i = 0; i < count; i++) {
    srcs[i] = views[1 + i].buffer->handle;
    offsets[i] = views[1 + i].lo;
  }
  return vkrt_reduce_record(dev, cmd, views[0].type, views[0].elements,
                            views[0].buffer->handle, views[0].lo, srcs, offsets, count);
}
