/* vkrt-bench graph: a token of dependent small ops (and an allreduce across the devices)
 * recorded per token against the same token captured once and launched, medians of --iters
 * tokens: host time on the caller's thread per token (recording + submit, or the launch)
 * and the token's completion time (through vkrt_wait on every device), with the results
 * compared bit for bit. The host share of a token is what a captured graph removes. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { N = 1024 };

struct graph_bench {
  vkrt_appliance *app;
  uint32_t n;
  int ops;
  vkrt_buffer *w[VKRT_MAX_DEVICES], *x[VKRT_MAX_DEVICES], *y[VKRT_MAX_DEVICES];
};

/* ops / 2 pairs of y = W x; x = y + x per device, then an allreduce of x across devices. */
static vkrt_status token(struct graph_bench *b) {
  vkrt_allreduce_args ar = {.count = N, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < b->n; d++) {
    vkrt_tensor w = vkrt_tensor_contiguous(b->w[d], 0, VKRT_TYPE_F16, N, N, 1, 1);
    vkrt_tensor x = vkrt_tensor_contiguous(b->x[d], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    vkrt_tensor y = vkrt_tensor_contiguous(b->y[d], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    const vkrt_tensor *xy[2] = {&x, &y};
    for (int i = 0; i < b->ops / 2; i++) {
      vkrt_status s = vkrt_op_matmul(&y, &w, &x);
      if (s == VKRT_OK)
        s = vkrt_op_add(&x, xy, 2);
      if (s != VKRT_OK)
        return s;
    }
    ar.send[d] = ar.recv[d] = b->x[d];
  }
  return b->n > 1 ? vkrt_allreduce(b->app, &ar) : VKRT_OK;
}

static int fail(vkrt_appliance *app, const char *what) {
  fprintf(stderr, "vkrt-bench graph: %s: %s\n", what, vkrt_last_error(app));
  return 1;
}

/* x = x0 (small values: the chain stays finite) on every device. */
static int reset(struct graph_bench *b, const float *x0) {
  for (uint32_t d = 0; d < b->n; d++)
    if (vkrt_upload(b->x[d], 0, x0, N * 4) != VKRT_OK)
      return fail(b->app, "upload");
  return 0;
}

static int cmd_graph(int argc, char **argv) {
  static const struct option longs[] = {{"iters", required_argument, 0, 'i'},
                                        {"ops", required_argument, 0, 'o'},
                                        {"devices", required_argument, 0, 'd'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  int iters = 50, ops = 64, devices = 0, ch;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'i': iters = atoi(optarg); break;
    case 'o': ops = atoi(optarg); break;
    case 'd': devices = atoi(optarg); break;
    default:
      printf("usage: vkrt-bench graph [--iters N] [--ops N] [--devices N]\n"
             "  a token of N dependent ops (matvec f16 %d^2 + add pairs) per device and an\n"
             "  allreduce: recorded per token vs captured once and launched\n", N);
      return ch == 'h' ? 0 : 2;
    }
  }
  if (iters < 1 || iters > 10000 || ops < 2 || ops > 200 || devices < 0 ||
      devices > VKRT_MAX_DEVICES)
    return 2;
  vkrt_options o;
  vkrt_options_initialize(&o);
  o.device_count = (uint32_t)devices;
  struct graph_bench b = {.app = bench_open(&o), .ops = ops};
  b.n = vkrt_device_count(b.app);
  static _Float16 w[N * N];
  static float x0[N], direct[N], replay[N];
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N * N; i++)
    w[i] = (_Float16)((double)(vkrt_xorshift(&seed) >> 40) / (double)(1 << 24) * 2e-3 - 1e-3);
  for (int i = 0; i < N; i++)
    x0[i] = (float)((double)(vkrt_xorshift(&seed) >> 40) / (double)(1 << 24) - 0.5);
  int rc = 0;
  for (uint32_t d = 0; d < b.n && !rc; d++)
    if (vkrt_buffer_create(b.app, d, sizeof(w), 0, &b.w[d]) ||
        vkrt_buffer_create(b.app, d, N * 4, 0, &b.x[d]) ||
        vkrt_buffer_create(b.app, d, N * 4, 0, &b.y[d]) || vkrt_upload(b.w[d], 0, w, sizeof(w)))
      rc = fail(b.app, "buffers");
  double *host = calloc((size_t)iters, sizeof(double)), *done = calloc((size_t)iters, sizeof(double));
  vkrt_graph *g = NULL;
  if (!rc && (!host || !done))
    rc = 1;
  if (!rc && (vkrt_graph_begin(b.app) || token(&b) || vkrt_graph_end(b.app, &g)))
    rc = fail(b.app, "capture");
  printf("vkrt-bench graph: %u device(s), transport %s, %d dependent ops per device per token "
         "(+ an allreduce with 2 or more devices), median of %d tokens\n", b.n,
         vkrt_transport_str(vkrt_transport(b.app)), ops, iters);
  for (int mode = 0; mode < 2 && !rc; mode++) {
    rc = reset(&b, x0);
    for (int i = -2; i < iters && !rc; i++) {
      uint64_t tickets[VKRT_MAX_DEVICES];
      double t0 = bench_now_s();
      vkrt_status s = VKRT_OK;
      if (mode == 0) {
        s = token(&b);
        for (uint32_t d = 0; d < b.n && s == VKRT_OK; d++)
          s = vkrt_submit(b.app, d, &tickets[d]);
      } else {
        s = vkrt_graph_launch(g, tickets);
      }
      double t1 = bench_now_s();
      for (uint32_t d = 0; d < b.n && s == VKRT_OK; d++)
        s = vkrt_wait(b.app, d, tickets[d], UINT64_MAX);
      if (s != VKRT_OK)
        rc = fail(b.app, mode ? "launch" : "direct token");
      else if (i >= 0) {
        host[i] = (t1 - t0) * 1e6;
        done[i] = (bench_now_s() - t0) * 1e6;
      }
    }
    if (rc || vkrt_download(mode ? replay : direct, b.x[0], 0, N * 4))
      break;
    double h = bench_median(host, iters), c = bench_median(done, iters);
    printf("  %-9s host %9.2f us per token (%6.3f us per op), complete %9.2f us per token, "
           "host %5.1f %%\n", mode ? "launched" : "recorded", h, h / (ops * b.n), c, 100 * h / c);
  }
  if (!rc)
    printf("  results %s\n", memcmp(direct, replay, sizeof(direct)) ? "DIFFER" : "bit-identical");
  rc |= !rc && memcmp(direct, replay, sizeof(direct)) != 0;
  vkrt_graph_destroy(g);
  for (uint32_t d = 0; d < b.n; d++) {
    vkrt_buffer_destroy(b.w[d]);
    vkrt_buffer_destroy(b.x[d]);
    vkrt_buffer_destroy(b.y[d]);
  }
  free(host);
  free(done);
  vkrt_close(b.app);
  return rc;
}

BENCH_COMMAND(graph, "graph", "a token of small dependent ops: recorded per token vs a captured graph launched",
              cmd_graph)
