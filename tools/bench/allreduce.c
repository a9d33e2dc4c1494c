/* vkrt-bench allreduce: nccl-tests style table (size, count, type, redop, time, algbw, busbw,
 * #wrong) for each transport this build has, or the one given with --transport. Out of
 * place; time is the mean of --iters back-to-back allreduces followed by one finish on
 * every device (like nccl-tests: the collectives pipeline, the host does not wait each time).
 * With --sync every iteration is allreduce + finish on every device and time is the median of
 * those (the latency a host that waits for each result sees).
 * busbw = algbw * 2 (n - 1) / n. #wrong counts result elements that differ from the exact
 * sum of integer-valued inputs, on every rank.
 *
 * Across hosts (CONFIG_VKRT_TRANSPORT_MPI, under mpirun -np H): the appliance spans the H
 * ranks, n is every device of every host (global rank = host x devices + device), time is the
 * slowest host's, #wrong is summed over the hosts, and each row adds a plain MPI_Allreduce of
 * host float buffers of the same bytes per rank over the H ranks in the same run (mpi_time,
 * mpi_busbw with n = H): the limit the inter-host step is held against. Rank 0 prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "../hosts.h"

#define STAGING_BYTES (4u << 20)

struct ar_bench {
  vkrt_appliance *app;
  uint32_t n;      /* devices of this host */
  uint32_t first;  /* global rank of this host's device 0 */
  uint32_t total;  /* devices of every host */
  vkrt_type type;
  size_t esize;
  uint64_t max_bytes;
  vkrt_buffer *send[VKRT_MAX_DEVICES], *recv[VKRT_MAX_DEVICES], *staging[VKRT_MAX_DEVICES];
  void *map[VKRT_MAX_DEVICES];
};

static int check(vkrt_appliance *app, vkrt_status s, const char *what) {
  if (s != VKRT_OK) {
    fprintf(stderr, "vkrt-bench allreduce: %s: %s: %s\n", what, vkrt_status_str(s),
            vkrt_last_error(app));
    return 1;
  }
  return 0;
}

static float input_value(uint32_t rank, uint64_t i) { return (float)((i % 61) + rank); }

static void store(vkrt_type type, void *p, uint64_t i, float v) {
  if (type == VKRT_TYPE_F16)
    ((_Float16 *)p)[i] = (_Float16)v;
  else
    ((float *)p)[i] = v;
}

static float load(vkrt_type type, const void *p, uint64_t i) {
  return type == VKRT_TYPE_F16 ? (float)((const _Float16 *)p)[i] : ((const float *)p)[i];
}

/* Uploads the integer-valued inputs of `count` elements and poisons recv. */
static int prepare(struct ar_bench *b, uint64_t count) {
  uint64_t per = STAGING_BYTES / b->esize;
  for (uint32_t d = 0; d < b->n; d++) {
    for (uint64_t first = 0; first < count; first += per) {
      uint64_t c = count - first < per ? count - first : per;
      for (uint64_t i = 0; i < c; i++)
        store(b->type, b->map[d], i, input_value(b->first + d, first + i));
      if (check(b->app, vkrt_cmd_copy_buffer(b->send[d], first * b->esize, b->staging[d], 0,
                                             c * b->esize), "upload") ||
          check(b->app, vkrt_finish(b->app, d), "upload"))
        return 1;
    }
    uint64_t bytes = (count * b->esize + 3) & ~(uint64_t)3;
    if (check(b->app, vkrt_cmd_fill(b->recv[d], 0, bytes, 0xDEADBEEFu), "poison"))
      return 1;
  }
  return 0;
}

