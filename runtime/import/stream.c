/* File loads through pinned chunks: vkrt_load_file's read, direct and memcpy paths.
 *
 * Plan: the file bytes the ranges need, 4 KiB aligned, merged into extents (gaps up to
 * LOAD_GAP read through), are packed into one stream cut into chunks; each chunk is cut
 * into blocks (one pread, or one memcpy from a mapping, each). Every byte is read once,
 * in file order, however many devices need it.
 *
 * Run: a ring of `slots` chunks of anonymous memory, each imported into every device of the
 * load (the first at setup, the others by all the threads at once as they start; a device
 * that cannot import gets host-visible chunks of its own, filled by a memcpy after each
 * read). Reader threads take blocks in order, from any chunk whose slot
 * is free (the chunk `slots` before it retired on every device), so chunk i + 1 is read
 * while chunk i is DMA'd and no reader waits for another. The calling thread records every
 * device's copies out of a chunk as soon as its slot is free, ahead of the chunks waiting
 * for their reads; the recording places the narrow rows of strided ranges next to each other
 * in the slot's gather area (one DMA region per range and chunk), and the reader of each
 * block packs the block's narrow rows there right after reading it. Once a chunk's blocks
 * are read (and so packed) the calling thread submits one command buffer per device and
 * reports progress (submit_batch, the knob: a run of chunks in each device's one submission,
 * once the run's last chunk is read). (pack_after_read, the knob, keeps the order this
 * replaced: record the chunk, wait for all its reads, then pack it, the readers helping,
 * then submit; the chunk waited for a packing pass.) One thread waits for the chunks to retire, in
 * order, and wakes whoever waits for their slots: the readers sleep on a condition
 * variable, never in the driver (a driver whose waits spin, as NVIDIA's do, would take a
 * CPU per waiting reader from the readers with work and from the submitting thread). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "import/import.h"
#include "import/load.h"
#include "import/registry.h"

#define LOAD_ALIGN 4096ull          /* O_DIRECT offsets, sizes and addresses */
#define LOAD_GAP (256ull << 10)     /* needed bytes this close are read as one extent */
#define LOAD_BLOCK_PER_CHUNK 8      /* default: a chunk is read in this many blocks ... */
#define LOAD_BLOCK_MAX (4ull << 20) /* ... of at most this many bytes (one pread each) */
#define LOAD_GATHER_BELOW (64ull << 10) /* default: narrower rows are packed by the host */
#define LOAD_GATHER_TASKS 2         /* gather tasks per thread and chunk (each a run of rows) */
#define LOAD_GATHER_PER_KIB 1       /* gather entries per slot: one per KiB of chunk */
#define LOAD_BATCH 256              /* VkBufferCopy regions of a device's first batch; grows */
#define LOAD_MAX_THREADS 32
#define LOAD_HUGE (2ull << 20)      /* the ring is aligned for transparent huge pages */
#define LOAD_TIMEOUT_NS (60ull * 1000000000ull)

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels answer EINVAL, ignored */
#endif

struct extent {
  uint64_t start, end, packed; /* file [start, end) is stream [packed, packed + end - start) */
};

struct block {
  uint64_t file_offset;
  uint32_t size, chunk_offset;
  uint64_t chunk;
};

/* A range being emitted: its next row and column, and the extent holding them. */
struct cursor {
  uint32_t range, ext;
  uint64_t row, col;
};

/* A narrow row (or its part in one block) packed into the slot's gather area: chunk bytes
 * [src, src + size) to gather bytes [dst, ...); next: the block's next one. */
struct gather {
  uint32_t src, dst, size, next;
};

#define GATHER_NONE UINT32_MAX /* the end of a block's gathers */

struct slot {
  atomic_uint_fast64_t remaining; /* blocks of the slot's chunk not yet read (and, packing
                                     while reading, packed) */
  uint64_t value[VKRT_MAX_DEVICES]; /* timeline values of the chunk last submitted from it */
  struct gather *gathers;
  uint32_t *block_gathers;        /* per block of the chunk: its first gather (GATHER_NONE) */
  uint32_t gather_count;
  uint64_t gather_used;           /* bytes of the gather area taken */
  uint64_t bytes;                 /* range bytes recorded from the chunk (progress) */
  uint32_t recorded_mask;         /* devices with copies recorded from the chunk */
  atomic_uint imports_left;       /* devices still importing the slot (0: usable) */
};

struct sdev {
  struct vkrt_device *dev;
  bool in, host_copy;              /* in the load; host-visible chunks of its own */
  VkCommandPool pool;
  VkCommandBuffer cmd[VKRT_LOAD_MAX_CHUNKS];
  VkSemaphore timeline;
  uint64_t value;                  /* last submitted */
  VkBuffer slot_buffer[VKRT_LOAD_MAX_CHUNKS]; /* imports of the shared slots */
  VkDeviceMemory slot_memory[VKRT_LOAD_MAX_CHUNKS];
  struct vkrt_buffer *host_slot[VKRT_LOAD_MAX_CHUNKS]; /* host_copy: its own chunks */
  bool open;                       /* cmd of the chunk being recorded */
  bool pack;                       /* narrow rows packed by the host (else one DMA region
                                      per row, read where the file has it) */
  VkBuffer src, dst;
  uint32_t batch_count, batch_cap;
  VkBufferCopy *batch;             /* the regions of one vkCmdCopyBuffer (one destination) */
};

struct stream {
  struct vkrt_import_registry *reg;
  struct vkrt_system *sys;
  struct vkrt_load_stream *job;
  uint64_t chunk_bytes, gather_bytes, slot_stride, block_bytes, gather_below;
  uint32_t slots, threads;
  uint32_t submit_batch;           /* chunks per submission (at most half the slots) */
  uint32_t block_most;             /* blocks in the chunk that has the most */
  bool pack_after_read;            /* narrow rows packed once the whole chunk is read (else by
                                      each reader, right after its block) */
  struct extent *ext;
  uint64_t ext_count, stream_bytes;
  VkImage *row_image;              /* per range: its row image (VK_NULL_HANDLE: none) */
  uint8_t *row_image_fold;         /* per range: destination rows per image row */
  uint64_t row_image_bytes;
  uint32_t row_images;
  struct block *blocks;
  uint64_t block_count, chunk_count;
  uint64_t *chunk_first;           /* chunk k's blocks: [chunk_first[k], chunk_first[k + 1]) */
  uint32_t *order;                 /* the ranges by file offset */
  struct cursor *active;
  uint32_t active_count, next_range;
  uint32_t next_ext;
  void *ring_map;
  size_t ring_map_size;
  uint8_t *ring;
  struct slot slot[VKRT_LOAD_MAX_CHUNKS];
  struct sdev dev[VKRT_MAX_DEVICES];
  struct vkrt_workers workers;
  /* shared between the threads */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t submitted;              /* chunks submitted, in order (under lock) */
  atomic_uint_fast64_t recorded;   /* chunks whose copies are recorded, in order (set under
                                      lock by the submitter) */
  atomic_uint_fast64_t retired;    /* chunks retired on every device, in order (set under lock) */
  bool finished;                   /* the submitter is done (under lock) */
  uint32_t gather_slot, gather_tasks, gather_next, gather_left; /* under lock */
  uint32_t gather_task_rows; /* gather entries per task (under lock) */
  bool gather_active;              /* under lock */
  atomic_uint_fast64_t next_block;
  atomic_bool abort;
  atomic_int read_errno, vk_result, direct_errno;
  atomic_uint vk_device;
  atomic_uint_fast64_t error_offset, short_at;
  atomic_bool direct_failed;
  /* slot imports after the first: task t is slot 1 + t / import_devices on device
     import_dev[t % import_devices] */
  uint32_t import_tasks, import_devices, import_dev[VKRT_MAX_DEVICES];
  atomic_uint import_next;
  atomic_int import_result;
  atomic_uint import_device;
  atomic_uint_fast64_t read_bytes, read_busy_ns, wait_dma_ns, packed_while_reading;
  /* the submitter's */
  vkrt_status status;
  uint64_t wait_read_ns, copies, gathered, row_regions, chunk_fills, submits, import_ns;
};

/* ---- plan ------------------------------------------------------------------------------- */

