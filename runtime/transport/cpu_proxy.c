/* cpu_proxy: one page-aligned host allocation imported into every device
 * (VK_EXT_external_memory_host) holds one slot per device plus a result slot. Per piece of
 * an allreduce each device DMA-writes its contribution into its slot and signals its own
 * timeline semaphore; the proxy thread waits for all of them (bounded spin on the counter,
 * then vkWaitSemaphores; it times out only when no device makes progress for the collective
 * timeout — never a fence), sums the slots on
 * the CPU in rank order into the result slot and host-signals every device's "result"
 * timeline, which the device's next submit waits on before copying the result out. So
 * vkrt_allreduce returns at once and the GPU work after it waits on the GPU.
 *
 * Why the CPU reduce (measured, not assumed): on lavapipe the reduce kernel over two
 * host-visible inputs reaches 0.02 GB/s at 4 KiB, 0.26 GB/s at 256 KiB .. 2 MiB and 0.28 GB/s
 * at 16 MiB, while vkrt_collective_reduce_cpu does 6.5 / 6.3 / 2.8 / 3.1 GB/s at the same
 * sizes (10x to 400x faster at every size), so the proxy sums for all sizes. It also keeps
 * the bus traffic at one result read per device instead of n slot reads per device. The
 * same bytes go to every rank, so results are bit-identical by construction. (native_fd has
 * no host hop and must use the kernel; on physical GPUs a per-size switch may pay off — it
 * needs the slots double-buffered against peers still reading, which they already are.)
 *
 * Two sets of slots alternate by piece number, and the copy-out of piece k is attached to
 * the submit that copies piece k + 1 in, so a device moves piece k + 1 while the proxy sums
 * piece k. Reuse needs no extra host synchronization: the submit that writes a device's
 * slot for piece k + 2 waits for the proxy's result of piece k, which came after the proxy
 * read every slot of piece k; the proxy writes the result slot of piece k + 2 only after
 * every device's contribution to it, which follows (stream order) its copy-out of piece k. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "transport/transport.h"

#define PROXY_RING 64             /* pieces in flight between the callers and the proxy */
#define PROXY_IDLE_SPIN_NS 50000ull /* the proxy spins this long for a new job, then sleeps */

struct proxy_job {
  uint64_t seq;
  uint64_t count;
  vkrt_type type;
};

struct proxy_device {
  VkBuffer buffer[2];     /* slot set 0 and 1 of the host allocation, imported (one import
                           * each keeps 2 sets of 9 x 256 MiB under a 4 GiB allocation limit) */
  VkDeviceMemory memory[2];
  VkSemaphore contrib;    /* signalled by the device: its slot holds piece `seq` */
  VkSemaphore result;     /* signalled by the proxy: the result slot holds piece `seq` */
};

struct cpu_proxy {
  struct vkrt_transport base;
  struct vkrt_system *sys;
  uint32_t n;
  uint8_t *host;
  uint64_t host_size, set_bytes, slot_bytes;
  struct proxy_device dev[VKRT_MAX_DEVICES];
  uint64_t seq; /* last piece number handed out (the caller's side) */

  pthread_mutex_t lock;
  pthread_cond_t wake, space;
  struct proxy_job ring[PROXY_RING];
  atomic_uint_fast64_t head, tail; /* head: next job for the proxy; tail: next free */
  bool stop;
  bool thread_started;
  pthread_t thread;

  atomic_int error;        /* vkrt_status; sticky once set */
  char error_message[512]; /* written once, before error is published */
  atomic_uint_fast64_t completed; /* last seq the proxy finished */
  uint64_t pieces, cpu_reduce_ns; /* statistics (proxy thread) */
  struct vkrt_reduce_pool *pool;  /* NULL on small machines: the proxy sums alone */
  uint64_t idle_spin_ns;          /* 0 when a device is the CPU (lavapipe): it needs the cores */
};

/* Two sets of n + 1 slots alternate by piece number, so a device copies piece k + 1 in
 * while the proxy still sums piece k. */
static uint64_t slot_offset(const struct cpu_proxy *p, uint32_t slot) { return slot * p->slot_bytes; }
static uint8_t *slot_host(const struct cpu_proxy *p, uint64_t seq, uint32_t slot) {
  return p->host + (seq & 1) * p->set_bytes + slot_offset(p, slot);
}
static VkBuffer slot_buffer(const struct cpu_proxy *p, uint32_t d, uint64_t seq) {
  return p->dev[d].buffer[seq & 1];
}

