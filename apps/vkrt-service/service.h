/* vkrt-service's state and steps; main.c runs them in order: the arguments (args.c), the
 * weights file (weights.c), the appliance (appliance.c), each device's shard and the roofline
 * (shards.c), the decode loop (decode.c), the float64 check (reference.c) and the closing
 * lines (summary.c). Each step returns 0 or the exit status that ends the service; what it
 * created stays in struct service and is released in one place (appliance_close,
 * decode_free, weights_close). */
#pragma once
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "llama.h"
#include "vkrt/vkrt.h"

/* EXIT_WEIGHTS: the file is not a model this service runs (not GGUF, another architecture, a
 * missing or mis-shaped tensor, no BOS); EXIT_FIT: a good model that cannot be split over
 * these devices or with these options (head counts, blocks, K/V type). */
enum { EXIT_VERIFY = 1, EXIT_USAGE = 2, EXIT_WEIGHTS = 3, EXIT_RUNTIME = 4, EXIT_FIT = 5 };

#define MAX_LAYERS 64 /* this example */

/* A libvkrt call that must succeed (with `app` in scope): otherwise its failure is printed
 * and the calling step returns EXIT_RUNTIME. */
#define CHECK(call)                                                                       \
  do {                                                                                    \
    vkrt_status s_ = (call);                                                              \
    if (s_ != VKRT_OK) {                                                                  \
      fprintf(stderr, "vkrt-service: %s failed: %s: %s\n", #call, vkrt_status_str(s_),    \
              vkrt_last_error(app));                                                      \
      return EXIT_RUNTIME;                                                                \
    }                                                                                     \
  } while (0)

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A hash of n bytes, continuing from h (start: HASH_INIT): what hosts compare bit for bit.
 * FNV-1a's step on four lanes of 8-byte words, so a row of 128256 logits is four short
 * chains of multiplications, not one per byte (0.8 ms a token on a slow host); the bytes
 * past the last whole 32 one at a time. */
#define HASH_INIT 0xcbf29ce484222325ull
#define HASH_PRIME 0x100000001b3ull
static inline uint64_t bits_hash(uint64_t h, const void *p, size_t n) {
  const uint8_t *bytes = p;
  uint64_t lane[4] = {h, h ^ 1, h ^ 2, h ^ 3};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; j++) {
      uint64_t word;
      memcpy(&word, bytes + i + 8 * j, sizeof(word));
      lane[j] = (lane[j] ^ word) * HASH_PRIME;
    }
  h = lane[0];
  for (int j = 1; j < 4; j++)
    h = (h ^ lane[j]) * HASH_PRIME;
  for (; i < n; i++)
    h = (h ^ bytes[i]) * HASH_PRIME;
  return h;
}

struct service_args {
  const char *weights_path, *make_path;
  uint64_t tokens, layers, hidden, ffn, seed, devices;
  double seconds, warmup_ms;
  uint64_t chunk_cap;
  const char *preset;             /* --make-gguf of a whole llama model: --preset or --heads */
  uint64_t heads, kv_heads, vocab;
  enum llama_vocab_type vocab_type; /* --vocab-type spm|gpt2 */
  bool vocab_type_given;
  const char *make_only;          /* the first option given that only --make-gguf takes */
  bool verbose, fault_import, tokens_given, q8_activations, f16_activations;
  vkrt_type dtype;
  bool q4_k_m;                    /* --dtype q4_K_M: q4_K with q6_K where llama.cpp puts it */
  uint32_t foreign;               /* --dtype q4_0, q5_K, bf16, ...: a ggml type without kernels
                                     (foreign.c) for a llama model's matrices; 0: dtype's */
  float rope_factor;              /* --rope-freqs F (-1: not given, the preset's) */
  float rope_linear;              /* --rope-linear F */
  /* llama mode */
  const char *prompt;
  uint64_t ctx, top_k, verify;   /* verify: positions checked against float64 (all: default) */
  uint64_t prompt_tokens;        /* --prompt-tokens: BOS + drawn ids instead of a text */
  uint64_t depth;                /* --depth: the first token's position (rows before: a constant) */
  uint64_t ubatch;               /* --ubatch: the prompt pass's tokens per ubatch */
  bool prompt_by_token;          /* --prompt-mode token: the prompt through the token's work */
  bool verify_given;
  double temperature, top_p;
  bool host_sampler;             /* --sampler host: every draw from downloaded logits */
  vkrt_type kv_type;
  bool print_ids, no_graph;      /* no_graph: record every token's work (--graph off) */
  bool stream;                   /* --stream: each generated token's text to stderr at once */
  bool convert_f16;              /* --convert f16: types without kernels into f16, not f32 */
  bool fault_capture;            /* --fault capture-fails: the token's capture is refused */
  bool json;                     /* --json: the summary also as one JSON object */
  vkrt_load_path load_path;      /* --load-path: vkrt_load_file's path (auto by default) */
  const char *load_knobs;        /* --load-knobs THREADS,CHUNK,CHUNKS[,BLOCK] (a lab build) */
  const char *lab[8];            /* --lab NAME=VALUE: lab knobs on every device (a lab build) */
  unsigned fuse;                 /* --fuse: LLAMA_FUSE_* bits (default auto) */
  bool fuse_rope;                /* --fuse-rope on: the q/k/v product's RoPE and cache rows */
  int labs;
  bool profile;                  /* --profile: a token's ops timed on the GPU (a lab build) */
  const char *time_without;      /* --time-without: op-name prefixes left out of the records */
};
#define SECONDS_MAX_TOKENS 1000000u
#define KEEP_MAX 16 /* checked tokens at most: each costs a float64 pass over the weights */

