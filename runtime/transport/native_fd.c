/* native_fd: every device's queue waits on its peers directly. Each device owns one timeline
 * semaphore exported as an opaque FD (vkGetSemaphoreFdKHR) and imported on every peer
 * (vkImportSemaphoreFdKHR, resolved per device); data moves through one host allocation
 * imported into every device: two sets of one slot per device, alternating by piece. For
 * piece `seq` device d records
 *   [copy send -> slot d of set seq % 2], signal own = seq, submit;
 *   then attaches "wait every peer >= seq" to its next submit and, as that submit's tail
 *   (vkrt_stream_add_tail: recorded by the device's submitter thread, not the caller), the
 *   reduce of the set's slots 0..n-1, in rank order, into recv with the reduce kernel
 *   (recorded here instead while a graph captures).
 * One submit per device per piece, no host hop: the reduce and what follows it ride in the
 * next submit (the next collective's, a flush or vkrt_submit). Reuse of a set needs no wait
 * of its own: piece seq + 2 writes the set of piece seq in a submit that waited for every
 * peer >= seq + 1, which each peer signalled after its reduce of piece seq (stream order).
 * So the pieces must alternate sets forever: a graph holds an even number of them (capture
 * adds a 4-byte parity piece to an odd one) and launches after an odd number issue one first.
 * Submits that wait on peers are made by each device's stream submitter thread
 * (vkrt_stream_defer_waits), so vkrt_allreduce records and returns. A watchdog thread (off
 * the critical path; it polls while pieces come, so callers need not wake it) watches every
 * device signal the last piece issued; when one does not while no device makes progress for
 * the collective timeout (stalled peer, lost device) it records a sticky error and
 * host-signals every semaphore past any value still awaited, so no queue waits forever and
 * vkrt_close returns.
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

#define RELEASE_VALUE (UINT64_C(1) << 62) /* past anything a queue could still wait for */
#define WATCH_POLL_NS 10000000ull  /* an idle watchdog looks for new pieces this often ... */
#define WATCH_DOZE_NS 1000000000ull /* ... for this long, then sleeps until a caller wakes it */

struct native_fd {
  struct vkrt_transport base;
  struct vkrt_system *sys;
  uint32_t n;
  uint8_t *host;
  uint64_t host_size, set_bytes, slot_bytes;
  VkBuffer buffer[VKRT_MAX_DEVICES];
  VkDeviceMemory memory[VKRT_MAX_DEVICES];
  VkSemaphore own[VKRT_MAX_DEVICES];                    /* exported, on device d */
  VkSemaphore peer[VKRT_MAX_DEVICES][VKRT_MAX_DEVICES]; /* peer[d][e]: e's semaphore on d */
  uint64_t seq; /* last piece recorded (the caller's side) */

  atomic_uint_fast64_t issued; /* last piece handed to the queues (caller) */
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stop, thread_started; /* under lock */
  atomic_bool sleeping;      /* the watchdog waits for a caller's wake-up */
  pthread_t thread;
  atomic_int error;
  char error_message[512];
};

/* Slot `slot` of the set piece `seq` uses (an offset into every device's buffer). */
static uint64_t slot_offset(const struct native_fd *f, uint64_t seq, uint32_t slot) {
  return (seq & 1) * f->set_bytes + slot * f->slot_bytes;
}

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

/* Waits until every device signalled piece `seq` or a stall: then the sticky error, named
 * after the devices that are behind the others, and every queue released. */
