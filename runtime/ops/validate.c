/* Pure descriptor validation for the ops (see validate.h). */
#include "ops/validate.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "device/device.h"

#define FAIL(...)                                \
  do {                                           \
    vkrt_format(why, why_size, __VA_ARGS__);     \
    return false;                                \
  } while (0)

static const char *type_name(vkrt_type type) { return vkrt_type_str(type); }

/* A shape in a message: "... ne " NE_FMT "...", NE(t) */
#define NE_FMT "{%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "}"
#define NE(t) (t)->ne[0], (t)->ne[1], (t)->ne[2], (t)->ne[3]

static void format_ne(char *buf, size_t size, const int64_t ne[4]) {
  vkrt_format(buf, size, "{%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "}", ne[0], ne[1],
              ne[2], ne[3]);
}

/* x / d and x % d (d >= 1): a shift and a mask when d is a power of two (the element sizes
 * 2 and 4, every offset alignment), a division only for the block sizes 34 and 144 — the
 * view check runs on every op call. */
static inline uint64_t div_by(uint64_t x, uint64_t d) {
  return d & (d - 1) ? x / d : x >> __builtin_ctzll(d);
}
static inline uint64_t mod_by(uint64_t x, uint64_t d) { return d & (d - 1) ? x % d : x & (d - 1); }

bool vkrt_ops_bind_range(const struct vkrt_ops_limits *lim, uint64_t lo, uint64_t hi,
                         uint64_t *bind_offset, uint64_t *bind_range) {
  uint64_t align = lim->min_storage_buffer_offset_alignment ? lim->min_storage_buffer_offset_alignment : 1;
  *bind_offset = lo - mod_by(lo, align);
  *bind_range = hi - *bind_offset;
  return hi > lo && *bind_range <= lim->max_storage_buffer_range;
}

bool vkrt_ops_view_init(struct vkrt_ops_view *out, const struct vkrt_ops_limits *lim,
                        const char *op, const char *name, const vkrt_tensor *t, bool writable,
                        char *why, size_t why_size) {
  memset(out, 0, sizeof(*out));
  if (!t)
    FAIL("%s: %s is NULL", op, name);
  if (!t->buffer)
    FAIL("%s: %s has no buffer", op, name);
  if ((unsigned)t->type >= VKRT_TYPE_COUNT)
    FAIL("%s: %s has invalid type %d", op, name, (int)t->type);
  uint64_t ts = vkrt_type_size(t->type);
  uint32_t block = vkrt_type_block(t->type);
  out->buffer = t->buffer;
  out->type = t->type;
  out->type_size = (uint32_t)ts;
  out->block = block;
  /* Block types: the checks below run on blocks (ne[0] / block of ts bytes each); views
   * keep offsets and strides in bytes since the offset need not be whole blocks. */
  int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
  uint64_t unit = ts;
  if (block > 1) {
    if (t->ne[0] < 1 || t->ne[0] % block)
      FAIL("%s: %s: ne[0] = %" PRId64 " is not a multiple of the %s block of %u elements", op,
           name, t->ne[0], type_name(t->type), block);
    if (t->nb[0] != (int64_t)ts)
      FAIL("%s: %s: nb[0] = %" PRId64 " must be the %s block size %" PRIu64
           " (blocks are dense along dim 0)", op, name, t->nb[0], type_name(t->type), ts);
    uint64_t align = t->type == VKRT_TYPE_Q4_K ? 4 : 2; /* Q8_0, Q6_K: 2-byte granules */
    if (t->offset % align)
      FAIL("%s: %s: offset %" PRIu64 " is not a multiple of %" PRIu64 " bytes (%s)", op, name,
           t->offset, align, type_name(t->type));
    ne[0] = t->ne[0] / block;
    unit = 1;
  }

  uint64_t elements = 1, last = 0;
  for (int i = 0; i < 4; i++) {
    if (t->ne[i] < 1)
      FAIL("%s: %s: ne[%d] = %" PRId64 ": sizes must be >= 1", op, name, i, t->ne[i]);
    if (t->ne[i] > UINT32_MAX)
      FAIL("%s: %s: ne[%d] = %" PRId64 " does not fit 32 bits", op, name, i, t->ne[i]);
    if (t->nb[i] < 0)
      FAIL("%s: %s: nb[%d] = %" PRId64 " is negative", op, name, i, t->nb[i]);
    if (mod_by((uint64_t)t->nb[i], ts))
      FAIL("%s: %s: nb[%d] = %" PRId64 " is not a multiple of the %s %ssize %" PRIu64, op,
           name, i, t->nb[i], type_name(t->type), block > 1 ? "block " : "", ts);
    uint64_t reach;
    if (!vkrt_mul_u64((uint64_t)(ne[i] - 1), (uint64_t)t->nb[i], &reach) ||
        !vkrt_add_u64(last, reach, &last))
      FAIL("%s: %s: ne[%d] * nb[%d] overflows", op, name, i, i);
    if (!vkrt_mul_u64(elements, (uint64_t)t->ne[i], &elements))
      FAIL("%s: %s: element count overflows", op, name);
    out->ne[i] = (uint32_t)t->ne[i];
  }
  if (elements > VKRT_OPS_MAX_ELEMENTS)
    FAIL("%s: %s has %" PRIu64 " elements, more than the 2^31 one op may touch", op, name,
         elements);
  out->elements = elements;
  if (block == 1 && mod_by(t->offset, ts))
    FAIL("%s: %s: offset %" PRIu64 " is not aligned to the %s size %" PRIu64, op, name,
         t->offset, type_name(t->type), ts);

  uint64_t hi;
  if (!vkrt_add_u64(t->offset, last, &hi) || !vkrt_add_u64(hi, ts, &hi))
    FAIL("%s: %s: offset + extent overflows", op, name);
  uint64_t size = t->buffer->size;
  if (hi > size)
    FAIL("%s: %s: touches bytes [%" PRIu64 ", %" PRIu64 ") past the end of its %" PRIu64
         "-byte buffer", op, name, t->offset, hi, size);
  out->lo = t->offset;
  out->hi = hi;
  /* The kernels index in 32-bit elements from the binding start. */
  out->fits_binding = vkrt_ops_bind_range(lim, out->lo, hi, &out->bind_offset, &out->bind_range) &&
                      div_by(out->bind_range, unit) <= UINT32_MAX;
  out->offset = (uint32_t)div_by(t->offset - out->bind_offset, unit);
  for (int i = 0; i < 4; i++) /* <= bind_range / unit when ne > 1 */
    out->stride[i] = (uint32_t)div_by((uint64_t)t->nb[i], unit);
  for (int i = 0; i < 4; i++)
    if (ne[i] == 1)
      out->stride[i] = 0; /* never multiplied by a nonzero index; keeps 32 bits honest */

  /* Dense with dim 0 innermost, ignoring dims of size 1. */
  uint64_t expect = ts;
  out->contiguous = true;
  for (int i = 0; i < 4; i++) {
    if (ne[i] == 1)
      continue;
    if ((uint64_t)t->nb[i] != expect)
      out->contiguous = false;
    expect *= (uint64_t)ne[i];
  }

  if (writable) {
    /* Order the dims of size > 1 by stride; each must step past everything below it. */
    int order[4], n = 0;
    for (int i = 0; i < 4; i++)
      if (ne[i] > 1)
        order[n++] = i;
    for (int i = 1; i < n; i++)
      for (int j = i; j > 0 && t->nb[order[j]] < t->nb[order[j - 1]]; j--) {
        int tmp = order[j];
        order[j] = order[j - 1];
        order[j - 1] = tmp;
      }
    uint64_t covered = ts; /* bytes spanned by the dims below */
    for (int i = 0; i < n; i++) {
      int d = order[i];
      if ((uint64_t)t->nb[d] < covered)
        FAIL("%s: %s: elements overlap (nb[%d] = %" PRId64 " < %" PRIu64
             " bytes spanned by the inner dims); the writes would race", op, name, d, t->nb[d],
             covered);
      covered = (uint64_t)t->nb[d] * (uint64_t)ne[d];
    }
  }
  return true;
}

