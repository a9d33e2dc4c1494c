/* Multi-host allreduce under mpirun (one rank per host, the board's devices per host) on
 * lavapipe with the validation layer. Run by tests/mpi/run.sh:
 *
 *   test_mpi                  counts 1, 7, 4097, 2^16 + 4097 (one piece: a whole 256 KiB
 *                             chunk of f32 partials and a partial one), 2^20 + 3; f32 and
 *                             f16; in and out of place.
 *                             Every device of every host checked bit for bit against the
 *                             documented order (each host's devices in device order, then the
 *                             host sums in host order, in f32), against a float64 reference
 *                             within a tolerance, and across all ranks of all hosts (hashes
 *                             gathered over MPI). Inputs are regenerated from a seed that
 *                             rank 0 broadcasts, so each host computes every host's data.
 *                             Then inputs whose sum depends on the host order (host partials
 *                             +B, a small value and -B, rotating): with 3 or more hosts a
 *                             host that adds its own partial first gets other bits (the test
 *                             checks that its inputs show that on hosts >= 2).
 *   test_mpi --stall H --timeout-ms T
 *                             host H withholds its contribution (VKRT_FAULT_HOST_STALL):
 *                             every rank's vkrt_finish returns VKRT_ERROR_TIMEOUT naming host H
 *                             within T ms + a margin, and vkrt_close leaves no thread behind;
 *                             a run that does not end within T ms + 30 s fails on its own
 *                             (SIGALRM) instead of waiting for mpirun's timeout.
 *   --transport cpu_proxy|host_staged forces the host transport.
 *
 * Prints "test_mpi: host<r>: ..." lines; rank 0 ends with "test_mpi: N checks, M failed" and
 * the exit status is non-zero on every rank when any rank failed. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/numbers.h"  /* vkrt_xorshift */
#include "vkrt/kconfig.h" /* IS_ENABLED and this build's CONFIG_ symbols */
#include "vkrt/vkrt_mpi.h"

static int rank, hosts;
static long checks, failures;

#define CHECK(cond, ...)                                                                      \
  do {                                                                                        \
    checks++;                                                                                 \
    if (!(cond)) {                                                                            \
      failures++;                                                                             \
      printf("test_mpi: host%d: FAIL %s:%d: ", rank, __FILE__, __LINE__);                     \
      printf(__VA_ARGS__);                                                                    \
      printf("\n");                                                                           \
      fflush(stdout);                                                                         \
    }                                                                                         \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (!d)
    return -1;
  for (struct dirent *e; (e = readdir(d));)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void log_fn(void *user, vkrt_log_level level, const char *message) {
  (void)user;
  if (level <= VKRT_LOG_WARN)
    fprintf(stderr, "test_mpi: host%d: vkrt: %s\n", rank, message);
}

static vkrt_appliance *open_app(vkrt_transport_kind transport, uint32_t fault,
                                uint64_t timeout_ms, char *why, size_t why_size) {
  vkrt_options o;
  vkrt_options_initialize(&o);
  o.log = log_fn;
  o.log_level = VKRT_LOG_WARN;
  o.enable_validation = IS_ENABLED(CONFIG_VKRT_VALIDATION_IN_TESTS);
  o.collective_transport = transport;
  o.collective_timeout_ns = timeout_ms * 1000000ull;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  o.faults.mask = fault;
#else
  (void)fault;
#endif
  vkrt_mpi_options_set(&o, MPI_COMM_WORLD);
  vkrt_appliance *app = NULL;
  vkrt_status s = vkrt_open(&o, &app, why, why_size);
  return s == VKRT_OK ? app : NULL;
}

/* Random values in [-1, 1). `order_pinned`: device 0 of host h holds, at element i, +B, a
 * small value or -B by (i + h) % 3 (a small value from the fourth host on), the host's other
 * devices small values: each host partial is +B, -B (absorbing the small values added to
 * them) or small, so the host order decides the sum (f32: B = 2^26, values in [-1, 1); f16:
 * B = 2^15 and multiples of 2^-14 below 2^-10, whose sums f32 and f16 hold exactly). */
static void fill(vkrt_type type, void *out, uint64_t count, uint64_t seed, uint32_t global,
                 uint32_t devices, bool order_pinned) {
  uint64_t s = seed ^ (0x9e3779b97f4a7c15ull * (global + 1));
  if (!s)
    s = 1;
  const uint32_t h = global / devices, d = global % devices;
  const float big = type == VKRT_TYPE_F16 ? 0x1p15f : 0x1p26f;
  for (uint64_t i = 0; i < count; i++) {
    float v = (float)((double)(vkrt_xorshift(&s) >> 11) * 0x1p-53 * 2.0 - 1.0);
    if (order_pinned && type == VKRT_TYPE_F16)
      v = (float)((int)(vkrt_xorshift(&s) % 31) - 15) * 0x1p-14f;
    if (order_pinned && d == 0 && h < 3 && (i + h) % 3 != 1)
      v = (i + h) % 3 == 0 ? big : -big;
    if (type == VKRT_TYPE_F16)
      ((_Float16 *)out)[i] = (_Float16)v;
    else
      ((float *)out)[i] = v;
  }
}

static float value(vkrt_type type, const void *p, uint64_t i) {
  return type == VKRT_TYPE_F16 ? (float)((const _Float16 *)p)[i] : ((const float *)p)[i];
}

static uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
  return h;
}

