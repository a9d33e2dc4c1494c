/* vkrt-service's llama model on the CPU, no device: tests/data/stories260K.gguf (a real
 * llama2.c model converted by llama.cpp) loads with its hyper-parameters; the SentencePiece
 * tokenizer gives the ids derived by hand from the vocabulary and round-trips; the float64
 * reference generates, greedily from BOS, the text an independent float64 reference measured;
 * the cache rounding (f16, q8_0) is taken and moves the logits by a rounding's worth; each
 * kind of bad file (another architecture, a missing or mis-shaped tensor, head counts that do
 * not divide, a vocabulary without BOS) is refused with a message naming it; the sampler's
 * greedy, top-k, top-p and temperature draws behave as specified; --make-gguf's models load,
 * with a SentencePiece or a byte-level BPE vocabulary that round-trips text. The files are run from the
 * source root (tests/run does). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../apps/vkrt-service/llama.h"

#define STORIES "tests/data/stories260K.gguf"

/* The whole file in memory, for patched copies. */
static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s (run from the source root)", path);
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(*size);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, *size, f), *size);
  fclose(f);
  return b;
}

struct loaded {
  uint8_t *buf;
  size_t size;
  struct gguf_file f;
  struct llama_model m;
  struct llama_vocab *v;
};

static struct loaded *load_stories(void) {
  struct loaded *l = calloc(1, sizeof(*l));
  char err[512];
  assert_non_null(l);
  l->buf = read_file(STORIES, &l->size);
  if (gguf_parse(l->buf, l->size, &l->f, err, sizeof(err)))
    fail_msg("parse: %s", err);
  if (llama_model_load(&l->f, &l->m, err, sizeof(err)))
    fail_msg("model: %s", err);
  if (llama_vocab_load(&l->f, &l->v, err, sizeof(err)))
    fail_msg("vocab: %s", err);
  return l;
}

static void unload(struct loaded *l) {
  llama_vocab_free(l->v);
  gguf_close(&l->f);
  free(l->buf);
  free(l);
}

static void test_load_stories(void **state) {
  (void)state;
  struct loaded *l = load_stories();
  const struct llama_hparams *hp = &l->m.hp;
  assert_int_equal(hp->n_layer, 5);
  assert_int_equal(hp->n_embd, 64);
  assert_int_equal(hp->n_ff, 172);
  assert_int_equal(hp->n_head, 8);
  assert_int_equal(hp->n_head_kv, 4); /* grouped-query: two query heads per KV head */
  assert_int_equal(hp->head_dim, 8);
  assert_int_equal(hp->n_rot, 8);
  assert_int_equal(hp->n_ctx_train, 2048);
  assert_int_equal(hp->n_vocab, 512);
  assert_true(fabsf(hp->eps - 1e-5f) < 1e-9f);
  assert_true(hp->rope_freq_base == 10000.0f); /* absent from the file: llama's default */
  assert_false(l->m.output_tied);
  assert_ptr_equal(l->m.output, gguf_find(&l->f, "output.weight"));
  assert_ptr_equal(l->m.layer[4].ffn_down, gguf_find(&l->f, "blk.4.ffn_down.weight"));
  assert_int_equal(l->m.layer[2].wk->ne[1], 32);
  /* f32 throughout: one embedding row + every other tensor's bytes */
  uint64_t want = 64 * 4 + 64 * 4 + 512 * 64 * 4 +
                  5 * 4 * (64 + 64 * 64 + 64 * 32 * 2 + 64 * 64 + 64 + 3 * 64 * 172);
  assert_int_equal(llama_weight_bytes(&l->m), want);
  assert_int_equal(llama_vocab_size(l->v), 512);
  assert_int_equal(llama_vocab_bos(l->v), 1);
  assert_int_equal(llama_vocab_eos(l->v), 2);
  unload(l);
}

/* The expected ids, by hand from the vocabulary (tokenizer.ggml.tokens/scores: piece i >= 259
 * has score 259 - i, so the pair that merges first is the one whose concatenation has the
 * lowest id; ties go to the leftmost pair). The text, escaped: "▁Lily▁and▁Tim▁saw▁the▁big▁ü!".
 *   ▁Lily: pairs ▁L 307, il 290 (Li, ly absent): il first -> ▁ L il y; then ▁L 307 before
 *          ily 310 -> ▁L il y -> ▁L ily -> ▁Lily 317.
 *   ▁and:  ▁a 261 first (before nd 264, an 303); ▁an is absent; nd -> ▁a nd -> ▁and 269.
 *   ▁Tim:  ▁T 274, then im 288 -> ▁T im -> ▁Tim 326.
 *   ▁saw:  ▁s 262 -> ▁sa 296 -> ▁saw 394.
 *   ▁the:  ▁t 259 (before he 260); ▁th 308 is queued but he 260 merges first -> ▁t he ->
 *          ▁the 265.
 *   ▁big:  ▁b 268 (▁bi absent), ig 333 -> ▁b ig -> ▁big 370.
 *   ▁ü!:   no piece ▁ü, ü (U+00FC) is not a piece either: ▁ 410, then its UTF-8 bytes as
 *          byte tokens <0xC3> 3 + 0xC3 = 198 and <0xBC> 3 + 0xBC = 191, then ! 443. */
