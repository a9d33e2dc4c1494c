/* Uploads and downloads: per-device upload contexts (command buffers, a timeline semaphore,
 * a staging ring), DMA straight from registered chunks (split per chunk), and the staging
 * ring for everything else. Nothing here allocates: contexts are made at open. */
#include <inttypes.h>
#include <string.h>

#include "import/import.h"

#define UPLOAD_TIMEOUT_NS (60ull * 1000000000ull)
#define COPY_BATCH 32 /* VkBufferCopy regions recorded per vkCmdCopyBuffer */

/* ---- contexts -------------------------------------------------------------------------- */

static void context_destroy(struct vkrt_device *dev, struct vkrt_upload_context *ctx) {
  if (ctx->timeline && ctx->value) {
    VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                .semaphoreCount = 1,
                                .pSemaphores = &ctx->timeline,
                                .pValues = &ctx->value};
    dev->vk.vkWaitSemaphores(dev->handle, &wait, UPLOAD_TIMEOUT_NS);
  }
  vkrt_timeline_destroy(dev, ctx->timeline);
  if (ctx->pool)
    dev->vk.vkDestroyCommandPool(dev->handle, ctx->pool, &dev->sys->vk_allocator); /* frees its buffers */
  vkrt_buffer_destroy(ctx->staging);
  memset(ctx, 0, sizeof(*ctx));
}

static vkrt_status context_create(struct vkrt_upload_state *st, struct vkrt_upload_context *ctx) {
  struct vkrt_device *dev = st->dev;
  memset(ctx, 0, sizeof(*ctx));
  VkCommandPoolCreateInfo pool_info = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT |
               VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
      .queueFamilyIndex = dev->transfer_family,
  };
  VkResult r = dev->vk.vkCreateCommandPool(dev->handle, &pool_info, &dev->sys->vk_allocator, &ctx->pool);
  if (r != VK_SUCCESS) {
    ctx->pool = VK_NULL_HANDLE;
    return vkrt_vk_error(dev, r, "upload: vkCreateCommandPool");
  }
  VkCommandBuffer cmds[VKRT_UPLOAD_MAX_SLOTS + 1];
  VkCommandBufferAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = ctx->pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = st->slots + 1,
  };
  r = dev->vk.vkAllocateCommandBuffers(dev->handle, &alloc, cmds);
  if (r != VK_SUCCESS) {
    context_destroy(dev, ctx);
    return vkrt_vk_error(dev, r, "upload: vkAllocateCommandBuffers");
  }
  for (uint32_t i = 0; i < st->slots; i++)
    ctx->slot_cmd[i] = cmds[i];
  ctx->direct_cmd = cmds[st->slots];
  vkrt_status s = vkrt_timeline_create(dev, NULL, "upload: timeline vkCreateSemaphore",
                                       &ctx->timeline);
  if (s != VKRT_OK) {
    context_destroy(dev, ctx);
    return s;
  }
  s = vkrt_buffer_create_internal(dev, st->slot_size * st->slots,
                                              VKRT_BUFFER_HOST_VISIBLE, 0, &ctx->staging);
  if (s != VKRT_OK) {
    context_destroy(dev, ctx);
    return s;
  }
  ctx->staging_map = ctx->staging->mapped;
  return VKRT_OK;
}

static void state_destroy(struct vkrt_device *dev) {
  struct vkrt_upload_state *st = dev->upload;
  if (!st)
    return;
  for (uint32_t i = 0; i < st->context_count; i++)
    context_destroy(dev, &st->contexts[i]);
  pthread_mutex_destroy(&st->lock);
  pthread_cond_destroy(&st->cond);
  vkrt_free(&dev->sys->base, st);
  dev->upload = NULL;
}

