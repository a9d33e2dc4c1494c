/* GGUF v3 parser and writer (see gguf.h). */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static const uint8_t kv_scalar_size[GGUF_KV_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Block size (elements) and bytes per block of the ggml types whose layout is known here;
 * {0, 0} for ids inside the ggml range we cannot size (their tensors are skipped unless
 * the model needs them). From ggml's type traits. */
static const struct { uint16_t block, bytes; } ggml_types[GGML_TYPE_COUNT] = {
  [0] = {1, 4},      /* F32 */
  [1] = {1, 2},      /* F16 */
  [2] = {32, 18},    /* Q4_0 */
  [3] = {32, 20},    /* Q4_1 */
  [6] = {32, 22},    /* Q5_0 */
  [7] = {32, 24},    /* Q5_1 */
  [8] = {32, 34},    /* Q8_0 */
  [9] = {32, 36},    /* Q8_1 */
  [10] = {256, 84},  /* Q2_K */
  [11] = {256, 110}, /* Q3_K */
  [12] = {256, 144}, /* Q4_K */
  [13] = {256, 176}, /* Q5_K */
  [14] = {256, 210}, /* Q6_K */
  [15] = {256, 292}, /* Q8_K */
  [24] = {1, 1},     /* I8 */
  [25] = {1, 2},     /* I16 */
  [26] = {1, 4},     /* I32 */
  [27] = {1, 8},     /* I64 */
  [28] = {1, 8},     /* F64 */
  [30] = {1, 2},     /* BF16 */
};

const char *gguf_error_str(int code) {
  static const char *const names[] = {"ok", "io", "magic", "version", "truncated", "bad value",
                                      "type", "overflow", "offset", "duplicate", "missing",
                                      "no memory"};
  return code >= 0 && code <= GGUF_E_NO_MEMORY ? names[code] : "?";
}

struct cursor {
  const uint8_t *buf;
  size_t size, pos;
  char *err;
  size_t err_size;
};

static int fail(struct cursor *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (c->err && c->err_size)
    vsnprintf(c->err, c->err_size, fmt, ap);
  va_end(ap);
  return code;
}

static bool take(struct cursor *c, size_t n, const uint8_t **p) {
  if (n > c->size - c->pos)
    return false;
  *p = c->buf + c->pos;
  c->pos += n;
  return true;
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static int read_uint(struct cursor *c, int n, uint64_t *out, const char *what) {
  const uint8_t *p;
  *out = 0;
  if (!take(c, (size_t)n, &p))
    return fail(c, GGUF_E_TRUNCATED, "truncated: %s at byte %zu needs %d bytes, %zu left", what,
                c->pos, n, c->size - c->pos);
  *out = le(p, n);
  return GGUF_OK;
}

/* A string: its bytes stay in the buffer (*s, *len). */
static int read_string(struct cursor *c, const uint8_t **s, uint64_t *len, const char *what) {
  size_t at = c->pos;
  int r = read_uint(c, 8, len, what);
  if (r)
    return r;
  if (*len > c->size - c->pos)
    return fail(c, GGUF_E_TRUNCATED,
                "truncated: %s at byte %zu has length %" PRIu64 " but %zu bytes are left", what,
                at, *len, c->size - c->pos);
  *s = c->buf + c->pos;
  c->pos += (size_t)*len;
  return GGUF_OK;
}

static bool key_is(const uint8_t *k, uint64_t len, const char *name) {
  return len == strlen(name) && !memcmp(k, name, (size_t)len);
}

/* Skips (or reads) one value of type t; arrays of arrays are refused. */
static int read_value(struct cursor *c, uint32_t t, bool in_array, uint64_t *scalar,
                      const uint8_t **str, uint64_t *str_len) {
  if (t >= GGUF_KV_COUNT)
    return fail(c, GGUF_E_BAD_VALUE, "unknown metadata value type %u at byte %zu", t, c->pos);
  if (t == GGUF_KV_STRING)
    return read_string(c, str, str_len, "string value");
  if (t == GGUF_KV_ARRAY) {
    if (in_array)
      return fail(c, GGUF_E_BAD_VALUE, "nested array at byte %zu (not supported)", c->pos);
    uint64_t et = 0, count = 0;
    int r = read_uint(c, 4, &et, "array type");
    if (!r)
      r = read_uint(c, 8, &count, "array length");
    if (r)
      return r;
    if (et >= GGUF_KV_COUNT || et == GGUF_KV_ARRAY)
      return fail(c, GGUF_E_BAD_VALUE, "array of %s type %" PRIu64 " at byte %zu",
                  et == GGUF_KV_ARRAY ? "nested array" : "unknown", et, c->pos);
    if (et != GGUF_KV_STRING) {
      uint64_t bytes = count * kv_scalar_size[et];
      if (count > (c->size - c->pos) / kv_scalar_size[et])
        return fail(c, GGUF_E_TRUNCATED,
                    "truncated: array of %" PRIu64 " elements at byte %zu runs past the end", count,
                    c->pos);
      c->pos += (size_t)bytes;
      return GGUF_OK;
    }
    /* strings: each at least 8 bytes, so a huge count fails fast */
    if (count > (c->size - c->pos) / 8)
      return fail(c, GGUF_E_TRUNCATED,
                  "truncated: array of %" PRIu64 " strings at byte %zu runs past the end", count,
                  c->pos);
    for (uint64_t i = 0; i < count; i++) {
      const uint8_t *s;
      uint64_t len;
      r = read_string(c, &s, &len, "array string");
      if (r)
        return r;
    }
    return GGUF_OK;
  }
  uint64_t v = 0;
  int r = read_uint(c, kv_scalar_size[t], &v, "metadata value");
  if (!r && scalar)
    *scalar = v;
  return r;
}

static int compare_names(const void *a, const void *b) {
  const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a,
                           *y = *(const struct gguf_tensor *const *)b;
  return strcmp(x->name, y->name);
}

int gguf_parse(const uint8_t *buf, size_t size, struct gguf_file *out, char *err, size_t err_size) {
  memset(out, 0, sizeof(*out));
  struct cursor c = {.buf = buf, .size = size, .err = err, .err_size = err_size};
  if (err && err_size)
    err[0] = '\0';
  uint64_t magic, version, n_tensors, n_kv;
  int r = read_uint(&c, 4, &magic, "magic");
  if (r)
    return r;
  if (magic != GGUF_MAGIC)
    return fail(&c, GGUF_E_MAGIC, "not a GGUF file (magic %02x %02x %02x %02x, expected \"GGUF\")",
                buf[0], buf[1], buf[2], buf[3]);
  if ((r = read_uint(&c, 4, &version, "version")))
    return r;
  if (version != GGUF_VERSION)
    return fail(&c, GGUF_E_VERSION, "GGUF version %" PRIu64 " is not supported (only 3)", version);
  if ((r = read_uint(&c, 8, &n_tensors, "tensor count")) || (r = read_uint(&c, 8, &n_kv, "kv count")))
    return r;
  out->buf = buf;
  out->size = size;
  out->version = (uint32_t)version;
  out->kv_count = n_kv;
  out->alignment = GGUF_DEFAULT_ALIGNMENT;
  /* every kv takes at least 8 + 4 bytes, every tensor info 8 + 4 + 4 + 8 */
  if (n_kv > (size - c.pos) / 12)
    return fail(&c, GGUF_E_TRUNCATED, "truncated: %" PRIu64 " metadata entries cannot fit in %zu bytes",
                n_kv, size - c.pos);
  out->kvs = calloc(n_kv ? n_kv : 1, sizeof(*out->kvs));
  if (!out->kvs)
    return fail(&c, GGUF_E_NO_MEMORY, "out of memory for %" PRIu64 " metadata entries", n_kv);
  for (uint64_t i = 0; i < n_kv; i++) {
    const uint8_t *key, *str = NULL;
    uint64_t key_len, type, scalar = 0, str_len = 0;
    if ((r = read_string(&c, &key, &key_len, "metadata key")) ||
        (r = read_uint(&c, 4, &type, "metadata value type")))
      goto bad;
    size_t at = c.pos;
    if ((r = read_value(&c, (uint32_t)MIN(type, UINT32_MAX), false, &scalar, &str, &str_len)))
      goto bad;
    struct gguf_kv *kv = &out->kvs[i];
    kv->key = (const char *)key;
    kv->key_len = key_len;
    kv->type = (uint32_t)type;
    kv->value = at;
    if (type == GGUF_KV_ARRAY) { /* read_value checked the element type and count */
      kv->elem_type = (uint32_t)le(buf + at, 4);
      kv->count = le(buf + at + 4, 8);
      kv->value = at + 12;
    }
    if (key_is(key, key_len, "general.alignment")) {
      if (type != GGUF_KV_U32) {
        r = fail(&c, GGUF_E_BAD_VALUE, "general.alignment at byte %zu is not a uint32 (type %" PRIu64 ")",
                 at, type);
        goto bad;
      }
      if (!scalar || (scalar & (scalar - 1)) || scalar > (1u << 20)) {
        r = fail(&c, GGUF_E_BAD_VALUE, "general.alignment %" PRIu64 " is not a power of two <= 1 MiB",
                 scalar);
        goto bad;
      }
      out->alignment = scalar;
    } else if (key_is(key, key_len, "general.architecture") && type == GGUF_KV_STRING) {
      size_t n = (size_t)MIN(str_len, sizeof(out->architecture) - 1);
      memcpy(out->architecture, str, n);
      out->architecture[n] = '\0';
    }
  }
  if (n_tensors > (size - c.pos) / 24) {
    r = fail(&c, GGUF_E_TRUNCATED, "truncated: %" PRIu64 " tensor infos cannot fit in %zu bytes",
             n_tensors, size - c.pos);
    goto bad;
  }
  out->tensor_count = (uint32_t)n_tensors;
  out->tensors = calloc(n_tensors ? n_tensors : 1, sizeof(*out->tensors));
  /* names: at most the bytes left plus a NUL each */
  out->names = malloc((size - c.pos) + n_tensors + 1);
  if (!out->tensors || !out->names) {
    gguf_close(out);
    return fail(&c, GGUF_E_NO_MEMORY, "out of memory for %" PRIu64 " tensor infos", n_tensors);
  }
  char *names = out->names;
  for (uint64_t i = 0; i < n_tensors; i++) {
    struct gguf_tensor *t = &out->tensors[i];
    const uint8_t *name;
    uint64_t name_len, n_dims = 0, type = 0;
    if ((r = read_string(&c, &name, &name_len, "tensor name")))
      goto bad;
    if (name_len == 0 || name_len >= GGUF_MAX_NAME || memchr(name, 0, (size_t)name_len)) {
      r = fail(&c, GGUF_E_BAD_VALUE, "tensor %" PRIu64 ": name of %" PRIu64 " bytes (1..%u, no NUL)",
               i, name_len, GGUF_MAX_NAME - 1);
      goto bad;
    }
    memcpy(names, name, (size_t)name_len);
    names[name_len] = '\0';
    t->name = names;
    names += name_len + 1;
    if ((r = read_uint(&c, 4, &n_dims, "tensor dims")))
      goto bad;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
      r = fail(&c, GGUF_E_BAD_VALUE, "tensor %s: %" PRIu64 " dims (1..%u)", t->name, n_dims, GGUF_MAX_DIMS);
      goto bad;
    }
    t->n_dims = (uint32_t)n_dims;
    uint64_t elements = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
      t->ne[d] = 1;
      if (d >= n_dims)
        continue;
      if ((r = read_uint(&c, 8, &t->ne[d], "tensor dim")))
        goto bad;
      if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX) {
        r = fail(&c, GGUF_E_BAD_VALUE, "tensor %s: ne[%u] = %" PRIu64 " (1..2^63-1)", t->name, d, t->ne[d]);
        goto bad;
      }
      if (elements > (uint64_t)INT64_MAX / t->ne[d]) {
        r = fail(&c, GGUF_E_OVERFLOW, "tensor %s: element count overflows (ne[%u] = %" PRIu64 ")",
                 t->name, d, t->ne[d]);
        goto bad;
      }
      elements *= t->ne[d];
    }
    if ((r = read_uint(&c, 4, &type, "tensor type")) || (r = read_uint(&c, 8, &t->offset, "tensor offset")))
      goto bad;
    if (type >= GGML_TYPE_COUNT) {
      r = fail(&c, GGUF_E_TYPE, "tensor %s: unknown ggml type %" PRIu64, t->name, type);
      goto bad;
    }
    t->ggml_type = (uint32_t)type;
    if (ggml_types[type].block) {
      uint64_t block = ggml_types[type].block;
      if (t->ne[0] % block) {
        r = fail(&c, GGUF_E_TYPE, "tensor %s: ne[0] = %" PRIu64 " is not a multiple of the type-%" PRIu64
                 " block of %" PRIu64, t->name, t->ne[0], type, block);
        goto bad;
      }
      uint64_t blocks = elements / block;
      if (blocks > UINT64_MAX / ggml_types[type].bytes) {
        r = fail(&c, GGUF_E_OVERFLOW, "tensor %s: byte size overflows", t->name);
        goto bad;
      }
      t->size = blocks * ggml_types[type].bytes;
    }
    switch (type) {
    case GGML_TYPE_F32: t->type = VKRT_TYPE_F32, t->supported = true; break;
    case GGML_TYPE_F16: t->type = VKRT_TYPE_F16, t->supported = true; break;
    case GGML_TYPE_Q8_0: t->type = VKRT_TYPE_Q8_0, t->supported = true; break;
    case GGML_TYPE_Q4_K: t->type = VKRT_TYPE_Q4_K, t->supported = true; break;
    case GGML_TYPE_Q6_K: t->type = VKRT_TYPE_Q6_K, t->supported = true; break;
    default: break;
    }
  }
  /* the data section starts at the next alignment boundary */
  uint64_t data = (c.pos + out->alignment - 1) / out->alignment * out->alignment;
  if (n_tensors && data > size) {
    r = fail(&c, GGUF_E_TRUNCATED, "truncated: the data section would start at byte %" PRIu64
             " of a %zu-byte file", data, size);
    goto bad;
  }
  out->data_offset = data;
  uint64_t data_size = data <= size ? size - data : 0;
  for (uint32_t i = 0; i < out->tensor_count; i++) {
    const struct gguf_tensor *t = &out->tensors[i];
    if (t->offset % out->alignment) {
      r = fail(&c, GGUF_E_OFFSET, "tensor %s: offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
               t->name, t->offset, out->alignment);
      goto bad;
    }
    if (t->offset > data_size) {
      r = fail(&c, GGUF_E_OFFSET, "tensor %s: offset %" PRIu64 " is past the end of the file (%" PRIu64
               " data bytes)", t->name, t->offset, data_size);
      goto bad;
    }
    if (t->size > data_size - t->offset) {
      r = fail(&c, GGUF_E_OFFSET, "truncated data: tensor %s: bytes [%" PRIu64 ", +%" PRIu64
               ") of the data section run past the end of the file (%" PRIu64 " data bytes)",
               t->name, t->offset, t->size, data_size);
      goto bad;
    }
  }
  /* duplicate names: sort pointers, compare neighbours */
  if (out->tensor_count > 1) {
    const struct gguf_tensor **sorted = malloc(sizeof(*sorted) * out->tensor_count);
    if (!sorted) {
      r = fail(&c, GGUF_E_NO_MEMORY, "out of memory");
      goto bad;
    }
    for (uint32_t i = 0; i < out->tensor_count; i++)
      sorted[i] = &out->tensors[i];
    qsort(sorted, out->tensor_count, sizeof(*sorted), compare_names);
    for (uint32_t i = 1; i < out->tensor_count; i++)
      if (!strcmp(sorted[i]->name, sorted[i - 1]->name)) {
        r = fail(&c, GGUF_E_DUPLICATE, "two tensors are named %s", sorted[i]->name);
        free(sorted);
        goto bad;
      }
    free(sorted);
  }
  return GGUF_OK;
