/* The kernels an op takes by itself are built without the lab: none of them is keyed on a
 * forcing-only symbol (CONFIG_VKRT_KERNEL_*_LAB in kernels/Sources, on only with
 * CONFIG_VKRT_LAB_KERNEL_VARIANTS). Pure: the generated kernel list names every kernel's
 * symbol, enabled or not, so every configuration checks the whole list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ops/ops.h"

static bool forcing_only(enum vkrt_ops_kernel k) {
  assert_true(k < VKRT_OPS_KERNEL_COUNT);
  const char *sym = vkrt_ops_kernel_symbol(k);
  size_t n = strlen(sym);
  return n > 4 && !strcmp(sym + n - 4, "_LAB");
}

static void expect_built(enum vkrt_ops_kernel k, const char *what) {
  if (forcing_only(k))
    fail_msg("%s runs %s, which is built only with the lab (%s)", what,
             vkrt_ops_kernel_name(k), vkrt_ops_kernel_symbol(k));
}

/* Quantized matrix-vector: the variants the op tries unforced (vkrt_quant_preference, then
 * the q8x one for VKRT_ACTIVATIONS_Q8), at M = 1 and M > 1. */
static void test_quant_preference(void **state) {
  (void)state;
  if (vkrt_quant_variant_kernel(VKRT_TYPE_Q8_0, 1, 1) == VKRT_OPS_KERNEL_COUNT)
    skip(); /* no quantized kernels in this build: nothing to choose */
  bool blind = true;
  for (int t = 0; t < 2; t++) {
    vkrt_type type = t ? VKRT_TYPE_Q4_K : VKRT_TYPE_Q8_0;
    bool preferred[VKRT_QUANT_VARIANTS + 1] = {false};
    for (int r = 0; r < VKRT_QUANT_READ_PATTERNS - 1; r++)
      preferred[vkrt_quant_preference[t][r]] = true;
    preferred[VKRT_QUANT_VARIANTS] = true; /* q8x */
    for (int v = 1; v <= VKRT_QUANT_VARIANTS; v++) {
      char what[96];
      snprintf(what, sizeof(what), "%s variant %d (%s)", vkrt_type_str(type), v,
               vkrt_quant_variant_names[v - 1]);
      if (preferred[v]) {
        for (uint32_t M = 1; M <= 8; M *= 2) /* one column; 2, 4 and 8 per pass */
          expect_built(vkrt_quant_variant_kernel(type, v, M), what);
      } else if (forcing_only(vkrt_quant_variant_kernel(type, v, 1))) {
        blind = false;
      }
    }
  }
  assert_false(blind); /* some variant is forcing-only: the check can fail */
}

/* Q6_K: one kernel per column count and the 8-bit-x one (VKRT_ACTIVATIONS_Q8), none of them
 * the lab's. */
static void test_q6_k(void **state) {
  (void)state;
  if (vkrt_quant_q6_k_kernel(1) == VKRT_OPS_KERNEL_COUNT)
    skip(); /* no quantized kernels in this build */
  for (uint32_t M = 1; M <= 9; M++) {
    char what[48];
    snprintf(what, sizeof(what), "q6_K with %u columns", M);
    expect_built(vkrt_quant_q6_k_kernel(M), what);
  }
  expect_built(VKRT_OPS_MATVEC_Q6_K_Q8X, "q6_K with 8-bit activations");
}

/* Transpose: f32 takes the tiled kernel, f16 the tiled or the element-pair one; the plain tile
 * order and f32 pairs are the lab's. */
static void test_transpose(void **state) {
  (void)state;
  expect_built(VKRT_OPS_TRANSPOSE_F32, "an f32 transpose");
  expect_built(VKRT_OPS_TRANSPOSE_F16, "an f16 transpose");
  expect_built(VKRT_OPS_TRANSPOSE_X2_F16, "an f16 transpose of pairs");
  assert_true(forcing_only(VKRT_OPS_TRANSPOSE_F32_PLAIN));
  assert_true(forcing_only(VKRT_OPS_TRANSPOSE_X2_F32));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quant_preference),
      cmocka_unit_test(test_q6_k),
      cmocka_unit_test(test_transpose),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
