/* vkrt-service's closing lines: throughput and latency against the roofline, the per-token
 * profile, the hosts, the verification and the paths the weights and the allreduce took. */
#include <stdlib.h>

#include "service.h"

int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

struct timing {
  double seconds, p50, p99, roofline;
};

/* Sorts dc->lat for the percentiles (the last use of the latencies). */
static struct timing print_timing(const struct service *s, struct decode *dc) {
  const struct gguf_mlp *m = s->mlp;
  uint64_t done = dc->done;
  /* Throughput of the decode itself: the downloads of the checked tokens are not counted. */
  double total = dc->t_end - dc->t_run - dc->t_verify;
  double roofline = s->copy_bw > 0 ? (double)s->shard_bytes / s->copy_bw : 0;
  qsort(dc->lat, done, sizeof(double), cmp_double);
  double p50 = dc->lat[done / 2], p99 = dc->lat[(size_t)((double)(done - 1) * 0.99)];
  printf("vkrt-service: %llu tokens in %.3f s: %.1f tokens/s, per-token latency p50 %.3f ms "
         "p99 %.3f ms, roofline %.3f ms (p50 = %.2f x roofline; after %llu warm-up tokens)\n",
         (unsigned long long)done, total, (double)done / total, p50 * 1e3, p99 * 1e3,
         roofline * 1e3, roofline > 0 ? p50 / roofline : 0, (unsigned long long)dc->warm_tokens);
  printf("vkrt-service: roofline: %.1f MiB of weights per device per token at %.1f GB/s (a plain "
         "device copy measured at start, read + written)\n", (double)s->shard_bytes / (1 << 20),
         s->copy_bw * 1e-9);
  double np = dc->profiled ? (double)dc->profiled : 1;
  const double *prof = dc->prof;
  /* the input copy; per layer gate, up, swiglu, down (+ add after the allreduce) */
  uint32_t ops_per_token = 1 + m->layers * (s->ranks == 1 ? 4 : 5);
  printf("vkrt-service: per token (mean of tokens 2..): input %.1f us, record %.1f us (%u ops "
         "per device), submit %.1f us, wait %.1f us\n", prof[0] / np * 1e6, prof[1] / np * 1e6,
         ops_per_token, prof[2] / np * 1e6, prof[3] / np * 1e6);
  return (struct timing){.seconds = total, .p50 = p50, .p99 = p99, .roofline = roofline};
}

void summary_print(const struct service *s, struct decode *dc, bool verified) {
  vkrt_appliance *app = s->app;
  if (*s->stop)
    printf("vkrt-service: stopping on signal %d after %llu tokens\n", (int)*s->stop,
           (unsigned long long)dc->done);
  struct timing t = {0};
  if (dc->done)
    t = print_timing(s, dc);
  if (vkrt_host_count(app) > 1)
    printf("vkrt-service: tensor-parallel over %u hosts x %u devices (MPI)\n",
           vkrt_host_count(app), s->n);
  /* Two facts: the float64 check of rank 0 (each host's) and the ranks' bits against each
   * other; either may fail alone. */
  printf("vkrt-service: verified %llu tokens against float64: max relative error %.2e%s: %s; "
         "ranks bit-identical: %s (%u ranks)\n", (unsigned long long)dc->verified, dc->worst_err,
         s->args->q8_activations ? " (8-bit activations)" : "", verified ? "passed" : "FAILED",
         dc->ranks_differ ? "NO" : "yes", s->ranks);
  printf("vkrt-service: paths: transport %s; weights %s; upload %.2f GB/s\n",
         vkrt_transport_str(vkrt_transport(app)), vkrt_load_path_str(s->load.path[0]),
         (double)s->uploaded / s->t_up * 1e-9);
  if (s->args->json)
    printf("{\"tokens\": %llu, \"seconds\": %.6f, \"tokens_per_s\": %.3f, \"p50_ms\": %.4f, "
           "\"p99_ms\": %.4f, \"roofline_ms\": %.4f, \"verified_tokens\": %llu, "
           "\"max_rel_error\": %.3e, \"verified\": %s, \"ranks_bit_identical\": %s, "
           "\"ranks\": %u, \"hosts\": %u, \"transport\": \"%s\", \"weights_path\": \"%s\", "
           "\"upload_gbps\": %.3f, \"version\": \"%s\"",
           (unsigned long long)dc->done, t.seconds, t.seconds > 0 ? (double)dc->done / t.seconds : 0,
           t.p50 * 1e3, t.p99 * 1e3, t.roofline * 1e3, (unsigned long long)dc->verified,
           dc->worst_err, verified ? "true" : "false", dc->ranks_differ ? "false" : "true",
           s->ranks, vkrt_host_count(app), vkrt_transport_str(vkrt_transport(app)),
           vkrt_load_path_str(s->load.path[0]), (double)s->uploaded / s->t_up * 1e-9,
           vkrt_version());
  if (s->args->json) {
    shards_load_json(s);
    printf("}\n");
  }
}
