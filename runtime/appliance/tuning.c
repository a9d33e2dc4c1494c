/* vkrt/vkrt_tuning.h: the knobs, counters, timestamps and raw submit floors vkrt-bench and
 * tests reach through the appliance handle, forwarded to the ops state and the device. */
#include <string.h>
#include <unistd.h>

#include "appliance/appliance.h"
#include "base/base.h"
#include "import/import.h"
#include "import/load.h"
#include "import/policy.h"
#include "ops/ops.h"
#include "vkrt/vkrt_tuning.h"

/* The device and its ops state (vkrt_open opened it; this is a no-op then); `arg` is the
 * pointer argument the call needs (its out or config): NULL is refused. */
static vkrt_status tuning_device(const vkrt_appliance *app, uint32_t device, const void *arg,
                                 struct vkrt_device **out) {
  *out = NULL;
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev;
  vkrt_status s = vkrt_system_device((struct vkrt_system *)&app->sys, device, &dev);
  if (s == VKRT_OK && !arg)
    s = vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "tuning: a pointer argument is NULL");
  if (s == VKRT_OK)
    s = vkrt_ops_open(dev);
  if (s == VKRT_OK)
    *out = dev;
  return s;
}

static vkrt_status bad(struct vkrt_device *dev, const char *fmt, long long value) {
  return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, fmt, value);
}

vkrt_status vkrt_tuning_device_get(const vkrt_appliance *app, uint32_t device,
                                   vkrt_tuning_device *out) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_caps *c = &dev->caps;
  *out = (vkrt_tuning_device){.is_cpu = c->is_cpu,
                              .timestamp_period_ns = c->timestamp_period_ns,
                              .max_storage_buffer_range = c->max_storage_buffer_range,
                              .max_compute_work_group_invocations = c->max_compute_work_group_invocations,
                              .refuses_file_backed = c->external_memory_host &&
                                                     vkrt_import_file_backed_refused(c),
                              .min_imported_host_pointer_alignment =
                                  c->min_imported_host_pointer_alignment};
  return VKRT_OK;
}

vkrt_status vkrt_tuning_stream_get(const vkrt_appliance *app, uint32_t device,
                                   vkrt_tuning_stream *out) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  *out = (vkrt_tuning_stream){.submitted = dev->stream.submitted,
                              .host_closes = dev->stream.host_closes,
                              .begun_ahead = dev->stream.begun_ahead,
                              .barriers = dev->stream.barriers,
                              .barriers_elided = dev->stream.barriers_elided,
                              .flushes = dev->stream.flushes,
                              .deferred = dev->stream.deferred};
  return VKRT_OK;
}

/* ---- knobs --------------------------------------------------------------------------- */

static const struct {
  const char *name;
  int64_t min, max;
} knobs[VKRT_TUNING_KNOB_COUNT] = {
  [VKRT_TUNING_COPY_VEC4_MAX_GROUPS] = {"COPY_VEC4_MAX_GROUPS", 1, UINT32_MAX},
  [VKRT_TUNING_COPY_TRANSPOSED_TILED] = {"COPY_TRANSPOSED_TILED", 0, 1},
  [VKRT_TUNING_FORCE_CONCAT_GENERIC] = {"FORCE_CONCAT_GENERIC", 0, 1},
  [VKRT_TUNING_FORCE_TRANSPOSE_SCALAR] = {"FORCE_TRANSPOSE_SCALAR", 0, 1},
  [VKRT_TUNING_TRANSPOSE_VARIANT] = {"TRANSPOSE_VARIANT", 0, 2},
  [VKRT_TUNING_QUANT_VARIANT] = {"QUANT_VARIANT", 0, VKRT_QUANT_VARIANTS},
  [VKRT_TUNING_FORCE_MATMUL_KERNEL] = {"FORCE_MATMUL_KERNEL", 0, 2},
  [VKRT_TUNING_STREAM_FLUSH_OPS] = {"STREAM_FLUSH_OPS", 0, UINT32_MAX},
  [VKRT_TUNING_MATMUL_TILED_MIN_M] = {"MATMUL_TILED_MIN_M", 1, 65536},
  [VKRT_TUNING_MATMUL_COOPMAT] = {"MATMUL_COOPMAT", 0, 1},
  [VKRT_TUNING_ATTENTION_SPLITS] = {"ATTENTION_SPLITS", 0, UINT32_MAX},
  [VKRT_TUNING_ATTENTION_UNROLL] = {"ATTENTION_UNROLL", 0, VKRT_ATTENTION_MAX_UNROLL},
};

