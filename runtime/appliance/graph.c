/* Captured graphs (vkrt.h "captured graphs"): capture routes every device stream into
 * reusable command buffers, one per batch a submit would have made (a collective makes
 * several), and the collectives' pieces into the graph; a launch checks that the buffers
 * it touches still exist, waits for its own previous launch, issues the collective pieces
 * again (vkrt_collective_replay gives the shift of their semaphore values) and submits each
 * device's batches in one vkQueueSubmit with the timeline values of now. Everything a launch
 * writes is in the graph already: it allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "appliance/appliance.h"
#include "base/base.h"
#include "transport/collective.h"

#define GRAPH_MAX_BATCHES 1024 /* submits one device's part of a graph may hold (a 32-layer
                                  * model on two devices makes ~66: one per allreduce piece) */
#define GRAPH_MAX_BUFFERS 1024 /* distinct buffers one device's part may touch */

struct graph_device {
  struct vkrt_stream_capture cap;
  struct vkrt_stream_batch *launch; /* the batches with the values of the launch */
  uint64_t last_ticket;             /* the previous launch's (0: none) */
};

struct graph_buffer {
  uint64_t id, size;
  uint32_t device;
};

struct vkrt_graph {
  struct vkrt_appliance *app;
  uint32_t device_count;
  struct graph_device dev[VKRT_MAX_DEVICES];
  struct vkrt_collective_capture coll;
  uint64_t *ids;               /* every buffer the graph touches, sorted */
  struct graph_buffer *buffers; /* the same order */
  uint32_t buffer_count;
  uint64_t destroyed_seen;     /* sys->buffers_destroyed when they were last seen alive */
  bool captured;               /* vkrt_graph_end made it */
};

static void graph_free(struct vkrt_graph *g) {
  struct vkrt_system *sys = &g->app->sys;
  for (uint32_t d = 0; d < g->device_count; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    struct graph_device *gd = &g->dev[d];
    if (gd->last_ticket) /* no launch may still use the command buffers */
      (void)vkrt_stream_wait(dev, gd->last_ticket, UINT64_MAX);
    if (gd->cap.pool) /* frees the command buffers */
      dev->vk.vkDestroyCommandPool(dev->handle, gd->cap.pool, &sys->vk_allocator);
    vkrt_free(&sys->base, gd->cap.batch);
    vkrt_free(&sys->base, gd->launch);
    vkrt_free(&sys->base, (void *)gd->cap.buffers);
    vkrt_free(&sys->base, gd->cap.buffer_ids);
  }
  vkrt_free(&sys->base, g->ids);
  vkrt_free(&sys->base, g->buffers);
  vkrt_free(&sys->base, g);
}

static vkrt_status device_prepare(struct vkrt_graph *g, uint32_t d) {
  struct vkrt_system *sys = &g->app->sys;
  struct vkrt_device *dev = &sys->devices[d];
  struct graph_device *gd = &g->dev[d];
  gd->cap.batch_cap = GRAPH_MAX_BATCHES;
  gd->cap.buffer_cap = GRAPH_MAX_BUFFERS;
  gd->cap.batch = vkrt_calloc(&sys->base, GRAPH_MAX_BATCHES, sizeof(*gd->cap.batch));
  gd->launch = vkrt_calloc(&sys->base, GRAPH_MAX_BATCHES, sizeof(*gd->launch));
  gd->cap.buffers = vkrt_calloc(&sys->base, GRAPH_MAX_BUFFERS, sizeof(*gd->cap.buffers));
  gd->cap.buffer_ids = vkrt_calloc(&sys->base, GRAPH_MAX_BUFFERS, sizeof(*gd->cap.buffer_ids));
  if (!gd->cap.batch || !gd->launch || !gd->cap.buffers || !gd->cap.buffer_ids)
    return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "graph: out of host memory");
  VkCommandPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .queueFamilyIndex = dev->compute_family};
  VkResult r = dev->vk.vkCreateCommandPool(dev->handle, &info, &sys->vk_allocator, &gd->cap.pool);
  if (r != VK_SUCCESS) {
    gd->cap.pool = VK_NULL_HANDLE;
    return vkrt_vk_error(dev, r, "vkCreateCommandPool (graph)");
  }
  return VKRT_OK;
}

