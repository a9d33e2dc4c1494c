# Open MPI settings for running libvkrt's multi-host programs in a container, sourced by
# tests/mpi/run.sh and usable by hand (`. tests/mpi/mpi-env.sh; mpirun "${VKRT_MPIRUN_ARGS[@]}"
# -np 2 build/bin/vkrt-bench allreduce`):
# - root may launch ranks (CI containers run as root);
# - shared memory (vader) and self only: no network interfaces probed, no TCP between ranks of
#   one machine;
# - no single-copy mechanism: CMA needs ptrace rights a container often lacks;
# - no core binding: the ranks share few cores with lavapipe's threads.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
VKRT_MPIRUN_ARGS=(--oversubscribe --bind-to none)
