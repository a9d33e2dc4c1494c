/* vkrt/vkrt_lab.h: the forcing knobs, the kernel variants they name, the matrix-vector
 * shapes and matmul tiles chosen at open, and a byte copy on a forced path. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lab/lab.h"

_Static_assert(VKRT_LAB_Q8X_COLUMNS_MAX_K == VKRT_QUANT_Q8X_COLUMNS_MAX_K,
               "the forced q8x variant's K on several columns");

static const struct {
  const char *name;
  int64_t min, max;
} knobs[VKRT_LAB_KNOB_COUNT] = {
  [VKRT_LAB_COPY_VEC4_MAX_GROUPS] = {"COPY_VEC4_MAX_GROUPS", 1, UINT32_MAX},
  [VKRT_LAB_COPY_TRANSPOSED_TILED] = {"COPY_TRANSPOSED_TILED", 0, 1},
  [VKRT_LAB_FORCE_CONCAT_GENERIC] = {"FORCE_CONCAT_GENERIC", 0, 1},
  [VKRT_LAB_FORCE_TRANSPOSE_SCALAR] = {"FORCE_TRANSPOSE_SCALAR", 0, 1},
  [VKRT_LAB_TRANSPOSE_VARIANT] = {"TRANSPOSE_VARIANT", 0, 2},
  [VKRT_LAB_QUANT_VARIANT] = {"QUANT_VARIANT", 0, VKRT_QUANT_VARIANTS},
  [VKRT_LAB_FORCE_MATMUL_KERNEL] = {"FORCE_MATMUL_KERNEL", 0, 2},
  [VKRT_LAB_STREAM_FLUSH_OPS] = {"STREAM_FLUSH_OPS", 0, UINT32_MAX},
  [VKRT_LAB_MATMUL_TILED_MIN_M] = {"MATMUL_TILED_MIN_M", 0, 65536},
  [VKRT_LAB_MATMUL_COOPMAT] = {"MATMUL_COOPMAT", 0, 1},
  [VKRT_LAB_ATTENTION_SPLITS] = {"ATTENTION_SPLITS", 0, UINT32_MAX},
  [VKRT_LAB_ATTENTION_UNROLL] = {"ATTENTION_UNROLL", 0, VKRT_ATTENTION_MAX_UNROLL},
  [VKRT_LAB_PIPELINE_REBIND] = {"PIPELINE_REBIND", 0, 1},
  [VKRT_LAB_ATTENTION_KERNEL] = {"ATTENTION_KERNEL", 0, 2},
  [VKRT_LAB_MATMUL_X16] = {"MATMUL_X16", 0, 1},
  [VKRT_LAB_BARRIER_STAGES] = {"BARRIER_STAGES", 0, 1},
  [VKRT_LAB_Q8X_WORKGROUPS] = {"Q8X_WORKGROUPS", 1, 65535},
  [VKRT_LAB_Q8X_COLUMNS_MIN_M_Q8_0] = {"Q8X_COLUMNS_MIN_M_Q8_0", 2, 9},
  [VKRT_LAB_Q8X_COLUMNS_MIN_M_Q4_K] = {"Q8X_COLUMNS_MIN_M_Q4_K", 2, 9},
  [VKRT_LAB_MATMUL_SPLIT_K] = {"MATMUL_SPLIT_K", 0, VKRT_MATMUL_MAX_SPLITS},
  [VKRT_LAB_MATMUL_SPLIT_K_PER_UNIT] = {"MATMUL_SPLIT_K_PER_UNIT", 0, 64},
  [VKRT_LAB_MATMUL_W16_MIN_M] = {"MATMUL_W16_MIN_M", 0, UINT32_MAX},
  [VKRT_LAB_STREAM_SPIN_US] = {"STREAM_SPIN_US", 0, VKRT_WAIT_SPIN_US_MAX},
  [VKRT_LAB_Q8X_COLUMNS_WIDE] = {"Q8X_COLUMNS_WIDE", 0, 1},
  [VKRT_LAB_ATTENTION_LAST_MERGES] = {"ATTENTION_LAST_MERGES", 0, 1},
  [VKRT_LAB_Q8X_UNROLL_Q4_K] = {"Q8X_UNROLL_Q4_K", 0, 4},
  [VKRT_LAB_ATTENTION_COMBINE_IN_ORDER] = {"ATTENTION_COMBINE_IN_ORDER", 0, UINT32_MAX},
  [VKRT_LAB_MATMUL_W16_PIECES] = {"MATMUL_W16_PIECES", 0, VKRT_MATMUL_W16_MAX_PIECES},
};

vkrt_status vkrt_lab_set(vkrt_appliance *app, uint32_t device, vkrt_lab_knob knob,
                         int64_t value) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, &value, &dev);
  if (s != VKRT_OK)
    return s;
  if ((unsigned)knob >= VKRT_LAB_KNOB_COUNT)
    return vkrt_lab_bad(dev, "lab: no knob %lld", (long long)knob);
  if (value < knobs[knob].min || value > knobs[knob].max)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: %s takes %lld..%lld, not %lld", knobs[knob].name,
                      (long long)knobs[knob].min, (long long)knobs[knob].max, (long long)value);
  /* the forces, and the plans chosen at open that a knob overrides */
  struct vkrt_ops_state *ops = dev->ops;
  struct vkrt_ops_forces *force = &ops->lab->force;
  switch (knob) {
  case VKRT_LAB_COPY_VEC4_MAX_GROUPS: ops->copy_vec4_max_groups = (uint32_t)value; break;
  case VKRT_LAB_COPY_TRANSPOSED_TILED: ops->copy_transposed_tiled = value; break;
  case VKRT_LAB_FORCE_CONCAT_GENERIC: force->concat_generic = value; break;
  case VKRT_LAB_FORCE_TRANSPOSE_SCALAR: force->transpose_scalar = value; break;
  case VKRT_LAB_TRANSPOSE_VARIANT: force->transpose_variant = (int)value; break;
  case VKRT_LAB_QUANT_VARIANT: force->quant_variant = (int)value; break;
  case VKRT_LAB_STREAM_FLUSH_OPS: vkrt_stream_set_flush_ops(dev, (uint32_t)value); break;
  case VKRT_LAB_STREAM_SPIN_US:
    atomic_store_explicit(&dev->stream.spin_ns, (uint64_t)value * 1000u, memory_order_relaxed);
    break;
  case VKRT_LAB_MATMUL_TILED_MIN_M:
    if (value == 0) { /* the per-type crossovers chosen at open */
      struct vkrt_matmul_setup plan;
      vkrt_matmul_setup_init(&dev->caps, &plan);
      memcpy(ops->matmul.min_m, plan.min_m, sizeof(plan.min_m));
      break;
    }
    for (int t = 0; t < VKRT_TYPE_COUNT; t++)
      ops->matmul.min_m[0][t] = ops->matmul.min_m[1][t] = (uint32_t)value;
    break;
  case VKRT_LAB_MATMUL_COOPMAT: ops->use_coopmat = value; break;
  case VKRT_LAB_ATTENTION_SPLITS: force->attention_splits = (uint32_t)value; break;
  case VKRT_LAB_ATTENTION_UNROLL: force->attention_unroll = (uint32_t)value; break;
  case VKRT_LAB_ATTENTION_KERNEL: force->attention_kernel = (int)value; break;
  case VKRT_LAB_MATMUL_X16: force->matmul_x_f32 = !value; break;
  case VKRT_LAB_PIPELINE_REBIND: force->rebind_pipeline = value; break;
  case VKRT_LAB_BARRIER_STAGES: vkrt_stream_set_full_barrier_stages(dev, value); break;
  case VKRT_LAB_Q8X_WORKGROUPS: ops->q8x_workgroups = (uint32_t)value; break;
  case VKRT_LAB_Q8X_COLUMNS_MIN_M_Q8_0: ops->q8x_columns_min_m[0] = (uint32_t)value; break;
  case VKRT_LAB_Q8X_COLUMNS_MIN_M_Q4_K: ops->q8x_columns_min_m[1] = (uint32_t)value; break;
  case VKRT_LAB_Q8X_COLUMNS_WIDE: ops->q8x_columns_wide = value != 0; break;
  case VKRT_LAB_Q8X_UNROLL_Q4_K: force->q8x_unroll_q4_k = (uint32_t)value; break;
  case VKRT_LAB_ATTENTION_LAST_MERGES: force->attention_last_merges = value != 0; break;
  case VKRT_LAB_MATMUL_SPLIT_K: force->matmul_split_k = (uint32_t)value; break;
  case VKRT_LAB_ATTENTION_COMBINE_IN_ORDER:
    ops->attention_combine_in_order = (uint32_t)value;
    break;
  case VKRT_LAB_MATMUL_W16_PIECES:
    ops->matmul_w16_pieces = value ? (uint32_t)value : VKRT_MATMUL_W16_PIECES;
    break;
  case VKRT_LAB_MATMUL_W16_MIN_M:
    vkrt_matmul_w16_min_m_init(ops->matmul_w16_min_m);
    for (int t = 0; value && t < VKRT_TYPE_COUNT; t++)
      ops->matmul_w16_min_m[t] = (uint32_t)value;
    break;
  case VKRT_LAB_MATMUL_SPLIT_K_PER_UNIT: { /* 0: each tile's own estimate, chosen at open */
    struct vkrt_matmul_setup plan;
    vkrt_matmul_setup_init(&dev->caps, &plan);
    for (int p = 0; p < 2; p++)
      for (int i = 0; i < VKRT_MATMUL_SIZES; i++)
        ops->matmul.tile[p][i].per_unit = value ? (uint32_t)value : plan.tile[p][i].per_unit;
    break;
  }
  default: force->matmul_kernel = (int)value; break;
  }
  return VKRT_OK;
}

