/* --make-gguf for llama models: real hyper-parameters (llama_preset) with random weights and a
 * small valid SentencePiece or byte-level BPE vocabulary, streamed to the file in batches of
 * rows that every CPU
 * helps generate (an 8B f16 file is 16 GB: 64 MiB of rows are held at a time). Each row draws
 * from its own seed (the file's seed, the tensor, the row), so the bytes do not depend on the
 * number of threads. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

bool llama_preset(const char *name, struct llama_make_params *out) {
  static const struct {
    const char *name;
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
    float rope_freq_base, eps, rope_factor;
    bool tie_output;
  } presets[] = {
    {"llama3-8b", 32, 4096, 14336, 32, 8, 128256, 8192, 500000.0f, 1e-5f, 0.0f, false},
    {"llama3.2-1b", 16, 2048, 8192, 32, 8, 128256, 131072, 500000.0f, 1e-5f, 32.0f, true},
    {"qwen2.5-7b", 28, 3584, 18944, 28, 4, 152064, 32768, 1000000.0f, 1e-6f, 0.0f, false},
  };
  for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
    if (!strcmp(name, presets[i].name)) {
      out->n_layer = presets[i].n_layer, out->n_embd = presets[i].n_embd;
      out->n_ff = presets[i].n_ff, out->n_head = presets[i].n_head;
      out->n_head_kv = presets[i].n_head_kv, out->n_vocab = presets[i].n_vocab;
      out->n_ctx = presets[i].n_ctx, out->rope_freq_base = presets[i].rope_freq_base;
      out->eps = presets[i].eps, out->tie_output = presets[i].tie_output;
      out->rope_factor = presets[i].rope_factor;
      return true;
    }
  return false;
}

/* The vocabulary: <unk> <s> </s>, the 256 byte tokens, the printable ASCII characters, "▁",
 * then every lowercase word by length, "▁word" before "word" — every piece's prefixes come
 * first, so merges can build each one. Scores fall with the id (earlier pieces merge first). */
enum { VOCAB_SPECIAL = 3, VOCAB_BYTES = 256, VOCAB_ASCII = 94, VOCAB_MIN = 3 + 256 + 94 + 1,
       WORD_MAX = 8 };

struct piece_gen {
  uint32_t id;
  uint32_t len;            /* of the current word; 0 before the first */
  uint8_t letter[WORD_MAX];
  bool marked;             /* the "▁word" of the word was given, "word" is next */
};

/* The next piece into buf (NUL-terminated); its token type (llama.cpp's llama_token_type). */
static int32_t next_piece(struct piece_gen *g, char *buf) {
  uint32_t id = g->id++;
  if (id < VOCAB_SPECIAL) {
    static const char *const special[] = {"<unk>", "<s>", "</s>"};
    strcpy(buf, special[id]);
    return id ? 3 : 2;
  }
  if (id < VOCAB_SPECIAL + VOCAB_BYTES) {
    snprintf(buf, 8, "<0x%02X>", id - VOCAB_SPECIAL);
    return 6;
  }
  id -= VOCAB_SPECIAL + VOCAB_BYTES;
  if (id < VOCAB_ASCII) {
    buf[0] = (char)('!' + id), buf[1] = '\0';
    return 1;
  }
  if (id == VOCAB_ASCII) {
    strcpy(buf, "\xe2\x96\x81");
    return 1;
  }
  if (g->marked && g->len > 1) { /* the word without its space mark (single letters exist) */
    g->marked = false;
  } else { /* the next word (odometer over a..z by length), with its space mark */
    uint32_t i = 0;
    while (i < g->len && g->letter[i] == 25)
      g->letter[i++] = 0;
    if (i == g->len)
      g->letter[g->len++] = 0;
    else
      g->letter[i]++;
    g->marked = true;
  }
  size_t n = 0;
  if (g->marked)
    memcpy(buf, "\xe2\x96\x81", 3), n = 3;
  for (uint32_t i = 0; i < g->len; i++)
    buf[n++] = (char)('a' + g->letter[g->len - 1 - i]);
  buf[n] = '\0';
  return 1;
}

