/* Token sampling from logits: greedy (temperature 0), or top-k, then top-p, then temperature
 * and a draw from a seeded xorshift64* — the order of llama.cpp's default sampler chain
 * (top-p keeps the smallest set of the most likely tokens, by softmax of the logits before
 * temperature, whose mass reaches p).
 *
 * The host samples each generated token while the device waits for its id, so every pass
 * over the vocabulary (128256 logits for Llama 3) is on the token's path: the passes go four
 * logits at a time (vectors of the compiler's, e^x by a polynomial in them), weights are
 * floats, and the draw keeps sums per block of BLOCK ids so it walks one block, not the
 * vocabulary. Nothing sorts or copies the whole vocabulary. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

void llama_sampler_init(struct llama_sampler *s, const struct llama_sampler_params *p) {
  *s = (struct llama_sampler){.p = *p, .state = p->seed ^ 0x9e3779b97f4a7c15ull,
                              .nucleus_last = -1};
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

/* ---- four logits at a time -------------------------------------------------------------
 * The compiler's vectors (SSE on x86-64's baseline, NEON on arm64); the helpers in the loops
 * are inlined so their constants stay in registers. */
#define LOOP_HELPER static inline __attribute__((always_inline))
typedef float f4 __attribute__((vector_size(16)));
typedef int32_t i4 __attribute__((vector_size(16)));
#define F4(c) ((f4){(c), (c), (c), (c)})
#define I4(c) ((i4){(c), (c), (c), (c)})

LOOP_HELPER f4 select4(i4 mask, f4 a, f4 b) { return (f4)(((i4)a & mask) | ((i4)b & ~mask)); }
LOOP_HELPER bool any4(i4 m) { return (m[0] | m[1]) | (m[2] | m[3]); }

/* logits[i..i+4), -inf past n */
LOOP_HELPER f4 load4(const float *logits, uint32_t i, uint32_t n) {
  f4 x;
  if (i + 4 <= n) {
    memcpy(&x, logits + i, sizeof(x));
    return x;
  }
  for (uint32_t j = 0; j < 4; j++)
    x[j] = i + j < n ? logits[i + j] : -INFINITY;
  return x;
}

/* e^x for x <= 0 to within 1.7 ulp: x = n ln 2 + r, e^r by its series to r^7 (|r| <= ln 2 / 2),
 * 2^n into the exponent; 0 below -87 (past the normal floats) and for -inf or NaN. */
LOOP_HELPER f4 exp_lanes(f4 x) {
  const f4 round = F4(12582912.0f); /* 1.5 x 2^23: adding it rounds to an integer */
  i4 live = x > F4(-87.0f);
  x = select4(live, x, F4(-87.0f));
  f4 t = x * F4(1.44269504f) + round, n = t - round;
  f4 r = x - n * F4(0.693145752f) - n * F4(1.42860677e-6f); /* ln 2 in two parts */
  f4 q = F4(1.98412698e-4f);
  q = q * r + F4(1.38888889e-3f);
  q = q * r + F4(8.33333333e-3f);
  q = q * r + F4(4.16666667e-2f);
  q = q * r + F4(1.66666667e-1f);
  q = q * r + F4(0.5f);
  q = q * r + F4(1.0f);
  q = q * r + F4(1.0f);
  f4 scale = (f4)((((i4)t - (i4)round) + I4(127)) << 23);
  return (f4)((i4)(q * scale) & live);
}

static float sum4(f4 x) { return (x[0] + x[1]) + (x[2] + x[3]); }

/* The largest logit, NaN as -inf (a NaN lane never compares greater). */
static float top_logit(const float *logits, uint32_t n) {
  f4 m = F4(-INFINITY), m1 = F4(-INFINITY); /* two chains */
  for (uint32_t i = 0; i < n; i += 8) {
    f4 x = load4(logits, i, n), x1 = load4(logits, i + 4, n);
    m = select4(x > m, x, m);
    m1 = select4(x1 > m1, x1, m1);
  }
  m = select4(m1 > m, m1, m);
  float top = m[0];
  for (int j = 1; j < 4; j++)
    top = m[j] > top ? m[j] : top;
  return top;
}

/* ---- the draw ---------------------------------------------------------------------------
 * Over the members of a cut in id order: token i is a member when it does not come after
 * `last` in the sorted order (every token when last is {-inf, n}), with weight
 * e^((logit - top) / t). Sums per block of BLOCK ids go to block_sum; the draw u * total
 * finds its block there and walks it, with the same weights four at a time. */
