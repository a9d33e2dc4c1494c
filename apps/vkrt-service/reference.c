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
  for (uint32_t i = 0; i < hidden; i++) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    x[i] = (float)((s * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 23) - 1.0f;
  }
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* Row n of tensor t, dequantized by the reference dequantization, dotted with x (k elements). */
static double row_dot(const struct gguf_file *f, const struct gguf_tensor *t, uint32_t n,
                      const double *x, uint32_t k, float *row) {
  vkrt_dequantize_row(t->type, gguf_data(f, t) + n * gguf_row_bytes(t), row, k);
  double acc = 0;
  for (uint32_t i = 0; i < k; i++)
    acc += (double)row[i] * x[i];
  return acc;
}

/* float64 reference of one token through every layer: rows dequantized by the reference
 * dequantization (vkrt_dequantize_row, from the format's definition). */
static int reference(const struct gguf_file *f, const struct gguf_mlp *m, float *x_inout) {
  double *x = calloc(m->hidden, sizeof(double)), *h = calloc(m->ffn, sizeof(double));
  float *row = malloc(sizeof(float) * (m->hidden > m->ffn ? m->hidden : m->ffn));
  int rc = x && h && row ? 0 : -1;
  for (uint32_t i = 0; !rc && i < m->hidden; i++)
    x[i] = x_inout[i];
  for (uint32_t l = 0; !rc && l < m->layers; l++) {
    for (uint32_t n = 0; n < m->ffn; n++)
      h[n] = silu(row_dot(f, m->gate[l], n, x, m->hidden, row)) *
             row_dot(f, m->up[l], n, x, m->hidden, row);
    for (uint32_t n = 0; n < m->hidden; n++)
      x[n] += row_dot(f, m->down[l], n, h, m->ffn, row);
  }
  for (uint32_t i = 0; !rc && i < m->hidden; i++)
    x_inout[i] = (float)x[i];
  free(x);
  free(h);
  free(row);
  return rc;
}

/* Every checked token's rank-0 output against the reference of its input: the largest
 * relative error (over every host) into dc->worst_err; EXIT_VERIFY past 2e-3,
 * EXIT_RUNTIME out of memory. */
int reference_verify(const struct service *s, struct decode *dc) {
  const struct gguf_mlp *m = s->mlp;
  float *xref = malloc(m->hidden * sizeof(float));
  int rc = 0;
  for (uint64_t v = 0; v < dc->verified; v++) {
    if (xref)
      memcpy(xref, dc->saved_in + v * m->hidden, m->hidden * sizeof(float));
    if (!xref || reference(&s->wf, m, xref)) {
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
