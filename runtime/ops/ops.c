/* Per-device ops state: kernel slots resolved against the generated registry, lazily
 * created pipelines, descriptor binding, grid splitting, and the contiguous copy path. */
#include "ops/ops.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/workers.h"
#include "vkrt_kernels/registry.h"

static const struct {
  const char *name;
  const char *symbol; /* Kconfig symbol that embeds it */
  bool needs_16bit_storage;
  bool needs_subgroup_arithmetic;
  bool needs_integer_dot;
  bool needs_coopmat;
  bool needs_shuffle;
} kernel_info[VKRT_OPS_KERNEL_COUNT] = {
#define KERNEL_INFO(id, name, symbol, needs_16bit, needs_subgroup, needs_idot, needs_coopmat,      \
                    needs_shuffle)                                                                \
  [VKRT_OPS_##id] = {name, symbol, needs_16bit, needs_subgroup, needs_idot, needs_coopmat,         \
                     needs_shuffle},
  VKRT_KERNEL_LIST(KERNEL_INFO)
#undef KERNEL_INFO
};

const char *vkrt_ops_kernel_name(enum vkrt_ops_kernel k) {
  return (unsigned)k < VKRT_OPS_KERNEL_COUNT ? kernel_info[k].name : "?";
}

const char *vkrt_ops_kernel_symbol(enum vkrt_ops_kernel k) {
  return (unsigned)k < VKRT_OPS_KERNEL_COUNT ? kernel_info[k].symbol : "?";
}

static void destroy_pipeline(struct vkrt_device *dev, struct vkrt_ops_pipeline *p) {
  const VkAllocationCallbacks *ac = &dev->sys->vk_allocator;
  if (p->pipeline && dev->stream.bound_pipeline == p->pipeline)
    dev->stream.bound_pipeline = VK_NULL_HANDLE; /* a new pipeline may reuse the handle */
  if (p->pipeline)
    dev->vk.vkDestroyPipeline(dev->handle, p->pipeline, ac);
  if (p->layout)
    dev->vk.vkDestroyPipelineLayout(dev->handle, p->layout, ac);
  if (p->set_layout)
    dev->vk.vkDestroyDescriptorSetLayout(dev->handle, p->set_layout, ac);
  memset(p, 0, sizeof(*p));
}

void vkrt_ops_close(struct vkrt_device *dev) {
  struct vkrt_ops_state *ops = dev ? dev->ops : NULL;
  if (!ops)
    return;
  const VkAllocationCallbacks *ac = &dev->sys->vk_allocator;
  for (int k = 0; k < VKRT_OPS_KERNEL_COUNT; k++)
    destroy_pipeline(dev, &ops->pipe[k]);
  vkrt_ops_drop_variants(dev);
  vkrt_argmax_close(dev);
  vkrt_top_k_close(dev);
  vkrt_attention_close(dev);
  vkrt_matmul_x16_close(dev);
  vkrt_matmul_split_k_close(dev);
  for (int i = 0; i < VKRT_STREAM_DEPTH; i++)
    if (ops->pool[i])
      dev->vk.vkDestroyDescriptorPool(dev->handle, ops->pool[i], ac);
  pthread_mutex_destroy(&ops->lock);
  vkrt_free(&dev->sys->base, ops->lab);
  vkrt_free(&dev->sys->base, ops);
  dev->ops = NULL;
}

/* Whether compute shaders have the subgroup operations of `bit` (subgroups of 2 or more). */
static bool query_subgroup_ops(struct vkrt_device *dev, VkSubgroupFeatureFlags bit) {
  if (!dev->sys->vki.vkGetPhysicalDeviceProperties2 || !dev->physical)
    return false;
  VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                       .pNext = &sg};
  dev->sys->vki.vkGetPhysicalDeviceProperties2(dev->physical, &props);
  return (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (sg.supportedOperations & bit) &&
         sg.subgroupSize >= 2;
}

static vkrt_status create_pools(struct vkrt_device *dev, struct vkrt_ops_state *ops) {
  VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               VKRT_OPS_POOL_SETS * VKRT_OPS_MAX_BINDINGS};
  VkDescriptorPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = VKRT_OPS_POOL_SETS,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &size};
  for (int i = 0; i < VKRT_STREAM_DEPTH; i++) {
    if (ops->pool[i])
      continue;
    VkResult r = dev->vk.vkCreateDescriptorPool(dev->handle, &info, &dev->sys->vk_allocator,
                                                &ops->pool[i]);
    if (r != VK_SUCCESS)
      return vkrt_vk_error(dev, r, "vkCreateDescriptorPool (ops descriptor ring)");
  }
  return VKRT_OK;
}

static bool kernel_in_build(enum vkrt_ops_kernel k) {
  for (unsigned i = 0; i < vkrt_kernel_registry_count; i++)
    if (!strcmp(vkrt_kernel_registry[i]->name, kernel_info[k].name))
      return true;
  return false;
}

/* A contiguous copy takes the faster path per device, by driver: on CPU devices
 * (lavapipe) vkCmdCopyBuffer is ~16x faster than a compute copy, on GPUs the 16-byte-load
 * compute copy is ~5x faster than vkCmdCopyBuffer (H200: 4.21 vs 0.85 TB/s). */
static enum vkrt_ops_copy_path choose_copy_path(const struct vkrt_device *dev) {
  return kernel_in_build(VKRT_OPS_COPY_VEC4) && !dev->caps.is_cpu ? VKRT_OPS_COPY_PATH_COMPUTE
                                                                  : VKRT_OPS_COPY_PATH_TRANSFER;
}

/* Matrix-vector shape per device and weight type (kernels/matvec.comp), from the variant
 * sweep of vkrt-bench cases --variants over tools/bench/cases/decode.txt:
 * - NVIDIA (H200, 2026-12-02, 27 variants x 33 shapes): f16 128 invocations x 2 rows x 2
 *   chunks in flight (mean 0.98 of the previous 256/2/2 over the M = 1 shapes, 0.88 for
 *   M = 2..8; q/o 4096^2 10.4 vs 12.1 us); f32 256 x 1 row x 4 chunks (0.99).
 * - other GPUs: not measured; the same shape as NVIDIA f16 would be a guess, so the middle
 *   of the sweep (256 x 2 x 2).
 * - CPU devices (lavapipe) run a workgroup as one thread's SIMD loop, where narrow
 *   workgroups with more rows reuse each x chunk best. */
static struct vkrt_matvec_config choose_matvec(const struct vkrt_device *dev, vkrt_type type,
                                               uint32_t cols) {
  if (dev->caps.is_cpu)
    return (struct vkrt_matvec_config){.wg = 64, .rows = 4, .unroll = 1, .blocks = 1};
  /* NVIDIA, M 2..8 (CHANGELOG.md, 2026-12-03, the M > 1 sweep): with several columns each
   * weight chunk costs 2 M x loads and 8 M FMAs, and 64-invocation workgroups of 2 rows win
   * (H200 f16 gate/up M 4: 47.0 us vs 51.5 with the M = 1 shape; f32 q/o M 4: 21.2 vs 26.6). */
  if (dev->caps.vendor_id == 0x10de && cols > 1)
    return (struct vkrt_matvec_config){.wg = 64, .rows = 2, .unroll = type == VKRT_TYPE_F16 ? 2 : 4,
                                       .blocks = 1};
  if (dev->caps.vendor_id == 0x10de)
    return type == VKRT_TYPE_F16
               ? (struct vkrt_matvec_config){.wg = 128, .rows = 2, .unroll = 2, .blocks = 1}
               : (struct vkrt_matvec_config){.wg = 256, .rows = 1, .unroll = 4, .blocks = 1};
  return (struct vkrt_matvec_config){.wg = 256, .rows = 2, .unroll = 2, .blocks = 1};
}

