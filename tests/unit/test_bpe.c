/* vkrt-service's byte-level BPE tokenizer (tokenizer.ggml.model gpt2, Llama 3's pre-tokenizer;
 * apps/vkrt-service/tokenizer_bpe.c) without a device: GPT-2's byte map both ways for every
 * byte; the Unicode classes of chosen code points; the Llama 3 pre-tokenizer's splits of
 * hand-picked strings (contractions in any case, letters with one leading non-letter, digits
 * in threes, punctuation runs with their newlines, white space before a newline, before a word
 * and at the end, mixed scripts, emoji, invalid UTF-8); a hand-built vocabulary's ids through
 * merges lowest rank first (leftmost on ties), a piece that is a token taken whole, special
 * tokens written in the text (longest first, user-defined ones too), add_bos_token, a byte
 * whose character is missing (unknown or dropped), decoding and round trips of random bytes;
 * unknown tokenizer.ggml.pre / model values and bad merges refused by name.
 *
 * Run with an option it is the C side of tests/model/bpe.sh's comparison with Python's regex
 * module and a Python BPE (one hex-encoded string per line on stdin):
 *   --split            each string's pre-tokens, hex, space-separated, one line per string
 *   --classes          one letter per code point 0..U+10FFFF: O, L (\p{L}), N (\p{N}), S (\s)
 *   --tokenize FILE    each string's ids (no BOS), then a tab and the ids decoded, hex */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../apps/vkrt-service/tokenizer.h"

/* ---- the byte map and the Unicode classes ------------------------------------------------ */

static void test_byte_map(void **state) {
  (void)state;
  bool seen[324] = {false};
  for (int b = 0; b < 256; b++) {
    uint32_t cp = bpe_byte_char((uint8_t)b);
    assert_true(cp < 324);
    assert_false(seen[cp]); /* one character per byte */
    seen[cp] = true;
    assert_int_equal(bpe_char_byte(cp), b);
    bool own = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    assert_int_equal(cp == (uint32_t)b, own);
    char utf8[2]; /* the character in UTF-8 */
    size_t len = bpe_byte_utf8((uint8_t)b, utf8);
    assert_int_equal(len, cp < 0x80 ? 1 : 2);
    assert_int_equal(len == 1 ? (uint8_t)utf8[0] : ((utf8[0] & 0x1F) << 6 | (utf8[1] & 0x3F)), cp);
  }
  /* the other 68 in byte order from U+0100 */
  assert_int_equal(bpe_byte_char(0), 0x100);
  assert_int_equal(bpe_byte_char('\n'), 0x10A);   /* Ċ */
  assert_int_equal(bpe_byte_char(' '), 0x120);    /* Ġ */
  assert_int_equal(bpe_byte_char(0x7F), 0x121);
  assert_int_equal(bpe_byte_char(0xA0), 0x142);
  assert_int_equal(bpe_byte_char(0xAD), 0x143);
  assert_int_equal(bpe_byte_char('A'), 'A');
  assert_int_equal(bpe_byte_char(0xFF), 0xFF);
  /* characters no byte maps to */
  const uint32_t none[] = {' ', '\n', 0x7F, 0xA0, 0xAD, 0x144, 0x2581, 0x110000};
  for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
    assert_int_equal(bpe_char_byte(none[i]), -1);
}

