/* MPI_Bcast of one file to every rank, for bench/fleet.sh (docs/performance.md, "A fleet"):
 * what an MPI user would write to put a checkpoint on every host of a job.
 *
 *   mpirun ... mpi_file_bcast IN OUTDIR
 *
 * Rank 0 reads IN whole into memory; after a barrier, every rank takes part in MPI_Bcast calls
 * of at most 1 GiB each (an int count) until it holds the file, then writes it to
 * OUTDIR/h<rank>.out and enters a second barrier. Rank 0 prints one line:
 *   mpi_file_bcast BYTES SECONDS CPU_S
 * SECONDS runs at rank 0 from the end of the first barrier to the end of the second: a rank
 * enters it only once its copy is written, so it covers every host having the whole file, as
 * fleet.sh times the other systems (receivers already running, source sending). CPU_S is the
 * user + system time every rank spent in that interval, summed (the start-up of mpirun and of
 * each host's orted, about a CPU second at 4 hosts, is left out as it is from the time). The
 * algorithm and transport are whatever mpirun's MCA parameters select. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_seconds.h"

static int rank;

static void die(const char* what, const char* path) {
  fprintf(stderr, "mpi_file_bcast (rank %d): %s%s%s\n", rank, what, path ? ": " : "",
          path ? path : "");
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) die("usage: mpi_file_bcast IN OUTDIR", NULL);

  /* The size first, so that every rank can allocate its copy. */
  uint64_t size = 0;
  char* data = NULL;
  if (rank == 0) {
    FILE* in = fopen(argv[1], "rb");
    if (!in) die("cannot open", argv[1]);
    if (fseek(in, 0, SEEK_END) != 0) die("cannot seek", argv[1]);
    size = (uint64_t)ftell(in);
    rewind(in);
    data = malloc(size ? size : 1);
    if (!data) die("out of memory for", argv[1]);
    if (size && fread(data, 1, size, in) != size) die("short read of", argv[1]);
    fclose(in);
  }
  MPI_Bcast(&size, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank != 0) {
    data = malloc(size ? size : 1);
    if (!data) die("out of memory", NULL);
    /* Touch every page now, so the timed part does not count page faults rank 0 has not. */
    memset(data, 0, size);
  }
  char out_path[4096];
  snprintf(out_path, sizeof out_path, "%s/h%d.out", argv[2], rank);

  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  const double cpu_start = cpu_seconds();
  const uint64_t kPiece = 1u << 30;
  for (uint64_t at = 0; at < size; at += kPiece) {
    const uint64_t n = size - at < kPiece ? size - at : kPiece;
    MPI_Bcast(data + at, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
  }
  if (rank != 0) {
    FILE* out = fopen(out_path, "wb");
    if (!out) die("cannot create", out_path);
    if (size && fwrite(data, 1, size, out) != size) die("short write to", out_path);
    if (fclose(out) != 0) die("cannot write", out_path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double seconds = MPI_Wtime() - start;
  const double cpu = cpu_seconds() - cpu_start;
  double cpu_all = 0;
  MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mpi_file_bcast %llu %.6f %.3f\n", (unsigned long long)size, seconds, cpu_all);
  }
  free(data);
  MPI_Finalize();
  return 0;
}