vkrt_status vkrt_tuning_set(vkrt_appliance *app, uint32_t device, vkrt_tuning_knob knob,
                            int64_t value) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, &value, &dev);
  if (s != VKRT_OK)
    return s;
  if ((unsigned)knob >= VKRT_TUNING_KNOB_COUNT)
    return bad(dev, "tuning: no knob %lld", (long long)knob);
  if (value < knobs[knob].min || value > knobs[knob].max)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "tuning: %s takes %lld..%lld, not %lld", knobs[knob].name,
                      (long long)knobs[knob].min, (long long)knobs[knob].max, (long long)value);
  struct vkrt_ops_state *ops = dev->ops;
  switch (knob) {
  case VKRT_TUNING_COPY_VEC4_MAX_GROUPS: ops->copy_vec4_max_groups = (uint32_t)value; break;
  case VKRT_TUNING_COPY_TRANSPOSED_TILED: ops->copy_transposed_tiled = value; break;
  case VKRT_TUNING_FORCE_CONCAT_GENERIC: ops->force_concat_generic = value; break;
  case VKRT_TUNING_FORCE_TRANSPOSE_SCALAR: ops->force_transpose_scalar = value; break;
  case VKRT_TUNING_TRANSPOSE_VARIANT: ops->transpose_variant = (int)value; break;
  case VKRT_TUNING_QUANT_VARIANT: ops->quant_variant = (int)value; break;
  case VKRT_TUNING_STREAM_FLUSH_OPS: vkrt_stream_set_flush_ops(dev, (uint32_t)value); break;
  case VKRT_TUNING_MATMUL_TILED_MIN_M:
    for (int t = 0; t < VKRT_TYPE_COUNT; t++)
      ops->matmul_min_m[t] = (uint32_t)value;
    break;
  case VKRT_TUNING_MATMUL_COOPMAT: ops->use_coopmat = value; break;
  case VKRT_TUNING_ATTENTION_SPLITS: ops->force_attention_splits = (uint32_t)value; break;
  case VKRT_TUNING_ATTENTION_UNROLL: ops->force_attention_unroll = (uint32_t)value; break;
  default: ops->force_matmul_kernel = (int)value; break;
  }
  return VKRT_OK;
}

vkrt_status vkrt_tuning_get(const vkrt_appliance *app, uint32_t device, vkrt_tuning_knob knob,
                            int64_t *out) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  if ((unsigned)knob >= VKRT_TUNING_KNOB_COUNT)
    return bad(dev, "tuning: no knob %lld", (long long)knob);
  const struct vkrt_ops_state *ops = dev->ops;
  switch (knob) {
  case VKRT_TUNING_COPY_VEC4_MAX_GROUPS: *out = ops->copy_vec4_max_groups; break;
  case VKRT_TUNING_COPY_TRANSPOSED_TILED: *out = ops->copy_transposed_tiled; break;
  case VKRT_TUNING_FORCE_CONCAT_GENERIC: *out = ops->force_concat_generic; break;
  case VKRT_TUNING_FORCE_TRANSPOSE_SCALAR: *out = ops->force_transpose_scalar; break;
  case VKRT_TUNING_TRANSPOSE_VARIANT: *out = ops->transpose_variant; break;
  case VKRT_TUNING_QUANT_VARIANT: *out = ops->quant_variant; break;
  case VKRT_TUNING_STREAM_FLUSH_OPS: *out = dev->stream.flush_ops; break;
  case VKRT_TUNING_MATMUL_TILED_MIN_M: *out = ops->matmul_min_m[VKRT_TYPE_F16]; break;
  case VKRT_TUNING_MATMUL_COOPMAT: *out = ops->use_coopmat; break;
  case VKRT_TUNING_ATTENTION_SPLITS: *out = ops->force_attention_splits; break;
  case VKRT_TUNING_ATTENTION_UNROLL: *out = ops->force_attention_unroll; break;
  default: *out = ops->force_matmul_kernel; break;
  }
  return VKRT_OK;
}

vkrt_status vkrt_tuning_limits_set(vkrt_appliance *app, uint32_t device, uint32_t max_group_count,
                                   bool disable_push_descriptor, uint64_t max_storage_buffer_range) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, app, &dev);
  if (s != VKRT_OK)
    return s;
  if (max_storage_buffer_range && (max_storage_buffer_range < 1024 || max_storage_buffer_range % 16))
    return bad(dev, "tuning: max_storage_buffer_range is 0 or a multiple of 16 >= 1024, not %lld",
               (long long)max_storage_buffer_range);
  vkrt_ops_test_limits(dev, max_group_count, disable_push_descriptor, max_storage_buffer_range);
  return VKRT_OK;
}

/* transpose_variant v (1 plain tile order, 2 element pairs) runs this f32 kernel. */
static const enum vkrt_ops_kernel transpose_variants[2] = {VKRT_OPS_TRANSPOSE_F32_PLAIN,
                                                           VKRT_OPS_TRANSPOSE_X2_F32};

int vkrt_tuning_variant_count(vkrt_tuning_knob knob) {
  return knob == VKRT_TUNING_TRANSPOSE_VARIANT || knob == VKRT_TUNING_QUANT_VARIANT
             ? (int)knobs[knob].max : 0;
}

const char *vkrt_tuning_variant_name(vkrt_tuning_knob knob, int64_t value) {
  if (value < 1 || value > vkrt_tuning_variant_count(knob))
    return NULL;
  return knob == VKRT_TUNING_QUANT_VARIANT ? vkrt_quant_variant_names[value - 1]
                                           : vkrt_ops_kernel_name(transpose_variants[value - 1]);
}

bool vkrt_tuning_variant_usable(vkrt_appliance *app, uint32_t device, vkrt_tuning_knob knob,
                                int64_t value) {
  struct vkrt_device *dev;
  if (!vkrt_tuning_variant_name(knob, value) || tuning_device(app, device, app, &dev) != VKRT_OK)
    return false;
  if (knob == VKRT_TUNING_QUANT_VARIANT) /* the op says when w or x do not fit the variant */
    return IS_ENABLED(CONFIG_VKRT_KERNEL_QUANT) &&
           (VKRT_QUANT_VARIANT_KIND(value) != VKRT_TUNING_QUANT_READ_Q8X || dev->ops->integer_dot);
  return vkrt_ops_kernel_usable(dev, transpose_variants[value - 1]);
}