static void write_spm_vocab(struct gguf_writer *w, uint32_t n_vocab) {
  gguf_writer_kv_str(w, "tokenizer.ggml.model", "llama");
  gguf_writer_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
  gguf_writer_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
  gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
  char piece[4 + WORD_MAX];
  struct piece_gen g = {0};
  gguf_writer_kv_array(w, "tokenizer.ggml.tokens", GGUF_KV_STRING, n_vocab);
  for (uint32_t i = 0; i < n_vocab; i++) {
    next_piece(&g, piece);
    gguf_writer_str(w, piece, strlen(piece));
  }
  gguf_writer_kv_array(w, "tokenizer.ggml.scores", GGUF_KV_F32, n_vocab);
  for (uint32_t i = 0; i < n_vocab; i++)
    gguf_writer_f32(w, i < VOCAB_SPECIAL + VOCAB_BYTES ? 0.0f
                                                       : -(float)(i - VOCAB_SPECIAL - VOCAB_BYTES));
  gguf_writer_kv_array(w, "tokenizer.ggml.token_type", GGUF_KV_I32, n_vocab);
  g = (struct piece_gen){0};
  for (uint32_t i = 0; i < n_vocab; i++)
    gguf_writer_u32(w, (uint32_t)next_piece(&g, piece));
}

/* ---- the byte-level BPE vocabulary ---------------------------------------------------------
 * Pieces are kept as the bytes they stand for and written in GPT-2's characters. Each piece
 * past the 256 bytes is a merge of two earlier ones (its rank: its id - 256), so every merge's
 * sides and result are tokens. */
enum { BPE_BYTES = 256, BPE_SPECIAL = 3, BPE_VOCAB_MIN = BPE_BYTES + BPE_SPECIAL };
static const char *const bpe_special[BPE_SPECIAL] = {"<|begin_of_text|>", "<|end_of_text|>",
                                                     "<|eot_id|>"};

struct bpe_build {
  uint32_t n, cap;     /* pieces made, and the most there may be (n_vocab - 3) */
  char *text;          /* the pieces' bytes, one after the other */
  uint32_t *end;       /* piece i is text[end[i - 1] .. end[i]) */
  int32_t (*merge)[2]; /* piece 256 + i = merge[i][0] followed by merge[i][1] */
  uint32_t *slot, slot_mask; /* open addressing: id + 1 by the piece's bytes */
};

static const char *bpe_piece_text(const struct bpe_build *b, int32_t id, uint32_t *len) {
  uint32_t start = id ? b->end[id - 1] : 0;
  *len = b->end[id] - start;
  return b->text + start;
}

static uint32_t *bpe_find(const struct bpe_build *b, const char *s, uint32_t len) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (uint32_t i = 0; i < len; i++)
    h = (h ^ (uint8_t)s[i]) * 16777619u;
  for (uint32_t i = h & b->slot_mask;; i = (i + 1) & b->slot_mask) {
    uint32_t plen;
    if (!b->slot[i])
      return &b->slot[i];
    const char *p = bpe_piece_text(b, (int32_t)b->slot[i] - 1, &plen);
    if (plen == len && !memcmp(p, s, len))
      return &b->slot[i];
  }
}

/* The id of left's bytes followed by right's: a new piece by a new merge unless it is one
 * already; -1 when the vocabulary is full. */
static int32_t bpe_merge(struct bpe_build *b, int32_t left, int32_t right) {
  uint32_t llen, rlen, start = b->end[b->n - 1];
  const char *l = bpe_piece_text(b, left, &llen), *r = bpe_piece_text(b, right, &rlen);
  memmove(b->text + start, l, llen); /* the next piece's place: past every piece */
  memmove(b->text + start + llen, r, rlen);
  uint32_t *slot = bpe_find(b, b->text + start, llen + rlen);
  if (*slot)
    return (int32_t)*slot - 1;
  if (b->n == b->cap)
    return -1;
  b->merge[b->n - BPE_BYTES][0] = left, b->merge[b->n - BPE_BYTES][1] = right;
  b->end[b->n] = start + llen + rlen;
  *slot = b->n + 1;
  return (int32_t)b->n++;
}

