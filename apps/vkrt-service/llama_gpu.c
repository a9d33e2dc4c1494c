/* The tensor-parallel forward pass of a llama model on the appliance's devices (llama.h says
 * how the model is split). Per token, on every device:
 *   x = token_embd[token]                                   (get_rows; token from `step`)
 *   per layer: h = rms_norm(x) * attn_norm
 *              q, k, v = Wq h, Wk h, Wv h                   (this rank's heads)
 *              q, k = rope(q, pos), rope(k, pos)            (pos from `step`)
 *              K[pos], V[pos] = k, v                        (set_rows into the cache)
 *              a = attention(q, K, V, kv_len = pos + 1)     (kv_len from `step`)
 *              x += allreduce(Wo a)                         (Wo: this rank's columns)
 *              h = rms_norm(x) * ffn_norm
 *              x += allreduce(Wdown (silu(Wgate h) * Wup h))  (residual(): how x rides along)
 *   logits = allreduce(Woutput,r rms_norm(x) * output_norm) (each rank's vocabulary rows)
 *   step[argmax] = argmax(logits)                           (greedy, on the device)
 * Every per-token value (token, position, attended length) is read on the device from the
 * I32 `step` buffer, which a recorded copy fills from a host-visible buffer the host writes:
 * the token's recorded work is the same for every token. The allreduce leaves bit-identical
 * sums on every rank, so every rank's state and logits are the same bits.
 *
 * The prompt pass runs the same forward pass over a ubatch of n tokens at once: every
 * activation has n columns (sized for the largest ubatch at creation), the matmuls take n
 * columns (the tiled kernel past the crossover reads the weights once per tile, not once per
 * token), rope and set_rows a position per column, attention a causal length per query, the
 * allreduces n columns; the output head only for the rows asked for (the last, or every row
 * when their logits are checked). Its ids, positions and lengths come from a second step
 * buffer of n entries per field. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "vkrt/kconfig.h"
#if IS_ENABLED(CONFIG_VKRT_LAB)
#include "vkrt/vkrt_lab.h"
#endif

/* A step buffer of c columns (1: a token; the ubatch size: the prompt pass) holds I32 fields
 * of c entries each, field f at f * c * 4 bytes: the tokens, their positions, their attended
 * lengths, the draw's keys (two fields: two words a column; the host writes these), the
 * argmax of each row of the head and its draw (vkrt_op_sample, with a sample temperature). */
enum {
  STEP_TOKEN = 0, STEP_POS = 1, STEP_KV_LEN = 2, STEP_KEY = 3, STEP_ARGMAX = 5, STEP_SAMPLE = 6,
  STEP_FIELDS = 7
};
/* The host-visible result buffer: the argmaxes at 0, the draws from out_samples(c), the
 * logits of r rows from out_logits(c), then the rows' top-k candidates (values, then ids). */
static uint64_t out_samples(uint32_t cols) { return (uint64_t)cols * 4; }
static uint64_t out_logits(uint32_t cols) { return ((uint64_t)cols * 8 + 255) & ~(uint64_t)255; }
static uint64_t out_top_k(const struct llama_gpu *g, uint32_t cols, uint32_t rows);

/* The step and result buffers of one kind of work: [0] a token, [1] a ubatch of the prompt. */
struct gpu_steps {
  vkrt_buffer *step;             /* device-local I32 fields (above) */
  vkrt_buffer *step_host, *out_host; /* host-visible: the next step; argmaxes and logits */
  int32_t *step_map;
  uint8_t *out_map;
};

/* What one recorded pass covers: n columns (tokens), the output head for columns [r0, n). */
struct pass {
  uint32_t n, r0;
  bool batch, want_logits;
};

/* Where q, k and v (gate and up) share a weight type, their rows sit in one buffer, one after
 * the other (wk, wv and up NULL then): a token takes them in one matrix-vector op and ropes q
 * and k in one; a prompt pass takes each from its rows there. */
struct gpu_layer {
  vkrt_buffer *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *gate, *up, *down;
  vkrt_buffer *k_cache, *v_cache;
  uint64_t wk_at, wv_at, up_at;  /* bytes: where wk, wv and up start in their buffers */
};

struct gpu_device {
  struct llama_split sp;
  struct gpu_layer *layer;
  vkrt_buffer *tok_embd, *output_norm;
  vkrt_buffer *rope_freqs;       /* the model's frequency factors; NULL when it has none */
  vkrt_buffer *output;           /* this rank's output-head rows (tok_embd itself when tied) */
  uint64_t output_offset;        /* bytes: where they start in `output` */
  vkrt_buffer *x, *xn, *q, *k, *v, *att, *g, *u;
  vkrt_buffer *qkv, *gu;         /* a token's q, k, v (gate, up) from one op, fused weights */
  vkrt_buffer *logits_part;      /* ranks > 1: n_vocab per row, zero outside this rank's rows */
  vkrt_buffer *logits;           /* n_vocab per row of the head */
  vkrt_buffer *top_k;            /* top_k: each row's candidates, values then ids */
  struct gpu_steps st[2];        /* [0] a token's, [1] the prompt pass's (when ubatch > 0) */
  uint64_t weight_bytes, uploaded;
};

struct llama_gpu {
  vkrt_appliance *app;
  const struct llama_model *m;
  struct llama_gpu_params p;
  uint32_t n;
  struct gpu_device dev[VKRT_MAX_DEVICES];
  vkrt_graph *graph[2];          /* captured token: [want_logits] */
  uint32_t cols;                 /* activation columns: the ubatch, at least 1 */
  uint64_t key;                  /* the next draw's key (llama_gpu_set_key), written into the
                                    step of the pass set next */
  uint32_t logit_rows;           /* rows of logits a pass may produce */
  bool rope_into_cache;          /* K roped on its way into the cache (vkrt_op_rope_set_rows) */
  struct llama_gpu_fused fused;  /* device 0's fused products in it */
  struct pass last_batch;        /* the prompt pass recorded last */
  const char *failed;
  vkrt_load_range *loads;        /* every device's weights, loaded at once after creation */
  uint32_t load_count, load_cap;
  struct llama_gpu_hooks hooks;  /* around each recorded op (vkrt-service --profile) */
};

static bool refuse(char *err, size_t err_size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
  return false;
}

bool llama_split_plan(const struct llama_model *m, uint32_t ranks, uint32_t rank,
                      struct llama_split *out, char *err, size_t err_size) {
  const struct llama_hparams *hp = &m->hp;
  memset(out, 0, sizeof(*out));
  if (ranks == 0 || rank >= ranks)
    return refuse(err, err_size, "rank %u of %u ranks", rank, ranks);
  if (hp->n_head_kv % ranks)
    return refuse(err, err_size, "llama.attention.head_count_kv = %u does not divide among %u "
                  "devices (each device holds whole KV heads with their query heads)",
                  hp->n_head_kv, ranks);
  uint32_t group = hp->n_head / hp->n_head_kv;
  out->n_head_kv = hp->n_head_kv / ranks;
  out->kv_head0 = rank * out->n_head_kv;
  out->n_head = out->n_head_kv * group;
  out->head0 = out->kv_head0 * group;
  uint32_t ff_block = 1;
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    const struct llama_layer *L = &m->layer[l];
    uint32_t wo_block = vkrt_type_block(L->wo->type);
    if (((uint64_t)out->n_head * hp->head_dim) % wo_block)
      return refuse(err, err_size, "blk.%u.attn_output.weight (%s): a device's %u heads of %u "
                    "are not whole blocks of %u columns", l, vkrt_type_str(L->wo->type),
                    out->n_head, hp->head_dim, wo_block);
    uint32_t b = vkrt_type_block(L->ffn_down->type);
    ff_block = b > ff_block ? b : ff_block;
  }
  if (hp->n_ff % ff_block || hp->n_ff / ff_block < ranks)
    return refuse(err, err_size, "llama.feed_forward_length = %u holds %u blocks of %u "
                  "(ffn_down), fewer than the %u devices", hp->n_ff, hp->n_ff / ff_block,
                  ff_block, ranks);
  uint64_t blocks = hp->n_ff / ff_block;
  out->ff0 = (uint32_t)(blocks * rank / ranks * ff_block);
  out->n_ff = (uint32_t)(blocks * (rank + 1) / ranks * ff_block) - out->ff0;
  if (hp->n_vocab < ranks)
    return refuse(err, err_size, "%u vocabulary rows for %u devices", hp->n_vocab, ranks);
  out->vocab0 = (uint32_t)((uint64_t)hp->n_vocab * rank / ranks);
  out->n_vocab = (uint32_t)((uint64_t)hp->n_vocab * (rank + 1) / ranks) - out->vocab0;
  return true;
}