static void test_unicode_classes(void **state) {
  (void)state;
  const struct { uint32_t cp; enum unicode_class cls; } cases[] = {
      {'a', UNICODE_LETTER}, {'Z', UNICODE_LETTER}, {'5', UNICODE_NUMBER}, {' ', UNICODE_SPACE},
      {'\t', UNICODE_SPACE}, {'\r', UNICODE_SPACE}, {0x0B, UNICODE_SPACE}, {0x85, UNICODE_SPACE},
      {0xA0, UNICODE_SPACE}, {0x3000, UNICODE_SPACE}, {0x2028, UNICODE_SPACE},
      {0x1C, UNICODE_OTHER},                         /* str.isspace(), not White_Space */
      {0x200B, UNICODE_OTHER},                       /* zero width space: Cf */
      {'!', UNICODE_OTHER}, {'_', UNICODE_OTHER}, {0x00E9, UNICODE_LETTER} /* é */,
      {0x01C5, UNICODE_LETTER} /* Lt */, {0x02B0, UNICODE_LETTER} /* Lm */,
      {0x4E2D, UNICODE_LETTER} /* 中 */, {0x0301, UNICODE_OTHER} /* combining acute: Mn */,
      {0x1F389, UNICODE_OTHER} /* 🎉 */, {0x0660, UNICODE_NUMBER} /* Arabic-Indic zero */,
      {0x00B2, UNICODE_NUMBER} /* ² No */, {0x2167, UNICODE_NUMBER} /* Ⅷ Nl */,
      {0x10FFFF, UNICODE_OTHER}, {0x110041, UNICODE_OTHER}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    if (unicode_class_of(cases[i].cp) != cases[i].cls)
      fail_msg("U+%04X: class %d, want %d", cases[i].cp, unicode_class_of(cases[i].cp),
               cases[i].cls);
  /* the table: sorted, starting at 0, neighbours of different classes */
  assert_int_equal(unicode_class_runs[0] >> 2, 0);
  for (uint32_t i = 1; i < unicode_class_run_count; i++) {
    assert_true(unicode_class_runs[i] >> 2 > unicode_class_runs[i - 1] >> 2);
    assert_true((unicode_class_runs[i] & 3) != (unicode_class_runs[i - 1] & 3));
  }
}

/* ---- the pre-tokenizer ---------------------------------------------------------------- */

/* text's pre-tokens joined by '|' (the cases use no '|'). */
static void split(const char *text, char *out) {
  size_t n = strlen(text), o = 0;
  for (size_t at = 0; at < n;) {
    size_t end = bpe_split_llama3(text, n, at);
    assert_true(end > at && end <= n);
    if (at)
      out[o++] = '|';
    memcpy(out + o, text + at, end - at);
    o += end - at;
    at = end;
  }
  out[o] = '\0';
}

static void test_split(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"Hello world", "Hello| world"},
      {"I'm", "I|'m"},
      {"don't", "don|'t"},
      {"they'RE we'Ve I'LL he'd", "they|'RE| we|'Ve| I|'LL| he|'d"},
      {"it\xc5\xbf", "it\xc5\xbf"},                 /* no apostrophe: ſ is a letter */
      {"it'\xc5\xbf", "it|'\xc5\xbf"},              /* (?i) folds ſ to s */
      {"'sup 'x", "'s|up| '|x"},
      {"12345", "123|45"},
      {"1234567", "123|456|7"},
      {"3.14", "3|.|14"},
      {"  leading", " | leading"},
      {"a\n\nb", "a|\n\n|b"},
      {"a\r\nb", "a|\r\n|b"},
      {"tab\there", "tab|\there"},
      {"\xc3\xa9moji \xf0\x9f\x8e\x89!", "\xc3\xa9moji| \xf0\x9f\x8e\x89!"},
      {"x   y", "x|  | y"},
      {"end  ", "end|  "},
      {"  \n  x", "  \n| | x"},
      {"a.\n\nb", "a|.\n\n|b"},
      {"(hi)", "(hi|)"},
      {" ((x", " ((|x"},
      {"a\xc2\xa0" "b", "a|\xc2\xa0" "b"},           /* no-break space before a letter */
      {"a\xe3\x80\x80\xe3\x80\x80" "b", "a|\xe3\x80\x80|\xe3\x80\x80" "b"}, /* ideographic */
      {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e" "and \xd1\x80\xd1\x83\xd1\x81 \xe4\xb8\xad" "42",
       "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e" "and| \xd1\x80\xd1\x83\xd1\x81| \xe4\xb8\xad|42"},
      {"e\xcc\x81t\xc3\xa9", "e|\xcc\x81t\xc3\xa9"}, /* a combining mark is no letter */
      {"x\xc2\xb2\xc2\xb3\xc2\xb9\xc2\xbc", "x|\xc2\xb2\xc2\xb3\xc2\xb9|\xc2\xbc"}, /* No */
      /* invalid UTF-8: each bad byte a character of no class */
      {"a\xff\xfe" "b", "a|\xff\xfe|b"},
      {"\xff" "word", "\xff" "word"},
      {" \xff" "word", " \xff|word"},
      {"x\xc3(", "x|\xc3("},
      {"ok\xe2\x82", "ok|\xe2\x82"},
      {"\xc0\xaf\xed\xa0\x80!", "\xc0\xaf\xed\xa0\x80!"}, /* overlong, surrogate */
      {"\xf4\x90\x80\x80" "a", "\xf4\x90\x80\x80|a"},   /* past U+10FFFF: 4 characters */
  };
  char got[256];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    split(cases[i][0], got);
    if (strcmp(got, cases[i][1]))
      fail_msg("case %zu: split \"%s\", want \"%s\"", i, got, cases[i][1]);
  }
}

