/* vkrt-service: a firmware-style tensor-parallel decode service on libvkrt.
 *
 * Opens the board's appliance, prints the plan, maps a GGUF weights file read-only
 * (gguf.c), registers its tensor data section once (the board's import policy; tensors are
 * 32-byte aligned inside it, not page aligned), uploads each device's shard of the
 * llama-style MLP (gate/up rows: contiguous; down columns: a 2-D strided upload, cut along
 * whole quantization blocks), then for each token runs, per layer, the Megatron split of a
 * SwiGLU MLP:
 *   g_d = W_gate,d x ; u_d = W_up,d x ; h_d = silu(g_d) * u_d ; y_d = W_down,d h_d ;
 *   y = allreduce(y_d) ; x = x + y
 * (one rank in all: x += W_down h, vkrt_op_matmul_add, when ffn_down is f32/f16; quantized
 * weights take vkrt_op_matmul only, so then a matmul and an add) and checks the final
 * activations against a float64 CPU reference (weights dequantized by the reference of the
 * format's definition, vkrt_dequantize_row). Weights: f32, f16, q8_0 or q4_K per tensor.
 *
 * Under mpirun (CONFIG_VKRT_TRANSPORT_MPI) every rank is a host: the appliance spans them,
 * device d of host h holds shard h x devices + d, the allreduce sums over every device of
 * every host, each host verifies its devices against the float64 reference and the hosts
 * compare their results bit for bit; host0 prints. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../../tools/hosts.h"
#include "gguf.h"
#include "vkrt/vkrt.h"

enum { EXIT_VERIFY = 1, EXIT_USAGE = 2, EXIT_WEIGHTS = 3, EXIT_RUNTIME = 4 };

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void log_stderr(void *user, vkrt_log_level level, const char *message) {
  (void)user;
  static const char *const names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "vkrt[%s]: %s\n", names[level], message);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: vkrt-service --weights FILE.gguf [--tokens T] [--seconds S] [--hidden H] [--layers L]\n"
          "                    [--ffn F] [--devices N] [--warmup-ms MS] [--seed N] [--verbose]\n"
          "                    [--fault import-fails] [--import-chunk-cap BYTES]\n"
          "       vkrt-service --make-gguf FILE --layers L --hidden H [--ffn F]\n"
          "                    [--dtype f32|f16|q8_0|q4_K] [--seed N]   (--make-weights: the same)\n"
          "--hidden/--layers/--ffn with --weights check the file's shapes (a mismatch is an error).\n"
          "The file is GGUF v3 with llama-style blk.N.ffn_gate/ffn_up/ffn_down.weight tensors;\n"
          "--seed with --weights picks the token inputs.\n");
}

#define MAX_LAYERS 64 /* this example */

struct device_state {
  vkrt_buffer *gate[MAX_LAYERS], *up[MAX_LAYERS], *down[MAX_LAYERS];
  vkrt_buffer *x, *g, *u, *y;
  vkrt_buffer *x_in;             /* host-visible: the next token's input, copied on the GPU */
  float *x_in_map;
  uint32_t f0, f1;               /* this device's ffn slice (whole blocks of ffn_down) */
};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-')
    return false;
  *out = v;
  return true;
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* Row n of tensor t, dequantized by the reference dequantization, dotted with x (k elements). */
static double row_dot(const struct gguf_file *f, const struct gguf_tensor *t, uint32_t n,
                      const double *x, uint32_t k, float *row) {
  vkrt_dequantize_row(t->type, gguf_data(f, t) + n * gguf_row_bytes(t), row, k);
  double acc = 0;
  for (uint32_t i = 0; i < k; i++)
    acc += (double)row[i] * x[i];
  return acc;
}

/* float64 reference of one token through every layer: rows dequantized by the reference
 * dequantization (vkrt_dequantize_row, from the format's definition). */