bad:
  gguf_close(out);
  return r;
}

void gguf_close(struct gguf_file *f) {
  if (!f)
    return;
  for (uint32_t i = 0; f->tensors && i < f->tensor_count; i++)
    free(f->tensors[i].converted);
  free(f->tensors);
  free(f->names);
  free(f->kvs);
  if (f->mapped && f->buf)
    munmap((void *)f->buf, f->size);
  memset(f, 0, sizeof(*f));
}

int gguf_open(const char *path, struct gguf_file *out, char *err, size_t err_size) {
  memset(out, 0, sizeof(*out));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(err, err_size, "%s: %s", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return GGUF_E_IO;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(err, err_size, "%s: %s, not a GGUF weights file", path,
             S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    return GGUF_E_IO;
  }
  if (st.st_size < 24) {
    close(fd);
    snprintf(err, err_size, "%s: truncated: %lld bytes, a GGUF header takes 24", path,
             (long long)st.st_size);
    return GGUF_E_TRUNCATED;
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    snprintf(err, err_size, "%s: mmap: %s", path, strerror(errno));
    return GGUF_E_IO;
  }
  char why[512];
  int r = gguf_parse(map, (size_t)st.st_size, out, why, sizeof(why));
  if (r) {
    munmap(map, (size_t)st.st_size);
    snprintf(err, err_size, "%s: %s", path, why);
    return r;
  }
  out->mapped = true;
  return GGUF_OK;
}

const struct gguf_tensor *gguf_find(const struct gguf_file *f, const char *name) {
  for (uint32_t i = 0; i < f->tensor_count; i++)
    if (!strcmp(f->tensors[i].name, name))
      return &f->tensors[i];
  return NULL;
}

const uint8_t *gguf_data(const struct gguf_file *f, const struct gguf_tensor *t) {
  return t->converted ? t->converted : f->buf + f->data_offset + t->offset;
}

uint64_t gguf_row_bytes(const struct gguf_tensor *t) {
  if (t->converted)
    return t->ne[0] / vkrt_type_block(t->type) * vkrt_type_size(t->type);
  return t->ne[0] / ggml_types[t->ggml_type].block * ggml_types[t->ggml_type].bytes;
}

uint32_t gguf_threads(void) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : cpus > (long)GGUF_MAX_THREADS ? GGUF_MAX_THREADS : (uint32_t)cpus;
}

