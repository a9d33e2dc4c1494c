/* Public op entry points and the stream commands (vkrt_cmd_fill, vkrt_cmd_copy_buffer):
 * validate the descriptors (validate.c), then record into the device stream after a barrier.
 * Always compiled: a kernel compiled out answers VKRT_ERROR_UNSUPPORTED through the stubs in
 * ops.h. */
#include <string.h>

#include "ops/ops.h"

vkrt_tensor vkrt_tensor_contiguous(vkrt_buffer *buffer, uint64_t offset, vkrt_type type,
                                   int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  vkrt_tensor t = {.buffer = buffer, .offset = offset, .type = type, .ne = {ne0, ne1, ne2, ne3}};
  int64_t ts = (int64_t)vkrt_type_size(type), block = vkrt_type_block(type);
  t.nb[0] = ts;
  /* block types: whole blocks per row. Unsigned products: a shape too large wraps (and the
   * ops refuse it) instead of overflowing a signed integer. */
  t.nb[1] = block ? (int64_t)((uint64_t)ts * (uint64_t)(ne0 / block)) : 0;
  for (int i = 2; i < 4; i++)
    t.nb[i] = (int64_t)((uint64_t)t.nb[i - 1] * (uint64_t)t.ne[i - 1]);
  return t;
}

/* The device of the first operand that has one; the others are checked against it. */
static struct vkrt_device *device_of(const vkrt_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    if (ts[i] && ts[i]->buffer && ts[i]->buffer->dev)
      return ts[i]->buffer->dev;
  return NULL;
}

static vkrt_status invalid(struct vkrt_device *dev, const char *why) {
  if (!dev)
    return VKRT_ERROR_INVALID_ARGUMENT; /* no appliance to carry the message */
  return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "%s", why);
}

/* `views`: the op's checked operands, dst first (the one it writes), then what it reads;
 * vkrt_stream_next puts a barrier before the op only when one of them overlaps earlier
 * unsynchronized work the way a hazard needs. */
static vkrt_status check_lost(struct vkrt_device *dev) {
  return dev->lost ? vkrt_error(&dev->sys->base, VKRT_ERROR_DEVICE_LOST, "dev%u: device lost",
                                dev->index)
                   : VKRT_OK;
}

vkrt_status vkrt_ops_begin_views(struct vkrt_device *dev, const struct vkrt_ops_view *views,
                                 uint32_t count, uint32_t also_written, VkCommandBuffer *cmd) {
  vkrt_status s = check_lost(dev);
  if (s != VKRT_OK)
    return s;
  struct vkrt_stream_access access[9];
  for (uint32_t i = 0; i < count; i++)
    access[i] = (struct vkrt_stream_access){views[i].buffer, views[i].lo, views[i].hi,
                                            i == 0 || (also_written >> i & 1u)};
  return vkrt_ops_begin(dev, access, count, cmd);
}

/* One op call. Every op runs the same way (run_op): the device of its operands, the
 * descriptor check into views, then, when its kernel is in the build, the stream's command
 * buffer and the record function (compiled out: the stub answers UNSUPPORTED). */
enum op_kind {
  OP_COPY, OP_TRANSPOSE, OP_CONCAT, OP_ADD, OP_SWIGLU, OP_MATMUL, OP_MATMUL_FUSED,
  OP_RMS_NORM, OP_ROPE, OP_GET_ROWS, OP_SET_ROWS, OP_ROPE_SET_ROWS, OP_ARGMAX, OP_TOP_K, OP_ATTENTION,
};
struct op_call {
  enum op_kind kind;
  const vkrt_tensor *dst, *a, *b;    /* a: src, gate, w, x, table or q; b: concat's b, up, x,
                                        rms_norm's w, pos, ids, rows, k or sample's key */
  const vkrt_tensor *c, *d;          /* attention: v, kv_len; c: rope's frequency factors,
                                        d: rope_set_rows' pos */
  float scale;                       /* attention; sample's temperature */
  const vkrt_tensor *const *srcs;    /* add */
  uint32_t count;                    /* add */
  int dim;                           /* concat */
  bool accumulate;                   /* matmul_add */
  const vkrt_matmul_fusion *fusion;  /* matmul_fused */
  float eps;                         /* rms_norm */
  const vkrt_rope_params *rope;      /* rope */
};