static uint64_t count_wrong(struct ar_bench *b, uint64_t count) {
  uint64_t per = STAGING_BYTES / b->esize, wrong = 0;
  for (uint32_t d = 0; d < b->n; d++)
    for (uint64_t first = 0; first < count; first += per) {
      uint64_t c = count - first < per ? count - first : per;
      if (vkrt_cmd_copy_buffer(b->staging[d], 0, b->recv[d], first * b->esize, c * b->esize) ||
          vkrt_finish(b->app, d))
        return count * b->n;
      for (uint64_t i = 0; i < c; i++) {
        float want = 0;
        for (uint32_t r = 0; r < b->total; r++)
          want += input_value(r, first + i);
        wrong += load(b->type, b->map[d], i) != want;
      }
    }
  return wrong;
}

static int usage(void) {
  fprintf(stderr,
          "usage: vkrt-bench allreduce [--min SIZE] [--max SIZE] [--iters N] [--type f32|f16]\n"
          "                            [--transport all|auto|native_fd|cpu_proxy|host_staged]\n"
          "                            [--devices N] [--sync] [--latency [--calls]] [--json]\n"
          "                            [--timeout-ms T]\n"
          "  sizes are bytes per rank (4, 8K, 256M), doubled from --min to --max\n"
          "  (default 4 B .. 256 MiB); --iters (default 20) is scaled down above 1 MiB so\n"
          "  every size moves about as many bytes as 1 MiB x iters (at least 2 iterations).\n"
          "  --sync: each iteration waits for the result (latency) instead of pipelining.\n"
          "  --latency: 8 B .. 1 MiB (unless --min/--max), per size the median time inside\n"
          "  vkrt_allreduce (caller) and of allreduce + finish on every device (complete),\n"
          "  beside the raw hand-over floors measured in the same run, and complete / floor,\n"
          "  and the submitter threads' CPU time in %% of a core per device (subm).\n"
          "  --calls: then dev0's Vulkan recording calls inside vkrt_allreduce, per call.\n"
          "  --timeout-ms: the collective timeout (default CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS);\n"
          "  a larger one for lavapipe ranks sharing few cores under mpirun.\n");
  return 2;
}

static uint64_t timeout_ns; /* --timeout-ms; 0 = the board's */

/* --latency: the raw floors (0 = not measurable here). A collective between two devices costs
 * at least two hand-overs (to the peer and back). */
static struct bench_floors floors;
static bool latency;
static bool calls; /* --calls: dev0's Vulkan recording calls inside vkrt_allreduce (lab) */

/* One line per transport at the end of the run, whatever happened to it (a tail of the
 * output shows every transport of the build). */
static struct transport_summary {
  const char *name;
  char what[200];     /* "ran", or why not */
  int rows;
  double caller_min, caller_max, cpu_max, submits_max, xfloor_min, xfloor_max;
  double submitter_max; /* % of a core per device the submitter threads used */
  uint64_t caught[3];   /* their batches found spinning, dozing, after sleeping */
} summary[3];
static int summaries;

static void summary_begin(vkrt_transport_kind kind) {
  summary[summaries].name = vkrt_transport_str(kind);
  snprintf(summary[summaries].what, sizeof(summary[summaries].what), "ran");
  summary[summaries].caller_min = summary[summaries].xfloor_min = 1e300;
  summaries++;
}

static void summary_set(const char *fmt, const char *detail) {
  snprintf(summary[summaries - 1].what, sizeof(summary[summaries - 1].what), fmt, detail);
}

static void summary_row(double caller, double cpu, double submits, double xfloor,
                        double submitter, const uint64_t caught[3]) {
  struct transport_summary *m = &summary[summaries - 1];
  m->rows++;
  m->submitter_max = submitter > m->submitter_max ? submitter : m->submitter_max;
  for (int k = 0; k < 3; k++)
    m->caught[k] += caught[k];
  m->caller_min = caller < m->caller_min ? caller : m->caller_min;
  m->caller_max = caller > m->caller_max ? caller : m->caller_max;
  m->cpu_max = cpu > m->cpu_max ? cpu : m->cpu_max;
  m->submits_max = submits > m->submits_max ? submits : m->submits_max;
  m->xfloor_min = xfloor < m->xfloor_min ? xfloor : m->xfloor_min;
  m->xfloor_max = xfloor > m->xfloor_max ? xfloor : m->xfloor_max;
}

