/* A llama-architecture model for vkrt-service: hyper-parameters and tensors from a GGUF file
 * (llama_model.c), the tokenizers (SentencePiece and GPT-2's byte-level BPE: tokenizer.c),
 * the sampler (sampler.c), the float64 CPU reference of the forward pass (llama_ref.c) and the
 * tensor-parallel forward pass on the appliance's devices (llama_gpu.c).
 *
 * The model is a consumer of the public API: it lives with the service, not in libvkrt. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "vkrt/vkrt.h"

#define LLAMA_MAX_LAYERS 256u

struct llama_hparams {
  uint32_t n_layer;       /* llama.block_count */
  uint32_t n_embd;        /* llama.embedding_length */
  uint32_t n_ff;          /* llama.feed_forward_length */
  uint32_t n_head;        /* llama.attention.head_count */
  uint32_t n_head_kv;     /* llama.attention.head_count_kv (n_head when absent) */
  uint32_t head_dim;      /* n_embd / n_head */
  uint32_t n_rot;         /* llama.rope.dimension_count (head_dim when absent) */
  uint32_t n_ctx_train;   /* llama.context_length */
  uint32_t n_vocab;       /* rows of token_embd */
  float eps;              /* llama.attention.layer_norm_rms_epsilon */
  float rope_freq_base;   /* llama.rope.freq_base (10000 when absent) */
  float rope_freq_scale;  /* 1 / llama.rope.scaling.factor (or the older .scale_linear): linear
                             context scaling; 1 when absent */
};

struct llama_layer {
  const struct gguf_tensor *attn_norm;             /* f32 {n_embd} */
  const struct gguf_tensor *wq, *wk, *wv, *wo;     /* {n_embd, n_head*hd}, {n_embd, n_head_kv*hd} x2, {n_head*hd, n_embd} */
  const struct gguf_tensor *ffn_norm;              /* f32 {n_embd} */
  const struct gguf_tensor *ffn_gate, *ffn_up;     /* {n_embd, n_ff} */
  const struct gguf_tensor *ffn_down;              /* {n_ff, n_embd} */
};

struct llama_model {
  const struct gguf_file *file;
  struct llama_hparams hp;
  const struct gguf_tensor *tok_embd;              /* {n_embd, n_vocab} */
  const struct gguf_tensor *output_norm;           /* f32 {n_embd} */
  const struct gguf_tensor *output;                /* {n_embd, n_vocab}; tok_embd when tied */
  const struct gguf_tensor *rope_freqs;            /* f32 {n_rot / 2}: pair p turns by theta_p /
                                                      rope_freqs[p] (Llama 3.1's scaling); NULL
                                                      when the file has none */
  bool output_tied;
  struct llama_layer layer[LLAMA_MAX_LAYERS];
  uint32_t converted[GGML_TYPE_COUNT]; /* matrices converted on the host, by their file type */
};

/* Reads the hyper-parameters and finds every tensor, checking architecture ("llama"), the
 * presence, type (f32, f16, q8_0, q4_K, q6_K; norms f32) and shape of each against the metadata,
 * and that n_head is a multiple of n_head_kv; matrices of q4_0, q4_1, q5_0, q5_1, q2_K, q3_K,
 * q5_K or bf16 are converted on the host (gguf_convert: q8_0 or f32, exactly) and counted in
 * converted[]. Returns 0 or GGUF_E_* with a message naming the key or tensor in err. */
int llama_model_load(struct gguf_file *f, struct llama_model *out, char *err, size_t err_size);
/* Bytes of weights read per token (every tensor once; the output head once). */
uint64_t llama_weight_bytes(const struct llama_model *m);

/* ---- tokenizer ------------------------------------------------------------------------------
 * tokenizer.ggml.model "llama": SentencePiece (score-ordered merges, <0xNN> byte fallback;
 * tokenizer.c). "gpt2": GPT-2's byte-level BPE with the Llama 3 pre-tokenizer
 * (tokenizer.ggml.pre "llama-bpe", "llama3", "default" or absent; tokenizer_bpe.c), as
 * llama.cpp's llm_tokenizer_bpe: control, user-defined and unknown tokens written in the text
 * are taken as themselves first (llama.cpp's parse_special), the rest pre-tokenized by the
 * Llama 3 regex, each piece's bytes mapped to GPT-2's printable characters and merged by
 * tokenizer.ggml.merges, lowest rank first (leftmost on ties); a piece that is a token as a
 * whole is taken whole (Llama 3's ignore_merges). */
