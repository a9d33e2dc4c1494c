/* vkrt-service's appliance: opened with the arguments' options (devices, log level, the
 * fault-injection options, the hosts under MPI), its plan described, and closed with every
 * buffer and registration the service made on it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../tools/hosts.h"
#include "service.h"
#if IS_ENABLED(CONFIG_VKRT_LAB)
#include "vkrt/vkrt_lab.h"

/* --load-knobs THREADS,CHUNK,CHUNKS[,BLOCK[,PACK[,AFTER[,NOIMG[,BATCH]]]]] into the lab's load knobs
 * (0: the board's; PACK: rows of strided ranges narrower than PACK bytes packed by the host,
 * 1: none; AFTER 1: those rows packed once their whole chunk is read, 0: by each reader right
 * after its block; NOIMG 1: packed even where a row image could take them; BATCH: chunks per
 * submission); sizes take K, M or G. */
static int load_knobs_set(vkrt_appliance *app, const char *text) {
  uint64_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int n = 0;
  bool ok = true, done = false;
  for (const char *p = text; ok && !done && n < 8; n++) {
    char *end = NULL;
    errno = 0;
    const unsigned long long x = strtoull(p, &end, 10);
    const char u = *end;
    const int shift = u == 'K' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : 0;
    end += shift != 0;
    /* a value that wraps (past 2^64 once scaled, or past 2^32 for a count) is refused */
    const uint64_t most = (n == 0 || n == 2 || n == 7 ? UINT32_MAX : UINT64_MAX) >> shift;
    ok = end != p && *p != '-' && (*end == ',' || !*end) && errno != ERANGE && x <= most;
    v[n] = (uint64_t)x << shift;
    done = !*end;
    p = end + 1;
  }
  vkrt_lab_load k = {0};
  if (!ok || !done || n < 3 || v[5] > 1 || v[6] > 1 || vkrt_lab_load_get(app, &k) != VKRT_OK) {
    fprintf(stderr, "vkrt-service: --load-knobs %s: want THREADS,CHUNK,CHUNKS[,BLOCK[,PACK[,AFTER"
            "[,NOIMG[,BATCH]]]]] (AFTER and NOIMG 0 or 1)\n", text);
    return EXIT_USAGE;
  }
  k.threads = (uint32_t)v[0];
  k.chunk_bytes = v[1];
  k.chunks = (uint32_t)v[2];
  k.block_bytes = v[3];
  k.gather_below = v[4];
  k.no_gather = false;
  k.pack_after_read = v[5] == 1;
  k.no_row_images = v[6] == 1;
  k.submit_batch = (uint32_t)v[7];
  if (vkrt_lab_load_set(app, &k) != VKRT_OK) {
    fprintf(stderr, "vkrt-service: --load-knobs %s: %s\n", text, vkrt_last_error(app));
    return EXIT_USAGE;
  }
  return 0;
}
#endif

static void log_stderr(void *user, vkrt_log_level level, const char *message) {
  (void)user;
  static const char *const names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "vkrt[%s]: %s\n", names[level], message);
}

