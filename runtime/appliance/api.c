/* Public entry points on the appliance handle: getters, submit / wait / finish (the device
 * stream, then the transport's sticky status), and the wings' entry points, each forwarded
 * with what the wing needs. The public functions of the other objects live with them:
 * buffers in device/buffer.c, ops and stream commands in ops/api.c, graphs in graph.c. */
#include <string.h>

#include "appliance/appliance.h"
#include "base/base.h"
#include "import/import.h"
#include "import/load.h"
#include "ops/ops.h"
#include "transport/collective.h"

const char *vkrt_last_error(const vkrt_appliance *app) {
  return app ? vkrt_base_last_error(&app->sys.base) : "no appliance";
}

uint32_t vkrt_validation_message_count(const vkrt_appliance *app) {
  return app ? atomic_load(&((vkrt_appliance *)app)->sys.validation_messages) : 0;
}

uint32_t vkrt_device_count(const vkrt_appliance *app) { return app ? app->sys.device_count : 0; }

vkrt_status vkrt_device_info_get(const vkrt_appliance *app, uint32_t device,
                                 vkrt_device_info *out) {
  if (!app) {
    if (out)
      memset(out, 0, sizeof(*out));
    return VKRT_ERROR_INVALID_ARGUMENT; /* no appliance to carry the message */
  }
  if (!out)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INVALID_ARGUMENT,
                      "device info: out is NULL");
  memset(out, 0, sizeof(*out));
  struct vkrt_device *dev;
  vkrt_status s = vkrt_system_device((struct vkrt_system *)&app->sys, device, &dev);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_caps *c = &dev->caps;
  memcpy(out->name, c->device_name, sizeof(out->name));
  memcpy(out->driver_name, c->driver_name, sizeof(out->driver_name));
  out->vendor_id = c->vendor_id;
  out->device_id = c->device_id;
  out->physical_index = c->physical_index;
  memcpy(out->device_uuid, c->device_uuid, 16);
  memcpy(out->driver_uuid, c->driver_uuid, 16);
  out->has_transfer_queue = c->has_transfer_queue;
  out->external_memory_host = c->external_memory_host;
  out->external_semaphore_fd = c->external_semaphore_fd;
  out->matmul_f16 = dev->ops && dev->ops->use_coopmat && vkrt_ops_coopmat_usable(dev);
  for (uint32_t i = 0; i < c->heap_count; i++)
    if (c->heap_flags[i] & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      out->device_local_bytes += c->heap_size[i];
  return VKRT_OK;
}

/* ---- the device streams --------------------------------------------------------------- */

static vkrt_status device_of(vkrt_appliance *app, uint32_t device, struct vkrt_device **out) {
  *out = NULL;
  return app ? vkrt_system_device(&app->sys, device, out) : VKRT_ERROR_INVALID_ARGUMENT;
}

/* While a graph captures, submits and waits would run nothing of what was recorded. */
static vkrt_status not_capturing(vkrt_appliance *app, const char *what) {
  if (app && app->capturing)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INVALID_ARGUMENT,
                      "%s during a graph capture: vkrt_graph_end first", what);
  return VKRT_OK;
}

vkrt_status vkrt_submit(vkrt_appliance *app, uint32_t device, uint64_t *out_ticket) {
  if (out_ticket)
    *out_ticket = 0;
  struct vkrt_device *dev;
  vkrt_status s = device_of(app, device, &dev);
  if (s == VKRT_OK)
    s = not_capturing(app, "vkrt_submit");
  return s != VKRT_OK ? s : vkrt_stream_submit(dev, out_ticket);
}