static int reference(const struct gguf_file *f, const struct gguf_mlp *m, float *x_inout) {
  double *x = calloc(m->hidden, sizeof(double)), *h = calloc(m->ffn, sizeof(double));
  float *row = malloc(sizeof(float) * (m->hidden > m->ffn ? m->hidden : m->ffn));
  int rc = x && h && row ? 0 : -1;
  for (uint32_t i = 0; !rc && i < m->hidden; i++)
    x[i] = x_inout[i];
  for (uint32_t l = 0; !rc && l < m->layers; l++) {
    for (uint32_t n = 0; n < m->ffn; n++)
      h[n] = silu(row_dot(f, m->gate[l], n, x, m->hidden, row)) *
             row_dot(f, m->up[l], n, x, m->hidden, row);
    for (uint32_t n = 0; n < m->hidden; n++)
      x[n] += row_dot(f, m->down[l], n, h, m->ffn, row);
  }
  for (uint32_t i = 0; !rc && i < m->hidden; i++)
    x_inout[i] = (float)x[i];
  free(x);
  free(h);
  free(row);
  return rc;
}

/* Deterministic input activation for token t: values in [-1, 1). */
static void token_input(uint64_t seed, uint64_t token, float *x, uint32_t hidden) {
  uint64_t s = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (token + 1) * 0xbf58476d1ce4e5b9ull;
  for (uint32_t i = 0; i < hidden; i++) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    x[i] = (float)((s * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 23) - 1.0f;
  }
}

/* One rank: x += W_down h in one dispatch (vkrt_op_matmul_add) where ffn_down's type allows
 * it; quantized weights take vkrt_op_matmul only (then a matmul into y and an add). */
static bool fused_residual(const struct gguf_mlp *m, uint32_t layer) {
  return vkrt_type_block(m->down[layer]->type) == 1;
}

static bool parse_dtype(const char *v, vkrt_type *out) {
  for (int t = 0; t < VKRT_TYPE_COUNT; t++)
    if (!strcasecmp(v, vkrt_type_str((vkrt_type)t))) {
      *out = (vkrt_type)t;
      return true;
    }
  return false;
}

#define CHECK(call)                                                                       \
  do {                                                                                    \
    vkrt_status s_ = (call);                                                              \
    if (s_ != VKRT_OK) {                                                                  \
      fprintf(stderr, "vkrt-service: %s failed: %s: %s\n", #call, vkrt_status_str(s_),    \
              vkrt_last_error(app));                                                      \
      rc = EXIT_RUNTIME;                                                                  \
      goto out;                                                                           \
    }                                                                                     \
  } while (0)