static void set_error(struct cpu_proxy *p, vkrt_status s, const char *fmt, ...) VKRT_PRINTF(3, 4);
static void set_error(struct cpu_proxy *p, vkrt_status s, const char *fmt, ...) {
  pthread_mutex_lock(&p->lock);
  if (atomic_load(&p->error) == VKRT_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error_message, sizeof(p->error_message), fmt, ap);
    va_end(ap);
    atomic_store(&p->error, (int)s);
  }
  pthread_mutex_unlock(&p->lock);
}

static void process(struct cpu_proxy *p, const struct proxy_job *job) {
  struct vkrt_system *sys = p->sys;
  if (atomic_load(&p->error) == VKRT_OK) {
    for (uint32_t d = 0; d < p->n; d++) {
      vkrt_status s = vkrt_collective_wait_progress(sys, &sys->devices[d], p->dev[d].contrib,
                                                    job->seq, p->base.coll->timeout_ns);
      if (s == VKRT_ERROR_TIMEOUT) {
        set_error(p, s, "cpu_proxy: allreduce piece %llu: dev%u did not signal its contribution "
                  "and no device made progress for %llu ms (stalled peer); every rank's result "
                  "is invalid",
                  (unsigned long long)job->seq, d,
                  (unsigned long long)(p->base.coll->timeout_ns / 1000000));
        break;
      }
      if (s != VKRT_OK) {
        set_error(p, s, "cpu_proxy: allreduce piece %llu: waiting for dev%u failed: %s",
                  (unsigned long long)job->seq, d, vkrt_status_str(s));
        break;
      }
    }
  }
  if (atomic_load(&p->error) == VKRT_OK) {
    const void *src[VKRT_MAX_DEVICES];
    for (uint32_t d = 0; d < p->n; d++)
      src[d] = slot_host(p, job->seq, d);
    uint64_t t0 = vkrt_now_ns();
    struct vkrt_interhost *hosts = p->base.coll->interhost;
    if (hosts) { /* several hosts: this host's sum is exchanged, then the hosts' sum lands */
      char message[VKRT_ERROR_MESSAGE_SIZE];
      vkrt_status s = vkrt_interhost_allreduce(hosts, job->type, slot_host(p, job->seq, p->n),
                                               src, p->n, job->count, message, sizeof(message));
      if (s != VKRT_OK)
        set_error(p, s, "cpu_proxy: allreduce piece %llu: %s", (unsigned long long)job->seq,
                  message);
    } else {
      vkrt_reduce_pool_run(p->pool, job->type, slot_host(p, job->seq, p->n), src, p->n,
                           job->count);
    }
    p->cpu_reduce_ns += vkrt_now_ns() - t0;
    p->pieces++;
  }
  /* Signal even after an error, so no queue waits forever on this piece. */
  for (uint32_t d = 0; d < p->n; d++) {
    VkResult r = vkrt_collective_host_signal(&sys->devices[d], p->dev[d].result, job->seq);
    if (r != VK_SUCCESS)
      set_error(p, r == VK_ERROR_DEVICE_LOST ? VKRT_ERROR_DEVICE_LOST : VKRT_ERROR_VULKAN,
                "cpu_proxy: vkSignalSemaphore on dev%u failed: %s", d, vkrt_vk_result_str(r));
  }
  atomic_store(&p->completed, job->seq);
}

static void *proxy_main(void *arg) {
  struct cpu_proxy *p = arg;
  pthread_setname_np(pthread_self(), "vkrt-proxy"); /* shows in top/gdb; best effort */
  for (;;) {
    /* A short spin catches back-to-back collectives without a futex round trip. */
    uint64_t spin_end = vkrt_now_ns() + p->idle_spin_ns;
    while (atomic_load(&p->head) == atomic_load(&p->tail) && vkrt_now_ns() < spin_end)
      ;
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->head) == atomic_load(&p->tail) && !p->stop)
      pthread_cond_wait(&p->wake, &p->lock);
    if (atomic_load(&p->head) == atomic_load(&p->tail)) { /* stop, and drained */
      pthread_mutex_unlock(&p->lock);
      return NULL;
    }
    struct proxy_job job = p->ring[atomic_load(&p->head) % PROXY_RING];
    pthread_mutex_unlock(&p->lock);
    process(p, &job);
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->head, 1);
    pthread_cond_broadcast(&p->space);
    pthread_mutex_unlock(&p->lock);
  }
}

