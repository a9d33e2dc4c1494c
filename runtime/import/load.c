/* vkrt_load_file: ranges of a file into buffers. Every range is checked before a byte moves;
 * then each device takes the path vkrt_load_choose gives it: the file mapped and registered
 * (DMA straight from imported pages), or, for all the other devices together, the file read
 * once into pinned chunks every one of them imports (stream.c: pread, O_DIRECT pread or
 * memcpy from a mapping), chunk i + 1 read while chunk i is DMA'd. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import/import.h"
#include "import/load.h"
#include "import/policy.h"
#include "import/registry.h"

#define RESIDENT_WINDOWS 64     /* mincore samples this many windows of the file ... */
#define RESIDENT_WINDOW 256     /* ... of this many pages each (mincore looks each page up in
                                   the page cache: 64 x 4096 pages took 8-13 ms of a 120 ms
                                   load on the H200 host, 64 x 256 a sixteenth of it) */

const char *vkrt_load_path_str(vkrt_load_path path) {
  static const char *const names[VKRT_LOAD_PATH_COUNT] = {"auto", "mapped", "read", "direct",
                                                          "memcpy"};
  return (uint32_t)path < VKRT_LOAD_PATH_COUNT ? names[path] : "?";
}

/* Sort key: ranges by destination (overlap check), then by device and file offset. */
struct range_key {
  uint64_t k1, k2, end;
  uint32_t index;
};

static int key_cmp(const void *a, const void *b) {
  const struct range_key *x = a, *y = b;
  if (x->k1 != y->k1)
    return x->k1 < y->k1 ? -1 : 1;
  if (x->k2 != y->k2)
    return x->k2 < y->k2 ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Last byte + 1 of rows rows of width bytes at pitch from offset, false on overflow. */
static bool span_end(uint64_t offset, uint64_t pitch, uint64_t width, uint64_t rows,
                     uint64_t *end) {
  uint64_t last;
  return vkrt_mul_u64(rows - 1, pitch, &last) && vkrt_add_u64(offset, last, end) &&
         vkrt_add_u64(*end, width, end);
}

static vkrt_status check_ranges(struct vkrt_system *sys, const char *name, uint64_t file_size,
                                const vkrt_load_range *ranges, uint32_t count,
                                struct range_key *keys, uint64_t *total) {
  struct vkrt_base *base = &sys->base;
  *total = 0;
  for (uint32_t i = 0; i < count; i++) {
    const vkrt_load_range *r = &ranges[i];
    const uint64_t rows = r->rows > 1 ? r->rows : 1;
    if (!r->dst || r->dst->dev->sys != sys)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: range %u: %s", name, i,
                        r->dst ? "buffer of another appliance" : "NULL buffer");
    if (rows > 1 && (r->file_pitch < r->size || r->dst_pitch < r->size))
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: range %u: pitches (file %"
                        PRIu64 ", dst %" PRIu64 ") below the row size %" PRIu64, name, i,
                        r->file_pitch, r->dst_pitch, r->size);
    uint64_t fend = 0, dend = 0, bytes = 0;
    if (r->size && (!span_end(r->file_offset, r->file_pitch, r->size, rows, &fend) ||
                    fend > file_size))
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: range %u: file bytes [%"
                        PRIu64 ", %" PRIu64 ") pass the end of the %" PRIu64 "-byte file "
                        "(truncated?)", name, i, r->file_offset, fend, file_size);
    if (r->size && (!span_end(r->dst_offset, r->dst_pitch, r->size, rows, &dend) ||
                    dend > r->dst->size))
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: range %u: [%" PRIu64 ", %"
                        PRIu64 ") is outside the %" PRIu64 "-byte buffer on dev%u", name, i,
                        r->dst_offset, dend, r->dst->size, r->dst->dev->index);
    if (!r->size && (r->file_offset > file_size || r->dst_offset > r->dst->size))
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: range %u: an empty range "
                        "at file offset %" PRIu64 " and buffer offset %" PRIu64 " lies past the "
                        "%" PRIu64 "-byte file or the %" PRIu64 "-byte buffer", name, i,
                        r->file_offset, r->dst_offset, file_size, r->dst->size);
    if (!vkrt_mul_u64(rows, r->size, &bytes) || !vkrt_add_u64(*total, bytes, total))
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: range %u: size overflows",
                        name, i);
    keys[i] = (struct range_key){.k1 = (uint64_t)(uintptr_t)r->dst, .k2 = r->dst_offset,
                                 .end = r->size ? dend : r->dst_offset, .index = i};
  }
  /* Destinations must not overlap (a strided range counts its whole span; an empty range
   * writes nothing): each range against the furthest-reaching one before it in its buffer. */
  qsort(keys, count, sizeof(*keys), key_cmp);
  const struct range_key *reach = NULL;
  for (uint32_t i = 0; i < count; i++) {
    const struct range_key *k = &keys[i];
    if (k->k2 == k->end)
      continue;
    if (reach && reach->k1 == k->k1 && k->k2 < reach->end)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: ranges %u and %u write "
                        "overlapping bytes of one buffer ([%" PRIu64 ", %" PRIu64 ") and [%"
                        PRIu64 ", %" PRIu64 "))", name, reach->index, k->index, reach->k2,
                        reach->end, k->k2, k->end);
    if (!reach || reach->k1 != k->k1 || k->end > reach->end)
      reach = k;
  }
  return VKRT_OK;
}