/* Transposed views: the tiled transpose reads and writes coalesced, which pays on GPUs
 * (H200, turn 2: per-element copy of a transposed 4096^2 f32 view 130 us, the peer's tiled
 * path 41.7 us); on CPU devices (lavapipe) the per-element kernel is the faster one. */
static bool choose_transposed_tiled(const struct vkrt_device *dev) {
  return !dev->caps.is_cpu && kernel_in_build(VKRT_OPS_TRANSPOSE_F32);
}

bool vkrt_ops_transposed_copy_tiled(const struct vkrt_device *dev) {
  return dev->ops ? dev->ops->copy_transposed_tiled : choose_transposed_tiled(dev);
}

const char *vkrt_ops_transposed_copy_reason(const struct vkrt_device *dev) {
  if (!kernel_in_build(VKRT_OPS_TRANSPOSE_F32))
    return "transpose kernel not in this build (CONFIG_VKRT_KERNEL_TRANSPOSE=n)";
  if (dev->caps.is_cpu)
    return "CPU device (lavapipe): the per-element copy beats the shared-memory tiles";
  return "GPU: coalesced reads and writes through shared-memory tiles";
}

void vkrt_ops_matmul_plan(const struct vkrt_device *dev, char *buf, size_t size) {
  const struct vkrt_ops_state *ops = dev->ops;
  if (!ops) {
    snprintf(buf, size, "ops not open");
    return;
  }
  const struct vkrt_matmul_setup *m = &ops->matmul;
  bool built = vkrt_ops_coopmat_usable(dev);
  bool cm = built && ops->use_coopmat;
  const struct vkrt_matmul_tile *p = m->tile[cm];
  char refused[256] = "";
  if (m->coopmat_refused)
    snprintf(refused, sizeof(refused),
             "no (the device's limits refuse the plan's cooperative-matrix tiles: %s)",
             m->coopmat_refused);
  snprintf(buf, size,
           "matrix-vector below M = %u (f32) %u (f16) %u (q8_0) %u (q4_K) %u (q6_K), tiled from "
           "there; %s tiles %ux%u (M <= %u), %ux%u (M <= %u) and %ux%u (k steps of %u, %u and "
           "%u); cooperative matrix: %s",
           m->min_m[0][VKRT_TYPE_F32], m->min_m[cm][VKRT_TYPE_F16], m->min_m[cm][VKRT_TYPE_Q8_0],
           m->min_m[cm][VKRT_TYPE_Q4_K], m->min_m[cm][VKRT_TYPE_Q6_K],
           cm ? "f16/q8_0/q4_K/q6_K: cooperative-matrix" : "portable",
           p[0].bm, p[0].bn, p[0].bn, p[1].bm, p[1].bn, p[1].bn, p[2].bm, p[2].bn, p[0].bk,
           p[1].bk, p[2].bk,
           m->coopmat_refused ? refused
           : !m->coopmat ? "no (VK_NV_cooperative_matrix with 16x16x16 f16 x f16 -> f32 and "
                           "32-wide subgroups not on this device)"
           : !built ? "no (the device has them; this build has no cooperative-matrix kernels: "
                      "CONFIG_VKRT_KERNEL_MATMUL_COOPMAT)"
           : !cm ? "off (x stays f32: vkrt_options.matmul_activations = VKRT_MATMUL_ACTIVATIONS_F32)"
                 : "x and w rounded to f16 (vkrt_options.matmul_activations = "
                   "VKRT_MATMUL_ACTIVATIONS_F16), f32 weights on the portable tiles");
  size_t used;
  if (cm) {
    used = strlen(buf);
    snprintf(buf + used, size - VKRT_MIN(used, size), "; x rounded %s",
             ops->matmul_x16 ? "by a copy into a scratch first on the large tile, where it "
                               "fits (K a multiple of 8; else as the tiles load it)"
                             : "as the tiles load it (no f16 scratch: "
                               "CONFIG_VKRT_MATMUL_X16_SCRATCH_KB)");
    used = strlen(buf);
    if (ops->matmul_w16)
      snprintf(buf + used, size - VKRT_MIN(used, size),
               "; quantized w converted to f16 first on the large tile from M = %u (q8_0) %u "
               "(q4_K) %u (q6_K) where it fits the %llu MiB scratch",
               ops->matmul_w16_min_m[VKRT_TYPE_Q8_0], ops->matmul_w16_min_m[VKRT_TYPE_Q4_K],
               ops->matmul_w16_min_m[VKRT_TYPE_Q6_K],
               (unsigned long long)(ops->matmul_w16->size >> 20));
    else
      snprintf(buf + used, size - VKRT_MIN(used, size),
               "; quantized w decoded as the tiles load it (no w scratch: "
               "CONFIG_VKRT_MATMUL_W16_SCRATCH_KB)");
  }
  used = strlen(buf);
  if (ops->matmul_split_k && p[2].per_unit)
    snprintf(buf + used, size - VKRT_MIN(used, size),
             "; K split into 2-%d pieces (reduced after) where the grid does not fill the %u "
             "compute units (%u, %u and %u workgroups resident each, by tile)",
             VKRT_MATMUL_MAX_SPLITS, dev->caps.compute_units, p[0].per_unit, p[1].per_unit,
             p[2].per_unit);
  else
    snprintf(buf + used, size - VKRT_MIN(used, size), "; K never split (%s)",
             !IS_ENABLED(CONFIG_VKRT_MATMUL_SPLIT_K) ? "CONFIG_VKRT_MATMUL_SPLIT_K=n"
             : !ops->matmul_split_k ? "no scratch: CONFIG_VKRT_MATMUL_SPLIT_K_SCRATCH_KB"
             : !dev->caps.compute_units ? "the device does not report its compute units"
                                        : "no measured residency for this device's tiles");
  used = strlen(buf);
  if (m->portable_refused)
    snprintf(buf + used, size - VKRT_MIN(used, size),
             "; every M on the matrix-vector kernels, the portable tiles refused by the device's "
             "limits: %s", m->portable_refused);
}

vkrt_status vkrt_ops_fused_refuse(struct vkrt_device *dev, const char *fmt, ...) {
  char reason[VKRT_ERROR_MESSAGE_SIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof(reason), fmt, ap);
  va_end(ap);
  return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                    "vkrt_op_matmul_fused: %s (record vkrt_op_rms_norm, vkrt_op_matmul and "
                    "vkrt_op_swiglu one by one)", reason);
}