_Static_assert(VKRT_TUNING_QUANT_READ_COUNT == VKRT_QUANT_READ_PATTERNS,
               "the ops count every read pattern");

int vkrt_tuning_quant_read_of(int64_t variant) {
  return variant < 1 || variant > VKRT_QUANT_VARIANTS ? -1 : VKRT_QUANT_VARIANT_KIND(variant);
}

int vkrt_tuning_quant_preference(vkrt_type type, int rank) {
  if ((type != VKRT_TYPE_Q8_0 && type != VKRT_TYPE_Q4_K) || rank < 0 ||
      rank >= VKRT_TUNING_QUANT_READ_COUNT - 1)
    return 0;
  return vkrt_quant_preference[type == VKRT_TYPE_Q8_0 ? 0 : 1][rank];
}

static vkrt_status matvec_type(struct vkrt_device *dev, vkrt_type type) {
  return type == VKRT_TYPE_F32 || type == VKRT_TYPE_F16
             ? VKRT_OK : bad(dev, "tuning: matrix-vector shapes are for f32 and f16 weights, "
                             "not type %lld", (long long)type);
}

vkrt_status vkrt_tuning_matvec_get(const vkrt_appliance *app, uint32_t device, vkrt_type type,
                                   vkrt_tuning_matvec *out) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s == VKRT_OK)
    s = matvec_type(dev, type);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_matvec_config *m = &dev->ops->matvec[type];
  *out = (vkrt_tuning_matvec){m->wg, m->rows, m->unroll, m->blocks};
  return VKRT_OK;
}

vkrt_status vkrt_tuning_matvec_set(vkrt_appliance *app, uint32_t device, vkrt_type type,
                                   const vkrt_tuning_matvec *cfg) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, cfg, &dev);
  if (s == VKRT_OK)
    s = matvec_type(dev, type);
  if (s != VKRT_OK)
    return s;
  if (!cfg->wg || !cfg->rows || !cfg->unroll || !cfg->blocks ||
      cfg->wg > dev->caps.max_compute_work_group_invocations)
    return bad(dev, "tuning: a matrix-vector shape needs every field >= 1 and wg <= %lld",
               (long long)dev->caps.max_compute_work_group_invocations);
  /* Room for the shape's pipelines (M = 1 and the accumulate form): else drop them all. */
  if (atomic_load(&dev->ops->variant_count) + 2 >= VKRT_OPS_MAX_VARIANTS) {
    s = vkrt_finish(app, device);
    if (s != VKRT_OK)
      return s;
    vkrt_ops_drop_variants(dev);
  }
  /* one shape for every M, so a sweep times what it set */
  dev->ops->matvec[type] = (struct vkrt_matvec_config){cfg->wg, cfg->rows, cfg->unroll, cfg->blocks};
  dev->ops->matvec_cols[type] = dev->ops->matvec[type];
  return VKRT_OK;
}

static vkrt_status tile_slot(struct vkrt_device *dev, vkrt_tuning_tile_slot slot) {
  return (unsigned)slot < VKRT_TUNING_TILE_SLOT_COUNT
             ? VKRT_OK : bad(dev, "tuning: no matmul tile slot %lld", (long long)slot);
}

vkrt_status vkrt_tuning_matmul_tile_get(const vkrt_appliance *app, uint32_t device,
                                        vkrt_tuning_tile_slot slot, vkrt_tuning_matmul_tile *out) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s == VKRT_OK)
    s = tile_slot(dev, slot);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_matmul_tile *t = &dev->ops->matmul_tile[slot / 2][slot % 2];
  *out = (vkrt_tuning_matmul_tile){t->wg, t->bm, t->bn, t->rm};
  return VKRT_OK;
}

vkrt_status vkrt_tuning_matmul_tile_set(vkrt_appliance *app, uint32_t device,
                                        vkrt_tuning_tile_slot slot,
                                        const vkrt_tuning_matmul_tile *tile) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, tile, &dev);
  if (s == VKRT_OK)
    s = tile_slot(dev, slot);
  if (s != VKRT_OK)
    return s;
  struct vkrt_matmul_tile t = {tile->wg, tile->bm, tile->bn, tile->rm};
  const char *why = vkrt_ops_matmul_tile_check(dev, slot >= VKRT_TUNING_TILE_COOPMAT_SMALL, &t);
  if (why)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "tuning: matmul tile %ux%u, wg %u, rm %u: %s", t.bm, t.bn, t.wg, t.rm, why);
  if (atomic_load(&dev->ops->variant_count) + 8 >= VKRT_OPS_MAX_VARIANTS) {
    s = vkrt_finish(app, device);
    if (s != VKRT_OK)
      return s;
    vkrt_ops_drop_variants(dev);
  }
  dev->ops->matmul_tile[slot / 2][slot % 2] = t;
  return VKRT_OK;
}

bool vkrt_tuning_matmul_coopmat_usable(const vkrt_appliance *app, uint32_t device) {
  struct vkrt_device *dev;
  return tuning_device(app, device, app, &dev) == VKRT_OK && dev->ops->coopmat;
}

/* ---- what ran ------------------------------------------------------------------------- */

