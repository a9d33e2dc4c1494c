/* vkrt-bench copy | transpose | concat | matmul: device kernels, timed with GPU timestamps
 * (timestampPeriod; wall clock of submit + wait where the device has none), median of
 * --iters runs after warm-up. GB/s counts bytes read + written; every table carries the
 * ratio to the 16-byte compute copy (copy_vec4) of the same bytes measured in the same run.
 * Default sizes exceed a GPU's last-level cache (1 GiB per tensor; 16 MiB on CPU devices
 * such as lavapipe, where --size can shrink or grow it). */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"

struct ops_opts {
  uint64_t size; /* 0: per device default */
  int iters;
  uint32_t device;
  bool json;
  vkrt_type type;
  uint32_t groups; /* copy_vec4 workgroups per dispatch (0: the library's choice) */
  int64_t k;       /* matmul K */
  int64_t n;       /* quant N */
  int variant;     /* quant: 0 = every kernel variant, else that one (1-based) */
};

struct bench_ctx {
  struct ops_opts o;
  vkrt_appliance *app;
  vkrt_lab_device td;
  vkrt_lab_timer *timer; /* NULL: wall clock */
  int results;
  double copy_gbps; /* the copy_vec4 reference of this run */
};

typedef vkrt_status (*record_fn)(struct bench_ctx *c, void *user);

static void usage(const char *cmd) {
  printf("usage: vkrt-bench %s [--size BYTES] [--iters N] [--device D] [--type f32|f16] [--json]%s\n"
         "  --size   bytes per source tensor (default 1G; 16M on CPU devices), e.g. 256M\n"
         "  --iters  timed runs, median reported (default 20; 5 on CPU devices)\n",
         cmd, !strcmp(cmd, "copy") ? " [--groups G]" : !strcmp(cmd, "matmul") ? " [--k K]"
             : !strcmp(cmd, "quant") ? " [--k K] [--n N] [--variant V] (--type q8_0|q4_K)" : "");
}

static bool parse(int argc, char **argv, struct ops_opts *o) {
  static const struct option longs[] = {
      {"size", required_argument, 0, 's'}, {"iters", required_argument, 0, 'i'},
      {"device", required_argument, 0, 'd'}, {"type", required_argument, 0, 't'},
      {"json", no_argument, 0, 'j'},         {"groups", required_argument, 0, 'g'},
      {"k", required_argument, 0, 'k'},      {"help", no_argument, 0, 'h'},
      {"n", required_argument, 0, 'n'},      {"variant", required_argument, 0, 'v'},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof(*o));
  o->type = VKRT_TYPE_F32;
  optind = 1;
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 's':
      if (!bench_parse_size(optarg, &o->size) || !o->size) {
        fprintf(stderr, "vkrt-bench: bad --size '%s'\n", optarg);
        return false;
      }
      break;
    case 'i': o->iters = atoi(optarg); break;
    case 'd': o->device = (uint32_t)atoi(optarg); break;
    case 'j': o->json = true; break;
    case 'g': o->groups = (uint32_t)atoi(optarg); break;
    case 'k': o->k = atoll(optarg); break;
    case 't':
      if (!strcmp(optarg, "f16")) {
        o->type = VKRT_TYPE_F16;
      } else if (!strcmp(optarg, "q8_0")) {
        o->type = VKRT_TYPE_Q8_0;
      } else if (!strcasecmp(optarg, "q4_k")) {
        o->type = VKRT_TYPE_Q4_K;
      } else if (strcmp(optarg, "f32")) {
        fprintf(stderr, "vkrt-bench: --type is f32, f16, q8_0 or q4_K\n");
        return false;
      }
      break;
    case 'n': o->n = atoll(optarg); break;
    case 'v': o->variant = atoi(optarg); break;
    default: usage(argv[0]); return false;
    }
  }
  return true;
}

