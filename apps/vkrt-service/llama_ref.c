/* The float64 reference of the llama forward pass, one token at a time, as llama.cpp's
 * llm_build_llama computes it: x = token_embd[token]; per layer x += wo attn(rope(wq n1),
 * rope(wk n1), wv n1) with n1 = rms_norm(x) attn_norm, then x += ffn_down(silu(ffn_gate n2) *
 * ffn_up n2) with n2 = rms_norm(x) ffn_norm; logits = output rms_norm(x) output_norm.
 * Weights are dequantized row by row (vkrt_dequantize_row, the format's definition); every
 * sum is in double. Cached K and V are rounded through the cache type the way ggml stores
 * them, so the reference attends over the values the device attends over. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llama.h"

struct llama_ref {
  const struct llama_model *m;
  uint32_t n_ctx, n_embd_kv;
  vkrt_type kv_type;
  double *k_cache, *v_cache;     /* [layer][pos][n_embd_kv] */
  double *x, *xn, *q, *k, *v, *att, *scores, *gate, *up;
  uint32_t n_threads;            /* large matrices' rows are split across this many threads */
  float *rows;                   /* one dequantized weight row per thread (widest apart) */
  uint32_t widest;
};

/* Matrices of at least this many weights are split by rows across threads (each row's dot is
 * one thread's, in order: the result does not depend on the split); smaller ones would spend
 * more on starting threads than they save. */
#define REF_THREADED_WEIGHTS (1u << 21)
#define REF_MAX_THREADS 32u

void llama_ref_free(struct llama_ref *r) {
  if (!r)
    return;
  free(r->k_cache), free(r->v_cache);
  free(r->x), free(r->xn), free(r->q), free(r->k), free(r->v), free(r->att);
  free(r->scores), free(r->gate), free(r->up), free(r->rows);
  free(r);
}

int llama_ref_create(const struct llama_model *m, uint32_t n_ctx, vkrt_type kv_type,
                     struct llama_ref **out, char *err, size_t err_size) {
  *out = NULL;
  const struct llama_hparams *hp = &m->hp;
  uint32_t n_embd_kv = hp->n_head_kv * hp->head_dim;
  if (kv_type != VKRT_TYPE_F32 && kv_type != VKRT_TYPE_F16 && kv_type != VKRT_TYPE_Q8_0)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "KV cache type %s: f32, f16 or q8_0",
                     vkrt_type_str(kv_type));
  if (kv_type == VKRT_TYPE_Q8_0 && n_embd_kv % 32)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "a q8_0 KV cache needs rows of whole 32-value "
                     "blocks; n_head_kv * head_dim = %u", n_embd_kv);
  if (!n_ctx)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "a context of 0 tokens");
  struct llama_ref *r = calloc(1, sizeof(*r));
  if (!r)
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory");
  r->m = m, r->n_ctx = n_ctx, r->n_embd_kv = n_embd_kv, r->kv_type = kv_type;
  size_t cache = (size_t)hp->n_layer * n_ctx * n_embd_kv;
  uint32_t widest = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
  uint32_t q_dim = hp->n_head * hp->head_dim;
  widest = widest > q_dim ? widest : q_dim;
  r->k_cache = malloc(cache * sizeof(double));
  r->v_cache = malloc(cache * sizeof(double));
  r->x = malloc(hp->n_embd * sizeof(double));
  r->xn = malloc(hp->n_embd * sizeof(double));
  r->q = malloc(q_dim * sizeof(double));
  r->att = malloc(q_dim * sizeof(double));
  r->k = malloc(n_embd_kv * sizeof(double));
  r->v = malloc(n_embd_kv * sizeof(double));
  r->scores = malloc(n_ctx * sizeof(double));
  r->gate = malloc(hp->n_ff * sizeof(double));
  r->up = malloc(hp->n_ff * sizeof(double));
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  r->n_threads = cpus < 1 ? 1 : cpus > (long)REF_MAX_THREADS ? REF_MAX_THREADS : (uint32_t)cpus;
  r->widest = widest;
  r->rows = malloc((size_t)r->n_threads * widest * sizeof(float));
  if (!r->k_cache || !r->v_cache || !r->x || !r->xn || !r->q || !r->att || !r->k || !r->v ||
      !r->scores || !r->gate || !r->up || !r->rows) {
    llama_ref_free(r);
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory for a %u-token float64 KV cache "
                     "(%zu MiB)", n_ctx, cache * 2 * sizeof(double) >> 20);
  }
  *out = r;
  return GGUF_OK;
}

