/* libFuzzer harness over the config/board loading path: the CONFIG_VKRT_DEVICE_UUIDS parser
 * and board matching against fuzzed device snapshots, with invariants on every success. */
#include <assert.h>
#include <string.h>

#include "device/caps.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_input in = {.data = data, .size = size};
  /* 1. UUID list text. */
  size_t text_len = fuzz_u8(&in) % 200;
  char text[256];
  /* The next text_len bytes (zeros past the end), copied at once: gcc -O3 misjudged the
   * vectorized byte loop as writing past text. */
  size_t avail = in.size - in.pos < text_len ? in.size - in.pos : text_len;
  if (avail)
    memcpy(text, in.data + in.pos, avail);
  memset(text + avail, 0, text_len - avail);
  in.pos += avail;
  text[text_len] = '\0';
  uint8_t uuids[8][16];
  char why[256];
  int parsed = vkrt_board_parse_uuids(text, uuids, why, sizeof(why));
  assert(parsed >= -1 && parsed <= 8);

  /* 2. Board against candidates. */
  struct vkrt_board board;
  memset(&board, 0, sizeof(board));
  board.name = "fuzz";
  board.device_count = fuzz_u8(&in) % 10; /* 0 and 9 are invalid on purpose */
  board.simulated = fuzz_u8(&in) & 1;
  board.rule = (enum vkrt_match_rule)(fuzz_u8(&in) % 3);
  board.vendor_id = fuzz_u8(&in) & 1 ? 0x10de : fuzz_u32(&in);
  board.device_id = fuzz_u8(&in) & 1 ? 0 : fuzz_u32(&in) & 0xff;
  board.uuid_count = parsed > 0 ? (uint32_t)parsed : fuzz_u8(&in) % 9;
  if (parsed > 0)
    memcpy(board.uuids, uuids, sizeof(uuids));
  else
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 16; j++)
        board.uuids[i][j] = fuzz_u8(&in) & 3;
  board.explicit_indices = (fuzz_u8(&in) & 7) == 0;
  for (int i = 0; i < 8; i++)
    board.indices[i] = fuzz_u8(&in) % 12;

  static struct vkrt_caps cand[12];
  uint32_t count = fuzz_u8(&in) % 13;
  for (uint32_t i = 0; i < count; i++) {
    memset(&cand[i], 0, sizeof(cand[i]));
    cand[i].vendor_id = fuzz_u8(&in) & 1 ? 0x10de : 0x1002;
    cand[i].device_id = fuzz_u8(&in);
    cand[i].physical_index = i;
    for (int j = 0; j < 16; j++)
      cand[i].device_uuid[j] = fuzz_u8(&in) & 3;
  }
  uint32_t out[8];
  memset(out, 0xff, sizeof(out));
  if (vkrt_board_match(&board, cand, count, out, why, sizeof(why))) {
    assert(board.device_count >= 1 && board.device_count <= 8);
    for (uint32_t r = 0; r < board.device_count; r++) {
      assert(out[r] < count);
      if (!board.simulated)
        for (uint32_t q = 0; q < r; q++)
          assert(out[q] != out[r]); /* one physical device per rank */
      if (!board.explicit_indices && board.rule == VKRT_MATCH_ID) {
        assert(cand[out[r]].vendor_id == board.vendor_id);
        assert(!board.device_id || cand[out[r]].device_id == board.device_id);
      }
      if (!board.explicit_indices && board.rule == VKRT_MATCH_UUID && !board.simulated)
        assert(!memcmp(cand[out[r]].device_uuid, board.uuids[r], 16));
    }
  } else {
    assert(why[0] != '\0'); /* a refusal always says why */
  }
  return 0;
}
