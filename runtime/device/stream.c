/* Per-device stream: a ring of command buffers retired by one timeline semaphore. */
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "base/base.h"
#include "device/device.h"
#include "device/device_internal.h"

/* A transient command pool of the compute family with one primary command buffer; on
 * failure what was made is left for the caller's destroy (the other one NULL). */
static vkrt_status create_pool(struct vkrt_device *dev, VkCommandPool *pool,
                               VkCommandBuffer *cmd, const char *what) {
  VkCommandPoolCreateInfo pool_info = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
      .queueFamilyIndex = dev->compute_family,
  };
  char call[96];
  VkResult r = dev->vk.vkCreateCommandPool(dev->handle, &pool_info, &dev->sys->vk_allocator, pool);
  if (r != VK_SUCCESS) {
    *pool = VK_NULL_HANDLE;
    vkrt_format(call, sizeof(call), "vkCreateCommandPool %s", what);
    return vkrt_vk_error(dev, r, call);
  }
  VkCommandBufferAllocateInfo cmd_info = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = *pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = 1,
  };
  r = dev->vk.vkAllocateCommandBuffers(dev->handle, &cmd_info, cmd);
  if (r != VK_SUCCESS) {
    *cmd = VK_NULL_HANDLE;
    vkrt_format(call, sizeof(call), "vkAllocateCommandBuffers %s", what);
    return vkrt_vk_error(dev, r, call);
  }
  return VKRT_OK;
}

vkrt_status vkrt_stream_init(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  memset(st, 0, sizeof(*st));
  pthread_mutex_init(&st->defer_lock, NULL);
  pthread_cond_init(&st->defer_wake, NULL);
  pthread_cond_init(&st->defer_space, NULL);
  atomic_init(&st->defer_head, 0);
  atomic_init(&st->defer_tail, 0);
  atomic_init(&st->submitter_stop, false);
  atomic_init(&st->submitter_sleeping, false);
  atomic_init(&st->caught_spinning, 0);
  atomic_init(&st->caught_dozing, 0);
  atomic_init(&st->woken, 0);
  atomic_init(&st->tails, 0);
  for (uint32_t i = 0; i < VKRT_STREAM_DEPTH; i++)
    atomic_init(&st->prep[i], VKRT_STREAM_PREP_NONE);
  st->submitter_vk = dev->vk;
  atomic_init(&st->deferred_error, VKRT_OK);
  for (uint32_t i = 0; i < VKRT_STREAM_DEPTH; i++) {
    vkrt_status s = create_pool(dev, &st->pool[i], &st->cmd[i], "for the stream");
    if (s != VKRT_OK)
      return s;
  }
  vkrt_status s = vkrt_timeline_create(dev, NULL, "vkCreateSemaphore for the stream timeline",
                                        &st->timeline);
  if (s != VKRT_OK)
    return s;
  /* CPU devices (lavapipe) run the work on the CPU cores a spinning waiter would take. */
  const uint64_t spin_us = dev->sys->options.wait_spin_us; /* vkrt_open checked it */
  atomic_init(&st->spin_ns, dev->caps.is_cpu ? 0 : spin_us ? spin_us * 1000u : VKRT_STREAM_SPIN_NS);
  st->flush_ops = VKRT_STREAM_FLUSH_OPS;
  st->flush_at = VKRT_STREAM_FLUSH_FIRST;
  return VKRT_OK;
}

void vkrt_stream_finish(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  if (st->submitter_started) { /* submits what is queued, then exits */
    pthread_mutex_lock(&st->defer_lock);
    atomic_store(&st->submitter_stop, true);
    pthread_cond_signal(&st->defer_wake);
    pthread_mutex_unlock(&st->defer_lock);
    pthread_join(st->submitter, NULL);
  }
  if (st->timeline)
    dev->vk.vkDestroySemaphore(dev->handle, st->timeline, &dev->sys->vk_allocator);
  for (uint32_t i = 0; i < VKRT_STREAM_DEPTH; i++) { /* a pool frees its command buffer too */
    if (st->pool[i])
      dev->vk.vkDestroyCommandPool(dev->handle, st->pool[i], &dev->sys->vk_allocator);
    if (st->tail_pool[i])
      dev->vk.vkDestroyCommandPool(dev->handle, st->tail_pool[i], &dev->sys->vk_allocator);
  }
  pthread_cond_destroy(&st->defer_space);
  pthread_cond_destroy(&st->defer_wake);
  pthread_mutex_destroy(&st->defer_lock);
  memset(st, 0, sizeof(*st));
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static vkrt_status lost(struct vkrt_device *dev, VkResult r, const char *what) {
  if (r == VK_ERROR_DEVICE_LOST)
    dev->lost = true;
  return vkrt_vk_error(dev, r, what);
}

/* Spin on the timeline counter for up to the device's spin budget (a blocking wait costs
 * a wake-up: H200 submit + spin 12 us, + vkWaitSemaphores/fence 31-36 us), then block for
 * what is left of the timeout (nothing when the spin used it up: it overshoots by a poll). */
static vkrt_status wait_value(struct vkrt_device *dev, uint64_t value, uint64_t timeout_ns) {
  struct vkrt_stream *st = &dev->stream;
  uint64_t cur = 0;
  VkResult r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, st->timeline, &cur);
  if (r != VK_SUCCESS)
    return lost(dev, r, "vkGetSemaphoreCounterValue on the stream timeline");
  if (cur >= value)
    return VKRT_OK;
  uint64_t spin = VKRT_MIN(vkrt_stream_spin_ns(dev), timeout_ns), block_ns = timeout_ns;
  if (spin) {
    uint64_t t0 = now_ns(), t = t0;
    while (t - t0 < spin) {
      r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, st->timeline, &cur);
      if (r != VK_SUCCESS)
        return lost(dev, r, "vkGetSemaphoreCounterValue on the stream timeline");
      if (cur >= value)
        return VKRT_OK;
      t = now_ns();
    }
    if (timeout_ns != UINT64_MAX)
      block_ns = t - t0 >= timeout_ns ? 0 : timeout_ns - (t - t0);
  }
  VkSemaphoreWaitInfo info = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
      .semaphoreCount = 1,
      .pSemaphores = &dev->stream.timeline,
      .pValues = &value,
  };
  r = dev->vk.vkWaitSemaphores(dev->handle, &info, block_ns);
  if (r == VK_TIMEOUT)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_TIMEOUT,
                      "dev%u: stream value %llu not reached within %llu ns", dev->index,
                      (unsigned long long)value, (unsigned long long)timeout_ns);
  if (r != VK_SUCCESS) {
    if (r == VK_ERROR_DEVICE_LOST)
      dev->lost = true;
    return vkrt_vk_error(dev, r, "vkWaitSemaphores on the stream timeline");
  }
  return VKRT_OK;
}