static int extent_cmp(const void *a, const void *b) {
  const struct extent *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

struct order_key {
  uint64_t file_offset;
  uint32_t range;
};

static int order_cmp(const void *a, const void *b) {
  const struct order_key *x = a, *y = b;
  if (x->file_offset != y->file_offset)
    return x->file_offset < y->file_offset ? -1 : 1;
  return x->range < y->range ? -1 : x->range > y->range;
}

static uint64_t range_rows(const vkrt_load_range *r) { return r->rows > 1 ? r->rows : 1; }

/* Rows narrower than gather_below, apart in the file and next to each other in the buffer:
 * packed by the host into one DMA region per chunk (no_gather, or a device with host-visible
 * chunks of its own: one region per row). */
static bool narrow_rows(const vkrt_load_range *r, uint64_t gather_below) {
  return range_rows(r) > 1 && r->size < gather_below && r->dst_pitch == r->size &&
         r->file_pitch != r->size;
}

/* A strided range whose rows are far apart is planned row by row (its gaps not read). */
static bool sparse_rows(const vkrt_load_range *r) {
  return range_rows(r) > 1 && r->file_pitch - r->size > LOAD_GAP;
}

static vkrt_status oom(struct stream *st, const char *what) {
  return vkrt_error(&st->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "load %s: out of host memory "
                    "for %s", st->job->name, what);
}

/* The extents: every needed byte, aligned, merged, packed in file order. */
static vkrt_status plan_extents(struct stream *st) {
  const struct vkrt_load_stream *job = st->job;
  uint64_t n = 0;
  for (uint32_t i = 0; i < job->count; i++) {
    const vkrt_load_range *r = &job->ranges[job->order[i]];
    n += sparse_rows(r) ? range_rows(r) : 1;
  }
  st->ext = vkrt_calloc(&st->sys->base, (size_t)n, sizeof(*st->ext));
  if (!st->ext)
    return oom(st, "the extents");
  uint64_t k = 0;
  for (uint32_t i = 0; i < job->count; i++) {
    const vkrt_load_range *r = &job->ranges[job->order[i]];
    const uint64_t rows = range_rows(r);
    const uint64_t pieces = sparse_rows(r) ? rows : 1;
    for (uint64_t y = 0; y < pieces; y++) {
      const uint64_t begin = r->file_offset + y * r->file_pitch;
      const uint64_t end = pieces > 1 || rows == 1 ? begin + r->size
                                                   : r->file_offset + (rows - 1) * r->file_pitch + r->size;
      st->ext[k++] = (struct extent){.start = vkrt_align_down(begin, LOAD_ALIGN),
                                     .end = vkrt_align_up(end, LOAD_ALIGN)};
    }
  }
  qsort(st->ext, (size_t)n, sizeof(*st->ext), extent_cmp);
  uint64_t m = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (m && st->ext[i].start <= st->ext[m - 1].end + LOAD_GAP)
      st->ext[m - 1].end = VKRT_MAX(st->ext[m - 1].end, st->ext[i].end);
    else
      st->ext[m++] = st->ext[i];
  }
  uint64_t packed = 0;
  for (uint64_t i = 0; i < m; i++) {
    st->ext[i].packed = packed;
    packed += st->ext[i].end - st->ext[i].start;
  }
  st->ext_count = m;
  st->stream_bytes = packed;
  return VKRT_OK;
}

/* Blocks: the extents cut at chunk boundaries and every block_bytes. count only when
 * blocks is NULL. */
static uint64_t plan_blocks_fill(const struct stream *st, struct block *blocks) {
  uint64_t n = 0;
  for (uint64_t e = 0; e < st->ext_count; e++) {
    uint64_t pos = st->ext[e].start, p = st->ext[e].packed;
    while (pos < st->ext[e].end) {
      const uint64_t in_chunk = p % st->chunk_bytes;
      const uint64_t len = VKRT_MIN(VKRT_MIN(st->ext[e].end - pos, st->chunk_bytes - in_chunk),
                                    st->block_bytes);
      if (blocks)
        blocks[n] = (struct block){.file_offset = pos, .size = (uint32_t)len,
                                   .chunk_offset = (uint32_t)in_chunk, .chunk = p / st->chunk_bytes};
      n++;
      pos += len;
      p += len;
    }
  }
  return n;
}

static vkrt_status plan_blocks(struct stream *st) {
  st->chunk_count = (st->stream_bytes + st->chunk_bytes - 1) / st->chunk_bytes;
  st->block_count = plan_blocks_fill(st, NULL);
  st->blocks = vkrt_calloc(&st->sys->base, (size_t)st->block_count, sizeof(*st->blocks));
  st->chunk_first = vkrt_calloc(&st->sys->base, (size_t)st->chunk_count + 1, sizeof(uint64_t));
  if (!st->blocks || !st->chunk_first)
    return oom(st, "the blocks");
  plan_blocks_fill(st, st->blocks);
  for (uint64_t b = st->block_count; b-- > 0;)
    st->chunk_first[st->blocks[b].chunk] = b;
  st->chunk_first[st->chunk_count] = st->block_count;
  for (uint64_t k = 0; k < st->chunk_count; k++)
    st->block_most = VKRT_MAX(st->block_most,
                              (uint32_t)(st->chunk_first[k + 1] - st->chunk_first[k]));
  return VKRT_OK;
}

/* ---- threads: blocks, gathers, slot reuse ----------------------------------------------- */

