/* native_fd: every device's queue waits on its peers directly. Each device owns one timeline
 * semaphore exported as an opaque FD (vkGetSemaphoreFdKHR) and imported on every peer
 * (vkImportSemaphoreFdKHR, resolved per device); data moves through one host allocation
 * imported into every device (one slot per device). For piece `seq` device d:
 *   submit 1: wait peers >= 2(seq-1) (they finished reading the slots of the last piece),
 *             copy send -> slot d, signal own = 2 seq - 1;
 *   submit 2: wait peers >= 2 seq - 1 (every slot holds piece seq), reduce slots 0..n-1 in
 *             rank order into recv with the reduce kernel, signal own = 2 seq.
 * No host hop on the normal path. Submits that wait on peers are made by each device's
 * stream submitter thread (vkrt_stream_defer_waits), so vkrt_allreduce records and returns. A watchdog thread (off the critical path) watches every
 * device reach 2 seq; when one does not while no device makes progress for the collective
 * timeout (stalled peer, lost device) it records a sticky error and host-signals every
 * semaphore past any value still awaited, so no queue waits forever and vkrt_close returns.
 *
 * Opaque FDs need equal device and driver UUIDs (two VkDevices on one GPU). Across GPUs the
 * planner picks sync FDs, which only binary semaphores export; that mode is not implemented
 * yet, so create() reports it unavailable and open falls back to cpu_proxy. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "ops/reduce.h"
#include "transport/transport.h"

#define WATCH_RING 256
#define RELEASE_VALUE (UINT64_C(1) << 62) /* past anything a queue could still wait for */

struct native_fd {
  struct vkrt_transport base;
  struct vkrt_system *sys;
  uint32_t n;
  uint8_t *host;
  uint64_t host_size, slot_bytes;
  VkBuffer buffer[VKRT_MAX_DEVICES];
  VkDeviceMemory memory[VKRT_MAX_DEVICES];
  VkSemaphore own[VKRT_MAX_DEVICES];                    /* exported, on device d */
  VkSemaphore peer[VKRT_MAX_DEVICES][VKRT_MAX_DEVICES]; /* peer[d][e]: e's semaphore on d */
  uint64_t seq;

  pthread_mutex_t lock;
  pthread_cond_t wake;
  uint64_t issued, watched; /* under lock */
  bool stop, thread_started;
  pthread_t thread;
  atomic_int error;
  char error_message[512];
};

static void set_error(struct native_fd *f, vkrt_status s, const char *fmt, ...) VKRT_PRINTF(3, 4);
static void set_error(struct native_fd *f, vkrt_status s, const char *fmt, ...) {
  pthread_mutex_lock(&f->lock);
  if (atomic_load(&f->error) == VKRT_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->error_message, sizeof(f->error_message), fmt, ap);
    va_end(ap);
    atomic_store(&f->error, (int)s);
  }
  pthread_mutex_unlock(&f->lock);
}

static void release_all(struct native_fd *f) {
  for (uint32_t d = 0; d < f->n; d++) {
    struct vkrt_device *dev = &f->sys->devices[d];
    uint64_t current = 0;
    if (f->own[d] && dev->vk.vkGetSemaphoreCounterValue(dev->handle, f->own[d], &current) ==
                         VK_SUCCESS && current < RELEASE_VALUE)
      vkrt_collective_host_signal(dev, f->own[d], RELEASE_VALUE);
  }
}

