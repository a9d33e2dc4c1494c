/* The transport planner: a pure function over capability snapshots, the compiled transports
 * and the preference. It tries native_fd, cpu_proxy, host_staged in that order and records a
 * reason for the choice and for every rejected candidate, so "why cpu_proxy?" is answered by
 * vkrt-probe instead of by reading code. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "transport/transport.h"

static const char *const kind_config[VKRT_TRANSPORT_KIND_COUNT] = {
    "", "CONFIG_VKRT_TRANSPORT_NATIVE_FD", "CONFIG_VKRT_TRANSPORT_CPU_PROXY",
    "CONFIG_VKRT_TRANSPORT_HOST_STAGED"};

uint32_t vkrt_transport_features_of(vkrt_transport_kind kind) {
  switch (kind) {
  case VKRT_TRANSPORT_NATIVE_FD:
    return VKRT_TRANSPORT_NEEDS_HOST_IMPORT | VKRT_TRANSPORT_NEEDS_SEMAPHORE_FD |
           VKRT_TRANSPORT_NEEDS_TIMELINE | VKRT_TRANSPORT_GPU_WAITS_GPU | VKRT_TRANSPORT_ASYNC;
  case VKRT_TRANSPORT_CPU_PROXY:
    return VKRT_TRANSPORT_NEEDS_HOST_IMPORT | VKRT_TRANSPORT_NEEDS_TIMELINE |
           VKRT_TRANSPORT_ASYNC | VKRT_TRANSPORT_HOST_THREAD;
  case VKRT_TRANSPORT_HOST_STAGED:
    return 0; /* host-visible memory and submit + wait: every Vulkan device has them */
  default:
    return 0;
  }
}

uint32_t vkrt_transport_compiled(void) {
  return (IS_ENABLED(CONFIG_VKRT_TRANSPORT_NATIVE_FD) ? VKRT_TRANSPORT_BIT(VKRT_TRANSPORT_NATIVE_FD) : 0) |
         (IS_ENABLED(CONFIG_VKRT_TRANSPORT_CPU_PROXY) ? VKRT_TRANSPORT_BIT(VKRT_TRANSPORT_CPU_PROXY) : 0) |
         (IS_ENABLED(CONFIG_VKRT_TRANSPORT_HOST_STAGED) ? VKRT_TRANSPORT_BIT(VKRT_TRANSPORT_HOST_STAGED) : 0);
}

/* Appends to a NUL-terminated string in a fixed buffer, truncating silently. */
VKRT_PRINTF(3, 4)
static void append(char *buf, size_t size, const char *fmt, ...) {
  size_t len = strnlen(buf, size);
  if (len + 1 >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, size - len, fmt, ap);
  va_end(ap);
}

static bool uuids_equal(const struct vkrt_caps *a, const struct vkrt_caps *b) {
  return !memcmp(a->device_uuid, b->device_uuid, 16) && !memcmp(a->driver_uuid, b->driver_uuid, 16);
}

static bool handle_both_ways(const struct vkrt_caps *a, const struct vkrt_caps *b, uint32_t bit) {
  return (a->semaphore_export_handles & b->semaphore_import_handles & bit) &&
         (b->semaphore_export_handles & a->semaphore_import_handles & bit);
}