/* A libvkrt call in llama_gpu's functions: on failure the call's text is kept for
 * llama_gpu_failed and its status returned. */
#define TRY(call)                                                                         \
  do {                                                                                    \
    vkrt_status s_ = (call);                                                              \
    if (s_ != VKRT_OK) {                                                                  \
      g->failed = #call;                                                                  \
      return s_;                                                                          \
    }                                                                                     \
  } while (0)

/* One op of the forward pass on device d (UINT32_MAX: every device, a collective), between
 * the hooks when there are any. */
#define OP(d, what, call)                                                                 \
  do {                                                                                    \
    if (g->hooks.skip && g->hooks.skip(g->hooks.user, (d), (what)))                       \
      break;                                                                              \
    if (g->hooks.before)                                                                  \
      TRY(g->hooks.before(g->hooks.user, (d), (what)));                                   \
    TRY(call);                                                                            \
    if (g->hooks.after)                                                                   \
      TRY(g->hooks.after(g->hooks.user, (d)));                                            \
  } while (0)

static uint64_t tensor_offset(const struct llama_model *m, const struct gguf_tensor *t) {
  return (uint64_t)(gguf_data(m->file, t) - m->file->buf);
}

/* Queues a range of the file for the load. */
static vkrt_status load_add(struct llama_gpu *g, vkrt_load_range r) {
  if (g->load_count == g->load_cap) {
    uint32_t cap = g->load_cap ? g->load_cap * 2 : 256;
    vkrt_load_range *grown = realloc(g->loads, cap * sizeof(*grown));
    if (!grown) {
      g->failed = "realloc (load ranges)";
      return VKRT_ERROR_OUT_OF_HOST_MEMORY;
    }
    g->loads = grown;
    g->load_cap = cap;
  }
  g->loads[g->load_count++] = r;
  return VKRT_OK;
}

/* Bytes of t from `from` (relative to its data; rows of r.size bytes r.file_pitch apart when
 * r.rows is set) into r.dst: queued for the load from the file, or, for a tensor converted
 * on the host (its bytes are not the file's), uploaded from memory now. */
static vkrt_status load_tensor(struct llama_gpu *g, const struct gguf_tensor *t, uint64_t from,
                               vkrt_load_range r) {
  if (!t->converted) {
    r.file_offset = tensor_offset(g->m, t) + from;
    return load_add(g, r);
  }
  const uint8_t *src = t->converted + from;
  vkrt_status s = r.rows ? vkrt_upload_2d(r.dst, r.dst_offset, r.dst_pitch, src, r.file_pitch,
                                          r.size, r.rows)
                         : vkrt_upload(r.dst, r.dst_offset, src, r.size);
  if (s != VKRT_OK)
    g->failed = "vkrt_upload (a converted tensor)";
  return s;
}

/* Rows [row0, row0 + rows) of t, contiguous in the file, into buf at byte `at`. */
static vkrt_status upload_rows_at(struct llama_gpu *g, uint32_t d, const struct gguf_tensor *t,
                                  uint64_t row0, uint64_t rows, vkrt_buffer *buf, uint64_t at) {
  uint64_t rb = gguf_row_bytes(t);
  TRY(load_tensor(g, t, row0 * rb, (vkrt_load_range){.size = rows * rb, .dst = buf, .dst_offset = at}));
  g->dev[d].weight_bytes += rows * rb;
  g->dev[d].uploaded += rows * rb;
  return VKRT_OK;
}

/* Rows [row0, row0 + rows) of t into a new buffer (+16 bytes: the kernels read whole words). */
static vkrt_status upload_rows(struct llama_gpu *g, uint32_t d, const struct gguf_tensor *t,
                               uint64_t row0, uint64_t rows, vkrt_buffer **out) {
  TRY(vkrt_buffer_create(g->app, d, rows * gguf_row_bytes(t) + 16, VKRT_BUFFER_DEVICE_LOCAL, out));
  return upload_rows_at(g, d, t, row0, rows, *out, 0);
}

/* Row ranges of tensors of one type, one after the other in a new buffer; at[i]: where part
 * i starts. */
struct row_part {
  const struct gguf_tensor *t;
  uint64_t row0, rows;
};
static vkrt_status upload_parts(struct llama_gpu *g, uint32_t d, const struct row_part *parts,
                                uint32_t n, vkrt_buffer **out, uint64_t *at) {
  uint64_t size = 0;
  for (uint32_t i = 0; i < n; i++)
    at[i] = size, size += parts[i].rows * gguf_row_bytes(parts[i].t);
  TRY(vkrt_buffer_create(g->app, d, size + 16, VKRT_BUFFER_DEVICE_LOCAL, out));
  for (uint32_t i = 0; i < n; i++)
    TRY(upload_rows_at(g, d, parts[i].t, parts[i].row0, parts[i].rows, *out, at[i]));
  return VKRT_OK;
}

/* Columns [col0, col0 + cols) of every row of t (whole blocks): a 2-D region of the file. */
static vkrt_status upload_cols(struct llama_gpu *g, uint32_t d, const struct gguf_tensor *t,
                               uint64_t col0, uint64_t cols, vkrt_buffer **out) {
  uint64_t bs = vkrt_type_size(t->type), bl = vkrt_type_block(t->type);
  uint64_t width = cols / bl * bs, rows = t->ne[1];
  TRY(vkrt_buffer_create(g->app, d, width * rows + 16, VKRT_BUFFER_DEVICE_LOCAL, out));
  TRY(load_tensor(g, t, col0 / bl * bs, (vkrt_load_range){.size = width, .dst = *out, .rows = rows,
                                                          .file_pitch = gguf_row_bytes(t),
                                                          .dst_pitch = width}));
  g->dev[d].weight_bytes += width * rows;
  g->dev[d].uploaded += width * rows;
  return VKRT_OK;
}

/* floats per column, for `cols` columns (g->cols: every column of the largest pass) */
static vkrt_status activation(struct llama_gpu *g, uint32_t d, uint64_t floats, uint32_t cols,
                              vkrt_buffer **out) {
  TRY(vkrt_buffer_create(g->app, d, floats * cols * 4, VKRT_BUFFER_DEVICE_LOCAL, out));
  return VKRT_OK;
}

