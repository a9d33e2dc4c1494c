/* vkrt/vkrt_lab.h: the cache prefetch experiment. A range of a buffer read by a kernel that
 * writes nothing, recorded like an op: with no hazard against the work before it, it runs
 * beside that work (a norm, a rope, an attention), and the op after that work finds the
 * range in the device's L2. */
#include "lab/lab.h"
#include "vkrt_kernels/registry.h"

struct prefetch_push {
  uint32_t first, sectors, never, slot;
  uint32_t base_x, base_y, base_z;
};
#if IS_ENABLED(CONFIG_VKRT_KERNEL_PREFETCH_LAB)
VKRT_KERNEL_PREFETCH_CHECK_PUSH(struct prefetch_push);
#endif


vkrt_status vkrt_lab_prefetch(vkrt_buffer *buffer, uint64_t offset, uint64_t size) {
  if (!buffer)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = buffer->dev;
  vkrt_status s = vkrt_ops_open(dev);
  if (s != VKRT_OK)
    return s;
  if (!IS_ENABLED(CONFIG_VKRT_KERNEL_PREFETCH_LAB))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                      "dev%u: vkrt_lab_prefetch: the prefetch kernel is not in this build "
                      "(CONFIG_VKRT_KERNELS=n)", dev->index);
  if (offset % 4 || size % 4 || !size)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: vkrt_lab_prefetch: offset %llu and size %llu must be multiples of "
                      "4, the size not 0", dev->index, (unsigned long long)offset,
                      (unsigned long long)size);
  s = vkrt_buffer_check_range(buffer, offset, size, "prefetch");
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_state *ops = dev->ops;
  struct vkrt_ops_lab *lab = ops->lab;
  const struct vkrt_ops_pipeline *p;
  s = vkrt_ops_pipeline(dev, VKRT_OPS_PREFETCH, &p);
  if (s != VKRT_OK)
    return s;
  /* bound from an aligned offset, in pieces one binding can cover */
  uint64_t align = ops->limits.min_storage_buffer_offset_alignment;
  uint64_t piece_max = vkrt_align_down(ops->limits.max_storage_buffer_range, 256) - align;
  for (uint64_t done = 0; done < size;) {
    uint64_t at = offset + done, piece = VKRT_MIN(size - done, piece_max);
    uint64_t bind = vkrt_align_down(at, align);
    uint64_t slot = (uint64_t)(lab->prefetch_slot++ % VKRT_OPS_PREFETCH_SINK_SLOTS) *
                    VKRT_OPS_PREFETCH_SINK_SLOT_BYTES;
    struct vkrt_stream_access access[2] = {{buffer, at, at + piece, false},
                                           {lab->prefetch_sink, slot, slot + 4, true}};
    VkCommandBuffer cmd;
    s = vkrt_ops_begin(dev, access, 2, &cmd);
    struct vkrt_ops_binding b[2] = {{buffer->handle, bind, at + piece - bind},
                                    {lab->prefetch_sink->handle, slot, 4}};
    if (s == VKRT_OK)
      s = vkrt_ops_bind(dev, cmd, p, b, 2);
    if (s != VKRT_OK)
      return s;
    uint64_t sectors = (piece + 31) / 32;
    struct prefetch_push push = {.first = (uint32_t)((at - bind) / 4),
                                 .sectors = (uint32_t)sectors, .never = 0, .slot = 0};
    vkrt_ops_dispatch_3d(dev, cmd, p, &push, (sectors + 1023) / 1024, 1, 1);
    lab->prefetch_bytes += piece;
    done += piece;
  }
  return VKRT_OK;
}
