/* vkrt-bench upload --file F: vkrt_load_file of F per path (auto, mapped, read, direct,
 * memcpy), with the page cache warm and (--cold, root) dropped before each load, against
 * three yardsticks measured in the same run: a one-thread O_DIRECT sequential read of F
 * (what `dd iflag=direct bs=16M` reads), a one-thread buffered read of F (which also warms
 * the cache) and the pinned host-to-device rate (a registered 256 MiB anonymous upload to
 * dev0). Each row gives the rate, the two ratios, and the load's structure (chunks, DMA
 * regions, packed bytes, the readers' busy share, the waits on either side) so a slow row
 * says which side held it back.
 *
 * --split rows: every device takes an equal run of the file (all links busy at once);
 * --split columns: the file is rows of --pitch bytes (default 28672, a Llama-3-8B f16
 * ffn_down row) and device d takes the d-th column block of every row, as the service
 * loads attn_output and ffn_down over several devices. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pinned.h"
#include "bench.h"

struct load_opts {
  const char *file;
  bool want[VKRT_LOAD_PATH_COUNT];
  uint32_t devices; /* 0: the board's */
  int iters;
  bool cold, json, progress, columns, no_disk, serial, touch;
  uint64_t pitch;
  vkrt_lab_load knobs;
  bool knobs_given;
};

static double rate(uint64_t bytes, double seconds) {
  return seconds > 0 ? (double)bytes / seconds * 1e-9 : 0;
}

/* sync; echo 3 > /proc/sys/vm/drop_caches (root only). */
static bool drop_caches(void) {
  sync();
  FILE *f = fopen("/proc/sys/vm/drop_caches", "w");
  if (!f)
    return false;
  bool ok = fputs("3\n", f) >= 0;
  return fclose(f) == 0 && ok;
}

/* One thread reading the whole file front to back in 16 MiB requests, with O_DIRECT (what
 * `dd if=F of=/dev/null bs=16M iflag=direct` measures; the page cache untouched) or through
 * the page cache (which leaves the file there). 0 when the file does not open so. */
static double read_through(const char *path, bool direct) {
  const size_t block = 16u << 20;
  int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
  void *buf = NULL;
  if (fd < 0 || posix_memalign(&buf, 4096, block) != 0) {
    if (fd >= 0)
      close(fd);
    return 0;
  }
  double t0 = bench_now_s();
  uint64_t off = 0;
  for (ssize_t r; (r = pread(fd, buf, block, (off_t)off)) > 0;)
    off += (uint64_t)r;
  double t = bench_now_s() - t0;
  free(buf);
  close(fd);
  return rate(off, t);
}

/* The host side alone: `threads` threads take 4 MiB blocks of the file in order and pread
 * them (through the page cache) into a 256 MiB anonymous ring, as a load's readers do, with
 * no DMA behind them: the ceiling of the read path's copy on this machine. With `loop` they
 * go round the file until stopped (the memory traffic behind a DMA yardstick). */
struct host_read {
  int fd;
  uint64_t size, blocks;
  uint8_t *ring;
  bool loop;
  _Atomic bool stop;
  _Atomic uint64_t next;
  pthread_t tid[64];
  uint32_t started;
  double t0; /* when the threads started */
};

static void *host_reader(void *arg) {
  struct host_read *h = arg;
  const uint64_t block = 4u << 20, ring = 256u << 20;
  while (!h->stop) {
    uint64_t b = h->next++;
    if (b >= h->blocks && !h->loop)
      return NULL;
    b %= h->blocks;
    if (pread(h->fd, h->ring + b * block % ring, block, (off_t)(b * block)) < 0)
      return NULL;
  }
  return NULL;
}

