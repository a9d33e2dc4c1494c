/* vkrt-bench record: host time per recorded op, no submit. For each decode op (matvec,
 * copy, rms_norm, rope, set_rows, get_rows, attention, add, swiglu, and a 64-byte fill as the
 * floor) --ops calls back to back on one device with the stream's own submits turned off
 * (VKRT_LAB_STREAM_FLUSH_OPS 0), timed around the calls only; then vkrt_finish, untimed.
 * Median and minimum over --rounds of the host microseconds per op, by the wall clock and by
 * the thread's CPU time (the same on an idle machine; on a loaded one the CPU time is the
 * work and the wall clock adds the time the thread was not running). This is the cost a
 * token pays before the GPU starts when nothing overlaps it (the driver's own vkCmd* work
 * included: lavapipe's is larger than NVIDIA's). --calls adds, per op, where that time goes:
 * inside each Vulkan recording entry point (the driver's) and libvkrt's own time before the
 * op's first command, between its commands and after the last (vkrt_lab_vk_calls_*). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { HEAD = 64, HEADS = 8, KV_HEADS = 2, CTX = 256, TABLE_ROWS = 64, MAX_ROUNDS = 101 };
/* Rounds of the longest op (attention: two passes) recorded and submitted before any timing,
 * more than the stream has command buffers: each buffer's pool has grown to a round's
 * commands, as in a steady decode loop (a first fill of a pool is the driver's allocation,
 * on the H200 ~1 us more per dispatch). */
enum { WARM_ROUNDS = 20 };

struct rec_bench {
  vkrt_appliance *app;
  uint32_t device;
  int64_t n; /* model width */
  vkrt_buffer *w, *x, *y, *z, *norm_w, *pos, *table, *cache, *kv_len, *q, *att, *small;
};

enum rec_op {
  REC_MATVEC, REC_COPY, REC_RMS_NORM, REC_ROPE, REC_SET_ROWS, REC_GET_ROWS, REC_ATTENTION,
  REC_ADD, REC_SWIGLU, REC_FILL, REC_COUNT
};

static const char *const rec_names[REC_COUNT] = {
    "matvec", "copy", "rms_norm", "rope", "set_rows", "get_rows", "attention", "add", "swiglu",
    "fill"};

static vkrt_tensor vec(vkrt_buffer *b, int64_t n) {
  return vkrt_tensor_contiguous(b, 0, VKRT_TYPE_F32, n, 1, 1, 1);
}