static bool check_op(const struct op_call *c, const struct vkrt_ops_limits *lim,
                     struct vkrt_ops_view v[9], char *why, size_t size) {
  switch (c->kind) {
  case OP_COPY: return vkrt_ops_check_copy(lim, c->dst, c->a, v, why, size);
  case OP_TRANSPOSE: return vkrt_ops_check_transpose(lim, c->dst, c->a, v, why, size);
  case OP_CONCAT: return vkrt_ops_check_concat(lim, c->dst, c->a, c->b, c->dim, v, why, size);
  case OP_ADD: return vkrt_ops_check_add(lim, c->dst, c->srcs, c->count, v, why, size);
  case OP_SWIGLU: return vkrt_ops_check_swiglu(lim, c->dst, c->a, c->b, v, why, size);
  case OP_MATMUL: return vkrt_ops_check_matmul(lim, c->dst, c->a, c->b, v, why, size);
  case OP_MATMUL_FUSED:
    return vkrt_ops_check_matmul_fused(lim, c->dst, c->a, c->b, c->fusion, v, why, size);
  case OP_RMS_NORM: return vkrt_ops_check_rms_norm(lim, c->dst, c->a, c->b, c->eps, v, why, size);
  case OP_ROPE:
    return vkrt_ops_check_rope(lim, c->dst, c->a, c->b, c->c, c->rope, v, why, size);
  case OP_GET_ROWS: return vkrt_ops_check_get_rows(lim, c->dst, c->a, c->b, v, why, size);
  case OP_SET_ROWS: return vkrt_ops_check_set_rows(lim, c->dst, c->a, c->b, v, why, size);
  case OP_ROPE_SET_ROWS:
    return vkrt_ops_check_rope_set_rows(lim, c->dst, c->a, c->b, c->d, c->c, c->rope, v, why,
                                        size);
  case OP_ARGMAX: return vkrt_ops_check_argmax(lim, c->dst, c->a, c->b, c->scale, v, why, size);
  case OP_TOP_K: return vkrt_ops_check_top_k(lim, c->dst, c->a, c->b, v, why, size);
  case OP_ATTENTION:
    return vkrt_ops_check_attention(lim, c->dst, c->a, c->b, c->c, c->d, c->scale, v, why,
                                    size);
  }
  return false;
}

/* Operands of the op: dst and its sources (the views check_op filled). */
static uint32_t view_count(const struct op_call *c) {
  switch (c->kind) {
  case OP_COPY:
  case OP_TRANSPOSE: return 2;
  case OP_ARGMAX: return c->b ? 3 : 2;
  case OP_TOP_K: return 3;
  case OP_ADD: return 1 + c->count;
  case OP_RMS_NORM: return c->b ? 3 : 2;
  case OP_MATMUL_FUSED: return c->fusion->qkv ? (c->fusion->qkv->rope_factors ? 8 : 7) : 4;
  case OP_ROPE: return c->c ? 4 : 3;
  case OP_ROPE_SET_ROWS: return c->c ? 5 : 4;
  case OP_CONCAT:
  case OP_SWIGLU:
  case OP_MATMUL:
  case OP_GET_ROWS:
  case OP_SET_ROWS: return 3;
  case OP_ATTENTION: return 5;
  }
  return 0;
}

static bool kernel_in_build(enum op_kind kind) {
  switch (kind) {
  case OP_COPY: return IS_ENABLED(CONFIG_VKRT_KERNEL_COPY);
  case OP_TRANSPOSE: return IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE);
  case OP_CONCAT: return IS_ENABLED(CONFIG_VKRT_KERNEL_CONCAT);
  case OP_ADD: return IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE);
  case OP_SWIGLU: return IS_ENABLED(CONFIG_VKRT_KERNEL_SWIGLU);
  case OP_MATMUL: return IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL);
  case OP_MATMUL_FUSED:
    return IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL) || IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K) ||
           IS_ENABLED(CONFIG_VKRT_KERNEL_Q8_0);
  case OP_RMS_NORM: return IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM);
  case OP_ROPE: return IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE);
  case OP_GET_ROWS: return IS_ENABLED(CONFIG_VKRT_KERNEL_GET_ROWS);
  case OP_SET_ROWS: return IS_ENABLED(CONFIG_VKRT_KERNEL_SET_ROWS);
  case OP_ROPE_SET_ROWS: return IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS);
  case OP_ARGMAX: return IS_ENABLED(CONFIG_VKRT_KERNEL_ARGMAX);
  case OP_TOP_K: return IS_ENABLED(CONFIG_VKRT_KERNEL_TOP_K);
  case OP_ATTENTION: return IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION);
  }
  return false;
}

