/* vkrt_load_file on lavapipe with validation: every path (mapped under each import policy:
 * imported, pre-staged, staged; read and memcpy through pinned chunks, imported by every
 * device or host-visible per device; direct) puts the file's exact bytes on every device,
 * for contiguous tensors longer than many chunks, small ones at odd offsets, the same bytes
 * on every device, a 2-D column slice and the column blocks of a weight split over the
 * devices (narrow rows packed for the DMA by the readers as they read, on every path, and
 * once each chunk is read, the knob's other order; rows straddling blocks and chunks); the
 * path each device took and who packed are asserted (info and upload counters) as well as
 * the bytes; each needed byte is read once; bad ranges, a
 * file truncated mid-load and every failing allocation of a load fail cleanly with nothing
 * leaked (counting allocator, pinned memory, imported chunks) and nothing written by a
 * refused call; progress is monotone and complete; AUTO sees a warm file and a cold one; a
 * load whose helper threads cannot start completes on the calling thread alone. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "../common/vk_test.h"
#include "appliance/appliance.h"
#include "vkrt/vkrt_lab.h"

/* pthread_create refused (EAGAIN) while refuse_threads is set, so a load's helper threads
 * cannot start; the real one otherwise. Not under the sanitizers, whose own pthread_create
 * this would hide. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define REFUSE_THREADS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define REFUSE_THREADS 0
#endif
#endif
#ifndef REFUSE_THREADS
#define REFUSE_THREADS 1
static atomic_bool refuse_threads;
int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                   void *arg) {
  if (atomic_load(&refuse_threads))
    return EAGAIN;
  int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
  return real ? real(thread, attr, fn, arg) : ENOSYS;
}
#endif
static void refuse_threads_set(bool on) {
#if REFUSE_THREADS
  atomic_store(&refuse_threads, on);
#else
  (void)on;
#endif
}

#define KIB (1u << 10)
#define MIB (1u << 20)
#define FILE_SIZE (5 * MIB + 4099) /* several staging slots, not a multiple of a block */
#define RANGES_PER_DEVICE 7

/* A random file under /var/tmp (a disk file system, unlike a tmpfs /tmp, so O_DIRECT
 * usually opens) and its bytes. */
struct test_file {
  char path[256];
  uint8_t *bytes;
  size_t size;
};

static void file_create(struct test_file *f, size_t size, uint64_t *seed) {
  memset(f, 0, sizeof(*f));
  snprintf(f->path, sizeof(f->path), "/var/tmp/vkrt-load-XXXXXX");
  int fd = mkstemp(f->path);
  assert_true(fd >= 0);
  f->bytes = malloc(size);
  assert_non_null(f->bytes);
  vkt_fill_random(f->bytes, size, seed);
  assert_int_equal(write(fd, f->bytes, size), (ssize_t)size);
  close(fd);
  f->size = size;
}

/* A fresh random file of FILE_SIZE bytes (seeded per test). */
static void file_fresh(struct test_file *f) {
  uint64_t seed = vkt_seed(0);
  file_create(f, FILE_SIZE, &seed);
}

static void file_destroy(struct test_file *f) {
  unlink(f->path);
  free(f->bytes);
}

/* Whether this file system takes O_DIRECT (the direct path's expectation). */
static bool direct_opens(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECT);
  if (fd < 0)
    return false;
  close(fd);
  return true;
}

/* Per device: a contiguous run longer than many pinned chunks at an odd offset, three small
 * tensors (one the same bytes on every device), a 2-D column slice (rows of 3000 bytes at
 * pitch 7001 from the file, 4096 on the device), the device's column block of a "weight"
 * every device splits (rows of 6000 / devices bytes, contiguous on the device: packed for
 * the DMA) and a tail ending at the last byte of the file. Offsets differ per device. */
struct plan {
  vkrt_load_range r[VKRT_MAX_DEVICES * RANGES_PER_DEVICE];
  uint32_t count;
  vkrt_buffer *buf[VKRT_MAX_DEVICES];
  uint64_t buf_size;
  uint64_t total;
};

#define SPLIT_PITCH 6000
#define SPLIT_ROWS 100

static void plan_make(vkrt_appliance *app, const struct test_file *f, struct plan *p) {
  memset(p, 0, sizeof(*p));
  p->buf_size = 4 * MIB;
  const uint32_t n = vkrt_device_count(app);
  for (uint32_t d = 0; d < n; d++) {
    vkt_check(app, vkrt_buffer_create(app, d, p->buf_size, VKRT_BUFFER_DEVICE_LOCAL, &p->buf[d]));
    const uint64_t shift = 131 * d, width = SPLIT_PITCH / n;
    const vkrt_load_range rs[RANGES_PER_DEVICE] = {
        {.file_offset = 17 + shift, .size = 2 * MIB + 333, .dst = p->buf[d], .dst_offset = 8},
        {.file_offset = 3 * MIB + 1 + shift, .size = 5, .dst = p->buf[d], .dst_offset = 3 * MIB},
        {.file_offset = 4096 + shift, .size = 4096, .dst = p->buf[d], .dst_offset = 3 * MIB + 64},
        {.file_offset = 2 * MIB + 7, .size = 70001, .dst = p->buf[d],
         .dst_offset = 3 * MIB + 8192},
        {.file_offset = 4 * MIB + 5 + shift, .size = 3000, .dst = p->buf[d],
         .dst_offset = 2 * MIB + 4096, .rows = 100, .file_pitch = 7001, .dst_pitch = 4096},
        {.file_offset = MIB + 300 + d * width, .size = width, .dst = p->buf[d],
         .dst_offset = 3 * MIB + 256 * KIB, .rows = SPLIT_ROWS, .file_pitch = SPLIT_PITCH,
         .dst_pitch = width},
        {.file_offset = f->size - 9000, .size = 9000, .dst = p->buf[d],
         .dst_offset = 4 * MIB - 9000},
    };
    for (int i = 0; i < RANGES_PER_DEVICE; i++) {
      p->r[p->count++] = rs[i];
      p->total += rs[i].size * (rs[i].rows > 1 ? rs[i].rows : 1);
    }
  }
}

