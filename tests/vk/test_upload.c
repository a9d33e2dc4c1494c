/* Host weights on lavapipe with validation: every import policy uploads a real read-only
 * MAP_PRIVATE file mapping bit-identically (whole file, tensors straddling 64 KiB chunks,
 * 2-D strided), the staging ring, fault-injected fallbacks (import fails -> pre-stage,
 * pre-stage allocation fails -> staging, import-only -> clear error), the pre-stage budget,
 * argument errors, a 16-thread upload storm while another thread registers and
 * unregisters, and no leaks through a counting allocator. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/vk_test.h"
#include "vkrt/vkrt_lab.h"

#define KIB (1u << 10)
#define MIB (1u << 20)
#define CHUNK_CAP (64 * KIB)

/* A random file under /tmp, mapped PROT_READ / MAP_PRIVATE, plus its bytes read with
 * read() (the reference, independent of the mapping). */
struct weights_file {
  char path[64];
  uint8_t *map;
  uint8_t *bytes;
  size_t size;
};

static void file_create(struct weights_file *f, size_t size, uint64_t *seed) {
  memset(f, 0, sizeof(*f));
  snprintf(f->path, sizeof(f->path), "/tmp/vkrt-upload-XXXXXX");
  int fd = mkstemp(f->path);
  assert_true(fd >= 0);
  unlink(f->path); /* the fd and then the mapping keep it; nothing is left if a test fails */
  uint8_t *data = malloc(size);
  assert_non_null(data);
  vkt_fill_random(data, size, seed);
  assert_int_equal(write(fd, data, size), (ssize_t)size);
  free(data);
  f->size = size;
  f->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  assert_true(f->map != MAP_FAILED);
  f->bytes = malloc(size);
  assert_non_null(f->bytes);
  assert_int_equal(pread(fd, f->bytes, size, 0), (ssize_t)size);
  close(fd);
}

static void file_destroy(struct weights_file *f) {
  munmap(f->map, f->size);
  free(f->bytes);
}

static void options_for(vkrt_options *o, uint32_t policy_plus_one, uint32_t fault_mask,
                        uint32_t device_mask) {
  vkt_options(o);
  o->faults.import_chunk_cap = CHUNK_CAP;
  o->faults.import_policy_override = policy_plus_one;
  o->faults.mask = fault_mask;
  o->faults.device_mask = device_mask;
}

/* Expectations come from the capability snapshot, never a driver name: whether device d's
 * driver refuses to import file-backed pages (NVIDIA 580, RADV, or the fault acting as one). */
static bool refuses_file_backed(vkrt_appliance *app, uint32_t d) {
  vkrt_lab_device t;
  vkt_check(app, vkrt_lab_device_get(app, d, &t));
  return t.refuses_file_backed;
}

/* The registry's regions, live chunks and pre-staged bytes (vkrt_lab_import). */
static vkrt_lab_import import_state(vkrt_appliance *app) {
  vkrt_lab_import t;
  vkt_check(app, vkrt_lab_import_get(app, &t));
  return t;
}

static bool any_refuses_file_backed(vkrt_appliance *app) {
  for (uint32_t d = 0; d < vkrt_device_count(app); d++)
    if (refuses_file_backed(app, d))
      return true;
  return false;
}

/* The path a file mapping takes on device d under import-then-prestage. */
static vkrt_import_path file_path_import_then_prestage(vkrt_appliance *app, uint32_t d) {
  return refuses_file_backed(app, d) ? VKRT_IMPORT_PATH_PRESTAGED : VKRT_IMPORT_PATH_IMPORTED;
}

/* Downloads [offset, +size) of buf and compares it with expect. */
static void expect_device_bytes(vkrt_appliance *app, vkrt_buffer *buf, uint64_t offset,
                                const uint8_t *expect, uint64_t size) {
  uint8_t *got = malloc(size);
  assert_non_null(got);
  vkt_poison(got, size);
  vkt_check(app, vkrt_download(got, buf, offset, size));
  if (memcmp(got, expect, size) != 0) {
    uint64_t i = 0;
    while (got[i] == expect[i])
      i++;
    fail_msg("device bytes differ at %llu of %llu (offset %llu): got 0x%02x want 0x%02x",
             (unsigned long long)i, (unsigned long long)size, (unsigned long long)offset, got[i],
             expect[i]);
  }
  free(got);
}

/* Whole file, tensors straddling chunk boundaries, 2-D strided rows: all bit-identical. The
 * only unregistered source is the known fill under the 2-D rows: FILL_2D_BYTES per device. */
#define FILL_2D_BYTES 111036
static void check_uploads(vkrt_appliance *app, const struct weights_file *f, uint64_t *seed) {
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    vkrt_buffer *buf;
    vkt_check(app, vkrt_buffer_create(app, d, f->size + 8192, VKRT_BUFFER_DEVICE_LOCAL, &buf));
    /* Whole file. */
    vkt_check(app, vkrt_upload(buf, 0, f->map, f->size));
    expect_device_bytes(app, buf, 0, f->bytes, f->size);
    /* Straddles: just across one boundary, across several, one byte on each side, the
     * last bytes of the file, each to an odd destination offset. */
    const struct { uint64_t off, size; } cuts[] = {
        {CHUNK_CAP - 100, 300},        {3, 3 * CHUNK_CAP + 17}, {CHUNK_CAP - 1, 2},
        {2 * CHUNK_CAP, CHUNK_CAP},    {f->size - 5000, 5000},  {f->size - 1, 1},
        {12345, f->size - 12345 - 777}};
    for (size_t i = 0; i < VKT_ARRAY_SIZE(cuts); i++) {
      uint64_t dst = 4096 + 3 * i;
      vkt_check(app, vkrt_upload(buf, dst, f->map + cuts[i].off, cuts[i].size));
      expect_device_bytes(app, buf, dst, f->bytes + cuts[i].off, cuts[i].size);
    }
    /* Random tensors. */
    for (int i = 0; i < 20; i++) {
      uint64_t off = vkrt_xorshift(seed) % f->size;
      uint64_t size = 1 + vkrt_xorshift(seed) % VKT_MIN(f->size - off, 5 * CHUNK_CAP);
      uint64_t dst = vkrt_xorshift(seed) % (f->size + 8192 - size + 1);
      vkt_check(app, vkrt_upload(buf, dst, f->map + off, size));
      expect_device_bytes(app, buf, dst, f->bytes + off, size);
    }
    /* 2-D: 37 rows of 3000 bytes at a source pitch of up to 40000 (rows straddle chunks)
     * into a destination pitch of 3001. */
    const uint64_t width = 3000, height = 37, dst_pitch = 3001, src_off = 777;
    _Static_assert((37 - 1) * 3001 + 3000 == FILL_2D_BYTES, "check_uploads' staged fill");
    const uint64_t src_pitch = VKT_MIN(40000, (f->size - src_off - width) / (height - 1));
    assert_true(src_pitch >= width);
    assert_true(src_off + (height - 1) * src_pitch + width <= f->size);
    const uint64_t dst_size = (height - 1) * dst_pitch + width;
    uint8_t *expect = malloc(dst_size);
    assert_non_null(expect);
    vkt_poison(expect, dst_size);
    for (uint64_t r = 0; r < height; r++)
      memcpy(expect + r * dst_pitch, f->bytes + src_off + r * src_pitch, width);
    /* Known bytes between the rows: fill the destination first. */
    vkt_check(app, vkrt_upload(buf, 0, expect, dst_size));
    vkt_check(app, vkrt_upload_2d(buf, 0, dst_pitch, f->map + src_off, src_pitch, width, height));
    expect_device_bytes(app, buf, 0, expect, dst_size);
    free(expect);
    vkrt_buffer_destroy(buf);
  }
}

