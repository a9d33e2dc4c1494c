/* vkrt/vkrt_lab.h: the device lookup every lab call shares, the device facts, and what ran:
 * the stream's submit and barrier counters, the ops' path counters, the attention plan and
 * the preferred copy path. */
#include "import/policy.h"
#include "lab/lab.h"

vkrt_status vkrt_lab_device_of(const vkrt_appliance *app, uint32_t device, const void *arg,
                               struct vkrt_device **out) {
  *out = NULL;
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev;
  vkrt_status s = vkrt_system_device((struct vkrt_system *)&app->sys, device, &dev);
  if (s == VKRT_OK && !arg)
    s = vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "lab: a pointer argument is NULL");
  if (s == VKRT_OK)
    s = vkrt_ops_open(dev);
  if (s == VKRT_OK)
    *out = dev;
  return s;
}

vkrt_status vkrt_lab_bad(struct vkrt_device *dev, const char *fmt, long long value) {
  return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, fmt, value);
}

vkrt_status vkrt_lab_device_get(const vkrt_appliance *app, uint32_t device,
                                vkrt_lab_device *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_caps *c = &dev->caps;
  *out = (vkrt_lab_device){.is_cpu = c->is_cpu,
                           .timestamp_period_ns = c->timestamp_period_ns,
                           .max_storage_buffer_range = c->max_storage_buffer_range,
                           .max_compute_work_group_invocations = c->max_compute_work_group_invocations,
                           .refuses_file_backed = c->external_memory_host &&
                                                     vkrt_import_file_backed_refused(c),
                              .min_imported_host_pointer_alignment =
                                  c->min_imported_host_pointer_alignment};
  return VKRT_OK;
}

vkrt_status vkrt_lab_stream_get(const vkrt_appliance *app, uint32_t device,
                                vkrt_lab_stream *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  *out = (vkrt_lab_stream){.submitted = dev->stream.submitted,
                           .host_closes = dev->stream.host_closes,
                           .begun_ahead = dev->stream.begun_ahead,
                           .barriers = dev->stream.barriers,
                           .barriers_elided = dev->stream.barriers_elided,
                           .flushes = dev->stream.flushes,
                           .deferred = dev->stream.deferred};
  return VKRT_OK;
}


vkrt_status vkrt_lab_counters_get(const vkrt_appliance *app, uint32_t device,
                                  vkrt_lab_counters *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_ops_state *o = dev->ops;
  *out = (vkrt_lab_counters){
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
      .attention_rounds = o->attention_round_count};
  return VKRT_OK;
}

vkrt_status vkrt_lab_attention_plan(const vkrt_appliance *app, uint32_t device,
                                    uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                                    uint32_t n_q, uint32_t n_ctx, vkrt_lab_attention *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  struct vkrt_attention_plan plan;
  char why[VKRT_ERROR_MESSAGE_SIZE];
  if (!vkrt_attention_plan_for(dev, head_dim, n_head, n_head_kv, n_q, n_ctx, &plan, why,
                               sizeof(why)))
    return vkrt_error(&dev->sys->base, IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION)
                                           ? VKRT_ERROR_INVALID_ARGUMENT : VKRT_ERROR_UNSUPPORTED,
                      "dev%u: %s", dev->index, why);
  *out = (vkrt_lab_attention){plan.heads_per_group, plan.head_groups, plan.split_len,
                              plan.splits, plan.queries_per_round, plan.rounds, plan.unroll,
                              plan.shared_bytes, dev->ops->attention_scratch->size};
  return VKRT_OK;
}

const char *vkrt_lab_copy_path(const vkrt_appliance *app, uint32_t device) {
  struct vkrt_device *dev;
  return vkrt_lab_device_of(app, device, app, &dev) == VKRT_OK ? vkrt_ops_copy_path(dev) : "?";
}