static vkrt_status state_create(struct vkrt_device *dev, struct vkrt_import_registry *reg) {
  struct vkrt_base *base = &dev->sys->base;
  if (!dev->caps.timeline_semaphore)
    return vkrt_error(base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: uploads need timeline semaphores, which this device lacks",
                      dev->index);
  struct vkrt_upload_state *st = vkrt_calloc(base, 1, sizeof(*st));
  if (!st)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: upload: out of host memory",
                      dev->index);
  st->dev = dev;
  st->registry = reg;
  pthread_mutex_init(&st->lock, NULL);
  pthread_cond_init(&st->cond, NULL);
  st->slot_size = (uint64_t)CONFIG_VKRT_STAGING_SLOT_KB << 10;
  st->slots = VKRT_MIN(CONFIG_VKRT_STAGING_SLOTS, VKRT_UPLOAD_MAX_SLOTS);
  st->queue = dev->transfer_queue;
  st->queue_lock = dev->transfer_lock;
  dev->upload = st;
  for (uint32_t i = 0; i < CONFIG_VKRT_UPLOAD_CONTEXTS; i++) {
    vkrt_status s = context_create(st, &st->contexts[i]);
    if (s != VKRT_OK)
      return s; /* vkrt_upload_close unwinds the contexts made so far */
    st->context_count++;
    st->contexts[i].next_free = st->free_list;
    st->free_list = &st->contexts[i];
  }
  return VKRT_OK;
}

vkrt_status vkrt_upload_open(struct vkrt_system *sys, struct vkrt_import_registry *reg) {
  vkrt_status s = VKRT_OK;
  for (uint32_t d = 0; s == VKRT_OK && d < sys->device_count; d++)
    s = state_create(&sys->devices[d], reg);
  if (s != VKRT_OK) {
    vkrt_upload_close(sys);
    return s;
  }
  vkrt_log(&sys->base, VKRT_LOG_DEBUG, "upload: %d context(s) per device, staging ring %d x %d KiB",
           CONFIG_VKRT_UPLOAD_CONTEXTS, CONFIG_VKRT_STAGING_SLOTS, CONFIG_VKRT_STAGING_SLOT_KB);
  return VKRT_OK;
}

void vkrt_upload_close(struct vkrt_system *sys) {
  for (uint32_t d = 0; d < sys->device_count; d++)
    state_destroy(&sys->devices[d]);
}

static struct vkrt_upload_context *context_take(struct vkrt_upload_state *st) {
  pthread_mutex_lock(&st->lock);
  while (!st->free_list)
    pthread_cond_wait(&st->cond, &st->lock);
  struct vkrt_upload_context *ctx = st->free_list;
  st->free_list = ctx->next_free;
  pthread_mutex_unlock(&st->lock);
  return ctx;
}

static void context_give(struct vkrt_upload_state *st, struct vkrt_upload_context *ctx) {
  pthread_mutex_lock(&st->lock);
  ctx->next_free = st->free_list;
  st->free_list = ctx;
  pthread_cond_signal(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

/* ---- submit / wait --------------------------------------------------------------------- */

static vkrt_status ctx_submit(struct vkrt_upload_state *st, struct vkrt_upload_context *ctx,
                              VkCommandBuffer cmd, uint64_t *out_value) {
  struct vkrt_device *dev = st->dev;
  /* the stream's buffers start without a barrier: this queue may be the stream's */
  vkrt_stream_close_barrier(dev, cmd, true); /* downloads: the host reads the slot */
  VkResult r = dev->vk.vkEndCommandBuffer(cmd);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "upload: vkEndCommandBuffer");
  if (dev->lost || vkrt_fault(dev, VKRT_FAULT_DEVICE_LOST))
    return vkrt_vk_error(dev, VK_ERROR_DEVICE_LOST, "upload: vkQueueSubmit");
  const uint64_t value = ctx->value + 1;
  VkTimelineSemaphoreSubmitInfo timeline = {
      .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
      .signalSemaphoreValueCount = 1,
      .pSignalSemaphoreValues = &value,
  };
  VkSubmitInfo submit = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .pNext = &timeline,
      .commandBufferCount = 1,
      .pCommandBuffers = &cmd,
      .signalSemaphoreCount = 1,
      .pSignalSemaphores = &ctx->timeline,
  };
  pthread_mutex_lock(st->queue_lock);
  r = dev->vk.vkQueueSubmit(st->queue, 1, &submit, VK_NULL_HANDLE);
  pthread_mutex_unlock(st->queue_lock);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "upload: vkQueueSubmit");
  ctx->value = value;
  *out_value = value;
  return VKRT_OK;
}