/* Every policy on a real read-only file mapping, twice: on the devices as they are, and with
 * device 1 acting as a driver that refuses file-backed pages (VKRT_FAULT_REFUSE_FILE_BACKED;
 * on NVIDIA both already do). A refusing device pre-stages under import-then-prestage without
 * trying the import, and import-only fails with a clear error naming it. Each case says which
 * it checked. */
static void test_every_policy_file_backed(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 3 * MIB + 4321, &seed);
  for (int forced = 0; forced < 2; forced++)
    for (uint32_t policy = 0; policy < VKRT_IMPORT_POLICY_COUNT; policy++) {
      vkrt_options o;
      options_for(&o, policy + 1, forced ? VKRT_FAULT_REFUSE_FILE_BACKED : 0, 1u << 1);
      vkt_log_capture cap = {0};
      o.log = vkt_log_capture_fn;
      o.log_user = &cap;
      o.log_level = VKRT_LOG_WARN;
      vkrt_appliance *app = vkt_open(&o);
      assert_int_equal(vkrt_import_policy_get(app), policy);
      const uint32_t n = vkrt_device_count(app);
      vkrt_import_path expect[VKRT_MAX_DEVICES];
      for (uint32_t d = 0; d < n; d++)
        expect[d] = policy == VKRT_IMPORT_POLICY_STAGING_ONLY     ? VKRT_IMPORT_PATH_STAGED
                    : policy == VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE ? VKRT_IMPORT_PATH_PRESTAGED
                                                                   : file_path_import_then_prestage(app, d);
      vkrt_register_info info;
      vkrt_status s = vkrt_host_register(app, f.map, f.size, NULL, NULL, &info);
      if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY && any_refuses_file_backed(app)) {
        uint32_t d = refuses_file_backed(app, 0) ? 0 : 1;
        fprintf(stderr, "vkrt-test: checked import-only on a device refusing file-backed pages "
                "(dev%u%s): %s\n", d, forced ? ", fault injected" : "", vkrt_last_error(app));
        assert_int_equal(s, VKRT_ERROR_UNAVAILABLE);
        char want[16];
        snprintf(want, sizeof(want), "dev%u", d);
        assert_non_null(strstr(vkrt_last_error(app), want));
        assert_non_null(strstr(vkrt_last_error(app), "file-backed"));
        assert_non_null(strstr(vkrt_last_error(app), "import-only"));
        assert_int_equal(import_state(app).regions, 0);
        assert_int_equal(import_state(app).live_chunks, 0);
        /* Not tried, so the driver is not left refusing: anonymous memory still imports and
         * buffers still allocate. */
        uint8_t *anon = aligned_alloc(4096, 256 * KIB);
        assert_non_null(anon);
        vkt_fill_random(anon, 256 * KIB, &seed);
        vkt_check(app, vkrt_host_register(app, anon, 256 * KIB, NULL, NULL, &info));
        for (uint32_t e = 0; e < n; e++)
          assert_int_equal(info.path[e], VKRT_IMPORT_PATH_IMPORTED);
        vkrt_buffer *buf;
        vkt_check(app, vkrt_buffer_create(app, d, 256 * KIB, VKRT_BUFFER_DEVICE_LOCAL, &buf));
        vkt_check(app, vkrt_upload(buf, 0, anon, 256 * KIB));
        expect_device_bytes(app, buf, 0, anon, 256 * KIB);
        vkrt_buffer_destroy(buf);
        vkt_check(app, vkrt_host_unregister(app, anon));
        free(anon);
        vkt_close(app);
        continue;
      }
      vkt_check(app, s);
      for (uint32_t d = 0; d < n; d++) {
        fprintf(stderr, "vkrt-test: checked policy %s dev%u (%s file-backed pages%s): %s: %s\n",
                vkrt_import_policy_str(policy), d,
                refuses_file_backed(app, d) ? "refuses" : "imports",
                forced && d == 1 ? ", fault injected" : "", vkrt_import_path_str(info.path[d]),
                info.reason[d]);
        assert_int_equal(info.path[d], expect[d]);
        assert_true(info.reason[d][0] != '\0');
        if (refuses_file_backed(app, d) && policy == VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE)
          assert_non_null(strstr(info.reason[d], "not tried"));
      }
      /* A refusing device pre-stages without trying: no import failure was logged. */
      assert_null(strstr(cap.text, "host pointer import"));
      bool any_imported = false, any_prestaged = false;
      for (uint32_t d = 0; d < n; d++) {
        any_imported |= expect[d] == VKRT_IMPORT_PATH_IMPORTED;
        any_prestaged |= expect[d] == VKRT_IMPORT_PATH_PRESTAGED;
      }
      if (any_imported || any_prestaged) {
        assert_true(info.chunk_count >= f.size / CHUNK_CAP);
        /* One VkBuffer + VkDeviceMemory per chunk per device that uses chunks. */
        long want = 0;
        for (uint32_t d = 0; d < n; d++)
          want += expect[d] != VKRT_IMPORT_PATH_STAGED ? (long)info.chunk_count : 0;
        assert_int_equal(import_state(app).live_chunks, want);
      } else {
        assert_int_equal(import_state(app).live_chunks, 0);
      }
      assert_int_equal(import_state(app).prestage_bytes != 0, any_prestaged);
      /* The path, not only the bytes: registered uploads come from chunks on devices that
       * use them (never the staging ring there), straddles are split, no copy leaves its
       * chunk. Unregistered, nothing comes from chunks. */
      vkrt_upload_counters before, after;
      vkt_check(app, vkrt_upload_counters_get(app, &before));
      check_uploads(app, &f, &seed);
      vkt_check(app, vkrt_upload_counters_get(app, &after));
      bool any_staged = false;
      for (uint32_t d = 0; d < n; d++)
        any_staged |= expect[d] == VKRT_IMPORT_PATH_STAGED;
      assert_int_equal(after.copies_past_chunk, 0);
      assert_int_equal(after.imported_copies > before.imported_copies, any_imported);
      assert_int_equal(after.prestaged_copies > before.prestaged_copies, any_prestaged);
      const uint64_t fill = (uint64_t)n * FILL_2D_BYTES;
      if (any_staged)
        assert_true(after.staged_bytes - before.staged_bytes > fill);
      else
        assert_int_equal(after.staged_bytes - before.staged_bytes, fill);
      if (any_imported || any_prestaged)
        assert_true(after.straddles_split > before.straddles_split);
      else
        assert_int_equal(after.straddles_split, before.straddles_split);
      vkt_check(app, vkrt_host_unregister(app, f.map));
      assert_int_equal(import_state(app).regions, 0);
      assert_int_equal(import_state(app).prestage_bytes, 0);
      assert_int_equal(import_state(app).live_chunks, 0); /* every chunk, not just the first */
      /* Unregistered, the same uploads go through the staging ring. */
      vkt_check(app, vkrt_upload_counters_get(app, &before));
      check_uploads(app, &f, &seed);
      vkt_check(app, vkrt_upload_counters_get(app, &after));
      assert_int_equal(after.imported_copies, before.imported_copies);
      assert_int_equal(after.prestaged_copies, before.prestaged_copies);
      assert_true(after.staged_copies > before.staged_copies);
      vkt_close(app);
    }
  file_destroy(&f);
}