enum { BLOCK = 1024 };

struct cut {
  float top, inv_t;
  struct candidate last;
};

/* The weights of tokens [i, i + 4): zeros at once where none is a member (most of the
 * vocabulary, for a nucleus). */
LOOP_HELPER f4 weights4(const struct cut *c, const float *logits, uint32_t i, uint32_t n) {
  f4 l = load4(logits, i, n);
  i4 id = I4((int32_t)i) + (i4){0, 1, 2, 3};
  i4 member = (l > F4(c->last.logit)) | ((l == F4(c->last.logit)) & (id <= I4(c->last.id)));
  if (!any4(member))
    return F4(0);
  return (f4)((i4)exp_lanes((l - F4(c->top)) * F4(c->inv_t)) & member);
}

static int32_t draw(struct llama_sampler *s, const struct cut *c, const float *logits,
                    uint32_t n, double *block_sum) {
  uint32_t blocks = (n + BLOCK - 1) / BLOCK;
  double total = 0;
  for (uint32_t b = 0; b < blocks; b++) {
    uint32_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
    f4 acc0 = F4(0), acc1 = F4(0); /* two chains of e^x in flight */
    for (uint32_t i = b * BLOCK; i < end; i += 8) {
      acc0 += weights4(c, logits, i, n);
      acc1 += weights4(c, logits, i + 4, n);
    }
    total += block_sum[b] = sum4(acc0 + acc1);
  }
  double u = (double)(vkrt_xorshift(&s->state) >> 11) * 0x1p-53 * total, cum = 0;
  uint32_t b = 0;
  while (b + 1 < blocks && cum + block_sum[b] <= u)
    cum += block_sum[b++];
  int32_t last_positive = -1;
  for (uint32_t i = b * BLOCK; i < n; i += 4) { /* past block b only when rounding says so */
    f4 w = weights4(c, logits, i, n);
    for (uint32_t j = 0; j < 4; j++)
      if (w[j] > 0) {
        cum += w[j], last_positive = (int32_t)(i + j);
        if (u < cum)
          return last_positive;
      }
  }
  return last_positive; /* u at the very top of the rounding of total (the best token, of
                         * weight 1, is always a member: some weight is positive) */
}

/* ---- top-k ------------------------------------------------------------------------------ */
/* x offered to the min-heap c[0..*m) of the k best so far (c[0] the worst of them). */
static void heap_offer(struct candidate *c, uint32_t *m, uint32_t k, struct candidate x) {
  if (*m == k && !before(&x, &c[0]))
    return;
  uint32_t at;
  if (*m < k) { /* sift up from the end */
    at = (*m)++;
    while (at && before(&c[(at - 1) / 2], &x)) {
      c[at] = c[(at - 1) / 2];
      at = (at - 1) / 2;
    }
  } else { /* replace the worst, sift down */
    at = 0;
    for (;;) {
      uint32_t ch = 2 * at + 1;
      if (ch >= *m)
        break;
      if (ch + 1 < *m && before(&c[ch], &c[ch + 1]))
        ch++;
      if (!before(&x, &c[ch]))
        break;
      c[at] = c[ch];
      at = ch;
    }
  }
  c[at] = x;
}

/* The k best of n logits into c[0..k), sorted: a min-heap of the k best so far, O(n log k);
 * once it is full, four logits all below its worst are passed over at once. */
static uint32_t select_top_k(const float *logits, uint32_t n, uint32_t k, struct candidate *c) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i += 4) {
    if (m == k) {
      i4 below = load4(logits, i, n) < F4(c[0].logit);
      if (below[0] & below[1] & below[2] & below[3])
        continue;
    }
    for (uint32_t j = i; j < i + 4 && j < n; j++)
      heap_offer(c, &m, k, (struct candidate){logit_at(logits, j), (int32_t)j});
  }
  qsort(c, m, sizeof(*c), by_logit);
  return m;
}

/* ---- top-p ------------------------------------------------------------------------------
 * The nucleus: the smallest prefix of the sorted order whose softmax mass reaches p. One pass
 * sums the mass per bucket of distance below the best logit; only the bucket where the
 * running mass crosses p is sorted to find the last member, so a flat distribution's large
 * nucleus costs passes, not a sort of the vocabulary. */
enum { BUCKETS = 512 };
#define RANGE 64.0f /* logits further below the best share the last bucket */

static uint32_t bucket_of(float l, float top) {
  float d = (top - l) * (BUCKETS / RANGE);
  return d < BUCKETS - 1 ? (uint32_t)d : BUCKETS - 1; /* -inf and NaN: the last */
}