/* A kind of work's step and result buffers for `cols` columns and `rows` rows of logits. */
static vkrt_status steps_create(struct llama_gpu *g, uint32_t d, uint32_t cols, uint32_t rows,
                                struct gpu_steps *st) {
  uint64_t bytes = (uint64_t)STEP_FIELDS * cols * 4;
  TRY(vkrt_buffer_create(g->app, d, bytes, VKRT_BUFFER_DEVICE_LOCAL, &st->step));
  TRY(vkrt_buffer_create(g->app, d, bytes, VKRT_BUFFER_HOST_VISIBLE, &st->step_host));
  TRY(vkrt_buffer_create(g->app, d, out_top_k(g, cols, rows) + (uint64_t)rows * g->p.top_k * 8,
                         VKRT_BUFFER_HOST_VISIBLE, &st->out_host));
  void *map = NULL;
  TRY(vkrt_buffer_map(st->step_host, &map));
  st->step_map = map;
  memset(map, 0, bytes);
  TRY(vkrt_buffer_map(st->out_host, &map));
  st->out_map = map;
  return VKRT_OK;
}

static uint64_t kv_row_bytes(const struct llama_gpu *g, uint32_t n_head_kv) {
  uint64_t n = (uint64_t)n_head_kv * g->m->hp.head_dim;
  return n / vkrt_type_block(g->p.kv_type) * vkrt_type_size(g->p.kv_type);
}

static bool qkv_fused(const struct llama_layer *L) {
  return L->wq->type == L->wk->type && L->wq->type == L->wv->type;
}
static bool gate_up_fused(const struct llama_layer *L) {
  return L->ffn_gate->type == L->ffn_up->type;
}
/* Whether a token's product of one matrix of `type` takes `what` (LLAMA_FUSE_*) into its
 * dispatch: the fused kernels take q4_K, and q8_0 with 8-bit x (vkrt_op_matmul_fused). */
static bool fuse(const struct llama_gpu *g, const struct pass *ps, vkrt_type type, unsigned what) {
  unsigned f = g->p.fuse;
  bool dense = type == VKRT_TYPE_F16 || type == VKRT_TYPE_F32;
  uint32_t norm_max = dense                ? LLAMA_FUSE_NORM_MAX_HIDDEN_DENSE
                      : g->p.q8_activations ? VKRT_ACTIVATIONS_Q8_MAX_K
                                            : LLAMA_FUSE_NORM_MAX_HIDDEN;
  if (f & LLAMA_FUSE_AUTO)
    f = LLAMA_FUSE_SWIGLU | (g->m->hp.n_embd <= norm_max ? LLAMA_FUSE_NORM : 0);
  return ps->n == 1 && (f & what) &&
         (dense || type == VKRT_TYPE_Q4_K || (g->p.q8_activations && type == VKRT_TYPE_Q8_0));
}

/* Whether a token's fused q/k/v product of `type` also turns q and K by RoPE and writes the
 * K/V cache rows (vkrt_matmul_fusion.qkv: the 8-bit-x kernels of q4_K and q8_0 w, heads of a
 * multiple of 32; llama_gpu_params.fuse_rope asks for it). */
static bool fuse_rope(const struct llama_gpu *g, vkrt_type type) {
  return g->p.fuse_rope && g->p.q8_activations && g->m->hp.head_dim % 32 == 0 &&
         (type == VKRT_TYPE_Q4_K || type == VKRT_TYPE_Q8_0);
}

/* dst = w h with h = rms_norm(x) * norm: with fold in the product's own dispatch
 * (vkrt_op_matmul_fused, counted), else from the h the norm recorded before it wrote. */
static vkrt_status normed_product(struct llama_gpu *g, uint32_t d, const char *fused_name,
                                  const char *name, const vkrt_tensor *dst, const vkrt_tensor *w,
                                  const vkrt_tensor *x, const vkrt_tensor *h,
                                  const vkrt_tensor *norm, bool fold) {
  if (!fold) {
    OP(d, name, vkrt_op_matmul(dst, w, h));
    return VKRT_OK;
  }
  vkrt_matmul_fusion fz = {.norm = norm, .eps = g->m->hp.eps};
  OP(d, fused_name, vkrt_op_matmul_fused(dst, w, x, &fz));
  g->fused.norm += d == 0;
  return VKRT_OK;
}

static vkrt_status device_create(struct llama_gpu *g, uint32_t d) {
  const struct llama_model *m = g->m;
  const struct llama_hparams *hp = &m->hp;
  struct gpu_device *dv = &g->dev[d];
  const struct llama_split *sp = &dv->sp;
  uint64_t hd = hp->head_dim;
  dv->layer = calloc(hp->n_layer, sizeof(*dv->layer));
  if (!dv->layer) {
    g->failed = "calloc (layers)";
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  }
  vkrt_status s;
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    const struct llama_layer *L = &m->layer[l];
    struct gpu_layer *gl = &dv->layer[l];
    const struct row_part qkv[3] = {{L->wq, sp->head0 * hd, sp->n_head * hd},
                                    {L->wk, sp->kv_head0 * hd, sp->n_head_kv * hd},
                                    {L->wv, sp->kv_head0 * hd, sp->n_head_kv * hd}};
    const struct row_part gu[2] = {{L->ffn_gate, sp->ff0, sp->n_ff}, {L->ffn_up, sp->ff0, sp->n_ff}};
    uint64_t at[3];
    if (qkv_fused(L)) {
      if ((s = upload_parts(g, d, qkv, 3, &gl->wq, at)))
        return s;
      gl->wk_at = at[1], gl->wv_at = at[2];
    } else if ((s = upload_parts(g, d, &qkv[0], 1, &gl->wq, at)) ||
               (s = upload_parts(g, d, &qkv[1], 1, &gl->wk, at)) ||
               (s = upload_parts(g, d, &qkv[2], 1, &gl->wv, at))) {
      return s;
    }
    if (gate_up_fused(L)) {
      if ((s = upload_parts(g, d, gu, 2, &gl->gate, at)))
        return s;
      gl->up_at = at[1];
    } else if ((s = upload_parts(g, d, &gu[0], 1, &gl->gate, at)) ||
               (s = upload_parts(g, d, &gu[1], 1, &gl->up, at))) {
      return s;
    }
    if ((s = upload_rows(g, d, L->attn_norm, 0, 1, &gl->attn_norm)) ||
        (s = upload_cols(g, d, L->wo, sp->head0 * hd, sp->n_head * hd, &gl->wo)) ||
        (s = upload_rows(g, d, L->ffn_norm, 0, 1, &gl->ffn_norm)) ||
        (s = upload_cols(g, d, L->ffn_down, sp->ff0, sp->n_ff, &gl->down)))
      return s;
    /* whole words: vkrt_cmd_fill clears it below (q8_0 rows are 34-byte blocks) */
    uint64_t cache = (kv_row_bytes(g, sp->n_head_kv) * g->p.n_ctx + 3) & ~(uint64_t)3;
    TRY(vkrt_buffer_create(g->app, d, cache, VKRT_BUFFER_DEVICE_LOCAL, &gl->k_cache));
    TRY(vkrt_buffer_create(g->app, d, cache, VKRT_BUFFER_DEVICE_LOCAL, &gl->v_cache));
  }
  /* The embedding: all of it (any token's row may be asked for), one row read per token. */
  if ((s = upload_rows(g, d, m->tok_embd, 0, hp->n_vocab, &dv->tok_embd)))
    return s;
  dv->weight_bytes -= gguf_row_bytes(m->tok_embd) * (hp->n_vocab - 1);
  if ((s = upload_rows(g, d, m->output_norm, 0, 1, &dv->output_norm)) ||
      (m->rope_freqs && (s = upload_rows(g, d, m->rope_freqs, 0, 1, &dv->rope_freqs))))
    return s;
  if (m->output_tied) { /* this rank's rows of the embedding already there */
    dv->output = dv->tok_embd;
    dv->output_offset = sp->vocab0 * gguf_row_bytes(m->output);
    dv->weight_bytes += sp->n_vocab * gguf_row_bytes(m->output);
  } else if ((s = upload_rows(g, d, m->output, sp->vocab0, sp->n_vocab, &dv->output))) {
    return s;
  }
  uint64_t E = hp->n_embd;
  uint32_t c = g->cols;
  if ((s = activation(g, d, E, c, &dv->x)) || (s = activation(g, d, E, c, &dv->xn)) ||
      (s = activation(g, d, sp->n_head * hd, c, &dv->q)) ||
      (s = activation(g, d, sp->n_head * hd, c, &dv->att)) ||
      (s = activation(g, d, sp->n_head_kv * hd, c, &dv->k)) ||
      (s = activation(g, d, sp->n_head_kv * hd, c, &dv->v)) ||
      (s = activation(g, d, sp->n_ff, c, &dv->g)) || (s = activation(g, d, sp->n_ff, c, &dv->u)) ||
      /* a token's only: the prompt pass takes q, k, v, gate and up apart */
      (s = activation(g, d, (sp->n_head + 2 * sp->n_head_kv) * hd, 1, &dv->qkv)) ||
      (s = activation(g, d, 2 * (uint64_t)sp->n_ff, 1, &dv->gu)))
    return s;
  uint64_t logit_bytes = (uint64_t)hp->n_vocab * g->logit_rows * 4;
  TRY(vkrt_buffer_create(g->app, d, logit_bytes, VKRT_BUFFER_DEVICE_LOCAL, &dv->logits));
  if (g->p.ranks > 1) { /* zero once: only this rank's rows are ever written */
    TRY(vkrt_buffer_create(g->app, d, logit_bytes, VKRT_BUFFER_DEVICE_LOCAL, &dv->logits_part));
    TRY(vkrt_cmd_fill(dv->logits_part, 0, logit_bytes, 0));
  }
  if (g->p.top_k) /* the head's candidates: values, then ids, of every row */
    TRY(vkrt_buffer_create(g->app, d, (uint64_t)g->logit_rows * g->p.top_k * 8,
                           VKRT_BUFFER_DEVICE_LOCAL, &dv->top_k));
  if ((s = steps_create(g, d, 1, 1, &dv->st[0])))
    return s;
  if (g->p.ubatch && (s = steps_create(g, d, g->cols, g->logit_rows, &dv->st[1])))
    return s;
  /* The K/V caches start as zeros: rows past kv_len are never read, but a fresh buffer's
   * bytes are whatever the memory held. A run at a depth reads rows it never wrote: every
   * byte 0x2E, finite in either type (f16 0.097; q8_0 scale 0.097, quants 46). */
  uint32_t fill = g->p.depth ? 0x2E2E2E2Eu : 0;
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    uint64_t cache = vkrt_buffer_size(dv->layer[l].k_cache);
    TRY(vkrt_cmd_fill(dv->layer[l].k_cache, 0, cache, fill));
    TRY(vkrt_cmd_fill(dv->layer[l].v_cache, 0, cache, fill));
  }
  TRY(vkrt_finish(g->app, d));
  return VKRT_OK;
}

