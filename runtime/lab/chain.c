/* vkrt/vkrt_lab.h: a chain of dependent f16 products (kernels/lab_chain.comp) ordered by a
 * pipeline barrier between the dispatches or by arrival counters the workgroups wait on,
 * to time what a dependent op's barrier costs against the two kernels' overlap
 * (vkrt-bench chain). */
#include "lab/lab.h"
#include "vkrt_kernels/registry.h"

struct chain_push {
  uint32_t n, w_offset, x_offset, y_offset;
  uint32_t order, link, groups, links, spin_limit;
  uint32_t base_group;
};
#if IS_ENABLED(CONFIG_VKRT_KERNEL_CHAIN_LAB)
VKRT_KERNEL_LAB_CHAIN_F16_CHECK_PUSH(struct chain_push);
#endif

#define CHAIN_ROWS 16      /* lab_chain.comp ROWS: rows a workgroup */
#define CHAIN_N_MAX 8192   /* lab_chain.comp NMAX: x staged in shared memory */
/* Polls of a waiting workgroup before it gives up (~tens of ms on a GPU): a link's grid
 * arrives within microseconds where the driver runs the dispatches' workgroups in order. */
#define CHAIN_SPIN_LIMIT (1u << 22)

/* A barrier between the chain's own commands, like the one the stream records before an op
 * that reads a compute op's writes (vkrt_stream_barrier would also forget the accesses this
 * op declared to the stream, which later ops must still see). */
static void compute_barrier(struct vkrt_device *dev, VkCommandBuffer cmd,
                            VkPipelineStageFlags src, VkAccessFlags src_access) {
  VkMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                       .srcAccessMask = src_access,
                       .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  dev->vk.vkCmdPipelineBarrier(cmd, src, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &b, 0,
                               NULL, 0, NULL);
}

vkrt_status vkrt_lab_chain_record(vkrt_buffer *w, vkrt_buffer *xy, vkrt_buffer *counters,
                                  const vkrt_lab_chain *c) {
  if (!w || !xy || !counters || !c)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = w->dev;
  if (xy->dev != dev || counters->dev != dev)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: the chain's buffers are on different devices");
  if (c->n < 256 || c->n > CHAIN_N_MAX || c->n % 256)
    return vkrt_lab_bad(dev, "lab: chain n %lld: 256..8192, a multiple of 256", c->n);
  if (!c->links || !c->matrices)
    return vkrt_lab_bad(dev, "lab: a chain of %lld links needs links and matrices",
                        (long long)c->links);
  if ((unsigned)c->order >= VKRT_LAB_CHAIN_ORDER_COUNT)
    return vkrt_lab_bad(dev, "lab: no chain order %lld", (long long)c->order);
  const uint64_t n = c->n, matrix = n * n * 2;
  if (w->size / matrix < c->matrices)
    return vkrt_lab_bad(dev, "lab: w holds fewer than the chain's %lld matrices",
                        (long long)c->matrices);
  if (xy->size < 2 * n * 4 || counters->size / 4 < (uint64_t)c->links + 1)
    return vkrt_lab_bad(dev, "lab: xy or counters too small for a chain of %lld links",
                        (long long)c->links);
  if (!IS_ENABLED(CONFIG_VKRT_KERNEL_CHAIN_LAB) || !vkrt_ops_kernel_usable(dev, VKRT_OPS_LAB_CHAIN_F16))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                      "lab: the chain kernel is not in this build or not usable on dev%u",
                      dev->index);
  const struct vkrt_stream_access access[3] = {
      {w, 0, c->matrices * matrix, false},
      {xy, 0, 2 * n * 4, true},
      {counters, 0, ((uint64_t)c->links + 1) * 4, true},
  };
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_ops_begin(dev, access, 3, &cmd);
  if (s != VKRT_OK)
    return s;
  dev->vk.vkCmdFillBuffer(cmd, counters->handle, 0, ((uint64_t)c->links + 1) * 4, 0);
  vkrt_stream_note_transfer(dev);
  compute_barrier(dev, cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  struct vkrt_ops_binding b[3] = {{w->handle, 0, c->matrices * matrix},
                                  {xy->handle, 0, 2 * n * 4},
                                  {counters->handle, 0, ((uint64_t)c->links + 1) * 4}};
  const struct vkrt_ops_pipeline *p;
  if ((s = vkrt_ops_use(dev, cmd, VKRT_OPS_LAB_CHAIN_F16, b, 3, &p)) != VKRT_OK)
    return s;
  const uint32_t groups = c->n / CHAIN_ROWS;
  for (uint32_t i = 0; i < c->links; i++) {
    if (i && c->order == VKRT_LAB_CHAIN_BARRIERS)
      compute_barrier(dev, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT);
    struct chain_push push = {
        .n = c->n,
        .w_offset = (uint32_t)((i % c->matrices) * (matrix / 16)),
        .x_offset = (i % 2) * c->n,
        .y_offset = ((i + 1) % 2) * c->n,
        .order = (uint32_t)c->order,
        .link = i,
        .groups = groups,
        .links = c->links,
        .spin_limit = CHAIN_SPIN_LIMIT,
    };
    vkrt_ops_dispatch_linear(dev, cmd, p, &push, groups);
  }
  return VKRT_OK;
}
