/* vkrt-service's tensor-parallel split of a llama model (llama_split_plan in
 * apps/vkrt-service/llama_gpu.c) without a device: on hand-built models of real shapes the
 * ranks' heads, KV heads, feed-forward slices and vocabulary rows tile the model exactly, in
 * whole grouped-query groups and whole blocks of the weights' types; each shape that cannot
 * be split is refused with a message naming the reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../apps/vkrt-service/llama.h"

static struct gguf_tensor wo_t, down_t;
static struct llama_model model;

static void shape(uint32_t layers, uint32_t embd, uint32_t ff, uint32_t heads, uint32_t kv,
                  uint32_t vocab, vkrt_type wo, vkrt_type down) {
  memset(&model, 0, sizeof(model));
  model.hp = (struct llama_hparams){.n_layer = layers, .n_embd = embd, .n_ff = ff,
                                    .n_head = heads, .n_head_kv = kv, .head_dim = embd / heads,
                                    .n_rot = embd / heads, .n_vocab = vocab};
  wo_t = (struct gguf_tensor){.type = wo};
  down_t = (struct gguf_tensor){.type = down};
  for (uint32_t l = 0; l < layers; l++) {
    model.layer[l].wo = &wo_t;
    model.layer[l].ffn_down = &down_t;
  }
}

/* Every rank's share: groups whole, slices contiguous and covering, ffn cut on blocks. */
static void check_tiling(uint32_t ranks) {
  const struct llama_hparams *hp = &model.hp;
  uint32_t next_head = 0, next_kv = 0, next_ff = 0, next_vocab = 0;
  uint32_t group = hp->n_head / hp->n_head_kv, block = vkrt_type_block(down_t.type);
  char err[256] = "";
  for (uint32_t r = 0; r < ranks; r++) {
    struct llama_split sp;
    assert_true(llama_split_plan(&model, ranks, r, &sp, err, sizeof(err)));
    assert_int_equal(sp.head0, next_head);
    assert_int_equal(sp.kv_head0, next_kv);
    assert_int_equal(sp.head0, sp.kv_head0 * group); /* a query head's KV head is local */
    assert_int_equal(sp.n_head, sp.n_head_kv * group);
    assert_int_equal(sp.n_head_kv, hp->n_head_kv / ranks);
    assert_int_equal(sp.ff0, next_ff);
    assert_int_equal(sp.ff0 % block, 0);
    assert_int_equal(sp.n_ff % block, 0);
    assert_true(sp.n_ff > 0 && sp.n_vocab > 0);
    assert_int_equal(sp.vocab0, next_vocab);
    next_head += sp.n_head, next_kv += sp.n_head_kv, next_ff += sp.n_ff, next_vocab += sp.n_vocab;
  }
  assert_int_equal(next_head, hp->n_head);
  assert_int_equal(next_kv, hp->n_head_kv);
  assert_int_equal(next_ff, hp->n_ff);
  assert_int_equal(next_vocab, hp->n_vocab);
}

static void refused(uint32_t ranks, const char *why) {
  char err[256] = "";
  struct llama_split sp;
  bool ok = true;
  for (uint32_t r = 0; r < ranks && ok; r++)
    ok = llama_split_plan(&model, ranks, r, &sp, err, sizeof(err));
  assert_false(ok);
  if (!strstr(err, why))
    fail_msg("message \"%s\" lacks \"%s\"", err, why);
}

static void test_stories_shapes(void **state) {
  (void)state;
  shape(5, 64, 172, 8, 4, 512, VKRT_TYPE_F32, VKRT_TYPE_F32); /* tests/data/stories260K.gguf */
  for (uint32_t ranks = 1; ranks <= 4; ranks *= 2)
    check_tiling(ranks);
  struct llama_split sp;
  char err[256];
  assert_true(llama_split_plan(&model, 2, 1, &sp, err, sizeof(err)));
  assert_int_equal(sp.head0, 4);
  assert_int_equal(sp.kv_head0, 2);
  assert_int_equal(sp.ff0, 86);
  assert_int_equal(sp.vocab0, 256);
  refused(3, "llama.attention.head_count_kv = 4 does not divide among 3 devices");
  refused(8, "llama.attention.head_count_kv = 4 does not divide among 8 devices");
}

static void test_llama3_8b_shapes(void **state) {
  (void)state;
  for (int t = 0; t < 3; t++) {
    vkrt_type type = t == 0 ? VKRT_TYPE_F16 : t == 1 ? VKRT_TYPE_Q8_0 : VKRT_TYPE_Q4_K;
    shape(32, 4096, 14336, 32, 8, 128256, type, type);
    for (uint32_t ranks = 1; ranks <= 8; ranks *= 2)
      check_tiling(ranks);
  }
  struct llama_split sp;
  char err[256];
  assert_true(llama_split_plan(&model, 2, 1, &sp, err, sizeof(err)));
  assert_int_equal(sp.head0, 16);
  assert_int_equal(sp.kv_head0, 4);
  assert_int_equal(sp.ff0, 14336 / 256 / 2 * 256);
  assert_int_equal(sp.vocab0, 64128);
}

static void test_refusals(void **state) {
  (void)state;
  /* 2 q4_K heads of 64 per rank: 128 columns of attn_output, half a block */
  shape(2, 1024, 2048, 16, 8, 100, VKRT_TYPE_Q4_K, VKRT_TYPE_F16);
  check_tiling(4);
  refused(8, "blk.0.attn_output.weight (q4_K): a device's 2 heads of 64 are not whole blocks of 256");
  /* ffn of two q4_K blocks on 4 ranks */
  shape(1, 256, 512, 4, 4, 100, VKRT_TYPE_F16, VKRT_TYPE_Q4_K);
  check_tiling(2);
  refused(4, "llama.feed_forward_length = 512 holds 2 blocks of 256 (ffn_down), fewer than the 4 devices");
  /* a vocabulary smaller than the ranks */
  shape(1, 64, 64, 4, 4, 3, VKRT_TYPE_F32, VKRT_TYPE_F32);
  check_tiling(2);
  refused(4, "3 vocabulary rows for 4 devices");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stories_shapes),
      cmocka_unit_test(test_llama3_8b_shapes),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