static void reset_recording_state(struct vkrt_stream *st);

/* Resets `pool` (free: its last submit retired) and begins its command buffer `cmd` for one
 * submit, through `vk`; on failure *what names the call. */
static VkResult reset_and_begin(const struct vkrt_device_table *vk, VkDevice device,
                                VkCommandPool pool, VkCommandBuffer cmd, const char **what) {
  *what = "vkResetCommandPool";
  VkResult r = vk->vkResetCommandPool(device, pool, 0);
  if (r != VK_SUCCESS)
    return r;
  VkCommandBufferBeginInfo begin = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
  };
  *what = "vkBeginCommandBuffer";
  return vk->vkBeginCommandBuffer(cmd, &begin);
}

/* Resets the current slot's pool and begins its command buffer (the slot is free); on
 * failure *what names the call. */
static VkResult begin_slot(struct vkrt_device *dev, const char **what) {
  struct vkrt_stream *st = &dev->stream;
  VkResult r = reset_and_begin(&dev->vk, dev->handle, st->pool[st->current],
                               st->cmd[st->current], what);
  if (r != VK_SUCCESS)
    return r;
  st->recording = true;
  st->used = false;
  reset_recording_state(st);
  return VK_SUCCESS;
}

/* The per-buffer recording state a fresh command buffer starts with. */
static void reset_recording_state(struct vkrt_stream *st) {
  st->fresh = true;
  st->bound_cmd = VK_NULL_HANDLE;
  st->bound_pipeline = VK_NULL_HANDLE;
  st->host_reads = false;
  st->unsynced = 0;
  st->unsynced_unknown = false;
  st->unsynced_stages = 0;
}

/* Capture: the open batch's command buffer, or a new one from the capture's pool, recorded
 * for reuse (no ONE_TIME_SUBMIT: every launch submits it again). */
static vkrt_status capture_recording(struct vkrt_device *dev, VkCommandBuffer *out) {
  struct vkrt_stream_capture *cap = dev->stream.capture;
  if (!cap->open) {
    if (cap->batch_count == cap->batch_cap)
      return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                        "dev%u: graph capture: more than %u submits in one graph", dev->index,
                        cap->batch_cap);
    struct vkrt_stream_batch *b = &cap->batch[cap->batch_count];
    memset(b, 0, sizeof(*b));
    VkCommandBufferAllocateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = cap->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkResult r = dev->vk.vkAllocateCommandBuffers(dev->handle, &info, &b->cmd);
    if (r != VK_SUCCESS) {
      b->cmd = VK_NULL_HANDLE;
      return vkrt_vk_error(dev, r, "vkAllocateCommandBuffers (graph capture)");
    }
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    r = dev->vk.vkBeginCommandBuffer(b->cmd, &begin);
    if (r != VK_SUCCESS)
      return vkrt_vk_error(dev, r, "vkBeginCommandBuffer (graph capture)");
    cap->open = true;
    reset_recording_state(&dev->stream);
  }
  *out = cap->batch[cap->batch_count].cmd;
  return VKRT_OK;
}

/* The current slot's buffer when the submitter thread began it for the caller (true: it is
 * the recording buffer now). A slot still asked for is withdrawn (the caller begins it; the
 * submitter may be inside a vkQueueSubmit that waits for a peer); one being begun is waited
 * for (a pool reset and a begin). */
static bool take_prepared(struct vkrt_stream *st) {
  atomic_int *prep = &st->prep[st->current];
  int p = atomic_load_explicit(prep, memory_order_acquire);
  if (p == VKRT_STREAM_PREP_NONE)
    return false;
  if (p == VKRT_STREAM_PREP_ASKED &&
      atomic_compare_exchange_strong_explicit(prep, &p, VKRT_STREAM_PREP_NONE,
                                              memory_order_acq_rel, memory_order_acquire))
    return false;
  while (p == VKRT_STREAM_PREP_WORKING) {
    vkrt_cpu_relax();
    p = atomic_load_explicit(prep, memory_order_acquire);
  }
  atomic_store_explicit(prep, VKRT_STREAM_PREP_NONE, memory_order_relaxed);
  if (p != VKRT_STREAM_PREP_BEGUN)
    return false;
  st->cmd_value[st->current] = 0; /* retired: the submitter checked before the reset */
  st->recording = true;
  st->used = false;
  st->prepared++;
  reset_recording_state(st);
  return true;
}

/* The buffer being recorded, or a fresh one (waiting for the oldest to retire when the ring
 * is full). */
static vkrt_status recording(struct vkrt_device *dev, VkCommandBuffer *out) {
  *out = VK_NULL_HANDLE;
  struct vkrt_stream *st = &dev->stream;
  if (dev->lost)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_DEVICE_LOST, "dev%u: device lost", dev->index);
  if (st->capture)
    return capture_recording(dev, out);
  if (!st->recording && !take_prepared(st)) {
    if (st->cmd_value[st->current]) { /* the ring is full: wait for the oldest to retire */
      vkrt_status s = wait_value(dev, st->cmd_value[st->current], UINT64_MAX);
      if (s != VKRT_OK)
        return s;
      st->cmd_value[st->current] = 0;
    }
    const char *what;
    VkResult r = begin_slot(dev, &what);
    if (r != VK_SUCCESS)
      return vkrt_vk_error(dev, r, what);
  }
  st->used = true;
  *out = st->cmd[st->current];
  return VKRT_OK;
}