static void *watchdog_main(void *arg) {
  struct native_fd *f = arg;
  pthread_setname_np(pthread_self(), "vkrt-fd-watch");
  pthread_mutex_lock(&f->lock);
  for (;;) {
    while (f->watched == f->issued && !f->stop)
      pthread_cond_wait(&f->wake, &f->lock);
    if (f->watched == f->issued)
      break; /* stop, and everything issued was watched */
    uint64_t seq = f->watched + 1;
    pthread_mutex_unlock(&f->lock);
    if (atomic_load(&f->error) == VKRT_OK) {
      for (uint32_t d = 0; d < f->n; d++) {
        vkrt_status s = vkrt_collective_wait_progress(f->sys, &f->sys->devices[d], f->own[d],
                                                      2 * seq, f->base.coll->timeout_ns);
        if (s != VKRT_OK) {
          /* Name the device that never contributed (2 seq - 1), not the first one found
           * waiting for it. */
          char who[96] = "";
          for (uint32_t e = 0; e < f->n; e++) {
            uint64_t v = 0;
            struct vkrt_device *de = &f->sys->devices[e];
            if (de->vk.vkGetSemaphoreCounterValue(de->handle, f->own[e], &v) == VK_SUCCESS &&
                v < 2 * seq - 1) {
              size_t len = strlen(who);
              vkrt_format(who + len, sizeof(who) - len, "%sdev%u", len ? ", " : "", e);
            }
          }
          if (!who[0])
            vkrt_format(who, sizeof(who), "dev%u", d);
          set_error(f, s, "native_fd: allreduce piece %llu: %s did not signal and no device "
                    "made progress for %llu ms (%s); every rank's result is invalid",
                    (unsigned long long)seq, who,
                    (unsigned long long)(f->base.coll->timeout_ns / 1000000),
                    s == VKRT_ERROR_TIMEOUT ? "stalled peer" : vkrt_status_str(s));
          release_all(f);
          break;
        }
      }
    }
    pthread_mutex_lock(&f->lock);
    f->watched = seq;
    pthread_cond_broadcast(&f->wake);
  }
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

static vkrt_status export_import(struct native_fd *f, uint32_t from, uint32_t to) {
  struct vkrt_device *src = &f->sys->devices[from], *dst = &f->sys->devices[to];
  VkSemaphoreGetFdInfoKHR get = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
      .semaphore = f->own[from],
      .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  int fd = -1;
  VkResult r = src->vk.vkGetSemaphoreFdKHR(src->handle, &get, &fd);
  if (r != VK_SUCCESS)
    return vkrt_error(&f->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "native_fd: dev%u: vkGetSemaphoreFdKHR (opaque FD): %s", from,
                      vkrt_vk_result_str(r));
  vkrt_status s = vkrt_timeline_create(dst, NULL, COLLECTIVE_TIMELINE, &f->peer[to][from]);
  if (s != VKRT_OK) {
    close(fd);
    return s;
  }
  VkImportSemaphoreFdInfoKHR import = {
      .sType = VK_STRUCTURE_TYPE_IMPORT_SEMAPHORE_FD_INFO_KHR,
      .semaphore = f->peer[to][from],
      .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
      .fd = fd,
  };
  r = dst->vk.vkImportSemaphoreFdKHR(dst->handle, &import);
  if (r != VK_SUCCESS) { /* ownership of fd passes to the driver only on success */
    close(fd);
    return vkrt_error(&f->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "native_fd: dev%u: vkImportSemaphoreFdKHR of dev%u's semaphore: %s", to,
                      from, vkrt_vk_result_str(r));
  }
  return VKRT_OK;
}

static void native_destroy(struct vkrt_transport *t) {
  struct native_fd *f = (struct native_fd *)t;
  struct vkrt_system *sys = f->sys;
  if (f->thread_started) {
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
  }
  for (uint32_t d = 0; d < f->n; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    if (dev->handle) {
      vkrt_stream_drain(dev);
      pthread_mutex_lock(&dev->compute_queue_lock);
      dev->vk.vkQueueWaitIdle(dev->compute_queue);
      pthread_mutex_unlock(&dev->compute_queue_lock);
    }
  }
  for (uint32_t d = 0; d < f->n; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    for (uint32_t e = 0; e < f->n; e++)
      vkrt_timeline_destroy(dev, f->peer[d][e]);
    vkrt_timeline_destroy(dev, f->own[d]);
    if (f->buffer[d])
      dev->vk.vkDestroyBuffer(dev->handle, f->buffer[d], &dev->sys->vk_allocator);
    if (f->memory[d])
      dev->vk.vkFreeMemory(dev->handle, f->memory[d], &dev->sys->vk_allocator);
  }
  pthread_cond_destroy(&f->wake);
  pthread_mutex_destroy(&f->lock);
  vkrt_free(&sys->base, f->host);
  vkrt_free(&sys->base, f);
}

static vkrt_status native_create(struct vkrt_collective *coll, struct vkrt_transport **out) {
  *out = NULL;
  struct vkrt_system *sys = coll->sys;
  struct vkrt_base *base = &sys->base;
  if (coll->plan.semaphore_handle != VKRT_HANDLE_OPAQUE_FD)
    return vkrt_error(base, VKRT_ERROR_UNAVAILABLE,
                      "native_fd: the devices can only share sync FDs (binary semaphores); that "
                      "mode is not implemented");
  struct native_fd *f = vkrt_calloc(base, 1, sizeof(*f));
  if (!f)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "native_fd: out of host memory");
  f->base.type = &vkrt_transport_native_fd;
  f->base.coll = coll;
  f->sys = sys;
  f->n = sys->device_count;
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->wake, NULL);
  atomic_init(&f->error, VKRT_OK);

  uint64_t align = (uint64_t)sysconf(_SC_PAGESIZE);
  for (uint32_t d = 0; d < f->n; d++)
    align = VKRT_MAX(align, sys->devices[d].caps.min_imported_host_pointer_alignment);
  f->slot_bytes = vkrt_align_up(coll->slot_bytes, align);
  f->host_size = f->slot_bytes * f->n;
  vkrt_status s = VKRT_OK;
  f->host = vkrt_alloc_aligned(base, f->host_size, align);
  if (!f->host)
    s = vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                   "native_fd: cannot allocate %llu bytes of host slots",
                   (unsigned long long)f->host_size);
  else
    memset(f->host, 0, f->host_size);
  VkExportSemaphoreCreateInfo export_info = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
      .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  for (uint32_t d = 0; d < f->n && s == VKRT_OK; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    s = vkrt_collective_import_host(dev, f->host, f->host_size, &f->buffer[d], &f->memory[d]);
    if (s == VKRT_OK)
      s = vkrt_timeline_create(dev, &export_info, COLLECTIVE_TIMELINE, &f->own[d]);
    /* A submit waiting on a peer's semaphore blocks in vkQueueSubmit on NVIDIA until the
     * peer signals: the device's submitter thread makes those, not vkrt_allreduce's caller. */
    if (s == VKRT_OK)
      s = vkrt_stream_defer_waits(dev);
    /* Compile the reduce pipelines now, not inside the first collective; a missing kernel
     * makes this transport unavailable rather than failing every allreduce. */
    if (s == VKRT_OK) {
      s = vkrt_reduce_prepare(dev, VKRT_TYPE_F32);
      if (s == VKRT_OK && IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE_F16))
        s = vkrt_reduce_prepare(dev, VKRT_TYPE_F16);
      if (s == VKRT_ERROR_UNSUPPORTED)
        s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "native_fd: %s", vkrt_base_last_error(base));
    }
  }
  for (uint32_t d = 0; d < f->n && s == VKRT_OK; d++)
    for (uint32_t e = 0; e < f->n && s == VKRT_OK; e++)
      if (e != d)
        s = export_import(f, d, e);
  if (s == VKRT_OK) {
    int e = pthread_create(&f->thread, NULL, watchdog_main, f);
    if (e != 0)
      s = vkrt_error(base, VKRT_ERROR_INTERNAL, "native_fd: pthread_create failed (%d)", e);
    else
      f->thread_started = true;
  }
  if (s != VKRT_OK) {
    native_destroy(&f->base);
    return s;
  }
  *out = &f->base;
  return VKRT_OK;
}

