/* Preloaded into the ASan test programs by tests/run: keeps Mesa's lavapipe ICD (and with it
 * libLLVM) and the Khronos validation layer mapped for the whole process. The Vulkan loader
 * dlcloses both at every vkDestroyInstance, and both leave allocations behind per load (Mesa
 * 22.3: util_cpu_caps.L3_affinity_mask, realloc'd in get_cpu_topology on AMD Zen CPUs and
 * never freed). Once a library is unmapped, its frames print as "<unknown module>" (or as
 * whatever library is mapped at that address later) and no suppression can name them; kept
 * mapped, they symbolize to the library, which tests/sanitizers/lsan.supp names. RTLD_LOCAL:
 * no symbol becomes visible to the program; the loader's own dlopen of the same file gets
 * this handle. A library that is not installed is skipped. Test-only. */
#include <dlfcn.h>

__attribute__((constructor)) static void keep_vulkan_libraries_loaded(void) {
  (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  (void)dlopen("libVkLayer_khronos_validation.so", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}