/* After a submit, while the GPU runs it: begin the next buffer if its slot has retired, so
 * the next op records without the pool reset and begin on its round trip (on the H200 a
 * 4-byte vkrt_cmd_fill + vkrt_finish went from ~1.6 to 1.41-1.48 x the raw submit + spin
 * floor; CHANGELOG.md, performance record of 2026-12-03). Never blocks; a failure here leaves the
 * slot for recording() to begin, and report. */
static void begin_next(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  uint64_t retire = st->cmd_value[st->current];
  if (retire) {
    uint64_t reached = 0;
    if (dev->vk.vkGetSemaphoreCounterValue(dev->handle, st->timeline, &reached) != VK_SUCCESS ||
        reached < retire)
      return;
    st->cmd_value[st->current] = 0;
  }
  const char *what;
  if (begin_slot(dev, &what) == VK_SUCCESS)
    st->begun_ahead++;
}

vkrt_status vkrt_stream_cmd(struct vkrt_device *dev, VkCommandBuffer *out) {
  vkrt_status s = recording(dev, out);
  if (s == VKRT_OK) { /* the caller's commands are unknown to the hazard lists: the next
                       * tracked command after a vkrt_stream_barrier waits for them */
    dev->stream.host_reads = true;
    dev->stream.unsynced_unknown = true;
  }
  return s;
}

/* Only compute dispatches and transfers are recorded into the command buffers libvkrt
 * submits, so its barriers name those two stages, not ALL_COMMANDS: on the H200 an
 * ALL_COMMANDS barrier cost every op ~2.45 us more (docs/perf.md, 2026-12-03 run C). */
#define VKRT_STREAM_STAGES (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT)
#define VKRT_STREAM_WRITES (VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)
#define VKRT_STREAM_READS (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT)

/* Every command buffer libvkrt submits ends with this: device writes become visible to
 * every later command on the queue (the second scope is all later commands in submission
 * order), so the first command of the next buffer needs no barrier of its own; and, when a
 * command may have written memory the host reads, to the host once the timeline value is
 * reached. The host stage only when needed: on the H200 a pre-recorded 4-byte fill closed
 * by a host barrier took ~1.9 us longer than closed by the compute/transfer one
 * (CHANGELOG.md, performance record of 2026-12-03). */
static void close_barrier(const struct vkrt_device_table *vk, VkCommandBuffer cmd, bool host) {
  VkMemoryBarrier barrier = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VKRT_STREAM_WRITES,
      .dstAccessMask = VKRT_STREAM_READS | VKRT_STREAM_WRITES |
                       (host ? VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT : 0),
  };
  vk->vkCmdPipelineBarrier(cmd, VKRT_STREAM_STAGES,
                           VKRT_STREAM_STAGES | (host ? VK_PIPELINE_STAGE_HOST_BIT : 0), 0, 1,
                           &barrier, 0, NULL, 0, NULL);
}

void vkrt_stream_close_barrier(struct vkrt_device *dev, VkCommandBuffer cmd, bool host) {
  close_barrier(&dev->vk, cmd, host);
}

/* The first scope names only the stages the commands since the last barrier used: earlier
 * commands are ordered by that barrier already (its second scope names both stages, so the
 * chain holds), and a compute-to-compute barrier need not wait for the copy engine. */
void vkrt_stream_barrier(struct vkrt_device *dev, VkCommandBuffer cmd) {
  struct vkrt_stream *st = &dev->stream;
  VkPipelineStageFlags src = st->unsynced_stages;
  if (st->unsynced_unknown || st->full_barrier_stages || !src)
    src = VKRT_STREAM_STAGES;
  st->unsynced = 0; /* raw callers' own commands after it keep unsynced_unknown */
  st->unsynced_stages = 0;
  if (st->fresh) { /* the previous buffer's closing barrier orders this command */
    st->fresh = false;
    return;
  }
  st->barriers_compute += src == VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  VkMemoryBarrier barrier = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = (src & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT ? VK_ACCESS_SHADER_WRITE_BIT : 0) |
                       (src & VK_PIPELINE_STAGE_TRANSFER_BIT ? VK_ACCESS_TRANSFER_WRITE_BIT : 0),
      .dstAccessMask = VKRT_STREAM_READS | VKRT_STREAM_WRITES,
  };
  dev->vk.vkCmdPipelineBarrier(cmd, src, VKRT_STREAM_STAGES, 0, 1, &barrier, 0, NULL, 0, NULL);
}

void vkrt_stream_note_transfer(struct vkrt_device *dev) {
  dev->stream.unsynced_stages |= VK_PIPELINE_STAGE_TRANSFER_BIT;
}

void vkrt_stream_set_full_barrier_stages(struct vkrt_device *dev, bool full) {
  dev->stream.full_barrier_stages = full;
}

/* Appends (sem, value) to one of the stream's attachment lists. */
static vkrt_status attach(struct vkrt_device *dev, VkSemaphore *sems, uint64_t *values,
                          uint32_t *count, VkSemaphore sem, uint64_t value, const char *what) {
  if (*count == VKRT_STREAM_MAX_SYNC)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL,
                      "dev%u: more than %d %s attached to one submit", dev->index,
                      VKRT_STREAM_MAX_SYNC, what);
  sems[*count] = sem;
  values[(*count)++] = value;
  return VKRT_OK;
}

vkrt_status vkrt_stream_add_wait(struct vkrt_device *dev, VkSemaphore sem, uint64_t value) {
  struct vkrt_stream *st = &dev->stream;
  if (!st->wait_count)
    st->wait_ops = st->pending_ops;
  return attach(dev, st->wait_sem, st->wait_value, &st->wait_count, sem, value, "waits");
}

vkrt_status vkrt_stream_add_signal(struct vkrt_device *dev, VkSemaphore sem, uint64_t value) {
  struct vkrt_stream *st = &dev->stream;
  return attach(dev, st->signal_sem, st->signal_value, &st->signal_count, sem, value, "signals");
}

void vkrt_stream_detach_waits(struct vkrt_device *dev, VkSemaphore sem) {
  struct vkrt_stream *st = &dev->stream;
  for (uint32_t i = 0; i < st->wait_count; i++)
    if (st->wait_sem[i] == sem) {
      st->wait_sem[i] = st->wait_sem[st->wait_count - 1];
      st->wait_value[i] = st->wait_value[st->wait_count - 1];
      st->wait_count--;
      i--;
    }
}

