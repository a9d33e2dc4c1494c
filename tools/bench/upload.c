/* vkrt-bench upload: host weights into device buffers.
 *
 * For a real file created here (mmapped PROT_READ, MAP_PRIVATE) and for anonymous memory,
 * and for each import policy (all four when fault injection is compiled in, which carries
 * the policy override; else the board's policy): one-time registration cost, steady-state
 * upload GB/s and its ratio to the staging path (the same source unregistered), in one run.
 * Also the staging ring against a serialized memcpy + copy + wait loop, and the pre-stage
 * copy with one thread against CONFIG_VKRT_PRESTAGE_THREADS. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

struct upload_opts {
  uint64_t size;
  int iters;
  uint32_t device;
  const char *dir;
  bool json;
  bool progress;
  bool keep_file;
  uint32_t threads;
};

/* ---- progress bar (TTY only) ---------------------------------------------------------- */

struct bar {
  const char *label;
  bool on;
  int last;
};

static void bar_draw(void *user, uint64_t done, uint64_t total) {
  struct bar *b = user;
  if (!b->on || !total)
    return;
  int pct = (int)(done * 100 / total);
  if (pct == b->last)
    return;
  b->last = pct;
  char cells[41];
  int filled = pct * 40 / 100;
  for (int i = 0; i < 40; i++)
    cells[i] = i < filled ? '#' : ' ';
  cells[40] = '\0';
  fprintf(stderr, "\r%-28s [%s] %3d%%", b->label, cells, pct);
  if (done >= total)
    fprintf(stderr, "\n");
  fflush(stderr);
}

static struct bar bar_new(const struct upload_opts *o, const char *label) {
  return (struct bar){.label = label,
                      .on = o->progress && isatty(STDERR_FILENO) && o->size >= (64ull << 20),
                      .last = -1};
}

/* ---- sources -------------------------------------------------------------------------- */

static void fill_pattern(uint8_t *p, uint64_t size, uint64_t seed) {
  uint64_t x = seed | 1;
  uint64_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v = vkrt_xorshift(&x);
    memcpy(p + i, &v, 8);
  }
  for (; i < size; i++)
    p[i] = (uint8_t)(i * 131 + 7);
}

/* Writes a file of `size` pattern bytes; returns the fd (open for mapping) or -1. */
static int file_make(const struct upload_opts *o, char *path, size_t path_size) {
  snprintf(path, path_size, "%s/vkrt-bench-upload-XXXXXX", o->dir);
  int fd = mkstemp(path);
  if (fd < 0) {
    fprintf(stderr, "vkrt-bench upload: cannot create a file in %s: %s\n", o->dir, strerror(errno));
    return -1;
  }
  const uint64_t block = 8ull << 20;
  uint8_t *buf = malloc(block);
  struct bar bar = bar_new(o, "writing weights file");
  for (uint64_t off = 0; buf && off < o->size; off += block) {
    uint64_t n = BENCH_MIN(block, o->size - off);
    fill_pattern(buf, n, off + 0x9e3779b97f4a7c15ull);
    if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n) {
      fprintf(stderr, "vkrt-bench upload: writing %s: %s\n", path, strerror(errno));
      free(buf);
      close(fd);
      unlink(path);
      return -1;
    }
    bar_draw(&bar, off + n, o->size);
  }
  free(buf);
  return fd;
}

static uint8_t *map_file(int fd, uint64_t size) {
  void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* ---- measurements --------------------------------------------------------------------- */

static double gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? (double)bytes / seconds * 1e-9 : 0;
}

/* Median GB/s of iters full uploads of src (after one warm-up). */
static double measure_upload(vkrt_appliance *app, vkrt_buffer *dst, const uint8_t *src,
                             uint64_t size, int iters, vkrt_status *status) {
  *status = vkrt_upload(dst, 0, src, size);
  if (*status != VKRT_OK)
    return 0;
  double t[64];
  int n = iters < 64 ? iters : 64;
  for (int i = 0; i < n; i++) {
    double t0 = bench_now_s();
    *status = vkrt_upload(dst, 0, src, size);
    t[i] = bench_now_s() - t0;
    if (*status != VKRT_OK) {
      fprintf(stderr, "vkrt-bench upload: %s\n", vkrt_last_error(app));
      return 0;
    }
  }
  return gbps(size, bench_median(t, n));
}