int llama_gpu_create(vkrt_appliance *app, const struct llama_model *m,
                     const struct llama_gpu_params *p, struct llama_gpu **out, char *err,
                     size_t err_size) {
  *out = NULL;
  if (p->kv_type != VKRT_TYPE_F16 && p->kv_type != VKRT_TYPE_Q8_0) {
    snprintf(err, err_size, "K/V cache type %s: f16 or q8_0", vkrt_type_str(p->kv_type));
    return 1;
  }
  if (m->hp.head_dim % vkrt_type_block(p->kv_type)) {
    snprintf(err, err_size, "a %s K/V cache needs a head size that is a multiple of %u; this "
             "model's is %u", vkrt_type_str(p->kv_type), vkrt_type_block(p->kv_type),
             m->hp.head_dim);
    return 1;
  }
  if (p->n_ctx == 0 || p->n_ctx > INT32_MAX) {
    snprintf(err, err_size, "context of %u tokens", p->n_ctx);
    return 1;
  }
  struct llama_gpu *g = calloc(1, sizeof(*g));
  if (!g) {
    snprintf(err, err_size, "out of host memory");
    return 2;
  }
  g->app = app;
  g->m = m;
  g->p = *p;
  g->cols = p->ubatch ? p->ubatch : 1;
  g->rope_into_cache = vkrt_config_has("CONFIG_VKRT_KERNEL_ROPE_SET_ROWS");
  g->logit_rows = p->ubatch && p->ubatch_logits ? p->ubatch_logits : 1;
  g->logit_rows = g->logit_rows < g->cols ? g->logit_rows : g->cols;
  g->n = vkrt_device_count(app);
  for (uint32_t d = 0; d < g->n; d++)
    if (!llama_split_plan(m, p->ranks, p->first_rank + d, &g->dev[d].sp, err, err_size)) {
      llama_gpu_free(g);
      return 1;
    }
  for (uint32_t d = 0; d < g->n; d++) {
    vkrt_status s = device_create(g, d);
    if (s != VKRT_OK) {
      snprintf(err, err_size, "device %u: %s failed: %s: %s", d, g->failed,
               vkrt_status_str(s), vkrt_last_error(app));
      llama_gpu_free(g);
      return 2;
    }
  }
  vkrt_status s = vkrt_load_file(app, p->path, -1, g->loads, g->load_count, p->load_path,
                                 p->progress, p->progress_user, p->load_info);
  free(g->loads);
  g->loads = NULL;
  if (s != VKRT_OK) {
    snprintf(err, err_size, "loading the weights failed: %s: %s", vkrt_status_str(s),
             vkrt_last_error(app));
    llama_gpu_free(g);
    return 2;
  }
  *out = g;
  return 0;
}

void llama_gpu_free(struct llama_gpu *g) {
  if (!g)
    return;
  vkrt_graph_destroy(g->graph[0]);
  vkrt_graph_destroy(g->graph[1]);
  for (uint32_t d = 0; d < g->n; d++) {
    struct gpu_device *dv = &g->dev[d];
    for (uint32_t l = 0; dv->layer && l < g->m->hp.n_layer; l++) {
      struct gpu_layer *gl = &dv->layer[l];
      vkrt_buffer *bufs[] = {gl->attn_norm, gl->wq, gl->wk, gl->wv, gl->wo, gl->ffn_norm,
                             gl->gate, gl->up, gl->down, gl->k_cache, gl->v_cache};
      for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        vkrt_buffer_destroy(bufs[i]);
    }
    free(dv->layer);
    if (dv->output != dv->tok_embd)
      vkrt_buffer_destroy(dv->output);
    vkrt_buffer *bufs[] = {dv->tok_embd, dv->output_norm, dv->rope_freqs, dv->x, dv->xn, dv->q, dv->k,
                           dv->v, dv->att, dv->g, dv->u, dv->qkv, dv->gu, dv->logits_part,
                           dv->logits, dv->top_k, dv->st[0].step, dv->st[0].step_host,
                           dv->st[0].out_host, dv->st[1].step, dv->st[1].step_host,
                           dv->st[1].out_host};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
      vkrt_buffer_destroy(bufs[i]);
  }
  free(g->loads);
  free(g);
}

const struct llama_split *llama_gpu_split(const struct llama_gpu *g, uint32_t device) {
  return &g->dev[device].sp;
}

void llama_gpu_set_step(struct llama_gpu *g, int32_t token, uint32_t pos) {
  for (uint32_t d = 0; d < g->n; d++) {
    int32_t *s = g->dev[d].st[0].step_map;
    s[STEP_TOKEN] = token;
    s[STEP_POS] = (int32_t)pos;
    s[STEP_KV_LEN] = (int32_t)pos + 1;
    s[STEP_KEY] = (int32_t)(uint32_t)g->key, s[STEP_KEY + 1] = (int32_t)(uint32_t)(g->key >> 32);
  }
}

