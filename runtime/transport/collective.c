/* The collective: plans the transport from the capability snapshots at open and creates
 * it (falling back to the next usable candidate), closes it, describes it, and reports an
 * asynchronous transport's sticky error. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "transport/collective.h"
#include "transport/transport.h"

/* ---- open / close / describe ------------------------------------------------------------ */

static const struct vkrt_transport_type *type_of(vkrt_transport_kind kind) {
  switch (kind) {
  case VKRT_TRANSPORT_NATIVE_FD: return VKRT_TRANSPORT_NATIVE_FD_TYPE;
  case VKRT_TRANSPORT_CPU_PROXY: return VKRT_TRANSPORT_CPU_PROXY_TYPE;
  case VKRT_TRANSPORT_HOST_STAGED: return VKRT_TRANSPORT_HOST_STAGED_TYPE;
  default: return NULL;
  }
}

vkrt_status vkrt_collective_open(struct vkrt_system *sys, uint64_t timeout_ns,
                                 struct vkrt_collective **out) {
  struct vkrt_base *base = &sys->base;
  *out = NULL;
  if (sys->options.collective_transport >= VKRT_TRANSPORT_KIND_COUNT)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "options.collective_transport %u is not a vkrt_transport_kind",
                      sys->options.collective_transport);
  struct vkrt_collective *coll = vkrt_calloc(base, 1, sizeof(*coll));
  struct vkrt_caps *caps = vkrt_calloc(base, sys->device_count ? sys->device_count : 1,
                                       sizeof(*caps));
  if (!coll || !caps) {
    vkrt_free(base, coll);
    vkrt_free(base, caps);
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "collectives: out of host memory");
  }
  coll->sys = sys;
  coll->slot_bytes = (uint64_t)CONFIG_VKRT_COLLECTIVE_SLOT_MB << 20;
  coll->timeout_ns = timeout_ns ? timeout_ns : (uint64_t)CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS * 1000000ull;
  pthread_mutex_init(&coll->lock, NULL);
  for (uint32_t d = 0; d < sys->device_count; d++)
    caps[d] = sys->devices[d].caps;
  struct vkrt_transport_plan_input in = {
      .device_count = sys->device_count,
      .caps = caps,
      .compiled = vkrt_transport_compiled(),
      .preference = IS_ENABLED(CONFIG_VKRT_TRANSPORT_PREFER_CPU_PROXY)
                        ? VKRT_TRANSPORT_PREFERENCE_CPU_PROXY
                        : VKRT_TRANSPORT_PREFERENCE_AUTO,
      .force = (vkrt_transport_kind)sys->options.collective_transport,
      .host_sum = sys->options.mpi,
  };
  vkrt_transport_plan(&in, &coll->plan);
  vkrt_free(base, caps);
  if (!coll->plan.ok) {
    vkrt_status s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "%s", coll->plan.reason);
    pthread_mutex_destroy(&coll->lock);
    vkrt_free(base, coll);
    return s;
  }
  vkrt_log(base, VKRT_LOG_INFO, "collectives: %s", coll->plan.reason);
  if (coll->plan.kind != VKRT_TRANSPORT_NONE) {
    /* A transport whose creation finds the path unavailable (e.g. the host import fails at
     * runtime) hands over to the next usable candidate, unless one was forced. */
    vkrt_status s = VKRT_ERROR_UNAVAILABLE;
    for (int k = 0; k < 3; k++) {
      struct vkrt_transport_candidate *c = &coll->plan.candidates[k];
      if (!c->usable || c->kind < coll->plan.kind)
        continue;
      const struct vkrt_transport_type *type = type_of(c->kind);
      if (!type) {
        s = vkrt_error(base, VKRT_ERROR_INTERNAL, "collectives: %s planned but not linked",
                       vkrt_transport_str(c->kind));
        break;
      }
      s = type->create(coll, &coll->transport);
      if (s == VKRT_OK) {
        coll->type = type;
        if (c->kind != coll->plan.kind) {
          vkrt_log(base, VKRT_LOG_WARN, "collectives: %s; using %s", coll->fallback_note,
                   vkrt_transport_str(c->kind));
          coll->plan.kind = c->kind;
          size_t len = strlen(coll->plan.reason);
          vkrt_format(coll->plan.reason + len, sizeof(coll->plan.reason) - len,
                      "; but %s; using %s: %s", coll->fallback_note, vkrt_transport_str(c->kind),
                      c->reason);
        }
        break;
      }
      if (s != VKRT_ERROR_UNAVAILABLE || in.force != VKRT_TRANSPORT_NONE)
        break;
      vkrt_format(coll->fallback_note, sizeof(coll->fallback_note), "%s creation failed: %s",
                  vkrt_transport_str(c->kind), vkrt_base_last_error(base));
      c->usable = false;
    }
    if (s != VKRT_OK) {
      pthread_mutex_destroy(&coll->lock);
      vkrt_free(base, coll);
      return s;
    }
  }
  if (sys->options.mpi) { /* the hosts' step, over the host transport's pieces */
    vkrt_status s = vkrt_interhost_create(sys, coll->transport->piece_bytes, coll->timeout_ns,
                                          &coll->interhost);
    if (s != VKRT_OK) {
      coll->type->destroy(coll->transport);
      pthread_mutex_destroy(&coll->lock);
      vkrt_free(base, coll);
      return s;
    }
  }
  *out = coll;
  return VKRT_OK;
}

