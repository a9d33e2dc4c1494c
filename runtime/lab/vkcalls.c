/* vkrt/vkrt_lab.h: host time inside a device's Vulkan recording calls. While a profile runs,
 * the device's table points the recording entry points at wrappers that read the clock
 * around the driver's function; a mark from the caller splits what remains of an op's
 * host time into the part before its first Vulkan call (checks, hazard tracking, pipeline
 * lookup), between its calls and after its last; calls outside the marked ops (a submit's)
 * are not counted. One device at a time, from the thread recording it. The entry points
 * wrapped are the recording thread's only: the device's submitter thread ends command
 * buffers and submits through fields the profile leaves alone. */
#include <string.h>
#include <time.h>

#include "lab/lab.h"

#define VK_CALLS(X)                                                                          \
  X(VKRT_LAB_VK_BIND_PIPELINE, vkCmdBindPipeline, "vkCmdBindPipeline",                       \
    (VkCommandBuffer c, VkPipelineBindPoint p, VkPipeline q), (c, p, q))                     \
  X(VKRT_LAB_VK_PUSH_DESCRIPTORS, vkCmdPushDescriptorSetKHR, "vkCmdPushDescriptorSetKHR",    \
    (VkCommandBuffer c, VkPipelineBindPoint p, VkPipelineLayout l, uint32_t s, uint32_t n,    \
     const VkWriteDescriptorSet *w),                                                          \
    (c, p, l, s, n, w))                                                                       \
  X(VKRT_LAB_VK_BIND_DESCRIPTOR_SETS, vkCmdBindDescriptorSets, "vkCmdBindDescriptorSets",    \
    (VkCommandBuffer c, VkPipelineBindPoint p, VkPipelineLayout l, uint32_t f, uint32_t n,    \
     const VkDescriptorSet *s, uint32_t dn, const uint32_t *d),                               \
    (c, p, l, f, n, s, dn, d))                                                                \
  X(VKRT_LAB_VK_PUSH_CONSTANTS, vkCmdPushConstants, "vkCmdPushConstants",                    \
    (VkCommandBuffer c, VkPipelineLayout l, VkShaderStageFlags s, uint32_t o, uint32_t n,     \
     const void *v),                                                                          \
    (c, l, s, o, n, v))                                                                       \
  X(VKRT_LAB_VK_DISPATCH, vkCmdDispatch, "vkCmdDispatch",                                    \
    (VkCommandBuffer c, uint32_t x, uint32_t y, uint32_t z), (c, x, y, z))                    \
  X(VKRT_LAB_VK_BARRIER, vkCmdPipelineBarrier, "vkCmdPipelineBarrier",                       \
    (VkCommandBuffer c, VkPipelineStageFlags s, VkPipelineStageFlags d, VkDependencyFlags f,  \
     uint32_t mn, const VkMemoryBarrier *m, uint32_t bn, const VkBufferMemoryBarrier *b,      \
     uint32_t in, const VkImageMemoryBarrier *i),                                             \
    (c, s, d, f, mn, m, bn, b, in, i))                                                        \
  X(VKRT_LAB_VK_FILL, vkCmdFillBuffer, "vkCmdFillBuffer",                                    \
    (VkCommandBuffer c, VkBuffer b, VkDeviceSize o, VkDeviceSize n, uint32_t v),              \
    (c, b, o, n, v))                                                                          \
  X(VKRT_LAB_VK_COPY, vkCmdCopyBuffer, "vkCmdCopyBuffer",                                    \
    (VkCommandBuffer c, VkBuffer s, VkBuffer d, uint32_t n, const VkBufferCopy *r),           \
    (c, s, d, n, r))                                                                          \
  X(VKRT_LAB_VK_BEGIN, vkBeginCommandBuffer, "vkBeginCommandBuffer",                         \
    (VkCommandBuffer c, const VkCommandBufferBeginInfo *i), (c, i))                           \
  X(VKRT_LAB_VK_RESET_POOL, vkResetCommandPool, "vkResetCommandPool",                        \
    (VkDevice d, VkCommandPool p, VkCommandPoolResetFlags f), (d, p, f))                      \
  X(VKRT_LAB_VK_ALLOCATE_SETS, vkAllocateDescriptorSets, "vkAllocateDescriptorSets",          \
    (VkDevice d, const VkDescriptorSetAllocateInfo *i, VkDescriptorSet *s), (d, i, s))        \
  X(VKRT_LAB_VK_UPDATE_SETS, vkUpdateDescriptorSets, "vkUpdateDescriptorSets",                \
    (VkDevice d, uint32_t wn, const VkWriteDescriptorSet *w, uint32_t cn,                     \
     const VkCopyDescriptorSet *c),                                                           \
    (d, wn, w, cn, c))                                                                        \
  X(VKRT_LAB_VK_RESET_DESCRIPTOR_POOL, vkResetDescriptorPool, "vkResetDescriptorPool",        \
    (VkDevice d, VkDescriptorPool p, VkDescriptorPoolResetFlags f), (d, p, f))