static void wake_all(struct stream *st) {
  pthread_mutex_lock(&st->lock);
  pthread_cond_broadcast(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

/* Sets a count of chunks others wait on (under the lock, so no waiter misses it) and wakes
 * them. */
static void publish(struct stream *st, atomic_uint_fast64_t *chunks, uint64_t value) {
  pthread_mutex_lock(&st->lock);
  atomic_store(chunks, value);
  pthread_cond_broadcast(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

static void fail_read(struct stream *st, int err, uint64_t offset) {
  int zero = 0;
  if (atomic_compare_exchange_strong(&st->read_errno, &zero, err))
    atomic_store(&st->error_offset, offset);
  atomic_store(&st->abort, true);
  wake_all(st);
}

static void fail_vk(struct stream *st, uint32_t d, VkResult r) {
  int zero = 0;
  if (atomic_compare_exchange_strong(&st->vk_result, &zero, (int)r))
    atomic_store(&st->vk_device, d);
  atomic_store(&st->abort, true);
  wake_all(st);
}

/* Takes the next slot import (a slot on one device), if any is left, and makes it. The
 * slots after the first are imported by every thread at once, the readers and the retiring
 * thread first thing, the submitter while it waits for one: pinning fresh memory is most of
 * a load's setup, and one slot after another on the submitter held the first DMAs back. */
static bool import_help(struct stream *st) {
  const uint32_t t = atomic_fetch_add(&st->import_next, 1);
  if (t >= st->import_tasks)
    return false;
  const uint32_t s = 1 + t / st->import_devices, d = st->import_dev[t % st->import_devices];
  struct sdev *sd = &st->dev[d];
  VkResult r = VK_ERROR_UNKNOWN;
  if (!atomic_load(&st->abort))
    r = vkrt_device_import_host_pointer(sd->dev, st->ring + (uint64_t)s * st->slot_stride,
                                        st->slot_stride, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, 0,
                                        &sd->slot_buffer[s], &sd->slot_memory[s]);
  if (r == VK_SUCCESS) {
    atomic_fetch_add(&st->reg->live_chunks, 1);
  } else if (!atomic_load(&st->abort)) {
    int zero = 0;
    if (atomic_compare_exchange_strong(&st->import_result, &zero, (int)r))
      atomic_store(&st->import_device, d);
    atomic_store(&st->abort, true);
  }
  if (atomic_fetch_sub(&st->slot[s].imports_left, 1) == 1 || r != VK_SUCCESS)
    wake_all(st);
  return true;
}

/* Waits until slot s is imported into every device, making imports meanwhile (alone, with
 * no helper threads, it makes them all). false when the load is aborted. */
static bool import_wait(struct stream *st, uint32_t s) {
  while (atomic_load(&st->slot[s].imports_left) && !atomic_load(&st->abort)) {
    if (import_help(st))
      continue;
    pthread_mutex_lock(&st->lock);
    while (atomic_load(&st->slot[s].imports_left) && !atomic_load(&st->abort))
      pthread_cond_wait(&st->cond, &st->lock);
    pthread_mutex_unlock(&st->lock);
  }
  return !atomic_load(&st->abort);
}

/* Packs gather i of slot s: its chunk bytes to their place in the slot's gather area. */
static void gather_copy(struct stream *st, uint32_t s, uint32_t i) {
  uint8_t *base = st->ring + (uint64_t)s * st->slot_stride;
  const struct gather *g = &st->slot[s].gathers[i];
  memcpy(base + st->chunk_bytes + g->dst, base + g->src, g->size);
}

/* Packing after the chunk's reads: runs one gather task when one is open; false when there
 * is none. */
static bool gather_help(struct stream *st) {
  pthread_mutex_lock(&st->lock);
  if (!st->gather_active || st->gather_next == st->gather_tasks) {
    pthread_mutex_unlock(&st->lock);
    return false;
  }
  const uint32_t t = st->gather_next++, per = st->gather_task_rows, s = st->gather_slot;
  const uint32_t end = VKRT_MIN(st->slot[s].gather_count, (t + 1) * per);
  pthread_mutex_unlock(&st->lock);
  for (uint32_t i = t * per; i < end; i++)
    gather_copy(st, s, i);
  pthread_mutex_lock(&st->lock);
  if (--st->gather_left == 0) {
    st->gather_active = false;
    pthread_cond_broadcast(&st->cond);
  }
  pthread_mutex_unlock(&st->lock);
  return true;
}

static bool retire_chunk(struct stream *st, uint64_t k);

/* Waits until chunk k may use its slot: chunk k - slots retired on every device (the
 * retiring thread says so), helping with gathers meanwhile. false when the load is aborted.
 * Without helper threads (none could be started) nobody else retires the chunks: the
 * calling thread, the only one, waits for them itself. */
static bool slot_wait(struct stream *st, uint64_t k) {
  if (k < st->slots || atomic_load(&st->retired) > k - st->slots)
    return true;
  const uint64_t t0 = vkrt_now_ns();
  if (!st->workers.helpers) {
    for (uint64_t r = atomic_load(&st->retired); r <= k - st->slots; r++)
      if (!retire_chunk(st, r))
        break;
    atomic_fetch_add(&st->wait_dma_ns, vkrt_now_ns() - t0);
    return !atomic_load(&st->abort);
  }
  pthread_mutex_lock(&st->lock);
  while (atomic_load(&st->retired) <= k - st->slots && !atomic_load(&st->abort)) {
    if (st->gather_active && st->gather_next < st->gather_tasks) {
      pthread_mutex_unlock(&st->lock);
      gather_help(st);
      pthread_mutex_lock(&st->lock);
      continue;
    }
    pthread_cond_wait(&st->cond, &st->lock);
  }
  pthread_mutex_unlock(&st->lock);
  atomic_fetch_add(&st->wait_dma_ns, vkrt_now_ns() - t0);
  return !atomic_load(&st->abort);
}

/* Waits for submitted chunk k's copies on every device and publishes `retired`; false
 * (the load aborted) when a wait failed. */
static bool retire_chunk(struct stream *st, uint64_t k) {
  uint64_t value[VKRT_MAX_DEVICES];
  pthread_mutex_lock(&st->lock);
  memcpy(value, st->slot[k % st->slots].value, sizeof(value));
  pthread_mutex_unlock(&st->lock);
  for (uint32_t d = 0; d < st->sys->device_count; d++) {
    if (!value[d])
      continue;
    struct vkrt_device *dev = st->dev[d].dev;
    VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                .semaphoreCount = 1,
                                .pSemaphores = &st->dev[d].timeline,
                                .pValues = &value[d]};
    VkResult r = dev->vk.vkWaitSemaphores(dev->handle, &wait, LOAD_TIMEOUT_NS);
    if (r != VK_SUCCESS) {
      fail_vk(st, d, r);
      return false;
    }
  }
  publish(st, &st->retired, k + 1);
  return true;
}

/* The retiring thread: waits for each submitted chunk's copies on every device, in order,
 * and publishes `retired` (the one thread of the load that waits in the driver). */
static void retirer(struct stream *st) {
  while (import_help(st))
    ;
  for (uint64_t k = 0; k < st->chunk_count; k++) {
    pthread_mutex_lock(&st->lock);
    while (st->submitted <= k && !st->finished && !atomic_load(&st->abort))
      pthread_cond_wait(&st->cond, &st->lock);
    const bool go = st->submitted > k && !atomic_load(&st->abort);
    pthread_mutex_unlock(&st->lock);
    if (!go || !retire_chunk(st, k))
      return;
  }
}

/* pread until size bytes are in (or the file ends); returns the bytes read. */
static uint64_t read_file(struct stream *st, uint8_t *dst, uint64_t offset, uint64_t size,
                          int *err) {
  uint64_t got = 0;
  *err = 0;
  while (got < size) {
    const bool direct = st->job->fd_direct >= 0 && !atomic_load(&st->direct_failed);
    ssize_t r = pread(direct ? st->job->fd_direct : st->job->fd, dst + got, (size_t)(size - got),
                      (off_t)(offset + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && direct && (errno == EINVAL || errno == EFAULT)) {
      /* O_DIRECT refused (this file system or this memory): the page cache from here on. */
      int zero = 0;
      atomic_compare_exchange_strong(&st->direct_errno, &zero, errno);
      atomic_store(&st->direct_failed, true);
      continue;
    }
    if (r < 0) {
      *err = errno;
      return got;
    }
    if (r == 0)
      break;
    got += (uint64_t)r;
    if (direct && got % LOAD_ALIGN)
      break; /* a short O_DIRECT read: the end of the file */
  }
  return got;
}

/* memcpy from the mapping, the pages populated first (so a file cut short shows as
 * EFAULT there rather than SIGBUS in the copy, unless it is cut between the two). */
static uint64_t copy_mapped(struct stream *st, uint8_t *dst, uint64_t offset, uint64_t size) {
  const uint64_t file_size = st->job->file_size;
  const uint64_t n = offset < file_size ? VKRT_MIN(size, file_size - offset) : 0;
  if (!n)
    return 0;
  const uint8_t *src = st->job->map + offset;
  const uintptr_t page = (uintptr_t)vkrt_align_down((uintptr_t)src, st->reg->page_size);
  if (madvise((void *)page, (size_t)((uintptr_t)src + n - page), MADV_POPULATE_READ) != 0 &&
      errno == EFAULT)
    return 0;
  memcpy(dst, src, (size_t)n);
  return n;
}

/* Packing while reading: waits until chunk k's copies are recorded, so its blocks' gathers
 * are known when they are read. The submitter records a chunk as soon as its slot is free,
 * ahead of the chunks it submits, so this waits only while it is busy with something else
 * (a submit, a block it reads itself). false when the load is aborted. */
static bool recorded_wait(struct stream *st, uint64_t k) {
  if (st->pack_after_read || atomic_load(&st->recorded) > k)
    return true;
  pthread_mutex_lock(&st->lock);
  while (atomic_load(&st->recorded) <= k && !atomic_load(&st->abort) && !st->finished)
    pthread_cond_wait(&st->cond, &st->lock);
  pthread_mutex_unlock(&st->lock);
  return atomic_load(&st->recorded) > k && !atomic_load(&st->abort);
}

/* Packing while reading: the reader of block b packs the block's narrow rows right after
 * reading it, while they are in its CPU's cache; the chunk is ready for the DMA when its
 * last block is read, with no packing pass between. (Scattering the rows with preadv
 * instead would spare this memcpy on the page-cache path, but not on O_DIRECT, which needs
 * every iovec 4 KiB aligned, nor on the mapped file; nor for bytes that other ranges or a
 * device's own host-visible chunks need in the chunk too.) */
static void pack_block(struct stream *st, uint32_t s, uint64_t b) {
  const struct slot *sl = &st->slot[s];
  if (st->pack_after_read || !sl->block_gathers)
    return;
  uint64_t bytes = 0;
  const uint64_t first = st->chunk_first[st->blocks[b].chunk];
  for (uint32_t i = sl->block_gathers[b - first]; i != GATHER_NONE; i = sl->gathers[i].next) {
    gather_copy(st, s, i);
    bytes += sl->gathers[i].size;
  }
  if (bytes)
    atomic_fetch_add(&st->packed_while_reading, bytes);
}

/* Reads block b into its slot (and the host_copy devices' chunks), packing its narrow rows
 * while reading. */
static void block_run(struct stream *st, uint64_t b) {
  const struct block *blk = &st->blocks[b];
  if (!slot_wait(st, blk->chunk) || !recorded_wait(st, blk->chunk))
    return;
  const uint32_t s = (uint32_t)(blk->chunk % st->slots);
  uint8_t *dst = st->ring + (uint64_t)s * st->slot_stride + blk->chunk_offset;
  const uint64_t t0 = vkrt_now_ns();
  const uint64_t file_size = st->job->file_size;
  const uint64_t need = blk->file_offset < file_size
                            ? VKRT_MIN((uint64_t)blk->size, file_size - blk->file_offset) : 0;
  int err = 0;
  const uint64_t got = st->job->map ? copy_mapped(st, dst, blk->file_offset, blk->size)
                                    : read_file(st, dst, blk->file_offset, blk->size, &err);
  if (err) {
    fail_read(st, err, blk->file_offset + got);
    return;
  }
  if (got < need) {
    uint64_t at = blk->file_offset + got, cur = atomic_load(&st->short_at);
    while (at < cur && !atomic_compare_exchange_weak(&st->short_at, &cur, at)) {
    }
    atomic_store(&st->abort, true);
    wake_all(st);
    return;
  }
  for (uint32_t d = 0; d < st->sys->device_count; d++)
    if (st->dev[d].in && st->dev[d].host_copy)
      memcpy((uint8_t *)st->dev[d].host_slot[s]->mapped + blk->chunk_offset, dst, (size_t)got);
  atomic_fetch_add(&st->read_bytes, blk->size);
  atomic_fetch_add(&st->read_busy_ns, vkrt_now_ns() - t0);
  pack_block(st, s, b);
  if (atomic_fetch_sub(&st->slot[s].remaining, 1) == 1)
    wake_all(st);
}

static void reader(struct stream *st) {
  while (import_help(st))
    ;
  for (;;) {
    if (gather_help(st))
      continue;
    if (atomic_load(&st->abort))
      return;
    uint64_t b = atomic_load(&st->next_block);
    if (b < st->block_count) {
      if (atomic_compare_exchange_weak(&st->next_block, &b, b + 1))
        block_run(st, b);
      continue;
    }
    /* Nothing left to read: gathers until the submitter is done. */
    pthread_mutex_lock(&st->lock);
    while (!st->finished && !atomic_load(&st->abort) &&
           !(st->gather_active && st->gather_next < st->gather_tasks))
      pthread_cond_wait(&st->cond, &st->lock);
    const bool out = st->finished || atomic_load(&st->abort);
    pthread_mutex_unlock(&st->lock);
    if (out)
      return;
  }
}

/* ---- the submitter: record, gather, submit ---------------------------------------------- */

static VkBuffer slot_src(const struct sdev *sd, uint32_t s) {
  return sd->host_copy ? sd->host_slot[s]->handle : sd->slot_buffer[s];
}

static void flush(struct stream *st, struct sdev *sd, uint32_t s) {
  if (!sd->batch_count)
    return;
  sd->dev->vk.vkCmdCopyBuffer(sd->cmd[s], slot_src(sd, s), sd->dst, sd->batch_count, sd->batch);
  st->copies += sd->batch_count;
  sd->batch_count = 0;
}

/* Twice the room for regions (all of a chunk's for one destination go in one
 * vkCmdCopyBuffer); false when the host has no memory for it. */
static bool batch_grow(struct stream *st, struct sdev *sd) {
  const uint32_t cap = sd->batch_cap ? sd->batch_cap * 2 : LOAD_BATCH;
  if (cap < sd->batch_cap)
    return false;
  VkBufferCopy *batch = vkrt_calloc(&st->sys->base, cap, sizeof(*batch));
  if (!batch)
    return false;
  if (sd->batch_count)
    memcpy(batch, sd->batch, sd->batch_count * sizeof(*batch));
  vkrt_free(&st->sys->base, sd->batch);
  sd->batch = batch;
  sd->batch_cap = cap;
  return true;
}

/* The block of chunk k that holds chunk byte `at`. */
static uint64_t block_at(const struct stream *st, uint64_t k, uint64_t at) {
  uint64_t lo = st->chunk_first[k], hi = st->chunk_first[k + 1] - 1;
  while (lo < hi) {
    const uint64_t mid = (lo + hi + 1) / 2;
    if (st->blocks[mid].chunk_offset <= at)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Chunk k's bytes [src, src + n) packed at gather bytes [dst, ...) of slot s: one gather per
 * block they lie in, each on its block's list (so the block's reader can pack it); false
 * when the slot has no room for as many gathers. */
static bool gather_add(struct stream *st, uint32_t s, uint64_t k, uint64_t src, uint64_t dst,
                       uint64_t n) {
  struct slot *sl = &st->slot[s];
  const uint64_t first = block_at(st, k, src);
  uint64_t last = first;
  while (st->blocks[last].chunk_offset + st->blocks[last].size < src + n)
    last++;
  if (sl->gather_count + (last - first + 1) > st->gather_bytes / 1024 * LOAD_GATHER_PER_KIB)
    return false;
  for (uint64_t b = first; b <= last; b++) {
    const struct block *blk = &st->blocks[b];
    const uint64_t end = VKRT_MIN(src + n, (uint64_t)blk->chunk_offset + blk->size);
    uint32_t *head = &sl->block_gathers[b - st->chunk_first[k]];
    sl->gathers[sl->gather_count] = (struct gather){
        .src = (uint32_t)src, .dst = (uint32_t)dst, .size = (uint32_t)(end - src), .next = *head};
    *head = sl->gather_count++;
    dst += end - src;
    n -= end - src;
    src = end;
  }
  return true;
}

/* Begins sd's command buffer of slot s unless it is recording; false when it cannot. */
static bool cmd_begin(struct stream *st, struct sdev *sd, uint32_t s) {
  if (sd->open)
    return true;
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult vr = sd->dev->vk.vkBeginCommandBuffer(sd->cmd[s], &begin);
  if (vr != VK_SUCCESS) {
    if (st->status == VKRT_OK)
      st->status = vkrt_vk_error(sd->dev, vr, "load: vkBeginCommandBuffer");
    return false;
  }
  sd->open = true;
  sd->dst = VK_NULL_HANDLE;
  return true;
}

/* One piece: chunk k's bytes [src, src + n) (slot s) to dst_offset of r's buffer. */
static void emit(struct stream *st, uint64_t k, uint32_t s, const vkrt_load_range *r,
                 uint64_t src, uint64_t dst_offset, uint64_t n) {
  struct vkrt_device *dev = r->dst->dev;
  struct sdev *sd = &st->dev[dev->index];
  struct slot *sl = &st->slot[s];
  if (!cmd_begin(st, sd, s))
    return;
  if (sd->dst != r->dst->handle) {
    flush(st, sd, s);
    sd->dst = r->dst->handle;
  }
  /* A narrow row of a strided range: on a device that packs, moved after the chunk by the
   * host, so the rows of one range leave as one region; elsewhere (no_gather, host-visible
   * chunks) left where the file has it, one region of its own. */
  const bool narrow = narrow_rows(r, st->gather_below);
  if (narrow && sd->pack && !sd->host_copy && sl->gather_used + n <= st->gather_bytes &&
      gather_add(st, s, k, src, sl->gather_used, n)) {
    src = st->chunk_bytes + sl->gather_used;
    sl->gather_used += n;
    st->gathered += n;
  } else if (narrow) {
    st->row_regions += n;
  }
  const uint64_t limit = sd->host_copy ? st->chunk_bytes : st->chunk_bytes + st->gather_bytes;
  if (src + n > limit)
    atomic_fetch_add(&st->reg->copies_past_chunk, 1);
  const vkrt_import_path counted = sd->host_copy ? VKRT_IMPORT_PATH_STAGED
                                                 : VKRT_IMPORT_PATH_PRESTAGED;
  atomic_fetch_add(&st->reg->path_bytes[counted], n);
  atomic_fetch_add(&st->reg->path_copies[counted], 1);
  VkBufferCopy *last = sd->batch_count ? &sd->batch[sd->batch_count - 1] : NULL;
  if (last && last->srcOffset + last->size == src && last->dstOffset + last->size == dst_offset) {
    last->size += n;
    return;
  }
  if (sd->batch_count == sd->batch_cap && !batch_grow(st, sd))
    flush(st, sd, s); /* no memory for more regions: one more vkCmdCopyBuffer instead */
  sd->batch[sd->batch_count++] = (VkBufferCopy){.srcOffset = src, .dstOffset = dst_offset,
                                                .size = n};
}

/* ---- row images ---------------------------------------------------------------------------
 * A narrow strided range (a column slice of every row: the tensors split by columns across
 * devices) whose destination rows are dense gets a linear R32_UINT image bound to the
 * destination's memory at its offset, each image row F destination rows side by side (F, the
 * fold, the fewest rows whose bytes are a multiple of the row pitch the device gives such
 * images: NVIDIA's is 128 bytes, so a 4032-byte row folds in 2), where the device lays the
 * image's rows out exactly as the destination's (row pitch = F size, offset 0). Each chunk
 * then moves all the range's whole rows it holds with one vkCmdCopyBufferToImage: F regions,
 * region t the rows t, t + F, ... into column t of the image rows, the buffer row length F
 * times the file's pitch. The copy engine gathers the rows, the host packs nothing and the ring
 * needs no gather area. Rows cut by a chunk's edge go as regions of their own. The image
 * starts PREINITIALIZED (its transition to GENERAL keeps the memory's contents: a last image
 * row only partly the range's overlaps whatever follows, which no copy into it writes) and,
 * linear and GENERAL, it and the buffer read the same bytes the same way. */

#define ROW_IMAGE_FOLD_MAX 8

static void row_image_destroy(struct stream *st, uint32_t i) {
  if (!st->row_image || !st->row_image[i])
    return;
  struct vkrt_device *dev = st->job->ranges[i].dst->dev;
  dev->vk.vkDestroyImage(dev->handle, st->row_image[i], &dev->sys->vk_allocator);
  st->row_image[i] = VK_NULL_HANDLE;
}

/* Range r's row image and its fold, or VK_NULL_HANDLE where the device or the range does not
 * allow one (not an error: its rows are packed instead). */
static VkImage row_image_make(const vkrt_load_range *r, uint8_t *fold) {
  struct vkrt_device *dev = r->dst->dev;
  const struct vkrt_caps *c = &dev->caps;
  const uint64_t rows = range_rows(r);
  if (!c->row_image_pitch_align)
    return VK_NULL_HANDLE;
  uint32_t f = 1;
  while (f <= ROW_IMAGE_FOLD_MAX && f * r->size % c->row_image_pitch_align)
    f++;
  const uint64_t height = (rows + f - 1) / f;
  if (f > ROW_IMAGE_FOLD_MAX || r->size % 4 ||
      r->file_pitch % 4 || r->file_offset % 4 || r->dst_pitch != r->size || rows < 2 ||
      f * r->size / 4 > c->row_image_max_width || height > c->row_image_max_height)
    return VK_NULL_HANDLE;
  *fold = (uint8_t)f;
  const VkImageCreateInfo info = vkrt_row_image_info((uint32_t)(f * r->size / 4),
                                                     (uint32_t)height);
  VkImage image;
  if (dev->vk.vkCreateImage(dev->handle, &info, &dev->sys->vk_allocator, &image) != VK_SUCCESS)
    return VK_NULL_HANDLE;
  VkMemoryRequirements req;
  dev->vk.vkGetImageMemoryRequirements(dev->handle, image, &req);
  const VkImageSubresource sub = {.aspectMask = VK_IMAGE_ASPECT_COLOR_BIT};
  VkSubresourceLayout layout;
  dev->vk.vkGetImageSubresourceLayout(dev->handle, image, &sub, &layout);
  if ((req.memoryTypeBits >> r->dst->memory_type & 1u) && req.alignment &&
      r->dst_offset % req.alignment == 0 && r->dst_offset + req.size <= r->dst->memory_size &&
      layout.offset == 0 && layout.rowPitch == f * r->size &&
      dev->vk.vkBindImageMemory(dev->handle, image, r->dst->memory, r->dst_offset) == VK_SUCCESS)
    return image;
  dev->vk.vkDestroyImage(dev->handle, image, &dev->sys->vk_allocator);
  return VK_NULL_HANDLE;
}

static vkrt_status row_images_open(struct stream *st, const struct vkrt_load_knobs *k) {
  const struct vkrt_load_stream *job = st->job;
  if (k->no_row_images)
    return VKRT_OK;
  st->row_image = vkrt_calloc(&st->sys->base, job->count, sizeof(*st->row_image));
  st->row_image_fold = vkrt_calloc(&st->sys->base, job->count, sizeof(*st->row_image_fold));
  if (!st->row_image || !st->row_image_fold)
    return oom(st, "the row images");
  for (uint32_t i = 0; i < job->count; i++) {
    const vkrt_load_range *r = &job->ranges[i];
    if (st->dev[r->dst->dev->index].pack && narrow_rows(r, k->gather_below) &&
        (st->row_image[i] = row_image_make(r, &st->row_image_fold[i])) != VK_NULL_HANDLE)
      st->row_images++;
  }
  return VKRT_OK;
}

/* Range i joins the recording (once, in the chunk of its first byte): its image's layout is
 * set before any copy into it. */
static void row_image_layout(struct stream *st, uint32_t s, uint32_t i) {
  const vkrt_load_range *r = &st->job->ranges[i];
  struct sdev *sd = &st->dev[r->dst->dev->index];
  if (!st->row_image || !st->row_image[i] || !cmd_begin(st, sd, s))
    return;
  VkImageMemoryBarrier barrier = {
      .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
      .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
      .oldLayout = VK_IMAGE_LAYOUT_PREINITIALIZED,
      .newLayout = VK_IMAGE_LAYOUT_GENERAL,
      .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
      .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
      .image = st->row_image[i],
      .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1}};
  sd->dev->vk.vkCmdPipelineBarrier(sd->cmd[s], VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                                   VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 0, NULL, 1,
                                   &barrier);
}

/* The whole rows of c's range from row c->row on that chunk bytes [p - p0, p1 - p0) hold, in
 * the extent of c (x: the row's file offset, p its stream position); 0 without an image. */
static uint64_t row_image_rows(const struct stream *st, const struct cursor *c, uint64_t x,
                               uint64_t p, uint64_t p1) {
  const vkrt_load_range *r = &st->job->ranges[c->range];
  const uint64_t end = st->ext[c->ext].end;
  if (!st->row_image || !st->row_image[c->range] || c->col || p + r->size > p1 ||
      x + r->size > end)
    return 0;
  const uint64_t by_chunk = 1 + (p1 - p - r->size) / r->file_pitch;
  const uint64_t by_extent = 1 + (end - x - r->size) / r->file_pitch;
  return VKRT_MIN(range_rows(r) - c->row, VKRT_MIN(by_chunk, by_extent));
}

/* Rows [row, row + n) of range i from chunk bytes src (slot s) on: one 2D region per
 * position in the image row (the fold), each every fold-th row. */
static void row_image_copy(struct stream *st, uint32_t s, uint32_t i, uint64_t src,
                           uint64_t row, uint64_t n) {
  const vkrt_load_range *r = &st->job->ranges[i];
  struct sdev *sd = &st->dev[r->dst->dev->index];
  if (!cmd_begin(st, sd, s))
    return;
  const uint32_t fold = st->row_image_fold[i], regions = (uint32_t)VKRT_MIN(n, fold);
  VkBufferImageCopy region[ROW_IMAGE_FOLD_MAX];
  for (uint32_t t = 0; t < regions; t++) {
    const uint64_t first = row + t;
    region[t] = (VkBufferImageCopy){
        .bufferOffset = src + t * r->file_pitch,
        .bufferRowLength = (uint32_t)(fold * r->file_pitch / 4),
        .imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
        .imageOffset = {(int32_t)(first % fold * r->size / 4), (int32_t)(first / fold), 0},
        .imageExtent = {(uint32_t)(r->size / 4), (uint32_t)((n - t + fold - 1) / fold), 1}};
  }
  sd->dev->vk.vkCmdCopyBufferToImage(sd->cmd[s], slot_src(sd, s), st->row_image[i],
                                     VK_IMAGE_LAYOUT_GENERAL, regions, region);
  st->copies += regions;
  st->row_image_bytes += n * r->size;
  atomic_fetch_add(&st->reg->path_bytes[VKRT_IMPORT_PATH_PRESTAGED], n * r->size);
  atomic_fetch_add(&st->reg->path_copies[VKRT_IMPORT_PATH_PRESTAGED], regions);
}

/* Records every piece of chunk k (stream bytes [k * chunk, ...)) for its device; returns
 * the range bytes recorded. */
static uint64_t emit_chunk(struct stream *st, uint64_t k) {
  const struct vkrt_load_stream *job = st->job;
  const uint32_t s = (uint32_t)(k % st->slots);
  const uint64_t p0 = k * st->chunk_bytes, p1 = VKRT_MIN(p0 + st->chunk_bytes, st->stream_bytes);
  uint64_t bytes = 0;
  /* Ranges starting in this chunk join the active ones. */
  while (st->next_range < job->count) {
    const uint32_t i = st->order[st->next_range];
    const uint64_t x = job->ranges[i].file_offset;
    while (st->ext[st->next_ext].end <= x)
      st->next_ext++;
    if (st->ext[st->next_ext].packed + x - st->ext[st->next_ext].start >= p1)
      break;
    st->active[st->active_count++] = (struct cursor){.range = i, .ext = st->next_ext};
    st->next_range++;
    row_image_layout(st, s, i);
  }
  for (uint32_t a = 0; a < st->active_count && st->status == VKRT_OK;) {
    struct cursor *c = &st->active[a];
    const vkrt_load_range *r = &job->ranges[c->range];
    const uint64_t rows = range_rows(r);
    bool done = false;
    for (;;) {
      const uint64_t x = r->file_offset + (rows > 1 ? c->row * r->file_pitch : 0) + c->col;
      while (st->ext[c->ext].end <= x)
        c->ext++;
      const uint64_t p = st->ext[c->ext].packed + x - st->ext[c->ext].start;
      if (p >= p1)
        break;
      const uint64_t whole = row_image_rows(st, c, x, p, p1);
      if (whole) {
        row_image_copy(st, s, c->range, p - p0, c->row, whole);
        bytes += whole * r->size;
        if ((c->row += whole) == rows) {
          done = true;
          break;
        }
        continue;
      }
      const uint64_t n = VKRT_MIN(r->size - c->col, p1 - p);
      emit(st, k, s, r, p - p0, r->dst_offset + (rows > 1 ? c->row * r->dst_pitch : 0) + c->col,
           n);
      bytes += n;
      c->col += n;
      if (c->col < r->size)
        break; /* the row goes on in the next chunk */
      c->col = 0;
      if (++c->row == rows) {
        done = true;
        break;
      }
    }
    if (done)
      *c = st->active[--st->active_count];
    else
      a++;
  }
  return bytes;
}

/* Whether chunk k's slot is free (chunk k - slots retired on every device). */
static bool slot_free(struct stream *st, uint64_t k) {
  return k < st->slots || atomic_load(&st->retired) > k - st->slots;
}

/* Ends the recording of chunk k's copies: every device's last regions, the barrier, the
 * command buffer closed. */
static vkrt_status record_close(struct stream *st, uint64_t k) {
  const uint32_t s = (uint32_t)(k % st->slots);
  struct slot *sl = &st->slot[s];
  vkrt_status status = VKRT_OK;
  sl->recorded_mask = 0;
  for (uint32_t d = 0; d < st->sys->device_count; d++) {
    struct sdev *sd = &st->dev[d];
    if (!sd->in || !sd->open)
      continue;
    flush(st, sd, s);
    sd->open = false;
    vkrt_stream_close_barrier(sd->dev, sd->cmd[s], false);
    VkResult r = sd->dev->vk.vkEndCommandBuffer(sd->cmd[s]);
    if (r != VK_SUCCESS && status == VKRT_OK)
      status = vkrt_vk_error(sd->dev, r, "load: vkEndCommandBuffer");
    sl->recorded_mask |= 1u << d;
  }
  return status;
}

/* Records chunk k (the next one): waits for its slot, imports it on its first use, records
 * every device's copies out of it and makes its gathers; readers may read and pack its
 * blocks from then on. false when the load stops. */
static bool record_chunk(struct stream *st, uint64_t k) {
  const uint32_t s = (uint32_t)(k % st->slots);
  struct slot *sl = &st->slot[s];
  if (!slot_wait(st, k)) /* its command buffers are free once its last chunk retired */
    return false;
  if (atomic_load(&sl->imports_left)) {
    const uint64_t t0 = vkrt_now_ns();
    const bool ok = import_wait(st, s);
    st->import_ns += vkrt_now_ns() - t0;
    if (!ok)
      return false;
  }
  sl->gather_count = 0;
  sl->gather_used = 0;
  if (sl->block_gathers)
    for (uint32_t i = 0; i < st->block_most; i++)
      sl->block_gathers[i] = GATHER_NONE;
  sl->bytes = emit_chunk(st, k);
  if (st->status == VKRT_OK)
    st->status = record_close(st, k);
  if (st->status != VKRT_OK)
    return false;
  publish(st, &st->recorded, k + 1);
  return true;
}

/* Packing while reading: whether the next chunk to record may be recorded now (its slot
 * free), ahead of those waiting for their reads. */
static bool record_ahead_ready(struct stream *st) {
  const uint64_t next = atomic_load(&st->recorded);
  return !st->pack_after_read && next < st->chunk_count && slot_free(st, next);
}

/* Waits until chunk k's blocks are read (and packed), reading its remaining blocks itself;
 * packing while reading, records the chunks whose slots free up meanwhile, so their readers
 * can start. */
static void wait_reads(struct stream *st, uint64_t k) {
  struct slot *sl = &st->slot[k % st->slots];
  while (atomic_load(&sl->remaining) && !atomic_load(&st->abort) && st->status == VKRT_OK) {
    if (record_ahead_ready(st)) {
      record_chunk(st, atomic_load(&st->recorded));
      continue;
    }
    uint64_t b = atomic_load(&st->next_block);
    if (b < st->chunk_first[k + 1]) {
      if (atomic_compare_exchange_weak(&st->next_block, &b, b + 1))
        block_run(st, b);
      continue;
    }
    const uint64_t t0 = vkrt_now_ns();
    pthread_mutex_lock(&st->lock);
    while (atomic_load(&sl->remaining) && !atomic_load(&st->abort) && !record_ahead_ready(st))
      pthread_cond_wait(&st->cond, &st->lock);
    pthread_mutex_unlock(&st->lock);
    st->wait_read_ns += vkrt_now_ns() - t0;
  }
}

/* Packing after the chunk's reads: packs slot s's narrow rows, the readers helping. */
static void gather_run(struct stream *st, uint32_t s) {
  struct slot *sl = &st->slot[s];
  if (!sl->gather_count)
    return;
  pthread_mutex_lock(&st->lock);
  st->gather_slot = s;
  /* every thread a few tasks: the chunk waits for its packing before it is submitted
   * (the H200, tasks of 256 rows of 14 KiB: 3 of 15 threads packed an 8 MiB chunk, and
   * two devices' column blocks loaded at 13.6 GB/s) */
  const uint32_t tasks = VKRT_MAX(st->threads, 1u) * LOAD_GATHER_TASKS;
  st->gather_task_rows = VKRT_MAX((sl->gather_count + tasks - 1) / tasks, 4u);
  st->gather_tasks = (sl->gather_count + st->gather_task_rows - 1) / st->gather_task_rows;
  st->gather_next = 0;
  st->gather_left = st->gather_tasks;
  st->gather_active = true;
  pthread_cond_broadcast(&st->cond);
  pthread_mutex_unlock(&st->lock);
  while (gather_help(st)) {
  }
  pthread_mutex_lock(&st->lock);
  while (st->gather_active)
    pthread_cond_wait(&st->cond, &st->lock);
  pthread_mutex_unlock(&st->lock);
}

/* Chunks [k0, k1]: each device's command buffers out of them in one vkQueueSubmit. */
static vkrt_status submit_chunks(struct stream *st, uint64_t k0, uint64_t k1) {
  uint64_t value[VKRT_MAX_DEVICES] = {0};
  vkrt_status status = VKRT_OK;
  for (uint32_t d = 0; d < st->sys->device_count; d++) {
    struct sdev *sd = &st->dev[d];
    VkCommandBuffer cmds[VKRT_LOAD_MAX_CHUNKS];
    uint32_t n = 0;
    for (uint64_t k = k0; k <= k1; k++)
      if (st->slot[k % st->slots].recorded_mask & (1u << d))
        cmds[n++] = sd->cmd[k % st->slots];
    if (!n)
      continue;
    struct vkrt_device *dev = sd->dev;
    VkResult r = dev->lost || vkrt_fault(dev, VKRT_FAULT_DEVICE_LOST) ? VK_ERROR_DEVICE_LOST
                                                                     : VK_SUCCESS;
    const uint64_t v = sd->value + 1;
    VkTimelineSemaphoreSubmitInfo timeline = {
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .signalSemaphoreValueCount = 1,
        .pSignalSemaphoreValues = &v,
    };
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .pNext = &timeline,
                           .commandBufferCount = n,
                           .pCommandBuffers = cmds,
                           .signalSemaphoreCount = 1,
                           .pSignalSemaphores = &sd->timeline};
    if (r == VK_SUCCESS) {
      pthread_mutex_lock(dev->transfer_lock);
      r = dev->vk.vkQueueSubmit(dev->transfer_queue, 1, &submit, VK_NULL_HANDLE);
      pthread_mutex_unlock(dev->transfer_lock);
    }
    if (r != VK_SUCCESS) {
      if (status == VKRT_OK)
        status = vkrt_vk_error(dev, r, "load: vkQueueSubmit");
      continue;
    }
    sd->value = v;
    value[d] = v;
  }
  /* Each slot's next chunk may be read once this one retired: on every device with copies
     out of it, at the run's timeline value (0 for a device without: nothing to wait for). */
  pthread_mutex_lock(&st->lock);
  for (uint64_t k = k0; k <= k1; k++) {
    struct slot *sl = &st->slot[k % st->slots];
    for (uint32_t d = 0; d < st->sys->device_count; d++)
      sl->value[d] = sl->recorded_mask & (1u << d) ? value[d] : 0;
    if (k + st->slots < st->chunk_count)
      atomic_store(&sl->remaining,
                   st->chunk_first[k + st->slots + 1] - st->chunk_first[k + st->slots]);
  }
  st->submitted = k1 + 1;
  pthread_cond_broadcast(&st->cond);
  pthread_mutex_unlock(&st->lock);
  st->chunk_fills += k1 + 1 - k0;
  st->submits++;
  return status;
}

/* Chunk by chunk: recorded (packing while reading: already, as soon as its slot was free),
 * read, packed (after the reads, or by the readers meanwhile), submitted. */
static void submitter(struct stream *st) {
  struct vkrt_load_stream *job = st->job;
  for (uint64_t k = 0; k < st->chunk_count && st->status == VKRT_OK; k++) {
    const uint32_t s = (uint32_t)(k % st->slots);
    if (atomic_load(&st->recorded) <= k && !record_chunk(st, k))
      break;
    wait_reads(st, k);
    if (atomic_load(&st->abort) || st->status != VKRT_OK)
      break;
    if (st->pack_after_read)
      gather_run(st, s);
    /* a batch of chunks goes at once, from chunk k0 of it */
    if ((k + 1) % st->submit_batch && k + 1 < st->chunk_count)
      continue;
    const uint64_t k0 = k - k % st->submit_batch;
    st->status = submit_chunks(st, k0, k);
    uint64_t bytes = 0;
    for (uint64_t j = k0; j <= k; j++)
      bytes += st->slot[j % st->slots].bytes;
    job->done += bytes;
    if (st->status == VKRT_OK && bytes && job->progress)
      job->progress(job->progress_user, job->done, job->total);
  }
  if (st->status != VKRT_OK)
    atomic_store(&st->abort, true);
  pthread_mutex_lock(&st->lock);
  st->finished = true;
  pthread_cond_broadcast(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

static void stream_part(void *arg, uint32_t part, uint32_t parts) {
  (void)parts;
  if (part == 0)
    submitter(arg);
  else if (part == 1)
    retirer(arg);
  else
    reader(arg);
}

/* ---- setup and teardown ----------------------------------------------------------------- */

static vkrt_status dev_open(struct stream *st, struct sdev *sd) {
  struct vkrt_device *dev = sd->dev;
  VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                       .queueFamilyIndex = dev->transfer_family};
  VkResult r = dev->vk.vkCreateCommandPool(dev->handle, &pool_info, &dev->sys->vk_allocator,
                                           &sd->pool);
  if (r != VK_SUCCESS) {
    sd->pool = VK_NULL_HANDLE;
    return vkrt_vk_error(dev, r, "load: vkCreateCommandPool");
  }
  VkCommandBufferAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = sd->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = st->slots};
  r = dev->vk.vkAllocateCommandBuffers(dev->handle, &alloc, sd->cmd);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "load: vkAllocateCommandBuffers");
  if (!batch_grow(st, sd))
    return oom(st, "the copy regions");
  vkrt_status s = vkrt_timeline_create(dev, NULL, "load: timeline vkCreateSemaphore",
                                       &sd->timeline);
  for (uint32_t i = 0; s == VKRT_OK && sd->host_copy && i < st->slots; i++)
    s = vkrt_buffer_create_internal(dev, st->chunk_bytes, VKRT_BUFFER_HOST_VISIBLE, 0,
                                    &sd->host_slot[i]);
  return s;
}

/* Waits for everything submitted, then releases it all. */
static void stream_close(struct stream *st) {
  for (uint32_t d = 0; d < st->sys->device_count; d++) {
    struct sdev *sd = &st->dev[d];
    if (!sd->in)
      continue;
    struct vkrt_device *dev = sd->dev;
    if (sd->timeline && sd->value) {
      VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                  .semaphoreCount = 1,
                                  .pSemaphores = &sd->timeline,
                                  .pValues = &sd->value};
      dev->vk.vkWaitSemaphores(dev->handle, &wait, LOAD_TIMEOUT_NS);
    }
    for (uint32_t i = 0; i < st->slots; i++) {
      if (sd->slot_buffer[i])
        dev->vk.vkDestroyBuffer(dev->handle, sd->slot_buffer[i], &dev->sys->vk_allocator);
      if (sd->slot_memory[i]) {
        dev->vk.vkFreeMemory(dev->handle, sd->slot_memory[i], &dev->sys->vk_allocator);
        atomic_fetch_sub(&st->reg->live_chunks, 1);
      }
      vkrt_buffer_destroy(sd->host_slot[i]);
    }
    vkrt_timeline_destroy(dev, sd->timeline);
    vkrt_free(&st->sys->base, sd->batch);
    if (sd->pool)
      dev->vk.vkDestroyCommandPool(dev->handle, sd->pool, &dev->sys->vk_allocator);
  }
  for (uint32_t i = 0; st->row_image && i < st->job->count; i++)
    row_image_destroy(st, i);
  if (st->ring_map) {
    munmap(st->ring_map, st->ring_map_size);
    atomic_fetch_sub(&st->reg->load_pinned, st->ring_map_size);
  }
  struct vkrt_base *base = &st->sys->base;
  for (uint32_t i = 0; i < st->slots; i++) {
    vkrt_free(base, st->slot[i].gathers);
    vkrt_free(base, st->slot[i].block_gathers);
  }
  vkrt_free(base, st->row_image);
  vkrt_free(base, st->row_image_fold);
  vkrt_free(base, st->ext);
  vkrt_free(base, st->blocks);
  vkrt_free(base, st->chunk_first);
  vkrt_free(base, st->order);
  vkrt_free(base, st->active);
  pthread_mutex_destroy(&st->lock);
  pthread_cond_destroy(&st->cond);
}

/* Helper threads: the retiring thread and the readers (the calling thread submits). By
 * default one per CPU but the caller's, two at least. */
static uint32_t load_threads(const struct vkrt_load_knobs *knobs) {
  if (knobs->threads)
    return knobs->threads;
  if (CONFIG_VKRT_LOAD_THREADS)
    return CONFIG_VKRT_LOAD_THREADS;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus <= 3 ? 2 : cpus > LOAD_MAX_THREADS ? LOAD_MAX_THREADS : (uint32_t)cpus - 1;
}

/* Defaults by path: reads from the page cache (read, memcpy) go through a ring small enough
 * to stay in the CPU's last-level cache, so the DMA reads what the readers just wrote from
 * there rather than from memory the readers keep busy; O_DIRECT reads (direct) take larger
 * chunks, so the disk sees large requests. A chunk is read in 8 blocks of at most 4 MiB. */
void vkrt_load_knobs_effective(const struct vkrt_load_knobs *knobs, bool direct,
                               struct vkrt_load_knobs *out) {
  const uint64_t chunk_kb = direct ? CONFIG_VKRT_LOAD_DIRECT_CHUNK_KB : CONFIG_VKRT_LOAD_CHUNK_KB;
  out->threads = load_threads(knobs);
  out->chunk_bytes = knobs->chunk_bytes ? knobs->chunk_bytes
                                        : vkrt_align_up(chunk_kb << 10, LOAD_ALIGN);
  out->chunks = knobs->chunks ? knobs->chunks : CONFIG_VKRT_LOAD_CHUNKS;
  const uint64_t block = VKRT_MIN(vkrt_align_up(out->chunk_bytes / LOAD_BLOCK_PER_CHUNK,
                                                LOAD_ALIGN), LOAD_BLOCK_MAX);
  out->block_bytes = VKRT_MIN(knobs->block_bytes ? knobs->block_bytes : block,
                              out->chunk_bytes);
  out->no_gather = knobs->no_gather;
  out->pack_after_read = knobs->pack_after_read;
  out->no_row_images = knobs->no_row_images;
  out->submit_batch = VKRT_MAX(knobs->submit_batch, 1u);
  out->gather_below = knobs->gather_below ? knobs->gather_below : LOAD_GATHER_BELOW;
}

/* Sizes, the ring and the devices' objects; the first slot imported. */
static vkrt_status stream_open(struct stream *st) {
  struct vkrt_system *sys = st->sys;
  struct vkrt_load_stream *job = st->job;
  struct vkrt_load_knobs k;
  vkrt_load_knobs_effective(&st->reg->load_knobs, job->fd_direct >= 0, &k);
  pthread_mutex_init(&st->lock, NULL);
  pthread_cond_init(&st->cond, NULL);
  atomic_init(&st->short_at, UINT64_MAX);
  /* Chunks no larger than every device's buffer and allocation limits, nor the stream. */
  uint64_t limit = UINT32_MAX & ~(LOAD_ALIGN - 1), align = LOAD_ALIGN;
  bool narrow = false;
  for (uint32_t d = 0; d < sys->device_count; d++) {
    if (!st->dev[d].in)
      continue;
    const struct vkrt_caps *c = &sys->devices[d].caps;
    if (c->max_memory_allocation_size)
      limit = VKRT_MIN(limit, c->max_memory_allocation_size);
    if (c->max_buffer_size)
      limit = VKRT_MIN(limit, c->max_buffer_size);
    align = VKRT_MAX(align, c->min_imported_host_pointer_alignment);
  }
  align = VKRT_MAX(align, st->reg->page_size);
  /* Narrow rows packed by the host, not one DMA region per row: each region costs a copy
   * engine ~3 us whatever its size (H200, two devices: 526k regions of 4-14 KiB loaded 16
   * GB at 8.9 GB/s, packed 17.3-18.5), a CPU's transfer queue as much (lavapipe: 16822
   * regions, 162 ms of waits; packed into 58, 68). */
  for (uint32_t d = 0; d < sys->device_count; d++)
    st->dev[d].pack = st->dev[d].in && !st->dev[d].host_copy && !k.no_gather;
  vkrt_status s = row_images_open(st, &k);
  if (s != VKRT_OK)
    return s;
  /* A gather area where narrow rows remain to pack (those without a row image). */
  for (uint32_t i = 0; i < job->count; i++) {
    const uint32_t o = job->order[i];
    const vkrt_load_range *r = &job->ranges[o];
    narrow |= st->dev[r->dst->dev->index].pack && narrow_rows(r, k.gather_below) &&
              !(st->row_image && st->row_image[o]);
  }
  s = plan_extents(st);
  if (s != VKRT_OK)
    return s;
  st->gather_below = k.gather_below;
  st->pack_after_read = k.pack_after_read;
  st->chunk_bytes = vkrt_align_up(VKRT_MIN(k.chunk_bytes, st->stream_bytes), align);
  st->gather_bytes = narrow ? st->chunk_bytes : 0;
  if (st->chunk_bytes + st->gather_bytes > vkrt_align_down(limit, align)) {
    st->chunk_bytes = vkrt_align_down(limit / (narrow ? 2 : 1), align);
    st->gather_bytes = narrow ? st->chunk_bytes : 0;
  }
  st->slot_stride = st->chunk_bytes + st->gather_bytes;
  st->block_bytes = vkrt_align_down(VKRT_MIN(k.block_bytes, st->chunk_bytes), LOAD_ALIGN);
  if (!st->block_bytes)
    st->block_bytes = LOAD_ALIGN;
  if ((s = plan_blocks(st)) != VKRT_OK)
    return s;
  st->slots = (uint32_t)VKRT_MIN((uint64_t)VKRT_MIN(k.chunks, VKRT_LOAD_MAX_CHUNKS), st->chunk_count);
  st->threads = k.threads;
  /* a batch waits for its last chunk's reads: half the ring keeps reading meanwhile */
  st->submit_batch = VKRT_MAX(VKRT_MIN(k.submit_batch, st->slots / 2), 1u);
  /* The ranges by file offset, and room for as many cursors. */
  st->order = vkrt_calloc(&sys->base, job->count, sizeof(*st->order));
  st->active = vkrt_calloc(&sys->base, job->count, sizeof(*st->active));
  if (!st->order || !st->active)
    return oom(st, "the ranges");
  struct order_key *keys = vkrt_calloc(&sys->base, job->count, sizeof(*keys));
  if (!keys)
    return oom(st, "the ranges");
  for (uint32_t i = 0; i < job->count; i++)
    keys[i] = (struct order_key){.file_offset = job->ranges[job->order[i]].file_offset,
                                 .range = job->order[i]};
  qsort(keys, job->count, sizeof(*keys), order_cmp);
  for (uint32_t i = 0; i < job->count; i++)
    st->order[i] = keys[i].range;
  vkrt_free(&sys->base, keys);
  for (uint32_t i = 0; i < st->slots; i++) {
    if (st->gather_bytes) {
      st->slot[i].gathers = vkrt_calloc(&sys->base, st->gather_bytes / 1024 * LOAD_GATHER_PER_KIB,
                                        sizeof(struct gather));
      st->slot[i].block_gathers = vkrt_calloc(&sys->base, st->block_most, sizeof(uint32_t));
      if (!st->slot[i].gathers || !st->slot[i].block_gathers)
        return oom(st, "the gather lists");
    }
    atomic_init(&st->slot[i].remaining, st->chunk_first[i + 1] - st->chunk_first[i]);
  }
  /* The ring: anonymous memory (every driver imports it), huge-page aligned. */
  const size_t ring = (size_t)st->slot_stride * st->slots;
  st->ring_map_size = ring + LOAD_HUGE;
  void *map = mmap(NULL, st->ring_map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (map == MAP_FAILED)
    return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "load %s: cannot map %zu bytes "
                      "of pinned chunks: %s", job->name, ring, strerror(errno));
  st->ring_map = map;
  atomic_fetch_add(&st->reg->load_pinned, st->ring_map_size);
  st->ring = (uint8_t *)(uintptr_t)vkrt_align_up((uintptr_t)map, LOAD_HUGE);
  madvise(st->ring, ring, MADV_HUGEPAGE); /* fewer pages to pin and map; a hint */
  for (uint32_t d = 0; d < sys->device_count; d++) {
    struct sdev *sd = &st->dev[d];
    if (sd->in && (s = dev_open(st, sd)) != VKRT_OK)
      return s;
  }
  /* The first slot now: a device that cannot import it takes host-visible chunks. */
  const uint64_t t_import = vkrt_now_ns();
  for (uint32_t d = 0; d < sys->device_count; d++) {
    struct sdev *sd = &st->dev[d];
    if (!sd->in || sd->host_copy)
      continue;
    VkResult r = vkrt_device_import_host_pointer(sd->dev, st->ring, st->slot_stride,
                                                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT, 0,
                                                 &sd->slot_buffer[0], &sd->slot_memory[0]);
    if (r == VK_SUCCESS) {
      atomic_fetch_add(&st->reg->live_chunks, 1);
      continue;
    }
    sd->host_copy = true;
    job->host_copy_mask |= 1u << d;
    vkrt_format(job->host_copy_why[d], sizeof(job->host_copy_why[d]), "importing a pinned "
                "chunk failed (%s): host-visible chunks of its own, a memcpy after each read",
                vkrt_vk_result_str(r));
    vkrt_log(&sys->base, VKRT_LOG_WARN, "dev%u: load %s: %s", d, job->name,
             job->host_copy_why[d]);
    for (uint32_t i = 0; s == VKRT_OK && i < st->slots; i++)
      s = vkrt_buffer_create_internal(sd->dev, st->chunk_bytes, VKRT_BUFFER_HOST_VISIBLE, 0,
                                      &sd->host_slot[i]);
    if (s != VKRT_OK)
      return s;
  }
  /* the other slots: tasks for the threads (import_help) */
  for (uint32_t d = 0; d < sys->device_count; d++)
    if (st->dev[d].in && !st->dev[d].host_copy)
      st->import_dev[st->import_devices++] = d;
  st->import_tasks = (st->slots - 1) * st->import_devices;
  for (uint32_t i = 1; i < st->slots; i++)
    atomic_store(&st->slot[i].imports_left, st->import_devices);
  st->import_ns = vkrt_now_ns() - t_import;
  return VKRT_OK;
}

vkrt_status vkrt_load_stream(struct vkrt_import_registry *reg, struct vkrt_load_stream *job,
                             vkrt_load_info *info) {
  struct vkrt_system *sys = reg->sys;
  if (!job->count)
    return VKRT_OK;
  struct stream *st = vkrt_calloc(&sys->base, 1, sizeof(*st));
  if (!st)
    return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "load %s: out of host memory",
                      job->name);
  st->reg = reg;
  st->sys = sys;
  st->job = job;
  for (uint32_t i = 0; i < job->count; i++) {
    const uint32_t d = job->ranges[job->order[i]].dst->dev->index;
    st->dev[d].in = true;
    st->dev[d].dev = &sys->devices[d];
  }
  for (uint32_t d = 0; d < sys->device_count; d++) {
    struct sdev *sd = &st->dev[d];
    if (!sd->in)
      continue;
    if (!vkrt_import_usable(sd->dev))
      vkrt_format(job->host_copy_why[d], sizeof(job->host_copy_why[d]), "the device cannot "
                  "import host memory: host-visible chunks of its own, a memcpy after each read");
    else if (reg->policy == VKRT_IMPORT_POLICY_STAGING_ONLY)
      vkrt_format(job->host_copy_why[d], sizeof(job->host_copy_why[d]), "policy staging-only "
                  "(no host imports): host-visible chunks of its own, a memcpy after each read");
    else
      continue;
    sd->host_copy = true;
    job->host_copy_mask |= 1u << d;
  }
  vkrt_status s = stream_open(st);
  if (s == VKRT_OK) {
    info->pinned_chunk_bytes = st->chunk_bytes;
    info->pinned_chunks = st->slots;
    info->setup_ns = vkrt_now_ns() - job->t0;
    vkrt_workers_init(&st->workers, st->threads, "vkrt-load");
    info->threads = st->workers.helpers + 1; /* those that started */
    vkrt_workers_run(&st->workers, stream_part, st);
    vkrt_workers_finish(&st->workers);
    const uint64_t t_tail = vkrt_now_ns();
    s = st->status;
    for (uint32_t d = 0; d < sys->device_count; d++) {
      struct sdev *sd = &st->dev[d];
      if (!sd->in || !sd->value)
        continue;
      VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                  .semaphoreCount = 1,
                                  .pSemaphores = &sd->timeline,
                                  .pValues = &sd->value};
      VkResult r = sd->dev->vk.vkWaitSemaphores(sd->dev->handle, &wait, LOAD_TIMEOUT_NS);
      if (r != VK_SUCCESS && s == VKRT_OK)
        s = r == VK_TIMEOUT ? vkrt_error(&sys->base, VKRT_ERROR_TIMEOUT, "dev%u: load %s: the "
                                         "copies did not complete within %llu s", d, job->name,
                                         LOAD_TIMEOUT_NS / 1000000000ull)
                            : vkrt_vk_error(sd->dev, r, "load: vkWaitSemaphores");
    }
    info->tail_ns = vkrt_now_ns() - t_tail;
    const int read_errno = atomic_load(&st->read_errno);
    const int vk = atomic_load(&st->vk_result), imported = atomic_load(&st->import_result);
    const uint64_t short_at = atomic_load(&st->short_at);
    if (s == VKRT_OK && read_errno)
      s = vkrt_error(&sys->base, VKRT_ERROR_IO, "load %s: read at offset %" PRIu64 ": %s",
                     job->name, atomic_load(&st->error_offset), strerror(read_errno));
    else if (s == VKRT_OK && short_at != UINT64_MAX)
      s = vkrt_error(&sys->base, VKRT_ERROR_IO, "load %s: the file ends at offset %" PRIu64
                     ", inside a range (truncated while loading)", job->name, short_at);
    else if (s == VKRT_OK && imported)
      s = vkrt_vk_error(&sys->devices[atomic_load(&st->import_device)], (VkResult)imported,
                        "load: import of a pinned chunk");
    else if (s == VKRT_OK && vk)
      s = vkrt_vk_error(&sys->devices[atomic_load(&st->vk_device)], (VkResult)vk,
                        "load: waiting for a chunk's copies");
    job->direct_errno = atomic_load(&st->direct_errno);
    info->read_bytes = atomic_load(&st->read_bytes);
    info->read_busy_ns = atomic_load(&st->read_busy_ns);
    info->wait_dma_ns = atomic_load(&st->wait_dma_ns);
    info->wait_read_ns = st->wait_read_ns;
    info->copies = st->copies;
    info->gathered_bytes = st->gathered;
    info->packed_while_reading_bytes = atomic_load(&st->packed_while_reading);
    info->row_region_bytes = st->row_regions;
    info->row_image_bytes = st->row_image_bytes;
    info->row_images = st->row_images;
    info->import_ns = st->import_ns;
    info->chunk_fills = (uint32_t)st->chunk_fills;
    info->submits = (uint32_t)st->submits;
  }
  const uint64_t t_release = vkrt_now_ns();
  stream_close(st);
  vkrt_free(&sys->base, st);
  info->release_ns = vkrt_now_ns() - t_release;
  return s;
}