struct bufs {
  uint32_t n;
  vkrt_buffer *send[VKRT_MAX_DEVICES], *recv[VKRT_MAX_DEVICES], *staging[VKRT_MAX_DEVICES];
  void *map[VKRT_MAX_DEVICES];
};

static void copy_via_staging(vkrt_appliance *app, struct bufs *b, uint32_t d, bool up,
                             vkrt_buffer *buf, uint64_t offset, void *host, uint64_t bytes) {
  vkrt_status s;
  if (up) {
    memcpy(b->map[d], host, bytes);
    s = vkrt_cmd_copy_buffer(buf, offset, b->staging[d], 0, bytes);
  } else {
    s = vkrt_cmd_copy_buffer(b->staging[d], 0, buf, offset, bytes);
  }
  if (s == VKRT_OK)
    s = vkrt_finish(app, d);
  CHECK(s == VKRT_OK, "copy %s dev%u: %s: %s", up ? "up" : "down", d, vkrt_status_str(s),
        vkrt_last_error(app));
  if (!up)
    memcpy(host, b->map[d], bytes);
}

/* One allreduce and all its checks. */
static void run_case(vkrt_appliance *app, struct bufs *b, vkrt_type type, uint64_t count,
                     bool in_place, uint64_t seed, bool order_pinned) {
  uint32_t n = b->n, total = n * (uint32_t)hosts;
  size_t esize = type == VKRT_TYPE_F16 ? 2 : 4;
  uint64_t bytes = count * esize;
  void *in = malloc(bytes * total), *out = malloc(bytes * n);
  vkrt_allreduce_args args = {.count = count, .type = type};
  for (uint32_t g = 0; g < total; g++) /* every host's inputs: the expected sum needs them */
    fill(type, (uint8_t *)in + g * bytes, count, seed, g, n, order_pinned);
  for (uint32_t d = 0; d < n; d++) {
    uint8_t *mine = (uint8_t *)in + (rank * n + d) * bytes;
    args.send[d] = b->send[d];
    args.send_offset[d] = (d % 3) * 16;
    args.recv[d] = in_place ? b->send[d] : b->recv[d];
    args.recv_offset[d] = in_place ? args.send_offset[d] : ((d + 1) % 2) * 32;
    copy_via_staging(app, b, d, true, b->send[d], args.send_offset[d], mine, bytes);
    if (!in_place) { /* poison the output: 0xffff... is a NaN in f32 and f16 */
      memset(out, 0xff, bytes);
      copy_via_staging(app, b, d, true, b->recv[d], args.recv_offset[d], out, bytes);
    }
  }
  vkrt_status s = vkrt_allreduce(app, &args);
  CHECK(s == VKRT_OK, "allreduce: %s: %s", vkrt_status_str(s), vkrt_last_error(app));
  for (uint32_t d = 0; d < n; d++) {
    s = vkrt_finish(app, d);
    CHECK(s == VKRT_OK, "finish dev%u: %s: %s", d, vkrt_status_str(s), vkrt_last_error(app));
    copy_via_staging(app, b, d, false, args.recv[d], args.recv_offset[d],
                     (uint8_t *)out + d * bytes, bytes);
  }
  uint64_t wrong = 0, own_first_differs = 0;
  if (hosts > 64) {
    CHECK(hosts <= 64, "%d hosts: the reference keeps 64 host partials", hosts);
    return;
  }
  for (uint64_t i = 0; i < count; i++) {
    double ref = 0, mag = 0;
    float order = 0, part[64];
    for (int h = 0; h < hosts; h++) { /* documented order: devices, then hosts, in f32 */
      part[h] = 0;
      for (uint32_t d = 0; d < n; d++) {
        float x = value(type, (uint8_t *)in + (h * n + d) * bytes, i);
        part[h] = d == 0 ? x : part[h] + x;
        ref += x;
        mag += fabs(x);
      }
      order = h == 0 ? part[h] : order + part[h];
    }
    float own_first = part[rank]; /* what this host would get adding its own partial first */
    for (int h = 0; h < hosts; h++)
      own_first = h == rank ? own_first : own_first + part[h];
    own_first_differs += memcmp(&own_first, &order, 4) != 0;
    float got = value(type, out, i);
    bool bad = fabs((double)got - ref) > (type == VKRT_TYPE_F16 ? mag * 0x1p-10 + 1e-4
                                                                : mag * 0x1p-21 + 1e-7);
    if (type == VKRT_TYPE_F32) {
      bad |= memcmp(&order, (float *)out + i, 4) != 0;
    } else {
      _Float16 o16 = (_Float16)order;
      bad |= memcmp(&o16, (_Float16 *)out + i, 2) != 0;
    }
    if (bad && wrong < 3)
      printf("test_mpi: host%d: %s count %llu [%llu]: got %.9g, documented order %.9g, "
             "float64 %.9g\n", rank, type == VKRT_TYPE_F16 ? "f16" : "f32",
             (unsigned long long)count, (unsigned long long)i, (double)got, (double)order, ref);
    wrong += bad;
  }
  CHECK(wrong == 0, "%s count %llu %s%s: %llu wrong elements", type == VKRT_TYPE_F16 ? "f16" : "f32",
        (unsigned long long)count, in_place ? "in place" : "out of place",
        order_pinned ? ", host order pinned" : "", (unsigned long long)wrong);
  if (order_pinned && rank >= 2) /* hosts 0 and 1 commute: a difference needs a third */
    CHECK(own_first_differs > count / 8, "host order pinned: only %llu of %llu sums would "
          "differ adding this host's partial first", (unsigned long long)own_first_differs,
          (unsigned long long)count);
  for (uint32_t d = 1; d < n; d++)
    CHECK(memcmp(out, (uint8_t *)out + d * bytes, bytes) == 0, "dev%u differs from dev0", d);
  /* Every rank of every host: the same bits. */
  uint64_t mine = fnv(out, bytes);
  uint64_t *all = malloc(sizeof(uint64_t) * (size_t)hosts);
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int h = 0; h < hosts; h++)
    CHECK(all[h] == mine, "host%d's result differs from host%d's (count %llu)", h, rank,
          (unsigned long long)count);
  free(all);
  free(in);
  free(out);
}