struct llama_vocab;
enum llama_vocab_type { LLAMA_VOCAB_SPM, LLAMA_VOCAB_BPE };
/* tokenizer.ggml.model must be "llama" or "gpt2"; tokens required, scores and token types
 * optional; tokenizer.ggml.bos_token_id required (a vocabulary without BOS is refused), eos,
 * eot and unknown optional; tokenizer.ggml.add_bos_token optional (default true). "gpt2"
 * needs tokenizer.ggml.merges ("A B": tokens whose concatenation is a token; rank = index)
 * and every byte's character among the tokens is expected (a missing one tokenizes as
 * unknown, or is dropped without one); another tokenizer.ggml.pre is refused by name. The
 * pieces point into f, which must outlive the vocabulary. */
int llama_vocab_load(const struct gguf_file *f, struct llama_vocab **out, char *err,
                     size_t err_size);
void llama_vocab_free(struct llama_vocab *v);
enum llama_vocab_type llama_vocab_kind(const struct llama_vocab *v);
uint32_t llama_vocab_size(const struct llama_vocab *v);
int32_t llama_vocab_bos(const struct llama_vocab *v);
int32_t llama_vocab_eos(const struct llama_vocab *v);
int32_t llama_vocab_eot(const struct llama_vocab *v);   /* -1 when the file names none */
bool llama_vocab_add_bos(const struct llama_vocab *v);  /* tokenizer.ggml.add_bos_token */
/* Whether id ends a generation: EOS, or EOT (Llama 3 instruct ends a turn with <|eot_id|>
 * while EOS is <|end_of_text|>). */
bool llama_vocab_is_eog(const struct llama_vocab *v, int32_t id);
/* Text to ids, with BOS first when add_bos (callers pass llama_vocab_add_bos). Returns the
 * count, or -1 when out_cap is too small (or out of memory). SentencePiece: as llama.cpp's
 * llm_tokenizer_spm (a space prepended, spaces as U+2581); a character without a piece
 * becomes its UTF-8 bytes' <0xNN> tokens (<unk> where the vocabulary lacks one). BPE: at most
 * one id per byte of text. */
int32_t llama_tokenize(const struct llama_vocab *v, const char *text, bool add_bos, int32_t *out,
                       int32_t out_cap);
/* The text piece of one id (SentencePiece: byte tokens as their byte, U+2581 as a space; BPE:
 * GPT-2's characters as their bytes); user-defined tokens as their text, "" for control
 * tokens. Returns the length written (NUL-terminated, truncated to cap - 1). */
size_t llama_token_piece(const struct llama_vocab *v, int32_t id, char *buf, size_t cap);

/* ---- sampling ------------------------------------------------------------------------------ */
struct llama_sampler_params {
  float temperature;  /* 0: greedy (argmax, lowest id on ties) */
  uint32_t top_k;     /* 0: off */
  float top_p;        /* 1: off */
  uint64_t seed;
};
/* How the last draw chose its candidates (what tests assert). */
enum llama_sample_path {
  LLAMA_SAMPLE_GREEDY,        /* argmax: temperature 0, or no finite weights */
  LLAMA_SAMPLE_TOP_K,         /* the k best by a heap, then top-p among them */
  LLAMA_SAMPLE_ALL,           /* every token */
  LLAMA_SAMPLE_NUCLEUS_NEAR,  /* top-p: the crossing found among the buckets near the best */
  LLAMA_SAMPLE_NUCLEUS_FAR,   /* top-p: past them, every bucket summed apart */
  LLAMA_SAMPLE_TOP_K_GIVEN,   /* the k best given (the device's vkrt_op_top_k), then top-p */
};
struct llama_sampler {
  struct llama_sampler_params p;
  uint64_t state;     /* xorshift64* */
  enum llama_sample_path path;
  int32_t nucleus_last; /* top-p: the nucleus's last member in the sorted order */
};
void llama_sampler_init(struct llama_sampler *s, const struct llama_sampler_params *p);
/* One id from logits[n_vocab] (scratch: n_vocab floats + n_vocab ints the sampler may use). */
int32_t llama_sample(struct llama_sampler *s, const float *logits, uint32_t n_vocab,
                     void *scratch);