vkrt_status vkrt_ops_fused_one_column(struct vkrt_device *dev, const struct vkrt_ops_view *x) {
  if (x->ne[1] != 1)
    return vkrt_ops_fused_refuse(dev, "%u columns of x; the fused kernel takes one (a decode "
                                      "token)", (unsigned)x->ne[1]);
  return VKRT_OK;
}

vkrt_status vkrt_ops_fused_norm_loads(struct vkrt_device *dev, const struct vkrt_ops_view views[4],
                                      const vkrt_matmul_fusion *fusion) {
  if (fusion->norm && !vkrt_ops_vec16_dense(&views[3]))
    return vkrt_ops_fused_refuse(dev, "fusion->norm must start 16-byte aligned, dense (the "
                                      "kernel's 16-byte loads)");
  return VKRT_OK;
}

struct vkrt_matvec_config vkrt_ops_matvec_config(const struct vkrt_device *dev, vkrt_type t,
                                                 uint32_t cols) {
  if (!dev->ops)
    return choose_matvec(dev, t, cols);
  return cols > 1 ? dev->ops->matvec_cols[t] : dev->ops->matvec[t];
}

vkrt_status vkrt_ops_open(struct vkrt_device *dev) {
  if (dev->ops)
    return VKRT_OK;
  struct vkrt_ops_state *ops = vkrt_calloc(&dev->sys->base, 1, sizeof(*ops));
  if (ops && IS_ENABLED(CONFIG_VKRT_LAB)) { /* the lab's forces (none yet) and counters */
    ops->lab = vkrt_calloc(&dev->sys->base, 1, sizeof(*ops->lab));
    if (!ops->lab) {
      vkrt_free(&dev->sys->base, ops);
      ops = NULL;
    }
  }
  if (!ops)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                      "dev%u: out of host memory for the ops state", dev->index);
  ops->dev = dev;
  pthread_mutex_init(&ops->lock, NULL);
  const struct vkrt_caps *caps = &dev->caps;
  ops->limits.max_storage_buffer_range = caps->max_storage_buffer_range;
  ops->limits.min_storage_buffer_offset_alignment =
      caps->min_storage_buffer_offset_alignment ? caps->min_storage_buffer_offset_alignment : 1;
  for (int i = 0; i < 3; i++)
    ops->max_groups[i] = caps->max_compute_work_group_count[i] ? caps->max_compute_work_group_count[i] : 65535;
  /* H200: one 16-byte load per invocation (65535 groups) 4.21 TB/s; a grid-stride loop
   * over 8192 groups 4.01 TB/s (same run) */
  ops->copy_vec4_max_groups = 65535;
  ops->q8x_workgroups = VKRT_QUANT_Q8X_WORKGROUPS;
  ops->q8x_columns_wide = true;
  ops->q8x_max_m = 1;
  ops->q8x_columns_min_m[0] = VKRT_QUANT_Q8X_COLUMNS_MIN_M_Q8_0;
  ops->q8x_columns_min_m[1] = VKRT_QUANT_Q8X_COLUMNS_MIN_M_Q4_K;
  ops->push_descriptor = caps->push_descriptor && dev->vk.vkCmdPushDescriptorSetKHR;
  ops->subgroup_arithmetic = query_subgroup_ops(dev, VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  /* the kernels that shuffle (the q8x kernels' rounding of x) do it within groups of 8 */
  ops->subgroup_shuffle = query_subgroup_ops(dev, VK_SUBGROUP_FEATURE_SHUFFLE_BIT) &&
                          caps->min_subgroup_size >= 8;
  ops->storage_16bit = caps->storage_buffer_16bit;
  ops->integer_dot = caps->integer_dot_product;
  ops->max_invocations = caps->max_compute_work_group_invocations;
  ops->max_shared_bytes = caps->max_compute_shared_memory_size;
  for (unsigned i = 0; i < vkrt_kernel_registry_count; i++)
    for (int k = 0; k < VKRT_OPS_KERNEL_COUNT; k++)
      if (!strcmp(vkrt_kernel_registry[i]->name, kernel_info[k].name))
        ops->desc[k] = vkrt_kernel_registry[i];
  ops->copy_path = choose_copy_path(dev);
  ops->copy_transposed_tiled = choose_transposed_tiled(dev);
  for (int t = 0; t < VKRT_TYPE_COUNT; t++) {
    ops->matvec[t] = choose_matvec(dev, (vkrt_type)t, 1);
    ops->matvec_cols[t] = choose_matvec(dev, (vkrt_type)t, 2);
  }
  /* the cooperative-matrix tiles round x to f16: taken only when the caller opts in
   * (vkrt_options.matmul_activations, set by the appliance after open) */
  vkrt_matmul_setup_init(caps, &ops->matmul);
  ops->use_coopmat = false;
  dev->ops = ops;
  vkrt_status s = ops->push_descriptor ? VKRT_OK : create_pools(dev, ops);
  if (s == VKRT_OK)
    s = vkrt_argmax_open(dev);
  if (s == VKRT_OK)
    s = vkrt_top_k_open(dev);
  if (s == VKRT_OK)
    s = vkrt_attention_open(dev);
  if (s == VKRT_OK)
    s = vkrt_matmul_x16_open(dev);
  if (s == VKRT_OK)
    s = vkrt_matmul_split_k_open(dev);
  if (s != VKRT_OK)
    vkrt_ops_close(dev);
  return s;
}

struct vkrt_ops_view vkrt_ops_scratch_view(struct vkrt_buffer *scratch, const uint32_t ne[4],
                                           vkrt_type t, uint32_t size, uint32_t copies) {
  uint64_t elements = (uint64_t)ne[0] * ne[1] * ne[2] * ne[3];
  return (struct vkrt_ops_view){
      .buffer = scratch,
      .bind_offset = 0,
      .bind_range = vkrt_align_up(elements * size * copies, 16),
      .lo = 0,
      .hi = elements * size * copies,
      .offset = 0,
      .ne = {ne[0], ne[1], ne[2], ne[3]},
      .stride = {1, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]},
      .block = 1,
      .elements = elements,
      .type_size = size,
      .type = t,
      .contiguous = true,
      .fits_binding = true,
  };
}

vkrt_status vkrt_ops_scratch_begin_f16(struct vkrt_device *dev, struct vkrt_buffer *scratch,
                                       const struct vkrt_ops_view *src,
                                       struct vkrt_ops_view *out, VkCommandBuffer *cmd) {
  *out = vkrt_ops_scratch_view(scratch, src->ne, VKRT_TYPE_F16, 2, 1);
  struct vkrt_stream_access a[2] = {{scratch, 0, out->bind_range, true},
                                    {src->buffer, src->lo, src->hi, false}};
  return vkrt_ops_begin(dev, a, 2, cmd);
}

vkrt_status vkrt_ops_scratch_create(struct vkrt_device *dev, uint64_t bytes,
                                    struct vkrt_buffer **out) {
  bytes = VKRT_MIN(bytes, vkrt_align_down(dev->caps.max_storage_buffer_range, 256));
  if (dev->caps.max_memory_allocation_size)
    bytes = VKRT_MIN(bytes, dev->caps.max_memory_allocation_size);
  return vkrt_buffer_create_internal(dev, bytes, 0, 0, out);
}

