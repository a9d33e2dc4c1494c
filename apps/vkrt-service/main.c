/* vkrt-service: a firmware-style tensor-parallel decode service on libvkrt.
 *
 * A llama model (a GGUF file with token_embd.weight: general.architecture llama) generates
 * text: generate.c and llama_gpu.c, llama.h says how the model is split over the devices.
 * Any other file is the synthetic MLP stack below, a matmul + allreduce load with a float64
 * check that exercises every weight type and import path.
 *
 * Opens the board's appliance, prints the plan, maps a GGUF weights file read-only
 * (gguf.c), registers its tensor data section once (the board's import policy; tensors are
 * 32-byte aligned inside it, not page aligned), uploads each device's shard of the
 * llama-style MLP (gate/up rows: contiguous; down columns: a 2-D strided upload, cut along
 * whole quantization blocks), then for each token runs, per layer, the Megatron split of a
 * SwiGLU MLP:
 *   g_d = W_gate,d x ; u_d = W_up,d x ; h_d = silu(g_d) * u_d ; y_d = W_down,d h_d ;
 *   y = allreduce(y_d) ; x = x + y
 * (one rank in all: x += W_down h, vkrt_op_matmul_add, when ffn_down is f32/f16; quantized
 * weights take vkrt_op_matmul only, so then a matmul and an add) and checks the final
 * activations against a float64 CPU reference (weights dequantized by the reference of the
 * format's definition, vkrt_dequantize_row). Weights: f32, f16, q8_0, q4_K or q6_K per tensor.
 *
 * Under mpirun (CONFIG_VKRT_TRANSPORT_MPI) every rank is a host: the appliance spans them,
 * device d of host h holds shard h x devices + d, the allreduce sums over every device of
 * every host, each host verifies its devices against the float64 reference and the hosts
 * compare their results bit for bit; host0 prints.
 *
 * The steps are in service.h; this file runs them in order. */
#include <signal.h>

#include "../../tools/hosts.h"
#include "service.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

/* From the open appliance to the closing lines; the first failing step's exit status ends
 * it (a failed float64 check still prints them). */
/* A llama model: its shards, the generation, the text, the float64 check, the closing lines. */
static int serve_model(struct service *s, struct generation *gen) {
  int rc;
  if ((rc = appliance_open(s)))
    return rc;
  s->t_opened = now_s();
  appliance_describe(s);
  /* The first token as soon as it can come: the yardsticks (the pinned upload rate the load
     is held against, the roofline's copy bandwidth) after the run. */
  if ((rc = model_setup(s, gen)) || (rc = model_run(s, gen)) || (rc = shards_measure_h2d(s)) ||
      (rc = shards_measure_copy(s)))
    return rc;
  shards_load_ratio_report(s);
  model_print(s, gen);
  rc = model_verify(s, gen);
  model_time_without_report(s);
  if (rc != EXIT_RUNTIME && s->args->profile) { /* before the summary: --json's line is last */
    int profiled = model_profile(s, gen);
    rc = rc ? rc : profiled;
  }
  if (rc != EXIT_RUNTIME)
    model_summary(s, gen, rc == 0);
  return rc ? rc : gen->ranks_differ ? EXIT_VERIFY : 0;
}

static int serve(struct service *s, struct decode *dc) {
  int rc;
  if ((rc = appliance_open(s)) || (rc = shards_cut(s)))
    return rc;
  appliance_describe(s);
  if ((rc = shards_measure_h2d(s)) || (rc = shards_upload(s)) || (rc = shards_measure_copy(s)) ||
      (rc = decode_run(s, dc)))
    return rc;
  rc = reference_verify(s, dc);
  if (rc != EXIT_RUNTIME)
    summary_print(s, dc, rc == 0);
  return rc;
}

int main(int argc, char **argv) {
  struct service_args args;
  int rc;
  const double t_start = now_s();
  setvbuf(stdout, NULL, _IOLBF, 0); /* a log: each line when written, in order with stderr's */
  if (!args_parse(argc, argv, &args, &rc))
    return rc;
  if (args.make_path)
    return weights_make(&args);
  struct service s = {.args = &args, .stop = &stop_requested, .t_start = t_start};
  if ((rc = weights_load(&s)))
    return rc;
  s.t_parsed = now_s();
  if (args.time_without && !s.model) {
    fprintf(stderr, "vkrt-service: --time-without takes the ops of a llama model; %s has none\n",
            args.weights_path);
    weights_close(&s);
    return EXIT_USAGE;
  }

  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  tool_hosts_init();
  struct decode dc = {0};
  struct generation gen = {0};
  rc = s.model ? serve_model(&s, &gen) : serve(&s, &dc);

  appliance_close(&s);
  decode_free(&dc);
  generation_free(&gen);
  weights_close(&s);
  tool_hosts_finish(rc);
  return rc;
}