/* One id from the k best logits given in order (values largest first, the lower id first on
 * ties, NaN as -inf, as vkrt_op_top_k gives them; k = the sampler's top_k): the draw
 * llama_sample makes from the whole row with that top_k, the same id for the same state. */
int32_t llama_sample_top_k(struct llama_sampler *s, const float *values, const int32_t *ids,
                           uint32_t k, void *scratch);
/* The largest top-k the device gives the candidates of (vkrt_op_top_k's k) */
#define LLAMA_DEVICE_TOP_K_MAX 64
/* Top-1 minus top-2 logit. */
float llama_top2_margin(const float *logits, uint32_t n_vocab);

/* ---- float64 reference ----------------------------------------------------------------------
 * The whole forward pass in double from the file's weights (dequantized by
 * vkrt_dequantize_row), RoPE in ggml's normal mode, grouped-query attention, a KV cache of
 * n_ctx tokens in double; kv_type VKRT_TYPE_Q8_0 rounds cached K and V through q8_0 the way
 * the device does, VKRT_TYPE_F16 through f16, so the reference sees what the device caches. */
struct llama_ref;
int llama_ref_create(const struct llama_model *m, uint32_t n_ctx, vkrt_type kv_type,
                     struct llama_ref **out, char *err, size_t err_size);
void llama_ref_free(struct llama_ref *r);
/* Runs token at position pos (0-based, < n_ctx) and writes n_vocab logits. */
int llama_ref_forward(struct llama_ref *r, int32_t token, uint32_t pos, double *logits);

/* ---- --make-gguf ------------------------------------------------------------------------ */
struct llama_make_params {
  uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
  float rope_freq_base, eps;
  vkrt_type type;     /* matrices; norms stay f32 */
  uint64_t seed;
  bool tie_output;    /* no output.weight: the head is token_embd */
  float rope_linear;  /* > 0: llama.rope.scaling.type "linear" with this factor (every angle
                         divided by it); 0: none */
  float rope_factor;  /* > 0: rope_freqs.weight as Llama 3.1 scales RoPE (convert_hf_to_gguf's
                         llama3 factors: this factor, low 1, high 4, 8192 original positions);
                         0: none */
  bool q4_k_m;        /* type q4_K with q6_K where llama.cpp's Q4_K_M puts it: the output
                         head (token_embd when tied), attn_v and ffn_down of the first and
                         last eighth of the layers and every third between */
  enum llama_vocab_type vocab; /* SentencePiece (the default) or GPT-2 byte-level BPE */
  uint32_t foreign;   /* a ggml type without kernels (q4_0 ... bf16, foreign.c) for every
                         matrix instead of `type` (which is then what it converts to); 0: none */
};
/* "llama3-8b", "llama3.2-1b", "qwen2.5-7b": real hyper-parameters (n_vocab as given by the
 * caller may shrink the vocabulary). false for an unknown name. Sets every field but type,
 * seed, q4_k_m, rope_linear and vocab (rope_factor: 32 for llama3.2-1b, whose RoPE is
 * scaled; 0 for the others). */
bool llama_preset(const char *name, struct llama_make_params *out);
/* Writes a llama-architecture GGUF with random weights and a valid vocabulary of n_vocab
 * tokens: SentencePiece (tokenizer.ggml.tokens/scores/token_type, bos/eos ids), or with
 * vocab LLAMA_VOCAB_BPE byte-level BPE as Llama 3's files have it (tokenizer.ggml.model gpt2,
 * pre llama-bpe, tokens, token_type, merges, bos/eos/eot ids, add_bos_token): the 256 byte
 * characters, pieces built by merges (common words with and without their leading space,
 * two-digit numbers, punctuation and white-space runs, then every lowercase word by length)
 * and <|begin_of_text|> (BOS), <|end_of_text|> (EOS), <|eot_id|> (EOT) last, as control
 * tokens. Streams the file: memory use is one row (and a BPE vocabulary, built first). Weights keep unit activations (matrices of
 * standard deviation 1/sqrt(K), the embedding's too, norm weights near 1). Bad
 * parameters: GGUF_E_BAD_VALUE with the reason. */
