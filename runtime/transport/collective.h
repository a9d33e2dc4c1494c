/* Collective entry points the appliance calls at open/close and for vkrt_allreduce,
 * vkrt_transport, vkrt_wait and vkrt_describe; stubs when CONFIG_VKRT_COLLECTIVES=n so the
 * appliance needs no #ifdef. */
#pragma once
#include <stdio.h>

#include "device/device.h"

struct vkrt_collective;

/* What a captured graph holds of its collectives: the transport's piece sequence when the
 * capture began and every piece (vkrt_collective_capture_begin .. _end; replayed at each
 * launch by vkrt_collective_replay). */
#define VKRT_GRAPH_MAX_PIECES 512 /* a 32-layer model: 65 allreduces per token */
struct vkrt_collective_capture {
  uint64_t seq0;
  uint32_t pieces;
  bool overflow;
  struct {
    uint64_t count;
    vkrt_type type;
  } piece[VKRT_GRAPH_MAX_PIECES];
};

#if IS_ENABLED(CONFIG_VKRT_COLLECTIVES)
/* Capture: allreduces record their pieces into the device streams' captures and into cap
 * instead of issuing them (no watchdog or proxy job). UNSUPPORTED when the transport cannot
 * be captured (host_staged reduces on the caller's thread). coll may be NULL. */
vkrt_status vkrt_collective_capture_begin(struct vkrt_collective *coll,
                                          struct vkrt_collective_capture *cap);
/* Ends it, while the device streams still capture (the transport may add to the graph);
 * nothing captured ran, so the transport's sequence goes back to cap->seq0. */
vkrt_status vkrt_collective_capture_end(struct vkrt_collective *coll);
/* A launch: issues cap's pieces as the transport's next ones (watchdog, proxy jobs) and
 * returns the shift to add to every captured semaphore value. */
vkrt_status vkrt_collective_replay(struct vkrt_collective *coll,
                                   const struct vkrt_collective_capture *cap, uint64_t *shift);
/* Plans the transport from the capability snapshots of sys's devices and creates it.
 * Call it after the devices and their streams exist. timeout_ns: how long a collective
 * waits for a stalled peer (0: CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS). */
vkrt_status vkrt_collective_open(struct vkrt_system *sys, uint64_t timeout_ns,
                                 struct vkrt_collective **out);
/* Drains pending collectives (bounded by the collective timeout), submits a stream still
 * holding a wait on a collective semaphore, joins the proxy thread, frees everything. Call
 * it before the streams and devices are destroyed. NULL: nothing to do. */
void vkrt_collective_close(struct vkrt_collective *coll);
/* Plan lines / JSON for vkrt_describe (NULL coll: "not open"). */
size_t vkrt_collective_describe(const struct vkrt_collective *coll, bool json, char *buf,
                                size_t size);
/* The transport chosen at open (NONE: one device or not open). */
vkrt_transport_kind vkrt_collective_kind(const struct vkrt_collective *coll);
/* Validates and runs one allreduce (vkrt_allreduce); coll is not NULL. */
vkrt_status vkrt_collective_allreduce(struct vkrt_collective *coll, const vkrt_allreduce_args *args);
/* Sticky error of an asynchronous transport (a peer that stalled or a device lost after
 * vkrt_allreduce had returned): OK when none. Sets the appliance's last error when not OK.
 * vkrt_wait / vkrt_finish should return it so every rank sees the failure. */
vkrt_status vkrt_collective_status(struct vkrt_collective *coll);
/* Multi-host appliances: this host's rank and the host count (0 and 1 on one host). */
void vkrt_collective_hosts(const struct vkrt_collective *coll, uint32_t *rank, uint32_t *count);
#else
static inline vkrt_status vkrt_collective_open(struct vkrt_system *sys, uint64_t timeout_ns,
                                               struct vkrt_collective **out) {
  (void)timeout_ns;
  *out = NULL;
  if (sys->options.mpi)
    return vkrt_error(&sys->base, VKRT_ERROR_UNSUPPORTED,
                      "options name an MPI communicator but this build has no collectives "
                      "(CONFIG_VKRT_COLLECTIVES=n)");
  return VKRT_OK;
}
static inline void vkrt_collective_close(struct vkrt_collective *coll) { (void)coll; }
static inline vkrt_status vkrt_collective_capture_begin(struct vkrt_collective *coll,
                                                        struct vkrt_collective_capture *cap) {
  (void)coll;
  (void)cap;
  return VKRT_OK;
}
static inline vkrt_status vkrt_collective_capture_end(struct vkrt_collective *coll) {
  (void)coll;
  return VKRT_OK;
}
static inline vkrt_status vkrt_collective_replay(struct vkrt_collective *coll,
                                                 const struct vkrt_collective_capture *cap,
                                                 uint64_t *shift) {
  (void)coll;
  (void)cap;
  *shift = 0;
  return VKRT_OK;
}
static inline size_t vkrt_collective_describe(const struct vkrt_collective *coll, bool json,
                                              char *buf, size_t size) {
  (void)coll;
  return (size_t)snprintf(buf, size, json ? "\"collectives\": null" :
                          "vkrt: collectives not in this build (CONFIG_VKRT_COLLECTIVES=n)\n");
}
static inline vkrt_transport_kind vkrt_collective_kind(const struct vkrt_collective *coll) {
  (void)coll;
  return VKRT_TRANSPORT_NONE;
}
static inline vkrt_status vkrt_collective_allreduce(struct vkrt_collective *coll,
                                                    const vkrt_allreduce_args *args) {
  (void)coll;
  (void)args;
  return VKRT_ERROR_UNSUPPORTED;
}
static inline vkrt_status vkrt_collective_status(struct vkrt_collective *coll) {
  (void)coll;
  return VKRT_OK;
}
static inline void vkrt_collective_hosts(const struct vkrt_collective *coll, uint32_t *rank,
                                         uint32_t *count) {
  (void)coll;
  *rank = 0;
  *count = 1;
}
#endif
