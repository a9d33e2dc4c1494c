/* The vocabulary of tokenizer.ggml.model = llama or gpt2 (tokens, types, BOS/EOS/EOT, a hash
 * table of the pieces) and the SentencePiece tokenizer of "llama", as llama.cpp's
 * llm_tokenizer_spm: the text (a space prepended, spaces as U+2581) split into UTF-8
 * characters, adjacent pairs whose concatenation is a token merged highest score first (ties:
 * the leftmost pair), characters left without a token spelled as byte tokens <0xNN>. "gpt2"
 * (byte-level BPE) tokenizes in tokenizer_bpe.c.
 * The pieces point into the GGUF file, which must outlive the vocabulary. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static const char SPACE_MARK[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's space */

static uint32_t hash_bytes(const char *s, size_t n) { /* FNV-1a */
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

int32_t vocab_piece_id(const struct llama_vocab *v, const char *s, size_t n) {
  for (uint32_t i = hash_bytes(s, n) & v->slot_mask;; i = (i + 1) & v->slot_mask) {
    uint32_t e = v->slot[i];
    if (!e)
      return -1;
    const struct gguf_str *p = &v->piece[e - 1];
    if (p->len == n && !memcmp(p->s, s, n))
      return (int32_t)(e - 1);
  }
}

static int32_t meta_id(const struct gguf_file *f, const char *key, int32_t def, uint32_t n,
                       int *r, char *err, size_t err_size) {
  uint32_t id = 0;
  int q = gguf_get_u32(f, key, &id, err, err_size);
  if (q == GGUF_E_MISSING && def != INT32_MIN)
    return def;
  if (!q && id >= n)
    q = gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "%s = %u is not a token of the %u-token vocabulary",
                  key, id, n);
  *r = q;
  return q ? -1 : (int32_t)id;
}

static void spm_byte_tokens(struct llama_vocab *v) {
  for (int b = 0; b < 256; b++) { /* <0xNN>, else the byte itself, else <unk> */
    char name[8];
    snprintf(name, sizeof(name), "<0x%02X>", b);
    int32_t id = vocab_piece_id(v, name, 6);
    if (id < 0) {
      char c = (char)b;
      id = vocab_piece_id(v, &c, 1);
    }
    v->byte_token[b] = id >= 0 ? id : v->unk;
  }
}

int llama_vocab_load(const struct gguf_file *f, struct llama_vocab **out, char *err,
                     size_t err_size) {
  *out = NULL;
  const char *model;
  uint64_t model_len, n;
  int r = gguf_get_string(f, "tokenizer.ggml.model", &model, &model_len, err, err_size);
  if (r)
    return r;
  enum llama_vocab_type kind;
  if (model_len == 5 && !memcmp(model, "llama", 5))
    kind = LLAMA_VOCAB_SPM;
  else if (model_len == 4 && !memcmp(model, "gpt2", 4))
    kind = LLAMA_VOCAB_BPE;
  else
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE,
                     "tokenizer.ggml.model is \"%.*s\"; vkrt-service tokenizes \"llama\" "
                     "(SentencePiece) and \"gpt2\" (byte-level BPE)",
                     (int)(model_len < 64 ? model_len : 64), model);
  if ((r = gguf_get_array_len(f, "tokenizer.ggml.tokens", GGUF_KV_STRING, &n, err, err_size)))
    return r;
  if (n < 1 || n > INT32_MAX / 4)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "tokenizer.ggml.tokens has %" PRIu64
                     " tokens", n);
  struct llama_vocab *v = calloc(1, sizeof(*v));
  uint32_t cap = 1;
  while (cap < 2 * n)
    cap <<= 1;
  if (v) {
    v->kind = kind;
    v->n = (uint32_t)n;
    v->piece = calloc(n, sizeof(*v->piece));
    v->score = calloc(n, sizeof(*v->score));
    v->type = calloc(n, sizeof(*v->type));
    v->slot = calloc(cap, sizeof(*v->slot));
    v->slot_mask = cap - 1;
  }
  if (!v || !v->piece || !v->score || !v->type || !v->slot) {
    llama_vocab_free(v);
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory for a %" PRIu64
                     "-token vocabulary", n);
  }
  r = gguf_get_array_str(f, "tokenizer.ggml.tokens", v->piece, n, err, err_size);
  /* scores and types are optional (0 and normal), SentencePiece's <unk> is 0 unless given, as
   * in llama.cpp; BOS is added unless tokenizer.ggml.add_bos_token says not to */
  if (!r && gguf_kv_find(f, "tokenizer.ggml.scores"))
    r = gguf_get_array_f32(f, "tokenizer.ggml.scores", v->score, n, err, err_size);
  if (!r && gguf_kv_find(f, "tokenizer.ggml.token_type"))
    r = gguf_get_array_i32(f, "tokenizer.ggml.token_type", v->type, n, err, err_size);
  else
    for (uint64_t i = 0; i < n; i++)
      v->type[i] = TOKEN_NORMAL;
  bool prefix = true;
  if (!r && gguf_kv_find(f, "tokenizer.ggml.add_space_prefix"))
    r = gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &prefix, err, err_size);
  v->add_space_prefix = prefix;
  bool add_bos = true;
  if (!r && gguf_kv_find(f, "tokenizer.ggml.add_bos_token"))
    r = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, err, err_size);
  v->add_bos = add_bos;
  if (!r)
    v->bos = meta_id(f, "tokenizer.ggml.bos_token_id", INT32_MIN, v->n, &r, err, err_size);
  if (!r)
    v->eos = meta_id(f, "tokenizer.ggml.eos_token_id", -1, v->n, &r, err, err_size);
  if (!r)
    v->eot = meta_id(f, "tokenizer.ggml.eot_token_id", -1, v->n, &r, err, err_size);
  if (!r)
    v->unk = meta_id(f, "tokenizer.ggml.unknown_token_id", kind == LLAMA_VOCAB_SPM ? 0 : -1,
                     v->n, &r, err, err_size);
  if (r) {
    llama_vocab_free(v);
    return r;
  }
  for (uint32_t id = 0; id < v->n; id++) { /* a repeated piece maps to its last id */
    const struct gguf_str *p = &v->piece[id];
    uint32_t i = hash_bytes(p->s, p->len) & v->slot_mask;
    while (v->slot[i] && (v->piece[v->slot[i] - 1].len != p->len ||
                          memcmp(v->piece[v->slot[i] - 1].s, p->s, p->len)))
      i = (i + 1) & v->slot_mask;
    v->slot[i] = id + 1;
  }
  if (kind == LLAMA_VOCAB_BPE && (r = bpe_vocab_load(f, v, err, err_size))) {
    llama_vocab_free(v);
    return r;
  }
  if (kind == LLAMA_VOCAB_SPM)
    spm_byte_tokens(v);
  *out = v;
  return GGUF_OK;
}