vkrt_status vkrt_tuning_counters_get(const vkrt_appliance *app, uint32_t device,
                                     vkrt_tuning_counters *out) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_ops_state *o = dev->ops;
  *out = (vkrt_tuning_counters){
      .matvec = o->matvec_count,           .matmul_tiled = o->matmul_tiled_count,
      .matvec_split = o->matvec_split_count, .concat_fast = o->concat_fast_count,
      .concat_generic = o->concat_generic_count, .concat_split = o->concat_split_count,
      .transpose_x2 = o->transpose_x2_count, .copy_u4 = o->copy_u4_count,
      .copy_tiled = o->copy_tiled_count,   .reduce_vec4 = o->reduce_vec4_count,
      .quant_matvec = o->quant_matvec_count, .dequant = o->dequant_count,
      .quant_read = {o->quant_kind_count[0], o->quant_kind_count[1], o->quant_kind_count[2],
                     o->quant_kind_count[3], o->quant_kind_count[4]},
      .matmul_coopmat = o->matmul_coopmat_count, .matmul_fallback = o->matmul_fallback_count,
      .pipelines_ready = vkrt_ops_pipelines_ready(dev), .argmax_split = o->argmax_split_count,
      .attention = o->attention_count, .attention_splits = o->attention_split_count,
      .attention_rounds = o->attention_round_count,
      .attention_subgroup = o->attention_subgroup_count,
      .attention_direct = o->attention_direct_count};
  return VKRT_OK;
}

vkrt_status vkrt_tuning_attention_plan(const vkrt_appliance *app, uint32_t device,
                                       uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                                       uint32_t n_q, uint32_t n_ctx, vkrt_tuning_attention *out) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  struct vkrt_attention_plan plan;
  char why[VKRT_ERROR_MESSAGE_SIZE];
  if (!vkrt_attention_plan_for(dev, head_dim, n_head, n_head_kv, n_q, n_ctx, &plan, why,
                               sizeof(why)))
    return vkrt_error(&dev->sys->base, IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION)
                                           ? VKRT_ERROR_INVALID_ARGUMENT : VKRT_ERROR_UNSUPPORTED,
                      "dev%u: %s", dev->index, why);
  *out = (vkrt_tuning_attention){plan.heads_per_group, plan.head_groups, plan.split_len,
                                 plan.splits, plan.queries_per_round, plan.rounds, plan.unroll,
                                 plan.shared_bytes, dev->ops->attention_scratch->size,
                                 plan.subgroup, plan.splits == 1};
  return VKRT_OK;
}

const char *vkrt_tuning_copy_path(const vkrt_appliance *app, uint32_t device) {
  struct vkrt_device *dev;
  return tuning_device(app, device, app, &dev) == VKRT_OK ? vkrt_ops_copy_path(dev) : "?";
}

vkrt_status vkrt_tuning_cmd_copy_bytes(vkrt_buffer *dst, uint64_t dst_offset, vkrt_buffer *src,
                                       uint64_t src_offset, uint64_t size, vkrt_tuning_copy path) {
  if (!dst || !src)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = dst->dev;
  if (src->dev != dev)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "tuning: copy between devices");
  if (path < VKRT_TUNING_COPY_PREFERRED || path > VKRT_TUNING_COPY_TRANSFER)
    return bad(dev, "tuning: no copy path %lld", (long long)path);
  if (dst_offset > dst->size || size > dst->size - dst_offset || src_offset > src->size ||
      size > src->size - src_offset)
    return bad(dev, "tuning: copy of %lld bytes past a buffer's end", (long long)size);
  vkrt_status s = vkrt_ops_open(dev);
  VkCommandBuffer cmd;
  if (s == VKRT_OK)
    s = vkrt_stream_next_copy(dev, dst, dst_offset, src, src_offset, size, &cmd);
  return s != VKRT_OK ? s : vkrt_ops_copy_bytes(dev, cmd, dst->handle, dst_offset, src->handle,
                                                src_offset, size, path);
}

/* ---- timestamps ----------------------------------------------------------------------- */

struct vkrt_tuning_timer {
  struct vkrt_device *dev;
  VkQueryPool queries;
};

vkrt_status vkrt_tuning_timer_create(vkrt_appliance *app, uint32_t device,
                                     vkrt_tuning_timer **out) {
  if (!out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  if (!(dev->caps.timestamp_period_ns > 0))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                      "dev%u: no timestamps on the compute queue", dev->index);
  struct vkrt_tuning_timer *t = vkrt_calloc(&dev->sys->base, 1, sizeof(*t));
  if (!t)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: timer", dev->index);
  t->dev = dev;
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                              .queryType = VK_QUERY_TYPE_TIMESTAMP,
                              .queryCount = 2};
  VkResult r = dev->vk.vkCreateQueryPool(dev->handle, &qi, &dev->sys->vk_allocator, &t->queries);
  if (r != VK_SUCCESS) {
    vkrt_free(&dev->sys->base, t);
    return vkrt_vk_error(dev, r, "vkCreateQueryPool");
  }
  *out = t;
  return VKRT_OK;
}

void vkrt_tuning_timer_destroy(vkrt_tuning_timer *t) {
  if (!t)
    return;
  t->dev->vk.vkDestroyQueryPool(t->dev->handle, t->queries, &t->dev->sys->vk_allocator);
  vkrt_free(&t->dev->sys->base, t);
}