static void plan_free(struct plan *p) {
  for (uint32_t d = 0; d < VKRT_MAX_DEVICES; d++)
    vkrt_buffer_destroy(p->buf[d]);
}

/* What buffer d must hold: poison outside the ranges, the file's bytes inside. */
static void expected_buffer(const struct test_file *f, const struct plan *p, uint32_t d,
                            uint8_t *out) {
  vkt_poison(out, p->buf_size);
  for (uint32_t i = 0; i < p->count; i++) {
    const vkrt_load_range *r = &p->r[i];
    if (r->dst != p->buf[d])
      continue;
    const uint64_t rows = r->rows > 1 ? r->rows : 1;
    for (uint64_t y = 0; y < rows; y++)
      memcpy(out + r->dst_offset + y * r->dst_pitch, f->bytes + r->file_offset + y * r->file_pitch,
             r->size);
  }
}

static void poison_buffers(vkrt_appliance *app, const struct plan *p) {
  uint8_t *poison = malloc(p->buf_size);
  assert_non_null(poison);
  vkt_poison(poison, p->buf_size);
  for (uint32_t d = 0; d < vkrt_device_count(app); d++)
    vkt_check(app, vkrt_upload(p->buf[d], 0, poison, p->buf_size));
  free(poison);
}

static void expect_buffers(vkrt_appliance *app, const struct test_file *f, const struct plan *p,
                           bool loaded) {
  uint8_t *want = malloc(p->buf_size), *got = malloc(p->buf_size);
  assert_non_null(want);
  assert_non_null(got);
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    if (loaded)
      expected_buffer(f, p, d, want);
    else
      vkt_poison(want, p->buf_size);
    memset(got, 0x5a, p->buf_size);
    vkt_check(app, vkrt_download(got, p->buf[d], 0, p->buf_size));
    if (memcmp(got, want, p->buf_size) != 0) {
      uint64_t i = 0;
      while (got[i] == want[i])
        i++;
      fail_msg("dev%u: bytes differ at %llu: got 0x%02x want 0x%02x", d, (unsigned long long)i,
               got[i], want[i]);
    }
  }
  free(want);
  free(got);
}

struct progress_seen {
  uint64_t last, total, calls;
};

static void progress_check(void *user, uint64_t done, uint64_t total) {
  struct progress_seen *p = user;
  assert_true(done <= total);
  assert_true(done >= p->last);
  assert_true(p->total == 0 || p->total == total);
  p->last = done;
  p->total = total;
  p->calls++;
}

/* With the lab, pinned chunks far smaller than the file: many chunk fills through a ring of
 * three, reads of 64 KiB handed to three threads, so slots are reused while others are read
 * and DMA'd. (Without it the board's chunks hold this file whole.) */
#define SMALL_CHUNK (256 * KIB)
#define SMALL_CHUNKS 3

struct run_opts {
  uint32_t policy_plus_one;
  uint32_t fault_mask, fault_devices;
  bool default_knobs;   /* the Kconfig chunks (one chunk for this file) */
  bool no_gather;
  bool pack_after_read; /* narrow rows packed once the chunk is read, not by the readers */
  bool row_images;      /* narrow rows by row images where the device allows (with the lab's
                           knobs; without them always so) */
  uint32_t chunks;      /* the ring's chunks with the lab's knobs (0: SMALL_CHUNKS) */
  uint32_t submit_batch; /* chunks per submission (the lab's knob; 0: each chunk) */
};

static uint32_t ring_chunks(const struct run_opts *ro) {
  return ro->chunks ? ro->chunks : SMALL_CHUNKS;
}

static vkrt_appliance *open_with(const struct run_opts *ro, vkt_counting *counting) {
  vkrt_options o;
  vkt_options(&o);
  o.faults.import_policy_override = ro->policy_plus_one;
  o.faults.mask = ro->fault_mask;
  o.faults.device_mask = ro->fault_devices;
  if (counting)
    o.allocator = vkt_counting_allocator(counting);
  vkrt_appliance *app = vkt_open(&o);
  if (IS_ENABLED(CONFIG_VKRT_LAB) && !ro->default_knobs) {
    const vkrt_lab_load knobs = {.threads = 3, .chunk_bytes = SMALL_CHUNK,
                                 .chunks = ring_chunks(ro), .block_bytes = 64 * KIB,
                                 .no_gather = ro->no_gather,
                                 .pack_after_read = ro->pack_after_read,
                                 .no_row_images = !ro->row_images,
                                 .submit_batch = ro->submit_batch};
    vkt_check(app, vkrt_lab_load_set(app, &knobs));
  }
  return app;
}

/* Small chunks in force (the lab's knobs). */
static bool small(const struct run_opts *ro) {
  return IS_ENABLED(CONFIG_VKRT_LAB) && !ro->default_knobs;
}

/* Nothing of a load left (the lab's view of the registry): no pinned chunk memory, no
 * imported chunk, no region. */
static void expect_released(vkrt_appliance *app) {
  if (!IS_ENABLED(CONFIG_VKRT_LAB))
    return;
  vkrt_lab_import t;
  vkt_check(app, vkrt_lab_import_get(app, &t));
  assert_int_equal(t.regions, 0);
  assert_int_equal(t.live_chunks, 0);
  assert_int_equal(t.load_pinned_bytes, 0);
}

/* Whether device d imports host memory here (else it takes host-visible chunks). */
static bool imports(const struct run_opts *ro, uint32_t d) {
  const bool hidden = (ro->fault_mask & VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST) &&
                      (!ro->fault_devices || (ro->fault_devices & (1u << d)));
  return !hidden && ro->policy_plus_one != 1 + VKRT_IMPORT_POLICY_STAGING_ONLY;
}

/* Whether device d's narrow rows are packed by the host: it imports and the knobs do not
 * say no_gather. */