/* native_fd between devices i and j: which semaphore handle type works, and why. */
static uint32_t plan_pair(const struct vkrt_caps *caps, uint32_t i, uint32_t j, char *why,
                          size_t size) {
  const struct vkrt_caps *a = &caps[i], *b = &caps[j];
  why[0] = '\0';
  if (!a->external_semaphore_fd || !b->external_semaphore_fd) {
    if (!a->external_semaphore_fd && !b->external_semaphore_fd)
      vkrt_format(why, size, "semaphore FD functions missing on dev%u and dev%u", i, j);
    else
      vkrt_format(why, size, "semaphore FD functions missing on dev%u",
                  !a->external_semaphore_fd ? i : j);
    return 0;
  }
  bool same = uuids_equal(a, b);
  bool opaque = handle_both_ways(a, b, VKRT_HANDLE_OPAQUE_FD);
  bool sync = handle_both_ways(a, b, VKRT_HANDLE_SYNC_FD);
  if (opaque && same) {
    vkrt_format(why, size, "opaque FD: device and driver UUIDs equal");
    return VKRT_HANDLE_OPAQUE_FD;
  }
  const char *opaque_why = !opaque ? "opaque FD not exportable/importable both ways"
                                   : "opaque FD needs equal device and driver UUIDs, they differ";
  if (sync) {
    vkrt_format(why, size, "sync FD (%s)", opaque_why);
    return VKRT_HANDLE_SYNC_FD;
  }
  vkrt_format(why, size, "no common semaphore handle: %s; sync FD not exportable/importable "
              "both ways", opaque_why);
  return 0;
}

/* Checks the per-device requirements of `features`; appends each failure to why. */
static bool devices_meet(const struct vkrt_transport_plan_input *in, uint32_t features, char *why,
                         size_t size) {
  bool ok = true;
  for (uint32_t d = 0; d < in->device_count; d++) {
    const struct vkrt_caps *c = &in->caps[d];
    if ((features & VKRT_TRANSPORT_NEEDS_HOST_IMPORT) && !c->external_memory_host) {
      append(why, size, "%sdev%u: no VK_EXT_external_memory_host", ok ? "" : "; ", d);
      ok = false;
    }
    if ((features & VKRT_TRANSPORT_NEEDS_SEMAPHORE_FD) && !c->external_semaphore_fd) {
      append(why, size, "%sdev%u: semaphore FD functions (vkGetSemaphoreFdKHR/"
             "vkImportSemaphoreFdKHR) unavailable", ok ? "" : "; ", d);
      ok = false;
    }
    if ((features & VKRT_TRANSPORT_NEEDS_TIMELINE) && !c->timeline_semaphore) {
      append(why, size, "%sdev%u: no timeline semaphores", ok ? "" : "; ", d);
      ok = false;
    }
  }
  return ok;
}

