/* Internal entry of the reduce kernel (CONFIG_VKRT_KERNEL_REDUCE) for the collectives: it
 * sums raw VkBuffer ranges (e.g. imported host slots that are not vkrt_buffer objects).
 * The public vkrt_op_add goes through the same kernel. Stubs return VKRT_ERROR_UNSUPPORTED
 * when the kernel is compiled out, so callers need no #ifdef. */
#pragma once
#include "device/device.h"

#define VKRT_REDUCE_MAX_INPUTS 8

/* A reduce planned on the recording thread (the checks, the kernels, every operand) and
 * recorded later on any thread: a collective's tail (vkrt_stream_add_tail) that the
 * device's submitter thread records. */
struct vkrt_reduce_pass {
  const struct vkrt_ops_pipeline *p; /* the device's, in place while it is open */
  uint64_t unit, units, skip; /* bytes per invocation, invocations, bytes before the first */
};
struct vkrt_reduce_plan {
  struct vkrt_reduce_pass pass[2]; /* four elements per invocation, then the rest */
  uint32_t passes, src_count, max_groups[2];
  bool push_descriptor;            /* only then may the plan be recorded off the stream */
  uint64_t align, range;           /* the binding offset alignment and range limit */
  VkBuffer dst, srcs[VKRT_REDUCE_MAX_INPUTS];
  uint64_t dst_offset, src_offsets[VKRT_REDUCE_MAX_INPUTS];
};

#if IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE)
/* The checks and kernels of vkrt_reduce_record, nothing recorded. */
vkrt_status vkrt_reduce_plan(struct vkrt_device *dev, vkrt_type type, uint64_t count,
                             VkBuffer dst, uint64_t dst_offset, const VkBuffer *srcs,
                             const uint64_t *src_offsets, uint32_t src_count,
                             struct vkrt_reduce_plan *plan);
/* Records a plan into cmd as vkrt_reduce_record does. */
vkrt_status vkrt_reduce_emit(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct vkrt_reduce_plan *plan);
/* Records a plan (a struct vkrt_reduce_plan whose push_descriptor is true) into cmd through
 * vk: no device or stream state (a struct vkrt_stream_tail's record). */
void vkrt_reduce_emit_raw(const struct vkrt_device_table *vk, VkCommandBuffer cmd,
                          const void *plan);
/* Records dst[i] = srcs[0][i] + ... + srcs[src_count-1][i] for i < count, accumulated in
 * f32; every operand has element type `type` (f32, or f16 with CONFIG_VKRT_TYPE_F16).
 *   - offsets are bytes, multiples of the element size; each [offset, offset + count *
 *     size) must lie inside its buffer (not checked: raw buffers carry no size), and each
 *     buffer needs VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
 *   - dst may be exactly one of the sources (in place); other overlaps are undefined;
 *   - 1 <= src_count <= VKRT_REDUCE_MAX_INPUTS; count >= 1.
 * Records only dispatches (split as the device limits need), no barriers: the caller makes
 * the sources visible before and the result visible after (vkrt_stream_barrier when cmd
 * is the device stream). `cmd` may be any command buffer of `dev` in the recording state;
 * outside the device stream it needs VK_KHR_push_descriptor (else VKRT_ERROR_UNAVAILABLE).
 * Record one device from one thread at a time, like the ops. */
vkrt_status vkrt_reduce_record(struct vkrt_device *dev, VkCommandBuffer cmd, vkrt_type type,
                               uint64_t count, VkBuffer dst, uint64_t dst_offset,
                               const VkBuffer *srcs, const uint64_t *src_offsets,
                               uint32_t src_count);

/* Creates the reduce pipeline for `type` now (the ops otherwise create pipelines at first
 * use), so a collective's first allreduce does not compile a shader. */
vkrt_status vkrt_reduce_prepare(struct vkrt_device *dev, vkrt_type type);
#else
static inline vkrt_status vkrt_reduce_plan(struct vkrt_device *dev, vkrt_type type,
                                           uint64_t count, VkBuffer dst, uint64_t dst_offset,
                                           const VkBuffer *srcs, const uint64_t *src_offsets,
                                           uint32_t src_count, struct vkrt_reduce_plan *plan) {
  (void)type, (void)count, (void)dst, (void)dst_offset, (void)srcs, (void)src_offsets,
      (void)src_count, (void)plan;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "dev%u: reduce kernel not in this build (CONFIG_VKRT_KERNEL_REDUCE=n)",
                    dev->index);
}
static inline vkrt_status vkrt_reduce_emit(struct vkrt_device *dev, VkCommandBuffer cmd,
                                           const struct vkrt_reduce_plan *plan) {
  (void)cmd, (void)plan;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "dev%u: reduce kernel not in this build (CONFIG_VKRT_KERNEL_REDUCE=n)",
                    dev->index);
}
static inline void vkrt_reduce_emit_raw(const struct vkrt_device_table *vk,
                                        VkCommandBuffer cmd, const void *plan) {
  (void)vk, (void)cmd, (void)plan;
}
static inline vkrt_status vkrt_reduce_record(struct vkrt_device *dev, VkCommandBuffer cmd,
                                             vkrt_type type, uint64_t count, VkBuffer dst,
                                             uint64_t dst_offset, const VkBuffer *srcs,
                                             const uint64_t *src_offsets, uint32_t src_count) {
  (void)cmd, (void)type, (void)count, (void)dst, (void)dst_offset, (void)srcs,
      (void)src_offsets, (void)src_count;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "dev%u: reduce kernel not in this build (CONFIG_VKRT_KERNEL_REDUCE=n)",
                    dev->index);
}
static inline vkrt_status vkrt_reduce_prepare(struct vkrt_device *dev, vkrt_type type) {
  (void)type;
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "dev%u: reduce kernel not in this build (CONFIG_VKRT_KERNEL_REDUCE=n)",
                    dev->index);
}
#endif

_Static_assert(sizeof(struct vkrt_reduce_plan) <= VKRT_STREAM_TAIL_BYTES,
               "a reduce plan rides in a stream tail's data");