static bool packs(const struct run_opts *ro, uint32_t d) {
  return imports(ro, d) && !(ro->no_gather && IS_ENABLED(CONFIG_VKRT_LAB));
}

/* One forced path: the bytes on every device, the path each device reports, the copies the
 * upload counters saw, the progress, the structure of the pinned-chunk paths. */
static vkrt_load_info run_path(const struct test_file *f, const struct run_opts *ro,
                               vkrt_load_path force, vkrt_load_path want_path,
                               vkrt_import_path want_import) {
  vkrt_appliance *app = open_with(ro, NULL);
  struct plan p;
  plan_make(app, f, &p);
  poison_buffers(app, &p);
  vkrt_upload_counters before, after;
  vkt_check(app, vkrt_upload_counters_get(app, &before));
  struct progress_seen seen = {0};
  vkrt_load_info info;
  vkt_check(app, vkrt_load_file(app, f->path, -1, p.r, p.count, force, progress_check, &seen,
                                &info));
  vkt_check(app, vkrt_upload_counters_get(app, &after));
  assert_int_equal(seen.last, p.total);
  assert_int_equal(seen.total, p.total);
  assert_true(seen.calls >= (small(ro) ? 2u : 1u));
  assert_int_equal(info.bytes, p.total);
  assert_int_equal(info.file_size, f->size);
  const uint32_t n = vkrt_device_count(app);
  uint64_t staged_want = 0;
  for (uint32_t d = 0; d < n; d++) {
    if (info.path[d] != want_path)
      fail_msg("dev%u: load path %s, want %s: %s", d, vkrt_load_path_str(info.path[d]),
               vkrt_load_path_str(want_path), info.reason[d]);
    if (want_path == VKRT_LOAD_PATH_MAPPED)
      assert_int_equal(info.import_path[d], want_import);
    else if (!imports(ro, d))
      staged_want += p.total / n; /* every device loads as many bytes */
  }
  /* Every byte counted on the path it took: the pinned chunks count as pre-staged (one
   * anonymous copy every device imports), a device's own host-visible chunks as staged. */
  const uint64_t staged = after.staged_bytes - before.staged_bytes;
  const uint64_t imported = after.imported_bytes - before.imported_bytes;
  const uint64_t prestaged = after.prestaged_bytes - before.prestaged_bytes;
  const bool mapped = want_path == VKRT_LOAD_PATH_MAPPED;
  assert_int_equal(staged, mapped ? (want_import == VKRT_IMPORT_PATH_STAGED ? p.total : 0)
                                  : staged_want);
  assert_int_equal(imported, mapped && want_import == VKRT_IMPORT_PATH_IMPORTED ? p.total : 0);
  assert_int_equal(prestaged, mapped ? (want_import == VKRT_IMPORT_PATH_PRESTAGED ? p.total : 0)
                                     : p.total - staged_want);
  assert_int_equal(after.copies_past_chunk, 0);
  if (!mapped) {
    /* Each needed byte read once, 4 KiB aligned, however many devices need it. */
    assert_true(info.read_bytes % 4096 == 0);
    assert_true(info.read_bytes <= (f->size + 4095) / 4096 * 4096);
    assert_true(info.read_bytes >= p.total / n);
    assert_true(info.threads >= 2);
    /* a run of chunks in each submission where the knob asks (at most half the ring) */
    uint32_t batch = 1;
    if (small(ro)) {
      assert_int_equal(info.pinned_chunk_bytes, SMALL_CHUNK);
      assert_int_equal(info.pinned_chunks, ring_chunks(ro));
      assert_true(info.chunk_fills > 2 * info.pinned_chunks); /* the ring went round */
      batch = VKRT_MAX(VKRT_MIN(ro->submit_batch, ring_chunks(ro) / 2), 1u);
    }
    assert_int_equal(info.submits, (info.chunk_fills + batch - 1) / batch);
    /* The split weight's narrow rows: packed by the host for importing devices, one DMA
     * region per row (left where the file has them in the chunk) everywhere else; where a
     * row image takes them (test_row_images), by it, the rows a chunk's edge cuts in
     * regions of their own. */
    uint64_t gathered = 0;
    for (uint32_t d = 0; d < n; d++)
      gathered += packs(ro, d) && !info.row_images ? SPLIT_PITCH / n * SPLIT_ROWS : 0;
    assert_int_equal(info.gathered_bytes, gathered);
    assert_int_equal(info.row_region_bytes + info.row_image_bytes,
                     SPLIT_PITCH / n * SPLIT_ROWS * n - gathered);
    if (small(ro) && !ro->row_images)
      assert_int_equal(info.row_images, 0);
    /* ... by each reader right after its block, unless the knob says once the chunk is
     * read. */
    const bool once_read = ro->pack_after_read && IS_ENABLED(CONFIG_VKRT_LAB);
    assert_int_equal(info.packed_while_reading_bytes, once_read ? 0 : gathered);
    assert_true(info.copies >= info.chunk_fills);
  }
  expect_buffers(app, f, &p, true);
  expect_released(app);
  plan_free(&p);
  vkt_close(app);
  return info;
}