/* Ops whose kernels take the tensor in one binding. */
static bool one_binding(const char *op, const char *name, const struct vkrt_ops_view *v,
                        const struct vkrt_ops_limits *lim, char *why, size_t why_size) {
  if (!v->fits_binding)
    FAIL("%s: %s spans %" PRIu64 " bytes, more than one binding may (maxStorageBufferRange %" PRIu64
         ", 2^32 elements)", op, name, v->bind_range, lim->max_storage_buffer_range);
  return true;
}

/* Block-quantized tensors are only matmul's w and copy's src (or a same-type dense copy). */
static bool plain(const char *op, const char *name, const struct vkrt_ops_view *v, char *why,
                  size_t why_size) {
  if (v->block > 1)
    FAIL("%s: %s is %s: block-quantized tensors are only taken as vkrt_op_matmul's w and "
         "vkrt_op_copy's src", op, name, type_name(v->type));
  return true;
}

static bool same_device(const char *op, const struct vkrt_ops_view *views, const char *const *names,
                        int count, char *why, size_t why_size) {
  for (int i = 1; i < count; i++) {
    const struct vkrt_device *a = views[i].buffer->dev, *b = views[0].buffer->dev;
    if (a && b && a->sys != b->sys)
      FAIL("%s: %s is a buffer of another appliance than %s's", op, names[i], names[0]);
    if (a != b)
      FAIL("%s: wrong device: %s is on dev%u but %s is on dev%u", op, names[i],
           views[i].buffer->dev ? views[i].buffer->dev->index : 0u, names[0],
           views[0].buffer->dev ? views[0].buffer->dev->index : 0u);
  }
  return true;
}

/* dst must not overlap a source (in-place would race between invocations). */
static bool disjoint(const char *op, const struct vkrt_ops_view *dst, const struct vkrt_ops_view *src,
                     const char *src_name, char *why, size_t why_size) {
  if (dst->buffer == src->buffer && dst->lo < src->hi && src->lo < dst->hi)
    FAIL("%s: dst bytes [%" PRIu64 ", %" PRIu64 ") overlap %s bytes [%" PRIu64 ", %" PRIu64
         ") of the same buffer; in-place is not supported", op, dst->lo, dst->hi, src_name,
         src->lo, src->hi);
  return true;
}

bool vkrt_ops_check_copy(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                         const vkrt_tensor *src, struct vkrt_ops_view views[2], char *why,
                         size_t why_size) {
  static const char *const op = "vkrt_op_copy";
  static const char *const names[] = {"dst", "src"};
  if (!vkrt_ops_view_init(&views[0], lim, op, "dst", dst, true, why, why_size) ||
      !vkrt_ops_view_init(&views[1], lim, op, "src", src, false, why, why_size) ||
      !same_device(op, views, names, 2, why, why_size))
    return false;
  if (memcmp(dst->ne, src->ne, sizeof(dst->ne))) {
    char a[96], b[96];
    format_ne(a, sizeof(a), dst->ne);
    format_ne(b, sizeof(b), src->ne);
    FAIL("%s: dst ne %s differs from src ne %s", op, a, b);
  }
  /* i32 (ids, positions) is moved, never converted: copies go i32 to i32, bit for bit */
  if ((dst->type == VKRT_TYPE_I32) != (src->type == VKRT_TYPE_I32))
    FAIL("%s: dst is %s but src is %s: i32 tensors are copied to i32 only (no conversion)", op,
         type_name(dst->type), type_name(src->type));
  bool dense = dst->type == src->type && views[0].contiguous && views[1].contiguous;
  if (!dense && !plain(op, "dst", &views[0], why, why_size))
    return false;
  if (!dense && (!one_binding(op, "dst", &views[0], lim, why, why_size) ||
                 !one_binding(op, "src", &views[1], lim, why, why_size)))
    return false;
  return disjoint(op, &views[0], &views[1], "src", why, why_size);
}

bool vkrt_ops_check_transpose(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                              const vkrt_tensor *src, struct vkrt_ops_view views[2], char *why,
                              size_t why_size) {
  static const char *const op = "vkrt_op_transpose";
  static const char *const names[] = {"dst", "src"};
  if (!vkrt_ops_view_init(&views[0], lim, op, "dst", dst, true, why, why_size) ||
      !vkrt_ops_view_init(&views[1], lim, op, "src", src, false, why, why_size) ||
      !same_device(op, views, names, 2, why, why_size) ||
      !plain(op, "dst", &views[0], why, why_size) || !plain(op, "src", &views[1], why, why_size))
    return false;
  if (dst->ne[0] != src->ne[1] || dst->ne[1] != src->ne[0] || dst->ne[2] != src->ne[2] ||
      dst->ne[3] != src->ne[3]) {
    char a[96], b[96];
    format_ne(a, sizeof(a), dst->ne);
    format_ne(b, sizeof(b), src->ne);
    FAIL("%s: dst ne %s is not src ne %s with dims 0 and 1 swapped", op, a, b);
  }
  if ((dst->type == VKRT_TYPE_I32) != (src->type == VKRT_TYPE_I32))
    FAIL("%s: dst is %s but src is %s: i32 tensors are moved to i32 only (no conversion)", op,
         type_name(dst->type), type_name(src->type));
  if (!one_binding(op, "dst", &views[0], lim, why, why_size) ||
      !one_binding(op, "src", &views[1], lim, why, why_size))
    return false;
  return disjoint(op, &views[0], &views[1], "src", why, why_size);
}

bool vkrt_ops_check_concat(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *a, const vkrt_tensor *b, int dim,
                           struct vkrt_ops_view views[3], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_concat";
  static const char *const names[] = {"dst", "a", "b"};
  if (dim < 0 || dim > 3)
    FAIL("%s: dim %d is not 0..3", op, dim);
  if (!vkrt_ops_view_init(&views[0], lim, op, "dst", dst, true, why, why_size) ||
      !vkrt_ops_view_init(&views[1], lim, op, "a", a, false, why, why_size) ||
      !vkrt_ops_view_init(&views[2], lim, op, "b", b, false, why, why_size) ||
      !same_device(op, views, names, 3, why, why_size) || !plain(op, "dst", &views[0], why, why_size))
    return false;
  if (a->type != dst->type || b->type != dst->type)
    FAIL("%s: types differ (dst %s, a %s, b %s)", op, type_name(dst->type), type_name(a->type),
         type_name(b->type));
  for (int i = 0; i < 4; i++) {
    bool ok = i == dim ? dst->ne[i] == a->ne[i] + b->ne[i]
                       : (a->ne[i] == dst->ne[i] && b->ne[i] == dst->ne[i]);
    if (!ok) {
      char d[96], x[96], y[96];
      format_ne(d, sizeof(d), dst->ne);
      format_ne(x, sizeof(x), a->ne);
      format_ne(y, sizeof(y), b->ne);
      FAIL("%s: shapes do not concatenate along dim %d: dst %s, a %s, b %s (mismatch in dim %d)",
           op, dim, d, x, y, i);
    }
  }
  for (int i = 0; i < 3; i++)
    if (!one_binding(op, names[i], &views[i], lim, why, why_size))
      return false;
  return disjoint(op, &views[0], &views[1], "a", why, why_size) &&
         disjoint(op, &views[0], &views[2], "b", why, why_size);
}