/* One call of op; `i` alternates destinations where the op allows it, as a layer does. */
static vkrt_status record_one(struct rec_bench *b, enum rec_op op, int i) {
  int64_t n = b->n;
  vkrt_tensor x = vec(b->x, n), y = vec(b->y, n), z = vec(b->z, n);
  vkrt_tensor *dst = i & 1 ? &z : &y;
  switch (op) {
  case REC_MATVEC: {
    vkrt_tensor w = vkrt_tensor_contiguous(b->w, 0, VKRT_TYPE_F16, n, n, 1, 1);
    return vkrt_op_matmul(dst, &w, &x);
  }
  case REC_COPY: return vkrt_op_copy(dst, &x);
  case REC_RMS_NORM: {
    vkrt_tensor w = vec(b->norm_w, n);
    return vkrt_op_rms_norm(dst, &x, &w, 1e-5f);
  }
  case REC_ROPE: {
    vkrt_tensor q = vkrt_tensor_contiguous(b->q, 0, VKRT_TYPE_F32, HEAD, HEADS, 1, 1);
    vkrt_tensor pos = vkrt_tensor_contiguous(b->pos, 0, VKRT_TYPE_I32, 1, 1, 1, 1);
    vkrt_rope_params p = {.mode = VKRT_ROPE_NORMAL, .n_dims = HEAD, .freq_base = 10000.0f,
                          .freq_scale = 1.0f};
    return vkrt_op_rope(&q, &q, &pos, &p);
  }
  case REC_SET_ROWS: {
    vkrt_tensor cache = vkrt_tensor_contiguous(b->cache, 0, VKRT_TYPE_F16, HEAD * KV_HEADS, CTX,
                                               1, 1);
    vkrt_tensor src = vkrt_tensor_contiguous(b->q, 0, VKRT_TYPE_F32, HEAD * KV_HEADS, 1, 1, 1);
    vkrt_tensor rows = vkrt_tensor_contiguous(b->pos, 0, VKRT_TYPE_I32, 1, 1, 1, 1);
    return vkrt_op_set_rows(&cache, &src, &rows);
  }
  case REC_GET_ROWS: {
    vkrt_tensor table = vkrt_tensor_contiguous(b->table, 0, VKRT_TYPE_F16, n, TABLE_ROWS, 1, 1);
    vkrt_tensor ids = vkrt_tensor_contiguous(b->pos, 0, VKRT_TYPE_I32, 1, 1, 1, 1);
    return vkrt_op_get_rows(dst, &table, &ids);
  }
  case REC_ATTENTION: {
    vkrt_tensor q = vkrt_tensor_contiguous(b->q, 0, VKRT_TYPE_F32, HEAD, HEADS, 1, 1);
    vkrt_tensor k = vkrt_tensor_contiguous(b->cache, 0, VKRT_TYPE_F16, HEAD, KV_HEADS, CTX, 1);
    vkrt_tensor v = k;
    vkrt_tensor len = vkrt_tensor_contiguous(b->kv_len, 0, VKRT_TYPE_I32, 1, 1, 1, 1);
    vkrt_tensor out = vkrt_tensor_contiguous(b->att, 0, VKRT_TYPE_F32, HEAD, HEADS, 1, 1);
    return vkrt_op_attention(&out, &q, &k, &v, &len, 0.125f);
  }
  case REC_ADD: {
    const vkrt_tensor *srcs[2] = {&x, i & 1 ? &y : &z};
    return vkrt_op_add(dst, srcs, 2);
  }
  case REC_SWIGLU: return vkrt_op_swiglu(dst, &x, i & 1 ? &y : &z);
  case REC_FILL: return vkrt_cmd_fill(b->small, 0, 64, (uint32_t)i);
  case REC_COUNT: break;
  }
  return VKRT_ERROR_INVALID_ARGUMENT;
}

static int fail(vkrt_appliance *app, const char *what, vkrt_status s) {
  fprintf(stderr, "vkrt-bench record: %s: %s: %s\n", what, vkrt_status_str(s),
          vkrt_last_error(app));
  return 1;
}

static vkrt_status create_buffers(struct rec_bench *b) {
  struct {
    vkrt_buffer **out;
    uint64_t bytes;
  } list[] = {
      {&b->w, (uint64_t)b->n * b->n * 2}, {&b->x, (uint64_t)b->n * 4},
      {&b->y, (uint64_t)b->n * 4},        {&b->z, (uint64_t)b->n * 4},
      {&b->norm_w, (uint64_t)b->n * 4},   {&b->pos, 16},
      {&b->table, (uint64_t)b->n * TABLE_ROWS * 2},
      {&b->cache, (uint64_t)HEAD * KV_HEADS * CTX * 2}, {&b->kv_len, 16},
      {&b->q, HEAD * HEADS * 4},          {&b->att, HEAD * HEADS * 4},
      {&b->small, 256},
  };
  for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
    vkrt_status s = vkrt_buffer_create(b->app, b->device, list[i].bytes, 0, list[i].out);
    if (s == VKRT_OK) /* zeros: finite inputs, position 0, one cache row attended */
      s = vkrt_cmd_fill(*list[i].out, 0, list[i].bytes, 0);
    if (s != VKRT_OK)
      return s;
  }
  int32_t one = 1;
  vkrt_status s = vkrt_upload(b->kv_len, 0, &one, sizeof(one));
  return s == VKRT_OK ? vkrt_finish(b->app, b->device) : s;
}