/* The bytes s[0..len) as a piece, built left to right (each prefix a piece too). */
static void bpe_word(struct bpe_build *b, const char *s, size_t len) {
  int32_t id = (uint8_t)s[0];
  for (size_t i = 1; i < len && id >= 0; i++)
    id = bpe_merge(b, id, (uint8_t)s[i]);
}

static void bpe_build_free(struct bpe_build *b) {
  free(b->text), free(b->end), free(b->merge), free(b->slot);
}

/* What Llama 3's pre-tokenizer cuts English text, numbers and code into; then every lowercase
 * word, shorter first, each with its leading space and without, until n_vocab - 3 pieces. */
static int bpe_build(struct bpe_build *b, uint32_t n_vocab) {
  static const char *const words[] = {
    "the", "of", "and", "to", "in", "is", "was", "that", "for", "it", "with", "as", "on", "be",
    "at", "by", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which",
    "one", "you", "were", "her", "all", "she", "there", "would", "their", "we", "him", "been",
    "has", "when", "who", "will", "more", "no", "if", "out", "so", "said", "what", "up", "its",
    "about", "into", "than", "them", "can", "only", "other", "new", "some", "could", "time",
    "these", "two", "may", "then", "do", "first", "any", "my", "now", "such", "like", "our",
    "over", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before",
    "must", "through", "back", "years", "where", "much", "your", "way", "well", "down",
    "should", "because", "each", "just", "those", "people", "how", "too", "little", "good",
    "very", "make", "world", "still", "see", "work", "long", "get", "here", "between", "life",
    "day", "know", "while", "last", "great", "old", "year", "come", "go", "right", "take",
    "three", "hello", "once", "upon", "story", "The", "I", "It", "He", "She", "In", "This",
    "Hello", "Once", "There", "We", "You", "They", "A"};
  static const char *const runs[] = {
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", ".\n", ".\n\n", ",\"", ".\"", "!\"", "?\"",
    "...", "--", "!!", "??", "?!", " (", " \"", " '", " -", " =", "==", " {", "{\n", "}\n",
    "):", ");", "();", "()", " //", "/*", "*/", " */", "\n\n", "\n\n\n", "  ", "   ", "    ",
    "        ", "\t\t", " \n", "\r\n"};
  uint32_t cap = n_vocab - BPE_SPECIAL, slots = 1;
  while (slots < 2 * cap)
    slots <<= 1;
  *b = (struct bpe_build){.n = BPE_BYTES, .cap = cap, .slot_mask = slots - 1};
  /* at most 10 bytes a piece (a word of the lists above or of the odometer, 5 letters at
   * most at 2^22 pieces, with its leading space) and room for the next one */
  b->text = malloc((size_t)cap * 10 + 32);
  b->end = malloc(cap * sizeof(*b->end));
  b->merge = malloc((cap - BPE_BYTES + 1) * sizeof(*b->merge));
  b->slot = calloc(slots, sizeof(*b->slot));
  if (!b->text || !b->end || !b->merge || !b->slot) {
    bpe_build_free(b);
    return GGUF_E_NO_MEMORY;
  }
  for (uint32_t i = 0; i < BPE_BYTES; i++) {
    b->text[i] = (char)i;
    b->end[i] = i + 1;
    *bpe_find(b, b->text + i, 1) = i + 1;
  }
  char buf[16];
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
    size_t len = strlen(words[i]);
    buf[0] = ' ';
    memcpy(buf + 1, words[i], len);
    bpe_word(b, buf, len + 1);
    bpe_word(b, words[i], len);
  }
  for (int d = 0; d < 100; d++) {
    buf[0] = (char)('0' + d / 10), buf[1] = (char)('0' + d % 10);
    bpe_word(b, buf, 2);
  }
  for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
    bpe_word(b, runs[i], strlen(runs[i]));
  /* the odometer: every word of len letters, in order, from its prefix's pieces */
  for (uint32_t len = 1; b->n < b->cap; len++) {
    uint8_t letter[8] = {0};
    do {
      buf[0] = ' ';
      for (uint32_t i = 0; i < len; i++)
        buf[1 + i] = (char)('a' + letter[i]);
      uint32_t *with = bpe_find(b, buf, len), *without = bpe_find(b, buf + 1, len - 1);
      if (len > 1 && *with && *without) { /* the prefixes: " wor" and "wor" of " word" */
        bpe_merge(b, (int32_t)*with - 1, (uint8_t)buf[len]);
        bpe_merge(b, (int32_t)*without - 1, (uint8_t)buf[len]);
      } else if (len == 1) {
        bpe_merge(b, ' ', (uint8_t)buf[1]);
      }
      uint32_t i = len;
      while (i-- > 0 && ++letter[i] == 26)
        letter[i] = 0;
      if (i == UINT32_MAX)
        break;
    } while (b->n < b->cap);
  }
  return GGUF_OK;
}