int llama_write_gguf(const char *path, const struct llama_make_params *p, char *err,
                     size_t err_size);

/* ---- the tensor-parallel forward pass on the appliance's devices (llama_gpu.c) ------------
 * Rank r of R holds: the query heads of KV heads [kv_head0, kv_head0 + n_head_kv) (n_head_kv
 * of the model divided by R: a rank holds whole KV-head groups, so grouped-query attention
 * stays on the rank) with their rows of attn_q/k/v, their columns of attn_output and their KV
 * cache; rows [ff0, ff0 + n_ff) of ffn_gate/up and those columns of ffn_down (whole blocks of
 * ffn_down's type); rows [vocab0, vocab0 + n_vocab) of the output head. attn_output and
 * ffn_down give partial sums that an allreduce adds; the output head's slices are gathered by
 * an allreduce of buffers that are zero outside each rank's rows (a sum with zeros is exact),
 * so each device reads 1/R of the head per token instead of all of it (on Llama-3-8B shapes the
 * head is 1 GiB of f16). Norms and the token embedding (one row read per token) are
 * replicated. */
struct llama_split {
  uint32_t head0, n_head;       /* query heads */
  uint32_t kv_head0, n_head_kv; /* KV heads (and their cache) */
  uint32_t ff0, n_ff;           /* feed-forward slice */
  uint32_t vocab0, n_vocab;     /* output-head rows */
};
/* Rank `rank` of `ranks`'s share (a pure function of the model's shapes and types). false
 * with the reason in err when the model cannot be split so: n_head_kv not a multiple of ranks,
 * a rank's attn_output columns or ffn_down slice not whole blocks of their type, fewer
 * vocabulary rows than ranks. */
bool llama_split_plan(const struct llama_model *m, uint32_t ranks, uint32_t rank,
                      struct llama_split *out, char *err, size_t err_size);

/* What a token's f16, f32 and q4_K products (with 8-bit x also q8_0) fold into their
 * dispatch (vkrt_op_matmul_fused) */
#define LLAMA_FUSE_NORM 1u   /* the RMS norm before q/k/v, gate/up and the output head */
#define LLAMA_FUSE_SWIGLU 2u /* the swiglu after gate/up */
/* The swiglu always, the norm where the hidden size is at most LLAMA_FUSE_NORM_MAX_HIDDEN,
 * the K up to which the fused kernel stages x g in shared memory once per workgroup
 * (kernels/matvec_q_stream.comp STAGE_MAX_K); past it the kernel multiplies x by g in its
 * loop, which slowed the products more than the dependent step saves (Llama-3-8B q4_K on
 * an H100, that form: -2.1 % against no fusion). Staged, the same H100 (tools/gpu-ab.sh,
 * tg tok/s against no fusion): Llama-3-8B q4_K swiglu +2.3 %, swiglu and norm +4.4 %;
 * Llama-3.2-1B q4_K +3.8 % and +12.7 %. With 8-bit x (VKRT_ACTIVATIONS_Q8) the fused kernel
 * is the q8x one, which rounds x g in shared memory for any K it takes: the norm up to
 * VKRT_ACTIVATIONS_Q8_MAX_K. */
#define LLAMA_FUSE_AUTO 4u
#define LLAMA_FUSE_NORM_MAX_HIDDEN 4096u
/* f16 and f32 w: the fused kernel multiplies x by g as it loads each chunk of x (every
 * workgroup reads all of x anyway) at any hidden size */
#define LLAMA_FUSE_NORM_MAX_HIDDEN_DENSE UINT32_MAX
/* --fuse's names: index = the LLAMA_FUSE_* bits, 4 = auto */
static const char *const llama_fuse_names[5] = {"none", "norm", "swiglu", "all", "auto"};