static bool setup(struct bench_ctx *c, int argc, char **argv) {
  memset(c, 0, sizeof(*c));
  if (!parse(argc, argv, &c->o))
    return false;
  c->app = bench_open(NULL);
  if (c->o.device >= vkrt_device_count(c->app)) {
    fprintf(stderr, "vkrt-bench: no device %u\n", c->o.device);
    vkrt_close(c->app);
    return false;
  }
  vkrt_device_info info;
  if (vkrt_device_info_get(c->app, c->o.device, &info) != VKRT_OK ||
      vkrt_lab_device_get(c->app, c->o.device, &c->td) != VKRT_OK ||
      (c->o.groups &&
       vkrt_lab_set(c->app, c->o.device, VKRT_LAB_COPY_VEC4_MAX_GROUPS, c->o.groups) != VKRT_OK)) {
    fprintf(stderr, "vkrt-bench: %s\n", vkrt_last_error(c->app));
    vkrt_close(c->app);
    return false;
  }
  bool cpu = c->td.is_cpu;
  if (!c->o.size)
    c->o.size = cpu ? 16ull << 20 : 1ull << 30;
  /* transpose and the generic kernels bind a tensor whole */
  uint64_t cap = bench_align_down(c->td.max_storage_buffer_range - 256, 4096);
  if (c->o.size > cap) {
    fprintf(stderr, "vkrt-bench: --size %" PRIu64 " lowered to maxStorageBufferRange (%" PRIu64 ")\n",
            c->o.size, cap);
    c->o.size = cap;
  }
  if (!c->o.iters)
    c->o.iters = cpu ? 5 : 20;
  vkrt_lab_timer_create(c->app, c->o.device, &c->timer); /* NULL: no timestamps */
  const char *copy_path = vkrt_lab_copy_path(c->app, c->o.device);
  if (c->o.json)
    printf("{\"bench\": \"%s\", \"device\": \"%s\", \"driver\": \"%s\", \"timer\": \"%s\", "
           "\"iters\": %d, \"size\": %" PRIu64 ", \"copy_path\": \"%s\", \"results\": [",
           argv[0], info.name, info.driver_name, c->timer ? "gpu-timestamps" : "wall", c->o.iters,
           c->o.size, copy_path);
  else
    printf("vkrt-bench %s: dev%u %s (%s), %s, median of %d, copy path: %s\n", argv[0],
           c->o.device, info.name, info.driver_name,
           c->timer ? "GPU timestamps" : "wall clock (no timestamps)", c->o.iters, copy_path);
  return true;
}

static int teardown(struct bench_ctx *c, int rc) {
  if (c->o.json)
    printf("]}\n");
  vkrt_lab_timer_destroy(c->timer);
  vkrt_close(c->app);
  return rc;
}

struct timed_record {
  struct bench_ctx *c;
  record_fn fn;
  void *user;
};

static vkrt_status run_record(void *user) {
  struct timed_record *r = user;
  return r->fn(r->c, r->user);
}

/* Median seconds of one recorded op (its own submit each run). < 0 on failure. */
static double time_op(struct bench_ctx *c, record_fn fn, void *user) {
  int n = c->o.iters;
  double *t = calloc((size_t)n, sizeof(double));
  if (!t)
    return -1;
  struct timed_record r = {c, fn, user};
  for (int i = -2; i < n; i++) { /* two warm-up runs */
    double s;
    vkrt_status st = bench_time_recorded(c->app, c->o.device, c->timer, false, run_record, &r, &s);
    if (st != VKRT_OK) {
      fprintf(stderr, "vkrt-bench: %s: %s\n", vkrt_status_str(st), vkrt_last_error(c->app));
      free(t);
      return -1;
    }
    if (i >= 0)
      t[i] = s;
  }
  double m = bench_median(t, n);
  free(t);
  return m;
}