static void test_tokenizer(void **state) {
  (void)state;
  struct loaded *l = load_stories();
  static const int32_t want[] = {1, 317, 269, 326, 394, 265, 370, 410, 198, 191, 443};
  const char *text = "Lily and Tim saw the big \xc3\xbc!";
  int32_t ids[64];
  int32_t n = llama_tokenize(l->v, text, true, ids, 64);
  assert_int_equal(n, sizeof(want) / sizeof(want[0]));
  for (int32_t i = 0; i < n; i++)
    if (ids[i] != want[i])
      fail_msg("id %d: got %d, want %d", i, ids[i], want[i]);
  assert_int_equal(llama_tokenize(l->v, text, true, ids, 5), -1); /* too small: refused */
  assert_int_equal(llama_tokenize(l->v, text, false, ids, 64), n - 1);
  assert_int_equal(llama_tokenize(l->v, "", true, ids, 64), 1);
  assert_int_equal(llama_tokenize(l->v, text, true, ids, 64), n);
  /* decode: BOS prints nothing, ▁ is a space, byte tokens are their bytes */
  char out[256] = "", piece[64];
  for (int32_t i = 0; i < n; i++) {
    llama_token_piece(l->v, ids[i], piece, sizeof(piece));
    strcat(out, piece);
  }
  assert_string_equal(out, " Lily and Tim saw the big \xc3\xbc!");
  /* round trips through merges, multi-byte pieces and byte tokens: the text, space-prefixed */
  const char *texts[] = {"Once upon a time, there was a little girl named Lily.",
                         "\"Hello!\" said Timmy \xe2\x80\x94 to the \xe6\x97\xa5 dog\n\tok",
                         "  two  spaces ", "\x01\x7f bytes"};
  for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
    int32_t k = llama_tokenize(l->v, texts[t], false, ids, 64);
    assert_true(k > 0);
    char *p = out;
    for (int32_t i = 0; i < k; i++)
      p += llama_token_piece(l->v, ids[i], p, sizeof(out) - (size_t)(p - out));
    char want_text[256];
    snprintf(want_text, sizeof(want_text), " %s", texts[t]);
    assert_string_equal(out, want_text);
  }
  assert_int_equal(llama_token_piece(l->v, 2, piece, sizeof(piece)), 0); /* </s>: control */
  assert_int_equal(llama_token_piece(l->v, 3 + 'A', piece, sizeof(piece)), 1);
  assert_string_equal(piece, "A");
  assert_int_equal(llama_token_piece(l->v, 9999, piece, sizeof(piece)), 0);
  unload(l);
}

/* Greedy generation from BOS with the float64 reference. */
static int generate(struct loaded *l, vkrt_type kv, int n, int32_t *ids, double *first_logits) {
  struct llama_ref *r;
  char err[256];
  if (llama_ref_create(&l->m, 256, kv, &r, err, sizeof(err)))
    fail_msg("ref: %s", err);
  uint32_t nv = l->m.hp.n_vocab;
  double *lg = malloc(nv * sizeof(double));
  float *lf = malloc(nv * sizeof(float));
  struct llama_sampler s;
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 0, .top_p = 1});
  int32_t tok = llama_vocab_bos(l->v);
  for (int p = 0; p < n; p++) {
    assert_int_equal(llama_ref_forward(r, tok, (uint32_t)p, lg), 0);
    if (p == 8 && first_logits)
      memcpy(first_logits, lg, nv * sizeof(double));
    for (uint32_t i = 0; i < nv; i++)
      lf[i] = (float)lg[i];
    ids[p] = tok = llama_sample(&s, lf, nv, NULL);
  }
  assert_int_not_equal(llama_ref_forward(r, 0, 256, lg), 0); /* past the context: refused */
  assert_int_not_equal(llama_ref_forward(r, 512, 0, lg), 0); /* not a token */
  free(lg);
  free(lf);
  llama_ref_free(r);
  return n;
}

static void test_reference_story(void **state) {
  (void)state;
  struct loaded *l = load_stories();
  enum { N = 40 };
  int32_t ids[N];
  double *lg32 = malloc(512 * sizeof(double)), *lg = malloc(512 * sizeof(double));
  generate(l, VKRT_TYPE_F32, N, ids, lg32);
  char text[1024] = "", piece[64];
  for (int i = 0; i < N; i++) {
    llama_token_piece(l->v, ids[i], piece, sizeof(piece));
    strcat(text, piece);
  }
  print_message("ids:");
  for (int i = 0; i < N; i++)
    print_message("%s%d", i ? "," : " ", ids[i]);
  print_message("\ntext: %s\n", text);
  /* the text an independent float64 reference produces for stories260K from BOS */
  const char *want = " Once upon a time, there was a little girl named Lily. She loved to play "
                     "outside in the park.";
  if (strncmp(text, want, strlen(want)))
    fail_msg("generated \"%s\", want it to begin \"%s\"", text, want);
  /* the cache's rounding is applied: f16 and q8_0 move the logits, by a rounding's worth */
  const vkrt_type kv[] = {VKRT_TYPE_F16, VKRT_TYPE_Q8_0};
  /* q8_0 keeps amax/254 per 32 values (four of this model's 8-wide heads share a scale) */
  const double bound[] = {2e-2, 1.0};
  double prev = 0;
  for (int k = 0; k < 2; k++) {
    int32_t ids_kv[N];
    generate(l, kv[k], 9, ids_kv, lg);
    double diff = 0;
    for (int i = 0; i < 512; i++)
      diff = fmax(diff, fabs(lg[i] - lg32[i]));
    print_message("kv %s: max |logit - f32 cache's| at token 8: %.3g\n", vkrt_type_str(kv[k]), diff);
    assert_true(diff > prev); /* q8_0 rounds coarser than f16, which rounds at all */
    assert_true(diff < bound[k]);
    prev = diff;
  }
  free(lg32);
  free(lg);
  unload(l);
}

/* ---- bad files: stories260K patched in memory ---------------------------------------- */

static uint8_t *find_bytes(uint8_t *buf, size_t size, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i + n <= size; i++)
    if (!memcmp(buf + i, s, n))
      return buf + i;
  fail_msg("\"%s\" not in the file", s);
  return NULL;
}

/* Parses the patched buffer; model and vocabulary must refuse it with code and a message
 * containing needle. */
static void expect_refused(uint8_t *buf, size_t size, int code, const char *needle) {
  struct gguf_file f;
  struct llama_model *m = malloc(sizeof(*m));
  struct llama_vocab *v = NULL;
  char err[512] = "";
  if (gguf_parse(buf, size, &f, err, sizeof(err)))
    fail_msg("parse: %s", err);
  int r = llama_model_load(&f, m, err, sizeof(err));
  if (!r)
    r = llama_vocab_load(&f, &v, err, sizeof(err));
  llama_vocab_free(v);
  if (r != code || !strstr(err, needle))
    fail_msg("want %s \"...%s...\", got %s \"%s\"", gguf_error_str(code), needle,
             gguf_error_str(r), err);
  print_message("refused: %s\n", err);
  gguf_close(&f);
  free(m);
}