/* Up to `max` whole numbers separated by commas, nothing else; how many (0: not such a list). */
static int parse_fields(const char *value, uint32_t *f, int max) {
  int n = 0;
  for (const char *at = value; n < max; at++) {
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(at, &end, 10);
    if (end == at || *at == '-' || *at == '+' || errno == ERANGE || v > UINT32_MAX ||
        (*end && *end != ','))
      return 0;
    f[n++] = (uint32_t)v;
    if (!*end)
      return n;
    at = end;
  }
  return 0; /* more than max */
}

/* TILE_<SLOT>=wg,bm,bn,rm[,bk[,stages[,order]]]: a tiled matmul slot (vkrt_lab_matmul_tile_set) */
static const char *const tile_slot_names[VKRT_LAB_TILE_SLOT_COUNT] = {
    "tile_portable_small", "tile_portable_medium", "tile_portable_large",
    "tile_coopmat_small",  "tile_coopmat_medium",  "tile_coopmat_large"};

static vkrt_status set_tile_text(vkrt_appliance *app, uint32_t device, struct vkrt_device *dev,
                                 int slot, const char *value) {
  uint32_t f[7] = {0};
  if (parse_fields(value, f, 7) < 4)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: %s: '%s' is not wg,bm,bn,rm[,bk[,stages[,order]]]",
                      tile_slot_names[slot], value);
  vkrt_lab_matmul_tile t = {.wg = f[0], .bm = f[1], .bn = f[2], .rm = f[3], .bk = f[4],
                            .stages = f[5], .order = f[6]};
  return vkrt_lab_matmul_tile_set(app, device, (vkrt_lab_tile_slot)slot, &t);
}

