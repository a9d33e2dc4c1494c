#include <stdio.h>
#include <string.h>

#include "base/base.h"

const char *vkrt_status_str(vkrt_status status) {
  static const char *const names[VKRT_STATUS_COUNT] = {
      [VKRT_OK] = "VKRT_OK",
      [VKRT_ERROR_INVALID_ARGUMENT] = "VKRT_ERROR_INVALID_ARGUMENT",
      [VKRT_ERROR_OUT_OF_HOST_MEMORY] = "VKRT_ERROR_OUT_OF_HOST_MEMORY",
      [VKRT_ERROR_OUT_OF_DEVICE_MEMORY] = "VKRT_ERROR_OUT_OF_DEVICE_MEMORY",
      [VKRT_ERROR_UNAVAILABLE] = "VKRT_ERROR_UNAVAILABLE",
      [VKRT_ERROR_UNSUPPORTED] = "VKRT_ERROR_UNSUPPORTED",
      [VKRT_ERROR_BOARD_MISMATCH] = "VKRT_ERROR_BOARD_MISMATCH",
      [VKRT_ERROR_NO_DEVICE] = "VKRT_ERROR_NO_DEVICE",
      [VKRT_ERROR_VULKAN] = "VKRT_ERROR_VULKAN",
      [VKRT_ERROR_DEVICE_LOST] = "VKRT_ERROR_DEVICE_LOST",
      [VKRT_ERROR_TIMEOUT] = "VKRT_ERROR_TIMEOUT",
      [VKRT_ERROR_NOT_FOUND] = "VKRT_ERROR_NOT_FOUND",
      [VKRT_ERROR_ALREADY_EXISTS] = "VKRT_ERROR_ALREADY_EXISTS",
      [VKRT_ERROR_BUDGET] = "VKRT_ERROR_BUDGET",
      [VKRT_ERROR_INTERNAL] = "VKRT_ERROR_INTERNAL",
      [VKRT_ERROR_IO] = "VKRT_ERROR_IO",
  };
  if ((unsigned)status >= VKRT_STATUS_COUNT || !names[status])
    return "VKRT_ERROR_UNKNOWN";
  return names[status];
}

void vkrt_format(char *buf, size_t size, const char *fmt, ...) {
  if (!buf || size == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

/* One message per thread, tagged with the base that recorded it (a unique number, not the
 * address: a closed appliance's successor may reuse it). */
static _Thread_local struct {
  uint64_t owner;
  char text[VKRT_ERROR_MESSAGE_SIZE];
} thread_error;

static atomic_uint_fast64_t next_error_owner = 1;

uint64_t vkrt_base_error_owner_next(void) { return atomic_fetch_add(&next_error_owner, 1); }

const char *vkrt_base_last_error(const struct vkrt_base *base) {
  return base && thread_error.owner == base->error_owner ? thread_error.text : "no error";
}

vkrt_status vkrt_verror(const struct vkrt_base *base, vkrt_status status, const char *fmt, va_list ap) {
  if (!base)
    return status;
  char message[VKRT_ERROR_MESSAGE_SIZE];
  if (IS_ENABLED(CONFIG_VKRT_DETAILED_STATUS)) {
    vsnprintf(message, sizeof(message), fmt, ap);
  } else {
    vkrt_format(message, sizeof(message), "%s", vkrt_status_str(status));
  }
  memcpy(thread_error.text, message, sizeof(message));
  thread_error.owner = base->error_owner;
  vkrt_log(base, status == VKRT_ERROR_UNAVAILABLE ? VKRT_LOG_WARN : VKRT_LOG_ERROR, "%s: %s",
           vkrt_status_str(status), message);
  return status;
}

vkrt_status vkrt_error(const struct vkrt_base *base, vkrt_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vkrt_status s = vkrt_verror(base, status, fmt, ap);
  va_end(ap);
  return s;
}

char *vkrt_text_cursor(struct vkrt_text *t, size_t *room) {
  *room = t->len < t->size ? t->size - t->len : 0;
  return *room ? t->buf + t->len : NULL;
}

void vkrt_text_put(struct vkrt_text *t, const char *fmt, ...) {
  size_t room;
  char *dst = vkrt_text_cursor(t, &room);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (n > 0)
    t->len += (size_t)n;
}

void vkrt_text_json_string(struct vkrt_text *t, const char *s) {
  vkrt_text_put(t, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      vkrt_text_put(t, "\\%c", c);
    else if (c < 0x20)
      vkrt_text_put(t, "\\u%04x", c);
    else
      vkrt_text_put(t, "%c", c);
  }
  vkrt_text_put(t, "\"");
}
