/* The reduce kernel: vkrt_op_add and vkrt_reduce_record (the collectives' sum). */
#include "ops/reduce.h"

#include <string.h>

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

/* The bindings and push constants of the dispatches of plan pass `k` over units
 * [done, done + n) (n within one binding), for emit(). */
static void pass_bindings(const struct vkrt_reduce_plan *plan, uint32_t k, uint64_t done,
                          uint64_t n, struct vkrt_ops_binding *b, struct reduce_push *push) {
  const uint64_t unit = plan->pass[k].unit, skip = plan->pass[k].skip;
  *push = (struct reduce_push){.src_count = plan->src_count, .count = (uint32_t)n};
  for (uint32_t i = 0; i <= VKRT_REDUCE_MAX_INPUTS; i++) {
    bool is_dst = i == VKRT_REDUCE_MAX_INPUTS;
    uint32_t from = (is_dst || i < plan->src_count) ? i : 0; /* unused inputs alias input 0 */
    uint64_t lo = (is_dst ? plan->dst_offset : plan->src_offsets[from]) + skip + done * unit;
    b[i].buffer = is_dst ? plan->dst : plan->srcs[from];
    b[i].offset = vkrt_align_down(lo, plan->align);
    b[i].range = lo + n * unit - b[i].offset;
    uint32_t rel = (uint32_t)((lo - b[i].offset) / unit); /* exact: lo is unit-aligned */
    if (is_dst)
      push->dst_offset = rel;
    else
      push->src_offset[i] = rel;
  }
}

/* Records the plan's passes, each in dispatches whose bindings (plus alignment slop) fit
 * maxStorageBufferRange: through the ops' binding (dev given: the stream's bound-pipeline
 * memory, descriptor sets without push descriptors) or, without dev, straight through `vk`
 * with push descriptors (a tail on the submitter thread). */
static vkrt_status emit(const struct vkrt_reduce_plan *plan, struct vkrt_device *dev,
                        const struct vkrt_device_table *vk, VkCommandBuffer cmd) {
  for (uint32_t k = 0; k < plan->passes; k++) {
    const struct vkrt_reduce_pass *pass = &plan->pass[k];
    uint64_t chunk = plan->range > plan->align + pass->unit
                         ? (plan->range - plan->align) / pass->unit : 1;
    chunk = VKRT_MIN(chunk, 1ull << 30); /* linear indices stay far from 2^32 */
    for (uint64_t done = 0; done < pass->units;) {
      uint64_t n = VKRT_MIN(pass->units - done, chunk);
      struct vkrt_ops_binding b[VKRT_REDUCE_MAX_INPUTS + 1];
      struct reduce_push push;
      pass_bindings(plan, k, done, n, b, &push);
      if (dev) {
        vkrt_status s = vkrt_ops_bind(dev, cmd, pass->p, b, VKRT_REDUCE_MAX_INPUTS + 1);
        if (s != VKRT_OK)
          return s;
      } else {
        vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pass->p->pipeline);
        vkrt_ops_push_bindings(vk, cmd, pass->p->layout, b, VKRT_REDUCE_MAX_INPUTS + 1);
      }
      vkrt_ops_dispatch_linear_raw(vk, cmd, pass->p->layout, pass->p->push_size, &push,
                                   (n + 255) / 256, plan->max_groups);
      done += n;
    }
  }
  return VKRT_OK;
}

vkrt_status vkrt_reduce_plan(struct vkrt_device *dev, vkrt_type type, uint64_t count,
                             VkBuffer dst, uint64_t dst_offset, const VkBuffer *srcs,
                             const uint64_t *src_offsets, uint32_t src_count,
                             struct vkrt_reduce_plan *plan) {
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
  memset(plan, 0, sizeof(*plan));
  const struct {
    enum vkrt_ops_kernel kernel;
    uint64_t unit, units, skip;
  } want[2] = {{vec_kernel, unit4, quads, 0},
               {f16 ? VKRT_OPS_REDUCE_F16 : VKRT_OPS_REDUCE_F32, ts, rest, quads * unit4}};
  for (uint32_t k = 0; k < 2; k++) {
    if (!want[k].units)
      continue;
    struct vkrt_reduce_pass *pass = &plan->pass[plan->passes++];
    vkrt_status s = vkrt_ops_pipeline(dev, want[k].kernel, &pass->p);
    if (s != VKRT_OK)
      return s;
    pass->unit = want[k].unit;
    pass->units = want[k].units;
    pass->skip = want[k].skip;
  }
  if (quads)
    vkrt_ops_count(dev, reduce_vec4, 1);
  struct vkrt_ops_state *ops = dev->ops;
  plan->push_descriptor = ops->push_descriptor;
  plan->align = ops->limits.min_storage_buffer_offset_alignment;
  plan->range = ops->limits.max_storage_buffer_range;
  plan->max_groups[0] = ops->max_groups[0];
  plan->max_groups[1] = ops->max_groups[1];
  plan->dst = dst;
  plan->dst_offset = dst_offset;
  plan->src_count = src_count;
  for (uint32_t i = 0; i < src_count; i++) {
    plan->srcs[i] = srcs[i];
    plan->src_offsets[i] = src_offsets[i];
  }
  return VKRT_OK;
}

vkrt_status vkrt_reduce_emit(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct vkrt_reduce_plan *plan) {
  return emit(plan, dev, &dev->vk, cmd);
}

void vkrt_reduce_emit_raw(const struct vkrt_device_table *vk, VkCommandBuffer cmd,
                          const void *plan) {
  (void)emit(plan, NULL, vk, cmd); /* without a device: nothing that can fail */
}

vkrt_status vkrt_reduce_record(struct vkrt_device *dev, VkCommandBuffer cmd, vkrt_type type,
                               uint64_t count, VkBuffer dst, uint64_t dst_offset,
                               const VkBuffer *srcs, const uint64_t *src_offsets,
                               uint32_t src_count) {
  struct vkrt_reduce_plan plan;
  vkrt_status s = vkrt_reduce_plan(dev, type, count, dst, dst_offset, srcs, src_offsets,
                                   src_count, &plan);
  return s != VKRT_OK ? s : vkrt_reduce_emit(dev, cmd, &plan);
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