/* Exact path counts on anonymous memory (which every driver imports): each registered
 * upload is one copy per chunk it touches, from the region's chunks, none through staging;
 * a straddling one is split (counted) and no copy reads past its chunk; the same uploads
 * unregistered go through staging only. */
static void test_upload_paths_counted(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  const size_t size = 8 * CHUNK_CAP;
  uint8_t *mem = aligned_alloc(4096, size);
  assert_non_null(mem);
  vkt_fill_random(mem, size, &seed);
  static const uint32_t policies[] = {VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE,
                                      VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE};
  /* offset, size, chunks touched (CHUNK_CAP-aligned chunks over an aligned region) */
  const struct { uint64_t off, size, chunks; } cuts[] = {
      {100, 1000, 1}, {CHUNK_CAP - 10, 20, 2}, {3, 3 * CHUNK_CAP, 4}, {2 * CHUNK_CAP, CHUNK_CAP, 1},
      {CHUNK_CAP - 1, 2 * CHUNK_CAP + 2, 4}, {size - 7, 7, 1}};
  for (size_t p = 0; p < VKT_ARRAY_SIZE(policies); p++) {
    vkrt_options o;
    options_for(&o, 1 + policies[p], 0, 0);
    vkrt_appliance *app = vkt_open(&o);
    vkrt_register_info info;
    vkt_check(app, vkrt_host_register(app, mem, size, NULL, NULL, &info));
    vkrt_buffer *buf;
    const uint32_t d = vkrt_device_count(app) - 1;
    vkt_check(app, vkrt_buffer_create(app, d, size, VKRT_BUFFER_DEVICE_LOCAL, &buf));
    const vkrt_import_path path = info.path[d];
    assert_true(path == (policies[p] == VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE
                             ? VKRT_IMPORT_PATH_PRESTAGED : VKRT_IMPORT_PATH_IMPORTED));
    for (int registered = 1; registered >= 0; registered--) {
      if (!registered)
        vkt_check(app, vkrt_host_unregister(app, mem));
      for (size_t i = 0; i < VKT_ARRAY_SIZE(cuts); i++) {
        vkrt_upload_counters a, b;
        vkt_check(app, vkrt_upload_counters_get(app, &a));
        vkt_check(app, vkrt_upload(buf, 5, mem + cuts[i].off, cuts[i].size));
        vkt_check(app, vkrt_upload_counters_get(app, &b));
        expect_device_bytes(app, buf, 5, mem + cuts[i].off, cuts[i].size);
        const uint64_t chunk_copies = path == VKRT_IMPORT_PATH_IMPORTED
                                          ? b.imported_copies - a.imported_copies
                                          : b.prestaged_copies - a.prestaged_copies;
        const uint64_t chunk_bytes = path == VKRT_IMPORT_PATH_IMPORTED
                                         ? b.imported_bytes - a.imported_bytes
                                         : b.prestaged_bytes - a.prestaged_bytes;
        if (registered) {
          if (chunk_copies != cuts[i].chunks || chunk_bytes != cuts[i].size ||
              b.staged_copies != a.staged_copies ||
              b.straddles_split - a.straddles_split != (cuts[i].chunks > 1))
            fail_msg("%s: registered upload [%llu, +%llu): %llu copies / %llu bytes from %s "
                     "chunks (want %llu / %llu), %llu through staging (want 0), %llu straddles "
                     "split (want %d)", vkrt_import_policy_str(policies[p]),
                     (unsigned long long)cuts[i].off, (unsigned long long)cuts[i].size,
                     (unsigned long long)chunk_copies, (unsigned long long)chunk_bytes,
                     vkrt_import_path_str(path), (unsigned long long)cuts[i].chunks,
                     (unsigned long long)cuts[i].size,
                     (unsigned long long)(b.staged_copies - a.staged_copies),
                     (unsigned long long)(b.straddles_split - a.straddles_split),
                     cuts[i].chunks > 1);
        } else {
          assert_int_equal(chunk_copies, 0);
          assert_int_equal(b.staged_bytes - a.staged_bytes, cuts[i].size);
          assert_true(b.staged_copies > a.staged_copies);
        }
        assert_int_equal(b.copies_past_chunk, 0);
      }
    }
    vkrt_buffer_destroy(buf);
    vkt_close(app);
  }
  free(mem);
}

/* The staging ring alone: a large unregistered source through several rounds of slots. */
static void test_staging_ring(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  const uint64_t slot = (uint64_t)CONFIG_VKRT_STAGING_SLOT_KB << 10;
  const uint64_t size = slot * CONFIG_VKRT_STAGING_SLOTS * 3 + 12345;
  uint8_t *src = malloc(size);
  assert_non_null(src);
  vkt_fill_random(src, size, &seed);
  vkrt_buffer *buf;
  vkt_check(app, vkrt_buffer_create(app, 1 % vkrt_device_count(app), size + 64,
                                    VKRT_BUFFER_DEVICE_LOCAL, &buf));
  vkt_check(app, vkrt_upload(buf, 7, src, size));
  expect_device_bytes(app, buf, 7, src, size);
  /* 2-D through staging, rows larger than a slot. */
  const uint64_t width = slot + 100, height = 3;
  vkt_check(app, vkrt_upload_2d(buf, 0, width + 1, src, width + 50, width, height));
  for (uint64_t r = 0; r < height; r++)
    expect_device_bytes(app, buf, r * (width + 1), src + r * (width + 50), width);
  vkrt_buffer_destroy(buf);
  /* A host-visible destination is written directly; the mapping shows the bytes. */
  vkt_check(app, vkrt_buffer_create(app, 0, 3 * slot, VKRT_BUFFER_HOST_VISIBLE, &buf));
  void *map;
  vkt_check(app, vkrt_buffer_map(buf, &map));
  vkt_poison(map, 3 * slot);
  vkt_check(app, vkrt_upload(buf, 3, src, 2 * slot));
  assert_memory_equal((uint8_t *)map + 3, src, 2 * slot);
  vkt_check(app, vkrt_upload_2d(buf, 1, 1000, src + 5, 700, 600, 9));
  for (int r = 0; r < 9; r++)
    assert_memory_equal((uint8_t *)map + 1 + r * 1000, src + 5 + r * 700, 600);
  /* ...and the GPU sees them: copy to a device-local buffer, download through staging. */
  vkrt_buffer *local;
  vkt_check(app, vkrt_buffer_create(app, 0, 3 * slot, VKRT_BUFFER_DEVICE_LOCAL, &local));
  vkt_check(app, vkrt_cmd_copy_buffer(local, 0, buf, 0, 3 * slot));
  vkt_check(app, vkrt_finish(app, 0));
  expect_device_bytes(app, local, 1 + 9 * 1000, src + 9 * 1000 - 2, 2 * slot - 9 * 1000 + 2);
  vkrt_buffer_destroy(local);
  vkrt_buffer_destroy(buf);
  free(src);
  vkt_close(app);
}