/* MATVEC_<F32|F16>=wg,rows,unroll[,blocks]: a matrix-vector shape (vkrt_lab_matvec_set) */
static vkrt_status set_matvec_text(vkrt_appliance *app, uint32_t device, struct vkrt_device *dev,
                                   vkrt_type type, const char *value) {
  uint32_t f[4] = {0, 0, 0, 1};
  if (parse_fields(value, f, 4) < 3)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: matvec_%s: '%s' is not wg,rows,unroll[,blocks]", vkrt_type_str(type),
                      value);
  vkrt_lab_matvec m = {.wg = f[0], .rows = f[1], .unroll = f[2], .blocks = f[3]};
  return vkrt_lab_matvec_set(app, device, type, &m);
}

vkrt_status vkrt_lab_set_text(vkrt_appliance *app, uint32_t device, const char *assignment) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, assignment, &dev);
  if (s != VKRT_OK)
    return s;
  const char *eq = strchr(assignment, '=');
  size_t len = eq ? (size_t)(eq - assignment) : 0;
  for (int t = 0; eq && t < VKRT_LAB_TILE_SLOT_COUNT; t++)
    if (strlen(tile_slot_names[t]) == len && !strncasecmp(tile_slot_names[t], assignment, len))
      return set_tile_text(app, device, dev, t, eq + 1);
  if (len == 10 && !strncasecmp(assignment, "matvec_f32", 10))
    return set_matvec_text(app, device, dev, VKRT_TYPE_F32, eq + 1);
  if (len == 10 && !strncasecmp(assignment, "matvec_f16", 10))
    return set_matvec_text(app, device, dev, VKRT_TYPE_F16, eq + 1);
  for (int k = 0; eq && k < VKRT_LAB_KNOB_COUNT; k++) {
    if (strlen(knobs[k].name) != len || strncasecmp(knobs[k].name, assignment, len))
      continue;
    char *end = NULL;
    errno = 0;
    long long value = strtoll(eq + 1, &end, 0);
    if (end == eq + 1 || *end || errno == ERANGE)
      return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                        "lab: %s: the value '%s' is not a whole number", knobs[k].name, eq + 1);
    return vkrt_lab_set(app, device, (vkrt_lab_knob)k, value);
  }
  char names[1024] = "";
  size_t at = 0;
  for (int k = 0; k < VKRT_LAB_KNOB_COUNT && at < sizeof(names); k++)
    at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", k ? ", " : "", knobs[k].name);
  return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                    "lab: '%s' is not NAME=VALUE with a knob's name (%s), a tile's (tile_"
                    "<portable|coopmat>_<small|medium|large>=wg,bm,bn,rm[,bk[,stages[,order]]]) "
                    "or a matrix-vector shape's (matvec_<f32|f16>=wg,rows,unroll[,blocks])",
                    assignment, names);
}