void vkrt_ops_scratch_destroy(struct vkrt_buffer **scratch) {
  if (*scratch)
    vkrt_buffer_destroy(*scratch);
  *scratch = NULL;
}

/* The driver compiler's statistics of a new pipeline in the log (info level), one line:
 * registers per invocation and the like, for tuning tiles against occupancy. */
static void log_pipeline_stats(struct vkrt_device *dev, const char *name, const uint32_t *spec,
                               VkPipeline pipeline) {
  VkPipelineInfoKHR info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipeline};
  VkPipelineExecutablePropertiesKHR props[4];
  uint32_t n = VKRT_ARRAY_SIZE(props);
  for (uint32_t i = 0; i < n; i++)
    props[i] = (VkPipelineExecutablePropertiesKHR){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
  if (dev->vk.vkGetPipelineExecutablePropertiesKHR(dev->handle, &info, &n, props) < 0)
    return;
  for (uint32_t e = 0; e < n; e++) {
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = pipeline, .executableIndex = e};
    VkPipelineExecutableStatisticKHR st[16];
    uint32_t m = VKRT_ARRAY_SIZE(st);
    for (uint32_t i = 0; i < m; i++)
      st[i] = (VkPipelineExecutableStatisticKHR){
          .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    if (dev->vk.vkGetPipelineExecutableStatisticsKHR(dev->handle, &ei, &m, st) < 0)
      continue;
    char line[1024];
    int len = snprintf(line, sizeof(line), "dev%u pipeline %s", dev->index, name);
    for (uint32_t i = 0; spec && i < VKRT_OPS_MAX_SPEC; i++)
      len += snprintf(line + len, sizeof(line) - (size_t)VKRT_MIN(len, (int)sizeof(line)),
                      "%s%u%s", i ? " " : " [", spec[i], i + 1 < VKRT_OPS_MAX_SPEC ? "" : "]");
    for (uint32_t i = 0; i < m && len < (int)sizeof(line); i++) {
      const VkPipelineExecutableStatisticKHR *x = &st[i];
      size_t room = sizeof(line) - (size_t)len;
      switch (x->format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        len += snprintf(line + len, room, "; %s %s", x->name, x->value.b32 ? "yes" : "no");
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        len += snprintf(line + len, room, "; %s %lld", x->name, (long long)x->value.i64);
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        len += snprintf(line + len, room, "; %s %llu", x->name, (unsigned long long)x->value.u64);
        break;
      default:
        len += snprintf(line + len, room, "; %s %g", x->name, x->value.f64);
        break;
      }
    }
    vkrt_log(&dev->sys->base, VKRT_LOG_INFO, "%s", line);
  }
}

static vkrt_status create_pipeline(struct vkrt_device *dev, struct vkrt_ops_state *ops,
                                   enum vkrt_ops_kernel k, const uint32_t *spec,
                                   struct vkrt_ops_pipeline *p);

const char *vkrt_ops_pipelines_when(const struct vkrt_device *dev) {
  if (dev->ops && dev->ops->pipelines_at_open)
    return dev->ops->pipelines_built;
  return dev->caps.is_cpu ? "built on first use (CPU device: compiling every kernel at each open "
                            "costs seconds)"
                          : "built on first use (options.pipelines)";
}

uint32_t vkrt_ops_pipelines_ready(const struct vkrt_device *dev) {
  const struct vkrt_ops_state *ops = dev->ops;
  if (!ops)
    return 0;
  uint32_t n = atomic_load(&ops->variant_count);
  for (int k = 0; k < VKRT_OPS_KERNEL_COUNT; k++)
    n += atomic_load(&ops->pipe[k].ready) ? 1u : 0u;
  return n;
}

/* Pipelines built at open, on several threads: on a GPU whose driver has no cached binaries
 * each takes a compiler run, tens to hundreds of milliseconds, and a device has a hundred of
 * them. First every usable kernel's own pipeline, then the specialized variants the matrix
 * products take (straight into the variant table), each thread a pipeline at a time. */
#define BUILD_THREADS 16 /* threads at most, the calling one included */
/* The largest kernel built first, alone: a driver whose cache has its binary answers well
 * within this (an H100, 580.159: 0.2-0.3 ms a pipeline), and then more threads only contend
 * for that cache (the whole device in 250 ms on 16 threads against one thread's less), so
 * the rest go on this thread too. */
#define BUILD_CACHED_NS 5000000ull

struct build_job {
  struct vkrt_device *dev;
  uint32_t first, count; /* the items [first, count) */
  enum vkrt_ops_kernel kernel[VKRT_OPS_KERNEL_COUNT];
  bool variants;     /* the items are ops->variant[variant0 + i] (kernel and spec set) */
  uint32_t variant0;
  atomic_uint next;
  atomic_int status;
  char message[VKRT_ERROR_MESSAGE_SIZE]; /* the first failure's (errors are per thread) */
  struct vkrt_workers pool;
};

static void build_items(void *arg, uint32_t part, uint32_t parts) {
  (void)part, (void)parts; /* every thread takes the next item */
  struct build_job *job = arg;
  struct vkrt_device *dev = job->dev;
  struct vkrt_ops_state *ops = dev->ops;
  for (;;) {
    uint32_t i = atomic_fetch_add(&job->next, 1);
    if (i >= job->count || atomic_load(&job->status) != VKRT_OK)
      return;
    struct vkrt_ops_variant *v = job->variants ? &ops->variant[job->variant0 + i] : NULL;
    struct vkrt_ops_pipeline *p = v ? &v->p : &ops->pipe[job->kernel[i]];
    vkrt_status s = v ? create_pipeline(dev, ops, v->kernel, v->spec, p)
                      : create_pipeline(dev, ops, job->kernel[i], NULL, p);
    if (s == VKRT_OK) {
      atomic_store_explicit(&p->ready, true, memory_order_release);
      continue;
    }
    destroy_pipeline(dev, p);
    int ok = VKRT_OK;
    if (atomic_compare_exchange_strong(&job->status, &ok, (int)s)) /* the caller reads it after the join */
      vkrt_format(job->message, sizeof(job->message), "%s", vkrt_base_last_error(&dev->sys->base));
  }
}

/* The items on the pool's threads, or on this one alone */
static vkrt_status build_run(struct build_job *job, bool pool) {
  atomic_store(&job->next, job->first);
  if (pool)
    vkrt_workers_run(&job->pool, build_items, job);
  else
    build_items(job, 0, 1);
  vkrt_status s = (vkrt_status)atomic_load(&job->status);
  return s == VKRT_OK ? s : vkrt_error(&job->dev->sys->base, s, "%s", job->message);
}

