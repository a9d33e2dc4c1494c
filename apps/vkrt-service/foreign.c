/* ggml types libvkrt has no kernels for, in the llama models vkrt-service runs: converted on
 * the host when the model loads, into a type it has, with nothing lost:
 *   - q4_0 and q5_0 (w = d (q - 8), d (q - 16)) into q8_0: the same d, the same 32-element
 *     blocks, q - 8 or q - 16 as the int8 quant: every weight exactly as in the file;
 *   - q4_1, q5_1, q2_K, q3_K, q5_K and bf16 (offsets or scales q8_0 cannot hold) into f32, as
 *     ggml's own dequantization computes them (float products of the f16 scales and the
 *     quants).
 * Small models get q5_0 and q5_1 in llama.cpp's K-quant files where a row is not a whole
 * number of 256-element super-blocks; Q5_K_M, Q3_K_M and Q2_K files hold q5_K, q3_K, q2_K.
 * The block layouts are ggml's (ggml-common.h); the --make-gguf writer's random blocks are
 * here too. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

static float half(const uint8_t *p) { return vkrt_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static void put_half(uint8_t *p, float v) {
  uint16_t h = vkrt_f32_to_f16(v);
  p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* q4_0 {d; qs[16]} and q5_0 {d; qh[4]; qs[16]}: quant j of the block (q - 8, q - 16). */
static int q4_0_quant(const uint8_t *b, int j) {
  uint8_t byte = b[2 + (j & 15)];
  return (j < 16 ? byte & 15 : byte >> 4) - 8;
}
static int q5_quant(const uint8_t *qh, const uint8_t *qs, int j) {
  uint8_t byte = qs[j & 15];
  return (j < 16 ? byte & 15 : byte >> 4) | (int)((le32(qh) >> j) & 1) << 4;
}

/* The 6-bit scale and min of sub-block j of a q4_K/q5_K header (ggml's get_scale_min_k4). */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) {
    *sc = q[j] & 63, *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
    *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
  }
}

/* One block of a type converted to f32 or f16 at b into f32 y (q4_0 and q5_0, which go to
 * q8_0, are converted by convert_slices itself). */
static void dequantize_block(uint32_t ggml, const uint8_t *b, float *y) {
  switch (ggml) {
  case GGML_TYPE_Q4_1: /* {d; m; qs[16]} */
    for (int j = 0; j < 32; j++)
      y[j] = (float)((j < 16 ? b[4 + j] & 15 : b[4 + j - 16] >> 4)) * half(b) + half(b + 2);
    break;
  case GGML_TYPE_Q5_1: /* {d; m; qh[4]; qs[16]} */
    for (int j = 0; j < 32; j++)
      y[j] = (float)q5_quant(b + 4, b + 8, j) * half(b) + half(b + 2);
    break;
  case GGML_TYPE_Q2_K: { /* {scales[16]; qs[64]; d; dmin}: 16 groups of 16, 2 bits each */
    const float d = half(b + 80), dmin = half(b + 82);
    for (int i = 0; i < 256; i++) {
      int half128 = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
      uint8_t sc = b[i / 16];
      int q = (b[16 + 32 * half128 + l] >> shift) & 3;
      y[i] = d * (float)(sc & 15) * (float)q - dmin * (float)(sc >> 4);
    }
    break;
  }
  case GGML_TYPE_Q3_K: { /* {hmask[32]; qs[64]; scales[12]; d}: 16 groups of 16, 3 bits each */
    const float d = half(b + 108);
    const uint8_t *s = b + 96;
    for (int i = 0; i < 256; i++) {
      int g = i / 16; /* its 6-bit scale: 4 low bits, then 2 from bytes 8..11 */
      int lo = g < 8 ? s[g] & 15 : s[g - 8] >> 4;
      int sc = (lo | ((s[8 + g % 4] >> (2 * (g / 4))) & 3) << 4) - 32;
      int half128 = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
      int q = (b[32 + 32 * half128 + l] >> shift) & 3;
      int high = (b[l] >> (half128 * 4 + (i % 128) / 32)) & 1;
      y[i] = d * (float)sc * (float)(q - (high ? 0 : 4));
    }
    break;
  }
  case GGML_TYPE_Q5_K: { /* {d; dmin; scales[12]; qh[32]; qs[128]}: 8 sub-blocks of 32 */
    const float d = half(b), dmin = half(b + 2);
    for (int i = 0; i < 256; i++) {
      int sub = i / 32, l = i % 32, sc, m;
      scale_min_k4(sub, b + 4, &sc, &m);
      uint8_t byte = b[48 + 32 * (sub / 2) + l];
      int q = (sub % 2 ? byte >> 4 : byte & 15) | ((b[16 + l] >> sub) & 1) << 4;
      y[i] = d * (float)sc * (float)q - dmin * (float)m;
    }
    break;
  }
  case GGML_TYPE_BF16: {
    uint32_t bits = (uint32_t)(b[0] | b[1] << 8) << 16;
    memcpy(y, &bits, 4);
    break;
  }
  default:
    break;
  }
}

