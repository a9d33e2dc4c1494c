/* Captured graphs (vkrt.h "captured graphs"): a token's work (matmul, allreduce, add, fill,
 * copies) captured once and launched per token gives, bit for bit, what recording the same
 * calls directly gives, on one device and on two (with the allreduce's semaphore values
 * moved to the launch's); the per-token input comes from a buffer the caller updates; a
 * launch allocates nothing and costs one vkQueueSubmit per device for ops; a launch after a
 * buffer it uses was destroyed fails with a message; work recorded before a launch runs
 * before it. */
#include <string.h>

#include "../common/vk_test.h"
#include "vkrt/vkrt_lab.h"

enum { N = 64, TOKENS = 3 };

struct token_model {
  vkrt_appliance *app;
  uint32_t n;
  vkrt_buffer *w[VKRT_MAX_DEVICES], *inp[VKRT_MAX_DEVICES], *t[VKRT_MAX_DEVICES];
  vkrt_buffer *s[VKRT_MAX_DEVICES], *out[VKRT_MAX_DEVICES], *scratch[VKRT_MAX_DEVICES];
  float w_host[VKRT_MAX_DEVICES][N * N];
  float inp_host[TOKENS][VKRT_MAX_DEVICES][N];
};

static vkrt_appliance *open_devices(uint32_t devices) {
  vkrt_options o;
  vkt_options(&o);
  o.device_count = devices;
  if (devices > 1) /* the proxy's host signals are outside what sync validation follows */
    o.enable_sync_validation = false;
  return vkt_open(&o);
}

static void model_create(struct token_model *m, vkrt_appliance *app, uint64_t *seed) {
  memset(m, 0, sizeof(*m));
  m->app = app;
  m->n = vkrt_device_count(app);
  for (uint32_t d = 0; d < m->n; d++) {
    vkt_check(app, vkrt_buffer_create(app, d, N * N * 4, 0, &m->w[d]));
    vkt_check(app, vkrt_buffer_create(app, d, N * 4, 0, &m->inp[d]));
    vkt_check(app, vkrt_buffer_create(app, d, N * 4, 0, &m->t[d]));
    vkt_check(app, vkrt_buffer_create(app, d, N * 4, 0, &m->s[d]));
    vkt_check(app, vkrt_buffer_create(app, d, N * 4, 0, &m->out[d]));
    vkt_check(app, vkrt_buffer_create(app, d, 256, 0, &m->scratch[d]));
    vkt_fill_random_f32(m->w_host[d], N * N, -0.2f, 0.2f, seed);
    vkt_check(app, vkrt_upload(m->w[d], 0, m->w_host[d], sizeof(m->w_host[d])));
  }
  for (int k = 0; k < TOKENS; k++)
    for (uint32_t d = 0; d < m->n; d++)
      vkt_fill_random_f32(m->inp_host[k][d], N, -1, 1, seed);
}

static void model_destroy(struct token_model *m) {
  for (uint32_t d = 0; d < m->n; d++) {
    vkrt_buffer_destroy(m->w[d]);
    vkrt_buffer_destroy(m->inp[d]);
    vkrt_buffer_destroy(m->t[d]);
    vkrt_buffer_destroy(m->s[d]);
    vkrt_buffer_destroy(m->out[d]);
    vkrt_buffer_destroy(m->scratch[d]);
  }
}

/* State s starts at `s0` on every device (and out is poisoned). */
static void model_reset(struct token_model *m, const float *s0) {
  float poison[N];
  vkt_poison(poison, sizeof(poison));
  for (uint32_t d = 0; d < m->n; d++) {
    vkt_check(m->app, vkrt_upload(m->s[d], 0, s0, N * 4));
    vkt_check(m->app, vkrt_upload(m->out[d], 0, poison, sizeof(poison)));
  }
}