static bool host_read_start(struct host_read *h, const char *path, uint32_t threads, bool loop) {
  struct stat st;
  memset(h, 0, sizeof(*h));
  h->fd = open(path, O_RDONLY);
  if (h->fd < 0 || fstat(h->fd, &st) != 0 || st.st_size <= 0) {
    if (h->fd >= 0)
      close(h->fd);
    return false;
  }
  h->size = (uint64_t)st.st_size;
  h->blocks = (h->size + (4u << 20) - 1) >> 22;
  h->loop = loop;
  h->ring = mmap(NULL, 256u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (h->ring == MAP_FAILED) {
    close(h->fd);
    return false;
  }
  memset(h->ring, 1, 256u << 20); /* the ring's pages exist, as a load's imported chunks do */
  threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
  h->t0 = bench_now_s();
  for (uint32_t t = 0; t < threads; t++)
    h->started += pthread_create(&h->tid[h->started], NULL, host_reader, h) == 0;
  return true;
}

static void host_read_stop(struct host_read *h) {
  h->stop = h->loop;
  for (uint32_t t = 0; t < h->started; t++)
    pthread_join(h->tid[t], NULL);
  munmap(h->ring, 256u << 20);
  close(h->fd);
}

static double host_read_rate(const char *path, uint32_t threads) {
  struct host_read h;
  if (!host_read_start(&h, path, threads, false))
    return 0;
  for (uint32_t t = 0; t < h.started; t++) /* joined here; host_read_stop joins none */
    pthread_join(h.tid[t], NULL);
  const double r = h.started ? rate(h.size, bench_now_s() - h.t0) : 0;
  h.started = 0;
  host_read_stop(&h);
  return r;
}

/* The pinned host-to-device rate: 256 MiB of anonymous memory (transparent huge pages when
 * `huge`, as a load's chunks) registered (imported), then uploaded four times; the best of
 * the last three. Over `devices` devices each takes an equal part on a thread of its own, all
 * at once (what a load into those devices can at most expect from the copy engines: devices
 * that share a GPU share them). With `busy`, `threads` threads pread that file meanwhile, as
 * a load's readers do. 0 when it cannot be measured. */
static double pinned_rate(vkrt_appliance *app, uint32_t devices, bool huge, const char *busy,
                          uint32_t threads) {
  const uint64_t size = 256ull << 20, align = 2ull << 20;
  uint8_t *map = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
  if (map == MAP_FAILED)
    return 0;
  uint8_t *host = (uint8_t *)(uintptr_t)bench_align_up((uintptr_t)map, align);
  if (huge)
    madvise(host, size, MADV_HUGEPAGE);
  memset(host, 0x3c, size);
  double best = 0;
  struct host_read h;
  const bool reading = busy && host_read_start(&h, busy, threads, true);
  if (vkrt_host_register(app, host, size, NULL, NULL, NULL) == VKRT_OK) {
    best = tool_pinned_rate(app, host, size, devices) * 1e-9;
    vkrt_host_unregister(app, host);
  }
  if (reading)
    host_read_stop(&h);
  munmap(map, size + align);
  return best;
}

static void bar(void *user, uint64_t done, uint64_t total) {
  const char *label = user;
  if (!label)
    return;
  fprintf(stderr, "\r%-8s %5.1f%%%s", label, total ? (double)done * 100 / (double)total : 100.0,
          done == total ? "\r                \r" : "");
}

/* Rows split: a device's run of the file in pieces of at most this many bytes, one buffer
 * each (a device's buffers have a size limit: 4 GiB on NVIDIA). */
#define PIECE_BYTES (1ull << 30)
#define MAX_PIECES 256

/* The ranges and their buffers: an equal run per device (in pieces), or each device's column
 * block of every row. */
static vkrt_load_range *make_ranges(const struct load_opts *o, vkrt_appliance *app, uint32_t n,
                                    uint64_t size, vkrt_buffer **dst, uint32_t *count,
                                    uint64_t *bytes) {
  vkrt_load_range *r = calloc(MAX_PIECES, sizeof(*r));
  *bytes = 0;
  *count = 0;
  for (uint32_t d = 0; r && d < n; d++) {
    uint64_t begin, end, rows = 1, pitch = 0;
    if (o->columns) {
      rows = size / o->pitch, pitch = o->pitch;
      begin = o->pitch * d / n, end = o->pitch * (d + 1) / n;
    } else {
      begin = size * d / n, end = size * (d + 1) / n;
    }
    uint64_t at = begin;
    do { /* one piece at least, an empty one for a device with nothing to load */
      const uint64_t len = o->columns ? end - begin : BENCH_MIN(end - at, PIECE_BYTES);
      if (*count == MAX_PIECES ||
          vkrt_buffer_create(app, d, len * rows != 0 ? len * rows : 1, VKRT_BUFFER_DEVICE_LOCAL,
                             &dst[*count]) != VKRT_OK) {
        fprintf(stderr, "vkrt-bench upload: %s\n", *count == MAX_PIECES ? "too many pieces"
                                                                         : vkrt_last_error(app));
        free(r);
        return NULL;
      }
      r[*count] = (vkrt_load_range){.file_offset = at, .size = len, .dst = dst[*count],
                                    .rows = rows, .file_pitch = pitch, .dst_pitch = len};
      ++*count;
      *bytes += len * rows;
      at += len;
    } while (!o->columns && at < end);
  }
  return r;
}

struct yardsticks {
  double direct_cold, direct_warm, buffered, host_read, pinned, pinned_huge, pinned_busy,
      pinned_all; /* every device of the load at once (0: one device) */
  uint32_t host_threads;
};

static void print_case(const struct load_opts *o, vkrt_load_path p, bool cold, double best,
                       const vkrt_load_info *info, const struct yardsticks *y, bool first,
                       const double *each, int iters) {
  const double dd = cold ? y->direct_cold : y->direct_warm;
  const double ms = 1e-6, busy = info->ns && info->threads
                                     ? (double)info->read_busy_ns / ((double)info->ns * info->threads)
                                     : 0;
  if (o->json) {
    printf("%s\n    {\"path\": \"%s\", \"took\": \"%s\", \"cache\": \"%s\", \"resident\": %.3f, "
           "\"gbps\": %.3f, \"vs_pinned\": %.3f, \"vs_pinned_all\": %.3f, \"vs_direct_read\": %.3f, "
           "\"threads\": %u, "
           "\"chunk_bytes\": %" PRIu64 ", \"chunks\": %u, \"chunk_fills\": %u, \"dma_regions\": %"
           PRIu64 ", \"packed_bytes\": %" PRIu64 ", \"packed_while_reading_bytes\": %" PRIu64
           ", \"row_region_bytes\": %" PRIu64 ", \"row_image_bytes\": %" PRIu64 ", "
           "\"read_bytes\": %" PRIu64 ", \"setup_ms\": %.3f, \"import_ms\": %.3f, \"read_busy\": "
           "%.3f, \"wait_dma_ms\": %.3f, \"wait_read_ms\": %.3f, "
           "\"tail_ms\": %.3f, \"release_ms\": %.3f}", first ? "" : ",", vkrt_load_path_str(p),
           vkrt_load_path_str(info->path[0]), cold ? "cold" : "warm", info->resident, best,
           y->pinned > 0 ? best / y->pinned : 0, y->pinned_all > 0 ? best / y->pinned_all : 0,
           dd > 0 ? best / dd : 0, info->threads, info->pinned_chunk_bytes, info->pinned_chunks, info->chunk_fills, info->copies,
           info->gathered_bytes, info->packed_while_reading_bytes, info->row_region_bytes,
           info->row_image_bytes, info->read_bytes,
           (double)info->setup_ns * ms, (double)info->import_ns * ms, busy,
           (double)info->wait_dma_ns * ms, (double)info->wait_read_ns * ms,
           (double)info->tail_ns * ms, (double)info->release_ns * ms);
    return;
  }
  printf("  %-6s %s (dev0 took %s, page cache %3.0f%%): %7.2f GB/s = %.2f x pinned",
         vkrt_load_path_str(p), cold ? "cold" : "warm", vkrt_load_path_str(info->path[0]),
         info->resident < 0 ? -1.0 : info->resident * 100, best,
         y->pinned > 0 ? best / y->pinned : 0);
  if (y->pinned_all > 0)
    printf(" (%.2f x pinned into every device at once)", best / y->pinned_all);
  printf(", %.2f x the O_DIRECT read\n", dd > 0 ? best / dd : 0);
  if (iters > 1) {
    printf("         each load:");
    for (int i = 0; i < iters; i++)
      printf(" %.2f", each[i]);
    printf(" GB/s (the first into buffers %s)\n",
           o->touch ? "the GPU filled once before" : "never written");
  }
  if (info->pinned_chunks)
    printf("         %u threads, %u fills of %" PRIu64 " KiB (ring of %u), %" PRIu64 " DMA "
           "regions, %.1f MiB of narrow rows by 2D copies into row images (%u ranges), %.1f MiB "
           "packed (%.1f by the readers as they read), %.1f MiB in regions of their own; setup %.1f "
           "ms (page-cache check %.1f), chunk imports %.1f ms, readers busy %.0f%%, waits for the "
           "DMA %.1f ms (summed), for reads %.1f ms, tail %.1f ms, release %.1f ms\n",
           info->threads,
           info->chunk_fills, info->pinned_chunk_bytes >> 10, info->pinned_chunks, info->copies,
           (double)info->row_image_bytes / (1 << 20), info->row_images,
           (double)info->gathered_bytes / (1 << 20),
           (double)info->packed_while_reading_bytes / (1 << 20),
           (double)info->row_region_bytes / (1 << 20),
           (double)info->setup_ns * ms, (double)info->resident_ns * ms,
           (double)info->import_ns * ms, busy * 100,
           (double)info->wait_dma_ns * ms, (double)info->wait_read_ns * ms,
           (double)info->tail_ns * ms, (double)info->release_ns * ms);
  printf("         why: %s\n", info->reason[0]);
}

static int run(const struct load_opts *o) {
  struct stat st;
  if (stat(o->file, &st) != 0 || st.st_size <= 0) {
    fprintf(stderr, "vkrt-bench upload: --file %s: %s\n", o->file,
            errno ? strerror(errno) : "empty");
    return 1;
  }
  const uint64_t size = (uint64_t)st.st_size;
  vkrt_options opts;
  vkrt_options_initialize(&opts);
  opts.device_count = o->devices;
  vkrt_appliance *app = bench_open(&opts);
  /* The knobs are the lab's: without it a load runs with the board's (each row says them). */
  vkrt_lab_load k = {0};
  if (IS_ENABLED(CONFIG_VKRT_LAB) && (vkrt_lab_load_set(app, &o->knobs) != VKRT_OK ||
                                      vkrt_lab_load_get(app, &k) != VKRT_OK)) {
    fprintf(stderr, "vkrt-bench upload: %s\n", vkrt_last_error(app));
    vkrt_close(app);
    return 2;
  }
  const uint32_t n = vkrt_device_count(app);
  vkrt_buffer *dst[MAX_PIECES] = {0};
  uint32_t count = 0;
  uint64_t bytes = 0;
  vkrt_load_range *ranges = make_ranges(o, app, n, size, dst, &count, &bytes);
  int rc = ranges ? 0 : 1;
  /* --touch: every destination written once by its GPU before the first load, so the first
     load does not meet device memory never written. */
  for (uint32_t i = 0; ranges && o->touch && i < count && rc == 0; i++)
    if (vkrt_cmd_fill(dst[i], 0, vkrt_buffer_size(dst[i]) & ~(uint64_t)3, 0x5a5a5a5au) != VKRT_OK)
      rc = 1;
  for (uint32_t d = 0; ranges && o->touch && d < n && rc == 0; d++)
    if (vkrt_finish(app, d) != VKRT_OK)
      rc = 1;
  if (rc && ranges)
    fprintf(stderr, "vkrt-bench upload: --touch: %s\n", vkrt_last_error(app));
  struct yardsticks y = {0};
  const bool can_drop = o->cold && drop_caches();
  if (o->cold && !can_drop)
    fprintf(stderr, "vkrt-bench upload: cannot drop the page cache (not root?): warm only\n");
  if (ranges) {
    y.direct_cold = can_drop && !o->no_disk ? read_through(o->file, true) : 0;
    y.direct_warm = o->no_disk ? 0 : read_through(o->file, true);
    /* and the file is in the page cache now */
    y.buffered = o->no_disk ? 0 : read_through(o->file, false);
    y.host_threads = k.threads ? k.threads : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
    y.host_read = host_read_rate(o->file, y.host_threads);
    y.pinned = pinned_rate(app, 1, false, NULL, 0);
    y.pinned_huge = pinned_rate(app, 1, true, NULL, 0);
    y.pinned_busy = pinned_rate(app, 1, false, o->file, y.host_threads);
    y.pinned_all = n > 1 ? pinned_rate(app, n, false, NULL, 0) : 0;
  }
  if (ranges && o->json)
    printf("{\"bench\": \"upload-file\", \"file\": \"%s\", \"size_bytes\": %" PRIu64 ", "
           "\"devices\": %u, \"split\": \"%s\", \"load_bytes\": %" PRIu64 ", \"direct_read_gbps\": "
           "%.3f, \"direct_read_cold_gbps\": %.3f, \"buffered_read_gbps\": %.3f, "
           "\"host_read_gbps\": %.3f, \"host_read_threads\": %u, \"pinned_huge_gbps\": %.3f, "
           "\"pinned_while_reading_gbps\": %.3f, \"pinned_all_devices_gbps\": %.3f, "
           "\"pinned_h2d_gbps\": %.3f, \"threads\": %u, \"chunk_bytes\": %" PRIu64 ", \"chunks\": "
           "%u, \"block_bytes\": %" PRIu64 ", \"gather_below\": %" PRIu64 ", \"pack\": \"%s\", "
           "\"cases\": [",
           o->file, size, n, o->columns ? "columns" : "rows", bytes, y.direct_warm, y.direct_cold,
           y.buffered, y.host_read, y.host_threads, y.pinned_huge, y.pinned_busy, y.pinned_all, y.pinned,
           k.threads, k.chunk_bytes, k.chunks, k.block_bytes,
           k.gather_below, k.no_gather ? "none" : k.pack_after_read ? "after-read" : "while-reading");
  else if (ranges)
    printf("vkrt-bench upload --file %s: %.1f MiB over %u device(s), split %s (%.1f MiB "
           "loaded); O_DIRECT read (dd iflag=direct, 1 thread) %.2f GB/s (cold %.2f GB/s); "
           "buffered read (1 thread) %.2f GB/s; page cache to memory, no DMA (%u threads, 4 "
           "MiB preads) %.2f GB/s; pinned host-to-device (256 MiB registered, dev0) %.2f "
           "GB/s (huge pages %.2f, while %u threads pread the file %.2f)", o->file,
           (double)size / (1 << 20), n, o->columns ? "columns" : "rows",
           (double)bytes / (1 << 20), y.direct_warm, y.direct_cold, y.buffered, y.host_threads,
           y.host_read, y.pinned, y.pinned_huge, y.host_threads, y.pinned_busy);
  if (ranges && !o->json && y.pinned_all > 0)
    printf("; into all %u devices at once %.2f GB/s", n, y.pinned_all);
  if (ranges && !o->json)
    printf("\n");
  if (ranges && !o->json && IS_ENABLED(CONFIG_VKRT_LAB))
    printf("  knobs: %u threads (one retires chunks), chunks of %" PRIu64 " KiB x %u, blocks of %" PRIu64
           " KiB, rows under %" PRIu64 " bytes %s%s\n", k.threads, k.chunk_bytes >> 10,
           k.chunks, k.block_bytes >> 10, k.gather_below,
           k.no_gather || k.no_row_images ? "" : "by 2D copies into row images where the device "
                                                 "allows, else ",
           k.no_gather         ? "one DMA region each (--no-gather)"
           : k.pack_after_read ? "packed by the host once the chunk is read (--pack-after-read)"
                               : "packed by the host as each block is read");
  bool first = true;
  for (int cold = 0; ranges && cold < (can_drop ? 2 : 1) && rc == 0; cold++) {
    for (vkrt_load_path p = VKRT_LOAD_PATH_AUTO; p < VKRT_LOAD_PATH_COUNT && rc == 0; p++) {
      if (!o->want[p])
        continue;
      double best = 0, each[64] = {0};
      vkrt_load_info info, best_info;
      memset(&best_info, 0, sizeof(best_info));
      for (int i = 0; i < (cold ? 1 : o->iters); i++) {
        if (cold)
          drop_caches();
        const bool tty = o->progress && isatty(STDERR_FILENO);
        /* --serial: each device's ranges (made in device order) in a load of their own */
        double t_begin = bench_now_s();
        uint64_t load_bytes = 0;
        vkrt_load_info first_load; /* --serial: dev0's load, whose path the line names */
        for (uint32_t from = 0, end; from < count && rc == 0; from = end) {
          end = o->serial ? from + 1 : count;
          while (o->serial && end < count &&
                 vkrt_buffer_device(ranges[end].dst) == vkrt_buffer_device(ranges[from].dst))
            end++;
          if (vkrt_load_file(app, o->file, -1, ranges + from, end - from, p, bar,
                             tty ? (void *)vkrt_load_path_str(p) : NULL, &info) != VKRT_OK) {
            fprintf(stderr, "vkrt-bench upload: %s\n", vkrt_last_error(app));
            rc = 1;
          }
          if (from == 0)
            first_load = info;
          load_bytes += info.bytes;
        }
        if (rc)
          break;
        if (o->serial) {
          info = first_load;
          info.bytes = load_bytes;
          info.ns = (uint64_t)((bench_now_s() - t_begin) * 1e9);
        }
        const double r = (double)info.bytes / (double)info.ns;
        each[i] = r;
        if (r > best) {
          best = r;
          best_info = info;
        }
      }
      if (rc == 0)
        print_case(o, p, cold, best, &best_info, &y, first, each, cold ? 1 : o->iters);
      first = false;
    }
  }
  if (ranges && o->json)
    printf("\n  ]}\n");
  free(ranges);
  for (uint32_t i = 0; i < MAX_PIECES; i++)
    vkrt_buffer_destroy(dst[i]);
  vkrt_close(app);
  return rc;
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: vkrt-bench upload --file F [--path P[,P...]] [--devices N] [--iters N]\n"
          "                         [--cold] [--split rows|columns] [--pitch BYTES]\n"
          "                         [--threads N] [--chunk SIZE] [--chunks N] [--block SIZE]\n"
          "                         [--gather-below SIZE] [--no-gather] [--pack-after-read]\n"
          "                         [--submit-batch N]\n"
          "                         [--no-row-images]\n"
          "                         [--json] [--no-progress]\n"
          "                         [--no-disk] [--serial] [--touch]\n"
          "  --path      auto, mapped (or import), read, direct, memcpy, all (default all)\n"
          "  --devices   the appliance's first N devices (default the board's)\n"
          "  --iters     warm loads per path; the best is reported (default 3)\n"
          "  --cold      also with the page cache dropped before each load (root)\n"
          "  --no-disk   skip the one-thread O_DIRECT and buffered read yardsticks (the x disk\n"
          "              ratios print 0; the caller has put the file in the page cache)\n"
          "  --touch     every destination written once by its GPU before the first load\n"
          "  --serial    one vkrt_load_file per device, one after the other (devices that\n"
          "              share a GPU's copy engine), timed together\n"
          "  --split     rows: an equal run of the file per device (default); columns: each\n"
          "              device the d-th column block of every --pitch-byte row (default 28672)\n"
          "  --threads, --chunk, --chunks, --block, --gather-below, --no-gather,\n"
          "  --submit-batch (chunks per vkQueueSubmit): the load's\n"
          "              knobs (vkrt_lab_load: a build with CONFIG_VKRT_LAB; default the\n"
          "              board's)\n"
          "  --pack-after-read  the narrow rows packed once their whole chunk is read (the\n"
          "              submitting thread and the readers), not by each reader right after\n"
          "              its block (the default): the two compared in one build\n"
          "  --no-row-images  the narrow rows packed by the host even where a row image\n"
          "              (one 2D copy per range and chunk) could take them\n");
  return f == stderr ? 2 : 0;
}