void vkrt_collective_close(struct vkrt_collective *coll) {
  if (!coll)
    return;
  if (coll->transport) /* joins the proxy thread, the interhost step's other caller */
    coll->type->destroy(coll->transport);
  vkrt_interhost_destroy(coll->interhost);
  pthread_mutex_destroy(&coll->lock);
  vkrt_free(&coll->sys->base, coll);
}

vkrt_transport_kind vkrt_collective_kind(const struct vkrt_collective *coll) {
  return coll ? coll->plan.kind : VKRT_TRANSPORT_NONE;
}

size_t vkrt_collective_describe(const struct vkrt_collective *coll, bool json, char *buf,
                                size_t size) {
  if (!coll)
    return (size_t)snprintf(buf, size, json ? "\"collectives\": null"
                                            : "vkrt: collectives: not open\n");
  size_t n = vkrt_transport_plan_describe(&coll->plan, json, buf, size);
  if (!json && coll->fallback_note[0]) {
    size_t left = n < size ? size - n : 0;
    n += (size_t)snprintf(left ? buf + n : NULL, left, "vkrt:   fallback: %s -> %s\n",
                          coll->fallback_note, vkrt_transport_str(coll->plan.kind));
  }
  if (coll->transport && coll->type->describe) {
    size_t left = n < size ? size - n : 0;
    n += coll->type->describe(coll->transport, json, left ? buf + n : NULL, left);
  }
  if (coll->interhost) {
    size_t left = n < size ? size - n : 0;
    n += vkrt_interhost_describe(coll->interhost, vkrt_transport_str(coll->plan.kind), json,
                                 left ? buf + n : NULL, left);
  }
  return n;
}

void vkrt_collective_hosts(const struct vkrt_collective *coll, uint32_t *rank, uint32_t *count) {
  vkrt_interhost_hosts(coll ? coll->interhost : NULL, rank, count);
}

vkrt_status vkrt_collective_status(struct vkrt_collective *coll) {
  if (!coll || !coll->transport || !coll->type->status)
    return VKRT_OK;
  char message[VKRT_ERROR_MESSAGE_SIZE];
  vkrt_status s = coll->type->status(coll->transport, message, sizeof(message));
  return s == VKRT_OK ? s : vkrt_error(&coll->sys->base, s, "%s", message);
}

