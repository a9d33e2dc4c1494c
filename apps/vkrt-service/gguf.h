/* GGUF (the ggml ecosystem's weights file, version 3) for vkrt-service: a bounds-checked
 * parser of the header, metadata key/values and tensor infos over a read-only mapping, the
 * lookup of the llama-style MLP tensors, and a writer of synthetic files.
 *
 * Layout (little endian): "GGUF", u32 version, u64 tensor_count, u64 kv_count; kv_count x
 * (string key, u32 value type, value); tensor_count x (string name, u32 n_dims, u64 ne[n_dims],
 * u32 ggml type, u64 offset); padding to general.alignment (default 32); the tensor data.
 * A string is a u64 length and that many bytes; an array is a u32 element type, a u64 count
 * and the elements. Tensor offsets are relative to the data section and aligned.
 *
 * The parser never reads outside [buf, buf + size): every length, count and offset is checked
 * against what is left before it is used, and every failure names the cause (gguf_parse
 * returns a GGUF_E_* code and a message). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vkrt/vkrt.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little endian */
#define GGUF_VERSION 3u
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u
#define GGUF_MAX_NAME 256u /* bytes of a tensor name (ggml's limit is 64) */

/* ggml type ids (ggml.h enum ggml_type) this service loads. */
enum {
  GGML_TYPE_F32 = 0,
  GGML_TYPE_F16 = 1,
  GGML_TYPE_Q8_0 = 8,
  GGML_TYPE_Q4_K = 12,
  GGML_TYPE_COUNT = 40, /* ids at or past this are unknown */
};

enum gguf_error {
  GGUF_OK = 0,
  GGUF_E_IO,          /* open/stat/mmap/write failed */
  GGUF_E_MAGIC,       /* not a GGUF file */
  GGUF_E_VERSION,     /* not version 3 (1 and 2 are older layouts) */
  GGUF_E_TRUNCATED,   /* a field, string, array or the tensor infos run past the end */
  GGUF_E_BAD_VALUE,   /* unknown kv type, nested array, bad alignment, bad dims */
  GGUF_E_TYPE,        /* unknown ggml type or a shape that is not whole blocks */
  GGUF_E_OVERFLOW,    /* element counts or byte sizes that overflow */
  GGUF_E_OFFSET,      /* tensor data misaligned or past the end of the file */
  GGUF_E_DUPLICATE,   /* two tensors of one name */
  GGUF_E_MISSING,     /* a tensor the model needs is absent or of the wrong shape/type */
  GGUF_E_NO_MEMORY,
};

struct gguf_tensor {
  const char *name;     /* NUL-terminated copy */
  uint32_t n_dims;
  uint64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
  uint32_t ggml_type;
  uint64_t offset;      /* in the data section */
  uint64_t size;        /* bytes; 0 when the type's block size is not known here */
  bool supported;       /* f32, f16, q8_0 or q4_K (vkrt_type below) */
  vkrt_type type;
};

struct gguf_file {
  const uint8_t *buf;   /* the whole file (mapped read-only by gguf_open) */
  size_t size;
  bool mapped;
  uint32_t version;
  uint64_t kv_count;
  uint64_t alignment;
  uint64_t data_offset; /* start of the tensor data section in buf */
  uint32_t tensor_count;
  struct gguf_tensor *tensors;
  char *names;          /* storage of the tensor names */
  char architecture[64]; /* general.architecture ("" when absent) */
};

/* Parses buf (which must outlive out). 0 or a GGUF_E_* code with the reason in err. */
int gguf_parse(const uint8_t *buf, size_t size, struct gguf_file *out, char *err, size_t err_size);
/* Maps path read-only and parses it. */
int gguf_open(const char *path, struct gguf_file *out, char *err, size_t err_size);
void gguf_close(struct gguf_file *f);
const struct gguf_tensor *gguf_find(const struct gguf_file *f, const char *name);
const char *gguf_error_str(int code);

/* The MLP of a llama-style model: blk.N.ffn_gate.weight and ffn_up.weight (ne = {hidden,
 * ffn}), ffn_down.weight (ne = {ffn, hidden}) for N = 0..layers-1, each f32, f16, q8_0 or
 * q4_K. Layers are counted from blk.0 up to the first missing index; every one of them must
 * have all three of consistent shapes. */
#define GGUF_MAX_LAYERS 256u
struct gguf_mlp {
  uint32_t layers, hidden, ffn;
  const struct gguf_tensor *gate[GGUF_MAX_LAYERS], *up[GGUF_MAX_LAYERS], *down[GGUF_MAX_LAYERS];
};
int gguf_mlp(const struct gguf_file *f, struct gguf_mlp *out, char *err, size_t err_size);
/* Pointer to a tensor's data and its row stride in bytes (ne[0] elements). */
const uint8_t *gguf_data(const struct gguf_file *f, const struct gguf_tensor *t);
uint64_t gguf_row_bytes(const struct gguf_tensor *t);

/* Writes a synthetic llama-style GGUF: general.architecture "llama", general.alignment 32,
 * llama.block_count/embedding_length/feed_forward_length, and per layer the three MLP
 * tensors of `type` with deterministic pseudo-random values scaled for unit activations
 * (quantized types: random quants and scales). */
int gguf_write_mlp(const char *path, uint32_t layers, uint32_t hidden, uint32_t ffn,
                   vkrt_type type, uint64_t seed, char *err, size_t err_size);