/* A piece in GPT-2's characters (out: 2 bytes per byte). */
static size_t bpe_chars(const struct bpe_build *b, int32_t id, char *out) {
  uint32_t len;
  const char *s = bpe_piece_text(b, id, &len);
  size_t n = 0;
  for (uint32_t i = 0; i < len; i++)
    n += bpe_byte_utf8((uint8_t)s[i], out + n);
  return n;
}

static void write_bpe_vocab(struct gguf_writer *w, const struct bpe_build *b, uint32_t n_vocab) {
  char text[64];
  gguf_writer_kv_str(w, "tokenizer.ggml.model", "gpt2");
  gguf_writer_kv_str(w, "tokenizer.ggml.pre", "llama-bpe");
  gguf_writer_kv_u32(w, "tokenizer.ggml.bos_token_id", b->n);
  gguf_writer_kv_u32(w, "tokenizer.ggml.eos_token_id", b->n + 1);
  gguf_writer_kv_u32(w, "tokenizer.ggml.eot_token_id", b->n + 2);
  gguf_writer_kv_bool(w, "tokenizer.ggml.add_bos_token", true);
  gguf_writer_kv_array(w, "tokenizer.ggml.tokens", GGUF_KV_STRING, n_vocab);
  for (uint32_t i = 0; i < b->n; i++)
    gguf_writer_str(w, text, bpe_chars(b, (int32_t)i, text));
  for (uint32_t i = 0; i < BPE_SPECIAL; i++)
    gguf_writer_str(w, bpe_special[i], strlen(bpe_special[i]));
  gguf_writer_kv_array(w, "tokenizer.ggml.token_type", GGUF_KV_I32, n_vocab);
  for (uint32_t i = 0; i < n_vocab; i++)
    gguf_writer_u32(w, i < b->n ? TOKEN_NORMAL : TOKEN_CONTROL);
  gguf_writer_kv_array(w, "tokenizer.ggml.merges", GGUF_KV_STRING, b->n - BPE_BYTES);
  for (uint32_t i = 0; i < b->n - BPE_BYTES; i++) {
    size_t n = bpe_chars(b, b->merge[i][0], text);
    text[n++] = ' ';
    n += bpe_chars(b, b->merge[i][1], text + n);
    gguf_writer_str(w, text, n);
  }
}