vkrt_status vkrt_wait(vkrt_appliance *app, uint32_t device, uint64_t ticket,
                      uint64_t timeout_ns) {
  struct vkrt_device *dev;
  vkrt_status s = device_of(app, device, &dev);
  if (s == VKRT_OK && (s = not_capturing(app, "vkrt_wait")) != VKRT_OK)
    return s;
  /* Drain first: the transports release every waiting queue on failure, so this returns,
   * and afterwards the caller may free buffers the GPU was using. Then a collective that
   * failed asynchronously (stalled peer, lost device) fails every rank's wait, so no rank
   * reads a half-reduced result as success. */
  if (s == VKRT_OK)
    s = vkrt_stream_wait(dev, ticket, timeout_ns);
  vkrt_status collective = app && (s == VKRT_OK || s == VKRT_ERROR_DEVICE_LOST)
                               ? vkrt_collective_status(app->collective) : VKRT_OK;
  return s == VKRT_OK ? collective : s;
}

vkrt_status vkrt_finish(vkrt_appliance *app, uint32_t device) {
  uint64_t ticket;
  vkrt_status s = vkrt_submit(app, device, &ticket);
  return s != VKRT_OK ? s : vkrt_wait(app, device, ticket, UINT64_MAX);
}

/* ---- import --------------------------------------------------------------------------- */

vkrt_import_policy vkrt_import_policy_get(const vkrt_appliance *app) {
  if (app && app->registry)
    return vkrt_registry_policy(app->registry);
  return (vkrt_import_policy)CONFIG_VKRT_IMPORT_POLICY_ID;
}

vkrt_status vkrt_host_register(vkrt_appliance *app, const void *ptr, uint64_t size,
                               vkrt_progress_fn progress, void *progress_user,
                               vkrt_register_info *info) {
  if (info)
    memset(info, 0, sizeof(*info));
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!app->registry)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INTERNAL, "host register: import module not open");
  return vkrt_registry_register(app->registry, ptr, size, progress, progress_user, info);
}

vkrt_status vkrt_host_unregister(vkrt_appliance *app, const void *ptr) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!app->registry)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INTERNAL,
                      "host unregister: import module not open");
  return vkrt_registry_unregister(app->registry, ptr);
}

vkrt_status vkrt_load_file(vkrt_appliance *app, const char *path, int fd,
                           const vkrt_load_range *ranges, uint32_t count, vkrt_load_path force,
                           vkrt_progress_fn progress, void *progress_user, vkrt_load_info *info) {
  vkrt_load_info scratch;
  if (!info)
    info = &scratch;
  memset(info, 0, sizeof(*info));
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!app->registry)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INTERNAL, "load: import module not open");
  if (!path && fd < 0)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INVALID_ARGUMENT, "load: no path and no fd");
  return vkrt_load_run(app->registry, path, fd, ranges, count, force, progress, progress_user,
                       info);
}

vkrt_status vkrt_upload_counters_get(const vkrt_appliance *app, vkrt_upload_counters *out) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!out)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INVALID_ARGUMENT,
                      "upload counters: out is NULL");
  vkrt_import_upload_counters(app->registry, out);
  return VKRT_OK;
}

/* ---- collectives ---------------------------------------------------------------------- */

vkrt_transport_kind vkrt_transport(const vkrt_appliance *app) {
  return app ? vkrt_collective_kind(app->collective) : VKRT_TRANSPORT_NONE;
}

uint32_t vkrt_host_rank(const vkrt_appliance *app) {
  uint32_t rank = 0, count = 1;
  if (app)
    vkrt_collective_hosts(app->collective, &rank, &count);
  return rank;
}

uint32_t vkrt_host_count(const vkrt_appliance *app) {
  uint32_t rank = 0, count = 1;
  if (app)
    vkrt_collective_hosts(app->collective, &rank, &count);
  return count;
}

vkrt_status vkrt_allreduce(vkrt_appliance *app, const vkrt_allreduce_args *args) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!IS_ENABLED(CONFIG_VKRT_COLLECTIVES))
    return vkrt_error(&app->sys.base, VKRT_ERROR_UNSUPPORTED,
                      "vkrt_allreduce: collectives are not in this build "
                      "(CONFIG_VKRT_COLLECTIVES=n)");
  if (!app->collective)
    return vkrt_error(&app->sys.base, VKRT_ERROR_INTERNAL, "allreduce: collectives are not open");
  return vkrt_collective_allreduce(app->collective, args);
}