/* The serialized baseline: memcpy one slot, copy it, wait; repeat. */
static double measure_serialized(vkrt_appliance *app, uint32_t device, vkrt_buffer *dst,
                                 const uint8_t *src, uint64_t size, int iters) {
  const uint64_t slot = (uint64_t)CONFIG_VKRT_STAGING_SLOT_KB << 10;
  vkrt_buffer *staging = NULL;
  void *map = NULL;
  if (vkrt_buffer_create(app, device, slot, VKRT_BUFFER_HOST_VISIBLE, &staging) != VKRT_OK ||
      vkrt_buffer_map(staging, &map) != VKRT_OK) {
    vkrt_buffer_destroy(staging);
    return 0;
  }
  double t[64];
  int n = iters < 64 ? iters : 64;
  for (int i = 0; i <= n; i++) { /* i == 0: warm-up */
    double t0 = bench_now_s();
    for (uint64_t off = 0; off < size; off += slot) {
      uint64_t len = BENCH_MIN(slot, size - off);
      memcpy(map, src + off, len);
      if (vkrt_cmd_copy_buffer(dst, off, staging, 0, len) != VKRT_OK ||
          vkrt_finish(app, device) != VKRT_OK) {
        fprintf(stderr, "vkrt-bench upload: serialized baseline: %s\n", vkrt_last_error(app));
        vkrt_buffer_destroy(staging);
        return 0;
      }
    }
    if (i > 0)
      t[i - 1] = bench_now_s() - t0;
  }
  vkrt_buffer_destroy(staging);
  return gbps(size, bench_median(t, n));
}

/* The threads registration's pre-stage copy uses (CONFIG_VKRT_PRESTAGE_THREADS; 4, the
 * registry's own default, where pre-staging is compiled out). */
static uint32_t prestage_threads(void) {
  const char *v = vkrt_config_value("CONFIG_VKRT_PRESTAGE_THREADS");
  return v && atoi(v) > 0 ? (uint32_t)atoi(v) : 4;
}

/* The pre-stage copy alone: fresh file mapping -> fresh anonymous memory, as registration
 * does it (page faults on both sides included). */
static double measure_prestage_copy(int fd, uint64_t size, uint32_t threads, int iters) {
  double t[16];
  int n = iters < 16 ? iters : 16;
  for (int i = 0; i < n; i++) {
    uint8_t *src = map_file(fd, size);
    void *dst = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!src || dst == MAP_FAILED)
      return 0;
    double t0 = bench_now_s();
    if (IS_ENABLED(CONFIG_VKRT_LAB)) /* the lab runs registration's copy */
      vkrt_lab_parallel_copy(dst, src, size, threads);
    t[i] = bench_now_s() - t0;
    munmap(src, size);
    munmap(dst, size);
  }
  return gbps(size, bench_median(t, n));
}

struct row {
  const char *source;
  const char *policy;
  const char *path; /* what device `device` took */
  bool ok;
  char error[200];
  double register_ms;
  double gbps;
  double staging_gbps;
};

static void print_row(const struct upload_opts *o, const struct row *r, bool first) {
  if (o->json) {
    printf("%s\n    {\"source\": \"%s\", \"policy\": \"%s\", \"ok\": %s, \"path\": \"%s\", "
           "\"register_ms\": %.3f, \"upload_gbps\": %.3f, \"staging_gbps\": %.3f, "
           "\"ratio_to_staging\": %.3f%s%s%s}",
           first ? "" : ",", r->source, r->policy, r->ok ? "true" : "false", r->path,
           r->register_ms, r->gbps, r->staging_gbps,
           r->staging_gbps > 0 ? r->gbps / r->staging_gbps : 0.0, r->ok ? "" : ", \"error\": \"",
           r->ok ? "" : r->error, r->ok ? "" : "\"");
    return;
  }
  if (!r->ok) {
    printf("%-6s %-22s registration failed: %s\n", r->source, r->policy, r->error);
    return;
  }
  printf("%-6s %-22s %-10s register %9.2f ms   upload %7.2f GB/s   staging %7.2f GB/s   "
         "ratio %5.2fx\n",
         r->source, r->policy, r->path, r->register_ms, r->gbps, r->staging_gbps,
         r->staging_gbps > 0 ? r->gbps / r->staging_gbps : 0.0);
}

static void log_quiet(void *user, vkrt_log_level level, const char *message) {
  (void)user;
  if (level <= VKRT_LOG_WARN && !strstr(message, "falling back") &&
      !strstr(message, "pre-stage allocation") && !strstr(message, "import-only"))
    fprintf(stderr, "vkrt[%s]: %s\n", level == VKRT_LOG_ERROR ? "error" : "warn", message);
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: vkrt-bench upload [--size N] [--iters N] [--device D] [--dir DIR] [--threads N]\n"
          "                         [--json] [--no-progress] [--keep-file]\n"
          "  --size      bytes of the weights file and the anonymous source (default 256M)\n"
          "  --iters     timed uploads per case; the median is reported (default 5)\n"
          "  --device    device the uploads go to (default 0)\n"
          "  --dir       where the weights file is created (default /tmp); removed at the end\n"
          "  --threads   pre-stage copy threads to compare with 1 (default %d)\n"
          "  --json      one JSON object on stdout\n"
          "  --file F    vkrt_load_file of F per path instead (vkrt-bench upload --file F --help)\n",
          prestage_threads());
  return f == stderr ? 2 : 0;
}