/* A variant the matrix products take, into the table after the published ones (once) */
static vkrt_status list_variant(struct vkrt_device *dev, int kernel,
                                const uint32_t spec[VKRT_OPS_MAX_SPEC], void *ctx) {
  struct build_job *job = ctx;
  struct vkrt_ops_variant *table = dev->ops->variant;
  uint32_t n = job->variant0 + job->count;
  for (uint32_t i = 0; i < n; i++)
    if (table[i].kernel == (enum vkrt_ops_kernel)kernel &&
        !memcmp(table[i].spec, spec, sizeof(table[i].spec)))
      return VKRT_OK;
  if (n == VKRT_OPS_MAX_VARIANTS)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                      "dev%u: more than %d specialized pipelines (kernel %s)", dev->index,
                      VKRT_OPS_MAX_VARIANTS, kernel_info[kernel].name);
  memset(&table[n], 0, sizeof(table[n]));
  table[n].kernel = (enum vkrt_ops_kernel)kernel;
  memcpy(table[n].spec, spec, sizeof(table[n].spec));
  job->count++;
  return VKRT_OK;
}

vkrt_status vkrt_ops_build_pipelines(struct vkrt_device *dev) {
  struct vkrt_ops_state *ops = dev->ops;
  uint64_t t0 = vkrt_now_ns();
  struct build_job *job = vkrt_calloc(&dev->sys->base, 1, sizeof(*job));
  if (!job)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                      "dev%u: out of host memory for the pipeline builders", dev->index);
  job->dev = dev;
  for (int k = 0; k < VKRT_OPS_KERNEL_COUNT; k++)
    if (vkrt_ops_kernel_usable(dev, (enum vkrt_ops_kernel)k) &&
        !atomic_load(&ops->pipe[k].ready)) {
      job->kernel[job->count] = (enum vkrt_ops_kernel)k;
      if (ops->desc[k]->code_size > ops->desc[job->kernel[0]]->code_size) { /* largest first */
        job->kernel[job->count] = job->kernel[0];
        job->kernel[0] = (enum vkrt_ops_kernel)k;
      }
      job->count++;
    }
  uint32_t all = job->count;
  job->count = VKRT_MIN(all, 1);
  uint64_t t1 = vkrt_now_ns();
  vkrt_status s = build_run(job, false);
  bool cached = vkrt_now_ns() - t1 < BUILD_CACHED_NS;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t helpers = cached ? 0 : (uint32_t)VKRT_MIN((long)BUILD_THREADS, cpus > 0 ? cpus : 1) - 1;
  if (helpers)
    vkrt_workers_init(&job->pool, helpers, "vkrt-pipelines");
  job->first = job->count;
  job->count = all;
  if (s == VKRT_OK)
    s = build_run(job, helpers);
  if (s == VKRT_OK) {
    job->variants = true;
    job->first = job->count = 0;
    job->variant0 = atomic_load(&ops->variant_count);
    s = vkrt_matmul_pipeline_specs(dev, list_variant, job);
    if (s == VKRT_OK)
      s = build_run(job, helpers);
    if (s == VKRT_OK) /* lookups (vkrt_ops_pipeline_spec) see them from here on */
      atomic_store_explicit(&ops->variant_count, job->variant0 + job->count,
                            memory_order_release);
    else
      for (uint32_t i = 0; i < job->count; i++)
        destroy_pipeline(dev, &ops->variant[job->variant0 + i].p);
  }
  uint32_t threads = helpers ? vkrt_workers_parts(&job->pool) : 1;
  if (helpers)
    vkrt_workers_finish(&job->pool);
  vkrt_free(&dev->sys->base, job);
  ops->pipelines_at_open = s == VKRT_OK;
  vkrt_format(ops->pipelines_built, sizeof(ops->pipelines_built),
              "built at open on %u thread%s in %.0f ms%s", threads, threads == 1 ? "" : "s",
              (double)(vkrt_now_ns() - t0) / 1e6, cached ? " (the driver had them)" : "");
  return s;
}

static vkrt_status create_pipeline(struct vkrt_device *dev, struct vkrt_ops_state *ops,
                                   enum vkrt_ops_kernel k, const uint32_t *spec,
                                   struct vkrt_ops_pipeline *p) {
  const struct vkrt_kernel_desc *d = ops->desc[k];
  const VkAllocationCallbacks *ac = &dev->sys->vk_allocator;
  VkDescriptorSetLayoutBinding bindings[VKRT_OPS_MAX_BINDINGS];
  if (d->binding_count > VKRT_OPS_MAX_BINDINGS)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL, "kernel %s has %u bindings (max %d)",
                      d->name, d->binding_count, VKRT_OPS_MAX_BINDINGS);
  for (uint32_t i = 0; i < d->binding_count; i++)
    bindings[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                                 .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                 .descriptorCount = 1,
                                                 .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo sl = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .flags = ops->push_descriptor ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
      .bindingCount = d->binding_count,
      .pBindings = bindings};
  VkResult r = dev->vk.vkCreateDescriptorSetLayout(dev->handle, &sl, ac, &p->set_layout);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreateDescriptorSetLayout");
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, d->push_size};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pSetLayouts = &p->set_layout,
                                   .pushConstantRangeCount = d->push_size ? 1 : 0,
                                   .pPushConstantRanges = &range};
  r = dev->vk.vkCreatePipelineLayout(dev->handle, &pl, ac, &p->layout);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreatePipelineLayout");
  VkShaderModuleCreateInfo sm = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = d->code_size,
                                 .pCode = d->code};
  VkShaderModule module = VK_NULL_HANDLE;
  r = dev->vk.vkCreateShaderModule(dev->handle, &sm, ac, &module);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreateShaderModule");
  /* Variants: constant_id i = spec[i] (0 is the workgroup size by convention). */
  VkSpecializationMapEntry entries[VKRT_OPS_MAX_SPEC];
  for (uint32_t i = 0; i < VKRT_OPS_MAX_SPEC; i++)
    entries[i] = (VkSpecializationMapEntry){i, i * (uint32_t)sizeof(uint32_t), sizeof(uint32_t)};
  VkSpecializationInfo si = {VKRT_OPS_MAX_SPEC, entries, VKRT_OPS_MAX_SPEC * sizeof(uint32_t), spec};
  bool stats = dev->vk.vkGetPipelineExecutableStatisticsKHR != NULL && dev->sys->base.log &&
               dev->sys->base.log_level >= VKRT_LOG_INFO;
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .flags = stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = spec ? &si : NULL},
      .layout = p->layout};
  r = dev->vk.vkCreateComputePipelines(dev->handle, VK_NULL_HANDLE, 1, &ci, ac, &p->pipeline);
  dev->vk.vkDestroyShaderModule(dev->handle, module, ac);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreateComputePipelines");
  if (stats)
    log_pipeline_stats(dev, d->name, spec, p->pipeline);
  p->binding_count = d->binding_count;
  p->push_size = d->push_size;
  for (int i = 0; i < 3; i++)
    p->local_size[i] = d->local_size[i];
  if (spec)
    p->local_size[0] = spec[0];
  return VKRT_OK;
}

