/* vkrt-service's llama mode (--weights of a file with token_embd.weight): the model and its
 * vocabulary from the file (llama_model.c, tokenizer.c), its shards on the devices
 * (llama_gpu.c), the prompt run in ubatches of many tokens per pass (or fed token by token,
 * --prompt-mode token) and the generation token by token, greedy on the device or
 * sampled from the logits (sampler.c); after the timed loop the float64 reference
 * (llama_ref.c) is fed the same tokens (teacher-forced: the ids the devices chose) and must
 * choose the same greedy id at every position; the closing lines give pp and tg tokens/s
 * against the roofline (weights + K/V-cache bytes read per token over a device copy's
 * bandwidth). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/hosts.h"
#include "service.h"
#include "vkrt/kconfig.h" /* IS_ENABLED, CONFIG_VKRT_KERNEL_TOP_K */

bool model_file(const struct gguf_file *f) { return gguf_find(f, "token_embd.weight") != NULL; }

int model_load(struct service *s) {
  char err[512];
  s->model = calloc(1, sizeof(*s->model));
  if (!s->model) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    return EXIT_RUNTIME;
  }
  s->wf.convert_f16 = s->args->convert_f16;
  int rc = llama_model_load(&s->wf, s->model, err, sizeof(err));
  if (!rc)
    rc = llama_vocab_load(&s->wf, &s->vocab, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "vkrt-service: bad model: %s: %s\n", s->args->weights_path, err);
    return EXIT_WEIGHTS;
  }
  return 0;
}

void model_close(struct service *s) {
  llama_vocab_free(s->vocab);
  s->vocab = NULL;
  free(s->model);
  s->model = NULL;
}

/* The prompt's ids (BOS first unless tokenizer.ggml.add_bos_token says not to add it; BOS
 * alone without --prompt) and the context they and the generated tokens need. */
static int prompt_ids(struct service *s, struct generation *gen) {
  const struct service_args *a = s->args;
  size_t cap = (a->prompt ? strlen(a->prompt) * 4 : 0) + a->prompt_tokens + 8;
  gen->ids = malloc((cap + a->tokens + 1) * sizeof(int32_t));
  if (!gen->ids) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    return EXIT_RUNTIME;
  }
  int32_t n = a->prompt ? llama_tokenize(s->vocab, a->prompt, llama_vocab_add_bos(s->vocab),
                                         gen->ids, (int32_t)cap) : 1;
  if (!a->prompt)
    gen->ids[0] = llama_vocab_bos(s->vocab);
  if (a->prompt_tokens) { /* BOS, then seeded ids drawn from the whole vocabulary */
    uint64_t rng = a->seed * 0x9E3779B97F4A7C15ull + 1;
    for (n = 1; n < (int32_t)a->prompt_tokens; n++)
      gen->ids[n] = (int32_t)(vkrt_xorshift(&rng) % s->model->hp.n_vocab);
  }
  if (n < 1) {
    fprintf(stderr, "vkrt-service: the prompt could not be tokenized\n");
    return EXIT_USAGE;
  }
  gen->n_prompt = (uint32_t)n;
  /* the last generated token is not fed */
  uint64_t need = a->depth + gen->n_prompt + a->tokens - 1;
  gen->n_ctx = a->ctx ? (uint32_t)a->ctx : (uint32_t)need;
  if (need > gen->n_ctx || gen->n_ctx > s->model->hp.n_ctx_train * 8ull) {
    fprintf(stderr, "vkrt-service: depth %llu + %u prompt tokens + %llu generated need a "
            "context of %llu tokens; --ctx %u (the model was trained on %u)\n",
            (unsigned long long)a->depth, gen->n_prompt, (unsigned long long)a->tokens,
            (unsigned long long)need, gen->n_ctx, s->model->hp.n_ctx_train);
    return EXIT_USAGE;
  }
  return 0;
}