static void test_every_path(void **state) {
  (void)state;
  struct test_file f;
  file_fresh(&f);
  const struct run_opts plain = {0}, after = {.pack_after_read = true};
  run_path(&f, &plain, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  run_path(&f, &plain, VKRT_LOAD_PATH_MEMCPY, VKRT_LOAD_PATH_MEMCPY, 0);
  run_path(&f, &after, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  run_path(&f, &after, VKRT_LOAD_PATH_MEMCPY, VKRT_LOAD_PATH_MEMCPY, 0);
  /* runs of chunks per submission: 2 of a ring of 4; 3 asked of 4, so 2 */
  const struct run_opts batch2 = {.chunks = 4, .submit_batch = 2};
  const struct run_opts batch3 = {.chunks = 4, .submit_batch = 3};
  run_path(&f, &batch2, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  run_path(&f, &batch3, VKRT_LOAD_PATH_MEMCPY, VKRT_LOAD_PATH_MEMCPY, 0);
  const struct run_opts defaults = {.default_knobs = true};
  run_path(&f, &defaults, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  /* The mapped path under each import policy; the fault makes every device refuse the file's
   * pages, so import-then-prestage pre-stages. */
  const struct run_opts refuse = {.policy_plus_one = 1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE,
                                  .fault_mask = VKRT_FAULT_REFUSE_FILE_BACKED};
  run_path(&f, &refuse, VKRT_LOAD_PATH_MAPPED, VKRT_LOAD_PATH_MAPPED, VKRT_IMPORT_PATH_PRESTAGED);
  const struct run_opts always = {.policy_plus_one = 1 + VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE};
  run_path(&f, &always, VKRT_LOAD_PATH_MAPPED, VKRT_LOAD_PATH_MAPPED, VKRT_IMPORT_PATH_PRESTAGED);
  const struct run_opts staging = {.policy_plus_one = 1 + VKRT_IMPORT_POLICY_STAGING_ONLY};
  run_path(&f, &staging, VKRT_LOAD_PATH_MAPPED, VKRT_LOAD_PATH_MAPPED, VKRT_IMPORT_PATH_STAGED);
  /* Devices that import no host memory read into host-visible chunks of their own: the
   * staging-only policy (all of them), and external_memory_host hidden on the last one. */
  run_path(&f, &staging, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  const uint32_t n = vkrt_device_count(app);
  vkt_close(app);
  const struct run_opts hidden = {.fault_mask = VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST,
                                  .fault_devices = 1u << (n - 1)};
  run_path(&f, &hidden, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  file_destroy(&f);
}

/* Whether a row of device d's column block (plan_make, n devices) crosses a multiple of
 * `boundary` of the file. The load's first extent starts at file offset 0 and holds the
 * whole block, so such a row crosses the same multiple of the stream the load cuts into
 * blocks and chunks. */
static bool split_row_crosses(uint32_t n, uint32_t d, uint64_t boundary) {
  const uint64_t width = SPLIT_PITCH / n;
  for (uint64_t y = 0; y < SPLIT_ROWS; y++) {
    const uint64_t start = MIB + 300 + d * width + y * SPLIT_PITCH;
    if (start / boundary != (start + width - 1) / boundary)
      return true;
  }
  return false;
}

/* The narrow rows of a split weight: packed by the host, they leave in far fewer DMA
 * regions than one per row; left in the chunk (no_gather), one region per row at least,
 * every one of their bytes counted as such (run_path), and the same bytes on every
 * device. Packed by the readers as they read (the default) or once each chunk is read
 * (the knob): the same regions, the same bytes, each counted as packed by whom it was;
 * rows that straddle a block and a chunk are among them. */
static void test_gather(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_LAB)); /* packing is on without the lab's knobs */
  struct test_file f;
  file_fresh(&f);
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  const uint32_t n = vkrt_device_count(app);
  vkt_close(app);
  bool block_straddle = false, chunk_straddle = false;
  for (uint32_t d = 0; d < n; d++) {
    block_straddle |= split_row_crosses(n, d, 64 * KIB); /* open_with's blocks */
    chunk_straddle |= split_row_crosses(n, d, SMALL_CHUNK);
  }
  assert_true(block_straddle);
  assert_true(chunk_straddle);
  const struct run_opts packed = {0}, rows = {.no_gather = true},
                        after = {.pack_after_read = true};
  vkrt_load_info a = run_path(&f, &packed, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  vkrt_load_info b = run_path(&f, &rows, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  vkrt_load_info c = run_path(&f, &after, VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_READ, 0);
  assert_true(b.copies >= SPLIT_ROWS);
  assert_true(b.row_region_bytes >= SPLIT_PITCH / 2 * SPLIT_ROWS);
  assert_int_equal(b.gathered_bytes, 0);
  assert_true(a.gathered_bytes >= SPLIT_PITCH / 2 * SPLIT_ROWS);
  assert_true(a.copies + SPLIT_ROWS / 2 < b.copies);
  assert_int_equal(a.packed_while_reading_bytes, a.gathered_bytes);
  assert_int_equal(c.gathered_bytes, a.gathered_bytes);
  assert_int_equal(c.packed_while_reading_bytes, 0);
  assert_int_equal(c.copies, a.copies);
  file_destroy(&f);
}

/* A weight split by columns into blocks of `width` bytes (a multiple of 4, rows `pitch`
 * apart from file offset 4096 + skew), each device's block at 64 KiB of its buffer with a
 * small range right after it; the rows (an odd count: a folded image's last row is partly
 * the next range's) are cut by the small chunks' edges. */
#define IMG_ROWS 301
static void row_image_plan(vkrt_appliance *app, uint64_t width, uint64_t pitch, uint64_t skew,
                           struct plan *p) {
  memset(p, 0, sizeof(*p));
  p->buf_size = 2 * MIB;
  const uint32_t n = vkrt_device_count(app);
  for (uint32_t d = 0; d < n; d++) {
    vkt_check(app, vkrt_buffer_create(app, d, p->buf_size, VKRT_BUFFER_DEVICE_LOCAL, &p->buf[d]));
    const vkrt_load_range block = {.file_offset = 4096 + skew + d * width, .size = width,
                                   .dst = p->buf[d], .dst_offset = 64 * KIB, .rows = IMG_ROWS,
                                   .file_pitch = pitch, .dst_pitch = width};
    const vkrt_load_range after = {.file_offset = 3 * MIB + 8 * d, .size = 5000, .dst = p->buf[d],
                                   .dst_offset = 64 * KIB + IMG_ROWS * width};
    p->r[p->count++] = block;
    p->r[p->count++] = after;
    p->total += IMG_ROWS * width + after.size;
  }
}

/* Whether device d can make a row image of IMG_ROWS rows of `width` bytes: the fewest rows
 * whose bytes are a multiple of its row-image pitch (at most 8) within its extents. */
static bool row_image_fits(const struct vkrt_caps *c, uint64_t width) {
  uint64_t fold = 1;
  while (c->row_image_pitch_align && fold <= 8 && fold * width % c->row_image_pitch_align)
    fold++;
  return c->row_image_pitch_align && fold <= 8 && width % 4 == 0 &&
         fold * width / 4 <= c->row_image_max_width &&
         (IMG_ROWS + fold - 1) / fold <= c->row_image_max_height;
}

/* One load of row_image_plan through pinned chunks: the bytes on every device (poison
 * around), the devices and how many of them took their block by a row image. The block is
 * 16 row-image pitches wide, and half a pitch more when `fold` (two rows an image row there). */
static vkrt_load_info row_image_run(const struct test_file *f, const struct run_opts *ro,
                                    vkrt_load_path path, uint64_t skew, bool fold,
                                    uint64_t *block_bytes, uint32_t *devices, uint32_t *imaged) {
  vkrt_appliance *app = open_with(ro, NULL);
  const uint32_t n = vkrt_device_count(app);
  *devices = n;
  uint32_t align = 8;
  for (uint32_t d = 0; d < n; d++)
    align = VKRT_MAX(align, app->sys.devices[d].caps.row_image_pitch_align);
  const uint64_t width = 16 * (uint64_t)align + (fold ? align / 2 : 0), pitch = n * width + 20;
  struct plan p;
  row_image_plan(app, width, pitch, skew, &p);
  poison_buffers(app, &p);
  vkrt_load_info info;
  vkt_check(app, vkrt_load_file(app, f->path, -1, p.r, p.count, path, NULL, NULL, &info));
  assert_int_equal(info.bytes, p.total);
  for (uint32_t d = 0; d < n; d++)
    assert_int_equal(info.path[d], path);
  *imaged = 0;
  for (uint32_t d = 0; d < n; d++) {
    const struct vkrt_caps *c = &app->sys.devices[d].caps;
    *imaged += ro->row_images && packs(ro, d) && skew % 4 == 0 && row_image_fits(c, width);
  }
  *block_bytes = IMG_ROWS * width;
  expect_buffers(app, f, &p, true);
  expect_released(app);
  plan_free(&p);
  vkt_close(app);
  return info;
}

/* Row images: the column blocks of a split weight go to every device that can make a row
 * image of them with one 2D copy per chunk (the rows a chunk's edge cuts in regions of their
 * own), nothing packed by the host, the bytes exact and the memory around them untouched,
 * whether the block is a multiple of the device's row-image pitch or two rows are (folded),
 * read, copied from the mapping or read with O_DIRECT; with the knob off the same rows are
 * packed; blocks at a file offset that is not a multiple of 4 bytes are packed too. Which
 * devices can: the capability snapshot. */
static void test_row_images(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_LAB)); /* the small chunks and the knob */
  struct test_file f;
  file_fresh(&f);
  const struct run_opts images = {.row_images = true}, packed = {0};
  uint64_t block;
  uint32_t imaged, n;
  const vkrt_load_path paths[] = {VKRT_LOAD_PATH_READ, VKRT_LOAD_PATH_MEMCPY,
                                  VKRT_LOAD_PATH_DIRECT};
  for (int run = 0; run < 6; run++) {
    const bool fold = run % 2;
    const vkrt_load_path path = paths[run / 2];
    if (path == VKRT_LOAD_PATH_DIRECT && !direct_opens(f.path))
      continue;
    vkrt_load_info a = row_image_run(&f, &images, path, 8, fold, &block, &n, &imaged);
    assert_int_equal(a.row_images, imaged);
    assert_int_equal(a.row_image_bytes + a.row_region_bytes + a.gathered_bytes, n * block);
    assert_true(a.row_region_bytes + a.gathered_bytes >= (n - imaged) * block);
    if (imaged) {
      assert_int_equal(a.gathered_bytes, 0);
      /* a region per chunk edge at most, beside one 2D copy per chunk */
      assert_true(a.row_image_bytes >=
                  imaged * block - (uint64_t)a.chunk_fills * block / IMG_ROWS);
      assert_true(a.copies < IMG_ROWS);
    } else {
      printf("test_row_images: no device here makes row images of %llu-byte rows: the "
             "packing checked alone\n", (unsigned long long)(block / IMG_ROWS));
    }
  }
  vkrt_load_info b = row_image_run(&f, &packed, VKRT_LOAD_PATH_READ, 8, true, &block, &n,
                                   &imaged);
  vkrt_load_info c = row_image_run(&f, &images, VKRT_LOAD_PATH_READ, 2, true, &block, &n,
                                   &imaged);
  const vkrt_load_info *packs_only[2] = {&b, &c};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(packs_only[i]->row_images, 0);
    assert_int_equal(packs_only[i]->row_image_bytes, 0);
    assert_int_equal(packs_only[i]->gathered_bytes + packs_only[i]->row_region_bytes, n * block);
    assert_true(packs_only[i]->gathered_bytes >= n * block / 2);
  }
  assert_int_equal(imaged, 0);
  file_destroy(&f);
}

/* The whole file read into a poisoned buffer on every device (pthread_create refused during
 * the load when `no_threads`); the bytes on every device checked, nothing left over. */
static vkrt_load_info whole_file_everywhere(bool no_threads) {
  struct test_file f;
  file_fresh(&f);
  const struct run_opts plain = {0};
  vkrt_appliance *app = open_with(&plain, NULL);
  const uint32_t n = vkrt_device_count(app);
  vkrt_buffer *buf[VKRT_MAX_DEVICES] = {0};
  vkrt_load_range r[VKRT_MAX_DEVICES];
  uint8_t *got = malloc(f.size);
  assert_non_null(got);
  vkt_poison(got, f.size);
  for (uint32_t d = 0; d < n; d++) {
    vkt_check(app, vkrt_buffer_create(app, d, f.size, VKRT_BUFFER_DEVICE_LOCAL, &buf[d]));
    vkt_check(app, vkrt_upload(buf[d], 0, got, f.size));
    r[d] = (vkrt_load_range){.file_offset = 0, .size = f.size, .dst = buf[d]};
  }
  vkrt_load_info info;
  refuse_threads_set(no_threads);
  vkrt_status s = vkrt_load_file(app, f.path, -1, r, n, VKRT_LOAD_PATH_READ, NULL, NULL, &info);
  refuse_threads_set(false);
  vkt_check(app, s);
  assert_int_equal(info.bytes, (uint64_t)f.size * n);
  assert_int_equal(info.read_bytes, (f.size + 4095) / 4096 * 4096);
  for (uint32_t d = 0; d < n; d++) {
    memset(got, 0x5a, f.size);
    vkt_check(app, vkrt_download(got, buf[d], 0, f.size));
    assert_memory_equal(got, f.bytes, f.size);
    vkrt_buffer_destroy(buf[d]);
  }
  free(got);
  expect_released(app);
  vkt_close(app);
  file_destroy(&f);
  return info;
}

/* Every device loads the whole file: it is read once, not once per device. */
static void test_read_once(void **state) {
  (void)state;
  whole_file_everywhere(false);
}

/* No helper thread of the load starts (pthread_create refused): the calling thread reads,
 * submits and waits for the chunks to retire itself, round the small ring several times. */
static void test_no_helper_threads(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_LAB) || !REFUSE_THREADS);
  vkrt_load_info info = whole_file_everywhere(true);
  assert_int_equal(info.threads, 1);
  assert_int_equal(info.pinned_chunks, SMALL_CHUNKS);
  assert_true(info.chunk_fills > 2 * info.pinned_chunks); /* the ring went round */
}

/* O_DIRECT into the pinned chunks: aligned reads, the padding never reaches a device. */
static void test_direct(void **state) {
  (void)state;
  struct test_file f;
  file_fresh(&f);
  const bool opens = direct_opens(f.path);
  const struct run_opts plain = {0};
  if (!opens) { /* the load still completes, through the page cache, saying why */
    run_path(&f, &plain, VKRT_LOAD_PATH_DIRECT, VKRT_LOAD_PATH_READ, 0);
    file_destroy(&f);
  }
  vkt_skip_if(!opens);
  run_path(&f, &plain, VKRT_LOAD_PATH_DIRECT, VKRT_LOAD_PATH_DIRECT, 0);
  file_destroy(&f);
}

/* Drops the file's pages from the page cache (written back first); false when they stay. */
static bool evict(const struct test_file *f) {
  int fd = open(f->path, O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(fdatasync(fd), 0);
  const bool done = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  close(fd);
  return done;
}

/* AUTO: a device importing file pages maps; one refusing them reads when the page cache
 * holds the file (it was just written) and reads with O_DIRECT when it does not (its pages
 * dropped); the residency it measured says which. Expectations from the capability
 * snapshot. */
static void test_auto_choice(void **state) {
  (void)state;
  struct test_file f;
  file_fresh(&f);
  const struct run_opts ro = {.policy_plus_one = 1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE};
  if (IS_ENABLED(CONFIG_VKRT_LAB)) { /* the lab knows which drivers refuse file pages */
    vkrt_appliance *app = open_with(&ro, NULL);
    bool refuses = false;
    for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
      vkrt_lab_device t;
      vkt_check(app, vkrt_lab_device_get(app, d, &t));
      refuses |= t.refuses_file_backed;
    }
    vkt_close(app);
    if (!refuses)
      run_path(&f, &ro, VKRT_LOAD_PATH_AUTO, VKRT_LOAD_PATH_MAPPED, VKRT_IMPORT_PATH_IMPORTED);
  }
  const struct run_opts refuse = {.policy_plus_one = 1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE,
                                  .fault_mask = VKRT_FAULT_REFUSE_FILE_BACKED};
  vkrt_load_info warm = run_path(&f, &refuse, VKRT_LOAD_PATH_AUTO, VKRT_LOAD_PATH_READ, 0);
  assert_true(warm.resident > 0.99);
  if (evict(&f) && direct_opens(f.path)) {
    vkrt_appliance *probe = open_with(&refuse, NULL);
    struct plan p;
    plan_make(probe, &f, &p);
    vkrt_load_info cold;
    vkt_check(probe, vkrt_load_file(probe, f.path, -1, p.r, p.count, VKRT_LOAD_PATH_AUTO, NULL,
                                    NULL, &cold));
    plan_free(&p);
    vkt_close(probe);
    if (cold.resident < 0.5) { /* the cache let the pages go */
      for (uint32_t d = 0; d < VKRT_MAX_DEVICES && cold.reason[d][0]; d++)
        if (cold.path[d] != VKRT_LOAD_PATH_DIRECT)
          fail_msg("dev%u: cold file (%.0f%% resident) took %s: %s", d, cold.resident * 100,
                   vkrt_load_path_str(cold.path[d]), cold.reason[d]);
    } else {
      print_message("the page cache kept the file after POSIX_FADV_DONTNEED; cold case not "
                    "checked\n");
    }
  }
  file_destroy(&f);
}

/* A fresh file, an appliance on a counting allocator with small chunks, and the plan. */
static vkrt_appliance *counted_open(struct test_file *f, vkt_counting *counting, struct plan *p) {
  file_fresh(f);
  const struct run_opts plain = {0};
  vkrt_appliance *app = open_with(&plain, counting);
  plan_make(app, f, p);
  return app;
}

/* A refused call writes nothing, leaks nothing and says why. */
static void expect_refused(vkrt_appliance *app, const struct test_file *f, struct plan *p,
                           const vkrt_load_range *ranges, uint32_t count, vkt_counting *counting,
                           const char *needle) {
  (void)counting; /* the driver allocates through it too: checked at close */
  vkrt_load_info info;
  vkrt_status s = vkrt_load_file(app, f->path, -1, ranges, count, VKRT_LOAD_PATH_READ, NULL,
                                 NULL, &info);
  assert_int_not_equal(s, VKRT_OK);
  if (!strstr(vkrt_last_error(app), needle))
    fail_msg("message \"%s\" lacks \"%s\"", vkrt_last_error(app), needle);
  assert_int_equal(info.bytes, 0);
  expect_buffers(app, f, p, false);
}

static void test_bad_ranges(void **state) {
  (void)state;
  struct test_file f;
  vkt_counting counting;
  struct plan p;
  vkrt_appliance *app = counted_open(&f, &counting, &p);
  poison_buffers(app, &p);
  vkrt_load_range bad[VKRT_MAX_DEVICES * RANGES_PER_DEVICE + 3];
  /* The good ranges plus one bad one last: nothing of the good ones may be written. */
  memcpy(bad, p.r, p.count * sizeof(bad[0]));
  const uint32_t n = p.count + 1;
  bad[n - 1] = (vkrt_load_range){.file_offset = f.size - 10, .size = 11, .dst = p.buf[0],
                                 .dst_offset = 3 * MIB + 512 * KIB};
  expect_refused(app, &f, &p, bad, n, &counting, "pass the end");
  bad[n - 1] = (vkrt_load_range){.file_offset = 0, .size = 100, .dst = p.buf[0],
                                 .dst_offset = p.buf_size - 99};
  expect_refused(app, &f, &p, bad, n, &counting, "outside the");
  bad[n - 1] = (vkrt_load_range){.file_offset = 0, .size = 100, .dst = p.buf[0],
                                 .dst_offset = 3 * MIB + 2};
  expect_refused(app, &f, &p, bad, n, &counting, "overlapping");
  bad[n - 1] = (vkrt_load_range){.file_offset = 0, .size = 100, .dst = p.buf[0],
                                 .dst_offset = 3 * MIB + 512 * KIB, .rows = 3, .file_pitch = 50,
                                 .dst_pitch = 100};
  expect_refused(app, &f, &p, bad, n, &counting, "pitches");
  bad[n - 1] = (vkrt_load_range){.file_offset = 0, .size = 100, .dst = NULL};
  expect_refused(app, &f, &p, bad, n, &counting, "NULL buffer");
  /* An empty range writes nothing, but its offsets must lie within the file and buffer. */
  bad[n - 1] = (vkrt_load_range){.file_offset = 0, .size = 0, .dst = p.buf[0],
                                 .dst_offset = p.buf_size + 1};
  expect_refused(app, &f, &p, bad, n, &counting, "an empty range");
  bad[n - 1] = (vkrt_load_range){.file_offset = f.size + 1, .size = 0, .dst = p.buf[0]};
  expect_refused(app, &f, &p, bad, n, &counting, "an empty range");
  /* ... and overlaps nothing (the ranges around it still may not overlap each other). */
  const uint64_t free_at = 3 * MIB + 768 * KIB; /* between the column block and the tail */
  bad[n - 1] = (vkrt_load_range){.file_offset = 0, .size = 1000, .dst = p.buf[0],
                                 .dst_offset = free_at};
  bad[n] = (vkrt_load_range){.size = 0, .dst = p.buf[0], .dst_offset = free_at + 100};
  bad[n + 1] = (vkrt_load_range){.file_offset = 0, .size = 100, .dst = p.buf[0],
                                 .dst_offset = free_at + 500};
  expect_refused(app, &f, &p, bad, n + 2, &counting, "overlapping");
  bad[n + 1] = (vkrt_load_range){.size = 0, .dst = p.r[0].dst, .dst_offset = p.r[0].dst_offset + 1};
  vkt_check(app, vkrt_load_file(app, f.path, -1, bad, n + 2, VKRT_LOAD_PATH_READ, NULL, NULL,
                                NULL));
  poison_buffers(app, &p);
  /* libvkrt's own allocations of the call failing in turn (the range tables, the plan). */
  uint32_t host_allocs = 0, vk_allocs = 0;
  vkt_check(app, vkrt_fault_arm_allocations(app, 0, 0));
  vkt_check(app, vkrt_load_file(app, f.path, -1, p.r, p.count, VKRT_LOAD_PATH_READ, NULL, NULL,
                                NULL));
  vkt_check(app, vkrt_fault_allocation_counts(app, &host_allocs, &vk_allocs));
  assert_true(host_allocs >= 1);
  poison_buffers(app, &p);
  for (uint32_t k = 1; k <= host_allocs; k++) {
    vkt_check(app, vkt_fault_arm(app, k, 0));
    expect_refused(app, &f, &p, p.r, p.count, &counting, "out of host memory");
    expect_released(app);
  }
  vkt_check(app, vkt_fault_arm(app, 0, 0));
  /* The Vulkan allocations of the call failing in turn (command pools, timelines, the chunk
   * imports, which the load's threads make at once as they start): a clear error, whatever
   * was recorded waited for, nothing leaked; an import among them. */
  uint32_t vk_failed = 0, import_failed = 0;
  for (uint32_t k = 1; k <= vk_allocs; k++) {
    vkt_check(app, vkt_fault_arm(app, 0, k));
    vkrt_status s = vkrt_load_file(app, f.path, -1, p.r, p.count, VKRT_LOAD_PATH_READ, NULL,
                                   NULL, NULL);
    vkt_check(app, vkt_fault_arm(app, 0, 0));
    if (s != VKRT_OK) {
      vk_failed++;
      if (!strstr(vkrt_last_error(app), "load"))
        fail_msg("allocation %u: message \"%s\" lacks \"load\"", k, vkrt_last_error(app));
      import_failed += strstr(vkrt_last_error(app), "import of a pinned chunk") != NULL;
    }
    expect_released(app);
  }
  assert_true(vk_allocs >= 1 && vk_failed >= 1);
  if (imports(&(struct run_opts){0}, 0) && p.count)
    assert_true(import_failed >= 1);
  poison_buffers(app, &p);
  /* A truncated file: the ranges that fitted the whole file now pass its end. */
  struct test_file cut = f;
  snprintf(cut.path, sizeof(cut.path), "%.200s.cut", f.path);
  int fd = open(cut.path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, f.bytes, f.size / 2), (ssize_t)(f.size / 2));
  close(fd);
  expect_refused(app, &cut, &p, p.r, p.count, &counting, "(truncated?)");
  unlink(cut.path);
  snprintf(cut.path, sizeof(cut.path), "%.200s.missing", f.path);
  expect_refused(app, &cut, &p, p.r, p.count, &counting, "No such file");
  plan_free(&p);
  vkt_close(app);
  assert_int_equal(atomic_load(&counting.live), 0);
  file_destroy(&f);
}

