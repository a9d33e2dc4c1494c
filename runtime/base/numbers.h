/* The one f16 <-> f32 conversion and the one pseudo-random generator of the tree: the
 * runtime's CPU reduce and quantization references, the tests, vkrt-bench and vkrt-service
 * all use these (inline: the CPU reduce converts every element). Needs nothing but C11. */
#pragma once
#include <stdint.h>
#include <string.h>

/* IEEE half bits -> float, every case: subnormals normalized, infinities, NaN payloads. */
static inline float vkrt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (!mant) {
    bits = sign;
  } else { /* subnormal: normalize */
    exp = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      exp--;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

/* float -> IEEE half bits, rounded to nearest even as F16C's vcvtps2ph and the kernels' f16
 * stores round: 65520 and up to infinity, subnormal halves in units of 2^-24, a NaN kept
 * quiet with the top of its payload. */
static inline uint16_t vkrt_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu, h, rem, mid;
  if (a > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) /* 65520 and up, infinity included */
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { /* a normal half: the exponent rebiased by 127 - 15 */
    uint32_t r = a - 0x38000000u;
    h = r >> 13, rem = r & 0x1fffu, mid = 0x1000u;
  } else { /* a subnormal half, or zero */
    if (a < 0x33000000u)
      return (uint16_t)sign;
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    h = m >> shift, rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
  }
  if (rem > mid || (rem == mid && (h & 1u)))
    h++; /* a carry into the exponent is the correct rounding */
  return (uint16_t)(sign | h);
}

/* xorshift64*: steps *state and returns the next 64 pseudo-random bits (the high ones are the
 * best). A state of 0, the generator's one fixed point, starts from 0x9e3779b97f4a7c15. */
static inline uint64_t vkrt_xorshift(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545f4914f6cdd1dull;
}