static void plan_candidate(const struct vkrt_transport_plan_input *in,
                           struct vkrt_transport_plan *plan, struct vkrt_transport_candidate *c) {
  char *why = c->reason;
  const size_t size = sizeof(c->reason);
  why[0] = '\0';
  c->usable = false;
  if (in->force != VKRT_TRANSPORT_NONE && in->force != c->kind) {
    vkrt_format(why, size, "not requested (transport forced to %s)", vkrt_transport_str(in->force));
    return;
  }
  if (!(in->compiled & VKRT_TRANSPORT_BIT(c->kind))) {
    vkrt_format(why, size, "not compiled in (%s=n)", kind_config[c->kind]);
    return;
  }
  if (c->kind == VKRT_TRANSPORT_NATIVE_FD && in->host_sum) {
    vkrt_format(why, size, "several hosts: the inter-host step needs the host's sum in host "
                "memory, and native_fd sums on the GPU");
    return;
  }
  if (c->kind == VKRT_TRANSPORT_NATIVE_FD && in->force != VKRT_TRANSPORT_NATIVE_FD &&
      in->preference == VKRT_TRANSPORT_PREFERENCE_CPU_PROXY) {
    vkrt_format(why, size, "preference is forced CPU proxy (CONFIG_VKRT_TRANSPORT_PREFER_CPU_PROXY)");
    return;
  }
  uint32_t features = vkrt_transport_features_of(c->kind);
  if (!devices_meet(in, features, why, size))
    return;
  switch (c->kind) {
  case VKRT_TRANSPORT_NATIVE_FD: {
    bool all_opaque = true, all_sync = true;
    for (uint32_t i = 0; i < in->device_count; i++)
      for (uint32_t j = i + 1; j < in->device_count; j++) {
        all_opaque &= plan->pair_handle[i][j] == VKRT_HANDLE_OPAQUE_FD;
        all_sync &= handle_both_ways(&in->caps[i], &in->caps[j], VKRT_HANDLE_SYNC_FD);
      }
    if (all_opaque) {
      plan->semaphore_handle = VKRT_HANDLE_OPAQUE_FD;
      vkrt_format(why, size, "every device resolves the semaphore FD functions and every pair "
                  "shares device and driver UUIDs: timeline semaphores shared as opaque FDs, "
                  "queues wait on their peers directly");
    } else if (all_sync) {
      plan->semaphore_handle = VKRT_HANDLE_SYNC_FD;
      vkrt_format(why, size, "every device resolves the semaphore FD functions; not every pair "
                  "can share opaque FDs, so signals travel as sync FDs");
    } else {
      for (uint32_t i = 0; i < in->device_count; i++)
        for (uint32_t j = i + 1; j < in->device_count; j++)
          if (plan->pair_handle[i][j] != VKRT_HANDLE_OPAQUE_FD &&
              !handle_both_ways(&in->caps[i], &in->caps[j], VKRT_HANDLE_SYNC_FD) && !why[0])
            vkrt_format(why, size, "dev%u <-> dev%u: %s", i, j, plan->pair_reason[i][j]);
      return;
    }
    break;
  }
  case VKRT_TRANSPORT_CPU_PROXY:
    vkrt_format(why, size, "every device imports host memory (VK_EXT_external_memory_host) and "
                "has timeline semaphores: a proxy thread relays the signals");
    break;
  case VKRT_TRANSPORT_HOST_STAGED:
    vkrt_format(why, size, "host-visible staging, submit + wait and a CPU reduce (no extension "
                "needed; slowest)");
    break;
  default:
    return;
  }
  c->usable = true;
}

void vkrt_transport_plan(const struct vkrt_transport_plan_input *in,
                         struct vkrt_transport_plan *out) {
  memset(out, 0, sizeof(*out));
  out->device_count = in->device_count;
  static const vkrt_transport_kind order[3] = {VKRT_TRANSPORT_NATIVE_FD, VKRT_TRANSPORT_CPU_PROXY,
                                               VKRT_TRANSPORT_HOST_STAGED};
  for (int k = 0; k < 3; k++)
    out->candidates[k].kind = order[k];
  if (in->device_count == 0 || in->device_count > VKRT_MAX_DEVICES || !in->caps) {
    vkrt_format(out->reason, sizeof(out->reason), "invalid device count %u (1..%d)",
                in->device_count, VKRT_MAX_DEVICES);
    return;
  }
  if (in->device_count == 1 && !in->host_sum) {
    out->ok = true;
    vkrt_format(out->reason, sizeof(out->reason),
                "one device: allreduce is a local copy, no transport needed");
    for (int k = 0; k < 3; k++)
      vkrt_format(out->candidates[k].reason, sizeof(out->candidates[k].reason),
                  "not needed with one device");
    return;
  }
  for (uint32_t i = 0; i < in->device_count; i++)
    for (uint32_t j = i + 1; j < in->device_count; j++) {
      out->pair_handle[i][j] = plan_pair(in->caps, i, j, out->pair_reason[i][j],
                                         sizeof(out->pair_reason[i][j]));
      out->pair_handle[j][i] = out->pair_handle[i][j];
      memcpy(out->pair_reason[j][i], out->pair_reason[i][j], sizeof(out->pair_reason[i][j]));
    }
  for (int k = 0; k < 3; k++)
    plan_candidate(in, out, &out->candidates[k]);

  int chosen = -1;
  for (int k = 0; k < 3 && chosen < 0; k++)
    if (out->candidates[k].usable)
      chosen = k;
  if (chosen < 0) {
    vkrt_format(out->reason, sizeof(out->reason), "no usable collective transport:");
    for (int k = 0; k < 3; k++)
      append(out->reason, sizeof(out->reason), " %s: %s%s",
             vkrt_transport_str(out->candidates[k].kind), out->candidates[k].reason,
             k < 2 ? ";" : "");
    out->semaphore_handle = 0;
    return;
  }
  out->ok = true;
  out->kind = out->candidates[chosen].kind;
  if (out->kind != VKRT_TRANSPORT_NATIVE_FD)
    out->semaphore_handle = 0;
  vkrt_format(out->reason, sizeof(out->reason), "%s: %s", vkrt_transport_str(out->kind),
              out->candidates[chosen].reason);
  for (int k = 0; k < chosen; k++)
    append(out->reason, sizeof(out->reason), "; %s rejected: %s",
           vkrt_transport_str(out->candidates[k].kind), out->candidates[k].reason);
}