static void summary_print(bool json) {
  if (json) {
    printf(", \"summary\": [");
    for (int k = 0; k < summaries; k++)
      printf("%s{\"transport\": \"%s\", \"result\": \"%s\", \"rows\": %d}", k ? ", " : "",
             summary[k].name, summary[k].what, summary[k].rows);
    printf("]");
    return;
  }
  for (int k = 0; k < summaries; k++) {
    if (!summary[k].rows) {
      printf("# summary %-11s %s\n", summary[k].name, summary[k].what);
    } else if (latency) {
      printf("# summary %-11s %s, %d sizes: caller %.1f-%.1f us (CPU at most %.1f), at most %.1f "
             "submits per device inside the call, complete %.2f-%.2f x floor; submitter threads "
             "at most %.0f%% of a core per device, batches found spinning %llu, dozing %llu, "
             "after sleeping %llu\n", summary[k].name,
             summary[k].what, summary[k].rows, summary[k].caller_min, summary[k].caller_max,
             summary[k].cpu_max, summary[k].submits_max, summary[k].xfloor_min,
             summary[k].xfloor_max, summary[k].submitter_max,
             (unsigned long long)summary[k].caught[0], (unsigned long long)summary[k].caught[1],
             (unsigned long long)summary[k].caught[2]);
    } else {
      printf("# summary %-11s %s, %d sizes\n", summary[k].name, summary[k].what,
             summary[k].rows);
    }
  }
}

static double floor_for(vkrt_transport_kind kind, uint32_t devices) {
  if (devices < 2)
    return floors.one_queue;
  double hop = kind == VKRT_TRANSPORT_NATIVE_FD && floors.devices_gpu > 0 ? floors.devices_gpu
                                                                         : floors.devices_relay;
  return 2 * hop;
}