static int run_correctness(vkrt_transport_kind transport) {
  char why[512] = "";
  vkrt_appliance *app = open_app(transport, 0, 20000, why, sizeof(why));
  CHECK(app != NULL, "vkrt_open: %s", why);
  if (!app)
    return 1;
  CHECK(vkrt_host_rank(app) == (uint32_t)rank && vkrt_host_count(app) == (uint32_t)hosts,
        "vkrt_host_rank/count %u/%u, MPI says %d/%d", vkrt_host_rank(app), vkrt_host_count(app),
        rank, hosts);
  size_t len = vkrt_describe(app, false, NULL, 0);
  char *text = malloc(len + 1);
  vkrt_describe(app, false, text, len + 1);
  char want[96];
  snprintf(want, sizeof(want), "host%d/dev0 -> host%d via mpi", rank, rank ? 0 : 1);
  CHECK(strstr(text, want) != NULL, "describe lacks '%s':\n%s", want, text);
  if (rank == 0) { /* the plan lines, for the log */
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
      if (!strncmp(line, "vkrt: host", 10) || strstr(line, "collectives"))
        printf("test_mpi: host0: %s\n", line);
  }
  free(text);
  len = vkrt_describe(app, true, NULL, 0);
  text = malloc(len + 1);
  vkrt_describe(app, true, text, len + 1);
  snprintf(want, sizeof(want), "\"hosts\": {\"count\": %d, \"rank\": %d", hosts, rank);
  CHECK(strstr(text, want) != NULL, "JSON describe lacks '%s'", want);
  free(text);

  uint64_t seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_mpi: seed %llu, %d hosts x %u devices, transport %s\n", (unsigned long long)seed,
           hosts, vkrt_device_count(app), vkrt_transport_str(vkrt_transport(app)));
  const uint64_t counts[] = {1, 7, 4097, (1u << 16) + 4097, (1u << 20) + 3};
  uint64_t max_bytes = (counts[4] * 4) + 64;
  struct bufs b = {.n = vkrt_device_count(app)};
  for (uint32_t d = 0; d < b.n; d++) {
    vkrt_status s = vkrt_buffer_create(app, d, max_bytes, VKRT_BUFFER_DEVICE_LOCAL, &b.send[d]);
    if (s == VKRT_OK)
      s = vkrt_buffer_create(app, d, max_bytes, VKRT_BUFFER_DEVICE_LOCAL, &b.recv[d]);
    if (s == VKRT_OK)
      s = vkrt_buffer_create(app, d, max_bytes, VKRT_BUFFER_HOST_VISIBLE, &b.staging[d]);
    if (s == VKRT_OK)
      s = vkrt_buffer_map(b.staging[d], &b.map[d]);
    CHECK(s == VKRT_OK, "buffers on dev%u: %s", d, vkrt_last_error(app));
    if (s != VKRT_OK)
      return 1;
  }
  int c = 0;
  for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
    for (int t = 0; t < 2; t++)
      for (int place = 0; place < 2; place++, c++)
        run_case(app, &b, t ? VKRT_TYPE_F16 : VKRT_TYPE_F32, counts[k], place == 0,
                 seed + (uint64_t)c, false);
  for (int t = 0; t < 2; t++, c++)
    run_case(app, &b, t ? VKRT_TYPE_F16 : VKRT_TYPE_F32, (1u << 16) + 4097, false,
             seed + (uint64_t)c, true);
  for (uint32_t d = 0; d < b.n; d++) {
    vkrt_buffer_destroy(b.send[d]);
    vkrt_buffer_destroy(b.recv[d]);
    vkrt_buffer_destroy(b.staging[d]);
  }
  CHECK(vkrt_validation_message_count(app) == 0, "%u validation messages",
        vkrt_validation_message_count(app));
  vkrt_close(app);
  return 0;
}