vkrt_status vkrt_lab_get(const vkrt_appliance *app, uint32_t device, vkrt_lab_knob knob,
                         int64_t *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  if ((unsigned)knob >= VKRT_LAB_KNOB_COUNT)
    return vkrt_lab_bad(dev, "lab: no knob %lld", (long long)knob);
  const struct vkrt_ops_state *ops = dev->ops;
  const struct vkrt_ops_forces *force = &ops->lab->force;
  switch (knob) {
  case VKRT_LAB_COPY_VEC4_MAX_GROUPS: *out = ops->copy_vec4_max_groups; break;
  case VKRT_LAB_COPY_TRANSPOSED_TILED: *out = ops->copy_transposed_tiled; break;
  case VKRT_LAB_FORCE_CONCAT_GENERIC: *out = force->concat_generic; break;
  case VKRT_LAB_FORCE_TRANSPOSE_SCALAR: *out = force->transpose_scalar; break;
  case VKRT_LAB_TRANSPOSE_VARIANT: *out = force->transpose_variant; break;
  case VKRT_LAB_QUANT_VARIANT: *out = force->quant_variant; break;
  case VKRT_LAB_STREAM_FLUSH_OPS: *out = dev->stream.flush_ops; break;
  case VKRT_LAB_STREAM_SPIN_US: *out = (int64_t)(vkrt_stream_spin_ns(dev) / 1000u); break;
  case VKRT_LAB_MATMUL_TILED_MIN_M:
    *out = ops->matmul.min_m[ops->use_coopmat && ops->matmul.coopmat][VKRT_TYPE_F16];
    break;
  case VKRT_LAB_MATMUL_COOPMAT: *out = ops->use_coopmat; break;
  case VKRT_LAB_ATTENTION_SPLITS: *out = force->attention_splits; break;
  case VKRT_LAB_ATTENTION_UNROLL: *out = force->attention_unroll; break;
  case VKRT_LAB_ATTENTION_KERNEL: *out = force->attention_kernel; break;
  case VKRT_LAB_MATMUL_X16: *out = ops->matmul_x16 && !force->matmul_x_f32; break;
  case VKRT_LAB_PIPELINE_REBIND: *out = force->rebind_pipeline; break;
  case VKRT_LAB_BARRIER_STAGES: *out = dev->stream.full_barrier_stages; break;
  case VKRT_LAB_Q8X_WORKGROUPS: *out = ops->q8x_workgroups; break;
  case VKRT_LAB_Q8X_COLUMNS_MIN_M_Q8_0: *out = ops->q8x_columns_min_m[0]; break;
  case VKRT_LAB_Q8X_COLUMNS_MIN_M_Q4_K: *out = ops->q8x_columns_min_m[1]; break;
  case VKRT_LAB_Q8X_COLUMNS_WIDE: *out = ops->q8x_columns_wide; break;
  case VKRT_LAB_Q8X_UNROLL_Q4_K: *out = force->q8x_unroll_q4_k; break;
  case VKRT_LAB_ATTENTION_LAST_MERGES: *out = force->attention_last_merges; break;
  case VKRT_LAB_MATMUL_SPLIT_K: *out = force->matmul_split_k; break;
  case VKRT_LAB_MATMUL_W16_PIECES: *out = ops->matmul_w16_pieces; break;
  case VKRT_LAB_ATTENTION_COMBINE_IN_ORDER: *out = ops->attention_combine_in_order; break;
  case VKRT_LAB_MATMUL_W16_MIN_M: /* q4_K's */
    *out = ops->matmul_w16 ? ops->matmul_w16_min_m[VKRT_TYPE_Q4_K] : 0;
    break;
  case VKRT_LAB_MATMUL_SPLIT_K_PER_UNIT: /* the large tile's, on the tiles in use */
    *out = ops->matmul.tile[ops->use_coopmat && ops->matmul.coopmat][VKRT_MATMUL_LARGE].per_unit;
    break;
  default: *out = force->matmul_kernel; break;
  }
  return VKRT_OK;
}