static vkrt_status ctx_wait(struct vkrt_upload_state *st, struct vkrt_upload_context *ctx,
                            uint64_t value) {
  if (value == 0)
    return VKRT_OK;
  struct vkrt_device *dev = st->dev;
  VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &ctx->timeline,
                              .pValues = &value};
  VkResult r = dev->vk.vkWaitSemaphores(dev->handle, &wait, UPLOAD_TIMEOUT_NS);
  if (r == VK_TIMEOUT)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_TIMEOUT,
                      "dev%u: upload copy did not complete within %llu s", dev->index,
                      UPLOAD_TIMEOUT_NS / 1000000000ull);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "upload: vkWaitSemaphores");
  return VKRT_OK;
}

static vkrt_status cmd_begin(struct vkrt_device *dev, VkCommandBuffer cmd) {
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult r = dev->vk.vkBeginCommandBuffer(cmd, &begin); /* resets it (pool flag) */
  return r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(dev, r, "upload: vkBeginCommandBuffer");
}

/* ---- staging ring: host -> slot -> buffer ---------------------------------------------- */

/* Fills slots in turn; a slot is reused only once the copy recorded from it retired, so
 * the memcpy into slot i+1 overlaps the DMA out of slot i. */
struct stager {
  struct vkrt_import_registry *reg; /* counters; NULL: not counted (downloads) */
  struct vkrt_upload_state *st;
  struct vkrt_copy_pool *pool;
  struct vkrt_upload_context *ctx;
  VkBuffer dst;
  uint32_t slot;
  uint64_t used;
  bool open;
  VkBufferCopy batch[COPY_BATCH];
  uint32_t batch_count;
};

static void stager_flush_batch(struct stager *sg) {
  if (!sg->batch_count)
    return;
  sg->st->dev->vk.vkCmdCopyBuffer(sg->ctx->slot_cmd[sg->slot], sg->ctx->staging->handle, sg->dst,
                                  sg->batch_count, sg->batch);
  sg->batch_count = 0;
}

static vkrt_status stager_submit(struct stager *sg) {
  stager_flush_batch(sg);
  uint64_t value;
  vkrt_status s = ctx_submit(sg->st, sg->ctx, sg->ctx->slot_cmd[sg->slot], &value);
  sg->open = false;
  if (s != VKRT_OK)
    return s;
  sg->ctx->slot_value[sg->slot] = value;
  sg->slot = (sg->slot + 1) % sg->st->slots;
  return VKRT_OK;
}

/* Makes the current slot recordable: waits until the copy last recorded from it retired. */
static vkrt_status stager_open(struct stager *sg) {
  if (sg->open)
    return VKRT_OK;
  vkrt_status s = ctx_wait(sg->st, sg->ctx, sg->ctx->slot_value[sg->slot]);
  if (s == VKRT_OK)
    s = cmd_begin(sg->st->dev, sg->ctx->slot_cmd[sg->slot]);
  if (s != VKRT_OK)
    return s;
  sg->open = true;
  sg->used = 0;
  return VKRT_OK;
}

/* Records a copy of n staged bytes (ring offset staging_offset) to dst_offset. */
static void stager_record(struct stager *sg, uint64_t staging_offset, uint64_t dst_offset,
                          uint64_t n) {
  if (sg->reg) {
    atomic_fetch_add(&sg->reg->path_bytes[VKRT_IMPORT_PATH_STAGED], n);
    atomic_fetch_add(&sg->reg->path_copies[VKRT_IMPORT_PATH_STAGED], 1);
  }
  VkBufferCopy *last = sg->batch_count ? &sg->batch[sg->batch_count - 1] : NULL;
  if (last && last->srcOffset + last->size == staging_offset &&
      last->dstOffset + last->size == dst_offset) {
    last->size += n; /* contiguous in both: one region */
  } else {
    if (sg->batch_count == COPY_BATCH)
      stager_flush_batch(sg);
    sg->batch[sg->batch_count++] =
        (VkBufferCopy){.srcOffset = staging_offset, .dstOffset = dst_offset, .size = n};
  }
}