int model_setup(struct service *s, struct generation *gen) {
  const struct service_args *a = s->args;
  const struct llama_hparams *hp = &s->model->hp;
  int rc = prompt_ids(s, gen);
  if (rc)
    return rc;
  /* the prompt pass's buffers: columns for the largest ubatch, rows of logits for every
   * checked token of one (run_prompt: a ubatch of checked positions holds no others), else
   * for its last token only */
  gen->ubatch = a->prompt_by_token ? 0 : (uint32_t)(a->ubatch < gen->n_prompt ? a->ubatch
                                                                             : gen->n_prompt);
  uint32_t logit_rows = a->verify < gen->ubatch ? (uint32_t)a->verify : gen->ubatch;
  /* a temperature alone: the device draws each token (its head's vkrt_op_sample), no logits
   * downloaded; top-k or top-p (or --sampler host): the host draws from the logits */
  gen->device_sampling = a->temperature > 0 && !a->host_sampler && a->top_p >= 1 &&
                         (a->top_k == 0 || a->top_k >= s->model->hp.n_vocab);
  /* top-k (with or without top-p): the device's k best, the host's draw among them (where the
   * build has the kernel; else the host's sampler on the logits) */
  gen->device_top_k = IS_ENABLED(CONFIG_VKRT_KERNEL_TOP_K) && a->temperature > 0 &&
                      !a->host_sampler && a->top_k >= 1 &&
                      a->top_k <= LLAMA_DEVICE_TOP_K_MAX && a->top_k < s->model->hp.n_vocab;
  struct llama_gpu_params p = {.n_ctx = gen->n_ctx, .depth = (uint32_t)a->depth,
                               .ubatch = gen->ubatch,
                               .ubatch_logits = logit_rows ? logit_rows : 1,
                               .kv_type = a->kv_type,
                               .first_rank = s->first_rank, .ranks = s->ranks,
                               .path = a->weights_path, .progress = shards_load_progress,
                               .progress_user = s, .load_info = &s->load,
                               .load_path = a->load_path,
                               .fuse = a->fuse, .q8_activations = a->q8_activations,
                               .fuse_rope = a->fuse_rope,
                               .top_k = gen->device_top_k ? (uint32_t)a->top_k : 0,
                               .sample_temperature =
                                   gen->device_sampling ? (float)a->temperature : 0.0f};
  char err[1024];
  double t_up = now_s();
  s->load_t0 = t_up;
  rc = llama_gpu_create(s->app, s->model, &p, &s->gpu, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "vkrt-service: %s: %s\n", rc == 1 ? "the model does not fit" : "device error",
            err);
    return rc == 1 ? EXIT_FIT : EXIT_RUNTIME;
  }
  s->t_loaded = now_s();
  s->t_up = s->t_loaded - t_up;
  model_time_without(s);
  s->uploaded = llama_gpu_uploaded(s->gpu);
  s->shard_bytes = llama_gpu_weight_bytes(s->gpu);
  printf("vkrt-service: shards created and loaded (%.1f MiB) in %.3f s (%.2f GB/s); K/V cache "
         "%s, %u tokens\n", (double)s->uploaded / (1 << 20), s->t_up,
         (double)s->uploaded / s->t_up * 1e-9, vkrt_type_str(a->kv_type), gen->n_ctx);
  shards_load_report(s);
  for (uint32_t d = 0; d < s->n; d++) {
    const struct llama_split *sp = llama_gpu_split(s->gpu, d);
    printf("vkrt-service: rank %u: heads %u..%u (KV heads %u..%u), ffn %u..%u, vocabulary "
           "%u..%u\n", s->first_rank + d, sp->head0, sp->head0 + sp->n_head - 1, sp->kv_head0,
           sp->kv_head0 + sp->n_head_kv - 1, sp->ff0, sp->ff0 + sp->n_ff - 1, sp->vocab0,
           sp->vocab0 + sp->n_vocab - 1);
  }
  vkrt_status st = VKRT_ERROR_UNSUPPORTED;
  snprintf(gen->graph_why, sizeof(gen->graph_why), "--graph off");
  if (!a->no_graph) {
    /* --fault capture-fails: a capture already open makes the token's vkrt_graph_begin fail */
    vkrt_graph *held = NULL;
    if (a->fault_capture && vkrt_graph_begin(s->app) != VKRT_OK) {
      fprintf(stderr, "vkrt-service: --fault capture-fails: %s\n", vkrt_last_error(s->app));
      return EXIT_RUNTIME;
    }
    st = llama_gpu_capture(s->gpu, gen->graph_why, sizeof(gen->graph_why));
    if (a->fault_capture) {
      vkrt_graph_end(s->app, &held);
      vkrt_graph_destroy(held);
    }
  }
  if (st != VKRT_OK && st != VKRT_ERROR_UNSUPPORTED && st != VKRT_ERROR_UNAVAILABLE) {
    /* the capture ended with the failure: every token's work is recorded instead */
    char why[sizeof(gen->graph_why)];
    int n = snprintf(why, sizeof(why), "capturing it failed: %s: %s: ",
                     llama_gpu_failed(s->gpu)[0] ? llama_gpu_failed(s->gpu) : "vkrt_graph_begin",
                     vkrt_status_str(st));
    if (n > 0 && (size_t)n < sizeof(why))
      snprintf(why + n, sizeof(why) - (size_t)n, "%.*s", (int)(sizeof(why) - (size_t)n - 1),
               gen->graph_why);
    memcpy(gen->graph_why, why, sizeof(why));
    fprintf(stderr, "vkrt-service: capturing a token failed; recording every token's work "
            "instead (%s)\n", gen->graph_why);
  }
  struct llama_gpu_fused fz = llama_gpu_fused(s->gpu);
  printf("vkrt-service: fused products (--fuse %s): the RMS norm into %u and the swiglu into %u "
         "per token on device 0 (vkrt_op_matmul_fused; %u layers)\n",
         llama_fuse_names[a->fuse & LLAMA_FUSE_AUTO ? 4 : a->fuse & 3], fz.norm, fz.swiglu,
         s->model->hp.n_layer);
  printf("vkrt-service: q/k/v products with their RoPE and KV-cache rows (--fuse-rope %s): %u "
         "per token on device 0%s\n", a->fuse_rope ? "on" : "off", fz.rope,
         a->fuse_rope && !fz.rope ? " (they take q4_K or q8_0 q/k/v in one matrix, --activations "
                                    "q8, heads of a multiple of 32)" : "");
  if (st == VKRT_OK)
    printf("vkrt-service: a token's work: captured once as a graph, launched per token\n");
  else
    printf("vkrt-service: a token's work: recorded per token (%s)\n", gen->graph_why);
  uint64_t npos = gen->n_prompt + a->tokens;
  uint64_t checked = a->verify < npos ? a->verify : npos;
  gen->lat = calloc(npos, sizeof(double));
  gen->gpu_argmax = calloc(npos, sizeof(int32_t));
  gen->gpu_sample = calloc(npos, sizeof(int32_t));
  gen->logits = malloc(checked * hp->n_vocab * sizeof(float) + 1);
  gen->scratch = malloc((size_t)hp->n_vocab * 8);
  if (!gen->lat || !gen->gpu_argmax || !gen->gpu_sample || !gen->logits || !gen->scratch) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    return EXIT_RUNTIME;
  }
  return 0;
}

