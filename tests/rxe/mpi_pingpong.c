/* Open MPI on the Soft-RoCE VM (tests/rxe/verbs_suite.sh, peers_probe): a two-rank ping-pong,
 * the smallest MPI program that makes mpirun pick and wire up a transport between two
 * processes. On Debian 12's Open MPI 4.1 neither the openib BTL nor pml ucx gets that far on
 * rxe (docs/performance.md); if one ever does, this prints what it measured.
 * Built on the host by run_verbs_suite.sh with mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds for `iters` round trips of `size` bytes between ranks 0 and 1. */
static double pingpong(char* buf, int size, int iters, int rank) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) {
    if (rank == 0) {
      MPI_Send(buf, size, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, size, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf, size, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, size, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  return MPI_Wtime() - t0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  enum { kSmall = 64, kLarge = 65536, kIters = 500 };
  char* buf = malloc(kLarge);
  if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(buf, 1, kLarge);
  double small = pingpong(buf, kSmall, kIters, rank);
  double large = pingpong(buf, kLarge, kIters, rank);
  if (rank == 0)
    printf("mpi_pingpong: %d B %.1f us half round trip; %d B %.3f Gb/s\n", kSmall,
           small / kIters / 2 * 1e6, kLarge, 2.0 * kLarge * kIters * 8 / large / 1e9);
  free(buf);
  MPI_Finalize();
  return 0;
}