vkrt_status vkrt_lab_limits_set(vkrt_appliance *app, uint32_t device, uint32_t max_group_count,
                                bool disable_push_descriptor, uint64_t max_storage_buffer_range) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, app, &dev);
  if (s != VKRT_OK)
    return s;
  if (max_storage_buffer_range && (max_storage_buffer_range < 1024 || max_storage_buffer_range % 16))
    return vkrt_lab_bad(dev, "lab: max_storage_buffer_range is 0 or a multiple of 16 >= 1024, "
                        "not %lld",
                        (long long)max_storage_buffer_range);
  vkrt_ops_test_limits(dev, max_group_count, disable_push_descriptor, max_storage_buffer_range);
  return VKRT_OK;
}

/* transpose_variant v (1 plain tile order, 2 element pairs) runs this f32 kernel. */
static const enum vkrt_ops_kernel transpose_variants[2] = {VKRT_OPS_TRANSPOSE_F32_PLAIN,
                                                           VKRT_OPS_TRANSPOSE_X2_F32};

int vkrt_lab_variant_count(vkrt_lab_knob knob) {
  return knob == VKRT_LAB_TRANSPOSE_VARIANT || knob == VKRT_LAB_QUANT_VARIANT
             ? (int)knobs[knob].max : 0;
}

const char *vkrt_lab_variant_name(vkrt_lab_knob knob, int64_t value) {
  if (value < 1 || value > vkrt_lab_variant_count(knob))
    return NULL;
  return knob == VKRT_LAB_QUANT_VARIANT ? vkrt_quant_variant_names[value - 1]
                                           : vkrt_ops_kernel_name(transpose_variants[value - 1]);
}