void llama_vocab_free(struct llama_vocab *v) {
  if (!v)
    return;
  free(v->piece);
  free(v->score);
  free(v->type);
  free(v->slot);
  bpe_vocab_free(v);
  free(v);
}

enum llama_vocab_type llama_vocab_kind(const struct llama_vocab *v) { return v->kind; }
uint32_t llama_vocab_size(const struct llama_vocab *v) { return v->n; }
int32_t llama_vocab_bos(const struct llama_vocab *v) { return v->bos; }
int32_t llama_vocab_eos(const struct llama_vocab *v) { return v->eos; }
int32_t llama_vocab_eot(const struct llama_vocab *v) { return v->eot; }
bool llama_vocab_add_bos(const struct llama_vocab *v) { return v->add_bos; }
bool llama_vocab_is_eog(const struct llama_vocab *v, int32_t id) {
  return id >= 0 && (id == v->eos || id == v->eot);
}

/* ---- tokenize ------------------------------------------------------------------------ */

/* Heap order of llama.cpp's llm_bigram_spm::comparator (and llm_bigram_bpe's, whose score is
 * minus the rank): higher score, then lower left. */
static bool before(const struct bigram *a, const struct bigram *b) {
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

void bigram_push(struct bigram_heap *h, struct bigram x) {
  size_t i = h->n++;
  while (i && before(&x, &h->b[(i - 1) / 2])) {
    h->b[i] = h->b[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->b[i] = x;
}

static struct bigram bigram_pop(struct bigram_heap *h) {
  struct bigram top = h->b[0], x = h->b[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && before(&h->b[c + 1], &h->b[c]))
      c++;
    if (!before(&h->b[c], &x))
      break;
    h->b[i] = h->b[c];
    i = c;
  }
  if (h->n)
    h->b[i] = x;
  return top;
}

void symbols_merge(const struct llama_vocab *v, struct symbol *sym, int32_t n_sym,
                   struct bigram_heap *h, bigram_fn add) {
  h->n = 0;
  for (int32_t i = 1; i < n_sym; i++)
    add(v, sym, h, i - 1, i);
  while (h->n) {
    struct bigram b = bigram_pop(h);
    struct symbol *l = &sym[b.left], *r = &sym[b.right];
    if (!l->n || !r->n || l->n + r->n != b.size) /* one of them merged since */
      continue;
    l->n += r->n;
    l->id = b.id;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0)
      sym[r->next].prev = b.left;
    if (l->prev >= 0)
      add(v, sym, h, l->prev, b.left);
    if (l->next >= 0)
      add(v, sym, h, b.left, l->next);
  }
}

/* SentencePiece: a pair whose concatenation is a piece, by the piece's score. */
static void spm_bigram(const struct llama_vocab *v, const struct symbol *sym,
                       struct bigram_heap *h, int32_t left, int32_t right) {
  uint32_t size = sym[left].n + sym[right].n; /* adjacent: one run of bytes */
  int32_t id = vocab_piece_id(v, sym[left].text, size);
  if (id >= 0)
    bigram_push(h, (struct bigram){.score = v->score[id], .left = left, .right = right,
                                   .size = size, .id = id});
}

static uint32_t utf8_len(uint8_t c) {
  static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return len[c >> 4];
}

int32_t llama_tokenize(const struct llama_vocab *v, const char *text, bool add_bos, int32_t *out,
                       int32_t out_cap) {
  int32_t count = 0;
  if (add_bos) {
    if (count < out_cap)
      out[count] = v->bos;
    count++;
  }
  if (v->kind == LLAMA_VOCAB_BPE) {
    count = bpe_tokenize(v, text, out, out_cap, count);
    return count <= out_cap ? count : -1;
  }
  size_t len = strlen(text);
  if (!len)
    return count <= out_cap ? count : -1;
  /* the escaped text: at most 3 bytes per input byte and the prefix */
  size_t cap = 3 * len + 3, n = 0;
  char *s = malloc(cap);
  struct symbol *sym = malloc(sizeof(*sym) * (len + 1));
  struct bigram_heap h = {.b = malloc(sizeof(*h.b) * 3 * (len + 1))};
  if (!s || !sym || !h.b) {
    free(s), free(sym), free(h.b);
    return -1;
  }
  if (v->add_space_prefix)
    memcpy(s, SPACE_MARK, 3), n = 3;
  for (size_t i = 0; i < len; i++) {
    if (text[i] == ' ')
      memcpy(s + n, SPACE_MARK, 3), n += 3;
    else
      s[n++] = text[i];
  }
  int32_t n_sym = 0;
  for (size_t at = 0; at < n;) {
    uint32_t l = utf8_len((uint8_t)s[at]);
    if (l > n - at)
      l = (uint32_t)(n - at);
    sym[n_sym] = (struct symbol){.text = s + at, .n = l, .prev = n_sym - 1};
    at += l;
    sym[n_sym].next = at == n ? -1 : n_sym + 1;
    n_sym++;
  }
  symbols_merge(v, sym, n_sym, &h, spm_bigram);
  /* Every merged symbol is a token; a character that is not falls back to its bytes. */
  for (int32_t i = 0; i != -1 && n_sym; i = sym[i].next) {
    int32_t id = vocab_piece_id(v, sym[i].text, sym[i].n);
    if (id >= 0) {
      if (count < out_cap)
        out[count] = id;
      count++;
      continue;
    }
    for (uint32_t j = 0; j < sym[i].n; j++) {
      if (count < out_cap)
        out[count] = v->byte_token[(uint8_t)sym[i].text[j]];
      count++;
    }
  }
  free(s), free(sym), free(h.b);
  return count <= out_cap ? count : -1;
}

/* ---- detokenize ---------------------------------------------------------------------- */

static int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

size_t llama_token_piece(const struct llama_vocab *v, int32_t id, char *buf, size_t cap) {
  size_t n = 0;
  if (!cap)
    return 0;
  if (v->kind == LLAMA_VOCAB_BPE)
    return bpe_token_piece(v, id, buf, cap);
  if (id >= 0 && (uint32_t)id < v->n) {
    const struct gguf_str *p = &v->piece[id];
    int32_t type = v->type[id];
    if (type == TOKEN_BYTE && p->len == 6 && !memcmp(p->s, "<0x", 3) && p->s[5] == '>' &&
        hex_digit(p->s[3]) >= 0 && hex_digit(p->s[4]) >= 0) {
      buf[n++] = (char)(hex_digit(p->s[3]) * 16 + hex_digit(p->s[4]));
    } else if (type == TOKEN_NORMAL || type == TOKEN_USER_DEFINED) {
      for (uint64_t i = 0; i < p->len && n + 1 < cap;) {
        if (type == TOKEN_NORMAL && p->len - i >= 3 && !memcmp(p->s + i, SPACE_MARK, 3)) {
          buf[n++] = ' ', i += 3;
        } else {
          buf[n++] = p->s[i++];
        }
      }
    } /* control, unknown and unused tokens print nothing */
  }
  if (n >= cap)
    n = cap - 1;
  buf[n] = '\0';
  return n;
}
