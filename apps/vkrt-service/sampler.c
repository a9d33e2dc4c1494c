/* Token sampling from logits: greedy (temperature 0), or top-k, then top-p, then temperature
 * and a draw from a seeded xorshift64* — the order of llama.cpp's default sampler chain
 * (top-p keeps the smallest set of the most likely tokens, by softmax of the logits before
 * temperature, whose mass reaches p). */
#include <math.h>
#include <stdlib.h>

#include "llama.h"

void llama_sampler_init(struct llama_sampler *s, const struct llama_sampler_params *p) {
  s->p = *p;
  s->state = p->seed ^ 0x9e3779b97f4a7c15ull;
  if (!s->state) /* xorshift's one fixed point */
    s->state = 1;
}

struct candidate {
  float logit;
  int32_t id;
};

static int by_logit(const void *a, const void *b) {
  const struct candidate *x = a, *y = b;
  if (x->logit != y->logit)
    return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* NaN never wins: it reads as -inf. */
static float logit_at(const float *logits, uint32_t i) {
  return isnan(logits[i]) ? -INFINITY : logits[i];
}

static int32_t argmax(const float *logits, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n; i++)
    if (logit_at(logits, i) > logit_at(logits, best))
      best = i; /* strictly greater: the lowest id wins a tie */
  return (int32_t)best;
}

int32_t llama_sample(struct llama_sampler *s, const float *logits, uint32_t n_vocab,
                     void *scratch) {
  if (!n_vocab)
    return -1;
  if (!(s->p.temperature > 0))
    return argmax(logits, n_vocab);
  struct candidate *c = scratch; /* n_vocab floats + n_vocab ints */
  for (uint32_t i = 0; i < n_vocab; i++)
    c[i] = (struct candidate){.logit = logit_at(logits, i), .id = (int32_t)i};
  qsort(c, n_vocab, sizeof(*c), by_logit);
  uint32_t keep = n_vocab;
  if (s->p.top_k && s->p.top_k < keep)
    keep = s->p.top_k;
  if (s->p.top_p < 1) {
    double sum = 0, cum = 0;
    for (uint32_t i = 0; i < keep; i++)
      sum += exp((double)c[i].logit - c[0].logit);
    for (uint32_t i = 0; i < keep; i++) {
      cum += exp((double)c[i].logit - c[0].logit) / sum;
      if (cum >= s->p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double t = s->p.temperature, sum = 0;
  for (uint32_t i = 0; i < keep; i++)
    sum += exp(((double)c[i].logit - c[0].logit) / t);
  double u = (double)(gguf_random(&s->state) >> 11) * 0x1p-53 * sum, cum = 0;
  for (uint32_t i = 0; i < keep; i++) {
    cum += exp(((double)c[i].logit - c[0].logit) / t);
    if (u < cum)
      return c[i].id;
  }
  return c[keep - 1].id; /* u at the very top of the rounding of sum */
}

float llama_top2_margin(const float *logits, uint32_t n_vocab) {
  if (n_vocab < 2)
    return INFINITY;
  float a = -INFINITY, b = -INFINITY;
  for (uint32_t i = 0; i < n_vocab; i++) {
    float x = logit_at(logits, i);
    if (x > a)
      b = a, a = x;
    else if (x > b)
      b = x;
  }
  return a - b;
}