bool vkrt_lab_variant_usable(vkrt_appliance *app, uint32_t device, vkrt_lab_knob knob,
                             int64_t value) {
  struct vkrt_device *dev;
  if (!vkrt_lab_variant_name(knob, value) || vkrt_lab_device_of(app, device, app, &dev) != VKRT_OK)
    return false;
  if (knob == VKRT_LAB_QUANT_VARIANT) /* the op says when w or x do not fit the variant */
    return vkrt_quant_variant_usable(dev, (int)value);
  return vkrt_ops_kernel_usable(dev, transpose_variants[value - 1]);
}

bool vkrt_lab_quant_q6_k_variant_usable(vkrt_appliance *app, uint32_t device, int64_t value) {
  struct vkrt_device *dev;
  return value >= 1 && value <= VKRT_QUANT_VARIANTS &&
         vkrt_lab_device_of(app, device, app, &dev) == VKRT_OK &&
         vkrt_quant_q6_k_variant_usable(dev, (int)value);
}

_Static_assert(VKRT_LAB_QUANT_READ_COUNT == VKRT_QUANT_READ_PATTERNS,
               "the ops count every read pattern");

int vkrt_lab_quant_read_of(int64_t variant) {
  return variant < 1 || variant > VKRT_QUANT_VARIANTS ? -1 : VKRT_QUANT_VARIANT_KIND(variant);
}

int vkrt_lab_quant_preference(vkrt_type type, int rank) {
  if ((type != VKRT_TYPE_Q8_0 && type != VKRT_TYPE_Q4_K) || rank < 0 ||
      rank >= VKRT_LAB_QUANT_READ_COUNT - 1)
    return 0;
  return vkrt_quant_preference[type == VKRT_TYPE_Q8_0 ? 0 : 1][rank];
}

uint32_t vkrt_lab_quant_min_rows_per_unit(vkrt_type type, int64_t variant) {
  if ((type != VKRT_TYPE_Q8_0 && type != VKRT_TYPE_Q4_K) || variant < 1 ||
      variant > VKRT_QUANT_VARIANTS)
    return 0;
  return vkrt_quant_min_rows_per_unit(type, (int)variant);
}

static vkrt_status matvec_type(struct vkrt_device *dev, vkrt_type type) {
  return type == VKRT_TYPE_F32 || type == VKRT_TYPE_F16
             ? VKRT_OK : vkrt_lab_bad(dev, "lab: matrix-vector shapes are for f32 and f16 weights, "
                                      "not type %lld", (long long)type);
}

vkrt_status vkrt_lab_matvec_get(const vkrt_appliance *app, uint32_t device, vkrt_type type,
                                vkrt_lab_matvec *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s == VKRT_OK)
    s = matvec_type(dev, type);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_matvec_config *m = &dev->ops->matvec[type];
  *out = (vkrt_lab_matvec){m->wg, m->rows, m->unroll, m->blocks};
  return VKRT_OK;
}

vkrt_status vkrt_lab_matvec_set(vkrt_appliance *app, uint32_t device, vkrt_type type,
                                const vkrt_lab_matvec *cfg) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, cfg, &dev);
  if (s == VKRT_OK)
    s = matvec_type(dev, type);
  if (s != VKRT_OK)
    return s;
  if (!cfg->wg || !cfg->rows || !cfg->unroll || !cfg->blocks ||
      cfg->wg > dev->caps.max_compute_work_group_invocations)
    return vkrt_lab_bad(dev, "lab: a matrix-vector shape needs every field >= 1 and wg <= %lld",
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

_Static_assert((int)VKRT_LAB_TILE_SLOT_COUNT == 2 * (int)VKRT_MATMUL_SIZES &&
                   (int)VKRT_LAB_TILE_COOPMAT_SMALL == (int)VKRT_MATMUL_SIZES,
               "tile slots: portable sizes, then cooperative-matrix sizes");

static vkrt_status tile_slot(struct vkrt_device *dev, vkrt_lab_tile_slot slot) {
  return (unsigned)slot < VKRT_LAB_TILE_SLOT_COUNT
             ? VKRT_OK : vkrt_lab_bad(dev, "lab: no matmul tile slot %lld", (long long)slot);
}

vkrt_status vkrt_lab_matmul_tile_get(const vkrt_appliance *app, uint32_t device,
                                     vkrt_lab_tile_slot slot, vkrt_lab_matmul_tile *out) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s == VKRT_OK)
    s = tile_slot(dev, slot);
  if (s != VKRT_OK)
    return s;
  const struct vkrt_matmul_tile *t =
      &dev->ops->matmul.tile[slot / VKRT_MATMUL_SIZES][slot % VKRT_MATMUL_SIZES];
  *out = (vkrt_lab_matmul_tile){t->wg, t->bm, t->bn, t->rm, t->bk, t->stages, t->parts, t->order};
  return VKRT_OK;
}

