/* vkrt-bench chain: what a dependent op's pipeline barrier costs. A chain of dependent f16
 * matrix-vector products (vkrt_lab_chain_record), one dispatch a link, ordered by a
 * pipeline barrier between the dispatches (what the stream records today) or by arrival
 * counters each workgroup waits on (the next link's start overlapping the last one's tail),
 * timed per link by GPU timestamps; the orders' results compared bit for bit, the first
 * against a float64 chain on the CPU. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct chain_ctx {
  vkrt_buffer *w, *xy, *counters;
  vkrt_lab_chain spec;
};

static vkrt_status record_chain(void *user) {
  struct chain_ctx *c = user;
  return vkrt_lab_chain_record(c->w, c->xy, c->counters, &c->spec);
}

/* Uniform in [-1, 1) from the bench's generator. */
static double uniform_pm1(uint64_t *state) {
  return 2.0 * (double)(vkrt_xorshift(state) >> 11) / 9007199254740992.0 - 1.0;
}

static const char *const order_names[VKRT_LAB_CHAIN_ORDER_COUNT] = {
    "barriers", "counters", "counters, weights first", "unordered (races: the floor)"};

static int usage(FILE *f) {
  fprintf(f, "usage: vkrt-bench chain [--n N] [--links L] [--matrices M] [--iters I] [--device D]\n"
             "  A chain of L dependent f16 products (N x N, M distinct matrices in turn), timed\n"
             "  per link with a pipeline barrier between the dispatches and with arrival\n"
             "  counters instead; defaults 4096, 64, 8, 7 (CPU devices 512, 8, 2, 3).\n");
  return f == stderr ? 2 : 0;
}

