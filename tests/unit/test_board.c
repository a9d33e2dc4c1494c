/* Board matching (pure): by index, by id, by UUID, simulated, explicit indices, and the
 * mismatch messages naming what was expected and what was found. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "device/caps.h"
#include "vkrt/kconfig.h"
#include "vkrt/vkrt.h"

#define NVIDIA 0x10de
#define AMD 0x1002

static struct vkrt_caps gpu(uint32_t index, uint32_t vendor, uint32_t device, uint8_t uuid_byte) {
  struct vkrt_caps c;
  memset(&c, 0, sizeof(c));
  c.physical_index = index;
  c.vendor_id = vendor;
  c.device_id = device;
  snprintf(c.device_name, sizeof(c.device_name), "%s %u",
           vendor == NVIDIA ? "NVIDIA H200" : vendor == AMD ? "AMD R9700" : "llvmpipe", index);
  memset(c.device_uuid, uuid_byte, 16);
  return c;
}

static struct vkrt_board board(uint32_t count, enum vkrt_match_rule rule) {
  struct vkrt_board b;
  memset(&b, 0, sizeof(b));
  b.name = "test-board";
  b.device_count = count;
  b.rule = rule;
  return b;
}

static void test_index(void **state) {
  (void)state;
  struct vkrt_caps c[3] = {gpu(0, NVIDIA, 0x2335, 1), gpu(1, NVIDIA, 0x2335, 2),
                           gpu(2, NVIDIA, 0x2335, 3)};
  struct vkrt_board b = board(2, VKRT_MATCH_INDEX);
  uint32_t out[8];
  char why[512] = "";
  assert_true(vkrt_board_match(&b, c, 3, out, why, sizeof(why)));
  assert_int_equal(out[0], 0);
  assert_int_equal(out[1], 1);
  b.device_count = 3;
  assert_true(vkrt_board_match(&b, c, 3, out, why, sizeof(why)));
  assert_int_equal(out[2], 2);
}

static void test_index_too_few(void **state) {
  (void)state;
  struct vkrt_caps c[1] = {gpu(0, NVIDIA, 0x2335, 1)};
  struct vkrt_board b = board(8, VKRT_MATCH_INDEX);
  uint32_t out[8];
  char why[512] = "";
  assert_false(vkrt_board_match(&b, c, 1, out, why, sizeof(why)));
  assert_non_null(strstr(why, "test-board"));
  assert_non_null(strstr(why, "expects 8 device(s)"));
  assert_non_null(strstr(why, "found 1 physical device(s)"));
  assert_non_null(strstr(why, "NVIDIA H200 0"));
  /* no device at all */
  assert_false(vkrt_board_match(&b, NULL, 0, out, why, sizeof(why)));
  assert_non_null(strstr(why, "no Vulkan physical device"));
}

static void test_id(void **state) {
  (void)state;
  /* an integrated AMD GPU enumerated first must be skipped */
  struct vkrt_caps c[4] = {gpu(0, AMD, 0x164e, 9), gpu(1, NVIDIA, 0x2335, 1),
                           gpu(2, NVIDIA, 0x2335, 2), gpu(3, NVIDIA, 0x2330, 3)};
  struct vkrt_board b = board(2, VKRT_MATCH_ID);
  b.vendor_id = NVIDIA;
  uint32_t out[8];
  char why[512] = "";
  assert_true(vkrt_board_match(&b, c, 4, out, why, sizeof(why)));
  assert_int_equal(out[0], 1);
  assert_int_equal(out[1], 2);
  b.device_count = 3; /* device id 0 = any: the 0x2330 counts */
  assert_true(vkrt_board_match(&b, c, 4, out, why, sizeof(why)));
  assert_int_equal(out[2], 3);
  b.device_id = 0x2335; /* now it does not */
  assert_false(vkrt_board_match(&b, c, 4, out, why, sizeof(why)));
  assert_non_null(strstr(why, "expects 3 device(s) with vendor 0x10de device 0x2335"));
  assert_non_null(strstr(why, "found 2 matching of 4"));
}

static void test_id_wrong_vendor(void **state) {
  (void)state;
  struct vkrt_caps c[2] = {gpu(0, AMD, 0x7551, 1), gpu(1, AMD, 0x7551, 2)};
  struct vkrt_board b = board(2, VKRT_MATCH_ID);
  b.vendor_id = NVIDIA;
  uint32_t out[8];
  char why[512] = "";
  assert_false(vkrt_board_match(&b, c, 2, out, why, sizeof(why)));
  assert_non_null(strstr(why, "vendor 0x10de"));
  assert_non_null(strstr(why, "found 0 matching of 2"));
  assert_non_null(strstr(why, "AMD R9700 0 (vendor 0x1002 device 0x7551)"));
}