static void watch_piece(struct native_fd *f, uint64_t seq) {
  for (uint32_t d = 0; d < f->n; d++) {
    vkrt_status s = vkrt_collective_wait_progress(f->sys, &f->sys->devices[d], f->own[d], seq,
                                                  f->base.coll->timeout_ns);
    if (s == VKRT_OK)
      continue;
    /* The piece that stalled is the one after the lowest value signalled; name the devices
     * that never contributed it, not the first one found waiting for them. */
    uint64_t value[VKRT_MAX_DEVICES], low = UINT64_MAX;
    for (uint32_t e = 0; e < f->n; e++) {
      struct vkrt_device *de = &f->sys->devices[e];
      if (de->vk.vkGetSemaphoreCounterValue(de->handle, f->own[e], &value[e]) != VK_SUCCESS)
        value[e] = 0;
      low = VKRT_MIN(low, value[e]);
    }
    char who[96] = "";
    for (uint32_t e = 0; e < f->n && low < seq; e++)
      if (value[e] == low) {
        size_t len = strlen(who);
        vkrt_format(who + len, sizeof(who) - len, "%sdev%u", len ? ", " : "", e);
      }
    if (!who[0])
      vkrt_format(who, sizeof(who), "dev%u", d);
    set_error(f, s, "native_fd: allreduce piece %llu: %s did not signal and no device made "
              "progress for %llu ms (%s); every rank's result is invalid",
              (unsigned long long)(low < seq ? low + 1 : seq), who,
              (unsigned long long)(f->base.coll->timeout_ns / 1000000),
              s == VKRT_ERROR_TIMEOUT ? "stalled peer" : vkrt_status_str(s));
    release_all(f);
    return;
  }
}

/* The watchdog follows the last piece issued: a later piece signalled implies every earlier
 * one. While pieces keep coming it polls (no caller pays a wake-up); after WATCH_DOZE_NS
 * without one it sleeps until the next caller wakes it. */
