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
#include <stdio.h>

#include "base/numbers.h"
#include "vkrt/vkrt.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little endian */
#define GGUF_VERSION 3u
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u
#define GGUF_MAX_NAME 256u /* bytes of a tensor name (ggml's limit is 64) */

/* GGUF metadata value types. */
enum {
  GGUF_KV_U8, GGUF_KV_I8, GGUF_KV_U16, GGUF_KV_I16, GGUF_KV_U32, GGUF_KV_I32, GGUF_KV_F32,
  GGUF_KV_BOOL, GGUF_KV_STRING, GGUF_KV_ARRAY, GGUF_KV_U64, GGUF_KV_I64, GGUF_KV_F64,
  GGUF_KV_COUNT
};

/* ggml type ids (ggml.h enum ggml_type) this service loads, runs or converts (foreign.c). */
enum {
  GGML_TYPE_F32 = 0,
  GGML_TYPE_F16 = 1,
  GGML_TYPE_Q4_0 = 2,
  GGML_TYPE_Q4_1 = 3,
  GGML_TYPE_Q5_0 = 6,
  GGML_TYPE_Q5_1 = 7,
  GGML_TYPE_Q8_0 = 8,
  GGML_TYPE_Q2_K = 10,
  GGML_TYPE_Q3_K = 11,
  GGML_TYPE_Q4_K = 12,
  GGML_TYPE_Q5_K = 13,
  GGML_TYPE_Q6_K = 14,
  GGML_TYPE_BF16 = 30,
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
  bool supported;       /* f32, f16, q8_0, q4_K or q6_K (vkrt_type below), or converted */
  vkrt_type type;
  /* A tensor of a type without kernels, converted on the host (gguf_convert): its bytes in
   * `type`'s layout (size and gguf_row_bytes count them; gguf_data points here); NULL when
   * the file's bytes are used. Freed by gguf_close. */
  uint8_t *converted;
};

/* One metadata entry: the key and where its value lies in the file (checked by the parse). */
struct gguf_kv {
  const char *key;      /* not NUL-terminated: key_len bytes */
  uint64_t key_len;
  uint32_t type;        /* GGUF_KV_* */
  uint32_t elem_type;   /* arrays: the element type */
  uint64_t count;       /* arrays: the element count */
  uint64_t value;       /* byte offset in buf of the value (arrays: of the first element) */
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
  struct gguf_kv *kvs;  /* kv_count entries, in file order */
  bool convert_f16;     /* gguf_convert makes f16 rather than f32 of the types that do not go
                           to q8_0 exactly: half the memory, each value rounded to f16 (the
                           caller sets it before converting) */
};

/* Parses buf (which must outlive out). 0 or a GGUF_E_* code with the reason in err. */
int gguf_parse(const uint8_t *buf, size_t size, struct gguf_file *out, char *err, size_t err_size);
/* Maps path read-only and parses it. */
int gguf_open(const char *path, struct gguf_file *out, char *err, size_t err_size);
void gguf_close(struct gguf_file *f);
const struct gguf_tensor *gguf_find(const struct gguf_file *f, const char *name);
const char *gguf_error_str(int code);

/* Formats the message into err (when err_size) and returns code. */
int gguf_fail(char *err, size_t err_size, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Metadata by key. Each returns 0, GGUF_E_MISSING when the key is absent or GGUF_E_BAD_VALUE
 * when its value has another type or does not fit, with a message naming the key in err.
 * Integers of any width are taken when the value fits; floats from f32 or f64. */
const struct gguf_kv *gguf_kv_find(const struct gguf_file *f, const char *key);
int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out, char *err,
                 size_t err_size);
int gguf_get_i32(const struct gguf_file *f, const char *key, int32_t *out, char *err,
                 size_t err_size);
int gguf_get_f32(const struct gguf_file *f, const char *key, float *out, char *err,
                 size_t err_size);
int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out, char *err,
                  size_t err_size);
/* A string value: *s points into the file (not NUL-terminated), *len bytes. */
int gguf_get_string(const struct gguf_file *f, const char *key, const char **s, uint64_t *len,
                    char *err, size_t err_size);
/* The element count of an array whose elements are of type elem (GGUF_KV_*). */
int gguf_get_array_len(const struct gguf_file *f, const char *key, uint32_t elem,
                       uint64_t *count, char *err, size_t err_size);
/* The elements of an array of strings / f32 / i32 (any integer type that fits), exactly n of
 * them (the array's length must be n). */
struct gguf_str {
  const char *s;
  uint64_t len;
};
int gguf_get_array_str(const struct gguf_file *f, const char *key, struct gguf_str *out,
                       uint64_t n, char *err, size_t err_size);
int gguf_get_array_f32(const struct gguf_file *f, const char *key, float *out, uint64_t n,
                       char *err, size_t err_size);
int gguf_get_array_i32(const struct gguf_file *f, const char *key, int32_t *out, uint64_t n,
                       char *err, size_t err_size);

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
/* Pointer to a tensor's data and its row stride in bytes (ne[0] elements): the converted
 * bytes once converted. */
