/* libFuzzer harness over vkrt-service's GGUF parser (apps/vkrt-service/gguf.c): any bytes are
 * parsed as a whole file; on success every tensor lies inside the buffer at an aligned
 * offset, names are unique and NUL-terminated, every metadata getter stays inside the buffer,
 * the llama model and vocabulary load or fail with a message (a loaded vocabulary tokenizes
 * into its own ids), and the MLP lookup either fails with a message or returns tensors of
 * consistent shapes whose data is inside the buffer (read to the last byte, so ASan sees any
 * overrun). The seed seed-llama-tiny is a whole llama model with a vocabulary, as
 * `vkrt-service --make-gguf F --heads 2 --kv-heads 1 --layers 1 --hidden 8 --ffn 8 --vocab 360
 * --dtype f16` writes it; seed-llama-rope is the same with --rope-freqs 8 --rope-linear 2
 * (RoPE scaling: the rope_freqs.weight tensor and the linear scaling keys); seed-llama-gpt2
 * the same with `--vocab 300 --vocab-type gpt2` (a byte-level BPE vocabulary with merges and
 * control tokens). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "../../apps/vkrt-service/llama.h"

/* Every metadata entry through its getter (arrays read to the last element), then the llama
 * model and vocabulary (a short text tokenized and decoded when they load). */
static unsigned metadata(struct gguf_file *f) {
  unsigned sum = 0;
  char err[512], key[256];
  for (uint64_t i = 0; i < f->kv_count; i++) {
    const struct gguf_kv *kv = &f->kvs[i];
    if (kv->key_len >= sizeof(key) || memchr(kv->key, 0, kv->key_len))
      continue;
    memcpy(key, kv->key, kv->key_len);
    key[kv->key_len] = '\0';
    uint32_t u;
    int32_t v;
    float x;
    bool b;
    const char *s;
    uint64_t len, n;
    int r = gguf_get_u32(f, key, &u, err, sizeof(err)) | gguf_get_i32(f, key, &v, err, sizeof(err)) |
            gguf_get_f32(f, key, &x, err, sizeof(err)) | gguf_get_bool(f, key, &b, err, sizeof(err));
    (void)r;
    if (!gguf_get_string(f, key, &s, &len, err, sizeof(err)) && len)
      sum += (uint8_t)s[len - 1];
    if (gguf_get_array_len(f, key, kv->elem_type, &n, err, sizeof(err)) || !n || n > 4096)
      continue;
    void *out = malloc(n * (sizeof(struct gguf_str)));
    assert(out);
    if (!gguf_get_array_str(f, key, out, n, err, sizeof(err))) {
      const struct gguf_str *strs = out;
      for (uint64_t j = 0; j < n; j++)
        sum += strs[j].len ? (uint8_t)strs[j].s[strs[j].len - 1] : 0;
    }
    if (!gguf_get_array_f32(f, key, out, n, err, sizeof(err)))
      sum += ((const float *)out)[n - 1] > 0;
    if (!gguf_get_array_i32(f, key, out, n, err, sizeof(err)))
      sum += (unsigned)((const int32_t *)out)[n - 1];
    free(out);
  }
  static struct llama_model m;
  if (!llama_model_load(f, &m, err, sizeof(err)))
    sum += (unsigned)llama_weight_bytes(&m);
  else
    assert(err[0] != '\0');
  struct llama_vocab *voc;
  if (!llama_vocab_load(f, &voc, err, sizeof(err))) {
    int32_t ids[64];
    int32_t k = llama_tokenize(voc, "Once upon a time, \xc3\xbc! <|eot_id|>\xff\n", true, ids, 64);
    char piece[32];
    for (int32_t j = 0; j < k; j++) {
      assert(ids[j] >= 0 && ids[j] < (int32_t)llama_vocab_size(voc));
      sum += (unsigned)llama_token_piece(voc, ids[j], piece, sizeof(piece));
    }
    llama_vocab_free(voc);
  } else {
    assert(err[0] != '\0');
  }
  return sum;
}

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
  sum += metadata(&f);
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