static int run_transport(vkrt_transport_kind kind, uint32_t devices, vkrt_type type,
                         uint64_t min_bytes, uint64_t max_bytes, int iters, bool sync, bool json,
                         bool *first_json) {
  vkrt_options o;
  vkrt_options_initialize(&o);
  o.device_count = devices;
  o.collective_transport = kind;
  o.collective_timeout_ns = timeout_ns;
  o.log_level = VKRT_LOG_WARN;
  tool_hosts_attach(&o);
  vkrt_appliance *app = NULL;
  char why[2048];
  summary_begin(kind);
  vkrt_status s = vkrt_open(&o, &app, why, sizeof(why));
  if (s != VKRT_OK) {
    if (json)
      fprintf(stderr, "# %s: unavailable: %s\n", vkrt_transport_str(kind), why);
    else
      printf("# %s: unavailable here: %s\n", vkrt_transport_str(kind), why);
    summary_set("unavailable here: %.170s", why);
    return 0;
  }
  struct ar_bench b = {.app = app, .n = vkrt_device_count(app), .type = type,
                       .esize = type == VKRT_TYPE_F16 ? 2 : 4, .max_bytes = max_bytes};
  uint32_t hosts = vkrt_host_count(app);
  b.first = vkrt_host_rank(app) * b.n;
  b.total = hosts * b.n;
  int rc = 0;
  for (uint32_t d = 0; d < b.n && !rc; d++) {
    rc |= check(app, vkrt_buffer_create(app, d, max_bytes + 4, 0, &b.send[d]), "send buffer");
    rc |= rc ? 0 : check(app, vkrt_buffer_create(app, d, max_bytes + 4, 0, &b.recv[d]), "recv buffer");
    rc |= rc ? 0 : check(app, vkrt_buffer_create(app, d, STAGING_BYTES, VKRT_BUFFER_HOST_VISIBLE,
                                                  &b.staging[d]), "staging buffer");
    rc |= rc ? 0 : check(app, vkrt_buffer_map(b.staging[d], &b.map[d]), "map");
  }
  const char *tname = type == VKRT_TYPE_F16 ? "half" : "float";
  const char *via = vkrt_transport_str(vkrt_transport(app));
  if (!rc) {
    if (json) {
      printf("%s{\"transport\": \"%s\", \"devices\": %u, \"hosts\": %u, \"devices_per_host\": "
             "%u, \"rows\": [", *first_json ? "" : ", ", via, b.total, hosts, b.n);
      *first_json = false;
    } else {
      if (latency) {
        printf("# allreduce latency: %u devices, transport %s, out of place, median of %d; "
               "caller = inside vkrt_allreduce, complete = allreduce + finish on every device; "
               "floor = %s\n", b.n, via, iters,
               b.n < 2 ? "one-queue submit + spin"
               : kind == VKRT_TRANSPORT_NATIVE_FD && floors.devices_gpu > 0
                   ? "2 x the two-device hand-over with a GPU wait"
                   : "2 x the two-device host-relayed hand-over");
        printf("#%11s %12s %6s %11s %8s %8s %12s %10s %10s %7s %8s\n", "size", "count", "type",
               "caller(us)", "cpu(us)", "submits", "complete(us)", "floor(us)", "x floor",
               "#wrong", "subm(%)");
      } else if (hosts > 1)
        printf("# allreduce: %u hosts x %u devices (MPI), transport %s within a host, out of "
               "place, %s; mpi_* = plain MPI_Allreduce of host floats, same bytes per rank, %u "
               "ranks\n", hosts, b.n, via, sync ? "time = median of allreduce + finish"
                                                : "time = mean of back-to-back allreduces", hosts);
      else
        printf("# allreduce: %u devices, transport %s, out of place, %s\n", b.n, via,
               sync ? "time = median of allreduce + finish" : "time = mean of back-to-back allreduces");
      if (!latency)
      printf("#%11s %12s %6s %6s %10s %8s %8s %7s%s\n", "size", "count", "type", "redop",
             "time(us)", "algbw", "busbw", "#wrong",
             hosts > 1 ? "  mpi_time(us) mpi_busbw vkrt/mpi" : "");
      if (!latency)
      printf("#%11s %12s %6s %6s %10s %8s %8s %7s%s\n", "(B)", "(elements)", "", "", "", "(GB/s)",
             "(GB/s)", "", hosts > 1 ? "               (GB/s)   (busbw)" : "");
    }
  }
  double busbw_sum = 0;
  int rows = 0;
  uint64_t profiled = 0; /* allreduces inside the call profile */
  bool profile = IS_ENABLED(CONFIG_VKRT_LAB) && calls && latency && !rc && vkrt_lab_vk_calls_start(app, 0) == VKRT_OK;
  for (uint64_t size = min_bytes; size <= max_bytes && !rc; size *= 2) {
    uint64_t count = size / b.esize;
    if (count == 0)
      continue;
    vkrt_allreduce_args args = {.count = count, .type = type};
    for (uint32_t d = 0; d < b.n; d++) {
      args.send[d] = b.send[d];
      args.recv[d] = b.recv[d];
    }
    if (prepare(&b, count))
      return 1;
    int n_iter = iters;
    if (size > (1u << 20)) {
      n_iter = (int)((double)iters * (double)(1u << 20) / (double)size);
      n_iter = n_iter < 2 ? 2 : n_iter;
    }
    rc |= check(app, vkrt_allreduce(app, &args), "allreduce (warm-up)");
    for (uint32_t d = 0; d < b.n && !rc; d++)
      rc |= check(app, vkrt_finish(app, d), "finish");
    /* latency: the first size after as many untimed rounds as it times (the submitter
     * threads settle into their spin and doze pattern; the first sizes read high without) */
    for (int i = 0; latency && size == min_bytes && i < iters && !rc; i++) {
      rc |= check(app, vkrt_allreduce(app, &args), "allreduce (warm-up)");
      for (uint32_t d = 0; d < b.n && !rc; d++)
        rc |= check(app, vkrt_finish(app, d), "finish");
    }
    if (rc)
      break;
    double t;
    if (latency) {
      double *caller = malloc(sizeof(double) * (size_t)iters);
      double *cpu = malloc(sizeof(double) * (size_t)iters);
      double *done = malloc(sizeof(double) * (size_t)iters);
      if (!caller || !cpu || !done) {
        free(caller);
        free(cpu);
        free(done);
        return 1;
      }
      /* submits each device's stream made inside the calls (not those of the finishes; the
       * lab counts them) */
      uint64_t inside = 0;
      /* the submitter threads' CPU time over the iterations, per device, in % of the wall */
      vkrt_lab_stream first[VKRT_MAX_DEVICES], last;
      for (uint32_t d = 0; IS_ENABLED(CONFIG_VKRT_LAB) && d < b.n; d++)
        vkrt_lab_stream_get(app, d, &first[d]);
      double w0 = bench_now_s();
      for (int i = 0; i < iters && !rc; i++) {
        vkrt_lab_stream before[VKRT_MAX_DEVICES], after;
        for (uint32_t d = 0; IS_ENABLED(CONFIG_VKRT_LAB) && d < b.n; d++)
          vkrt_lab_stream_get(app, d, &before[d]);
        if (profile)
          vkrt_lab_vk_calls_mark(true);
        double t0 = bench_now_s(), c0 = bench_thread_cpu_s();
        rc |= check(app, vkrt_allreduce(app, &args), "allreduce");
        double t1 = bench_now_s(), c1 = bench_thread_cpu_s();
        if (profile)
          vkrt_lab_vk_calls_mark(false), profiled++;
        for (uint32_t d = 0; IS_ENABLED(CONFIG_VKRT_LAB) && d < b.n; d++) {
          vkrt_lab_stream_get(app, d, &after);
          inside += after.submitted - before[d].submitted;
        }
        for (uint32_t d = 0; d < b.n && !rc; d++)
          rc |= check(app, vkrt_finish(app, d), "finish");
        caller[i] = (t1 - t0) * 1e6;
        cpu[i] = (c1 - c0) * 1e6;
        done[i] = (bench_now_s() - t0) * 1e6;
      }
      double wall = bench_now_s() - w0, subm_ns = 0;
      uint64_t caught[3] = {0, 0, 0};
      for (uint32_t d = 0; IS_ENABLED(CONFIG_VKRT_LAB) && d < b.n; d++) {
        vkrt_lab_stream_get(app, d, &last);
        subm_ns += (double)(last.submitter_cpu_ns - first[d].submitter_cpu_ns);
        caught[0] += last.caught_spinning - first[d].caught_spinning;
        caught[1] += last.caught_dozing - first[d].caught_dozing;
        caught[2] += last.woken - first[d].woken;
      }
      double subm_pct = IS_ENABLED(CONFIG_VKRT_LAB) ? subm_ns * 1e-9 / (wall * b.n) * 100 : -1;
      double caller_us = bench_median(caller, iters), done_us = bench_median(done, iters);
      double cpu_us = bench_median(cpu, iters);
      double submits = IS_ENABLED(CONFIG_VKRT_LAB) ? (double)inside / ((double)iters * b.n)
                                                   : -1; /* not counted without the lab */
      free(caller);
      free(cpu);
      free(done);
      if (rc) {
        summary_set("failed: %.180s", vkrt_last_error(app));
        break;
      }
      uint64_t wrong = tool_hosts_sum(count_wrong(&b, count));
      double fl = floor_for(kind, b.n);
      if (json)
        printf("%s{\"size\": %llu, \"count\": %llu, \"type\": \"%s\", \"caller_us\": %.2f, "
               "\"caller_cpu_us\": %.2f, \"submits_per_device\": %.2f, \"complete_us\": %.2f, "
               "\"floor_us\": %.2f, \"x_floor\": %.3f, \"wrong\": %llu, \"submitter_pct\": %.1f}",
               rows ? ", " : "", (unsigned long long)(count * b.esize), (unsigned long long)count,
               tname, caller_us, cpu_us, submits, done_us, fl, fl > 0 ? done_us / fl : 0.0,
               (unsigned long long)wrong, subm_pct);
      else
        printf(" %11llu %12llu %6s %11.1f %8.1f %8.2f %12.1f %10.1f %10.3f %7llu %8.1f\n",
               (unsigned long long)(count * b.esize), (unsigned long long)count, tname, caller_us,
               cpu_us, submits, done_us, fl, fl > 0 ? done_us / fl : 0.0,
               (unsigned long long)wrong, subm_pct);
      fflush(stdout);
      if (wrong)
        summary_set("failed: %s", "wrong results");
      else
        summary_row(caller_us, cpu_us, submits, fl > 0 ? done_us / fl : 0.0, subm_pct, caught);
      rc |= wrong != 0;
      rows++;
      continue;
    }
    if (sync) {
      double *samples = malloc(sizeof(double) * (size_t)n_iter);
      if (!samples)
        return 1;
      for (int i = 0; i < n_iter && !rc; i++) {
        double t0 = bench_now_s();
        rc |= check(app, vkrt_allreduce(app, &args), "allreduce");
        for (uint32_t d = 0; d < b.n && !rc; d++)
          rc |= check(app, vkrt_finish(app, d), "finish");
        samples[i] = bench_now_s() - t0;
      }
      t = bench_median(samples, n_iter);
      free(samples);
    } else {
      double t0 = bench_now_s();
      for (int i = 0; i < n_iter && !rc; i++)
        rc |= check(app, vkrt_allreduce(app, &args), "allreduce");
      for (uint32_t d = 0; d < b.n && !rc; d++)
        rc |= check(app, vkrt_finish(app, d), "finish");
      t = (bench_now_s() - t0) / n_iter;
    }
    if (rc)
      break;
    t = tool_hosts_max(t);
    uint64_t bytes = count * b.esize;
    double algbw = (double)bytes / t / 1e9;
    double busbw = algbw * 2.0 * (b.total - 1) / b.total;
    uint64_t wrong = tool_hosts_sum(count_wrong(&b, count));
    busbw_sum += busbw;
    double mpi_t = tool_hosts_mpi_allreduce_s(bytes, n_iter);
    double mpi_busbw = mpi_t > 0 ? (double)bytes / mpi_t / 1e9 * 2.0 * (hosts - 1) / hosts : 0;
    if (json) {
      printf("%s{\"size\": %llu, \"count\": %llu, \"type\": \"%s\", \"redop\": \"sum\", "
             "\"time_us\": %.2f, \"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %llu, "
             "\"iters\": %d", rows ? ", " : "", (unsigned long long)bytes,
             (unsigned long long)count, tname, t * 1e6, algbw, busbw, (unsigned long long)wrong,
             n_iter);
      if (hosts > 1)
        printf(", \"mpi_time_us\": %.2f, \"mpi_busbw\": %.4f, \"busbw_vs_mpi\": %.4f",
               mpi_t * 1e6, mpi_busbw, mpi_busbw > 0 ? busbw / mpi_busbw : 0.0);
      printf("}");
    } else {
      printf(" %11llu %12llu %6s %6s %10.1f %8.3f %8.3f %7llu", (unsigned long long)bytes,
             (unsigned long long)count, tname, "sum", t * 1e6, algbw, busbw,
             (unsigned long long)wrong);
      if (hosts > 1)
        printf("  %12.1f %9.3f %8.3f", mpi_t * 1e6, mpi_busbw,
               mpi_busbw > 0 ? busbw / mpi_busbw : 0.0);
      printf("\n");
    }
    fflush(stdout);
    rc |= wrong != 0;
    if (wrong)
      summary_set("failed: %s", "wrong results");
    else
      summary[summaries - 1].rows++;
    rows++;
  }
  if (rc && !strcmp(summary[summaries - 1].what, "ran"))
    summary_set("failed: %.180s", vkrt_last_error(app));
  vkrt_lab_vk_calls vc;
  if (profile && vkrt_lab_vk_calls_stop(app, 0, &vc) == VKRT_OK && profiled && !json) {
    /* what of the caller's time is the driver's, on dev0 (dev1's calls are not wrapped) */
    double inside = 0;
    printf("# dev0's Vulkan recording calls inside vkrt_allreduce, us per call:");
    for (int k = 0; k < VKRT_LAB_VK_CALL_COUNT; k++)
      if (vc.count[k]) {
        inside += (double)vc.ns[k];
        printf(" %s %.2fx %.3f;", vkrt_lab_vk_call_name((vkrt_lab_vk_call)k),
               (double)vc.count[k] / (double)profiled, (double)vc.ns[k] * 1e-3 / (double)profiled);
      }
    printf(" all %.3f\n", inside * 1e-3 / (double)profiled);
  }
  if (json)
    printf("], \"avg_busbw\": %.4f}", rows ? busbw_sum / rows : 0.0);
  else if (rows && !latency)
    printf("# %s: avg bus bandwidth %.3f GB/s over %d sizes\n", via, busbw_sum / rows, rows);
  for (uint32_t d = 0; d < b.n; d++) {
    vkrt_buffer_destroy(b.send[d]);
    vkrt_buffer_destroy(b.recv[d]);
    vkrt_buffer_destroy(b.staging[d]);
  }
  vkrt_close(app);
  return rc;
}

