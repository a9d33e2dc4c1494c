/* GPT-2's byte-level BPE (tokenizer.ggml.model = gpt2) with the Llama 3 pre-tokenizer, as
 * llama.cpp's llm_tokenizer_bpe for tokenizer.ggml.pre = llama-bpe: special tokens written in
 * the text first (parse_special), then each stretch of text between them pre-tokenized by the
 * Llama 3 regex (bpe_split_llama3, a hand-written matcher over code points with the Unicode
 * classes of unicode_tables.c), each piece's bytes mapped to GPT-2's printable characters and,
 * unless the whole piece is a token (ignore_merges), merged by tokenizer.ggml.merges lowest
 * rank first. Where llama.cpp's own matcher and the regex disagree (a code point no Unicode
 * version it knows assigns, U+017F as the "s" of "'s"), this follows the regex, which is
 * what the models were trained with. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

/* ---- GPT-2's byte map -------------------------------------------------------------------- */

static bool byte_is_own_char(uint32_t b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The 68 other bytes in order: 0..32, 127..160, 173. */
uint32_t bpe_byte_char(uint8_t byte) {
  if (byte_is_own_char(byte))
    return byte;
  return 256u + (byte <= 32 ? byte : byte <= 160 ? 33u + (byte - 127u) : 67u);
}

int bpe_char_byte(uint32_t cp) {
  if (cp < 256)
    return byte_is_own_char(cp) ? (int)cp : -1;
  if (cp <= 256 + 32)
    return (int)(cp - 256);
  if (cp <= 256 + 66)
    return (int)(cp - 256 - 33 + 127);
  return cp == 256 + 67 ? 173 : -1;
}

size_t bpe_byte_utf8(uint8_t byte, char *out) {
  uint32_t cp = bpe_byte_char(byte);
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  out[0] = (char)(0xC0 | cp >> 6);
  out[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

/* ---- Unicode --------------------------------------------------------------------------- */

enum unicode_class unicode_class_of(uint32_t cp) {
  if (cp > 0x10FFFF)
    return UNICODE_OTHER;
  uint32_t lo = 0, hi = unicode_class_run_count; /* the last run that starts at or before cp */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (unicode_class_runs[mid] >> 2 <= cp)
      lo = mid;
    else
      hi = mid;
  }
  return (enum unicode_class)(unicode_class_runs[lo] & 3);
}

#define INVALID_BYTE 0x110000u /* + the byte: a byte outside valid UTF-8, of no class */

/* One character of the text: its code point, bytes and class; len 0 at the end. */
struct cpt {
  uint32_t cp;
  uint32_t len;
  enum unicode_class cls;
};

static struct cpt cpt_at(const uint8_t *s, size_t n, size_t i) {
  struct cpt c = {.cp = 0, .len = 0, .cls = UNICODE_OTHER};
  if (i >= n)
    return c;
  uint8_t b = s[i];
  uint32_t need = 0, min = 0;
  c.cp = b;
  if (b >= 0xC2 && b <= 0xDF)
    need = 1, c.cp = b & 0x1F, min = 0x80;
  else if (b >= 0xE0 && b <= 0xEF)
    need = 2, c.cp = b & 0x0F, min = 0x800;
  else if (b >= 0xF0 && b <= 0xF4)
    need = 3, c.cp = b & 0x07, min = 0x10000;
  else if (b >= 0x80) /* a continuation byte or one no UTF-8 uses */
    need = UINT32_MAX;
  bool ok = need == 0 || (need != UINT32_MAX && need < n - i);
  for (uint32_t k = 1; ok && k <= need; k++) {
    ok = (s[i + k] & 0xC0) == 0x80;
    c.cp = c.cp << 6 | (s[i + k] & 0x3Fu);
  }
  /* overlong forms, UTF-16 surrogates and code points past U+10FFFF are not valid either */
  if (!ok || c.cp < min || (c.cp >= 0xD800 && c.cp <= 0xDFFF) || c.cp > 0x10FFFF) {
    c.cp = INVALID_BYTE + b;
    c.len = 1;
  } else {
    c.len = need + 1;
  }
  c.cls = unicode_class_of(c.cp);
  return c;
}

/* The end of the run of characters of class cls that starts at i. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, enum unicode_class cls) {
  for (struct cpt c; (c = cpt_at(s, n, i)).len && c.cls == cls;)
    i += c.len;
  return i;
}

/* Case folding for the contractions: what (?i) lets match s, t, r, e, v, m, l and d. */
static uint32_t fold(uint32_t cp) {
  return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp == 0x17F /* long s */ ? 's' : cp;
}

static bool newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

size_t bpe_split_llama3(const char *text, size_t n, size_t at) {
  const uint8_t *s = (const uint8_t *)text;
  struct cpt c = cpt_at(s, n, at), d = cpt_at(s, n, at + c.len);
  /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
  if (c.cp == '\'' && d.len) {
    uint32_t x = fold(d.cp);
    if (x == 's' || x == 't' || x == 'm' || x == 'd')
      return at + c.len + d.len;
    struct cpt e = cpt_at(s, n, at + c.len + d.len);
    uint32_t y = e.len ? fold(e.cp) : 0;
    if ((x == 'r' && y == 'e') || (x == 'v' && y == 'e') || (x == 'l' && y == 'l'))
      return at + c.len + d.len + e.len;
  }
  /* [^\r\n\p{L}\p{N}]?\p{L}+ */
  if (c.cls == UNICODE_LETTER)
    return run_end(s, n, at, UNICODE_LETTER);
  if (!newline(c.cp) && c.cls != UNICODE_NUMBER && d.cls == UNICODE_LETTER)
    return run_end(s, n, at + c.len, UNICODE_LETTER);
  /* \p{N}{1,3} */
  if (c.cls == UNICODE_NUMBER) {
    size_t end = at + c.len;
    for (int k = 1; k < 3 && (d = cpt_at(s, n, end)).len && d.cls == UNICODE_NUMBER; k++)
      end += d.len;
    return end;
  }
  /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
  size_t p = c.cp == ' ' && d.len && d.cls == UNICODE_OTHER ? at + c.len : at;
  if (cpt_at(s, n, p).cls == UNICODE_OTHER) {
    size_t end = run_end(s, n, p, UNICODE_OTHER);
    while (end < n && newline(s[end]))
      end++;
    return end;
  }
  /* c is white space: \s*[\r\n]+ (up to the run's last newline), else \s+(?!\S) (the run
   * but its last character when something follows), else \s+ (one character) */
  size_t end = at, last = at, after_newline = 0;
  for (struct cpt e; (e = cpt_at(s, n, end)).len && e.cls == UNICODE_SPACE;) {
    last = end;
    end += e.len;
    if (newline(e.cp))
      after_newline = end;
  }
  if (after_newline)
    return after_newline;
  return end == n || last == at ? end : last;
}

/* ---- the vocabulary's BPE parts ------------------------------------------------------- */

struct bpe_merge {
  uint64_t pair;   /* left id << 32 | right id; NO_PAIR: an empty slot */
  uint32_t rank;
  int32_t id;      /* the merged token */
};
#define NO_PAIR UINT64_MAX

static uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static uint32_t hash_pair(uint64_t k) { /* murmur3's finalizer */
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (uint32_t)k;
}

static struct bpe_merge *merge_slot(const struct llama_vocab *v, uint64_t key) {
  for (uint32_t i = hash_pair(key) & v->merge_mask;; i = (i + 1) & v->merge_mask)
    if (v->merge[i].pair == key || v->merge[i].pair == NO_PAIR)
      return &v->merge[i];
}

static int check_pre(const struct gguf_file *f, char *err, size_t err_size) {
  if (!gguf_kv_find(f, "tokenizer.ggml.pre"))
    return GGUF_OK;
  const char *pre;
  uint64_t len;
  int r = gguf_get_string(f, "tokenizer.ggml.pre", &pre, &len, err, err_size);
  if (r)
    return r;
  static const char *const llama3[] = {"llama-bpe", "llama3", "default"};
  for (size_t i = 0; i < sizeof(llama3) / sizeof(llama3[0]); i++)
    if (len == strlen(llama3[i]) && !memcmp(pre, llama3[i], len))
      return GGUF_OK;
  return gguf_fail(err, err_size, GGUF_E_BAD_VALUE,
                   "tokenizer.ggml.pre is \"%.*s\"; vkrt-service pre-tokenizes byte-level BPE "
                   "as Llama 3 does (\"llama-bpe\", \"llama3\", \"default\")",
                   (int)(len < 64 ? len : 64), pre);
}

/* Merge i, "A B", into the table: A, B and AB must be tokens. */
static int add_merge(struct llama_vocab *v, const struct gguf_str *m, uint64_t i, char *joined,
                     char *err, size_t err_size) {
  const char *space = m->len > 1 ? memchr(m->s + 1, ' ', m->len - 1) : NULL;
  int show = (int)(m->len < 64 ? m->len : 64);
  if (!space)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "tokenizer.ggml.merges[%" PRIu64 "] \"%.*s\" "
                     "is not two tokens separated by a space", i, show, m->s);
  size_t a_len = (size_t)(space - m->s), b_len = m->len - a_len - 1;
  memcpy(joined, m->s, a_len);
  memcpy(joined + a_len, space + 1, b_len);
  int32_t a = vocab_piece_id(v, m->s, a_len), b = vocab_piece_id(v, space + 1, b_len),
          ab = vocab_piece_id(v, joined, a_len + b_len);
  if (a < 0 || b < 0 || ab < 0)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE,
                     "tokenizer.ggml.merges[%" PRIu64 "] \"%.*s\": %s is not a token", i, show, m->s,
                     a < 0 ? "its left side" : b < 0 ? "its right side" : "their concatenation");
  struct bpe_merge *e = merge_slot(v, pair_key(a, b));
  if (e->pair == NO_PAIR) /* a repeated pair keeps its first rank */
    *e = (struct bpe_merge){.pair = pair_key(a, b), .rank = (uint32_t)i, .id = ab};
  return GGUF_OK;
}