bool gguf_foreign_target(uint32_t ggml, bool f16, vkrt_type *to) {
  switch (ggml) {
  case GGML_TYPE_Q4_0:
  case GGML_TYPE_Q5_0:
    *to = VKRT_TYPE_Q8_0;
    return true;
  case GGML_TYPE_Q4_1:
  case GGML_TYPE_Q5_1:
  case GGML_TYPE_Q2_K:
  case GGML_TYPE_Q3_K:
  case GGML_TYPE_Q5_K:
  case GGML_TYPE_BF16:
    *to = f16 ? VKRT_TYPE_F16 : VKRT_TYPE_F32;
    return true;
  default:
    return false;
  }
}

const char *gguf_ggml_type_str(uint32_t ggml) {
  switch (ggml) {
  case GGML_TYPE_F32: return "f32";
  case GGML_TYPE_F16: return "f16";
  case GGML_TYPE_Q4_0: return "q4_0";
  case GGML_TYPE_Q4_1: return "q4_1";
  case GGML_TYPE_Q5_0: return "q5_0";
  case GGML_TYPE_Q5_1: return "q5_1";
  case GGML_TYPE_Q8_0: return "q8_0";
  case GGML_TYPE_Q2_K: return "q2_K";
  case GGML_TYPE_Q3_K: return "q3_K";
  case GGML_TYPE_Q4_K: return "q4_K";
  case GGML_TYPE_Q5_K: return "q5_K";
  case GGML_TYPE_Q6_K: return "q6_K";
  case GGML_TYPE_BF16: return "bf16";
  default: return "?";
  }
}

#define CONVERT_SLICE 1024 /* blocks a thread takes at a time */

struct convert_job {
  uint32_t ggml;
  vkrt_type to;
  const uint8_t *in;
  uint8_t *out;
  uint64_t bytes, out_block, blocks;
  atomic_uint_fast64_t next; /* the next slice */
};

static void *convert_slices(void *arg) {
  struct convert_job *j = arg;
  for (uint64_t s; (s = atomic_fetch_add(&j->next, 1)) * CONVERT_SLICE < j->blocks;) {
    uint64_t end = (s + 1) * CONVERT_SLICE < j->blocks ? (s + 1) * CONVERT_SLICE : j->blocks;
    for (uint64_t i = s * CONVERT_SLICE; i < end; i++) {
      const uint8_t *b = j->in + i * j->bytes;
      uint8_t *o = j->out + i * j->out_block;
      if (j->to == VKRT_TYPE_Q8_0) { /* the same d; q - 8 or q - 16 as int8 */
        o[0] = b[0], o[1] = b[1];
        for (int k = 0; k < 32; k++)
          o[2 + k] = (uint8_t)(int8_t)(j->ggml == GGML_TYPE_Q4_0 ? q4_0_quant(b, k)
                                                                 : q5_quant(b + 2, b + 6, k) - 16);
      } else if (j->to == VKRT_TYPE_F32) {
        dequantize_block(j->ggml, b, (float *)(void *)o);
      } else { /* f16: the f32 values rounded */
        float y[256];
        dequantize_block(j->ggml, b, y);
        for (uint64_t k = 0; k < j->out_block / 2; k++)
          put_half(o + 2 * k, y[k]);
      }
    }
  }
  return NULL;
}

