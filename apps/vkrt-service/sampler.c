/* Token sampling from logits: greedy (temperature 0), or top-k, then top-p, then temperature
 * and a draw from a seeded xorshift64* — the order of llama.cpp's default sampler chain
 * (top-p keeps the smallest set of the most likely tokens, by softmax of the logits before
 * temperature, whose mass reaches p). */
#include <math.h>
#include <stdbool.h>
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

/* Sorted order: higher logit first, the lower id on ties. */
static bool before(const struct candidate *a, const struct candidate *b) {
  return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int by_logit(const void *a, const void *b) {
  return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* NaN never wins: it reads as -inf. */
static float logit_at(const float *logits, uint32_t i) {
  return isnan(logits[i]) ? -INFINITY : logits[i];
}

static int32_t argmax(const float *logits, uint32_t n) {
  uint32_t best = 0;
  float top = -INFINITY;
  for (uint32_t i = 0; i < n; i++)
    if (logits[i] > top) /* strictly greater: the lowest id wins a tie; NaN never compares */
      top = logits[i], best = i;
  return (int32_t)best;
}

/* The k best of n logits into c[0..k), sorted: a min-heap of the k best so far, O(n log k). */
static uint32_t select_top_k(const float *logits, uint32_t n, uint32_t k, struct candidate *c) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++) {
    struct candidate x = {logit_at(logits, i), (int32_t)i};
    if (m == k && !before(&x, &c[0]))
      continue;
    uint32_t at;
    if (m < k) { /* sift up from the end */
      at = m++;
      while (at && before(&c[(at - 1) / 2], &x)) {
        c[at] = c[(at - 1) / 2];
        at = (at - 1) / 2;
      }
    } else { /* replace the worst, sift down */
      at = 0;
      for (;;) {
        uint32_t ch = 2 * at + 1;
        if (ch >= m)
          break;
        if (ch + 1 < m && before(&c[ch], &c[ch + 1]))
          ch++;
        if (!before(&x, &c[ch]))
          break;
        c[at] = c[ch];
        at = ch;
      }
    }
    c[at] = x;
  }
  qsort(c, m, sizeof(*c), by_logit);
  return m;
}

/* The nucleus: the smallest prefix of the sorted order whose softmax mass reaches p, into c in
 * id order (a draw needs no order). One pass buckets the mass by distance below the best
 * logit; only the bucket where the running mass crosses p is sorted to find the last member,
 * so a flat distribution's large nucleus costs three passes, not a sort of the vocabulary. */
enum { TOP_P_BUCKETS = 512 };
#define TOP_P_RANGE 64.0f /* logits further below the best share the last bucket */

static uint32_t bucket_of(float l, float top) {
  float d = (top - l) * (TOP_P_BUCKETS / TOP_P_RANGE);
  return d < TOP_P_BUCKETS - 1 ? (uint32_t)d : TOP_P_BUCKETS - 1; /* -inf: the last */
}

static uint32_t select_top_p(const float *logits, uint32_t n, float p, struct candidate *c) {
  float top = logit_at(logits, (uint32_t)argmax(logits, n));
  double mass[TOP_P_BUCKETS] = {0}, total = 0;
  for (uint32_t i = 0; i < n; i++) {
    float l = logit_at(logits, i);
    double w = exp((double)l - top);
    mass[bucket_of(l, top)] += w;
    total += w;
  }
  double want = p * total, before_b = 0;
  uint32_t b = 0;
  while (b < TOP_P_BUCKETS - 1 && before_b + mass[b] < want)
    before_b += mass[b++];
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++) {
    float l = logit_at(logits, i);
    if (bucket_of(l, top) == b)
      c[m++] = (struct candidate){l, (int32_t)i};
  }
  qsort(c, m, sizeof(*c), by_logit);
  struct candidate last = c[m - 1]; /* rounding never reached want: the whole bucket */
  for (uint32_t i = 0; i < m; i++) {
    before_b += exp((double)c[i].logit - top);
    if (before_b >= want) {
      last = c[i];
      break;
    }
  }
  m = 0;
  for (uint32_t i = 0; i < n; i++) {
    struct candidate x = {logit_at(logits, i), (int32_t)i};
    if (!before(&last, &x))
      c[m++] = x;
  }
  return m;
}

int32_t llama_sample(struct llama_sampler *s, const float *logits, uint32_t n_vocab,
                     void *scratch) {
  if (!n_vocab)
    return -1;
  if (!(s->p.temperature > 0))
    return argmax(logits, n_vocab);
  struct candidate *c = scratch; /* n_vocab floats + n_vocab ints */
  uint32_t keep = n_vocab;
  if (s->p.top_k && s->p.top_k < n_vocab) {
    keep = select_top_k(logits, n_vocab, s->p.top_k, c);
    if (s->p.top_p < 1) { /* top-p among the k, by their own softmax */
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
  } else if (s->p.top_p < 1) {
    keep = select_top_p(logits, n_vocab, s->p.top_p, c);
  } else { /* every token, in id order: no sort needed for a draw */
    for (uint32_t i = 0; i < n_vocab; i++)
      c[i] = (struct candidate){logit_at(logits, i), (int32_t)i};
  }
  float top = c[0].logit;
  for (uint32_t i = 1; i < keep; i++)
    top = c[i].logit > top ? c[i].logit : top;
  double t = s->p.temperature, sum = 0;
  for (uint32_t i = 0; i < keep; i++) { /* from here on .logit holds the token's weight */
    c[i].logit = (float)exp(((double)c[i].logit - top) / t);
    sum += c[i].logit;
  }
  double u = (double)(vkrt_xorshift(&s->state) >> 11) * 0x1p-53 * sum, cum = 0;
  for (uint32_t i = 0; i < keep; i++) {
    cum += c[i].logit;
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