void gguf_run_threads(void *(*fn)(void *), void *arg, uint32_t threads) {
  pthread_t tid[GGUF_MAX_THREADS];
  uint32_t started = 0;
  while (started + 1 < threads && started + 1 < GGUF_MAX_THREADS &&
         pthread_create(&tid[started], NULL, fn, arg) == 0)
    started++;
  fn(arg);
  for (uint32_t i = 0; i < started; i++)
    pthread_join(tid[i], NULL);
}

uint32_t gguf_ggml_block(uint32_t ggml) { return ggml < GGML_TYPE_COUNT ? ggml_types[ggml].block : 0; }
uint32_t gguf_ggml_block_bytes(uint32_t ggml) {
  return ggml < GGML_TYPE_COUNT ? ggml_types[ggml].bytes : 0;
}

/* ---- metadata getters ----------------------------------------------------------------- */

const struct gguf_kv *gguf_kv_find(const struct gguf_file *f, const char *key) {
  size_t n = strlen(key);
  for (uint64_t i = 0; f->kvs && i < f->kv_count; i++)
    if (f->kvs[i].key_len == n && !memcmp(f->kvs[i].key, key, n))
      return &f->kvs[i];
  return NULL;
}

int gguf_fail(char *err, size_t err_size, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && err_size)
    vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
  return code;
}