static int run_upload(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--file"))
      return bench_load_file(argc, argv);
  struct upload_opts o = {.size = 256ull << 20, .iters = 5, .dir = "/tmp", .progress = true,
                          .threads = prestage_threads()};
  static const struct option longopts[] = {
      {"size", required_argument, NULL, 's'},  {"iters", required_argument, NULL, 'i'},
      {"device", required_argument, NULL, 'd'}, {"dir", required_argument, NULL, 'D'},
      {"threads", required_argument, NULL, 't'}, {"json", no_argument, NULL, 'j'},
      {"no-progress", no_argument, NULL, 'n'},  {"keep-file", no_argument, NULL, 'k'},
      {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "s:i:d:D:t:jnkh", longopts, NULL)) != -1) {
    switch (c) {
    case 's':
      if (!bench_parse_size(optarg, &o.size) || o.size == 0) {
        fprintf(stderr, "vkrt-bench upload: bad size '%s'\n", optarg);
        return 2;
      }
      break;
    case 'i': o.iters = atoi(optarg); break;
    case 'd': o.device = (uint32_t)atoi(optarg); break;
    case 'D': o.dir = optarg; break;
    case 't': o.threads = (uint32_t)atoi(optarg); break;
    case 'j': o.json = true; break;
    case 'n': o.progress = false; break;
    case 'k': o.keep_file = true; break;
    case 'h': return usage(stdout);
    default: return usage(stderr);
    }
  }
  if (o.iters < 1 || o.iters > 64 || o.threads < 1 || o.threads > 64)
    return usage(stderr);
  char path[512];
  int fd = file_make(&o, path, sizeof(path));
  if (fd < 0)
    return 1;
  uint8_t *anon = mmap(NULL, o.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (anon == MAP_FAILED) {
    fprintf(stderr, "vkrt-bench upload: cannot map %" PRIu64 " anonymous bytes\n", o.size);
    close(fd);
    unlink(path);
    return 1;
  }
  fill_pattern(anon, o.size, 12345);
  /* The open fd keeps the file; unlinking now leaves nothing behind if the run stops. */
  if (!o.keep_file)
    unlink(path);

  uint32_t policies[VKRT_IMPORT_POLICY_COUNT], policy_count = 0;
  if (IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)) {
    for (uint32_t p = 0; p < VKRT_IMPORT_POLICY_COUNT; p++)
      policies[policy_count++] = p;
  } else {
    policies[policy_count++] = CONFIG_VKRT_IMPORT_POLICY_ID;
    fprintf(stderr, "vkrt-bench upload: fault injection is compiled out, so only the board's "
            "policy (%s) is measured\n", vkrt_import_policy_str(CONFIG_VKRT_IMPORT_POLICY_ID));
  }

  if (o.json)
    printf("{\"bench\": \"upload\", \"size_bytes\": %" PRIu64 ", \"iters\": %d, \"device\": %u, "
           "\"staging_slot_bytes\": %llu, \"staging_slots\": %d, \"cases\": [",
           o.size, o.iters, o.device, (unsigned long long)CONFIG_VKRT_STAGING_SLOT_KB << 10,
           CONFIG_VKRT_STAGING_SLOTS);
  else
    printf("vkrt-bench upload: %.1f MiB, device %u, median of %d, staging ring %d x %d KiB\n",
           (double)o.size / (1 << 20), o.device, o.iters, CONFIG_VKRT_STAGING_SLOTS,
           CONFIG_VKRT_STAGING_SLOT_KB);

  int rc = 0;
  bool first = true;
  double staging[2] = {0, 0}, ring_gbps = 0, serialized_gbps = 0;
  for (uint32_t pi = 0; pi < policy_count; pi++) {
    vkrt_options opts;
    vkrt_options_initialize(&opts);
    opts.log = log_quiet;
    opts.log_level = VKRT_LOG_WARN;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
    opts.faults.import_policy_override = 1 + policies[pi];
#endif
    vkrt_appliance *app = bench_open(&opts);
    if (o.device >= vkrt_device_count(app)) {
      fprintf(stderr, "vkrt-bench upload: no device %u\n", o.device);
      vkrt_close(app);
      rc = 2;
      break;
    }
    vkrt_buffer *dst = NULL;
    if (vkrt_buffer_create(app, o.device, o.size, VKRT_BUFFER_DEVICE_LOCAL, &dst) != VKRT_OK) {
      fprintf(stderr, "vkrt-bench upload: %s\n", vkrt_last_error(app));
      vkrt_close(app);
      rc = 1;
      break;
    }
    vkrt_status s;
    if (pi == 0) {
      /* Staging path (sources unregistered) and the serialized baseline, once. */
      uint8_t *fmap = map_file(fd, o.size);
      staging[0] = fmap ? measure_upload(app, dst, fmap, o.size, o.iters, &s) : 0;
      if (fmap)
        munmap(fmap, o.size);
      staging[1] = measure_upload(app, dst, anon, o.size, o.iters, &s);
      ring_gbps = staging[1];
      serialized_gbps = measure_serialized(app, o.device, dst, anon, o.size, o.iters);
    }
    for (int src_kind = 0; src_kind < 2; src_kind++) {
      struct row r = {.source = src_kind ? "anon" : "file",
                      .policy = vkrt_import_policy_str(policies[pi]),
                      .staging_gbps = staging[src_kind]};
      /* A fresh mapping per case so registration pays its page faults like a service
       * mapping its weights would. */
      uint8_t *src = src_kind ? anon : map_file(fd, o.size);
      if (!src) {
        rc = 1;
        continue;
      }
      char label[64];
      snprintf(label, sizeof(label), "register %s %s", r.source, r.policy);
      struct bar bar = bar_new(&o, label);
      vkrt_register_info info;
      double t0 = bench_now_s();
      s = vkrt_host_register(app, src, o.size, bar_draw, &bar, &info);
      r.register_ms = (bench_now_s() - t0) * 1e3;
      if (bar.on && bar.last >= 0 && bar.last < 100)
        fprintf(stderr, "\n");
      r.ok = s == VKRT_OK;
      if (r.ok) {
        r.path = vkrt_import_path_str(info.path[o.device]);
        r.gbps = measure_upload(app, dst, src, o.size, o.iters, &s);
        vkrt_host_unregister(app, src);
        if (s != VKRT_OK)
          rc = 1;
      } else {
        r.path = "none";
        snprintf(r.error, sizeof(r.error), "%s", vkrt_last_error(app));
        for (char *q = r.error; *q; q++)
          if (*q == '"' || *q == '\\')
            *q = '\'';
      }
      print_row(&o, &r, first);
      first = false;
      if (!src_kind)
        munmap(src, o.size);
    }
    vkrt_buffer_destroy(dst);
    vkrt_close(app);
  }

  double copy_1t = 0, copy_nt = 0; /* 0: not measured (the lab runs the copy) */
  if (IS_ENABLED(CONFIG_VKRT_LAB)) {
    copy_1t = measure_prestage_copy(fd, o.size, 1, BENCH_MIN(o.iters, 3));
    copy_nt = measure_prestage_copy(fd, o.size, o.threads, BENCH_MIN(o.iters, 3));
  }
  if (o.json) {
    printf("\n  ],\n  \"staging_ring_gbps\": %.3f, \"serialized_memcpy_copy_gbps\": %.3f, "
           "\"ring_speedup\": %.3f,\n  \"prestage_copy_1_thread_gbps\": %.3f, "
           "\"prestage_copy_threads\": %u, \"prestage_copy_n_threads_gbps\": %.3f, "
           "\"prestage_copy_speedup\": %.3f}\n",
           ring_gbps, serialized_gbps, serialized_gbps > 0 ? ring_gbps / serialized_gbps : 0,
           copy_1t, o.threads, copy_nt, copy_1t > 0 ? copy_nt / copy_1t : 0);
  } else {
    printf("staging ring %.2f GB/s vs serialized memcpy+copy+wait %.2f GB/s: %.2fx\n", ring_gbps,
           serialized_gbps, serialized_gbps > 0 ? ring_gbps / serialized_gbps : 0);
    if (IS_ENABLED(CONFIG_VKRT_LAB))
      printf("pre-stage copy (file mapping -> anonymous): 1 thread %.2f GB/s, %u threads %.2f "
             "GB/s: %.2fx\n", copy_1t, o.threads, copy_nt, copy_1t > 0 ? copy_nt / copy_1t : 0);
    else
      printf("pre-stage copy: not in this build (the lab runs it: CONFIG_VKRT_LAB)\n");
  }
  munmap(anon, o.size);
  close(fd);
  if (o.keep_file)
    fprintf(stderr, "vkrt-bench upload: kept %s\n", path);
  return rc;
}

BENCH_COMMAND(upload, "upload", "host weights: register cost, upload GB/s per import policy",
              run_upload)