static void test_bad_files(void **state) {
  (void)state;
  size_t size;
  uint8_t *orig = read_file(STORIES, &size), *b = malloc(size);
  /* another architecture: general.architecture "llama" -> "gpt2x" (same length) */
  memcpy(b, orig, size);
  memcpy(find_bytes(b, size, "general.architecture") + 20 + 4 + 8, "gpt2x", 5);
  expect_refused(b, size, GGUF_E_BAD_VALUE, "general.architecture is \"gpt2x\"");
  /* a tensor the model does not use (output.weight renamed: the head ties to token_embd and
   * output.bias1 is left over): refused by name rather than ignored */
  memcpy(b, orig, size);
  memcpy(find_bytes(b, size, "output.weight"), "output.bias1", 12);
  expect_refused(b, size, GGUF_E_BAD_VALUE, "tensor output.bias1t is not part of the llama model");
  /* a missing tensor: blk.3.attn_k.weight renamed */
  memcpy(b, orig, size);
  memcpy(find_bytes(b, size, "blk.3.attn_k.weight"), "blk.3.attn_x", 12);
  expect_refused(b, size, GGUF_E_MISSING, "missing tensor blk.3.attn_k.weight");
  /* a mis-shaped tensor: blk.1.ffn_down {172, 64} -> {86, 128}, the same bytes */
  memcpy(b, orig, size);
  uint8_t *t = find_bytes(b, size, "blk.1.ffn_down.weight") + 21;
  assert_int_equal(t[0] | t[1] << 8, 2); /* n_dims */
  assert_int_equal(t[4], 172);
  t[4] = 86, t[12] = 128;
  expect_refused(b, size, GGUF_E_MISSING, "tensor blk.1.ffn_down.weight has shape {86, 128");
  /* head counts that do not divide: head_count_kv 4 -> 3 */
  memcpy(b, orig, size);
  t = find_bytes(b, size, "llama.attention.head_count_kv") + 29;
  assert_int_equal(t[0], 4); /* u32 type */
  assert_int_equal(t[4], 4);
  t[4] = 3;
  expect_refused(b, size, GGUF_E_BAD_VALUE,
                 "llama.attention.head_count = 8 is not a multiple of llama.attention.head_count_kv = 3");
  /* a vocabulary without BOS: the key renamed */
  memcpy(b, orig, size);
  find_bytes(b, size, "tokenizer.ggml.bos_token_id")[26] = 'x';
  expect_refused(b, size, GGUF_E_MISSING, "missing metadata key tokenizer.ggml.bos_token_id");
  /* a BOS that is not a token */
  memcpy(b, orig, size);
  t = find_bytes(b, size, "tokenizer.ggml.bos_token_id") + 27;
  t[5] = 2; /* 1 + 512 */
  expect_refused(b, size, GGUF_E_BAD_VALUE, "tokenizer.ggml.bos_token_id = 513");
  /* a norm that is not f32 */
  memcpy(b, orig, size);
  t = find_bytes(b, size, "output_norm.weight") + 18;
  t[4 + 8] = 1; /* ggml type f16: half the bytes, still inside the file */
  expect_refused(b, size, GGUF_E_TYPE, "tensor output_norm.weight has ggml type 1");
  free(b);
  free(orig);
}

/* ---- sampler -------------------------------------------------------------------------- */

static void test_sampler(void **state) {
  (void)state;
  float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, NAN, 1.5f};
  struct { float logit; int32_t id; } scratch[6];
  struct llama_sampler s;
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 0, .top_p = 1});
  assert_int_equal(llama_sample(&s, logits, 6, scratch), 1); /* tie 1 and 3: the lower id */
  assert_true(fabsf(llama_top2_margin(logits, 6)) == 0);
  logits[3] = 1.0f;
  assert_true(fabsf(llama_top2_margin(logits, 6) - 0.5f) < 1e-6f);
  /* top-k 1 at any temperature is greedy */
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 5, .top_k = 1, .top_p = 1,
                                                         .seed = 7});
  for (int i = 0; i < 100; i++)
    assert_int_equal(llama_sample(&s, logits, 6, scratch), 1);
  /* top-k 2 draws only the two best (1, 5); the frequencies follow softmax / T */
  int hits[6] = {0};
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 0.5f, .top_k = 2,
                                                         .top_p = 1, .seed = 42});
  for (int i = 0; i < 4000; i++)
    hits[llama_sample(&s, logits, 6, scratch)]++;
  assert_int_equal(hits[1] + hits[5], 4000);
  double p1 = 1 / (1 + exp(-0.5 / 0.5)); /* 0.731 */
  assert_true(fabs(hits[1] / 4000.0 - p1) < 0.03);
  /* top-p 0.5: p(1) = e^2 / (e^2 + e^1.5 + e^1 + e^0.5 + e^-1) = 0.445, with 5 0.715: those two
   * are kept, then drawn 0.62 : 0.38 */
  memset(hits, 0, sizeof(hits));
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 1, .top_p = 0.5f,
                                                         .seed = 3});
  for (int i = 0; i < 2000; i++)
    hits[llama_sample(&s, logits, 6, scratch)]++;
  assert_int_equal(hits[1] + hits[5], 2000);
  assert_true(hits[1] > 1000 && hits[5] > 500);
  /* the same seed, the same draws; another seed, others */
  struct llama_sampler a, b, c;
  struct llama_sampler_params p = {.temperature = 2, .top_p = 1, .seed = 99};
  llama_sampler_init(&a, &p);
  llama_sampler_init(&b, &p);
  p.seed = 100;
  llama_sampler_init(&c, &p);
  int same = 0, differ = 0;
  for (int i = 0; i < 200; i++) {
    int32_t x = llama_sample(&a, logits, 6, scratch);
    same += x == llama_sample(&b, logits, 6, scratch);
    differ += x != llama_sample(&c, logits, 6, scratch);
  }
  assert_int_equal(same, 200);
  assert_true(differ > 20);
}

