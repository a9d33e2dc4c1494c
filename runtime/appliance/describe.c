/* vkrt_describe: board, devices with capabilities, then the plans of the collective and
 * import modules (their own describe functions). */
#include <stdio.h>
#include <string.h>

#include "appliance/appliance.h"
#include "base/base.h"
#include "import/import.h"
#include "ops/ops.h"
#include "transport/collective.h"

/* Appends what a describe function writes (it returns the length it needs). */
static void add_collective(struct vkrt_text *o, const struct vkrt_appliance *app, bool json) {
  size_t room;
  char *dst = vkrt_text_cursor(o, &room);
  vkrt_text_advance(o, vkrt_collective_describe(app->collective, json, dst, room));
}

static void add_import(struct vkrt_text *o, const struct vkrt_appliance *app, bool json) {
  size_t room;
  char *dst = vkrt_text_cursor(o, &room);
  vkrt_text_advance(o, vkrt_import_describe(&app->sys, app->registry, json, dst, room));
}

static void add_caps(struct vkrt_text *o, const struct vkrt_caps *caps, uint32_t index, bool json) {
  size_t room;
  char *dst = vkrt_text_cursor(o, &room);
  vkrt_text_advance(o, vkrt_caps_describe(caps, index, json, dst, room));
}

size_t vkrt_describe(const vkrt_appliance *app, bool json, char *buf, size_t buf_size) {
  struct vkrt_text o = {buf, buf ? buf_size : 0, 0};
  if (o.size)
    buf[0] = '\0';
  if (!app)
    return 0;
  const struct vkrt_system *sys = &app->sys;
  const struct vkrt_board *b = &sys->board;
  const char *rule = b->explicit_indices          ? "explicit_index"
                     : b->rule == VKRT_MATCH_ID   ? "id"
                     : b->rule == VKRT_MATCH_UUID ? "uuid"
                                                  : "index";
  if (json) {
    vkrt_text_put(&o,
        "{\"board\": {\"name\": \"%s\", \"device_count\": %u, \"simulated\": %s, \"match\": "
        "\"%s\", \"physical_devices\": %u, \"validation\": %s}, \"devices\": [",
        b->name, b->device_count, b->simulated ? "true" : "false", rule, sys->physical_count,
        sys->options.enable_validation ? "true" : "false");
    for (uint32_t i = 0; i < sys->device_count; i++) {
      vkrt_text_put(&o, "%s{", i ? ", " : "");
      add_caps(&o, &sys->devices[i].caps, i, true);
      const struct vkrt_device *d = &sys->devices[i];
      char plan[1024];
      vkrt_ops_matmul_plan(d, plan, sizeof(plan));
      bool attention_rows;
      const char *attention_why = vkrt_attention_kernel_choice(d, &attention_rows);
      struct vkrt_matvec_config m16 = vkrt_ops_matvec_config(d, VKRT_TYPE_F16, 1);
      struct vkrt_matvec_config m32 = vkrt_ops_matvec_config(d, VKRT_TYPE_F32, 1);
      struct vkrt_matvec_config c16 = vkrt_ops_matvec_config(d, VKRT_TYPE_F16, 2);
      struct vkrt_matvec_config c32 = vkrt_ops_matvec_config(d, VKRT_TYPE_F32, 2);
      vkrt_text_put(&o, ", \"fault_mask\": %u, \"copy_path\": \"%s\", \"copy_path_reason\": \"%s\", "
          "\"transposed_copy_path\": \"%s\", \"transposed_copy_reason\": \"%s\", "
          "\"matvec_f16\": {\"wg\": %u, \"rows\": %u, \"unroll\": %u, \"blocks\": %u}, "
          "\"matvec_f32\": {\"wg\": %u, \"rows\": %u, \"unroll\": %u, \"blocks\": %u}, "
          "\"matvec_f16_cols\": {\"wg\": %u, \"rows\": %u, \"unroll\": %u, \"blocks\": %u}, "
          "\"matvec_f32_cols\": {\"wg\": %u, \"rows\": %u, \"unroll\": %u, \"blocks\": %u}, "
          "\"quant_activations\": \"%s\", \"pipelines\": \"%s\", \"pipelines_ready\": %u, "
          "\"queues\": {\"stream\": \"compute\", \"collectives\": \"compute\", "
          "\"collective_submits\": \"%s\", \"upload_download\": \"%s\"}, \"matmul\": \"%s\", "
          "\"attention_split\": \"%s\", \"attention_split_reason\": \"%s\"}",
          d->fault_mask, vkrt_ops_copy_path(d), vkrt_ops_copy_path_reason(d),
          vkrt_ops_transposed_copy_tiled(d) ? "tiled transpose" : "strided copy kernel",
          vkrt_ops_transposed_copy_reason(d), m16.wg, m16.rows, m16.unroll, m16.blocks, m32.wg,
          m32.rows, m32.unroll, m32.blocks, c16.wg, c16.rows, c16.unroll, c16.blocks, c32.wg,
          c32.rows, c32.unroll, c32.blocks, vkrt_quant_activations_path(d),
          vkrt_ops_pipelines_when(d), vkrt_ops_pipelines_ready(d),
          d->stream.defer_waits ? "submitter thread" : "caller",
          d->transfer_queue != d->compute_queue ? "transfer" : "compute", plan,
          attention_rows ? "rows" : "tiles", attention_why);
    }
    vkrt_text_put(&o, "], ");
    add_collective(&o, app, true);
    vkrt_text_put(&o, ", ");
    add_import(&o, app, true);
    vkrt_text_put(&o, "}\n");
    return o.len;
  }
  vkrt_text_put(&o, "vkrt: board %s: %u device(s)%s, matched by %s among %u physical device(s)%s\n",
      b->name, b->device_count, b->simulated ? " simulated on one physical device" : "", rule,
      sys->physical_count, sys->options.enable_validation ? ", validation on" : "");
  for (uint32_t i = 0; i < sys->device_count; i++) {
    add_caps(&o, &sys->devices[i].caps, i, false);
    if (sys->devices[i].fault_mask)
      vkrt_text_put(&o, "vkrt: dev%u injected faults 0x%x\n", i, sys->devices[i].fault_mask);
    const struct vkrt_device *d = &sys->devices[i];
    vkrt_text_put(&o, "vkrt: dev%u contiguous copies via %s: %s\n", i, vkrt_ops_copy_path(d),
        vkrt_ops_copy_path_reason(d));
    vkrt_text_put(&o, "vkrt: dev%u transposed-view copies via %s: %s\n", i,
        vkrt_ops_transposed_copy_tiled(d) ? "tiled transpose" : "strided copy kernel",
        vkrt_ops_transposed_copy_reason(d));
    for (uint32_t cols = 1; cols <= 2; cols++) {
      struct vkrt_matvec_config m16 = vkrt_ops_matvec_config(d, VKRT_TYPE_F16, cols);
      struct vkrt_matvec_config m32 = vkrt_ops_matvec_config(d, VKRT_TYPE_F32, cols);
      vkrt_text_put(&o, "vkrt: dev%u matvec %s f16: workgroup %u, %u rows, %u loads in flight, %u "
          "blocks per group; f32: workgroup %u, %u rows, %u loads in flight, %u blocks per group\n",
          i, cols == 1 ? "M = 1" : "M > 1", m16.wg, m16.rows, m16.unroll * m16.rows, m16.blocks,
          m32.wg, m32.rows, m32.unroll * m32.rows, m32.blocks);
    }
    vkrt_text_put(&o, "vkrt: dev%u quantized matvec activations: %s\n", i,
        vkrt_quant_activations_path(d));
    vkrt_text_put(&o, "vkrt: dev%u fused products (vkrt_op_matmul_fused): %s; %s\n", i,
        vkrt_matmul_fused_path(d), vkrt_quant_fused_path(d));
    vkrt_text_put(&o, "vkrt: dev%u q/k/v products with their RoPE and KV-cache rows "
        "(vkrt_matmul_fusion.qkv): %s\n", i, vkrt_quant_qkv_path(d));
    char plan[1024];
    vkrt_ops_matmul_plan(d, plan, sizeof(plan));
    vkrt_text_put(&o, "vkrt: dev%u matmul: %s\n", i, plan);
    bool attention_rows;
    const char *attention_why = vkrt_attention_kernel_choice(d, &attention_rows);
    vkrt_text_put(&o, "vkrt: dev%u attention split pass: %s (%s); the tiles' splits are one "
        "tile at least, and where a tile a split covers the cache their rows are loaded before "
        "kv_len returns\n", i,
        attention_rows ? "a row per invocation (subgroups run their own tokens)" : "tiles behind "
        "workgroup barriers", attention_why);
    vkrt_text_put(&o, "vkrt: dev%u pipelines %s (%u ready)\n", i, vkrt_ops_pipelines_when(d),
        vkrt_ops_pipelines_ready(d));
    vkrt_text_put(&o, "vkrt: dev%u op bindings: %s; a pipeline bound once per run of one kernel "
        "in a command buffer\n", i, vkrt_ops_binding_path(d));
    vkrt_text_put(&o, "vkrt: dev%u queues: ops, fills, stream copies, collectives and graph "
        "launches on the compute queue (family %u)%s; vkrt_upload/vkrt_download on %s\n", i,
        d->compute_family, d->stream.defer_waits ? ", collective submits made by the device's "
        "submitter thread, which also records the reduce or copy after a collective's wait" : "", d->transfer_queue != d->compute_queue
            ? "the transfer queue (a hand-over to another queue: per-token inputs and outputs "
              "belong in HOST_VISIBLE buffers, mapped, or stream copies)"
            : "the same compute queue");
    uint64_t spin_us = vkrt_stream_spin_ns(d) / 1000u;
    if (spin_us)
      vkrt_text_put(&o, "vkrt: dev%u waits (vkrt_wait, vkrt_finish): spin %llu us on the "
          "timeline, then block in the driver (vkrt_options.wait_spin_us%s)\n", i,
          (unsigned long long)spin_us, sys->options.wait_spin_us ? "" : " = 0: the default");
    else
      vkrt_text_put(&o, "vkrt: dev%u waits (vkrt_wait, vkrt_finish): block in the driver at "
          "once (%s)\n", i, d->caps.is_cpu ? "a CPU device: a spinning waiter would take the "
          "cores that run the work" : "the lab's STREAM_SPIN_US = 0");
  }
  add_collective(&o, app, false);
  add_import(&o, app, false);
  return o.len;
}