/* One vkQueueSubmit of `n` (at most QUEUE_SUBMIT_MAX) batches under the queue's lock. */
#define QUEUE_SUBMIT_MAX 16
static VkResult queue_submit(struct vkrt_device *dev, const struct vkrt_stream_batch *b,
                             uint32_t n) {
  static const VkPipelineStageFlags stages[VKRT_STREAM_MAX_SYNC] = {
      [0 ... VKRT_STREAM_MAX_SYNC - 1] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT};
  VkTimelineSemaphoreSubmitInfo ts[QUEUE_SUBMIT_MAX];
  VkSubmitInfo si[QUEUE_SUBMIT_MAX];
  VkCommandBuffer cmds[QUEUE_SUBMIT_MAX][2]; /* the tail's, then the stream's */
  for (uint32_t i = 0; i < n; i++) {
    uint32_t c = 0;
    if (b[i].has_tail)
      cmds[i][c++] = b[i].tail_cmd;
    if (b[i].cmd)
      cmds[i][c++] = b[i].cmd;
    ts[i] = (VkTimelineSemaphoreSubmitInfo){
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .waitSemaphoreValueCount = b[i].wait_count,
        .pWaitSemaphoreValues = b[i].wait_value,
        .signalSemaphoreValueCount = b[i].signal_count,
        .pSignalSemaphoreValues = b[i].signal_value};
    si[i] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .pNext = &ts[i],
                           .waitSemaphoreCount = b[i].wait_count,
                           .pWaitSemaphores = b[i].wait_sem,
                           .pWaitDstStageMask = stages,
                           .commandBufferCount = c,
                           .pCommandBuffers = cmds[i],
                           .signalSemaphoreCount = b[i].signal_count,
                           .pSignalSemaphores = b[i].signal_sem};
  }
  pthread_mutex_lock(&dev->compute_queue_lock);
  VkResult r = dev->vk.vkQueueSubmit(dev->compute_queue, n, si, VK_NULL_HANDLE);
  pthread_mutex_unlock(&dev->compute_queue_lock);
  return r;
}

/* A batch of `cmd` (may be NULL) with the attached waits and signals, signalling the stream
 * timeline at `value` first. */
static void fill_batch(const struct vkrt_stream *st, struct vkrt_stream_batch *b,
                       VkCommandBuffer cmd, uint64_t value) {
  b->cmd = cmd;
  b->has_tail = st->tail_pending;
  b->tail_cmd = VK_NULL_HANDLE;
  if (st->tail_pending)
    b->tail = st->tail;
  b->end = false;
  b->begin_slot = 0;
  b->begin_retire = 0;
  b->wait_count = st->wait_count;
  memcpy(b->wait_sem, st->wait_sem, st->wait_count * sizeof(VkSemaphore));
  memcpy(b->wait_value, st->wait_value, st->wait_count * sizeof(uint64_t));
  b->signal_count = st->signal_count + 1;
  b->signal_sem[0] = st->timeline;
  b->signal_value[0] = value;
  memcpy(b->signal_sem + 1, st->signal_sem, st->signal_count * sizeof(VkSemaphore));
  memcpy(b->signal_value + 1, st->signal_value, st->signal_count * sizeof(uint64_t));
}

static bool deferred_pending(struct vkrt_stream *st) {
  return st->submitter_started &&
         atomic_load(&st->defer_head) != atomic_load_explicit(&st->defer_tail, memory_order_relaxed);
}

/* The idle time before a batch came, into the submitter's moving mean (1/8 weight). */
static bool caught(struct vkrt_stream *st, atomic_uint_fast64_t *counter, uint64_t idle_ns) {
  int64_t gap = (int64_t)st->submitter_gap_ns;
  st->submitter_gap_ns = (uint64_t)(gap + ((int64_t)idle_ns - gap) / 8);
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
  return true;
}

static bool tail_moved(struct vkrt_stream *st, uint64_t head) {
  return atomic_load_explicit(&st->defer_tail, memory_order_acquire) != head;
}

/* The submitter, out of work (collectives come every few ops during a token; a futex
 * wake-up of a sleeping submitter costs the caller's thread microseconds): on GPUs it spins
 * for twice the recent idle time between batches (VKRT_STREAM_HOT_MIN_NS..HOT_MAX_NS), then
 * polls every VKRT_STREAM_DOZE_NS in a sleep until the stream's spin budget has passed (a
 * batch published meanwhile is found within a poll, and nobody has to wake the thread),
 * then sleeps until a caller wakes it. Before, it spun the whole 2 ms: a core per device
 * busy through a decode. Returns false when stopping with nothing queued. */
static bool await_work(struct vkrt_stream *st, uint64_t head) {
  const uint64_t spin_ns = atomic_load_explicit(&st->spin_ns, memory_order_relaxed);
  if (spin_ns) {
    uint64_t hot = VKRT_MIN(VKRT_MAX(2 * st->submitter_gap_ns, VKRT_STREAM_HOT_MIN_NS),
                            VKRT_MIN(VKRT_STREAM_HOT_MAX_NS, spin_ns));
    uint64_t t0 = now_ns(), t = t0;
    for (uint32_t i = 1; t - t0 < hot; i++) {
      if (tail_moved(st, head))
        return caught(st, &st->caught_spinning, now_ns() - t0);
      if (atomic_load_explicit(&st->submitter_stop, memory_order_relaxed))
        goto sleep;
      vkrt_cpu_relax();
      if (i % 64 == 0)
        t = now_ns();
    }
    while (t - t0 < spin_ns) {
      uint64_t nap = VKRT_MIN(VKRT_STREAM_DOZE_NS, spin_ns - (t - t0));
      struct timespec ts = {.tv_sec = (time_t)(nap / 1000000000ull),
                            .tv_nsec = (long)(nap % 1000000000ull)};
      nanosleep(&ts, NULL);
      t = now_ns();
      if (tail_moved(st, head))
        return caught(st, &st->caught_dozing, t - t0);
      if (atomic_load_explicit(&st->submitter_stop, memory_order_relaxed))
        break;
    }
  }
sleep:
  pthread_mutex_lock(&st->defer_lock);
  /* Sleeping is announced before each look at the tail (both sequentially consistent): a
   * caller that published after that look finds the flag, clears it and wakes this thread;
   * the callers after it find it clear and leave the awake thread alone. */
  for (;;) {
    atomic_store(&st->submitter_sleeping, true);
    if (atomic_load(&st->defer_tail) != head || atomic_load(&st->submitter_stop))
      break;
    pthread_cond_wait(&st->defer_wake, &st->defer_lock);
  }
  atomic_store(&st->submitter_sleeping, false);
  bool work = atomic_load(&st->defer_tail) != head;
  pthread_mutex_unlock(&st->defer_lock);
  if (work)
    caught(st, &st->woken, spin_ns);
  return work;
}

