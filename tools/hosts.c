/* vkrt-bench, vkrt-probe and vkrt-service across hosts (CONFIG_VKRT_TRANSPORT_MPI): MPI_COMM_WORLD's ranks
 * are the hosts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.h"
#include "vkrt/vkrt_mpi.h"

static int hosts = 1, rank;
static bool started;

void tool_hosts_init(void) {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return;
  MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  started = true;
  MPI_Comm_size(MPI_COMM_WORLD, &hosts);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE && hosts > 1)
    fprintf(stderr, "vkrt-bench: MPI gives thread level %d, libvkrt needs MPI_THREAD_MULTIPLE\n",
            provided);
  if (rank != 0 && !freopen("/dev/null", "w", stdout))
    fprintf(stderr, "vkrt-bench: host%d: cannot silence stdout\n", rank);
}

void tool_hosts_finish(int rc) {
  if (started && rc != 0 && hosts > 1) {
    fflush(stdout);
    fprintf(stderr, "host%d: exit status %d: aborting every host\n", rank, rc);
    MPI_Abort(MPI_COMM_WORLD, rc);
  }
  if (started)
    MPI_Finalize();
  started = false;
}

int tool_hosts(void) { return hosts; }
int tool_host_rank(void) { return rank; }

void tool_hosts_attach(vkrt_options *options) {
  if (hosts > 1)
    vkrt_mpi_options_set(options, MPI_COMM_WORLD);
}

double tool_hosts_max(double v) {
  double out = v;
  if (hosts > 1)
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

uint64_t tool_hosts_sum(uint64_t v) {
  uint64_t out = v;
  if (hosts > 1)
    MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

bool tool_hosts_same(uint64_t v) {
  uint64_t lo = v, hi = v;
  if (hosts > 1) {
    MPI_Allreduce(&v, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&v, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  }
  return lo == hi;
}

double tool_hosts_mpi_allreduce_s(uint64_t bytes, int iters) {
  if (hosts < 2)
    return 0;
  int count = (int)((bytes + 3) / 4);
  float *send = malloc((size_t)count * 4), *recv = malloc((size_t)count * 4);
  if (!send || !recv) {
    free(send);
    free(recv);
    return 0;
  }
  for (int i = 0; i < count; i++)
    send[i] = (float)(i % 61 + rank);
  MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++)
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t = (MPI_Wtime() - t0) / iters;
  free(send);
  free(recv);
  return tool_hosts_max(t);
}