static int check_params(const struct llama_make_params *p, char *err, size_t err_size) {
  uint32_t block = p->foreign ? gguf_ggml_block(p->foreign) : vkrt_type_block(p->type);
  vkrt_type to;
  if (p->foreign && (!gguf_foreign_target(p->foreign, false, &to) || p->q4_k_m))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "ggml type %u is not one converted on the "
                     "host, or mixed with Q4_K_M", p->foreign);
  if (p->type != VKRT_TYPE_F32 && p->type != VKRT_TYPE_F16 && p->type != VKRT_TYPE_Q8_0 &&
      p->type != VKRT_TYPE_Q4_K && p->type != VKRT_TYPE_Q6_K)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "matrices are f32, f16, q8_0, q4_K or q6_K");
  if (p->q4_k_m && p->type != VKRT_TYPE_Q4_K)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "the Q4_K_M mixture is q4_K with q6_K, not %s",
                     vkrt_type_str(p->type));
  if (!p->n_layer || p->n_layer > LLAMA_MAX_LAYERS)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "%u layers (1..%u)", p->n_layer,
                     LLAMA_MAX_LAYERS);
  if (!p->n_head || !p->n_head_kv || p->n_embd % p->n_head || p->n_head % p->n_head_kv ||
      (p->n_embd / p->n_head) % 2)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "hidden %u, %u heads, %u KV heads: the "
                     "heads must divide the hidden size into an even head size and the KV heads "
                     "the heads", p->n_embd, p->n_head, p->n_head_kv);
  if (!p->n_embd || !p->n_ff || p->n_embd % block || p->n_ff % block)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "hidden %u and ffn %u must be multiples "
                     "of the %u-element %s block", p->n_embd, p->n_ff, block,
                     p->foreign ? gguf_ggml_type_str(p->foreign) : vkrt_type_str(p->type));
  uint32_t vocab_min = p->vocab == LLAMA_VOCAB_BPE ? BPE_VOCAB_MIN : VOCAB_MIN;
  if (p->n_vocab < vocab_min || p->n_vocab > (1u << 22))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "a vocabulary of %u tokens (%u..%u: the "
                     "%s tokens first)", p->n_vocab, vocab_min, 1u << 22,
                     p->vocab == LLAMA_VOCAB_BPE ? "byte and special" : "special, byte and ASCII");
  if (!(p->rope_factor == 0 || (p->rope_factor >= 1 && p->rope_factor <= 1024)) ||
      !(p->rope_linear == 0 || (p->rope_linear >= 1 && p->rope_linear <= 1024)))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "RoPE scaling factors %g and %g (1..1024, "
                     "or 0 for none)", (double)p->rope_factor, (double)p->rope_linear);
  if (!p->n_ctx || !(p->rope_freq_base > 1) || !(p->eps > 0 && p->eps < 1))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "context %u, RoPE base %g, eps %g",
                     p->n_ctx, (double)p->rope_freq_base, (double)p->eps);
  return GGUF_OK;
}

/* The tensors in file order: token_embd, output_norm, output (unless tied), then per layer. */
struct tensor_plan {
  char name[48];
  uint64_t ne0, ne1;   /* ne1 0: a norm or the RoPE factors (f32 vectors) */
  vkrt_type type;
  uint32_t foreign;    /* the ggml type written instead of `type` (0: type's) */
};

/* Llama 3.1's RoPE factors for pair i of n_rot (convert_hf_to_gguf's llama3 rope_freqs):
 * wavelengths under 8192 / 4 positions keep theirs, over 8192 are stretched by `factor`,
 * between they blend. */
static float llama3_rope_factor(const struct llama_make_params *p, uint32_t i, uint32_t n_rot) {
  const double old_ctx = 8192, low = 1, high = 4;
  double freq = 1.0 / pow((double)p->rope_freq_base, 2.0 * i / n_rot);
  double wavelen = 6.283185307179586 / freq;
  if (wavelen < old_ctx / high)
    return 1.0f;
  if (wavelen > old_ctx / low)
    return p->rope_factor;
  double smooth = (old_ctx / wavelen - low) / (high - low);
  return (float)(1.0 / ((1 - smooth) / p->rope_factor + smooth));
}

/* llama.cpp's use_more_bits: the layers Q4_K_M gives q6_K attn_v and ffn_down. */
static bool more_bits(uint32_t l, uint32_t n) {
  return l < n / 8 || l >= 7 * n / 8 || (l >= n / 8 && (l - n / 8) % 3 == 2);
}

