/* vkrt-service's check: the deterministic token inputs and the float64 CPU reference of the
 * MLP (weights dequantized by the reference of the format's definition, vkrt_dequantize_row)
 * that the checked tokens' outputs are held against. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/hosts.h"
#include "service.h"

/* Deterministic input activation for token t: values in [-1, 1). */
void token_input(uint64_t seed, uint64_t token, float *x, uint32_t hidden) {
  uint64_t s = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (token + 1) * 0xbf58476d1ce4e5b9ull;
  for (uint32_t i = 0; i < hidden; i++)
    x[i] = (float)(vkrt_xorshift(&s) >> 40) / (float)(1 << 23) - 1.0f;
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* Row n of tensor t, dequantized by the reference dequantization, dotted with x (k elements).
 * xq: x rounded to 8 bits per 32 values (q8_round) when the device does that for this
 * tensor (--activations q8), else NULL; Q4_K's mins then still take the exact x. */
static double row_dot(const struct gguf_file *f, const struct gguf_tensor *t, uint32_t n,
                      const double *x, const double *xq, uint32_t k, float *row) {
  const uint8_t *src = gguf_data(f, t) + n * gguf_row_bytes(t);
  vkrt_dequantize_row(t->type, src, row, k);
  double acc = 0;
  if (!xq) {
    for (uint32_t i = 0; i < k; i++)
      acc += (double)row[i] * x[i];
    return acc;
  }
  for (uint32_t i = 0; i < k; i++)
    acc += (double)row[i] * xq[i];
  if (t->type == VKRT_TYPE_Q4_K) { /* w = a - b: a takes xq, the mins b the exact x */
    uint8_t blk[144];
    float mins[256];
    for (uint32_t s = 0; s < k / 256; s++) {
      memcpy(blk, src + 144 * s, 144);
      memset(blk + 16, 0, 128); /* quants 0: the row is -b */
      vkrt_dequantize_row(VKRT_TYPE_Q4_K, blk, mins, 256);
      for (uint32_t i = 0; i < 256; i++) /* row = a - b; a xq - b x = row xq + b (xq - x) */
        acc -= (double)mins[i] * (xq[256 * s + i] - x[256 * s + i]);
    }
  }
  return acc;
}

/* x rounded as the q8x kernels round it: per 32 values dx = max|x| / 127 and
 * q = round(x * (127 / max|x|)) in float, the value dx q. */
static void q8_round(const double *x, double *xq, uint32_t k) {
  for (uint32_t b = 0; b < k; b += 32) {
    float amax = 0;
    for (uint32_t i = b; i < b + 32; i++)
      amax = fmaxf(amax, fabsf((float)x[i]));
    float inv = amax > 0 ? 127.0f / amax : 0, dx = amax / 127.0f;
    for (uint32_t i = b; i < b + 32; i++)
      xq[i] = (double)dx * fminf(fmaxf(roundf((float)x[i] * inv), -127), 127);
  }
}

/* Whether the device rounds x to 8 bits for this weight: --activations q8, a type the q8x
 * kernels take (q8_0, q4_K, q6_K), K within their shared memory (vkrt.h's
 * VKRT_ACTIVATIONS_Q8). */
static bool rounds_x(const struct service *s, const struct gguf_tensor *t, uint32_t k) {
  return s->args->q8_activations &&
         (t->type == VKRT_TYPE_Q8_0 || t->type == VKRT_TYPE_Q4_K || t->type == VKRT_TYPE_Q6_K) &&
         k <= VKRT_ACTIVATIONS_Q8_MAX_K;
}

/* float64 reference of one token through every layer: rows dequantized by the reference
 * dequantization (vkrt_dequantize_row, from the format's definition). */
static int reference(const struct service *s, float *x_inout) {
  const struct gguf_file *f = &s->wf;
  const struct gguf_mlp *m = s->mlp;
  uint32_t big = m->hidden > m->ffn ? m->hidden : m->ffn;
  double *x = calloc(m->hidden, sizeof(double)), *h = calloc(m->ffn, sizeof(double));
  double *xq = calloc(big, sizeof(double));
  float *row = malloc(sizeof(float) * big);
  int rc = x && h && xq && row ? 0 : -1;
  for (uint32_t i = 0; !rc && i < m->hidden; i++)
    x[i] = x_inout[i];
  uint32_t shard = 0; /* ffn_down is split along K: each device's K is its ffn slice */
  for (uint32_t d = 0; d < s->n; d++)
    shard = s->dev[d].f1 - s->dev[d].f0 > shard ? s->dev[d].f1 - s->dev[d].f0 : shard;
  for (uint32_t l = 0; !rc && l < m->layers; l++) {
    /* the gate and up weights share one type and shape */
    const double *gx = rounds_x(s, m->gate[l], m->hidden) ? xq : NULL;
    if (gx)
      q8_round(x, xq, m->hidden);
    for (uint32_t n = 0; n < m->ffn; n++)
      h[n] = silu(row_dot(f, m->gate[l], n, x, gx, m->hidden, row)) *
             row_dot(f, m->up[l], n, x, gx, m->hidden, row);
    const double *hx = rounds_x(s, m->down[l], shard) ? xq : NULL;
    if (hx)
      q8_round(h, xq, m->ffn);
    for (uint32_t n = 0; n < m->hidden; n++)
      x[n] += row_dot(f, m->down[l], n, h, hx, m->ffn, row);
  }
  for (uint32_t i = 0; !rc && i < m->hidden; i++)
    x_inout[i] = (float)x[i];
  free(x);
  free(h);
  free(xq);
  free(row);
  return rc;
}

/* Every checked token's rank-0 output against the reference of its input: the largest
 * relative error (over every host) into dc->worst_err; EXIT_VERIFY past 2e-3 (with
 * --activations q8 the reference rounds x as the device does, so the bound stays: a device
 * that did not round would be ~1e-2 off; deep synthetic stacks, which have no normalization,
 * amplify a rounding tie that falls the other way ~3x per layer: check them with 1-2
 * layers), EXIT_RUNTIME out of memory. */
int reference_verify(const struct service *s, struct decode *dc) {
  const struct gguf_mlp *m = s->mlp;
  float *xref = malloc(m->hidden * sizeof(float));
  int rc = 0;
  for (uint64_t v = 0; v < dc->verified; v++) {
    if (xref)
      memcpy(xref, dc->saved_in + v * m->hidden, m->hidden * sizeof(float));
    if (!xref || reference(s, xref)) {
      fprintf(stderr, "vkrt-service: out of host memory\n");
      rc = EXIT_RUNTIME;
      break;
    }
    const float *rank0 = dc->saved_out + v * m->hidden;
    double scale = 1, rel_err = 0;
    for (uint32_t i = 0; i < m->hidden; i++)
      scale = fmax(scale, fabs((double)xref[i]));
    for (uint32_t i = 0; i < m->hidden; i++)
      rel_err = fmax(rel_err, fabs((double)rank0[i] - (double)xref[i]) / scale);
    rel_err = tool_hosts_max(rel_err);
    dc->worst_err = fmax(dc->worst_err, rel_err);
    if (!(rel_err <= 2e-3)) {
      fprintf(stderr, "vkrt-service: token %llu: max relative error %.3g vs float64 reference\n",
              (unsigned long long)dc->saved_tok[v], rel_err);
      rc = EXIT_VERIFY;
    }
  }
  free(xref);
  return rc;
}
