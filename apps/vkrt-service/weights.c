#include "weights.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

size_t weights_type_size(uint32_t dtype) { return dtype == 1 ? 2 : 4; }

uint64_t weights_matrix_bytes(const struct weights_header *h) {
  return (uint64_t)h->hidden * h->ffn * weights_type_size(h->dtype);
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rand_unit(uint64_t *s) { return (float)((splitmix(s) >> 40) * 0x1p-24 * 2.0 - 1.0); }

static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) { /* subnormal or zero, round to nearest */
    if (exp < -10)
      return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      half++;
    return (uint16_t)(sign | half);
  }
  if (exp >= 31)
    return (uint16_t)(sign | 0x7c00);
  uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    half++;
  return (uint16_t)half;
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (exp == 0) {
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  if (exp == 31)
    x = sign | 0x7f800000 | (mant << 13);
  else
    x = sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint64_t fnv1a(const uint8_t *p, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  /* Word-at-a-time variant: fast enough for multi-GiB files, still order-sensitive. */
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    h = (h ^ v) * 0x100000001b3ull;
  }
  for (; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

int weights_make(const char *path, uint32_t layers, uint32_t hidden, uint32_t ffn,
                 uint32_t dtype, uint64_t seed) {
  if (layers == 0 || hidden == 0 || ffn == 0 || layers > 4096 || hidden > (1u << 20) ||
      ffn > (1u << 20)) {
    fprintf(stderr, "vkrt-service: --make-weights: layers, hidden and ffn must be 1..4096, "
                    "1..2^20, 1..2^20\n");
    return 2;
  }
  struct weights_header h = {.version = 1, .layers = layers, .hidden = hidden, .ffn = ffn,
                             .dtype = dtype, .seed = seed, .data_offset = WEIGHTS_HEADER_SIZE};
  memcpy(h.magic, WEIGHTS_MAGIC, 8);
  uint64_t matrix = weights_matrix_bytes(&h);
  h.data_size = matrix * 2 * layers;
  size_t es = weights_type_size(dtype);
  uint8_t *buf = malloc(matrix);
  if (!buf) {
    fprintf(stderr, "vkrt-service: out of memory for one %llu-byte matrix\n", (unsigned long long)matrix);
    return 4;
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "vkrt-service: cannot create %s: %s\n", path, strerror(errno));
    free(buf);
    return 3;
  }
  uint8_t header[WEIGHTS_HEADER_SIZE] = {0};
  fwrite(header, 1, sizeof(header), f); /* rewritten with the checksum at the end */
  uint64_t state = seed;
  /* Scale so activations stay O(1) through layers: |W| ~ 1/sqrt(fan-in). */
  float scale1 = 1.0f / sqrtf((float)hidden), scale2 = 1.0f / sqrtf((float)ffn);
  for (uint32_t l = 0; l < layers; l++) {
    for (int which = 0; which < 2; which++) {
      uint64_t n = matrix / es;
      float scale = which == 0 ? scale1 : scale2;
      for (uint64_t i = 0; i < n; i++) {
        float v = rand_unit(&state) * scale;
        if (es == 2) {
          uint16_t hv = f32_to_f16(v);
          memcpy(buf + i * 2, &hv, 2);
        } else {
          memcpy(buf + i * 4, &v, 4);
        }
      }
      if (fwrite(buf, 1, matrix, f) != matrix) {
        fprintf(stderr, "vkrt-service: write to %s failed: %s\n", path, strerror(errno));
        fclose(f);
        free(buf);
        return 3;
      }
    }
  }
  free(buf);
  fclose(f);
  /* Checksum from the file itself so it is computed exactly as weights_open does. */
  int fd = open(path, O_RDWR);
  if (fd < 0) {
    fprintf(stderr, "vkrt-service: reopen %s: %s\n", path, strerror(errno));
    return 3;
  }
  size_t total = (size_t)(h.data_offset + h.data_size);
  uint8_t *map = mmap(NULL, total, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    fprintf(stderr, "vkrt-service: mmap %s: %s\n", path, strerror(errno));
    close(fd);
    return 3;
  }
  h.checksum = fnv1a(map + h.data_offset, h.data_size);
  munmap(map, total);
  memcpy(header, &h, sizeof(h));
  if (pwrite(fd, header, sizeof(header), 0) != (ssize_t)sizeof(header)) {
    fprintf(stderr, "vkrt-service: header write failed: %s\n", strerror(errno));
    close(fd);
    return 3;
  }
  close(fd);
  return 0;
}

int weights_open(const char *path, struct weights_file *out) {
  memset(out, 0, sizeof(*out));
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    fprintf(stderr, "vkrt-service: cannot open weights %s: %s\n", path, strerror(errno));
    return 3;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)WEIGHTS_HEADER_SIZE) {
    fprintf(stderr, "vkrt-service: %s: too small for a weights header (%lld bytes, need %u)\n",
            path, (long long)st.st_size, WEIGHTS_HEADER_SIZE);
    close(fd);
    return 3;
  }
  uint8_t *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    fprintf(stderr, "vkrt-service: mmap %s: %s\n", path, strerror(errno));
    return 3;
  }
  struct weights_header h;
  memcpy(&h, map, sizeof(h));
  const char *why = NULL;
  uint64_t need = 0;
  if (memcmp(h.magic, WEIGHTS_MAGIC, 8) != 0)
    why = "not a vkrt weights file (bad magic)";
  else if (h.version != 1)
    why = "unsupported weights file version";
  else if (h.layers == 0 || h.hidden == 0 || h.ffn == 0 || h.dtype > 1 ||
           h.data_offset != WEIGHTS_HEADER_SIZE)
    why = "corrupt header (zero shape, unknown dtype or bad data offset)";
  else if (__builtin_mul_overflow(weights_matrix_bytes(&h), 2ull * h.layers, &need) ||
           need != h.data_size)
    why = "header sizes disagree with the shapes";
  else if ((uint64_t)st.st_size < h.data_offset + h.data_size)
    why = "file is truncated";
  if (why) {
    fprintf(stderr, "vkrt-service: %s: %s (file %lld bytes, header says %llu)\n", path, why,
            (long long)st.st_size, (unsigned long long)(h.data_offset + h.data_size));
    munmap(map, (size_t)st.st_size);
    return 3;
  }
  uint64_t sum = fnv1a(map + h.data_offset, h.data_size);
  if (sum != h.checksum) {
    fprintf(stderr, "vkrt-service: %s: checksum mismatch (corrupt weights)\n", path);
    munmap(map, (size_t)st.st_size);
    return 3;
  }
  out->h = h;
  out->map = map;
  out->map_size = (size_t)st.st_size;
  out->data = map + h.data_offset;
  return 0;
}

void weights_close(struct weights_file *w) {
  if (w->map)
    munmap((void *)w->map, w->map_size);
  memset(w, 0, sizeof(*w));
}

float weights_get(const struct weights_file *w, uint32_t layer, int which, uint64_t k, uint64_t n) {
  const struct weights_header *h = &w->h;
  uint64_t matrix = weights_matrix_bytes(h);
  uint64_t ne0 = which == 0 ? h->hidden : h->ffn; /* K is the inner dim */
  const uint8_t *base = w->data + matrix * (2ull * layer + (uint64_t)which);
  uint64_t idx = n * ne0 + k;
  if (h->dtype == 1) {
    uint16_t v;
    memcpy(&v, base + idx * 2, 2);
    return f16_to_f32(v);
  }
  float v;
  memcpy(&v, base + idx * 4, 4);
  return v;
}

void weights_input(uint64_t seed, uint64_t token, float *x, uint32_t hidden) {
  uint64_t s = seed ^ (0x5851f42d4c957f2dull * (token + 1));
  for (uint32_t i = 0; i < hidden; i++)
    x[i] = rand_unit(&s);
}