vkrt_status vkrt_tuning_timer_begin(vkrt_tuning_timer *t) {
  if (!t)
    return VKRT_ERROR_INVALID_ARGUMENT;
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_stream_cmd(t->dev, &cmd);
  if (s != VKRT_OK)
    return s;
  t->dev->vk.vkCmdResetQueryPool(cmd, t->queries, 0, 2);
  t->dev->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, t->queries, 0);
  return VKRT_OK;
}

vkrt_status vkrt_tuning_timer_end(vkrt_tuning_timer *t, bool barrier) {
  if (!t)
    return VKRT_ERROR_INVALID_ARGUMENT;
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_stream_cmd(t->dev, &cmd);
  if (s != VKRT_OK)
    return s;
  if (barrier)
    vkrt_stream_barrier(t->dev, cmd);
  t->dev->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, t->queries, 1);
  return VKRT_OK;
}

vkrt_status vkrt_tuning_timer_seconds(vkrt_tuning_timer *t, double *out) {
  if (!t || !out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  uint64_t ts[2];
  VkResult r = t->dev->vk.vkGetQueryPoolResults(t->dev->handle, t->queries, 0, 2, sizeof(ts), ts,
                                                8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(t->dev, r, "vkGetQueryPoolResults");
  *out = (double)(ts[1] - ts[0]) * t->dev->caps.timestamp_period_ns * 1e-9;
  return VKRT_OK;
}

/* ---- raw submit floors ---------------------------------------------------------------- */

struct vkrt_tuning_raw {
  struct vkrt_device *dev;
  VkSemaphore timeline;
  uint64_t value;
  VkFence fence;
  VkCommandPool pool;
  VkCommandBuffer cmd[VKRT_TUNING_RAW_KIND_COUNT]; /* recorded once; NULL: an empty submit */
};

/* What each kind's command buffer holds: a 4-byte fill or update of the target, and which
 * barriers around it. */
enum raw_barrier { RAW_NONE, RAW_HOST, RAW_DEVICE };
static const struct raw_recipe {
  bool recorded, update;
  enum raw_barrier lead, close;
} raw_recipes[VKRT_TUNING_RAW_KIND_COUNT] = {
  [VKRT_TUNING_RAW_FILL_SPIN] = {true, false, RAW_NONE, RAW_HOST},
  [VKRT_TUNING_RAW_UPDATE_SPIN] = {true, true, RAW_NONE, RAW_HOST},
  [VKRT_TUNING_RAW_FILL_BARE_SPIN] = {true, false, RAW_NONE, RAW_NONE},
  [VKRT_TUNING_RAW_FILL_DEVICE_SPIN] = {true, false, RAW_NONE, RAW_DEVICE},
  [VKRT_TUNING_RAW_UPDATE_DEVICE_SPIN] = {true, true, RAW_NONE, RAW_DEVICE},
  [VKRT_TUNING_RAW_LEAD_FILL_SPIN] = {true, false, RAW_DEVICE, RAW_NONE},
};

void vkrt_tuning_raw_destroy(vkrt_tuning_raw *raw) {
  if (!raw)
    return;
  struct vkrt_device *dev = raw->dev;
  const VkAllocationCallbacks *a = &dev->sys->vk_allocator;
  /* the timeline was seen signaled by a spin; the queue (and the validation layer's thread
   * retiring its submissions) may still hold the objects a moment longer */
  pthread_mutex_lock(&dev->compute_queue_lock);
  dev->vk.vkQueueWaitIdle(dev->compute_queue);
  pthread_mutex_unlock(&dev->compute_queue_lock);
  if (raw->pool) /* frees the command buffers */
    dev->vk.vkDestroyCommandPool(dev->handle, raw->pool, a);
  if (raw->fence)
    dev->vk.vkDestroyFence(dev->handle, raw->fence, a);
  vkrt_timeline_destroy(dev, raw->timeline);
  vkrt_free(&dev->sys->base, raw);
}

static void raw_barrier(struct vkrt_device *dev, VkCommandBuffer cmd, enum raw_barrier kind) {
  if (kind == RAW_HOST) {
    VkMemoryBarrier host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    dev->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                 VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host, 0, NULL, 0, NULL);
  } else if (kind == RAW_DEVICE) { /* the stream's closing barrier when the host reads nothing */
    vkrt_stream_close_barrier(dev, cmd, false);
  }
}

static vkrt_status raw_setup(struct vkrt_tuning_raw *raw, VkBuffer target) {
  struct vkrt_device *dev = raw->dev;
  const VkAllocationCallbacks *a = &dev->sys->vk_allocator;
  vkrt_status s = vkrt_timeline_create(dev, NULL, "raw floor timeline", &raw->timeline);
  if (s != VKRT_OK)
    return s;
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkResult r = dev->vk.vkCreateFence(dev->handle, &fci, a, &raw->fence);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreateFence");
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .queueFamilyIndex = dev->compute_family};
  r = dev->vk.vkCreateCommandPool(dev->handle, &pci, a, &raw->pool);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreateCommandPool");
  VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  static const uint32_t one = 0x3f800000u;
  for (int k = 0; k < VKRT_TUNING_RAW_KIND_COUNT && r == VK_SUCCESS; k++) {
    const struct raw_recipe *recipe = &raw_recipes[k];
    if (!recipe->recorded)
      continue;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = raw->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    r = dev->vk.vkAllocateCommandBuffers(dev->handle, &cai, &raw->cmd[k]);
    if (r != VK_SUCCESS)
      return vkrt_vk_error(dev, r, "raw floor command buffers");
    VkCommandBuffer cmd = raw->cmd[k];
    r = dev->vk.vkBeginCommandBuffer(cmd, &cbi);
    if (r != VK_SUCCESS)
      break;
    raw_barrier(dev, cmd, recipe->lead);
    if (recipe->update)
      dev->vk.vkCmdUpdateBuffer(cmd, target, 0, 4, &one);
    else
      dev->vk.vkCmdFillBuffer(cmd, target, 0, 4, one);
    raw_barrier(dev, cmd, recipe->close);
    r = dev->vk.vkEndCommandBuffer(cmd);
  }
  return r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(dev, r, "raw floor command buffer");
}