/* Import fails on dev1 only: dev0 imports the caller's pages, dev1 takes the pre-staged
 * copy; both upload bit-identically and the fallback is logged. */
static void test_fault_import_fails_prestage(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 1 * MIB + 999, &seed);
  vkrt_options o;
  options_for(&o, 1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE, VKRT_FAULT_IMPORT_FAILS, 1u << 1);
  vkt_log_capture cap = {0};
  o.log = vkt_log_capture_fn;
  o.log_user = &cap;
  vkrt_appliance *app = vkt_open(&o);
  vkrt_register_info info;
  vkt_check(app, vkrt_host_register(app, f.map, f.size, NULL, NULL, &info));
  assert_int_equal(info.path[0], file_path_import_then_prestage(app, 0));
  assert_int_equal(info.path[1], VKRT_IMPORT_PATH_PRESTAGED);
  assert_non_null(strstr(info.reason[1], "VK_ERROR_OUT_OF_DEVICE_MEMORY"));
  assert_non_null(strstr(cap.text, "dev1: host pointer import"));
  assert_non_null(strstr(cap.text, "falling back to prestage"));
  assert_true(import_state(app).prestage_bytes >= f.size);
  check_uploads(app, &f, &seed);
  vkt_check(app, vkrt_host_unregister(app, f.map));
  assert_int_equal(import_state(app).prestage_bytes, 0);
  vkt_close(app);
  file_destroy(&f);
}

/* Import fails and the pre-stage allocation fails too: staging, logged, still correct. */
static void test_fault_prestage_alloc_fails(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 700 * KIB + 3, &seed);
  vkrt_options o;
  options_for(&o, 1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE,
              VKRT_FAULT_IMPORT_FAILS | VKRT_FAULT_PRESTAGE_ALLOC_FAILS, 0);
  vkt_log_capture cap = {0};
  o.log = vkt_log_capture_fn;
  o.log_user = &cap;
  vkrt_appliance *app = vkt_open(&o);
  vkrt_register_info info;
  vkt_check(app, vkrt_host_register(app, f.map, f.size, NULL, NULL, &info));
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    assert_int_equal(info.path[d], VKRT_IMPORT_PATH_STAGED);
    assert_non_null(strstr(info.reason[d], "pre-stage allocation"));
  }
  assert_non_null(strstr(cap.text, "pre-stage allocation of"));
  assert_non_null(strstr(cap.text, "staging ring"));
  assert_int_equal(import_state(app).prestage_bytes, 0);
  check_uploads(app, &f, &seed);
  vkt_check(app, vkrt_host_unregister(app, f.map));
  vkt_close(app);
  file_destroy(&f);
}

/* Import-only: a failing import is a clear error naming the device and the VkResult, and
 * nothing stays registered. Anonymous memory, which every driver imports (a file mapping on a
 * driver refusing file-backed pages fails before any import: test_every_policy_file_backed). */
static void test_import_only_error(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f = {.size = 300 * KIB};
  f.map = aligned_alloc(4096, f.size);
  assert_non_null(f.map);
  vkt_fill_random(f.map, f.size, &seed);
  vkrt_options o;
  options_for(&o, 1 + VKRT_IMPORT_POLICY_IMPORT_ONLY, VKRT_FAULT_IMPORT_FAILS, 1u << 1);
  vkrt_appliance *app = vkt_open(&o);
  vkrt_register_info info;
  assert_int_equal(vkrt_host_register(app, f.map, f.size, NULL, NULL, &info),
                   VKRT_ERROR_OUT_OF_DEVICE_MEMORY);
  const char *msg = vkrt_last_error(app);
  assert_non_null(strstr(msg, "dev1"));
  assert_non_null(strstr(msg, "VK_ERROR_OUT_OF_DEVICE_MEMORY"));
  assert_non_null(strstr(msg, "import-only"));
  assert_int_equal(import_state(app).regions, 0);
  assert_int_equal(vkrt_host_unregister(app, f.map), VKRT_ERROR_NOT_FOUND);
  vkt_close(app);

  /* Host import hidden: import-only cannot register at all. */
  options_for(&o, 1 + VKRT_IMPORT_POLICY_IMPORT_ONLY, VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST, 1u);
  app = vkt_open(&o);
  assert_int_equal(vkrt_host_register(app, f.map, f.size, NULL, NULL, NULL), VKRT_ERROR_UNAVAILABLE);
  assert_non_null(strstr(vkrt_last_error(app), "dev0"));
  assert_non_null(strstr(vkrt_last_error(app), "VK_EXT_external_memory_host"));
  vkt_close(app);
  free(f.map);
}

/* Host import hidden on dev0: dev0 stages, dev1 still imports; both correct. */
static void test_fault_no_host_import(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 400 * KIB + 77, &seed);
  for (uint32_t policy = VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE;
       policy <= VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE; policy++) {
    vkrt_options o;
    options_for(&o, 1 + policy, VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST, 1u);
    vkrt_appliance *app = vkt_open(&o);
    vkrt_register_info info;
    vkt_check(app, vkrt_host_register(app, f.map, f.size, NULL, NULL, &info));
    assert_int_equal(info.path[0], VKRT_IMPORT_PATH_STAGED);
    assert_non_null(strstr(info.reason[0], "VK_EXT_external_memory_host unavailable"));
    assert_int_equal(info.path[1], policy == VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE
                                       ? VKRT_IMPORT_PATH_PRESTAGED
                                       : file_path_import_then_prestage(app, 1));
    check_uploads(app, &f, &seed);
    vkt_check(app, vkrt_host_unregister(app, f.map));
    assert_int_equal(import_state(app).live_chunks, 0);
    vkt_close(app);
  }
  file_destroy(&f);
}

/* An import alignment larger than the page (64 KiB, vkrt_lab_import_alignment_set, as a
 * device could report it): a region not on a 64 KiB boundary would import bytes outside
 * the caller's pages, so import-then-prestage pre-stages and import-only refuses. */