/* The file shrinks while it loads (after the first slot): the call fails with a message,
 * waits for its copies and leaks nothing. */
struct truncate_at_first {
  int fd;
  uint64_t calls;
};

static void truncate_progress(void *user, uint64_t done, uint64_t total) {
  (void)done, (void)total;
  struct truncate_at_first *t = user;
  if (t->calls++ == 0)
    assert_int_equal(ftruncate(t->fd, 2 * MIB), 0);
}

static void test_truncated_while_loading(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_LAB)); /* the board's chunks hold the file whole */
  uint64_t seed = vkt_seed(0);
  /* read, direct; narrow rows packed by the readers, not packed, packed once read */
  for (int run = 0; run < 6; run++) {
    const int direct = run & 1;
    struct test_file f;
    file_create(&f, FILE_SIZE, &seed);
    vkt_counting counting;
    const struct run_opts plain = {.no_gather = run / 2 == 1, .pack_after_read = run / 2 == 2};
    vkrt_appliance *app = open_with(&plain, &counting);
    struct plan p;
    plan_make(app, &f, &p);
    /* A complete load first: the driver's allocations for recorded command buffers stay
     * alive until they are reset, and the failing load must leave no more than that. */
    vkt_check(app, vkrt_load_file(app, f.path, -1, p.r, p.count,
                                  direct ? VKRT_LOAD_PATH_DIRECT : VKRT_LOAD_PATH_READ, NULL,
                                  NULL, NULL));
    int fd = open(f.path, O_RDWR);
    assert_true(fd >= 0);
    struct truncate_at_first t = {.fd = fd};
    vkrt_load_info info;
    vkrt_status s = vkrt_load_file(app, NULL, fd, p.r, p.count,
                                   direct ? VKRT_LOAD_PATH_DIRECT : VKRT_LOAD_PATH_READ,
                                   truncate_progress, &t, &info);
    assert_int_equal(s, VKRT_ERROR_IO);
    if (!strstr(vkrt_last_error(app), "truncated while loading"))
      fail_msg("message: %s", vkrt_last_error(app));
    assert_true(info.bytes < p.total);
    expect_released(app);
    close(fd);
    plan_free(&p);
    vkt_close(app);
    assert_int_equal(atomic_load(&counting.live), 0);
    file_destroy(&f);
  }
}