bool vkrt_ops_check_add(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                        const vkrt_tensor *const *srcs, uint32_t count,
                        struct vkrt_ops_view views[9], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_add";
  if (count < 1 || count > 8)
    FAIL("%s: %u sources; 1..8 are supported", op, count);
  if (!srcs)
    FAIL("%s: srcs is NULL", op);
  if (!vkrt_ops_view_init(&views[0], lim, op, "dst", dst, true, why, why_size))
    return false;
  if (!plain(op, "dst", &views[0], why, why_size))
    return false;
  if (dst->type != VKRT_TYPE_F32 && dst->type != VKRT_TYPE_F16)
    FAIL("%s: dst is %s; the op sums f32 or f16", op, type_name(dst->type));
  if (!views[0].contiguous)
    FAIL("%s: dst is not contiguous (the reduce kernel reads and writes dense ranges)", op);
  for (uint32_t i = 0; i < count; i++) {
    static const char *const src_names[8] = {"srcs[0]", "srcs[1]", "srcs[2]", "srcs[3]",
                                             "srcs[4]", "srcs[5]", "srcs[6]", "srcs[7]"};
    const char *name = src_names[i];
    struct vkrt_ops_view *v = &views[1 + i];
    if (!vkrt_ops_view_init(v, lim, op, name, srcs[i], false, why, why_size))
      return false;
    if (v->buffer->dev != views[0].buffer->dev)
      FAIL("%s: wrong device: %s is on dev%u but dst is on dev%u", op, name,
           v->buffer->dev ? v->buffer->dev->index : 0u,
           views[0].buffer->dev ? views[0].buffer->dev->index : 0u);
    if (srcs[i]->type != dst->type)
      FAIL("%s: %s is %s but dst is %s", op, name, type_name(srcs[i]->type),
           type_name(dst->type));
    if (memcmp(srcs[i]->ne, dst->ne, sizeof(dst->ne))) {
      char a[96], b[96];
      format_ne(a, sizeof(a), dst->ne);
      format_ne(b, sizeof(b), srcs[i]->ne);
      FAIL("%s: %s ne %s differs from dst ne %s", op, name, b, a);
    }
    if (!v->contiguous)
      FAIL("%s: %s is not contiguous (the reduce kernel reads dense ranges)", op, name);
    /* In place is fine when dst is exactly this source: each element is read, then
     * written, by one invocation. Any other overlap would race. */
    bool same = v->buffer == views[0].buffer && v->lo == views[0].lo;
    if (!same && !disjoint(op, &views[0], v, name, why, why_size))
      return false;
  }
  return true;
}

/* w past one binding: the matrix-vector path binds it in slices of whole rows (matmul.c;
 * at any M: past the tiled crossover too, as a logged fallback), when it is a plain 2-D
 * matrix of f16 or f32 and one row fits a binding. */
static bool w_in_row_slices(const struct vkrt_ops_limits *lim, const vkrt_tensor *w,
                            const struct vkrt_ops_view *v) {
  return !v->fits_binding && v->block == 1 && w->ne[2] == 1 && w->ne[3] == 1 &&
         (uint64_t)w->ne[0] * v->type_size +
                 2 * VKRT_MAX(lim->min_storage_buffer_offset_alignment, 16) <=
             lim->max_storage_buffer_range;
}

bool vkrt_ops_check_matmul(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *w, const vkrt_tensor *x,
                           struct vkrt_ops_view views[3], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_matmul";
  static const char *const names[] = {"dst", "w", "x"};
  if (!vkrt_ops_view_init(&views[0], lim, op, "dst", dst, true, why, why_size) ||
      !vkrt_ops_view_init(&views[1], lim, op, "w", w, false, why, why_size) ||
      !vkrt_ops_view_init(&views[2], lim, op, "x", x, false, why, why_size) ||
      !same_device(op, views, names, 3, why, why_size))
    return false;
  if (x->type != VKRT_TYPE_F32 || dst->type != VKRT_TYPE_F32)
    FAIL("%s: x and dst must be f32 (x %s, dst %s)", op, type_name(x->type),
         type_name(dst->type));
  if (w->type == VKRT_TYPE_I32)
    FAIL("%s: w is i32; weights are f32, f16, q8_0, q4_K or q6_K", op);
  /* shapes are formatted only into a failure's message: a call that passes prints nothing */
  if (w->ne[0] != x->ne[0])
    FAIL("%s: inner sizes differ: w ne " NE_FMT ", x ne " NE_FMT " (ne[0] is K)", op, NE(w),
         NE(x));
  if (dst->ne[0] != w->ne[1] || dst->ne[1] != x->ne[1] || dst->ne[2] != x->ne[2] ||
      dst->ne[3] != x->ne[3])
    FAIL("%s: dst ne " NE_FMT " must be {w.ne[1], x.ne[1], x.ne[2], x.ne[3]} (w " NE_FMT
         ", x " NE_FMT ")", op, NE(dst), NE(w), NE(x));
  if (x->ne[2] % w->ne[2] || x->ne[3] % w->ne[3])
    FAIL("%s: w batch dims " NE_FMT " do not divide x batch dims " NE_FMT
         " (broadcast needs a multiple)", op, NE(w), NE(x));
  bool w_rows = w_in_row_slices(lim, w, &views[1]);
  for (int i = 0; i < 3; i++)
    if (!(i == 1 && w_rows) && !one_binding(op, names[i], &views[i], lim, why, why_size))
      return false;
  return disjoint(op, &views[0], &views[1], "w", why, why_size) &&
         disjoint(op, &views[0], &views[2], "x", why, why_size);
}

bool vkrt_ops_check_swiglu(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *gate, const vkrt_tensor *up,
                           struct vkrt_ops_view views[3], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_swiglu";
  static const char *const names[] = {"dst", "gate", "up"};
  const vkrt_tensor *ts[3] = {dst, gate, up};
  for (int i = 0; i < 3; i++) {
    if (!vkrt_ops_view_init(&views[i], lim, op, names[i], ts[i], i == 0, why, why_size))
      return false;
    if (ts[i]->type != VKRT_TYPE_F32)
      FAIL("%s: %s is %s; the op takes f32", op, names[i], type_name(ts[i]->type));
    if (!views[i].contiguous)
      FAIL("%s: %s is not contiguous", op, names[i]);
    if (!one_binding(op, names[i], &views[i], lim, why, why_size))
      return false;
    if (i && memcmp(ts[i]->ne, dst->ne, sizeof(dst->ne))) {
      char a[96], b[96];
      format_ne(a, sizeof(a), dst->ne);
      format_ne(b, sizeof(b), ts[i]->ne);
      FAIL("%s: %s ne %s differs from dst ne %s", op, names[i], b, a);
    }
  }
  if (!same_device(op, views, names, 3, why, why_size))
    return false;
  for (int i = 1; i < 3; i++) { /* in place on exactly one source is fine */
    bool same = views[i].buffer == views[0].buffer && views[i].lo == views[0].lo;
    if (!same && !disjoint(op, &views[0], &views[i], names[i], why, why_size))
      return false;
  }
  return true;
}

int vkrt_ops_concat_fast_path_source(const struct vkrt_ops_view views[3], int dim,
                                     const char **why_not) {
  const char *dummy;
  if (!why_not)
    why_not = &dummy;
  *why_not = NULL;
  if (dim != 0) {
    *why_not = "not dim 0";
    return 0;
  }
  if (!views[0].contiguous) {
    *why_not = "dst not contiguous";
    return 0;
  }
  for (int s = 1; s <= 2; s++) {
    const struct vkrt_ops_view *t = &views[s], *other = &views[3 - s];
    /* Stored transposed: dim 1 innermost (stride 1 element) and dim 0 strided. */
    bool transposed = t->ne[1] > 1 && t->ne[0] > 1 && t->stride[1] == 1 && t->stride[0] != 1;
    if (transposed && other->contiguous)
      return s;
  }
  *why_not = "no source stored transposed with the other contiguous";
  return 0;
}

