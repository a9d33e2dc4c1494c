/* Capability decoding from hand-built Vulkan structs (no GPU) and its description. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "device/caps_decode.h"
#include "vkrt/vkrt.h"

/* One physical device's query results, shaped like what caps_query fills. */
struct fake {
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceIDProperties id;
  VkPhysicalDeviceDriverProperties driver;
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host;
  VkPhysicalDeviceSubgroupProperties subgroup;
  VkPhysicalDeviceSubgroupSizeControlProperties subgroup_size;
  VkPhysicalDeviceMaintenance3Properties m3;
  VkPhysicalDeviceMaintenance4Properties m4;
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline;
  VkPhysicalDevice16BitStorageFeatures s16;
  VkPhysicalDeviceShaderFloat16Int8Features f16;
  VkPhysicalDeviceSubgroupSizeControlFeatures sgf;
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm;
  VkPhysicalDeviceShaderCorePropertiesAMD amd;
  VkPhysicalDeviceMemoryProperties memory;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget;
  VkExtensionProperties ext[16];
  VkQueueFamilyProperties families[3];
  struct vkrt_caps_input in;
};

static void add_ext(struct fake *f, const char *name) {
  snprintf(f->ext[f->in.extension_count++].extensionName, VK_MAX_EXTENSION_NAME_SIZE, "%s", name);
}

/* An H200 as measured (boards/nvidia-h200-x1/README.md): every extension, 4 GiB
 * allocations, 1 TiB buffers. */