struct ranked {
  float logit;
  int32_t id;
};
static int by_rank(const void *a, const void *b) {
  const struct ranked *x = a, *y = b;
  if (x->logit != y->logit)
    return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : 1;
}

/* top-p over a large vocabulary against a brute-force nucleus (the whole vocabulary sorted by
 * logit, then id; the shortest prefix whose softmax mass reaches p): a tie straddling the
 * boundary keeps the lower ids, and a flat distribution's large nucleus is exact too. */
static void test_top_p_nucleus(void **state) {
  (void)state;
  enum { N = 20000 };
  float *logits = malloc(N * sizeof(float));
  struct ranked *sorted = malloc(N * sizeof(*sorted));
  void *scratch = malloc(N * 8);
  bool *in = malloc(N);
  int *seen = calloc(N, sizeof(int));
  uint64_t rng = 77;
  for (int round = 0; round < 2; round++) {
    float p = round ? 0.9f : 0.5f;
    for (int i = 0; i < N; i++) /* round 0: 40 tokens at 9 among zeros; 1: uniform in [0, 6) */
      logits[i] = round ? (float)(vkrt_xorshift(&rng) >> 40) / (float)(1 << 24) * 6.0f
                        : (i % 500 == 7 ? 9.0f : 0.0f);
    for (int i = 0; i < N; i++)
      sorted[i] = (struct ranked){logits[i], i};
    qsort(sorted, N, sizeof(*sorted), by_rank);
    double total = 0, cum = 0;
    for (int i = 0; i < N; i++)
      total += exp((double)sorted[i].logit - sorted[0].logit);
    int size = 0;
    memset(in, 0, N);
    while (cum < p * total) {
      cum += exp((double)sorted[size].logit - sorted[0].logit);
      in[sorted[size++].id] = true;
    }
    if (!round) /* 40 e^9 + 19960 = 344083; half of it needs 22 of the e^9 tokens (21.2) */
      assert_int_equal(size, 22);
    /* at a high temperature every member is drawn about equally often */
    struct llama_sampler s;
    llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 1000, .top_p = p,
                                                           .seed = 5});
    memset(seen, 0, N * sizeof(int));
    int draws = round ? 4000 : 3000, distinct = 0;
    for (int d = 0; d < draws; d++) {
      int32_t id = llama_sample(&s, logits, N, scratch);
      assert_int_equal(s.path, LLAMA_SAMPLE_NUCLEUS_NEAR); /* every logit within 9 of the best */
      if (!in[id])
        fail_msg("p %.2f: drew %d (logit %g) outside the %d-token nucleus", (double)p, id,
                 (double)logits[id], size);
      distinct += !seen[id]++;
    }
    print_message("top-p %.2f: nucleus of %d tokens, %d distinct in %d draws\n", (double)p,
                  size, distinct, draws);
    assert_true(round ? distinct > size / 4 : distinct == size); /* 4000 of 7597: ~3140 */
  }
  free(logits), free(sorted), free(scratch), free(in), free(seen);
}

/* Draws over a vocabulary of several of the sampler's blocks of 1024 ids and a partial last
 * one, every token a candidate: each id's frequency follows softmax(logit / T) (the
 * brute-force probabilities in double, 5 sigma), a token whose weight is below the floats
 * (1000 under the best) and a NaN are never drawn, and the best at the very last id is drawn
 * as often as its probability says. */
static void test_sampler_all_tokens(void **state) {
  (void)state;
  enum { N = 3001, DRAWS = 40000 };
  float *logits = malloc(N * sizeof(float));
  void *scratch = malloc(N * 8);
  int *hits = calloc(N, sizeof(int));
  double *prob = malloc(N * sizeof(double));
  uint64_t rng = 11;
  for (int i = 0; i < N; i++) /* a bulk spread over [0, 4), six tokens above it */
    logits[i] = (float)(vkrt_xorshift(&rng) >> 40) / (float)(1 << 24) * 4.0f;
  const int strong[6] = {5, 1023, 1024, 2047, 2999, N - 1};
  for (int j = 0; j < 6; j++)
    logits[strong[j]] = 9.0f + 0.25f * (float)j;
  logits[17] = -1000.0f, logits[18] = NAN;
  const float t = 0.7f;
  double top = 9.0 + 0.25 * 5, total = 0;
  for (int i = 0; i < N; i++)
    total += prob[i] = isnan(logits[i]) ? 0 : exp(((double)logits[i] - top) / t);
  for (int i = 0; i < N; i++)
    prob[i] /= total;
  struct llama_sampler s;
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = t, .top_p = 1, .seed = 8});
  for (int d = 0; d < DRAWS; d++)
    hits[llama_sample(&s, logits, N, scratch)]++;
  assert_int_equal(s.path, LLAMA_SAMPLE_ALL);
  assert_int_equal(hits[17] + hits[18], 0);
  int checked = 0;
  for (int i = 0; i < N; i++) {
    double expect = prob[i] * DRAWS, sigma = sqrt(expect * (1 - prob[i])) + 1;
    if (fabs(hits[i] - expect) > 5 * sigma)
      fail_msg("id %d (logit %g): %d draws of %d, %.1f expected", i, (double)logits[i], hits[i],
               DRAWS, expect);
    checked += expect > 100;
  }
  assert_true(checked >= 6); /* the strong tokens at least */
  assert_true(hits[N - 1] > 0);
  free(logits), free(scratch), free(hits), free(prob);
}

/* top-p whose nucleus reaches past the buckets near the best: one token 17 above 50000 tied
 * ones, p 0.999, takes about half of the tied ones (by id, the lower first). The nucleus
 * against the brute-force count in double, and the draws inside it. */