static const char *const kv_type_names[GGUF_KV_COUNT] = {
  "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

/* The entry of key, of type `type` (arrays: of element type elem, or any when elem is
 * GGUF_KV_COUNT). */
static int meta_find(const struct gguf_file *f, const char *key, uint32_t type, uint32_t elem,
                     const struct gguf_kv **out, char *err, size_t err_size) {
  const struct gguf_kv *kv = gguf_kv_find(f, key);
  *out = kv;
  if (!kv)
    return gguf_fail(err, err_size, GGUF_E_MISSING, "missing metadata key %s", key);
  if (kv->type != type)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s is a %s, expected a %s",
                     key, kv_type_names[kv->type], kv_type_names[type]);
  if (type == GGUF_KV_ARRAY && elem != GGUF_KV_COUNT && kv->elem_type != elem)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE,
                     "metadata key %s is an array of %s, expected an array of %s", key,
                     kv_type_names[kv->elem_type], kv_type_names[elem]);
  return GGUF_OK;
}

static bool is_int_type(uint32_t t) {
  return t <= GGUF_KV_I32 || t == GGUF_KV_U64 || t == GGUF_KV_I64;
}

/* An integer value of type t at p, as a signed 128-bit-safe pair (value fits in int64 unless
 * it is a u64 past INT64_MAX: *big). */
