/* vkrt-service: a firmware-style tensor-parallel decode service on libvkrt.
 *
 * Opens the board's appliance, prints the plan, mmaps a weights file read-only, registers it
 * (the board's import policy), uploads each device's shard (W1 rows: contiguous; W2 columns:
 * a 2-D strided upload), then for each token runs, per layer, the Megatron MLP split:
 *   h_d = W1_d x ; y_d = W2_d h_d ; y = allreduce(y_d) ; x = x + y
 * (one rank in all: h = W1 x ; x += W2 h, vkrt_op_matmul_add)
 * and checks the final activations against a float64 CPU reference.
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
#include <time.h>

#include "../../tools/hosts.h"
#include "vkrt/vkrt.h"
#include "weights.h"

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
          "usage: vkrt-service --weights FILE [--tokens T] [--seconds S] [--hidden H] [--layers L]\n"
          "                    [--devices N] [--warmup-ms MS] [--verbose] [--fault import-fails]\n"
          "       vkrt-service --make-weights FILE --layers L --hidden H [--ffn F] [--dtype f16|f32]\n"
          "                    [--seed N]\n"
          "--hidden/--layers with --weights check the file's shapes (a mismatch is an error).\n");
}

struct device_state {
  vkrt_buffer *w1[64], *w2[64]; /* per layer; layers <= 64 in this example */
  vkrt_buffer *x, *h, *y;
  vkrt_buffer *x_in;             /* host-visible: the next token's input, copied on the GPU */
  float *x_in_map;
  uint32_t k0, k1;               /* this device's ffn slice */
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