/* The device feature kernel k needs and this device lacks (NULL: none). */
static const char *missing_feature(const struct vkrt_ops_state *ops, enum vkrt_ops_kernel k) {
  if (kernel_info[k].needs_16bit_storage && !ops->storage_16bit)
    return "storageBuffer16BitAccess";
  if (kernel_info[k].needs_subgroup_arithmetic && !ops->subgroup_arithmetic)
    return "compute subgroup arithmetic";
  if (kernel_info[k].needs_integer_dot && !ops->integer_dot)
    return "shaderIntegerDotProduct";
  if (kernel_info[k].needs_coopmat && !ops->matmul.coopmat)
    return "cooperative matrices (VK_NV_cooperative_matrix 16x16x16 f16, 32-wide subgroups)";
  if (kernel_info[k].needs_shuffle && !ops->subgroup_shuffle)
    return "compute subgroup shuffles in subgroups of 8 or more";
  const struct vkrt_kernel_desc *d = ops->desc[k];
  if (d && (uint64_t)d->local_size[0] * d->local_size[1] * d->local_size[2] > ops->max_invocations)
    return "workgroups larger than maxComputeWorkGroupInvocations";
  if (d && d->shared_bytes > ops->max_shared_bytes)
    return "more shared memory than maxComputeSharedMemorySize";
  return NULL;
}

vkrt_status vkrt_ops_pipeline(struct vkrt_device *dev, enum vkrt_ops_kernel k,
                              const struct vkrt_ops_pipeline **out) {
  *out = NULL;
  if (!dev->ops) {
    vkrt_status s = vkrt_ops_open(dev);
    if (s != VKRT_OK)
      return s;
  }
  struct vkrt_ops_state *ops = dev->ops;
  struct vkrt_ops_pipeline *p = &ops->pipe[k];
  if (atomic_load_explicit(&p->ready, memory_order_acquire)) {
    *out = p;
    return VKRT_OK;
  }
  if (!ops->desc[k])
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                      "dev%u: kernel %s not in this build (%s=n)", dev->index,
                      kernel_info[k].name, kernel_info[k].symbol);
  const char *missing = missing_feature(ops, k);
  if (missing)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: kernel %s needs %s, which the device lacks", dev->index,
                      kernel_info[k].name, missing);
  pthread_mutex_lock(&ops->lock);
  vkrt_status s = VKRT_OK;
  if (!atomic_load_explicit(&p->ready, memory_order_relaxed)) {
    s = create_pipeline(dev, ops, k, NULL, p);
    if (s == VKRT_OK)
      atomic_store_explicit(&p->ready, true, memory_order_release);
    else
      destroy_pipeline(dev, p);
  }
  pthread_mutex_unlock(&ops->lock);
  if (s == VKRT_OK)
    *out = p;
  return s;
}

bool vkrt_ops_kernel_usable(const struct vkrt_device *dev, enum vkrt_ops_kernel k) {
  struct vkrt_ops_state *ops = dev->ops;
  return ops && k < VKRT_OPS_KERNEL_COUNT && ops->desc[k] && !missing_feature(ops, k);
}

bool vkrt_ops_coopmat_usable(const struct vkrt_device *dev) {
  return dev->ops && dev->ops->matmul.coopmat &&
         (vkrt_ops_kernel_usable(dev, VKRT_OPS_MATMUL_F16_CM) ||
          vkrt_ops_kernel_usable(dev, VKRT_OPS_MATMUL_Q8_0_CM) ||
          vkrt_ops_kernel_usable(dev, VKRT_OPS_MATMUL_Q4_K_CM) ||
          vkrt_ops_kernel_usable(dev, VKRT_OPS_MATMUL_Q6_K_CM));
}

vkrt_status vkrt_ops_pipeline_spec(struct vkrt_device *dev, enum vkrt_ops_kernel k,
                                   const uint32_t spec[VKRT_OPS_MAX_SPEC],
                                   const struct vkrt_ops_pipeline **out) {
  *out = NULL;
  const struct vkrt_ops_pipeline *base;
  vkrt_status s = vkrt_ops_pipeline(dev, k, &base); /* availability checks, the layouts */
  if (s != VKRT_OK)
    return s;
  struct vkrt_ops_state *ops = dev->ops;
  uint32_t n = atomic_load_explicit(&ops->variant_count, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (ops->variant[i].kernel == k && !memcmp(ops->variant[i].spec, spec, sizeof(ops->variant[i].spec))) {
      *out = &ops->variant[i].p;
      return VKRT_OK;
    }
  pthread_mutex_lock(&ops->lock);
  n = atomic_load_explicit(&ops->variant_count, memory_order_relaxed);
  for (uint32_t i = 0; i < n && !*out; i++)
    if (ops->variant[i].kernel == k && !memcmp(ops->variant[i].spec, spec, sizeof(ops->variant[i].spec)))
      *out = &ops->variant[i].p;
  if (!*out && n == VKRT_OPS_MAX_VARIANTS) {
    s = vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                   "dev%u: more than %d specialized pipelines (kernel %s)", dev->index,
                   VKRT_OPS_MAX_VARIANTS, kernel_info[k].name);
  } else if (!*out) {
    struct vkrt_ops_variant *v = &ops->variant[n];
    memset(v, 0, sizeof(*v));
    v->kernel = k;
    memcpy(v->spec, spec, sizeof(v->spec));
    s = create_pipeline(dev, ops, k, spec, &v->p);
    if (s == VKRT_OK) {
      atomic_store_explicit(&v->p.ready, true, memory_order_relaxed);
      atomic_store_explicit(&ops->variant_count, n + 1, memory_order_release);
      *out = &v->p;
    } else {
      destroy_pipeline(dev, &v->p);
    }
  }
  pthread_mutex_unlock(&ops->lock);
  return s;
}

void vkrt_ops_drop_variants(struct vkrt_device *dev) {
  struct vkrt_ops_state *ops = dev ? dev->ops : NULL;
  if (!ops)
    return;
  pthread_mutex_lock(&ops->lock);
  uint32_t n = atomic_load(&ops->variant_count);
  for (uint32_t i = 0; i < n; i++)
    destroy_pipeline(dev, &ops->variant[i].p);
  atomic_store(&ops->variant_count, 0);
  pthread_mutex_unlock(&ops->lock);
}

struct vkrt_ops_limits vkrt_ops_device_limits(struct vkrt_device *dev) {
  if (dev->ops)
    return dev->ops->limits;
  struct vkrt_ops_limits lim = {dev->caps.max_storage_buffer_range,
                                dev->caps.min_storage_buffer_offset_alignment
                                    ? dev->caps.min_storage_buffer_offset_alignment : 1};
  return lim;
}

vkrt_status vkrt_ops_use(struct vkrt_device *dev, VkCommandBuffer cmd, enum vkrt_ops_kernel k,
                         const struct vkrt_ops_binding *b, uint32_t count,
                         const struct vkrt_ops_pipeline **out) {
  vkrt_status s = vkrt_ops_pipeline(dev, k, out);
  return s != VKRT_OK ? s : vkrt_ops_bind(dev, cmd, *out, b, count);
}

/* vkCmdBindPipeline unless `cmd` has p bound already (the stream forgets what was bound
 * when a buffer begins; every pipeline bind of the ops goes through here). Host time on the
 * H200: 0.08-0.12 us per bind, and a dispatch after an unchanged pipeline does not pay to
 * set it up again. */
