/* The /proc/self/maps scan that decides whether a range is file-backed (no GPU). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "import/host_maps.h"

static const char maps[] =
    "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f3666400000-7f3668600000 r--p 00000000 fd:01 1234567                    /tmp/weights.bin\n"
    "7f3668600000-7f3668800000 rw-p 00000000 00:00 0 \n"
    "7ffd1a000000-7ffd1a021000 rw-p 00000000 00:00 0                          [stack]";

static void test_scan(void **state) {
  (void)state;
  size_t n = strlen(maps);
  assert_true(vkrt_maps_range_file_backed(maps, n, 0x7f3666400000ull, 0x7f3666401000ull));
  /* a range ending exactly where the file mapping starts does not overlap it */
  assert_false(vkrt_maps_range_file_backed(maps, n, 0x7f3660000000ull, 0x7f3666400000ull));
  /* anonymous right after the file, heap, stack: not file-backed */
  assert_false(vkrt_maps_range_file_backed(maps, n, 0x7f3668600000ull, 0x7f3668700000ull));
  assert_false(vkrt_maps_range_file_backed(maps, n, 0x55d0c0a00000ull, 0x55d0c0a01000ull));
  assert_false(vkrt_maps_range_file_backed(maps, n, 0x7ffd1a000000ull, 0x7ffd1a001000ull));
  /* a range spanning anonymous and file pages is file-backed */
  assert_true(vkrt_maps_range_file_backed(maps, n, 0x7f3668500000ull, 0x7f3668700000ull));
  /* junk lines are ignored, not crashed on */
  const char junk[] = "garbage\n\n-\nzz-yy r 0 0 0\n";
  assert_false(vkrt_maps_range_file_backed(junk, strlen(junk), 0, UINT64_MAX));
}

static void test_live_process(void **state) {
  (void)state;
  char path[] = "/tmp/vkrt-maps-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 1 << 16), 0);
  void *file = mmap(NULL, 1 << 16, PROT_READ, MAP_PRIVATE, fd, 0);
  void *anon = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(file != MAP_FAILED && anon != MAP_FAILED);
  uint64_t f = (uint64_t)(uintptr_t)file, a = (uint64_t)(uintptr_t)anon;
  assert_true(vkrt_host_range_file_backed(f + 100, f + 200));
  assert_false(vkrt_host_range_file_backed(a, a + (1 << 16)));
  munmap(file, 1 << 16);
  munmap(anon, 1 << 16);
  close(fd);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_scan), cmocka_unit_test(test_live_process)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