const uint8_t *gguf_data(const struct gguf_file *f, const struct gguf_tensor *t);
uint64_t gguf_row_bytes(const struct gguf_tensor *t);
/* Bulk work on every core: the machine's cores (1 .. GGUF_MAX_THREADS), and fn(arg) run on
 * `threads` threads at once, the caller's among them (fewer when one cannot start), each
 * taking work from arg until none is left; returns when all have finished. */
#define GGUF_MAX_THREADS 32u
uint32_t gguf_threads(void);
void gguf_run_threads(void *(*fn)(void *), void *arg, uint32_t threads);
/* Elements and bytes per block of a ggml type id (0: not sized here). */
uint32_t gguf_ggml_block(uint32_t ggml);
uint32_t gguf_ggml_block_bytes(uint32_t ggml);

/* foreign.c: types without kernels. The type a foreign one converts to, exactly (q4_0, q5_0 ->
 * q8_0; q4_1, q5_1, q2_K, q3_K, q5_K, bf16 -> f32, or f16 with f16: what gguf_convert makes
 * of them under f->convert_f16), false for the others; its name; the
 * conversion of t in place (its bytes dequantized into malloc'd memory, t->type, size,
 * supported updated; a tensor already supported is left alone); and random blocks of a
 * foreign type with weights of about 1 / sqrt(K) for --make-gguf. */
bool gguf_foreign_target(uint32_t ggml, bool f16, vkrt_type *to);
const char *gguf_ggml_type_str(uint32_t ggml);
int gguf_convert(struct gguf_file *f, struct gguf_tensor *t, char *err, size_t err_size);
void gguf_foreign_synth_row(uint8_t *out, uint32_t ggml, uint64_t K, uint64_t *rng);

/* Pseudo-random numbers and float -> IEEE half: vkrt_xorshift and vkrt_f32_to_f16 of
 * base/numbers.h, the tree's one generator and conversion. */

/* A streaming GGUF v3 writer (the file is never held in memory): gguf_writer_open writes the
 * header and general.alignment (the first of n_kv key/values); then the other key/values;
 * then the tensor infos (offsets assigned in order, each tensor aligned); gguf_writer_align;
 * then each tensor's bytes in the same order, gguf_writer_align after each. A write error is
 * kept and reported by gguf_writer_close, which closes the file. */
struct gguf_writer {
  FILE *f;
  uint64_t pos, data_offset;
  bool ok;
  int error;              /* errno of the first failure */
};
int gguf_writer_open(struct gguf_writer *w, const char *path, uint64_t n_tensors, uint64_t n_kv,
                     char *err, size_t err_size);
void gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_kv_bool(struct gguf_writer *w, const char *key, bool v);
void gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v);
void gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v);
/* An array's header; its count elements follow (gguf_writer_str/u32/f32). */
void gguf_writer_kv_array(struct gguf_writer *w, const char *key, uint32_t elem_type,
                          uint64_t count);
void gguf_writer_str(struct gguf_writer *w, const char *s, size_t len);
void gguf_writer_u32(struct gguf_writer *w, uint32_t v);
void gguf_writer_f32(struct gguf_writer *w, float v);
/* One tensor info, {ne0} (ne1 0) or {ne0, ne1}, of an f32/f16/q8_0/q4_K type (ne0 whole
 * blocks); returns the bytes of one row. */
uint64_t gguf_writer_tensor_info(struct gguf_writer *w, const char *name, uint64_t ne0,
                                 uint64_t ne1, vkrt_type type);
/* The same for a ggml type id (one gguf_ggml_block sizes), and the id of a vkrt type. */
uint64_t gguf_writer_tensor_info_ggml(struct gguf_writer *w, const char *name, uint64_t ne0,
                                      uint64_t ne1, uint32_t ggml);
uint32_t gguf_ggml_id(vkrt_type type);
void gguf_writer_data(struct gguf_writer *w, const void *p, size_t n);
void gguf_writer_align(struct gguf_writer *w);
int gguf_writer_close(struct gguf_writer *w, const char *path, char *err, size_t err_size);

/* One row of K pseudo-random weights of `type` with standard deviation ~1/sqrt(K), so a
 * matrix of them keeps unit activations (quantized types: random quants and scales, q4_K
 * centred by its mins). */
void gguf_synth_row(uint8_t *out, vkrt_type type, uint64_t K, uint64_t *rng);

/* Writes a synthetic llama-style GGUF: general.architecture "llama", general.alignment 32,
 * llama.block_count/embedding_length/feed_forward_length, and per layer the three MLP
 * tensors of `type` with deterministic pseudo-random values scaled for unit activations
 * (quantized types: random quants and scales). */
int gguf_write_mlp(const char *path, uint32_t layers, uint32_t hidden, uint32_t ffn,
                   vkrt_type type, uint64_t seed, char *err, size_t err_size);
