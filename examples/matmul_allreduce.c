/* matmul_allreduce: a tensor-parallel matrix-vector product. Each device holds a slice of the
 * K rows of W (ggml layout: w ne = {K, N}) and the matching slice of x, computes its partial
 * y = W_d^T x_d, and vkrt_allreduce sums the partials so every device holds the whole y.
 * The result is checked against the same sum on the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <vkrt/vkrt.h>

enum { K = 512, N = 256 };

/* Inputs in [-1, 1] that every element of y depends on differently: value i of a sequence
 * of 1009 steps (a prime, so rows and columns do not line up with it). */
static float input(int i) { return (float)((i * 389) % 1009 - 504) / 504.0f; }

#define CHECK(call)                                                                           \
  do {                                                                                        \
    vkrt_status s_ = (call);                                                                  \
    if (s_ != VKRT_OK) {                                                                      \
      fprintf(stderr, "matmul_allreduce: %s: %s: %s\n", #call, vkrt_status_str(s_),           \
              vkrt_last_error(app));                                                          \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

int main(void) {
  vkrt_options options;
  vkrt_options_initialize(&options);
  vkrt_appliance *app = NULL;
  char why[512];
  vkrt_status s = vkrt_open(&options, &app, why, sizeof why);
  if (s != VKRT_OK) {
    fprintf(stderr, "matmul_allreduce: vkrt_open: %s: %s\n", vkrt_status_str(s), why);
    return 1;
  }
  uint32_t devices = vkrt_device_count(app);
  if (K % devices) {
    fprintf(stderr, "matmul_allreduce: K = %d does not split over %u devices\n", K, devices);
    return 1;
  }
  int64_t k_dev = K / devices;
  static float w[K * N], x[K], y[N], want[N];
  for (int i = 0; i < K * N; i++)
    w[i] = input(i);
  for (int i = 0; i < K; i++)
    x[i] = input(K * N + 7 * i);

  vkrt_buffer *wb[VKRT_MAX_DEVICES], *xb[VKRT_MAX_DEVICES], *yb[VKRT_MAX_DEVICES];
  vkrt_allreduce_args ar = {.count = N, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < devices; d++) {
    CHECK(vkrt_buffer_create(app, d, sizeof(float) * k_dev * N, VKRT_BUFFER_DEVICE_LOCAL, &wb[d]));
    CHECK(vkrt_buffer_create(app, d, sizeof(float) * k_dev, VKRT_BUFFER_DEVICE_LOCAL, &xb[d]));
    CHECK(vkrt_buffer_create(app, d, sizeof(float) * N, VKRT_BUFFER_DEVICE_LOCAL, &yb[d]));
    /* rows [d k_dev, (d + 1) k_dev) of every column of W: a 2D upload */
    CHECK(vkrt_upload_2d(wb[d], 0, sizeof(float) * k_dev, w + d * k_dev, sizeof(float) * K,
                         sizeof(float) * k_dev, N));
    CHECK(vkrt_upload(xb[d], 0, x + d * k_dev, sizeof(float) * k_dev));
    vkrt_tensor wt = vkrt_tensor_contiguous(wb[d], 0, VKRT_TYPE_F32, k_dev, N, 1, 1);
    vkrt_tensor xt = vkrt_tensor_contiguous(xb[d], 0, VKRT_TYPE_F32, k_dev, 1, 1, 1);
    vkrt_tensor yt = vkrt_tensor_contiguous(yb[d], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    CHECK(vkrt_op_matmul(&yt, &wt, &xt));
    ar.send[d] = ar.recv[d] = yb[d];
  }
  CHECK(vkrt_allreduce(app, &ar));
  for (uint32_t d = 0; d < devices; d++)
    CHECK(vkrt_finish(app, d));

  /* float64 reference; the device sums in f32 in another order, so each element may differ
   * by a few ulps of the sum of magnitudes */
  static double mag[N];
  for (int n = 0; n < N; n++) {
    double sum = 0;
    mag[n] = 0;
    for (int k = 0; k < K; k++) {
      sum += (double)w[n * K + k] * x[k];
      mag[n] += fabs((double)w[n * K + k] * x[k]);
    }
    want[n] = (float)sum;
  }
  double worst = 0;
  int bad = 0;
  for (uint32_t d = 0; d < devices && !bad; d++) {
    for (int n = 0; n < N; n++)
      y[n] = NAN; /* poison: a result that was never written cannot pass */
    CHECK(vkrt_download(y, yb[d], 0, sizeof y));
    for (int n = 0; n < N; n++) {
      double e = fabs((double)y[n] - want[n]);
      if (!(e <= 1e-5 * mag[n] + 1e-6)) {
        fprintf(stderr, "matmul_allreduce: device %u: y[%d] = %g, expected %g\n", d, n, y[n],
                want[n]);
        bad = 1;
        break;
      }
      if (e > worst)
        worst = e;
    }
  }
  printf("matmul_allreduce: y = W x (K %d, N %d) split over %u devices, summed by %s: %s "
         "(largest error %.2e)\n", K, N, devices, vkrt_transport_str(vkrt_transport(app)),
         bad ? "WRONG" : "matches the CPU", worst);
  for (uint32_t d = 0; d < devices; d++) {
    vkrt_buffer_destroy(wb[d]);
    vkrt_buffer_destroy(xb[d]);
    vkrt_buffer_destroy(yb[d]);
  }
  vkrt_close(app);
  return bad;
}
