/* Checks of the decode: the float64 CPU reference of a token, every rank bit-identical to
 * rank 0 and within 2e-3 (relative to the largest activation) of the reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tools/hosts.h"
#include "service.h"

double service_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void service_report_failure(vkrt_appliance *app, const char *call, vkrt_status s) {
  fprintf(stderr, "vkrt-service: %s failed: %s: %s\n", call, vkrt_status_str(s),
          vkrt_last_error(app));
}

void service_reference(const struct weights_file *w, float *x_inout) {
  const struct weights_header *h = &w->h;
  double *x = calloc(h->hidden, sizeof(double)), *hid = calloc(h->ffn, sizeof(double));
  for (uint32_t i = 0; i < h->hidden; i++)
    x[i] = x_inout[i];
  for (uint32_t l = 0; l < h->layers; l++) {
    for (uint32_t n = 0; n < h->ffn; n++) {
      double acc = 0;
      for (uint32_t k = 0; k < h->hidden; k++)
        acc += (double)weights_get(w, l, 0, k, n) * x[k];
      hid[n] = acc;
    }
    for (uint32_t n = 0; n < h->hidden; n++) {
      double acc = 0;
      for (uint32_t k = 0; k < h->ffn; k++)
        acc += (double)weights_get(w, l, 1, k, n) * hid[k];
      x[n] += acc;
    }
  }
  for (uint32_t i = 0; i < h->hidden; i++)
    x_inout[i] = (float)x[i];
  free(x);
  free(hid);
}

int service_verify_token(struct service *svc, uint64_t token, const float *xin, double *err_out) {
  const uint32_t hidden = svc->wf->h.hidden;
  int rc = 0;
  *err_out = 0;
  float *xref = malloc(hidden * sizeof(float));
  float *rank0 = malloc(hidden * sizeof(float));
  float *xout = malloc(hidden * sizeof(float));
  if (!xref || !rank0 || !xout) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    rc = EXIT_RUNTIME;
    goto out;
  }
  memcpy(xref, xin, hidden * sizeof(float));
  service_reference(svc->wf, xref);
  for (uint32_t d = 0; d < svc->n; d++) {
    SERVICE_CHECK(svc->app, vkrt_download(d == 0 ? rank0 : xout, svc->dev[d].x, 0,
                                          (uint64_t)hidden * 4),
                  rc = EXIT_RUNTIME; goto out);
    if (d > 0 && memcmp(rank0, xout, hidden * sizeof(float)) != 0) {
      fprintf(stderr, "vkrt-service: token %llu: rank %u differs from rank 0\n",
              (unsigned long long)token, d);
      rc = EXIT_VERIFY;
    }
  }
  uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a of this host's result */
  for (size_t i = 0; i < hidden * sizeof(float); i++)
    hash = (hash ^ ((const uint8_t *)rank0)[i]) * 0x100000001b3ull;
  if (!tool_hosts_same(hash)) {
    fprintf(stderr, "vkrt-service: token %llu: host%u's result differs from another host's\n",
            (unsigned long long)token, vkrt_host_rank(svc->app));
    rc = EXIT_VERIFY;
  }
  double scale = 1, err = 0;
  for (uint32_t i = 0; i < hidden; i++)
    scale = fmax(scale, fabs((double)xref[i]));
  for (uint32_t i = 0; i < hidden; i++)
    err = fmax(err, fabs((double)rank0[i] - (double)xref[i]) / scale);
  err = tool_hosts_max(err);
  *err_out = err;
  if (!(err <= 2e-3)) {
    fprintf(stderr, "vkrt-service: token %llu: max relative error %.3g vs float64 reference\n",
            (unsigned long long)token, err);
    rc = EXIT_VERIFY;
  }
out:
  free(xref);
  free(rank0);
  free(xout);
  return rc;
}