/* ---- a hand-built vocabulary ---------------------------------------------------------------
 * ids 0..255: the byte characters in byte order (id b: byte b), then merges by rank:
 *   256 ll = l l   257 he = h e   258 hell = he ll   259 Ġw = Ġ w   260 or = o r
 *   261 Ġwor = Ġw or   262 hello = hell o
 * 263 Ġhel (a token no merge builds), then the special tokens: 264 <|begin_of_text|> and
 * 265 <|eot_id|> (control), 266 <|eot (user-defined). */
enum { LL = 256, HE, HELL, G_W, OR, G_WOR, HELLO, G_HEL, BOS, EOT, EOT_PREFIX, N_TOKENS };

struct vocab_file {
  const char *model, *pre;        /* NULL: left out */
  const char *const *merges;
  int n_merges;
  int add_bos;                    /* -1: left out */
  int unknown;                    /* -1: left out */
  int drop_byte;                  /* -1: every byte's character; else that one renamed */
};

static const char *const good_merges[] = {"l l", "h e", "he ll", "\xc4\xa0 w", "o r",
                                          "\xc4\xa0w or", "hell o"};

static void write_vocab(const char *path, const struct vocab_file *vf) {
  static const char *const names[] = {"ll", "he", "hell", "\xc4\xa0w", "or", "\xc4\xa0wor",
                                      "hello", "\xc4\xa0hel", "<|begin_of_text|>",
                                      "<|eot_id|>", "<|eot"};
  struct gguf_writer w;
  char err[256];
  uint64_t kv = 1 + 6 + (vf->pre != NULL) + (vf->add_bos >= 0) + (vf->unknown >= 0);
  if (gguf_writer_open(&w, path, 0, kv, err, sizeof(err)))
    fail_msg("%s", err);
  gguf_writer_kv_str(&w, "tokenizer.ggml.model", vf->model);
  if (vf->pre)
    gguf_writer_kv_str(&w, "tokenizer.ggml.pre", vf->pre);
  gguf_writer_kv_u32(&w, "tokenizer.ggml.bos_token_id", BOS);
  gguf_writer_kv_u32(&w, "tokenizer.ggml.eot_token_id", EOT);
  if (vf->add_bos >= 0)
    gguf_writer_kv_bool(&w, "tokenizer.ggml.add_bos_token", vf->add_bos);
  if (vf->unknown >= 0)
    gguf_writer_kv_u32(&w, "tokenizer.ggml.unknown_token_id", (uint32_t)vf->unknown);
  gguf_writer_kv_array(&w, "tokenizer.ggml.tokens", GGUF_KV_STRING, N_TOKENS);
  for (int b = 0; b < 256; b++) {
    char c[2];
    size_t n = bpe_byte_utf8((uint8_t)b, c);
    gguf_writer_str(&w, b == vf->drop_byte ? "~~~" : c, b == vf->drop_byte ? 3 : n);
  }
  for (int i = 0; i < N_TOKENS - 256; i++)
    gguf_writer_str(&w, names[i], strlen(names[i]));
  gguf_writer_kv_array(&w, "tokenizer.ggml.token_type", GGUF_KV_I32, N_TOKENS);
  for (int i = 0; i < N_TOKENS; i++)
    gguf_writer_u32(&w, i == EOT_PREFIX ? TOKEN_USER_DEFINED : i >= BOS ? TOKEN_CONTROL
                                                                       : TOKEN_NORMAL);
  gguf_writer_kv_array(&w, "tokenizer.ggml.merges", GGUF_KV_STRING, (uint64_t)vf->n_merges);
  for (int i = 0; i < vf->n_merges; i++)
    gguf_writer_str(&w, vf->merges[i], strlen(vf->merges[i]));
  if (gguf_writer_close(&w, path, err, sizeof(err)))
    fail_msg("%s", err);
}

struct opened {
  char path[64];
  struct gguf_file f;
  struct llama_vocab *v;
};