/* The floors an allreduce between devices is held against, measured in the same run:
 * one submit of empty work + host wait on one device, and a host-relayed A -> B round trip
 * (empty work on device 0, host sees it, then empty work on device 1, host sees it). */
static void measure_floors(uint32_t devices, bool json) {
  vkrt_options o;
  vkrt_options_initialize(&o);
  o.device_count = devices;
  o.log_level = VKRT_LOG_WARN;
  vkrt_appliance *app = NULL;
  char why[1024];
  if (vkrt_open(&o, &app, why, sizeof(why)) != VKRT_OK) {
    fprintf(stderr, "# floors: cannot open: %s\n", why);
    if (json)
      printf("\"floors\": null, ");
    return;
  }
  enum { N = 400 };
  static double one[N], relay[N];
  uint32_t peer = vkrt_device_count(app) > 1 ? 1 : 0;
  for (int i = 0; i < 20; i++) /* warm up */
    (void)(vkrt_finish(app, 0) || vkrt_finish(app, peer));
  for (int i = 0; i < N; i++) {
    double t0 = bench_now_s();
    vkrt_status s = vkrt_finish(app, 0);
    double t1 = bench_now_s();
    if (s == VKRT_OK)
      s = vkrt_finish(app, peer);
    double t2 = bench_now_s();
    if (s != VKRT_OK) {
      fprintf(stderr, "# floors: %s\n", vkrt_last_error(app));
      break;
    }
    one[i] = (t1 - t0) * 1e6;
    relay[i] = (t2 - t0) * 1e6;
  }
  double one_us = bench_median(one, N), relay_us = bench_median(relay, N);
  if (json)
    printf("\"floors\": {\"submit_wait_one_device_us\": %.2f, \"relay_dev0_dev1_us\": %.2f}, ",
           one_us, relay_us);
  else
    printf("# floors (median of %d): submit + wait of empty work on one device %.1f us; "
           "host-relayed dev0 -> dev%u round trip %.1f us\n", N, one_us, peer, relay_us);
  vkrt_close(app);
}