static void proxy_destroy(struct vkrt_transport *t) {
  struct cpu_proxy *p = (struct cpu_proxy *)t;
  struct vkrt_system *sys = p->sys;
  if (p->thread_started) {
    /* The proxy drains what was enqueued (each piece bounded by the deadline), then exits. */
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
  }
  for (uint32_t d = 0; d < p->n; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    struct proxy_device *pd = &p->dev[d];
    /* Release a wait that no job will ever satisfy (a piece whose submit failed half way),
     * then let the queue finish before its semaphores and slots go away. */
    uint64_t current = 0;
    if (pd->result && p->seq &&
        dev->vk.vkGetSemaphoreCounterValue(dev->handle, pd->result, &current) == VK_SUCCESS &&
        current < p->seq)
      vkrt_collective_host_signal(dev, pd->result, p->seq);
    if (dev->handle) {
      vkrt_stream_drain(dev);
      pthread_mutex_lock(&dev->compute_queue_lock);
      dev->vk.vkQueueWaitIdle(dev->compute_queue);
      pthread_mutex_unlock(&dev->compute_queue_lock);
    }
    /* A wait still attached to the unsubmitted stream must not name a dead semaphore. */
    vkrt_stream_detach_waits(dev, pd->result);
    vkrt_stream_detach_waits(dev, pd->contrib);
    vkrt_timeline_destroy(dev, pd->contrib);
    vkrt_timeline_destroy(dev, pd->result);
    for (int set = 0; set < 2; set++) {
      if (pd->buffer[set])
        dev->vk.vkDestroyBuffer(dev->handle, pd->buffer[set], &dev->sys->vk_allocator);
      if (pd->memory[set])
        dev->vk.vkFreeMemory(dev->handle, pd->memory[set], &dev->sys->vk_allocator);
    }
  }
  if (p->pieces)
    vkrt_log(&sys->base, VKRT_LOG_DEBUG, "cpu_proxy: %llu pieces, CPU reduce %.3f ms total",
             (unsigned long long)p->pieces, (double)p->cpu_reduce_ns * 1e-6);
  vkrt_reduce_pool_destroy(p->pool);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->space);
  pthread_mutex_destroy(&p->lock);
  vkrt_free(&sys->base, p->host);
  vkrt_free(&sys->base, p);
}

