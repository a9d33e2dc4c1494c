/* Guard that should never fire: Kconfig (depends on, hidden helpers, choices) lets no menu,
 * randconfig, allyesconfig or allnoconfig reach these combinations, and configure refuses a
 * hand-edited .config with the same words (tools/kconfig.py check_combinations). This keeps a
 * hand-edited config.h honest. */
#pragma once
#include "vkrt/kconfig.h"

#if IS_ENABLED(CONFIG_VKRT_COLLECTIVES) && !IS_ENABLED(CONFIG_VKRT_TRANSPORT_NATIVE_FD) && \
    !IS_ENABLED(CONFIG_VKRT_TRANSPORT_CPU_PROXY) && !IS_ENABLED(CONFIG_VKRT_TRANSPORT_HOST_STAGED)
#error "CONFIG_VKRT_COLLECTIVES=y needs at least one transport (NATIVE_FD, CPU_PROXY or HOST_STAGED)"
#endif
#if IS_ENABLED(CONFIG_VKRT_TRANSPORT_PREFER_CPU_PROXY) && !IS_ENABLED(CONFIG_VKRT_TRANSPORT_CPU_PROXY)
#error "CONFIG_VKRT_TRANSPORT_PREFER_CPU_PROXY needs CONFIG_VKRT_TRANSPORT_CPU_PROXY"
#endif
#if IS_ENABLED(CONFIG_VKRT_CONCAT_TRANSPOSED_FAST_PATH) && \
    !(IS_ENABLED(CONFIG_VKRT_KERNEL_CONCAT) && IS_ENABLED(CONFIG_VKRT_KERNEL_COPY) && \
      IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE))
#error "the concat fast path needs the concat, copy and transpose kernels"
#endif
#if CONFIG_VKRT_DEVICE_COUNT < 1 || CONFIG_VKRT_DEVICE_COUNT > 8
#error "CONFIG_VKRT_DEVICE_COUNT must be 1..8"
#endif
#if IS_ENABLED(CONFIG_VKRT_DEVICE_MATCH_ID) && IS_ENABLED(CONFIG_VKRT_DEVICE_MATCH_UUID)
#error "a board matches its devices by id or by UUID, not both"
#endif