/* Writes and loads the vocabulary; returns llama_vocab_load's code (err: its message). */
static int open_vocab(struct opened *o, const struct vocab_file *vf, char *err, size_t err_size) {
  strcpy(o->path, "/tmp/vkrt-test-bpe-XXXXXX");
  int fd = mkstemp(o->path);
  assert_true(fd >= 0);
  close(fd);
  write_vocab(o->path, vf);
  if (gguf_open(o->path, &o->f, err, err_size))
    fail_msg("%s", err);
  o->v = NULL;
  int r = llama_vocab_load(&o->f, &o->v, err, err_size);
  if (r)
    print_message("refused: %s\n", err);
  return r;
}

static void close_vocab(struct opened *o) {
  llama_vocab_free(o->v);
  gguf_close(&o->f);
  unlink(o->path);
}

static const struct vocab_file good = {.model = "gpt2", .pre = "llama-bpe", .merges = good_merges,
                                       .n_merges = 7, .add_bos = -1, .unknown = -1,
                                       .drop_byte = -1};

static void expect_ids(const struct llama_vocab *v, const char *text, bool add_bos,
                       const int32_t *want, int32_t n_want) {
  int32_t ids[64];
  int32_t n = llama_tokenize(v, text, add_bos, ids, 64);
  bool same = n == n_want;
  for (int32_t i = 0; same && i < n; i++)
    same = ids[i] == want[i];
  if (!same) {
    char got[256] = "";
    for (int32_t i = 0; i < n; i++)
      snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d", i ? "," : "", ids[i]);
    fail_msg("\"%s\": ids %s (%d of them), want %d", text, got, n, n_want);
  }
}
#define EXPECT(v, text, bos, ...)                                                           \
  do {                                                                                      \
    const int32_t want_[] = {__VA_ARGS__};                                                  \
    expect_ids(v, text, bos, want_, (int32_t)(sizeof(want_) / sizeof(want_[0])));          \
  } while (0)

