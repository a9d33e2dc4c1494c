/* vkrt-service: a firmware-style tensor-parallel decode service on libvkrt.
 *
 * Opens the board's appliance, prints the plan, mmaps a weights file read-only, registers it
 * (the board's import policy), uploads each device's shard (shards.c), then decodes tokens
 * with the Megatron MLP split (decode.c) and checks the final activations against a float64
 * CPU reference (verify.c). Arguments: args.c.
 *
 * Under mpirun (CONFIG_VKRT_TRANSPORT_MPI) every rank is a host: the appliance spans them,
 * device d of host h holds shard h x devices + d, the allreduce sums over every device of
 * every host, each host verifies its devices against the float64 reference and the hosts
 * compare their results bit for bit; host0 prints. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/hosts.h"
#include "service.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

static void log_stderr(void *user, vkrt_log_level level, const char *message) {
  (void)user;
  static const char *const names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "vkrt[%s]: %s\n", names[level], message);
}

static int make_weights(const struct service_args *a) {
  if (!a->layers || !a->hidden) {
    fprintf(stderr, "vkrt-service: --make-weights needs --layers and --hidden\n");
    return EXIT_USAGE;
  }
  if (a->layers > SERVICE_MAX_LAYERS) {
    fprintf(stderr, "vkrt-service: at most %d layers in this example\n", SERVICE_MAX_LAYERS);
    return EXIT_USAGE;
  }
  uint64_t ffn = a->ffn ? a->ffn : a->hidden * 4;
  int r = weights_make(a->make_path, (uint32_t)a->layers, (uint32_t)a->hidden, (uint32_t)ffn,
                       a->dtype, a->seed);
  if (r == 0)
    printf("vkrt-service: wrote %s (layers %llu, hidden %llu, ffn %llu, %s)\n", a->make_path,
           (unsigned long long)a->layers, (unsigned long long)a->hidden,
           (unsigned long long)ffn, a->dtype ? "f16" : "f32");
  return r;
}

/* The file's shapes against --layers/--hidden/--ffn and this example's limit. */
static int check_shapes(const struct service_args *a, const struct weights_header *wh) {
  if ((a->hidden && a->hidden != wh->hidden) || (a->layers && a->layers != wh->layers) ||
      (a->ffn && a->ffn != wh->ffn)) {
    fprintf(stderr, "vkrt-service: shape mismatch: %s has layers %u hidden %u ffn %u, but "
                    "--layers %llu --hidden %llu --ffn %llu were given\n",
            a->weights_path, wh->layers, wh->hidden, wh->ffn, (unsigned long long)a->layers,
            (unsigned long long)a->hidden, (unsigned long long)a->ffn);
    return EXIT_WEIGHTS;
  }
  if (wh->layers > SERVICE_MAX_LAYERS) {
    fprintf(stderr, "vkrt-service: %s has %u layers; this example handles at most %d\n",
            a->weights_path, wh->layers, SERVICE_MAX_LAYERS);
    return EXIT_WEIGHTS;
  }
  return 0;
}

static void print_plan(vkrt_appliance *app) {
  size_t plan_len = vkrt_describe(app, false, NULL, 0);
  char *plan = malloc(plan_len + 1);
  if (plan) {
    vkrt_describe(app, false, plan, plan_len + 1);
    fputs(plan, stdout);
    free(plan);
  }
}

int main(int argc, char **argv) {
  struct service_args a;
  int rc = service_parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if (a.make_path)
    return make_weights(&a);
  if (!a.weights_path) {
    service_usage(stderr);
    return EXIT_USAGE;
  }

  struct weights_file wf;
  rc = weights_open(a.weights_path, &wf);
  if (rc)
    return rc;
  const struct weights_header *wh = &wf.h;
  rc = check_shapes(&a, wh);
  if (rc) {
    weights_close(&wf);
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
  options.log_level = a.verbose ? VKRT_LOG_INFO : VKRT_LOG_WARN;
  options.device_count = (uint32_t)a.devices;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  if (a.fault_import)
    options.faults.mask |= VKRT_FAULT_IMPORT_FAILS;
#else
  if (a.fault_import) {
    fprintf(stderr, "vkrt-service: --fault needs CONFIG_VKRT_FAULT_INJECTION=y\n");
    weights_close(&wf);
    return EXIT_USAGE;
  }
#endif
  static struct service svc; /* buffer handles of every device and layer: not on the stack */
  memset(&svc, 0, sizeof(svc));
  svc.wf = &wf;
  char why[1024];
  vkrt_status st = vkrt_open(&options, &svc.app, why, sizeof(why));
  if (st != VKRT_OK) {
    fprintf(stderr, "vkrt-service: cannot open the appliance: %s: %s\n", vkrt_status_str(st), why);
    weights_close(&wf);
    tool_hosts_finish(EXIT_RUNTIME);
    return EXIT_RUNTIME;
  }
  svc.n = vkrt_device_count(svc.app);
  /* Tensor-parallel ranks: every device of every host (one host without MPI). */
  svc.ranks = svc.n * vkrt_host_count(svc.app);
  svc.first_rank = svc.n * vkrt_host_rank(svc.app);
  if (wh->ffn < svc.ranks) {
    fprintf(stderr, "vkrt-service: ffn %u is smaller than the %u ranks\n", wh->ffn, svc.ranks);
    rc = EXIT_WEIGHTS;
    goto out;
  }
  print_plan(svc.app);
  printf("vkrt-service: %s: layers %u hidden %u ffn %u %s, %u devices, transport %s\n",
         a.weights_path, wh->layers, wh->hidden, wh->ffn, wh->dtype ? "f16" : "f32", svc.n,
         vkrt_transport_str(vkrt_transport(svc.app)));
  if (service_load_shards(&svc) != VKRT_OK) {
    rc = EXIT_RUNTIME;
    goto out;
  }
  rc = service_decode(&svc, &a, &stop_requested);

out:
  service_release_shards(&svc);
  vkrt_close(svc.app);
  weights_close(&wf);
  tool_hosts_finish(rc);
  return rc;
}
