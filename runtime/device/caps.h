/* Capability snapshot: a plain struct filled once at open from the physical device and the
 * per-device function table. Planners read only this, so they are testable without a GPU. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define VKRT_CAPS_MAX_HEAPS 16
#define VKRT_CAPS_MAX_TYPES 32

/* Handle-type bits, mirroring VkExternal*HandleTypeFlagBits we care about. */
enum vkrt_handle_bits {
  VKRT_HANDLE_OPAQUE_FD = 1u << 0,
  VKRT_HANDLE_SYNC_FD = 1u << 1,
  VKRT_HANDLE_HOST_ALLOCATION = 1u << 2,
  VKRT_HANDLE_DMA_BUF = 1u << 3,
};

struct vkrt_caps {
  /* identity */
  char device_name[256];
  char driver_name[256];
  char driver_info[256];
  uint32_t vendor_id, device_id, driver_version, api_version;
  uint32_t physical_index;
  uint8_t device_uuid[16], driver_uuid[16];
  bool is_cpu;                     /* VK_PHYSICAL_DEVICE_TYPE_CPU (lavapipe) */
  bool refuses_file_backed_fault;  /* VKRT_FAULT_REFUSE_FILE_BACKED: act as a driver that
                                      refuses importing file-backed pages */

  /* extensions present AND their functions resolved on this device */
  bool external_memory_host;       /* VK_EXT_external_memory_host + vkGetMemoryHostPointerPropertiesEXT */
  bool external_memory_fd;         /* VK_KHR_external_memory_fd + vkGetMemoryFdKHR */
  bool external_semaphore_fd;      /* VK_KHR_external_semaphore_fd + get/import functions */
  bool timeline_semaphore;         /* feature timelineSemaphore */
  bool memory_budget;              /* VK_EXT_memory_budget */
  bool storage_buffer_16bit;       /* storageBuffer16BitAccess */
  bool shader_float16;             /* shaderFloat16 */
  bool subgroup_size_control;      /* VK_EXT_subgroup_size_control or 1.3 */
  bool integer_dot_product;        /* shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product
                                      or 1.3): the 8-bit-activation quant kernels */
  bool push_descriptor;            /* VK_KHR_push_descriptor */
  bool buffer_device_address;      /* bufferDeviceAddress (Vulkan 1.2): reported, not used
                                      (the ops bind with push descriptors) */
  bool cooperative_matrix;         /* VK_NV_cooperative_matrix with a subgroup-scope 16x16x16
                                      f16 x f16 + f32 -> f32 shape, shaderFloat16 and
                                      vulkanMemoryModel: the tiled matmul's f16 tiles */
  bool cooperative_matrix_khr;     /* VK_KHR_cooperative_matrix advertised; unused: its
                                      kernels need GL_KHR_cooperative_matrix, which this
                                      build's glslc (shaderc 2023.2) does not have */

  /* external handle types really supported (from vkGetPhysicalDeviceExternal*Properties) */
  uint32_t semaphore_export_handles;  /* exportable timeline semaphore handle types */
  uint32_t semaphore_import_handles;
  uint32_t host_buffer_import_handles; /* buffer handle types importable (HOST_ALLOCATION) */

  /* limits */
  uint64_t min_imported_host_pointer_alignment;
  uint64_t max_memory_allocation_size;
  uint64_t max_buffer_size;
  uint64_t max_storage_buffer_range;
  uint64_t min_storage_buffer_offset_alignment;
  uint32_t max_push_constants_size;
  uint32_t max_compute_shared_memory_size;
  uint32_t max_compute_work_group_count[3];
  uint32_t max_compute_work_group_size[3];
  uint32_t max_compute_work_group_invocations;
  uint32_t subgroup_size;
  uint32_t min_subgroup_size, max_subgroup_size;
  /* compute units (NVIDIA SMs from VK_NV_shader_sm_builtins, AMD CUs from
   * VK_AMD_shader_core_properties); 0: the device does not say */
  uint32_t compute_units;
  double timestamp_period_ns;
  bool has_transfer_queue;
  /* Row images: R32_UINT images in linear tiling can be copy destinations from every queue
   * family at texel granularity, up to these extents (0: no). A load moves the narrow rows of a
   * strided range with one 2D copy into such an image aliasing the destination. */
  uint32_t row_image_max_width, row_image_max_height;
  uint32_t row_image_pitch_align; /* bytes: the row pitch of a one-texel-wide such image */

  /* memory */
  uint32_t heap_count, type_count;
  uint64_t heap_size[VKRT_CAPS_MAX_HEAPS];
  uint64_t heap_budget[VKRT_CAPS_MAX_HEAPS]; /* 0 when memory_budget is false */
  uint32_t heap_flags[VKRT_CAPS_MAX_HEAPS];
  uint32_t type_flags[VKRT_CAPS_MAX_TYPES];
  uint32_t type_heap[VKRT_CAPS_MAX_TYPES];
  uint32_t host_import_memory_type_bits; /* from vkGetMemoryHostPointerPropertiesEXT on a probe page */
};

/* Writes the capability part of the probe output as JSON members ("key": value, ...) or as
 * readable "vkrt: devN ..." lines. Returns bytes needed like snprintf. */
size_t vkrt_caps_describe(const struct vkrt_caps *caps, uint32_t index, bool json, char *buf,
                          size_t size);

/* Board matching (pure). The board rule comes from Kconfig or options; the candidates are
 * the snapshots of every enumerated physical device. */
enum vkrt_match_rule { VKRT_MATCH_INDEX, VKRT_MATCH_ID, VKRT_MATCH_UUID };

struct vkrt_board {
  const char *name;
  uint32_t device_count;
  bool simulated;
  enum vkrt_match_rule rule;
  uint32_t vendor_id, device_id;       /* MATCH_ID; device_id 0 = any */
  uint8_t uuids[8][16];                /* MATCH_UUID */
  uint32_t uuid_count;                 /* MATCH_UUID: entries of uuids in use */
  /* Explicit per-rank physical indices (options.physical_device_index); overrides rule. */
  bool explicit_indices;
  uint32_t indices[8];
};

/* The board described by Kconfig. Fails only on a malformed CONFIG_VKRT_DEVICE_UUIDS. */
bool vkrt_board_from_config(struct vkrt_board *out, char *why, size_t why_size);
/* Parses "0123..ef,..." into uuids; returns the count or -1 with a reason. */
int vkrt_board_parse_uuids(const char *text, uint8_t uuids[8][16], char *why, size_t why_size);

/* Picks physical devices for each rank: out_physical[rank] = candidate index. Simulated
 * boards map every rank to one candidate. Returns false with a message naming what was
 * expected and what was found. */
bool vkrt_board_match(const struct vkrt_board *board, const struct vkrt_caps *candidates,
                      uint32_t candidate_count, uint32_t out_physical[8], char *why,
                      size_t why_size);