void llama_gpu_set_key(struct llama_gpu *g, uint64_t key) { g->key = key; }

vkrt_status llama_gpu_set_batch(struct llama_gpu *g, const int32_t *ids, uint32_t n,
                                uint32_t pos0) {
  if (!g->p.ubatch || n == 0 || n > g->cols || (uint64_t)pos0 + n > g->p.n_ctx) {
    g->failed = "llama_gpu_set_batch: no prompt pass, or a ubatch of 0 or more tokens than "
                "its buffers hold, or past the context";
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t d = 0; d < g->n; d++) {
    int32_t *s = g->dev[d].st[1].step_map;
    for (uint32_t j = 0; j < n; j++) {
      s[STEP_TOKEN * g->cols + j] = ids[j];
      s[STEP_POS * g->cols + j] = (int32_t)(pos0 + j);
      s[STEP_KV_LEN * g->cols + j] = (int32_t)(pos0 + j) + 1;
      s[STEP_KEY * g->cols + 2 * j] = (int32_t)(uint32_t)g->key; /* a column's own key: */
      s[STEP_KEY * g->cols + 2 * j + 1] = (int32_t)((uint32_t)(g->key >> 32) + j); /* k1 + j */
    }
  }
  return VKRT_OK;
}

static vkrt_tensor vec(vkrt_buffer *b, vkrt_type type, int64_t n) {
  return vkrt_tensor_contiguous(b, 0, type, n, 1, 1, 1);
}
/* n columns of `rows` floats from column c0 of an activation */
static vkrt_tensor cols_f32(vkrt_buffer *b, int64_t rows, uint32_t c0, uint32_t n) {
  return vkrt_tensor_contiguous(b, (uint64_t)c0 * rows * 4, VKRT_TYPE_F32, rows, n, 1, 1);
}
/* Field f of the pass's step buffer: its first `count` entries. */
static vkrt_tensor step_i32(const struct llama_gpu *g, const struct gpu_device *dv,
                            const struct pass *ps, uint32_t field, uint32_t count) {
  uint32_t cols = ps->batch ? g->cols : 1;
  return vkrt_tensor_contiguous(dv->st[ps->batch].step, (uint64_t)field * cols * 4,
                                VKRT_TYPE_I32, count, 1, 1, 1);
}

/* x += W h on every device for the pass's columns, W each rank's columns. The allreduce adds
 * the ranks' partial products in place in x: global rank 0 contributes x + W_0 h (one
 * vkrt_op_matmul_add), every other rank W_r h
 * written over its x (the same x, so no rank loses anything), and every rank gets the same
 * sum, bit for bit. */
static vkrt_status residual(struct llama_gpu *g, uint32_t l, bool ffn, const struct pass *ps) {
  const struct llama_hparams *hp = &g->m->hp;
  const struct gguf_tensor *wt = ffn ? g->m->layer[l].ffn_down : g->m->layer[l].wo;
  vkrt_allreduce_args ar = {.count = (uint64_t)hp->n_embd * ps->n, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < g->n; d++) {
    struct gpu_device *dv = &g->dev[d];
    int64_t k = ffn ? dv->sp.n_ff : (int64_t)dv->sp.n_head * hp->head_dim;
    vkrt_tensor w = vkrt_tensor_contiguous(ffn ? dv->layer[l].down : dv->layer[l].wo, 0,
                                           wt->type, k, hp->n_embd, 1, 1);
    vkrt_tensor h = cols_f32(ffn ? dv->g : dv->att, k, 0, ps->n);
    vkrt_tensor x = cols_f32(dv->x, hp->n_embd, 0, ps->n);
    if (g->p.first_rank + d != 0) {
      OP(d, ffn ? "ffn_down" : "attn_output", vkrt_op_matmul(&x, &w, &h));
    } else {
      OP(d, ffn ? "ffn_down + residual" : "attn_output + residual", vkrt_op_matmul_add(&x, &w, &h));
    }
    ar.send[d] = ar.recv[d] = dv->x;
  }
  if (g->p.ranks > 1)
    OP(UINT32_MAX, "allreduce", vkrt_allreduce(g->app, &ar));
  return VKRT_OK;
}

/* Layer l's attention up to the output projection on device d: a = attention(rope(Wq h),
 * cache with rope(Wk h), Wv h at each column's position). */