double vkrt_load_resident(int fd, uint64_t size) {
  if (size == 0)
    return 1.0;
  void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    return -1.0;
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  const uint64_t pages = (size + page - 1) / page;
  const uint64_t windows = VKRT_MIN((uint64_t)RESIDENT_WINDOWS, (pages + RESIDENT_WINDOW - 1) /
                                                                    RESIDENT_WINDOW);
  unsigned char vec[RESIDENT_WINDOW];
  uint64_t seen = 0, resident = 0;
  for (uint64_t w = 0; w < windows; w++) {
    const uint64_t first = pages * w / windows;
    const uint64_t n = VKRT_MIN((uint64_t)RESIDENT_WINDOW, pages - first);
    if (mincore((uint8_t *)map + first * page, (size_t)(n * page), vec) != 0)
      continue;
    for (uint64_t i = 0; i < n; i++)
      resident += vec[i] & 1;
    seen += n;
  }
  munmap(map, (size_t)size);
  return seen ? (double)resident / (double)seen : -1.0;
}

/* Mapped devices: the file registered once, one upload per range. */
static vkrt_status load_mapped(struct vkrt_import_registry *reg, int fd, uint64_t file_size,
                               const vkrt_load_range *ranges, const uint32_t *order,
                               uint32_t count, struct vkrt_load_stream *job, vkrt_load_info *info) {
  struct vkrt_system *sys = reg->sys;
  void *map = mmap(NULL, (size_t)file_size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    return vkrt_error(&sys->base, VKRT_ERROR_IO, "load %s: mmap: %s", job->name, strerror(errno));
  vkrt_register_info rinfo;
  memset(&rinfo, 0, sizeof(rinfo));
  vkrt_status s = vkrt_registry_register(reg, map, file_size, NULL, NULL, &rinfo);
  info->chunk_count = rinfo.chunk_count;
  for (uint32_t d = 0; s == VKRT_OK && d < sys->device_count; d++) {
    if (info->path[d] != VKRT_LOAD_PATH_MAPPED)
      continue;
    info->import_path[d] = rinfo.path[d];
    const size_t len = strlen(info->reason[d]);
    vkrt_format(info->reason[d] + len, sizeof(info->reason[d]) - len, "; %s: %s",
                vkrt_import_path_str(rinfo.path[d]), rinfo.reason[d]);
  }
  for (uint32_t i = 0; s == VKRT_OK && i < count; i++) {
    const vkrt_load_range *r = &ranges[order[i]];
    const uint64_t rows = r->rows > 1 ? r->rows : 1;
    s = vkrt_upload_2d(r->dst, r->dst_offset, r->dst_pitch, (const uint8_t *)map + r->file_offset,
                       r->file_pitch, r->size, rows);
    if (s == VKRT_OK && r->size) {
      job->done += r->size * rows;
      if (job->progress)
        job->progress(job->progress_user, job->done, job->total);
    }
  }
  if (rinfo.chunk_count || s == VKRT_OK)
    vkrt_registry_unregister(reg, map); /* NOT_FOUND when registering failed: ignored */
  munmap(map, (size_t)file_size);
  return s;
}

/* Appends to a device's reason. */
static void reason_add(vkrt_load_info *info, uint32_t d, const char *fmt, const char *arg) {
  const size_t len = strlen(info->reason[d]);
  vkrt_format(info->reason[d] + len, sizeof(info->reason[d]) - len, fmt, arg);
}

vkrt_status vkrt_load_run(struct vkrt_import_registry *reg, const char *path, int fd,
                          const vkrt_load_range *ranges, uint32_t count, vkrt_load_path force,
                          vkrt_progress_fn progress, void *progress_user, vkrt_load_info *info) {
  struct vkrt_system *sys = reg->sys;
  struct vkrt_base *base = &sys->base;
  const uint64_t t0 = vkrt_now_ns();
  char name[96];
  if (path)
    vkrt_format(name, sizeof(name), "%s", path);
  else
    vkrt_format(name, sizeof(name), "fd %d", fd);
  if (count && !ranges)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: NULL ranges", name);
  if ((uint32_t)force >= VKRT_LOAD_PATH_COUNT)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: unknown path %u", name,
                      (unsigned)force);
  int own_fd = -1, fd_direct = -1;
  void *map = NULL;
  if (path) {
    own_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (own_fd < 0)
      return vkrt_error(base, VKRT_ERROR_IO, "load %s: %s", name, strerror(errno));
    fd = own_fd;
  }
  struct stat stbuf;
  vkrt_status s = VKRT_OK;
  struct range_key *keys = NULL;
  uint32_t *order = NULL;
  if (fstat(fd, &stbuf) != 0)
    s = vkrt_error(base, VKRT_ERROR_IO, "load %s: fstat: %s", name, strerror(errno));
  else if (!S_ISREG(stbuf.st_mode))
    s = vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: not a regular file", name);
  const uint64_t file_size = s == VKRT_OK ? (uint64_t)stbuf.st_size : 0;
  info->file_size = file_size;
  info->resident = -1.0;
  if (s == VKRT_OK && count) {
    keys = vkrt_calloc(base, count, sizeof(*keys));
    order = vkrt_calloc(base, count, sizeof(*order));
    if (!keys || !order)
      s = vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "load %s: out of host memory for %u "
                     "ranges", name, count);
  }
  struct vkrt_load_stream job = {.name = name, .fd = fd, .fd_direct = -1, .file_size = file_size,
                                 .t0 = t0, .ranges = ranges, .progress = progress,
                                 .progress_user = progress_user};
  if (s == VKRT_OK)
    s = check_ranges(sys, name, file_size, ranges, count, keys, &job.total);
  if (s != VKRT_OK)
    goto out;

  /* Choose per device: capability and policy, then page-cache residency; the devices that
   * do not map share one stream, so they all take the same read path. */
  uint32_t has[VKRT_MAX_DEVICES] = {0};
  bool maps[VKRT_MAX_DEVICES] = {false}, streams = false;
  for (uint32_t i = 0; i < count; i++)
    has[ranges[i].dst->dev->index] += ranges[i].size != 0;
  for (uint32_t d = 0; d < sys->device_count; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    char why[160];
    const bool usable = vkrt_import_usable(dev);
    maps[d] = vkrt_import_expect(&dev->caps, usable, reg->policy, why, sizeof(why)) ==
                  VKRT_IMPORT_PATH_IMPORTED &&
              usable && !vkrt_import_file_backed_refused(&dev->caps);
    if (has[d] && (force == VKRT_LOAD_PATH_AUTO ? !maps[d] : force != VKRT_LOAD_PATH_MAPPED))
      streams = true;
  }
  if (streams) { /* AUTO decides by it; the others say it in the log */
    const uint64_t t_resident = vkrt_now_ns();
    info->resident = vkrt_load_resident(fd, file_size);
    info->resident_ns = vkrt_now_ns() - t_resident;
  }
  int direct_errno = 0;
  if (streams && (force == VKRT_LOAD_PATH_DIRECT ||
                  (force == VKRT_LOAD_PATH_AUTO && info->resident < VKRT_LOAD_DIRECT_BELOW))) {
    char reopen[64];
    vkrt_format(reopen, sizeof(reopen), "/proc/self/fd/%d", fd);
    fd_direct = open(path ? path : reopen, O_RDONLY | O_CLOEXEC | O_DIRECT);
    direct_errno = fd_direct < 0 ? errno : 0;
  }
  vkrt_load_path stream_path = VKRT_LOAD_PATH_READ;
  for (uint32_t d = 0; d < sys->device_count; d++) {
    if (!has[d])
      continue;
    info->path[d] = vkrt_load_choose(force, maps[d], info->resident, fd_direct >= 0,
                                     info->reason[d], sizeof(info->reason[d]));
    if (info->path[d] != VKRT_LOAD_PATH_MAPPED)
      stream_path = info->path[d];
    if (info->path[d] == VKRT_LOAD_PATH_READ && direct_errno)
      reason_add(info, d, " (open O_DIRECT: %s)", strerror(direct_errno));
  }
  if (stream_path != VKRT_LOAD_PATH_DIRECT && fd_direct >= 0) {
    close(fd_direct);
    fd_direct = -1;
  }
  job.fd_direct = fd_direct;
  if (streams && stream_path == VKRT_LOAD_PATH_MEMCPY && file_size) {
    map = mmap(NULL, (size_t)file_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      map = NULL;
      s = vkrt_error(base, VKRT_ERROR_IO, "load %s: mmap: %s", name, strerror(errno));
      goto out;
    }
    job.map = map;
  }

  /* The streamed ranges (size > 0), then the mapped ones at the end of order. */
  uint32_t n_stream = 0, n_mapped = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (!ranges[i].size)
      continue;
    if (info->path[ranges[i].dst->dev->index] == VKRT_LOAD_PATH_MAPPED)
      order[count - 1 - n_mapped++] = i;
    else
      order[n_stream++] = i;
  }
  job.order = order;
  job.count = n_stream;
  for (uint32_t d = 0; d < sys->device_count; d++)
    if (has[d])
      vkrt_log(base, VKRT_LOG_INFO, "dev%u: load %s via %s: %s", d, name,
               vkrt_load_path_str(info->path[d]), info->reason[d]);
  s = vkrt_load_stream(reg, &job, info);
  for (uint32_t d = 0; d < sys->device_count; d++) {
    if (!has[d] || info->path[d] == VKRT_LOAD_PATH_MAPPED)
      continue;
    if (job.direct_errno && info->path[d] == VKRT_LOAD_PATH_DIRECT) {
      info->path[d] = VKRT_LOAD_PATH_READ;
      reason_add(info, d, "; O_DIRECT reads failed (%s): read through the page cache",
                 strerror(job.direct_errno));
    }
    if (job.host_copy_mask & (1u << d))
      reason_add(info, d, "; %s", job.host_copy_why[d]);
  }
  if (job.direct_errno)
    vkrt_log(base, VKRT_LOG_WARN, "load %s: O_DIRECT reads failed (%s); read through the page "
             "cache", name, strerror(job.direct_errno));
  if (s == VKRT_OK && n_mapped) {
    /* order's tail holds them backwards: file order per device does not matter here. */
    s = load_mapped(reg, fd, file_size, ranges, order + count - n_mapped, n_mapped, &job, info);
  }
  info->bytes = s == VKRT_OK ? job.total : job.done;
  if (!info->threads)
    info->threads = 1;
  info->ns = vkrt_now_ns() - t0;
  if (s == VKRT_OK)
    vkrt_log(base, VKRT_LOG_INFO, "load %s: %" PRIu64 " bytes in %u range(s) in %.3f s (%.2f "
             "GB/s), page cache held %.0f%%; %u chunk fill(s) of %" PRIu64 " KiB (ring of %u) in %u "
             "submission(s), "
             "%u threads, %" PRIu64 " DMA regions, %" PRIu64 " bytes of narrow rows by 2D copies "
             "into row images (%u ranges), %" PRIu64 " bytes packed (%" PRIu64 " by the "
             "readers as they read), %" PRIu64 " bytes "
             "of narrow rows in regions of their own; setup %.1f ms (page-cache check %.1f, "
             "chunk imports %.1f in all), reading busy %.1f ms (summed), waits for the DMA %.1f ms (summed), for reads "
             "%.1f ms, tail %.1f ms, release %.1f ms", name, job.total, count, (double)info->ns * 1e-9,
             info->ns ? (double)job.total / (double)info->ns : 0.0,
             info->resident < 0 ? -1.0 : info->resident * 100, info->chunk_fills,
             info->pinned_chunk_bytes >> 10, info->pinned_chunks, info->submits, info->threads,
             info->copies,
             info->row_image_bytes, info->row_images, info->gathered_bytes,
             info->packed_while_reading_bytes, info->row_region_bytes,
             (double)info->setup_ns * 1e-6,
             (double)info->resident_ns * 1e-6, (double)info->import_ns * 1e-6,
             (double)info->read_busy_ns * 1e-6, (double)info->wait_dma_ns * 1e-6,
             (double)info->wait_read_ns * 1e-6, (double)info->tail_ns * 1e-6,
             (double)info->release_ns * 1e-6);
out:
  vkrt_free(base, keys);
  vkrt_free(base, order);
  if (map)
    munmap(map, (size_t)file_size);
  if (fd_direct >= 0)
    close(fd_direct);
  if (own_fd >= 0)
    close(own_fd);
  return s;
}