static void test_top_p_far(void **state) {
  (void)state;
  enum { N = 50000 };
  float *logits = malloc(N * sizeof(float));
  void *scratch = malloc(N * 8);
  for (int i = 0; i < N; i++)
    logits[i] = 3.0f;
  logits[7] = 20.0f;
  const double p = 0.999;
  double w = exp(3.0 - 20.0), total = 1 + (N - 1) * w, cum = 1;
  int size = 1; /* the best, then tied ids from 0 up */
  while (cum < p * total)
    cum += w, size++;
  int32_t last_ref = size - 1 <= 7 ? size - 2 : size - 1; /* id 7 is the best, not tied */
  struct llama_sampler s;
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 1000, .top_p = (float)p,
                                                         .seed = 4});
  int32_t most = 0;
  for (int d = 0; d < 3000; d++) {
    int32_t id = llama_sample(&s, logits, N, scratch);
    assert_int_equal(s.path, LLAMA_SAMPLE_NUCLEUS_FAR);
    assert_true(id <= s.nucleus_last);
    most = id > most ? id : most;
  }
  print_message("top-p far: nucleus of %d tokens, last id %d (float64: %d), largest drawn %d\n",
                size, s.nucleus_last, last_ref, most);
  assert_true(size > 20000 && size < 30000);
  assert_true(abs(s.nucleus_last - last_ref) <= 1); /* float weights against double */
  assert_true(most > s.nucleus_last - 100);         /* the whole nucleus is drawn from */
  free(logits), free(scratch);
}

/* top-k over a large vocabulary with ties at the k-th logit: the k best by logit, then id,
 * exactly (against the whole vocabulary sorted), and no draw outside them. */
static void test_top_k_ties(void **state) {
  (void)state;
  enum { N = 30000, K = 40 };
  float *logits = malloc(N * sizeof(float));
  struct ranked *sorted = malloc(N * sizeof(*sorted));
  void *scratch = malloc(N * 8);
  bool *in = calloc(N, 1);
  uint64_t rng = 5;
  for (int i = 0; i < N; i++) /* 64 levels: many tokens share the 40th best logit */
    logits[i] = (float)(vkrt_xorshift(&rng) >> 58) * 0.125f;
  for (int i = 0; i < N; i++)
    sorted[i] = (struct ranked){logits[i], i};
  qsort(sorted, N, sizeof(*sorted), by_rank);
  assert_true(sorted[K - 1].logit == sorted[K].logit); /* the tie straddles the k-th place */
  for (int i = 0; i < K; i++)
    in[sorted[i].id] = true;
  struct llama_sampler s;
  llama_sampler_init(&s, &(struct llama_sampler_params){.temperature = 1000, .top_k = K,
                                                         .top_p = 1, .seed = 6});
  int distinct = 0;
  int *seen = calloc(N, sizeof(int));
  for (int d = 0; d < 2000; d++) {
    int32_t id = llama_sample(&s, logits, N, scratch);
    assert_int_equal(s.path, LLAMA_SAMPLE_TOP_K);
    if (!in[id])
      fail_msg("drew %d (logit %g) outside the %d best", id, (double)logits[id], K);
    distinct += !seen[id]++;
  }
  assert_int_equal(distinct, K);
  free(logits), free(sorted), free(scratch), free(in), free(seen);
}

/* The draw from the k best given in order (the device's vkrt_op_top_k) is the draw from the
 * whole row: the same ids, draw after draw, for the same seed, with top-p among the k and
 * without, ties across the k-th place, NaN and -inf in the row; a row whose best is not
 * finite gives the first candidate (the argmax). */
static void test_top_k_given(void **state) {
  (void)state;
  enum { N = 20000, K = 40 };
  float *logits = malloc(N * sizeof(float));
  struct ranked *sorted = malloc(N * sizeof(*sorted));
  void *scratch = malloc(N * 8), *scratch2 = malloc(N * 8);
  float values[K];
  int32_t ids[K];
  uint64_t rng = 11;
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < N; i++) /* coarse levels: ties; a few NaN and -inf */
      logits[i] = (float)(vkrt_xorshift(&rng) >> 57) * 0.0625f;
    logits[17] = NAN, logits[18] = -INFINITY;
    if (round == 3)
      logits[4321] = INFINITY;
    for (int i = 0; i < N; i++) /* by_rank's order, NaN as -inf: vkrt_op_top_k's */
      sorted[i] = (struct ranked){logits[i] == logits[i] ? logits[i] : -INFINITY, i};
    qsort(sorted, N, sizeof(*sorted), by_rank);
    for (int i = 0; i < K; i++)
      values[i] = sorted[i].logit, ids[i] = sorted[i].id;
    struct llama_sampler_params p = {.temperature = 0.7f + 0.3f * (float)round, .top_k = K,
                                     .top_p = round % 2 ? 0.6f : 1.0f, .seed = 40 + round};
    struct llama_sampler whole, given;
    llama_sampler_init(&whole, &p);
    llama_sampler_init(&given, &p);
    for (int d = 0; d < 300; d++) {
      int32_t a = llama_sample(&whole, logits, N, scratch);
      int32_t b = llama_sample_top_k(&given, values, ids, K, scratch2);
      if (a != b)
        fail_msg("round %d draw %d: %d from the whole row, %d from the k given", round, d, a, b);
      assert_int_equal(given.path, round == 3 ? LLAMA_SAMPLE_GREEDY : LLAMA_SAMPLE_TOP_K_GIVEN);
    }
    if (round == 3)
      assert_int_equal(ids[0], 4321);
  }
  free(logits), free(sorted), free(scratch), free(scratch2);
}

/* ---- --make-gguf ------------------------------------------------------------------------ */