static bool parse_paths(const char *text, bool *want) {
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", text);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    bool found = !strcasecmp(t, "all") || !strcasecmp(t, "import");
    if (!strcasecmp(t, "all"))
      for (int p = 0; p < VKRT_LOAD_PATH_COUNT; p++)
        want[p] = true;
    if (!strcasecmp(t, "import"))
      want[VKRT_LOAD_PATH_MAPPED] = true;
    for (int p = 0; p < VKRT_LOAD_PATH_COUNT; p++)
      if (!strcasecmp(t, vkrt_load_path_str((vkrt_load_path)p)))
        want[p] = found = true;
    if (!found)
      return false;
  }
  return true;
}

int bench_load_file(int argc, char **argv) {
  struct load_opts o = {.iters = 3, .progress = true, .pitch = 28672};
  static const char *const names[] = {"file", "path", "devices", "iters", "split", "pitch",
                                      "threads", "chunk", "chunks", "block", "gather-below",
                                      "submit-batch"};
  bool any_path = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--cold") || !strcmp(a, "--json") || !strcmp(a, "--no-progress") ||
        !strcmp(a, "--no-gather") || !strcmp(a, "--no-disk") || !strcmp(a, "--serial") ||
        !strcmp(a, "--pack-after-read") || !strcmp(a, "--touch") ||
        !strcmp(a, "--no-row-images")) {
      o.touch |= !strcmp(a, "--touch");
      o.no_disk |= !strcmp(a, "--no-disk");
      o.serial |= !strcmp(a, "--serial");
      o.cold |= !strcmp(a, "--cold");
      o.json |= !strcmp(a, "--json");
      o.progress &= strcmp(a, "--no-progress") != 0;
      o.knobs.no_gather |= !strcmp(a, "--no-gather");
      o.knobs.pack_after_read |= !strcmp(a, "--pack-after-read");
      o.knobs.no_row_images |= !strcmp(a, "--no-row-images");
      o.knobs_given |= !strcmp(a, "--no-gather") || !strcmp(a, "--pack-after-read") ||
                       !strcmp(a, "--no-row-images");
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
      return usage(stdout);
    int which = -1;
    for (int k = 0; k < (int)(sizeof(names) / sizeof(names[0])); k++)
      if (!strncmp(a, "--", 2) && !strcmp(a + 2, names[k]))
        which = k;
    if (which < 0 || i + 1 == argc)
      return usage(stderr);
    const char *v = argv[++i];
    uint64_t x = 0;
    const bool size_ok = bench_parse_size(v, &x);
    switch (which) {
    case 0: o.file = v; break;
    case 1: any_path = true; if (!parse_paths(v, o.want)) return usage(stderr); break;
    case 2: o.devices = (uint32_t)x; break;
    case 3: o.iters = (int)x; break;
    case 4:
      if (strcmp(v, "rows") && strcmp(v, "columns"))
        return usage(stderr);
      o.columns = !strcmp(v, "columns");
      break;
    case 5: o.pitch = x; break;
    case 6: o.knobs.threads = (uint32_t)x; o.knobs_given = true; break;
    case 7: o.knobs.chunk_bytes = x; o.knobs_given = true; break;
    case 8: o.knobs.chunks = (uint32_t)x; o.knobs_given = true; break;
    case 9: o.knobs.block_bytes = x; o.knobs_given = true; break;
    case 10: o.knobs.gather_below = x; o.knobs_given = true; break;
    default: o.knobs.submit_batch = (uint32_t)x; o.knobs_given = true; break;
    }
    if (which >= 2 && which != 4 && !size_ok)
      return usage(stderr);
  }
  if (!any_path)
    parse_paths("all", o.want);
  if (!o.file || o.iters < 1 || o.iters > 64 || o.pitch == 0 || o.devices > VKRT_MAX_DEVICES)
    return usage(stderr);
  if (o.knobs_given && !IS_ENABLED(CONFIG_VKRT_LAB)) {
    fprintf(stderr, "vkrt-bench upload: the load's knobs need a build with the lab "
            "(make <board>_defconfig lab.config)\n");
    return 2;
  }
  return run(&o);
}