struct device_state {
  vkrt_buffer *gate[MAX_LAYERS], *up[MAX_LAYERS], *down[MAX_LAYERS];
  vkrt_buffer *x, *g, *u, *y;
  vkrt_buffer *x_in;             /* host-visible: the next token's input, copied on the GPU */
  float *x_in_map;
  uint32_t f0, f1;               /* this device's ffn slice (whole blocks of ffn_down) */
};

struct service {
  const struct service_args *args;
  const volatile sig_atomic_t *stop; /* the signal that asked the service to stop, or 0 */
  struct gguf_file wf;
  struct gguf_mlp *mlp;           /* the synthetic MLP stack (a file without token_embd) */
  struct llama_model *model;      /* or a llama model */
  struct llama_vocab *vocab;
  struct llama_gpu *gpu;
  vkrt_appliance *app;
  /* n devices here; tensor-parallel ranks: every device of every host (one host without
   * MPI); this host's devices are ranks first_rank.. */
  uint32_t n, ranks, first_rank;
  struct device_state dev[VKRT_MAX_DEVICES];
  vkrt_load_info load;           /* how the shards came from the file (vkrt_load_file) */
  uint64_t uploaded, shard_bytes; /* shard_bytes: the largest device's, per token */
  double t_up;                   /* seconds of the shards' upload */
  double h2d_bw;                 /* bytes per second of a pinned host-to-device upload, this run */
  double h2d_all_bw;             /* the same into every device at once (0: one device) */
  double t_start;                /* now_s() when main began */
  /* now_s() after each step on the way to the first token (0: not reached) */
  double t_parsed, t_opened, t_loaded, t_setup, t_warm;
  double t_first_token;          /* now_s() when the first token was generated (0: none) */
  double load_t0, load_shown;    /* the load's start; the progress line's last update */
  double copy_bw;                /* bytes per second of a plain device copy (read + written) */
  uint64_t left_out;             /* records of device 0's ops --time-without left out */
};

/* The decode loop's timings and the checked tokens (the first, every 16th, the last). */
struct decode {
  double *lat;                   /* latency of each timed token */
  uint64_t done, warm_tokens, profiled;
  double prof[4];                /* input, record, submit, wait: seconds summed over tokens 1.. */
  double t_run, t_end, t_verify; /* t_verify: the checked tokens' downloads, not timed */
  float *xin, *xout;
  float *saved_in, *saved_out;   /* per checked token: its input and rank 0's output */
  uint64_t *saved_tok, verified;
  double worst_err;              /* against the float64 reference */
  bool ranks_differ;             /* a checked token's result differed between ranks or hosts */
};

/* A llama model's run: the fed ids (prompt, then generated), timings, the devices' choices
 * and logits of the checked positions. */
