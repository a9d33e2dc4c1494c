/* libFuzzer harness over vkrt-service's GGUF parser (apps/vkrt-service/gguf.c): any bytes are
 * parsed as a whole file; on success every tensor lies inside the buffer at an aligned
 * offset, names are unique and NUL-terminated, and the MLP lookup either fails with a message
 * or returns tensors of consistent shapes whose data is inside the buffer (read to the last
 * byte, so ASan sees any overrun). */
#include <assert.h>
#include <string.h>

#include "../../apps/vkrt-service/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct gguf_file f;
  char err[512];
  int r = gguf_parse(data, size, &f, err, sizeof(err));
  if (r != GGUF_OK) {
    assert(r > GGUF_OK && r <= GGUF_E_NO_MEMORY);
    assert(err[0] != '\0'); /* every failure says why */
    assert(f.tensors == NULL && f.names == NULL);
    return 0;
  }
  assert(f.version == GGUF_VERSION);
  assert(f.alignment && !(f.alignment & (f.alignment - 1)));
  assert(f.tensor_count == 0 || f.data_offset <= size);
  assert(f.data_offset % f.alignment == 0);
  unsigned sum = 0;
  for (uint32_t i = 0; i < f.tensor_count; i++) {
    const struct gguf_tensor *t = &f.tensors[i];
    size_t len = strlen(t->name);
    assert(len > 0 && len < GGUF_MAX_NAME);
    assert(t->offset % f.alignment == 0);
    assert(t->offset <= size - f.data_offset && t->size <= size - f.data_offset - t->offset);
    assert(gguf_find(&f, t->name) == t); /* unique names */
    if (t->size)
      sum += gguf_data(&f, t)[t->size - 1];
  }
  struct gguf_mlp mlp;
  r = gguf_mlp(&f, &mlp, err, sizeof(err));
  if (r == GGUF_OK) {
    assert(mlp.layers >= 1 && mlp.layers <= GGUF_MAX_LAYERS);
    for (uint32_t l = 0; l < mlp.layers; l++) {
      assert(mlp.gate[l]->ne[0] == mlp.hidden && mlp.gate[l]->ne[1] == mlp.ffn);
      assert(mlp.up[l]->ne[0] == mlp.hidden && mlp.up[l]->ne[1] == mlp.ffn);
      assert(mlp.down[l]->ne[0] == mlp.ffn && mlp.down[l]->ne[1] == mlp.hidden);
      assert(gguf_row_bytes(mlp.down[l]) * mlp.hidden == mlp.down[l]->size);
      sum += gguf_data(&f, mlp.down[l])[mlp.down[l]->size - 1];
    }
  } else {
    assert(err[0] != '\0');
  }
  (void)sum;
  gguf_close(&f);
  return 0;
}