static void destroy_buffers(struct rec_bench *b) {
  vkrt_buffer *all[] = {b->w,   b->x,     b->y,      b->z, b->norm_w, b->pos,
                        b->table, b->cache, b->kv_len, b->q, b->att,    b->small};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    vkrt_buffer_destroy(all[i]);
}

/* --calls: `rounds` more rounds of the op with the Vulkan recording calls timed; prints us
 * per op inside each entry point and libvkrt's own share (the profile's clock reads, about
 * two per call, taken out of it). */
static int record_calls(struct rec_bench *b, enum rec_op op, int ops, int rounds, bool json) {
  vkrt_status s = vkrt_lab_vk_calls_start(b->app, b->device);
  if (s != VKRT_OK)
    return fail(b->app, "calls", s);
  double total = 0;
  for (int r = 0; r < rounds && s == VKRT_OK; r++) {
    double t0 = bench_now_s();
    for (int i = 0; i < ops && s == VKRT_OK; i++) {
      vkrt_lab_vk_calls_mark(true);
      s = record_one(b, op, i);
    }
    vkrt_lab_vk_calls_mark(false);
    total += bench_now_s() - t0;
    if (s == VKRT_OK)
      s = vkrt_finish(b->app, b->device); /* outside the marked ops: not counted */
  }
  vkrt_lab_vk_calls c;
  vkrt_status stop = vkrt_lab_vk_calls_stop(b->app, b->device, &c);
  if (s != VKRT_OK || (s = stop) != VKRT_OK)
    return fail(b->app, "calls", s);
  double n = (double)ops * rounds, us = 1e-3 / n, inside = 0;
  uint64_t count = 0;
  for (int k = 0; k < VKRT_LAB_VK_CALL_COUNT; k++)
    count += c.count[k], inside += (double)c.ns[k] * us;
  /* each wrapped call adds two clock reads to the op: one inside its figure, one outside */
  double own = (double)(c.before_ns + c.between_ns) * us - (double)count / n * c.clock_ns * 1e-3;
  if (json) {
    printf(", \"calls\": {\"total_us\": %.3f, \"inside_us\": %.3f, \"libvkrt_us\": %.3f, "
           "\"before_us\": %.3f, \"between_us\": %.3f, \"after_us\": %.3f, \"clock_ns\": %.1f",
           total * 1e6 / n, inside, own, (double)c.before_ns * us, (double)c.between_ns * us,
           (double)c.after_ns * us, c.clock_ns);
    for (int k = 0; k < VKRT_LAB_VK_CALL_COUNT; k++)
      if (c.count[k])
        printf(", \"%s\": [%.2f, %.3f]", vkrt_lab_vk_call_name((vkrt_lab_vk_call)k),
               (double)c.count[k] / n, (double)c.ns[k] * us);
    printf("}");
    return 0;
  }
  printf("  calls: %.3f us/op timed; Vulkan %.3f, libvkrt %.3f (before %.3f, between %.3f), "
         "after %.3f; clock read %.0f ns\n", total * 1e6 / n, inside, own,
         (double)c.before_ns * us, (double)c.between_ns * us, (double)c.after_ns * us,
         c.clock_ns);
  for (int k = 0; k < VKRT_LAB_VK_CALL_COUNT; k++)
    if (c.count[k])
      printf("    %-26s %6.2f/op %8.3f us/op %8.3f us/call\n",
             vkrt_lab_vk_call_name((vkrt_lab_vk_call)k), (double)c.count[k] / n,
             (double)c.ns[k] * us, (double)c.ns[k] * 1e-3 / (double)c.count[k]);
  return 0;
}