static void *watchdog_main(void *arg) {
  struct native_fd *f = arg;
  pthread_setname_np(pthread_self(), "vkrt-fd-watch");
  uint64_t watched = 0, idle_since = vkrt_now_ns();
  pthread_mutex_lock(&f->lock);
  for (;;) {
    uint64_t target = atomic_load(&f->issued);
    if (target != watched) {
      pthread_mutex_unlock(&f->lock);
      if (atomic_load(&f->error) == VKRT_OK)
        watch_piece(f, target);
      watched = target;
      idle_since = vkrt_now_ns();
      pthread_mutex_lock(&f->lock);
      continue;
    }
    if (f->stop)
      break; /* everything issued was watched */
    if (vkrt_now_ns() - idle_since < WATCH_DOZE_NS) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      uint64_t ns = (uint64_t)ts.tv_nsec + WATCH_POLL_NS;
      ts.tv_sec += (time_t)(ns / 1000000000ull);
      ts.tv_nsec = (long)(ns % 1000000000ull);
      pthread_cond_timedwait(&f->wake, &f->lock, &ts);
      continue;
    }
    /* Announced before the last look at `issued` (both sequentially consistent): a caller
     * that issues after that look sees the flag and wakes this thread (watch()). */
    atomic_store(&f->sleeping, true);
    if (atomic_load(&f->issued) == watched && !f->stop)
      pthread_cond_wait(&f->wake, &f->lock); /* a spurious wake-up only loops */
    atomic_store(&f->sleeping, false);
    idle_since = vkrt_now_ns();
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
    /* The last piece's wait may still be attached to an unsubmitted stream. */
    for (uint32_t e = 0; e < f->n; e++) {
      vkrt_stream_detach_waits(dev, f->peer[d][e]);
      vkrt_timeline_destroy(dev, f->peer[d][e]);
    }
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
  atomic_init(&f->issued, 0);
  atomic_init(&f->sleeping, false);

  uint64_t align = (uint64_t)sysconf(_SC_PAGESIZE);
  for (uint32_t d = 0; d < f->n; d++)
    align = VKRT_MAX(align, sys->devices[d].caps.min_imported_host_pointer_alignment);
  /* The configured slot per device holds both sets: a piece is half of it. */
  f->slot_bytes = vkrt_align_up(VKRT_MAX(coll->slot_bytes / 2, 1), align);
  f->set_bytes = f->slot_bytes * f->n;
  f->host_size = f->set_bytes * 2;
  f->base.piece_bytes = f->slot_bytes;
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

/* Hands the pieces up to `seq` to the watchdog, waking it only when it sleeps. */
static void watch(struct native_fd *f, uint64_t seq) {
  atomic_store(&f->issued, seq);
  if (atomic_exchange(&f->sleeping, false)) { /* as the stream wakes its submitter (defer) */
    pthread_mutex_lock(&f->lock);
    pthread_mutex_unlock(&f->lock);
    pthread_cond_signal(&f->wake);
  }
}

/* A failure once peers may wait for this device: fail every rank and release them (a
 * capture issued nothing: its error is the capture's alone). */
static vkrt_status fail_piece(struct native_fd *f, uint32_t d, uint64_t seq, vkrt_status s) {
  if (f->base.coll->capture)
    return s;
  set_error(f, s, "native_fd: dev%u: allreduce piece %llu could not be recorded or submitted: "
            "%s", d, (unsigned long long)seq, vkrt_status_str(s));
  release_all(f);
  return s;
}

/* Piece seq on every device: the contribution (copy into the own slot, signal, submit), then
 * the wait for every peer's contribution attached to the next submit, and the reduce. Without
 * send and recv (a parity piece) only the signal and the wait: the signal still follows
 * every earlier command of the queue, the reduce of piece seq - 1 included. */
static vkrt_status record_piece(struct native_fd *f, uint64_t seq, VkBuffer const *send,
                                const uint64_t *send_offset, VkBuffer const *recv,
                                const uint64_t *recv_offset, const bool *recv_host,
                                uint64_t count, vkrt_type type, uint64_t elem_size) {
  struct vkrt_system *sys = f->sys;
  uint64_t bytes = count * elem_size;
  for (uint32_t d = 0; d < f->n; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    vkrt_status s = VKRT_OK;
    if (send)
      s = vkrt_collective_record_copy(dev, f->buffer[d], slot_offset(f, seq, d), send[d],
                                      send_offset[d], bytes);
    if (s == VKRT_OK && !vkrt_collective_stalled(dev))
      s = vkrt_stream_add_signal(dev, f->own[d], seq);
    if (s == VKRT_OK)
      s = vkrt_stream_submit(dev, NULL);
    if (s != VKRT_OK)
      return fail_piece(f, d, seq, s);
  }
  for (uint32_t d = 0; d < f->n; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    vkrt_status s = VKRT_OK;
    for (uint32_t e = 0; e < f->n && s == VKRT_OK; e++)
      if (e != d)
        s = vkrt_stream_add_wait(dev, f->peer[d][e], seq);
    if (s == VKRT_OK && recv) {
      VkBuffer srcs[VKRT_MAX_DEVICES];
      uint64_t offsets[VKRT_MAX_DEVICES];
      for (uint32_t e = 0; e < f->n; e++) {
        srcs[e] = f->buffer[d];
        offsets[e] = slot_offset(f, seq, e);
      }
      struct vkrt_stream_tail tail = {.record = vkrt_reduce_emit_raw, .host = recv_host[d]};
      struct vkrt_reduce_plan *plan = (struct vkrt_reduce_plan *)tail.data;
      s = vkrt_reduce_plan(dev, type, count, recv[d], recv_offset[d], srcs, offsets, f->n, plan);
      /* The reduce as the tail of the next submit, recorded by the submitter thread; while
       * capturing (or without push descriptors) into the stream here. */
      if (s == VKRT_OK && plan->push_descriptor && vkrt_stream_tail_ok(dev)) {
        vkrt_stream_add_tail(dev, &tail);
      } else if (s == VKRT_OK) {
        VkCommandBuffer cmd;
        s = vkrt_stream_cmd(dev, &cmd);
        if (s == VKRT_OK) {
          vkrt_stream_barrier(dev, cmd);
          s = vkrt_reduce_emit(dev, cmd, plan);
        }
      }
    }
    if (s != VKRT_OK)
      return fail_piece(f, d, seq, s);
  }
  f->seq = seq;
  return VKRT_OK;
}

static vkrt_status native_allreduce(struct vkrt_transport *t, const struct vkrt_allreduce_job *job) {
  struct native_fd *f = (struct native_fd *)t;
  struct vkrt_system *sys = f->sys;
  const vkrt_allreduce_args *a = job->args;
  /* Checked before anything is recorded: a failure half way would strand the peers and
   * make the error sticky. */
  if (a->type == VKRT_TYPE_F16 && !IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE_F16))
    return vkrt_error(&sys->base, VKRT_ERROR_UNSUPPORTED,
                      "native_fd: an f16 allreduce needs the f16 reduce kernel "
                      "(CONFIG_VKRT_TYPE_F16=n in this build)");
  struct vkrt_collective *coll = f->base.coll;
  VkBuffer send[VKRT_MAX_DEVICES], recv[VKRT_MAX_DEVICES];
  uint64_t so[VKRT_MAX_DEVICES], ro[VKRT_MAX_DEVICES];
  bool recv_host[VKRT_MAX_DEVICES];
  uint64_t per_piece = f->slot_bytes / job->elem_size;
  for (uint64_t first = 0; first < a->count; first += per_piece) {
    uint64_t count = VKRT_MIN(per_piece, a->count - first), at = first * job->elem_size;
    if (coll->capture) {
      vkrt_status room = vkrt_collective_capture_piece(coll, count, a->type);
      if (room != VKRT_OK)
        return room;
    }
    for (uint32_t d = 0; d < f->n; d++) {
      send[d] = a->send[d]->handle;
      recv[d] = a->recv[d]->handle;
      recv_host[d] = a->recv[d]->mapped != NULL;
      so[d] = a->send_offset[d] + at;
      ro[d] = a->recv_offset[d] + at;
    }
    vkrt_status s = record_piece(f, f->seq + 1, send, so, recv, ro, recv_host, count, a->type,
                                 job->elem_size);
    if (s != VKRT_OK)
      return s;
    if (!coll->capture)
      watch(f, f->seq);
  }
  return VKRT_OK;
}

