/* vkrt-service's weights file: --make-gguf writes a synthetic one; --weights opens one (gguf.c)
 * and checks its MLP against the shapes given and this example's limits. */
#include <stdlib.h>

#include "llama.h"
#include "service.h"

/* --make-gguf --preset/--heads: a whole llama model (llama_write_gguf). */
static int make_llama(const struct service_args *a) {
  struct llama_make_params p = {.n_vocab = 32000, .n_ctx = 4096, .rope_freq_base = 10000.0f,
                                .eps = 1e-5f};
  if (a->preset)
    llama_preset(a->preset, &p);
  p.type = a->dtype, p.seed = a->seed, p.q4_k_m = a->q4_k_m, p.foreign = a->foreign;
  p.rope_factor = a->rope_factor >= 0 ? a->rope_factor : p.rope_factor;
  p.rope_linear = a->rope_linear;
  p.n_layer = a->layers ? (uint32_t)a->layers : p.n_layer;
  p.n_embd = a->hidden ? (uint32_t)a->hidden : p.n_embd;
  p.n_ff = a->ffn ? (uint32_t)a->ffn : p.n_ff;
  p.n_head = a->heads ? (uint32_t)a->heads : p.n_head;
  p.n_head_kv = a->kv_heads ? (uint32_t)a->kv_heads : a->heads ? p.n_head : p.n_head_kv;
  p.n_vocab = a->vocab ? (uint32_t)a->vocab : p.n_vocab;
  p.vocab = a->vocab_type;
  if (a->layers > UINT32_MAX || a->hidden > UINT32_MAX || a->ffn > UINT32_MAX) {
    fprintf(stderr, "vkrt-service: --layers, --hidden and --ffn are 32-bit\n");
    return EXIT_USAGE;
  }
  char err[512];
  int r = llama_write_gguf(a->make_path, &p, err, sizeof(err));
  if (r) {
    fprintf(stderr, "vkrt-service: --make-gguf: %s\n", err);
    return r == GGUF_E_BAD_VALUE ? EXIT_USAGE : EXIT_WEIGHTS;
  }
  printf("vkrt-service: wrote %s (GGUF v3 llama%s%s: %u layers, hidden %u, ffn %u, %u/%u heads "
         "of %u, vocabulary %u %s, %s%s%s)\n", a->make_path, a->preset ? " " : "",
         a->preset ? a->preset : "", p.n_layer, p.n_embd, p.n_ff, p.n_head, p.n_head_kv,
         p.n_embd / p.n_head, p.n_vocab, p.vocab == LLAMA_VOCAB_BPE ? "gpt2" : "spm",
         p.foreign ? gguf_ggml_type_str(p.foreign) : vkrt_type_str(p.type), p.q4_k_m ? "_M" : "",
         p.tie_output ? ", tied head" : "");
  return 0;
}

int weights_make(const struct service_args *a) {
  if (a->preset || a->heads)
    return make_llama(a);
  if (a->q4_k_m) {
    fprintf(stderr, "vkrt-service: --dtype q4_K_M mixes types across a llama model's tensors: "
            "give --preset or --heads\n");
    return EXIT_USAGE;
  }
  if (a->foreign) {
    fprintf(stderr, "vkrt-service: --dtype %s is for a llama model's matrices (--preset or "
            "--heads): the MLP stack runs f32, f16, q8_0, q4_K and q6_K only\n",
            gguf_ggml_type_str(a->foreign));
    return EXIT_USAGE;
  }
  if (!a->layers || !a->hidden) {
    fprintf(stderr, "vkrt-service: --make-gguf needs --layers and --hidden\n");
    return EXIT_USAGE;
  }
  if (a->vocab_type_given) {
    fprintf(stderr, "vkrt-service: --vocab-type is a llama model's (--preset or --heads); the "
            "MLP stack has no vocabulary\n");
    return EXIT_USAGE;
  }
  if (a->layers > MAX_LAYERS || a->hidden > (1u << 20) || a->ffn > (1u << 22) ||
      a->hidden * 4 > (1u << 22)) {
    fprintf(stderr, "vkrt-service: at most %d layers, hidden 2^20, ffn 2^22 in this example\n",
            MAX_LAYERS);
    return EXIT_USAGE;
  }
  char err[512];
  uint32_t f = (uint32_t)(a->ffn ? a->ffn : a->hidden * 4);
  int r = gguf_write_mlp(a->make_path, (uint32_t)a->layers, (uint32_t)a->hidden, f, a->dtype,
                         a->seed, err, sizeof(err));
  if (r) {
    fprintf(stderr, "vkrt-service: %s\n", err);
    return r == GGUF_E_BAD_VALUE ? EXIT_USAGE : EXIT_WEIGHTS;
  }
  printf("vkrt-service: wrote %s (GGUF v3, layers %llu, hidden %llu, ffn %u, %s)\n", a->make_path,
         (unsigned long long)a->layers, (unsigned long long)a->hidden, f, vkrt_type_str(a->dtype));
  return 0;
}

