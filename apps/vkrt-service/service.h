/* vkrt-service's parts: arguments (args.c), the sharded weights on the devices (shards.c),
 * the decode loop (decode.c), the float64 reference and rank checks (verify.c); main.c
 * ties them together. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include "vkrt/vkrt.h"
#include "weights.h"

enum { EXIT_VERIFY = 1, EXIT_USAGE = 2, EXIT_WEIGHTS = 3, EXIT_RUNTIME = 4 };

#define SERVICE_MAX_LAYERS 64

/* ---- args.c ---------------------------------------------------------------------------- */

struct service_args {
  const char *weights_path, *make_path;
  uint64_t tokens, layers, hidden, ffn, seed, devices;
  double seconds;
  bool verbose, fault_import;
  uint32_t dtype;  /* --make-weights: 0 f32, 1 f16 */
};

void service_usage(FILE *f);
/* Parses argv into *a (defaults first). Returns -1 to go on, else the exit code (0 after
 * --help, EXIT_USAGE with a message for a bad argument). */
int service_parse_args(int argc, char **argv, struct service_args *a);

/* ---- shards.c -------------------------------------------------------------------------- */

struct device_state {
  vkrt_buffer *w1[SERVICE_MAX_LAYERS], *w2[SERVICE_MAX_LAYERS]; /* per layer */
  vkrt_buffer *x, *h, *y;
  uint32_t k0, k1;               /* this device's ffn slice */
};

struct service {
  vkrt_appliance *app;
  const struct weights_file *wf;
  uint32_t n;                          /* devices of this host */
  uint32_t ranks, first_rank;          /* every device of every host; this host's first */
  struct device_state dev[VKRT_MAX_DEVICES];
  bool registered;
  vkrt_register_info info;
  uint64_t uploaded;                   /* shard bytes uploaded */
  double upload_s;
};

/* Registers the weights mapping, then creates each device's buffers and uploads its shard
 * (W1 rows contiguous, W2 columns as a 2-D strided upload). Prints the paths and rates. */
vkrt_status service_load_shards(struct service *svc);
/* Destroys the buffers and unregisters the weights. */
void service_release_shards(struct service *svc);

/* ---- decode.c -------------------------------------------------------------------------- */

/* Runs tokens (or until `seconds` of decode, or a signal), verifying some of them, and
 * prints throughput, latency and the verification summary. Returns the exit code. */
int service_decode(struct service *svc, const struct service_args *a,
                   volatile const sig_atomic_t *stop_requested);

/* ---- verify.c -------------------------------------------------------------------------- */

/* float64 reference of one token through every layer. */
void service_reference(const struct weights_file *w, float *x_inout);
/* Downloads every rank's activations, checks they are bit-identical and within 2e-3
 * (relative) of the reference for input xin; *err gets the error. Returns 0, EXIT_VERIFY or
 * EXIT_RUNTIME. */
int service_verify_token(struct service *svc, uint64_t token, const float *xin, double *err);

/* Prints "vkrt-service: <call> failed: <status>: <last error>". */
void service_report_failure(vkrt_appliance *app, const char *call, vkrt_status s);

#define SERVICE_CHECK(app, call, on_fail)                                                  \
  do {                                                                                    \
    vkrt_status s_ = (call);                                                              \
    if (s_ != VKRT_OK) {                                                                  \
      service_report_failure((app), #call, s_);                                           \
      on_fail;                                                                            \
    }                                                                                     \
  } while (0)

double service_now_s(void);
