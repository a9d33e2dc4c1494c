/* Capability decoding and description: pure functions, unit-tested without a GPU. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "device/caps_decode.h"

bool vkrt_caps_has_extension(const VkExtensionProperties *extensions, uint32_t count,
                             const char *name) {
  for (uint32_t i = 0; i < count; i++)
    if (strcmp(extensions[i].extensionName, name) == 0)
      return true;
  return false;
}

static uint32_t semaphore_bits(const VkExternalSemaphoreProperties *p,
                               VkExternalSemaphoreFeatureFlags feature, uint32_t bit) {
  return (p->externalSemaphoreFeatures & feature) ? bit : 0;
}

static uint32_t buffer_import_bit(const VkExternalBufferProperties *p, uint32_t bit) {
  return (p->externalMemoryProperties.externalMemoryFeatures &
          VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT)
             ? bit
             : 0;
}

void vkrt_caps_decode(const struct vkrt_caps_input *in, struct vkrt_caps *out) {
  memset(out, 0, sizeof(*out));
  const VkPhysicalDeviceProperties *p = in->props;
  const VkPhysicalDeviceLimits *l = &p->limits;
  vkrt_format(out->device_name, sizeof(out->device_name), "%s", p->deviceName);
  out->vendor_id = p->vendorID;
  out->device_id = p->deviceID;
  out->driver_version = p->driverVersion;
  out->api_version = p->apiVersion;
  out->physical_index = in->physical_index;
  out->is_cpu = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  if (in->id) {
    memcpy(out->device_uuid, in->id->deviceUUID, 16);
    memcpy(out->driver_uuid, in->id->driverUUID, 16);
  }
  if (in->driver) {
    vkrt_format(out->driver_name, sizeof(out->driver_name), "%s", in->driver->driverName);
    vkrt_format(out->driver_info, sizeof(out->driver_info), "%s", in->driver->driverInfo);
  }

  /* Extensions: present, not hidden by fault injection, and (once the device exists) the
   * functions resolved through this device's own table. */
  const struct vkrt_device_table *fn = in->functions;