static int64_t int_at(const uint8_t *p, uint32_t t, bool *big) {
  uint64_t v = le(p, kv_scalar_size[t]);
  int bits = 8 * kv_scalar_size[t];
  *big = t == GGUF_KV_U64 && v > (uint64_t)INT64_MAX;
  bool is_signed = t == GGUF_KV_I8 || t == GGUF_KV_I16 || t == GGUF_KV_I32 || t == GGUF_KV_I64;
  if (is_signed && bits < 64 && (v >> (bits - 1)) & 1)
    v |= ~0ull << bits; /* sign-extend */
  return (int64_t)v;
}

static int meta_int(const struct gguf_file *f, const char *key, int64_t lo, int64_t hi,
                    int64_t *out, char *err, size_t err_size) {
  const struct gguf_kv *kv = gguf_kv_find(f, key);
  if (!kv)
    return gguf_fail(err, err_size, GGUF_E_MISSING, "missing metadata key %s", key);
  if (!is_int_type(kv->type))
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s is a %s, expected an integer",
                     key, kv_type_names[kv->type]);
  bool big;
  int64_t v = int_at(f->buf + kv->value, kv->type, &big);
  if (big || v < lo || v > hi)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s = %s%" PRId64
                     " is out of range [%" PRId64 ", %" PRId64 "]", key, big ? "(u64) " : "", v, lo, hi);
  *out = v;
  return GGUF_OK;
}

int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out, char *err,
                 size_t err_size) {
  int64_t v = 0;
  int r = meta_int(f, key, 0, UINT32_MAX, &v, err, err_size);
  *out = r ? 0 : (uint32_t)v;
  return r;
}

int gguf_get_i32(const struct gguf_file *f, const char *key, int32_t *out, char *err,
                 size_t err_size) {
  int64_t v = 0;
  int r = meta_int(f, key, INT32_MIN, INT32_MAX, &v, err, err_size);
  *out = r ? 0 : (int32_t)v;
  return r;
}

static double float_at(const uint8_t *p, uint32_t t) {
  if (t == GGUF_KV_F32) {
    uint32_t b = (uint32_t)le(p, 4);
    float v;
    memcpy(&v, &b, 4);
    return v;
  }
  uint64_t b = le(p, 8);
  double v;
  memcpy(&v, &b, 8);
  return v;
}

int gguf_get_f32(const struct gguf_file *f, const char *key, float *out, char *err,
                 size_t err_size) {
  *out = 0;
  const struct gguf_kv *kv = gguf_kv_find(f, key);
  if (!kv)
    return gguf_fail(err, err_size, GGUF_E_MISSING, "missing metadata key %s", key);
  if (kv->type != GGUF_KV_F32 && kv->type != GGUF_KV_F64)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s is a %s, expected a float",
                     key, kv_type_names[kv->type]);
  *out = (float)float_at(f->buf + kv->value, kv->type);
  return GGUF_OK;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, bool *out, char *err,
                  size_t err_size) {
  const struct gguf_kv *kv;
  *out = false;
  int r = meta_find(f, key, GGUF_KV_BOOL, 0, &kv, err, err_size);
  if (!r)
    *out = f->buf[kv->value] != 0;
  return r;
}

int gguf_get_string(const struct gguf_file *f, const char *key, const char **s, uint64_t *len,
                    char *err, size_t err_size) {
  const struct gguf_kv *kv;
  *s = NULL, *len = 0;
  int r = meta_find(f, key, GGUF_KV_STRING, 0, &kv, err, err_size);
  if (!r) {
    *len = le(f->buf + kv->value, 8);
    *s = (const char *)f->buf + kv->value + 8;
  }
  return r;
}

int gguf_get_array_len(const struct gguf_file *f, const char *key, uint32_t elem,
                       uint64_t *count, char *err, size_t err_size) {
  const struct gguf_kv *kv;
  *count = 0;
  int r = meta_find(f, key, GGUF_KV_ARRAY, elem, &kv, err, err_size);
  if (!r)
    *count = kv->count;
  return r;
}

/* The array of key with exactly n elements. */
static int meta_array(const struct gguf_file *f, const char *key, uint32_t elem, uint64_t n,
                      const struct gguf_kv **kv, char *err, size_t err_size) {
  int r = meta_find(f, key, GGUF_KV_ARRAY, elem, kv, err, err_size);
  if (!r && (*kv)->count != n)
    r = gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s has %" PRIu64
                  " elements, expected %" PRIu64, key, (*kv)->count, n);
  return r;
}

int gguf_get_array_str(const struct gguf_file *f, const char *key, struct gguf_str *out,
                       uint64_t n, char *err, size_t err_size) {
  const struct gguf_kv *kv;
  int r = meta_array(f, key, GGUF_KV_STRING, n, &kv, err, err_size);
  /* the parse checked every length against the file */
  for (uint64_t i = 0, at = r ? 0 : kv->value; !r && i < n; i++) {
    out[i].len = le(f->buf + at, 8);
    out[i].s = (const char *)f->buf + at + 8;
    at += 8 + out[i].len;
  }
  return r;
}