static void test_bpe_ids(void **state) {
  (void)state;
  struct opened o;
  char err[256];
  assert_int_equal(open_vocab(&o, &good, err, sizeof(err)), GGUF_OK);
  const struct llama_vocab *v = o.v;
  assert_int_equal(llama_vocab_kind(v), LLAMA_VOCAB_BPE);
  assert_int_equal(llama_vocab_bos(v), BOS);
  assert_int_equal(llama_vocab_eot(v), EOT);
  assert_int_equal(llama_vocab_eos(v), -1);
  assert_true(llama_vocab_is_eog(v, EOT) && !llama_vocab_is_eog(v, BOS));
  /* "hello" is a token: taken whole; " world": Ġw (rank 3), or (4), Ġwor (5), then l d */
  EXPECT(v, "hello world", false, HELLO, G_WOR, 'l', 'd');
  /* "hellos": ll (rank 0) before he (1), then hell (2), hello (6); s alone */
  EXPECT(v, "hellos", false, HELLO, 's');
  /* the lower rank wins over the leftmost: "orll" -> or ll, not merged further */
  EXPECT(v, "orll", false, OR, LL);
  /* equal ranks: the leftmost pair first */
  EXPECT(v, "lll", false, LL, 'l');
  EXPECT(v, "llll", false, LL, LL);
  /* a piece that is a token is taken whole, though no merge builds it (ignore_merges) */
  EXPECT(v, " hel", false, G_HEL);
  EXPECT(v, " help", false, ' ', HE, 'l', 'p');
  /* special tokens in the text: taken as themselves, the text between pre-tokenized apart */
  EXPECT(v, "hello<|eot_id|>hello", false, HELLO, EOT, HELLO);
  EXPECT(v, "<|begin_of_text|>hello", false, BOS, HELLO);
  EXPECT(v, "  <|eot_id|>", false, ' ', ' ', EOT);
  /* longest first: <|eot_id|> over the user-defined <|eot; <|eot alone where it is all */
  EXPECT(v, "x<|eot_id|>", false, 'x', EOT);
  EXPECT(v, "x<|eot y", false, 'x', EOT_PREFIX, ' ', 'y');
  EXPECT(v, "<|eot<|eot_id|>", false, EOT_PREFIX, EOT);
  /* BOS first when asked; the default of add_bos_token is true */
  assert_true(llama_vocab_add_bos(v));
  EXPECT(v, "hello", true, BOS, HELLO);
  EXPECT(v, "", true, BOS);
  int32_t ids[8];
  assert_int_equal(llama_tokenize(v, "", false, ids, 8), 0);
  assert_int_equal(llama_tokenize(v, "hello world", false, ids, 3), -1); /* too small */
  /* decoding: byte characters as their bytes, control tokens as nothing, user-defined as text */
  char piece[32];
  const struct { int32_t id; const char *text; } pieces[] = {
      {G_WOR, " wor"}, {HELLO, "hello"}, {' ', " "}, {'\n', "\n"}, {0xC3, "\xc3"},
      {BOS, ""}, {EOT, ""}, {EOT_PREFIX, "<|eot"}, {N_TOKENS, ""}, {-1, ""}};
  for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
    size_t n = llama_token_piece(v, pieces[i].id, piece, sizeof(piece));
    assert_int_equal(n, strlen(pieces[i].text));
    assert_memory_equal(piece, pieces[i].text, n);
  }
  assert_int_equal(llama_token_piece(v, G_WOR, piece, 3), 2); /* truncated to cap - 1 */
  assert_string_equal(piece, " w");
  /* random bytes (valid UTF-8 or not, no '<'): decode(tokenize(text)) == text */
  uint64_t rng = 12345;
  for (int t = 0; t < 2000; t++) {
    char text[48], back[256];
    size_t n = 1 + vkrt_xorshift(&rng) % (sizeof(text) - 1);
    for (size_t i = 0; i < n; i++) {
      uint64_t r = vkrt_xorshift(&rng);
      static const char common[] = " hel\nlo'0\xc3\xa9\xe4\xb8";
      text[i] = (char)(r % 3 ? common[r % (sizeof(common) - 1)] : (uint8_t)(1 + r % 255));
      if (text[i] == '<')
        text[i] = '>';
    }
    text[n] = '\0';
    n = strlen(text);
    int32_t out[64];
    int32_t k = llama_tokenize(v, text, false, out, 64);
    assert_true(k > 0 && (size_t)k <= n);
    size_t m = 0;
    for (int32_t i = 0; i < k; i++)
      m += llama_token_piece(v, out[i], back + m, sizeof(back) - m);
    if (m != n || memcmp(back, text, n))
      fail_msg("round trip %d: %zu bytes back of %zu", t, m, n);
  }
  close_vocab(&o);
}

/* add_bos_token false: no BOS; a byte whose character is not a token is dropped, or is the
 * unknown token where the file names one. */
static void test_bos_and_missing_bytes(void **state) {
  (void)state;
  struct opened o;
  char err[256];
  struct vocab_file vf = good;
  vf.add_bos = 0;
  vf.drop_byte = '~';
  assert_int_equal(open_vocab(&o, &vf, err, sizeof(err)), GGUF_OK);
  assert_false(llama_vocab_add_bos(o.v));
  EXPECT(o.v, "a~b", false, 'a', 'b');
  close_vocab(&o);
  vf.add_bos = 1;
  vf.unknown = EOT_PREFIX;
  assert_int_equal(open_vocab(&o, &vf, err, sizeof(err)), GGUF_OK);
  assert_true(llama_vocab_add_bos(o.v));
  EXPECT(o.v, "a~b", true, BOS, 'a', EOT_PREFIX, 'b');
  close_vocab(&o);
}

static void expect_refused(const struct vocab_file *vf, int code, const char *needle) {
  struct opened o;
  char err[256] = "";
  int r = open_vocab(&o, vf, err, sizeof(err));
  if (r != code || !strstr(err, needle))
    fail_msg("want %s \"...%s...\", got %s \"%s\"", gguf_error_str(code), needle,
             gguf_error_str(r), err);
  assert_null(o.v);
  close_vocab(&o);
}