static vkrt_status attention(struct llama_gpu *g, uint32_t d, uint32_t l, const struct pass *ps) {
  const struct llama_model *m = g->m;
  const struct llama_hparams *hp = &m->hp;
  const struct llama_layer *L = &m->layer[l];
  struct gpu_device *dv = &g->dev[d];
  struct gpu_layer *gl = &dv->layer[l];
  int64_t E = hp->n_embd, hd = hp->head_dim, nh = dv->sp.n_head, nkv = dv->sp.n_head_kv;
  int64_t n = ps->n;
  vkrt_tensor x = cols_f32(dv->x, E, 0, ps->n), h = cols_f32(dv->xn, E, 0, ps->n);
  vkrt_tensor norm = vec(gl->attn_norm, VKRT_TYPE_F32, E);
  /* a token, q/k/v in one q4_K matrix: the norm in the product's dispatch */
  bool fold_norm = !gl->wk && fuse(g, ps, L->wq->type, LLAMA_FUSE_NORM);
  if (!fold_norm)
    OP(d, "attn_norm", vkrt_op_rms_norm(&h, &x, &norm, hp->eps));
  vkrt_tensor pos = step_i32(g, dv, ps, STEP_POS, ps->n);
  vkrt_tensor kv_len = step_i32(g, dv, ps, STEP_KV_LEN, ps->n);
  vkrt_rope_params rope = {.mode = VKRT_ROPE_NORMAL, .n_dims = hp->n_rot,
                           .freq_base = hp->rope_freq_base, .freq_scale = hp->rope_freq_scale};
  const vkrt_tensor factors = vec(dv->rope_freqs, VKRT_TYPE_F32, hp->n_rot / 2);
  const vkrt_tensor *ff = dv->rope_freqs ? &factors : NULL;
  vkrt_tensor q, k, q_flat, k_flat, v_flat;
  /* K roped on its way into the cache: one dependent step, q's rope runs beside it */
  bool rope_into_cache = g->rope_into_cache;
  /* cache rows: one token's KV heads each; row pos[j] takes column j's */
  int64_t ctx = g->p.n_ctx;
  vkrt_tensor k_rows = vkrt_tensor_contiguous(gl->k_cache, 0, g->p.kv_type, nkv * hd, ctx, 1, 1);
  vkrt_tensor v_rows = vkrt_tensor_contiguous(gl->v_cache, 0, g->p.kv_type, nkv * hd, ctx, 1, 1);
  vkrt_tensor kc = vkrt_tensor_contiguous(gl->k_cache, 0, g->p.kv_type, hd, nkv, ctx, 1);
  vkrt_tensor vc = vkrt_tensor_contiguous(gl->v_cache, 0, g->p.kv_type, hd, nkv, ctx, 1);
  vkrt_tensor a = vkrt_tensor_contiguous(dv->att, 0, VKRT_TYPE_F32, hd, nh, n, 1);
  float scale = 1.0f / sqrtf((float)hd);
  if (n == 1 && !gl->wk) { /* a token, fused weights: q, k, v one after the other */
    vkrt_tensor wqkv = vkrt_tensor_contiguous(gl->wq, 0, L->wq->type, E, (nh + 2 * nkv) * hd, 1, 1);
    vkrt_tensor qkv = cols_f32(dv->qkv, (nh + 2 * nkv) * hd, 0, 1);
    q = vkrt_tensor_contiguous(dv->qkv, 0, VKRT_TYPE_F32, hd, nh, 1, 1);
    if (fuse_rope(g, L->wq->type)) { /* the rope and both cache rows in the product */
      vkrt_qkv_fusion qf = {.pos = &pos, .k_cache = &k_rows, .v_cache = &v_rows,
                            .rope_factors = ff, .rope = rope, .n_head = (uint32_t)nh,
                            .n_head_kv = (uint32_t)nkv, .head_dim = (uint32_t)hd};
      vkrt_matmul_fusion fz = {.norm = fold_norm ? &norm : NULL, .eps = hp->eps, .qkv = &qf};
      OP(d, fold_norm ? "attn_norm + attn_qkv + rope + KV rows" : "attn_qkv + rope + KV rows",
         vkrt_op_matmul_fused(&qkv, &wqkv, fold_norm ? &x : &h, &fz));
      g->fused.norm += d == 0 && fold_norm;
      g->fused.rope += d == 0;
      OP(d, "attention", vkrt_op_attention(&a, &q, &kc, &vc, &kv_len, scale));
      return VKRT_OK;
    }
    TRY(normed_product(g, d, "attn_norm + attn_qkv", "attn_qkv", &qkv, &wqkv, &x, &h, &norm,
                       fold_norm));
    k = vkrt_tensor_contiguous(dv->qkv, (uint64_t)nh * hd * 4, VKRT_TYPE_F32, hd, nkv, 1, 1);
    if (rope_into_cache) {
      OP(d, "rope q", vkrt_op_rope_ext(&q, &q, &pos, ff, &rope));
    } else {
      vkrt_tensor qk = vkrt_tensor_contiguous(dv->qkv, 0, VKRT_TYPE_F32, hd, nh + nkv, 1, 1);
      OP(d, "rope q k", vkrt_op_rope_ext(&qk, &qk, &pos, ff, &rope));
    }
    k_flat = vkrt_tensor_contiguous(dv->qkv, (uint64_t)nh * hd * 4, VKRT_TYPE_F32, nkv * hd, 1, 1, 1);
    v_flat = vkrt_tensor_contiguous(dv->qkv, (uint64_t)(nh + nkv) * hd * 4, VKRT_TYPE_F32, nkv * hd,
                                    1, 1, 1);
  } else {
    vkrt_tensor wq = vkrt_tensor_contiguous(gl->wq, 0, L->wq->type, E, nh * hd, 1, 1);
    vkrt_tensor wk = vkrt_tensor_contiguous(gl->wk ? gl->wk : gl->wq, gl->wk_at, L->wk->type, E,
                                            nkv * hd, 1, 1);
    vkrt_tensor wv = vkrt_tensor_contiguous(gl->wv ? gl->wv : gl->wq, gl->wv_at, L->wv->type, E,
                                            nkv * hd, 1, 1);
    q = vkrt_tensor_contiguous(dv->q, 0, VKRT_TYPE_F32, hd, nh, n, 1);
    k = vkrt_tensor_contiguous(dv->k, 0, VKRT_TYPE_F32, hd, nkv, n, 1);
    q_flat = cols_f32(dv->q, nh * hd, 0, ps->n);
    k_flat = cols_f32(dv->k, nkv * hd, 0, ps->n);
    v_flat = cols_f32(dv->v, nkv * hd, 0, ps->n);
    OP(d, "attn_q", vkrt_op_matmul(&q_flat, &wq, &h));
    OP(d, "attn_k", vkrt_op_matmul(&k_flat, &wk, &h));
    OP(d, "attn_v", vkrt_op_matmul(&v_flat, &wv, &h));
    OP(d, "rope q", vkrt_op_rope_ext(&q, &q, &pos, ff, &rope));
    if (!rope_into_cache)
      OP(d, "rope k", vkrt_op_rope_ext(&k, &k, &pos, ff, &rope));
  }
  if (rope_into_cache)
    OP(d, "K cache row (roped)", vkrt_op_rope_set_rows(&k_rows, &k, &pos, &pos, ff, &rope));
  else
    OP(d, "K cache row", vkrt_op_set_rows(&k_rows, &k_flat, &pos));
  OP(d, "V cache row", vkrt_op_set_rows(&v_rows, &v_flat, &pos));
  OP(d, "attention", vkrt_op_attention(&a, &q, &kc, &vc, &kv_len, scale));
  return VKRT_OK;
}

/* Layer l's feed-forward up to ffn_down on device d: g = silu(Wgate h) * Wup h. */
static vkrt_status feed_forward(struct llama_gpu *g, uint32_t d, uint32_t l,
                                const struct pass *ps) {
  const struct llama_model *m = g->m;
  const struct llama_layer *L = &m->layer[l];
  struct gpu_device *dv = &g->dev[d];
  struct gpu_layer *gl = &dv->layer[l];
  int64_t E = m->hp.n_embd, F = dv->sp.n_ff;
  vkrt_tensor x = cols_f32(dv->x, E, 0, ps->n), h = cols_f32(dv->xn, E, 0, ps->n);
  vkrt_tensor norm = vec(gl->ffn_norm, VKRT_TYPE_F32, E);
  /* a token, gate and up in one q4_K matrix: the norm and the swiglu in the product's
   * dispatch, as --fuse asks */
  bool one = ps->n == 1 && !gl->up;
  vkrt_matmul_fusion fz = {.eps = m->hp.eps};
  if (one && fuse(g, ps, L->ffn_gate->type, LLAMA_FUSE_NORM))
    fz.norm = &norm;
  fz.swiglu = one && fuse(g, ps, L->ffn_gate->type, LLAMA_FUSE_SWIGLU);
  if (!fz.norm)
    OP(d, "ffn_norm", vkrt_op_rms_norm(&h, &x, &norm, m->hp.eps));
  vkrt_tensor gt = cols_f32(dv->g, F, 0, ps->n);
  vkrt_tensor wgu = vkrt_tensor_contiguous(gl->gate, 0, L->ffn_gate->type, E, 2 * F, 1, 1);
  if (fz.swiglu) {
    OP(d, fz.norm ? "ffn_norm + ffn_gate_up + swiglu" : "ffn_gate_up + swiglu",
       vkrt_op_matmul_fused(&gt, &wgu, fz.norm ? &x : &h, &fz));
    g->fused.norm += d == 0 && fz.norm;
    g->fused.swiglu += d == 0;
    return VKRT_OK;
  }
  if (one) { /* a token, fused weights: gate then up in one op */
    vkrt_tensor gu = cols_f32(dv->gu, 2 * F, 0, 1);
    TRY(normed_product(g, d, "ffn_norm + ffn_gate_up", "ffn_gate_up", &gu, &wgu, &x, &h, &norm,
                       fz.norm != NULL));
    vkrt_tensor gate = vkrt_tensor_contiguous(dv->gu, 0, VKRT_TYPE_F32, F, 1, 1, 1);
    vkrt_tensor up = vkrt_tensor_contiguous(dv->gu, (uint64_t)F * 4, VKRT_TYPE_F32, F, 1, 1, 1);
    OP(d, "swiglu", vkrt_op_swiglu(&gt, &gate, &up));
    return VKRT_OK;
  }
  vkrt_tensor wg = vkrt_tensor_contiguous(gl->gate, 0, L->ffn_gate->type, E, F, 1, 1);
  vkrt_tensor wu = vkrt_tensor_contiguous(gl->up ? gl->up : gl->gate, gl->up_at, L->ffn_up->type, E,
                                          F, 1, 1);
  vkrt_tensor ut = cols_f32(dv->u, F, 0, ps->n);
  OP(d, "ffn_gate", vkrt_op_matmul(&gt, &wg, &h));
  OP(d, "ffn_up", vkrt_op_matmul(&ut, &wu, &h));
  OP(d, "swiglu", vkrt_op_swiglu(&gt, &gt, &ut));
  return VKRT_OK;
}