/* The submitter's side of VKRT_STREAM_PREP: claims an asked slot (unless the caller
 * withdrew it), and resets and begins its buffer once the slot has retired. */
static void prepare_slot(struct vkrt_device *dev, uint32_t slot, uint64_t retire) {
  struct vkrt_stream *st = &dev->stream;
  int asked = VKRT_STREAM_PREP_ASKED;
  if (!atomic_compare_exchange_strong_explicit(&st->prep[slot], &asked, VKRT_STREAM_PREP_WORKING,
                                               memory_order_acq_rel, memory_order_relaxed))
    return;
  uint64_t reached = 0;
  bool ok = !retire || (dev->vk.vkGetSemaphoreCounterValue(dev->handle, st->timeline, &reached) ==
                            VK_SUCCESS && reached >= retire);
  const char *what;
  ok = ok && reset_and_begin(&st->submitter_vk, dev->handle, st->pool[slot], st->cmd[slot],
                             &what) == VK_SUCCESS;
  atomic_store_explicit(&st->prep[slot], ok ? VKRT_STREAM_PREP_BEGUN : VKRT_STREAM_PREP_FAILED,
                        memory_order_release);
}

/* Records batch b's tail into the submitter's next command buffer (in turn, so every one
 * of them reaches its size in the first tails), once the batch that used it last has
 * retired (16 tails ago: normally long done). */
static VkResult record_tail(struct vkrt_device *dev, struct vkrt_stream_batch *b,
                            const char **what) {
  struct vkrt_stream *st = &dev->stream;
  const uint32_t i = (uint32_t)(st->tail_next++ % VKRT_STREAM_DEPTH);
  VkResult r = VK_SUCCESS;
  if (st->tail_retire[i]) {
    VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                .semaphoreCount = 1,
                                .pSemaphores = &st->timeline,
                                .pValues = &st->tail_retire[i]};
    *what = "vkWaitSemaphores (a collective tail's command buffer)";
    r = st->submitter_vk.vkWaitSemaphores(dev->handle, &wait, UINT64_MAX);
    if (r != VK_SUCCESS)
      return r;
  }
  r = reset_and_begin(&st->submitter_vk, dev->handle, st->tail_pool[i], st->tail_cmd[i], what);
  if (r != VK_SUCCESS)
    return r;
  /* The batch before ended with vkrt_stream_close_barrier: the tail's first command is
   * ordered after it; its own closing barrier orders the stream's commands after it. */
  b->tail.record(&st->submitter_vk, st->tail_cmd[i], b->tail.data);
  close_barrier(&st->submitter_vk, st->tail_cmd[i], b->tail.host);
  *what = "vkEndCommandBuffer (a collective tail)";
  r = st->submitter_vk.vkEndCommandBuffer(st->tail_cmd[i]);
  if (r == VK_SUCCESS) {
    st->tail_retire[i] = b->signal_value[0];
    b->tail_cmd = st->tail_cmd[i];
    atomic_fetch_add_explicit(&st->tails, 1, memory_order_relaxed);
  }
  return r;
}

static void *submitter_main(void *arg) {
  struct vkrt_device *dev = arg;
  struct vkrt_stream *st = &dev->stream;
  pthread_setname_np(pthread_self(), "vkrt-submit");
  prctl(PR_SET_TIMERSLACK, 1000UL); /* its dozes poll every 50 us, not 50 us + 50 us of slack */
  for (;;) {
    uint64_t head = atomic_load(&st->defer_head);
    uint64_t tail = atomic_load_explicit(&st->defer_tail, memory_order_acquire);
    if (head == tail) {
      if (!await_work(st, head))
        break; /* stopping, and everything queued was submitted */
      continue;
    }
    /* Everything queued, in one vkQueueSubmit (up to the end of the ring). */
    uint32_t first = (uint32_t)(head % VKRT_STREAM_DEPTH);
    uint32_t n = (uint32_t)VKRT_MIN(tail - head, (uint64_t)(VKRT_STREAM_DEPTH - first));
    n = VKRT_MIN(n, (uint32_t)QUEUE_SUBMIT_MAX);
    struct vkrt_stream_batch *b = &st->defer_ring[first];
    for (uint32_t i = 0; i < n; i++) /* before a submit that may wait for a peer */
      if (b[i].begin_slot) {
        prepare_slot(dev, b[i].begin_slot - 1, b[i].begin_retire);
        b[i].begin_slot = 0;
      }
    VkResult r = VK_SUCCESS;
    const char *what = "vkQueueSubmit";
    for (uint32_t i = 0; i < n && r == VK_SUCCESS; i++)
      if (b[i].has_tail)
        r = record_tail(dev, &b[i], &what);
    for (uint32_t i = 0; i < n && r == VK_SUCCESS; i++)
      if (b[i].end) {
        r = st->submitter_vk.vkEndCommandBuffer(b[i].cmd);
        b[i].end = false;
        what = "vkEndCommandBuffer";
      }
    if (r == VK_SUCCESS) {
      what = "vkQueueSubmit";
      r = queue_submit(dev, b, n);
    }
    if (r != VK_SUCCESS) {
      /* Nothing of the batches will signal: signal the stream timeline from the host so no
       * waiter hangs, and make vkrt_wait report why. */
      if (r == VK_ERROR_DEVICE_LOST)
        dev->lost = true;
      int ok = VKRT_OK;
      vkrt_format(st->deferred_message, sizeof(st->deferred_message),
                  "dev%u: deferred %s of stream values %llu..%llu: %s", dev->index, what,
                  (unsigned long long)b[0].signal_value[0],
                  (unsigned long long)b[n - 1].signal_value[0], vkrt_vk_result_str(r));
      atomic_compare_exchange_strong(&st->deferred_error, &ok,
                                     r == VK_ERROR_DEVICE_LOST ? VKRT_ERROR_DEVICE_LOST
                                                               : VKRT_ERROR_VULKAN);
      VkSemaphoreSignalInfo signal = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                      .semaphore = st->timeline,
                                      .value = b[n - 1].signal_value[0]};
      dev->vk.vkSignalSemaphore(dev->handle, &signal);
    }
    pthread_mutex_lock(&st->defer_lock);
    atomic_store(&st->defer_head, head + n);
    pthread_cond_broadcast(&st->defer_space);
    pthread_mutex_unlock(&st->defer_lock);
  }
  return NULL;
}