int gguf_get_array_f32(const struct gguf_file *f, const char *key, float *out, uint64_t n,
                       char *err, size_t err_size) {
  const struct gguf_kv *kv;
  int r = meta_array(f, key, GGUF_KV_COUNT, n, &kv, err, err_size);
  if (!r && kv->elem_type != GGUF_KV_F32 && kv->elem_type != GGUF_KV_F64)
    r = gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s is an array of %s, expected "
                  "floats", key, kv_type_names[kv->elem_type]);
  for (uint64_t i = 0; !r && i < n; i++)
    out[i] = (float)float_at(f->buf + kv->value + i * kv_scalar_size[kv->elem_type], kv->elem_type);
  return r;
}

int gguf_get_array_i32(const struct gguf_file *f, const char *key, int32_t *out, uint64_t n,
                       char *err, size_t err_size) {
  const struct gguf_kv *kv;
  int r = meta_array(f, key, GGUF_KV_COUNT, n, &kv, err, err_size);
  if (!r && !is_int_type(kv->elem_type))
    r = gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s is an array of %s, expected "
                  "integers", key, kv_type_names[kv->elem_type]);
  for (uint64_t i = 0; !r && i < n; i++) {
    bool big;
    int64_t v = int_at(f->buf + kv->value + i * kv_scalar_size[kv->elem_type], kv->elem_type, &big);
    if (big || v < INT32_MIN || v > INT32_MAX)
      r = gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "metadata key %s: element %" PRIu64
                    " = %" PRId64 " does not fit an int32", key, i, v);
    else
      out[i] = (int32_t)v;
  }
  return r;
}

/* One MLP tensor of layer l: present, supported, 2-D {ne0, ne1}. */
static int mlp_tensor(const struct gguf_file *f, uint32_t l, const char *which, uint64_t ne0,
                      uint64_t ne1, const struct gguf_tensor **out, char *err, size_t err_size) {
  char name[64];
  snprintf(name, sizeof(name), "blk.%u.%s.weight", l, which);
  const struct gguf_tensor *t = gguf_find(f, name);
  if (!t) {
    snprintf(err, err_size, "missing tensor %s", name);
    return GGUF_E_MISSING;
  }
  if (!t->supported) {
    snprintf(err, err_size, "tensor %s has ggml type %u; vkrt-service loads f32, f16, q8_0, q4_K and q6_K",
             name, t->ggml_type);
    return GGUF_E_TYPE;
  }
  if (t->ne[2] != 1 || t->ne[3] != 1 || (ne0 && t->ne[0] != ne0) || (ne1 && t->ne[1] != ne1)) {
    snprintf(err, err_size, "tensor %s has ne {%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
             "}, expected {%" PRIu64 ", %" PRIu64 "}", name, t->ne[0], t->ne[1], t->ne[2], t->ne[3],
             ne0, ne1);
    return GGUF_E_MISSING;
  }
  if (t->ne[0] > UINT32_MAX / 2 || t->ne[1] > UINT32_MAX / 2) {
    snprintf(err, err_size, "tensor %s is too large for this example", name);
    return GGUF_E_OVERFLOW;
  }
  *out = t;
  return GGUF_OK;
}

int gguf_mlp(const struct gguf_file *f, struct gguf_mlp *out, char *err, size_t err_size) {
  memset(out, 0, sizeof(*out));
  uint32_t layers = 0;
  char name[64];
  while (layers < GGUF_MAX_LAYERS) {
    snprintf(name, sizeof(name), "blk.%u.ffn_gate.weight", layers);
    if (!gguf_find(f, name))
      break;
    layers++;
  }
  if (!layers) {
    snprintf(err, err_size, "missing tensor blk.0.ffn_gate.weight (no llama-style MLP)");
    return GGUF_E_MISSING;
  }
  int r = mlp_tensor(f, 0, "ffn_gate", 0, 0, &out->gate[0], err, err_size);
  if (r)
    return r;
  out->hidden = (uint32_t)out->gate[0]->ne[0];
  out->ffn = (uint32_t)out->gate[0]->ne[1];
  for (uint32_t l = 0; l < layers; l++)
    if ((r = mlp_tensor(f, l, "ffn_gate", out->hidden, out->ffn, &out->gate[l], err, err_size)) ||
        (r = mlp_tensor(f, l, "ffn_up", out->hidden, out->ffn, &out->up[l], err, err_size)) ||
        (r = mlp_tensor(f, l, "ffn_down", out->ffn, out->hidden, &out->down[l], err, err_size)))
      return r;
  out->layers = layers;
  return GGUF_OK;
}

/* ---- writer ------------------------------------------------------------------------- */