vkrt_status vkrt_graph_begin(vkrt_appliance *app) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_system *sys = &app->sys;
  if (app->capturing)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "vkrt_graph_begin: a capture is already under way (vkrt_graph_end it)");
  struct vkrt_graph *g = vkrt_calloc(&sys->base, 1, sizeof(*g));
  if (!g)
    return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "graph: out of host memory");
  g->app = app;
  g->device_count = sys->device_count;
  g->destroyed_seen = atomic_load(&sys->buffers_destroyed);
  vkrt_status s = VKRT_OK;
  for (uint32_t d = 0; d < g->device_count && s == VKRT_OK; d++)
    s = device_prepare(g, d);
  uint32_t begun = 0;
  for (; begun < g->device_count && s == VKRT_OK; begun++)
    s = vkrt_stream_capture_begin(&sys->devices[begun], &g->dev[begun].cap);
  if (s == VKRT_OK)
    s = vkrt_collective_capture_begin(app->collective, &g->coll);
  if (s != VKRT_OK) {
    for (uint32_t d = 0; d < begun; d++)
      vkrt_stream_capture_end(&sys->devices[d]);
    graph_free(g);
    return s;
  }
  app->capturing = g;
  return VKRT_OK;
}

static int compare_ids(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int compare_buffers(const void *a, const void *b) {
  return compare_ids(&((const struct graph_buffer *)a)->id, &((const struct graph_buffer *)b)->id);
}

/* The buffers of every device, sorted by id and without repeats. The ids come first: a
 * buffer destroyed during the capture is refused before anything reads it. */
static vkrt_status collect_buffers(struct vkrt_graph *g) {
  struct vkrt_system *sys = &g->app->sys;
  uint32_t total = 0;
  for (uint32_t d = 0; d < g->device_count; d++)
    total += g->dev[d].cap.buffer_count;
  g->buffers = vkrt_calloc(&sys->base, total ? total : 1, sizeof(*g->buffers));
  g->ids = vkrt_calloc(&sys->base, total ? total : 1, sizeof(*g->ids));
  if (!g->buffers || !g->ids)
    return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "graph: out of host memory");
  uint32_t n = 0, unique = 0;
  for (uint32_t d = 0; d < g->device_count; d++)
    for (uint32_t i = 0; i < g->dev[d].cap.buffer_count; i++)
      g->ids[n++] = g->dev[d].cap.buffer_ids[i];
  qsort(g->ids, n, sizeof(*g->ids), compare_ids);
  for (uint32_t i = 0; i < n; i++)
    if (!unique || g->ids[unique - 1] != g->ids[i])
      g->ids[unique++] = g->ids[i];
  uint64_t destroyed = atomic_load(&sys->buffers_destroyed);
  uint32_t dead = 0;
  if (destroyed != g->destroyed_seen && !vkrt_system_buffers_alive(sys, g->ids, unique, &dead))
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "vkrt_graph_end: buffer #%llu, which the captured work uses, was destroyed "
                      "during the capture", (unsigned long long)g->ids[dead]);
  g->destroyed_seen = destroyed;
  n = 0;
  for (uint32_t d = 0; d < g->device_count; d++) {
    const struct vkrt_stream_capture *cap = &g->dev[d].cap;
    for (uint32_t i = 0; i < cap->buffer_count; i++)
      g->buffers[n++] = (struct graph_buffer){cap->buffer_ids[i], cap->buffers[i]->size,
                                              cap->buffers[i]->dev->index};
  }
  qsort(g->buffers, n, sizeof(*g->buffers), compare_buffers);
  g->buffer_count = 0;
  for (uint32_t i = 0; i < n; i++)
    if (!g->buffer_count || g->buffers[g->buffer_count - 1].id != g->buffers[i].id)
      g->buffers[g->buffer_count++] = g->buffers[i];
  return VKRT_OK;
}