/* One token, recorded: t = W_d inp; t = allreduce(t); s += t; scratch filled; out = s. */
static vkrt_status model_record(struct token_model *m) {
  vkrt_allreduce_args ar = {.count = N, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < m->n; d++) {
    vkrt_tensor w = vkrt_tensor_contiguous(m->w[d], 0, VKRT_TYPE_F32, N, N, 1, 1);
    vkrt_tensor x = vkrt_tensor_contiguous(m->inp[d], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    vkrt_tensor t = vkrt_tensor_contiguous(m->t[d], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    vkrt_status s = vkrt_op_matmul(&t, &w, &x);
    if (s != VKRT_OK)
      return s;
    ar.send[d] = ar.recv[d] = m->t[d];
  }
  vkrt_status s = vkrt_allreduce(m->app, &ar);
  for (uint32_t d = 0; d < m->n && s == VKRT_OK; d++) {
    vkrt_tensor st = vkrt_tensor_contiguous(m->s[d], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    vkrt_tensor t = vkrt_tensor_contiguous(m->t[d], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    const vkrt_tensor *srcs[2] = {&st, &t};
    s = vkrt_op_add(&st, srcs, 2);
    if (s == VKRT_OK)
      s = vkrt_cmd_fill(m->scratch[d], 0, 256, 0x3f800000u + d);
    if (s == VKRT_OK)
      s = vkrt_cmd_copy_buffer(m->out[d], 0, m->s[d], 0, N * 4);
  }
  return s;
}

static void model_download(struct token_model *m, float out[VKRT_MAX_DEVICES][N]) {
  for (uint32_t d = 0; d < m->n; d++)
    vkt_check(m->app, vkrt_download(out[d], m->out[d], 0, N * 4));
}

static void upload_token(struct token_model *m, int k) {
  for (uint32_t d = 0; d < m->n; d++)
    vkt_check(m->app, vkrt_upload(m->inp[d], 0, m->inp_host[k][d], N * 4));
}

static void replay_equals_direct(uint32_t devices) {
  vkrt_appliance *app = open_devices(devices);
  uint64_t seed = vkt_seed(0);
  static struct token_model m;
  model_create(&m, app, &seed);
  float s0[N];
  vkt_fill_random_f32(s0, N, -1, 1, &seed);
  static float direct[TOKENS][VKRT_MAX_DEVICES][N], replay[TOKENS][VKRT_MAX_DEVICES][N];

  /* direct: TOKENS (odd) allreduces before the capture, so the launch's collective values
   * are moved by an odd number of pieces */
  model_reset(&m, s0);
  for (int k = 0; k < TOKENS; k++) {
    upload_token(&m, k);
    vkrt_status s = model_record(&m);
    if (s == VKRT_ERROR_UNSUPPORTED) {
      model_destroy(&m);
      vkt_close(app);
      vkt_skip("matmul, add or collectives are not in this build");
    }
    vkt_check(app, s);
    for (uint32_t d = 0; d < m.n; d++)
      vkt_check(app, vkrt_finish(app, d));
    model_download(&m, direct[k]);
  }

  /* capture: nothing runs, submits are refused */
  vkt_check(app, vkrt_graph_begin(app));
  vkt_check(app, model_record(&m));
  assert_int_equal(vkrt_submit(app, 0, NULL), VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "graph capture"));
  assert_int_equal(vkrt_graph_begin(app), VKRT_ERROR_INVALID_ARGUMENT);
  vkrt_graph *g = NULL;
  vkt_check(app, vkrt_graph_end(app, &g));
  assert_non_null(g);

  model_reset(&m, s0);
  for (int k = 0; k < TOKENS; k++) {
    upload_token(&m, k);
    vkrt_lab_stream before[VKRT_MAX_DEVICES], after; /* the lab's counters, when it is in */
    for (uint32_t d = 0; IS_ENABLED(CONFIG_VKRT_LAB) && d < m.n; d++)
      vkt_check(app, vkrt_lab_stream_get(app, d, &before[d]));
    uint64_t tickets[VKRT_MAX_DEVICES];
    vkt_check(app, vkrt_graph_launch(g, tickets));
    for (uint32_t d = 0; d < m.n; d++) {
      if (IS_ENABLED(CONFIG_VKRT_LAB)) {
        vkt_check(app, vkrt_lab_stream_get(app, d, &after));
        assert_int_equal(tickets[d], after.submitted);
        if (m.n == 1) /* ops only: the launch is one batch */
          assert_int_equal(after.submitted - before[d].submitted, 1);
      }
      vkt_check(app, vkrt_wait(app, d, tickets[d], UINT64_MAX));
    }
    model_download(&m, replay[k]);
  }
  for (int k = 0; k < TOKENS; k++)
    for (uint32_t d = 0; d < m.n; d++)
      if (memcmp(direct[k][d], replay[k][d], N * 4))
        fail_msg("token %d, dev%u: the launched graph differs from direct recording", k, d);

  /* a direct token after the launches still sums right (the transport's sequence went on);
   * one allreduce piece, so the next launch finds the other slot set, and an input unlike
   * the launches' below, so stale slots could not pass for fresh ones */
  model_reset(&m, s0);
  upload_token(&m, 1);
  vkt_check(app, model_record(&m));
  for (uint32_t d = 0; d < m.n; d++)
    vkt_check(app, vkrt_finish(app, d));


  /* program order: an input recorded on the stream (not submitted) before the launch, and
   * two launches back to back, the second waiting for the first */
  model_reset(&m, s0);
  vkrt_buffer *staging[VKRT_MAX_DEVICES];
  for (uint32_t d = 0; d < m.n; d++) {
    vkt_check(app, vkrt_buffer_create(app, d, N * 4, VKRT_BUFFER_HOST_VISIBLE, &staging[d]));
    void *map;
    vkt_check(app, vkrt_buffer_map(staging[d], &map));
    memcpy(map, m.inp_host[0][d], N * 4);
    vkt_check(app, vkrt_cmd_fill(m.inp[d], 0, N * 4, 0));
    vkt_check(app, vkrt_cmd_copy_buffer(m.inp[d], 0, staging[d], 0, N * 4));
  }
  vkt_check(app, vkrt_graph_launch(g, NULL));
  for (uint32_t d = 0; d < m.n; d++) {
    void *map;
    vkt_check(app, vkrt_buffer_map(staging[d], &map));
    vkt_check(app, vkrt_cmd_copy_buffer(m.inp[d], 0, staging[d], 0, N * 4)); /* same input */
  }
  vkt_check(app, vkrt_graph_launch(g, NULL));
  for (uint32_t d = 0; d < m.n; d++)
    vkt_check(app, vkrt_finish(app, d));
  float two[VKRT_MAX_DEVICES][N];
  model_download(&m, two);
  /* direct: the same two tokens */
  model_reset(&m, s0);
  upload_token(&m, 0);
  for (int k = 0; k < 2; k++)
    vkt_check(app, model_record(&m));
  for (uint32_t d = 0; d < m.n; d++)
    vkt_check(app, vkrt_finish(app, d));
  float two_direct[VKRT_MAX_DEVICES][N];
  model_download(&m, two_direct);
  for (uint32_t d = 0; d < m.n; d++)
    assert_memory_equal(two[d], two_direct[d], N * 4);

  /* no host allocation per launch */
  vkt_check(app, vkrt_fault_arm_allocations(app, 0, 0));
  for (int k = 0; k < 4; k++) {
    uint64_t tickets[VKRT_MAX_DEVICES];
    vkt_check(app, vkrt_graph_launch(g, tickets));
    for (uint32_t d = 0; d < m.n; d++)
      vkt_check(app, vkrt_wait(app, d, tickets[d], UINT64_MAX));
  }
  uint32_t host_allocs = 99, vk_allocs = 99;
  vkt_check(app, vkrt_fault_allocation_counts(app, &host_allocs, &vk_allocs));
  assert_int_equal(host_allocs, 0);
  assert_int_equal(vk_allocs, 0);

  /* destroying a buffer another graph does not use leaves it launchable; one it uses makes
   * the next launch fail with a message, before anything is submitted */
  vkrt_buffer_destroy(staging[0]);
  for (uint32_t d = 1; d < m.n; d++)
    vkrt_buffer_destroy(staging[d]);
  uint64_t tickets[VKRT_MAX_DEVICES];
  vkt_check(app, vkrt_graph_launch(g, tickets));
  for (uint32_t d = 0; d < m.n; d++)
    vkt_check(app, vkrt_wait(app, d, tickets[d], UINT64_MAX));
  vkrt_lab_stream before = {0}, after = {0}; /* the lab's counters, when it is in */
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    vkt_check(app, vkrt_lab_stream_get(app, m.n - 1, &before));
  vkrt_buffer_destroy(m.scratch[m.n - 1]);
  m.scratch[m.n - 1] = NULL;
  assert_int_equal(vkrt_graph_launch(g, tickets), VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "was destroyed"));
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    vkt_check(app, vkrt_lab_stream_get(app, m.n - 1, &after));
  assert_int_equal(after.submitted, before.submitted);
  vkrt_graph_destroy(g);
  model_destroy(&m);
  vkt_close(app);
}

static void test_replay_one_device(void **state) {
  (void)state;
  replay_equals_direct(1);
}

static void test_replay_two_devices(void **state) {
  (void)state;
  replay_equals_direct(2);
}

/* Misuse answers with a status and a message, never a crash. */
static void test_misuse(void **state) {
  (void)state;
  vkrt_appliance *app = open_devices(1);
  vkrt_graph *g = (vkrt_graph *)1;
  assert_int_equal(vkrt_graph_end(app, &g), VKRT_ERROR_INVALID_ARGUMENT);
  assert_null(g);
  assert_non_null(strstr(vkrt_last_error(app), "no capture"));
  assert_int_equal(vkrt_graph_launch(NULL, NULL), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_graph_begin(NULL), VKRT_ERROR_INVALID_ARGUMENT);
  vkrt_graph_destroy(NULL);
  /* an empty graph launches and does nothing */
  vkt_check(app, vkrt_graph_begin(app));
  vkt_check(app, vkrt_graph_end(app, &g));
  uint64_t ticket = 7;
  vkt_check(app, vkrt_graph_launch(g, &ticket));
  assert_int_equal(ticket, 0);
  vkrt_graph_destroy(g);
  /* a buffer destroyed during the capture: refused by vkrt_graph_end, nothing read from it */
  vkrt_buffer *a, *b;
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, VKRT_BUFFER_DEVICE_LOCAL, &a));
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, VKRT_BUFFER_DEVICE_LOCAL, &b));
  vkt_check(app, vkrt_graph_begin(app));
  vkt_check(app, vkrt_cmd_copy_buffer(a, 0, b, 0, 256));
  vkrt_buffer_destroy(b);
  g = (vkrt_graph *)1;
  assert_int_equal(vkrt_graph_end(app, &g), VKRT_ERROR_INVALID_ARGUMENT);
  assert_null(g);
  assert_non_null(strstr(vkrt_last_error(app), "destroyed during the capture"));
  vkrt_buffer_destroy(a);
  vkt_close(app);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_replay_one_device),
      cmocka_unit_test(test_replay_two_devices),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