void vkrt_ops_linear_split(uint64_t groups, uint64_t first, uint32_t max_x, uint32_t max_y,
                           uint32_t *x, uint32_t *y) {
  uint64_t left = groups - first;
  uint64_t gx = left < max_x ? left : max_x;
  uint64_t gy = (left + gx - 1) / gx;
  if (gy > max_y)
    gy = max_y;
  *x = (uint32_t)gx;
  *y = (uint32_t)gy;
}

/* ---- transformer decode ops ------------------------------------------------------------ */

static bool of_type(const char *op, const char *name, const vkrt_tensor *t, vkrt_type type,
                    char *why, size_t why_size) {
  if (t->type != type)
    FAIL("%s: %s is %s; it must be %s", op, name, type_name(t->type), type_name(type));
  return true;
}

/* Dims from `dims` on must be 1 (the op's tensors have fewer). */
static bool at_most_dims(const char *op, const char *name, const vkrt_tensor *t, int dims,
                         char *why, size_t why_size) {
  for (int i = dims; i < 4; i++)
    if (t->ne[i] != 1) {
      char a[96];
      format_ne(a, sizeof(a), t->ne);
      FAIL("%s: %s ne %s: the op takes %d dim%s (ne[%d] must be 1)", op, name, a, dims,
           dims > 1 ? "s" : "", i);
    }
  return true;
}

/* A written view that may be its source exactly (same bytes, same layout: each element is
 * read, then written, by one invocation) but must not partly overlap it. */
static bool in_place_or_disjoint(const char *op, const vkrt_tensor *dst, const vkrt_tensor *src,
                                 const struct vkrt_ops_view *dv, const struct vkrt_ops_view *sv,
                                 const char *src_name, char *why, size_t why_size) {
  if (dst->buffer == src->buffer && dst->offset == src->offset &&
      !memcmp(dst->nb, src->nb, sizeof(dst->nb)))
    return true;
  if (dv->buffer == sv->buffer && dv->lo < sv->hi && sv->lo < dv->hi)
    FAIL("%s: dst bytes [%" PRIu64 ", %" PRIu64 ") overlap %s bytes [%" PRIu64 ", %" PRIu64
         ") without being %s exactly (same offset and strides)", op, dv->lo, dv->hi, src_name,
         sv->lo, sv->hi, src_name);
  return true;
}

static bool same_shape(const char *op, const char *a_name, const vkrt_tensor *a,
                       const char *b_name, const vkrt_tensor *b, char *why, size_t why_size) {
  if (memcmp(a->ne, b->ne, sizeof(a->ne))) {
    char x[96], y[96];
    format_ne(x, sizeof(x), a->ne);
    format_ne(y, sizeof(y), b->ne);
    FAIL("%s: %s ne %s differs from %s ne %s", op, a_name, x, b_name, y);
  }
  return true;
}

/* Views of `count` tensors (dst first, written), each in one binding, on one device. */
static bool decode_views(const struct vkrt_ops_limits *lim, const char *op,
                         const char *const *names, const vkrt_tensor *const *ts, int count,
                         struct vkrt_ops_view *views, char *why, size_t why_size) {
  for (int i = 0; i < count; i++)
    if (!vkrt_ops_view_init(&views[i], lim, op, names[i], ts[i], i == 0, why, why_size) ||
        !one_binding(op, names[i], &views[i], lim, why, why_size))
      return false;
  return same_device(op, views, names, count, why, why_size);
}

static bool rope_params_ok(const char *op, const vkrt_rope_params *params, int64_t head_dim,
                           const vkrt_tensor *factors, char *why, size_t why_size);

/* vkrt_matmul_fusion.qkv: views 4 pos, 5 k_cache, 6 v_cache (both written), 7 factors (pos's
 * view when there are none). */
static bool check_qkv_fusion(const struct vkrt_ops_limits *lim, const char *op,
                             const vkrt_tensor *w, const vkrt_tensor *x,
                             const vkrt_matmul_fusion *fusion, struct vkrt_ops_view views[8],
                             char *why, size_t why_size) {
  const vkrt_qkv_fusion *q = fusion->qkv;
  static const char *const names[] = {"dst", "w", "x", "fusion->norm", "qkv->pos",
                                      "qkv->k_cache", "qkv->v_cache", "qkv->rope_factors"};
  const vkrt_tensor *ts[8] = {NULL, NULL, NULL, NULL, q->pos, q->k_cache, q->v_cache,
                              q->rope_factors};
  if (fusion->swiglu)
    FAIL("%s: fusion->qkv and fusion->swiglu exclude each other (q/k/v rows, or gate/up "
         "pairs)", op);
  if (x->ne[1] != 1)
    FAIL("%s: fusion->qkv takes one column of x (a decode token), not %" PRId64, op, x->ne[1]);
  if (q->head_dim == 0 || q->head_dim % 32 || q->n_head == 0 || q->n_head_kv == 0)
    FAIL("%s: qkv->head_dim = %u must be a multiple of 32 and the head counts (%u, %u) >= 1",
         op, q->head_dim, q->n_head, q->n_head_kv);
  uint64_t rows = ((uint64_t)q->n_head + 2ull * q->n_head_kv) * q->head_dim;
  if ((uint64_t)w->ne[1] != rows)
    FAIL("%s: w has %" PRId64 " rows; fusion->qkv says (n_head %u + 2 x n_head_kv %u) x "
         "head_dim %u = %" PRIu64, op, w->ne[1], q->n_head, q->n_head_kv, q->head_dim, rows);
  if (q->rope.mode != VKRT_ROPE_NORMAL)
    FAIL("%s: qkv->rope.mode must be VKRT_ROPE_NORMAL (adjacent pairs stay in a block of 32 "
         "rows); use the separate ops for NEOX", op);
  if (!rope_params_ok(op, &q->rope, q->head_dim, q->rope_factors, why, why_size))
    return false;
  int count = q->rope_factors ? 8 : 7;
  for (int i = 4; i < count; i++)
    if (!vkrt_ops_view_init(&views[i], lim, op, names[i], ts[i], i == 5 || i == 6, why,
                            why_size) ||
        !one_binding(op, names[i], &views[i], lim, why, why_size))
      return false;
  if (!q->rope_factors)
    views[7] = views[4];
  if (!same_device(op, views, names, count, why, why_size) ||
      !of_type(op, "qkv->pos", q->pos, VKRT_TYPE_I32, why, why_size))
    return false;
  const vkrt_tensor *caches[2] = {q->k_cache, q->v_cache};
  for (int c = 0; c < 2; c++) {
    const vkrt_tensor *t = caches[c];
    const char *name = names[5 + c];
    if (t->type != VKRT_TYPE_F16 && t->type != VKRT_TYPE_Q8_0)
      FAIL("%s: %s is %s; the fused rows go to f16 or q8_0 caches", op, name, type_name(t->type));
    if (!at_most_dims(op, name, t, 2, why, why_size))
      return false;
    if ((uint64_t)t->ne[0] != (uint64_t)q->n_head_kv * q->head_dim)
      FAIL("%s: %s rows hold %" PRId64 " values, not n_head_kv %u x head_dim %u", op, name,
           t->ne[0], q->n_head_kv, q->head_dim);
    if (t->nb[0] != (int64_t)vkrt_type_size(t->type) || t->offset % 2 || t->nb[1] % 2)
      FAIL("%s: %s: rows must be dense and start 2-byte aligned (the kernel writes 16-bit "
           "words)", op, name);
    if (!disjoint(op, &views[5 + c], &views[0], "dst", why, why_size))
      return false;
    for (int i = 1; i < count; i++)
      if (i != 5 + c && !disjoint(op, &views[5 + c], &views[i], names[i], why, why_size))
        return false;
  }
  return true;
}