/* One result line: bytes moved (read + written), optional flops. */
static void report(struct bench_ctx *c, const char *name, double seconds, uint64_t bytes,
                   double flops, const char *note) {
  if (seconds <= 0) {
    if (c->o.json)
      printf("%s{\"name\": \"%s\", \"error\": \"%s\"}", c->results++ ? ", " : "", name,
             vkrt_last_error(c->app));
    else
      printf("  %-44s failed: %s\n", name, vkrt_last_error(c->app));
    return;
  }
  double gbps = (double)bytes / seconds * 1e-9;
  double ratio = c->copy_gbps > 0 ? gbps / c->copy_gbps : 0;
  if (c->o.json) {
    printf("%s{\"name\": \"%s\", \"bytes\": %" PRIu64 ", \"us\": %.3f, \"gbps\": %.3f, "
           "\"ratio_to_copy_kernel\": %.4f",
           c->results++ ? ", " : "", name, bytes, seconds * 1e6, gbps, ratio);
    if (flops > 0)
      printf(", \"gflops\": %.3f", flops / seconds * 1e-9);
    if (note)
      printf(", \"note\": \"%s\"", note);
    printf("}");
  } else {
    printf("  %-44s %10.1f us %9.2f GB/s  x%.3f of copy kernel", name, seconds * 1e6, gbps, ratio);
    if (flops > 0)
      printf("  %9.1f GFLOP/s", flops / seconds * 1e-9);
    if (note)
      printf("  (%s)", note);
    printf("\n");
  }
  fflush(stdout);
}

static vkrt_buffer *buffer(struct bench_ctx *c, uint64_t size) {
  vkrt_buffer *b = NULL;
  if (vkrt_buffer_create(c->app, c->o.device, size, VKRT_BUFFER_DEVICE_LOCAL, &b) != VKRT_OK) {
    fprintf(stderr, "vkrt-bench: %s\n", vkrt_last_error(c->app));
    return NULL;
  }
  /* small finite values in every element (f16 and f32 alike), not zero pages */
  vkrt_cmd_fill(b, 0, size / 4 * 4, 0x3c003c00u);
  vkrt_finish(c->app, c->o.device);
  return b;
}

/* ---- records ------------------------------------------------------------------------- */

struct bytes_args {
  vkrt_buffer *dst, *src;
  uint64_t size;
  vkrt_lab_copy path;
};

static vkrt_status rec_copy_bytes(struct bench_ctx *c, void *user) {
  (void)c;
  struct bytes_args *a = user;
  return vkrt_lab_cmd_copy_bytes(a->dst, 0, a->src, 0, a->size, a->path);
}

struct op2_args {
  vkrt_tensor dst, src, src2;
  int kind; /* 0 copy, 1 transpose, 2 concat (dim 0), 3 matmul, 4 add(src, src2) */
  bool generic;
};

static vkrt_status rec_op(struct bench_ctx *c, void *user) {
  struct op2_args *a = user;
  vkrt_status s = vkrt_lab_set(c->app, c->o.device, VKRT_LAB_FORCE_CONCAT_GENERIC, a->generic);
  if (s != VKRT_OK)
    return s;
  switch (a->kind) {
  case 0: s = vkrt_op_copy(&a->dst, &a->src); break;
  case 1: s = vkrt_op_transpose(&a->dst, &a->src); break;
  case 2: s = vkrt_op_concat(&a->dst, &a->src, &a->src2, 0); break;
  case 3: s = vkrt_op_matmul(&a->dst, &a->src, &a->src2); break;
  default: {
    const vkrt_tensor *srcs[2] = {&a->src, &a->src2};
    s = vkrt_op_add(&a->dst, srcs, 2);
    break;
  }
  }
  vkrt_lab_set(c->app, c->o.device, VKRT_LAB_FORCE_CONCAT_GENERIC, 0);
  return s;
}

/* The reference every table divides by: copy_vec4 over `size` bytes (read + written). */
static bool measure_copy_kernel(struct bench_ctx *c, vkrt_buffer *dst, vkrt_buffer *src,
                                uint64_t size) {
  struct bytes_args a = {dst, src, size, VKRT_LAB_COPY_COMPUTE};
  double t = time_op(c, rec_copy_bytes, &a);
  if (t <= 0)
    return false;
  c->copy_gbps = 2.0 * (double)size / t * 1e-9;
  report(c, "copy kernel (copy_vec4, 16-byte loads)", t, 2 * size, 0, NULL);
  return true;
}

