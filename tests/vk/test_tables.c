/* Each device calls Vulkan through its own function table. On lavapipe (and on any one-driver
 * machine) every VkDevice gets the same pointers from vkGetDeviceProcAddr, so a device using
 * another's table works by accident and no result shows it. This program interposes the
 * loader's vkGetInstanceProcAddr (libvkrt links it; CONFIG_VKRT_LOADER_STATIC) and hands out,
 * for a few device functions, a distinct trampoline per VkDevice that checks the device it is
 * called with is the one it was resolved for. Covered: vkCreateBuffer (every device, at open
 * and buffer creation), vkGetMemoryHostPointerPropertiesEXT (host import), and
 * vkImportSemaphoreFdKHR (native_fd's semaphore import; needs VK_KHR_external_semaphore_fd,
 * which lavapipe lacks: skipped there, run on the GPU). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

#include "../common/vk_test.h"

#define SLOTS 8 /* VkDevices seen since the last tables_reset */

static PFN_vkGetInstanceProcAddr real_gipa;
static PFN_vkGetDeviceProcAddr real_gdpa;
static VkDevice slot_device[SLOTS];
static uint32_t slot_count;
static atomic_uint mismatches, calls[SLOTS];
static char first_mismatch[160];

static void tables_reset(void) {
  memset(slot_device, 0, sizeof(slot_device));
  slot_count = 0;
  atomic_store(&mismatches, 0);
  for (uint32_t k = 0; k < SLOTS; k++)
    atomic_store(&calls[k], 0);
  first_mismatch[0] = '\0';
}

/* A trampoline of slot k called with `device`: counts, and notes a foreign device. */
static void tables_check(uint32_t k, VkDevice device, const char *name) {
  atomic_fetch_add(&calls[k], 1);
  if (device == slot_device[k])
    return;
  if (atomic_fetch_add(&mismatches, 1) == 0) {
    uint32_t other = SLOTS;
    for (uint32_t j = 0; j < slot_count; j++)
      other = slot_device[j] == device ? j : other;
    snprintf(first_mismatch, sizeof(first_mismatch),
             "%s resolved for VkDevice #%u called with VkDevice #%u", name, k, other);
  }
}

/* One trampoline per slot and function: fn_k checks it is called with slot k's device and
 * forwards to real_fn[k], what the driver returned for slot k. */
#define TRAMPOLINE(k, fn, params, args)                                                       \
  static VKAPI_ATTR VkResult VKAPI_CALL fn##_##k params {                                     \
    tables_check(k, device, #fn);                                                             \
    return real_##fn[k] args;                                                                 \
  }
#define TRAMPOLINES(fn, params, args)                                                         \
  static PFN_##fn real_##fn[SLOTS];                                                           \
  TRAMPOLINE(0, fn, params, args) TRAMPOLINE(1, fn, params, args)                             \
  TRAMPOLINE(2, fn, params, args) TRAMPOLINE(3, fn, params, args)                             \
  TRAMPOLINE(4, fn, params, args) TRAMPOLINE(5, fn, params, args)                             \
  TRAMPOLINE(6, fn, params, args) TRAMPOLINE(7, fn, params, args)                             \
  static const PFN_##fn fn##_for[SLOTS] = {fn##_0, fn##_1, fn##_2, fn##_3,                    \
                                           fn##_4, fn##_5, fn##_6, fn##_7};
_Static_assert(SLOTS == 8, "TRAMPOLINES makes 8 per function");

TRAMPOLINES(vkCreateBuffer,
            (VkDevice device, const VkBufferCreateInfo *info, const VkAllocationCallbacks *alloc,
             VkBuffer *out),
            (device, info, alloc, out))
TRAMPOLINES(vkGetMemoryHostPointerPropertiesEXT,
            (VkDevice device, VkExternalMemoryHandleTypeFlagBits type, const void *ptr,
             VkMemoryHostPointerPropertiesEXT *props),
            (device, type, ptr, props))