vkrt_status vkrt_graph_end(vkrt_appliance *app, vkrt_graph **out) {
  if (out)
    *out = NULL;
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_system *sys = &app->sys;
  struct vkrt_graph *g = app->capturing;
  if (!g)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "vkrt_graph_end: no capture under way (vkrt_graph_begin first)");
  app->capturing = NULL;
  vkrt_status s = vkrt_collective_capture_end(app->collective); /* may add to the captures */
  for (uint32_t d = 0; d < g->device_count; d++) {
    vkrt_status e = vkrt_stream_capture_end(&sys->devices[d]);
    if (s == VKRT_OK)
      s = e;
  }
  for (uint32_t d = 0; d < g->device_count && s == VKRT_OK; d++)
    if (g->dev[d].cap.overflow)
      s = vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                     "vkrt_graph_end: dev%u: the graph touches more than %d buffers", d,
                     GRAPH_MAX_BUFFERS);
  if (s == VKRT_OK && g->coll.overflow)
    s = vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                   "vkrt_graph_end: more than %d allreduce pieces in one graph",
                   VKRT_GRAPH_MAX_PIECES);
  if (!out && s == VKRT_OK)
    s = vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT, "vkrt_graph_end: out is NULL");
  if (s == VKRT_OK)
    s = collect_buffers(g);
  if (s != VKRT_OK) {
    graph_free(g);
    return s;
  }
  for (uint32_t d = 0; d < g->device_count; d++)
    memcpy(g->dev[d].launch, g->dev[d].cap.batch, g->dev[d].cap.batch_count * sizeof(*g->dev[d].launch));
  g->captured = true;
  *out = g;
  return VKRT_OK;
}


vkrt_status vkrt_graph_launch(vkrt_graph *g, uint64_t *tickets) {
  if (!g)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_appliance *app = g->app;
  struct vkrt_system *sys = &app->sys;
  if (tickets)
    memset(tickets, 0, g->device_count * sizeof(*tickets));
  if (!g->captured || app->capturing)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "vkrt_graph_launch: %s", !g->captured ? "the graph was never ended"
                                                            : "a capture is under way");
  uint64_t destroyed = atomic_load(&sys->buffers_destroyed);
  if (destroyed != g->destroyed_seen) { /* some buffer went away: is it one of ours? */
    uint32_t dead = 0;
    if (!vkrt_system_buffers_alive(sys, g->ids, g->buffer_count, &dead))
      return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                        "vkrt_graph_launch: buffer #%llu (dev%u, %llu bytes), which the graph "
                        "uses, was destroyed; capture the graph again",
                        (unsigned long long)g->buffers[dead].id, g->buffers[dead].device,
                        (unsigned long long)g->buffers[dead].size);
    g->destroyed_seen = destroyed;
  }
  vkrt_status s = vkrt_collective_status(app->collective);
  /* The command buffers may be pending only once: the previous launch finishes first. */
  for (uint32_t d = 0; d < g->device_count && s == VKRT_OK; d++)
    if (g->dev[d].last_ticket)
      s = vkrt_stream_wait(&sys->devices[d], g->dev[d].last_ticket, app->collective_timeout_ns);
  uint64_t shift = 0;
  if (s == VKRT_OK)
    s = vkrt_collective_replay(app->collective, &g->coll, &shift);
  for (uint32_t d = 0; d < g->device_count && s == VKRT_OK; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    struct graph_device *gd = &g->dev[d];
    if (vkrt_stream_pending(dev)) /* recorded work and attached waits go first */
      s = vkrt_stream_submit(dev, NULL);
    uint64_t ticket = 0;
    if (s == VKRT_OK && gd->cap.batch_count)
      s = vkrt_stream_submit_captured(dev, gd->launch, gd->cap.batch, gd->cap.batch_count, shift,
                                      &ticket);
    if (s == VKRT_OK && ticket) {
      for (uint32_t i = 0; i < gd->cap.buffer_count; i++) /* alive: checked above */
        vkrt_buffer_note_use(gd->cap.buffers[i], ticket);
      gd->last_ticket = ticket;
      if (tickets)
        tickets[d] = ticket;
    }
  }
  return s;
}

void vkrt_graph_destroy(vkrt_graph *g) {
  if (g)
    graph_free(g);
}
