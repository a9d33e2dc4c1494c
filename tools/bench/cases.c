/* vkrt-bench cases --test-file FILE: ggml `test-backend-ops --test-file` lines run on
 * libvkrt, each verified against a CPU reference in the same run (#wrong, like
 * nccl-tests) and timed the way test-backend-ops perf times them: many back-to-back ops
 * in one submission between two GPU timestamps (wall clock where the device has none).
 *
 * Line format (whitespace separated, one case per line; '#' comments and blank lines are
 * skipped):  op type ne0 ne1 ne2 ne3 nparams params... nsrc [srctype ne0..3 nb0..3]... name
 * op is the ggml_op number (DUP 1, CONCAT 22, MUL_MAT 29, CPY 34, CONT 35, TRANSPOSE 39,
 * FLASH_ATTN_EXT 73) or its name; types are ggml_type numbers (0 f32, 1 f16, 8 q8_0, 12 q4_K,
 * 14 q6_K) or names; the block types q8_0, q4_K and q6_K only as MUL_MAT's src0 (the weights)
 * and q8_0 as FLASH_ATTN_EXT's K and V, with ne0 a multiple of the block (32, 256, 256) and,
 * as in ggml, byte strides: nb0 the block size (34, 144, 210), nb1.. whole blocks; nb 0 0 0 0
 * = contiguous; name
 * may be '-' or absent. A bad line (unknown op, unsupported type, truncated, negative ne, ne0
 * not whole blocks, strides past a 2^31-element view, non-numeric field) is reported and
 * skipped.
 *
 * FLASH_ATTN_EXT (ggml_flash_attn_ext, run as vkrt_op_attention): result f32 {hsv, n_head,
 * n_batch, 1}; params scale, max_bias, logit_softcap (f32 bit patterns, as ggml keeps them
 * in op_params), prec; sources q f32 {hsk, n_batch, n_head, 1}, k {hsk, n_kv, n_head_kv, 1},
 * v {hsv, n_kv, n_head_kv, 1} (f16 or q8_0, one type; ggml's dims 1 and 2 are the op's dims
 * 2 and 1, so any permutation of the cache maps through the strides) and optionally the
 * mask f16 {n_kv, >= n_batch}, which is uploaded and not read: every query attends all n_kv
 * rows (kv_len = n_kv), or the first --kv-len of them (a short context in a large cache).
 * hsk = hsv, max_bias = logit_softcap = 0. Its ratio column is the KV-read roofline: the
 * time over (bytes of K and V the queries attend) / (the copy rate).
 *
 * Decode ops: RMS_NORM 25 (op param 0 eps as float bits; nsrc 2 adds src1, an f32 {ne0}
 * weight: RMS_NORM followed by MUL, fused), ROPE 48 (ggml_rope's 15 op params: n_dims 1,
 * mode 2, freq_base 5 and freq_scale 6 as float bits, no context extension; src1 the i32
 * positions), GET_ROWS 40 (src0 an f32/f16/q8_0/q4_K/q6_K table, src1 i32 ids), SET_ROWS 42
 * (the result is the f32/f16/q8_0 destination, src0 the f32 rows, src1 i32 row indices, all
 * distinct), ARGMAX 18 (i32 result). The i32 sources get valid random positions, ids and
 * indices (i32 is ggml type 26). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "bench.h"

#define CASE_MAX_SRC 4
#define CASE_MAX_PARAMS 16
#define CASE_MAX_TOKENS 64
#define CASE_MAX_ELEMENTS (1ull << 31)

enum case_op {
  CASE_DUP, CASE_CONT, CASE_CPY, CASE_TRANSPOSE, CASE_CONCAT, CASE_MUL_MAT, CASE_FLASH_ATTN_EXT,
  CASE_RMS_NORM, CASE_ROPE, CASE_GET_ROWS, CASE_SET_ROWS, CASE_ARGMAX, CASE_OP_COUNT
};

/* ggml_op numbers of ggml d99724f2 (include/ggml.h enum ggml_op; FLASH_ATTN_EXT: 73 with
 * CUMSUM, TOP_K, TRI and FILL in the enum). FLASH_ATTN_EXT's mask is optional: 3 or 4. */
static const struct {
  const char *name;
  int ggml;
  int nsrc;
  int nsrc_max; /* 0: exactly nsrc */
} case_ops[CASE_OP_COUNT] = {
  [CASE_DUP] = {"DUP", 1, 1},           [CASE_CONT] = {"CONT", 35, 1},
  [CASE_CPY] = {"CPY", 34, 2},          [CASE_TRANSPOSE] = {"TRANSPOSE", 39, 1},
  [CASE_CONCAT] = {"CONCAT", 22, 2},    [CASE_MUL_MAT] = {"MUL_MAT", 29, 2},
  [CASE_FLASH_ATTN_EXT] = {"FLASH_ATTN_EXT", 73, 4},
  [CASE_RMS_NORM] = {"RMS_NORM", 25, 1, 2}, [CASE_ROPE] = {"ROPE", 48, 2},
  [CASE_GET_ROWS] = {"GET_ROWS", 40, 2}, [CASE_SET_ROWS] = {"SET_ROWS", 42, 2},
  [CASE_ARGMAX] = {"ARGMAX", 18, 1},
};

/* ggml_type numbers this bench maps onto libvkrt types. */
static const struct {
  int ggml;
  const char *name;
  vkrt_type type;
} case_types[] = {{0, "f32", VKRT_TYPE_F32},
                  {1, "f16", VKRT_TYPE_F16},
                  {8, "q8_0", VKRT_TYPE_Q8_0},
                  {12, "q4_K", VKRT_TYPE_Q4_K},
                  {14, "q6_K", VKRT_TYPE_Q6_K},
                  {26, "i32", VKRT_TYPE_I32}};

struct case_tensor {
  vkrt_type type;
  int64_t ne[4];
  int64_t nb[4];      /* bytes */
  uint64_t extent;    /* bytes from the first element (block) to past the last one */
};

struct bench_case {
  int line;
  enum case_op op;
  struct case_tensor dst; /* the result as the line describes it (CPY: src[1]'s view) */
  int32_t params[CASE_MAX_PARAMS];
  int nparams;
  int nsrc;
  struct case_tensor src[CASE_MAX_SRC];
  char name[96];
};

/* ---- parsing (pure) ---------------------------------------------------------------------- */

struct cursor {
  char **tok;
  int n, i;
  char *err;
  size_t err_size;
};

static bool next_i64(struct cursor *c, const char *what, int64_t *out) {
  if (c->i >= c->n) {
    snprintf(c->err, c->err_size, "truncated: the line ends before %s (field %d)", what, c->i + 1);
    return false;
  }
  const char *t = c->tok[c->i];
  char *end = NULL;
  errno = 0;
  long long v = strtoll(t, &end, 10);
  if (end == t || *end || errno) {
    snprintf(c->err, c->err_size, "field %d (%s): '%.40s' is not a number", c->i + 1, what, t);
    return false;
  }
  c->i++;
  *out = v;
  return true;
}

static bool parse_type(struct cursor *c, const char *what, vkrt_type *out) {
  if (c->i >= c->n) {
    snprintf(c->err, c->err_size, "truncated: the line ends before %s (field %d)", what, c->i + 1);
    return false;
  }
  const char *t = c->tok[c->i];
  for (size_t k = 0; k < sizeof(case_types) / sizeof(case_types[0]); k++)
    if (!strcasecmp(t, case_types[k].name)) {
      c->i++;
      *out = case_types[k].type;
      return true;
    }
  int64_t v;
  if (!next_i64(c, what, &v))
    return false;
  for (size_t k = 0; k < sizeof(case_types) / sizeof(case_types[0]); k++)
    if (v == case_types[k].ggml) {
      *out = case_types[k].type;
      return true;
    }
  snprintf(c->err, c->err_size, "%s: ggml type %lld is not supported (f32 = 0, f16 = 1, "
           "q8_0 = 8, q4_K = 12, q6_K = 14, i32 = 26)", what, (long long)v);
  return false;
}

/* Checks ne/nb of a tensor and fills the contiguous strides and the extent. Block types
 * (q8_0, q4_K, q6_K): ne0 whole blocks, blocks dense along dim 0 (nb0 = the block size),
 * the view counted in blocks. */
static bool check_tensor(struct case_tensor *t, const char *what, char *err, size_t err_size) {
  uint64_t ts = vkrt_type_size(t->type), per = vkrt_type_block(t->type), elements = 1;
  const char *unit = per > 1 ? "block" : "element";
  bool contiguous = !t->nb[0] && !t->nb[1] && !t->nb[2] && !t->nb[3];
  for (int i = 0; i < 4; i++) {
    if (t->ne[i] < 1) {
      snprintf(err, err_size, "%s: ne%d = %lld; sizes must be >= 1", what, i, (long long)t->ne[i]);
      return false;
    }
    if (__builtin_mul_overflow(elements, (uint64_t)t->ne[i], &elements) || elements > CASE_MAX_ELEMENTS) {
      snprintf(err, err_size, "%s: more than 2^31 elements", what);
      return false;
    }
    if (!contiguous && (t->nb[i] < 0 || t->nb[i] % (int64_t)ts)) {
      snprintf(err, err_size, "%s: nb%d = %lld is not a non-negative multiple of the %s size %llu",
               what, i, (long long)t->nb[i], unit, (unsigned long long)ts);
      return false;
    }
  }
  if (per > 1 && (uint64_t)t->ne[0] % per) {
    snprintf(err, err_size, "%s: ne0 = %lld is not a multiple of the %s block (%llu elements)", what,
             (long long)t->ne[0], vkrt_type_str(t->type), (unsigned long long)per);
    return false;
  }
  if (per > 1 && !contiguous && (uint64_t)t->nb[0] != ts) {
    snprintf(err, err_size, "%s: nb0 = %lld; %s blocks are dense along dim 0 (nb0 = %llu bytes)",
             what, (long long)t->nb[0], vkrt_type_str(t->type), (unsigned long long)ts);
    return false;
  }
  int64_t units[4] = {t->ne[0] / (int64_t)per, t->ne[1], t->ne[2], t->ne[3]};
  if (contiguous) {
    t->nb[0] = (int64_t)ts;
    for (int i = 1; i < 4; i++)
      t->nb[i] = t->nb[i - 1] * units[i - 1];
  }
  uint64_t last = 0; /* element (block) index of the last element (block) */
  for (int i = 0; i < 4; i++) {
    uint64_t step;
    if (__builtin_mul_overflow((uint64_t)(units[i] - 1), (uint64_t)t->nb[i] / ts, &step) ||
        __builtin_add_overflow(last, step, &last) || last >= CASE_MAX_ELEMENTS) {
      snprintf(err, err_size, "%s: strides reach past a 2^31-%s view", what, unit);
      return false;
    }
  }
  t->extent = (last + 1) * ts;
  return true;
}

/* Block types are taken only as MUL_MAT's weights (q8_0, q4_K, q6_K), GET_ROWS' table (q8_0,
 * q4_K, q6_K), SET_ROWS' result (q8_0) and FLASH_ATTN_EXT's K and V (q8_0). */
static bool block_type_allowed(vkrt_type type, bool weights, bool kv, const char *what,
                               char *err, size_t err_size) {
  if (vkrt_type_block(type) == 1 || weights || (kv && type == VKRT_TYPE_Q8_0))
    return true;
  snprintf(err, err_size, "%s: %s is supported only as MUL_MAT's src0 (the weights), GET_ROWS' "
           "table, SET_ROWS' result and, q8_0, as FLASH_ATTN_EXT's k and v", what,
           vkrt_type_str(type));
  return false;
}

static float param_f32(const struct bench_case *bc, int i) {
  float f = 0;
  if (i < bc->nparams)
    memcpy(&f, &bc->params[i], 4);
  return f;
}

