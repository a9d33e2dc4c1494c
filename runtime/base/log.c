#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/base.h"

void vkrt_base_init(struct vkrt_base *base, const vkrt_options *options) {
  memset(base, 0, sizeof(*base));
  base->allocator = options->allocator;
  if (!base->allocator.alloc || !base->allocator.free)
    base->allocator = vkrt_allocator_system();
  base->log = options->log;
  base->log_user = options->log_user;
  base->log_level = options->log_level;
  if (IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)) {
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
    base->host_alloc_fail_at = options->faults.host_alloc_fail_at;
#endif
  }
  base->error_owner = vkrt_base_error_owner_next();
}

void vkrt_base_finish(struct vkrt_base *base) { (void)base; }

void vkrt_log_impl(const struct vkrt_base *base, vkrt_log_level level, const char *fmt, ...) {
  if (!base || !base->log || level > base->log_level)
    return;
  char message[VKRT_ERROR_MESSAGE_SIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  base->log(base->log_user, level, message);
}

uint64_t vkrt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
