/* libvkrt across hosts: the only libvkrt header that includes mpi.h (vkrt.h stays MPI-free).
 * Needs CONFIG_VKRT_TRANSPORT_MPI=y (otherwise vkrt_open returns VKRT_ERROR_UNSUPPORTED for
 * options that name a communicator).
 *
 * The application owns MPI:
 *   - it calls MPI_Init_thread(..., MPI_THREAD_MULTIPLE, &provided) before vkrt_open and
 *     MPI_Finalize after vkrt_close. MPI_THREAD_MULTIPLE is required (vkrt_open checks
 *     MPI_Query_thread): libvkrt makes its MPI calls from its collective thread (cpu_proxy) or
 *     the caller's thread (host_staged) while the application may call MPI from its own.
 *   - it hands a communicator whose ranks are the hosts (one process per host; every host
 *     opens the same board, so every host has the same device count). libvkrt duplicates it
 *     at vkrt_open (MPI_Comm_idup) and sets MPI_ERRORS_RETURN on its duplicate; the
 *     application's communicator and error handler are left alone.
 *   - vkrt_open, vkrt_close and vkrt_allreduce are collective over the communicator: every
 *     host calls them, in the same order, with the same counts and types. vkrt_open waits for
 *     the other hosts for the collective timeout or 2 minutes, whichever is longer.
 *
 * Ranks: device d of host h is global rank h * vkrt_device_count() + d (vkrt_host_rank,
 * vkrt_host_count in vkrt.h). A host that stops answering makes every rank's collective
 * fail with VKRT_ERROR_TIMEOUT naming the host, after the collective timeout. */
#pragma once
#include <mpi.h>

#include "vkrt/vkrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes vkrt_open(options, ...) span the hosts of `comm` (MPI_COMM_WORLD or a communicator
 * with one rank per host). */
static inline void vkrt_mpi_options_set(vkrt_options *options, MPI_Comm comm) {
  options->mpi = true;
  options->mpi_comm = (int64_t)MPI_Comm_c2f(comm);
}

#ifdef __cplusplus
}
#endif