/* A piece that moves no data, only its signal and wait: it keeps the alternation of the slot
 * sets where captured pieces need it (see the top of the file). */
static vkrt_status parity_piece(struct native_fd *f) {
  struct vkrt_collective *coll = f->base.coll;
  if (coll->capture) {
    vkrt_status s = vkrt_collective_capture_piece(coll, 1, VKRT_TYPE_F32);
    if (s != VKRT_OK)
      return s;
  }
  vkrt_status s = record_piece(f, f->seq + 1, NULL, NULL, NULL, NULL, NULL, 0, VKRT_TYPE_F32, 4);
  if (s == VKRT_OK && !coll->capture)
    watch(f, f->seq);
  return s;
}

static uint64_t native_sequence(struct vkrt_transport *t) { return ((struct native_fd *)t)->seq; }

/* The captured pieces name a slot set by their parity: a graph holds an even number of
 * them, so each launch leaves the parity the next piece expects. Nothing captured ran. */
static vkrt_status native_capture_end(struct vkrt_transport *t, struct vkrt_collective_capture *cap) {
  struct native_fd *f = (struct native_fd *)t;
  vkrt_status s = (f->seq - cap->seq0) & 1 ? parity_piece(f) : VKRT_OK;
  f->seq = cap->seq0;
  return s;
}

/* A graph launch: its pieces are the next ones, and every captured value (one per piece)
 * moves by the pieces issued since the capture began. That count must be even for the slot
 * sets: after an odd number of direct pieces, a parity piece first. */
static vkrt_status native_replay(struct vkrt_transport *t, const struct vkrt_collective_capture *cap,
                                 uint64_t *shift) {
  struct native_fd *f = (struct native_fd *)t;
  if ((f->seq - cap->seq0) & 1) {
    vkrt_status s = parity_piece(f);
    if (s != VKRT_OK)
      return s;
  }
  *shift = f->seq - cap->seq0;
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
                          "vkrt:   native_fd: %u timeline semaphores shared as opaque FDs; 2 sets of "
                          "%u host slots of %llu KiB; one submit per device per piece; reduce "
                          "kernel on every device\n",
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