static vkrt_status stager_put(struct stager *sg, uint64_t dst_offset, const uint8_t *src,
                              uint64_t len) {
  struct vkrt_upload_state *st = sg->st;
  while (len) {
    vkrt_status s = stager_open(sg);
    if (s != VKRT_OK)
      return s;
    if (sg->used == st->slot_size) {
      s = stager_submit(sg);
      if (s != VKRT_OK)
        return s;
      continue;
    }
    uint64_t n = VKRT_MIN(len, st->slot_size - sg->used);
    uint64_t staging_offset = (uint64_t)sg->slot * st->slot_size + sg->used;
    vkrt_copy_pool_memcpy(sg->pool, sg->ctx->staging_map + staging_offset, src, n);
    stager_record(sg, staging_offset, dst_offset, n);
    sg->used += n;
    src += n;
    dst_offset += n;
    len -= n;
  }
  return VKRT_OK;
}

static vkrt_status stager_finish(struct stager *sg, vkrt_status s) {
  if (s == VKRT_OK && sg->open)
    s = stager_submit(sg);
  else if (sg->open) {
    /* Error mid-recording: end the command buffer so it can be reset next time. */
    sg->st->dev->vk.vkEndCommandBuffer(sg->ctx->slot_cmd[sg->slot]);
    sg->open = false;
  }
  vkrt_status w = ctx_wait(sg->st, sg->ctx, sg->ctx->value);
  return s != VKRT_OK ? s : w;
}

/* ---- direct: registered chunk buffers -> buffer ---------------------------------------- */

struct direct {
  struct vkrt_import_registry *reg;
  struct vkrt_upload_state *st;
  VkCommandBuffer cmd;
  const struct vkrt_region *region;
  const struct vkrt_region_device *rd;
  VkBuffer dst;
  uint32_t batch_chunk;
  VkBufferCopy batch[COPY_BATCH];
  uint32_t batch_count;
};

static void direct_flush(struct direct *dc) {
  if (!dc->batch_count)
    return;
  dc->st->dev->vk.vkCmdCopyBuffer(dc->cmd, dc->rd->buffers[dc->batch_chunk], dc->dst,
                                  dc->batch_count, dc->batch);
  dc->batch_count = 0;
}

/* Records [offset, offset + len) of the region into dst at dst_offset, one region per
 * chunk it touches: a straddling copy is split, never read past a chunk's buffer. */
static void direct_put(struct direct *dc, uint64_t offset, uint64_t dst_offset, uint64_t len) {
  const struct vkrt_region_device *rd = dc->rd;
  uint32_t k = vkrt_chunk_find(rd->chunks, rd->chunk_count, offset);
  const uint32_t first = k;
  while (len) {
    const struct vkrt_chunk *c = &rd->chunks[k];
    uint64_t n = VKRT_MIN(len, c->end - offset);
    uint64_t src_offset = rd->host_base + offset - c->import_addr;
    /* The copy's source must stay inside the chunk's buffer [0, import_size); counted, so
     * a test sees a violation where no validation layer runs. */
    if (rd->host_base + offset < c->import_addr || src_offset + n > c->import_size)
      atomic_fetch_add(&dc->reg->copies_past_chunk, 1);
    atomic_fetch_add(&dc->reg->path_bytes[rd->path], n);
    atomic_fetch_add(&dc->reg->path_copies[rd->path], 1);
    if (dc->batch_count && (dc->batch_chunk != k || dc->batch_count == COPY_BATCH))
      direct_flush(dc);
    dc->batch_chunk = k;
    dc->batch[dc->batch_count++] =
        (VkBufferCopy){.srcOffset = src_offset, .dstOffset = dst_offset, .size = n};
    offset += n;
    dst_offset += n;
    len -= n;
    k++;
  }
  if (k - first > 1)
    atomic_fetch_add(&dc->reg->straddles_split, 1);
}

/* ---- public entry points --------------------------------------------------------------- */

struct copy2d {
  uint64_t dst_offset, dst_pitch, src_pitch, width, height;
  const uint8_t *src;
};