static void stall_overdue(int sig) {
  (void)sig;
  static const char msg[] = "test_mpi: FAIL: the stalled-host run did not end within its "
                            "timeout + 30 s (a stall nobody reports)\n";
  if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
    _exit(3);
  _exit(3);
}

static void run_stall(vkrt_transport_kind transport, int stalled, uint64_t timeout_ms) {
  signal(SIGALRM, stall_overdue);
  alarm((unsigned)(timeout_ms / 1000 + 30));
  /* A first appliance runs one allreduce and closes: the thread baseline includes whatever
   * the driver and MPI start lazily. */
  char why[512] = "";
  vkrt_appliance *app = open_app(transport, 0, timeout_ms, why, sizeof(why));
  CHECK(app != NULL, "vkrt_open: %s", why);
  if (!app)
    return;
  uint32_t n = vkrt_device_count(app);
  const uint64_t count = 4097;
  vkrt_buffer *buf[VKRT_MAX_DEVICES] = {0};
  vkrt_allreduce_args args = {.count = count, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < n; d++) {
    CHECK(vkrt_buffer_create(app, d, count * 4, VKRT_BUFFER_DEVICE_LOCAL, &buf[d]) == VKRT_OK,
          "buffer: %s", vkrt_last_error(app));
    args.send[d] = args.recv[d] = buf[d];
    CHECK(vkrt_cmd_fill(buf[d], 0, count * 4, 0x3f800000u) == VKRT_OK, "fill");
  }
  CHECK(vkrt_allreduce(app, &args) == VKRT_OK, "healthy allreduce: %s", vkrt_last_error(app));
  for (uint32_t d = 0; d < n; d++)
    CHECK(vkrt_finish(app, d) == VKRT_OK, "healthy finish: %s", vkrt_last_error(app));
  for (uint32_t d = 0; d < n; d++)
    vkrt_buffer_destroy(buf[d]);
  vkrt_close(app);
  int baseline = thread_count();

  app = open_app(transport, rank == stalled ? VKRT_FAULT_HOST_STALL : 0, timeout_ms, why,
                 sizeof(why));
  CHECK(app != NULL, "vkrt_open with the stall: %s", why);
  if (!app)
    return;
  for (uint32_t d = 0; d < n; d++) {
    CHECK(vkrt_buffer_create(app, d, count * 4, VKRT_BUFFER_DEVICE_LOCAL, &buf[d]) == VKRT_OK,
          "buffer: %s", vkrt_last_error(app));
    args.send[d] = args.recv[d] = buf[d];
  }
  double t0 = now_s();
  vkrt_status s = vkrt_allreduce(app, &args); /* host_staged fails here, cpu_proxy at the wait */
  char name[32];
  snprintf(name, sizeof(name), "host%d", stalled);
  for (uint32_t d = 0; d < n; d++) {
    vkrt_status w = vkrt_finish(app, d);
    vkrt_status got = s != VKRT_OK ? s : w;
    double ms = (now_s() - t0) * 1e3;
    const char *msg = vkrt_last_error(app);
    printf("test_mpi: host%d/dev%u (rank %u): %s after %.0f ms: %s\n", rank, d, rank * n + d,
           vkrt_status_str(got), ms, msg);
    CHECK(got == VKRT_ERROR_TIMEOUT, "rank %u: %s, want VKRT_ERROR_TIMEOUT", rank * n + d,
          vkrt_status_str(got));
    CHECK(strstr(msg, name) != NULL, "the message does not name %s: %s", name, msg);
    /* bounded: the timeout plus slack for lavapipe ranks on a few loaded cores */
    CHECK(ms < (double)timeout_ms + 10000.0, "took %.0f ms (timeout %llu ms)", ms,
          (unsigned long long)timeout_ms);
  }
  for (uint32_t d = 0; d < n; d++)
    vkrt_buffer_destroy(buf[d]);
  vkrt_close(app);
  int after = thread_count();
  CHECK(after <= baseline, "%d threads after vkrt_close, %d before the failed appliance", after,
        baseline);
  alarm(0);
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &hosts);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int stalled = -1;
  uint64_t timeout_ms = 1000;
  vkrt_transport_kind transport = VKRT_TRANSPORT_NONE;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--stall") && i + 1 < argc)
      stalled = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
      timeout_ms = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--transport") && i + 1 < argc) {
      i++;
      transport = !strcmp(argv[i], "host_staged") ? VKRT_TRANSPORT_HOST_STAGED
                  : !strcmp(argv[i], "cpu_proxy") ? VKRT_TRANSPORT_CPU_PROXY
                                                  : VKRT_TRANSPORT_NONE;
    } else {
      if (rank == 0)
        fprintf(stderr, "usage: test_mpi [--stall HOST --timeout-ms T] [--transport "
                        "cpu_proxy|host_staged]\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (provided < MPI_THREAD_MULTIPLE) { /* vkrt_open must refuse this; say so and stop */
    printf("test_mpi: host%d: MPI gives thread level %d only\n", rank, provided);
    failures++;
  } else if (stalled >= 0) {
    run_stall(transport, stalled, timeout_ms);
  } else {
    run_correctness(transport);
  }
  long totals[2] = {checks, failures}, sums[2];
  MPI_Allreduce(totals, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("test_mpi: %ld checks, %ld failed\n", sums[0], sums[1]);
  MPI_Finalize();
  return sums[1] ? 1 : 0;
}