/* p written to a new temporary file named in path (28 bytes). */
static void write_model(const struct llama_make_params *p, char *path) {
  char err[512];
  strcpy(path, "/tmp/vkrt-test-llama-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  if (llama_write_gguf(path, p, err, sizeof(err)))
    fail_msg("write: %s", err);
}

/* path's model and (v not NULL) vocabulary, loaded; the test fails with the reason otherwise. */
static struct llama_model *load_model(const char *path, struct gguf_file *f,
                                      struct llama_vocab **v) {
  char err[512];
  struct llama_model *m = malloc(sizeof(*m));
  assert_non_null(m);
  if (gguf_open(path, f, err, sizeof(err)) || llama_model_load(f, m, err, sizeof(err)) ||
      (v && llama_vocab_load(f, v, err, sizeof(err))))
    fail_msg("%s: %s", path, err);
  return m;
}

static void test_presets(void **state) {
  (void)state;
  struct llama_make_params p = {.type = VKRT_TYPE_Q4_K, .seed = 9};
  assert_true(llama_preset("llama3-8b", &p));
  assert_true(p.n_layer == 32 && p.n_embd == 4096 && p.n_ff == 14336 && p.n_head == 32 &&
              p.n_head_kv == 8 && p.n_vocab == 128256 && p.rope_freq_base == 500000.0f &&
              p.eps == 1e-5f && !p.tie_output);
  assert_true(p.type == VKRT_TYPE_Q4_K && p.seed == 9); /* left as given */
  assert_true(llama_preset("llama3.2-1b", &p));
  assert_true(p.n_layer == 16 && p.n_embd == 2048 && p.n_ff == 8192 && p.n_head == 32 &&
              p.n_head_kv == 8 && p.n_embd / p.n_head == 64 && p.n_vocab == 128256 &&
              p.rope_freq_base == 500000.0f && p.tie_output);
  assert_true(llama_preset("qwen2.5-7b", &p));
  assert_true(p.n_layer == 28 && p.n_embd == 3584 && p.n_ff == 18944 && p.n_head == 28 &&
              p.n_head_kv == 4 && p.n_embd / p.n_head == 128 && p.n_vocab == 152064 &&
              p.rope_freq_base == 1e6f && p.eps == 1e-6f);
  assert_false(llama_preset("llama3-70b", &p));
}

/* A small file of each matrix type written, then loaded back: hyper-parameters, types, the
 * tie, a vocabulary that tokenizes ASCII through merges and round-trips, and a reference pass
 * whose logits are finite and of unit order (the weights' scaling keeps activations sane).
 * The Q4_K_M mixture (8 layers, untied and tied): q6_K in the head and in attn_v and
 * ffn_down of layers 0, 3, 6 and 7 (llama.cpp's use_more_bits for 8 layers), q4_K elsewhere. */
static void test_written_model(void **state) {
  (void)state;
  const vkrt_type types[] = {VKRT_TYPE_F16, VKRT_TYPE_Q8_0, VKRT_TYPE_Q4_K, VKRT_TYPE_Q6_K,
                             VKRT_TYPE_Q4_K, VKRT_TYPE_Q4_K};
  for (int k = 0; k < 6; k++) {
    const bool mix = k >= 4;
    struct llama_make_params p = {.n_layer = mix ? 8 : 2, .n_embd = 256, .n_ff = 512, .n_head = 4,
                                  .n_head_kv = 2, .n_vocab = 1000, .n_ctx = 64,
                                  .rope_freq_base = 500000.0f, .eps = 1e-5f, .type = types[k],
                                  .seed = 5 + (uint64_t)k, .tie_output = k == 1 || k == 5,
                                  .q4_k_m = mix};
    char path[28], err[512];
    write_model(&p, path);
    struct gguf_file f;
    struct llama_vocab *v;
    struct llama_model *m = load_model(path, &f, &v);
    const struct llama_hparams *hp = &m->hp;
    assert_true(hp->n_layer == p.n_layer && hp->n_embd == 256 && hp->n_ff == 512 && hp->n_head == 4 &&
                hp->n_head_kv == 2 && hp->head_dim == 64 && hp->n_rot == 64 &&
                hp->n_vocab == 1000 && hp->n_ctx_train == 64 &&
                hp->rope_freq_base == 500000.0f && hp->eps == 1e-5f);
    assert_int_equal(m->output_tied, p.tie_output);
    for (uint32_t l = 0; l < p.n_layer; l++) {
      const bool more = mix && (l == 0 || l == 3 || l == 6 || l == 7);
      const vkrt_type want = more ? VKRT_TYPE_Q6_K : types[k];
      assert_int_equal(m->layer[l].ffn_down->type, want);
      assert_int_equal(m->layer[l].wv->type, want);
      assert_int_equal(m->layer[l].wk->type, types[k]);
      assert_int_equal(m->layer[l].ffn_up->type, types[k]);
    }
    assert_int_equal(m->output->type, mix ? VKRT_TYPE_Q6_K : types[k]);
    assert_int_equal(m->tok_embd->type, mix && !p.tie_output ? VKRT_TYPE_Q4_K : m->output->type);
    assert_int_equal(m->layer[1].ffn_norm->type, VKRT_TYPE_F32);
    assert_int_equal(llama_vocab_size(v), 1000);
    assert_int_equal(llama_vocab_bos(v), 1);
    assert_int_equal(llama_vocab_eos(v), 2);
    int32_t ids[64];
    char out[128] = "";
    int32_t n = llama_tokenize(v, "hello, world \xc3\xbc", false, ids, 64);
    assert_true(n > 0 && n < 14); /* 15 characters: merged */
    for (int32_t i = 0; i < n; i++) {
      assert_true(ids[i] >= 3 && ids[i] < 1000);
      char piece[32];
      llama_token_piece(v, ids[i], piece, sizeof(piece));
      strcat(out, piece);
    }
    assert_string_equal(out, " hello, world \xc3\xbc");
    struct llama_ref *r;
    assert_int_equal(llama_ref_create(m, 4, VKRT_TYPE_F16, &r, err, sizeof(err)), 0);
    double lg[1000], rms = 0;
    for (uint32_t pos = 0; pos < 4; pos++)
      assert_int_equal(llama_ref_forward(r, ids[pos % n], pos, lg), 0);
    for (int i = 0; i < 1000; i++) {
      assert_true(isfinite(lg[i]));
      rms += lg[i] * lg[i] / 1000;
    }
    rms = sqrt(rms);
    print_message("%s%s: %d tokens for 15 characters, logits rms %.3f\n", vkrt_type_str(types[k]),
                  mix ? "_M" : "", n, rms);
    assert_true(rms > 0.2 && rms < 5);
    llama_ref_free(r);
    llama_vocab_free(v);
    free(m);
    gguf_close(&f);
    unlink(path);
  }
  struct llama_make_params bad = {0}; /* llama_preset leaves type, seed and the options */
  char err[256];
  assert_true(llama_preset("llama3.2-1b", &bad));
  bad.type = VKRT_TYPE_F16;
  bad.n_head_kv = 5;
  assert_int_equal(llama_write_gguf("/tmp/vkrt-test-never.gguf", &bad, err, sizeof(err)),
                   GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "5 KV heads"));
  bad.n_head_kv = 8, bad.n_vocab = 300;
  assert_int_equal(llama_write_gguf("/tmp/vkrt-test-never.gguf", &bad, err, sizeof(err)),
                   GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "vocabulary of 300 tokens"));
  bad.n_vocab = 1000, bad.type = VKRT_TYPE_Q4_K, bad.n_ff = 8000;
  assert_int_equal(llama_write_gguf("/tmp/vkrt-test-never.gguf", &bad, err, sizeof(err)),
                   GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "256-element q4_K block"));
  bad.q4_k_m = true, bad.type = VKRT_TYPE_Q8_0;
  assert_int_equal(llama_write_gguf("/tmp/vkrt-test-never.gguf", &bad, err, sizeof(err)),
                   GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "the Q4_K_M mixture is q4_K with q6_K, not q8_0"));
  bad.q4_k_m = false, bad.type = VKRT_TYPE_Q4_K;
  bad.n_ff = 8192;
  assert_int_equal(llama_write_gguf("/nonexistent/x.gguf", &bad, err, sizeof(err)), GGUF_E_IO);
  assert_int_equal(access("/tmp/vkrt-test-never.gguf", F_OK), -1); /* refused before opening */
}