bool vkrt_ops_check_matmul_fused(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                                 const vkrt_tensor *w, const vkrt_tensor *x,
                                 const vkrt_matmul_fusion *fusion, struct vkrt_ops_view views[8],
                                 char *why, size_t why_size) {
  static const char *const op = "vkrt_op_matmul_fused";
  static const char *const names[] = {"dst", "w", "x", "fusion->norm"};
  if (!fusion)
    FAIL("%s: fusion is NULL (a zeroed vkrt_matmul_fusion folds nothing)", op);
  const vkrt_tensor *ts[4] = {dst, w, x, fusion->norm};
  int count = fusion->norm ? 4 : 3;
  memset(&views[3], 0, sizeof(views[3]));
  for (int i = 0; i < count; i++) /* w past one binding: as vkrt_op_matmul's, without swiglu */
    if (!vkrt_ops_view_init(&views[i], lim, op, names[i], ts[i], i == 0, why, why_size) ||
        (!(i == 1 && !fusion->swiglu && w_in_row_slices(lim, w, &views[1])) &&
         !one_binding(op, names[i], &views[i], lim, why, why_size)))
      return false;
  if (!same_device(op, views, names, count, why, why_size) ||
      !of_type(op, "dst", dst, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "x", x, VKRT_TYPE_F32, why, why_size) ||
      !at_most_dims(op, "w", w, 2, why, why_size) || !at_most_dims(op, "x", x, 2, why, why_size) ||
      !at_most_dims(op, "dst", dst, 2, why, why_size))
    return false;
  if (w->type == VKRT_TYPE_I32)
    FAIL("%s: w is i32; weights are f32, f16, q8_0, q4_K or q6_K", op);
  if (w->ne[0] != x->ne[0])
    FAIL("%s: inner sizes differ: w ne " NE_FMT ", x ne " NE_FMT " (ne[0] is K)", op, NE(w),
         NE(x));
  if (fusion->swiglu && w->ne[1] % 2)
    FAIL("%s: with swiglu w holds gate rows then up rows: an even row count, not %" PRId64, op,
         w->ne[1]);
  int64_t n = fusion->swiglu ? w->ne[1] / 2 : w->ne[1];
  if (dst->ne[0] != n || dst->ne[1] != x->ne[1])
    FAIL("%s: dst ne " NE_FMT " must be {%s, x.ne[1]} (w " NE_FMT ", x " NE_FMT ")", op,
         NE(dst), fusion->swiglu ? "w.ne[1] / 2" : "w.ne[1]", NE(w), NE(x));
  if (fusion->norm) {
    const vkrt_tensor *g = fusion->norm;
    if (!of_type(op, "fusion->norm", g, VKRT_TYPE_F32, why, why_size) ||
        !at_most_dims(op, "fusion->norm", g, 1, why, why_size))
      return false;
    if (g->ne[0] != x->ne[0])
      FAIL("%s: fusion->norm has %" PRId64 " elements, x %" PRId64, op, g->ne[0], x->ne[0]);
    if (!(fusion->eps >= 0.0f && fusion->eps <= 3.4e38f))
      FAIL("%s: fusion->eps = %g must be finite and >= 0", op, (double)fusion->eps);
    if (!disjoint(op, &views[0], &views[3], "fusion->norm", why, why_size))
      return false;
  }
  if (!disjoint(op, &views[0], &views[1], "w", why, why_size) ||
      !disjoint(op, &views[0], &views[2], "x", why, why_size))
    return false;
  if (!fusion->norm)
    views[3] = views[2]; /* a read view in the slot: the qkv views stay at 4.. */
  return !fusion->qkv || check_qkv_fusion(lim, op, w, x, fusion, views, why, why_size);
}

bool vkrt_ops_check_rms_norm(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                             const vkrt_tensor *x, const vkrt_tensor *w, float eps,
                             struct vkrt_ops_view views[3], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_rms_norm";
  static const char *const names[] = {"dst", "x", "w"};
  const vkrt_tensor *ts[3] = {dst, x, w};
  memset(&views[2], 0, sizeof(views[2]));
  if (!decode_views(lim, op, names, ts, w ? 3 : 2, views, why, why_size) ||
      !of_type(op, "dst", dst, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "x", x, VKRT_TYPE_F32, why, why_size) ||
      !same_shape(op, "dst", dst, "x", x, why, why_size))
    return false;
  if (w) {
    if (!of_type(op, "w", w, VKRT_TYPE_F32, why, why_size) ||
        !at_most_dims(op, "w", w, 1, why, why_size))
      return false;
    if (w->ne[0] != x->ne[0])
      FAIL("%s: w has %" PRId64 " elements, the rows of x %" PRId64, op, w->ne[0], x->ne[0]);
    if (!disjoint(op, &views[0], &views[2], "w", why, why_size))
      return false;
  }
  if (!(eps >= 0.0f && eps <= 3.4e38f))
    FAIL("%s: eps = %g must be finite and >= 0", op, (double)eps);
  return in_place_or_disjoint(op, dst, x, &views[0], &views[1], "x", why, why_size);
}

/* RoPE's mode, n_dims (for heads of head_dim), freq_base, freq_scale and frequency factors. */
static bool rope_params_ok(const char *op, const vkrt_rope_params *params, int64_t head_dim,
                           const vkrt_tensor *factors, char *why, size_t why_size) {
  if (params->mode != VKRT_ROPE_NORMAL && params->mode != VKRT_ROPE_NEOX)
    FAIL("%s: mode %u is neither VKRT_ROPE_NORMAL (0) nor VKRT_ROPE_NEOX (2)", op, params->mode);
  if (params->n_dims == 0 || params->n_dims % 2 || params->n_dims > head_dim)
    FAIL("%s: n_dims = %u must be even, >= 2 and <= the head size %" PRId64, op,
         params->n_dims, head_dim);
  if (!(params->freq_base > 0.0f && params->freq_base <= 3.4e38f))
    FAIL("%s: freq_base = %g must be finite and > 0", op, (double)params->freq_base);
  if (!(params->freq_scale >= -3.4e38f && params->freq_scale <= 3.4e38f))
    FAIL("%s: freq_scale = %g is not finite", op, (double)params->freq_scale);
  if (factors) {
    if (!of_type(op, "factors", factors, VKRT_TYPE_F32, why, why_size) ||
        !at_most_dims(op, "factors", factors, 1, why, why_size))
      return false;
    if (factors->ne[0] < params->n_dims / 2)
      FAIL("%s: factors has %" PRId64 " values for the %u pairs of n_dims = %u", op,
           factors->ne[0], params->n_dims / 2, params->n_dims);
  }
  return true;
}

bool vkrt_ops_check_rope(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                         const vkrt_tensor *x, const vkrt_tensor *pos, const vkrt_tensor *factors,
                         const vkrt_rope_params *params, struct vkrt_ops_view views[4],
                         char *why, size_t why_size) {
  const char *const op = factors ? "vkrt_op_rope_ext" : "vkrt_op_rope";
  static const char *const names[] = {"dst", "x", "pos", "factors"};
  const vkrt_tensor *ts[4] = {dst, x, pos, factors};
  if (!params)
    FAIL("%s: params is NULL", op);
  if (!decode_views(lim, op, names, ts, factors ? 4 : 3, views, why, why_size) ||
      !of_type(op, "dst", dst, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "x", x, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "pos", pos, VKRT_TYPE_I32, why, why_size) ||
      !same_shape(op, "dst", dst, "x", x, why, why_size) ||
      !at_most_dims(op, "x", x, 3, why, why_size) || !at_most_dims(op, "pos", pos, 1, why, why_size))
    return false;
  if (pos->ne[0] != x->ne[2])
    FAIL("%s: pos has %" PRId64 " positions for %" PRId64 " tokens (x ne[2])", op, pos->ne[0],
         x->ne[2]);
  if (!rope_params_ok(op, params, x->ne[0], factors, why, why_size) ||
      (factors && !disjoint(op, &views[0], &views[3], "factors", why, why_size)))
    return false;
  return disjoint(op, &views[0], &views[2], "pos", why, why_size) &&
         in_place_or_disjoint(op, dst, x, &views[0], &views[1], "x", why, why_size);
}