static vkrt_tensor tensor2(vkrt_buffer *b, vkrt_type type, int64_t n0, int64_t n1) {
  return vkrt_tensor_contiguous(b, 0, type, n0, n1, 1, 1);
}

static vkrt_tensor transposed2(vkrt_buffer *b, vkrt_type type, int64_t n0, int64_t n1) {
  vkrt_tensor t = vkrt_tensor_contiguous(b, 0, type, n1, n0, 1, 1); /* storage: [n0][n1] */
  int64_t nb0 = t.nb[0];
  t.ne[0] = n0, t.ne[1] = n1;
  t.nb[0] = t.nb[1], t.nb[1] = nb0;
  return t;
}

/* ---- copy ------------------------------------------------------------------------------ */

static int cmd_copy(int argc, char **argv) {
  struct bench_ctx c;
  if (!setup(&c, argc, argv))
    return 2;
  uint64_t size = bench_align_down(c.o.size, 4096);
  vkrt_buffer *src = buffer(&c, size), *dst = buffer(&c, size + size / 512 + 65536);
  if (!src || !dst)
    return teardown(&c, 1);
  measure_copy_kernel(&c, dst, src, size);
  struct bytes_args tr = {dst, src, size, VKRT_LAB_COPY_TRANSFER};
  report(&c, "vkCmdCopyBuffer", time_op(&c, rec_copy_bytes, &tr), 2 * size, 0, NULL);
  /* the library's own dense copy: whichever path this device prefers */
  struct op2_args dense = {.dst = tensor2(dst, VKRT_TYPE_F32, 4096, (int64_t)(size / 16384)),
                           .src = tensor2(src, VKRT_TYPE_F32, 4096, (int64_t)(size / 16384))};
  report(&c, "vkrt_op_copy dense f32", time_op(&c, rec_op, &dense), 2 * size, 0,
         vkrt_lab_copy_path(c.app, c.o.device));
  /* strided: dst rows padded, so the per-element kernel runs */
  int64_t rows = (int64_t)(size / 16384);
  struct op2_args strided = dense;
  strided.dst.nb[1] = (4096 + 4) * 4;
  strided.dst.nb[2] = strided.dst.nb[3] = strided.dst.nb[1] * rows;
  if (vkrt_buffer_size(dst) >= (uint64_t)strided.dst.nb[1] * rows)
    report(&c, "vkrt_op_copy strided f32 (padded dst rows)", time_op(&c, rec_op, &strided),
           2 * size, 0, "per-element kernel");
  /* conversion f32 -> f16: reads 4, writes 2 bytes per element */
  struct op2_args conv = dense;
  conv.dst = tensor2(dst, VKRT_TYPE_F16, 4096, rows);
  report(&c, "vkrt_op_copy f32 -> f16", time_op(&c, rec_op, &conv), size + size / 2, 0, NULL);
  /* the reduce kernel (collectives): dst = a + b over half the size each */
  struct op2_args add = {.kind = 4,
                         .dst = tensor2(dst, VKRT_TYPE_F32, 4096, rows / 2),
                         .src = tensor2(src, VKRT_TYPE_F32, 4096, rows / 2),
                         .src2 = vkrt_tensor_contiguous(src, size / 2, VKRT_TYPE_F32, 4096, rows / 2, 1, 1)};
  report(&c, "vkrt_op_add 2 inputs f32 (reduce kernel)", time_op(&c, rec_op, &add),
         size / 2 * 3, 0, "reads 2, writes 1");
  vkrt_buffer_destroy(src);
  vkrt_buffer_destroy(dst);
  return teardown(&c, 0);
}

/* ---- transpose ------------------------------------------------------------------------- */