/* Every vkAllocateMemory of a load failing in turn (the pinned chunks' imports, a device's
 * own host-visible chunks after a refused import): the load either completes with the right
 * bytes (a device whose first import fails takes host-visible chunks) or fails with a
 * message; either way nothing of it is left (pinned memory, imports; the allocator's count
 * at close, with the validation layer's object leak check), and the next load is whole. */
static void test_vulkan_failures(void **state) {
  (void)state;
  struct test_file f;
  vkt_counting counting;
  struct plan p;
  vkrt_appliance *app = counted_open(&f, &counting, &p);
  uint32_t host_allocs = 0, vk_allocs = 0;
  vkt_check(app, vkrt_load_file(app, f.path, -1, p.r, p.count, VKRT_LOAD_PATH_READ, NULL, NULL,
                                NULL));
  vkt_check(app, vkrt_fault_arm_allocations(app, 0, 0));
  vkt_check(app, vkrt_load_file(app, f.path, -1, p.r, p.count, VKRT_LOAD_PATH_READ, NULL, NULL,
                                NULL));
  vkt_check(app, vkrt_fault_allocation_counts(app, &host_allocs, &vk_allocs));
  assert_true(vk_allocs >= (IS_ENABLED(CONFIG_VKRT_LAB) ? SMALL_CHUNKS : 1u)); /* per slot */
  uint32_t failed = 0;
  for (uint32_t k = 1; k <= vk_allocs; k++) {
    poison_buffers(app, &p);
    vkt_check(app, vkt_fault_arm(app, 0, k));
    vkrt_load_info info;
    vkrt_status s = vkrt_load_file(app, f.path, -1, p.r, p.count, VKRT_LOAD_PATH_READ, NULL,
                                   NULL, &info);
    vkt_check(app, vkt_fault_arm(app, 0, 0));
    if (s == VKRT_OK) {
      expect_buffers(app, &f, &p, true);
    } else {
      failed++;
      if (!strstr(vkrt_last_error(app), "VK_ERROR"))
        fail_msg("allocation %u: message: %s", k, vkrt_last_error(app));
      assert_true(info.bytes < p.total);
    }
    expect_released(app);
  }
  /* With several slots, a later slot's import failing fails the load (the first one's has a
   * fallback). */
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    assert_true(failed >= 1);
  poison_buffers(app, &p);
  vkt_check(app, vkrt_load_file(app, f.path, -1, p.r, p.count, VKRT_LOAD_PATH_READ, NULL, NULL,
                                NULL));
  expect_buffers(app, &f, &p, true);
  plan_free(&p);
  vkt_close(app);
  assert_int_equal(atomic_load(&counting.live), 0);
  file_destroy(&f);
}

int main(int argc, char **argv) {
  if (argc > 1)
    cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_path),
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_row_images),
      cmocka_unit_test(test_read_once),
      cmocka_unit_test(test_no_helper_threads),
      cmocka_unit_test(test_direct),
      cmocka_unit_test(test_auto_choice),
      cmocka_unit_test(test_bad_ranges),
      cmocka_unit_test(test_truncated_while_loading),
      cmocka_unit_test(test_vulkan_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