static uint32_t plan_tensors(const struct llama_make_params *p, struct tensor_plan *t) {
  uint32_t n = 0, hd = p->n_embd / p->n_head;
  uint64_t E = p->n_embd, KV = (uint64_t)p->n_head_kv * hd;
  const vkrt_type more = p->q4_k_m ? VKRT_TYPE_Q6_K : p->type;
  /* the embedding's values ~1/sqrt(E) too, as trained models have (~0.02 at 2048): logits of
   * unit order when the head is tied to it */
  t[n++] = (struct tensor_plan){"token_embd.weight", E, p->n_vocab,
                                p->tie_output ? more : p->type};
  t[n++] = (struct tensor_plan){"output_norm.weight", E, 0, VKRT_TYPE_F32};
  if (p->rope_factor > 0)
    t[n++] = (struct tensor_plan){"rope_freqs.weight", hd / 2, 0, VKRT_TYPE_F32};
  if (!p->tie_output)
    t[n++] = (struct tensor_plan){"output.weight", E, p->n_vocab, more};
  for (uint32_t l = 0; l < p->n_layer; l++) {
    static const char *const which[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                        "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    const uint64_t shape[][2] = {{E, 0}, {E, E}, {E, KV}, {E, KV}, {E, E},
                                 {E, 0}, {E, p->n_ff}, {E, p->n_ff}, {p->n_ff, E}};
    for (int i = 0; i < 9; i++) {
      t[n] = (struct tensor_plan){.ne0 = shape[i][0], .ne1 = shape[i][1], .type = p->type};
      if (!shape[i][1])
        t[n].type = VKRT_TYPE_F32;
      else if ((i == 3 || i == 8) && more_bits(l, p->n_layer))
        t[n].type = more;
      snprintf(t[n].name, sizeof(t[n].name), "blk.%u.%s.weight", l, which[i]);
      n++;
    }
  }
  for (uint32_t i = 0; i < n; i++) /* every matrix of the foreign type */
    t[i].foreign = t[i].ne1 ? p->foreign : 0;
  return n;
}

#define BATCH_BYTES (64u << 20) /* rows generated in parallel, then written */

/* A batch of rows of one tensor, handed out row by row to the threads. */
struct batch {
  uint8_t *buf;
  vkrt_type type;
  uint32_t foreign; /* rows of this ggml type instead (foreign.c), 0: type's */
  uint64_t ne0, row_bytes, row0, rows, seed;
  uint32_t tensor;
  atomic_uint_fast64_t next;
};

static uint64_t row_seed(uint64_t seed, uint32_t tensor, uint64_t row) { /* splitmix64 */
  uint64_t z = seed + ((uint64_t)tensor << 40) + row + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) | 1; /* xorshift64* never starts from 0 */
}

static void *batch_rows(void *arg) {
  struct batch *b = arg;
  for (uint64_t i; (i = atomic_fetch_add(&b->next, 1)) < b->rows;) {
    uint64_t rng = row_seed(b->seed, b->tensor, b->row0 + i);
    if (b->foreign)
      gguf_foreign_synth_row(b->buf + i * b->row_bytes, b->foreign, b->ne0, &rng);
    else
      gguf_synth_row(b->buf + i * b->row_bytes, b->type, b->ne0, &rng);
  }
  return NULL;
}

/* Rows [row0, row0 + rows) of tensor t into buf, on `threads` threads (the caller one). */
static void batch_run(struct batch *b, uint32_t threads) {
  atomic_init(&b->next, 0);
  gguf_run_threads(batch_rows, b, threads);
}

