/* Links against the MPI board's image with nothing but `pkg-config --cflags --libs --static
 * vkrt` (tests/mpi/run.sh): vkrt.pc must carry Open MPI's flags, and the program opens one
 * appliance over the mpirun ranks. Prints "image_link: host<r> of <n>: VKRT_OK". */
#include <stdio.h>

#include "vkrt/vkrt_mpi.h"

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  vkrt_options o;
  vkrt_options_initialize(&o);
  vkrt_mpi_options_set(&o, MPI_COMM_WORLD);
  vkrt_appliance *app = NULL;
  char why[512] = "";
  vkrt_status s = vkrt_open(&o, &app, why, sizeof(why));
  printf("image_link: host%u of %u: %s %s\n", vkrt_host_rank(app), vkrt_host_count(app),
         vkrt_status_str(s), why);
  int bad = s != VKRT_OK || vkrt_host_count(app) < 2, any = 0;
  vkrt_close(app);
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