#define HAS(name) vkrt_caps_has_extension(in->extensions, in->extension_count, name)
  bool hide_host = in->hidden & VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST;
  bool hide_semfd = in->hidden & VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD;
  out->refuses_file_backed_fault = in->hidden & VKRT_FAULT_REFUSE_FILE_BACKED;
  out->external_memory_host = !hide_host && HAS(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) &&
                              (!fn || fn->vkGetMemoryHostPointerPropertiesEXT);
  out->external_memory_fd = HAS(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME) &&
                            (!fn || (fn->vkGetMemoryFdKHR && fn->vkGetMemoryFdPropertiesKHR));
  out->external_semaphore_fd = !hide_semfd && HAS(VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME) &&
                               (!fn || (fn->vkGetSemaphoreFdKHR && fn->vkImportSemaphoreFdKHR));
  out->memory_budget = HAS(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  out->push_descriptor = HAS(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) &&
                         (!fn || fn->vkCmdPushDescriptorSetKHR);
#undef HAS
  out->timeline_semaphore = in->timeline && in->timeline->timelineSemaphore;
  out->storage_buffer_16bit = in->storage16 && in->storage16->storageBuffer16BitAccess;
  out->integer_dot_product = in->integer_dot && in->integer_dot->shaderIntegerDotProduct;
  out->buffer_device_address = in->device_address && in->device_address->bufferDeviceAddress;
  out->shader_float16 = in->float16 && in->float16->shaderFloat16;
  out->cooperative_matrix_khr =
      vkrt_caps_has_extension(in->extensions, in->extension_count, "VK_KHR_cooperative_matrix");
  out->cooperative_matrix = in->coopmat && in->coopmat->cooperativeMatrix && out->shader_float16 &&
                            in->memory_model && in->memory_model->vulkanMemoryModel;
  bool shape = false;
  for (uint32_t i = 0; out->cooperative_matrix && i < in->coopmat_shape_count; i++) {
    const VkCooperativeMatrixPropertiesNV *m = &in->coopmat_shapes[i];
    shape |= m->MSize == 16 && m->NSize == 16 && m->KSize == 16 &&
             m->AType == VK_COMPONENT_TYPE_FLOAT16_NV && m->BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
             m->CType == VK_COMPONENT_TYPE_FLOAT32_NV && m->DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
             m->scope == VK_SCOPE_SUBGROUP_NV;
  }
  out->cooperative_matrix = out->cooperative_matrix && shape;
  out->subgroup_size_control = in->subgroup_size_features &&
                               in->subgroup_size_features->subgroupSizeControl &&
                               in->subgroup_size;

  /* Handle types: what the driver says it can really do with timeline semaphores and
   * buffers; hidden features report none. */
  if (!hide_semfd) {
    out->semaphore_export_handles =
        semaphore_bits(&in->semaphore_opaque_fd, VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT,
                       VKRT_HANDLE_OPAQUE_FD) |
        semaphore_bits(&in->semaphore_sync_fd, VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT,
                       VKRT_HANDLE_SYNC_FD);
    out->semaphore_import_handles =
        semaphore_bits(&in->semaphore_opaque_fd, VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT,
                       VKRT_HANDLE_OPAQUE_FD) |
        semaphore_bits(&in->semaphore_sync_fd, VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT,
                       VKRT_HANDLE_SYNC_FD);
  }
  out->host_buffer_import_handles =
      (hide_host ? 0 : buffer_import_bit(&in->buffer_host_allocation, VKRT_HANDLE_HOST_ALLOCATION)) |
      buffer_import_bit(&in->buffer_opaque_fd, VKRT_HANDLE_OPAQUE_FD) |
      buffer_import_bit(&in->buffer_dma_buf, VKRT_HANDLE_DMA_BUF);

  /* limits */
  out->min_imported_host_pointer_alignment =
      (!hide_host && in->host) ? in->host->minImportedHostPointerAlignment : 0;
  out->max_memory_allocation_size = in->maintenance3 ? in->maintenance3->maxMemoryAllocationSize : 0;
  /* Without maintenance4 no buffer size limit is reported; the allocation limit is the
   * safe stand-in (a buffer larger than one allocation could not be bound anyway). */
  out->max_buffer_size = in->maintenance4 ? in->maintenance4->maxBufferSize
                                          : out->max_memory_allocation_size;
  out->max_storage_buffer_range = l->maxStorageBufferRange;
  out->min_storage_buffer_offset_alignment = l->minStorageBufferOffsetAlignment;
  out->max_push_constants_size = l->maxPushConstantsSize;
  out->max_compute_shared_memory_size = l->maxComputeSharedMemorySize;
  for (int i = 0; i < 3; i++) {
    out->max_compute_work_group_count[i] = l->maxComputeWorkGroupCount[i];
    out->max_compute_work_group_size[i] = l->maxComputeWorkGroupSize[i];
  }
  out->max_compute_work_group_invocations = l->maxComputeWorkGroupInvocations;
  out->subgroup_size = in->subgroup ? in->subgroup->subgroupSize : 0;
  out->min_subgroup_size = in->subgroup_size ? in->subgroup_size->minSubgroupSize : out->subgroup_size;
  out->max_subgroup_size = in->subgroup_size ? in->subgroup_size->maxSubgroupSize : out->subgroup_size;
  out->timestamp_period_ns = l->timestampPeriod;
  if (in->sm_builtins)
    out->compute_units = in->sm_builtins->shaderSMCount;
  else if (in->amd_core)
    out->compute_units = in->amd_core->shaderEngineCount * in->amd_core->shaderArraysPerEngineCount *
                         in->amd_core->computeUnitsPerShaderArray;

  for (uint32_t i = 0; i < in->family_count; i++) {
    VkQueueFlags f = in->families[i].queueFlags;
    if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) &&
        in->families[i].queueCount > 0 && !(in->hidden & VKRT_FAULT_HIDE_TRANSFER_QUEUE))
      out->has_transfer_queue = true;
  }

  bool texel_granular = true;
  for (uint32_t i = 0; i < in->family_count; i++) {
    const VkExtent3D g = in->families[i].minImageTransferGranularity;
    if (in->families[i].queueCount && (g.width != 1 || g.height != 1 || g.depth != 1))
      texel_granular = false;
  }
  if (in->row_image_queried && texel_granular &&
      (in->row_format.linearTilingFeatures & VK_FORMAT_FEATURE_TRANSFER_DST_BIT)) {
    out->row_image_max_width = in->row_image.maxExtent.width;
    out->row_image_max_height = in->row_image.maxExtent.height;
  }

  /* memory */
  const VkPhysicalDeviceMemoryProperties *m = in->memory;
  out->heap_count = VKRT_MIN(m->memoryHeapCount, (uint32_t)VKRT_CAPS_MAX_HEAPS);
  out->type_count = VKRT_MIN(m->memoryTypeCount, (uint32_t)VKRT_CAPS_MAX_TYPES);
  for (uint32_t i = 0; i < out->heap_count; i++) {
    out->heap_size[i] = m->memoryHeaps[i].size;
    out->heap_flags[i] = m->memoryHeaps[i].flags;
    out->heap_budget[i] = (out->memory_budget && in->budget) ? in->budget->heapBudget[i] : 0;
  }
  for (uint32_t i = 0; i < out->type_count; i++) {
    out->type_flags[i] = m->memoryTypes[i].propertyFlags;
    out->type_heap[i] = m->memoryTypes[i].heapIndex;
  }
  out->host_import_memory_type_bits = out->external_memory_host ? in->host_import_memory_type_bits : 0;
}