vkrt_status vkrt_stream_defer_waits(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  for (uint32_t i = 0; i < VKRT_STREAM_DEPTH; i++) {
    vkrt_status s = st->tail_cmd[i] ? VKRT_OK
                                    : create_pool(dev, &st->tail_pool[i], &st->tail_cmd[i],
                                                  "for the collective tails");
    if (s != VKRT_OK)
      return s;
  }
  if (!st->submitter_started) {
    int e = pthread_create(&st->submitter, NULL, submitter_main, dev);
    if (e != 0)
      return vkrt_error(&dev->sys->base, VKRT_ERROR_INTERNAL,
                        "dev%u: cannot start the stream's submitter thread (%d)", dev->index, e);
    st->submitter_started = true;
  }
  st->defer_waits = true;
  return VKRT_OK;
}

bool vkrt_stream_tail_ok(const struct vkrt_device *dev) {
  const struct vkrt_stream *st = &dev->stream;
  return st->defer_waits && !st->capture && !st->tail_pending && !(st->recording && st->used);
}

void vkrt_stream_add_tail(struct vkrt_device *dev, const struct vkrt_stream_tail *tail) {
  dev->stream.tail = *tail;
  dev->stream.tail_pending = true;
}

void vkrt_stream_drain(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  if (!st->submitter_started)
    return;
  pthread_mutex_lock(&st->defer_lock);
  while (atomic_load(&st->defer_head) != atomic_load(&st->defer_tail))
    pthread_cond_wait(&st->defer_space, &st->defer_lock);
  pthread_mutex_unlock(&st->defer_lock);
}

/* Queues b for the submitter (waiting for room: the ring is as deep as the stream's). The
 * caller is the only writer of the tail: no lock unless the ring is full or the submitter
 * sleeps. */
static void defer(struct vkrt_stream *st, const struct vkrt_stream_batch *b) {
  uint64_t tail = atomic_load_explicit(&st->defer_tail, memory_order_relaxed);
  if (tail - atomic_load(&st->defer_head) >= VKRT_STREAM_DEPTH) {
    pthread_mutex_lock(&st->defer_lock);
    while (tail - atomic_load(&st->defer_head) >= VKRT_STREAM_DEPTH)
      pthread_cond_wait(&st->defer_space, &st->defer_lock);
    pthread_mutex_unlock(&st->defer_lock);
  }
  st->defer_ring[tail % VKRT_STREAM_DEPTH] = *b;
  atomic_store(&st->defer_tail, tail + 1); /* publishes the batch; then the flag is read */
  st->deferred++;
  if (atomic_exchange(&st->submitter_sleeping, false)) {
    /* Once the lock was free the submitter is inside pthread_cond_wait: the signal after
     * the unlock wakes it without making it wait for the lock again. */
    pthread_mutex_lock(&st->defer_lock);
    pthread_mutex_unlock(&st->defer_lock);
    pthread_cond_signal(&st->defer_wake);
  }
}

/* Capture: closes the open batch (or makes an empty one) with the attached waits and
 * signals; the stream timeline's value is left for the launch (signal 0). */
static vkrt_status capture_submit(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  struct vkrt_stream_capture *cap = st->capture;
  vkrt_status s = VKRT_OK;
  if (!cap->open && cap->batch_count == cap->batch_cap) {
    s = vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                   "dev%u: graph capture: more than %u submits in one graph", dev->index,
                   cap->batch_cap);
    goto out;
  }
  struct vkrt_stream_batch *b = &cap->batch[cap->batch_count];
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  if (cap->open) {
    cmd = b->cmd;
    vkrt_stream_close_barrier(dev, cmd, st->host_reads);
    cap->open = false;
    VkResult r = dev->vk.vkEndCommandBuffer(cmd);
    if (r != VK_SUCCESS) {
      s = vkrt_vk_error(dev, r, "vkEndCommandBuffer (graph capture)");
      goto out;
    }
  }
  fill_batch(st, b, cmd, 0); /* the timeline value is the launch's */
  cap->batch_count++;
out:
  st->wait_count = 0;
  st->signal_count = 0;
  return s;
}

bool vkrt_stream_pending(const struct vkrt_device *dev) {
  const struct vkrt_stream *st = &dev->stream;
  return (st->recording && st->used) || st->wait_count || st->signal_count || st->tail_pending;
}

vkrt_status vkrt_stream_capture_begin(struct vkrt_device *dev, struct vkrt_stream_capture *cap) {
  struct vkrt_stream *st = &dev->stream;
  if (vkrt_stream_pending(dev)) {
    vkrt_status s = vkrt_stream_submit(dev, NULL);
    if (s != VKRT_OK)
      return s;
  }
  cap->open = false;
  st->capture = cap;
  return VKRT_OK;
}

vkrt_status vkrt_stream_capture_end(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  vkrt_status s = VKRT_OK;
  if (st->capture && (st->capture->open || st->wait_count || st->signal_count))
    s = capture_submit(dev);
  st->capture = NULL;
  /* the ring's buffer begun ahead holds no command: it starts as fresh as it began */
  reset_recording_state(st);
  return s;
}

uint64_t vkrt_stream_done(struct vkrt_device *dev) {
  uint64_t done = 0;
  return dev->vk.vkGetSemaphoreCounterValue(dev->handle, dev->stream.timeline, &done) ==
                 VK_SUCCESS
             ? done
             : UINT64_MAX;
}