static void test_refused(void **state) {
  (void)state;
  struct vocab_file vf = good;
  const char *const accepted[] = {"llama3", "default", NULL};
  for (int i = 0; i < 3; i++) {
    struct opened o;
    char err[256];
    vf.pre = accepted[i];
    assert_int_equal(open_vocab(&o, &vf, err, sizeof(err)), GGUF_OK);
    EXPECT(o.v, "1234", false, '1', '2', '3', '4');
    close_vocab(&o);
  }
  vf.pre = "qwen2";
  expect_refused(&vf, GGUF_E_BAD_VALUE, "tokenizer.ggml.pre is \"qwen2\"");
  vf.pre = "gpt-4o";
  expect_refused(&vf, GGUF_E_BAD_VALUE, "tokenizer.ggml.pre is \"gpt-4o\"");
  vf = good;
  vf.model = "bert";
  expect_refused(&vf, GGUF_E_BAD_VALUE, "tokenizer.ggml.model is \"bert\"");
  vf = good;
  static const char *const no_space[] = {"l l", "hello"};
  vf.merges = no_space, vf.n_merges = 2;
  expect_refused(&vf, GGUF_E_BAD_VALUE,
                 "tokenizer.ggml.merges[1] \"hello\" is not two tokens separated by a space");
  static const char *const not_token[] = {"l l", "h e", "e l"};
  vf.merges = not_token, vf.n_merges = 3;
  expect_refused(&vf, GGUF_E_BAD_VALUE,
                 "tokenizer.ggml.merges[2] \"e l\": their concatenation is not a token");
  static const char *const bad_side[] = {"hel lo"};
  vf.merges = bad_side, vf.n_merges = 1;
  expect_refused(&vf, GGUF_E_BAD_VALUE, "tokenizer.ggml.merges[0] \"hel lo\": its left side");
  vf.merges = NULL, vf.n_merges = 0; /* no merges at all: fine, every byte its own token */
  struct opened o;
  char err[256];
  assert_int_equal(open_vocab(&o, &vf, err, sizeof(err)), GGUF_OK);
  EXPECT(o.v, "hi", false, 'h', 'i');
  close_vocab(&o);
}

/* ---- the C side of tests/model/bpe.sh ------------------------------------------------------ */

static size_t unhex(const char *line, char *out) {
  size_t n = 0;
  for (; line[0] && line[1] && line[0] != '\n'; line += 2) {
    unsigned b;
    if (sscanf(line, "%2x", &b) != 1)
      break;
    out[n++] = (char)b;
  }
  out[n] = '\0';
  return n;
}

static void put_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    printf("%02x", (uint8_t)s[i]);
}

static int tool(int argc, char **argv) {
  if (!strcmp(argv[1], "--classes")) {
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++)
      putchar("OLNS"[unicode_class_of(cp)]);
    putchar('\n');
    return 0;
  }
  struct gguf_file f;
  struct llama_vocab *v = NULL;
  char err[512];
  bool tokenize = !strcmp(argv[1], "--tokenize") && argc == 3;
  if (!tokenize && strcmp(argv[1], "--split")) {
    fprintf(stderr, "usage: test_bpe [--split | --classes | --tokenize FILE.gguf] < hex lines\n");
    return 2;
  }
  if (tokenize && (gguf_open(argv[2], &f, err, sizeof(err)) ||
                   llama_vocab_load(&f, &v, err, sizeof(err)))) {
    fprintf(stderr, "test_bpe: %s: %s\n", argv[2], err);
    return 1;
  }
  size_t cap = 1 << 16;
  char *line = malloc(2 * cap + 2), *text = malloc(cap + 1), *back = malloc(4 * cap + 1);
  int32_t *ids = malloc(cap * sizeof(*ids));
  while (fgets(line, (int)(2 * cap + 2), stdin)) {
    size_t n = unhex(line, text);
    if (!tokenize) {
      for (size_t at = 0; at < n;) {
        size_t end = bpe_split_llama3(text, n, at);
        if (at)
          putchar(' ');
        put_hex(text + at, end - at);
        at = end;
      }
    } else {
      int32_t k = llama_tokenize(v, text, false, ids, (int32_t)cap);
      size_t m = 0;
      for (int32_t i = 0; i < k; i++) {
        printf("%s%d", i ? "," : "", ids[i]);
        m += llama_token_piece(v, ids[i], back + m, 4 * cap + 1 - m);
      }
      putchar('\t');
      put_hex(back, m);
    }
    putchar('\n');
  }
  free(line), free(text), free(back), free(ids);
  if (tokenize) {
    llama_vocab_free(v);
    gguf_close(&f);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1)
    return tool(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_byte_map),
      cmocka_unit_test(test_unicode_classes),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_bpe_ids),
      cmocka_unit_test(test_bos_and_missing_bytes),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