static int cmd_chain(int argc, char **argv) {
  static const struct option longs[] = {
      {"n", required_argument, 0, 'n'},     {"links", required_argument, 0, 'l'},
      {"matrices", required_argument, 0, 'm'}, {"iters", required_argument, 0, 'i'},
      {"device", required_argument, 0, 'd'}, {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  uint32_t n = 0, links = 0, matrices = 0, device = 0;
  int iters = 0;
  optind = 1;
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'n': n = (uint32_t)atoi(optarg); break;
    case 'l': links = (uint32_t)atoi(optarg); break;
    case 'm': matrices = (uint32_t)atoi(optarg); break;
    case 'i': iters = atoi(optarg); break;
    case 'd': device = (uint32_t)atoi(optarg); break;
    default: return usage(ch == 'h' ? stdout : stderr);
    }
  }
  vkrt_appliance *app = bench_open(NULL);
  if (device >= vkrt_device_count(app)) {
    fprintf(stderr, "vkrt-bench chain: no device %u\n", device);
    vkrt_close(app);
    return 2;
  }
  vkrt_lab_device td;
  vkrt_device_info info;
  vkrt_lab_device_get(app, device, &td);
  vkrt_device_info_get(app, device, &info);
  n = n ? n : td.is_cpu ? 512 : 4096;
  links = links ? links : td.is_cpu ? 8 : 64;
  matrices = matrices ? matrices : td.is_cpu ? 2 : 8;
  iters = iters > 0 ? (iters > 64 ? 64 : iters) : td.is_cpu ? 3 : 7;
  const uint64_t matrix = (uint64_t)n * n;
  int rc = 1;
  struct chain_ctx c = {.spec = {.n = n, .links = links, .matrices = matrices}};
  vkrt_lab_timer *timer = NULL;
  uint16_t *w = malloc(matrix * matrices * 2);
  float *x0 = malloc((size_t)n * 4), *out = malloc((size_t)n * 4), *first = malloc((size_t)n * 4);
  double *ref = malloc((size_t)n * 16);
  if (!w || !x0 || !out || !first || !ref) {
    fprintf(stderr, "vkrt-bench chain: out of host memory\n");
    goto done;
  }
  /* entries uniform in +-sqrt(3 / n): each product keeps x's scale, so 64 links neither
   * overflow nor vanish */
  uint64_t state = 0x9e3779b97f4a7c15ull;
  const double a = sqrt(3.0 / n);
  for (uint64_t i = 0; i < matrix * matrices; i++)
    w[i] = vkrt_f32_to_f16((float)(a * uniform_pm1(&state)));
  for (uint32_t i = 0; i < n; i++)
    x0[i] = (float)uniform_pm1(&state);
  if (vkrt_buffer_create(app, device, matrix * matrices * 2, VKRT_BUFFER_DEVICE_LOCAL, &c.w) != VKRT_OK ||
      vkrt_buffer_create(app, device, (uint64_t)n * 8, VKRT_BUFFER_DEVICE_LOCAL, &c.xy) != VKRT_OK ||
      vkrt_buffer_create(app, device, ((uint64_t)links + 1) * 4, VKRT_BUFFER_DEVICE_LOCAL,
                         &c.counters) != VKRT_OK ||
      vkrt_upload(c.w, 0, w, matrix * matrices * 2) != VKRT_OK) {
    fprintf(stderr, "vkrt-bench chain: setup failed: %s\n", vkrt_last_error(app));
    goto done;
  }
  if (vkrt_lab_timer_create(app, device, &timer) != VKRT_OK)
    timer = NULL; /* wall clock */
  /* the float64 chain on the same halves */
  double *xr = ref, *yr = ref + n;
  for (uint32_t i = 0; i < n; i++)
    xr[i] = x0[i];
  static float halves[65536]; /* every half's value, looked up */
  for (uint32_t h = 0; h < 65536; h++)
    halves[h] = vkrt_f16_to_f32((uint16_t)h);
  for (uint32_t l = 0; l < links; l++) {
    const uint16_t *m = w + (uint64_t)(l % matrices) * matrix;
    for (uint32_t r = 0; r < n; r++) {
      double s = 0;
      for (uint32_t k = 0; k < n; k++)
        s += (double)halves[m[(uint64_t)r * n + k]] * xr[k];
      yr[r] = s;
    }
    double *t = xr;
    xr = yr;
    yr = t;
  }
  double ref_norm = 0;
  for (uint32_t i = 0; i < n; i++)
    ref_norm = fmax(ref_norm, fabs(xr[i]));
  printf("vkrt-bench chain: dev%u %s (%s), %u dependent f16 products of %u x %u (%.1f MiB a "
         "matrix, %u in turn), median of %d, %s\n", device, info.name, info.driver_name, links, n,
         n, (double)matrix * 2 / 1048576.0, matrices, iters,
         timer ? "GPU timestamps per link" : "wall clock per link (no timestamps here)");
  printf("%-29s %10s %9s %12s  %s\n", "order", "us/link", "GB/s", "wall us/link", "result");
  int bad = 0;
  for (int o = 0; o < VKRT_LAB_CHAIN_ORDER_COUNT; o++) {
    c.spec.order = (vkrt_lab_chain_order)o;
    double t[64], wall[64], sec = 0;
    vkrt_status s = VKRT_OK;
    for (int i = -1; i < iters && s == VKRT_OK; i++) { /* one warm-up round first */
      s = vkrt_upload(c.xy, 0, x0, (uint64_t)n * 4);
      if (s == VKRT_OK) /* the other half NaN, done before the timed batch */
        s = vkrt_cmd_fill(c.xy, (uint64_t)n * 4, (uint64_t)n * 4, 0xffffffffu);
      if (s == VKRT_OK)
        s = vkrt_finish(app, device);
      if (s == VKRT_OK)
        s = bench_time_recorded(app, device, timer, true, record_chain, &c, &sec);
      if (s == VKRT_OK && i >= 0) {
        t[i] = sec / links;
        wall[i] = bench_last_wall_s / links;
      }
    }
    uint32_t gave_up = 0;
    if (s == VKRT_OK)
      s = vkrt_download(out, c.xy, (uint64_t)(links % 2) * n * 4, (uint64_t)n * 4);
    if (s == VKRT_OK)
      s = vkrt_download(&gave_up, c.counters, (uint64_t)links * 4, 4);
    if (s != VKRT_OK) {
      printf("%-29s failed: %s\n", order_names[o], vkrt_last_error(app));
      bad++;
      continue;
    }
    char result[96];
    if (o == 0) {
      double err = 0;
      for (uint32_t i = 0; i < n; i++)
        err = fmax(err, fabs((double)out[i] - xr[i]));
      err /= ref_norm > 0 ? ref_norm : 1;
      memcpy(first, out, (size_t)n * 4);
      bool ok = err < 1e-3;
      bad += !ok;
      snprintf(result, sizeof(result), "%s: max error %.2e of the float64 chain's max",
               ok ? "ok" : "WRONG", err);
    } else if (o == VKRT_LAB_CHAIN_UNORDERED) {
      snprintf(result, sizeof(result), "not compared: the links race");
    } else {
      bool same = !memcmp(first, out, (size_t)n * 4);
      bad += !same || gave_up;
      snprintf(result, sizeof(result), "%s%s", same ? "bit-identical to the barriers'" : "DIFFERS",
               gave_up ? ", a wait gave up (void)" : "");
    }
    double m = bench_median(t, iters), mw = bench_median(wall, iters);
    printf("%-29s %10.2f %9.1f %12.2f  %s\n", order_names[o], m * 1e6,
           m > 0 ? (double)matrix * 2 / m * 1e-9 : 0, mw * 1e6, result);
  }
  printf("chain: %d wrong\n", bad);
  rc = bad ? 1 : 0;
done:
  vkrt_lab_timer_destroy(timer);
  vkrt_buffer_destroy(c.w);
  vkrt_buffer_destroy(c.xy);
  vkrt_buffer_destroy(c.counters);
  vkrt_close(app);
  free(w);
  free(x0);
  free(out);
  free(first);
  free(ref);
  return rc;
}

BENCH_COMMAND(chain, "chain", "dependent products ordered by barriers vs arrival counters (us per link)",
              cmd_chain)