/* One position on every device, waited for: stamps at the start, after the step was set,
 * after recording (no recording for a captured graph), after submitting (or the launch), after
 * the wait. */
static int run_position(struct service *s, int32_t token, uint32_t pos, bool logits,
                        double stamp[5]) {
  vkrt_appliance *app = s->app;
  struct llama_gpu *g = s->gpu;
  uint64_t ticket[VKRT_MAX_DEVICES];
  stamp[0] = now_s();
  llama_gpu_set_step(g, token, pos);
  stamp[1] = now_s();
  vkrt_status st = VKRT_OK;
  if (!llama_gpu_captured(g)) {
    st = llama_gpu_record(g, logits);
    stamp[2] = now_s();
    for (uint32_t d = 0; st == VKRT_OK && d < s->n; d++)
      st = vkrt_submit(app, d, &ticket[d]);
  } else {
    stamp[2] = stamp[1];
    st = llama_gpu_launch(g, logits, ticket);
  }
  if (st != VKRT_OK) {
    fprintf(stderr, "vkrt-service: %s failed: %s: %s\n",
            llama_gpu_failed(g)[0] ? llama_gpu_failed(g) : "vkrt_submit", vkrt_status_str(st),
            vkrt_last_error(app));
    return EXIT_RUNTIME;
  }
  stamp[3] = now_s();
  for (uint32_t d = 0; d < s->n; d++)
    CHECK(vkrt_wait(app, d, ticket[d], UINT64_MAX));
  stamp[4] = now_s();
  return 0;
}

/* A ubatch of the prompt on every device, waited for. */
static int run_ubatch(struct service *s, const int32_t *ids, uint32_t n, uint32_t pos0,
                      uint32_t out_rows, bool logits) {
  vkrt_appliance *app = s->app;
  struct llama_gpu *g = s->gpu;
  uint64_t ticket[VKRT_MAX_DEVICES];
  vkrt_status st = llama_gpu_set_batch(g, ids, n, pos0);
  if (st == VKRT_OK)
    st = llama_gpu_record_batch(g, n, out_rows, logits);
  for (uint32_t d = 0; st == VKRT_OK && d < s->n; d++)
    st = vkrt_submit(app, d, &ticket[d]);
  if (st != VKRT_OK) {
    fprintf(stderr, "vkrt-service: the prompt pass: %s failed: %s: %s\n",
            llama_gpu_failed(g)[0] ? llama_gpu_failed(g) : "vkrt_submit", vkrt_status_str(st),
            vkrt_last_error(app));
    return EXIT_RUNTIME;
  }
  for (uint32_t d = 0; d < s->n; d++)
    CHECK(vkrt_wait(app, d, ticket[d], UINT64_MAX));
  return 0;
}

/* Device d's argmax and logits of the last work: a token's (row < 0) or token `row` of the
 * last ubatch. */