static int cmd_transpose(int argc, char **argv) {
  struct bench_ctx c;
  if (!setup(&c, argc, argv))
    return 2;
  uint64_t ts = vkrt_type_size(c.o.type);
  int64_t n = (int64_t)sqrt((double)(c.o.size / ts));
  uint64_t bytes = (uint64_t)n * (uint64_t)n * ts;
  vkrt_buffer *src = buffer(&c, bytes), *dst = buffer(&c, bytes);
  if (!src || !dst)
    return teardown(&c, 1);
  measure_copy_kernel(&c, dst, src, bytes);
  char name[96];
  struct op2_args t = {.kind = 1, .dst = tensor2(dst, c.o.type, n, n), .src = tensor2(src, c.o.type, n, n)};
  snprintf(name, sizeof(name), "transpose %s %" PRId64 "x%" PRId64, c.o.type ? "f16" : "f32", n, n);
  vkrt_lab_counters before, after;
  vkrt_lab_counters_get(c.app, c.o.device, &before);
  double tt = time_op(&c, rec_op, &t);
  vkrt_lab_counters_get(c.app, c.o.device, &after);
  report(&c, name, tt, 2 * bytes, 0,
         after.transpose_x2 > before.transpose_x2 ? "tiled, element pairs" : "tiled");
  vkrt_lab_set(c.app, c.o.device, VKRT_LAB_FORCE_TRANSPOSE_SCALAR, 1);
  snprintf(name, sizeof(name), "transpose %s %" PRId64 "x%" PRId64 " scalar", c.o.type ? "f16" : "f32", n, n);
  report(&c, name, time_op(&c, rec_op, &t), 2 * bytes, 0, "tiled, one element per access");
  vkrt_lab_set(c.app, c.o.device, VKRT_LAB_FORCE_TRANSPOSE_SCALAR, 0);
  /* the f32 alternatives the default was chosen over (H200: plain tile order 0.81, element
   * pairs 0.45 of the copy kernel, against 0.84) */
  const vkrt_lab_knob tv = VKRT_LAB_TRANSPOSE_VARIANT;
  for (int v = 1; c.o.type == VKRT_TYPE_F32 && v <= vkrt_lab_variant_count(tv); v++) {
    if (!vkrt_lab_variant_usable(c.app, c.o.device, tv, v))
      continue;
    vkrt_lab_set(c.app, c.o.device, tv, v);
    snprintf(name, sizeof(name), "transpose f32 %" PRId64 "x%" PRId64 " %s", n, n,
             vkrt_lab_variant_name(tv, v));
    report(&c, name, time_op(&c, rec_op, &t), 2 * bytes, 0, NULL);
    vkrt_lab_set(c.app, c.o.device, tv, 0);
  }
  /* dims 0 and 1 of a 4-D tensor: 4 slabs */
  int64_t q = n / 2;
  struct op2_args t4 = {.kind = 1,
                        .dst = vkrt_tensor_contiguous(dst, 0, c.o.type, q, q, 2, 2),
                        .src = vkrt_tensor_contiguous(src, 0, c.o.type, q, q, 2, 2)};
  snprintf(name, sizeof(name), "transpose %s %" PRId64 "x%" PRId64 "x2x2", c.o.type ? "f16" : "f32", q, q);
  report(&c, name, time_op(&c, rec_op, &t4), 2 * (uint64_t)q * q * 4 * ts, 0, NULL);
  vkrt_buffer_destroy(src);
  vkrt_buffer_destroy(dst);
  return teardown(&c, 0);
}

/* ---- concat ---------------------------------------------------------------------------- */