static vkrt_status upload_rows(vkrt_buffer *dst, const struct copy2d *c, const char *what) {
  struct vkrt_device *dev = dst->dev;
  struct vkrt_system *sys = dev->sys;
  struct vkrt_upload_state *st = dev->upload;
  if (!st)
    return vkrt_error(&sys->base, VKRT_ERROR_INTERNAL, "dev%u: %s: upload module not open",
                      dev->index, what);
  if (dst->mapped) {
    /* Host-visible (coherent) destination: the CPU writes it directly, no queue work. */
    for (uint64_t row = 0; row < c->height; row++)
      vkrt_copy_pool_memcpy(&st->registry->copy_pool,
                            (uint8_t *)dst->mapped + c->dst_offset + row * c->dst_pitch,
                            c->src + row * c->src_pitch, c->width);
    return VKRT_OK;
  }
  /* Source span: first byte of row 0 to last byte of the last row. */
  const uint64_t span = (c->height - 1) * c->src_pitch + c->width;
  struct vkrt_region *region = vkrt_region_acquire(st->registry, dev->index, c->src, span);
  struct vkrt_upload_context *ctx = context_take(st);
  vkrt_status s;
  if (region) {
    struct direct dc = {.reg = st->registry, .st = st, .cmd = ctx->direct_cmd, .region = region,
                        .rd = &region->dev[dev->index], .dst = dst->handle};
    /* direct_cmd is free once everything this context submitted retired (it always has,
     * unless an earlier wait timed out). */
    s = ctx_wait(st, ctx, ctx->value);
    if (s == VKRT_OK)
      s = cmd_begin(dev, dc.cmd);
    if (s == VKRT_OK) {
      const uint64_t base_offset = (uint64_t)(c->src - region->ptr);
      for (uint64_t row = 0; row < c->height; row++)
        direct_put(&dc, base_offset + row * c->src_pitch, c->dst_offset + row * c->dst_pitch,
                   c->width);
      direct_flush(&dc);
      uint64_t value = 0;
      s = ctx_submit(st, ctx, dc.cmd, &value);
      if (s == VKRT_OK)
        s = ctx_wait(st, ctx, value);
    }
  } else {
    struct stager sg = {.reg = st->registry, .st = st, .pool = &st->registry->copy_pool,
                        .ctx = ctx, .dst = dst->handle};
    s = VKRT_OK;
    for (uint64_t row = 0; row < c->height && s == VKRT_OK; row++)
      s = stager_put(&sg, c->dst_offset + row * c->dst_pitch, c->src + row * c->src_pitch,
                     c->width);
    s = stager_finish(&sg, s);
  }
  context_give(st, ctx);
  if (region)
    vkrt_region_release(st->registry, region);
  return s;
}

/* Checks that rows [0, height) of width bytes at pitch from offset fit in limit. */
static bool rows_fit(uint64_t offset, uint64_t pitch, uint64_t width, uint64_t height,
                     uint64_t limit) {
  uint64_t last_row, end;
  return vkrt_mul_u64(height - 1, pitch, &last_row) && vkrt_add_u64(offset, last_row, &end) &&
         vkrt_add_u64(end, width, &end) && end <= limit;
}

vkrt_status vkrt_upload(vkrt_buffer *dst, uint64_t dst_offset, const void *src, uint64_t size) {
  if (!dst)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_base *base = &dst->dev->sys->base;
  if (size == 0)
    return VKRT_OK;
  if (!src)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "upload: NULL source");
  if (!rows_fit(dst_offset, 0, size, 1, dst->size))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "upload: [%" PRIu64 ", +%" PRIu64 ") is outside the %" PRIu64
                      "-byte buffer on dev%u", dst_offset, size, dst->size, dst->dev->index);
  if (!rows_fit((uint64_t)(uintptr_t)src, 0, size, 1, UINT64_MAX))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "upload: source %p + %" PRIu64
                      " wraps the address space", src, size);
  struct copy2d c = {.dst_offset = dst_offset, .width = size, .height = 1, .src = src};
  return upload_rows(dst, &c, "upload");
}

vkrt_status vkrt_upload_2d(vkrt_buffer *dst, uint64_t dst_offset, uint64_t dst_pitch,
                           const void *src, uint64_t src_pitch, uint64_t width, uint64_t height) {
  if (!dst)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_base *base = &dst->dev->sys->base;
  if (width == 0 || height == 0)
    return VKRT_OK;
  if (!src)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "upload_2d: NULL source");
  if (height > 1 && (dst_pitch < width || src_pitch < width))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "upload_2d: pitches (dst %" PRIu64 ", src %" PRIu64
                      ") must be at least the row width %" PRIu64, dst_pitch, src_pitch, width);
  if (!rows_fit(dst_offset, dst_pitch, width, height, dst->size))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "upload_2d: %" PRIu64 " rows of %" PRIu64 " bytes at pitch %" PRIu64
                      " from offset %" PRIu64 " are outside the %" PRIu64 "-byte buffer on dev%u",
                      height, width, dst_pitch, dst_offset, dst->size, dst->dev->index);
  if (!rows_fit((uint64_t)(uintptr_t)src, src_pitch, width, height, UINT64_MAX))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "upload_2d: source rows wrap the address space");
  struct copy2d c = {.dst_offset = dst_offset, .dst_pitch = dst_pitch, .src_pitch = src_pitch,
                     .width = width, .height = height, .src = src};
  return upload_rows(dst, &c, "upload_2d");
}