static void test_uuid(void **state) {
  (void)state;
  struct vkrt_caps c[3] = {gpu(0, NVIDIA, 1, 0xaa), gpu(1, NVIDIA, 1, 0xbb),
                           gpu(2, NVIDIA, 1, 0xcc)};
  struct vkrt_board b = board(2, VKRT_MATCH_UUID);
  memset(b.uuids[0], 0xcc, 16); /* list order, not enumeration order */
  memset(b.uuids[1], 0xaa, 16);
  b.uuid_count = 2;
  uint32_t out[8];
  char why[768] = "";
  assert_true(vkrt_board_match(&b, c, 3, out, why, sizeof(why)));
  assert_int_equal(out[0], 2);
  assert_int_equal(out[1], 0);
}

static void test_uuid_wrong(void **state) {
  (void)state;
  struct vkrt_caps c[2] = {gpu(0, NVIDIA, 1, 0xaa), gpu(1, NVIDIA, 1, 0xbb)};
  struct vkrt_board b = board(2, VKRT_MATCH_UUID);
  memset(b.uuids[0], 0xaa, 16);
  memset(b.uuids[1], 0x11, 16);
  b.uuid_count = 2;
  uint32_t out[8];
  char why[768] = "";
  assert_false(vkrt_board_match(&b, c, 2, out, why, sizeof(why)));
  assert_non_null(strstr(why, "device 1 expected with UUID 11111111111111111111111111111111"));
  assert_non_null(strstr(why, "uuid bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"));
  /* too few UUIDs listed */
  b.uuid_count = 1;
  assert_false(vkrt_board_match(&b, c, 2, out, why, sizeof(why)));
  assert_non_null(strstr(why, "lists 1 UUID"));
  /* the same UUID twice */
  memset(b.uuids[1], 0xaa, 16);
  b.uuid_count = 2;
  assert_false(vkrt_board_match(&b, c, 2, out, why, sizeof(why)));
  assert_non_null(strstr(why, "same UUID"));
}

static void test_simulated(void **state) {
  (void)state;
  struct vkrt_caps c[1] = {gpu(0, 0x10005, 0, 7)};
  struct vkrt_board b = board(4, VKRT_MATCH_ID);
  b.vendor_id = 0x10005;
  b.simulated = true;
  uint32_t out[8];
  char why[512] = "";
  assert_true(vkrt_board_match(&b, c, 1, out, why, sizeof(why)));
  for (int r = 0; r < 4; r++)
    assert_int_equal(out[r], 0);
  b.simulated = false; /* one physical device cannot be 4 */
  assert_false(vkrt_board_match(&b, c, 1, out, why, sizeof(why)));
  assert_non_null(strstr(why, "expects 4 device(s)"));
  assert_non_null(strstr(why, "found 1 matching of 1"));
  b.simulated = true; /* simulated, but the one device has the wrong vendor */
  b.vendor_id = NVIDIA;
  assert_false(vkrt_board_match(&b, c, 1, out, why, sizeof(why)));
  assert_non_null(strstr(why, "simulated"));
  /* simulated by UUID: every rank on the first listed UUID */
  b = board(3, VKRT_MATCH_UUID);
  b.simulated = true;
  memset(b.uuids[0], 7, 16);
  b.uuid_count = 1;
  assert_true(vkrt_board_match(&b, c, 1, out, why, sizeof(why)));
  assert_int_equal(out[2], 0);
}

static void test_explicit_indices(void **state) {
  (void)state;
  struct vkrt_caps c[3] = {gpu(0, NVIDIA, 1, 1), gpu(1, NVIDIA, 1, 2), gpu(2, NVIDIA, 1, 3)};
  struct vkrt_board b = board(2, VKRT_MATCH_UUID); /* explicit indices win over the rule */
  b.explicit_indices = true;
  b.indices[0] = 2;
  b.indices[1] = 0;
  uint32_t out[8];
  char why[512] = "";
  assert_true(vkrt_board_match(&b, c, 3, out, why, sizeof(why)));
  assert_int_equal(out[0], 2);
  assert_int_equal(out[1], 0);
  b.indices[1] = 5;
  assert_false(vkrt_board_match(&b, c, 3, out, why, sizeof(why)));
  assert_non_null(strstr(why, "device 1 expected at physical index 5, found 3"));
  b.indices[1] = 2;
  assert_false(vkrt_board_match(&b, c, 3, out, why, sizeof(why)));
  assert_non_null(strstr(why, "both ask for physical index 2"));
}

static void test_bad_count(void **state) {
  (void)state;
  struct vkrt_caps c[1] = {gpu(0, NVIDIA, 1, 1)};
  struct vkrt_board b = board(0, VKRT_MATCH_INDEX);
  uint32_t out[8];
  char why[256] = "";
  assert_false(vkrt_board_match(&b, c, 1, out, why, sizeof(why)));
  b.device_count = 9;
  assert_false(vkrt_board_match(&b, c, 1, out, why, sizeof(why)));
  assert_non_null(strstr(why, "outside 1..8"));
  /* a tiny message buffer truncates, never overflows */
  char tiny[8];
  b.device_count = 4;
  assert_false(vkrt_board_match(&b, c, 1, out, tiny, sizeof(tiny)));
  assert_int_equal(strlen(tiny), 7);
}