/* ---- description ------------------------------------------------------------------- */



static void uuid_str(const uint8_t uuid[16], char out[33]) {
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", uuid[i]);
}

static void handle_names(uint32_t bits, char *buf, size_t size) {
  static const char *const names[] = {"opaque_fd", "sync_fd", "host_allocation", "dma_buf"};
  size_t used = 0;
  buf[0] = '\0';
  for (unsigned i = 0; i < VKRT_ARRAY_SIZE(names); i++) {
    if (!(bits & (1u << i)))
      continue;
    int n = snprintf(buf + used, size - used, "%s%s", used ? "," : "", names[i]);
    if (n < 0 || (size_t)n >= size - used)
      break;
    used += (size_t)n;
  }
  if (!used)
    vkrt_format(buf, size, "none");
}

size_t vkrt_caps_describe(const struct vkrt_caps *c, uint32_t index, bool json, char *buf,
                          size_t size) {
  struct vkrt_text o = {buf, buf ? size : 0, 0};
  if (o.size)
    buf[0] = '\0';
  char duuid[33], druuid[33];
  uuid_str(c->device_uuid, duuid);
  uuid_str(c->driver_uuid, druuid);
  const char *yes[2] = {"false", "true"};
  if (json) {
    vkrt_text_put(&o, "\"index\": %u, \"name\": ", index);
    vkrt_text_json_string(&o, c->device_name);
    vkrt_text_put(&o, ", \"driver_name\": ");
    vkrt_text_json_string(&o, c->driver_name);
    vkrt_text_put(&o, ", \"driver_info\": ");
    vkrt_text_json_string(&o, c->driver_info);
    vkrt_text_put(&o,
        ", \"vendor_id\": %u, \"device_id\": %u, \"driver_version\": %u, \"api_version\": "
        "\"%u.%u.%u\", \"physical_index\": %u, \"device_uuid\": \"%s\", \"driver_uuid\": "
        "\"%s\", \"is_cpu\": %s",
        c->vendor_id, c->device_id, c->driver_version, VK_API_VERSION_MAJOR(c->api_version),
        VK_API_VERSION_MINOR(c->api_version), VK_API_VERSION_PATCH(c->api_version),
        c->physical_index, duuid, druuid, yes[c->is_cpu]);
    vkrt_text_put(&o,
        ", \"external_memory_host\": %s, \"external_memory_fd\": %s, "
        "\"external_semaphore_fd\": %s, \"timeline_semaphore\": %s, \"memory_budget\": %s, "
        "\"storage_buffer_16bit\": %s, \"shader_float16\": %s, \"subgroup_size_control\": %s, "
        "\"push_descriptor\": %s, \"has_transfer_queue\": %s, \"integer_dot_product\": %s, "
        "\"cooperative_matrix\": %s, \"cooperative_matrix_khr\": %s",
        yes[c->external_memory_host], yes[c->external_memory_fd], yes[c->external_semaphore_fd],
        yes[c->timeline_semaphore], yes[c->memory_budget], yes[c->storage_buffer_16bit],
        yes[c->shader_float16], yes[c->subgroup_size_control], yes[c->push_descriptor],
        yes[c->has_transfer_queue], yes[c->integer_dot_product], yes[c->cooperative_matrix],
        yes[c->cooperative_matrix_khr]);
    vkrt_text_put(&o,
        ", \"semaphore_export_handles\": %u, \"semaphore_import_handles\": %u, "
        "\"host_buffer_import_handles\": %u, \"host_import_memory_type_bits\": %u",
        c->semaphore_export_handles, c->semaphore_import_handles, c->host_buffer_import_handles,
        c->host_import_memory_type_bits);
    vkrt_text_put(&o,
        ", \"limits\": {\"min_imported_host_pointer_alignment\": %llu, "
        "\"max_memory_allocation_size\": %llu, \"max_buffer_size\": %llu, "
        "\"max_storage_buffer_range\": %llu, \"min_storage_buffer_offset_alignment\": %llu, "
        "\"max_push_constants_size\": %u, \"max_compute_shared_memory_size\": %u, "
        "\"max_compute_work_group_count\": [%u, %u, %u], "
        "\"max_compute_work_group_size\": [%u, %u, %u], "
        "\"max_compute_work_group_invocations\": %u, \"subgroup_size\": %u, "
        "\"min_subgroup_size\": %u, \"max_subgroup_size\": %u, \"compute_units\": %u, "
        "\"timestamp_period_ns\": %g, \"row_image_max\": [%u, %u], "
        "\"row_image_pitch_align\": %u}",
        (unsigned long long)c->min_imported_host_pointer_alignment,
        (unsigned long long)c->max_memory_allocation_size,
        (unsigned long long)c->max_buffer_size, (unsigned long long)c->max_storage_buffer_range,
        (unsigned long long)c->min_storage_buffer_offset_alignment, c->max_push_constants_size,
        c->max_compute_shared_memory_size, c->max_compute_work_group_count[0],
        c->max_compute_work_group_count[1], c->max_compute_work_group_count[2],
        c->max_compute_work_group_size[0], c->max_compute_work_group_size[1],
        c->max_compute_work_group_size[2], c->max_compute_work_group_invocations,
        c->subgroup_size, c->min_subgroup_size, c->max_subgroup_size, c->compute_units,
        c->timestamp_period_ns, c->row_image_max_width, c->row_image_max_height,
        c->row_image_pitch_align);
    vkrt_text_put(&o, ", \"memory_heaps\": [");
    for (uint32_t i = 0; i < c->heap_count; i++)
      vkrt_text_put(&o, "%s{\"size\": %llu, \"budget\": %llu, \"device_local\": %s}", i ? ", " : "",
          (unsigned long long)c->heap_size[i], (unsigned long long)c->heap_budget[i],
          yes[(c->heap_flags[i] & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0]);
    vkrt_text_put(&o, "], \"memory_types\": [");
    for (uint32_t i = 0; i < c->type_count; i++)
      vkrt_text_put(&o, "%s{\"heap\": %u, \"flags\": %u}", i ? ", " : "", c->type_heap[i],
          c->type_flags[i]);
    vkrt_text_put(&o, "]");
    return o.len;
  }

  char sem_export[64], sem_import[64], buf_import[64];
  handle_names(c->semaphore_export_handles, sem_export, sizeof(sem_export));
  handle_names(c->semaphore_import_handles, sem_import, sizeof(sem_import));
  handle_names(c->host_buffer_import_handles, buf_import, sizeof(buf_import));
  const char *yn[2] = {"no", "yes"};
  vkrt_text_put(&o, "vkrt: dev%u %s (vendor 0x%x device 0x%x, %s%s, Vulkan %u.%u.%u) physical %u\n", index,
      c->device_name, c->vendor_id, c->device_id, c->driver_name[0] ? c->driver_name : "driver",
      c->is_cpu ? ", cpu" : "", VK_API_VERSION_MAJOR(c->api_version),
      VK_API_VERSION_MINOR(c->api_version), VK_API_VERSION_PATCH(c->api_version),
      c->physical_index);
  vkrt_text_put(&o, "vkrt: dev%u uuid %s driver_uuid %s\n", index, duuid, druuid);
  vkrt_text_put(&o,
      "vkrt: dev%u external_memory_host %s external_memory_fd %s external_semaphore_fd %s "
      "timeline_semaphore %s memory_budget %s\n",
      index, yn[c->external_memory_host], yn[c->external_memory_fd],
      yn[c->external_semaphore_fd], yn[c->timeline_semaphore], yn[c->memory_budget]);
  vkrt_text_put(&o,
      "vkrt: dev%u storage_buffer_16bit %s shader_float16 %s subgroup_size_control %s "
      "push_descriptor %s transfer_queue %s integer_dot_product %s row_images %ux%u (rows a "
      "multiple of %u bytes)\n",
      index, yn[c->storage_buffer_16bit], yn[c->shader_float16], yn[c->subgroup_size_control],
      yn[c->push_descriptor], yn[c->has_transfer_queue], yn[c->integer_dot_product],
      c->row_image_max_width, c->row_image_max_height, c->row_image_pitch_align);
  vkrt_text_put(&o,
      "vkrt: dev%u cooperative_matrix %s (VK_NV_cooperative_matrix 16x16x16 f16 x f16 -> f32)"
      "%s\n", index, yn[c->cooperative_matrix],
      c->cooperative_matrix_khr ? "; VK_KHR_cooperative_matrix advertised, not used (this "
                                  "build's glslc lacks GL_KHR_cooperative_matrix)" : "");
  vkrt_text_put(&o,
      "vkrt: dev%u timeline semaphore export %s import %s; buffer import %s; host import "
      "memory types 0x%x\n",
      index, sem_export, sem_import, buf_import, c->host_import_memory_type_bits);
  vkrt_text_put(&o,
      "vkrt: dev%u limits min_imported_host_pointer_alignment %llu max_memory_allocation_size "
      "%llu max_buffer_size %llu max_storage_buffer_range %llu\n",
      index, (unsigned long long)c->min_imported_host_pointer_alignment,
      (unsigned long long)c->max_memory_allocation_size, (unsigned long long)c->max_buffer_size,
      (unsigned long long)c->max_storage_buffer_range);
  vkrt_text_put(&o,
      "vkrt: dev%u limits shared_memory %u workgroup_size %u,%u,%u invocations %u "
      "workgroup_count %u,%u,%u subgroup %u (%u..%u) push_constants %u compute_units %u\n",
      index, c->max_compute_shared_memory_size, c->max_compute_work_group_size[0],
      c->max_compute_work_group_size[1], c->max_compute_work_group_size[2],
      c->max_compute_work_group_invocations, c->max_compute_work_group_count[0],
      c->max_compute_work_group_count[1], c->max_compute_work_group_count[2], c->subgroup_size,
      c->min_subgroup_size, c->max_subgroup_size, c->max_push_constants_size, c->compute_units);
  for (uint32_t i = 0; i < c->heap_count; i++)
    vkrt_text_put(&o, "vkrt: dev%u heap %u size %llu budget %llu%s\n", index, i,
        (unsigned long long)c->heap_size[i], (unsigned long long)c->heap_budget[i],
        (c->heap_flags[i] & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? " device_local" : "");
  for (uint32_t i = 0; i < c->type_count; i++)
    vkrt_text_put(&o, "vkrt: dev%u memory type %u heap %u flags 0x%x\n", index, i, c->type_heap[i],
        c->type_flags[i]);
  return o.len;
}
