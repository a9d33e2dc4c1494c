/* vkrt/vkrt_lab.h: the device lookup every lab call shares, the device facts, and what ran:
 * the stream's submit and barrier counters, the ops' path counters, the attention plan and
 * the preferred copy path. */
#include <string.h>
#include <time.h>

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
                           .compute_units = c->compute_units,
                           .max_compute_shared_memory_size = c->max_compute_shared_memory_size,
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
                           .prepared = dev->stream.prepared,
                           .barriers = dev->stream.barriers,
                           .barriers_elided = dev->stream.barriers_elided,
                           .barriers_compute = dev->stream.barriers_compute,
                           .tails = atomic_load(&dev->stream.tails),
                           .flushes = dev->stream.flushes,
                           .deferred = dev->stream.deferred,
                           .caught_spinning = atomic_load(&dev->stream.caught_spinning),
                           .caught_dozing = atomic_load(&dev->stream.caught_dozing),
                           .woken = atomic_load(&dev->stream.woken)};
  clockid_t clock;
  struct timespec ts;
  if (dev->stream.submitter_started && pthread_getcpuclockid(dev->stream.submitter, &clock) == 0 &&
      clock_gettime(clock, &ts) == 0)
    out->submitter_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  return VKRT_OK;
}


vkrt_status vkrt_lab_counters_get(const vkrt_appliance *app, uint32_t device,
                                  vkrt_lab_counters *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_ops_counters *c = &dev->ops->lab->count;
  *out = (vkrt_lab_counters){.matvec = c->matvec,
                             .matmul_tiled = c->matmul_tiled,
                             .matvec_split = c->matvec_split,
                             .concat_fast = c->concat_fast,
                             .concat_generic = c->concat_generic,
                             .concat_split = c->concat_split,
                             .transpose_x2 = c->transpose_x2,
                             .copy_u4 = c->copy_u4,
                             .copy_tiled = c->copy_tiled,
                             .reduce_vec4 = c->reduce_vec4,
                             .quant_matvec = c->quant_matvec,
                             .dequant = c->dequant,
                             .matmul_coopmat = c->matmul_coopmat,
                             .matmul_x16 = c->matmul_x16,
                             .matmul_split_k = c->matmul_split_k,
                             .matmul_w16 = c->matmul_w16,
                             .matmul_fallback = c->matmul_fallback,
                             .pipelines_ready = vkrt_ops_pipelines_ready(dev),
                             .argmax_split = c->argmax_split,
                             .sample_draws = c->sample_draws,
                             .attention = c->attention,
                             .attention_splits = c->attention_splits,
                             .attention_rounds = c->attention_rounds,
                             .attention_rows = c->attention_rows,
                             .attention_k16 = c->attention_k16,
                             .attention_q8q = c->attention_q8q,
                             .top_k_passes = c->top_k_passes,
                             .attention_direct = c->attention_direct,
                             .attention_full_split = c->attention_full_split,
                             .attention_last_merges = c->attention_last_merges,
                             .matmul_fused_norm = c->matmul_fused_norm,
                             .matmul_fused_swiglu = c->matmul_fused_swiglu,
                             .matmul_fused_qkv = c->matmul_fused_qkv,
                             .quant_q8x_wide = c->quant_q8x_wide,
                             .matmul_w16_pieces = c->matmul_w16_pieces};
  _Static_assert(sizeof(out->quant_read) == sizeof(c->quant_read), "one counter per read pattern");
  memcpy(out->quant_read, c->quant_read, sizeof(out->quant_read));
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
                              plan.shared_bytes, dev->ops->attention_scratch->size,
                              plan.splits == 1, plan.rows, plan.subgroup, plan.full_split};
  return VKRT_OK;
}

const char *vkrt_lab_copy_path(const vkrt_appliance *app, uint32_t device) {
  struct vkrt_device *dev;
  return vkrt_lab_device_of(app, device, app, &dev) == VKRT_OK ? vkrt_ops_copy_path(dev) : "?";
}