struct generation {
  int32_t *ids;
  uint32_t n_prompt, n_gen, fed, n_ctx;
  double *lat;                   /* per fed position */
  uint64_t warm_tokens, profiled;
  double prof[4];                /* step, record, submit, wait: seconds summed */
  double t_fed;                  /* when the last fed position's work came back */
  double t_choose;               /* seconds from there to the next id, summed over tokens */
  uint32_t chosen;               /* ... and how many (each in its position's lat) */
  double t_prompt, t_total;
  int32_t *gpu_argmax;           /* rank 0's argmax per fed position */
  int32_t *gpu_sample;           /* ... and its draw (device_sampling) */
  bool device_sampling;          /* temperature alone: the device draws (vkrt_op_sample) */
  bool device_top_k;             /* top-k up to 64: the device's candidates (vkrt_op_top_k),
                                    the host's draw among them; no logits downloaded */
  uint32_t prompt_last_col;      /* the prompt's last token: its column in the last ubatch */
  float *logits;                 /* rank 0's logits per checked position */
  void *scratch;                 /* the sampler's */
  uint32_t checked, min_margin_pos;
  double min_margin, max_logit_err;
  bool ranks_differ;
  char graph_why[512];           /* why the token's work is not a captured graph */
  uint32_t ubatch;               /* the prompt pass's tokens per ubatch (0: token by token) */
  uint32_t ubatches;             /* prompt passes run */
};

/* args.c: false when main returns *exit_status (--help, a bad argument, neither --weights
 * nor --make-gguf). */
bool args_parse(int argc, char **argv, struct service_args *a, int *exit_status);

/* weights.c: --make-gguf; the weights file opened into s->wf and s->mlp and checked against
 * the arguments' shapes (EXIT_WEIGHTS with nothing left open). */
int weights_make(const struct service_args *a);
int weights_load(struct service *s);
void weights_close(struct service *s);

/* appliance.c */
int appliance_open(struct service *s);
void appliance_describe(const struct service *s);
void appliance_close(struct service *s);

/* shards.c */
int shards_cut(struct service *s);
int shards_upload(struct service *s);
/* The pinned host-to-device rate of this run (h2d_bw, and h2d_all_bw into every device at
 * once), the yardsticks of the load rate. */
int shards_measure_h2d(struct service *s);
/* vkrt_load_file's progress: a line on a terminal (bytes, GB/s, ETA); user: the service. */
void shards_load_progress(void *user, uint64_t done, uint64_t total);
/* The load's rate, its ratio to h2d_bw, its structure and each device's path, after a
 * vkrt_load_file. */
void shards_load_report(const struct service *s);
/* The load's ratios to h2d_bw and h2d_all_bw where those were measured after the load (a
 * llama model's service measures them after its run, off the first token's path). */
void shards_load_ratio_report(const struct service *s);
/* The load's JSON members (no braces, a leading comma): load_gbps, pinned_h2d_gbps,
 * load_vs_pinned, load_path, load_seconds, resident. */
void shards_load_json(const struct service *s);
int shards_measure_copy(struct service *s);

/* decode.c */
int decode_run(struct service *s, struct decode *dc);
void decode_free(struct decode *dc);

/* reference.c */
void token_input(uint64_t seed, uint64_t token, float *x, uint32_t hidden);
int reference_verify(const struct service *s, struct decode *dc);

/* generate.c: the llama mode */
bool model_file(const struct gguf_file *f);
int model_load(struct service *s);
void model_close(struct service *s);
int model_setup(struct service *s, struct generation *gen);
int model_run(struct service *s, struct generation *gen);
int model_verify(struct service *s, struct generation *gen);
void model_print(const struct service *s, const struct generation *gen);
void model_summary(const struct service *s, struct generation *gen, bool verified);
/* --profile: one more token at the last fed position, recorded directly with GPU timestamps
 * around each op on device 0, printed by op name (profile.c). */
int model_profile(struct service *s, const struct generation *gen);
/* --time-without PREFIX[,PREFIX]...: the ops whose names begin with one are left out of every
 * record from here on (profile.c), so the run's times are the token's without them; what
 * they compute is then wrong. The report says how many records left them out. */
void model_time_without(struct service *s);
void model_time_without_report(const struct service *s);
void generation_free(struct generation *gen);

/* summary.c (cmp_double: qsort's ascending order of doubles, for the percentiles) */
int cmp_double(const void *a, const void *b);
void summary_print(const struct service *s, struct decode *dc, bool verified);