static int bench_allreduce(int argc, char **argv) {
  uint64_t min_bytes = 4, max_bytes = 256ull << 20;
  int iters = 20;
  uint32_t devices = 0;
  bool json = false, sync = false, min_set = false, max_set = false;
  vkrt_type type = VKRT_TYPE_F32;
  const char *transport = "all";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--sync")) {
      sync = true;
    } else if (!strcmp(a, "--latency")) {
      latency = true;
    } else if (!strcmp(a, "--calls")) {
      calls = true;
    } else if (!strcmp(a, "--min") && v && bench_parse_size(v, &min_bytes)) {
      min_set = true;
      i++;
    } else if (!strcmp(a, "--max") && v && bench_parse_size(v, &max_bytes)) {
      max_set = true;
      i++;
    } else if (!strcmp(a, "--iters") && v && atoi(v) > 0) {
      iters = atoi(v);
      i++;
    } else if (!strcmp(a, "--devices") && v && atoi(v) > 0 && atoi(v) <= VKRT_MAX_DEVICES) {
      devices = (uint32_t)atoi(v);
      i++;
    } else if (!strcmp(a, "--type") && v && (!strcmp(v, "f32") || !strcmp(v, "f16"))) {
      type = !strcmp(v, "f16") ? VKRT_TYPE_F16 : VKRT_TYPE_F32;
      i++;
    } else if (!strcmp(a, "--timeout-ms") && v && atoi(v) > 0) {
      timeout_ns = (uint64_t)atoi(v) * 1000000ull;
      i++;
    } else if (!strcmp(a, "--transport") && v) {
      transport = v;
      i++;
    } else {
      return usage();
    }
  }
  if (latency && !min_set)
    min_bytes = 8;
  if (latency && !max_set)
    max_bytes = 1u << 20;
  if (min_bytes == 0 || min_bytes > max_bytes)
    return usage();
  tool_hosts_init();
  vkrt_transport_kind kinds[3];
  int n_kinds = 0;
  if (!strcmp(transport, "all")) {
    /* every transport of the build; one that cannot run here says why */
    if (IS_ENABLED(CONFIG_VKRT_TRANSPORT_NATIVE_FD))
      kinds[n_kinds++] = VKRT_TRANSPORT_NATIVE_FD;
    if (IS_ENABLED(CONFIG_VKRT_TRANSPORT_CPU_PROXY))
      kinds[n_kinds++] = VKRT_TRANSPORT_CPU_PROXY;
    if (IS_ENABLED(CONFIG_VKRT_TRANSPORT_HOST_STAGED))
      kinds[n_kinds++] = VKRT_TRANSPORT_HOST_STAGED;
  } else if (!strcmp(transport, "auto")) {
    kinds[n_kinds++] = VKRT_TRANSPORT_NONE;
  } else {
    for (int k = VKRT_TRANSPORT_NATIVE_FD; k <= VKRT_TRANSPORT_HOST_STAGED; k++)
      if (!strcmp(transport, vkrt_transport_str((vkrt_transport_kind)k)))
        kinds[n_kinds++] = (vkrt_transport_kind)k;
    if (!n_kinds)
      return usage();
  }
  if (!IS_ENABLED(CONFIG_VKRT_COLLECTIVES)) {
    fprintf(stderr, "vkrt-bench allreduce: collectives are not in this build\n");
    return 1;
  }
  int rc = 0;
  bool first_json = true;
  if (json)
    printf("{\"bench\": \"allreduce\", ");
  if (latency)
    bench_latency_floors(devices, json, &floors);
  else
    measure_floors(devices, json);
  if (json)
    printf("\"results\": [");
  for (int k = 0; k < n_kinds; k++)
    rc |= run_transport(kinds[k], devices, type, min_bytes, max_bytes, iters, sync, json,
                        &first_json);
  if (json)
    printf("]");
  summary_print(json);
  if (json)
    printf("}\n");
  fflush(stdout);
  tool_hosts_finish(rc);
  return rc;
}

BENCH_COMMAND(allreduce, "allreduce", "nccl-tests style allreduce table per transport",
              bench_allreduce)