static bool same_ne(const int64_t a[4], const int64_t b[4]) {
  return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static bool is_vector(const struct case_tensor *t, int64_t n) {
  return t->ne[0] == n && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

/* Shapes and types of the decode ops (RMS_NORM, ROPE, GET_ROWS, SET_ROWS, ARGMAX). */
static bool decode_case_check(const struct bench_case *bc, char *err, size_t err_size) {
  const struct case_tensor *d = &bc->dst, *a = &bc->src[0], *b = &bc->src[1];
  const char *op = case_ops[bc->op].name;
  switch (bc->op) {
  case CASE_RMS_NORM:
    if (bc->nparams < 1 || !(param_f32(bc, 0) >= 0.0f)) {
      snprintf(err, err_size, "RMS_NORM: op param 0 (eps, float bits) must be a float >= 0");
      return false;
    }
    if (a->type != VKRT_TYPE_F32 || d->type != VKRT_TYPE_F32 || !same_ne(a->ne, d->ne) ||
        (bc->nsrc == 2 && (b->type != VKRT_TYPE_F32 || !is_vector(b, a->ne[0])))) {
      snprintf(err, err_size, "RMS_NORM: src0 and the result f32 of one shape, src1 (the "
               "fused MUL's weight) f32 {ne0}");
      return false;
    }
    return true;
  case CASE_ROPE:
    if (bc->nparams < 7 || (bc->nparams > 8 && (param_f32(bc, 7) != 0.0f || param_f32(bc, 8) != 1.0f))) {
      snprintf(err, err_size, "ROPE: 7 or more op params (n_dims 1, mode 2, freq_base 5, "
               "freq_scale 6), ext_factor 0 and attn_factor 1 (no context extension)");
      return false;
    }
    if (a->type != VKRT_TYPE_F32 || d->type != VKRT_TYPE_F32 || !same_ne(a->ne, d->ne) ||
        b->type != VKRT_TYPE_I32 || !is_vector(b, a->ne[2])) {
      snprintf(err, err_size, "ROPE: src0 and the result f32 {head_dim, n_head, n_tokens}, "
               "src1 i32 {n_tokens}");
      return false;
    }
    return true;
  case CASE_GET_ROWS:
    if (b->type != VKRT_TYPE_I32 || d->type != VKRT_TYPE_F32 || b->ne[1] != 1 ||
        d->ne[0] != a->ne[0] || d->ne[1] != b->ne[0] || a->ne[2] != 1 || d->ne[2] != 1) {
      snprintf(err, err_size, "GET_ROWS: src0 a table {n_embd, n_rows}, src1 i32 {n}, the "
               "result f32 {n_embd, n}");
      return false;
    }
    return true;
  case CASE_SET_ROWS:
    if (a->type != VKRT_TYPE_F32 || b->type != VKRT_TYPE_I32 || !is_vector(b, a->ne[1]) ||
        a->ne[0] != d->ne[0] || a->ne[2] != 1 || d->ne[2] != 1 || b->ne[0] > d->ne[1] ||
        (d->type != VKRT_TYPE_F32 && d->type != VKRT_TYPE_F16 && d->type != VKRT_TYPE_Q8_0)) {
      snprintf(err, err_size, "SET_ROWS: the result f32, f16 or q8_0 {n, n_rows}, src0 f32 "
               "{n, count}, src1 i32 {count}, count <= n_rows");
      return false;
    }
    return true;
  case CASE_ARGMAX:
    if (a->type != VKRT_TYPE_F32 || d->type != VKRT_TYPE_I32 || !is_vector(d, a->ne[1]) ||
        a->ne[2] != 1) {
      snprintf(err, err_size, "ARGMAX: src0 f32 {n, rows}, the result i32 {rows}");
      return false;
    }
    return true;
  default:
    snprintf(err, err_size, "%s: no shape check", op);
    return false;
  }
}

/* Parses one line into *out; returns 1 on a case, 0 on a blank/comment line, -1 with err. */
static int case_parse(char *line, int line_no, struct bench_case *out, char *err, size_t err_size) {
  memset(out, 0, sizeof(*out));
  out->line = line_no;
  char *tok[CASE_MAX_TOKENS + 1];
  int n = 0;
  for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
    if (n == 0 && t[0] == '#')
      return 0;
    if (n == CASE_MAX_TOKENS) {
      snprintf(err, err_size, "more than %d fields", CASE_MAX_TOKENS);
      return -1;
    }
    tok[n++] = t;
  }
  if (!n)
    return 0;
  struct cursor c = {tok, n, 0, err, err_size};
  int64_t v;
  /* op: number or name */
  int op = -1;
  for (int k = 0; k < CASE_OP_COUNT; k++)
    if (!strcasecmp(tok[0], case_ops[k].name))
      op = k;
  if (op < 0) {
    if (!next_i64(&c, "op", &v))
      return -1;
    for (int k = 0; k < CASE_OP_COUNT; k++)
      if (v == case_ops[k].ggml)
        op = k;
    if (op < 0) {
      snprintf(err, err_size, "unknown or unsupported op %lld (supported: DUP 1, CONCAT 22, "
               "MUL_MAT 29, CPY 34, CONT 35, TRANSPOSE 39, FLASH_ATTN_EXT 73)", (long long)v);
      return -1;
    }
  } else {
    c.i++;
  }
  out->op = (enum case_op)op;
  if (!parse_type(&c, "type", &out->dst.type) ||
      !block_type_allowed(out->dst.type, op == CASE_SET_ROWS, false, "type", err, err_size))
    return -1;
  static const char *const ne_names[] = {"ne0", "ne1", "ne2", "ne3"};
  static const char *const nb_names[] = {"nb0", "nb1", "nb2", "nb3"};
  for (int i = 0; i < 4; i++)
    if (!next_i64(&c, ne_names[i], &out->dst.ne[i]))
      return -1;
  if (!next_i64(&c, "nparams", &v))
    return -1;
  if (v < 0 || v > CASE_MAX_PARAMS) {
    snprintf(err, err_size, "nparams = %lld; 0..%d", (long long)v, CASE_MAX_PARAMS);
    return -1;
  }
  out->nparams = (int)v;
  for (int i = 0; i < out->nparams; i++) {
    if (!next_i64(&c, "op param", &v))
      return -1;
    if (v < INT32_MIN || v > INT32_MAX) {
      snprintf(err, err_size, "op param %d = %lld is not a 32-bit integer", i, (long long)v);
      return -1;
    }
    out->params[i] = (int32_t)v;
  }
  if (!next_i64(&c, "nsrc", &v))
    return -1;
  bool fa = op == CASE_FLASH_ATTN_EXT;
  int nsrc_max = case_ops[op].nsrc_max ? case_ops[op].nsrc_max : case_ops[op].nsrc;
  if ((v < case_ops[op].nsrc || v > nsrc_max) && !(fa && v == 3)) {
    snprintf(err, err_size, "%s takes %s%d sources, the line has nsrc = %lld", case_ops[op].name,
             fa ? "3 (no mask) or " : "", case_ops[op].nsrc, (long long)v);
    return -1;
  }
  out->nsrc = (int)v;
  for (int s = 0; s < out->nsrc; s++) {
    struct case_tensor *t = &out->src[s];
    char what[32];
    snprintf(what, sizeof(what), "src%d type", s);
    if (!parse_type(&c, what, &t->type) ||
        !block_type_allowed(t->type, (op == CASE_MUL_MAT || op == CASE_GET_ROWS) && s == 0,
                            fa && (s == 1 || s == 2), what,
                            err, err_size))
      return -1;
    for (int i = 0; i < 4; i++)
      if (!next_i64(&c, ne_names[i], &t->ne[i]))
        return -1;
    for (int i = 0; i < 4; i++)
      if (!next_i64(&c, nb_names[i], &t->nb[i]))
        return -1;
  }
  if (c.i < n) {
    const char *name = tok[c.i++];
    snprintf(out->name, sizeof(out->name), "%s", strcmp(name, "-") ? name : "");
  }
  if (c.i < n) {
    snprintf(err, err_size, "%d unexpected fields after the name", n - c.i);
    return -1;
  }
  /* tensors */
  if (!check_tensor(&out->dst, "result", err, err_size))
    return -1;
  for (int s = 0; s < out->nsrc; s++) {
    char what[16];
    snprintf(what, sizeof(what), "src%d", s);
    if (!check_tensor(&out->src[s], what, err, err_size))
      return -1;
  }
  /* per-op agreement */
  const struct case_tensor *a = &out->src[0], *b = &out->src[1];
  switch (out->op) {
  case CASE_DUP:
  case CASE_CONT:
    if (!same_ne(a->ne, out->dst.ne)) {
      snprintf(err, err_size, "%s: result ne differs from src0 ne (reshaping copies are not "
               "supported)", case_ops[op].name);
      return -1;
    }
    break;
  case CASE_CPY:
    if (!same_ne(a->ne, b->ne) || !same_ne(a->ne, out->dst.ne)) {
      snprintf(err, err_size, "CPY: src0, src1 (the destination view) and the result must "
               "have one shape");
      return -1;
    }
    out->dst = *b; /* the result is src1's view */
    break;
  case CASE_TRANSPOSE: {
    int64_t want[4] = {a->ne[1], a->ne[0], a->ne[2], a->ne[3]};
    if (!same_ne(want, out->dst.ne) || a->type != out->dst.type) {
      snprintf(err, err_size, "TRANSPOSE: the result must be src0 with ne0/ne1 swapped, same type");
      return -1;
    }
    break;
  }
  case CASE_CONCAT:
    if (out->nparams < 1 || out->params[0] < 0 || out->params[0] > 3) {
      snprintf(err, err_size, "CONCAT: op param 0 (dim) must be 0..3");
      return -1;
    }
    if (a->type != out->dst.type || b->type != out->dst.type) {
      snprintf(err, err_size, "CONCAT: sources and result must have one type");
      return -1;
    }
    break;
  case CASE_MUL_MAT: {
    int64_t want[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    if (b->type != VKRT_TYPE_F32 || out->dst.type != VKRT_TYPE_F32) {
      snprintf(err, err_size, "MUL_MAT: src1 (x) and the result must be f32");
      return -1;
    }
    if (a->ne[0] != b->ne[0] || !same_ne(want, out->dst.ne)) {
      snprintf(err, err_size, "MUL_MAT: shapes disagree: w {%lld, %lld}, x {%lld, %lld}, "
               "result {%lld, %lld}", (long long)a->ne[0], (long long)a->ne[1],
               (long long)b->ne[0], (long long)b->ne[1], (long long)out->dst.ne[0],
               (long long)out->dst.ne[1]);
      return -1;
    }
    break;
  }
  case CASE_FLASH_ATTN_EXT: {
    const struct case_tensor *q = a, *k = b, *vv = &out->src[2], *d = &out->dst;
    if (q->type != VKRT_TYPE_F32 || d->type != VKRT_TYPE_F32 || k->type != vv->type ||
        (k->type != VKRT_TYPE_F16 && k->type != VKRT_TYPE_Q8_0)) {
      snprintf(err, err_size, "FLASH_ATTN_EXT: q and the result f32, k and v both f16 or both q8_0");
      return -1;
    }
    int64_t want_k[4] = {q->ne[0], k->ne[1], k->ne[2], 1};
    int64_t want_d[4] = {vv->ne[0], q->ne[2], q->ne[1], 1};
    if (!same_ne(want_k, k->ne) || !same_ne(k->ne, vv->ne) || !same_ne(want_d, d->ne) ||
        q->ne[3] != 1 || q->ne[2] % k->ne[2]) {
      snprintf(err, err_size, "FLASH_ATTN_EXT: shapes disagree: q {%lld, %lld, %lld, %lld}, k "
               "{%lld, %lld, %lld, %lld}, v ne0 %lld, result {%lld, %lld, %lld, %lld} (hsk = hsv, "
               "n_head a multiple of n_head_kv, one sequence)", (long long)q->ne[0],
               (long long)q->ne[1], (long long)q->ne[2], (long long)q->ne[3], (long long)k->ne[0],
               (long long)k->ne[1], (long long)k->ne[2], (long long)k->ne[3], (long long)vv->ne[0],
               (long long)d->ne[0], (long long)d->ne[1], (long long)d->ne[2], (long long)d->ne[3]);
      return -1;
    }
    if (out->nsrc == 4 && (out->src[3].ne[0] != k->ne[1] || out->src[3].ne[1] < q->ne[1])) {
      snprintf(err, err_size, "FLASH_ATTN_EXT: the mask must be {n_kv, >= n_batch}");
      return -1;
    }
    if (param_f32(out, 1) != 0 || param_f32(out, 2) != 0) {
      snprintf(err, err_size, "FLASH_ATTN_EXT: max_bias and logit_softcap must be 0 (ALiBi and "
               "soft-capping are not supported)");
      return -1;
    }
    if (!(param_f32(out, 0) > 0) || !isfinite(param_f32(out, 0))) {
      snprintf(err, err_size, "FLASH_ATTN_EXT: op param 0 (scale, f32 bits) must be a finite "
               "positive float");
      return -1;
    }
    break;
  }
  default:
    if (!decode_case_check(out, err, err_size))
      return -1;
    break;
  }
  if (!out->name[0]) {
    const struct case_tensor *s0 = &out->src[0];
    if (out->op == CASE_FLASH_ATTN_EXT)
      snprintf(out->name, sizeof(out->name), "FLASH_ATTN_EXT hs=%lld nh=%lld nr=%lld kv=%lld nb=%lld %s",
               (long long)s0->ne[0], (long long)out->src[1].ne[2],
               (long long)(s0->ne[2] / out->src[1].ne[2]), (long long)out->src[1].ne[1],
               (long long)s0->ne[1], vkrt_type_str(out->src[1].type));
    else if (out->op == CASE_MUL_MAT)
      snprintf(out->name, sizeof(out->name), "MUL_MAT %s K=%lld N=%lld M=%lld",
               vkrt_type_str(s0->type), (long long)s0->ne[0],
               (long long)s0->ne[1], (long long)out->src[1].ne[1]);
    else
      snprintf(out->name, sizeof(out->name), "%s %s %lldx%lldx%lldx%lld", case_ops[op].name,
               vkrt_type_str(s0->type), (long long)s0->ne[0],
               (long long)s0->ne[1], (long long)s0->ne[2], (long long)s0->ne[3]);
  }
  return 1;
}

/* ---- host data and the CPU reference ------------------------------------------------------ */

static float load(const uint8_t *base, vkrt_type type, uint64_t off) {
  if (type == VKRT_TYPE_I32) { /* ids, indices, argmax results: exact below 2^24 */
    int32_t v;
    memcpy(&v, base + off, 4);
    return (float)v;
  }
  if (type == VKRT_TYPE_F16) {
    uint16_t h;
    memcpy(&h, base + off, 2);
    return vkrt_f16_to_f32(h);
  }
  float f;
  memcpy(&f, base + off, 4);
  return f;
}

static uint64_t offset_of(const struct case_tensor *t, const int64_t i[4]) {
  return (uint64_t)(i[0] * t->nb[0] + i[1] * t->nb[1] + i[2] * t->nb[2] + i[3] * t->nb[3]);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) { return (uint32_t)(vkrt_xorshift(&rng_state) >> 32); }

/* Random values k / 1024 with |k| <= 1024 (exact in f16 and f32) in every element slot of
 * the extent, gaps of strided views included; block types: random blocks with small finite
 * f16 scales (bench_random_blocks) in every block slot. */
static void fill_random(uint8_t *p, vkrt_type type, uint64_t bytes) {
  if (vkrt_type_block(type) > 1) {
    bench_random_blocks(type, p, bytes / vkrt_type_size(type), &rng_state);
  } else if (type == VKRT_TYPE_F16) {
    for (uint64_t i = 0; i + 2 <= bytes; i += 2) {
      uint16_t h = vkrt_f32_to_f16((float)((int)(rng() % 2049) - 1024) / 1024.0f);
      memcpy(p + i, &h, 2);
    }
  } else {
    for (uint64_t i = 0; i + 4 <= bytes; i += 4) {
      float f = (float)((int)(rng() % 2049) - 1024) / 1024.0f;
      memcpy(p + i, &f, 4);
    }
  }
}

/* Row `wr` of block-type weights (K elements) in f32 from the format's definition
 * (vkrt_dequantize_row) into wf, and into wmag the magnitude of what the kernels multiply
 * by x per element: |w| for q8_0 (d q) and q6_K (d sc (q - 32)); for q4_K, whose kernels take
 * d sc sum q x - dmin m sum x, |d sc q| + |dmin m|, so that the bound covers the cancelling
 * parts. The dmin m part comes from the same dequantizer with every d zeroed (w = -dmin m). */
static void dequantize_weights(vkrt_type type, const uint8_t *wr, int64_t K, uint8_t *scratch,
                               float *wf, float *wmag) {
  vkrt_dequantize_row(type, wr, wf, K);
  if (type != VKRT_TYPE_Q4_K) {
    for (int64_t k = 0; k < K; k++)
      wmag[k] = fabsf(wf[k]);
    return;
  }
  uint64_t bs = vkrt_type_size(type), blocks = (uint64_t)K / vkrt_type_block(type);
  memcpy(scratch, wr, blocks * bs);
  for (uint64_t b = 0; b < blocks; b++)
    scratch[b * bs] = scratch[b * bs + 1] = 0; /* d = +0 */
  vkrt_dequantize_row(type, scratch, wmag, K); /* -dmin m */
  for (int64_t k = 0; k < K; k++)
    wmag[k] = fabsf(wf[k] - wmag[k]) + fabsf(wmag[k]);
}

/* MUL_MAT's reference, rows of w split over the host's threads (a prompt-sized case is
 * ~10^10 products): each thread dequantizes a row of w once for every column of x. */
struct mm_ref {
  const struct bench_case *bc;
  uint8_t *const *host;
  float *ref, *tol, *mag;
  bool q8, ok;
  int64_t n0, n1;
};

static void *mul_mat_rows(void *arg) {
  struct mm_ref *j = arg;
  const struct bench_case *bc = j->bc;
  const struct case_tensor *d = &bc->dst, *a = &bc->src[0], *b = &bc->src[1];
  int64_t K = a->ne[0], r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  bool blocks = vkrt_type_block(a->type) > 1;
  float *wf = malloc((size_t)K * sizeof(float)), *wmag = malloc((size_t)K * sizeof(float));
  uint8_t *scratch = blocks ? malloc((size_t)K / vkrt_type_block(a->type) * vkrt_type_size(a->type)) : NULL;
  if (!wf || !wmag || (blocks && !scratch)) {
    free(wf);
    free(wmag);
    free(scratch);
    return NULL;
  }
  for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
    for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
      for (int64_t n = j->n0; n < j->n1; n++) {
        const uint8_t *wr = j->host[0] + n * a->nb[1] + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
        if (blocks) {
          dequantize_weights(a->type, wr, K, scratch, wf, wmag);
        } else {
          for (int64_t k = 0; k < K; k++) {
            wf[k] = load(wr, a->type, (uint64_t)(k * a->nb[0]));
            wmag[k] = fabsf(wf[k]);
          }
        }
        for (int64_t m = 0; m < d->ne[1]; m++) {
          const uint8_t *xr = j->host[1] + m * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
          double acc = 0, mag = 0, rounding = 0, amax = 0;
          for (int64_t k = 0; k < K; k++) {
            double x = load(xr, VKRT_TYPE_F32, (uint64_t)(k * b->nb[0]));
            acc += (double)wf[k] * x;
            mag += wmag[k] * fabs(x);
            if (j->q8 && blocks) { /* 8-bit x: |w_k| max|x|_32 / 254 at most per product */
              if (k % 32 == 0)
                for (int64_t t = amax = 0; t < 32 && k + t < K; t++)
                  amax = fmax(amax, fabs(load(xr, VKRT_TYPE_F32, (uint64_t)((k + t) * b->nb[0]))));
              rounding += wmag[k] * amax / 254 * 1.001;
            }
          }
          uint64_t o = (uint64_t)(((i3 * d->ne[2] + i2) * d->ne[1] + m) * d->ne[0] + n);
          j->ref[o] = (float)acc;
          /* f32 accumulation in any order: well inside K * 2^-24 * sum |w x| (block types: the
           * sum of the magnitudes of the products the kernels form); --activations q8 adds
           * the rounding of x */
          j->tol[o] = (float)(mag * 2e-5 * (1.0 + sqrt((double)K) / 16.0) + rounding + 1e-6);
          j->mag[o] = (float)mag;
        }
      }
  free(wf);
  free(wmag);
  free(scratch);
  j->ok = true;
  return NULL;
}

static bool mul_mat_reference(const struct bench_case *bc, uint8_t *const host[CASE_MAX_SRC],
                              float *ref, float *tol, float *mag, bool q8) {
  enum { MAX_THREADS = 64 };
  int64_t N = bc->dst.ne[0];
  double work = (double)N * (double)bc->dst.ne[1] * (double)bc->src[0].ne[0];
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = work < 1e8 || cpus < 2 ? 1 : (int)(cpus < MAX_THREADS ? cpus : MAX_THREADS);
  if (threads > N)
    threads = (int)N;
  struct mm_ref jobs[MAX_THREADS];
  pthread_t tid[MAX_THREADS];
  bool started[MAX_THREADS] = {false};
  for (int t = 0; t < threads; t++) {
    jobs[t] = (struct mm_ref){bc, host, ref, tol, mag, q8, false, N * t / threads, N * (t + 1) / threads};
    started[t] = t > 0 && pthread_create(&tid[t], NULL, mul_mat_rows, &jobs[t]) == 0;
  }
  for (int t = 0; t < threads; t++) /* the calling thread takes job 0 and any not started */
    if (!started[t])
      mul_mat_rows(&jobs[t]);
  bool ok = true;
  for (int t = 0; t < threads; t++) {
    if (started[t])
      pthread_join(tid[t], NULL);
    ok = ok && jobs[t].ok;
  }
  return ok;
}

/* Valid i32 contents for the decode ops' sources (the rest of the extent keeps its random
 * data): ROPE positions in [0, 32768), GET_ROWS ids in [0, n_rows), SET_ROWS distinct row
 * indices in [0, n_rows). */
static void fill_indices(const struct bench_case *bc, uint8_t *const host[CASE_MAX_SRC]) {
  const struct case_tensor *ix = &bc->src[1];
  if (bc->op != CASE_ROPE && bc->op != CASE_GET_ROWS && bc->op != CASE_SET_ROWS)
    return;
  int64_t n = ix->ne[0], range = bc->op == CASE_ROPE ? 32768
                                 : bc->op == CASE_GET_ROWS ? bc->src[0].ne[1] : bc->dst.ne[1];
  int64_t start = (int64_t)(rng() % (uint64_t)range); /* SET_ROWS: a run of cache slots */
  for (int64_t k = 0; k < n; k++) {
    int32_t v = bc->op == CASE_SET_ROWS ? (int32_t)((start + k) % range) : (int32_t)(rng() % (uint64_t)range);
    memcpy(host[1] + k * ix->nb[0], &v, 4);
  }
}

/* The decode ops' references in row-major order of dst's ne, from ggml's definitions
 * (double where ggml accumulates in float). SET_ROWS: the rows not written keep the poison
 * (NaN expected). ARGMAX: the index as a float. */
static bool decode_reference(const struct bench_case *bc, uint8_t *const host[CASE_MAX_SRC],
                             float *ref, float *tol) {
  const struct case_tensor *d = &bc->dst, *a = &bc->src[0], *b = &bc->src[1];
  uint64_t rows = (uint64_t)d->ne[1] * (uint64_t)d->ne[2] * (uint64_t)d->ne[3];
  int64_t n = d->ne[0];
  size_t row_max = (size_t)(a->ne[0] > n ? a->ne[0] : n);
  float *row = malloc(row_max * sizeof(float));
  uint8_t *enc = malloc(row_max * 4);
  if (!row || !enc) {
    free(row);
    free(enc);
    return false;
  }
  switch (bc->op) {
  case CASE_RMS_NORM:
    for (uint64_t r = 0; r < rows; r++) {
      int64_t i[4] = {0, (int64_t)(r % (uint64_t)d->ne[1]), (int64_t)(r / (uint64_t)d->ne[1] % (uint64_t)d->ne[2]),
                      (int64_t)(r / (uint64_t)(d->ne[1] * d->ne[2]))};
      double sum = 0;
      for (i[0] = 0; i[0] < n; i[0]++) {
        double v = load(host[0], VKRT_TYPE_F32, offset_of(a, i));
        sum += v * v;
      }
      double scale = 1.0 / sqrt(sum / (double)n + param_f32(bc, 0));
      for (i[0] = 0; i[0] < n; i[0]++) {
        double v = load(host[0], VKRT_TYPE_F32, offset_of(a, i)) * scale;
        if (bc->nsrc == 2)
          v *= load(host[1], VKRT_TYPE_F32, (uint64_t)(i[0] * b->nb[0]));
        ref[r * (uint64_t)n + (uint64_t)i[0]] = (float)v;
        tol[r * (uint64_t)n + (uint64_t)i[0]] = (float)(4e-6 * fabs(v) + 1e-6);
      }
    }
    break;
  case CASE_ROPE: {
    int n_dims = bc->params[1], neox = bc->params[2] & 2;
    double base = param_f32(bc, 5), fscale = param_f32(bc, 6);
    for (uint64_t r = 0; r < rows; r++) {
      int64_t i[4] = {0, (int64_t)(r % (uint64_t)d->ne[1]), (int64_t)(r / (uint64_t)d->ne[1]), 0};
      int32_t pos;
      memcpy(&pos, host[1] + i[2] * b->nb[0], 4);
      float *out = ref + r * (uint64_t)n;
      for (i[0] = 0; i[0] < n; i[0]++)
        out[i[0]] = load(host[0], VKRT_TYPE_F32, offset_of(a, i));
      for (int p = 0; p < n_dims / 2; p++) {
        double theta = pos * fscale * pow(base, -2.0 * p / n_dims);
        int64_t e0 = neox ? p : 2 * p, e1 = neox ? p + n_dims / 2 : 2 * p + 1;
        double x0 = out[e0], x1 = out[e1];
        out[e0] = (float)(x0 * cos(theta) - x1 * sin(theta));
        out[e1] = (float)(x0 * sin(theta) + x1 * cos(theta));
      }
      /* the device's theta is a float: its rounding grows with the position */
      for (int64_t e = 0; e < n; e++)
        tol[r * (uint64_t)n + (uint64_t)e] = e < n_dims ? (float)(4e-6 + 6e-7 * pos) : 0.0f;
    }
    break;
  }
  case CASE_GET_ROWS:
    for (int64_t k = 0; k < d->ne[1]; k++) {
      int32_t id;
      memcpy(&id, host[1] + k * b->nb[0], 4);
      vkrt_dequantize_row(a->type, host[0] + (uint64_t)id * (uint64_t)a->nb[1], row, n);
      for (int64_t e = 0; e < n; e++) {
        ref[(uint64_t)k * (uint64_t)n + (uint64_t)e] = row[e];
        /* q4_K: d sc q - dmin m may be fused on the device; the rest is exact */
        tol[(uint64_t)k * (uint64_t)n + (uint64_t)e] = a->type == VKRT_TYPE_Q4_K ? 1e-6f * (1 + fabsf(row[e])) : 0.0f;
      }
    }
    break;
  case CASE_SET_ROWS:
    for (uint64_t o = 0; o < rows * (uint64_t)n; o++)
      ref[o] = NAN, tol[o] = 0;
    for (int64_t k = 0; k < a->ne[1]; k++) {
      int32_t r;
      memcpy(&r, host[1] + k * b->nb[0], 4);
      for (int64_t e = 0; e < n; e++)
        row[e] = load(host[0], VKRT_TYPE_F32, (uint64_t)(e * a->nb[0] + k * a->nb[1]));
      /* what the cache holds: the row rounded as vkrt_quantize_row (= ggml) rounds it */
      vkrt_quantize_row(d->type, row, enc, n);
      vkrt_dequantize_row(d->type, enc, ref + (uint64_t)r * (uint64_t)n, n);
    }
    break;
  case CASE_ARGMAX:
    for (int64_t r = 0; r < a->ne[1]; r++) {
      int64_t best = 0;
      float bv = -INFINITY;
      for (int64_t e = 0; e < a->ne[0]; e++) {
        float v = load(host[0], VKRT_TYPE_F32, (uint64_t)(e * a->nb[0] + r * a->nb[1]));
        if (v > bv)
          bv = v, best = e;
      }
      ref[r] = (float)best;
      tol[r] = 0;
    }
    break;
  default:
    break;
  }
  free(row);
  free(enc);
  return true;
}

/* Rows of a K or V cache {D, n_kv, n_head_kv} in f32, [head][token][D]; NULL when out of
 * host memory. */
static float *cache_rows(const struct case_tensor *t, const uint8_t *base) {
  int64_t D = t->ne[0], n = t->ne[1] * t->ne[2];
  float *out = malloc((size_t)(n * D) * sizeof(float));
  for (int64_t h = 0; out && h < t->ne[2]; h++)
    for (int64_t r = 0; r < t->ne[1]; r++) {
      const uint8_t *row = base + r * t->nb[1] + h * t->nb[2];
      float *o = out + (h * t->ne[1] + r) * D;
      if (t->type == VKRT_TYPE_Q8_0)
        vkrt_dequantize_row(t->type, row, o, D);
      else
        for (int64_t d = 0; d < D; d++)
          o[d] = load(row, t->type, (uint64_t)(d * t->nb[0]));
    }
  return out;
}

/* FLASH_ATTN_EXT in float64: every query attends the first T of the n_kv rows. The bound:
 * each f32 score is off by up to about D 2^-24 sum |scale q k|, which moves the output by that
 * times the spread of v; exp and sums in f32. With q8 (--activations q8) a q8_0 cache's scores
 * may take scale q rounded to 8 bits per 32 values: each off by up to sum |k| max|scale q|_32
 * / 254 more, which moves the output by twice that. */
static bool attention_reference(const struct bench_case *bc, uint8_t *const host[CASE_MAX_SRC],
                                int64_t T, bool q8, float *ref, float *tol) {
  const struct case_tensor *q = &bc->src[0], *k = &bc->src[1], *v = &bc->src[2];
  int64_t D = q->ne[0], NB = q->ne[1], H = q->ne[2], NKV = k->ne[1], G = H / k->ne[2];
  double scale = param_f32(bc, 0);
  float *kf = cache_rows(k, host[1]), *vf = cache_rows(v, host[2]);
  double *sc = malloc((size_t)NKV * sizeof(double)), *qd = malloc((size_t)D * sizeof(double));
  double *qround = malloc((size_t)D * sizeof(double));
  bool ok = kf && vf && sc && qd && qround;
  for (int64_t j = 0; ok && j < NB; j++)
    for (int64_t h = 0; h < H; h++) {
      for (int64_t d = 0; d < D; d++)
        qd[d] = load(host[0], VKRT_TYPE_F32, (uint64_t)(d * q->nb[0] + j * q->nb[1] + h * q->nb[2]));
      const float *kh = kf + (h / G) * NKV * D, *vh = vf + (h / G) * NKV * D;
      double m = -INFINITY, l = 0, sabs = 0, rounding = 0;
      /* q8: each q_d's share of a score's rounding bound, max|scale q| of its 32 / 254 */
      for (int64_t d0 = 0; d0 < D; d0 += 32) {
        double amax = 0;
        for (int64_t d = d0; d < d0 + 32 && d < D; d++)
          amax = fmax(amax, fabs(qd[d] * scale));
        for (int64_t d = d0; d < d0 + 32 && d < D; d++)
          qround[d] = q8 && k->type == VKRT_TYPE_Q8_0 ? amax / 254 * 1.001 : 0;
      }
      for (int64_t t = 0; t < T; t++) {
        double s = 0, a = 0, r = 0;
        for (int64_t d = 0; d < D; d++) {
          s += qd[d] * kh[t * D + d];
          a += fabs(qd[d] * kh[t * D + d]);
          r += fabs(kh[t * D + d]) * qround[d];
        }
        sc[t] = s * scale;
        sabs = fmax(sabs, a * scale);
        rounding = fmax(rounding, r);
        m = fmax(m, sc[t]);
      }
      for (int64_t t = 0; t < T; t++)
        l += (sc[t] = exp(sc[t] - m));
      for (int64_t d = 0; d < D; d++) {
        double o = 0, mag = 0;
        for (int64_t t = 0; t < T; t++) {
          o += sc[t] / l * vh[t * D + d];
          mag += sc[t] / l * fabs(vh[t * D + d]);
        }
        uint64_t i = (uint64_t)(d + D * (h + H * j));
        ref[i] = (float)o;
        tol[i] = (float)((2e-5 + 2.0 * (double)D * 6e-8 * sabs + 2 * rounding) * (mag + fabs(o)) +
                         1e-6);
      }
    }
  free(kf);
  free(vf);
  free(sc);
  free(qd);
  free(qround);
  return ok;
}

/* Reference of the result in row-major order of dst's ne (float); for MUL_MAT and
 * FLASH_ATTN_EXT also the per-element error bound, for MUL_MAT sum_k |w_k x_k| in mag (0
 * elsewhere). False when out of host memory. */
static bool reference(const struct bench_case *bc, uint8_t *const host[CASE_MAX_SRC], float *ref,
                      float *tol, float *mag, bool q8, int64_t attended) {
  const struct case_tensor *d = &bc->dst, *a = &bc->src[0], *b = &bc->src[1];
  uint64_t o = 0;
  int64_t i[4];
  if (bc->op == CASE_FLASH_ATTN_EXT)
    return attention_reference(bc, host, attended, q8, ref, tol);
  if (bc->op == CASE_MUL_MAT)
    return mul_mat_reference(bc, host, ref, tol, mag, q8);
  if (bc->op >= CASE_RMS_NORM)
    return decode_reference(bc, host, ref, tol);
  for (i[3] = 0; i[3] < d->ne[3]; i[3]++)
    for (i[2] = 0; i[2] < d->ne[2]; i[2]++)
      for (i[1] = 0; i[1] < d->ne[1]; i[1]++)
        for (i[0] = 0; i[0] < d->ne[0]; i[0]++, o++) {
          switch (bc->op) {
          case CASE_TRANSPOSE: {
            int64_t j[4] = {i[1], i[0], i[2], i[3]};
            ref[o] = load(host[0], a->type, offset_of(a, j));
            break;
          }
          case CASE_CONCAT: {
            int dim = bc->params[0];
            if (i[dim] < a->ne[dim]) {
              ref[o] = load(host[0], a->type, offset_of(a, i));
            } else {
              int64_t j[4] = {i[0], i[1], i[2], i[3]};
              j[dim] -= a->ne[dim];
              ref[o] = load(host[1], b->type, offset_of(b, j));
            }
            break;
          }
          default: /* DUP, CONT, CPY: element i of src0 */
            ref[o] = load(host[0], a->type, offset_of(a, i));
            break;
          }
          tol[o] = 0; /* copies are exact */
        }
  return true;
}

/* A matmul on cooperative matrices rounds both factors of every product to f16 (11
 * significant bits each): at most 2^-10 (+ 2^-22) of sum_k |w_k x_k| more. */
#define F16_PRODUCT_ROUNDING (0x1p-10 * 1.001)

/* Elements of the result outside the reference's bound (NaN poison counts, except where the
 * reference is NaN: an element the op must leave alone), the bound widened by mag times
 * F16_PRODUCT_ROUNDING where mag is given. Block-type results (SET_ROWS into q8_0) are
 * compared dequantized, row by row. */
static uint64_t count_wrong(const struct case_tensor *d, const uint8_t *got, const float *ref,
                            const float *tol, const float *mag, double *max_err) {
  uint64_t wrong = 0, o = 0;
  int64_t i[4];
  bool blocks = vkrt_type_block(d->type) > 1;
  float *row = blocks ? malloc((size_t)d->ne[0] * sizeof(float)) : NULL;
  *max_err = 0;
  if (blocks && !row)
    return 1;
  for (i[3] = 0; i[3] < d->ne[3]; i[3]++)
    for (i[2] = 0; i[2] < d->ne[2]; i[2]++)
      for (i[1] = 0; i[1] < d->ne[1]; i[1]++) {
        if (blocks) {
          int64_t r0[4] = {0, i[1], i[2], i[3]};
          vkrt_dequantize_row(d->type, got + offset_of(d, r0), row, d->ne[0]);
        }
        for (i[0] = 0; i[0] < d->ne[0]; i[0]++, o++) {
          float g = blocks ? row[i[0]] : load(got, d->type, offset_of(d, i));
          if (ref[o] != ref[o]) { /* must be untouched (still the NaN poison) */
            wrong += g == g;
            continue;
          }
          double e = fabs((double)g - (double)ref[o]);
          if (!(e <= tol[o] + (mag ? mag[o] * F16_PRODUCT_ROUNDING : 0)))
            wrong++;
          if (e > *max_err || e != e)
            *max_err = e;
        }
      }
  free(row);
  return wrong;
}

/* ---- running ---------------------------------------------------------------------------------- */

struct cases_opts {
  const char *file;
  bool json, variants;
  bool q8; /* --activations q8: vkrt_options.quant_activations = VKRT_ACTIVATIONS_Q8 */
  uint32_t q8_columns; /* --q8-columns: vkrt_options.quant_activations_columns */
  bool f16; /* --activations f16: vkrt_options.matmul_activations = VKRT_MATMUL_ACTIVATIONS_F16 */
  int tiled_copies; /* -1 device choice, 0/1 forced (tests run the GPU paths on lavapipe) */
  int iters;
  uint32_t device;
  double target_ms; /* GPU time per timed batch */
  double warmup_ms; /* back-to-back work before each case is timed */
  bool warmup_set;
  bool tiles;     /* --tiles: sweep the tiled matmul's tiles on every tiled MUL_MAT case */
  bool parts;     /* --parts: each swept tile also without its multiply, and without its loads */
  int min_m;      /* --min-m: the tiled crossover (0: the device's) */
  int coopmat;    /* --coopmat on|off (-1: the device's choice) */
  int64_t kv_len; /* --kv-len: FLASH_ATTN_EXT queries attend this many cached rows (0: n_kv) */
  const char *lab[8]; /* --lab NAME=VALUE: lab knobs set on the device after open */
  int labs;
};

struct cases_ctx {
  struct cases_opts o;
  vkrt_appliance *app;
  vkrt_lab_device td;
  vkrt_lab_timer *timer; /* NULL: wall clock */
  double copy_gbps; /* the plain 16-byte copy of this run: the HBM reference */
  double chain_us, independent_us; /* one small op behind a barrier, and without (measure_ops) */
  int results;
  uint64_t wrong_total;
  int errors, run;
  /* wall clock against GPU time for the cases of WALL_MIN_US and more (the public API's
   * user sees the wall clock): how many, how many within WALL_LIMIT, and the worst */
  int wall_cases, wall_within;
  double wall_worst;
  char wall_worst_name[48];
};

#define WALL_MIN_US 10.0 /* GPU time per op from which the wall clock must keep up */
#define WALL_LIMIT 1.05  /* wall clock per op / GPU time per op allowed there */

struct live_case {
  struct bench_case bc;
  vkrt_buffer *buf[CASE_MAX_SRC], *dst;
  vkrt_tensor t[CASE_MAX_SRC], td;
  /* FLASH_ATTN_EXT: q, k, v with ggml's dims 1 and 2 swapped (vkrt_op_attention's order),
   * kv_len (every query: n_kv) in its own buffer, and the scale */
  vkrt_tensor fa[4];
  vkrt_buffer *len;
  float scale;
};

static vkrt_tensor swap12(vkrt_tensor t) {
  int64_t ne = t.ne[1], nb = t.nb[1];
  t.ne[1] = t.ne[2], t.nb[1] = t.nb[2];
  t.ne[2] = ne, t.nb[2] = nb;
  return t;
}

static vkrt_tensor to_tensor(vkrt_buffer *b, const struct case_tensor *t) {
  vkrt_tensor v = {.buffer = b, .offset = 0, .type = t->type};
  for (int i = 0; i < 4; i++) {
    v.ne[i] = t->ne[i];
    v.nb[i] = t->nb[i];
  }
  return v;
}

static vkrt_status record_case(struct live_case *lc) {
  const struct bench_case *bc = &lc->bc;
  vkrt_rope_params rope = {.mode = (uint32_t)bc->params[2], .n_dims = (uint32_t)bc->params[1],
                           .freq_base = param_f32(bc, 5), .freq_scale = param_f32(bc, 6)};
  switch (bc->op) {
  case CASE_RMS_NORM:
    return vkrt_op_rms_norm(&lc->td, &lc->t[0], bc->nsrc == 2 ? &lc->t[1] : NULL, param_f32(bc, 0));
  case CASE_ROPE: return vkrt_op_rope(&lc->td, &lc->t[0], &lc->t[1], &rope);
  case CASE_GET_ROWS: return vkrt_op_get_rows(&lc->td, &lc->t[0], &lc->t[1]);
  case CASE_SET_ROWS: return vkrt_op_set_rows(&lc->td, &lc->t[0], &lc->t[1]);
  case CASE_ARGMAX: return vkrt_op_argmax(&lc->td, &lc->t[0]);
  case CASE_TRANSPOSE: return vkrt_op_transpose(&lc->td, &lc->t[0]);
  case CASE_CONCAT: return vkrt_op_concat(&lc->td, &lc->t[0], &lc->t[1], lc->bc.params[0]);
  case CASE_MUL_MAT: return vkrt_op_matmul(&lc->td, &lc->t[0], &lc->t[1]);
  case CASE_FLASH_ATTN_EXT:
    return vkrt_op_attention(&lc->td, &lc->fa[0], &lc->fa[1], &lc->fa[2], &lc->fa[3], lc->scale);
  default: return vkrt_op_copy(&lc->td, &lc->t[0]);
  }
}

struct batch {
  struct live_case *lc;
  int reps;
};

static vkrt_status record_batch(void *user) {
  struct batch *b = user;
  for (int r = 0; r < b->reps; r++) {
    vkrt_status s = record_case(b->lc);
    if (s != VKRT_OK)
      return s;
  }
  return VKRT_OK;
}

/* Seconds per op: `reps` ops back to back in one submission between two timestamps; *wall
 * and *record (may be NULL) get the wall clock per op of the whole call (recording, submit,
 * wait) and of the recording alone. */
static double time_batch(struct cases_ctx *c, struct live_case *lc, int reps, double *wall,
                         double *record) {
  struct batch b = {lc, reps};
  double t;
  if (bench_time_recorded(c->app, c->o.device, c->timer, true, record_batch, &b, &t) != VKRT_OK)
    return -1;
  if (wall)
    *wall = bench_last_wall_s / reps;
  if (record)
    *record = bench_last_record_s / reps;
  return t / reps;
}

/* Median seconds per op over o.iters batches sized to about target_ms each (GPU time where
 * the device has timestamps); wall_out / record_out (may be NULL): the medians of the wall
 * clock per op of the whole call and of the recording alone. */
static double time_case(struct cases_ctx *c, struct live_case *lc, int iters, int *reps_out,
                        double *wall_out, double *record_out) {
  double t1 = time_batch(c, lc, 1, NULL, NULL); /* warm-up and estimate */
  if (t1 <= 0)
    return -1;
  /* at most 100 ops per submission: the descriptor ring holds 256 sets per submit on
   * devices without push descriptors, and the concat fast path takes two */
  int reps = (int)fmin(100.0, fmax(1.0, c->o.target_ms * 1e-3 / t1));
  /* Back-to-back batches until the GPU has run this op for warmup_ms of wall time: the
   * H200 came out of the CPU-reference pauses at a third of its speed and took about a
   * second of work to ramp (run of 2026-12-02, variant sweep). */
  for (double w0 = bench_now_s(); bench_now_s() - w0 < c->o.warmup_ms * 1e-3;)
    if (time_batch(c, lc, reps, NULL, NULL) <= 0)
      return -1;
  double t[64], wall[64], record[64];
  int n = iters > 64 ? 64 : iters;
  for (int i = 0; i < n; i++)
    if ((t[i] = time_batch(c, lc, reps, &wall[i], &record[i])) <= 0)
      return -1;
  *reps_out = reps;
  if (wall_out)
    *wall_out = bench_median(wall, n);
  if (record_out)
    *record_out = bench_median(record, n);
  return bench_median(t, n);
}

static uint64_t bytes_moved(const struct bench_case *bc) {
  uint64_t b = 0;
  if (bc->op == CASE_GET_ROWS || bc->op == CASE_SET_ROWS) { /* only the rows picked move */
    const struct case_tensor *table = bc->op == CASE_GET_ROWS ? &bc->src[0] : &bc->dst;
    const struct case_tensor *rows = bc->op == CASE_GET_ROWS ? &bc->dst : &bc->src[0];
    uint64_t n = (uint64_t)rows->ne[1], per = (uint64_t)rows->ne[0];
    return n * per * 4 + n * 4 + n * per / vkrt_type_block(table->type) * vkrt_type_size(table->type);
  }
  for (int s = 0; s < bc->nsrc; s++) {
    if ((bc->op == CASE_CPY && s == 1) || (bc->op == CASE_FLASH_ATTN_EXT && s == 3))
      continue; /* the destination view; the mask, never read */
    uint64_t e = 1;
    for (int i = 0; i < 4; i++)
      e *= (uint64_t)bc->src[s].ne[i];
    b += e / vkrt_type_block(bc->src[s].type) * vkrt_type_size(bc->src[s].type);
  }
  uint64_t e = 1;
  for (int i = 0; i < 4; i++)
    e *= (uint64_t)bc->dst.ne[i];
  return b + e * vkrt_type_size(bc->dst.type);
}

/* Bytes of K and V an attention reads (the attended rows of each): what bounds it. */
static uint64_t kv_bytes(const struct bench_case *bc, int64_t attended) {
  uint64_t b = 0;
  for (int s = 1; s <= 2; s++)
    b += (uint64_t)(bc->src[s].ne[0] / vkrt_type_block(bc->src[s].type)) * (uint64_t)attended *
         bc->src[s].ne[2] * vkrt_type_size(bc->src[s].type);
  return b;
}

static const char *path_name(const struct bench_case *bc, const vkrt_lab_counters *before,
                             const vkrt_lab_counters *after) {
  if (after->attention > before->attention) {
    static char text[64];
    snprintf(text, sizeof(text), "attention %s, %" PRIu64 " splits%s",
             after->attention_rows > before->attention_rows ? "rows" : "tiles",
             after->attention_splits - before->attention_splits,
             after->attention_q8q > before->attention_q8q ? ", 8-bit q" : "");
    return text;
  }
  if (bc->op == CASE_ARGMAX)
    return after->argmax_split > before->argmax_split ? "argmax split + combine" : "argmax one pass";
  if (bc->op == CASE_RMS_NORM) return bc->nsrc == 2 ? "rms_norm (mul fused)" : "rms_norm";
  if (bc->op == CASE_ROPE) return bc->params[2] & 2 ? "rope neox" : "rope normal";
  if (bc->op == CASE_GET_ROWS) return "get_rows";
  if (bc->op == CASE_SET_ROWS) return "set_rows";
  if (after->matmul_fallback > before->matmul_fallback) return "matvec (tiled not possible)";
  if (after->matmul_tiled > before->matmul_tiled) {
    static char text[64];
    snprintf(text, sizeof(text), "tiled matmul%s%s%s%s",
             after->matmul_coopmat > before->matmul_coopmat ? ", coopmat" : "",
             after->matmul_x16 > before->matmul_x16 ? ", x16" : "",
             after->matmul_w16 > before->matmul_w16
                 ? after->matmul_w16_pieces > before->matmul_w16_pieces ? ", w16 in pieces" : ", w16"
                 : "",
             after->matmul_split_k > before->matmul_split_k ? ", split K" : "");
    return text;
  }
  if (after->quant_matvec > before->quant_matvec) {
    bool q8x = after->quant_read[VKRT_LAB_QUANT_READ_Q8X] > before->quant_read[VKRT_LAB_QUANT_READ_Q8X];
    if (bc->src[0].type == VKRT_TYPE_Q6_K)
      return q8x ? "matvec q6_K, 8-bit x" : "matvec q6_K";
    if (bc->src[0].type == VKRT_TYPE_Q4_K)
      return q8x ? "matvec q4_K, 8-bit x" : "matvec q4_K";
    return q8x ? "matvec q8_0, 8-bit x" : "matvec q8_0";
  }
  if (after->matvec > before->matvec) return "matvec";
  if (after->concat_fast > before->concat_fast) return "concat fast path";
  if (after->concat_split > before->concat_split) return "concat per-source copies";
  if (after->copy_tiled > before->copy_tiled) return "copy via tiled transpose";
  if (after->concat_generic > before->concat_generic) return "concat generic";
  if (after->transpose_x2 > before->transpose_x2) return "tiled transpose (pairs)";
  if (after->copy_u4 > before->copy_u4) return "copy rows (16-byte)";
  if (bc->op == CASE_TRANSPOSE) return "tiled transpose";
  return "copy";
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  }
  putchar('"');
}

static void report_error(struct cases_ctx *c, int line, const char *name, const char *msg) {
  c->errors++;
  if (c->o.json) {
    printf("%s{\"line\": %d, \"name\": ", c->results++ ? ", " : "", line);
    json_str(name ? name : "");
    printf(", \"error\": ");
    json_str(msg);
    printf("}");
  } else {
    printf("line %d: %s%serror: %s\n", line, name ? name : "", name ? ": " : "", msg);
  }
  fflush(stdout);
}

/* --tiles: the same tiled case with each tile of the kernel it took (portable or cooperative
 * matrix), set for every M class so the case's M picks it, each verified and timed. */
static void sweep_tiles(struct cases_ctx *c, struct live_case *lc, bool cm, uint8_t *got,
                        uint64_t dsize, const float *ref, const float *tol, const float *mag,
                        uint64_t bytes) {
  /* {wg, bm, bn, rm, bk, stages}: the defaults and their neighbours (runtime/ops/matmul_plan.c) */
  static const vkrt_lab_matmul_tile portable[] = {
      {256, 128, 128, 8, 32, 1}, {256, 128, 64, 8, 32, 1}, {256, 64, 64, 4, 32, 2},
      {128, 64, 64, 4, 32, 2},   {64, 32, 16, 2, 32, 1},   {64, 32, 16, 2, 64, 1},
      {64, 32, 16, 2, 128, 1},   {64, 32, 16, 2, 64, 2},   {128, 32, 32, 2, 32, 1},
      {128, 32, 32, 2, 64, 1},   {128, 64, 32, 4, 32, 1},  {128, 64, 32, 4, 64, 1}};
  static const vkrt_lab_matmul_tile coop[] = {
      {512, 256, 128, 4, 32, 1}, {512, 256, 128, 2, 32, 1}, {128, 128, 128, 2, 32, 1},
      {128, 128, 128, 2, 64, 1}, {128, 128, 128, 2, 32, 2}, {256, 128, 128, 2, 32, 2},
      {256, 256, 128, 2, 32, 1}, {128, 128, 64, 2, 32, 2}, {128, 64, 128, 2, 32, 2},
      {64, 32, 16, 1, 64, 1}, {64, 32, 16, 1, 128, 1}, {256, 128, 128, 4, 64, 1},
      {32, 16, 16, 1, 128, 1}, {256, 128, 32, 2, 128, 1}, {256, 128, 32, 2, 64, 1},
      {128, 64, 32, 2, 64, 1}, {128, 64, 32, 2, 128, 1}, {64, 32, 32, 2, 128, 1},
      {256, 128, 256, 4, 32, 1}, {256, 256, 128, 4, 32, 1}, {256, 128, 128, 4, 32, 1},
      {256, 256, 64, 1, 32, 1}, {256, 128, 256, 2, 32, 1}};
  const vkrt_lab_matmul_tile *list = cm ? coop : portable;
  size_t n = cm ? sizeof(coop) / sizeof(coop[0]) : sizeof(portable) / sizeof(portable[0]);
  vkrt_lab_tile_slot first = cm ? VKRT_LAB_TILE_COOPMAT_SMALL : VKRT_LAB_TILE_PORTABLE_SMALL;
  enum { SIZES = VKRT_LAB_TILE_COOPMAT_SMALL };
  vkrt_lab_matmul_tile keep[SIZES];
  for (int i = 0; i < SIZES; i++)
    vkrt_lab_matmul_tile_get(c->app, c->o.device, first + i, &keep[i]);
  double keep_warmup = c->o.warmup_ms;
  c->o.warmup_ms = fmin(keep_warmup, 30);
  if (c->o.json)
    printf(", \"tiles\": [");
  int nt = 0;
  /* per tile: the kernel; on cooperative matrices also with x rounded as the tiles load it
   * (not by a copy first); tiles within 1.3 x the best so far also in strips of 1 and 4 row
   * tiles and, with --parts, without their multiply and without their loads */
  enum { KINDS = 6 };
  int64_t x16 = 0;
  vkrt_lab_get(c->app, c->o.device, VKRT_LAB_MATMUL_X16, &x16);
  double best = 0;
  for (size_t i = 0; i < n; i++) {
    double plain = 0; /* this tile's time (kind 0) */
    for (int kind = 0; kind < KINDS; kind++) {
      vkrt_lab_matmul_tile tp = list[i];
      tp.parts = kind == 1 || kind == 2 ? (uint32_t)kind : 0;
      tp.order = kind == 4 ? 1 : kind == 5 ? 4 : 0;
      bool near_best = plain > 0 && plain <= 1.3 * best;
      if ((tp.parts && (!c->o.parts || !near_best)) || (kind == 3 && (!cm || !x16)) ||
          (kind >= 4 && !near_best))
        continue;
      vkrt_lab_set(c->app, c->o.device, VKRT_LAB_MATMUL_X16, kind == 3 ? 0 : x16);
      const vkrt_lab_matmul_tile *t = &tp;
      uint64_t vw = UINT64_MAX;
      double vt = -1, ve = 0;
      int vreps = 0;
      bool taken = true;
      for (int j = 0; j < SIZES; j++)
        taken = taken && vkrt_lab_matmul_tile_set(c->app, c->o.device, first + j, t) == VKRT_OK;
      if (!taken)
        continue; /* not a tile this device takes (shared memory, invocations) */
      if (vkrt_cmd_fill(lc->dst, 0, bench_align_down(dsize, 4), 0xffffffffu) == VKRT_OK &&
          record_case(lc) == VKRT_OK && vkrt_finish(c->app, c->o.device) == VKRT_OK &&
          vkrt_download(got, lc->dst, 0, dsize) == VKRT_OK) {
        vw = count_wrong(&lc->bc.dst, got, ref, tol, cm ? mag : NULL, &ve);
        vt = time_case(c, lc, (c->o.iters + 1) / 2, &vreps, NULL, NULL);
      }
      if (!t->parts) /* the parts' results are wrong by design */
        c->wrong_total += vw == UINT64_MAX ? 1 : vw;
      if (kind == 0) {
        plain = vt;
        best = vt > 0 && (best == 0 || vt < best) ? vt : best;
      }
      static const char *const part_names[KINDS] = {"", " no multiply", " no loads", " x f32",
                                                    " strips of 1", " strips of 4"};
      double vg = vt > 0 ? (double)bytes / vt * 1e-9 : 0;
      if (c->o.json)
        printf("%s{\"wg\": %u, \"bm\": %u, \"bn\": %u, \"rm\": %u, \"bk\": %u, \"stages\": %u, "
               "\"parts\": %u, \"order\": %u, \"x_f32\": %s, \"us\": %.3f, \"wrong\": %" PRId64
               "}", nt++ ? ", " : "", t->wg, t->bm, t->bn, t->rm, t->bk, t->stages, t->parts, t->order,
               kind == 3 || !x16 ? "true" : "false", vt * 1e6,
               vw == UINT64_MAX ? -1 : (int64_t)vw);
      else
        printf("    %s tile %3ux%-3u wg %3u rm %u bk %3u st %u %10.2f us %9.1f GB/s %6.3f x %9" PRId64
               "%s\n", cm ? "coopmat" : "portable", t->bm, t->bn, t->wg, t->rm, t->bk, t->stages,
               vt * 1e6, vg, c->copy_gbps > 0 ? vg / c->copy_gbps : 0,
               vw == UINT64_MAX ? -1 : (int64_t)vw, part_names[kind]);
    }
  }
  vkrt_lab_set(c->app, c->o.device, VKRT_LAB_MATMUL_X16, x16);
  for (int i = 0; i < SIZES; i++)
    vkrt_lab_matmul_tile_set(c->app, c->o.device, first + i, &keep[i]);
  c->o.warmup_ms = keep_warmup;
  if (c->o.json)
    printf("]");
}

/* Uploads, verifies and times one parsed case. */
static void run_case(struct cases_ctx *c, const struct bench_case *bc) {
  struct live_case lc = {.bc = *bc};
  /* FLASH_ATTN_EXT: the cached rows every query attends */
  const int64_t n_kv = bc->op == CASE_FLASH_ATTN_EXT ? bc->src[1].ne[1] : 0;
  const int64_t attended = c->o.kv_len > 0 && c->o.kv_len < n_kv ? c->o.kv_len : n_kv;
  uint8_t *host[CASE_MAX_SRC] = {0}, *got = NULL;
  float *ref = NULL, *tol = NULL, *mag = NULL;
  char msg[1024 + 64]; /* a vkrt_last_error message (at most 1024 bytes) and context */
  uint64_t out_elems = 1;
  for (int i = 0; i < 4; i++)
    out_elems *= (uint64_t)bc->dst.ne[i];
  /* buffers: each view's extent, padded to 16 bytes plus 16 (f16 and block weights are
   * read in 4-byte words) */
  for (int s = 0; s < bc->nsrc; s++) {
    if (bc->op == CASE_CPY && s == 1)
      continue;
    uint64_t size = bench_align_up(bc->src[s].extent, 16) + 16;
    host[s] = malloc(size);
    if (!host[s] || vkrt_buffer_create(c->app, c->o.device, size, VKRT_BUFFER_DEVICE_LOCAL, &lc.buf[s]) != VKRT_OK) {
      snprintf(msg, sizeof(msg), "allocating src%d (%llu bytes): %s", s, (unsigned long long)size,
               host[s] ? vkrt_last_error(c->app) : "out of host memory");
      goto fail;
    }
    memset(host[s] + bc->src[s].extent, 0, size - bc->src[s].extent);
    fill_random(host[s], bc->src[s].type, bc->src[s].extent);
    if (s == 1)
      fill_indices(bc, host);
    if (vkrt_upload(lc.buf[s], 0, host[s], size) != VKRT_OK) {
      snprintf(msg, sizeof(msg), "upload: %s", vkrt_last_error(c->app));
      goto fail;
    }
    lc.t[s] = to_tensor(lc.buf[s], &bc->src[s]);
  }
  uint64_t dsize = bench_align_up(bc->dst.extent, 16) + 16;
  got = malloc(dsize);
  ref = malloc(out_elems * sizeof(float));
  tol = malloc(out_elems * sizeof(float));
  mag = calloc(out_elems, sizeof(float));
  if (!got || !ref || !tol || !mag ||
      vkrt_buffer_create(c->app, c->o.device, dsize, VKRT_BUFFER_DEVICE_LOCAL, &lc.dst) != VKRT_OK) {
    snprintf(msg, sizeof(msg), "allocating the result (%llu bytes): %s", (unsigned long long)dsize,
             got && ref && tol && mag ? vkrt_last_error(c->app) : "out of host memory");
    goto fail;
  }
  lc.td = to_tensor(lc.dst, &bc->dst);
  if (bc->op == CASE_FLASH_ATTN_EXT) {
    int64_t nq = bc->src[0].ne[1];
    int32_t *lens = malloc((size_t)nq * 4);
    for (int64_t j = 0; lens && j < nq; j++)
      lens[j] = (int32_t)attended;
    if (!lens || vkrt_buffer_create(c->app, c->o.device, (uint64_t)nq * 4, VKRT_BUFFER_DEVICE_LOCAL,
                                    &lc.len) != VKRT_OK ||
        vkrt_upload(lc.len, 0, lens, (uint64_t)nq * 4) != VKRT_OK) {
      free(lens);
      snprintf(msg, sizeof(msg), "kv_len: %s", lens ? vkrt_last_error(c->app) : "out of host memory");
      goto fail;
    }
    free(lens);
    for (int s = 0; s < 3; s++)
      lc.fa[s] = swap12(lc.t[s]);
    lc.fa[3] = vkrt_tensor_contiguous(lc.len, 0, VKRT_TYPE_I32, nq, 1, 1, 1);
    lc.scale = param_f32(bc, 0);
  }
  if (!reference(bc, host, ref, tol, mag, c->o.q8, attended)) {
    snprintf(msg, sizeof(msg), "the CPU reference: out of host memory");
    goto fail;
  }

  /* verify: poison (NaN in f32 and f16), one op, download, compare */
  vkrt_lab_counters before, after;
  vkrt_lab_counters_get(c->app, c->o.device, &before);
  vkrt_status s = vkrt_cmd_fill(lc.dst, 0, bench_align_down(dsize, 4), 0xffffffffu);
  if (s == VKRT_OK)
    s = record_case(&lc);
  if (s == VKRT_OK)
    s = vkrt_finish(c->app, c->o.device);
  if (s == VKRT_OK)
    s = vkrt_download(got, lc.dst, 0, dsize);
  if (s != VKRT_OK) {
    snprintf(msg, sizeof(msg), "%s: %s", vkrt_status_str(s), vkrt_last_error(c->app));
    goto fail;
  }
  vkrt_lab_counters_get(c->app, c->o.device, &after);
  const char *path = path_name(bc, &before, &after);
  double max_err;
  bool f16_x = strstr(path, "coopmat") != NULL; /* x and w rounded to f16 */
  uint64_t wrong = count_wrong(&bc->dst, got, ref, tol, f16_x ? mag : NULL, &max_err);
  c->wrong_total += wrong;
  c->run++;

  int reps = 0;
  double wall = 0, rec = 0;
  double t = time_case(c, &lc, c->o.iters, &reps, &wall, &rec);
  uint64_t bytes = bytes_moved(bc);
  double gbps = t > 0 ? (double)bytes / t * 1e-9 : 0;
  double ratio = c->copy_gbps > 0 ? gbps / c->copy_gbps : 0;
  /* attention: the time over the K/V-read roofline (bytes of K and V at the copy rate) */
  bool fa = bc->op == CASE_FLASH_ATTN_EXT;
  double roof_us =
      fa && c->copy_gbps > 0 ? (double)kv_bytes(bc, attended) / (c->copy_gbps * 1e3) : 0;
  double roof_ratio = roof_us > 0 && t > 0 ? t * 1e6 / roof_us : 0;
  double wall_ratio = t > 0 ? wall / t : 0;
  bool wall_checked = c->timer && t * 1e6 >= WALL_MIN_US; /* GPU time to compare with */
  if (wall_checked) {
    c->wall_cases++;
    c->wall_within += wall_ratio <= WALL_LIMIT;
    if (wall_ratio > c->wall_worst) {
      c->wall_worst = wall_ratio;
      snprintf(c->wall_worst_name, sizeof(c->wall_worst_name), "%.47s", bc->name);
    }
  }
  /* '!': wall clock past WALL_LIMIT x the GPU time on an op of WALL_MIN_US or more */
  const char *wall_flag = wall_checked && wall_ratio > WALL_LIMIT ? "!" : " ";
  if (c->o.json) {
    printf("%s{\"line\": %d, \"name\": ", c->results++ ? ", " : "", bc->line);
    json_str(bc->name);
    printf(", \"op\": \"%s\", \"path\": \"%s\", \"bytes\": %" PRIu64 ", \"us\": %.3f, "
           "\"gbps\": %.2f, \"ratio_to_copy\": %.4f, \"reps\": %d, \"checked\": %" PRIu64
           ", \"wrong\": %" PRIu64 ", \"max_abs_err\": %.3g, \"wall_us\": %.3f, "
           "\"record_us\": %.3f, \"wall_over_time\": %.4f, \"wall_checked\": %s",
           case_ops[bc->op].name, path, bytes, t * 1e6, gbps, ratio, reps, out_elems, wrong, max_err,
           wall * 1e6, rec * 1e6, wall_ratio, wall_checked ? "true" : "false");
    if (fa)
      printf(", \"kv_len\": %" PRId64 ", \"kv_bytes\": %" PRIu64 ", \"kv_roofline_us\": %.3f, "
             "\"kv_roofline_ratio\": %.3f", attended, kv_bytes(bc, attended), roof_us, roof_ratio);
  } else if (fa) {
    printf("%-40.40s %-40.40s %10.2f us %9.1f GB/s %6.3f R %9" PRIu64
           "   wall %8.2f us (%5.3f x)%s record %6.2f us\n", bc->name, path, t * 1e6, gbps,
           roof_ratio, wrong, wall * 1e6, wall_ratio, wall_flag, rec * 1e6);
  } else {
    printf("%-40.40s %-40.40s %10.2f us %9.1f GB/s %6.3f x %9" PRIu64
           "   wall %8.2f us (%5.3f x)%s record %6.2f us\n", bc->name, path, t * 1e6, gbps, ratio,
           wrong, wall * 1e6, wall_ratio, wall_flag, rec * 1e6);
  }

  if (c->o.tiles && bc->op == CASE_MUL_MAT && !strncmp(path, "tiled matmul", 12))
    sweep_tiles(c, &lc, f16_x, got, dsize, ref, tol, mag, bytes);

  /* matrix-vector variants: the same case with every configuration, each verified */
  if (c->o.variants && bc->op == CASE_MUL_MAT && !strcmp(path, "matvec")) {
    vkrt_lab_matvec keep;
    vkrt_lab_matvec_get(c->app, c->o.device, bc->src[0].type, &keep);
    static const uint32_t wgs[] = {64, 128, 256, 512}, rows[] = {1, 2, 4, 8},
                          unrolls[] = {1, 2, 4}, blocks[] = {1, 4};
    double keep_warmup = c->o.warmup_ms;
    c->o.warmup_ms = fmin(keep_warmup, 30); /* the sweep keeps the GPU busy */
    int nv = 0;
    if (c->o.json)
      printf(", \"variants\": [");
    for (size_t a = 0; a < 4; a++)
      for (size_t r = 0; r < 4; r++)
        for (size_t u = 0; u < 3; u++)
          for (size_t b = 0; b < 2; b++) {
            vkrt_lab_matvec cfg = {wgs[a], rows[r], unrolls[u], blocks[b]};
            if (b && !(cfg.unroll == 2 && cfg.rows == 2)) /* grid size: one shape only */
              continue;
            /* registers (wg 64 is back: run 1 timed it at idle clocks); 8 rows only with
             * several columns, where each x load then serves more rows */
            if (cfg.rows * cfg.unroll > 8 || (cfg.rows == 8 && bc->src[1].ne[1] == 1))
              continue;
            if (cfg.wg > c->td.max_compute_work_group_invocations)
              continue;
            uint64_t vw = UINT64_MAX;
            double vt = -1, ve = 0;
            int vreps = 0;
            if (vkrt_lab_matvec_set(c->app, c->o.device, bc->src[0].type, &cfg) == VKRT_OK &&
                vkrt_cmd_fill(lc.dst, 0, bench_align_down(dsize, 4), 0xffffffffu) == VKRT_OK &&
                record_case(&lc) == VKRT_OK && vkrt_finish(c->app, c->o.device) == VKRT_OK &&
                vkrt_download(got, lc.dst, 0, dsize) == VKRT_OK) {
              vw = count_wrong(&bc->dst, got, ref, tol, NULL, &ve);
              vt = time_case(c, &lc, (c->o.iters + 1) / 2, &vreps, NULL, NULL);
            }
            c->wrong_total += vw == UINT64_MAX ? 1 : vw;
            double vg = vt > 0 ? (double)bytes / vt * 1e-9 : 0;
            if (c->o.json)
              printf("%s{\"wg\": %u, \"rows\": %u, \"unroll\": %u, \"blocks\": %u, \"us\": %.3f, "
                     "\"gbps\": %.2f, \"wrong\": %" PRId64 "}", nv++ ? ", " : "", cfg.wg, cfg.rows,
                     cfg.unroll, cfg.blocks, vt * 1e6, vg, vw == UINT64_MAX ? -1 : (int64_t)vw);
            else
              printf("    variant wg %3u rows %u unroll %u blocks %u %10.2f us %9.1f GB/s %6.3f x %9" PRId64 "\n",
                     cfg.wg, cfg.rows, cfg.unroll, cfg.blocks, vt * 1e6, vg,
                     c->copy_gbps > 0 ? vg / c->copy_gbps : 0, vw == UINT64_MAX ? -1 : (int64_t)vw);
          }
    vkrt_lab_matvec_set(c->app, c->o.device, bc->src[0].type, &keep);
    c->o.warmup_ms = keep_warmup;
    if (c->o.json)
      printf("]");
  }
  /* quantized matrix-vector variants (x in f32: q8x, which rounds x, is left to `vkrt-bench
   * quant`), each forced through the lab and verified; with M > 1 each runs its variant's
   * several-column kernel (runtime/ops/quant.c says which). q6_K: the variants with a Q6_K
   * form (one column). */
  bool q6 = bc->src[0].type == VKRT_TYPE_Q6_K;
  if (c->o.variants && bc->op == CASE_MUL_MAT && !strncmp(path, "matvec q", 8) && !c->o.q8 &&
      (!q6 || bc->src[1].ne[1] == 1)) {
    int nq = vkrt_lab_variant_count(VKRT_LAB_QUANT_VARIANT), nv = 0;
    double keep_warmup = c->o.warmup_ms;
    c->o.warmup_ms = fmin(keep_warmup, 30);
    if (c->o.json)
      printf(", \"quant_variants\": [");
    for (int v = 1; v < nq; v++) {
      if (!(q6 ? vkrt_lab_quant_q6_k_variant_usable(c->app, c->o.device, v)
               : vkrt_lab_variant_usable(c->app, c->o.device, VKRT_LAB_QUANT_VARIANT, v)) ||
          vkrt_lab_set(c->app, c->o.device, VKRT_LAB_QUANT_VARIANT, v) != VKRT_OK)
        continue;
      uint64_t vw = UINT64_MAX;
      double vt = -1, ve = 0;
      int vreps = 0;
      if (vkrt_cmd_fill(lc.dst, 0, bench_align_down(dsize, 4), 0xffffffffu) == VKRT_OK &&
          record_case(&lc) == VKRT_OK && vkrt_finish(c->app, c->o.device) == VKRT_OK &&
          vkrt_download(got, lc.dst, 0, dsize) == VKRT_OK) {
        vw = count_wrong(&bc->dst, got, ref, tol, NULL, &ve);
        vt = time_case(c, &lc, (c->o.iters + 1) / 2, &vreps, NULL, NULL);
      }
      vkrt_lab_set(c->app, c->o.device, VKRT_LAB_QUANT_VARIANT, 0);
      c->wrong_total += vw == UINT64_MAX ? 1 : vw;
      double vg = vt > 0 ? (double)bytes / vt * 1e-9 : 0;
      const char *name = vkrt_lab_variant_name(VKRT_LAB_QUANT_VARIANT, v);
      if (c->o.json)
        printf("%s{\"variant\": \"%s\", \"us\": %.3f, \"gbps\": %.2f, \"wrong\": %" PRId64 "}",
               nv++ ? ", " : "", name, vt * 1e6, vg, vw == UINT64_MAX ? -1 : (int64_t)vw);
      else
        printf("    variant %-16s %10.2f us %9.1f GB/s %6.3f x %9" PRId64 "\n", name, vt * 1e6, vg,
               c->copy_gbps > 0 ? vg / c->copy_gbps : 0, vw == UINT64_MAX ? -1 : (int64_t)vw);
    }
    c->o.warmup_ms = keep_warmup;
    if (c->o.json)
      printf("]");
  }
  /* attention variants: split counts around the plan's and row passes per tile, each
   * verified (the planner's inputs for tuning it per device) */
  if (c->o.variants && fa) {
    vkrt_lab_attention plan;
    const struct case_tensor *q = &bc->src[0], *k = &bc->src[1];
    int nv = 0;
    if (c->o.json)
      printf(", \"variants\": [");
    if (vkrt_lab_attention_plan(c->app, c->o.device, (uint32_t)q->ne[0], (uint32_t)q->ne[2],
                                (uint32_t)k->ne[2], (uint32_t)q->ne[1], (uint32_t)k->ne[1],
                                &plan) == VKRT_OK) {
      double keep_warmup = c->o.warmup_ms;
      c->o.warmup_ms = fmin(keep_warmup, 30);
      static const double factors[] = {0.25, 0.5, 1, 2, 4};
      /* tiles: row passes 2, 4, 8; rows (a row per invocation): no passes to pick */
      static const uint32_t unrolls[] = {2, 4, 8, 0};
      for (size_t f = 0; f < sizeof(factors) / sizeof(factors[0]); f++)
        for (size_t u = 0; u < sizeof(unrolls) / sizeof(unrolls[0]); u++) {
          bool rows = unrolls[u] == 0;
          uint32_t splits = (uint32_t)fmax(1, plan.splits * factors[f]);
          uint64_t vw = UINT64_MAX;
          double vt = -1, ve = 0;
          int vreps = 0;
          vkrt_lab_counters v0, v1;
          vkrt_lab_counters_get(c->app, c->o.device, &v0);
          vkrt_lab_attention vp;
          vkrt_lab_set(c->app, c->o.device, VKRT_LAB_ATTENTION_SPLITS, splits);
          vkrt_lab_set(c->app, c->o.device, VKRT_LAB_ATTENTION_UNROLL, unrolls[u]);
          vkrt_lab_set(c->app, c->o.device, VKRT_LAB_ATTENTION_KERNEL, rows ? 2 : 1);
          if (vkrt_lab_attention_plan(c->app, c->o.device, (uint32_t)q->ne[0],
                                      (uint32_t)q->ne[2], (uint32_t)k->ne[2],
                                      (uint32_t)q->ne[1], (uint32_t)k->ne[1], &vp) != VKRT_OK) {
            if (!c->o.json) /* not a variant this device can run (its shared memory) */
              printf("    variant splits %5u unroll %u: not on this device: %s\n", splits,
                     unrolls[u], vkrt_last_error(c->app));
            continue;
          }
          if (rows && !vp.rows) /* the device cannot run the row kernel: tiles again */
            continue;
          if (vkrt_cmd_fill(lc.dst, 0, bench_align_down(dsize, 4), 0xffffffffu) == VKRT_OK &&
              record_case(&lc) == VKRT_OK && vkrt_finish(c->app, c->o.device) == VKRT_OK &&
              vkrt_download(got, lc.dst, 0, dsize) == VKRT_OK) {
            vkrt_lab_counters_get(c->app, c->o.device, &v1);
            splits = (uint32_t)(v1.attention_splits - v0.attention_splits); /* as planned */
            vw = count_wrong(&bc->dst, got, ref, tol, NULL, &ve);
            vt = time_case(c, &lc, (c->o.iters + 1) / 2, &vreps, NULL, NULL);
          } else {
            vkrt_finish(c->app, c->o.device);
          }
          c->wrong_total += vw == UINT64_MAX ? 1 : vw;
          double vr = roof_us > 0 && vt > 0 ? vt * 1e6 / roof_us : 0;
          if (c->o.json)
            printf("%s{\"kernel\": \"%s\", \"splits\": %u, \"unroll\": %u, \"us\": %.3f, "
                   "\"kv_roofline_ratio\": %.3f, \"wrong\": %" PRId64 "}", nv++ ? ", " : "",
                   rows ? "rows" : "tiles", splits, unrolls[u], vt * 1e6, vr,
                   vw == UINT64_MAX ? -1 : (int64_t)vw);
          else if (rows)
            printf("    variant splits %5u rows     %10.2f us %6.3f R %9" PRId64 "%s\n", splits,
                   vt * 1e6, vr, vw == UINT64_MAX ? -1 : (int64_t)vw,
                   vw == UINT64_MAX ? vkrt_last_error(c->app) : "");
          else
            printf("    variant splits %5u unroll %u %10.2f us %6.3f R %9" PRId64 "%s\n", splits,
                   unrolls[u], vt * 1e6, vr, vw == UINT64_MAX ? -1 : (int64_t)vw,
                   vw == UINT64_MAX ? vkrt_last_error(c->app) : "");
        }
      vkrt_lab_set(c->app, c->o.device, VKRT_LAB_ATTENTION_SPLITS, 0);
      vkrt_lab_set(c->app, c->o.device, VKRT_LAB_ATTENTION_UNROLL, 0);
      vkrt_lab_set(c->app, c->o.device, VKRT_LAB_ATTENTION_KERNEL, 0);
      c->o.warmup_ms = keep_warmup;
    }
    if (c->o.json)
      printf("]");
  }
  if (c->o.json)
    printf("}");
  fflush(stdout);
  goto done;
fail:
  report_error(c, bc->line, bc->name, msg);
  vkrt_finish(c->app, c->o.device);
done:
  for (int i = 0; i < CASE_MAX_SRC; i++) {
    vkrt_buffer_destroy(lc.buf[i]);
    free(host[i]);
  }
  vkrt_buffer_destroy(lc.dst);
  vkrt_buffer_destroy(lc.len);
  free(got);
  free(ref);
  free(tol);
  free(mag);
}

/* The HBM reference of this run: the plain 16-byte compute copy (copy_vec4) over a buffer
 * larger than any cache, read + written bytes. */
struct plain_copy {
  vkrt_buffer *dst, *src;
  uint64_t size;
};

static vkrt_status record_plain_copy(void *user) {
  struct plain_copy *p = user;
  return vkrt_lab_cmd_copy_bytes(p->dst, 0, p->src, 0, p->size, VKRT_LAB_COPY_COMPUTE);
}

/* The cost of one op apart from what it moves: FLOOR_OPS 16-byte copies in one submission,
 * each writing the bytes the one before wrote (so each waits behind a barrier, as a chain of
 * dependent ops does), and the same into separate slots (independent: no barrier between
 * them). */
enum { FLOOR_OPS = 100 };
struct op_floor {
  vkrt_buffer *dst, *src;
  bool independent;
};

/* Median seconds of up to 16 timed runs of `record` after one untimed; -1 if one failed. */
static double median_recorded(struct cases_ctx *c, vkrt_status (*record)(void *user), void *user) {
  double t[16];
  int n = c->o.iters > 16 ? 16 : c->o.iters;
  for (int i = -1; i < n; i++) {
    double s;
    if (bench_time_recorded(c->app, c->o.device, c->timer, false, record, user, &s) != VKRT_OK)
      return -1;
    if (i >= 0)
      t[i] = s;
  }
  return bench_median(t, n);
}

static vkrt_status record_floor(void *user) {
  struct op_floor *f = user;
  for (uint64_t i = 0; i < FLOOR_OPS; i++) {
    vkrt_status s = vkrt_cmd_copy_buffer(f->dst, f->independent ? 16 * i : 0, f->src, 0, 16);
    if (s != VKRT_OK)
      return s;
  }
  return VKRT_OK;
}

static void measure_ops(struct cases_ctx *c) {
  vkrt_buffer *a = NULL, *b = NULL;
  if (vkrt_buffer_create(c->app, c->o.device, 16, VKRT_BUFFER_DEVICE_LOCAL, &a) == VKRT_OK &&
      vkrt_buffer_create(c->app, c->o.device, 16 * FLOOR_OPS, VKRT_BUFFER_DEVICE_LOCAL, &b) == VKRT_OK &&
      vkrt_cmd_fill(a, 0, 16, 0x3c003c00u) == VKRT_OK && vkrt_finish(c->app, c->o.device) == VKRT_OK)
    for (int independent = 0; independent < 2; independent++) {
      struct op_floor f = {b, a, independent};
      double m = median_recorded(c, record_floor, &f);
      *(independent ? &c->independent_us : &c->chain_us) = m > 0 ? m * 1e6 / FLOOR_OPS : 0;
    }
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
}

static void measure_copy(struct cases_ctx *c) {
  uint64_t size = c->td.is_cpu ? 16ull << 20 : 1ull << 30;
  vkrt_buffer *a = NULL, *b = NULL;
  if (vkrt_buffer_create(c->app, c->o.device, size, VKRT_BUFFER_DEVICE_LOCAL, &a) != VKRT_OK ||
      vkrt_buffer_create(c->app, c->o.device, size, VKRT_BUFFER_DEVICE_LOCAL, &b) != VKRT_OK) {
    vkrt_buffer_destroy(a);
    return;
  }
  vkrt_cmd_fill(a, 0, size, 0x3c003c00u);
  vkrt_finish(c->app, c->o.device);
  struct plain_copy pc = {b, a, size};
  double m = median_recorded(c, record_plain_copy, &pc);
  if (m > 0)
    c->copy_gbps = 2.0 * (double)size / m * 1e-9;
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
}

static void usage(void) {
  printf("usage: vkrt-bench cases --test-file FILE [--json] [--iters N] [--device D] [--variants]\n"
         "                        [--target-ms MS] [--warmup-ms MS] [--tiled-copies on|off]\n"
         "                        [--activations f32|q8|f16|q8,f16] [--q8-columns N]\n"
         "                        [--tiles] [--min-m M]\n"
         "                        [--coopmat on|off] [--parts] [--kv-len N] [--lab NAME=VALUE]...\n"
         "  ggml test-backend-ops --test-file lines (DUP, CONT, CPY, TRANSPOSE, CONCAT, MUL_MAT,\n"
         "  FLASH_ATTN_EXT; f32, f16, q8_0/q4_K/q6_K as MUL_MAT weights, q8_0 as FLASH_ATTN_EXT's\n"
         "  K and V; the decode ops RMS_NORM (+ MUL fused), ROPE, GET_ROWS, SET_ROWS, ARGMAX), each\n"
         "  verified against a CPU reference\n"
         "  (#wrong) and timed as back-to-back ops in one submission (GPU timestamps). --variants\n"
         "  also runs every matrix-vector configuration on the f32/f16 MUL_MAT cases, every quantized\n"
         "  matrix-vector variant but q8x on the q8_0/q4_K ones (M > 1: the variant's\n"
         "  several-column kernel), and split\n"
         "  counts (a quarter to 4 x the plan's) and row passes per tile (2, 4, 8) on the\n"
         "  FLASH_ATTN_EXT cases. The ratio\n"
         "  column divides by the plain 16-byte copy of this run (x); for FLASH_ATTN_EXT it is\n"
         "  the time over the K/V-read roofline (R: bytes of K and V at the copy rate).\n"
         "  wall: the wall clock per op of recording + submit + wait, beside its ratio to the\n"
         "  GPU time; '!' marks a case of 10 us and more whose wall clock exceeds 1.05 x its GPU\n"
         "  time, and the last line counts them (the public API's user waits for the wall clock).\n"
         "  --tiled-copies overrides the device's choice for transposed-view copies and concat.\n"
         "  --activations q8 opens with VKRT_ACTIVATIONS_Q8 (quantized weights, one column: x\n"
         "  rounded to 8 bits; the check allows that rounding; --q8-columns N: small batches\n"
         "  up to N columns too, vkrt_options.quant_activations_columns); f16 opens with\n"
         "  VKRT_MATMUL_ACTIVATIONS_F16 (the tiled matmul on cooperative matrices where the device\n"
         "  has them: x and w rounded to f16, which the check allows on lines that took them).\n"
         "  --tiles sweeps the tiled matmul's tiles on every MUL_MAT case that takes it;\n"
         "  --parts (implies --tiles) also times the tiles near the best without their multiply and\n"
         "  without their loads after the first k step (wrong results, not counted);\n"
         "  --min-m sets the crossover (M from which the tiled kernel runs, for every type);\n"
         "  --coopmat on|off overrides whether the cooperative-matrix tiles run (where the device\n"
         "  has them).\n"
         "  --kv-len N: FLASH_ATTN_EXT queries attend the first N cached rows (the line's n_kv stays\n"
         "  the cache's capacity, which the split plan sees), a short context in a large cache.\n"
         "  --lab NAME=VALUE sets a lab knob (vkrt/vkrt_lab.h, the name without VKRT_LAB_, e.g.\n"
         "  barrier_stages=1) on the device before the cases run; up to 8.\n");
}

static int cmd_cases(int argc, char **argv) {
  static const struct option longs[] = {
      {"test-file", required_argument, 0, 'f'}, {"json", no_argument, 0, 'j'},
      {"iters", required_argument, 0, 'i'},     {"device", required_argument, 0, 'd'},
      {"variants", no_argument, 0, 'v'},        {"target-ms", required_argument, 0, 't'},
      {"tiled-copies", required_argument, 0, 'c'}, {"warmup-ms", required_argument, 0, 'w'},
      {"activations", required_argument, 0, 'a'}, {"help", no_argument, 0, 'h'},
      {"tiles", no_argument, 0, 'T'}, {"min-m", required_argument, 0, 'm'},
      {"coopmat", required_argument, 0, 'C'},
      {"parts", no_argument, 0, 'P'},         {"kv-len", required_argument, 0, 'K'},
      {"lab", required_argument, 0, 'L'},     {"q8-columns", required_argument, 0, 'Q'},
      {0, 0, 0, 0}};
  struct cases_ctx c;
  memset(&c, 0, sizeof(c));
  c.o.tiled_copies = -1;
  c.o.coopmat = -1;
  optind = 1;
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'f': c.o.file = optarg; break;
    case 'j': c.o.json = true; break;
    case 'i': c.o.iters = atoi(optarg); break;
    case 'd': c.o.device = (uint32_t)atoi(optarg); break;
    case 'v': c.o.variants = true; break;
    case 't': c.o.target_ms = atof(optarg); break;
    case 'w': c.o.warmup_ms = atof(optarg); c.o.warmup_set = true; break;
    case 'c': c.o.tiled_copies = !strcmp(optarg, "on") ? 1 : !strcmp(optarg, "off") ? 0 : -1; break;
    case 'a':
      c.o.q8 = !strcmp(optarg, "q8") || !strcmp(optarg, "q8,f16");
      c.o.f16 = !strcmp(optarg, "f16") || !strcmp(optarg, "q8,f16");
      if (!c.o.q8 && !c.o.f16 && strcmp(optarg, "f32")) {
        usage();
        return 2;
      }
      break;
    case 'T': c.o.tiles = true; break;
    case 'P': c.o.tiles = c.o.parts = true; break;
    case 'K':
      c.o.kv_len = atoll(optarg);
      if (c.o.kv_len <= 0) {
        usage();
        return 2;
      }
      break;
    case 'm': c.o.min_m = atoi(optarg); break;
    case 'Q': c.o.q8_columns = (uint32_t)atoi(optarg); break;
    case 'L':
      if (c.o.labs == (int)(sizeof(c.o.lab) / sizeof(c.o.lab[0]))) {
        usage();
        return 2;
      }
      c.o.lab[c.o.labs++] = optarg;
      break;
    case 'C': c.o.coopmat = !strcmp(optarg, "on") ? 1 : !strcmp(optarg, "off") ? 0 : -1; break;
    case 'h': usage(); return 0;
    default: usage(); return 2;
    }
  }
  if (!c.o.file) {
    usage();
    return 2;
  }
  FILE *f = fopen(c.o.file, "r");
  if (!f) {
    fprintf(stderr, "vkrt-bench cases: cannot open %s: %s\n", c.o.file, strerror(errno));
    return 2;
  }
  vkrt_options options;
  vkrt_options_initialize(&options);
  options.quant_activations = c.o.q8 ? VKRT_ACTIVATIONS_Q8 : VKRT_ACTIVATIONS_F32;
  options.quant_activations_columns = c.o.q8_columns;
  options.matmul_activations = c.o.f16 ? VKRT_MATMUL_ACTIVATIONS_F16 : VKRT_MATMUL_ACTIVATIONS_F32;
  c.app = bench_open(&options);
  vkrt_device_info info;
  if (vkrt_device_info_get(c.app, c.o.device, &info) != VKRT_OK ||
      vkrt_lab_device_get(c.app, c.o.device, &c.td) != VKRT_OK) {
    fprintf(stderr, "vkrt-bench cases: no usable device %u\n", c.o.device);
    vkrt_close(c.app);
    fclose(f);
    return 2;
  }
  if (c.o.tiled_copies >= 0)
    vkrt_lab_set(c.app, c.o.device, VKRT_LAB_COPY_TRANSPOSED_TILED, c.o.tiled_copies);
  bool lab_ok = true;
  for (int i = 0; i < c.o.labs && lab_ok; i++)
    lab_ok = vkrt_lab_set_text(c.app, c.o.device, c.o.lab[i]) == VKRT_OK;
  if (!lab_ok ||
      (c.o.min_m > 0 &&
       vkrt_lab_set(c.app, c.o.device, VKRT_LAB_MATMUL_TILED_MIN_M, c.o.min_m) != VKRT_OK) ||
      (c.o.coopmat >= 0 &&
       vkrt_lab_set(c.app, c.o.device, VKRT_LAB_MATMUL_COOPMAT, c.o.coopmat) != VKRT_OK)) {
    fprintf(stderr, "vkrt-bench cases: %s\n", vkrt_last_error(c.app));
    vkrt_close(c.app);
    fclose(f);
    return 2;
  }
  bool cpu = c.td.is_cpu;
  if (c.o.iters <= 0)
    c.o.iters = cpu ? 2 : 7;
  if (c.o.target_ms <= 0)
    c.o.target_ms = cpu ? 1 : 3;
  if (!c.o.warmup_set)
    c.o.warmup_ms = cpu ? 0 : 400;
  vkrt_lab_timer_create(c.app, c.o.device, &c.timer); /* NULL: no timestamps */
  measure_copy(&c);
  measure_ops(&c);
  vkrt_lab_matvec mv16, mv32;
  vkrt_lab_matvec_get(c.app, c.o.device, VKRT_TYPE_F16, &mv16);
  vkrt_lab_matvec_get(c.app, c.o.device, VKRT_TYPE_F32, &mv32);
  const vkrt_lab_matvec *m16 = &mv16, *m32 = &mv32;
  if (c.o.json) {
    printf("{\"bench\": \"cases\", \"file\": ");
    json_str(c.o.file);
    printf(", \"device\": ");
    json_str(info.name);
    printf(", \"driver\": ");
    json_str(info.driver_name);
    printf(", \"timer\": \"%s\", \"iters\": %d, \"warmup_ms\": %.0f, \"copy_gbps\": %.2f, "
           "\"op_chain_us\": %.3f, \"op_independent_us\": %.3f, "
           "\"matvec_f16\": \"wg %u rows %u unroll %u blocks %u\", "
           "\"matvec_f32\": \"wg %u rows %u unroll %u blocks %u\", \"results\": [",
           c.timer ? "gpu-timestamps" : "wall", c.o.iters, c.o.warmup_ms, c.copy_gbps, c.chain_us,
           c.independent_us, m16->wg, m16->rows,
           m16->unroll, m16->blocks, m32->wg, m32->rows, m32->unroll, m32->blocks);
  } else {
    printf("vkrt-bench cases %s: dev%u %s (%s), %s, median of %d batches\n", c.o.file,
           c.o.device, info.name, info.driver_name, c.timer ? "GPU timestamps" : "wall clock",
           c.o.iters);
    printf("plain 16-byte copy (HBM reference, read + written): %.1f GB/s; matvec f16: wg %u rows %u "
           "unroll %u blocks %u, f32: wg %u rows %u unroll %u blocks %u\n",
           c.copy_gbps, m16->wg, m16->rows, m16->unroll, m16->blocks, m32->wg, m32->rows,
           m32->unroll, m32->blocks);
    printf("16-byte copy, %d per submission: %.2f us each behind a barrier (dependent), %.2f us "
           "independent\n", FLOOR_OPS, c.chain_us, c.independent_us);
    printf("%-40s %-40s %13s %14s %8s %9s   %s\n", "case", "path", "time", "bandwidth", "x copy",
           "#wrong", "wall per op (x time; record + submit + wait / reps), recording per op");
  }
  char line[4096], err[256];
  int line_no = 0;
  while (fgets(line, sizeof(line), f)) {
    line_no++;
    bool whole = strchr(line, '\n') || feof(f);
    if (!whole) { /* overlong: skip the rest */
      int x;
      while ((x = fgetc(f)) != EOF && x != '\n')
        ;
      report_error(&c, line_no, NULL, "line longer than 4095 characters");
      continue;
    }
    struct bench_case bc;
    int r = case_parse(line, line_no, &bc, err, sizeof(err));
    if (r < 0)
      report_error(&c, line_no, NULL, err);
    else if (r > 0)
      run_case(&c, &bc);
  }
  fclose(f);
  if (c.o.json) {
    printf("], \"cases_run\": %d, \"line_errors\": %d, \"wrong_total\": %" PRIu64
           ", \"wall_min_us\": %.1f, \"wall_limit\": %.2f, \"wall_cases\": %d, "
           "\"wall_within\": %d, \"wall_worst\": %.4f, \"wall_worst_case\": ", c.run, c.errors,
           c.wrong_total, WALL_MIN_US, WALL_LIMIT, c.wall_cases, c.wall_within, c.wall_worst);
    json_str(c.wall_worst_name);
    printf("}\n");
  } else {
    printf("%d cases run, %d lines with errors, #wrong total %" PRIu64 "\n", c.run, c.errors,
           c.wrong_total);
    if (!c.timer)
      printf("wall clock vs GPU time: no GPU timestamps on this device, nothing to compare\n");
    else
      printf("wall clock vs GPU time, cases of %.0f us and more: %d of %d within %.2f x "
             "(worst: %s at %.3f x)\n", WALL_MIN_US, c.wall_within, c.wall_cases, WALL_LIMIT,
             c.wall_cases ? c.wall_worst_name : "-", c.wall_worst);
  }
  vkrt_lab_timer_destroy(c.timer);
  vkrt_close(c.app);
  return c.wrong_total ? 1 : 0;
}

BENCH_COMMAND(cases, "cases", "ggml test-backend-ops case file: verified (#wrong) and timed",
              cmd_cases)