static int cmd_concat(int argc, char **argv) {
  struct bench_ctx c;
  if (!setup(&c, argc, argv))
    return 2;
  uint64_t ts = vkrt_type_size(c.o.type);
  /* dst {2h, rows}: a {h, rows} dense, b {h, rows} stored transposed; a + b = --size */
  int64_t rows = (int64_t)sqrt((double)(c.o.size / ts));
  int64_t h = rows / 2;
  uint64_t half = (uint64_t)h * (uint64_t)rows * ts, bytes = 2 * half;
  vkrt_buffer *a = buffer(&c, half), *b = buffer(&c, half), *dst = buffer(&c, bytes);
  if (!a || !b || !dst)
    return teardown(&c, 1);
  measure_copy_kernel(&c, dst, a, half);
  struct op2_args fast = {.kind = 2,
                          .dst = tensor2(dst, c.o.type, 2 * h, rows),
                          .src = tensor2(a, c.o.type, h, rows),
                          .src2 = transposed2(b, c.o.type, h, rows)};
  struct op2_args generic = fast;
  generic.generic = true;
  char name[128];
  const char *tn = c.o.type ? "f16" : "f32";
  vkrt_lab_counters before, after;
  vkrt_lab_counters_get(c.app, c.o.device, &before);
  double tf = time_op(&c, rec_op, &fast);
  vkrt_lab_counters_get(c.app, c.o.device, &after);
  bool took_fast = after.concat_fast > before.concat_fast;
  snprintf(name, sizeof(name), "concat dim0 %s b transposed: fast path", tn);
  report(&c, name, tf, 2 * bytes, 0, took_fast ? "copy + tiled transpose" : "FAST PATH NOT TAKEN");
  double tg = time_op(&c, rec_op, &generic);
  snprintf(name, sizeof(name), "concat dim0 %s b transposed: generic", tn);
  report(&c, name, tg, 2 * bytes, 0, "strided reads");
  /* the first source transposed */
  struct op2_args fast_a = fast;
  fast_a.src = transposed2(a, c.o.type, h, rows);
  fast_a.src2 = tensor2(b, c.o.type, h, rows);
  double tfa = time_op(&c, rec_op, &fast_a);
  snprintf(name, sizeof(name), "concat dim0 %s a transposed: fast path", tn);
  report(&c, name, tfa, 2 * bytes, 0, NULL);
  /* both dense (generic kernel, coalesced): what the kernel does without the stride */
  struct op2_args dense = fast;
  dense.src2 = tensor2(b, c.o.type, h, rows);
  snprintf(name, sizeof(name), "concat dim0 %s both dense: generic", tn);
  report(&c, name, time_op(&c, rec_op, &dense), 2 * bytes, 0, NULL);
  if (tf > 0 && tg > 0) {
    if (c.o.json)
      printf(", {\"name\": \"fast_vs_generic\", \"speedup\": %.3f}", tg / tf);
    else
      printf("  fast path vs generic on a transposed source: %.2fx faster\n", tg / tf);
  }
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
  vkrt_buffer_destroy(dst);
  return teardown(&c, 0);
}

/* ---- matmul ----------------------------------------------------------------------------- */