vkrt_status vkrt_tuning_raw_create(vkrt_buffer *fill_target, vkrt_tuning_raw **out) {
  if (!out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!fill_target)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = fill_target->dev;
  if (fill_target->size < 4)
    return bad(dev, "tuning: the fill target has %lld bytes, under 4", (long long)fill_target->size);
  struct vkrt_tuning_raw *raw = vkrt_calloc(&dev->sys->base, 1, sizeof(*raw));
  if (!raw)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: raw floor", dev->index);
  raw->dev = dev;
  vkrt_status s = raw_setup(raw, fill_target->handle);
  if (s != VKRT_OK) {
    vkrt_tuning_raw_destroy(raw);
    return s;
  }
  *out = raw;
  return VKRT_OK;
}

static vkrt_status raw_submit(struct vkrt_tuning_raw *raw, bool fence, VkCommandBuffer cmd) {
  struct vkrt_device *dev = raw->dev;
  uint64_t v = ++raw->value;
  VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .signalSemaphoreValueCount = 1,
                                      .pSignalSemaphoreValues = &v};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ts,
                     .commandBufferCount = cmd ? 1 : 0,
                     .pCommandBuffers = &cmd,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &raw->timeline};
  pthread_mutex_lock(&dev->compute_queue_lock);
  VkResult r = dev->vk.vkQueueSubmit(dev->compute_queue, 1, &si, fence ? raw->fence : VK_NULL_HANDLE);
  pthread_mutex_unlock(&dev->compute_queue_lock);
  return r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(dev, r, "vkQueueSubmit");
}

vkrt_status vkrt_tuning_raw_round_trip(vkrt_tuning_raw *raw, vkrt_tuning_raw_kind kind) {
  if (!raw)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = raw->dev;
  VkResult r = VK_SUCCESS;
  vkrt_status s;
  switch (kind) {
  case VKRT_TUNING_RAW_SPIN:
  case VKRT_TUNING_RAW_FILL_SPIN:
  case VKRT_TUNING_RAW_UPDATE_SPIN:
  case VKRT_TUNING_RAW_FILL_BARE_SPIN:
  case VKRT_TUNING_RAW_FILL_DEVICE_SPIN:
  case VKRT_TUNING_RAW_UPDATE_DEVICE_SPIN:
  case VKRT_TUNING_RAW_LEAD_FILL_SPIN:
    s = raw_submit(raw, false, raw->cmd[kind]);
    for (uint64_t cur = 0; s == VKRT_OK && r == VK_SUCCESS && cur < raw->value;)
      r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, raw->timeline, &cur);
    break;
  case VKRT_TUNING_RAW_WAIT_SEMAPHORES: {
    s = raw_submit(raw, false, VK_NULL_HANDLE);
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &raw->timeline,
                              .pValues = &raw->value};
    if (s == VKRT_OK)
      r = dev->vk.vkWaitSemaphores(dev->handle, &wi, UINT64_MAX);
    break;
  }
  case VKRT_TUNING_RAW_FENCE:
    s = raw_submit(raw, true, VK_NULL_HANDLE);
    if (s == VKRT_OK)
      r = dev->vk.vkWaitForFences(dev->handle, 1, &raw->fence, VK_TRUE, UINT64_MAX);
    if (s == VKRT_OK && r == VK_SUCCESS)
      r = dev->vk.vkResetFences(dev->handle, 1, &raw->fence);
    break;
  default:
    return bad(dev, "tuning: no raw floor kind %lld", (long long)kind);
  }
  return s != VKRT_OK ? s : r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(dev, r, "raw floor wait");
}

/* ---- host regions --------------------------------------------------------------------- */

/* The appliance's registry (opened by vkrt_open); `arg` as in tuning_device. */
static vkrt_status tuning_registry(const vkrt_appliance *app, const void *arg,
                                   struct vkrt_import_registry **out) {
  *out = NULL;
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_base *base = (struct vkrt_base *)&app->sys.base;
  if (!arg)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "tuning: a pointer argument is NULL");
  if (!app->registry)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "tuning: no host registry is open");
  *out = app->registry;
  return VKRT_OK;
}

vkrt_status vkrt_tuning_import_get(const vkrt_appliance *app, vkrt_tuning_import *out) {
  struct vkrt_import_registry *reg;
  vkrt_status s = tuning_registry(app, out, &reg);
  if (s != VKRT_OK)
    return s;
  pthread_mutex_lock(&reg->budget_lock);
  const uint64_t budget = reg->prestage_budget;
  pthread_mutex_unlock(&reg->budget_lock);
  *out = (vkrt_tuning_import){.regions = vkrt_import_region_count(reg),
                              .live_chunks = (uint64_t)vkrt_import_live_chunks(reg),
                              .prestage_bytes = vkrt_import_prestage_bytes(reg),
                              .prestage_budget = budget,
                              .load_pinned_bytes = atomic_load(&reg->load_pinned)};
  return VKRT_OK;
}

