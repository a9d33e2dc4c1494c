/* Helpers private to runtime/device. */
#pragma once
#include "device/device.h"

/* Creates / destroys the device's stream (pool, ring of command buffers, timeline). */
vkrt_status vkrt_stream_init(struct vkrt_device *dev);
void vkrt_stream_finish(struct vkrt_device *dev);