static void bind_pipeline(struct vkrt_device *dev, VkCommandBuffer cmd,
                          const struct vkrt_ops_pipeline *p) {
  struct vkrt_stream *st = &dev->stream;
  if (st->bound_cmd == cmd && st->bound_pipeline == p->pipeline &&
      !vkrt_ops_forces(dev)->rebind_pipeline)
    return;
  dev->vk.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
  st->bound_cmd = cmd;
  st->bound_pipeline = p->pipeline;
}

/* The descriptor writes of b[0..count) (dstSet left for a set). */
static void binding_writes(const struct vkrt_ops_binding *b, uint32_t count,
                           VkDescriptorBufferInfo *infos, VkWriteDescriptorSet *writes) {
  for (uint32_t i = 0; i < count; i++) {
    infos[i] = (VkDescriptorBufferInfo){b[i].buffer, b[i].offset, b[i].range};
    writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstBinding = i,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &infos[i]};
  }
}

void vkrt_ops_push_bindings(const struct vkrt_device_table *vk, VkCommandBuffer cmd,
                            VkPipelineLayout layout, const struct vkrt_ops_binding *b,
                            uint32_t count) {
  VkDescriptorBufferInfo infos[VKRT_OPS_MAX_BINDINGS];
  VkWriteDescriptorSet writes[VKRT_OPS_MAX_BINDINGS];
  binding_writes(b, count, infos, writes);
  vk->vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, count, writes);
}

vkrt_status vkrt_ops_bind(struct vkrt_device *dev, VkCommandBuffer cmd,
                          const struct vkrt_ops_pipeline *p, const struct vkrt_ops_binding *b,
                          uint32_t count) {
  struct vkrt_ops_state *ops = dev->ops;
  if (ops->push_descriptor) {
    bind_pipeline(dev, cmd, p);
    vkrt_ops_push_bindings(&dev->vk, cmd, p->layout, b, count);
    return VKRT_OK;
  }
  VkDescriptorBufferInfo infos[VKRT_OPS_MAX_BINDINGS];
  VkWriteDescriptorSet writes[VKRT_OPS_MAX_BINDINGS];
  binding_writes(b, count, infos, writes);
  /* Pool ring: the pool of the stream slot being recorded. The slot's previous recording
   * retired before vkrt_stream_cmd began this one, so its sets can be recycled; the first
   * use after a submit (the stream's submit counter moved) resets the pool. */
  struct vkrt_stream *st = &dev->stream;
  uint32_t slot = st->current;
  if (slot >= VKRT_STREAM_DEPTH || !st->recording || st->cmd[slot] != cmd)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: recording outside the device stream needs VK_KHR_push_descriptor",
                      dev->index);
  if (!ops->pool_used[slot] || ops->pool_epoch[slot] != st->submitted) {
    if (ops->pool_used[slot])
      dev->vk.vkResetDescriptorPool(dev->handle, ops->pool[slot], 0);
    ops->pool_used[slot] = true;
    ops->pool_epoch[slot] = st->submitted;
  }
  VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                    .descriptorPool = ops->pool[slot],
                                    .descriptorSetCount = 1,
                                    .pSetLayouts = &p->set_layout};
  VkDescriptorSet set = VK_NULL_HANDLE;
  VkResult r = dev->vk.vkAllocateDescriptorSets(dev->handle, &ai, &set);
  if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_DEVICE_MEMORY,
                      "dev%u: descriptor ring full: more than %d dispatches recorded without a "
                      "submit (the device lacks VK_KHR_push_descriptor); submit more often",
                      dev->index, VKRT_OPS_POOL_SETS);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkAllocateDescriptorSets (ops ring)");
  for (uint32_t i = 0; i < count; i++)
    writes[i].dstSet = set;
  dev->vk.vkUpdateDescriptorSets(dev->handle, count, writes, 0, NULL);
  bind_pipeline(dev, cmd, p);
  dev->vk.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0,
                                  NULL);
  return VKRT_OK;
}

void vkrt_ops_dispatch_linear_raw(const struct vkrt_device_table *vk, VkCommandBuffer cmd,
                                  VkPipelineLayout layout, uint32_t push_size, void *push,
                                  uint64_t groups, const uint32_t max_groups[2]) {
  uint32_t *base = (uint32_t *)((char *)push + push_size - sizeof(uint32_t));
  for (uint64_t first = 0; first < groups;) {
    uint32_t x, y;
    vkrt_ops_linear_split(groups, first, max_groups[0], max_groups[1], &x, &y);
    *base = (uint32_t)first;
    vk->vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
    vk->vkCmdDispatch(cmd, x, y, 1);
    first += (uint64_t)x * y;
  }
}

void vkrt_ops_dispatch_linear(struct vkrt_device *dev, VkCommandBuffer cmd,
                              const struct vkrt_ops_pipeline *p, void *push, uint64_t groups) {
  vkrt_ops_dispatch_linear_raw(&dev->vk, cmd, p->layout, p->push_size, push, groups,
                               dev->ops->max_groups);
}

void vkrt_ops_dispatch_3d(struct vkrt_device *dev, VkCommandBuffer cmd,
                          const struct vkrt_ops_pipeline *p, void *push, uint64_t gx,
                          uint64_t gy, uint64_t gz) {
  struct vkrt_ops_state *ops = dev->ops;
  uint32_t *base = (uint32_t *)((char *)push + p->push_size - 3 * sizeof(uint32_t));
  for (uint64_t z = 0; z < gz; z += ops->max_groups[2])
    for (uint64_t y = 0; y < gy; y += ops->max_groups[1])
      for (uint64_t x = 0; x < gx; x += ops->max_groups[0]) {
        base[0] = (uint32_t)x;
        base[1] = (uint32_t)y;
        base[2] = (uint32_t)z;
        dev->vk.vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_size,
                                   push);
        dev->vk.vkCmdDispatch(cmd, (uint32_t)VKRT_MIN(gx - x, ops->max_groups[0]),
                              (uint32_t)VKRT_MIN(gy - y, ops->max_groups[1]),
                              (uint32_t)VKRT_MIN(gz - z, ops->max_groups[2]));
      }
}

vkrt_status vkrt_ops_begin(struct vkrt_device *dev, const struct vkrt_stream_access *access,
                           uint32_t count, VkCommandBuffer *cmd) {
  *cmd = VK_NULL_HANDLE;
  if (!dev->ops) {
    vkrt_status s = vkrt_ops_open(dev);
    if (s != VKRT_OK)
      return s;
  }
  return vkrt_stream_next(dev, access, count, cmd);
}

const char *vkrt_ops_binding_path(const struct vkrt_device *dev) {
  bool push = dev->ops ? dev->ops->push_descriptor : dev->caps.push_descriptor;
  if (!push)
    return "a descriptor set per op from a pool per stream buffer, reset once per submit (no "
           "VK_KHR_push_descriptor; graphs cannot capture ops)";
  return dev->caps.buffer_device_address
             ? "push descriptors (VK_KHR_push_descriptor: one call per op, replayed as recorded "
               "by graphs); buffer device addresses are there but not used: on the H200 the "
               "push is 0.05-0.14 us of an op's 1.3-2.7 us of recording, most of which is the "
               "driver's dispatch whatever binds the buffers, and every kernel would need a "
               "second form"
             : "push descriptors (VK_KHR_push_descriptor: one call per op, replayed as recorded "
               "by graphs); no buffer device addresses on this device";
}