static void put(struct gguf_writer *w, const void *p, size_t n) {
  if (w->ok && fwrite(p, 1, n, w->f) != n)
    w->ok = false, w->error = errno;
  w->pos += n;
}
static void put_u(struct gguf_writer *w, uint64_t v, int n) {
  uint8_t b[8];
  for (int i = 0; i < n; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  put(w, b, (size_t)n);
}

int gguf_writer_open(struct gguf_writer *w, const char *path, uint64_t n_tensors, uint64_t n_kv,
                     char *err, size_t err_size) {
  *w = (struct gguf_writer){.f = fopen(path, "wb"), .ok = true};
  if (!w->f)
    return gguf_fail(err, err_size, GGUF_E_IO, "%s: %s", path, strerror(errno));
  put_u(w, GGUF_MAGIC, 4);
  put_u(w, GGUF_VERSION, 4);
  put_u(w, n_tensors, 8);
  put_u(w, n_kv, 8);
  gguf_writer_kv_u32(w, "general.alignment", GGUF_DEFAULT_ALIGNMENT); /* the first of n_kv */
  return GGUF_OK;
}

void gguf_writer_str(struct gguf_writer *w, const char *s, size_t len) {
  put_u(w, len, 8);
  put(w, s, len);
}
void gguf_writer_u32(struct gguf_writer *w, uint32_t v) { put_u(w, v, 4); }
void gguf_writer_f32(struct gguf_writer *w, float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  put_u(w, b, 4);
}
static void put_key(struct gguf_writer *w, const char *key, uint32_t type) {
  gguf_writer_str(w, key, strlen(key));
  put_u(w, type, 4);
}
void gguf_writer_kv_u32(struct gguf_writer *w, const char *key, uint32_t v) {
  put_key(w, key, GGUF_KV_U32);
  put_u(w, v, 4);
}
void gguf_writer_kv_bool(struct gguf_writer *w, const char *key, bool v) {
  put_key(w, key, GGUF_KV_BOOL);
  put_u(w, v, 1);
}
void gguf_writer_kv_f32(struct gguf_writer *w, const char *key, float v) {
  put_key(w, key, GGUF_KV_F32);
  gguf_writer_f32(w, v);
}
void gguf_writer_kv_str(struct gguf_writer *w, const char *key, const char *v) {
  put_key(w, key, GGUF_KV_STRING);
  gguf_writer_str(w, v, strlen(v));
}
void gguf_writer_kv_array(struct gguf_writer *w, const char *key, uint32_t elem_type,
                          uint64_t count) {
  put_key(w, key, GGUF_KV_ARRAY);
  put_u(w, elem_type, 4);
  put_u(w, count, 8);
}

static const uint32_t ggml_id[VKRT_TYPE_COUNT] = {
  [VKRT_TYPE_F32] = GGML_TYPE_F32, [VKRT_TYPE_F16] = GGML_TYPE_F16,
  [VKRT_TYPE_Q8_0] = GGML_TYPE_Q8_0, [VKRT_TYPE_Q4_K] = GGML_TYPE_Q4_K,
  [VKRT_TYPE_Q6_K] = GGML_TYPE_Q6_K};

uint32_t gguf_ggml_id(vkrt_type type) { return ggml_id[type]; }

uint64_t gguf_writer_tensor_info(struct gguf_writer *w, const char *name, uint64_t ne0,
                                 uint64_t ne1, vkrt_type type) {
  return gguf_writer_tensor_info_ggml(w, name, ne0, ne1, ggml_id[type]);
}

uint64_t gguf_writer_tensor_info_ggml(struct gguf_writer *w, const char *name, uint64_t ne0,
                                      uint64_t ne1, uint32_t ggml) {
  gguf_writer_str(w, name, strlen(name));
  put_u(w, ne1 ? 2 : 1, 4);
  put_u(w, ne0, 8);
  if (ne1)
    put_u(w, ne1, 8);
  put_u(w, ggml, 4);
  put_u(w, w->data_offset, 8);
  uint64_t row = ne0 / ggml_types[ggml].block * ggml_types[ggml].bytes, bytes = row * (ne1 ? ne1 : 1);
  w->data_offset += (bytes + GGUF_DEFAULT_ALIGNMENT - 1) / GGUF_DEFAULT_ALIGNMENT * GGUF_DEFAULT_ALIGNMENT;
  return row;
}

void gguf_writer_data(struct gguf_writer *w, const void *p, size_t n) { put(w, p, n); }

void gguf_writer_align(struct gguf_writer *w) {
  static const uint8_t zeros[64];
  while (w->pos % GGUF_DEFAULT_ALIGNMENT)
    put(w, zeros, (size_t)MIN(GGUF_DEFAULT_ALIGNMENT - w->pos % GGUF_DEFAULT_ALIGNMENT, sizeof(zeros)));
}

int gguf_writer_close(struct gguf_writer *w, const char *path, char *err, size_t err_size) {
  if (w->f && fclose(w->f) != 0 && w->ok)
    w->ok = false, w->error = errno;
  w->f = NULL;
  if (!w->ok)
    return gguf_fail(err, err_size, GGUF_E_IO, "%s: write failed: %s", path, strerror(w->error));
  return GGUF_OK;
}

void gguf_synth_row(uint8_t *out, vkrt_type type, uint64_t K, uint64_t *s) {
  float amp = 1.0f / sqrtf((float)K);
  switch (type) {
  case VKRT_TYPE_F32:
  case VKRT_TYPE_F16:
    for (uint64_t k = 0; k < K; k++) {
      float v = ((float)(vkrt_xorshift(s) >> 40) / (float)(1 << 24) * 2.0f - 1.0f) * 1.7f * amp;
      if (type == VKRT_TYPE_F32)
        memcpy(out + 4 * k, &v, 4);
      else {
        uint16_t h = vkrt_f32_to_f16(v);
        memcpy(out + 2 * k, &h, 2);
      }
    }
    break;
  case VKRT_TYPE_Q8_0: /* q uniform in [-127, 127] (sd ~73), d ~ amp / 73 */
    for (uint64_t b = 0; b < K / 32; b++) {
      uint8_t *p = out + 34 * b;
      uint16_t d = vkrt_f32_to_f16(amp / 73.0f * (0.75f + (float)(vkrt_xorshift(s) >> 62) * 0.25f));
      p[0] = (uint8_t)d, p[1] = (uint8_t)(d >> 8);
      for (int i = 0; i < 32; i++)
        p[2 + i] = (uint8_t)(int8_t)((int)(vkrt_xorshift(s) % 255) - 127);
    }
    break;
  case VKRT_TYPE_Q4_K: /* w = d sc (q - 7.5) with dmin = 7.5 d and min = scale: centred */
    for (uint64_t b = 0; b < K / 256; b++) {
      uint8_t *p = out + 144 * b;
      float d = amp / (48.0f * 4.6f);
      uint16_t hd = vkrt_f32_to_f16(d), hm = vkrt_f32_to_f16(7.5f * d);
      p[0] = (uint8_t)hd, p[1] = (uint8_t)(hd >> 8), p[2] = (uint8_t)hm, p[3] = (uint8_t)(hm >> 8);
      uint8_t sc[8];
      for (int j = 0; j < 8; j++)
        sc[j] = (uint8_t)(32 + vkrt_xorshift(s) % 32);
      uint8_t *q = p + 4; /* the 6-bit packing of ggml's get_scale_min_k4, min = scale */
      for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((sc[j + 4] & 15) << 4));
      }
      for (int i = 0; i < 128; i++)
        p[16 + i] = (uint8_t)vkrt_xorshift(s);
    }
    break;
  case VKRT_TYPE_Q6_K: /* w = d sc q: q uniform in [-32, 31] (sd ~18.5), |sc| in [16, 48) of
                          either sign (rms ~33), so d ~ amp / (18.5 * 33) */
    for (uint64_t b = 0; b < K / 256; b++) {
      uint8_t *p = out + 210 * b;
      for (int i = 0; i < 192; i++) /* ql[128], qh[64] */
        p[i] = (uint8_t)vkrt_xorshift(s);
      for (int j = 0; j < 16; j++) {
        uint64_t r = vkrt_xorshift(s);
        int v = 16 + (int)(r % 32);
        p[192 + j] = (uint8_t)(int8_t)(r >> 63 ? -v : v);
      }
      uint16_t hd = vkrt_f32_to_f16(amp / (18.5f * 33.0f));
      p[208] = (uint8_t)hd, p[209] = (uint8_t)(hd >> 8);
    }
    break;
  default:
    break;
  }
}

