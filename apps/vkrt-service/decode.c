/* vkrt-service's decode loop: per token the input copy and, per layer, the Megatron split of
 * the SwiGLU MLP recorded on every device, submitted and waited for; untimed warm-up tokens
 * first, then the timed tokens with their latency and profile, every checked token's ranks
 * compared bit for bit and its input and output kept for the float64 check. */
#include <stdlib.h>
#include <string.h>

#include "../../tools/hosts.h"
#include "service.h"

/* Layer l on every device: g = W_gate x, u = W_up x, g = silu(g) * u, y = W_down g, then
 * x += allreduce(y) (one rank: x += W_down g in one dispatch, vkrt_op_matmul_add). */
static int record_layer(struct service *s, uint32_t l) {
  vkrt_appliance *app = s->app;
  const struct gguf_mlp *m = s->mlp;
  struct device_state *dev = s->dev;
  uint32_t n = s->n, ranks = s->ranks;
  vkrt_allreduce_args ar = {.count = m->hidden, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < n; d++) {
    struct device_state *ds = &dev[d];
    uint32_t shard = ds->f1 - ds->f0;
    vkrt_tensor gw = vkrt_tensor_contiguous(ds->gate[l], 0, m->gate[l]->type, m->hidden, shard, 1, 1);
    vkrt_tensor uw = vkrt_tensor_contiguous(ds->up[l], 0, m->up[l]->type, m->hidden, shard, 1, 1);
    vkrt_tensor dw = vkrt_tensor_contiguous(ds->down[l], 0, m->down[l]->type, shard, m->hidden, 1, 1);
    vkrt_tensor x = vkrt_tensor_contiguous(ds->x, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
    vkrt_tensor g = vkrt_tensor_contiguous(ds->g, 0, VKRT_TYPE_F32, shard, 1, 1, 1);
    vkrt_tensor u = vkrt_tensor_contiguous(ds->u, 0, VKRT_TYPE_F32, shard, 1, 1, 1);
    vkrt_tensor y = vkrt_tensor_contiguous(ds->y, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
    CHECK(vkrt_op_matmul(&g, &gw, &x));
    CHECK(vkrt_op_matmul(&u, &uw, &x));
    CHECK(vkrt_op_swiglu(&g, &g, &u));
    if (ranks == 1) { /* the residual add rides on the down matmul */
      CHECK(vkrt_op_matmul_add(&x, &dw, &g));
      continue;
    }
    CHECK(vkrt_op_matmul(&y, &dw, &g));
    ar.send[d] = ar.recv[d] = ds->y;
  }
  if (ranks == 1)
    return 0;
  if (ranks > 1)
    CHECK(vkrt_allreduce(app, &ar));
  for (uint32_t d = 0; d < n; d++) {
    vkrt_tensor x = vkrt_tensor_contiguous(dev[d].x, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
    vkrt_tensor y = vkrt_tensor_contiguous(dev[d].y, 0, VKRT_TYPE_F32, m->hidden, 1, 1, 1);
    const vkrt_tensor *srcs[2] = {&x, &y};
    CHECK(vkrt_op_add(&x, srcs, 2));
  }
  return 0;
}

/* One token with input xin on every device, waited for. stamp: at the start, after the input
 * copy, after recording, after submitting, after the wait. */
static int run_token(struct service *s, const float *xin, double stamp[5]) {
  vkrt_appliance *app = s->app;
  const struct gguf_mlp *m = s->mlp;
  struct device_state *dev = s->dev;
  uint32_t n = s->n;
  stamp[0] = now_s();
  /* The input goes through each device's host-visible buffer and a recorded copy: no round
   * trip before the token's work is submitted. */
  for (uint32_t d = 0; d < n; d++) {
    memcpy(dev[d].x_in_map, xin, (size_t)m->hidden * 4);
    CHECK(vkrt_cmd_copy_buffer(dev[d].x, 0, dev[d].x_in, 0, (uint64_t)m->hidden * 4));
  }
  stamp[1] = now_s();
  for (uint32_t l = 0; l < m->layers; l++) {
    int rc = record_layer(s, l);
    if (rc)
      return rc;
  }
  stamp[2] = now_s();
  uint64_t ticket[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < n; d++)
    CHECK(vkrt_submit(app, d, &ticket[d]));
  stamp[3] = now_s();
  for (uint32_t d = 0; d < n; d++)
    CHECK(vkrt_wait(app, d, ticket[d], UINT64_MAX));
  stamp[4] = now_s();
  return 0;
}

/* Checked token t: every rank's output must equal rank 0's bit for bit, and every host's
 * rank 0 the others'; its input and output are kept for the float64 check after the loop.
 * A failure anywhere stops every host (EXIT_VERIFY). */
static int keep_token(struct service *s, struct decode *dc, uint64_t t) {
  vkrt_appliance *app = s->app;
  const struct gguf_mlp *m = s->mlp;
  struct device_state *dev = s->dev;
  int rc = 0;
  double t_v = now_s();
  float *rank0 = dc->saved_out + dc->verified * m->hidden, *xout = dc->xout;
  for (uint32_t d = 0; d < s->n; d++) {
    CHECK(vkrt_download(d == 0 ? rank0 : xout, dev[d].x, 0, (uint64_t)m->hidden * 4));
    if (d > 0 && memcmp(rank0, xout, m->hidden * sizeof(float)) != 0) {
      fprintf(stderr, "vkrt-service: token %llu: rank %u differs from rank 0\n",
              (unsigned long long)t, d);
      dc->ranks_differ = true;
      rc = EXIT_VERIFY;
    }
  }
  uint64_t hash = bits_hash(HASH_INIT, rank0, m->hidden * sizeof(float)); /* this host's result */
  if (!tool_hosts_same(hash)) {
    fprintf(stderr, "vkrt-service: token %llu: host%u's result differs from another host's\n",
            (unsigned long long)t, vkrt_host_rank(app));
    dc->ranks_differ = true;
    rc = EXIT_VERIFY;
  }
  memcpy(dc->saved_in + dc->verified * m->hidden, dc->xin, m->hidden * sizeof(float));
  dc->saved_tok[dc->verified++] = t;
  dc->t_verify += now_s() - t_v;
  return (int)tool_hosts_max(rc);
}

int decode_run(struct service *s, struct decode *dc) {
  const struct service_args *a = s->args;
  const struct gguf_mlp *m = s->mlp;
  uint64_t tokens = a->tokens, kept = tokens / 16 + 2 < KEEP_MAX ? tokens / 16 + 2 : KEEP_MAX;
  dc->lat = calloc(tokens, sizeof(double));
  dc->xin = malloc(m->hidden * sizeof(float));
  dc->xout = malloc(m->hidden * sizeof(float));
  dc->saved_in = malloc(kept * m->hidden * sizeof(float));
  dc->saved_out = malloc(kept * m->hidden * sizeof(float));
  dc->saved_tok = malloc(kept * sizeof(uint64_t));
  if (!dc->lat || !dc->xin || !dc->xout || !dc->saved_in || !dc->saved_out || !dc->saved_tok) {
    fprintf(stderr, "vkrt-service: out of host memory\n");
    return EXIT_RUNTIME;
  }
  /* Warm-up: tokens run untimed until the GPU has had warmup_ms of back-to-back work (the
   * H200 takes about a second of load to leave its idle clocks; a decode service runs
   * continuously). The checked tokens' outputs are saved and compared with the float64
   * reference after the timed loop, so the reference's CPU time never idles the GPU. */
  dc->t_run = now_s();
  double warm_end = now_s() + a->warmup_ms * 1e-3;
  uint64_t next = 0;
  while (next < tokens) {
    /* Every host warms up and stops at the same token (the allreduce is collective over
     * the hosts). */
    bool warming = tool_hosts_max(dc->warm_tokens < 4096 && now_s() < warm_end ? 1.0 : 0.0) > 0;
    uint64_t t = warming ? 0 : next;
    bool stop = *s->stop ||
                (!warming && a->seconds > 0 && now_s() - dc->t_run - dc->t_verify > a->seconds && t >= 2);
    if (tool_hosts_max(stop ? 1.0 : 0.0) > 0)
      break;
    token_input(a->seed, t, dc->xin, m->hidden);
    double stamp[5];
    int rc = run_token(s, dc->xin, stamp);
    if (rc)
      return rc;
    if (warming) {
      dc->warm_tokens++;
      dc->t_run = now_s();
      continue;
    }
    next++;
    dc->lat[dc->done++] = stamp[4] - stamp[0];
    if (t > 0 || dc->warm_tokens) { /* the very first token also creates the pipelines */
      for (int i = 0; i < 4; i++)
        dc->prof[i] += stamp[i + 1] - stamp[i];
      dc->profiled++;
    }
    /* Keep the first and every 16th token of every rank for the check after the loop. */
    if ((t == 0 || t % 16 == 15 || t + 1 == tokens) && dc->verified < kept &&
        (rc = keep_token(s, dc, t)))
      return rc;
  }
  dc->t_end = now_s();
  return 0;
}

void decode_free(struct decode *dc) {
  free(dc->lat);
  free(dc->xin);
  free(dc->xout);
  free(dc->saved_in);
  free(dc->saved_out);
  free(dc->saved_tok);
}
