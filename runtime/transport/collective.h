/* Collective entry points the core calls at open/close and the probe uses; stubs when
 * CONFIG_VKRT_COLLECTIVES=n so the core needs no #ifdef. */
#pragma once
#include "device/device.h"

#if IS_ENABLED(CONFIG_VKRT_COLLECTIVES)
/* Plans the transport from the capability snapshots and creates it (after devices open). */
vkrt_status vkrt_collective_open(struct vkrt_appliance *app);
void vkrt_collective_close(struct vkrt_appliance *app);
/* Plan lines / JSON for vkrt_describe. */
size_t vkrt_collective_describe(const struct vkrt_appliance *app, bool json, char *buf,
                                size_t size);
#else
static inline vkrt_status vkrt_collective_open(struct vkrt_appliance *app) {
  (void)app;
  return VKRT_OK;
}
static inline void vkrt_collective_close(struct vkrt_appliance *app) { (void)app; }
static inline size_t vkrt_collective_describe(const struct vkrt_appliance *app, bool json,
                                              char *buf, size_t size) {
  (void)app;
  return (size_t)snprintf(buf, size, json ? "\"collectives\": null" :
                          "vkrt: collectives not in this build (CONFIG_VKRT_COLLECTIVES=n)\n");
}
#endif
