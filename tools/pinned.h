#pragma once
#include <stdint.h>

#include "vkrt/vkrt.h"

/* The pinned host-to-device rate, the yardstick of a load (vkrt-bench upload --file,
 * vkrt-service): `size` bytes at `host`, registered by the caller, uploaded to devices
 * 0..devices-1 in equal parts, all at once (a thread per device when there are several:
 * devices that share a GPU share its copy engines), four times; bytes per second of the best
 * of the last three (the first warms the path). 0 when it cannot be measured. */
double tool_pinned_rate(vkrt_appliance *app, const uint8_t *host, uint64_t size,
                        uint32_t devices);
