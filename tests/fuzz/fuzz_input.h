/* Byte-stream reader for fuzz harnesses: reads past the end yield zeros, never fault. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct fuzz_input {
  const uint8_t *data;
  size_t size, pos;
};

static inline uint64_t fuzz_bytes(struct fuzz_input *in, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++)
    v |= (uint64_t)(in->pos < in->size ? in->data[in->pos++] : 0) << (8 * i);
  return v;
}
static inline uint8_t fuzz_u8(struct fuzz_input *in) { return (uint8_t)fuzz_bytes(in, 1); }
static inline uint32_t fuzz_u32(struct fuzz_input *in) { return (uint32_t)fuzz_bytes(in, 4); }
static inline uint64_t fuzz_u64(struct fuzz_input *in) { return fuzz_bytes(in, 8); }
/* Small values most of the time, extreme ones sometimes: shapes that reach deep paths. */
static inline int64_t fuzz_dim(struct fuzz_input *in) {
  uint8_t kind = fuzz_u8(in);
  switch (kind & 7) {
  case 0: return (int64_t)fuzz_u64(in);             /* anything, negative included */
  case 1: return -(int64_t)(fuzz_u8(in));           /* small negative */
  case 2: return (int64_t)fuzz_u32(in);
  default: return (int64_t)(fuzz_u8(in) % 70);      /* small, 0 included */
  }
}