int appliance_open(struct service *s) {
  const struct service_args *a = s->args;
  vkrt_options options;
  vkrt_options_initialize(&options);
  tool_hosts_attach(&options);
  options.log = log_stderr;
  options.log_level = a->verbose ? VKRT_LOG_INFO : VKRT_LOG_WARN;
  options.device_count = (uint32_t)a->devices;
  options.quant_activations = a->q8_activations ? VKRT_ACTIVATIONS_Q8 : VKRT_ACTIVATIONS_F32;
  /* the service owns its host: a token's wait spins through it (a blocked wait returns ~90
   * us late on NVIDIA; vkrt_options.wait_spin_us) */
  options.wait_spin_us = 20000;
  options.matmul_activations =
      a->f16_activations ? VKRT_MATMUL_ACTIVATIONS_F16 : VKRT_MATMUL_ACTIVATIONS_F32;
  if (a->f16_activations && !vkrt_config_has("CONFIG_VKRT_KERNEL_MATMUL_COOPMAT")) {
    fprintf(stderr, "vkrt-service: --activations f16: this build has no cooperative-matrix "
                    "matmul kernels (CONFIG_VKRT_KERNEL_MATMUL_COOPMAT is not set)\n");
    return EXIT_FIT;
  }
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  if (a->fault_import)
    options.faults.mask |= VKRT_FAULT_IMPORT_FAILS;
  options.faults.import_chunk_cap = a->chunk_cap;
#else
  if (a->fault_import || a->chunk_cap) {
    fprintf(stderr, "vkrt-service: --fault and --import-chunk-cap need CONFIG_VKRT_FAULT_INJECTION=y\n");
    return EXIT_USAGE;
  }
#endif
  vkrt_appliance *app = NULL;
  char why[1024];
  vkrt_status st = vkrt_open(&options, &app, why, sizeof(why));
  if (st != VKRT_OK) {
    fprintf(stderr, "vkrt-service: cannot open the appliance: %s: %s\n", vkrt_status_str(st), why);
    return EXIT_RUNTIME;
  }
  s->app = app;
  if (a->load_knobs) {
#if IS_ENABLED(CONFIG_VKRT_LAB)
    int rc = load_knobs_set(app, a->load_knobs);
#else
    fprintf(stderr, "vkrt-service: --load-knobs needs a build with the lab (make <board>_defconfig "
            "lab.config)\n");
    int rc = EXIT_USAGE;
#endif
    if (rc)
      return rc;
  }
  for (int i = 0; i < a->labs; i++) {
#if IS_ENABLED(CONFIG_VKRT_LAB)
    for (uint32_t d = 0; d < vkrt_device_count(app); d++)
      if (vkrt_lab_set_text(app, d, a->lab[i]) != VKRT_OK) {
        fprintf(stderr, "vkrt-service: --lab %s: %s\n", a->lab[i], vkrt_last_error(app));
        return EXIT_USAGE;
      }
#else
    fprintf(stderr, "vkrt-service: --lab needs a build with the lab (make <board>_defconfig "
            "lab.config)\n");
    return EXIT_USAGE;
#endif
  }
  if (a->profile && !IS_ENABLED(CONFIG_VKRT_LAB)) {
    fprintf(stderr, "vkrt-service: --profile needs a build with the lab (make <board>_defconfig "
            "lab.config): its GPU timers\n");
    return EXIT_USAGE;
  }
  s->n = vkrt_device_count(app);
  /* the library takes the f32 paths on a device without cooperative matrices; the service
   * was asked for f16 and says it cannot, rather than run something else */
  for (uint32_t d = 0; a->f16_activations && d < s->n; d++) {
    vkrt_device_info info;
    st = vkrt_device_info_get(app, d, &info);
    if (st != VKRT_OK || !info.matmul_f16) {
      if (st != VKRT_OK)
        fprintf(stderr, "vkrt-service: dev%u: %s\n", d, vkrt_last_error(app));
      else
        fprintf(stderr, "vkrt-service: --activations f16: dev%u (%s) has no cooperative matrices "
                        "(VK_NV_cooperative_matrix with 32-wide subgroups): its matmuls would "
                        "stay f32 (vkrt-probe --activations f16 prints each device's path)\n",
                d, info.name);
      return st != VKRT_OK ? EXIT_RUNTIME : EXIT_FIT;
    }
  }
  s->ranks = s->n * vkrt_host_count(app);
  s->first_rank = s->n * vkrt_host_rank(app);
  return 0;
}

/* The appliance's plan and a line on the weights. */
/* "all q8_0" or "70 q4_K + 18 q6_K": the model's matrices (token_embd, output unless tied,
 * seven per layer) by type, so a file that mixes types (llama.cpp's Q4_K_M) says so. */
static void matrix_types(const struct llama_model *m, char *out, size_t size) {
  uint32_t count[VKRT_TYPE_COUNT] = {0}, kinds = 0;
  count[m->tok_embd->type]++;
  if (!m->output_tied)
    count[m->output->type]++;
  for (uint32_t l = 0; l < m->hp.n_layer; l++) {
    const struct llama_layer *L = &m->layer[l];
    const struct gguf_tensor *t[] = {L->wq, L->wk, L->wv, L->wo, L->ffn_gate, L->ffn_up, L->ffn_down};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
      count[t[i]->type]++;
  }
  size_t n = 0;
  out[0] = '\0';
  for (int type = 0; type < VKRT_TYPE_COUNT; type++)
    kinds += count[type] > 0;
  for (int type = 0; type < VKRT_TYPE_COUNT && n < size; type++)
    if (count[type]) {
      if (kinds == 1)
        n += (size_t)snprintf(out + n, size - n, "all %s", vkrt_type_str((vkrt_type)type));
      else
        n += (size_t)snprintf(out + n, size - n, "%s%u %s", n ? " + " : "", count[type],
                              vkrt_type_str((vkrt_type)type));
    }
}

