/* Element types: sizes, block sizes, names, and the CPU dequantization of the ggml block
 * formats written from their definition (ggml-common.h block_q8_0 / block_q4_K / block_q6_K
 * and dequantize_row_q8_0 / _q4_K / _q6_K): the reference the kernels are tested
 * against, and what vkrt-service checks its layers with. Pure C, always built. */
#include <math.h>
#include <string.h>

#include "base/numbers.h"
#include "vkrt/vkrt.h"

static const struct {
  const char *name;
  uint32_t size;  /* bytes per block */
  uint32_t block; /* elements per block */
} type_info[VKRT_TYPE_COUNT] = {
  [VKRT_TYPE_F32] = {"f32", 4, 1},
  [VKRT_TYPE_F16] = {"f16", 2, 1},
  [VKRT_TYPE_Q8_0] = {"q8_0", 34, 32},
  [VKRT_TYPE_Q4_K] = {"q4_K", 144, 256},
  [VKRT_TYPE_I32] = {"i32", 4, 1},
  [VKRT_TYPE_Q6_K] = {"q6_K", 210, 256},
};

size_t vkrt_type_size(vkrt_type type) {
  return (unsigned)type < VKRT_TYPE_COUNT ? type_info[type].size : 0;
}

uint32_t vkrt_type_block(vkrt_type type) {
  return (unsigned)type < VKRT_TYPE_COUNT ? type_info[type].block : 0;
}

const char *vkrt_type_str(vkrt_type type) {
  return (unsigned)type < VKRT_TYPE_COUNT ? type_info[type].name : "?";
}

static uint16_t load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Sub-block j (0..7) of a Q4_K super-block: 6-bit scale and min from the 12 packed bytes
 * (ggml's get_scale_min_k4): j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 in the
 * nibbles of byte j + 4 with the top 2 bits of bytes j - 4 (scale) and j (min). */
static void q4_k_scale_min(int j, const uint8_t *q, uint8_t *scale, uint8_t *min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (uint8_t)((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4));
    *min = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

vkrt_status vkrt_dequantize_row(vkrt_type type, const void *src, float *dst, int64_t n) {
  uint32_t block = vkrt_type_block(type);
  if (!block || n < 0 || n % block || (n && (!src || !dst)))
    return VKRT_ERROR_INVALID_ARGUMENT;
  const uint8_t *p = src;
  switch (type) {
  case VKRT_TYPE_F32:
    memcpy(dst, src, (size_t)n * 4);
    break;
  case VKRT_TYPE_F16:
    for (int64_t i = 0; i < n; i++)
      dst[i] = vkrt_f16_to_f32(load_u16(p + 2 * i));
    break;
  case VKRT_TYPE_Q8_0:
    /* block: f16 d, then int8 q[32]; w[i] = d * q[i] */
    for (int64_t b = 0; b < n / 32; b++, p += 34) {
      float d = vkrt_f16_to_f32(load_u16(p));
      for (int i = 0; i < 32; i++)
        dst[b * 32 + i] = d * (float)(int8_t)p[2 + i];
    }
    break;
  case VKRT_TYPE_Q4_K:
    /* super-block: f16 d, f16 dmin, scales[12], qs[128]. The 256 weights are 4 groups of 64:
     * group g takes qs[32g .. 32g + 32), low nibbles are its first 32 weights (sub-block
     * 2g), high nibbles its next 32 (sub-block 2g + 1); w = d * scale * q - dmin * min. */
    for (int64_t b = 0; b < n / 256; b++, p += 144) {
      float d = vkrt_f16_to_f32(load_u16(p)), dmin = vkrt_f16_to_f32(load_u16(p + 2));
      const uint8_t *scales = p + 4, *qs = p + 16;
      float *y = dst + b * 256;
      for (int g = 0; g < 4; g++) {
        uint8_t sc, m;
        q4_k_scale_min(2 * g, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        q4_k_scale_min(2 * g + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) {
          y[64 * g + l] = d1 * (float)(qs[32 * g + l] & 15) - m1;
          y[64 * g + 32 + l] = d2 * (float)(qs[32 * g + l] >> 4) - m2;
        }
      }
    }
    break;
  case VKRT_TYPE_Q6_K:
    /* super-block: ql[128], qh[64], int8 scales[16], f16 d. Two halves of 128 weights (ql
     * 64 bytes, qh 32, scales 8 each); weight 32 j + l of a half (j = 0..3, l = 0..31) is
     * the low (j < 2) or high nibble of ql[l + 32 (j % 2)] with bits 2 j, 2 j + 1 of qh[l]
     * above it, less 32, times d * scales[l / 16 + 2 j]. */
    for (int64_t b = 0; b < n / 256; b++, p += 210) {
      float d = vkrt_f16_to_f32(load_u16(p + 208));
      for (int half = 0; half < 2; half++) {
        const uint8_t *ql = p + 64 * half, *qh = p + 128 + 32 * half;
        const int8_t *sc = (const int8_t *)(p + 192 + 8 * half);
        float *y = dst + b * 256 + 128 * half;
        for (int l = 0; l < 32; l++) {
          int is = l / 16;
          int q1 = (int8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          int q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          int q3 = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          int q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * sc[is + 0] * (float)q1;
          y[l + 32] = d * sc[is + 2] * (float)q2;
          y[l + 64] = d * sc[is + 4] * (float)q3;
          y[l + 96] = d * sc[is + 6] * (float)q4;
        }
      }
    }
    break;
  default:
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  return VKRT_OK;
}

vkrt_status vkrt_quantize_row(vkrt_type type, const float *src, void *dst, int64_t n) {
  uint32_t block = vkrt_type_block(type);
  if (!block || n < 0 || n % block || (n && (!src || !dst)))
    return VKRT_ERROR_INVALID_ARGUMENT;
  uint8_t *p = dst;
  switch (type) {
  case VKRT_TYPE_F32:
    memcpy(dst, src, (size_t)n * 4);
    return VKRT_OK;
  case VKRT_TYPE_F16:
    for (int64_t i = 0; i < n; i++) {
      uint16_t h = vkrt_f32_to_f16(src[i]);
      memcpy(p + 2 * i, &h, 2);
    }
    return VKRT_OK;
  case VKRT_TYPE_Q8_0: /* ggml quantize_row_q8_0_ref, operation for operation */
    for (int64_t b = 0; b < n / 32; b++, src += 32, p += 34) {
      float amax = 0.0f;
      for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(src[j]));
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      uint16_t h = vkrt_f32_to_f16(d);
      memcpy(p, &h, 2);
      for (int j = 0; j < 32; j++)
        p[2 + j] = (uint8_t)(int8_t)roundf(src[j] * id);
    }
    return VKRT_OK;
  default:
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
}
