/* The llama model of a GGUF file: hyper-parameters from the metadata, every tensor found and
 * its type and shape checked against them (see llama.h). Names and keys as llama.cpp's
 * LLM_ARCH_LLAMA. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "llama.h"

/* Tensor `name`: present, of an allowed type (norms f32 only), shape {ne0, ne1} (ne1 0: a
 * vector {ne0}). */
static int find_tensor(const struct gguf_file *f, const char *name, bool norm, uint64_t ne0,
                       uint64_t ne1, const struct gguf_tensor **out, char *err, size_t err_size) {
  const struct gguf_tensor *t = gguf_find(f, name);
  *out = NULL;
  if (!t)
    return gguf_fail(err, err_size, GGUF_E_MISSING, "missing tensor %s", name);
  vkrt_type to;
  if (norm ? t->ggml_type != GGML_TYPE_F32 : !t->supported && !gguf_foreign_target(t->ggml_type, false, &to))
    return gguf_fail(err, err_size, GGUF_E_TYPE, "tensor %s has ggml type %u (%s); %s", name,
                     t->ggml_type, gguf_ggml_type_str(t->ggml_type),
                     norm ? "vectors (norms, rope_freqs) are f32"
                          : "matrices are f32, f16, q8_0, q4_K or q6_K, or q4_0, q4_1, q5_0, q5_1, "
                            "q2_K, q3_K, q5_K or bf16 (converted on the host)");
  uint64_t want1 = ne1 ? ne1 : 1;
  if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1) {
    if (ne1)
      return gguf_fail(err, err_size, GGUF_E_MISSING, "tensor %s has shape {%" PRIu64 ", %" PRIu64
                       ", %" PRIu64 ", %" PRIu64 "}, the metadata says {%" PRIu64 ", %" PRIu64 "}",
                       name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1);
    return gguf_fail(err, err_size, GGUF_E_MISSING, "tensor %s has shape {%" PRIu64 ", %" PRIu64
                     ", %" PRIu64 ", %" PRIu64 "}, the metadata says {%" PRIu64 "}", name, t->ne[0],
                     t->ne[1], t->ne[2], t->ne[3], ne0);
  }
  *out = t;
  return GGUF_OK;
}

static int layer_tensor(const struct gguf_file *f, uint32_t l, const char *which, bool norm,
                        uint64_t ne0, uint64_t ne1, const struct gguf_tensor **out, char *err,
                        size_t err_size) {
  char name[64];
  snprintf(name, sizeof(name), "blk.%u.%s.weight", l, which);
  return find_tensor(f, name, norm, ne0, ne1, out, err, err_size);
}

/* A required (or, with def given, optional) u32 key that must be at least 1. */
static int key_u32(const struct gguf_file *f, const char *key, const uint32_t *def,
                   uint32_t *out, char *err, size_t err_size) {
  int r = gguf_get_u32(f, key, out, err, err_size);
  if (r == GGUF_E_MISSING && def) {
    *out = *def;
    return GGUF_OK;
  }
  if (!r && *out == 0)
    r = gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s is 0", key);
  return r;
}

/* An optional f32 key: GGUF_OK with *out set, or absent (*out untouched), or an error. */
static int optional_f32(const struct gguf_file *f, const char *key, float *out, char *err,
                        size_t err_size) {
  int r = gguf_get_f32(f, key, out, err, err_size);
  return r == GGUF_E_MISSING ? GGUF_OK : r;
}

/* Context scaling as llama.cpp reads it: the linear factor (llama.rope.scale_linear, then
 * llama.rope.scaling.factor) divides every angle; YaRN and the other types that change the
 * angles' formula are refused rather than run wrong. Llama 3.1's scaling is the
 * rope_freqs.weight tensor (llama_model_load). */
static int load_rope_scaling(const struct gguf_file *f, struct llama_hparams *hp, char *err,
                             size_t err_size) {
  const char *type = NULL;
  uint64_t len = 0;
  int r = gguf_get_string(f, "llama.rope.scaling.type", &type, &len, err, err_size);
  if (r && r != GGUF_E_MISSING)
    return r;
  if (!r && !(len == 4 && !memcmp(type, "none", 4)) && !(len == 6 && !memcmp(type, "linear", 6)))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.rope.scaling.type = \"%.*s\": "
                     "vkrt-service turns RoPE without scaling, with linear scaling or with "
                     "rope_freqs.weight (no YaRN or LongRoPE)", (int)(len < 64 ? len : 64), type);
  float factor = 0.0f;
  if ((r = optional_f32(f, "llama.rope.scale_linear", &factor, err, err_size)) ||
      (r = optional_f32(f, "llama.rope.scaling.factor", &factor, err, err_size)))
    return r;
  if (!(factor >= 0.0f && factor < 1e30f))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.rope.scaling.factor = %g is not a "
                     "finite factor >= 0", (double)factor);
  hp->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  return GGUF_OK;
}