static int cmd_matmul(int argc, char **argv) {
  struct bench_ctx c;
  if (!setup(&c, argc, argv))
    return 2;
  int64_t K = c.o.k ? c.o.k : 4096;
  vkrt_buffer *x = buffer(&c, (uint64_t)K * 4 * 512);
  vkrt_buffer *d = buffer(&c, 1ull << 24 > c.o.size ? c.o.size : 1ull << 24);
  if (!x || !d)
    return teardown(&c, 1);
  uint64_t wbytes_max = c.o.size;
  vkrt_buffer *w = buffer(&c, wbytes_max);
  if (!w)
    return teardown(&c, 1);
  /* the copy reference over the weights' size (larger than any cache) */
  vkrt_buffer *w2 = buffer(&c, wbytes_max);
  if (w2) {
    measure_copy_kernel(&c, w2, w, wbytes_max);
    vkrt_buffer_destroy(w2);
  }
  for (int t = 0; t < 2; t++) {
    vkrt_type wt = t ? VKRT_TYPE_F16 : VKRT_TYPE_F32;
    uint64_t ts = vkrt_type_size(wt);
    int64_t N = (int64_t)(wbytes_max / ((uint64_t)K * ts));
    if ((uint64_t)N * 4 > vkrt_buffer_size(d))
      N = (int64_t)(vkrt_buffer_size(d) / 4);
    struct op2_args mv = {.kind = 3,
                          .dst = tensor2(d, VKRT_TYPE_F32, N, 1),
                          .src = tensor2(w, wt, K, N),
                          .src2 = tensor2(x, VKRT_TYPE_F32, K, 1)};
    uint64_t moved = (uint64_t)K * N * ts + (uint64_t)K * 4 + (uint64_t)N * 4;
    char name[128];
    snprintf(name, sizeof(name), "matvec %s K=%" PRId64 " N=%" PRId64, t ? "f16" : "f32", K, N);
    report(&c, name, time_op(&c, rec_op, &mv), moved, 2.0 * (double)K * (double)N, "decode, M=1");
    /* tiled: M = 64 over a weight slice that stays a realistic layer */
    int64_t M = 64, Nt = N < 4096 ? N : 4096;
    struct op2_args mm = {.kind = 3,
                          .dst = tensor2(d, VKRT_TYPE_F32, Nt, M),
                          .src = tensor2(w, wt, K, Nt),
                          .src2 = tensor2(x, VKRT_TYPE_F32, K, M)};
    if ((uint64_t)Nt * M * 4 <= vkrt_buffer_size(d)) {
      snprintf(name, sizeof(name), "matmul %s K=%" PRId64 " N=%" PRId64 " M=%" PRId64,
               t ? "f16" : "f32", K, Nt, M);
      uint64_t mm_bytes = (uint64_t)K * Nt * ts + (uint64_t)K * M * 4 + (uint64_t)Nt * M * 4;
      report(&c, name, time_op(&c, rec_op, &mm), mm_bytes, 2.0 * K * Nt * M, "tiled");
    }
  }
  vkrt_buffer_destroy(w);
  vkrt_buffer_destroy(x);
  vkrt_buffer_destroy(d);
  return teardown(&c, 0);
}

/* ---- quantized matrix-vector ----------------------------------------------------------- */

struct quant_args {
  vkrt_tensor dst, x;
  vkrt_tensor w[16]; /* copies cycled through so the weights come from HBM, not L2 */
  int copies, next, variant;
};

static vkrt_status rec_quant(struct bench_ctx *c, void *user) {
  struct quant_args *a = user;
  vkrt_status s = vkrt_lab_set(c->app, c->o.device, VKRT_LAB_QUANT_VARIANT, a->variant);
  if (s == VKRT_OK)
    s = vkrt_op_matmul(&a->dst, &a->w[a->next], &a->x);
  vkrt_lab_set(c->app, c->o.device, VKRT_LAB_QUANT_VARIANT, 0);
  a->next = (a->next + 1) % a->copies;
  return s;
}

/* Random quants with small f16 scales (bench_random_blocks) in every block. */
static void *random_blocks(vkrt_type type, uint64_t blocks) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  uint8_t *p = malloc(blocks * vkrt_type_size(type));
  if (p)
    bench_random_blocks(type, p, blocks, &state);
  return p;
}

/* vkrt-bench quant --type q8_0|q4_K: dst[N] = w[K, N] x[K] (M = 1, the decode case) for
 * every kernel variant, then M = 2, 4, 8 and 32 on the default choice. The weights cycle
 * through copies totalling > 256 MiB (GPUs) so each run reads them from memory, not the
 * last-level cache; the bandwidth counts weights + x + dst bytes, and the copy kernel over
 * 1 GiB in the same run is the memory reference. */