vkrt_status vkrt_tuning_load_set(vkrt_appliance *app, const vkrt_tuning_load *load) {
  struct vkrt_import_registry *reg;
  vkrt_status s = tuning_registry(app, load, &reg);
  if (s != VKRT_OK)
    return s;
  const uint64_t chunk = load->chunk_bytes, block = load->block_bytes;
  if (load->threads > VKRT_WORKERS_MAX || load->chunks == 1 ||
      load->chunks > VKRT_LOAD_MAX_CHUNKS || chunk % 4096 || block % 4096 ||
      chunk > (1ull << 31) || (block && chunk && block > chunk))
    return vkrt_error(&app->sys.base, VKRT_ERROR_INVALID_ARGUMENT, "tuning: load knobs: threads "
                      "<= %d, chunks 2..%d, chunk and block multiples of 4 KiB (chunk <= 2 GiB, "
                      "block <= chunk); 0 for a default", VKRT_WORKERS_MAX, VKRT_LOAD_MAX_CHUNKS);
  reg->load_knobs = (struct vkrt_load_knobs){.threads = load->threads, .chunks = load->chunks,
                                             .chunk_bytes = chunk, .block_bytes = block,
                                             .gather_below = load->gather_below,
                                             .no_gather = load->no_gather};
  return VKRT_OK;
}

vkrt_status vkrt_tuning_load_get(const vkrt_appliance *app, vkrt_tuning_load *out) {
  struct vkrt_import_registry *reg;
  vkrt_status s = tuning_registry(app, out, &reg);
  if (s != VKRT_OK)
    return s;
  struct vkrt_load_knobs k;
  vkrt_load_knobs_effective(&reg->load_knobs, &k);
  *out = (vkrt_tuning_load){.threads = k.threads, .chunk_bytes = k.chunk_bytes,
                            .chunks = k.chunks, .block_bytes = k.block_bytes,
                            .gather_below = k.gather_below, .no_gather = k.no_gather};
  return VKRT_OK;
}

vkrt_status vkrt_tuning_prestage_budget_set(vkrt_appliance *app, uint64_t bytes) {
  struct vkrt_import_registry *reg;
  vkrt_status s = tuning_registry(app, app, &reg);
  if (s != VKRT_OK)
    return s;
  pthread_mutex_lock(&reg->budget_lock);
  reg->prestage_budget = bytes;
  pthread_mutex_unlock(&reg->budget_lock);
  return VKRT_OK;
}

vkrt_status vkrt_tuning_import_alignment_set(vkrt_appliance *app, uint32_t device, uint64_t bytes) {
  struct vkrt_device *dev;
  vkrt_status s = tuning_device(app, device, app, &dev);
  if (s != VKRT_OK)
    return s;
  struct vkrt_caps *c = &dev->caps;
  if (!c->external_memory_host)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "tuning: dev%u has no host import to align", dev->index);
  if (!bytes || (bytes & (bytes - 1)) || bytes < c->min_imported_host_pointer_alignment)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "tuning: an import alignment is a power of two >= %llu bytes, not %llu",
                      (unsigned long long)c->min_imported_host_pointer_alignment,
                      (unsigned long long)bytes);
  c->min_imported_host_pointer_alignment = bytes;
  return VKRT_OK;
}

size_t vkrt_tuning_import_describe(const vkrt_appliance *app, bool json, char *buf,
                                   size_t buf_size) {
  if (buf && buf_size)
    buf[0] = '\0';
  return app ? vkrt_import_describe(&app->sys, app->registry, json, buf, buf ? buf_size : 0) : 0;
}

/* ---- host copies ---------------------------------------------------------------------- */

uint32_t vkrt_tuning_parallel_copy(void *dst, const void *src, uint64_t size, uint32_t threads) {
  return vkrt_import_parallel_copy(dst, src, size, threads, NULL, NULL);
}

uint32_t vkrt_tuning_prestage_threads(void) { return VKRT_PRESTAGE_THREADS; }

/* ---- hand-over floors ------------------------------------------------------------------ */

struct vkrt_tuning_handover {
  struct vkrt_device *from, *to;
  VkQueue to_queue;
  pthread_mutex_t *to_lock;
  bool gpu_wait;
  VkSemaphore first;       /* on `from` */
  VkSemaphore first_at_to; /* the same payload on `to` (gpu_wait between devices) */
  VkSemaphore second;      /* on `to` */
  uint64_t value;
};

void vkrt_tuning_handover_destroy(vkrt_tuning_handover *h) {
  if (!h)
    return;
  struct vkrt_device *devs[2] = {h->from, h->to};
  for (int i = 0; i < 2; i++) {
    pthread_mutex_lock(&devs[i]->compute_queue_lock);
    devs[i]->vk.vkQueueWaitIdle(devs[i]->compute_queue);
    pthread_mutex_unlock(&devs[i]->compute_queue_lock);
  }
  if (h->to_lock) {
    pthread_mutex_lock(h->to_lock);
    h->to->vk.vkQueueWaitIdle(h->to_queue);
    pthread_mutex_unlock(h->to_lock);
  }
  vkrt_timeline_destroy(h->from, h->first);
  if (h->first_at_to)
    vkrt_timeline_destroy(h->to, h->first_at_to);
  vkrt_timeline_destroy(h->to, h->second);
  vkrt_free(&h->from->sys->base, h);
}

