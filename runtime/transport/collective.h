/* Collective entry points the core calls at open/close and the probe uses; stubs when
 * CONFIG_VKRT_COLLECTIVES=n so the core needs no #ifdef. */
#pragma once
#include <stdio.h>

#include "device/device.h"

#if IS_ENABLED(CONFIG_VKRT_COLLECTIVES)
/* Plans the transport from the capability snapshots and creates it (after devices open).
 * Call it after the devices and their streams exist. */
vkrt_status vkrt_collective_open(struct vkrt_appliance *app);
/* Drains pending collectives (bounded by the collective timeout), submits a stream still
 * holding a wait on a collective semaphore, joins the proxy thread, frees everything. Call
 * it before the streams and devices are destroyed. */
void vkrt_collective_close(struct vkrt_appliance *app);
/* Plan lines / JSON for vkrt_describe. */
size_t vkrt_collective_describe(const struct vkrt_appliance *app, bool json, char *buf,
                                size_t size);
/* The transport chosen at open (NONE: one device or not open). */
vkrt_transport_kind vkrt_collective_kind(const struct vkrt_appliance *app);
/* Validates and runs one allreduce (vkrt_allreduce). */
vkrt_status vkrt_collective_allreduce(struct vkrt_appliance *app, const vkrt_allreduce_args *args);
/* Sticky error of an asynchronous transport (a peer that stalled or a device lost after
 * vkrt_allreduce had returned): OK when none. Sets the appliance's last error when not OK.
 * vkrt_wait / vkrt_finish should return it so every rank sees the failure. */
vkrt_status vkrt_collective_status(struct vkrt_appliance *app);
/* Multi-host appliances: this host's rank and the host count (0 and 1 on one host). */
void vkrt_collective_hosts(const struct vkrt_appliance *app, uint32_t *rank, uint32_t *count);
#else
static inline vkrt_status vkrt_collective_open(struct vkrt_appliance *app) {
  if (app->options.mpi)
    return vkrt_error(&app->base, VKRT_ERROR_UNSUPPORTED,
                      "options name an MPI communicator but this build has no collectives "
                      "(CONFIG_VKRT_COLLECTIVES=n)");
  return VKRT_OK;
}
static inline void vkrt_collective_close(struct vkrt_appliance *app) { (void)app; }
static inline size_t vkrt_collective_describe(const struct vkrt_appliance *app, bool json,
                                              char *buf, size_t size) {
  (void)app;
  return (size_t)snprintf(buf, size, json ? "\"collectives\": null" :
                          "vkrt: collectives not in this build (CONFIG_VKRT_COLLECTIVES=n)\n");
}
static inline vkrt_transport_kind vkrt_collective_kind(const struct vkrt_appliance *app) {
  (void)app;
  return VKRT_TRANSPORT_NONE;
}
static inline vkrt_status vkrt_collective_allreduce(struct vkrt_appliance *app,
                                                    const vkrt_allreduce_args *args) {
  (void)args;
  return vkrt_error(&app->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_allreduce: collectives are not in this build (CONFIG_VKRT_COLLECTIVES=n)");
}
static inline vkrt_status vkrt_collective_status(struct vkrt_appliance *app) {
  (void)app;
  return VKRT_OK;
}
static inline void vkrt_collective_hosts(const struct vkrt_appliance *app, uint32_t *rank,
                                         uint32_t *count) {
  (void)app;
  *rank = 0;
  *count = 1;
}
#endif