vkrt_status vkrt_download(void *dst, vkrt_buffer *src, uint64_t src_offset, uint64_t size) {
  if (!src)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = src->dev;
  struct vkrt_base *base = &dev->sys->base;
  if (size == 0)
    return VKRT_OK;
  if (!dst)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "download: NULL destination");
  if (!rows_fit(src_offset, 0, size, 1, src->size))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "download: [%" PRIu64 ", +%" PRIu64 ") is outside the %" PRIu64
                      "-byte buffer on dev%u", src_offset, size, src->size, dev->index);
  struct vkrt_upload_state *st = dev->upload;
  if (!st)
    return vkrt_error(base, VKRT_ERROR_INTERNAL, "dev%u: download: upload module not open",
                      dev->index);
  struct vkrt_copy_pool *pool = &st->registry->copy_pool;
  if (src->mapped) {
    /* Host-visible (coherent) source: read it directly. */
    vkrt_copy_pool_memcpy(pool, dst, (const uint8_t *)src->mapped + src_offset, size);
    return VKRT_OK;
  }
  struct vkrt_upload_context *ctx = context_take(st);
  uint8_t *out = dst;
  const uint64_t slices = (size + st->slot_size - 1) / st->slot_size;
  vkrt_status s = VKRT_OK;
  /* Slice i goes through slot i % slots; its memcpy out happens once slice i + slots is
   * about to reuse the slot (or at the end), so DMA and memcpy overlap. */
  uint64_t next_out = 0; /* first slice not yet copied out */
  for (uint64_t i = 0; i < slices && s == VKRT_OK; i++) {
    const uint32_t slot = (uint32_t)(i % st->slots);
    if (i >= st->slots) {
      const uint64_t j = i - st->slots;
      s = ctx_wait(st, ctx, ctx->slot_value[slot]);
      if (s != VKRT_OK)
        break;
      vkrt_copy_pool_memcpy(pool, out + j * st->slot_size,
                            ctx->staging_map + (uint64_t)slot * st->slot_size,
                            VKRT_MIN(st->slot_size, size - j * st->slot_size));
      next_out = j + 1;
    }
    VkCommandBuffer cmd = ctx->slot_cmd[slot];
    s = cmd_begin(dev, cmd);
    if (s != VKRT_OK)
      break;
    VkBufferCopy region = {.srcOffset = src_offset + i * st->slot_size,
                           .dstOffset = (uint64_t)slot * st->slot_size,
                           .size = VKRT_MIN(st->slot_size, size - i * st->slot_size)};
    dev->vk.vkCmdCopyBuffer(cmd, src->handle, ctx->staging->handle, 1, &region);
    /* The host reads the slot after the semaphore wait: make the transfer write visible. */
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    dev->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                                 0, 1, &barrier, 0, NULL, 0, NULL);
    s = ctx_submit(st, ctx, cmd, &ctx->slot_value[slot]);
  }
  for (uint64_t j = next_out; j < slices && s == VKRT_OK; j++) {
    const uint32_t slot = (uint32_t)(j % st->slots);
    s = ctx_wait(st, ctx, ctx->slot_value[slot]);
    if (s == VKRT_OK)
      vkrt_copy_pool_memcpy(pool, out + j * st->slot_size,
                            ctx->staging_map + (uint64_t)slot * st->slot_size,
                            VKRT_MIN(st->slot_size, size - j * st->slot_size));
  }
  if (s != VKRT_OK)
    ctx_wait(st, ctx, ctx->value); /* leave the context idle for the next user */
  context_give(st, ctx);
  return s;
}