/* Shares `first` with `to` as an opaque FD (created exportable by the caller). */
static vkrt_status handover_share(struct vkrt_tuning_handover *h) {
  VkSemaphoreGetFdInfoKHR get = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
                                 .semaphore = h->first,
                                 .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
  int fd = -1;
  VkResult r = h->from->vk.vkGetSemaphoreFdKHR(h->from->handle, &get, &fd);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(h->from, r, "hand-over floor: vkGetSemaphoreFdKHR");
  vkrt_status s = vkrt_timeline_create(h->to, NULL, "hand-over floor timeline", &h->first_at_to);
  if (s != VKRT_OK) {
    close(fd);
    return s;
  }
  VkImportSemaphoreFdInfoKHR import = {.sType = VK_STRUCTURE_TYPE_IMPORT_SEMAPHORE_FD_INFO_KHR,
                                       .semaphore = h->first_at_to,
                                       .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
                                       .fd = fd};
  r = h->to->vk.vkImportSemaphoreFdKHR(h->to->handle, &import);
  if (r != VK_SUCCESS) {
    close(fd);
    return vkrt_vk_error(h->to, r, "hand-over floor: vkImportSemaphoreFdKHR");
  }
  return VKRT_OK;
}

vkrt_status vkrt_tuning_handover_create(vkrt_appliance *app, uint32_t from, uint32_t to,
                                        bool gpu_wait, vkrt_tuning_handover **out) {
  if (!out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  struct vkrt_device *a, *b;
  vkrt_status s = tuning_device(app, from, out, &a);
  if (s == VKRT_OK)
    s = tuning_device(app, to, out, &b);
  if (s != VKRT_OK)
    return s;
  if (from == to && !a->caps.has_transfer_queue)
    return vkrt_error(&a->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: no transfer queue apart from the compute queue", from);
  bool shared = gpu_wait && from != to;
  if (shared && !(a->caps.external_semaphore_fd && b->caps.external_semaphore_fd))
    return vkrt_error(&a->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u -> dev%u: no semaphore FD functions to wait on the GPU", from, to);
  struct vkrt_tuning_handover *h = vkrt_calloc(&a->sys->base, 1, sizeof(*h));
  if (!h)
    return vkrt_error(&a->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "hand-over floor");
  h->from = a;
  h->to = b;
  h->gpu_wait = gpu_wait;
  h->to_queue = from == to ? a->transfer_queue : b->compute_queue;
  h->to_lock = from == to ? a->transfer_lock : &b->compute_queue_lock;
  VkExportSemaphoreCreateInfo export_info = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
      .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
  s = vkrt_timeline_create(a, shared ? &export_info : NULL, "hand-over floor timeline", &h->first);
  if (s == VKRT_OK)
    s = vkrt_timeline_create(b, NULL, "hand-over floor timeline", &h->second);
  if (s == VKRT_OK && shared)
    s = handover_share(h);
  if (s != VKRT_OK) {
    vkrt_tuning_handover_destroy(h);
    return s;
  }
  *out = h;
  return VKRT_OK;
}

static VkResult handover_submit(struct vkrt_device *dev, VkQueue queue, pthread_mutex_t *lock,
                                VkSemaphore wait, VkSemaphore signal, uint64_t value) {
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .waitSemaphoreValueCount = wait ? 1 : 0,
                                      .pWaitSemaphoreValues = &value,
                                      .signalSemaphoreValueCount = 1,
                                      .pSignalSemaphoreValues = &value};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ts,
                     .waitSemaphoreCount = wait ? 1 : 0,
                     .pWaitSemaphores = &wait,
                     .pWaitDstStageMask = &stage,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &signal};
  pthread_mutex_lock(lock);
  VkResult r = dev->vk.vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE);
  pthread_mutex_unlock(lock);
  return r;
}

static VkResult handover_spin(struct vkrt_device *dev, VkSemaphore sem, uint64_t value) {
  uint64_t cur = 0;
  VkResult r = VK_SUCCESS;
  while (r == VK_SUCCESS && cur < value)
    r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, sem, &cur);
  return r;
}

vkrt_status vkrt_tuning_handover_round_trip(vkrt_tuning_handover *h) {
  if (!h)
    return VKRT_ERROR_INVALID_ARGUMENT;
  uint64_t v = ++h->value;
  VkResult r = handover_submit(h->from, h->from->compute_queue, &h->from->compute_queue_lock,
                               VK_NULL_HANDLE, h->first, v);
  VkSemaphore wait = VK_NULL_HANDLE;
  if (r == VK_SUCCESS && h->gpu_wait)
    wait = h->first_at_to ? h->first_at_to : h->first;
  else if (r == VK_SUCCESS)
    r = handover_spin(h->from, h->first, v);
  if (r == VK_SUCCESS)
    r = handover_submit(h->to, h->to_queue, h->to_lock, wait, h->second, v);
  if (r == VK_SUCCESS)
    r = handover_spin(h->to, h->second, v);
  return r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(h->to, r, "hand-over floor round trip");
}
