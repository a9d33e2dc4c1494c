/* TEMPORARY, tests/tools only: definitions of the module hooks whose modules have not
 * landed yet (runtime/import, runtime/ops, runtime/transport). Weak, so a real module
 * linked in wins. Delete this file (and its Sources mentions) once they exist. */
#include <stdio.h>

#include "device/device.h"
#include "transport/collective.h"

__attribute__((weak)) vkrt_status vkrt_upload_open(struct vkrt_appliance *app) {
  (void)app;
  return VKRT_OK;
}
__attribute__((weak)) void vkrt_upload_close(struct vkrt_appliance *app) { (void)app; }
__attribute__((weak)) void vkrt_ops_close(struct vkrt_device *dev) { (void)dev; }
__attribute__((weak)) size_t vkrt_import_describe(const struct vkrt_appliance *app, bool json,
                                                  char *buf, size_t size) {
  (void)app;
  return (size_t)snprintf(buf, size, json ? "\"import\": null"
                                          : "vkrt: import plan: not available in this build\n");
}
#if IS_ENABLED(CONFIG_VKRT_COLLECTIVES)
__attribute__((weak)) vkrt_status vkrt_collective_open(struct vkrt_appliance *app) {
  (void)app;
  return VKRT_OK;
}
__attribute__((weak)) void vkrt_collective_close(struct vkrt_appliance *app) { (void)app; }
__attribute__((weak)) vkrt_status vkrt_collective_status(struct vkrt_appliance *app) {
  (void)app;
  return VKRT_OK;
}
__attribute__((weak)) size_t vkrt_collective_describe(const struct vkrt_appliance *app, bool json,
                                                      char *buf, size_t size) {
  (void)app;
  return (size_t)snprintf(buf, size, json ? "\"collectives\": null"
                                          : "vkrt: collective plan: not available in this build\n");
}
#endif