void appliance_describe(const struct service *s) {
  const struct gguf_file *wf = &s->wf;
  const struct gguf_mlp *m = s->mlp;
  size_t plan_len = vkrt_describe(s->app, false, NULL, 0);
  char *plan = malloc(plan_len + 1);
  if (plan) {
    vkrt_describe(s->app, false, plan, plan_len + 1);
    fputs(plan, stdout);
    free(plan);
  }
  if (s->model) {
    const struct llama_hparams *hp = &s->model->hp;
    const struct llama_layer *L = &s->model->layer[0];
    char types[96], scale[48] = "";
    matrix_types(s->model, types, sizeof(types));
    if (hp->rope_freq_scale != 1.0f)
      snprintf(scale, sizeof(scale), ", angles x %g", (double)hp->rope_freq_scale);
    printf("vkrt-service: %s: GGUF v%u, llama, %u tensors, layers %u, embedding %u, ffn %u, "
           "heads %u (KV %u) of %u, vocabulary %u, RoPE base %g%s%s, matrices %s (layer 0: "
           "q/k/v/o %s/%s/%s/%s, gate/up/down %s/%s/%s), output %s%s, %u devices, transport "
           "%s\n", s->args->weights_path, wf->version, wf->tensor_count, hp->n_layer, hp->n_embd,
           hp->n_ff, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_vocab,
           (double)hp->rope_freq_base, s->model->rope_freqs ? " with rope_freqs.weight" : "",
           scale, types,
           vkrt_type_str(L->wq->type), vkrt_type_str(L->wk->type), vkrt_type_str(L->wv->type),
           vkrt_type_str(L->wo->type), vkrt_type_str(L->ffn_gate->type),
           vkrt_type_str(L->ffn_up->type), vkrt_type_str(L->ffn_down->type),
           vkrt_type_str(s->model->output->type), s->model->output_tied ? " (tied to token_embd)" : "",
           s->n, vkrt_transport_str(vkrt_transport(s->app)));
    /* matrices of types without kernels: converted on the host when the model loaded */
    char conv[256];
    size_t at = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT && at < sizeof(conv); t++) {
      vkrt_type to;
      if (s->model->converted[t] && gguf_foreign_target(t, wf->convert_f16, &to))
        at += (size_t)snprintf(conv + at, sizeof(conv) - at, "%s%u %s -> %s", at ? ", " : "",
                               s->model->converted[t], gguf_ggml_type_str(t), vkrt_type_str(to));
    }
    if (at)
      printf("vkrt-service: converted on the host (no kernels for their types; the values as "
             "ggml dequantizes them%s): %s\n", wf->convert_f16 ? ", rounded to f16 (--convert f16)" : "",
             conv);
    return;
  }
  printf("vkrt-service: %s: GGUF v%u%s%s, %u tensors, layers %u hidden %u ffn %u, "
         "gate/up/down %s/%s/%s, %u devices, transport %s\n",
         s->args->weights_path, wf->version, wf->architecture[0] ? ", " : "", wf->architecture,
         wf->tensor_count, m->layers, m->hidden, m->ffn, vkrt_type_str(m->gate[0]->type),
         vkrt_type_str(m->up[0]->type), vkrt_type_str(m->down[0]->type), s->n,
         vkrt_transport_str(vkrt_transport(s->app)));
}

void appliance_close(struct service *s) {
  if (!s->app)
    return;
  llama_gpu_free(s->gpu);
  s->gpu = NULL;
  for (uint32_t d = 0; d < VKRT_MAX_DEVICES; d++) {
    struct device_state *ds = &s->dev[d];
    for (uint32_t l = 0; l < MAX_LAYERS; l++) {
      vkrt_buffer_destroy(ds->gate[l]);
      vkrt_buffer_destroy(ds->up[l]);
      vkrt_buffer_destroy(ds->down[l]);
    }
    vkrt_buffer_destroy(ds->x);
    vkrt_buffer_destroy(ds->y);
    vkrt_buffer_destroy(ds->g);
    vkrt_buffer_destroy(ds->u);
    vkrt_buffer_destroy(ds->x_in);
  }
  vkrt_close(s->app);
  s->app = NULL;
}
