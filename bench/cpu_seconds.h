/* CPU time of the calling process (user + system, every thread: Open MPI's own included), for
 * the MPI references of bench/ (mpi_bcast.c, mpi_file_bcast.c). */
#pragma once

#include <sys/resource.h>

static inline double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}