/* RoPE scaling as llama.cpp reads it: a linear factor divides every angle (freq_scale 1/F);
 * rope_freqs.weight holds Llama 3.1's factors (1 for short wavelengths, the factor for long
 * ones, blended between), and the reference turns by them; YaRN, bad factors and a
 * mis-shaped tensor are refused by name. */
static void test_rope_scaling(void **state) {
  (void)state;
  struct llama_make_params p = {.n_layer = 1, .n_embd = 256, .n_ff = 256, .n_head = 2,
                                .n_head_kv = 1, .n_vocab = 400, .n_ctx = 64,
                                .rope_freq_base = 10000.0f, .eps = 1e-5f,
                                .type = VKRT_TYPE_F16, .seed = 3};
  char path[28], err[512];
  double plain[400], scaled[400];
  for (int k = 0; k < 3; k++) { /* none, linear 4, Llama 3.1 factors of 8 */
    p.rope_linear = k == 1 ? 4.0f : 0.0f, p.rope_factor = k == 2 ? 8.0f : 0.0f;
    write_model(&p, path);
    size_t size;
    uint8_t *b = read_file(path, &size);
    struct gguf_file f;
    struct llama_model *m = malloc(sizeof(*m));
    if (gguf_parse(b, size, &f, err, sizeof(err)) || llama_model_load(&f, m, err, sizeof(err)))
      fail_msg("%s", err);
    assert_true(m->hp.rope_freq_scale == (k == 1 ? 0.25f : 1.0f));
    assert_int_equal(m->rope_freqs != NULL, k == 2);
    if (k == 2) { /* head 128: 64 pairs; wavelengths 2 pi 10000^(i / 32) */
      float ff[64];
      memcpy(ff, gguf_data(&f, m->rope_freqs), sizeof(ff));
      assert_true(ff[0] == 1.0f && ff[40] == 1.0f);   /* 2 pi 10000^(40/64) = 1986 < 2048 */
      assert_true(ff[41] > 1.0f && ff[41] < 8.0f);    /* 2258: blended */
      assert_true(ff[50] == 8.0f && ff[63] == 8.0f);  /* 2 pi 10000^(50/64) = 8836 > 8192 */
    }
    struct llama_ref *r;
    assert_int_equal(llama_ref_create(m, 64, VKRT_TYPE_F16, &r, err, sizeof(err)), 0);
    double *lg = k ? scaled : plain;
    for (uint32_t pos = 0; pos < 40; pos++)
      assert_int_equal(llama_ref_forward(r, (int32_t)(3 + 7 * pos), pos, lg), 0);
    llama_ref_free(r);
    if (k) { /* the reference turned otherwise: its logits at position 39 moved */
      double moved = 0;
      for (int i = 0; i < 400; i++)
        moved = fmax(moved, fabs(scaled[i] - plain[i]));
      print_message("scaling %d: logits moved by up to %.3g\n", k, moved);
      assert_true(moved > 1e-3);
    }
    if (k == 1) { /* "linear" -> "yarn??": refused by name */
      memcpy(find_bytes(b, size, "linear"), "yarnxx", 6);
      expect_refused(b, size, GGUF_E_BAD_VALUE, "llama.rope.scaling.type = \"yarnxx\"");
    }
    if (k == 2) {
      uint8_t *t = find_bytes(b, size, "rope_freqs.weight") + 17;
      assert_int_equal(t[4], 64); /* ne[0] */
      t[4] = 32;
      expect_refused(b, size, GGUF_E_MISSING, "tensor rope_freqs.weight has shape {32, 1, 1, 1}, "
                     "the metadata says {64}");
      t[4] = 64;
      float zero = 0.0f;
      memcpy((uint8_t *)gguf_data(&f, m->rope_freqs) + 4 * 7, &zero, 4);
      expect_refused(b, size, GGUF_E_BAD_VALUE, "rope_freqs.weight[7] = 0 is not a finite factor > 0");
    }
    gguf_close(&f);
    free(m);
    free(b);
    unlink(path);
  }
}

/* --vocab-type gpt2: a byte-level BPE vocabulary as Llama 3's files have it loads (the three
 * control tokens last as BOS, EOS and EOT, BOS added), merges common words into few tokens,
 * and any UTF-8 text (random code points of every plane) decodes back to itself; the 40000
 * tokens take every lowercase word up to three letters. Too small a vocabulary is refused. */
