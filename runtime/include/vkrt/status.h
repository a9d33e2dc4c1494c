#pragma once
/* Status codes: 0 is OK. VKRT_ERROR_UNAVAILABLE means "this path cannot be used here, a
 * fallback may be taken"; every other error is a hard error. */
typedef enum vkrt_status {
  VKRT_OK = 0,
  VKRT_ERROR_INVALID_ARGUMENT,   /* bad input: shapes, ranges, pointers, sizes */
  VKRT_ERROR_OUT_OF_HOST_MEMORY,
  VKRT_ERROR_OUT_OF_DEVICE_MEMORY,
  VKRT_ERROR_UNAVAILABLE,        /* not possible on this device; a fallback may be taken */
  VKRT_ERROR_UNSUPPORTED,        /* compiled out of this build */
  VKRT_ERROR_BOARD_MISMATCH,     /* devices present do not match the board */
  VKRT_ERROR_NO_DEVICE,          /* no Vulkan loader or no physical device */
  VKRT_ERROR_VULKAN,             /* an unexpected VkResult */
  VKRT_ERROR_DEVICE_LOST,
  VKRT_ERROR_TIMEOUT,
  VKRT_ERROR_NOT_FOUND,          /* e.g. unregistering a pointer never registered */
  VKRT_ERROR_ALREADY_EXISTS,     /* e.g. registering an overlapping range */
  VKRT_ERROR_BUDGET,             /* over a configured memory budget */
  VKRT_ERROR_INTERNAL,
  VKRT_ERROR_IO,                 /* a file could not be opened or read */
  VKRT_STATUS_COUNT
} vkrt_status;

/* Stable name of a status, e.g. "VKRT_ERROR_TIMEOUT". Never NULL. */
const char *vkrt_status_str(vkrt_status status);