struct llama_gpu_params {
  uint32_t n_ctx;       /* KV-cache rows (tokens) */
  uint32_t depth;       /* rows before the first token: filled with a constant, not zeros */
  vkrt_type kv_type;    /* VKRT_TYPE_F16 or VKRT_TYPE_Q8_0 */
  uint32_t ubatch;      /* the prompt pass's most tokens at once (0: no prompt pass) */
  uint32_t ubatch_logits; /* rows of logits a prompt pass may copy out (1..ubatch) */
  uint32_t first_rank;  /* this host's device d is rank first_rank + d */
  uint32_t ranks;       /* every device of every host */
  const char *path;     /* the model file the weights are loaded from (vkrt_load_file) */
  vkrt_progress_fn progress; /* the load's progress (may be NULL) */
  void *progress_user;
  vkrt_load_info *load_info; /* how the load went (may be NULL) */
  vkrt_load_path load_path;  /* vkrt_load_file's path (VKRT_LOAD_PATH_AUTO: its choice) */
  unsigned fuse;             /* LLAMA_FUSE_* bits: what a token's products take into their
                                dispatch (vkrt_op_matmul_fused) */
  bool q8_activations;       /* the appliance rounds x to 8 bits (VKRT_ACTIVATIONS_Q8) */
  bool fuse_rope;            /* a token's q/k/v product turns q and K by RoPE and writes the
                                K/V cache rows in its dispatch where it can (--fuse-rope) */
  uint32_t top_k;            /* 1..64: each row of the head's top_k largest logits and their
                                ids on the device (vkrt_op_top_k; llama_gpu_top_k), so a host
                                top-k draw reads those instead of the logits; its argmax then
                                only in the work that copies the logits out; 0: none */
  float sample_temperature;  /* > 0: each row of the head is drawn from softmax(logits / T)
                                on the device (vkrt_op_sample; llama_gpu_sampled); its argmax
                                then only in the work that copies the logits out */
};
struct llama_gpu;
/* Loads every local device's shard from the model file (one vkrt_load_file: every device in
 * flight at once) and creates its activations, KV cache and the
 * per-token step buffers. 0; 1 with the reason in err when the model or the parameters do not
 * fit (the split, kv_type); 2 when a libvkrt call failed (its message in err). */
int llama_gpu_create(vkrt_appliance *app, const struct llama_model *m,
                     const struct llama_gpu_params *p, struct llama_gpu **out, char *err,
                     size_t err_size);
void llama_gpu_free(struct llama_gpu *g);
const struct llama_split *llama_gpu_split(const struct llama_gpu *g, uint32_t device);
/* The next token's id and position, written to every device's host-visible step buffer: the
 * work recorded by llama_gpu_record reads them (token, position, position + 1 attended
 * tokens) on the device, so the same recorded work serves every token. The devices must have
 * finished the previous token. */
void llama_gpu_set_step(struct llama_gpu *g, int32_t token, uint32_t pos);
/* The next draw's key (vkrt_op_sample's two words; a prompt pass's column j takes the high
 * word + j): llama_gpu_set_step or llama_gpu_set_batch, called after it, writes it with the
 * pass's step. */
void llama_gpu_set_key(struct llama_gpu *g, uint64_t key);
/* Records one token's forward pass on every local device (not submitted): embedding, every
 * layer, the output head, the argmax on the device and, with want_logits, a copy of the
 * logits for the host. VKRT_OK or the failed call's status (llama_gpu_failed names it, the
 * appliance's vkrt_last_error says why). */
vkrt_status llama_gpu_record(struct llama_gpu *g, bool want_logits);
const char *llama_gpu_failed(const struct llama_gpu *g);
/* The products device 0 ran with the RMS norm (qkv, gate/up, head), with the swiglu (gate/up)
 * and with the RoPE and cache rows (qkv) folded into their dispatch in the token recorded
 * last (llama_gpu_params.fuse, fuse_rope). */
struct llama_gpu_fused {
  uint32_t norm, swiglu;
  uint32_t rope; /* q/k/v products with their RoPE and cache rows (llama_gpu_params.fuse_rope) */
};
struct llama_gpu_fused llama_gpu_fused(const struct llama_gpu *g);
/* Calls around each op the records make (vkrt-service --profile times them): before(device,
 * what) and after(device), device UINT32_MAX for a collective of every device; a status other
 * than VKRT_OK fails the recording. skip(device, what) true leaves the op out of the record
 * (vkrt-service --time-without: what the token costs without it; its results are then
 * wrong). NULL or zeroed hooks: none. */
