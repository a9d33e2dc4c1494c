/* The appliance: the system (instance and devices, runtime/device) and the wings' states
 * tied together. Only runtime/appliance and tests that inspect an open appliance include
 * this (it is the documented test header; README.md "Layout"); vkrt-bench uses
 * vkrt/vkrt_lab.h instead. */
#pragma once
#include <stddef.h>

#include "device/device.h"

struct vkrt_import_registry;   /* runtime/import */
struct vkrt_collective;        /* runtime/transport */

struct vkrt_appliance {
  struct vkrt_system sys;                 /* first: the devices every wing works on */
  struct vkrt_import_registry *registry;  /* host regions (NULL until opened) */
  struct vkrt_collective *collective;     /* transport (NULL: one device or not opened) */
  uint64_t collective_timeout_ns;
  uint32_t pipelines; /* vkrt_pipelines: when the ops' pipelines are built */
  bool quant_activations_q8; /* options.quant_activations == VKRT_ACTIVATIONS_Q8 */
  uint32_t quant_activations_columns; /* ... up to this M (1..8; 1 without it) */
  bool matmul_f16;           /* options.matmul_activations == VKRT_MATMUL_ACTIVATIONS_F16 */
  bool upload_opened, collective_opened;  /* wings to close */
  struct vkrt_graph *capturing;           /* the graph vkrt_graph_begin started, until _end */
};
_Static_assert(offsetof(struct vkrt_appliance, sys) == 0,
               "the system comes first: vkrt_handle_system (device/device.h) relies on it");