static int load_hparams(const struct gguf_file *f, struct llama_hparams *hp, char *err,
                        size_t err_size) {
  int r;
  if ((r = key_u32(f, "llama.block_count", NULL, &hp->n_layer, err, err_size)) ||
      (r = key_u32(f, "llama.embedding_length", NULL, &hp->n_embd, err, err_size)) ||
      (r = key_u32(f, "llama.feed_forward_length", NULL, &hp->n_ff, err, err_size)) ||
      (r = key_u32(f, "llama.attention.head_count", NULL, &hp->n_head, err, err_size)) ||
      (r = key_u32(f, "llama.attention.head_count_kv", &hp->n_head, &hp->n_head_kv, err,
                   err_size)) ||
      (r = key_u32(f, "llama.context_length", NULL, &hp->n_ctx_train, err, err_size)) ||
      (r = gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &hp->eps, err, err_size)))
    return r;
  if (hp->n_layer > LLAMA_MAX_LAYERS)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.block_count = %u; at most %u layers",
                     hp->n_layer, LLAMA_MAX_LAYERS);
  if (hp->n_embd % hp->n_head)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.embedding_length = %u is not a multiple "
                     "of llama.attention.head_count = %u", hp->n_embd, hp->n_head);
  if (hp->n_head % hp->n_head_kv)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.attention.head_count = %u is not a "
                     "multiple of llama.attention.head_count_kv = %u", hp->n_head, hp->n_head_kv);
  hp->head_dim = hp->n_embd / hp->n_head;
  if ((r = key_u32(f, "llama.rope.dimension_count", &hp->head_dim, &hp->n_rot, err, err_size)))
    return r;
  if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.rope.dimension_count = %u: RoPE turns "
                     "an even number of dimensions up to the head size %u", hp->n_rot, hp->head_dim);
  if (!(hp->eps > 0 && hp->eps < 1))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE,
                     "llama.attention.layer_norm_rms_epsilon = %g is not in (0, 1)", (double)hp->eps);
  hp->rope_freq_base = 10000.0f;
  r = gguf_get_f32(f, "llama.rope.freq_base", &hp->rope_freq_base, err, err_size);
  if (r == GGUF_E_MISSING)
    hp->rope_freq_base = 10000.0f, r = GGUF_OK;
  if (!r && !(hp->rope_freq_base > 1))
    r = gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.rope.freq_base = %g is not above 1",
                  (double)hp->rope_freq_base);
  return r ? r : load_rope_scaling(f, hp, err, err_size);
}

#define MODEL_TENSORS (4 + 9 * LLAMA_MAX_LAYERS)

/* Every tensor the model uses, in one list: token_embd, output_norm, output (token_embd again
 * when tied), rope_freqs when there, then each layer's nine. Returns the count. */
static uint32_t model_tensors(const struct llama_model *m, const struct gguf_tensor **out) {
  uint32_t n = 0;
  out[n++] = m->tok_embd;
  out[n++] = m->output_norm;
  out[n++] = m->output;
  if (m->rope_freqs)
    out[n++] = m->rope_freqs;
  for (uint32_t l = 0; l < m->hp.n_layer; l++) {
    const struct llama_layer *L = &m->layer[l];
    const struct gguf_tensor *t[9] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo,
                                      L->ffn_norm, L->ffn_gate, L->ffn_up, L->ffn_down};
    for (int i = 0; i < 9; i++)
      out[n++] = t[i];
  }
  return n;
}

/* A file whose every tensor is one of the model's (a file with more, such as biases,
 * experts or other architectures' norms, is a model this service would run wrong, so it is
 * refused by name); then its matrices of types without kernels converted on the host
 * (foreign.c), counted by type in m->converted (norms are f32: never converted). */
static int check_and_convert(struct gguf_file *f, struct llama_model *m, char *err,
                             size_t err_size) {
  const struct gguf_tensor *used[MODEL_TENSORS];
  uint32_t n = model_tensors(m, used);
  for (uint32_t i = 0; i < f->tensor_count; i++) {
    uint32_t u = 0;
    while (u < n && used[u] != &f->tensors[i])
      u++;
    if (u == n)
      return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "tensor %s is not part of the llama model "
                       "vkrt-service runs (token_embd, output_norm, output, rope_freqs and per layer "
                       "attn_norm, attn_q/k/v/output, ffn_norm, ffn_gate/up/down weights; no biases "
                       "or experts)", f->tensors[i].name);
  }
  for (uint32_t u = 0; u < n; u++) {
    struct gguf_tensor *t = &f->tensors[used[u] - f->tensors]; /* the file's own, to convert */
    if (t->supported) /* a type with kernels, or converted already (a tied head) */
      continue;
    int r = gguf_convert(f, t, err, err_size);
    if (r)
      return r;
    m->converted[t->ggml_type]++;
  }
  return GGUF_OK;
}