static int cmd_record(int argc, char **argv) {
  static const struct option longs[] = {
      {"ops", required_argument, 0, 'o'}, {"rounds", required_argument, 0, 'r'},
      {"device", required_argument, 0, 'd'}, {"n", required_argument, 0, 'n'},
      {"json", no_argument, 0, 'j'},         {"help", no_argument, 0, 'h'},
      {"op", required_argument, 0, 'p'},     {"calls", no_argument, 0, 'c'},
      {"rebind", no_argument, 0, 'b'},       {"descriptor-sets", no_argument, 0, 's'},
      {0, 0, 0, 0}};
  int ops = 128, rounds = 9, ch;
  int64_t n = 0;
  uint32_t device = 0;
  bool json = false, calls = false, rebind = false, sets = false;
  const char *only = NULL;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'o': ops = atoi(optarg); break;
    case 'r': rounds = atoi(optarg); break;
    case 'd': device = (uint32_t)atoi(optarg); break;
    case 'n': n = atoll(optarg); break;
    case 'j': json = true; break;
    case 'p': only = optarg; break;
    case 'c': calls = true; break;
    case 'b': rebind = true; break;
    case 's': sets = true; break;
    default:
      printf("usage: vkrt-bench record [--ops N] [--rounds R] [--device D] [--n WIDTH] [--op NAME]\n"
             "                         [--calls] [--rebind] [--descriptor-sets] [--json]\n"
             "  host us per recorded op (no submit): --ops calls of each decode op back to back\n"
             "  (default 128), median and minimum over --rounds (default 9); WIDTH of the\n"
             "  vectors and of the square f16 matvec (default 2048; 1024 on CPU devices); --op: one\n"
             "  of matvec copy rms_norm rope set_rows get_rows attention add swiglu fill;\n"
             "  --calls: then as many rounds again with the Vulkan recording calls timed: us per\n"
             "  op inside each (the driver) and libvkrt's own before, between and after them;\n"
             "  --rebind: bind the pipeline before every dispatch (VKRT_LAB_PIPELINE_REBIND);\n"
             "  --descriptor-sets: the descriptor-pool ring instead of push descriptors\n");
      return ch == 'h' ? 0 : 2;
    }
  }
  if (ops < 1 || ops > 4096 || rounds < 1 || rounds > MAX_ROUNDS || n < 0 || n > 16384 ||
      n % 64)
    return 2;
  struct rec_bench b = {.app = bench_open(NULL), .device = device};
  vkrt_lab_device td;
  vkrt_status s = vkrt_lab_device_get(b.app, device, &td);
  if (s != VKRT_OK) {
    int rc = fail(b.app, "device", s);
    vkrt_close(b.app);
    return rc;
  }
  b.n = n ? n : td.is_cpu ? 1024 : 2048;
  int64_t keep_flush = 0;
  int rc = 0, rows = 0;
  if ((s = create_buffers(&b)) != VKRT_OK ||
      (s = vkrt_lab_get(b.app, device, VKRT_LAB_STREAM_FLUSH_OPS, &keep_flush)) != VKRT_OK ||
      (s = vkrt_lab_set(b.app, device, VKRT_LAB_STREAM_FLUSH_OPS, 0)) != VKRT_OK ||
      (s = vkrt_lab_set(b.app, device, VKRT_LAB_PIPELINE_REBIND, rebind)) != VKRT_OK ||
      (sets && (s = vkrt_lab_limits_set(b.app, device, 0, true, 0)) != VKRT_OK))
    rc = fail(b.app, "setup", s);
  for (int r = 0; r < WARM_ROUNDS && !rc; r++) {
    enum rec_op warm = REC_ATTENTION;
    for (int i = 0; i < ops && s == VKRT_OK; i++)
      if ((s = record_one(&b, warm, i)) == VKRT_ERROR_UNSUPPORTED && warm == REC_ATTENTION)
        warm = REC_MATVEC, s = record_one(&b, warm, i);
    if (s != VKRT_OK || (s = vkrt_finish(b.app, device)) != VKRT_OK)
      rc = fail(b.app, "warm-up", s);
  }
  if (!rc && json)
    printf("{\"bench\": \"record\", \"device\": %u, \"n\": %lld, \"ops\": %d, \"rounds\": %d, "
           "\"rebind\": %s, \"descriptor_sets\": %s, \"results\": [", device, (long long)b.n, ops,
           rounds, rebind ? "true" : "false", sets ? "true" : "false");
  else if (!rc)
    printf("vkrt-bench record: dev%u, width %lld, %d calls per round, %d rounds; host us per "
           "recorded op, no submit (wall clock, and the thread's CPU time)%s%s\n"
           "%-10s %10s %10s %10s %10s %12s\n", device, (long long)b.n, ops, rounds,
           rebind ? "; pipeline bound before every dispatch" : "",
           sets ? "; descriptor sets (pool ring)" : "", "op",
           "median", "min", "cpu median", "cpu min", "barriers/op");
  for (int op = 0; op < REC_COUNT && !rc; op++) {
    if (only && strcmp(only, rec_names[op]))
      continue;
    /* warm-up: pipelines built, the op checked once */
    s = record_one(&b, (enum rec_op)op, 0);
    if (s == VKRT_ERROR_UNSUPPORTED) {
      vkrt_finish(b.app, device);
      if (json)
        printf("%s{\"op\": \"%s\", \"unsupported\": true}", rows++ ? ", " : "", rec_names[op]);
      else
        printf("%-10s %10s  (%s)\n", rec_names[op], "-", vkrt_last_error(b.app));
      continue;
    }
    if (s != VKRT_OK || (s = vkrt_finish(b.app, device)) != VKRT_OK) {
      rc = fail(b.app, rec_names[op], s);
      break;
    }
    double per[MAX_ROUNDS], cpu[MAX_ROUNDS];
    vkrt_lab_stream st0, st1;
    vkrt_lab_stream_get(b.app, device, &st0);
    for (int r = 0; r < rounds && !rc; r++) {
      double t0 = bench_now_s(), c0 = bench_thread_cpu_s();
      for (int i = 0; i < ops && s == VKRT_OK; i++)
        s = record_one(&b, (enum rec_op)op, i);
      cpu[r] = (bench_thread_cpu_s() - c0) * 1e6 / ops;
      per[r] = (bench_now_s() - t0) * 1e6 / ops;
      if (s != VKRT_OK || (s = vkrt_finish(b.app, device)) != VKRT_OK)
        rc = fail(b.app, rec_names[op], s);
    }
    if (rc)
      break;
    vkrt_lab_stream_get(b.app, device, &st1);
    double barriers = (double)(st1.barriers - st0.barriers) / ((double)ops * rounds);
    double med = bench_median(per, rounds), min = per[0];
    double cpu_med = bench_median(cpu, rounds), cpu_min = cpu[0];
    if (json)
      printf("%s{\"op\": \"%s\", \"median_us\": %.3f, \"min_us\": %.3f, \"cpu_median_us\": "
             "%.3f, \"cpu_min_us\": %.3f, \"barriers_per_op\": %.2f", rows++ ? ", " : "",
             rec_names[op], med, min, cpu_med, cpu_min, barriers);
    else
      printf("%-10s %10.3f %10.3f %10.3f %10.3f %12.2f\n", rec_names[op], med, min, cpu_med,
             cpu_min, barriers);
    if (calls && (rc = record_calls(&b, (enum rec_op)op, ops, rounds, json)) != 0)
      break;
    if (json)
      printf("}");
    fflush(stdout);
  }
  if (!rc && json)
    printf("]}\n");
  vkrt_lab_set(b.app, device, VKRT_LAB_STREAM_FLUSH_OPS, keep_flush);
  vkrt_lab_set(b.app, device, VKRT_LAB_PIPELINE_REBIND, 0);
  if (sets && vkrt_finish(b.app, device) == VKRT_OK)
    vkrt_lab_limits_set(b.app, device, 0, false, 0);
  destroy_buffers(&b);
  vkrt_close(b.app);
  return rc;
}

BENCH_COMMAND(record, "record", "host us per recorded op of each decode op, no submit",
              cmd_record)