static struct {
  struct vkrt_device *dev; /* the device profiled, NULL when none */
  struct vkrt_device_table original;
  vkrt_lab_vk_calls acc;
  uint64_t mark_ns;  /* last mark, 0 before the first */
  uint64_t last_ns;  /* end of the last wrapped call after the mark, 0 when none yet */
} prof;

static inline uint64_t clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The time since the mark or the last call goes to `before` or `between`. */
static inline void entered(uint64_t t) {
  if (prof.last_ns)
    prof.acc.between_ns += t - prof.last_ns;
  else
    prof.acc.before_ns += t - prof.mark_ns;
}

#define DEFINE_WRAPPER(id, fn, name, params, args)                                           \
  static VKAPI_ATTR WRAP_TYPE_##fn VKAPI_CALL wrap_##fn params {                               \
    uint64_t t0 = prof.mark_ns ? clock_ns() : 0; /* 0: outside the marked ops */           \
    if (t0)                                                                                  \
      entered(t0);                                                                           \
    WRAP_DECL_##fn prof.original.fn args;                                                    \
    if (t0) {                                                                                \
      uint64_t t1 = clock_ns();                                                              \
      prof.acc.count[id]++;                                                                  \
      prof.acc.ns[id] += t1 - t0;                                                            \
      prof.last_ns = t1;                                                                     \
    }                                                                                        \
    WRAP_RETURN_##fn;                                                                        \
  }
#define WRAP_TYPE_vkCmdBindPipeline void
#define WRAP_TYPE_vkCmdPushDescriptorSetKHR void
#define WRAP_TYPE_vkCmdBindDescriptorSets void
#define WRAP_TYPE_vkCmdPushConstants void
#define WRAP_TYPE_vkCmdDispatch void
#define WRAP_TYPE_vkCmdPipelineBarrier void
#define WRAP_TYPE_vkCmdFillBuffer void
#define WRAP_TYPE_vkCmdCopyBuffer void
#define WRAP_TYPE_vkBeginCommandBuffer VkResult
#define WRAP_TYPE_vkResetCommandPool VkResult
#define WRAP_TYPE_vkAllocateDescriptorSets VkResult
#define WRAP_TYPE_vkUpdateDescriptorSets void
#define WRAP_TYPE_vkResetDescriptorPool VkResult
#define WRAP_DECL_vkCmdBindPipeline
#define WRAP_DECL_vkCmdPushDescriptorSetKHR
#define WRAP_DECL_vkCmdBindDescriptorSets
#define WRAP_DECL_vkCmdPushConstants
#define WRAP_DECL_vkCmdDispatch
#define WRAP_DECL_vkCmdPipelineBarrier
#define WRAP_DECL_vkCmdFillBuffer
#define WRAP_DECL_vkCmdCopyBuffer
#define WRAP_DECL_vkBeginCommandBuffer VkResult r =
#define WRAP_DECL_vkResetCommandPool VkResult r =
#define WRAP_DECL_vkAllocateDescriptorSets VkResult r =
#define WRAP_DECL_vkUpdateDescriptorSets
#define WRAP_DECL_vkResetDescriptorPool VkResult r =
#define WRAP_RETURN_vkCmdBindPipeline return
#define WRAP_RETURN_vkCmdPushDescriptorSetKHR return
#define WRAP_RETURN_vkCmdBindDescriptorSets return
#define WRAP_RETURN_vkCmdPushConstants return
#define WRAP_RETURN_vkCmdDispatch return
#define WRAP_RETURN_vkCmdPipelineBarrier return
#define WRAP_RETURN_vkCmdFillBuffer return
#define WRAP_RETURN_vkCmdCopyBuffer return
#define WRAP_RETURN_vkBeginCommandBuffer return r
#define WRAP_RETURN_vkResetCommandPool return r
#define WRAP_RETURN_vkAllocateDescriptorSets return r
#define WRAP_RETURN_vkUpdateDescriptorSets return
#define WRAP_RETURN_vkResetDescriptorPool return r
VK_CALLS(DEFINE_WRAPPER)