static int32_t result_argmax(const struct service *s, uint32_t d, int row) {
  return row < 0 ? llama_gpu_argmax(s->gpu, d) : llama_gpu_batch_argmax(s->gpu, d, (uint32_t)row);
}
/* ... its draw (device sampling; -1 without) */
static int32_t result_sample(const struct service *s, const struct generation *gen, uint32_t d,
                             int row) {
  if (!gen->device_sampling)
    return -1;
  return row < 0 ? llama_gpu_sampled(s->gpu, d)
                 : llama_gpu_batch_sampled(s->gpu, d, (uint32_t)row);
}
/* ... its top-k candidates (device_top_k; 0 without) */
static uint32_t result_top_k(const struct service *s, uint32_t d, int row, const float **values,
                             const int32_t **ids) {
  return row < 0 ? llama_gpu_top_k(s->gpu, d, values, ids)
                 : llama_gpu_batch_top_k(s->gpu, d, (uint32_t)row, values, ids);
}
static const float *result_logits(const struct service *s, uint32_t d, int row) {
  return row < 0 ? llama_gpu_logits(s->gpu, d) : llama_gpu_batch_logits(s->gpu, d, (uint32_t)row);
}

/* Every rank's argmax (and logits, when copied) against rank 0's, and every host's against
 * the others': the allreduce makes them the same bits. row: as result_argmax. */
static void compare_ranks(struct service *s, struct generation *gen, uint32_t pos, bool logits,
                          int row) {
  uint32_t V = s->model->hp.n_vocab;
  /* a draw's or a top-k's work has its argmax with the logits only */
  bool argmax = !(gen->device_sampling || gen->device_top_k) || logits;
  int32_t a0 = argmax ? result_argmax(s, 0, row) : -1, s0 = result_sample(s, gen, 0, row);
  const float *l0 = result_logits(s, 0, row), *v0 = NULL, *vd;
  const int32_t *i0 = NULL, *id;
  uint32_t k = result_top_k(s, 0, row, &v0, &i0);
  for (uint32_t d = 1; d < s->n; d++)
    if ((argmax && result_argmax(s, d, row) != a0) || result_sample(s, gen, d, row) != s0 ||
        (logits && memcmp(result_logits(s, d, row), l0, V * sizeof(float))) ||
        (k && (result_top_k(s, d, row, &vd, &id) != k || memcmp(vd, v0, k * sizeof(float)) ||
               memcmp(id, i0, k * sizeof(int32_t))))) {
      if (!gen->ranks_differ)
        fprintf(stderr, "vkrt-service: position %u: rank %u differs from rank 0\n", pos,
                s->first_rank + d);
      gen->ranks_differ = true;
    }
  if (tool_hosts() < 2) /* one host: nothing to compare the hash with */
    return;
  int32_t ids[2] = {a0, s0};
  uint64_t hash = bits_hash(bits_hash(HASH_INIT, ids, sizeof(ids)), l0,
                            logits ? V * sizeof(float) : 0);
  if (k)
    hash = bits_hash(bits_hash(hash, v0, k * sizeof(float)), i0, k * sizeof(int32_t));
  if (!tool_hosts_same(hash)) {
    if (!gen->ranks_differ)
      fprintf(stderr, "vkrt-service: position %u: host%u differs from another host\n", pos,
              vkrt_host_rank(s->app));
    gen->ranks_differ = true;
  }
}

/* Position pos fed alone through the token's work; its timings, rank comparison, argmax
 * and (checked) logits kept. */
static int feed_position(struct service *s, struct generation *gen, uint32_t pos, bool sampling,
                         double t0) {
  const struct service_args *a = s->args;
  uint32_t V = s->model->hp.n_vocab;
  double stamp[5];
  bool logits = (sampling && !gen->device_sampling && !gen->device_top_k) || pos < a->verify;
  int rc = run_position(s, gen->ids[pos], (uint32_t)a->depth + pos, logits, stamp);
  if (rc)
    return rc;
  gen->lat[pos] = stamp[4] - stamp[0];
  gen->t_fed = stamp[4];
  if (pos > 0 || gen->warm_tokens) { /* the very first may create pipelines */
    for (int i = 0; i < 4; i++)
      gen->prof[i] += stamp[i + 1] - stamp[i];
    gen->profiled++;
  }
  gen->fed = pos + 1;
  compare_ranks(s, gen, pos, logits, -1);
  gen->gpu_argmax[pos] = llama_gpu_argmax(s->gpu, 0);
  gen->gpu_sample[pos] = result_sample(s, gen, 0, -1);
  if (pos < a->verify)
    memcpy(gen->logits + (size_t)pos * V, llama_gpu_logits(s->gpu, 0), V * sizeof(float));
  if (pos + 1 == gen->n_prompt)
    gen->t_prompt = now_s() - t0;
  return 0;
}