static int load_merges(const struct gguf_file *f, struct llama_vocab *v, char *err,
                       size_t err_size) {
  uint64_t n;
  int r = gguf_get_array_len(f, "tokenizer.ggml.merges", GGUF_KV_STRING, &n, err, err_size);
  if (r)
    return r;
  if (n > INT32_MAX / 4)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "tokenizer.ggml.merges has %" PRIu64
                     " merges", n);
  uint32_t cap = 1;
  while (cap < 2 * n)
    cap <<= 1;
  struct gguf_str *m = malloc((n ? n : 1) * sizeof(*m));
  v->merge = malloc(cap * sizeof(*v->merge));
  v->merge_mask = cap - 1;
  if (!m || !v->merge) {
    free(m);
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory for %" PRIu64 " merges", n);
  }
  for (uint32_t i = 0; i < cap; i++)
    v->merge[i].pair = NO_PAIR;
  r = gguf_get_array_str(f, "tokenizer.ggml.merges", m, n, err, err_size);
  uint64_t longest = 1;
  for (uint64_t i = 0; !r && i < n; i++)
    longest = m[i].len > longest ? m[i].len : longest;
  char *joined = r ? NULL : malloc(longest);
  if (!r && !joined)
    r = gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory");
  for (uint64_t i = 0; !r && i < n; i++)
    r = add_merge(v, &m[i], i, joined, err, err_size);
  free(joined);
  free(m);
  return r;
}

