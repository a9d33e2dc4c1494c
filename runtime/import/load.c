/* vkrt_load_file: ranges of a file into buffers. Every range is checked before a byte moves;
 * then each device takes the path vkrt_load_choose gives it: its staging ring filled by
 * pread (O_DIRECT or through the page cache) while earlier slots are DMA'd, every device in
 * turn, or the file mapped and registered (DMA straight from imported pages). */
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

#define DIRECT_ALIGN 4096ull    /* O_DIRECT offsets, sizes and addresses (logical block) */
#define RESIDENT_WINDOWS 64     /* mincore samples this many windows of the file ... */
#define RESIDENT_WINDOW 4096    /* ... of this many pages each */

const char *vkrt_load_path_str(vkrt_load_path path) {
  static const char *const names[VKRT_LOAD_PATH_COUNT] = {"auto", "mapped", "read", "direct"};
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
    if (!vkrt_mul_u64(rows, r->size, &bytes) || !vkrt_add_u64(*total, bytes, total))
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: range %u: size overflows",
                        name, i);
    keys[i] = (struct range_key){.k1 = (uint64_t)(uintptr_t)r->dst, .k2 = r->dst_offset,
                                 .end = r->size ? dend : r->dst_offset, .index = i};
  }
  /* Destinations must not overlap (a strided range counts its whole span). */
  qsort(keys, count, sizeof(*keys), key_cmp);
  for (uint32_t i = 1; i < count; i++)
    if (keys[i].k1 == keys[i - 1].k1 && keys[i].k2 < keys[i - 1].end)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "load %s: ranges %u and %u write "
                        "overlapping bytes of one buffer ([%" PRIu64 ", %" PRIu64 ") and [%"
                        PRIu64 ", %" PRIu64 "))", name, keys[i - 1].index, keys[i].index,
                        keys[i - 1].k2, keys[i - 1].end, keys[i].k2, keys[i].end);
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
                               uint32_t count, struct vkrt_ring_load *job, vkrt_load_info *info) {
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
  struct vkrt_ring_load job = {.name = name, .fd = fd, .fd_direct = -1, .align = DIRECT_ALIGN,
                               .ranges = ranges, .progress = progress,
                               .progress_user = progress_user};
  if (s == VKRT_OK)
    s = check_ranges(sys, name, file_size, ranges, count, keys, &job.total);
  if (s != VKRT_OK)
    goto out;

  /* Per device, in file order. */
  for (uint32_t i = 0; i < count; i++)
    keys[i] = (struct range_key){.k1 = ranges[i].dst->dev->index, .k2 = ranges[i].file_offset,
                                 .index = i};
  qsort(keys, count, sizeof(*keys), key_cmp);
  uint32_t mapped_count = 0;
  bool need_resident = false, any_direct = false;
  for (uint32_t i = 0; i < count; i++)
    order[i] = keys[i].index;
  for (uint32_t i = 0, d; i < count; i++) {
    d = (uint32_t)keys[i].k1;
    if (!job.dev[d].count)
      job.dev[d].order = &order[i];
    job.dev[d].count++;
  }

  /* Choose per device: capability and policy, then page-cache residency. */
  {
    char probe_path[64];
    const char *reopen = path;
    if (!path) {
      vkrt_format(probe_path, sizeof(probe_path), "/proc/self/fd/%d", fd);
      reopen = probe_path;
    }
    fd_direct = open(reopen, O_RDONLY | O_CLOEXEC | O_DIRECT);
    const int direct_errno = fd_direct < 0 ? errno : 0;
    for (uint32_t pass = 0; pass < 2; pass++) {
      for (uint32_t d = 0; d < sys->device_count; d++) {
        if (!job.dev[d].count)
          continue;
        struct vkrt_device *dev = &sys->devices[d];
        char why[160];
        const bool usable = vkrt_import_usable(dev);
        const bool maps = vkrt_import_expect(&dev->caps, usable, reg->policy, why, sizeof(why)) ==
                              VKRT_IMPORT_PATH_IMPORTED &&
                          usable && !vkrt_import_file_backed_refused(&dev->caps);
        const bool direct_ok = fd_direct >= 0 && vkrt_upload_ring_direct_ok(dev, DIRECT_ALIGN);
        info->path[d] = vkrt_load_choose(force, maps, pass ? info->resident : -1.0, direct_ok,
                                         info->reason[d], sizeof(info->reason[d]));
        if (!pass && force == VKRT_LOAD_PATH_AUTO && info->path[d] != VKRT_LOAD_PATH_MAPPED)
          need_resident = true;
        if (pass && fd_direct < 0 && info->path[d] == VKRT_LOAD_PATH_READ &&
            (force == VKRT_LOAD_PATH_DIRECT || info->resident < 0.5)) {
          const size_t len = strlen(info->reason[d]);
          vkrt_format(info->reason[d] + len, sizeof(info->reason[d]) - len, " (open O_DIRECT: %s)",
                      strerror(direct_errno));
        }
      }
      if (!pass && need_resident)
        info->resident = vkrt_load_resident(fd, file_size);
    }
  }
  for (uint32_t d = 0; d < sys->device_count; d++) {
    if (!job.dev[d].count)
      continue;
    if (info->path[d] == VKRT_LOAD_PATH_MAPPED) {
      mapped_count += job.dev[d].count;
      continue;
    }
    job.dev[d].direct = info->path[d] == VKRT_LOAD_PATH_DIRECT;
    any_direct |= job.dev[d].direct;
  }
  if (!any_direct && fd_direct >= 0) {
    close(fd_direct);
    fd_direct = -1;
  }
  job.fd_direct = fd_direct;
  for (uint32_t d = 0; d < sys->device_count; d++)
    if (job.dev[d].count)
      vkrt_log(base, VKRT_LOG_INFO, "dev%u: load %s via %s: %s", d, name,
               vkrt_load_path_str(info->path[d]), info->reason[d]);

  /* Ring devices all at once; the mapped ones after (their DMA needs no host copy). */
  for (uint32_t d = 0; d < sys->device_count; d++) {
    if (info->path[d] == VKRT_LOAD_PATH_MAPPED)
      job.dev[d].count = 0;
  }
  s = vkrt_upload_file_ring(sys, &job);
  for (uint32_t d = 0; d < sys->device_count; d++) {
    info->read_bytes += job.dev[d].read_bytes;
    if (job.dev[d].direct_errno) {
      info->path[d] = VKRT_LOAD_PATH_READ;
      const size_t len = strlen(info->reason[d]);
      vkrt_format(info->reason[d] + len, sizeof(info->reason[d]) - len,
                  "; O_DIRECT reads failed (%s): read", strerror(job.dev[d].direct_errno));
    }
  }
  if (s == VKRT_OK && mapped_count) {
    uint32_t *mapped_order = order + count - mapped_count;
    uint32_t n = 0;
    /* order is grouped by device: gather the mapped devices' groups at its end (the ring is
     * done with it). */
    for (uint32_t i = 0; i < count; i++)
      keys[i].index = order[i];
    for (uint32_t i = 0; i < count; i++)
      if (info->path[ranges[keys[i].index].dst->dev->index] == VKRT_LOAD_PATH_MAPPED)
        mapped_order[n++] = keys[i].index;
    s = load_mapped(reg, fd, file_size, ranges, mapped_order, n, &job, info);
  }
  info->bytes = s == VKRT_OK ? job.total : job.done;
  info->threads = vkrt_workers_parts(&reg->copy_pool.workers);
  info->ns = vkrt_now_ns() - t0;
  if (s == VKRT_OK)
    vkrt_log(base, VKRT_LOG_INFO, "load %s: %" PRIu64 " bytes in %u range(s) in %.3f s (%.2f "
             "GB/s), %u threads, page cache held %.0f%%", name, job.total, count,
             (double)info->ns * 1e-9, info->ns ? (double)job.total / (double)info->ns : 0.0,
             info->threads, info->resident < 0 ? -1.0 : info->resident * 100);
out:
  vkrt_free(base, keys);
  vkrt_free(base, order);
  if (fd_direct >= 0)
    close(fd_direct);
  if (own_fd >= 0)
    close(own_fd);
  return s;
}