void vkrt_stream_note_use(struct vkrt_device *dev, const struct vkrt_buffer *b) {
  const struct vkrt_stream *st = &dev->stream;
  if (b && !st->capture) /* the recording's submit, or the last one when nothing is pending */
    vkrt_buffer_note_use(b, st->submitted + ((st->recording && st->used) || st->tail_pending));
}

void vkrt_stream_capture_use(struct vkrt_device *dev, const struct vkrt_buffer *b) {
  struct vkrt_stream_capture *cap = dev->stream.capture;
  if (!cap || !b)
    return;
  for (uint32_t i = cap->buffer_count; i-- > 0;)
    if (cap->buffers[i] == b && cap->buffer_ids[i] == b->id)
      return;
  if (cap->buffer_count == cap->buffer_cap) {
    cap->overflow = true;
    return;
  }
  cap->buffers[cap->buffer_count] = b;
  cap->buffer_ids[cap->buffer_count++] = b->id;
}

vkrt_status vkrt_stream_submit_captured(struct vkrt_device *dev, struct vkrt_stream_batch *b,
                                        const struct vkrt_stream_batch *captured, uint32_t count,
                                        uint64_t shift, uint64_t *out_value) {
  struct vkrt_stream *st = &dev->stream;
  *out_value = 0;
  if (dev->lost)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_DEVICE_LOST, "dev%u: device lost", dev->index);
  bool attached = false;
  for (uint32_t i = 0; i < count; i++) {
    const struct vkrt_stream_batch *c = &captured[i];
    for (uint32_t w = 0; w < c->wait_count; w++)
      b[i].wait_value[w] = c->wait_value[w] + shift;
    b[i].signal_value[0] = st->submitted + 1 + i;
    for (uint32_t g = 1; g < c->signal_count; g++)
      b[i].signal_value[g] = c->signal_value[g] + shift;
    attached |= c->wait_count || c->signal_count > 1;
  }
  if (st->defer_waits && (attached || deferred_pending(st))) {
    for (uint32_t i = 0; i < count; i++)
      defer(st, &b[i]);
  } else {
    for (uint32_t first = 0; first < count; first += QUEUE_SUBMIT_MAX) {
      VkResult r = queue_submit(dev, b + first, VKRT_MIN(QUEUE_SUBMIT_MAX, count - first));
      if (r != VK_SUCCESS) {
        if (r == VK_ERROR_DEVICE_LOST)
          dev->lost = true;
        st->submitted += first; /* the calls before went through */
        return vkrt_vk_error(dev, r, "vkQueueSubmit (graph launch)");
      }
    }
  }
  st->submitted += count;
  *out_value = st->submitted;
  return VKRT_OK;
}

vkrt_status vkrt_stream_submit(struct vkrt_device *dev, uint64_t *out_value) {
  struct vkrt_stream *st = &dev->stream;
  if (out_value)
    *out_value = 0;
  if (st->capture)
    return capture_submit(dev);
  vkrt_status s = VKRT_OK;
  uint32_t slot = st->current;
  bool has_cmd = st->recording && st->used; /* a buffer begun ahead and unused stays begun */
  /* A collective's submit (and those queued behind one) goes to the submitter thread, which
   * also ends the command buffer: vkEndCommandBuffer is off the caller's thread too. */
  bool deferred = st->defer_waits && (st->wait_count || st->signal_count || st->tail_pending ||
                                      deferred_pending(st));
  if (has_cmd) {
    vkrt_stream_close_barrier(dev, st->cmd[slot], st->host_reads);
    st->host_closes += st->host_reads;
    st->recording = false;
    VkResult r = deferred ? VK_SUCCESS : dev->vk.vkEndCommandBuffer(st->cmd[slot]);
    if (r != VK_SUCCESS) {
      s = vkrt_vk_error(dev, r, "vkEndCommandBuffer");
      goto out;
    }
  }
  if (vkrt_fault(dev, VKRT_FAULT_DEVICE_LOST)) {
    dev->lost = true;
    s = vkrt_error(&dev->sys->base, VKRT_ERROR_DEVICE_LOST,
                   "dev%u: vkQueueSubmit: VK_ERROR_DEVICE_LOST (injected)", dev->index);
    goto out;
  }
  if (dev->lost) {
    s = vkrt_error(&dev->sys->base, VKRT_ERROR_DEVICE_LOST, "dev%u: device lost", dev->index);
    goto out;
  }

  uint64_t value = st->submitted + 1;
  struct vkrt_stream_batch b;
  fill_batch(st, &b, has_cmd ? st->cmd[slot] : VK_NULL_HANDLE, value);
  if (deferred) {
    b.end = has_cmd;
    /* the slot after the next one, begun by the submitter before it submits this */
    uint32_t ahead = (slot + 2) % VKRT_STREAM_DEPTH;
    if (has_cmd && atomic_load_explicit(&st->prep[ahead], memory_order_relaxed) ==
                       VKRT_STREAM_PREP_NONE) {
      atomic_store_explicit(&st->prep[ahead], VKRT_STREAM_PREP_ASKED, memory_order_relaxed);
      b.begin_slot = ahead + 1; /* published with the batch */
      b.begin_retire = st->cmd_value[ahead];
    }
    defer(st, &b);
  } else {
    VkResult r = queue_submit(dev, &b, 1);
    if (r != VK_SUCCESS) {
      if (r == VK_ERROR_DEVICE_LOST)
        dev->lost = true;
      s = vkrt_vk_error(dev, r, "vkQueueSubmit");
      goto out;
    }
  }
  st->submitted = value;
  st->pending_ops = 0;
  st->pending_bytes = 0;
  st->flush_at = VKRT_STREAM_FLUSH_FIRST; /* a flush raises it again after this returns */
  if (has_cmd) {
    st->cmd_value[slot] = value;
    st->current = (slot + 1) % VKRT_STREAM_DEPTH;
    if (!take_prepared(st))
      begin_next(dev);
  }
  if (out_value)
    *out_value = value;
out:
  /* Attached waits/signals (and the tail) belong to this submit whether or not it went
   * through. */
  st->wait_count = 0;
  st->signal_count = 0;
  st->tail_pending = false;
  return s;
}

