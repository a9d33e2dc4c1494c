#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "vkrt/kconfig.h" /* IS_ENABLED and this build's CONFIG_ symbols */
#include "vkrt/vkrt.h"

/* The tools' and examples' side of a multi-host appliance (CONFIG_VKRT_TRANSPORT_MPI,
 * tools/hosts.c; vkrt-bench, vkrt-probe, vkrt-service): under mpirun every rank of
 * MPI_COMM_WORLD is one host of the appliance and only rank 0 prints. Without MPI (or with
 * one rank): one host, and these are no-ops. */
#if IS_ENABLED(CONFIG_VKRT_TRANSPORT_MPI)
/* MPI_Init_thread(MPI_THREAD_MULTIPLE) once; ranks other than 0 send stdout to /dev/null. */
void tool_hosts_init(void);
/* MPI_Finalize; with rc != 0 and several ranks MPI_Abort instead, so no host waits in a
 * collective for one that left. */
void tool_hosts_finish(int rc);
int tool_hosts(void);
int tool_host_rank(void);
/* With several ranks the appliance of `options` spans them (vkrt_mpi_options_set). */
void tool_hosts_attach(vkrt_options *options);
double tool_hosts_max(double v);
uint64_t tool_hosts_sum(uint64_t v);
/* True on every rank when every rank passed the same v. */
bool tool_hosts_same(uint64_t v);
/* Mean seconds of `iters` back-to-back MPI_Allreduce(MPI_SUM) of `bytes` of host floats per
 * rank over every rank (the limit the hierarchical allreduce is held against); max over
 * ranks. 0 with one rank. */
double tool_hosts_mpi_allreduce_s(uint64_t bytes, int iters);
#else
static inline void tool_hosts_init(void) {}
static inline void tool_hosts_finish(int rc) { (void)rc; }
static inline int tool_hosts(void) { return 1; }
static inline int tool_host_rank(void) { return 0; }
static inline void tool_hosts_attach(vkrt_options *options) { (void)options; }
static inline double tool_hosts_max(double v) { return v; }
static inline uint64_t tool_hosts_sum(uint64_t v) { return v; }
static inline bool tool_hosts_same(uint64_t v) {
  (void)v;
  return true;
}
static inline double tool_hosts_mpi_allreduce_s(uint64_t bytes, int iters) {
  (void)bytes;
  (void)iters;
  return 0;
}
#endif