static void test_alignment_above_page(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 600 * KIB, &seed);
  const size_t skip = ((uintptr_t)f.map % (64 * KIB)) ? 0 : 4096;
  const uint8_t *region = f.map + skip;
  const size_t size = f.size - skip - 1000;
  for (uint32_t policy = VKRT_IMPORT_POLICY_IMPORT_ONLY;
       policy <= VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE; policy++) {
    vkrt_options o;
    options_for(&o, 1 + policy, 0, 0);
    vkrt_appliance *app = vkt_open(&o);
    for (uint32_t d = 0; d < vkrt_device_count(app); d++)
      vkt_check(app, vkrt_lab_import_alignment_set(app, d, 64 * KIB));
    vkrt_register_info info;
    vkrt_status s = vkrt_host_register(app, region, size, NULL, NULL, &info);
    if (policy == VKRT_IMPORT_POLICY_IMPORT_ONLY) {
      assert_int_equal(s, VKRT_ERROR_UNAVAILABLE);
      assert_non_null(strstr(vkrt_last_error(app), "outside the caller's pages"));
      assert_int_equal(import_state(app).live_chunks, 0);
    } else {
      vkt_check(app, s);
      for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
        assert_int_equal(info.path[d], VKRT_IMPORT_PATH_PRESTAGED);
        assert_non_null(strstr(info.reason[d], "outside the caller's pages"));
      }
      vkrt_buffer *buf;
      vkt_check(app, vkrt_buffer_create(app, 1 % vkrt_device_count(app), size,
                                        VKRT_BUFFER_DEVICE_LOCAL, &buf));
      vkt_check(app, vkrt_upload(buf, 0, region, size));
      expect_device_bytes(app, buf, 0, f.bytes + skip, size);
      vkt_check(app, vkrt_upload(buf, 5, region + CHUNK_CAP - 7, 3 * CHUNK_CAP));
      expect_device_bytes(app, buf, 5, f.bytes + skip + CHUNK_CAP - 7, 3 * CHUNK_CAP);
      vkrt_buffer_destroy(buf);
      vkt_check(app, vkrt_host_unregister(app, region));
    }
    vkt_close(app);
  }
  file_destroy(&f);
}

/* Over the pre-stage budget: the region stays unregistered-for-DMA and uses staging. */
static void test_prestage_budget(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 2 * MIB, &seed);
  vkrt_options o;
  options_for(&o, 1 + VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE, 0, 0);
  vkt_log_capture cap = {0};
  o.log = vkt_log_capture_fn;
  o.log_user = &cap;
  vkrt_appliance *app = vkt_open(&o);
  /* A 3 MiB budget instead of the Kconfig value. */
  vkt_check(app, vkrt_lab_prestage_budget_set(app, 3 * MIB));
  uint8_t *anon = malloc(2 * MIB);
  assert_non_null(anon);
  vkt_fill_random(anon, 2 * MIB, &seed);
  vkrt_register_info info;
  vkt_check(app, vkrt_host_register(app, anon, 2 * MIB, NULL, NULL, &info));
  assert_int_equal(info.path[0], VKRT_IMPORT_PATH_PRESTAGED);
  vkt_check(app, vkrt_host_register(app, f.map, f.size, NULL, NULL, &info));
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    assert_int_equal(info.path[d], VKRT_IMPORT_PATH_STAGED);
    assert_non_null(strstr(info.reason[d], "budget"));
  }
  assert_non_null(strstr(cap.text, "over the pre-stage budget"));
  check_uploads(app, &f, &seed);
  /* Freeing the first copy makes room. */
  vkt_check(app, vkrt_host_unregister(app, anon));
  vkt_check(app, vkrt_host_unregister(app, f.map));
  vkt_check(app, vkrt_host_register(app, f.map, f.size, NULL, NULL, &info));
  assert_int_equal(info.path[0], VKRT_IMPORT_PATH_PRESTAGED);
  vkt_check(app, vkrt_host_unregister(app, f.map));
  free(anon);
  vkt_close(app);
  file_destroy(&f);
}

static void progress_count(void *user, uint64_t done, uint64_t total) {
  uint64_t *last = user;
  assert_true(done <= total);
  assert_true(done >= *last); /* monotonic as seen by the caller */
  *last = done;
}

/* Pre-stage progress reaches the total. */
static void test_prestage_progress(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  vkrt_options o;
  options_for(&o, 1 + VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE, 0, 0);
  vkrt_appliance *app = vkt_open(&o);
  const size_t size = 9 * MIB + 5;
  uint8_t *anon = malloc(size);
  assert_non_null(anon);
  vkt_fill_random(anon, size, &seed);
  uint64_t last = 0;
  vkt_check(app, vkrt_host_register(app, anon, size, progress_count, &last, NULL));
  assert_int_equal(last, size);
  vkrt_buffer *buf;
  vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &buf));
  vkt_check(app, vkrt_upload(buf, 0, anon, size));
  expect_device_bytes(app, buf, 0, anon, size);
  vkrt_buffer_destroy(buf);
  vkt_check(app, vkrt_host_unregister(app, anon));
  free(anon);
  vkt_close(app);
}

static void test_errors(void **state) {
  (void)state;
  vkrt_options o;
  options_for(&o, 0, 0, 0);
  vkrt_appliance *app = vkt_open(&o);
  uint8_t *mem = aligned_alloc(4096, 64 * KIB);
  assert_non_null(mem);
  memset(mem, 0x5a, 64 * KIB);
  assert_int_equal(vkrt_host_register(app, mem, 0, NULL, NULL, NULL), VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "zero size"));
  assert_int_equal(vkrt_host_register(app, NULL, 10, NULL, NULL, NULL), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_host_register(app, (void *)(uintptr_t)(UINTPTR_MAX - 10), 100, NULL, NULL,
                                      NULL), VKRT_ERROR_INVALID_ARGUMENT);
  vkt_check(app, vkrt_host_register(app, mem + 4096, 8 * KIB, NULL, NULL, NULL));
  /* Overlaps on either side, inside, around. */
  assert_int_equal(vkrt_host_register(app, mem, 4097, NULL, NULL, NULL), VKRT_ERROR_ALREADY_EXISTS);
  assert_non_null(strstr(vkrt_last_error(app), "overlaps"));
  assert_int_equal(vkrt_host_register(app, mem + 12 * KIB - 1, 10, NULL, NULL, NULL),
                   VKRT_ERROR_ALREADY_EXISTS);
  assert_int_equal(vkrt_host_register(app, mem + 5000, 10, NULL, NULL, NULL),
                   VKRT_ERROR_ALREADY_EXISTS);
  assert_int_equal(vkrt_host_register(app, mem, 64 * KIB, NULL, NULL, NULL),
                   VKRT_ERROR_ALREADY_EXISTS);
  /* Touching neighbours are fine. */
  vkt_check(app, vkrt_host_register(app, mem, 4096, NULL, NULL, NULL));
  vkt_check(app, vkrt_host_register(app, mem + 12 * KIB, 4096, NULL, NULL, NULL));
  assert_int_equal(import_state(app).regions, 3);
  /* Unknown pointers. */
  assert_int_equal(vkrt_host_unregister(app, mem + 5000), VKRT_ERROR_NOT_FOUND);
  assert_non_null(strstr(vkrt_last_error(app), "inside the region"));
  assert_int_equal(vkrt_host_unregister(app, mem + 32 * KIB), VKRT_ERROR_NOT_FOUND);
  assert_non_null(strstr(vkrt_last_error(app), "never registered"));
  assert_int_equal(vkrt_host_unregister(app, NULL), VKRT_ERROR_INVALID_ARGUMENT);
  vkt_check(app, vkrt_host_unregister(app, mem + 4096));
  assert_int_equal(vkrt_host_unregister(app, mem + 4096), VKRT_ERROR_NOT_FOUND);
  /* Uploads: range checks, pitches. */
  vkrt_buffer *buf;
  vkt_check(app, vkrt_buffer_create(app, 0, 1000, VKRT_BUFFER_DEVICE_LOCAL, &buf));
  assert_int_equal(vkrt_upload(buf, 1, mem, 1000), VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "outside"));
  assert_int_equal(vkrt_upload(buf, UINT64_MAX, mem, 2), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_upload(buf, 0, NULL, 2), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_upload(NULL, 0, mem, 2), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_upload(buf, 0, mem, 0), VKRT_OK);
  assert_int_equal(vkrt_upload_2d(buf, 0, 10, mem, 100, 20, 2), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_upload_2d(buf, 0, 100, mem, 100, 20, 11), VKRT_ERROR_INVALID_ARGUMENT);
  vkt_check(app, vkrt_upload_2d(buf, 0, 100, mem, 100, 20, 10));
  /* A source that starts in one region and ends in its touching neighbour is in neither:
   * it goes through staging, bit-identically. */
  for (int i = 0; i < 1000; i++)
    mem[12 * KIB - 500 + i] = (uint8_t)(i * 13 + 5);
  vkt_check(app, vkrt_host_register(app, mem + 4096, 8 * KIB, NULL, NULL, NULL));
  vkt_check(app, vkrt_upload(buf, 0, mem + 12 * KIB - 500, 1000));
  uint8_t back[1000];
  vkt_check(app, vkrt_download(back, buf, 0, 1000));
  assert_memory_equal(back, mem + 12 * KIB - 500, 1000);
  uint8_t out[16];
  assert_int_equal(vkrt_download(out, buf, 990, 16), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_download(NULL, buf, 0, 16), VKRT_ERROR_INVALID_ARGUMENT);
  vkrt_buffer_destroy(buf);
  /* Left registered on purpose: close unregisters them (leak test below checks it). */
  vkt_close(app);
  free(mem);
}