struct matvec_part {
  const struct llama_ref *r;
  const struct gguf_tensor *t;
  const double *x;
  double *y;
  uint64_t n0, n1;
  float *row;
};

/* Rows n0..n1 of y = W x: each row dequantized and dotted in double. */
static void *matvec_rows(void *arg) {
  const struct matvec_part *p = arg;
  const uint8_t *w = gguf_data(p->r->m->file, p->t);
  uint64_t K = p->t->ne[0], stride = gguf_row_bytes(p->t);
  for (uint64_t n = p->n0; n < p->n1; n++) {
    vkrt_dequantize_row(p->t->type, w + n * stride, p->row, (int64_t)K);
    double acc = 0;
    for (uint64_t i = 0; i < K; i++)
      acc += (double)p->row[i] * p->x[i];
    p->y[n] = acc;
  }
  return NULL;
}

/* y[N] = W x for W = t {K, N}. */
static void matvec(struct llama_ref *r, const struct gguf_tensor *t, const double *x, double *y) {
  uint64_t N = t->ne[1];
  uint32_t parts = t->ne[0] * N >= REF_THREADED_WEIGHTS ? r->n_threads : 1;
  struct matvec_part part[REF_MAX_THREADS];
  pthread_t thread[REF_MAX_THREADS];
  bool started[REF_MAX_THREADS] = {false};
  for (uint32_t i = 0; i < parts; i++) {
    part[i] = (struct matvec_part){r, t, x, y, N * i / parts, N * (i + 1) / parts,
                                   r->rows + (size_t)i * r->widest};
    /* part 0 runs here; a thread that cannot start runs here too */
    if (i && pthread_create(&thread[i], NULL, matvec_rows, &part[i]) == 0)
      started[i] = true;
  }
  for (uint32_t i = 0; i < parts; i++)
    if (!started[i])
      matvec_rows(&part[i]);
  for (uint32_t i = 1; i < parts; i++)
    if (started[i])
      pthread_join(thread[i], NULL);
}

/* out = x / sqrt(mean(x^2) + eps) * weight (ggml RMS_NORM then MUL). */
static void rms_norm(struct llama_ref *r, const struct gguf_tensor *weight, const double *x,
                     double *out) {
  uint32_t n = r->m->hp.n_embd;
  double ss = 0;
  for (uint32_t i = 0; i < n; i++)
    ss += x[i] * x[i];
  double scale = 1.0 / sqrt(ss / n + (double)r->m->hp.eps);
  vkrt_dequantize_row(VKRT_TYPE_F32, gguf_data(r->m->file, weight), r->rows, n);
  for (uint32_t i = 0; i < n; i++)
    out[i] = x[i] * scale * (double)r->rows[i];
}

/* ggml's RoPE, normal mode: pairs (x[2i], x[2i+1]) of each head's first n_rot values turned
 * by pos * freq_scale * base^(-2i / n_rot) / rope_freqs[i] (1 without the tensor). */
static void rope(const struct llama_model *m, double *x, uint32_t heads, uint32_t pos) {
  const struct llama_hparams *hp = &m->hp;
  const uint8_t *factors = m->rope_freqs ? gguf_data(m->file, m->rope_freqs) : NULL;
  for (uint32_t h = 0; h < heads; h++)
    for (uint32_t i = 0; 2 * i < hp->n_rot; i++) {
      float factor = 1.0f;
      if (factors)
        memcpy(&factor, factors + 4 * i, 4);
      double theta = pos * (double)hp->rope_freq_scale *
                     pow((double)hp->rope_freq_base, -2.0 * i / hp->n_rot) / factor;
      double c = cos(theta), s = sin(theta), *p = x + (size_t)h * hp->head_dim + 2 * i;
      double x0 = p[0], x1 = p[1];
      p[0] = x0 * c - x1 * s;
      p[1] = x0 * s + x1 * c;
    }
}

static double f16_round(float f) {
  uint16_t h = vkrt_f32_to_f16(f);
  float back;
  vkrt_dequantize_row(VKRT_TYPE_F16, &h, &back, 1);
  return back;
}

/* x rounded as the cache stores it: f32; f16; q8_0 as ggml's quantize_row_q8_0 (per 32
 * values d = amax / 127 in float, q = roundf(x / d), d kept as f16). */