/* The prompt in ubatches of up to gen->ubatch tokens, each one pass over its tokens: the
 * head for its last token, or for all of them when it holds checked positions (a ubatch ends
 * where the checked positions end, so the head never runs for more of them than are
 * checked: with --verify 1 the first ubatch is the first token alone). The argmax
 * (and checked logits) of the positions computed are kept, -1 for the others; *last: the last
 * prompt token's logits (NULL when not copied). */
static int run_prompt(struct service *s, struct generation *gen, bool sampling,
                      const float **last) {
  const struct service_args *a = s->args;
  uint32_t V = s->model->hp.n_vocab, U = gen->ubatch;
  for (uint32_t p0 = 0, n; p0 < gen->n_prompt; p0 += n) {
    bool checked = p0 < a->verify,
         logits = checked || (sampling && !gen->device_sampling && !gen->device_top_k);
    uint64_t end = checked && a->verify < gen->n_prompt ? a->verify : gen->n_prompt;
    n = end - p0 < U ? (uint32_t)(end - p0) : U;
    uint32_t rows = checked ? n : 1;
    double t = now_s();
    int rc = run_ubatch(s, gen->ids + p0, n, (uint32_t)a->depth + p0, rows, logits);
    if (rc)
      return rc;
    t = now_s() - t;
    gen->ubatches++;
    for (uint32_t j = 0; j < n; j++) {
      uint32_t pos = p0 + j;
      gen->lat[pos] = t / n;
      gen->gpu_argmax[pos] = llama_gpu_batch_argmax(s->gpu, 0, j);
      gen->gpu_sample[pos] = result_sample(s, gen, 0, (int)j);
      if (j < n - rows)
        continue;
      compare_ranks(s, gen, pos, logits, (int)j);
      if (pos < a->verify)
        memcpy(gen->logits + (size_t)pos * V, llama_gpu_batch_logits(s->gpu, 0, j),
               V * sizeof(float));
    }
    gen->fed = p0 + n;
    *last = llama_gpu_batch_logits(s->gpu, 0, n - 1);
    gen->prompt_last_col = n - 1;
  }
  return 0;
}