/* ---- storm: 16 uploaders while another thread registers and unregisters ---------------- */

#define STORM_THREADS 16
#define STORM_ITERS 12

struct storm {
  vkrt_appliance *app;
  const struct weights_file *file;
  uint8_t *anon;            /* unregistered source */
  size_t anon_size;
  atomic_bool stop;
  atomic_int failures;
  atomic_uint registrations;
};

struct storm_worker {
  struct storm *s;
  uint32_t index;
  uint64_t seed;
};

static void *storm_upload(void *arg) {
  struct storm_worker *w = arg;
  struct storm *s = w->s;
  const uint32_t dev = w->index % vkrt_device_count(s->app);
  const uint64_t cap = 3 * CHUNK_CAP;
  vkrt_buffer *buf = NULL;
  uint8_t *got = malloc(cap);
  if (vkrt_buffer_create(s->app, dev, cap, VKRT_BUFFER_DEVICE_LOCAL, &buf) != VKRT_OK || !got) {
    atomic_fetch_add(&s->failures, 1);
    free(got);
    return NULL;
  }
  for (int i = 0; i < STORM_ITERS; i++) {
    const bool from_file = (i + w->index) % 4 != 0;
    const uint8_t *base = from_file ? s->file->map : s->anon;
    const uint8_t *ref = from_file ? s->file->bytes : s->anon;
    const size_t total = from_file ? s->file->size : s->anon_size;
    uint64_t size = 1 + vkrt_xorshift(&w->seed) % cap;
    uint64_t off = vkrt_xorshift(&w->seed) % (total - size + 1);
    if (vkrt_upload(buf, 0, base + off, size) != VKRT_OK ||
        vkrt_download(got, buf, 0, size) != VKRT_OK || memcmp(got, ref + off, size) != 0) {
      fprintf(stderr, "vkrt-test: storm thread %u iteration %d failed: %s\n", w->index, i,
              vkrt_last_error(s->app));
      atomic_fetch_add(&s->failures, 1);
    }
  }
  vkrt_buffer_destroy(buf);
  free(got);
  return NULL;
}

static void *storm_register(void *arg) {
  struct storm *s = arg;
  /* Regions of its own, registered and unregistered in a loop, overlapping nothing the
   * uploaders use; each is uploaded once to check it while the storm runs. */
  const size_t size = 256 * KIB;
  uint8_t *mem = aligned_alloc(4096, 4 * size);
  vkrt_buffer *buf = NULL;
  if (!mem || vkrt_buffer_create(s->app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &buf) != VKRT_OK) {
    atomic_fetch_add(&s->failures, 1);
    free(mem);
    return NULL;
  }
  for (size_t i = 0; i < 4 * size; i++)
    mem[i] = (uint8_t)(i * 7 + 1);
  uint8_t *got = malloc(size);
  while (!atomic_load(&s->stop)) {
    for (int k = 0; k < 4; k++) {
      if (vkrt_host_register(s->app, mem + k * size, size, NULL, NULL, NULL) != VKRT_OK)
        atomic_fetch_add(&s->failures, 1);
    }
    atomic_fetch_add(&s->registrations, 4);
    if (vkrt_upload(buf, 0, mem + size, size) != VKRT_OK ||
        vkrt_download(got, buf, 0, size) != VKRT_OK || memcmp(got, mem + size, size) != 0)
      atomic_fetch_add(&s->failures, 1);
    for (int k = 3; k >= 0; k--) {
      if (vkrt_host_unregister(s->app, mem + k * size) != VKRT_OK)
        atomic_fetch_add(&s->failures, 1);
    }
  }
  vkrt_buffer_destroy(buf);
  free(got);
  free(mem);
  return NULL;
}

static void run_storm(uint32_t policy_plus_one) {
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 2 * MIB + 100, &seed);
  vkrt_options o;
  options_for(&o, policy_plus_one, 0, 0);
  vkrt_appliance *app = vkt_open(&o);
  struct storm s = {.app = app, .file = &f, .anon_size = 1 * MIB};
  s.anon = malloc(s.anon_size);
  assert_non_null(s.anon);
  vkt_fill_random(s.anon, s.anon_size, &seed);
  atomic_init(&s.stop, false);
  atomic_init(&s.failures, 0);
  atomic_init(&s.registrations, 0);
  vkt_check(app, vkrt_host_register(app, f.map, f.size, NULL, NULL, NULL));
  pthread_t reg, up[STORM_THREADS];
  struct storm_worker w[STORM_THREADS];
  assert_int_equal(pthread_create(&reg, NULL, storm_register, &s), 0);
  for (uint32_t i = 0; i < STORM_THREADS; i++) {
    w[i] = (struct storm_worker){.s = &s, .index = i, .seed = seed + i * 7919};
    assert_int_equal(pthread_create(&up[i], NULL, storm_upload, &w[i]), 0);
  }
  for (uint32_t i = 0; i < STORM_THREADS; i++)
    pthread_join(up[i], NULL);
  atomic_store(&s.stop, true);
  pthread_join(reg, NULL);
  fprintf(stderr, "vkrt-test: storm (%s): %u registrations during %d uploads\n",
          vkrt_import_policy_str(vkrt_import_policy_get(app)), atomic_load(&s.registrations),
          STORM_THREADS * STORM_ITERS);
  assert_int_equal(atomic_load(&s.failures), 0);
  assert_true(atomic_load(&s.registrations) > 0);
  vkt_check(app, vkrt_host_unregister(app, f.map));
  assert_int_equal(import_state(app).regions, 0);
  assert_int_equal(import_state(app).live_chunks, 0);
  assert_int_equal(import_state(app).prestage_bytes, 0);
  free(s.anon);
  vkt_close(app);
  file_destroy(&f);
}