static vkrt_status wait_peers(struct native_fd *f, uint32_t d, uint64_t value) {
  if (value == 0 && !f->base.coll->capture) /* a capture keeps it: replayed, it is shifted */
    return VKRT_OK;
  for (uint32_t e = 0; e < f->n; e++) {
    if (e == d)
      continue;
    vkrt_status s = vkrt_stream_add_wait(&f->sys->devices[d], f->peer[d][e], value);
    if (s != VKRT_OK)
      return s;
  }
  return VKRT_OK;
}

/* The watchdog's ring must not lap: waits (bounded) until `pieces` more fit. */
static vkrt_status watch_room(struct native_fd *f, uint64_t pieces) {
  pthread_mutex_lock(&f->lock);
  uint64_t deadline = vkrt_now_ns() + f->base.coll->timeout_ns, watched = f->watched;
  while (f->issued - f->watched + pieces > WATCH_RING - 1 && vkrt_now_ns() < deadline) {
    if (f->watched != watched) { /* the watchdog advances: not stuck */
      watched = f->watched;
      deadline = vkrt_now_ns() + f->base.coll->timeout_ns;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&f->wake, &f->lock, &ts);
  }
  bool lapped = f->issued - f->watched + pieces > WATCH_RING - 1;
  pthread_mutex_unlock(&f->lock);
  if (lapped)
    return vkrt_error(&f->sys->base, VKRT_ERROR_TIMEOUT,
                      "native_fd: %d pieces pending and none finished for %llu ms", WATCH_RING,
                      (unsigned long long)(f->base.coll->timeout_ns / 1000000));
  return VKRT_OK;
}

/* Hands the pieces up to `seq` to the watchdog. */
static void watch(struct native_fd *f, uint64_t seq) {
  pthread_mutex_lock(&f->lock);
  f->issued = seq;
  pthread_cond_broadcast(&f->wake);
  pthread_mutex_unlock(&f->lock);
}