static vkrt_status proxy_create(struct vkrt_collective *coll, struct vkrt_transport **out) {
  *out = NULL;
  struct vkrt_system *sys = coll->sys;
  struct vkrt_base *base = &sys->base;
  struct cpu_proxy *p = vkrt_calloc(base, 1, sizeof(*p));
  if (!p)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "cpu_proxy: out of host memory");
  p->base.type = &vkrt_transport_cpu_proxy;
  p->base.coll = coll;
  p->sys = sys;
  p->n = sys->device_count;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->space, NULL);
  atomic_init(&p->head, 0);
  atomic_init(&p->tail, 0);
  atomic_init(&p->error, VKRT_OK);
  atomic_init(&p->completed, 0);

  uint64_t align = (uint64_t)sysconf(_SC_PAGESIZE);
  p->idle_spin_ns = PROXY_IDLE_SPIN_NS;
  for (uint32_t d = 0; d < p->n; d++) {
    align = VKRT_MAX(align, sys->devices[d].caps.min_imported_host_pointer_alignment);
    if (sys->devices[d].caps.is_cpu)
      p->idle_spin_ns = 0;
  }
  /* One set (n + 1 slots) is one import, so it must fit the smallest device's allocation
   * and buffer limits; a configured slot that does not is shrunk (pieces get smaller). */
  uint64_t limit = UINT64_MAX;
  for (uint32_t d = 0; d < p->n; d++) {
    const struct vkrt_caps *c = &sys->devices[d].caps;
    if (c->max_memory_allocation_size)
      limit = VKRT_MIN(limit, c->max_memory_allocation_size);
    if (c->max_buffer_size)
      limit = VKRT_MIN(limit, c->max_buffer_size);
  }
  p->slot_bytes = vkrt_align_up(coll->slot_bytes, align);
  uint64_t fit = vkrt_align_down(limit / (p->n + 1), align);
  if (fit < p->slot_bytes) {
    vkrt_log(base, VKRT_LOG_INFO, "cpu_proxy: slot of %llu bytes shrunk to %llu so %u slots fit "
             "one import (device limit %llu)", (unsigned long long)p->slot_bytes,
             (unsigned long long)fit, p->n + 1, (unsigned long long)limit);
    p->slot_bytes = fit;
  }
  p->set_bytes = p->slot_bytes * (p->n + 1);
  p->host_size = p->set_bytes * 2;
  p->base.piece_bytes = p->slot_bytes;
  vkrt_status s = VKRT_OK;
  if (p->slot_bytes == 0)
    s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE,
                   "cpu_proxy: %u slots of the import alignment %llu do not fit one allocation "
                   "of %llu bytes", p->n + 1, (unsigned long long)align,
                   (unsigned long long)limit);
  if (s == VKRT_OK) {
    p->host = vkrt_alloc_aligned(base, p->host_size, align);
    if (!p->host)
      s = vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                     "cpu_proxy: cannot allocate %llu bytes of host slots",
                     (unsigned long long)p->host_size);
  }
  if (s == VKRT_OK)
    memset(p->host, 0, p->host_size); /* fault the pages in now, not in the first collective */
  for (uint32_t d = 0; d < p->n && s == VKRT_OK; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    for (int set = 0; set < 2 && s == VKRT_OK; set++)
      s = vkrt_collective_import_host(dev, p->host + set * p->set_bytes, p->set_bytes,
                                      &p->dev[d].buffer[set], &p->dev[d].memory[set]);
    if (s == VKRT_OK)
      s = vkrt_timeline_create(dev, NULL, COLLECTIVE_TIMELINE, &p->dev[d].contrib);
    if (s == VKRT_OK)
      s = vkrt_timeline_create(dev, NULL, COLLECTIVE_TIMELINE, &p->dev[d].result);
    /* The submit carrying the wait for the proxy's result is made by the device's submitter
     * thread, so no caller's vkQueueSubmit waits for the relay. */
    if (s == VKRT_OK)
      s = vkrt_stream_defer_waits(dev);
  }
  if (s == VKRT_OK)
    s = vkrt_reduce_pool_create(base, vkrt_reduce_pool_threads(), &p->pool);
  if (s == VKRT_OK) {
    int e = pthread_create(&p->thread, NULL, proxy_main, p);
    if (e != 0)
      s = vkrt_error(base, VKRT_ERROR_INTERNAL, "cpu_proxy: pthread_create failed (%d)", e);
    else
      p->thread_started = true;
  }
  if (s != VKRT_OK) {
    proxy_destroy(&p->base);
    return s;
  }
  vkrt_log(base, VKRT_LOG_INFO, "cpu_proxy: %u slots of %llu bytes imported into %u devices",
           2 * (p->n + 1), (unsigned long long)p->slot_bytes, p->n);
  *out = &p->base;
  return VKRT_OK;
}

/* Attaches "wait for the proxy's result `seq`" to every device's next submit and the copy of
 * the result slot into recv at byte `at` after it (a tail the submitter thread records). */
static vkrt_status record_copy_out(struct cpu_proxy *p, const vkrt_allreduce_args *a, uint64_t seq,
                                   uint64_t at, uint64_t bytes) {
  for (uint32_t d = 0; d < p->n; d++) {
    struct vkrt_device *dev = &p->sys->devices[d];
    vkrt_status s = vkrt_stream_add_wait(dev, p->dev[d].result, seq);
    if (s == VKRT_OK)
      s = vkrt_collective_copy_after_waits(dev, a->recv[d]->handle, a->recv_offset[d] + at,
                                           slot_buffer(p, d, seq), slot_offset(p, p->n), bytes,
                                           a->recv[d]->mapped != NULL);
    if (s != VKRT_OK)
      return s;
  }
  return VKRT_OK;
}

