/* vkrt_open / vkrt_close: the system (instance, devices) first, then the wings in order:
 * import (registry, then the upload contexts that DMA from it), transport. Closing goes
 * backwards; ops states belong to the devices and go just before them. */
#include <string.h>

#include "appliance/appliance.h"
#include "base/base.h"
#include "import/import.h"
#include "ops/ops.h"
#include "transport/collective.h"

void vkrt_options_initialize(vkrt_options *options) {
  if (!options)
    return;
  memset(options, 0, sizeof(*options));
  options->allocator = vkrt_allocator_system();
  options->log_level = VKRT_LOG_INFO;
  for (int i = 0; i < VKRT_MAX_DEVICES; i++)
    options->physical_device_index[i] = -1;
}

static vkrt_status open_wings(struct vkrt_appliance *app) {
  struct vkrt_system *sys = &app->sys;
  vkrt_status s = VKRT_OK;
  /* Ops state (descriptor layouts and pools, kernel table) per device, and on GPUs (or when
   * asked) every usable pipeline, so no dispatch compiles one. CPU devices build them on first
   * use: on lavapipe all of them cost ~0.7 s per open (test_core 42 s -> 114 s). */
  for (uint32_t d = 0; s == VKRT_OK && d < sys->device_count; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    s = vkrt_ops_open(dev);
    if (s == VKRT_OK) {
      dev->ops->quant_activations_q8 = app->quant_activations_q8;
      dev->ops->q8x_max_m = app->quant_activations_columns;
      dev->ops->use_coopmat = app->matmul_f16 && vkrt_ops_coopmat_usable(dev);
    }
    bool at_open = app->pipelines == VKRT_PIPELINES_AT_OPEN ||
                   (app->pipelines == VKRT_PIPELINES_AUTO && !dev->caps.is_cpu);
    if (s == VKRT_OK && at_open)
      s = vkrt_ops_build_pipelines(dev);
  }
  if (s == VKRT_OK)
    s = vkrt_registry_open(sys, &app->registry);
  if (s == VKRT_OK) {
    s = vkrt_upload_open(sys, app->registry);
    app->upload_opened = s == VKRT_OK;
  }
  if (s == VKRT_OK) {
    s = vkrt_collective_open(sys, app->collective_timeout_ns, &app->collective);
    app->collective_opened = s == VKRT_OK;
  }
  return s;
}