int main(int argc, char **argv) {
  const char *weights_path = NULL, *make_path = NULL;
  uint64_t tokens = 64, layers = 0, hidden = 0, ffn = 0, seed = 1234, devices = 0;
  double seconds = 0, warmup_ms = 500;
  uint64_t chunk_cap = 0;
  bool verbose = false, fault_import = false;
  vkrt_type dtype = VKRT_TYPE_F16;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--verbose")) {
      verbose = true;
      continue;
    } else if (!v) {
      ok = false;
    } else if (!strcmp(a, "--weights")) {
      weights_path = v;
    } else if (!strcmp(a, "--make-gguf") || !strcmp(a, "--make-weights")) {
      make_path = v;
    } else if (!strcmp(a, "--tokens")) {
      ok = parse_u64(v, &tokens) && tokens > 0;
    } else if (!strcmp(a, "--warmup-ms")) {
      warmup_ms = atof(v);
      ok = warmup_ms >= 0;
    } else if (!strcmp(a, "--seconds")) {
      seconds = atof(v);
      ok = seconds > 0;
    } else if (!strcmp(a, "--layers")) {
      ok = parse_u64(v, &layers) && layers > 0;
    } else if (!strcmp(a, "--hidden")) {
      ok = parse_u64(v, &hidden) && hidden > 0;
    } else if (!strcmp(a, "--ffn")) {
      ok = parse_u64(v, &ffn) && ffn > 0;
    } else if (!strcmp(a, "--seed")) {
      ok = parse_u64(v, &seed);
    } else if (!strcmp(a, "--devices")) {
      ok = parse_u64(v, &devices) && devices >= 1 && devices <= VKRT_MAX_DEVICES;
    } else if (!strcmp(a, "--dtype")) {
      ok = parse_dtype(v, &dtype);
    } else if (!strcmp(a, "--import-chunk-cap")) {
      ok = parse_u64(v, &chunk_cap) && chunk_cap > 0;
    } else if (!strcmp(a, "--fault")) {
      ok = !strcmp(v, "import-fails");
      fault_import = true;
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr, "vkrt-service: bad or incomplete argument '%s%s%s'\n", a, v ? " " : "", v ? v : "");
      usage(stderr);
      return EXIT_USAGE;
    }
    i++;
  }

  if (make_path) {
    if (!layers || !hidden) {
      fprintf(stderr, "vkrt-service: --make-gguf needs --layers and --hidden\n");
      return EXIT_USAGE;
    }
    if (layers > MAX_LAYERS || hidden > (1u << 20) || ffn > (1u << 22) || hidden * 4 > (1u << 22)) {
      fprintf(stderr, "vkrt-service: at most %d layers, hidden 2^20, ffn 2^22 in this example\n",
              MAX_LAYERS);
      return EXIT_USAGE;
    }
    char err[512];
    uint32_t f = (uint32_t)(ffn ? ffn : hidden * 4);
    int r = gguf_write_mlp(make_path, (uint32_t)layers, (uint32_t)hidden, f, dtype, seed, err,
                           sizeof(err));
    if (r) {
      fprintf(stderr, "vkrt-service: %s\n", err);
      return r == GGUF_E_BAD_VALUE ? EXIT_USAGE : EXIT_WEIGHTS;
    }
    printf("vkrt-service: wrote %s (GGUF v3, layers %llu, hidden %llu, ffn %u, %s)\n", make_path,
           (unsigned long long)layers, (unsigned long long)hidden, f, vkrt_type_str(dtype));
    return 0;
  }
  if (!weights_path) {
    usage(stderr);
    return EXIT_USAGE;
  }

  struct gguf_file wf;
  struct gguf_mlp *mlp = calloc(1, sizeof(*mlp));
  char err[512];
  int rc = mlp ? gguf_open(weights_path, &wf, err, sizeof(err)) : GGUF_E_NO_MEMORY;
  if (!rc && (rc = gguf_mlp(&wf, mlp, err, sizeof(err))))
    gguf_close(&wf);
  if (rc) {
    fprintf(stderr, "vkrt-service: %s: %s\n",
            rc == GGUF_E_IO || rc == GGUF_E_NO_MEMORY ? "cannot read" : "bad weights",
            mlp ? err : "out of memory");
    free(mlp);
    return EXIT_WEIGHTS;
  }
  const struct gguf_mlp *m = mlp;
  const uint8_t *data = wf.buf + wf.data_offset; /* the tensor data section */
  uint64_t data_size = wf.size - wf.data_offset;
  if ((hidden && hidden != m->hidden) || (layers && layers != m->layers) || (ffn && ffn != m->ffn)) {
    fprintf(stderr, "vkrt-service: shape mismatch: %s has layers %u hidden %u ffn %u, but "
                    "--layers %llu --hidden %llu --ffn %llu were given\n",
            weights_path, m->layers, m->hidden, m->ffn, (unsigned long long)layers,
            (unsigned long long)hidden, (unsigned long long)ffn);
    rc = EXIT_WEIGHTS;
  } else if (m->layers > MAX_LAYERS) {
    fprintf(stderr, "vkrt-service: %s has %u layers; this example handles at most %d\n",
            weights_path, m->layers, MAX_LAYERS);
    rc = EXIT_WEIGHTS;
  }
  if (rc) {
    gguf_close(&wf);
    free(mlp);
    return rc;
  }

  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  tool_hosts_init();
  vkrt_options options;
  vkrt_options_initialize(&options);
  tool_hosts_attach(&options);
  options.log = log_stderr;
  options.log_level = verbose ? VKRT_LOG_INFO : VKRT_LOG_WARN;
  options.device_count = (uint32_t)devices;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  if (fault_import)
    options.faults.mask |= VKRT_FAULT_IMPORT_FAILS;
  options.faults.import_chunk_cap = chunk_cap;
