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

/* Hosts (CONFIG_VKRT_TRANSPORT_MPI, bench/hosts.c): under mpirun every rank is one host of
 * the appliance and only rank 0 prints. Without MPI (or with one rank): one host. */
#if IS_ENABLED(CONFIG_VKRT_TRANSPORT_MPI)
/* MPI_Init_thread(MPI_THREAD_MULTIPLE) once; ranks other than 0 send stdout to /dev/null. */
void bench_hosts_init(void);
void bench_hosts_finish(void);
int bench_hosts(void);
int bench_host_rank(void);
/* With several ranks the appliance of `options` spans them (vkrt_mpi_options_set). */
void bench_hosts_attach(vkrt_options *options);
double bench_hosts_max(double v);
uint64_t bench_hosts_sum(uint64_t v);
/* Mean seconds of `iters` back-to-back MPI_Allreduce(MPI_SUM) of `bytes` of host floats per
 * rank over every rank (the limit the hierarchical allreduce is held against); max over
 * ranks. 0 with one rank. */
double bench_hosts_mpi_allreduce_s(uint64_t bytes, int iters);
#else
static inline void bench_hosts_init(void) {}
static inline void bench_hosts_finish(void) {}
static inline int bench_hosts(void) { return 1; }
static inline int bench_host_rank(void) { return 0; }
static inline void bench_hosts_attach(vkrt_options *options) { (void)options; }
static inline double bench_hosts_max(double v) { return v; }
static inline uint64_t bench_hosts_sum(uint64_t v) { return v; }
static inline double bench_hosts_mpi_allreduce_s(uint64_t bytes, int iters) {
  (void)bytes;
  (void)iters;
  return 0;
}
#endif