int gguf_write_mlp(const char *path, uint32_t layers, uint32_t hidden, uint32_t ffn,
                   vkrt_type type, uint64_t seed, char *err, size_t err_size) {
  uint32_t block = vkrt_type_block(type);
  if (!block || type == VKRT_TYPE_I32 || !layers || layers > GGUF_MAX_LAYERS || !hidden || !ffn ||
      hidden % block || ffn % block)
    return gguf_fail(err, err_size, GGUF_E_BAD_VALUE, "bad shape for %s: layers %u (1..%u), hidden "
                     "%u and ffn %u must be multiples of the %u-element block", vkrt_type_str(type),
                     layers, GGUF_MAX_LAYERS, hidden, ffn, block);
  uint8_t *row = malloc((uint64_t)MAX(hidden, ffn) / block * vkrt_type_size(type));
  if (!row)
    return gguf_fail(err, err_size, GGUF_E_NO_MEMORY, "out of memory");
  struct gguf_writer w;
  int r = gguf_writer_open(&w, path, 3ull * layers, 6, err, err_size);
  if (r) {
    free(row);
    return r;
  }
  gguf_writer_kv_str(&w, "general.architecture", "llama");
  gguf_writer_kv_str(&w, "general.name", "vkrt-service synthetic MLP");
  gguf_writer_kv_u32(&w, "llama.block_count", layers);
  gguf_writer_kv_u32(&w, "llama.embedding_length", hidden);
  gguf_writer_kv_u32(&w, "llama.feed_forward_length", ffn);
  static const char *const which[] = {"ffn_gate", "ffn_up", "ffn_down"};
  for (uint32_t l = 0; l < layers; l++)
    for (int m = 0; m < 3; m++) {
      char name[64];
      snprintf(name, sizeof(name), "blk.%u.%s.weight", l, which[m]);
      gguf_writer_tensor_info(&w, name, m < 2 ? hidden : ffn, m < 2 ? ffn : hidden, type);
    }
  gguf_writer_align(&w);
  uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint32_t l = 0; l < layers; l++)
    for (int m = 0; m < 3; m++) {
      uint64_t K = m < 2 ? hidden : ffn, N = m < 2 ? ffn : hidden;
      for (uint64_t n = 0; n < N; n++) {
        gguf_synth_row(row, type, K, &rng);
        gguf_writer_data(&w, row, (size_t)(K / block * vkrt_type_size(type)));
      }
      gguf_writer_align(&w);
    }
  free(row);
  return gguf_writer_close(&w, path, err, err_size);
}