static vkrt_status native_allreduce(struct vkrt_transport *t, const struct vkrt_allreduce_job *job) {
  struct native_fd *f = (struct native_fd *)t;
  struct vkrt_system *sys = f->sys;
  const vkrt_allreduce_args *a = job->args;
  /* Checked before anything is recorded: a failure between the two phases would strand
   * the peers and make the error sticky. */
  if (a->type == VKRT_TYPE_F16 && !IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE_F16))
    return vkrt_error(&sys->base, VKRT_ERROR_UNSUPPORTED,
                      "native_fd: an f16 allreduce needs the f16 reduce kernel "
                      "(CONFIG_VKRT_TYPE_F16=n in this build)");
  uint64_t per_piece = f->slot_bytes / job->elem_size;
  for (uint64_t first = 0; first < a->count; first += per_piece) {
    uint64_t count = VKRT_MIN(per_piece, a->count - first);
    uint64_t bytes = count * job->elem_size, at = first * job->elem_size;
    uint64_t seq = f->seq + 1;
    struct vkrt_collective *coll = f->base.coll;
    vkrt_status room = coll->capture ? vkrt_collective_capture_piece(coll, count, a->type)
                                     : watch_room(f, 1);
    if (room != VKRT_OK)
      return room;
    for (int phase = 0; phase < 2; phase++)
      for (uint32_t d = 0; d < f->n; d++) {
        struct vkrt_device *dev = &sys->devices[d];
        vkrt_status s = wait_peers(f, d, phase == 0 ? 2 * (seq - 1) : 2 * seq - 1);
        if (s == VKRT_OK && phase == 0) {
          s = vkrt_collective_record_copy(dev, f->buffer[d], d * f->slot_bytes, a->send[d]->handle,
                                          a->send_offset[d] + at, bytes);
        } else if (s == VKRT_OK) {
          VkCommandBuffer cmd;
          s = vkrt_stream_cmd(dev, &cmd);
          if (s == VKRT_OK) {
            VkBuffer srcs[VKRT_MAX_DEVICES];
            uint64_t offsets[VKRT_MAX_DEVICES];
            for (uint32_t e = 0; e < f->n; e++) {
              srcs[e] = f->buffer[d];
              offsets[e] = e * f->slot_bytes;
            }
            vkrt_stream_barrier(dev, cmd);
            s = vkrt_reduce_record(dev, cmd, a->type, count, a->recv[d]->handle,
                                   a->recv_offset[d] + at, srcs, offsets, f->n);
          }
        }
        if (s == VKRT_OK && !vkrt_collective_stalled(dev))
          s = vkrt_stream_add_signal(dev, f->own[d], phase == 0 ? 2 * seq - 1 : 2 * seq);
        if (s == VKRT_OK)
          s = vkrt_stream_submit(dev, NULL);
        if (s != VKRT_OK) {
          /* Peers may already wait for this device: fail every rank and release them. */
          set_error(f, s, "native_fd: dev%u: allreduce piece %llu could not be submitted: %s", d,
                    (unsigned long long)seq, vkrt_status_str(s));
          release_all(f);
          return s;
        }
      }
    f->seq = seq;
    if (!coll->capture)
      watch(f, seq);
  }
  return VKRT_OK;
}

static uint64_t native_sequence(struct vkrt_transport *t) { return ((struct native_fd *)t)->seq; }

static vkrt_status native_capture_end(struct vkrt_transport *t, struct vkrt_collective_capture *cap) {
  ((struct native_fd *)t)->seq = cap->seq0;
  return VKRT_OK;
}

/* A graph launch: its pieces are the next ones; every captured value (2 per piece) moves by
 * twice the pieces issued since the capture began. */
static vkrt_status native_replay(struct vkrt_transport *t, const struct vkrt_collective_capture *cap,
                                 uint64_t *shift) {
  struct native_fd *f = (struct native_fd *)t;
  vkrt_status s = watch_room(f, cap->pieces);
  if (s != VKRT_OK)
    return s;
  *shift = 2 * (f->seq - cap->seq0);
  f->seq += cap->pieces;
  watch(f, f->seq);
  return VKRT_OK;
}

static vkrt_status native_status(struct vkrt_transport *t, char *message, size_t size) {
  struct native_fd *f = (struct native_fd *)t;
  vkrt_status s = (vkrt_status)atomic_load(&f->error);
  if (s != VKRT_OK) {
    pthread_mutex_lock(&f->lock);
    vkrt_format(message, size, "%s", f->error_message);
    pthread_mutex_unlock(&f->lock);
  }
  return s;
}

static size_t native_describe(const struct vkrt_transport *t, bool json, char *buf, size_t size) {
  const struct native_fd *f = (const struct native_fd *)t;
  if (json)
    return 0;
  return (size_t)snprintf(buf, size,
                          "vkrt:   native_fd: %u timeline semaphores shared as opaque FDs; %u host "
                          "slots of %llu KiB; reduce kernel on every device\n",
                          f->n, f->n, (unsigned long long)(f->slot_bytes >> 10));
}

const struct vkrt_transport_type vkrt_transport_native_fd = {
    .kind = VKRT_TRANSPORT_NATIVE_FD,
    .name = "native_fd",
    .features = VKRT_TRANSPORT_NATIVE_FD_FEATURES,
    .create = native_create,
    .destroy = native_destroy,
    .allreduce = native_allreduce,
    .status = native_status,
    .describe = native_describe,
    .sequence = native_sequence,
    .capture_end = native_capture_end,
    .replay = native_replay,
};