static int cmd_quant(int argc, char **argv) {
  struct bench_ctx c;
  if (!setup(&c, argc, argv))
    return 2;
  vkrt_type wt = c.o.type == VKRT_TYPE_Q4_K ? VKRT_TYPE_Q4_K : VKRT_TYPE_Q8_0;
  bool cpu = c.td.is_cpu;
  int64_t K = c.o.k ? c.o.k : (cpu ? 4096 : 14336), N = c.o.n ? c.o.n : (cpu ? 512 : 4096);
  uint32_t per = vkrt_type_block(wt);
  if (K % per) {
    fprintf(stderr, "vkrt-bench: --k %" PRId64 " is not a multiple of the %s block (%u)\n", K,
            vkrt_type_str(wt), per);
    return teardown(&c, 2);
  }
  uint64_t row = (uint64_t)K / per * vkrt_type_size(wt), wbytes = row * (uint64_t)N;
  uint64_t fit = (256ull << 20) / wbytes + 1;
  int copies = cpu ? 1 : fit < 16 ? (int)fit : 16;
  vkrt_buffer *cb = buffer(&c, c.o.size), *cb2 = buffer(&c, c.o.size);
  if (cb && cb2)
    measure_copy_kernel(&c, cb2, cb, c.o.size);
  vkrt_buffer_destroy(cb);
  vkrt_buffer_destroy(cb2);
  struct quant_args a = {.copies = copies};
  vkrt_buffer *w = buffer(&c, wbytes * copies), *x = buffer(&c, (uint64_t)K * 4 * 32),
              *d = buffer(&c, (uint64_t)N * 4 * 32);
  void *host = random_blocks(wt, wbytes / vkrt_type_size(wt));
  if (!w || !x || !d || !host)
    return teardown(&c, 1);
  for (int i = 0; i < copies; i++) {
    if (vkrt_upload(w, wbytes * i, host, wbytes) != VKRT_OK) {
      fprintf(stderr, "vkrt-bench: %s\n", vkrt_last_error(c.app));
      return teardown(&c, 1);
    }
    a.w[i] = vkrt_tensor_contiguous(w, wbytes * i, wt, K, N, 1, 1);
  }
  free(host);
  char name[160], note[96];
  static const int ms[] = {1, 2, 4, 8, 32};
  for (unsigned mi = 0; mi < sizeof(ms) / sizeof(ms[0]); mi++) {
    int M = ms[mi];
    a.x = vkrt_tensor_contiguous(x, 0, VKRT_TYPE_F32, K, M, 1, 1);
    a.dst = vkrt_tensor_contiguous(d, 0, VKRT_TYPE_F32, N, M, 1, 1);
    int variants = M == 1 ? vkrt_lab_variant_count(VKRT_LAB_QUANT_VARIANT) : 0;
    for (int v = M == 1 ? 1 : 0; v <= variants; v++) {
      if (c.o.variant && M == 1 && v != c.o.variant)
        continue;
      a.variant = v;
      uint64_t moved = wbytes + (uint64_t)K * 4 * M + (uint64_t)N * 4 * M;
      snprintf(name, sizeof(name), "%s K=%" PRId64 " N=%" PRId64 " M=%d %s", vkrt_type_str(wt), K,
               N, M, v ? vkrt_lab_variant_name(VKRT_LAB_QUANT_VARIANT, v) : "default");
      snprintf(note, sizeof(note), "weights %.1f MB, %d copies cycled", wbytes / 1e6, copies);
      report(&c, name, time_op(&c, rec_quant, &a), moved, 2.0 * K * N * M, note);
    }
  }
  vkrt_buffer_destroy(w);
  vkrt_buffer_destroy(x);
  vkrt_buffer_destroy(d);
  return teardown(&c, 0);
}

BENCH_COMMAND(copy, "copy", "device copies: copy kernel vs vkCmdCopyBuffer, strided, f32->f16",
              cmd_copy)
BENCH_COMMAND(transpose, "transpose", "tiled transpose (2-D and dims 0/1 of 4-D) vs the copy kernel",
              cmd_transpose)
BENCH_COMMAND(concat, "concat", "concat dim 0 with a transposed source: fast path vs generic",
              cmd_concat)
BENCH_COMMAND(matmul, "matmul", "matrix-vector (decode) and tiled matmul: GB/s and GFLOP/s",
              cmd_matmul)
BENCH_COMMAND(quant, "quant", "Q8_0/Q4_K matrix-vector kernels (--type q8_0|q4_K): every variant, M 1..32",
              cmd_quant)