static void test_storm_imported(void **state) {
  (void)state;
  run_storm(1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE);
}

static void test_storm_prestaged(void **state) {
  (void)state;
  run_storm(1 + VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE);
}

/* ---- unregister racing the last release ---------------------------------------------- */

/* Uploads from a registered region while another thread unregisters it, many times over,
 * with the window between an upload's last reference drop and its wakeup of unregister
 * widened (release_delay_us). Every upload must deliver the bytes (imported chunks while the
 * region is found, the staging ring after), unregister must return, and a release that
 * touches the freed region faults: the appliance allocates through the guard allocator,
 * which leaves freed blocks inaccessible (the seed read r->removed there; ASan and TSan
 * report it too). */
#define RACE_THREADS 3
#define RACE_ITERS 60

struct race {
  vkrt_appliance *app;
  const uint8_t *mem;
  size_t size;
  pthread_barrier_t start, done;
  atomic_bool quit;
  atomic_int failures;
};

struct race_worker {
  struct race *r;
  uint32_t index;
  uint64_t seed;
};

static void *race_upload(void *arg) {
  struct race_worker *w = arg;
  struct race *r = w->r;
  vkrt_buffer *buf = NULL;
  uint8_t *got = malloc(r->size);
  if (!got || vkrt_buffer_create(r->app, w->index % vkrt_device_count(r->app), r->size,
                                 VKRT_BUFFER_DEVICE_LOCAL, &buf) != VKRT_OK)
    atomic_fetch_add(&r->failures, 1);
  for (;;) {
    pthread_barrier_wait(&r->start);
    if (atomic_load(&r->quit))
      break;
    for (int k = 0; k < 3 && buf && got; k++) {
      uint64_t size = 1 + vkrt_xorshift(&w->seed) % r->size;
      uint64_t off = vkrt_xorshift(&w->seed) % (r->size - size + 1);
      if (vkrt_upload(buf, 0, r->mem + off, size) != VKRT_OK ||
          vkrt_download(got, buf, 0, size) != VKRT_OK || memcmp(got, r->mem + off, size) != 0) {
        fprintf(stderr, "vkrt-test: race upload %u failed: %s\n", w->index,
                vkrt_last_error(r->app));
        atomic_fetch_add(&r->failures, 1);
      }
    }
    pthread_barrier_wait(&r->done);
  }
  vkrt_buffer_destroy(buf);
  free(got);
  return NULL;
}

static void test_unregister_races_release(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  vkrt_options o;
  options_for(&o, 1 + VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE, 0, 0);
  o.faults.release_delay_us = 300;
  o.allocator = vkt_guard_allocator();
  vkrt_appliance *app = vkt_open(&o);
  struct race r = {.app = app, .size = 3 * CHUNK_CAP};
  uint8_t *mem = aligned_alloc(4096, r.size);
  assert_non_null(mem);
  vkt_fill_random(mem, r.size, &seed);
  r.mem = mem;
  atomic_init(&r.quit, false);
  atomic_init(&r.failures, 0);
  pthread_barrier_init(&r.start, NULL, RACE_THREADS + 1);
  pthread_barrier_init(&r.done, NULL, RACE_THREADS + 1);
  pthread_t t[RACE_THREADS];
  struct race_worker w[RACE_THREADS];
  for (uint32_t i = 0; i < RACE_THREADS; i++) {
    w[i] = (struct race_worker){.r = &r, .index = i, .seed = seed + 31 * i};
    assert_int_equal(pthread_create(&t[i], NULL, race_upload, &w[i]), 0);
  }
  for (int it = 0; it < RACE_ITERS; it++) {
    vkt_check(app, vkrt_host_register(app, mem, r.size, NULL, NULL, NULL));
    pthread_barrier_wait(&r.start);
    /* Let the uploads start, then pull the region from under them. */
    nanosleep(&(struct timespec){.tv_nsec = (long)(vkrt_xorshift(&seed) % 400) * 1000}, NULL);
    vkt_check(app, vkrt_host_unregister(app, mem));
    pthread_barrier_wait(&r.done);
  }
  atomic_store(&r.quit, true);
  pthread_barrier_wait(&r.start);
  for (uint32_t i = 0; i < RACE_THREADS; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&r.start);
  pthread_barrier_destroy(&r.done);
  assert_int_equal(atomic_load(&r.failures), 0);
  assert_int_equal(import_state(app).regions, 0);
  assert_int_equal(import_state(app).live_chunks, 0);
  free(mem);
  vkt_close(app);
}

/* The same interleaving made certain: the fault hook runs between the last release's drop of
 * its reference and its wakeup of a waiting unregister, and there a second thread unregisters
 * the region, which frees it at once (no user is left). Through the guard allocator, a release
 * that then reads the freed region faults (and the handler names the freed block), every run,
 * without a sanitizer. Under both policies that give a region a device's chunks. */
struct release_hook {
  vkrt_appliance *app;
  const uint8_t *mem;
  int calls;
  vkrt_status unregistered;
};

static void *unregister_thread(void *arg) {
  struct release_hook *h = arg;
  h->unregistered = vkrt_host_unregister(h->app, h->mem);
  return NULL;
}

static void unregister_in_release(void *user) {
  struct release_hook *h = user;
  if (h->calls++ != 0)
    return;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unregister_thread, h), 0);
  /* Unregister finds no user: it must return at once, not wait for this release's wakeup. */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 30;
  if (pthread_timedjoin_np(t, NULL, &deadline) != 0)
    fail_msg("an unregister during the last release did not return within 30 s: it waits for "
             "a user the release already dropped");
}

static void test_unregister_inside_last_release(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  const uint32_t policies[] = {1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE,
                               1 + VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE};
  for (size_t p = 0; p < VKT_ARRAY_SIZE(policies); p++) {
    struct release_hook h = {.unregistered = VKRT_ERROR_INTERNAL};
    vkrt_options o;
    options_for(&o, policies[p], 0, 0);
    o.allocator = vkt_guard_allocator();
    o.faults.release_hook = unregister_in_release;
    o.faults.release_hook_user = &h;
    vkrt_appliance *app = vkt_open(&o);
    const size_t size = 2 * CHUNK_CAP + 4096 * 3;
    uint8_t *mem = aligned_alloc(4096, size);
    assert_non_null(mem);
    vkt_fill_random(mem, size, &seed);
    h.app = app;
    h.mem = mem;
    vkt_check(app, vkrt_host_register(app, mem, size, NULL, NULL, NULL));
    vkrt_buffer *buf;
    vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &buf));
    vkt_check(app, vkrt_upload(buf, 0, mem, size));
    if (h.calls != 1)
      fail_msg("policy %u: the upload from the registered region made %d last releases, want 1",
               policies[p] - 1, h.calls);
    vkt_check(app, h.unregistered);
    assert_int_equal(import_state(app).regions, 0);
    assert_int_equal(import_state(app).live_chunks, 0);
    expect_device_bytes(app, buf, 0, mem, size);
    /* Unregistered: the next upload takes the staging ring and releases nothing. */
    vkt_fill_random(mem, size, &seed);
    vkt_check(app, vkrt_upload(buf, 0, mem, size));
    assert_int_equal(h.calls, 1);
    expect_device_bytes(app, buf, 0, mem, size);
    vkrt_buffer_destroy(buf);
    vkt_close(app);
    free(mem);
  }
}