/* The output head for columns [r0, n): logits of this rank's vocabulary rows (row i of the
 * head in logits[i]), gathered on every rank by an allreduce; the argmax per row on the
 * device; the results copied to the host-visible buffer. */
static vkrt_status output_head(struct llama_gpu *g, const struct pass *ps) {
  const struct llama_model *m = g->m;
  const struct llama_hparams *hp = &m->hp;
  int64_t E = hp->n_embd, V = hp->n_vocab;
  uint32_t rows = ps->n - ps->r0;
  vkrt_allreduce_args ar = {.count = (uint64_t)V * rows, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < g->n; d++) {
    struct gpu_device *dv = &g->dev[d];
    vkrt_tensor x = cols_f32(dv->x, E, ps->r0, rows), h = cols_f32(dv->xn, E, 0, rows);
    vkrt_tensor norm = vec(dv->output_norm, VKRT_TYPE_F32, E);
    /* a token's q4_K head: the norm in its dispatch */
    bool fold_norm = fuse(g, ps, m->output->type, LLAMA_FUSE_NORM); /* ps->n 1: one row */
    if (!fold_norm)
      OP(d, "output_norm", vkrt_op_rms_norm(&h, &x, &norm, hp->eps));
    vkrt_tensor w = vkrt_tensor_contiguous(dv->output, dv->output_offset, m->output->type, E,
                                           dv->sp.n_vocab, 1, 1);
    /* this rank's rows of each row of logits: n_vocab apart */
    vkrt_tensor part = vkrt_tensor_contiguous(g->p.ranks > 1 ? dv->logits_part : dv->logits,
                                              (uint64_t)dv->sp.vocab0 * 4, VKRT_TYPE_F32,
                                              dv->sp.n_vocab, rows, 1, 1);
    part.nb[1] = V * 4;
    part.nb[2] = part.nb[3] = V * 4 * rows;
    TRY(normed_product(g, d, "output_norm + output", "output", &part, &w, &x, &h, &norm,
                       fold_norm));
    ar.send[d] = dv->logits_part;
    ar.recv[d] = dv->logits;
  }
  if (g->p.ranks > 1)
    OP(UINT32_MAX, "allreduce", vkrt_allreduce(g->app, &ar));
  for (uint32_t d = 0; d < g->n; d++) {
    struct gpu_device *dv = &g->dev[d];
    struct gpu_steps *st = &dv->st[ps->batch];
    uint32_t cols = ps->batch ? g->cols : 1;
    vkrt_tensor logits = vkrt_tensor_contiguous(dv->logits, 0, VKRT_TYPE_F32, V, rows, 1, 1);
    bool draw = g->p.sample_temperature > 0;
    /* a draw's (or the top-k's, whose first id it is) argmax only where the logits are checked */
    if (!(draw || g->p.top_k) || ps->want_logits) {
      vkrt_tensor best = step_i32(g, dv, ps, STEP_ARGMAX, rows);
      OP(d, "argmax", vkrt_op_argmax(&best, &logits));
      TRY(vkrt_cmd_copy_buffer(st->out_host, 0, st->step, (uint64_t)STEP_ARGMAX * cols * 4,
                               (uint64_t)rows * 4));
    }
    if (draw) { /* the draw, by the keys of the head's columns */
      vkrt_tensor drawn = step_i32(g, dv, ps, STEP_SAMPLE, rows);
      uint64_t key_at = ((uint64_t)STEP_KEY * cols + 2 * ps->r0) * 4;
      vkrt_tensor key = vkrt_tensor_contiguous(st->step, key_at, VKRT_TYPE_I32, 2, rows, 1, 1);
      OP(d, "sample", vkrt_op_sample(&drawn, &logits, &key, g->p.sample_temperature));
      TRY(vkrt_cmd_copy_buffer(st->out_host, out_samples(cols), st->step,
                               (uint64_t)STEP_SAMPLE * cols * 4, (uint64_t)rows * 4));
    }
    if (g->p.top_k) { /* the candidates a host's top-k draw needs, not the whole vocabulary */
      uint64_t k = g->p.top_k;
      vkrt_tensor values = vkrt_tensor_contiguous(dv->top_k, 0, VKRT_TYPE_F32, (int64_t)k, rows,
                                                  1, 1);
      vkrt_tensor ids = vkrt_tensor_contiguous(dv->top_k, k * rows * 4, VKRT_TYPE_I32,
                                               (int64_t)k, rows, 1, 1);
      OP(d, "top_k", vkrt_op_top_k(&values, &ids, &logits));
      TRY(vkrt_cmd_copy_buffer(st->out_host, out_top_k(g, cols, ps->batch ? g->logit_rows : 1),
                               dv->top_k, 0, k * rows * 8));
    }
    if (ps->want_logits)
      TRY(vkrt_cmd_copy_buffer(st->out_host, out_logits(cols), dv->logits, 0,
                               (uint64_t)V * rows * 4));
  }
  return VKRT_OK;
}

static uint64_t out_top_k(const struct llama_gpu *g, uint32_t cols, uint32_t rows) {
  return out_logits(cols) + (uint64_t)rows * g->m->hp.n_vocab * 4;
}

/* Row `row` of the top-k region of a result buffer for `cap` rows, filled by a pass of
 * `rows` rows (its values, then its ids) */
static void top_k_row(const struct llama_gpu *g, const uint8_t *out, uint32_t cols, uint32_t cap,
                      uint32_t rows, uint32_t row, const float **values, const int32_t **ids) {
  const uint8_t *at = out + out_top_k(g, cols, cap);
  uint64_t k = g->p.top_k;
  *values = (const float *)(at + (uint64_t)row * k * 4);
  *ids = (const int32_t *)(at + k * rows * 4 + (uint64_t)row * k * 4);
}

/* Records a pass on every local device: the step copy, the embedding of its columns, every
 * layer, the output head. */
static vkrt_status record_pass(struct llama_gpu *g, const struct pass *ps) {
  const struct llama_model *m = g->m;
  const struct llama_hparams *hp = &m->hp;
  vkrt_status s;
  g->failed = NULL; /* a failure named by an earlier recording is not this one's */
  uint32_t cols = ps->batch ? g->cols : 1;
  for (uint32_t d = 0; d < g->n; d++) {
    struct gpu_device *dv = &g->dev[d];
    struct gpu_steps *st = &dv->st[ps->batch];
    TRY(vkrt_cmd_copy_buffer(st->step, 0, st->step_host, 0, (uint64_t)STEP_ARGMAX * cols * 4));
    vkrt_tensor x = cols_f32(dv->x, hp->n_embd, 0, ps->n);
    vkrt_tensor table = vkrt_tensor_contiguous(dv->tok_embd, 0, m->tok_embd->type, hp->n_embd,
                                               hp->n_vocab, 1, 1);
    vkrt_tensor token = step_i32(g, dv, ps, STEP_TOKEN, ps->n);
    OP(d, "token_embd", vkrt_op_get_rows(&x, &table, &token));
  }
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    for (uint32_t d = 0; d < g->n; d++)
      if ((s = attention(g, d, l, ps)))
        return s;
    if ((s = residual(g, l, false, ps)))
      return s;
    for (uint32_t d = 0; d < g->n; d++)
      if ((s = feed_forward(g, d, l, ps)))
        return s;
    if ((s = residual(g, l, true, ps)))
      return s;
  }
  return output_head(g, ps);
}