/* ---- description ---------------------------------------------------------------------- */


static const char *handle_str(uint32_t handle) {
  return handle == VKRT_HANDLE_OPAQUE_FD ? "opaque_fd"
         : handle == VKRT_HANDLE_SYNC_FD ? "sync_fd"
                                         : "none";
}

size_t vkrt_transport_plan_describe(const struct vkrt_transport_plan *plan, bool json, char *buf,
                                    size_t size) {
  struct vkrt_text o = {buf, size, 0};
  if (size)
    buf[0] = '\0';
  const char *via = plan->ok ? vkrt_transport_str(plan->kind) : "none";
  if (json) {
    vkrt_text_put(&o, "\"collectives\": {\"transport\": \"%s\", \"ok\": %s, \"semaphore_handle\": \"%s\", "
         "\"reason\": ", via, plan->ok ? "true" : "false", handle_str(plan->semaphore_handle));
    vkrt_text_json_string(&o, plan->reason);
    vkrt_text_put(&o, ", \"candidates\": [");
    for (int k = 0; k < 3; k++) {
      vkrt_text_put(&o, "%s{\"transport\": \"%s\", \"usable\": %s, \"reason\": ", k ? ", " : "",
           vkrt_transport_str(plan->candidates[k].kind),
           plan->candidates[k].usable ? "true" : "false");
      vkrt_text_json_string(&o, plan->candidates[k].reason);
      vkrt_text_put(&o, "}");
    }
    vkrt_text_put(&o, "], \"pairs\": [");
    bool first = true;
    for (uint32_t i = 0; i < plan->device_count; i++)
      for (uint32_t j = i + 1; j < plan->device_count; j++) {
        vkrt_text_put(&o, "%s{\"a\": %u, \"b\": %u, \"via\": \"%s\", \"native_fd_handle\": \"%s\", "
             "\"native_fd\": ", first ? "" : ", ", i, j, via, handle_str(plan->pair_handle[i][j]));
        vkrt_text_json_string(&o, plan->pair_reason[i][j]);
        vkrt_text_put(&o, "}");
        first = false;
      }
    vkrt_text_put(&o, "]}");
  } else {
    vkrt_text_put(&o, "vkrt: collectives: %s\n", plan->reason);
    if (plan->device_count > 1)
      for (int k = 0; k < 3; k++)
        vkrt_text_put(&o, "vkrt:   %s %s: %s\n", vkrt_transport_str(plan->candidates[k].kind),
             plan->ok && plan->candidates[k].kind == plan->kind ? "chosen"
             : plan->candidates[k].usable                        ? "usable"
                                                                 : "rejected",
             plan->candidates[k].reason);
    for (uint32_t i = 0; i < plan->device_count; i++)
      for (uint32_t j = i + 1; j < plan->device_count; j++)
        vkrt_text_put(&o, "vkrt: dev%u -> dev%u via %s (native_fd pair: %s)\n", i, j, via,
             plan->pair_reason[i][j]);
  }
  return o.len;
}