/* bucket_of's d, four at a time (the same float operations: the same values) */
LOOP_HELPER f4 distance4(f4 l, float top) { return (F4(top) - l) * F4(BUCKETS / RANGE); }

/* The weights of c[i..i+4) (e^(logit - top)), as the mass pass formed them (0 past m). */
static f4 candidate_weights(const struct candidate *c, uint32_t i, uint32_t m, float top) {
  f4 l;
  for (uint32_t j = 0; j < 4; j++)
    l[j] = i + j < m ? c[i + j].logit : -INFINITY;
  return exp_lanes(l - F4(top));
}

/* The mass per bucket: with near, only buckets below NEAR (tokens within RANGE * NEAR /
 * BUCKETS of the best) are kept apart, the rest only counts in *total; the tokens far below,
 * often most of a vocabulary, are then summed four at a time. */
enum { NEAR = 128 };

/* The first of buckets [0, limit) where the running mass, from *above, reaches want (limit
 * if none); *above gains the buckets before it. */
static uint32_t crossing_bucket(const double *mass, uint32_t limit, double want,
                                double *above) {
  uint32_t b = 0;
  while (b < limit && *above + mass[b] < want)
    *above += mass[b++];
  return b;
}

static void bucket_mass(const float *logits, uint32_t n, float top, bool near, double *mass,
                        double *total) {
  double lane[4][BUCKETS] = {{0}}; /* a sum per lane: tokens of one bucket are four chains */
  f4 far = F4(0);
  for (uint32_t i = 0; i < n; i += 4) {
    f4 l = load4(logits, i, n), w = exp_lanes(l - F4(top));
    f4 d = distance4(l, top);
    i4 kept = near ? d < F4(NEAR) : I4(-1); /* bucket_of(l) < NEAR */
    far += (f4)((i4)w & ~kept);
    if (any4(kept)) { /* bucket_of four at a time: -inf and NaN to the last */
      f4 kw = (f4)((i4)w & kept);
      i4 at = __builtin_convertvector(select4(d < F4(BUCKETS - 1), d, F4(BUCKETS - 1)), i4);
      for (uint32_t j = 0; j < 4; j++)
        lane[j][at[j]] += kw[j];
    }
  }
  *total = sum4(far);
  for (uint32_t b = 0; b < BUCKETS; b++)
    *total += mass[b] = (lane[0][b] + lane[1][b]) + (lane[2][b] + lane[3][b]);
}

/* The member of c[0..m) (in id order) where the running mass, from `above` (the mass of
 * every token before them in the sorted order), reaches want. Many tokens are cut into finer
 * buckets of their own logit range until few are left (a flat distribution's crossing
 * bucket can hold a large part of the vocabulary), then sorted; tokens of one logit are
 * in sorted order as they are. */
enum { SORT_MAX = 2048 };

static struct candidate crossing(struct candidate *c, uint32_t m, float top, double above,
                                 double want) {
  if (!m) /* never, as the masses are summed; the tokens at the best logit if it were */
    return (struct candidate){top, INT32_MAX};
  bool tied = false;
  while (!tied && m > SORT_MAX) {
    float lo = c[0].logit, hi = c[0].logit;
    for (uint32_t i = 1; i < m; i++)
      lo = c[i].logit < lo ? c[i].logit : lo, hi = c[i].logit > hi ? c[i].logit : hi;
    float scale = (BUCKETS - 1) / (hi - lo); /* finer bucket s: (hi - logit) * scale */
    tied = lo == hi;
    if (tied || !isfinite(scale))
      break;
    double mass[BUCKETS] = {0};
    for (uint32_t i = 0; i < m; i += 4) {
      f4 w = candidate_weights(c, i, m, top);
      for (uint32_t j = 0; j < 4 && i + j < m; j++)
        mass[(uint32_t)((hi - c[i + j].logit) * scale)] += w[j];
    }
    uint32_t sb = crossing_bucket(mass, BUCKETS - 1, want, &above);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < m; i++)
      if ((uint32_t)((hi - c[i].logit) * scale) == sb)
        c[kept++] = c[i];
    m = kept;
  }
  if (!tied)
    qsort(c, m, sizeof(*c), by_logit);
  for (uint32_t i = 0; i < m; i += 4) {
    f4 w = candidate_weights(c, i, m, top);
    for (uint32_t j = 0; j < 4 && i + j < m; j++) {
      above += w[j];
      if (above >= want)
        return c[i + j];
    }
  }
  return c[m - 1]; /* rounding never reached want: the whole bucket */
}