/* Room in the job ring (only short when the devices are far behind the caller). */
static vkrt_status ring_room(struct cpu_proxy *p) {
  if (atomic_load(&p->tail) - atomic_load(&p->head) < PROXY_RING)
    return VKRT_OK;
  uint64_t deadline = vkrt_now_ns() + p->base.coll->timeout_ns;
  uint64_t head = atomic_load(&p->head);
  pthread_mutex_lock(&p->lock);
  while (atomic_load(&p->tail) - atomic_load(&p->head) >= PROXY_RING && vkrt_now_ns() < deadline) {
    if (atomic_load(&p->head) != head) { /* the proxy advances: not stuck */
      head = atomic_load(&p->head);
      deadline = vkrt_now_ns() + p->base.coll->timeout_ns;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&p->space, &p->lock, &ts);
  }
  bool full = atomic_load(&p->tail) - atomic_load(&p->head) >= PROXY_RING;
  pthread_mutex_unlock(&p->lock);
  if (full)
    return vkrt_error(&p->sys->base, VKRT_ERROR_TIMEOUT,
                      "cpu_proxy: %d pieces pending and none finished for %llu ms", PROXY_RING,
                      (unsigned long long)(p->base.coll->timeout_ns / 1000000));
  return VKRT_OK;
}

static void enqueue(struct cpu_proxy *p, uint64_t seq, uint64_t count, vkrt_type type) {
  pthread_mutex_lock(&p->lock);
  p->ring[atomic_load(&p->tail) % PROXY_RING] =
      (struct proxy_job){.seq = seq, .count = count, .type = type};
  atomic_fetch_add(&p->tail, 1);
  pthread_mutex_unlock(&p->lock);
  /* after the unlock: a woken proxy does not wait for the lock again */
  pthread_cond_signal(&p->wake);
}

/* Device d's contribution to piece seq: [barrier, copy src -> own slot], signal, submit. */
static vkrt_status contribute(struct cpu_proxy *p, uint32_t d, uint64_t seq, VkBuffer src,
                              uint64_t src_offset, uint64_t bytes) {
  struct vkrt_device *dev = &p->sys->devices[d];
  vkrt_status s = vkrt_collective_record_copy(dev, slot_buffer(p, d, seq), slot_offset(p, d), src,
                                              src_offset, bytes);
  if (s == VKRT_OK && !vkrt_collective_stalled(dev))
    s = vkrt_stream_add_signal(dev, p->dev[d].contrib, seq);
  if (s == VKRT_OK)
    s = vkrt_stream_submit(dev, NULL);
  if (s != VKRT_OK) {
    /* Devices before d already signalled `seq`; it is skipped, not reused. No queue
     * waits on its result, so nothing is left hanging. */
    p->seq = seq;
    if (s == VKRT_ERROR_DEVICE_LOST)
      set_error(p, s, "cpu_proxy: dev%u lost during an allreduce", d);
  }
  return s;
}

static vkrt_status proxy_allreduce(struct vkrt_transport *t, const struct vkrt_allreduce_job *job) {
  struct cpu_proxy *p = (struct cpu_proxy *)t;
  const vkrt_allreduce_args *a = job->args;
  uint64_t per_piece = p->slot_bytes / job->elem_size;
  for (uint64_t first = 0; first < a->count; first += per_piece) {
    uint64_t count = VKRT_MIN(per_piece, a->count - first);
    uint64_t bytes = count * job->elem_size, at = first * job->elem_size;
    uint64_t seq = p->seq + 1;
    struct vkrt_collective *coll = p->base.coll;
    vkrt_status room = coll->capture ? vkrt_collective_capture_piece(coll, count, a->type)
                                     : ring_room(p);
    if (room != VKRT_OK)
      return room;

    /* Contribution: [barrier, copy send -> own slot], signal, submit, on every device. */
    for (uint32_t d = 0; d < p->n; d++) {
      vkrt_status s = contribute(p, d, seq, a->send[d]->handle, a->send_offset[d] + at, bytes);
      if (s != VKRT_OK)
        return s;
    }
    p->seq = seq;
    if (!coll->capture)
      enqueue(p, seq, count, a->type);

    /* Result of the previous piece: the next submit waits for the proxy, copies it out and
     * copies the next piece in, which so overlaps the proxy summing this piece. */
    if (first) {
      vkrt_status s = record_copy_out(p, a, seq - 1, at - per_piece * job->elem_size,
                                      per_piece * job->elem_size);
      if (s != VKRT_OK)
        return s;
    }
    if (first + count == a->count) {
      vkrt_status s = record_copy_out(p, a, seq, at, bytes);
      if (s != VKRT_OK)
        return s;
    }
  }
  return VKRT_OK;
}