static void cache_round(vkrt_type type, const double *x, double *out, uint32_t n) {
  if (type == VKRT_TYPE_F16) {
    for (uint32_t i = 0; i < n; i++)
      out[i] = f16_round((float)x[i]);
    return;
  }
  if (type != VKRT_TYPE_Q8_0) {
    for (uint32_t i = 0; i < n; i++)
      out[i] = (float)x[i];
    return;
  }
  for (uint32_t b = 0; b < n; b += 32) {
    float amax = 0;
    for (uint32_t i = b; i < b + 32; i++)
      amax = fmaxf(amax, fabsf((float)x[i]));
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    double dh = f16_round(d);
    for (uint32_t i = b; i < b + 32; i++)
      out[i] = dh * roundf((float)x[i] * id);
  }
}

int llama_ref_forward(struct llama_ref *r, int32_t token, uint32_t pos, double *logits) {
  const struct llama_model *m = r->m;
  const struct llama_hparams *hp = &m->hp;
  if (token < 0 || (uint32_t)token >= hp->n_vocab || pos >= r->n_ctx)
    return GGUF_E_BAD_VALUE;
  uint32_t E = hp->n_embd, hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
  vkrt_dequantize_row(m->tok_embd->type,
                      gguf_data(m->file, m->tok_embd) + (uint64_t)token * gguf_row_bytes(m->tok_embd),
                      r->rows, E);
  for (uint32_t i = 0; i < E; i++)
    r->x[i] = r->rows[i];
  double scale = 1.0 / sqrt((double)hd);
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    const struct llama_layer *L = &m->layer[l];
    double *kc = r->k_cache + (size_t)l * r->n_ctx * r->n_embd_kv;
    double *vc = r->v_cache + (size_t)l * r->n_ctx * r->n_embd_kv;
    rms_norm(r, L->attn_norm, r->x, r->xn);
    matvec(r, L->wq, r->xn, r->q);
    matvec(r, L->wk, r->xn, r->k);
    matvec(r, L->wv, r->xn, r->v);
    rope(r->m, r->q, hp->n_head, pos);
    rope(r->m, r->k, hp->n_head_kv, pos);
    cache_round(r->kv_type, r->k, kc + (size_t)pos * r->n_embd_kv, r->n_embd_kv);
    cache_round(r->kv_type, r->v, vc + (size_t)pos * r->n_embd_kv, r->n_embd_kv);
    for (uint32_t h = 0; h < hp->n_head; h++) {
      const double *q = r->q + (size_t)h * hd;
      size_t kv_off = (size_t)(h / group) * hd; /* query head h reads KV head h / group */
      double top = -INFINITY, sum = 0;
      for (uint32_t t = 0; t <= pos; t++) {
        const double *k = kc + (size_t)t * r->n_embd_kv + kv_off;
        double s = 0;
        for (uint32_t d = 0; d < hd; d++)
          s += q[d] * k[d];
        r->scores[t] = s * scale;
        top = fmax(top, r->scores[t]);
      }
      for (uint32_t t = 0; t <= pos; t++)
        sum += r->scores[t] = exp(r->scores[t] - top);
      double *o = r->att + (size_t)h * hd;
      for (uint32_t d = 0; d < hd; d++)
        o[d] = 0;
      for (uint32_t t = 0; t <= pos; t++) {
        const double *v = vc + (size_t)t * r->n_embd_kv + kv_off, p = r->scores[t] / sum;
        for (uint32_t d = 0; d < hd; d++)
          o[d] += p * v[d];
      }
    }
    matvec(r, L->wo, r->att, r->xn);
    for (uint32_t i = 0; i < E; i++)
      r->x[i] += r->xn[i];
    rms_norm(r, L->ffn_norm, r->x, r->xn);
    matvec(r, L->ffn_gate, r->xn, r->gate);
    matvec(r, L->ffn_up, r->xn, r->up);
    for (uint32_t i = 0; i < hp->n_ff; i++)
      r->gate[i] = r->gate[i] / (1.0 + exp(-r->gate[i])) * r->up[i];
    matvec(r, L->ffn_down, r->gate, r->xn);
    for (uint32_t i = 0; i < E; i++)
      r->x[i] += r->xn[i];
  }
  rms_norm(r, m->output_norm, r->x, r->xn);
  matvec(r, m->output, r->xn, logits);
  return GGUF_OK;
}