bool vkrt_ops_check_get_rows(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                             const vkrt_tensor *table, const vkrt_tensor *ids,
                             struct vkrt_ops_view views[3], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_get_rows";
  static const char *const names[] = {"dst", "table", "ids"};
  const vkrt_tensor *ts[3] = {dst, table, ids};
  if (!decode_views(lim, op, names, ts, 3, views, why, why_size) ||
      !of_type(op, "dst", dst, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "ids", ids, VKRT_TYPE_I32, why, why_size))
    return false;
  if (table->type == VKRT_TYPE_I32)
    FAIL("%s: table is i32; the op takes f32, f16, q8_0, q4_K or q6_K tables", op);
  if (!at_most_dims(op, "table", table, 2, why, why_size) ||
      !at_most_dims(op, "ids", ids, 1, why, why_size) ||
      !at_most_dims(op, "dst", dst, 2, why, why_size))
    return false;
  if (dst->ne[0] != table->ne[0] || dst->ne[1] != ids->ne[0]) {
    char a[96], b[96], c[96];
    format_ne(a, sizeof(a), dst->ne);
    format_ne(b, sizeof(b), table->ne);
    format_ne(c, sizeof(c), ids->ne);
    FAIL("%s: dst ne %s must be {table.ne[0], ids.ne[0]} (table %s, ids %s)", op, a, b, c);
  }
  return disjoint(op, &views[0], &views[1], "table", why, why_size) &&
         disjoint(op, &views[0], &views[2], "ids", why, why_size);
}

bool vkrt_ops_check_set_rows(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                             const vkrt_tensor *src, const vkrt_tensor *rows,
                             struct vkrt_ops_view views[3], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_set_rows";
  static const char *const names[] = {"dst", "src", "rows"};
  const vkrt_tensor *ts[3] = {dst, src, rows};
  if (!decode_views(lim, op, names, ts, 3, views, why, why_size) ||
      !of_type(op, "src", src, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "rows", rows, VKRT_TYPE_I32, why, why_size))
    return false;
  if (dst->type != VKRT_TYPE_F32 && dst->type != VKRT_TYPE_F16 && dst->type != VKRT_TYPE_Q8_0)
    FAIL("%s: dst is %s; the op writes f32, f16 or q8_0 rows", op, type_name(dst->type));
  if (!at_most_dims(op, "dst", dst, 2, why, why_size) ||
      !at_most_dims(op, "src", src, 2, why, why_size) ||
      !at_most_dims(op, "rows", rows, 1, why, why_size))
    return false;
  if (src->ne[0] != dst->ne[0] || src->ne[1] != rows->ne[0]) {
    char a[96], b[96], c[96];
    format_ne(a, sizeof(a), dst->ne);
    format_ne(b, sizeof(b), src->ne);
    format_ne(c, sizeof(c), rows->ne);
    FAIL("%s: src ne %s must be {dst.ne[0], rows.ne[0]} (dst %s, rows %s)", op, b, a, c);
  }
  return disjoint(op, &views[0], &views[1], "src", why, why_size) &&
         disjoint(op, &views[0], &views[2], "rows", why, why_size);
}

bool vkrt_ops_check_rope_set_rows(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                                  const vkrt_tensor *src, const vkrt_tensor *rows,
                                  const vkrt_tensor *pos, const vkrt_tensor *factors,
                                  const vkrt_rope_params *params, struct vkrt_ops_view views[5],
                                  char *why, size_t why_size) {
  static const char *const op = "vkrt_op_rope_set_rows";
  static const char *const names[] = {"dst", "src", "rows", "pos", "factors"};
  const vkrt_tensor *ts[5] = {dst, src, rows, pos, factors};
  if (!params)
    FAIL("%s: params is NULL", op);
  if (!decode_views(lim, op, names, ts, factors ? 5 : 4, views, why, why_size) ||
      !of_type(op, "src", src, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "rows", rows, VKRT_TYPE_I32, why, why_size) ||
      !of_type(op, "pos", pos, VKRT_TYPE_I32, why, why_size))
    return false;
  if (dst->type != VKRT_TYPE_F32 && dst->type != VKRT_TYPE_F16 && dst->type != VKRT_TYPE_Q8_0)
    FAIL("%s: dst is %s; the op writes f32, f16 or q8_0 rows", op, type_name(dst->type));
  if (!at_most_dims(op, "dst", dst, 2, why, why_size) ||
      !at_most_dims(op, "src", src, 3, why, why_size) ||
      !at_most_dims(op, "rows", rows, 1, why, why_size) ||
      !at_most_dims(op, "pos", pos, 1, why, why_size))
    return false;
  if (dst->ne[0] != src->ne[0] * src->ne[1] || rows->ne[0] != src->ne[2] ||
      pos->ne[0] != src->ne[2]) {
    char a[96], b[96], c[96], d[96];
    format_ne(a, sizeof(a), dst->ne);
    format_ne(b, sizeof(b), src->ne);
    format_ne(c, sizeof(c), rows->ne);
    format_ne(d, sizeof(d), pos->ne);
    FAIL("%s: src ne %s {head_dim, n_head, n} needs dst {head_dim * n_head, n_rows}, rows and "
         "pos {n} (dst %s, rows %s, pos %s)", op, b, a, c, d);
  }
  if (!rope_params_ok(op, params, src->ne[0], factors, why, why_size))
    return false;
  for (int i = 1; i < (factors ? 5 : 4); i++)
    if (!disjoint(op, &views[0], &views[i], names[i], why, why_size))
      return false;
  return true;
}

bool vkrt_ops_check_argmax(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                           const vkrt_tensor *x, const vkrt_tensor *key, float temperature,
                           struct vkrt_ops_view views[3], char *why, size_t why_size) {
  const char *op = key ? "vkrt_op_sample" : "vkrt_op_argmax";
  static const char *const names[] = {"dst", "x", "key"};
  const vkrt_tensor *ts[3] = {dst, x, key};
  if (key && !(temperature > 0 && temperature <= 3.4e38f))
    FAIL("%s: temperature = %g: a draw needs a finite temperature > 0 (0 is vkrt_op_argmax)",
         op, (double)temperature);
  if (!decode_views(lim, op, names, ts, key ? 3 : 2, views, why, why_size) ||
      !of_type(op, "dst", dst, VKRT_TYPE_I32, why, why_size) ||
      !of_type(op, "x", x, VKRT_TYPE_F32, why, why_size) ||
      !at_most_dims(op, "x", x, 2, why, why_size) || !at_most_dims(op, "dst", dst, 1, why, why_size))
    return false;
  if (dst->ne[0] != x->ne[1])
    FAIL("%s: dst has %" PRId64 " elements for %" PRId64 " rows of x (x ne[1])", op, dst->ne[0],
         x->ne[1]);
  if (key) {
    if (!of_type(op, "key", key, VKRT_TYPE_I32, why, why_size) ||
        !at_most_dims(op, "key", key, 2, why, why_size))
      return false;
    if (key->ne[0] != 2 || key->ne[1] != x->ne[1])
      FAIL("%s: key is {%" PRId64 ", %" PRId64 "}: two words for each of the %" PRId64
           " rows of x, {2, %" PRId64 "}", op, key->ne[0], key->ne[1], x->ne[1], x->ne[1]);
    if (!disjoint(op, &views[0], &views[2], "key", why, why_size))
      return false;
  }
  return disjoint(op, &views[0], &views[1], "x", why, why_size);
}