#else
  if (fault_import || chunk_cap) {
    fprintf(stderr, "vkrt-service: --fault and --import-chunk-cap need CONFIG_VKRT_FAULT_INJECTION=y\n");
    gguf_close(&wf);
    free(mlp);
    tool_hosts_finish(EXIT_USAGE);
    return EXIT_USAGE;
  }
#endif
  vkrt_appliance *app = NULL;
  struct device_state dev[VKRT_MAX_DEVICES];
  memset(dev, 0, sizeof(dev));
  bool registered = false;
  double *lat = NULL;
  float *xin = NULL, *xref = NULL, *xout = NULL, *saved_in = NULL, *saved_out = NULL;
  uint64_t *saved_tok = NULL;
  char why[1024];
  vkrt_status st = vkrt_open(&options, &app, why, sizeof(why));
  if (st != VKRT_OK) {
    fprintf(stderr, "vkrt-service: cannot open the appliance: %s: %s\n", vkrt_status_str(st), why);
    gguf_close(&wf);
    free(mlp);
    tool_hosts_finish(EXIT_RUNTIME);
    return EXIT_RUNTIME;
  }
  uint32_t n = vkrt_device_count(app);
  /* Tensor-parallel ranks: every device of every host (one host without MPI). */
  uint32_t ranks = n * vkrt_host_count(app), first_rank = n * vkrt_host_rank(app);
  /* ffn is cut along whole blocks of every layer's ffn_down (its K) */
  uint32_t block = 1;
  for (uint32_t l = 0; l < m->layers; l++)
    block = vkrt_type_block(m->down[l]->type) > block ? vkrt_type_block(m->down[l]->type) : block;
  if (m->ffn % block || m->ffn / block < ranks) {
    fprintf(stderr, "vkrt-service: ffn %u holds %u blocks of %u, fewer than the %u ranks\n",
            m->ffn, m->ffn / block, block, ranks);
    rc = EXIT_WEIGHTS;
    goto out;
  }
  size_t plan_len = vkrt_describe(app, false, NULL, 0);
  char *plan = malloc(plan_len + 1);
  if (plan) {
    vkrt_describe(app, false, plan, plan_len + 1);
    fputs(plan, stdout);
    free(plan);
  }
  printf("vkrt-service: %s: GGUF v%u%s%s, %u tensors, layers %u hidden %u ffn %u, "
         "gate/up/down %s/%s/%s, %u devices, transport %s\n",
         weights_path, wf.version, wf.architecture[0] ? ", " : "", wf.architecture, wf.tensor_count,
         m->layers, m->hidden, m->ffn, vkrt_type_str(m->gate[0]->type),
         vkrt_type_str(m->up[0]->type), vkrt_type_str(m->down[0]->type), n,
         vkrt_transport_str(vkrt_transport(app)));

  /* Register the tensor data section once: it starts at general.alignment (32 bytes), not
   * at a page; the import widens chunks to pages and uploads straddle chunk edges. */
  vkrt_register_info info;
  double t_reg = now_s();
  CHECK(vkrt_host_register(app, data, data_size, NULL, NULL, &info));
  t_reg = now_s() - t_reg;
  registered = true;
  for (uint32_t d = 0; d < n; d++)
    printf("vkrt: dev%u weights via %s: %s\n", d, vkrt_import_path_str(info.path[d]), info.reason[d]);
  printf("vkrt-service: registered %.1f MiB in %u chunks in %.3f s\n",
         (double)data_size / (1 << 20), info.chunk_count, t_reg);

  /* Each device's shard: ffn rows f0..f1 of gate/up, the same columns of down. */
  uint64_t uploaded = 0, shard_bytes = 0; /* shard_bytes: the largest device's, per token */
  double t_up = now_s();
  for (uint32_t d = 0; d < n; d++) {
    struct device_state *ds = &dev[d];
    ds->f0 = (uint32_t)((uint64_t)(m->ffn / block) * (first_rank + d) / ranks * block);
    ds->f1 = (uint32_t)((uint64_t)(m->ffn / block) * (first_rank + d + 1) / ranks * block);
    uint64_t shard = ds->f1 - ds->f0, dev_bytes = 0;
    for (uint32_t l = 0; l < m->layers; l++) {
      /* gate/up: rows f0..f1 are contiguous; down: the same columns of every row, a 2-D
       * region of whole blocks. +16 bytes: the kernels read whole words. */
      const struct gguf_tensor *gt = m->gate[l], *ut = m->up[l], *dt = m->down[l];
      uint64_t grow = gguf_row_bytes(gt), urow = gguf_row_bytes(ut), drow = gguf_row_bytes(dt);
      uint64_t dbs = vkrt_type_size(dt->type), dbl = vkrt_type_block(dt->type);
      uint64_t dshard = shard / dbl * dbs;
      CHECK(vkrt_buffer_create(app, d, shard * grow + 16, VKRT_BUFFER_DEVICE_LOCAL, &ds->gate[l]));
      CHECK(vkrt_buffer_create(app, d, shard * urow + 16, VKRT_BUFFER_DEVICE_LOCAL, &ds->up[l]));
      CHECK(vkrt_buffer_create(app, d, dshard * m->hidden + 16, VKRT_BUFFER_DEVICE_LOCAL, &ds->down[l]));
      CHECK(vkrt_upload(ds->gate[l], 0, gguf_data(&wf, gt) + ds->f0 * grow, shard * grow));
      CHECK(vkrt_upload(ds->up[l], 0, gguf_data(&wf, ut) + ds->f0 * urow, shard * urow));
      CHECK(vkrt_upload_2d(ds->down[l], 0, dshard, gguf_data(&wf, dt) + ds->f0 / dbl * dbs, drow,
                           dshard, m->hidden));
      dev_bytes += shard * (grow + urow) + dshard * m->hidden;
    }
    uploaded += dev_bytes;
    shard_bytes = dev_bytes > shard_bytes ? dev_bytes : shard_bytes;
    CHECK(vkrt_buffer_create(app, d, (uint64_t)m->hidden * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->x));
    CHECK(vkrt_buffer_create(app, d, (uint64_t)m->hidden * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->y));
    CHECK(vkrt_buffer_create(app, d, shard * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->g));
    CHECK(vkrt_buffer_create(app, d, shard * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->u));
    CHECK(vkrt_buffer_create(app, d, (uint64_t)m->hidden * 4, VKRT_BUFFER_HOST_VISIBLE, &ds->x_in));
    void *map = NULL;
    CHECK(vkrt_buffer_map(ds->x_in, &map));
    ds->x_in_map = map;
  }
  t_up = now_s() - t_up;
  printf("vkrt-service: uploaded %.1f MiB of shards in %.3f s (%.2f GB/s)\n",
         (double)uploaded / (1 << 20), t_up, (double)uploaded / t_up * 1e-9);

  /* The roofline: every device reads its shard of the weights once per token, at the
   * bandwidth of a plain device copy measured here (read + written bytes per second). */
  double copy_bw = 0;
  {
    uint64_t csize = shard_bytes / 4;
    csize = csize < (16u << 20) ? (16u << 20) : csize > (512u << 20) ? (512u << 20) : csize;
    csize &= ~(uint64_t)4095;
    vkrt_buffer *ca = NULL, *cb = NULL;
    CHECK(vkrt_buffer_create(app, 0, csize, VKRT_BUFFER_DEVICE_LOCAL, &ca));
    if (vkrt_buffer_create(app, 0, csize, VKRT_BUFFER_DEVICE_LOCAL, &cb) == VKRT_OK) {
      vkrt_tensor ta = vkrt_tensor_contiguous(ca, 0, VKRT_TYPE_F32, 1024, (int64_t)(csize / 4096), 1, 1);
      vkrt_tensor tb = vkrt_tensor_contiguous(cb, 0, VKRT_TYPE_F32, 1024, (int64_t)(csize / 4096), 1, 1);
      double best = 0;
      for (int i = 0; i < 6; i++) {
        double t0 = now_s();
        if (vkrt_op_copy(&tb, &ta) != VKRT_OK || vkrt_finish(app, 0) != VKRT_OK)
          break;
        double t = now_s() - t0;
        if (i > 0 && (best == 0 || t < best))
          best = t;
      }
      copy_bw = best > 0 ? 2.0 * (double)csize / best : 0;
    }
    vkrt_buffer_destroy(ca);
    vkrt_buffer_destroy(cb);
  }
  double roofline = copy_bw > 0 ? (double)shard_bytes / copy_bw : 0;

  lat = calloc(tokens, sizeof(double));
  xin = malloc(m->hidden * sizeof(float));
  xref = malloc(m->hidden * sizeof(float));
  xout = malloc(m->hidden * sizeof(float));
  if (!lat || !xin || !xref || !xout) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    rc = EXIT_RUNTIME;
    goto out;
  }
  uint64_t done = 0, verified = 0;
  double prof[4] = {0}; /* input, record, submit, wait: seconds summed over tokens 1.. */
  uint64_t profiled = 0;
  double t_run = now_s(), worst_err = 0, t_verify = 0;
  /* Warm-up: tokens run untimed until the GPU has had warmup_ms of back-to-back work (the
   * H200 takes about a second of load to leave its idle clocks; a decode service runs
   * continuously). The checked tokens' outputs are saved and compared with the float64
   * reference after the timed loop, so the reference's CPU time never idles the GPU. */
  double warm_end = now_s() + warmup_ms * 1e-3;
  uint64_t warm_tokens = 0, next = 0;
  saved_in = malloc((tokens / 16 + 2) * m->hidden * sizeof(float));
  saved_out = malloc((tokens / 16 + 2) * m->hidden * sizeof(float));
  saved_tok = malloc((tokens / 16 + 2) * sizeof(uint64_t));
  if (!saved_in || !saved_out || !saved_tok) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    rc = EXIT_RUNTIME;
    goto out;
  }
  while (next < tokens) {
    /* Every host warms up and stops at the same token (the allreduce is collective over
     * the hosts). */
    bool warming = tool_hosts_max(warm_tokens < 4096 && now_s() < warm_end ? 1.0 : 0.0) > 0;
    uint64_t t = warming ? 0 : next;
    bool stop = stop_requested ||
                (!warming && seconds > 0 && now_s() - t_run - t_verify > seconds && t >= 2);
    if (tool_hosts_max(stop ? 1.0 : 0.0) > 0)
      break;
    token_input(seed, t, xin, m->hidden);
    double t0 = now_s();
    /* The input goes through each device's host-visible buffer and a recorded copy: no
     * round trip before the token's work is submitted. */
    for (uint32_t d = 0; d < n; d++) {
      memcpy(dev[d].x_in_map, xin, (size_t)m->hidden * 4);
      CHECK(vkrt_cmd_copy_buffer(dev[d].x, 0, dev[d].x_in, 0, (uint64_t)m->hidden * 4));
    }
    double t1 = now_s();
    for (uint32_t l = 0; l < m->layers; l++) {
      vkrt_allreduce_args ar = {.count = m->hidden, .type = VKRT_TYPE_F32};
      for (uint32_t d = 0; d < n; d++) {
        struct device_state *ds = &dev[d];
        uint32_t shard = ds->f1 - ds->f0;
        vkrt_tensor gw = vkrt_tensor_contiguous(ds->gate[l], 0, m->gate[l]->type, m->hidden, shard, 1, 1);
        vkrt_tensor uw = vkrt_tensor_contiguous(ds->up[l], 0, m->up[l]->type, m->hidden, shard, 1, 1);
        vkrt_tensor dw = vkrt_tensor_contiguous(ds->down[l], 0, m->down[l]->type, shard, m->hidden, 1, 1);
        vkrt_tensor x = vkrt_tensor_contiguous(ds->x, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
        vkrt_tensor g = vkrt_tensor_contiguous(ds->g, 0, VKRT_TYPE_F32, shard, 1, 1, 1);
        vkrt_tensor u = vkrt_tensor_contiguous(ds->u, 0, VKRT_TYPE_F32, shard, 1, 1, 1);
        vkrt_tensor y = vkrt_tensor_contiguous(ds->y, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
        CHECK(vkrt_op_matmul(&g, &gw, &x));
        CHECK(vkrt_op_matmul(&u, &uw, &x));
        CHECK(vkrt_op_swiglu(&g, &g, &u));
        if (ranks == 1 && fused_residual(m, l)) { /* the residual add rides on the down matmul */
          CHECK(vkrt_op_matmul_add(&x, &dw, &g));
          continue;
        }
        CHECK(vkrt_op_matmul(&y, &dw, &g));
        ar.send[d] = ar.recv[d] = ds->y;
      }
      if (ranks == 1 && fused_residual(m, l))
        continue;
      if (ranks > 1)
        CHECK(vkrt_allreduce(app, &ar));
      for (uint32_t d = 0; d < n; d++) {
        vkrt_tensor x = vkrt_tensor_contiguous(dev[d].x, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
        vkrt_tensor y = vkrt_tensor_contiguous(dev[d].y, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
        const vkrt_tensor *srcs[2] = {&x, &y};
        CHECK(vkrt_op_add(&x, srcs, 2));
      }
    }
    double t2 = now_s();
    uint64_t ticket[VKRT_MAX_DEVICES];
    for (uint32_t d = 0; d < n; d++)
      CHECK(vkrt_submit(app, d, &ticket[d]));
    double t3 = now_s();
    for (uint32_t d = 0; d < n; d++)
      CHECK(vkrt_wait(app, d, ticket[d], UINT64_MAX));
    double t4 = now_s();
    if (warming) {
      warm_tokens++;
      t_run = now_s();
      continue;
    }
    next++;
    lat[done++] = t4 - t0;
    if (t > 0 || warm_tokens) /* the very first token also creates the pipelines */
      prof[0] += t1 - t0, prof[1] += t2 - t1, prof[2] += t3 - t2, prof[3] += t4 - t3, profiled++;
    /* Keep the first and every 16th token of every rank for the check after the loop. */
    if (t == 0 || t % 16 == 15 || t + 1 == tokens) {
      double t_v = now_s();
      float *rank0 = saved_out + verified * m->hidden;
      for (uint32_t d = 0; d < n; d++) {
        CHECK(vkrt_download(d == 0 ? rank0 : xout, dev[d].x, 0, (uint64_t)m->hidden * 4));
        if (d > 0 && memcmp(rank0, xout, m->hidden * sizeof(float)) != 0) {
          fprintf(stderr, "vkrt-service: token %llu: rank %u differs from rank 0\n",
                  (unsigned long long)t, d);
          rc = EXIT_VERIFY;
        }
      }
      uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a of this host's result */
      for (size_t i = 0; i < m->hidden * sizeof(float); i++)
        hash = (hash ^ ((const uint8_t *)rank0)[i]) * 0x100000001b3ull;
      if (!tool_hosts_same(hash)) {
        fprintf(stderr, "vkrt-service: token %llu: host%u's result differs from another host's\n",
                (unsigned long long)t, vkrt_host_rank(app));
        rc = EXIT_VERIFY;
      }
      memcpy(saved_in + verified * m->hidden, xin, m->hidden * sizeof(float));
      saved_tok[verified++] = t;
      t_verify += now_s() - t_v;
      rc = (int)tool_hosts_max(rc); /* a failure anywhere stops every host */
      if (rc)
        goto out;
    }
  }
  double t_end = now_s();
  for (uint64_t v = 0; v < verified; v++) {
    memcpy(xref, saved_in + v * m->hidden, m->hidden * sizeof(float));
    if (reference(&wf, m, xref)) {
      fprintf(stderr, "vkrt-service: out of host memory\n");
      rc = EXIT_RUNTIME;
      goto out;
    }
    const float *rank0 = saved_out + v * m->hidden;
    double scale = 1, rel_err = 0;
    for (uint32_t i = 0; i < m->hidden; i++)
      scale = fmax(scale, fabs((double)xref[i]));
    for (uint32_t i = 0; i < m->hidden; i++)
      rel_err = fmax(rel_err, fabs((double)rank0[i] - (double)xref[i]) / scale);
    rel_err = tool_hosts_max(rel_err);
    worst_err = fmax(worst_err, rel_err);
    if (!(rel_err <= 2e-3)) {
      fprintf(stderr, "vkrt-service: token %llu: max relative error %.3g vs float64 reference\n",
              (unsigned long long)saved_tok[v], rel_err);
      rc = EXIT_VERIFY;
    }
  }
  /* Throughput of the decode itself: the downloads of the checked tokens are not counted. */
  double total = t_end - t_run - t_verify;
  if (stop_requested)
    printf("vkrt-service: stopping on signal %d after %llu tokens\n", (int)stop_requested,
           (unsigned long long)done);
  if (done) {
    double total_lat = 0;
    for (uint64_t i = 0; i < done; i++)
      total_lat += lat[i];
    qsort(lat, done, sizeof(double), cmp_double);
    double p50 = lat[done / 2], p99 = lat[(size_t)((double)(done - 1) * 0.99)];
    printf("vkrt-service: %llu tokens in %.3f s: %.1f tokens/s, per-token latency p50 %.3f ms "
           "p99 %.3f ms, roofline %.3f ms (p50 = %.2f x roofline; after %llu warm-up tokens)\n",
           (unsigned long long)done, total, (double)done / total, p50 * 1e3, p99 * 1e3,
           roofline * 1e3, roofline > 0 ? p50 / roofline : 0, (unsigned long long)warm_tokens);
    printf("vkrt-service: roofline: %.1f MiB of weights per device per token at %.1f GB/s (a plain "
           "device copy measured at start, read + written)\n", (double)shard_bytes / (1 << 20),
           copy_bw * 1e-9);
    double np = profiled ? (double)profiled : 1;
    uint32_t ops_per_token = 1; /* the input copy; per layer gate, up, swiglu, down (+ add) */
    for (uint32_t l = 0; l < m->layers; l++)
      ops_per_token += ranks == 1 && fused_residual(m, l) ? 4 : 5;
    printf("vkrt-service: per token (mean of tokens 2..): input %.1f us, record %.1f us (%u ops "
           "per device), submit %.1f us, wait %.1f us\n", prof[0] / np * 1e6, prof[1] / np * 1e6,
           ops_per_token, prof[2] / np * 1e6, prof[3] / np * 1e6);
    (void)total_lat;
  }
  if (vkrt_host_count(app) > 1)
    printf("vkrt-service: tensor-parallel over %u hosts x %u devices (MPI)\n",
           vkrt_host_count(app), n);
  printf("vkrt-service: verified %llu tokens on %u ranks against float64: max relative error "
         "%.2e, ranks bit-identical: %s\n", (unsigned long long)verified, ranks, worst_err,
         rc == 0 ? "yes" : "NO");
  printf("vkrt-service: paths: transport %s; weights %s; upload %.2f GB/s\n",
         vkrt_transport_str(vkrt_transport(app)), vkrt_import_path_str(info.path[0]),
         (double)uploaded / t_up * 1e-9);

out:
  if (app) {
    for (uint32_t d = 0; d < VKRT_MAX_DEVICES; d++) {
      for (uint32_t l = 0; l < MAX_LAYERS; l++) {
        vkrt_buffer_destroy(dev[d].gate[l]);
        vkrt_buffer_destroy(dev[d].up[l]);
        vkrt_buffer_destroy(dev[d].down[l]);
      }
      vkrt_buffer_destroy(dev[d].x);
      vkrt_buffer_destroy(dev[d].y);
      vkrt_buffer_destroy(dev[d].g);
      vkrt_buffer_destroy(dev[d].u);
      vkrt_buffer_destroy(dev[d].x_in);
    }
    if (registered)
      vkrt_host_unregister(app, data);
    vkrt_close(app);
  }
  free(lat);
  free(xin);
  free(xref);
  free(xout);
  free(saved_in);
  free(saved_out);
  free(saved_tok);
  gguf_close(&wf);
  free(mlp);
  tool_hosts_finish(rc);
  return rc;
}
