#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static struct bench_command *commands;

void bench_register(struct bench_command *cmd) {
  struct bench_command **p = &commands;
  while (*p && strcmp((*p)->name, cmd->name) < 0)
    p = &(*p)->next;
  cmd->next = *p;
  *p = cmd;
}

double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void log_to_stderr(void *user, vkrt_log_level level, const char *message) {
  (void)user;
  static const char *const names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "vkrt[%s]: %s\n", names[level], message);
}

vkrt_appliance *bench_open(const vkrt_options *options_or_null) {
  vkrt_options options;
  if (options_or_null) {
    options = *options_or_null;
  } else {
    vkrt_options_initialize(&options);
  }
  /* The bench owns its host as vkrt-service does: a wait spins through a timed batch of a
   * few ms instead of blocking past the library's 2 ms and coming back ~90 us late (on an
   * H100 that was 1.03-1.10 x the GPU time on the wall clock of 65-110 us ops). `--lab
   * stream_spin_us=N` (cases) sets another budget once the appliance is open. */
  if (!options.wait_spin_us)
    options.wait_spin_us = BENCH_WAIT_SPIN_US;
  if (!options.log) {
    /* VKRT_BENCH_LOG=info: plans, paths and the lab's pipeline statistics too */
    const char *level = getenv("VKRT_BENCH_LOG");
    options.log = log_to_stderr;
    options.log_level = level && !strcmp(level, "info") ? VKRT_LOG_INFO : VKRT_LOG_WARN;
  }
  vkrt_appliance *app = NULL;
  char why[1024];
  vkrt_status s = vkrt_open(&options, &app, why, sizeof(why));
  if (s != VKRT_OK) {
    fprintf(stderr, "vkrt-bench: cannot open the appliance: %s: %s\n", vkrt_status_str(s), why);
    exit(1);
  }
  return app;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
  if (n <= 0)
    return 0;
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_random_blocks(vkrt_type type, uint8_t *p, uint64_t blocks, uint64_t *state) {
  uint64_t bs = vkrt_type_size(type);
  for (uint64_t i = 0; i < blocks * bs; i++)
    p[i] = (uint8_t)(vkrt_xorshift(state) >> 56);
  /* the f16 scales' offsets in a block: d (Q8_0), d and dmin (Q4_K), d last (Q6_K) */
  uint64_t at[2] = {type == VKRT_TYPE_Q6_K ? 208 : 0, 2};
  int scales = type == VKRT_TYPE_Q4_K ? 2 : 1;
  for (uint64_t b = 0; b < blocks; b++) /* the high byte of each */
    for (int h = 0; h < scales; h++)
      p[b * bs + at[h] + 1] = (uint8_t)(0x20 | (p[b * bs + at[h] + 1] & 3));
}

bool bench_parse_size(const char *text, uint64_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text)
    return false;
  uint64_t mul = 1;
  switch (*end) {
  case 'k': case 'K': mul = 1ull << 10; end++; break;
  case 'm': case 'M': mul = 1ull << 20; end++; break;
  case 'g': case 'G': mul = 1ull << 30; end++; break;
  default: break;
  }
  if (*end == 'i' || *end == 'B')
    end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
  if (*end != '\0')
    return false;
  *out = (uint64_t)v * mul;
  return true;
}

static int usage(FILE *f) {
  fprintf(f, "usage: vkrt-bench <command> [options]   (vkrt-bench <command> --help)\n"
             "       vkrt-bench --version\ncommands:\n");
  for (struct bench_command *c = commands; c; c = c->next)
    fprintf(f, "  %-12s %s\n", c->name, c->help);
  fprintf(f, "  %-12s every command above with its defaults\n", "all");
  return f == stderr ? 2 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage(stderr);
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
    return usage(stdout);
  if (!strcmp(argv[1], "--version")) {
    printf("vkrt-bench %s (board %s)\n", vkrt_version(), vkrt_config_value("CONFIG_VKRT_BOARD"));
    return 0;
  }
  if (!strcmp(argv[1], "all")) {
    int rc = 0;
    for (struct bench_command *c = commands; c; c = c->next) {
      char *sub_argv[] = {(char *)c->name, NULL};
      printf("# vkrt-bench %s\n", c->name);
      fflush(stdout);
      rc |= c->run(1, sub_argv);
    }
    return rc;
  }
  for (struct bench_command *c = commands; c; c = c->next)
    if (!strcmp(c->name, argv[1]))
      return c->run(argc - 1, argv + 1);
  /* the commands tools/Sources builds only with the lab */
  static const char *const need_the_lab[] = {"cases", "chain", "concat", "copy", "matmul",
                                             "quant", "record", "sync", "transpose"};
  for (size_t i = 0; !IS_ENABLED(CONFIG_VKRT_LAB) && i < sizeof(need_the_lab) / sizeof(*need_the_lab); i++)
    if (!strcmp(need_the_lab[i], argv[1])) {
      fprintf(stderr, "vkrt-bench: '%s' needs the lab, which this build leaves out "
                      "(CONFIG_VKRT_LAB; a bench build: make <board>_defconfig lab.config)\n",
              argv[1]);
      return 2;
    }
  fprintf(stderr, "vkrt-bench: unknown command '%s'\n", argv[1]);
  return usage(stderr);
}
