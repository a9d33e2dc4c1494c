/* Fault injection controls that act on an open appliance; with CONFIG_VKRT_FAULT_INJECTION=n
 * they answer VKRT_ERROR_UNSUPPORTED (vkrt.h declares them for every configuration). */
#include "appliance/appliance.h"

vkrt_status vkrt_fault_arm_allocations(struct vkrt_appliance *app, uint32_t host_alloc_fail_at,
                                       uint32_t vulkan_alloc_fail_at) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION))
    return vkrt_error(&app->sys.base, VKRT_ERROR_UNSUPPORTED, "vkrt_fault_arm_allocations: "
                      "fault injection is compiled out (CONFIG_VKRT_FAULT_INJECTION)");
  /* Counters restart so "the Nth" counts from this call on. Tests arm between calls, with no
   * other thread allocating, so plain stores are enough. */
  atomic_store(&app->sys.base.host_alloc_count, 0);
  app->sys.base.host_alloc_fail_at = host_alloc_fail_at;
  atomic_store(&app->sys.vk_alloc_count, 0);
  app->sys.options.faults.vulkan_alloc_fail_at = vulkan_alloc_fail_at;
  return VKRT_OK;
}

vkrt_status vkrt_fault_allocation_counts(const struct vkrt_appliance *app,
                                         uint32_t *host_allocations,
                                         uint32_t *vulkan_allocations) {
  if (host_allocations)
    *host_allocations = 0;
  if (vulkan_allocations)
    *vulkan_allocations = 0;
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION))
    return vkrt_error(&app->sys.base, VKRT_ERROR_UNSUPPORTED, "vkrt_fault_allocation_counts: "
                      "fault injection is compiled out (CONFIG_VKRT_FAULT_INJECTION)");
  if (host_allocations)
    *host_allocations = atomic_load(&app->sys.base.host_alloc_count);
  if (vulkan_allocations)
    *vulkan_allocations = atomic_load(&app->sys.vk_alloc_count);
  return VKRT_OK;
}