struct special {
  uint64_t len;
  int32_t id;
};

static int longest_first(const void *a, const void *b) {
  const struct special *x = a, *y = b;
  return x->len != y->len ? (x->len < y->len ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

/* The tokens taken as themselves when written in the text: control, user-defined and
 * unknown ones (llama.cpp's cache_special_tokens), longest first. */
static int find_specials(struct llama_vocab *v, char *err, size_t err_size) {
  struct special *sp = malloc(v->n * sizeof(*sp));
  v->special = malloc(v->n * sizeof(*v->special));
  if (!sp || !v->special) {
    free(sp);
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory");
  }
  for (uint32_t id = 0; id < v->n; id++) {
    int32_t t = v->type[id];
    if ((t == TOKEN_CONTROL || t == TOKEN_USER_DEFINED || t == TOKEN_UNKNOWN) && v->piece[id].len)
      sp[v->n_special++] = (struct special){.len = v->piece[id].len, .id = (int32_t)id};
  }
  qsort(sp, v->n_special, sizeof(*sp), longest_first);
  for (uint32_t i = 0; i < v->n_special; i++)
    v->special[i] = sp[i].id;
  free(sp);
  return GGUF_OK;
}

int bpe_vocab_load(const struct gguf_file *f, struct llama_vocab *v, char *err, size_t err_size) {
  for (int b = 0; b < 256; b++) {
    char c[2];
    size_t len = bpe_byte_utf8((uint8_t)b, c);
    v->byte_token[b] = vocab_piece_id(v, c, len);
  }
  int r = check_pre(f, err, err_size);
  if (!r)
    r = load_merges(f, v, err, err_size);
  if (!r)
    r = find_specials(v, err, err_size);
  return r;
}

void bpe_vocab_free(struct llama_vocab *v) {
  free(v->merge);
  free(v->special);
}

/* ---- tokenize ------------------------------------------------------------------------ */

/* One call's scratch, sized by the text: a mark per byte, the symbols, the candidate heap and
 * one piece in GPT-2's characters. */
struct bpe_work {
  const struct llama_vocab *v;
  int32_t *out, cap, count;
  int32_t *mark;  /* per byte of text: the special token that starts there, INSIDE, or TEXT */
  struct symbol *sym;
  struct bigram_heap heap;
  char *mapped;
};
enum { TEXT = -1, INSIDE = -2 };

static void emit(struct bpe_work *w, int32_t id) {
  if (w->count < w->cap)
    w->out[w->count] = id;
  w->count++;
}

/* llama.cpp's tokenizer_st_partition: each special token, longest first, wherever it is
 * written in what no longer-or-equal one took (left to right, without overlaps). */
static void mark_specials(struct bpe_work *w, const char *text, size_t len) {
  for (size_t i = 0; i < len; i++)
    w->mark[i] = TEXT;
  for (uint32_t k = 0; k < w->v->n_special; k++) {
    int32_t id = w->v->special[k];
    const struct gguf_str *p = &w->v->piece[id];
    for (size_t i = 0; p->len <= len && i <= len - p->len; i++) {
      if (w->mark[i] != TEXT || text[i] != p->s[0] || memcmp(text + i, p->s, p->len))
        continue;
      size_t j = 1;
      while (j < p->len && w->mark[i + j] == TEXT)
        j++;
      if (j < p->len)
        continue;
      w->mark[i] = id;
      for (j = 1; j < p->len; j++)
        w->mark[i + j] = INSIDE;
      i += p->len - 1;
    }
  }
}

/* llm_bigram_bpe: a pair with a merge, by its rank. */
static void bpe_bigram(const struct llama_vocab *v, const struct symbol *sym,
                       struct bigram_heap *h, int32_t left, int32_t right) {
  if (sym[left].id < 0 || sym[right].id < 0)
    return;
  const struct bpe_merge *m = merge_slot(v, pair_key(sym[left].id, sym[right].id));
  if (m->pair != NO_PAIR)
    bigram_push(h, (struct bigram){.score = -(double)m->rank, .left = left, .right = right,
                                   .size = sym[left].n + sym[right].n, .id = m->id});
}

/* One pre-token's ids: itself when it is a token, else its bytes' characters merged. */
static void bpe_piece(struct bpe_work *w, const uint8_t *s, size_t n) {
  const struct llama_vocab *v = w->v;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    m += bpe_byte_utf8(s[i], w->mapped + m);
  int32_t whole = vocab_piece_id(v, w->mapped, m);
  if (whole >= 0) {
    emit(w, whole);
    return;
  }
  for (size_t i = 0; i < n; i++)
    w->sym[i] = (struct symbol){.n = 1, .prev = (int32_t)i - 1,
                                .next = i + 1 < n ? (int32_t)i + 1 : -1, .id = v->byte_token[s[i]]};
  symbols_merge(v, w->sym, (int32_t)n, &w->heap, bpe_bigram);
  /* a byte whose character is no token: unknown where the vocabulary has one, else dropped
   * (as llama.cpp drops it) */
  for (int32_t i = 0; i != -1; i = w->sym[i].next)
    if (w->sym[i].id >= 0 || v->unk >= 0)
      emit(w, w->sym[i].id >= 0 ? w->sym[i].id : v->unk);
}

int32_t bpe_tokenize(const struct llama_vocab *v, const char *text, int32_t *out, int32_t out_cap,
                     int32_t count) {
  size_t len = strlen(text);
  if (!len)
    return count;
  struct bpe_work w = {.v = v, .out = out, .cap = out_cap, .count = count};
  char *scratch = malloc(len * (sizeof(*w.mark) + sizeof(*w.sym) + 3 * sizeof(*w.heap.b) + 2));
  if (!scratch)
    return -1;
  w.heap.b = (struct bigram *)scratch; /* the most aligned first */
  w.sym = (struct symbol *)(w.heap.b + 3 * len);
  w.mark = (int32_t *)(w.sym + len);
  w.mapped = (char *)(w.mark + len);
  mark_specials(&w, text, len);
  for (size_t i = 0; i < len;) {
    if (w.mark[i] >= 0) {
      emit(&w, w.mark[i]);
      i += v->piece[w.mark[i]].len;
      continue;
    }
    size_t end = i; /* a stretch of text between special tokens: pre-tokenized on its own */
    while (end < len && w.mark[end] == TEXT)
      end++;
    for (size_t at = 0; at < end - i;) {
      size_t stop = bpe_split_llama3(text + i, end - i, at);
      bpe_piece(&w, (const uint8_t *)text + i + at, stop - at);
      at = stop;
    }
    i = end;
  }
  free(scratch);
  return w.count;
}

/* ---- detokenize ---------------------------------------------------------------------- */

size_t bpe_token_piece(const struct llama_vocab *v, int32_t id, char *buf, size_t cap) {
  size_t n = 0;
  if (!cap)
    return 0;
  if (id >= 0 && (uint32_t)id < v->n) {
    const struct gguf_str *p = &v->piece[id];
    const uint8_t *s = (const uint8_t *)p->s;
    if (v->type[id] == TOKEN_NORMAL) { /* GPT-2's characters as their bytes */
      for (size_t i = 0; i < p->len;) {
        struct cpt c = cpt_at(s, p->len, i);
        int byte = bpe_char_byte(c.cp);
        size_t k = byte >= 0 ? 1 : c.len; /* a character no byte maps to: as it is */
        if (n + k >= cap)
          break;
        if (byte >= 0)
          buf[n] = (char)byte;
        else
          memcpy(buf + n, s + i, k);
        n += k;
        i += c.len;
      }
    } else if (v->type[id] == TOKEN_USER_DEFINED) {
      n = p->len < cap - 1 ? p->len : cap - 1;
      memcpy(buf, p->s, n);
    } /* control, unknown and unused tokens print nothing */
  }
  buf[n] = '\0';
  return n;
}