static uint64_t proxy_sequence(struct vkrt_transport *t) { return ((struct cpu_proxy *)t)->seq; }

/* A piece of 4 bytes that nothing reads (the result slot into each device's own slot): it
 * keeps the parity of the piece count where captured copies need it. */
static vkrt_status parity_piece(struct cpu_proxy *p) {
  uint64_t seq = p->seq + 1;
  struct vkrt_collective *coll = p->base.coll;
  vkrt_status s = coll->capture ? vkrt_collective_capture_piece(coll, 1, VKRT_TYPE_F32)
                                : ring_room(p);
  for (uint32_t d = 0; d < p->n && s == VKRT_OK; d++)
    s = contribute(p, d, seq, slot_buffer(p, d, seq), slot_offset(p, p->n), 4);
  if (s != VKRT_OK)
    return s;
  p->seq = seq;
  if (!coll->capture)
    enqueue(p, seq, 1, VKRT_TYPE_F32);
  return VKRT_OK;
}

/* The captured copies name a slot set by the piece's parity: a graph holds an even number of
 * pieces, so each launch keeps the parity the next one finds. */
static vkrt_status proxy_capture_end(struct vkrt_transport *t, struct vkrt_collective_capture *cap) {
  struct cpu_proxy *p = (struct cpu_proxy *)t;
  vkrt_status s = cap->pieces & 1 ? parity_piece(p) : VKRT_OK;
  p->seq = cap->seq0;
  return s;
}

/* A graph launch: its pieces become the next ones, each a proxy job, and every captured value
 * moves by the pieces issued since the capture began. That count must be even for the slot
 * sets (see proxy_capture_end): after an odd number of direct pieces, a parity piece first. */
static vkrt_status proxy_replay(struct vkrt_transport *t, const struct vkrt_collective_capture *cap,
                                uint64_t *shift) {
  struct cpu_proxy *p = (struct cpu_proxy *)t;
  if ((p->seq - cap->seq0) & 1) {
    vkrt_status s = parity_piece(p);
    if (s != VKRT_OK)
      return s;
  }
  *shift = p->seq - cap->seq0;
  for (uint32_t i = 0; i < cap->pieces; i++) {
    vkrt_status s = ring_room(p);
    if (s != VKRT_OK)
      return s; /* earlier pieces are issued: their waits are released by the timeout */
    enqueue(p, ++p->seq, cap->piece[i].count, cap->piece[i].type);
  }
  return VKRT_OK;
}

static vkrt_status proxy_status(struct vkrt_transport *t, char *message, size_t size) {
  struct cpu_proxy *p = (struct cpu_proxy *)t;
  vkrt_status s = (vkrt_status)atomic_load(&p->error);
  if (s != VKRT_OK) {
    pthread_mutex_lock(&p->lock);
    vkrt_format(message, size, "%s", p->error_message);
    pthread_mutex_unlock(&p->lock);
  }
  return s;
}

static size_t proxy_describe(const struct vkrt_transport *t, bool json, char *buf, size_t size) {
  const struct cpu_proxy *p = (const struct cpu_proxy *)t;
  if (json)
    return 0; /* the plan object already names the transport */
  return (size_t)snprintf(buf, size,
                          "vkrt:   cpu_proxy: %u host slots of %llu KiB imported into every "
                          "device; CPU reduce in rank order by the proxy thread\n",
                          2 * (p->n + 1), (unsigned long long)(p->slot_bytes >> 10));
}

const struct vkrt_transport_type vkrt_transport_cpu_proxy = {
    .kind = VKRT_TRANSPORT_CPU_PROXY,
    .name = "cpu_proxy",
    .features = VKRT_TRANSPORT_CPU_PROXY_FEATURES,
    .create = proxy_create,
    .destroy = proxy_destroy,
    .allreduce = proxy_allreduce,
    .status = proxy_status,
    .describe = proxy_describe,
    .sequence = proxy_sequence,
    .capture_end = proxy_capture_end,
    .replay = proxy_replay,
};