int gguf_convert(struct gguf_file *f, struct gguf_tensor *t, char *err, size_t err_size) {
  vkrt_type to;
  if (t->supported) /* a type with kernels, or converted already */
    return GGUF_OK;
  if (!gguf_foreign_target(t->ggml_type, f->convert_f16, &to) || !t->size)
    return gguf_fail(err, err_size, GGUF_E_TYPE, "tensor %s has ggml type %u (%s), which "
                     "vkrt-service neither runs nor converts", t->name, t->ggml_type,
                     gguf_ggml_type_str(t->ggml_type));
  uint64_t block = gguf_ggml_block(t->ggml_type), bytes = gguf_ggml_block_bytes(t->ggml_type);
  uint64_t blocks = t->size / bytes;
  uint64_t out_block = to == VKRT_TYPE_Q8_0 ? 34 : (to == VKRT_TYPE_F16 ? 2 : 4) * block;
  if (blocks > UINT64_MAX / out_block)
    return gguf_fail(err, err_size, GGUF_E_OVERFLOW, "tensor %s: too large to convert", t->name);
  uint8_t *out = malloc(blocks * out_block);
  if (!out)
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "tensor %s: no memory for its %s form "
                     "(%llu bytes)", t->name, vkrt_type_str(to),
                     (unsigned long long)(blocks * out_block));
  /* blocks in slices over the machine's cores (an 8B model's q5_K is ~5 GB of blocks) */
  struct convert_job job = {.ggml = t->ggml_type, .to = to, .in = gguf_data(f, t), .out = out,
                            .bytes = bytes, .out_block = out_block, .blocks = blocks};
  atomic_init(&job.next, 0);
  gguf_run_threads(convert_slices, &job, blocks < 4096 ? 1 : gguf_threads());
  t->converted = out;
  t->type = to;
  t->supported = true;
  t->size = blocks * out_block;
  return GGUF_OK;
}

void gguf_foreign_synth_row(uint8_t *out, uint32_t ggml, uint64_t K, uint64_t *s) {
  float amp = 1.0f / sqrtf((float)K);
  uint64_t bytes = gguf_ggml_block_bytes(ggml), blocks = K / gguf_ggml_block(ggml);
  for (uint64_t i = 0; i < blocks * bytes; i++) /* quants, and the scales of K-quants */
    out[i] = (uint8_t)(vkrt_xorshift(s) >> 56);
  for (uint64_t i = 0; i < blocks; i++) {
    uint8_t *b = out + i * bytes;
    switch (ggml) { /* the f16 fields: weights of about amp, centred where the type has a min */
    case GGML_TYPE_Q4_0: put_half(b, amp / 4.6f); break;
    case GGML_TYPE_Q5_0: put_half(b, amp / 9.2f); break;
    case GGML_TYPE_Q4_1: put_half(b, amp / 4.6f), put_half(b + 2, -7.5f * amp / 4.6f); break;
    case GGML_TYPE_Q5_1: put_half(b, amp / 9.2f), put_half(b + 2, -15.5f * amp / 9.2f); break;
    case GGML_TYPE_Q2_K: put_half(b + 80, amp / 9.0f), put_half(b + 82, amp / 6.0f); break;
    case GGML_TYPE_Q3_K: put_half(b + 108, amp / 40.0f); break;
    case GGML_TYPE_Q5_K: put_half(b, amp / 280.0f), put_half(b + 2, amp / 18.0f); break;
    case GGML_TYPE_BF16: {
      float v = ((float)(vkrt_xorshift(s) >> 40) / (float)(1 << 24) * 2.0f - 1.0f) * 1.7f * amp;
      uint32_t u;
      memcpy(&u, &v, 4);
      b[0] = (uint8_t)(u >> 16), b[1] = (uint8_t)(u >> 24);
      break;
    }
    default: break;
    }
  }
}
