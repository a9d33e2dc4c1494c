/* host_staged: no import and no shared semaphore. Each device copies its contribution into
 * its own host-visible staging buffer and signals a timeline semaphore; the caller waits
 * for all of them (bounded by the collective timeout), sums on the CPU in rank order into
 * staging 0, copies that into the other staging buffers, and records [copy staging -> recv]
 * into every stream. Synchronous per piece: the slowest transport, but it needs nothing
 * beyond host-visible memory, so it is the fallback that always comes up. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "transport/transport.h"

struct host_staged {
  struct vkrt_transport base;
  struct vkrt_appliance *app;
  uint32_t n;
  uint64_t slot_bytes;
  struct vkrt_buffer *staging[VKRT_MAX_DEVICES];
  VkSemaphore contrib[VKRT_MAX_DEVICES];
  uint64_t seq;
  struct vkrt_reduce_pool *pool;
};

static void staged_destroy(struct vkrt_transport *t) {
  struct host_staged *h = (struct host_staged *)t;
  for (uint32_t d = 0; d < h->n; d++) {
    struct vkrt_device *dev = &h->app->devices[d];
    if (dev->handle) { /* the last copy-out may still be reading the staging buffer */
      pthread_mutex_lock(&dev->compute_queue_lock);
      dev->vk.vkQueueWaitIdle(dev->compute_queue);
      pthread_mutex_unlock(&dev->compute_queue_lock);
    }
    vkrt_buffer_destroy(h->staging[d]);
    vkrt_collective_semaphore_destroy(dev, h->contrib[d]);
  }
  vkrt_reduce_pool_destroy(h->pool);
  vkrt_free(&h->app->base, h);
}

static vkrt_status staged_create(struct vkrt_collective *coll, struct vkrt_transport **out) {
  *out = NULL;
  struct vkrt_appliance *app = coll->app;
  struct host_staged *h = vkrt_calloc(&app->base, 1, sizeof(*h));
  if (!h)
    return vkrt_error(&app->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "host_staged: out of host memory");
  h->base.type = &vkrt_transport_host_staged;
  h->base.coll = coll;
  h->app = app;
  h->n = app->device_count;
  h->slot_bytes = coll->slot_bytes;
  for (uint32_t d = 0; d < h->n; d++) { /* a staging buffer is one allocation */
    const struct vkrt_caps *c = &app->devices[d].caps;
    if (c->max_memory_allocation_size)
      h->slot_bytes = VKRT_MIN(h->slot_bytes, vkrt_align_down(c->max_memory_allocation_size, 4096));
    if (c->max_buffer_size)
      h->slot_bytes = VKRT_MIN(h->slot_bytes, vkrt_align_down(c->max_buffer_size, 4096));
  }
  h->base.piece_bytes = h->slot_bytes;
  vkrt_status s = VKRT_OK;
  for (uint32_t d = 0; d < h->n && s == VKRT_OK; d++) {
    s = vkrt_buffer_create_internal(&app->devices[d], h->slot_bytes, VKRT_BUFFER_HOST_VISIBLE, 0,
                                    &h->staging[d]);
    if (s == VKRT_OK && !h->staging[d]->mapped)
      s = vkrt_error(&app->base, VKRT_ERROR_INTERNAL, "host_staged: dev%u staging is not mapped",
                     d);
    if (s == VKRT_OK)
      s = vkrt_collective_timeline_create(&app->devices[d], NULL, &h->contrib[d]);
  }
  if (s == VKRT_OK)
    s = vkrt_reduce_pool_create(&app->base, vkrt_reduce_pool_threads(), &h->pool);
  if (s != VKRT_OK) {
    staged_destroy(&h->base);
    return s;
  }
  *out = &h->base;
  return VKRT_OK;
}

static vkrt_status staged_allreduce(struct vkrt_transport *t, const struct vkrt_allreduce_job *job) {
  struct host_staged *h = (struct host_staged *)t;
  struct vkrt_appliance *app = h->app;
  const vkrt_allreduce_args *a = job->args;
  uint64_t per_piece = h->slot_bytes / job->elem_size;
  for (uint64_t first = 0; first < a->count; first += per_piece) {
    uint64_t count = VKRT_MIN(per_piece, a->count - first);
    uint64_t bytes = count * job->elem_size, at = first * job->elem_size;
    uint64_t seq = ++h->seq;
    for (uint32_t d = 0; d < h->n; d++) {
      struct vkrt_device *dev = &app->devices[d];
      vkrt_status s = vkrt_collective_record_copy(dev, h->staging[d]->handle, 0, a->send[d]->handle,
                                                  a->send_offset[d] + at, bytes);
      if (s == VKRT_OK && !vkrt_collective_stalled(dev))
        s = vkrt_stream_add_signal(dev, h->contrib[d], seq);
      if (s == VKRT_OK)
        s = vkrt_stream_submit(dev, NULL);
      if (s != VKRT_OK)
        return s;
    }
    for (uint32_t d = 0; d < h->n; d++) {
      vkrt_status s = vkrt_collective_wait_progress(app, &app->devices[d], h->contrib[d], seq,
                                                    h->base.coll->timeout_ns);
      if (s == VKRT_ERROR_TIMEOUT)
        return vkrt_error(&app->base, s,
                          "host_staged: dev%u did not finish its contribution and no device made "
                          "progress for %llu ms (stalled peer)", d,
                          (unsigned long long)(h->base.coll->timeout_ns / 1000000));
      if (s != VKRT_OK)
        return vkrt_error(&app->base, s, "host_staged: waiting for dev%u failed: %s", d,
                          vkrt_status_str(s));
    }
    const void *src[VKRT_MAX_DEVICES];
    for (uint32_t d = 0; d < h->n; d++)
      src[d] = h->staging[d]->mapped;
    struct vkrt_interhost *hosts = h->base.coll->interhost;
    if (hosts) { /* several hosts: this host's sum is exchanged, then the hosts' sum lands */
      char message[VKRT_ERROR_MESSAGE_SIZE];
      vkrt_status s = vkrt_interhost_allreduce(hosts, a->type, h->staging[0]->mapped, src, h->n,
                                               count, message, sizeof(message));
      if (s != VKRT_OK)
        return vkrt_error(&app->base, s, "host_staged: %s", message);
    } else {
      vkrt_reduce_pool_run(h->pool, a->type, h->staging[0]->mapped, src, h->n, count);
    }
    for (uint32_t d = 1; d < h->n; d++)
      memcpy(h->staging[d]->mapped, h->staging[0]->mapped, bytes);
    /* Copy-out goes with the next submit (the next piece's, or the caller's). */
    for (uint32_t d = 0; d < h->n; d++) {
      vkrt_status s = vkrt_collective_record_copy(&app->devices[d], a->recv[d]->handle,
                                                  a->recv_offset[d] + at, h->staging[d]->handle,
                                                  0, bytes);
      if (s != VKRT_OK)
        return s;
    }
  }
  return VKRT_OK;
}

const struct vkrt_transport_type vkrt_transport_host_staged = {
    .kind = VKRT_TRANSPORT_HOST_STAGED,
    .name = "host_staged",
    .features = 0,
    .create = staged_create,
    .destroy = staged_destroy,
    .allreduce = staged_allreduce,
    .status = NULL,
    .describe = NULL,
};