uint32_t vkrt_ops_top_k_lists(uint32_t n) {
  return (uint32_t)(((uint64_t)n + VKRT_OPS_TOP_K_SORT - 1) / VKRT_OPS_TOP_K_SORT);
}

uint32_t vkrt_ops_top_k_row_keys(uint32_t n, uint32_t k) {
  uint32_t lists = vkrt_ops_top_k_lists(n), per_merge = k ? VKRT_OPS_TOP_K_SORT / k : 1;
  uint64_t keys = (uint64_t)lists * k + (uint64_t)(lists + per_merge - 1) / per_merge * k;
  return (uint32_t)VKRT_MIN(keys, (uint64_t)UINT32_MAX);
}

bool vkrt_ops_check_top_k(const struct vkrt_ops_limits *lim, const vkrt_tensor *values,
                          const vkrt_tensor *ids, const vkrt_tensor *x,
                          struct vkrt_ops_view views[3], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_top_k";
  static const char *const names[] = {"values", "ids", "x"};
  const vkrt_tensor *ts[3] = {values, ids, x};
  if (!decode_views(lim, op, names, ts, 3, views, why, why_size) ||
      !of_type(op, "values", values, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "ids", ids, VKRT_TYPE_I32, why, why_size) ||
      !of_type(op, "x", x, VKRT_TYPE_F32, why, why_size) ||
      !at_most_dims(op, "x", x, 2, why, why_size) ||
      !at_most_dims(op, "values", values, 2, why, why_size) ||
      !at_most_dims(op, "ids", ids, 2, why, why_size))
    return false;
  const int64_t k = values->ne[0], n = x->ne[0];
  if (ids->ne[0] != k || values->ne[1] != x->ne[1] || ids->ne[1] != x->ne[1])
    FAIL("%s: values {%" PRId64 ", %" PRId64 "} and ids {%" PRId64 ", %" PRId64 "} must both be "
         "{k, %" PRId64 "}: k for each of the rows of x", op, values->ne[0], values->ne[1],
         ids->ne[0], ids->ne[1], x->ne[1]);
  if (k < 1 || k > VKRT_OPS_TOP_K_MAX || k > n)
    FAIL("%s: k = %" PRId64 " (values ne[0]) must be 1..%u and at most the row's %" PRId64
         " elements", op, k, VKRT_OPS_TOP_K_MAX, n);
  if (vkrt_ops_top_k_row_keys((uint32_t)n, (uint32_t)k) > VKRT_OPS_TOP_K_KEYS)
    FAIL("%s: rows of %" PRId64 " elements are longer than the op's scratch takes for k = %" PRId64
         " (%u keys a row at most)", op, n, k, VKRT_OPS_TOP_K_KEYS);
  return disjoint(op, &views[0], &views[1], "ids", why, why_size) &&
         disjoint(op, &views[0], &views[2], "x", why, why_size) &&
         disjoint(op, &views[1], &views[2], "x", why, why_size);
}

bool vkrt_ops_check_attention(const struct vkrt_ops_limits *lim, const vkrt_tensor *dst,
                              const vkrt_tensor *q, const vkrt_tensor *k, const vkrt_tensor *v,
                              const vkrt_tensor *kv_len, float scale,
                              struct vkrt_ops_view views[5], char *why, size_t why_size) {
  static const char *const op = "vkrt_op_attention";
  if (!(scale >= -3.4e38f && scale <= 3.4e38f))
    FAIL("%s: scale = %g is not finite", op, (double)scale);
  static const char *const names[] = {"dst", "q", "k", "v", "kv_len"};
  const vkrt_tensor *ts[5] = {dst, q, k, v, kv_len};
  if (!decode_views(lim, op, names, ts, 5, views, why, why_size) ||
      !of_type(op, "dst", dst, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "q", q, VKRT_TYPE_F32, why, why_size) ||
      !of_type(op, "kv_len", kv_len, VKRT_TYPE_I32, why, why_size))
    return false;
  if (k->type != v->type || (k->type != VKRT_TYPE_F16 && k->type != VKRT_TYPE_Q8_0))
    FAIL("%s: k and v must both be f16 or both q8_0 (k %s, v %s)", op, type_name(k->type),
         type_name(v->type));
  int64_t D = q->ne[0], H = q->ne[1], NQ = q->ne[2];
  if (q->ne[3] != 1)
    FAIL("%s: q ne " NE_FMT " must be {head_dim, n_head, n_q, 1}", op, NE(q));
  if (memcmp(dst->ne, q->ne, sizeof(q->ne)))
    FAIL("%s: dst ne " NE_FMT " differs from q ne " NE_FMT, op, NE(dst), NE(q));
  if (k->ne[0] != D || k->ne[3] != 1)
    FAIL("%s: k ne " NE_FMT " must be {head_dim, n_head_kv, n_ctx, 1} with q's head_dim %lld",
         op, NE(k), (long long)D);
  if (memcmp(v->ne, k->ne, sizeof(k->ne)))
    FAIL("%s: v ne " NE_FMT " differs from k ne " NE_FMT, op, NE(v), NE(k));
  if (H % k->ne[1])
    FAIL("%s: n_head %lld (q ne[1]) is not a multiple of n_head_kv %lld (k ne[1])", op,
         (long long)H, (long long)k->ne[1]);
  if (kv_len->ne[0] != NQ || kv_len->ne[1] != 1 || kv_len->ne[2] != 1 || kv_len->ne[3] != 1)
    FAIL("%s: kv_len must be {n_q} = {%lld}, one length per query", op, (long long)NQ);
  if (D % 8 || D > VKRT_ATTENTION_MAX_HEAD_DIM)
    FAIL("%s: head_dim %lld is not supported (multiples of 8 up to %d, q8_0 of 32)", op,
         (long long)D, VKRT_ATTENTION_MAX_HEAD_DIM);
  if (q->nb[0] != 4 || dst->nb[0] != 4)
    FAIL("%s: q and dst must be dense along head_dim (nb[0] = 4; q %lld, dst %lld)", op,
         (long long)q->nb[0], (long long)dst->nb[0]);
  for (int i = 2; i <= 3; i++) {
    const vkrt_tensor *t = ts[i];
    if (t->type == VKRT_TYPE_F16 &&
        (t->nb[0] != 2 || t->offset % 16 || (t->ne[1] > 1 && t->nb[1] % 16) ||
         (t->ne[2] > 1 && t->nb[2] % 16)))
      FAIL("%s: %s: f16 rows must be dense and start at 16-byte boundaries (nb[0] 2, offset, "
           "nb[1] and nb[2] multiples of 16; got %lld, %llu, %lld, %lld)", op, names[i],
           (long long)t->nb[0], (unsigned long long)t->offset, (long long)t->nb[1],
           (long long)t->nb[2]);
  }
  for (int i = 1; i < 5; i++)
    if (!disjoint(op, &views[0], &views[i], names[i], why, why_size))
      return false;
  return true;
}

static uint32_t div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

/* attention_split.comp's TT: the cache rows one pass of a workgroup loads (16-byte chunks of
 * 8 elements, a row's chunks side by side); a tile is `unroll` passes */
static uint32_t attention_tile_rows(uint32_t head_dim) {
  return VKRT_MAX(VKRT_ATTENTION_WG / (head_dim / 8), 1u);
}