/* float64 reference of one token through every layer. */
static void reference(const struct weights_file *w, float *x_inout) {
  const struct weights_header *h = &w->h;
  double *x = calloc(h->hidden, sizeof(double)), *hid = calloc(h->ffn, sizeof(double));
  for (uint32_t i = 0; i < h->hidden; i++)
    x[i] = x_inout[i];
  for (uint32_t l = 0; l < h->layers; l++) {
    for (uint32_t n = 0; n < h->ffn; n++) {
      double acc = 0;
      for (uint32_t k = 0; k < h->hidden; k++)
        acc += (double)weights_get(w, l, 0, k, n) * x[k];
      hid[n] = acc;
    }
    for (uint32_t n = 0; n < h->hidden; n++) {
      double acc = 0;
      for (uint32_t k = 0; k < h->ffn; k++)
        acc += (double)weights_get(w, l, 1, k, n) * hid[k];
      x[n] += acc;
    }
  }
  for (uint32_t i = 0; i < h->hidden; i++)
    x_inout[i] = (float)x[i];
  free(x);
  free(hid);
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
  bool verbose = false, fault_import = false;
  uint32_t dtype = 1;
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
    } else if (!strcmp(a, "--make-weights")) {
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
      ok = !strcmp(v, "f16") || !strcmp(v, "f32");
      dtype = !strcmp(v, "f16") ? 1 : 0;
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
      fprintf(stderr, "vkrt-service: --make-weights needs --layers and --hidden\n");
      return EXIT_USAGE;
    }
    if (layers > 64) {
      fprintf(stderr, "vkrt-service: at most 64 layers in this example\n");
      return EXIT_USAGE;
    }
    int r = weights_make(make_path, (uint32_t)layers, (uint32_t)hidden,
                         (uint32_t)(ffn ? ffn : hidden * 4), dtype, seed);
    if (r == 0)
      printf("vkrt-service: wrote %s (layers %llu, hidden %llu, ffn %llu, %s)\n", make_path,
             (unsigned long long)layers, (unsigned long long)hidden,
             (unsigned long long)(ffn ? ffn : hidden * 4), dtype ? "f16" : "f32");
    return r;
  }
  if (!weights_path) {
    usage(stderr);
    return EXIT_USAGE;
  }

  struct weights_file wf;
  int rc = weights_open(weights_path, &wf);
  if (rc)
    return rc;
  const struct weights_header *wh = &wf.h;
  if ((hidden && hidden != wh->hidden) || (layers && layers != wh->layers) ||
      (ffn && ffn != wh->ffn)) {
    fprintf(stderr, "vkrt-service: shape mismatch: %s has layers %u hidden %u ffn %u, but "
                    "--layers %llu --hidden %llu --ffn %llu were given\n",
            weights_path, wh->layers, wh->hidden, wh->ffn, (unsigned long long)layers,
            (unsigned long long)hidden, (unsigned long long)ffn);
    weights_close(&wf);
    return EXIT_WEIGHTS;
  }
  if (wh->layers > 64) {
    fprintf(stderr, "vkrt-service: %s has %u layers; this example handles at most 64\n",
            weights_path, wh->layers);
    weights_close(&wf);
    return EXIT_WEIGHTS;
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
#else
  if (fault_import) {
    fprintf(stderr, "vkrt-service: --fault needs CONFIG_VKRT_FAULT_INJECTION=y\n");
    weights_close(&wf);
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
    weights_close(&wf);
    tool_hosts_finish(EXIT_RUNTIME);
    return EXIT_RUNTIME;
  }
  uint32_t n = vkrt_device_count(app);
  /* Tensor-parallel ranks: every device of every host (one host without MPI). */
  uint32_t ranks = n * vkrt_host_count(app), first_rank = n * vkrt_host_rank(app);
  if (wh->ffn < ranks) {
    fprintf(stderr, "vkrt-service: ffn %u is smaller than the %u ranks\n", wh->ffn, ranks);
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
  printf("vkrt-service: %s: layers %u hidden %u ffn %u %s, %u devices, transport %s\n",
         weights_path, wh->layers, wh->hidden, wh->ffn, wh->dtype ? "f16" : "f32", n,
         vkrt_transport_str(vkrt_transport(app)));

  /* Register the whole mapping (header included: page-aligned start). */
  vkrt_register_info info;
  double t_reg = now_s();
  CHECK(vkrt_host_register(app, wf.map, wf.map_size, NULL, NULL, &info));
  t_reg = now_s() - t_reg;
  registered = true;
  for (uint32_t d = 0; d < n; d++)
    printf("vkrt: dev%u weights via %s: %s\n", d, vkrt_import_path_str(info.path[d]), info.reason[d]);
  printf("vkrt-service: registered %.1f MiB in %u chunks in %.3f s\n",
         (double)wf.map_size / (1 << 20), info.chunk_count, t_reg);

  size_t es = weights_type_size(wh->dtype);
  vkrt_type wtype = wh->dtype ? VKRT_TYPE_F16 : VKRT_TYPE_F32;
  uint64_t matrix = weights_matrix_bytes(wh), uploaded = 0;
  double t_up = now_s();
  for (uint32_t d = 0; d < n; d++) {
    struct device_state *ds = &dev[d];
    ds->k0 = (uint32_t)((uint64_t)wh->ffn * (first_rank + d) / ranks);
    ds->k1 = (uint32_t)((uint64_t)wh->ffn * (first_rank + d + 1) / ranks);
    uint64_t shard = ds->k1 - ds->k0;
    for (uint32_t l = 0; l < wh->layers; l++) {
      const uint8_t *w1 = wf.data + matrix * 2 * l, *w2 = w1 + matrix;
      CHECK(vkrt_buffer_create(app, d, shard * wh->hidden * es, VKRT_BUFFER_DEVICE_LOCAL, &ds->w1[l]));
      CHECK(vkrt_buffer_create(app, d, shard * wh->hidden * es, VKRT_BUFFER_DEVICE_LOCAL, &ds->w2[l]));
      /* W1 rows k0..k1 (ne1 = ffn) are contiguous; W2 columns k0..k1 of each of the hidden
       * rows are a strided 2-D region. */
      CHECK(vkrt_upload(ds->w1[l], 0, w1 + (uint64_t)ds->k0 * wh->hidden * es, shard * wh->hidden * es));
      CHECK(vkrt_upload_2d(ds->w2[l], 0, shard * es, w2 + (uint64_t)ds->k0 * es,
                           (uint64_t)wh->ffn * es, shard * es, wh->hidden));
      uploaded += 2 * shard * wh->hidden * es;
    }
    CHECK(vkrt_buffer_create(app, d, (uint64_t)wh->hidden * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->x));
    CHECK(vkrt_buffer_create(app, d, (uint64_t)wh->hidden * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->y));
    CHECK(vkrt_buffer_create(app, d, shard * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->h));
    CHECK(vkrt_buffer_create(app, d, (uint64_t)wh->hidden * 4, VKRT_BUFFER_HOST_VISIBLE, &ds->x_in));
    void *map = NULL;
    CHECK(vkrt_buffer_map(ds->x_in, &map));
    ds->x_in_map = map;
  }
  t_up = now_s() - t_up;
  printf("vkrt-service: uploaded %.1f MiB of shards in %.3f s (%.2f GB/s)\n",
         (double)uploaded / (1 << 20), t_up, (double)uploaded / t_up * 1e-9);

  /* The roofline: every device reads its shard of the weights once per token, at the
   * bandwidth of a plain device copy measured here (read + written bytes per second). */
  uint64_t shard_bytes = 0;
  for (uint32_t d = 0; d < n; d++)
    shard_bytes = (uint64_t)fmax((double)shard_bytes, 2.0 * (dev[d].k1 - dev[d].k0) * wh->hidden * es * wh->layers);
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
  xin = malloc(wh->hidden * sizeof(float));
  xref = malloc(wh->hidden * sizeof(float));
  xout = malloc(wh->hidden * sizeof(float));
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
  saved_in = malloc((tokens / 16 + 2) * wh->hidden * sizeof(float));
  saved_out = malloc((tokens / 16 + 2) * wh->hidden * sizeof(float));
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
    weights_input(wh->seed, t, xin, wh->hidden);
    double t0 = now_s();
    /* The input goes through each device's host-visible buffer and a recorded copy: no
     * round trip before the token's work is submitted. */
    for (uint32_t d = 0; d < n; d++) {
      memcpy(dev[d].x_in_map, xin, (size_t)wh->hidden * 4);
      CHECK(vkrt_cmd_copy_buffer(dev[d].x, 0, dev[d].x_in, 0, (uint64_t)wh->hidden * 4));
    }
    double t1 = now_s();
    for (uint32_t l = 0; l < wh->layers; l++) {
      vkrt_allreduce_args ar = {.count = wh->hidden, .type = VKRT_TYPE_F32};
      for (uint32_t d = 0; d < n; d++) {
        struct device_state *ds = &dev[d];
        uint32_t shard = ds->k1 - ds->k0;
        vkrt_tensor w1 = vkrt_tensor_contiguous(ds->w1[l], 0, wtype, wh->hidden, shard, 1, 1);
        vkrt_tensor w2 = vkrt_tensor_contiguous(ds->w2[l], 0, wtype, shard, wh->hidden, 1, 1);
        vkrt_tensor x = vkrt_tensor_contiguous(ds->x, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
        vkrt_tensor h = vkrt_tensor_contiguous(ds->h, 0, VKRT_TYPE_F32, shard, 1, 1, 1);
        vkrt_tensor y = vkrt_tensor_contiguous(ds->y, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
        CHECK(vkrt_op_matmul(&h, &w1, &x));
        if (ranks == 1) { /* one rank: the residual add rides on the second matmul */
          CHECK(vkrt_op_matmul_add(&x, &w2, &h));
          continue;
        }
        CHECK(vkrt_op_matmul(&y, &w2, &h));
        ar.send[d] = ar.recv[d] = ds->y;
      }
      if (ranks == 1)
        continue;
      CHECK(vkrt_allreduce(app, &ar));
      for (uint32_t d = 0; d < n; d++) {
        vkrt_tensor x = vkrt_tensor_contiguous(dev[d].x, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
        vkrt_tensor y = vkrt_tensor_contiguous(dev[d].y, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
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
      float *rank0 = saved_out + verified * wh->hidden;
      for (uint32_t d = 0; d < n; d++) {
        CHECK(vkrt_download(d == 0 ? rank0 : xout, dev[d].x, 0, (uint64_t)wh->hidden * 4));
        if (d > 0 && memcmp(rank0, xout, wh->hidden * sizeof(float)) != 0) {
          fprintf(stderr, "vkrt-service: token %llu: rank %u differs from rank 0\n",
                  (unsigned long long)t, d);
          rc = EXIT_VERIFY;
        }
      }
      uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a of this host's result */
      for (size_t i = 0; i < wh->hidden * sizeof(float); i++)
        hash = (hash ^ ((const uint8_t *)rank0)[i]) * 0x100000001b3ull;
      if (!tool_hosts_same(hash)) {
        fprintf(stderr, "vkrt-service: token %llu: host%u's result differs from another host's\n",
                (unsigned long long)t, vkrt_host_rank(app));
        rc = EXIT_VERIFY;
      }
      memcpy(saved_in + verified * wh->hidden, xin, wh->hidden * sizeof(float));
      saved_tok[verified++] = t;
      t_verify += now_s() - t_v;
      rc = (int)tool_hosts_max(rc); /* a failure anywhere stops every host */
      if (rc)
        goto out;
    }
  }
  double t_end = now_s();
  for (uint64_t v = 0; v < verified; v++) {
    memcpy(xref, saved_in + v * wh->hidden, wh->hidden * sizeof(float));
    reference(&wf, xref);
    const float *rank0 = saved_out + v * wh->hidden;
    double scale = 1, err = 0;
    for (uint32_t i = 0; i < wh->hidden; i++)
      scale = fmax(scale, fabs((double)xref[i]));
    for (uint32_t i = 0; i < wh->hidden; i++)
      err = fmax(err, fabs((double)rank0[i] - (double)xref[i]) / scale);
    err = tool_hosts_max(err);
    worst_err = fmax(worst_err, err);
    if (!(err <= 2e-3)) {
      fprintf(stderr, "vkrt-service: token %llu: max relative error %.3g vs float64 reference\n",
              (unsigned long long)saved_tok[v], err);
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
    printf("vkrt-service: per token (mean of tokens 2..): input %.1f us, record %.1f us (%u ops "
           "per device), submit %.1f us, wait %.1f us\n", prof[0] / np * 1e6, prof[1] / np * 1e6,
           1 + wh->layers * (ranks == 1 ? 2 : 3), prof[2] / np * 1e6, prof[3] / np * 1e6);
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
      for (uint32_t l = 0; l < 64; l++) {
        vkrt_buffer_destroy(dev[d].w1[l]);
        vkrt_buffer_destroy(dev[d].w2[l]);
      }
      vkrt_buffer_destroy(dev[d].x);
      vkrt_buffer_destroy(dev[d].y);
      vkrt_buffer_destroy(dev[d].h);
      vkrt_buffer_destroy(dev[d].x_in);
    }
    if (registered)
      vkrt_host_unregister(app, wf.map);
    vkrt_close(app);
  }
  free(lat);
  free(xin);
  free(xref);
  free(xout);
  free(saved_in);
  free(saved_out);
  free(saved_tok);
  weights_close(&wf);
  tool_hosts_finish(rc);
  return rc;
}