static void h200(struct fake *f) {
  memset(f, 0, sizeof(*f));
  snprintf(f->props.deviceName, sizeof(f->props.deviceName), "NVIDIA H200");
  f->props.vendorID = 0x10de;
  f->props.deviceID = 0x2335;
  f->props.apiVersion = VK_MAKE_API_VERSION(0, 1, 4, 312);
  f->props.deviceType = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  f->props.limits.maxStorageBufferRange = 0xffffffffu;
  f->props.limits.minStorageBufferOffsetAlignment = 16;
  f->props.limits.maxPushConstantsSize = 256;
  f->props.limits.maxComputeSharedMemorySize = 49152;
  f->props.limits.maxComputeWorkGroupCount[0] = 0x7fffffff;
  f->props.limits.maxComputeWorkGroupCount[1] = 65535;
  f->props.limits.maxComputeWorkGroupCount[2] = 65535;
  f->props.limits.maxComputeWorkGroupSize[0] = 1024;
  f->props.limits.maxComputeWorkGroupSize[1] = 1024;
  f->props.limits.maxComputeWorkGroupSize[2] = 64;
  f->props.limits.maxComputeWorkGroupInvocations = 1024;
  f->props.limits.timestampPeriod = 1.0f;
  memset(f->id.deviceUUID, 0x5a, 16);
  memset(f->id.driverUUID, 0x33, 16);
  snprintf(f->driver.driverName, sizeof(f->driver.driverName), "NVIDIA");
  snprintf(f->driver.driverInfo, sizeof(f->driver.driverInfo), "580.159");
  f->host.minImportedHostPointerAlignment = 4096;
  f->subgroup.subgroupSize = 32;
  f->subgroup_size.minSubgroupSize = 32;
  f->subgroup_size.maxSubgroupSize = 32;
  f->m3.maxMemoryAllocationSize = 0xffe00000ull;
  f->m4.maxBufferSize = 1ull << 40;
  f->timeline.timelineSemaphore = VK_TRUE;
  f->s16.storageBuffer16BitAccess = VK_TRUE;
  f->f16.shaderFloat16 = VK_TRUE;
  f->sgf.subgroupSizeControl = VK_TRUE;
  f->sm.shaderSMCount = 132;
  f->memory.memoryHeapCount = 2;
  f->memory.memoryHeaps[0] = (VkMemoryHeap){150ull << 30, VK_MEMORY_HEAP_DEVICE_LOCAL_BIT};
  f->memory.memoryHeaps[1] = (VkMemoryHeap){1ull << 40, 0};
  f->memory.memoryTypeCount = 2;
  f->memory.memoryTypes[0] = (VkMemoryType){VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
  f->memory.memoryTypes[1] = (VkMemoryType){
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 1};
  f->budget.heapBudget[0] = 140ull << 30;
  f->budget.heapBudget[1] = 900ull << 30;
  f->families[0] = (VkQueueFamilyProperties){
      .queueFlags = VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT,
      .queueCount = 16};
  f->families[1] = (VkQueueFamilyProperties){.queueFlags = VK_QUEUE_TRANSFER_BIT, .queueCount = 2};
  f->families[2] = (VkQueueFamilyProperties){
      .queueFlags = VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT, .queueCount = 8};
  add_ext(f, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  add_ext(f, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  add_ext(f, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
  add_ext(f, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  add_ext(f, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  struct vkrt_caps_input *in = &f->in;
  in->physical_index = 3;
  in->props = &f->props;
  in->id = &f->id;
  in->driver = &f->driver;
  in->host = &f->host;
  in->subgroup = &f->subgroup;
  in->subgroup_size = &f->subgroup_size;
  in->maintenance3 = &f->m3;
  in->maintenance4 = &f->m4;
  in->timeline = &f->timeline;
  in->storage16 = &f->s16;
  in->float16 = &f->f16;
  in->subgroup_size_features = &f->sgf;
  in->sm_builtins = &f->sm;
  in->extensions = f->ext;
  in->memory = &f->memory;
  in->budget = &f->budget;
  in->families = f->families;
  in->family_count = 3;
  in->semaphore_opaque_fd.externalSemaphoreFeatures =
      VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT | VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT;
  in->buffer_host_allocation.externalMemoryProperties.externalMemoryFeatures =
      VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT;
  in->buffer_opaque_fd.externalMemoryProperties.externalMemoryFeatures =
      VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT | VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT;
  in->host_import_memory_type_bits = 0x2;
}

/* lavapipe 22.3 (Debian 12): host import and memory fd, no semaphore fd, no budget, no
 * maintenance4 report, no transfer-only family. */
static void lavapipe(struct fake *f) {
  h200(f);
  snprintf(f->props.deviceName, sizeof(f->props.deviceName), "llvmpipe (LLVM 15.0.6, 256 bits)");
  f->props.vendorID = 0x10005;
  f->props.deviceID = 0;
  f->props.deviceType = VK_PHYSICAL_DEVICE_TYPE_CPU;
  f->m3.maxMemoryAllocationSize = 2ull << 30;
  f->in.maintenance4 = NULL;
  f->in.budget = NULL;
  f->in.family_count = 1;
  f->in.extension_count = 0;
  add_ext(f, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  add_ext(f, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  f->in.semaphore_opaque_fd.externalSemaphoreFeatures = 0;
  f->in.sm_builtins = NULL;
}

static void test_h200(void **state) {
  (void)state;
  struct fake f;
  h200(&f);
  struct vkrt_caps c;
  vkrt_caps_decode(&f.in, &c);
  assert_string_equal(c.device_name, "NVIDIA H200");
  assert_string_equal(c.driver_name, "NVIDIA");
  assert_int_equal(c.vendor_id, 0x10de);
  assert_int_equal(c.physical_index, 3);
  assert_false(c.is_cpu);
  assert_int_equal(c.device_uuid[15], 0x5a);
  assert_int_equal(c.driver_uuid[0], 0x33);
  assert_true(c.external_memory_host);
  assert_true(c.external_memory_fd);
  assert_true(c.external_semaphore_fd);
  assert_true(c.timeline_semaphore);
  assert_true(c.memory_budget);
  assert_true(c.storage_buffer_16bit);
  assert_true(c.shader_float16);
  assert_true(c.subgroup_size_control);
  assert_true(c.push_descriptor);
  assert_true(c.has_transfer_queue);
  assert_int_equal(c.semaphore_export_handles, VKRT_HANDLE_OPAQUE_FD);
  assert_int_equal(c.semaphore_import_handles, VKRT_HANDLE_OPAQUE_FD);
  assert_int_equal(c.host_buffer_import_handles, VKRT_HANDLE_HOST_ALLOCATION | VKRT_HANDLE_OPAQUE_FD);
  assert_int_equal(c.min_imported_host_pointer_alignment, 4096);
  assert_int_equal(c.max_memory_allocation_size, 0xffe00000ull);
  assert_int_equal(c.max_buffer_size, 1ull << 40);
  assert_int_equal(c.max_storage_buffer_range, 0xffffffffu);
  assert_int_equal(c.max_compute_shared_memory_size, 49152);
  assert_int_equal(c.max_compute_work_group_count[0], 0x7fffffff);
  assert_int_equal(c.max_compute_work_group_size[2], 64);
  assert_int_equal(c.subgroup_size, 32);
  assert_int_equal(c.compute_units, 132);
  assert_int_equal(c.heap_count, 2);
  assert_int_equal(c.heap_size[0], 150ull << 30);
  assert_int_equal(c.heap_budget[0], 140ull << 30);
  assert_int_equal(c.heap_flags[0], VK_MEMORY_HEAP_DEVICE_LOCAL_BIT);
  assert_int_equal(c.type_count, 2);
  assert_int_equal(c.type_heap[1], 1);
  assert_int_equal(c.host_import_memory_type_bits, 0x2);
}

static void test_lavapipe(void **state) {
  (void)state;
  struct fake f;
  lavapipe(&f);
  struct vkrt_caps c;
  vkrt_caps_decode(&f.in, &c);
  assert_true(c.is_cpu);
  assert_true(c.external_memory_host);
  assert_true(c.external_memory_fd);
  assert_false(c.external_semaphore_fd);
  assert_false(c.memory_budget);
  assert_false(c.push_descriptor);
  assert_false(c.has_transfer_queue);
  assert_int_equal(c.semaphore_export_handles, 0);
  assert_int_equal(c.heap_budget[0], 0); /* no budget extension: no budget */
  /* no maintenance4: the allocation limit stands in for the buffer limit */
  assert_int_equal(c.max_buffer_size, 2ull << 30);
  assert_int_equal(c.compute_units, 0); /* a CPU device says nothing of its cores */
  /* an AMD GPU: shader engines x arrays per engine x CUs per array */
  f.amd.shaderEngineCount = 4;
  f.amd.shaderArraysPerEngineCount = 2;
  f.amd.computeUnitsPerShaderArray = 8;
  f.in.amd_core = &f.amd;
  vkrt_caps_decode(&f.in, &c);
  assert_int_equal(c.compute_units, 64);
}

/* Cooperative matrices: the NV extension with its feature, a subgroup 16x16x16 f16 x f16 +
 * f32 shape, shaderFloat16 and the Vulkan memory model; each missing piece turns it off. The
 * KHR extension is recorded as advertised only. */
static void test_cooperative_matrix(void **state) {
  (void)state;
  struct fake f;
  h200(&f);
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {.cooperativeMatrix = VK_TRUE};
  VkPhysicalDeviceVulkanMemoryModelFeatures mm = {.vulkanMemoryModel = VK_TRUE};
  VkCooperativeMatrixPropertiesNV shapes[2] = {
      {.MSize = 16, .NSize = 8, .KSize = 16, .AType = VK_COMPONENT_TYPE_FLOAT16_NV,
       .BType = VK_COMPONENT_TYPE_FLOAT16_NV, .CType = VK_COMPONENT_TYPE_FLOAT32_NV,
       .DType = VK_COMPONENT_TYPE_FLOAT32_NV, .scope = VK_SCOPE_SUBGROUP_NV},
      {.MSize = 16, .NSize = 16, .KSize = 16, .AType = VK_COMPONENT_TYPE_FLOAT16_NV,
       .BType = VK_COMPONENT_TYPE_FLOAT16_NV, .CType = VK_COMPONENT_TYPE_FLOAT32_NV,
       .DType = VK_COMPONENT_TYPE_FLOAT32_NV, .scope = VK_SCOPE_SUBGROUP_NV}};
  struct vkrt_caps c;
  vkrt_caps_decode(&f.in, &c); /* extension absent */
  assert_false(c.cooperative_matrix);
  assert_false(c.cooperative_matrix_khr);
  add_ext(&f, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  add_ext(&f, "VK_KHR_cooperative_matrix");
  f.in.coopmat = &cm;
  f.in.memory_model = &mm;
  f.in.coopmat_shapes = shapes;
  f.in.coopmat_shape_count = 2;
  vkrt_caps_decode(&f.in, &c);
  assert_true(c.cooperative_matrix);
  assert_true(c.cooperative_matrix_khr);
  f.in.coopmat_shape_count = 1; /* only 16x8x16 */
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.cooperative_matrix);
  f.in.coopmat_shape_count = 2;
  shapes[1].CType = shapes[1].DType = VK_COMPONENT_TYPE_FLOAT16_NV; /* f16 accumulators */
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.cooperative_matrix);
  shapes[1].CType = shapes[1].DType = VK_COMPONENT_TYPE_FLOAT32_NV;
  f.f16.shaderFloat16 = VK_FALSE;
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.cooperative_matrix);
  f.f16.shaderFloat16 = VK_TRUE;
  mm.vulkanMemoryModel = VK_FALSE;
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.cooperative_matrix);
  mm.vulkanMemoryModel = VK_TRUE;
  cm.cooperativeMatrix = VK_FALSE;
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.cooperative_matrix);
}

/* The extension is listed, but this device's table lacks the function: capability false. */
static void test_function_missing(void **state) {
  (void)state;
  struct fake f;
  h200(&f);
  struct vkrt_device_table table;
  memset(&table, 0, sizeof(table));
  f.in.functions = &table;
  struct vkrt_caps c;
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.external_memory_host);
  assert_false(c.external_semaphore_fd);
  assert_false(c.external_memory_fd);
  assert_false(c.push_descriptor);
  assert_int_equal(c.host_import_memory_type_bits, 0);

  /* only the semaphore pair missing one half */
  table.vkGetMemoryHostPointerPropertiesEXT = (PFN_vkGetMemoryHostPointerPropertiesEXT)1;
  table.vkGetSemaphoreFdKHR = (PFN_vkGetSemaphoreFdKHR)1;
  table.vkGetMemoryFdKHR = (PFN_vkGetMemoryFdKHR)1;
  table.vkGetMemoryFdPropertiesKHR = (PFN_vkGetMemoryFdPropertiesKHR)1;
  vkrt_caps_decode(&f.in, &c);
  assert_true(c.external_memory_host);
  assert_true(c.external_memory_fd);
  assert_false(c.external_semaphore_fd); /* vkImportSemaphoreFdKHR is NULL */
  table.vkImportSemaphoreFdKHR = (PFN_vkImportSemaphoreFdKHR)1;
  vkrt_caps_decode(&f.in, &c);
  assert_true(c.external_semaphore_fd);
}

static void test_hidden(void **state) {
  (void)state;
  struct fake f;
  h200(&f);
  struct vkrt_caps plain, c;
  vkrt_caps_decode(&f.in, &plain);
  f.in.hidden = VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD;
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.external_semaphore_fd);
  assert_int_equal(c.semaphore_export_handles, 0);
  assert_int_equal(c.semaphore_import_handles, 0);
  assert_true(c.external_memory_host);
  /* everything else identical */
  c.external_semaphore_fd = plain.external_semaphore_fd;
  c.semaphore_export_handles = plain.semaphore_export_handles;
  c.semaphore_import_handles = plain.semaphore_import_handles;
  assert_memory_equal(&c, &plain, sizeof(c));

  f.in.hidden = VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST;
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.external_memory_host);
  assert_true(c.external_semaphore_fd);
  assert_int_equal(c.min_imported_host_pointer_alignment, 0);
  assert_int_equal(c.host_import_memory_type_bits, 0);
  assert_int_equal(c.host_buffer_import_handles, VKRT_HANDLE_OPAQUE_FD);

  f.in.hidden = VKRT_FAULT_HIDE_TRANSFER_QUEUE;
  vkrt_caps_decode(&f.in, &c);
  assert_false(c.has_transfer_queue);
}

/* Only required structs: everything optional reads false / 0, nothing crashes. */
static void test_minimal(void **state) {
  (void)state;
  VkPhysicalDeviceProperties props;
  memset(&props, 0, sizeof(props));
  snprintf(props.deviceName, sizeof(props.deviceName), "bare");
  VkPhysicalDeviceMemoryProperties memory;
  memset(&memory, 0, sizeof(memory));
  memory.memoryHeapCount = 40; /* corrupt counts are clamped */
  memory.memoryTypeCount = 40;
  struct vkrt_caps_input in;
  memset(&in, 0, sizeof(in));
  in.props = &props;
  in.memory = &memory;
  struct vkrt_caps c;
  vkrt_caps_decode(&in, &c);
  assert_false(c.timeline_semaphore);
  assert_false(c.external_memory_host);
  assert_false(c.subgroup_size_control);
  assert_int_equal(c.max_buffer_size, 0);
  assert_int_equal(c.heap_count, VKRT_CAPS_MAX_HEAPS);
  assert_int_equal(c.type_count, VKRT_CAPS_MAX_TYPES);
  assert_string_equal(c.driver_name, "");
}

static int count_char(const char *s, char ch) {
  int n = 0;
  for (; *s; s++)
    n += *s == ch;
  return n;
}

static void test_describe(void **state) {
  (void)state;
  struct fake f;
  lavapipe(&f);
  snprintf(f.props.deviceName, sizeof(f.props.deviceName), "quote\" back\\slash");
  struct vkrt_caps c;
  vkrt_caps_decode(&f.in, &c);
  char buf[8192];
  size_t n = vkrt_caps_describe(&c, 1, true, buf, sizeof(buf));
  assert_int_equal(n, strlen(buf));
  assert_non_null(strstr(buf, "\"index\": 1"));
  assert_non_null(strstr(buf, "\"external_semaphore_fd\": false"));
  assert_non_null(strstr(buf, "\"external_memory_host\": true"));
  assert_non_null(strstr(buf, "\"name\": \"quote\\\" back\\\\slash\""));
  assert_non_null(strstr(buf, "\"max_memory_allocation_size\": 2147483648"));
  assert_non_null(strstr(buf, "\"compute_units\": 0"));
  assert_int_equal(count_char(buf, '{'), count_char(buf, '}'));
  assert_int_equal(count_char(buf, '['), count_char(buf, ']'));
  /* truncation: the full length is still returned and the buffer stays terminated */
  char small[32];
  assert_int_equal(vkrt_caps_describe(&c, 1, true, small, sizeof(small)), n);
  assert_int_equal(strlen(small), sizeof(small) - 1);
  assert_int_equal(vkrt_caps_describe(&c, 1, true, NULL, 0), n);

  n = vkrt_caps_describe(&c, 0, false, buf, sizeof(buf));
  assert_int_equal(n, strlen(buf));
  assert_non_null(strstr(buf, "vkrt: dev0 "));
  assert_non_null(strstr(buf, "external_semaphore_fd no"));
  assert_non_null(strstr(buf, "external_memory_host yes"));
  assert_non_null(strstr(buf, "buffer import opaque_fd,host_allocation"));
  /* every line is an NCCL-style "vkrt: devN" line */
  for (char *line = buf; *line; line = strchr(line, '\n') + 1)
    assert_int_equal(strncmp(line, "vkrt: dev0 ", 11), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_h200),    cmocka_unit_test(test_lavapipe),
      cmocka_unit_test(test_function_missing), cmocka_unit_test(test_hidden),
      cmocka_unit_test(test_minimal), cmocka_unit_test(test_describe),
      cmocka_unit_test(test_cooperative_matrix),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