/* The file's shapes against --layers/--hidden/--ffn (0: not given): a synthetic MLP stack's or
 * a llama model's; either way a flag that disagrees is refused by name. */
static int shapes_check(const struct service_args *a, uint32_t layers, uint32_t hidden, uint32_t ffn) {
  if ((a->hidden && a->hidden != hidden) || (a->layers && a->layers != layers) || (a->ffn && a->ffn != ffn)) {
    /* name only the options given (0: not given) */
    char given[128] = "";
    size_t n = 0;
    if (a->layers)
      n += (size_t)snprintf(given + n, sizeof(given) - n, " --layers %llu", (unsigned long long)a->layers);
    if (a->hidden && n < sizeof(given))
      n += (size_t)snprintf(given + n, sizeof(given) - n, " --hidden %llu", (unsigned long long)a->hidden);
    if (a->ffn && n < sizeof(given))
      snprintf(given + n, sizeof(given) - n, " --ffn %llu", (unsigned long long)a->ffn);
    fprintf(stderr, "vkrt-service: shape mismatch: %s has layers %u hidden %u ffn %u, but%s %s "
                    "given (leave them out to take the file's shapes)\n",
            a->weights_path, layers, hidden, ffn, given,
            (a->layers != 0) + (a->hidden != 0) + (a->ffn != 0) > 1 ? "were" : "was");
    return EXIT_WEIGHTS;
  }
  return 0;
}

static int weights_check(const struct service_args *a, const struct gguf_mlp *m) {
  int rc = shapes_check(a, m->layers, m->hidden, m->ffn);
  if (!rc && m->layers > MAX_LAYERS) {
    fprintf(stderr, "vkrt-service: %s has %u layers; this example handles at most %d\n",
            a->weights_path, m->layers, MAX_LAYERS);
    return EXIT_WEIGHTS;
  }
  return rc;
}

int weights_load(struct service *s) {
  char err[512];
  s->mlp = calloc(1, sizeof(*s->mlp));
  int rc = s->mlp ? gguf_open(s->args->weights_path, &s->wf, err, sizeof(err)) : GGUF_E_NO_MEMORY;
  if (!rc && model_file(&s->wf)) { /* a llama model: generate.c */
    free(s->mlp);
    s->mlp = NULL;
    if ((rc = model_load(s)) || (rc = shapes_check(s->args, s->model->hp.n_layer, s->model->hp.n_embd,
                                                   s->model->hp.n_ff)))
      weights_close(s);
    return rc;
  }
  if (!rc && (rc = gguf_mlp(&s->wf, s->mlp, err, sizeof(err))))
    gguf_close(&s->wf);
  if (rc) {
    fprintf(stderr, "vkrt-service: %s: %s\n",
            rc == GGUF_E_IO || rc == GGUF_E_NO_MEMORY ? "cannot read" : "bad weights",
            s->mlp ? err : "out of memory");
    free(s->mlp);
    s->mlp = NULL;
    return EXIT_WEIGHTS;
  }
  if ((rc = weights_check(s->args, s->mlp)))
    weights_close(s);
  return rc;
}

void weights_close(struct service *s) {
  model_close(s);
  gguf_close(&s->wf);
  free(s->mlp);
  s->mlp = NULL;
}