TRAMPOLINES(vkImportSemaphoreFdKHR, (VkDevice device, const VkImportSemaphoreFdInfoKHR *info),
            (device, info))

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL wrapped_gdpa(VkDevice device, const char *name) {
  PFN_vkVoidFunction real = real_gdpa(device, name);
  if (!real)
    return NULL;
  uint32_t k = 0;
  while (k < slot_count && slot_device[k] != device)
    k++;
  if (k == SLOTS)
    return real; /* more devices than slots: not checked */
  if (k == slot_count)
    slot_device[slot_count++] = device;
#define INTERPOSE(fn)                                                                         \
  if (strcmp(name, #fn) == 0) {                                                               \
    real_##fn[k] = (PFN_##fn)real;                                                            \
    return (PFN_vkVoidFunction)fn##_for[k];                                                   \
  }
  INTERPOSE(vkCreateBuffer)
  INTERPOSE(vkGetMemoryHostPointerPropertiesEXT)
  INTERPOSE(vkImportSemaphoreFdKHR)
#undef INTERPOSE
  return real;
}

/* Interposes the loader's entry point: libvkrt's reference binds to this definition at link
 * time (so the linker may drop libvulkan; the real one comes from dlopen). */
VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetInstanceProcAddr(VkInstance instance,
                                                               const char *name) {
  if (!real_gipa) {
    void *loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!loader)
      return NULL;
    real_gipa = (PFN_vkGetInstanceProcAddr)dlsym(loader, "vkGetInstanceProcAddr");
  }
  PFN_vkVoidFunction f = real_gipa(instance, name);
  if (f && instance && strcmp(name, "vkGetDeviceProcAddr") == 0) {
    real_gdpa = (PFN_vkGetDeviceProcAddr)f;
    return (PFN_vkVoidFunction)wrapped_gdpa;
  }
  return f;
}

/* Every device's own trampolines were used, and only with their own device. */
static void expect_own_tables(uint32_t devices) {
  if (atomic_load(&mismatches))
    fail_msg("%u call(s) through another device's function table; first: %s",
             atomic_load(&mismatches), first_mismatch);
  assert_int_equal(slot_count, devices);
  for (uint32_t k = 0; k < devices; k++)
    if (!atomic_load(&calls[k]))
      fail_msg("no trampoline of VkDevice #%u was called (interposition inactive?)", k);
}

static vkrt_appliance *open_tables(vkrt_transport_kind transport) {
  vkrt_options o;
  vkt_options(&o);
  o.collective_transport = transport;
  tables_reset();
  return vkt_open(&o);
}

/* Buffers and a registered (imported) region on every device. */
static void test_device_tables(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_LOADER_STATIC));
  vkrt_appliance *app = open_tables(VKRT_TRANSPORT_NONE);
  const uint32_t n = vkrt_device_count(app);
  assert_true(n >= 2);
  for (uint32_t d = 0; d < n; d++) {
    vkrt_buffer *buf;
    vkt_check(app, vkrt_buffer_create(app, d, 65536, VKRT_BUFFER_DEVICE_LOCAL, &buf));
    vkrt_buffer_destroy(buf);
  }
  vkrt_device_info info;
  vkt_check(app, vkrt_device_info_get(app, 0, &info));
  if (info.external_memory_host) {
    const size_t size = 1u << 20;
    void *mem = aligned_alloc(65536, size);
    assert_non_null(mem);
    memset(mem, 0x5a, size);
    vkrt_register_info reg;
    vkt_check(app, vkrt_host_register(app, mem, size, NULL, NULL, &reg));
    vkt_check(app, vkrt_host_unregister(app, mem));
    free(mem);
  }
  expect_own_tables(n);
  vkt_close(app);
}

/* native_fd: each peer imports the exported semaphore with its own vkImportSemaphoreFdKHR. */
static void test_native_fd_import_tables(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_LOADER_STATIC) ||
              !IS_ENABLED(CONFIG_VKRT_TRANSPORT_NATIVE_FD));
  vkrt_appliance *probe = open_tables(VKRT_TRANSPORT_NONE);
  vkrt_device_info info;
  vkt_check(probe, vkrt_device_info_get(probe, 0, &info));
  vkt_close(probe);
  if (!info.external_semaphore_fd)
    vkt_skip("native_fd needs VK_KHR_external_semaphore_fd, which this driver lacks (lavapipe "
             "22.3): runs on the GPU (tools/gpu-test.sh)");
  vkrt_appliance *app = open_tables(VKRT_TRANSPORT_NATIVE_FD);
  assert_int_equal(vkrt_transport(app), VKRT_TRANSPORT_NATIVE_FD);
  const uint32_t n = vkrt_device_count(app);
  for (uint32_t d = 0; d < n; d++) {
    vkrt_buffer *buf;
    vkt_check(app, vkrt_buffer_create(app, d, 4096, VKRT_BUFFER_DEVICE_LOCAL, &buf));
    vkrt_buffer_destroy(buf);
  }
  expect_own_tables(n);
  vkt_close(app);
}

int main(int argc, char **argv) {
  if (argc > 1) /* one case by name or pattern (tools/mutation-check.sh) */
    cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_tables),
      cmocka_unit_test(test_native_fd_import_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