/* vkrt_op_matmul_fused: f16 and f32 w take matmul.c's fused kernel, quantized w quant.c's */
static bool dense_w(const struct vkrt_ops_view v[9]) {
  return v[1].type == VKRT_TYPE_F16 || v[1].type == VKRT_TYPE_F32;
}

static vkrt_status record_op(struct vkrt_device *dev, VkCommandBuffer cmd,
                             const struct op_call *c, const struct vkrt_ops_view v[9]) {
  switch (c->kind) {
  case OP_COPY: return vkrt_copy_record(dev, cmd, &v[0], &v[1]);
  case OP_TRANSPOSE: return vkrt_transpose_record(dev, cmd, &v[0], &v[1]);
  case OP_CONCAT: return vkrt_concat_record(dev, cmd, v, c->dim);
  case OP_ADD: return vkrt_add_record(dev, cmd, v, c->count);
  case OP_SWIGLU: return vkrt_swiglu_record(dev, cmd, v);
  case OP_MATMUL: return vkrt_matmul_record(dev, cmd, v, c->accumulate);
  case OP_MATMUL_FUSED:
    return dense_w(v) ? vkrt_matmul_fused_record(dev, cmd, v, c->fusion)
                      : vkrt_quant_fused_record(dev, cmd, v, c->fusion);
  case OP_RMS_NORM: return vkrt_rms_norm_record(dev, cmd, v, c->b != NULL, c->eps);
  case OP_ROPE: return vkrt_rope_record(dev, cmd, v, c->c != NULL, c->rope);
  case OP_GET_ROWS: return vkrt_get_rows_record(dev, cmd, v);
  case OP_SET_ROWS: return vkrt_set_rows_record(dev, cmd, v);
  case OP_ROPE_SET_ROWS: return vkrt_rope_set_rows_record(dev, cmd, v, c->c != NULL, c->rope);
  case OP_ARGMAX: return vkrt_argmax_record(dev, cmd, v, c->b ? c->scale : 0);
  case OP_TOP_K: return vkrt_top_k_record(dev, cmd, v);
  case OP_ATTENTION: return vkrt_attention_record(dev, v, c->scale);
  }
  return VKRT_ERROR_INTERNAL;
}

static vkrt_status run_op(const struct op_call *c) {
  const vkrt_tensor *all[9] = {c->dst, c->a, c->b, c->c, c->d};
  for (uint32_t i = 0; c->srcs && i < c->count && i < 8; i++)
    all[1 + i] = c->srcs[i];
  struct vkrt_device *dev = device_of(all, 9);
  if (!dev)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_ops_limits lim = vkrt_ops_device_limits(dev);
  struct vkrt_ops_view v[9];
  char why[VKRT_ERROR_MESSAGE_SIZE];
  if (!check_op(c, &lim, v, why, sizeof(why)))
    return invalid(dev, why);
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  /* a fused product its kernels cannot take (or whose type's kernels are compiled out) is
   * refused before anything is recorded */
  vkrt_status s = c->kind != OP_MATMUL_FUSED ? VKRT_OK
                   : dense_w(v)                ? vkrt_matmul_fused_check(dev, v, c->fusion)
                                               : vkrt_quant_fused_check(dev, v, c->fusion);
  if (s != VKRT_OK)
    return s;
  if (kernel_in_build(c->kind)) {
    /* attention asks the stream for each of its passes (attention.c) */
    /* the fused q/k/v product writes the two cache rows (views 5 and 6) too */
    uint32_t also_written = c->kind == OP_MATMUL_FUSED && c->fusion->qkv ? 3u << 5
                            : c->kind == OP_TOP_K                       ? 1u << 1 /* ids */
                                                                        : 0;
    s = c->kind == OP_ATTENTION ? check_lost(dev)
                                : vkrt_ops_begin_views(dev, v, view_count(c), also_written, &cmd);
    if (s != VKRT_OK)
      return s;
  }
  return record_op(dev, cmd, c, v);
}