int model_run(struct service *s, struct generation *gen) {
  const struct service_args *a = s->args;
  uint32_t V = s->model->hp.n_vocab;
  bool sampling = a->temperature > 0;
  struct llama_sampler sampler;
  llama_sampler_init(&sampler, &(struct llama_sampler_params){
      .temperature = (float)a->temperature, .top_k = (uint32_t)a->top_k,
      .top_p = (float)a->top_p, .seed = a->seed});
  double stamp[5];
  int rc;
  /* Warm-up: the first position again and again (it writes cache row 0 with what the run
   * writes there first), until the GPU has had warmup_ms of work. */
  s->t_setup = now_s();
  double warm_end = s->t_setup + a->warmup_ms * 1e-3;
  while (tool_hosts_max(now_s() < warm_end && gen->warm_tokens < 4096 ? 1.0 : 0.0) > 0) {
    if ((rc = run_position(s, gen->ids[0], 0, false, stamp)))
      return rc;
    gen->warm_tokens++;
  }
  /* ... and the prompt pass's first ubatch once (the same rows the run writes first): its
   * kernels' first use is not timed */
  if (gen->ubatch && a->warmup_ms > 0 &&
      (rc = run_ubatch(s, gen->ids, gen->ubatch, (uint32_t)a->depth, 1, false)))
    return rc;
  double t0 = now_s();
  s->t_warm = t0;
  const float *last_logits = NULL;
  bool prompt_done = false; /* the prompt ran in ubatches: its last position's results here */
  if (gen->ubatch && tool_hosts_max(*s->stop ? 1.0 : 0.0) == 0) {
    if (gen->device_sampling) /* the draw of the prompt's last column */
      llama_gpu_set_key(s->gpu, vkrt_xorshift(&sampler.state));
    if ((rc = run_prompt(s, gen, sampling, &last_logits)))
      return rc;
    gen->t_prompt = now_s() - t0;
    prompt_done = true;
  }
  /* with the prompt run in ubatches, its last position's results are already there */
  for (uint32_t pos = prompt_done ? gen->n_prompt - 1 : 0;; pos++, prompt_done = false) {
    if (!prompt_done) {
      if (tool_hosts_max(*s->stop ? 1.0 : 0.0) > 0)
        break;
      if (gen->device_sampling) /* this position's draw: a key from the seeded generator */
        llama_gpu_set_key(s->gpu, vkrt_xorshift(&sampler.state));
      if ((rc = feed_position(s, gen, pos, sampling, t0)))
        return rc;
      if (pos + 1 < gen->n_prompt)
        continue;
      last_logits = llama_gpu_logits(s->gpu, 0);
    }
    int32_t next;
    if (!sampling)
      next = gen->gpu_argmax[pos];
    else if (gen->device_sampling)
      next = gen->gpu_sample[pos];
    else if (gen->device_top_k) { /* the device's candidates: the last token's or column's */
      const float *values = NULL;
      const int32_t *ids = NULL;
      uint32_t k = result_top_k(s, 0, prompt_done ? (int)gen->prompt_last_col : -1, &values,
                                &ids);
      next = llama_sample_top_k(&sampler, values, ids, k, gen->scratch);
    } else
      next = llama_sample(&sampler, last_logits, V, gen->scratch);
    if (!prompt_done) { /* a token waits for its id: the ranks' comparison and the draw count */
      double choose = now_s() - gen->t_fed;
      gen->lat[pos] += choose;
      gen->t_choose += choose;
      gen->chosen++;
    }
    gen->ids[pos + 1] = next;
    gen->n_gen++;
    if (gen->n_gen == 1)
      s->t_first_token = now_s();
    if (a->stream && s->vocab) { /* the token's text at once (its bytes: a UTF-8 character
                                  * split over tokens completes with the next) */
      char piece[256];
      size_t n = llama_token_piece(s->vocab, next, piece, sizeof(piece));
      fwrite(piece, 1, n, stderr);
      fflush(stderr);
    }
    if (gen->n_gen == a->tokens || llama_vocab_is_eog(s->vocab, next))
      break;
  }
  gen->t_total = now_s() - t0;
  if (a->stream)
    fputc('\n', stderr);
  if (s->t_first_token > 0)
    printf("vkrt-service: time to first token: %.3f s from process start: file parsed %.3f s, "
           "appliance open %.3f s, shards created and loaded %.3f s "
           "(vkrt_load_file %.3f s), graph and setup %.3f s, warm-up %.3f s (%llu tokens), "
           "%u prompt token(s) and the first %.3f s\n", s->t_first_token - s->t_start,
           s->t_parsed - s->t_start, s->t_opened - s->t_parsed,
           s->t_loaded - s->t_opened, (double)s->load.ns * 1e-9, s->t_setup - s->t_loaded,
           s->t_warm - s->t_setup, (unsigned long long)gen->warm_tokens, gen->n_prompt,
           s->t_first_token - s->t_warm);
  return 0;
}

/* The float64 reference teacher-forced on the fed ids: its greedy choice at each checked
 * position must be the device's. The smallest top-1/top-2 margin it met shows how close the
 * nearest tie came; the largest logit difference, how far the devices' f32 arithmetic is from
 * float64. */
int model_verify(struct service *s, struct generation *gen) {
  const struct service_args *a = s->args;
  uint32_t V = s->model->hp.n_vocab;
  uint32_t checked = (uint32_t)(a->verify < gen->fed ? a->verify : gen->fed);
  if (!checked)
    return 0;
  struct llama_ref *ref = NULL;
  char err[512];
  double *logits = malloc(V * sizeof(double));
  int rc = logits ? llama_ref_create(s->model, gen->n_ctx, a->kv_type, &ref, err, sizeof(err)) : -1;
  if (rc) {
    fprintf(stderr, "vkrt-service: float64 reference: %s\n", logits ? err : "out of memory");
    free(logits);
    return EXIT_RUNTIME;
  }
  gen->min_margin = INFINITY;
  for (uint32_t pos = 0; pos < checked; pos++) {
    if (llama_ref_forward(ref, gen->ids[pos], pos, logits)) {
      fprintf(stderr, "vkrt-service: float64 reference: position %u failed\n", pos);
      rc = EXIT_RUNTIME;
      break;
    }
    uint32_t best = 0;
    double top = logits[0], second = -INFINITY, scale = 0;
    for (uint32_t i = 1; i < V; i++) {
      if (logits[i] > top)
        second = top, top = logits[i], best = i;
      else if (logits[i] > second)
        second = logits[i];
    }
    const float *gl = gen->logits + (size_t)pos * V;
    double diff = 0;
    for (uint32_t i = 0; i < V; i++) {
      scale = fmax(scale, fabs(logits[i]));
      diff = fmax(diff, fabs((double)gl[i] - logits[i]));
    }
    gen->max_logit_err = fmax(gen->max_logit_err, diff / fmax(scale, 1e-30));
    if (top - second < gen->min_margin)
      gen->min_margin = top - second, gen->min_margin_pos = pos;
    if ((int32_t)best != gen->gpu_argmax[pos]) {
      fprintf(stderr, "vkrt-service: position %u: float64 chooses %u (top-1/top-2 margin %.3g), "
              "the devices %d\n", pos, best, top - second, gen->gpu_argmax[pos]);
      rc = EXIT_VERIFY;
    }
    gen->checked++;
  }
  llama_ref_free(ref);
  free(logits);
  return (int)tool_hosts_max(rc);
}