int llama_write_gguf(const char *path, const struct llama_make_params *p, char *err,
                     size_t err_size) {
  int r = check_params(p, err, err_size);
  if (r)
    return r;
  uint32_t hd = p->n_embd / p->n_head;
  struct tensor_plan *plan = malloc(sizeof(*plan) * (4 + 9 * (size_t)p->n_layer));
  uint64_t widest = p->n_embd > p->n_ff ? p->n_embd : p->n_ff;
  uint8_t *row = malloc(BATCH_BYTES > widest * sizeof(float) ? BATCH_BYTES : widest * sizeof(float));
  const uint32_t threads = gguf_threads();
  struct bpe_build bpe = {0};
  bool is_bpe = p->vocab == LLAMA_VOCAB_BPE;
  if (!plan || !row || (is_bpe && bpe_build(&bpe, p->n_vocab))) {
    free(plan), free(row);
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory");
  }
  uint32_t n_tensors = plan_tensors(p, plan);
  struct gguf_writer w;
  /* general and llama keys (two more for linear RoPE scaling), then the vocabulary's:
   * SentencePiece 7, BPE 9 */
  if ((r = gguf_writer_open(&w, path, n_tensors, 12 + (p->rope_linear > 0 ? 2 : 0) + (is_bpe ? 9 : 7),
                            err, err_size))) {
    free(plan), free(row);
    bpe_build_free(&bpe);
    return r;
  }
  char name[96];
  snprintf(name, sizeof(name), "vkrt-service synthetic llama (%u layers, hidden %u, %s%s)",
           p->n_layer, p->n_embd, p->foreign ? gguf_ggml_type_str(p->foreign) : vkrt_type_str(p->type),
           p->q4_k_m ? "_M" : "");
  gguf_writer_kv_str(&w, "general.architecture", "llama");
  gguf_writer_kv_str(&w, "general.name", name);
  gguf_writer_kv_u32(&w, "llama.block_count", p->n_layer);
  gguf_writer_kv_u32(&w, "llama.context_length", p->n_ctx);
  gguf_writer_kv_u32(&w, "llama.embedding_length", p->n_embd);
  gguf_writer_kv_u32(&w, "llama.feed_forward_length", p->n_ff);
  gguf_writer_kv_u32(&w, "llama.attention.head_count", p->n_head);
  gguf_writer_kv_u32(&w, "llama.attention.head_count_kv", p->n_head_kv);
  gguf_writer_kv_u32(&w, "llama.rope.dimension_count", hd);
  gguf_writer_kv_f32(&w, "llama.rope.freq_base", p->rope_freq_base);
  if (p->rope_linear > 0) {
    gguf_writer_kv_str(&w, "llama.rope.scaling.type", "linear");
    gguf_writer_kv_f32(&w, "llama.rope.scaling.factor", p->rope_linear);
  }
  gguf_writer_kv_f32(&w, "llama.attention.layer_norm_rms_epsilon", p->eps);
  if (is_bpe)
    write_bpe_vocab(&w, &bpe, p->n_vocab);
  else
    write_spm_vocab(&w, p->n_vocab);
  bpe_build_free(&bpe);
  for (uint32_t t = 0; t < n_tensors; t++)
    gguf_writer_tensor_info_ggml(&w, plan[t].name, plan[t].ne0, plan[t].ne1,
                                 plan[t].foreign ? plan[t].foreign : gguf_ggml_id(plan[t].type));
  gguf_writer_align(&w);
  uint64_t rng = p->seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint32_t t = 0; t < n_tensors && w.ok; t++) {
    if (!plan[t].ne1) { /* norm weights near 1, or the RoPE factors */
      const bool factors = !strcmp(plan[t].name, "rope_freqs.weight");
      for (uint64_t i = 0; i < plan[t].ne0; i++) {
        float v = factors ? llama3_rope_factor(p, (uint32_t)i, hd)
                          : 1.0f + ((float)(vkrt_xorshift(&rng) >> 40) / (float)(1 << 24) - 0.5f) * 0.2f;
        memcpy(row + 4 * i, &v, 4);
      }
      gguf_writer_data(&w, row, plan[t].ne0 * 4);
    } else {
      struct batch b = {.buf = row, .type = plan[t].type, .foreign = plan[t].foreign,
                        .ne0 = plan[t].ne0, .seed = p->seed, .tensor = t};
      b.row_bytes = b.foreign ? plan[t].ne0 / gguf_ggml_block(b.foreign) * gguf_ggml_block_bytes(b.foreign)
                              : plan[t].ne0 / vkrt_type_block(b.type) * vkrt_type_size(b.type);
      const uint64_t per_batch = BATCH_BYTES / b.row_bytes ? BATCH_BYTES / b.row_bytes : 1;
      for (b.row0 = 0; b.row0 < plan[t].ne1 && w.ok; b.row0 += b.rows) {
        b.rows = plan[t].ne1 - b.row0 < per_batch ? plan[t].ne1 - b.row0 : per_batch;
        batch_run(&b, threads);
        gguf_writer_data(&w, row, (size_t)(b.rows * b.row_bytes));
      }
    }
    gguf_writer_align(&w);
  }
  free(plan), free(row);
  return gguf_writer_close(&w, path, err, err_size);
}
