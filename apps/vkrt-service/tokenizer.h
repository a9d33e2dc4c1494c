/* The tokenizers' shared vocabulary (llama.h's struct llama_vocab) and their internals:
 * tokenizer.c loads the vocabulary and runs SentencePiece (tokenizer.ggml.model "llama");
 * tokenizer_bpe.c runs GPT-2's byte-level BPE ("gpt2") with the Llama 3 pre-tokenizer;
 * unicode_tables.c (generated) holds the Unicode classes that pre-tokenizer asks about.
 * The byte map, the class lookup and the pre-tokenizer are here for the tests. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llama.h"

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type) */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4,
       TOKEN_UNUSED = 5, TOKEN_BYTE = 6 };

struct bpe_merge;

struct llama_vocab {
  enum llama_vocab_type kind;
  uint32_t n;
  struct gguf_str *piece;
  float *score;
  int32_t *type;
  int32_t bos, eos, eot, unk; /* eot, unk: -1 when the file names none (SentencePiece's unk: 0) */
  bool add_bos;
  bool add_space_prefix;
  /* SentencePiece: <0xNN> (else the byte, else unk); BPE: the byte's character (else -1) */
  int32_t byte_token[256];
  uint32_t *slot;      /* open-addressing table of id + 1 by piece (0: empty) */
  uint32_t slot_mask;
  /* BPE only */
  struct bpe_merge *merge; /* open-addressing table: (left id, right id) -> rank, merged id */
  uint32_t merge_mask;
  int32_t *special;    /* control, user-defined and unknown tokens, longest text first */
  uint32_t n_special;
};

/* The id of the piece s[0..n), or -1 (a repeated piece: its last id). */
int32_t vocab_piece_id(const struct llama_vocab *v, const char *s, size_t n);

/* Both tokenizers merge a list of symbols (n bytes of text each; 0: merged into the one on its
 * left) pair by pair, best pair first from a heap of candidates; a candidate whose symbols
 * changed since it was pushed no longer adds up to its size and is skipped. */
struct symbol {
  const char *text;
  uint32_t n;
  int32_t prev, next;
  int32_t id;          /* BPE: the symbol's token (-1: its byte's character is no token) */
};
struct bigram {
  double score;        /* SentencePiece: the merged piece's score; BPE: minus the merge's rank */
  int32_t left, right;
  uint32_t size;
  int32_t id;          /* BPE: the merged token */
};
struct bigram_heap {
  struct bigram *b;
  size_t n;
};
/* A candidate pair; the heap pops the higher score first, then the leftmost pair. */
void bigram_push(struct bigram_heap *h, struct bigram x);
/* Pushes the candidate of the adjacent symbols left and right, if they have one. */
typedef void (*bigram_fn)(const struct llama_vocab *v, const struct symbol *sym,
                          struct bigram_heap *h, int32_t left, int32_t right);
/* Merges sym[0..n_sym) (linked in order) best candidate first until none is left; a merged
 * symbol takes its candidate's id. h: room for 3 * n_sym candidates. */
void symbols_merge(const struct llama_vocab *v, struct symbol *sym, int32_t n_sym,
                   struct bigram_heap *h, bigram_fn add);

/* tokenizer_bpe.c: the BPE parts of the vocabulary from the file (tokenizer.ggml.pre, merges,
 * the byte characters, the special tokens); 0 or GGUF_E_* with the reason. */
int bpe_vocab_load(const struct gguf_file *f, struct llama_vocab *v, char *err, size_t err_size);
void bpe_vocab_free(struct llama_vocab *v);
/* Appends the ids of text to out from out[count] on (llama_tokenize's contract: the count,
 * ids past out_cap not written; -1 when out of memory). */
int32_t bpe_tokenize(const struct llama_vocab *v, const char *text, int32_t *out, int32_t out_cap,
                     int32_t count);
size_t bpe_token_piece(const struct llama_vocab *v, int32_t id, char *buf, size_t cap);

/* GPT-2's bytes_to_unicode: bytes 33..126, 161..172 and 174..255 are their own character,
 * the other 68 map to U+0100, U+0101, ... in byte order. bpe_char_byte is its inverse (-1 for
 * a character no byte maps to). */
uint32_t bpe_byte_char(uint8_t byte);
int bpe_char_byte(uint32_t cp);
/* The byte's character in UTF-8 (below U+0800: 1 or 2 bytes of out); returns the length. */
size_t bpe_byte_utf8(uint8_t byte, char *out);

/* The Llama 3 pre-tokenizer: the end of the piece that starts at byte `at` of text[0..n)
 * (at < n), as the regex
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *   \s*[\r\n]+|\s+(?!\S)|\s+
 * matches there. A byte that is not part of valid UTF-8 is a character of its own, of no
 * class (it matches [^\s\p{L}\p{N}]). */
size_t bpe_split_llama3(const char *text, size_t n, size_t at);

enum unicode_class { UNICODE_OTHER, UNICODE_LETTER, UNICODE_NUMBER, UNICODE_SPACE };
/* \p{L} (Lu Ll Lt Lm Lo), \p{N} (Nd Nl No), \s (White_Space) or none; past U+10FFFF none. */
enum unicode_class unicode_class_of(uint32_t cp);
extern const uint32_t unicode_class_runs[];  /* unicode_tables.c */
extern const uint32_t unicode_class_run_count;