vkrt_status vkrt_lab_matmul_tile_set(vkrt_appliance *app, uint32_t device,
                                     vkrt_lab_tile_slot slot,
                                     const vkrt_lab_matmul_tile *tile) {
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, tile, &dev);
  if (s == VKRT_OK)
    s = tile_slot(dev, slot);
  if (s != VKRT_OK)
    return s;
  struct vkrt_matmul_tile *slot_tile =
      &dev->ops->matmul.tile[slot / VKRT_MATMUL_SIZES][slot % VKRT_MATMUL_SIZES];
  /* the slot keeps its residency estimate for split K (MATMUL_SPLIT_K_PER_UNIT sets it) */
  struct vkrt_matmul_tile t = {tile->wg, tile->bm, tile->bn, tile->rm, tile->bk ? tile->bk : 32,
                               tile->stages ? tile->stages : 1, tile->parts, tile->order,
                               slot_tile->per_unit};
  const char *why = vkrt_matmul_tile_check(&dev->caps, slot >= VKRT_LAB_TILE_COOPMAT_SMALL, &t);
  if (why)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "lab: matmul tile %ux%u, wg %u, rm %u, bk %u, stages %u: %s", t.bm, t.bn,
                      t.wg, t.rm, t.bk, t.stages, why);
  if (atomic_load(&dev->ops->variant_count) + 8 >= VKRT_OPS_MAX_VARIANTS) {
    s = vkrt_finish(app, device);
    if (s != VKRT_OK)
      return s;
    vkrt_ops_drop_variants(dev);
  }
  *slot_tile = t;
  return VKRT_OK;
}

bool vkrt_lab_matmul_coopmat_usable(const vkrt_appliance *app, uint32_t device) {
  struct vkrt_device *dev;
  return vkrt_lab_device_of(app, device, app, &dev) == VKRT_OK && dev->ops->matmul.coopmat;
}

vkrt_status vkrt_lab_cmd_copy_bytes(vkrt_buffer *dst, uint64_t dst_offset, vkrt_buffer *src,
                                    uint64_t src_offset, uint64_t size, vkrt_lab_copy path) {
  if (!dst || !src)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = dst->dev;
  if (src->dev != dev)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "lab: copy between devices");
  if (path < VKRT_LAB_COPY_PREFERRED || path > VKRT_LAB_COPY_TRANSFER)
    return vkrt_lab_bad(dev, "lab: no copy path %lld", (long long)path);
  if (dst_offset > dst->size || size > dst->size - dst_offset || src_offset > src->size ||
      size > src->size - src_offset)
    return vkrt_lab_bad(dev, "lab: copy of %lld bytes past a buffer's end", (long long)size);
  vkrt_status s = vkrt_ops_open(dev);
  VkCommandBuffer cmd;
  if (s == VKRT_OK)
    s = vkrt_stream_next_copy(dev, dst, dst_offset, src, src_offset, size, &cmd);
  return s != VKRT_OK ? s : vkrt_ops_copy_bytes(dev, cmd, dst->handle, dst_offset, src->handle,
                                                src_offset, size, path);
}