static void test_written_gpt2(void **state) {
  (void)state;
  struct llama_make_params p = {.n_layer = 1, .n_embd = 64, .n_ff = 64, .n_head = 2,
                                .n_head_kv = 1, .n_vocab = 40000, .n_ctx = 64,
                                .rope_freq_base = 500000.0f, .eps = 1e-5f,
                                .type = VKRT_TYPE_F16, .seed = 3, .vocab = LLAMA_VOCAB_BPE};
  char path[28], err[512];
  write_model(&p, path);
  struct gguf_file f;
  struct llama_vocab *v;
  struct llama_model *m = load_model(path, &f, &v);
  assert_int_equal(llama_vocab_kind(v), LLAMA_VOCAB_BPE);
  assert_int_equal(llama_vocab_size(v), 40000);
  assert_int_equal(llama_vocab_bos(v), 39997);
  assert_int_equal(llama_vocab_eos(v), 39998);
  assert_int_equal(llama_vocab_eot(v), 39999);
  assert_true(llama_vocab_add_bos(v) && llama_vocab_is_eog(v, 39998) &&
              llama_vocab_is_eog(v, 39999) && !llama_vocab_is_eog(v, 39997));
  int32_t ids[256];
  char out[1024], piece[64];
  int32_t n = llama_tokenize(v, "Once upon a time, the dog saw 42 cats.\n", true, ids, 256);
  print_message("gpt2: %d ids for 39 bytes\n", n);
  /* BOS Once ' upon' ' a' ' time' ',' ' the' ' dog' ' saw' ' ' 42 ' c' ats '.\n' (' cats' is
   * no token: merged by rank, 'at' and then 'ats' come first) */
  assert_int_equal(n, 14);
  assert_int_equal(ids[0], 39997);
  assert_int_equal(llama_token_piece(v, ids[0], piece, sizeof(piece)), 0);
  assert_int_equal(llama_tokenize(v, "<|eot_id|>", false, ids, 256), 1);
  assert_int_equal(ids[0], 39999);
  assert_int_equal(llama_tokenize(v, " zqx", false, ids, 256), 1); /* three letters: a piece */
  assert_int_equal(llama_tokenize(v, "zqx", false, ids, 256), 1);
  uint64_t rng = 99;
  for (int t = 0; t < 500; t++) {
    char text[256];
    size_t len = 0;
    for (int k = (int)(vkrt_xorshift(&rng) % 40); k >= 0; k--) {
      uint64_t r = vkrt_xorshift(&rng);
      uint32_t cp = r % 4 ? (uint32_t)(r >> 8) % 0x80 : (uint32_t)(r >> 8) % 0x110000;
      if (!cp || cp == '<' || (cp >= 0xD800 && cp <= 0xDFFF))
        cp = ' ';
      int bytes = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      static const uint8_t lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
      text[len] = (char)(bytes == 1 ? cp : lead[bytes] | cp >> (6 * (bytes - 1)));
      for (int i = 1; i < bytes; i++)
        text[len + i] = (char)(0x80 | ((cp >> (6 * (bytes - 1 - i))) & 0x3F));
      len += (size_t)bytes;
    }
    text[len] = '\0';
    int32_t k = llama_tokenize(v, text, false, ids, 256);
    assert_true(k >= 0 && (size_t)k <= len);
    size_t o = 0;
    for (int32_t i = 0; i < k; i++)
      o += llama_token_piece(v, ids[i], out + o, sizeof(out) - o);
    if (o != len || memcmp(out, text, len))
      fail_msg("text %d (%zu bytes) came back as %zu bytes", t, len, o);
  }
  llama_vocab_free(v);
  free(m);
  gguf_close(&f);
  unlink(path);
  p.n_vocab = 258;
  assert_int_equal(llama_write_gguf("/tmp/vkrt-test-never.gguf", &p, err, sizeof(err)),
                   GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "a vocabulary of 258 tokens (259.."));
  assert_int_equal(access("/tmp/vkrt-test-never.gguf", F_OK), -1);
}

/* A tied output head of 8192 x 256 = 2^21 weights is split across the reference's threads
 * (where the machine has more than one CPU): every row is written (the logits are poisoned
 * with NaN before each pass), and two references agree bit for bit. */
static void test_reference_threads(void **state) {
  (void)state;
  struct llama_make_params p = {.n_layer = 1, .n_embd = 256, .n_ff = 256, .n_head = 4,
                                .n_head_kv = 2, .n_vocab = 8192, .n_ctx = 16,
                                .rope_freq_base = 10000.0f, .eps = 1e-5f,
                                .type = VKRT_TYPE_F16, .seed = 11, .tie_output = true};
  char path[28], err[512];
  write_model(&p, path);
  struct gguf_file f;
  struct llama_model *m = load_model(path, &f, NULL);
  struct llama_ref *a, *b;
  assert_int_equal(llama_ref_create(m, 16, VKRT_TYPE_F16, &a, err, sizeof(err)), 0);
  assert_int_equal(llama_ref_create(m, 16, VKRT_TYPE_F16, &b, err, sizeof(err)), 0);
  double *la = malloc(8192 * sizeof(double)), *lb = malloc(8192 * sizeof(double));
  for (uint32_t pos = 0; pos < 3; pos++) {
    for (int i = 0; i < 8192; i++)
      la[i] = lb[i] = NAN;
    assert_int_equal(llama_ref_forward(a, (int32_t)(100 + 977 * pos), pos, la), 0);
    assert_int_equal(llama_ref_forward(b, (int32_t)(100 + 977 * pos), pos, lb), 0);
    for (int i = 0; i < 8192; i++)
      if (!isfinite(la[i]) || memcmp(&la[i], &lb[i], sizeof(double)))
        fail_msg("position %u, logit %d: %g vs %g", pos, i, la[i], lb[i]);
  }
  free(la), free(lb);
  llama_ref_free(a);
  llama_ref_free(b);
  free(m);
  gguf_close(&f);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_load_stories),
      cmocka_unit_test(test_tokenizer),
      cmocka_unit_test(test_reference_story),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_sampler),
      cmocka_unit_test(test_top_p_nucleus),
      cmocka_unit_test(test_sampler_all_tokens),
      cmocka_unit_test(test_top_p_far),
      cmocka_unit_test(test_top_k_ties),
      cmocka_unit_test(test_top_k_given),
      cmocka_unit_test(test_presets),
      cmocka_unit_test(test_written_model),
      cmocka_unit_test(test_written_gpt2),
      cmocka_unit_test(test_reference_threads),
      cmocka_unit_test(test_rope_scaling),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