void model_print(const struct service *s, const struct generation *gen) {
  char piece[256];
  fputs("text: ", stdout);
  for (uint32_t i = 0; i < gen->n_gen; i++) {
    size_t n = llama_token_piece(s->vocab, gen->ids[gen->n_prompt + i], piece, sizeof(piece));
    fwrite(piece, 1, n, stdout);
  }
  fputc('\n', stdout);
  if (s->args->print_ids) {
    fputs("prompt ids: ", stdout);
    for (uint32_t i = 0; i < gen->n_prompt; i++)
      printf("%s%d", i ? "," : "", gen->ids[i]);
    fputs("\nids: ", stdout);
    for (uint32_t i = 0; i < gen->n_gen; i++)
      printf("%s%d", i ? "," : "", gen->ids[gen->n_prompt + i]);
    fputc('\n', stdout);
  }
}

/* How the next id is chosen, for the summary. */
static const char *sampling_label(const struct service_args *a, const struct generation *gen,
                                  char *buf, size_t cap) {
  if (!(a->temperature > 0))
    return "greedy: the device's argmax";
  if (gen->device_sampling) {
    snprintf(buf, cap, "drawn on the device: temperature %g (vkrt_op_sample)", a->temperature);
    return buf;
  }
  if (gen->device_top_k) {
    snprintf(buf, cap, "the device's top-k %llu candidates (vkrt_op_top_k), drawn on the host: "
             "temperature %g, top-p %g", (unsigned long long)a->top_k, a->temperature, a->top_p);
    return buf;
  }
  snprintf(buf, cap, "sampled on the host: temperature %g, top-k %llu, top-p %g",
           a->temperature, (unsigned long long)a->top_k, a->top_p);
  return buf;
}