vkrt_status vkrt_stream_wait(struct vkrt_device *dev, uint64_t value, uint64_t timeout_ns) {
  if (value > dev->stream.submitted)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: waiting for stream value %llu, but only %llu were submitted",
                      dev->index, (unsigned long long)value,
                      (unsigned long long)dev->stream.submitted);
  if (value == 0)
    return VKRT_OK;
  vkrt_status s = wait_value(dev, value, timeout_ns);
  int deferred = atomic_load(&dev->stream.deferred_error);
  if (s == VKRT_OK && deferred != VKRT_OK)
    return vkrt_error(&dev->sys->base, (vkrt_status)deferred, "%s",
                      dev->stream.deferred_message);
  return s;
}

/* ---- public stream API ------------------------------------------------------------- */

vkrt_status vkrt_buffer_check_range(const vkrt_buffer *b, uint64_t offset, uint64_t size,
                                    const char *what) {
  uint64_t end;
  if (!vkrt_add_u64(offset, size, &end) || end > b->size)
    return vkrt_error(&b->dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: %s range [%llu, +%llu) is outside the buffer of %llu bytes",
                      b->dev->index, what, (unsigned long long)offset, (unsigned long long)size,
                      (unsigned long long)b->size);
  return VKRT_OK;
}

/* Whether a command touching `access` must wait for the commands since the last barrier:
 * a read of a range one of them wrote, or a write of a range one of them read or wrote. */
static bool hazard(const struct vkrt_stream *st, const struct vkrt_stream_access *access,
                   uint32_t count) {
  if (st->unsynced_unknown || st->unsynced + count > VKRT_STREAM_MAX_ACCESS)
    return true;
  for (uint32_t i = 0; i < count; i++)
    for (uint32_t j = 0; j < st->unsynced; j++) {
      const struct vkrt_stream_access *a = &access[i], *b = &st->unsynced_access[j];
      if (a->buffer == b->buffer && (a->write || b->write) && a->lo < b->hi && b->lo < a->hi)
        return true;
    }
  return false;
}

/* Overlap: submits the piece recorded so far once it holds enough commands or bytes, so the
 * GPU runs it while the host records the next (without it, on the H200, 64 dependent
 * 2048^2 matvecs took 6.66 us per op through vkrt_finish where the GPU needs 4.9). The
 * pieces are consecutive submits on the one queue, each closed by vkrt_stream_close_barrier,
 * so program order holds across them, and the ticket of the next vkrt_submit covers them all.
 * Never while a signal is attached (it belongs to a collective's submit), nor before the
 * first command recorded after a wait was attached (the wait guards that command); waits
 * attached before commands of this piece go with it, as an explicit submit would send them. */
static vkrt_status flush_if_due(struct vkrt_device *dev) {
  struct vkrt_stream *st = &dev->stream;
  if (st->capture || !st->flush_ops || !st->recording || !st->used || st->signal_count ||
      (st->wait_count && st->wait_ops == st->pending_ops) ||
      (st->pending_ops < VKRT_MIN(st->flush_at, st->flush_ops) &&
       st->pending_bytes < VKRT_STREAM_FLUSH_BYTES))
    return VKRT_OK;
  uint32_t next = VKRT_MIN(st->flush_at * 2, st->flush_ops);
  vkrt_status s = vkrt_stream_submit(dev, NULL);
  if (s == VKRT_OK) {
    st->flushes++;
    st->flush_at = next;
  }
  return s;
}

void vkrt_stream_set_flush_ops(struct vkrt_device *dev, uint32_t ops) {
  dev->stream.flush_ops = ops;
}

void vkrt_stream_set_spin_ns(struct vkrt_device *dev, uint64_t spin_ns) {
  atomic_store_explicit(&dev->stream.spin_ns, spin_ns, memory_order_relaxed);
}

uint64_t vkrt_stream_spin_ns(const struct vkrt_device *dev) {
  return atomic_load_explicit(&((struct vkrt_device *)dev)->stream.spin_ns, memory_order_relaxed);
}

/* Independent commands run without a barrier between them, so the GPU overlaps one's
 * drain with the next one's start (the way ggml-vulkan orders a graph): gate and up of a
 * SwiGLU layer, q/k/v projections, the pieces of a collective. */
vkrt_status vkrt_stream_next(struct vkrt_device *dev, const struct vkrt_stream_access *access,
                             uint32_t count, VkCommandBuffer *out) {
  vkrt_status s = flush_if_due(dev);
  if (s == VKRT_OK)
    s = recording(dev, out);
  if (s != VKRT_OK)
    return s;
  struct vkrt_stream *st = &dev->stream;
  st->pending_ops++;
  if (!access || !count || count > VKRT_STREAM_MAX_ACCESS) {
    st->host_reads = true;
    vkrt_stream_barrier(dev, *out);
    st->unsynced_unknown = true;
    return VKRT_OK;
  }
  for (uint32_t i = 0; i < count; i++) {
    if (access[i].write && access[i].buffer->mapped)
      st->host_reads = true;
    st->pending_bytes += access[i].hi - access[i].lo;
    if (st->capture)
      vkrt_stream_capture_use(dev, access[i].buffer); /* a launch notes the use */
    else
      vkrt_buffer_note_use(access[i].buffer, st->submitted + 1); /* this recording's submit */
  }
  if (st->fresh || hazard(st, access, count)) {
    st->barriers += !st->fresh;
    vkrt_stream_barrier(dev, *out);
    st->unsynced_unknown = false;
  } else {
    st->barriers_elided++;
  }
  for (uint32_t i = 0; i < count; i++)
    st->unsynced_access[st->unsynced++] = access[i];
  st->unsynced_stages |= VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  return VKRT_OK;
}

vkrt_status vkrt_stream_next_copy(struct vkrt_device *dev, const struct vkrt_buffer *dst,
                                  uint64_t dst_offset, const struct vkrt_buffer *src,
                                  uint64_t src_offset, uint64_t size, VkCommandBuffer *out) {
  struct vkrt_stream_access access[2] = {{src, src_offset, src_offset + size, false},
                                         {dst, dst_offset, dst_offset + size, true}};
  return vkrt_stream_next(dev, access, 2, out);
}
