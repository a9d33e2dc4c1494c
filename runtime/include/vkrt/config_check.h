/* Combinations Kconfig cannot express. configure refuses them first with the same words;
 * this keeps a hand-edited config.h honest. */
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