struct llama_gpu_hooks {
  void *user;
  vkrt_status (*before)(void *user, uint32_t device, const char *what);
  vkrt_status (*after)(void *user, uint32_t device);
  bool (*skip)(void *user, uint32_t device, const char *what);
};
void llama_gpu_set_hooks(struct llama_gpu *g, const struct llama_gpu_hooks *hooks);
/* The prompt pass: ids[0..n) at positions pos0.. (n <= ubatch) written to every device's
 * host-visible ubatch step buffer (the positions, and pos + 1 attended tokens each: causal).
 * The devices must have finished the previous work. INVALID_ARGUMENT (llama_gpu_failed says
 * why) without a prompt pass, for n = 0 or past the ubatch or the context. */
vkrt_status llama_gpu_set_batch(struct llama_gpu *g, const int32_t *ids, uint32_t n,
                                uint32_t pos0);
/* Records the forward pass of the n tokens set by llama_gpu_set_batch on every local device
 * (not submitted): every column's K/V rows written to the cache, and the output head, argmax
 * on the device and (want_logits) a logits copy for the host of the last out_rows tokens only
 * (1 <= out_rows <= ubatch_logits). INVALID_ARGUMENT for n or out_rows out of range. */
vkrt_status llama_gpu_record_batch(struct llama_gpu *g, uint32_t n, uint32_t out_rows,
                                   bool want_logits);
/* After the recorded prompt pass completed: device d's greedy id and (want_logits) logits
 * of token j of the ubatch; -1 and NULL for a token the head did not compute. */
int32_t llama_gpu_batch_argmax(const struct llama_gpu *g, uint32_t device, uint32_t j);
const float *llama_gpu_batch_logits(const struct llama_gpu *g, uint32_t device, uint32_t j);
/* Captures the token's recorded work once (with and without the logits copy) as graphs
 * (vkrt_graph_*): a token then costs one launch per device instead of recording every op.
 * VKRT_OK when captured; VKRT_ERROR_UNSUPPORTED or VKRT_ERROR_UNAVAILABLE when the appliance
 * cannot capture (the reason in why: tokens are then recorded directly); another status when
 * recording failed (llama_gpu_failed). */
vkrt_status llama_gpu_capture(struct llama_gpu *g, char *why, size_t why_size);
bool llama_gpu_captured(const struct llama_gpu *g);
/* Runs one token on every local device by launching the captured graph (llama_gpu_captured;
 * otherwise record with llama_gpu_record and vkrt_submit); tickets[d] for vkrt_wait. */
vkrt_status llama_gpu_launch(struct llama_gpu *g, bool want_logits, uint64_t *tickets);
/* After the recorded work completed: device d's greedy id and (want_logits) its n_vocab
 * logits. */
int32_t llama_gpu_argmax(const struct llama_gpu *g, uint32_t device);
/* With a sample temperature: the token's draw on the device (llama_gpu_batch_sampled: a
 * prompt pass's column j, -1 outside the head's columns). */
int32_t llama_gpu_sampled(const struct llama_gpu *g, uint32_t device);
/* With top_k: the last token's candidates (its largest logits, largest first, the lower id
 * first on ties; NaN as -inf) and their ids; returns k (0 without top_k). The batch form:
 * column j of the last ubatch (0 where it has no head row). */
uint32_t llama_gpu_top_k(const struct llama_gpu *g, uint32_t device, const float **values,
                         const int32_t **ids);
uint32_t llama_gpu_batch_top_k(const struct llama_gpu *g, uint32_t device, uint32_t j,
                               const float **values, const int32_t **ids);
int32_t llama_gpu_batch_sampled(const struct llama_gpu *g, uint32_t device, uint32_t j);
const float *llama_gpu_logits(const struct llama_gpu *g, uint32_t device);
/* Per token, the most any local device reads: weight bytes, and K/V-cache bytes at kv_len
 * attended tokens; the ops recorded per device per token. */
uint64_t llama_gpu_weight_bytes(const struct llama_gpu *g);
uint64_t llama_gpu_kv_bytes(const struct llama_gpu *g, uint32_t kv_len);
uint32_t llama_gpu_ops_per_token(const struct llama_gpu *g);
/* Bytes uploaded to every local device together. */
uint64_t llama_gpu_uploaded(const struct llama_gpu *g);
