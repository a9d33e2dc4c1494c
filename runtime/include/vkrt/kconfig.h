/* IS_ENABLED(CONFIG_X): 1 when configure defined CONFIG_X to 1, else 0 (the Linux trick),
 * so code can use plain `if (IS_ENABLED(...))` and let the compiler drop dead paths. */
#pragma once
#include "vkrt/config.h"

#define VKRT_ARG_PLACEHOLDER_1 0,
#define VKRT_TAKE_SECOND(ignored, val, ...) val
#define VKRT_IS_DEFINED3(arg1_or_junk) VKRT_TAKE_SECOND(arg1_or_junk 1, 0, 0)
#define VKRT_IS_DEFINED2(val) VKRT_IS_DEFINED3(VKRT_ARG_PLACEHOLDER_##val)
#define IS_ENABLED(option) VKRT_IS_DEFINED2(option)
