/* vkrt-service command line. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "service.h"

void service_usage(FILE *f) {
  fprintf(f,
          "usage: vkrt-service --weights FILE [--tokens T] [--seconds S] [--hidden H] [--layers L]\n"
          "                    [--devices N] [--verbose] [--fault import-fails]\n"
          "       vkrt-service --make-weights FILE --layers L --hidden H [--ffn F] [--dtype f16|f32]\n"
          "                    [--seed N]\n"
          "--hidden/--layers with --weights check the file's shapes (a mismatch is an error).\n");
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-')
    return false;
  *out = v;
  return true;
}

int service_parse_args(int argc, char **argv, struct service_args *a) {
  memset(a, 0, sizeof(*a));
  a->tokens = 64;
  a->seed = 1234;
  a->dtype = 1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      service_usage(stdout);
      return 0;
    } else if (!strcmp(arg, "--verbose")) {
      a->verbose = true;
      continue;
    } else if (!v) {
      ok = false;
    } else if (!strcmp(arg, "--weights")) {
      a->weights_path = v;
    } else if (!strcmp(arg, "--make-weights")) {
      a->make_path = v;
    } else if (!strcmp(arg, "--tokens")) {
      ok = parse_u64(v, &a->tokens) && a->tokens > 0;
    } else if (!strcmp(arg, "--seconds")) {
      a->seconds = atof(v);
      ok = a->seconds > 0;
    } else if (!strcmp(arg, "--layers")) {
      ok = parse_u64(v, &a->layers) && a->layers > 0;
    } else if (!strcmp(arg, "--hidden")) {
      ok = parse_u64(v, &a->hidden) && a->hidden > 0;
    } else if (!strcmp(arg, "--ffn")) {
      ok = parse_u64(v, &a->ffn) && a->ffn > 0;
    } else if (!strcmp(arg, "--seed")) {
      ok = parse_u64(v, &a->seed);
    } else if (!strcmp(arg, "--devices")) {
      ok = parse_u64(v, &a->devices) && a->devices >= 1 && a->devices <= VKRT_MAX_DEVICES;
    } else if (!strcmp(arg, "--dtype")) {
      ok = !strcmp(v, "f16") || !strcmp(v, "f32");
      a->dtype = !strcmp(v, "f16") ? 1 : 0;
    } else if (!strcmp(arg, "--fault")) {
      ok = !strcmp(v, "import-fails");
      a->fault_import = true;
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr, "vkrt-service: bad or incomplete argument '%s%s%s'\n", arg, v ? " " : "",
              v ? v : "");
      service_usage(stderr);
      return EXIT_USAGE;
    }
    i++;
  }
  return -1;
}
