/* The lab's own header (runtime/lab/, built with CONFIG_VKRT_LAB): how a vkrt/vkrt_lab.h call
 * finds the device it names. The lab sits above the appliance: it reads and sets the state of
 * the ops, the device streams and the import registry through their internal headers. */
#pragma once
#include "appliance/appliance.h"
#include "base/base.h"
#include "ops/ops.h"
#include "vkrt/vkrt_lab.h"

/* The device `device` of the appliance with its ops state open (vkrt_open opened it); `arg`
 * is the pointer argument the call needs (its out or config): NULL is refused. */
vkrt_status vkrt_lab_device_of(const vkrt_appliance *app, uint32_t device, const void *arg,
                               struct vkrt_device **out);
/* VKRT_ERROR_INVALID_ARGUMENT with the message fmt (one %lld: value) on dev's appliance. */
vkrt_status vkrt_lab_bad(struct vkrt_device *dev, const char *fmt, long long value);