vkrt_status vkrt_open(const vkrt_options *options, vkrt_appliance **out, char *error_message,
                      size_t error_message_size) {
  if (error_message && error_message_size)
    error_message[0] = '\0';
  if (!out) {
    vkrt_format(error_message, error_message_size, "vkrt_open: out is NULL");
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  *out = NULL;
  vkrt_options defaults;
  if (!options) {
    vkrt_options_initialize(&defaults);
    options = &defaults;
  }
  if (options->pipelines > VKRT_PIPELINES_ON_FIRST_USE) {
    vkrt_format(error_message, error_message_size,
                "vkrt_open: options.pipelines = %u is not a vkrt_pipelines value (0..2)",
                options->pipelines);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  if (!IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION) &&
      memcmp(&options->faults, &(vkrt_fault_options){0}, sizeof(options->faults)) != 0) {
    vkrt_format(error_message, error_message_size,
                "vkrt_open: options.faults asks for injected faults, but fault injection is "
                "compiled out of this build (CONFIG_VKRT_FAULT_INJECTION)");
    return VKRT_ERROR_UNSUPPORTED;
  }
  if (options->quant_activations > VKRT_ACTIVATIONS_Q8) {
    vkrt_format(error_message, error_message_size,
                "vkrt_open: options.quant_activations = %u is not a vkrt_quant_activations value "
                "(0..1)", options->quant_activations);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  if (options->quant_activations_columns > 8) {
    vkrt_format(error_message, error_message_size,
                "vkrt_open: options.quant_activations_columns = %u: 8-bit x takes at most 8 "
                "columns (0..8)", options->quant_activations_columns);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  if (options->wait_spin_us > VKRT_WAIT_SPIN_US_MAX) {
    vkrt_format(error_message, error_message_size,
                "vkrt_open: options.wait_spin_us = %u: at most %u (10 s)", options->wait_spin_us,
                VKRT_WAIT_SPIN_US_MAX);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  if (options->matmul_activations > VKRT_MATMUL_ACTIVATIONS_F16) {
    vkrt_format(error_message, error_message_size,
                "vkrt_open: options.matmul_activations = %u is not a vkrt_matmul_activations "
                "value (0..1)", options->matmul_activations);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  /* The appliance holds the base every later allocation goes through; allocate it with
   * a throw-away base built from the same options, then hand the count over. */
  struct vkrt_base boot;
  vkrt_base_init(&boot, options);
  struct vkrt_appliance *app = vkrt_calloc(&boot, 1, sizeof(*app));
  unsigned boot_count = atomic_load(&boot.host_alloc_count);
  vkrt_base_finish(&boot);
  if (!app) {
    vkrt_format(error_message, error_message_size,
                "out of host memory allocating the appliance");
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  }
  struct vkrt_system *sys = &app->sys;
  vkrt_base_init(&sys->base, options);
  atomic_store(&sys->base.live_allocations, 1); /* the appliance itself */
  atomic_store(&sys->base.host_alloc_count, boot_count);
#ifdef CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS
  app->collective_timeout_ns = (uint64_t)CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS * 1000000ull;
#else
  app->collective_timeout_ns = 5000ull * 1000000ull;
#endif
  if (options->collective_timeout_ns)
    app->collective_timeout_ns = options->collective_timeout_ns;
  app->pipelines = options->pipelines;
  app->quant_activations_q8 = options->quant_activations == VKRT_ACTIVATIONS_Q8;
  app->quant_activations_columns =
      app->quant_activations_q8 ? VKRT_MAX(options->quant_activations_columns, 1u) : 1u;
  app->matmul_f16 = options->matmul_activations == VKRT_MATMUL_ACTIVATIONS_F16;

  vkrt_status s = vkrt_system_open(sys, options);
  if (s == VKRT_OK)
    s = open_wings(app);
  if (s != VKRT_OK) {
    vkrt_format(error_message, error_message_size, "%s", vkrt_base_last_error(&sys->base));
    vkrt_close(app);
    return s;
  }
  vkrt_log(&sys->base, VKRT_LOG_INFO, "board '%s': %u device(s) open%s", sys->board.name,
           sys->device_count, sys->board.simulated ? " (simulated)" : "");
  *out = app;
  return VKRT_OK;
}

void vkrt_close(vkrt_appliance *app) {
  if (!app)
    return;
  struct vkrt_system *sys = &app->sys;
  if (app->capturing) { /* a capture never ended: nothing of it runs */
    vkrt_graph *g = NULL;
    vkrt_graph_end(app, &g);
    vkrt_graph_destroy(g);
  }
  vkrt_system_wait_idle(sys);
  if (app->collective_opened)
    vkrt_collective_close(app->collective);
  app->collective = NULL;
  if (app->upload_opened)
    vkrt_upload_close(sys);
  vkrt_registry_close(app->registry);
  app->registry = NULL;
  for (uint32_t i = sys->device_count; i-- > 0;)
    if (sys->devices[i].handle)
      vkrt_ops_close(&sys->devices[i]);
  vkrt_system_close(sys);
  long leaked = atomic_load(&sys->base.live_allocations) - 1;
  if (leaked != 0)
    vkrt_log(&sys->base, VKRT_LOG_WARN, "vkrt_close: %ld libvkrt host allocation(s) not freed",
             leaked);
  long driver = atomic_load(&sys->vk_driver_live);
  if (driver != 0)
    vkrt_log(&sys->base, VKRT_LOG_DEBUG, "vkrt_close: the driver kept %ld allocation(s)", driver);
  vkrt_allocator allocator = sys->base.allocator;
  vkrt_base_finish(&sys->base);
  allocator.free(allocator.user, app);
}