const char *vkrt_ops_copy_path(const struct vkrt_device *dev) {
  enum vkrt_ops_copy_path path = dev->ops ? dev->ops->copy_path : choose_copy_path(dev);
  return path == VKRT_OPS_COPY_PATH_COMPUTE ? "compute (copy_vec4, 16-byte loads)"
                                            : "vkCmdCopyBuffer";
}

const char *vkrt_ops_copy_path_reason(const struct vkrt_device *dev) {
  if (!kernel_in_build(VKRT_OPS_COPY_VEC4))
    return "copy kernel not in this build (CONFIG_VKRT_KERNEL_COPY=n)";
  if (choose_copy_path(dev) == VKRT_OPS_COPY_PATH_TRANSFER)
    return "CPU device (lavapipe): vkCmdCopyBuffer ~16x faster than a compute copy";
  return "GPU: a 16-byte-load compute copy beats vkCmdCopyBuffer ~5x (H200 4.21 vs 0.85 TB/s)";
}

static void transfer_copy(struct vkrt_device *dev, VkCommandBuffer cmd, VkBuffer dst,
                          uint64_t dst_offset, VkBuffer src, uint64_t src_offset, uint64_t size) {
  if (!size)
    return;
  VkBufferCopy region = {src_offset, dst_offset, size};
  dev->vk.vkCmdCopyBuffer(cmd, src, dst, 1, &region);
  vkrt_stream_note_transfer(dev);
}

vkrt_status vkrt_ops_copy_bytes(struct vkrt_device *dev, VkCommandBuffer cmd, VkBuffer dst,
                                uint64_t dst_offset, VkBuffer src, uint64_t src_offset,
                                uint64_t size, int path) {
  if (!dev->ops) {
    vkrt_status s = vkrt_ops_open(dev);
    if (s != VKRT_OK)
      return s;
  }
  struct vkrt_ops_state *ops = dev->ops;
  if (path < 0)
    path = (int)ops->copy_path;
  /* The compute copy moves 16-byte units; head and tail bytes (and offsets that disagree
   * modulo 16) go through vkCmdCopyBuffer. */
  if (path == VKRT_OPS_COPY_PATH_TRANSFER || src_offset % 16 != dst_offset % 16 || size < 16) {
    transfer_copy(dev, cmd, dst, dst_offset, src, src_offset, size);
    return VKRT_OK;
  }
  const struct vkrt_ops_pipeline *p;
  vkrt_status s = vkrt_ops_pipeline(dev, VKRT_OPS_COPY_VEC4, &p);
  if (s != VKRT_OK)
    return s;
  uint64_t head = (16 - src_offset % 16) % 16;
  transfer_copy(dev, cmd, dst, dst_offset, src, src_offset, head);
  src_offset += head, dst_offset += head, size -= head;
  uint64_t body = size / 16 * 16;
  transfer_copy(dev, cmd, dst, dst_offset + body, src, src_offset + body, size - body);
  uint64_t align = ops->limits.min_storage_buffer_offset_alignment;
  /* A chunk plus the alignment slop before it must fit one binding. */
  uint64_t chunk_max = ops->limits.max_storage_buffer_range > align
                           ? ops->limits.max_storage_buffer_range - align : 16;
  chunk_max = vkrt_align_down(VKRT_MIN(chunk_max, 1ull << 31), 16);
  for (uint64_t done = 0; done < body;) {
    uint64_t n = VKRT_MIN(body - done, chunk_max);
    struct vkrt_ops_binding b[2];
    uint64_t so = src_offset + done, dso = dst_offset + done;
    b[0] = (struct vkrt_ops_binding){src, vkrt_align_down(so, align), 0};
    b[1] = (struct vkrt_ops_binding){dst, vkrt_align_down(dso, align), 0};
    b[0].range = so + n - b[0].offset;
    b[1].range = dso + n - b[1].offset;
    s = vkrt_ops_bind(dev, cmd, p, b, 2);
    if (s != VKRT_OK)
      return s;
    struct copy_vec4_push push = {(uint32_t)((so - b[0].offset) / 16),
                                  (uint32_t)((dso - b[1].offset) / 16), (uint32_t)(n / 16), 0};
    dev->vk.vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    uint64_t groups = (n / 16 + 255) / 256;
    groups = VKRT_MIN(groups, VKRT_MIN(ops->copy_vec4_max_groups, ops->max_groups[0]));
    dev->vk.vkCmdDispatch(cmd, (uint32_t)groups, 1, 1);
    done += n;
  }
  return VKRT_OK;
}

bool vkrt_ops_widen_words(struct vkrt_device *dev, struct vkrt_ops_view *v) {
  uint64_t align = VKRT_MAX(dev->ops->limits.min_storage_buffer_offset_alignment, 16);
  uint64_t start = vkrt_align_down(v->lo, align);
  uint64_t end = VKRT_MIN(vkrt_align_up(v->hi, 16), v->buffer->size);
  if (end < vkrt_align_up(v->hi, 4) || end - start > dev->ops->limits.max_storage_buffer_range ||
      end - start > UINT32_MAX)
    return false;
  v->offset = (uint32_t)(v->lo - start);
  v->bind_offset = start;
  v->bind_range = end - start;
  return true;
}

#if IS_ENABLED(CONFIG_VKRT_LAB)
void vkrt_ops_test_limits(struct vkrt_device *dev, uint32_t max_group_count,
                          bool disable_push_descriptor, uint64_t max_storage_buffer_range) {
  if (!dev->ops && vkrt_ops_open(dev) != VKRT_OK)
    return;
  struct vkrt_ops_state *ops = dev->ops;
  const struct vkrt_caps *caps = &dev->caps;
  for (int i = 0; i < 3; i++) {
    uint32_t hw = caps->max_compute_work_group_count[i] ? caps->max_compute_work_group_count[i] : 65535;
    ops->max_groups[i] = max_group_count ? VKRT_MIN(max_group_count, hw) : hw;
  }
  ops->limits.max_storage_buffer_range =
      max_storage_buffer_range ? VKRT_MIN(max_storage_buffer_range, caps->max_storage_buffer_range)
                               : caps->max_storage_buffer_range;
  bool want_push = caps->push_descriptor && dev->vk.vkCmdPushDescriptorSetKHR &&
                   !disable_push_descriptor;
  if (want_push != ops->push_descriptor) {
    /* Set layouts differ between the two modes: drop the pipelines, they are recreated. */
    pthread_mutex_lock(&ops->lock);
    for (int k = 0; k < VKRT_OPS_KERNEL_COUNT; k++)
      destroy_pipeline(dev, &ops->pipe[k]);
    for (uint32_t i = 0; i < ops->variant_count; i++)
      destroy_pipeline(dev, &ops->variant[i].p);
    atomic_store(&ops->variant_count, 0);
    ops->push_descriptor = want_push;
    pthread_mutex_unlock(&ops->lock);
    if (!want_push)
      create_pools(dev, ops);
  }
}
#endif