int llama_model_load(struct gguf_file *f, struct llama_model *out, char *err, size_t err_size) {
  memset(out, 0, sizeof(*out));
  if (strcmp(f->architecture, "llama"))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "general.architecture is \"%s\"; vkrt-service "
                     "runs \"llama\" models", f->architecture);
  struct llama_hparams *hp = &out->hp;
  int r = load_hparams(f, hp, err, err_size);
  if (r)
    return r;
  uint32_t experts = 0;
  r = gguf_get_u32(f, "llama.expert_count", &experts, err, err_size);
  if (r && r != GGUF_E_MISSING)
    return r;
  if (!r && experts > 0)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "llama.expert_count = %u: a mixture of "
                     "experts (Mixtral-style); vkrt-service runs dense llama models", experts);
  const struct gguf_tensor *te = gguf_find(f, "token_embd.weight");
  if (!te)
    return gguf_fail(err, err_size, GGUF_E_MISSING, "missing tensor token_embd.weight");
  if (te->ne[1] < 1 || te->ne[1] > INT32_MAX)
    return gguf_fail(err, err_size, GGUF_E_MISSING, "tensor token_embd.weight has %" PRIu64
                     " rows (the vocabulary)", te->ne[1]);
  hp->n_vocab = (uint32_t)te->ne[1];
  uint64_t tokens;
  if (!gguf_get_array_len(f, "tokenizer.ggml.tokens", GGUF_KV_STRING, &tokens, NULL, 0) &&
      tokens != hp->n_vocab)
    return gguf_fail(err, err_size, GGUF_E_MISSING, "tensor token_embd.weight has %u rows but "
                     "tokenizer.ggml.tokens has %" PRIu64 " tokens", hp->n_vocab, tokens);
  uint64_t E = hp->n_embd, Q = (uint64_t)hp->n_head * hp->head_dim,
           KV = (uint64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff, V = hp->n_vocab;
  if ((r = find_tensor(f, "token_embd.weight", false, E, V, &out->tok_embd, err, err_size)) ||
      (r = find_tensor(f, "output_norm.weight", true, E, 0, &out->output_norm, err, err_size)))
    return r;
  out->output_tied = !gguf_find(f, "output.weight");
  if (out->output_tied)
    out->output = out->tok_embd;
  else if ((r = find_tensor(f, "output.weight", false, E, V, &out->output, err, err_size)))
    return r;
  if (gguf_find(f, "rope_freqs.weight")) {
    if ((r = find_tensor(f, "rope_freqs.weight", true, hp->n_rot / 2, 0, &out->rope_freqs, err,
                         err_size)))
      return r;
    const uint8_t *p = gguf_data(f, out->rope_freqs);
    for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
      float v;
      memcpy(&v, p + 4 * i, 4);
      if (!(v > 0.0f && v < 1e30f))
        return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "rope_freqs.weight[%u] = %g is not a "
                         "finite factor > 0", i, (double)v);
    }
  }
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    struct llama_layer *L = &out->layer[l];
    if ((r = layer_tensor(f, l, "attn_norm", true, E, 0, &L->attn_norm, err, err_size)) ||
        (r = layer_tensor(f, l, "attn_q", false, E, Q, &L->wq, err, err_size)) ||
        (r = layer_tensor(f, l, "attn_k", false, E, KV, &L->wk, err, err_size)) ||
        (r = layer_tensor(f, l, "attn_v", false, E, KV, &L->wv, err, err_size)) ||
        (r = layer_tensor(f, l, "attn_output", false, Q, E, &L->wo, err, err_size)) ||
        (r = layer_tensor(f, l, "ffn_norm", true, E, 0, &L->ffn_norm, err, err_size)) ||
        (r = layer_tensor(f, l, "ffn_gate", false, E, F, &L->ffn_gate, err, err_size)) ||
        (r = layer_tensor(f, l, "ffn_up", false, E, F, &L->ffn_up, err, err_size)) ||
        (r = layer_tensor(f, l, "ffn_down", false, F, E, &L->ffn_down, err, err_size)))
      return r;
  }
  out->file = f;
  return check_and_convert(f, out, err, err_size);
}

uint64_t llama_weight_bytes(const struct llama_model *m) {
  /* per token: one row of the embedding, every layer's tensors, the output norm and head */
  uint64_t bytes = gguf_row_bytes(m->tok_embd) + m->output_norm->size + m->output->size +
                   (m->rope_freqs ? m->rope_freqs->size : 0);
  for (uint32_t l = 0; l < m->hp.n_layer; l++) {
    const struct llama_layer *L = &m->layer[l];
    bytes += L->attn_norm->size + L->wq->size + L->wk->size + L->wv->size + L->wo->size +
             L->ffn_norm->size + L->ffn_gate->size + L->ffn_up->size + L->ffn_down->size;
  }
  return bytes;
}