void model_summary(const struct service *s, struct generation *gen, bool verified) {
  vkrt_appliance *app = s->app;
  if (*s->stop)
    printf("vkrt-service: stopping on signal %d after %u positions\n", (int)*s->stop, gen->fed);
  uint32_t np = gen->n_prompt < gen->fed ? gen->n_prompt : gen->fed;
  char mode[96];
  if (gen->ubatch)
    snprintf(mode, sizeof(mode), "batch: %u ubatch%s of up to %u tokens", gen->ubatches,
             gen->ubatches == 1 ? "" : "es", gen->ubatch);
  else
    snprintf(mode, sizeof(mode), "token: one token at a time");
  if (np)
    printf("vkrt-service: pp: %u prompt tokens in %.3f s: %.1f tokens/s (prompt mode %s)\n",
           np, gen->t_prompt, np / gen->t_prompt, mode);
  uint32_t ntg = gen->fed - np; /* positions fed after the prompt, one generated token each */
  double t_tg = 0, p50 = 0, p99 = 0, roofline = 0;
  if (ntg) {
    double *lat = gen->lat + np, kv_len = 0;
    for (uint32_t i = 0; i < ntg; i++)
      t_tg += lat[i], kv_len += (double)s->args->depth + np + i + 1;
    kv_len /= ntg;
    uint64_t kv = llama_gpu_kv_bytes(s->gpu, (uint32_t)(kv_len + 0.5));
    roofline = s->copy_bw > 0 ? (double)(s->shard_bytes + kv) / s->copy_bw : 0;
    qsort(lat, ntg, sizeof(double), cmp_double);
    p50 = lat[ntg / 2], p99 = lat[(size_t)((double)(ntg - 1) * 0.99)];
    printf("vkrt-service: tg: %u tokens in %.3f s: %.1f tokens/s, per-token p50 %.3f ms p99 "
           "%.3f ms, roofline %.3f ms (p50 = %.2f x roofline; after %llu warm-up tokens)\n",
           ntg, t_tg, ntg / t_tg, p50 * 1e3, p99 * 1e3, roofline * 1e3,
           roofline > 0 ? p50 / roofline : 0, (unsigned long long)gen->warm_tokens);
    printf("vkrt-service: roofline: %.2f MiB of weights + %.2f MiB of K/V cache (mean context "
           "%.0f) per device per token at %.1f GB/s (a plain device copy measured at start, read "
           "+ written)\n", (double)s->shard_bytes / (1 << 20), (double)kv / (1 << 20), kv_len,
           s->copy_bw * 1e-9);
  }
  double n = gen->profiled ? (double)gen->profiled : 1;
  char label[128];
  printf("vkrt-service: per token (mean of positions 2..): step %.1f us, record %.1f us (up to "
         "%u ops per device), submit %.1f us, wait %.1f us; then %.1f us to the next id (%s)\n",
         gen->prof[0] / n * 1e6, gen->prof[1] / n * 1e6, llama_gpu_ops_per_token(s->gpu),
         gen->prof[2] / n * 1e6, gen->prof[3] / n * 1e6,
         gen->chosen ? gen->t_choose / gen->chosen * 1e6 : 0.0,
         sampling_label(s->args, gen, label, sizeof(label)));
  if (vkrt_host_count(app) > 1)
    printf("vkrt-service: tensor-parallel over %u hosts x %u devices (MPI)\n",
           vkrt_host_count(app), s->n);
  /* Two facts: the float64 check and the ranks' bits; either may fail alone. */
  if (gen->checked)
    printf("vkrt-service: verified %u positions against float64 (teacher-forced): greedy choice "
           "the same at every position: %s; smallest top-1/top-2 margin %.4f (position %u); max "
           "logit difference %.2e of the largest; ranks bit-identical: %s (%u ranks)\n",
           gen->checked, verified ? "passed" : "FAILED", gen->min_margin, gen->min_margin_pos,
           gen->max_logit_err, gen->ranks_differ ? "NO" : "yes", s->ranks);
  else
    printf("vkrt-service: not verified against float64 (%s); ranks bit-identical: %s "
           "(%u ranks)\n", s->args->depth ? "--depth: the K/V rows before it are a constant"
           : s->args->time_without ? "--time-without: ops left out" : "--verify 0",
           gen->ranks_differ ? "NO" : "yes", s->ranks);
  printf("vkrt-service: paths: transport %s; weights %s; upload %.2f GB/s; a token's work %s\n",
         vkrt_transport_str(vkrt_transport(app)), vkrt_load_path_str(s->load.path[0]),
         (double)s->uploaded / s->t_up * 1e-9,
         llama_gpu_captured(s->gpu) ? "a captured graph" : "recorded per token");
  if (s->args->json)
    printf("{\"prompt_tokens\": %u, \"prompt_mode\": \"%s\", \"ubatch\": %u, "
           "\"pp_tokens_per_s\": %.3f, \"generated_tokens\": %u, "
           "\"tg_tokens_per_s\": %.3f, \"choose_us\": %.2f, \"p50_ms\": %.4f, \"p99_ms\": %.4f, "
           "\"roofline_ms\": %.4f, \"weight_bytes\": %llu, \"copy_gbps\": %.3f, "
           "\"checked_positions\": %u, \"verified\": %s, \"min_margin\": %.6g, "
           "\"max_logit_diff\": %.3e, \"ranks_bit_identical\": %s, \"ranks\": %u, "
           "\"hosts\": %u, \"depth\": %llu, \"kv_type\": \"%s\", \"graph\": %s, \"transport\": \"%s\", "
           "\"matmul_activations\": \"%s\", \"ops_left_out\": %llu, \"version\": \"%s\"",
           np, gen->ubatch ? "batch" : "token", gen->ubatch,
           np && gen->t_prompt > 0 ? np / gen->t_prompt : 0, gen->n_gen,
           t_tg > 0 ? ntg / t_tg : 0, gen->chosen ? gen->t_choose / gen->chosen * 1e6 : 0.0,
           p50 * 1e3, p99 * 1e3, roofline * 1e3,
           (unsigned long long)s->shard_bytes, s->copy_bw * 1e-9, gen->checked,
           gen->checked && verified ? "true" : "false",
           gen->checked ? gen->min_margin : 0.0, gen->max_logit_err,
           gen->ranks_differ ? "false" : "true", s->ranks, vkrt_host_count(app),
           (unsigned long long)s->args->depth, vkrt_type_str(s->args->kv_type), llama_gpu_captured(s->gpu) ? "true" : "false",
           vkrt_transport_str(vkrt_transport(app)), s->args->f16_activations ? "f16" : "f32",
           (unsigned long long)s->left_out, vkrt_version());
  if (s->args->json) {
    shards_load_json(s);
    printf(", \"ttft_s\": %.4f, \"warmup_s\": %.4f}\n",
           s->t_first_token > 0 ? s->t_first_token - s->t_start : 0, s->t_warm - s->t_setup);
  }
}

void generation_free(struct generation *gen) {
  free(gen->ids);
  free(gen->lat);
  free(gen->gpu_argmax);
  free(gen->logits);
  free(gen->scratch);
  free(gen->gpu_sample);
}
