/* Replays a fuzz harness's seed corpus and kept regressions in the ordinary build (gcc, no
 * libFuzzer), so `make test` and the sanitizer suites run every kept input in well under a
 * second. The program test_replay_<harness> links that harness and feeds it every file in
 * tests/fuzz/corpus/<harness>/ and tests/fuzz/regressions/<harness>/ (paths relative to the
 * source tree, where tests/run runs the programs). Each input is copied into a buffer of its
 * exact size, as libFuzzer does, so ASan sees any read past its end; an input slower than 2 s
 * fails (make fuzz uses a 5 s unit timeout for the same reason). */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char harness[128];

/* Replays every regular file in dir; returns how many, or -1 when dir does not exist. */
static int replay_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno != ENOENT)
      fail_msg("%s: %s", dir, strerror(errno));
    return -1;
  }
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    FILE *f = fopen(path, "rb");
    if (!f)
      fail_msg("%s: %s", path, strerror(errno));
    size_t size = (size_t)st.st_size;
    uint8_t *data = malloc(size ? size : 1);
    assert_non_null(data);
    if (size && fread(data, 1, size, f) != size)
      fail_msg("%s: short read", path);
    fclose(f);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    LLVMFuzzerTestOneInput(data, size); /* a wrong answer asserts, a fault is a crash */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(data);
    /* The code under test is pure validation (microseconds); a slow input is a bug too. */
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (seconds > 2.0)
      fail_msg("%s took %.1f s", path, seconds);
    count++;
  }
  closedir(d);
  return count;
}

static void test_replay(void **state) {
  (void)state;
  char dir[256];
  snprintf(dir, sizeof(dir), "tests/fuzz/corpus/%s", harness);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int seeds = replay_dir(dir);
  if (seeds <= 0)
    fail_msg("%s: no seed corpus (run from the source tree, as tests/run does)", dir);
  snprintf(dir, sizeof(dir), "tests/fuzz/regressions/%s", harness);
  int regressions = replay_dir(dir);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("vkrt-test: %s: replayed %d seed and %d regression inputs in %.3f s\n", harness, seeds,
         regressions < 0 ? 0 : regressions,
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
}

int main(int argc, char **argv) {
  (void)argc;
  /* test_replay_<harness>: the harness name is the program name's suffix. */
  const char *base = strrchr(argv[0], '/');
  base = base ? base + 1 : argv[0];
  const char *prefix = "test_replay_";
  if (strncmp(base, prefix, strlen(prefix)) != 0) {
    fprintf(stderr, "%s: program name must be %s<harness>\n", base, prefix);
    return 1;
  }
  snprintf(harness, sizeof(harness), "%s", base + strlen(prefix));
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