vkrt_status llama_gpu_record(struct llama_gpu *g, bool want_logits) {
  struct pass ps = {.n = 1, .r0 = 0, .batch = false, .want_logits = want_logits};
  g->fused = (struct llama_gpu_fused){0};
  return record_pass(g, &ps);
}

struct llama_gpu_fused llama_gpu_fused(const struct llama_gpu *g) { return g->fused; }

vkrt_status llama_gpu_record_batch(struct llama_gpu *g, uint32_t n, uint32_t out_rows,
                                   bool want_logits) {
  if (!g->p.ubatch || n == 0 || n > g->cols || out_rows == 0 || out_rows > n ||
      out_rows > g->logit_rows) {
    g->failed = "llama_gpu_record_batch: no prompt pass, or a ubatch of 0 or more tokens than "
                "its buffers hold, or more rows of logits than they hold";
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  struct pass ps = {.n = n, .r0 = n - out_rows, .batch = true, .want_logits = want_logits};
  g->last_batch = ps;
  return record_pass(g, &ps);
}

void llama_gpu_set_hooks(struct llama_gpu *g, const struct llama_gpu_hooks *hooks) {
  g->hooks = hooks ? *hooks : (struct llama_gpu_hooks){0};
}

const char *llama_gpu_failed(const struct llama_gpu *g) { return g->failed ? g->failed : ""; }

vkrt_status llama_gpu_capture(struct llama_gpu *g, char *why, size_t why_size) {
  for (int with_logits = 0; with_logits < 2; with_logits++) {
    vkrt_status s = vkrt_graph_begin(g->app);
    if (s != VKRT_OK) {
      snprintf(why, why_size, "%s", vkrt_last_error(g->app));
      vkrt_graph_destroy(g->graph[0]);
      g->graph[0] = NULL;
      return s;
    }
    vkrt_status rec = llama_gpu_record(g, with_logits);
    const char *failed = g->failed;
    s = vkrt_graph_end(g->app, &g->graph[with_logits]);
    if (rec != VKRT_OK || s != VKRT_OK) {
      g->failed = rec != VKRT_OK ? failed : "vkrt_graph_end";
      snprintf(why, why_size, "%s", vkrt_last_error(g->app));
      vkrt_graph_destroy(g->graph[0]);
      vkrt_graph_destroy(g->graph[1]);
      g->graph[0] = g->graph[1] = NULL;
      return rec != VKRT_OK ? rec : s;
    }
  }
  snprintf(why, why_size, "captured");
  return VKRT_OK;
}

bool llama_gpu_captured(const struct llama_gpu *g) { return g->graph[0] && g->graph[1]; }

vkrt_status llama_gpu_launch(struct llama_gpu *g, bool want_logits, uint64_t *tickets) {
  TRY(vkrt_graph_launch(g->graph[want_logits], tickets));
  return VKRT_OK;
}

int32_t llama_gpu_argmax(const struct llama_gpu *g, uint32_t device) {
  int32_t id;
  memcpy(&id, g->dev[device].st[0].out_map, 4);
  return id;
}

int32_t llama_gpu_sampled(const struct llama_gpu *g, uint32_t device) {
  int32_t id;
  memcpy(&id, g->dev[device].st[0].out_map + out_samples(1), 4);
  return id;
}

int32_t llama_gpu_batch_sampled(const struct llama_gpu *g, uint32_t device, uint32_t j) {
  const struct pass *ps = &g->last_batch;
  if (j < ps->r0 || j >= ps->n)
    return -1;
  int32_t id;
  memcpy(&id, g->dev[device].st[1].out_map + out_samples(g->cols) + (uint64_t)(j - ps->r0) * 4,
         4);
  return id;
}

uint32_t llama_gpu_top_k(const struct llama_gpu *g, uint32_t device, const float **values,
                         const int32_t **ids) {
  if (!g->p.top_k)
    return 0;
  top_k_row(g, g->dev[device].st[0].out_map, 1, 1, 1, 0, values, ids);
  return g->p.top_k;
}

uint32_t llama_gpu_batch_top_k(const struct llama_gpu *g, uint32_t device, uint32_t j,
                               const float **values, const int32_t **ids) {
  const struct pass *ps = &g->last_batch;
  if (!g->p.top_k || j < ps->r0 || j >= ps->n)
    return 0;
  top_k_row(g, g->dev[device].st[1].out_map, g->cols, g->logit_rows, ps->n - ps->r0, j - ps->r0,
            values, ids);
  return g->p.top_k;
}

const float *llama_gpu_logits(const struct llama_gpu *g, uint32_t device) {
  return (const float *)(g->dev[device].st[0].out_map + out_logits(1));
}

int32_t llama_gpu_batch_argmax(const struct llama_gpu *g, uint32_t device, uint32_t j) {
  const struct pass *ps = &g->last_batch;
  if (j < ps->r0 || j >= ps->n)
    return -1;
  int32_t id;
  memcpy(&id, g->dev[device].st[1].out_map + (uint64_t)(j - ps->r0) * 4, 4);
  return id;
}

const float *llama_gpu_batch_logits(const struct llama_gpu *g, uint32_t device, uint32_t j) {
  const struct pass *ps = &g->last_batch;
  if (j < ps->r0 || j >= ps->n || !ps->want_logits)
    return NULL;
  return (const float *)(g->dev[device].st[1].out_map + out_logits(g->cols) +
                         (uint64_t)(j - ps->r0) * g->m->hp.n_vocab * 4);
}

uint64_t llama_gpu_weight_bytes(const struct llama_gpu *g) {
  uint64_t most = 0;
  for (uint32_t d = 0; d < g->n; d++)
    most = g->dev[d].weight_bytes > most ? g->dev[d].weight_bytes : most;
  return most;
}

uint64_t llama_gpu_kv_bytes(const struct llama_gpu *g, uint32_t kv_len) {
  uint64_t most = 0;
  for (uint32_t d = 0; d < g->n; d++) {
    uint64_t b = 2ull * g->m->hp.n_layer * kv_row_bytes(g, g->dev[d].sp.n_head_kv) * kv_len;
    most = b > most ? b : most;
  }
  return most;
}

uint32_t llama_gpu_ops_per_token(const struct llama_gpu *g) {
  const struct llama_model *m = g->m;
  /* step copy, get_rows; per layer norm, q/k/v (one op fused), 2 rope (one fused), 2
   * set_rows, attention, norm, gate and up (one fused), swiglu and the two residuals (one
   * matmul_add each), less the norms and the swiglu folded into the q4_K products; norm
   * (folded into a q4_K head), head, argmax, the argmax copy (+ the logits copy) */
  const struct pass token = {.n = 1};
  uint32_t ops = 2 + 5 - fuse(g, &token, m->output->type, LLAMA_FUSE_NORM);
  for (uint32_t l = 0; l < m->hp.n_layer; l++) {
    const struct llama_layer *L = &m->layer[l];
    ops += 15 - (qkv_fused(L) ? 3 : 0) - (gate_up_fused(L) ? 1 : 0);
    ops -= qkv_fused(L) && fuse(g, &token, L->wq->type, LLAMA_FUSE_NORM);
    ops -= qkv_fused(L) && fuse_rope(g, L->wq->type) ? 3 : 0; /* rope q, the two cache rows */
    ops -= gate_up_fused(L) ? fuse(g, &token, L->ffn_gate->type, LLAMA_FUSE_NORM) +
                                  fuse(g, &token, L->ffn_gate->type, LLAMA_FUSE_SWIGLU)
                            : 0;
  }
  return ops;
}

uint64_t llama_gpu_uploaded(const struct llama_gpu *g) {
  uint64_t sum = 0;
  for (uint32_t d = 0; d < g->n; d++)
    sum += g->dev[d].uploaded;
  return sum;
}