const char *vkrt_lab_vk_call_name(vkrt_lab_vk_call call) {
  switch (call) {
#define CALL_NAME(id, fn, name, params, args)                                                \
  case id: return name;
    VK_CALLS(CALL_NAME)
  case VKRT_LAB_VK_CALL_COUNT: break;
  }
  return "?";
}

/* The cost of one clock read, the median-free way: the mean of a tight loop. */
static double clock_cost_ns(void) {
  enum { N = 20000 };
  uint64_t t0 = clock_ns(), sink = 0;
  for (int i = 0; i < N; i++)
    sink += clock_ns();
  uint64_t t1 = clock_ns();
  return sink ? (double)(t1 - t0) / N : 0;
}

/* A device closed while profiled: its table goes with it, and so does the profile. */
static void forget_closed_device(struct vkrt_device *dev) {
  if (prof.dev == dev)
    memset(&prof, 0, sizeof(prof));
}

vkrt_status vkrt_lab_vk_calls_start(vkrt_appliance *app, uint32_t device) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, app, &dev);
  if (s != VKRT_OK)
    return s;
  if (prof.dev)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "lab: Vulkan calls of dev%u are being profiled already", prof.dev->index);
  memset(&prof, 0, sizeof(prof));
  prof.dev = dev;
  prof.original = dev->vk;
  prof.acc.clock_ns = clock_cost_ns();
  dev->on_close = forget_closed_device;
#define SWAP_IN(id, fn, name, params, args)                                                  \
  if (dev->vk.fn)                                                                            \
    dev->vk.fn = wrap_##fn;
  VK_CALLS(SWAP_IN)
  return VKRT_OK;
}

void vkrt_lab_vk_calls_mark(bool op_follows) {
  uint64_t t = clock_ns();
  if (prof.last_ns)
    prof.acc.after_ns += t - prof.last_ns;
  else if (prof.mark_ns)
    prof.acc.before_ns += t - prof.mark_ns; /* an op without a Vulkan call */
  prof.acc.marks += op_follows;
  prof.mark_ns = op_follows ? t : 0;
  prof.last_ns = 0;
}

vkrt_status vkrt_lab_vk_calls_stop(vkrt_appliance *app, uint32_t device, vkrt_lab_vk_calls *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  if (prof.dev != dev)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: the Vulkan calls of dev%u are not being profiled", dev->index);
#define SWAP_OUT(id, fn, name, params, args) dev->vk.fn = prof.original.fn;
  VK_CALLS(SWAP_OUT)
  *out = prof.acc;
  prof.dev = NULL;
  dev->on_close = NULL;
  return VKRT_OK;
}
