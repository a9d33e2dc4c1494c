/* Internal base services every object embeds or reaches: the injected allocator (with
 * live-allocation counting and fault injection), the log, and error statuses with messages. */
#pragma once
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "vkrt/config_check.h"
#include "vkrt/vkrt.h"

#define VKRT_ERROR_MESSAGE_SIZE 1024
#define VKRT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define VKRT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VKRT_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define VKRT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define VKRT_PRINTF(fmt, args)
#endif

struct vkrt_base {
  vkrt_allocator allocator;
  atomic_long live_allocations;  /* host allocations not yet freed (leak checks) */
  atomic_uint host_alloc_count;  /* for fault injection: fail the Nth */
  uint32_t host_alloc_fail_at;   /* 0 = never */
  vkrt_log_fn log;
  void *log_user;
  vkrt_log_level log_level;
  uint64_t error_owner;          /* tags this base's messages in the per-thread buffer */
};

void vkrt_base_init(struct vkrt_base *base, const vkrt_options *options);
void vkrt_base_finish(struct vkrt_base *base);

/* Allocation through the injected allocator. NULL on failure (or injected failure). */
void *vkrt_alloc(struct vkrt_base *base, size_t size);
void *vkrt_alloc_aligned(struct vkrt_base *base, size_t size, size_t alignment);
void *vkrt_calloc(struct vkrt_base *base, size_t count, size_t size);
void vkrt_free(struct vkrt_base *base, void *ptr);

/* Log at a level; compiled out above CONFIG_VKRT_LOG_LEVEL. */
void vkrt_log_impl(const struct vkrt_base *base, vkrt_log_level level, const char *fmt, ...)
    VKRT_PRINTF(3, 4);
#define vkrt_log(base, level, ...)                                 \
  do {                                                             \
    if ((int)(level) <= CONFIG_VKRT_LOG_LEVEL)                     \
      vkrt_log_impl((base), (level), __VA_ARGS__);                 \
  } while (0)

/* Records `status` with a formatted message as this thread's last error for base's owner (base
 * itself is only read, so const getters can fail with a message), logs it (ERROR, or WARN for
 * VKRT_ERROR_UNAVAILABLE) and returns status, so callers write `return vkrt_error(...)`. */
vkrt_status vkrt_error(const struct vkrt_base *base, vkrt_status status, const char *fmt, ...)
    VKRT_PRINTF(3, 4);
vkrt_status vkrt_verror(const struct vkrt_base *base, vkrt_status status, const char *fmt, va_list ap);
/* The message of the last error this thread recorded on base ("no error" when none): each
 * thread has its own, so another thread's failure never overwrites the one a caller reads. */
const char *vkrt_base_last_error(const struct vkrt_base *base);
uint64_t vkrt_base_error_owner_next(void);

/* snprintf into a fixed buffer, always NUL-terminated, never failing. */
void vkrt_format(char *buf, size_t size, const char *fmt, ...) VKRT_PRINTF(3, 4);

/* snprintf-style text accumulation for the describe functions: writes what fits, keeps
 * counting what would not, so callers return the length needed like snprintf. */
struct vkrt_text {
  char *buf;
  size_t size, len;
};
void vkrt_text_put(struct vkrt_text *t, const char *fmt, ...) VKRT_PRINTF(2, 3);
/* A JSON string literal with the escapes a device name or a reason could need. */
void vkrt_text_json_string(struct vkrt_text *t, const char *s);
/* Where a nested describe function may write, and how much room is left there. */
char *vkrt_text_cursor(struct vkrt_text *t, size_t *room);
/* Accounts for n bytes a nested describe function wrote (or needed) at the cursor. */
static inline void vkrt_text_advance(struct vkrt_text *t, size_t n) { t->len += n; }

/* Overflow-checked arithmetic for validation paths. Return false on overflow. */
static inline bool vkrt_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool vkrt_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline uint64_t vkrt_align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static inline uint64_t vkrt_align_down(uint64_t v, uint64_t a) { return v / a * a; }

/* Monotonic clock in nanoseconds. */
uint64_t vkrt_now_ns(void);

/* One step of a bounded spin: tells the core a spin-wait loop is running. */
static inline void vkrt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}