/* ---- leaks ---------------------------------------------------------------------------- */

/* Every path (imported, pre-staged, staged, both fault fallbacks, import-only failure,
 * regions left registered at close) through a counting allocator: nothing stays. */
static void test_no_leaks(void **state) {
  (void)state;
  uint64_t seed = vkt_seed(0);
  struct weights_file f;
  file_create(&f, 500 * KIB + 1, &seed);
  const struct { uint32_t policy, mask; bool fails; } cases[] = {
      {1 + VKRT_IMPORT_POLICY_IMPORT_ONLY, 0, false},
      {1 + VKRT_IMPORT_POLICY_IMPORT_ONLY, VKRT_FAULT_IMPORT_FAILS, true},
      {1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE, VKRT_FAULT_IMPORT_FAILS, false},
      {1 + VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE,
       VKRT_FAULT_IMPORT_FAILS | VKRT_FAULT_PRESTAGE_ALLOC_FAILS, false},
      {1 + VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE, 0, false},
      {1 + VKRT_IMPORT_POLICY_STAGING_ONLY, 0, false},
  };
  for (size_t c = 0; c < VKT_ARRAY_SIZE(cases); c++) {
    for (int leave_registered = 0; leave_registered < 2; leave_registered++) {
      vkt_counting counting;
      vkrt_options o;
      options_for(&o, cases[c].policy, cases[c].mask, 0);
      o.allocator = vkt_counting_allocator(&counting);
      /* Objects still alive at vkDestroyDevice are reported by the validation layer during
       * close, after vkt_close reads the message count: capture the log to see them. */
      vkt_log_capture cap = {0};
      o.log = vkt_log_capture_fn;
      o.log_user = &cap;
      o.log_level = VKRT_LOG_ERROR;
      vkrt_appliance *app = vkt_open(&o);
      vkrt_status s = vkrt_host_register(app, f.map, f.size, NULL, NULL, NULL);
      /* import-only of a file mapping also fails where the driver refuses file-backed pages */
      bool fails = cases[c].fails || (cases[c].policy == 1 + VKRT_IMPORT_POLICY_IMPORT_ONLY &&
                                      any_refuses_file_backed(app));
      assert_int_equal(s != VKRT_OK, fails);
      vkrt_buffer *buf;
      vkt_check(app, vkrt_buffer_create(app, 1 % vkrt_device_count(app), f.size,
                                        VKRT_BUFFER_DEVICE_LOCAL, &buf));
      vkt_check(app, vkrt_upload(buf, 0, f.map, f.size));
      expect_device_bytes(app, buf, 0, f.bytes, f.size);
      vkrt_buffer_destroy(buf);
      if (!leave_registered && s == VKRT_OK) {
        vkt_check(app, vkrt_host_unregister(app, f.map));
        assert_int_equal(import_state(app).live_chunks, 0);
      }
      vkt_close(app);
      if (strstr(cap.text, "has not been destroyed") || strstr(cap.text, "still alive"))
        fail_msg("case %zu: objects left at close:\n%s", c, cap.text);
      if (atomic_load(&counting.live) != 0)
        fail_msg("case %zu (leave registered %d): %ld allocations (%ld bytes) leaked", c,
                 leave_registered, atomic_load(&counting.live), atomic_load(&counting.bytes_live));
    }
  }
  file_destroy(&f);
}

static void test_describe(void **state) {
  (void)state;
  vkrt_options o;
  options_for(&o, 0, 0, 0);
  vkrt_appliance *app = vkt_open(&o);
  char text[4096], json[4096];
  size_t n = vkrt_lab_import_describe(app, false, text, sizeof(text));
  assert_true(n > 0 && n < sizeof(text));
  fprintf(stderr, "%s", text);
  assert_non_null(strstr(text, "vkrt: dev0 import: "));
  assert_non_null(strstr(text, "policy "));
  assert_non_null(strstr(text, "external_memory_host yes"));
  assert_non_null(strstr(text, "chunk limit 65536"));
  n = vkrt_lab_import_describe(app, true, json, sizeof(json));
  assert_true(n > 0 && n < sizeof(json));
  fprintf(stderr, "{%s}\n", json);
  assert_non_null(strstr(json, "\"import\": {\"policy\": \""));
  assert_non_null(strstr(json, "\"min_imported_host_pointer_alignment\": 4096"));
  /* Registered regions are listed with each device's path. */
  uint8_t *mem = aligned_alloc(4096, 16 * KIB);
  assert_non_null(mem);
  memset(mem, 1, 16 * KIB);
  vkt_check(app, vkrt_host_register(app, mem, 16 * KIB, NULL, NULL, NULL));
  n = vkrt_lab_import_describe(app, false, text, sizeof(text));
  assert_true(n < sizeof(text));
  assert_non_null(strstr(text, "vkrt: region ["));
  assert_non_null(strstr(text, "dev1 imported (1 chunks"));
  n = vkrt_lab_import_describe(app, true, json, sizeof(json));
  assert_true(n < sizeof(json));
  assert_non_null(strstr(json, "\"registered\": [{\"ptr\""));
  vkt_check(app, vkrt_host_unregister(app, mem));
  free(mem);
  n = vkrt_lab_import_describe(app, true, json, sizeof(json));
  /* Too small a buffer: the needed length, NUL-terminated. */
  char tiny[8];
  assert_int_equal(vkrt_lab_import_describe(app, true, tiny, sizeof(tiny)), n);
  assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
  vkt_close(app);
}

int main(int argc, char **argv) {
  if (argc > 1) /* one case by name or pattern (tools/mutation-check.sh) */
    cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_policy_file_backed),
      cmocka_unit_test(test_staging_ring),
      cmocka_unit_test(test_upload_paths_counted),
      cmocka_unit_test(test_fault_import_fails_prestage),
      cmocka_unit_test(test_fault_prestage_alloc_fails),
      cmocka_unit_test(test_import_only_error),
      cmocka_unit_test(test_fault_no_host_import),
      cmocka_unit_test(test_alignment_above_page),
      cmocka_unit_test(test_prestage_budget),
      cmocka_unit_test(test_prestage_progress),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_storm_imported),
      cmocka_unit_test(test_storm_prestaged),
      cmocka_unit_test(test_unregister_races_release),
      cmocka_unit_test(test_unregister_inside_last_release),
      cmocka_unit_test(test_no_leaks),
      cmocka_unit_test(test_describe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