vkrt_status vkrt_op_copy(const vkrt_tensor *dst, const vkrt_tensor *src) {
  return run_op(&(struct op_call){.kind = OP_COPY, .dst = dst, .a = src});
}

vkrt_status vkrt_op_transpose(const vkrt_tensor *dst, const vkrt_tensor *src) {
  return run_op(&(struct op_call){.kind = OP_TRANSPOSE, .dst = dst, .a = src});
}

vkrt_status vkrt_op_concat(const vkrt_tensor *dst, const vkrt_tensor *a, const vkrt_tensor *b,
                           int dim) {
  return run_op(&(struct op_call){.kind = OP_CONCAT, .dst = dst, .a = a, .b = b, .dim = dim});
}

vkrt_status vkrt_op_add(const vkrt_tensor *dst, const vkrt_tensor *const *srcs, uint32_t count) {
  return run_op(&(struct op_call){.kind = OP_ADD, .dst = dst, .srcs = srcs, .count = count});
}

vkrt_status vkrt_op_swiglu(const vkrt_tensor *dst, const vkrt_tensor *gate, const vkrt_tensor *up) {
  return run_op(&(struct op_call){.kind = OP_SWIGLU, .dst = dst, .a = gate, .b = up});
}

vkrt_status vkrt_op_matmul(const vkrt_tensor *dst, const vkrt_tensor *w, const vkrt_tensor *x) {
  return run_op(&(struct op_call){.kind = OP_MATMUL, .dst = dst, .a = w, .b = x});
}

vkrt_status vkrt_op_matmul_add(const vkrt_tensor *dst, const vkrt_tensor *w, const vkrt_tensor *x) {
  return run_op(&(struct op_call){.kind = OP_MATMUL, .dst = dst, .a = w, .b = x, .accumulate = true});
}

vkrt_status vkrt_op_matmul_fused(const vkrt_tensor *dst, const vkrt_tensor *w, const vkrt_tensor *x,
                                 const vkrt_matmul_fusion *fusion) {
  return run_op(&(struct op_call){.kind = OP_MATMUL_FUSED, .dst = dst, .a = w, .b = x,
                                  .fusion = fusion});
}

vkrt_status vkrt_op_attention(const vkrt_tensor *dst, const vkrt_tensor *q, const vkrt_tensor *k,
                              const vkrt_tensor *v, const vkrt_tensor *kv_len, float scale) {
  return run_op(&(struct op_call){
      .kind = OP_ATTENTION, .dst = dst, .a = q, .b = k, .c = v, .d = kv_len, .scale = scale});
}

/* vkrt_cmd_fill: vkCmdFillBuffer recorded into the stream of dst's device. */
vkrt_status vkrt_cmd_fill(vkrt_buffer *dst, uint64_t offset, uint64_t size, uint32_t value) {
  if (!dst)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = dst->dev;
  if (size == 0)
    return VKRT_OK; /* vkrt.h: size-0 transfers are no-ops */
  if (offset % 4 || size % 4)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: fill offset %llu and size %llu must be multiples of 4",
                      dev->index, (unsigned long long)offset, (unsigned long long)size);
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_buffer_check_range(dst, offset, size, "fill");
  struct vkrt_stream_access access = {dst, offset, offset + size, true};
  if (s == VKRT_OK)
    s = vkrt_stream_next(dev, &access, 1, &cmd);
  if (s != VKRT_OK)
    return s;
  /* vkCmdFillBuffer even for a few bytes: on the H200 a recorded 4-byte vkCmdUpdateBuffer
   * closed by the device-only barrier took 0.9 us longer (docs/perf.md, 2026-12-03) */
  dev->vk.vkCmdFillBuffer(cmd, dst->handle, offset, size, value);
  vkrt_stream_note_transfer(dev);
  return VKRT_OK;
}