/* The last member of the nucleus: the bucket where the running mass crosses p, then the
 * crossing among its tokens. */
static struct candidate nucleus_last(const float *logits, uint32_t n, float p, float top,
                                     struct candidate *c, enum llama_sample_path *path) {
  *path = LLAMA_SAMPLE_NUCLEUS_NEAR;
  double mass[BUCKETS], total;
  bucket_mass(logits, n, top, true, mass, &total);
  double want = p * total, above = 0;
  uint32_t b = crossing_bucket(mass, NEAR, want, &above);
  if (b == NEAR) { /* the nucleus reaches far below the best: every bucket apart */
    *path = LLAMA_SAMPLE_NUCLEUS_FAR;
    bucket_mass(logits, n, top, false, mass, &total);
    want = p * total, above = 0;
    b = crossing_bucket(mass, BUCKETS - 1, want, &above);
  }
  /* the bucket's tokens, four logits at a time past those of later buckets */
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i += 4) {
    if (b < BUCKETS - 1) { /* floor(d) == b: b <= d < b + 1 */
      f4 l = load4(logits, i, n), d = distance4(l, top);
      i4 in = (d >= F4((float)b)) & (d < F4((float)(b + 1)));
      if (any4(in))
        for (uint32_t j = 0; j < 4; j++)
          if (in[j])
            c[m++] = (struct candidate){l[j], (int32_t)(i + j)};
      continue;
    }
    for (uint32_t j = i; j < i + 4 && j < n; j++) { /* the last bucket: -inf and NaN too */
      float x = logit_at(logits, j);
      if (bucket_of(x, top) == b)
        c[m++] = (struct candidate){x, (int32_t)j};
    }
  }
  return crossing(c, m, top, above, want);
}

/* The draw among the k best c[0..keep) (sorted; top the best logit, t the temperature):
 * top-p among them by their own softmax, then a weight each at t. */
static int32_t draw_top_k(struct llama_sampler *s, struct candidate *c, uint32_t keep, float top,
                          float t) {
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
  double sum = 0;
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
  return c[0].id; /* u at the very top of the rounding of sum: the best, of weight 1 */
}

int32_t llama_sample_top_k(struct llama_sampler *s, const float *values, const int32_t *ids,
                           uint32_t k, void *scratch) {
  float t = s->p.temperature;
  s->path = LLAMA_SAMPLE_GREEDY;
  if (!k)
    return -1;
  /* as llama_sample: no weights to form: the best, the lowest id of a tie (ids[0]) */
  if (!(t > 0) || !isfinite(values[0]) || !isfinite(1.0f / t))
    return ids[0];
  s->path = LLAMA_SAMPLE_TOP_K_GIVEN;
  struct candidate *c = scratch;
  for (uint32_t i = 0; i < k; i++)
    c[i] = (struct candidate){values[i], ids[i]};
  return draw_top_k(s, c, k, values[0], t);
}

int32_t llama_sample(struct llama_sampler *s, const float *logits, uint32_t n_vocab,
                     void *scratch) {
  if (!n_vocab)
    return -1;
  float t = s->p.temperature;
  s->path = LLAMA_SAMPLE_GREEDY;
  if (!(t > 0))
    return argmax(logits, n_vocab);
  float top = top_logit(logits, n_vocab);
  /* no weights to form (every logit NaN or -inf, an infinite one, a temperature whose
   * inverse is no float): the best logit, the lowest id of a tie, as greedy */
  if (!isfinite(top) || !isfinite(1.0f / t))
    return argmax(logits, n_vocab);
  struct candidate *c = scratch; /* n_vocab floats + n_vocab ints */
  if (s->p.top_k && s->p.top_k < n_vocab) {
    s->path = LLAMA_SAMPLE_TOP_K;
    uint32_t keep = select_top_k(logits, n_vocab, s->p.top_k, c);
    return draw_top_k(s, c, keep, top, t);
  }
  struct cut cut = {top, 1.0f / t, {-INFINITY, (int32_t)n_vocab}}; /* every token */
  s->path = LLAMA_SAMPLE_ALL;
  if (s->p.top_p < 1) {
    cut.last = nucleus_last(logits, n_vocab, s->p.top_p, top, c, &s->path);
    s->nucleus_last = cut.last.id;
  }
  return draw(s, &cut, logits, n_vocab, scratch);
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
