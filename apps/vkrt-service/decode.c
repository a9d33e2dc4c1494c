/* The decode loop: per token and layer, the Megatron MLP split on every device
 *   h_d = W1_d x ; y_d = W2_d h_d ; y = allreduce(y_d) ; x = x + y
 * then a finish per device, the first and every 16th token verified; latency and
 * throughput of the decode itself (the reference checks are not counted). */
#include <stdlib.h>
#include <string.h>

#include "../../tools/hosts.h"
#include "service.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Records and submits one token through every layer on every device, then waits. */
static vkrt_status decode_token(struct service *svc, const float *xin) {
  vkrt_appliance *app = svc->app;
  const struct weights_header *wh = &svc->wf->h;
  const uint32_t n = svc->n;
  const vkrt_type wtype = wh->dtype ? VKRT_TYPE_F16 : VKRT_TYPE_F32;
  for (uint32_t d = 0; d < n; d++)
    SERVICE_CHECK(app, vkrt_upload(svc->dev[d].x, 0, xin, (uint64_t)wh->hidden * 4), return s_);
  for (uint32_t l = 0; l < wh->layers; l++) {
    vkrt_allreduce_args ar = {.count = wh->hidden, .type = VKRT_TYPE_F32};
    for (uint32_t d = 0; d < n; d++) {
      struct device_state *ds = &svc->dev[d];
      uint32_t shard = ds->k1 - ds->k0;
      vkrt_tensor w1 = vkrt_tensor_contiguous(ds->w1[l], 0, wtype, wh->hidden, shard, 1, 1);
      vkrt_tensor w2 = vkrt_tensor_contiguous(ds->w2[l], 0, wtype, shard, wh->hidden, 1, 1);
      vkrt_tensor x = vkrt_tensor_contiguous(ds->x, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
      vkrt_tensor h = vkrt_tensor_contiguous(ds->h, 0, VKRT_TYPE_F32, shard, 1, 1, 1);
      vkrt_tensor y = vkrt_tensor_contiguous(ds->y, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
      SERVICE_CHECK(app, vkrt_op_matmul(&h, &w1, &x), return s_);
      SERVICE_CHECK(app, vkrt_op_matmul(&y, &w2, &h), return s_);
      ar.send[d] = ar.recv[d] = ds->y;
    }
    if (svc->ranks > 1)
      SERVICE_CHECK(app, vkrt_allreduce(app, &ar), return s_);
    for (uint32_t d = 0; d < n; d++) {
      vkrt_tensor x = vkrt_tensor_contiguous(svc->dev[d].x, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
      vkrt_tensor y = vkrt_tensor_contiguous(svc->dev[d].y, 0, VKRT_TYPE_F32, wh->hidden, 1, 1, 1);
      const vkrt_tensor *srcs[2] = {&x, &y};
      SERVICE_CHECK(app, vkrt_op_add(&x, srcs, 2), return s_);
    }
  }
  for (uint32_t d = 0; d < n; d++)
    SERVICE_CHECK(app, vkrt_finish(app, d), return s_);
  return VKRT_OK;
}

static void report(const struct service *svc, double *lat, uint64_t done, double total,
                   uint64_t verified, double worst_err, int rc, volatile const sig_atomic_t *stop) {
  if (*stop)
    printf("vkrt-service: stopping on signal %d after %llu tokens\n", (int)*stop,
           (unsigned long long)done);
  if (done) {
    qsort(lat, done, sizeof(double), cmp_double);
    double p50 = lat[done / 2], p99 = lat[(size_t)((double)(done - 1) * 0.99)];
    printf("vkrt-service: %llu tokens in %.3f s: %.1f tokens/s, per-token latency p50 %.3f ms "
           "p99 %.3f ms\n", (unsigned long long)done, total, (double)done / total, p50 * 1e3,
           p99 * 1e3);
  }
  if (vkrt_host_count(svc->app) > 1)
    printf("vkrt-service: tensor-parallel over %u hosts x %u devices (MPI)\n",
           vkrt_host_count(svc->app), svc->n);
  printf("vkrt-service: verified %llu tokens on %u ranks against float64: max relative error "
         "%.2e, ranks bit-identical: %s\n", (unsigned long long)verified, svc->ranks, worst_err,
         rc == 0 ? "yes" : "NO");
  printf("vkrt-service: paths: transport %s; weights %s; upload %.2f GB/s\n",
         vkrt_transport_str(vkrt_transport(svc->app)), vkrt_import_path_str(svc->info.path[0]),
         (double)svc->uploaded / svc->upload_s * 1e-9);
}

int service_decode(struct service *svc, const struct service_args *a,
                   volatile const sig_atomic_t *stop_requested) {
  const uint32_t hidden = svc->wf->h.hidden;
  double *lat = calloc(a->tokens, sizeof(double));
  float *xin = malloc(hidden * sizeof(float));
  int rc = 0;
  if (!lat || !xin) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    rc = EXIT_RUNTIME;
    goto out;
  }
  uint64_t done = 0, verified = 0;
  double t_run = service_now_s(), worst_err = 0, t_verify = 0;
  for (uint64_t t = 0; t < a->tokens; t++) {
    /* Every host stops at the same token (the allreduce is collective over the hosts). */
    bool stop = *stop_requested ||
                (a->seconds > 0 && service_now_s() - t_run - t_verify > a->seconds && t >= 2);
    if (tool_hosts_max(stop ? 1.0 : 0.0) > 0)
      break;
    double t0 = service_now_s();
    weights_input(svc->wf->h.seed, t, xin, hidden);
    if (decode_token(svc, xin) != VKRT_OK) {
      rc = EXIT_RUNTIME;
      goto out;
    }
    lat[done++] = service_now_s() - t0;
    /* Verify the first and every 16th token on every rank. */
    if (t == 0 || t % 16 == 15 || t + 1 == a->tokens) {
      double t_v = service_now_s(), err;
      rc = service_verify_token(svc, t, xin, &err);
      if (rc == EXIT_RUNTIME)
        goto out;
      if (err > worst_err)
        worst_err = err;
      verified++;
      t_verify += service_now_s() - t_v;
      rc = (int)tool_hosts_max(rc); /* a failure anywhere stops every host */
      if (rc)
        goto out;
    }
  }
  /* Throughput of the decode itself: the float64 reference checks are not counted. */
  report(svc, lat, done, service_now_s() - t_run - t_verify, verified, worst_err, rc,
         stop_requested);
out:
  free(lat);
  free(xin);
  return rc;
}
