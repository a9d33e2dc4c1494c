/* The synthetic weights file vkrt-service reads: a 4 KiB header, then per layer W1
 * (ne = {hidden, ffn}) and W2 (ne = {ffn, hidden}) in ggml layout, f16 or f32. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEIGHTS_MAGIC "VKRTWTS1"
#define WEIGHTS_HEADER_SIZE 4096u

struct weights_header {
  char magic[8];
  uint32_t version;   /* 1 */
  uint32_t layers;
  uint32_t hidden;
  uint32_t ffn;
  uint32_t dtype;     /* 0 f32, 1 f16 (vkrt_type) */
  uint32_t reserved;
  uint64_t seed;
  uint64_t data_offset; /* WEIGHTS_HEADER_SIZE */
  uint64_t data_size;
  uint64_t checksum;    /* FNV-1a 64 of the data */
};

struct weights_file {
  struct weights_header h;
  const uint8_t *map;   /* whole file, read-only MAP_PRIVATE */
  size_t map_size;
  const uint8_t *data;  /* map + data_offset */
};

size_t weights_type_size(uint32_t dtype);
uint64_t weights_matrix_bytes(const struct weights_header *h);  /* one W1 (== one W2) */
/* Writes a deterministic file. Returns 0 or prints why and returns non-zero. */
int weights_make(const char *path, uint32_t layers, uint32_t hidden, uint32_t ffn,
                 uint32_t dtype, uint64_t seed);
/* Maps and validates (magic, version, shapes, size, checksum). Prints why on failure. */
int weights_open(const char *path, struct weights_file *out);
void weights_close(struct weights_file *w);
/* Element (k, n) of layer l's W1 (which = 0) or W2 (which = 1) as float. */
float weights_get(const struct weights_file *w, uint32_t layer, int which, uint64_t k, uint64_t n);
/* Deterministic input activation for token t. */
void weights_input(uint64_t seed, uint64_t token, float *x, uint32_t hidden);