/* vkrt_cmd_copy_buffer: the device's faster contiguous copy (kernel or vkCmdCopyBuffer). */
vkrt_status vkrt_cmd_copy_buffer(vkrt_buffer *dst, uint64_t dst_offset, vkrt_buffer *src,
                                 uint64_t src_offset, uint64_t size) {
  if (!dst || !src)
    return dst ? vkrt_error(&dst->dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                            "copy: source buffer is NULL")
               : src ? vkrt_error(&src->dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                                  "copy: destination buffer is NULL")
                     : VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = dst->dev;
  if (src->dev->sys != dev->sys)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "copy: the source is a buffer of another appliance");
  if (src->dev != dev)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "copy: source is on dev%u, destination on dev%u; copies stay on one device",
                      src->dev->index, dev->index);
  if (size == 0)
    return VKRT_OK; /* vkrt.h: size-0 transfers are no-ops */
  vkrt_status s = vkrt_buffer_check_range(dst, dst_offset, size, "copy destination");
  if (s == VKRT_OK)
    s = vkrt_buffer_check_range(src, src_offset, size, "copy source");
  if (s == VKRT_OK && src == dst && src_offset < dst_offset + size && dst_offset < src_offset + size)
    s = vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                   "dev%u: copy source and destination overlap", dev->index);
  VkCommandBuffer cmd;
  if (s == VKRT_OK)
    s = vkrt_stream_next_copy(dev, dst, dst_offset, src, src_offset, size, &cmd);
  if (s != VKRT_OK)
    return s;
  /* The device's faster contiguous copy: the 16-byte compute copy on GPUs (H200: 4.2 vs
   * 0.85 TB/s for vkCmdCopyBuffer), vkCmdCopyBuffer on CPU devices; vkrt-probe says which. */
  return vkrt_ops_copy_bytes(dev, cmd, dst->handle, dst_offset, src->handle, src_offset, size, -1);
}

vkrt_status vkrt_op_rms_norm(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *w,
                             float eps) {
  return run_op(&(struct op_call){.kind = OP_RMS_NORM, .dst = dst, .a = x, .b = w, .eps = eps});
}

vkrt_status vkrt_op_rope(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *pos,
                         const vkrt_rope_params *params) {
  return run_op(&(struct op_call){.kind = OP_ROPE, .dst = dst, .a = x, .b = pos, .rope = params});
}

vkrt_status vkrt_op_rope_ext(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *pos,
                             const vkrt_tensor *factors, const vkrt_rope_params *params) {
  return run_op(&(struct op_call){.kind = OP_ROPE, .dst = dst, .a = x, .b = pos, .c = factors,
                                  .rope = params});
}

vkrt_status vkrt_op_get_rows(const vkrt_tensor *dst, const vkrt_tensor *table,
                             const vkrt_tensor *ids) {
  return run_op(&(struct op_call){.kind = OP_GET_ROWS, .dst = dst, .a = table, .b = ids});
}

vkrt_status vkrt_op_set_rows(const vkrt_tensor *dst, const vkrt_tensor *src,
                             const vkrt_tensor *rows) {
  return run_op(&(struct op_call){.kind = OP_SET_ROWS, .dst = dst, .a = src, .b = rows});
}

vkrt_status vkrt_op_rope_set_rows(const vkrt_tensor *dst, const vkrt_tensor *src,
                                  const vkrt_tensor *rows, const vkrt_tensor *pos,
                                  const vkrt_tensor *factors, const vkrt_rope_params *params) {
  return run_op(&(struct op_call){.kind = OP_ROPE_SET_ROWS, .dst = dst, .a = src, .b = rows,
                                  .c = factors, .d = pos, .rope = params});
}

vkrt_status vkrt_op_argmax(const vkrt_tensor *dst, const vkrt_tensor *x) {
  return run_op(&(struct op_call){.kind = OP_ARGMAX, .dst = dst, .a = x});
}

vkrt_status vkrt_op_top_k(const vkrt_tensor *values, const vkrt_tensor *ids, const vkrt_tensor *x) {
  return run_op(&(struct op_call){.kind = OP_TOP_K, .dst = values, .a = ids, .b = x});
}

vkrt_status vkrt_op_sample(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *key,
                           float temperature) {
  return run_op(&(struct op_call){.kind = OP_ARGMAX, .dst = dst, .a = x, .b = key,
                                  .scale = temperature});
}