uint32_t vkrt_ops_attention_shared(uint32_t head_dim, uint32_t heads_per_group, uint32_t unroll) {
  /* as attention_split.comp declares it: the K tile (rows of an odd number of 16-byte
   * words), the queries, the score partials, three floats per head and slot, two per head,
   * the slot merge */
  uint32_t wg = VKRT_ATTENTION_WG, nc = head_dim / 8, g = heads_per_group;
  uint32_t tt = attention_tile_rows(head_dim), t = tt * unroll, parts = VKRT_MAX(wg / t, 1u);
  return 16 * t * (nc | 1) +
         (uint32_t)sizeof(float) * (g * head_dim + g * parts * t + 3 * g * tt + 2 * g + 8 * wg);
}

/* Splits, rounds and scratch of an attention plan whose kernel, heads per group and head
 * groups are chosen (both split kernels). */
static bool plan_splits(uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv, uint32_t n_q,
                        uint32_t n_ctx, uint32_t min_split, uint32_t target_groups,
                        uint32_t max_splits, uint32_t forced_splits, uint64_t scratch_bytes,
                        struct vkrt_attention_plan *out, char *why, size_t why_size) {
  static const char *const op = "vkrt_op_attention";
  uint32_t most = div_up(n_ctx, VKRT_MIN(n_ctx, min_split));
  uint64_t per_split = (uint64_t)n_head * (head_dim + 2) * sizeof(float); /* one query */
  if (per_split > scratch_bytes)
    FAIL("%s: the partials of one split of %u query heads of %u (%llu bytes) exceed the "
         "%llu-byte split scratch (CONFIG_VKRT_ATTENTION_SCRATCH_KB)", op, n_head, head_dim,
         (unsigned long long)per_split, (unsigned long long)scratch_bytes);
  uint64_t per_split_groups = (uint64_t)n_head_kv * out->head_groups * n_q;
  /* forced (tests, the bench): any count down to one token per split */
  uint32_t want = forced_splits ? VKRT_MIN(forced_splits, n_ctx)
                                : VKRT_MIN(div_up(VKRT_MAX(target_groups, 1u), per_split_groups), most);
  if (!forced_splits && max_splits)
    want = VKRT_MIN(want, max_splits);
  want = VKRT_MIN(want, (uint32_t)VKRT_MIN(scratch_bytes / per_split, UINT32_MAX));
  out->split_len = div_up(n_ctx, want);
  out->splits = div_up(n_ctx, out->split_len);
  out->min_split = forced_splits ? 1 : VKRT_MIN(min_split, out->split_len);
  out->queries_per_round = (uint32_t)VKRT_MIN((uint64_t)n_q, scratch_bytes / (out->splits * per_split));
  out->rounds = div_up(n_q, out->queries_per_round);
  out->scratch_used = (uint64_t)out->queries_per_round * out->splits * per_split;
  out->full_split = !out->rows && (uint64_t)out->min_split * out->splits >= n_ctx;
  return true;
}

bool vkrt_ops_attention_plan(uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                             uint32_t n_q, uint32_t n_ctx, uint32_t target_groups,
                             uint32_t max_splits,
                             uint32_t forced_splits, uint32_t forced_unroll,
                             uint32_t shared_limit, uint64_t scratch_bytes,
                             struct vkrt_attention_plan *out, char *why, size_t why_size) {
  static const char *const op = "vkrt_op_attention";
  memset(out, 0, sizeof(*out));
  if (!head_dim || !n_head || !n_head_kv || n_head % n_head_kv || !n_q || !n_ctx)
    FAIL("%s: no plan for head_dim %u, %u heads over %u KV heads, %u queries, n_ctx %u", op,
         head_dim, n_head, n_head_kv, n_q, n_ctx);
  uint32_t per_kv = n_head / n_head_kv, g = VKRT_ATTENTION_MAX_GROUP;
  while (per_kv % g)
    g--;
  out->heads_per_group = g;
  out->head_groups = per_kv / g;
  if (forced_unroll > VKRT_ATTENTION_MAX_UNROLL)
    FAIL("%s: %u row passes per tile; 1..%d", op, forced_unroll, VKRT_ATTENTION_MAX_UNROLL);
  /* registers: 8 sums per head and 8 words per row pass (a K and a V chunk in flight) */
  uint32_t unroll = VKRT_ATTENTION_UNROLL;
  while (unroll > 1 && 8 * g + 8 * unroll > VKRT_ATTENTION_REGS)
    unroll /= 2;
  out->unroll = forced_unroll ? forced_unroll : unroll;
  while (!forced_unroll && out->unroll > 1 &&
         vkrt_ops_attention_shared(head_dim, g, out->unroll) > shared_limit)
    out->unroll /= 2;
  out->shared_bytes = vkrt_ops_attention_shared(head_dim, g, out->unroll);
  if (out->shared_bytes > shared_limit)
    FAIL("%s: %u query heads per workgroup of head_dim %u with %u row passes per tile need %u "
         "bytes of shared memory; the device has %u", op, g, head_dim, out->unroll,
         out->shared_bytes, shared_limit);
  out->rows = false;
  out->wg = VKRT_ATTENTION_WG;
  /* a split is one tile at least (the tokens a workgroup's row passes cover at once): a
   * shorter split pays a tile's latency chain for part of it */
  return plan_splits(head_dim, n_head, n_head_kv, n_q, n_ctx,
                     attention_tile_rows(head_dim) * out->unroll, target_groups, max_splits,
                     forced_splits, scratch_bytes, out, why, why_size);
}

bool vkrt_ops_attention_rows_plan(uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                                  uint32_t n_q, uint32_t n_ctx, uint32_t subgroup,
                                  bool int8_queries, uint32_t target_groups, uint32_t forced_splits,
                                  uint32_t shared_limit, uint64_t scratch_bytes,
                                  struct vkrt_attention_plan *out, char *why, size_t why_size) {
  static const char *const op = "vkrt_op_attention";
  memset(out, 0, sizeof(*out));
  if (!head_dim || head_dim % 8 || !n_head || !n_head_kv || n_head % n_head_kv || !n_q || !n_ctx)
    FAIL("%s: no plan for head_dim %u, %u heads over %u KV heads, %u queries, n_ctx %u", op,
         head_dim, n_head, n_head_kv, n_q, n_ctx);
  if (subgroup < 4 || subgroup > 128 || (subgroup & (subgroup - 1)))
    FAIL("%s: the row kernel needs subgroups of 4..128 invocations, a power of two (%u)", op,
         subgroup);
  out->rows = true;
  out->subgroup = subgroup;
  out->wg = VKRT_MAX((uint32_t)VKRT_ATTENTION_ROWS_WG, subgroup);
  uint32_t chunks = head_dim / 8, per_lane = div_up(chunks, subgroup), per_kv = n_head / n_head_kv;
  uint32_t g = per_kv;
  /* as attention_rows.comp declares it: the queries, the probabilities of a run per
   * subgroup, a max and a sum per subgroup and head; Q8Q: the queries as int8 and a scale
   * per 32 */
#define ROWS_SHARED(g) ((uint32_t)sizeof(float) * ((g) * head_dim + (out->wg / subgroup) * \
                        ((g) * subgroup + 2 * (g))) +                                       \
                        (int8_queries ? (g) * head_dim + (uint32_t)sizeof(float) * (g) *      \
                                            (head_dim / 32) : 0))
  while (g > 1 && (per_kv % g || 8 * g * per_lane > VKRT_ATTENTION_ROWS_SUMS ||
                   ROWS_SHARED(g) > shared_limit))
    g--;
  out->shared_bytes = ROWS_SHARED(g);
#undef ROWS_SHARED
  if (out->shared_bytes > shared_limit)
    FAIL("%s: one query head of head_dim %u needs %u bytes of shared memory; the device has %u",
         op, head_dim, out->shared_bytes, shared_limit);
  out->heads_per_group = g;
  out->head_groups = per_kv / g;
  return plan_splits(head_dim, n_head, n_head_kv, n_q, n_ctx, subgroup, target_groups, 0,
                     forced_splits, scratch_bytes, out, why, why_size);
}
