/* vkrt-bench: one binary, one subcommand per module (upload, allreduce, copy, ...). Each
 * subcommand file registers itself with BENCH_COMMAND, so modules stay independent. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vkrt/vkrt.h"

struct bench_command {
  const char *name;
  const char *help;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
  struct bench_command *next;
};

void bench_register(struct bench_command *cmd);

#define BENCH_COMMAND(ident, cmd_name, cmd_help, fn)                                     \
  static struct bench_command bench_cmd_##ident = {.name = cmd_name, .help = cmd_help,   \
                                                   .run = fn};                           \
  __attribute__((constructor)) static void bench_register_##ident(void) {                \
    bench_register(&bench_cmd_##ident);                                                  \
  }

/* Shared helpers. */
double bench_now_s(void);
/* Opens the board's appliance with a stderr log at WARN; exits with a message on error. */
vkrt_appliance *bench_open(const vkrt_options *options_or_null);
/* Median of n doubles (sorts in place). */
double bench_median(double *v, int n);
/* Parses "4K", "256M", "1G" (powers of 1024) into bytes; returns false on junk. */
bool bench_parse_size(const char *text, uint64_t *out);