static void test_parse_uuids(void **state) {
  (void)state;
  uint8_t u[8][16];
  char why[128];
  assert_int_equal(vkrt_board_parse_uuids("", u, why, sizeof(why)), 0);
  assert_int_equal(vkrt_board_parse_uuids("00112233445566778899aabbccddeeff,"
                                          "ffeeddcc-bbaa-9988-7766-554433221100",
                                          u, why, sizeof(why)),
                   2);
  assert_int_equal(u[0][0], 0x00);
  assert_int_equal(u[0][15], 0xff);
  assert_int_equal(u[1][0], 0xff);
  assert_int_equal(u[1][9], 0x66);
  assert_int_equal(vkrt_board_parse_uuids("0011", u, why, sizeof(why)), -1);
  assert_non_null(strstr(why, "4 hex digits, expected 32"));
  assert_int_equal(vkrt_board_parse_uuids("0011223344556677889900aabbccddeeffx", u, why,
                                          sizeof(why)),
                   -1);
  assert_int_equal(vkrt_board_parse_uuids("00112233445566778899aabbccddeeff,", u, why,
                                          sizeof(why)),
                   -1);
}

static void test_from_config(void **state) {
  (void)state;
  struct vkrt_board b;
  char why[128];
  assert_true(vkrt_board_from_config(&b, why, sizeof(why)));
  assert_string_equal(b.name, CONFIG_VKRT_BOARD);
  assert_int_equal(b.device_count, CONFIG_VKRT_DEVICE_COUNT);
  assert_int_equal(b.simulated, IS_ENABLED(CONFIG_VKRT_SIMULATED));
}

/* vkrt_config_has / vkrt_config_value answer what config.h says, for a bool that is y, one
 * that may be n, a string and an integer; unknown names are NULL / false. */
static void test_config_query(void **state) {
  (void)state;
  assert_true(vkrt_config_has("CONFIG_VKRT_DEVICE_MATCH_ID") == IS_ENABLED(CONFIG_VKRT_DEVICE_MATCH_ID));
  assert_true(vkrt_config_has("VKRT_FAULT_INJECTION") == IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION));
  assert_true(vkrt_config_has("CONFIG_VKRT_TRANSPORT_MPI") == IS_ENABLED(CONFIG_VKRT_TRANSPORT_MPI));
  assert_string_equal(vkrt_config_value("CONFIG_VKRT_BOARD"), CONFIG_VKRT_BOARD);
  char count[16];
  snprintf(count, sizeof(count), "%d", CONFIG_VKRT_DEVICE_COUNT);
  assert_string_equal(vkrt_config_value("VKRT_DEVICE_COUNT"), count);
  assert_string_equal(vkrt_config_value("CONFIG_VKRT_FAULT_INJECTION"),
                      IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION) ? "y" : "n");
  assert_null(vkrt_config_value("CONFIG_VKRT_NO_SUCH_SYMBOL"));
  assert_false(vkrt_config_has("CONFIG_VKRT_NO_SUCH_SYMBOL"));
  assert_null(vkrt_config_value(NULL));
  assert_false(vkrt_config_has("CONFIG_VKRT_BOARD")); /* a string is not y */
}

/* vkrt_options has the fault fields in every configuration; a build without fault injection
 * refuses them at open, before touching a device, with a message naming the symbol. */
static void test_faults_refused_without_injection(void **state) {
  (void)state;
  vkrt_options o;
  vkrt_options_initialize(&o);
  o.faults.mask = VKRT_FAULT_IMPORT_FAILS;
  if (IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)) {
    fprintf(stderr, "vkrt-test: skipped %s: %s\n", __func__, "CONFIG_VKRT_FAULT_INJECTION is on");
    skip();
  }
  vkrt_appliance *app = (vkrt_appliance *)1;
  char why[256] = "";
  assert_int_equal(vkrt_open(&o, &app, why, sizeof(why)), VKRT_ERROR_UNSUPPORTED);
  assert_null(app);
  assert_non_null(strstr(why, "CONFIG_VKRT_FAULT_INJECTION"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_query),
      cmocka_unit_test(test_faults_refused_without_injection),
      cmocka_unit_test(test_index),        cmocka_unit_test(test_index_too_few),
      cmocka_unit_test(test_id),           cmocka_unit_test(test_id_wrong_vendor),
      cmocka_unit_test(test_uuid),         cmocka_unit_test(test_uuid_wrong),
      cmocka_unit_test(test_simulated),    cmocka_unit_test(test_explicit_indices),
      cmocka_unit_test(test_bad_count),    cmocka_unit_test(test_parse_uuids),
      cmocka_unit_test(test_from_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
