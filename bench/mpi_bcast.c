/* MPI_Bcast reference for bench/run.sh (docs/performance.md): the throughput of a loop of
 * MPI_Bcast calls from rank 0 to every other rank, with whatever algorithm, transport and
 * segment size mpirun's MCA parameters select (run.sh forces Open MPI's TCP BTL on loopback and
 * one coll_tuned_bcast_algorithm per run).
 *
 *   mpirun ... mpi_bcast [--target SECONDS | --count N] SIZE...
 *
 * For every SIZE (bytes), rank 0 prints one line:
 *   mpi_bcast SIZE COUNT SECONDS CPU_S OTHERS
 * SECONDS runs at rank 0 from the end of a barrier to the end of the barrier after COUNT
 * broadcasts: a rank enters that barrier only after its last MPI_Bcast has returned, so the time
 * covers every rank having received every message (a root's MPI_Bcast may return as soon as its
 * sends are buffered). CPU_S is user + system time of every rank over that interval (the idle
 * mpirun is not counted); OTHERS is the share of the CPUs this process may use that other
 * processes took meanwhile (busy time from /proc/stat minus CPU_S), as run.sh reports for its
 * own runs.
 *
 * --target (default 5): counts as run.sh sizes them, so every system of a run is timed alike:
 * pilots from 32 MiB worth of messages (4 to 200,000), growing 4x until one takes 0.2 s, then a
 * run scaled to SECONDS, repeated (up to twice) while it took under half of that. Doing this
 * inside one mpirun spares a start-up (about a second) per pilot.
 * --count N: N broadcasts per size, no pilots (the smoke run).
 *
 * Rank 0 writes the message's sequence number into its first 8 bytes; every other rank checks
 * it after each MPI_Bcast, and the run fails unless every rank saw every number in order. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cpu_seconds.h"

typedef struct result {
  uint64_t count;
  double seconds;
  double cpu;    /* every rank's, summed (rank 0 only) */
  double others; /* rank 0 only */
} result;

static int rank;

static void die(const char* what) {
  fprintf(stderr, "mpi_bcast (rank %d): %s\n", rank, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Seconds the whole machine spent busy: the fields run.sh's busy_ticks() sums. */
static double busy_seconds(void) {
  unsigned long long v[8] = {0};
  FILE* f = fopen("/proc/stat", "r");
  if (!f) return 0;
  if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
             &v[5], &v[6], &v[7]) != 8) {
    v[0] = v[1] = v[2] = v[5] = v[6] = v[7] = 0;
  }
  fclose(f);
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static int usable_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return (int)sysconf(_SC_NPROCESSORS_ONLN);
  return CPU_COUNT(&set);
}

/* One timed run of COUNT broadcasts of SIZE bytes; collective. */
static result run(char* buf, int size, uint64_t count) {
  result r = {count, 0, 0, 0};
  const size_t stamp = size < 8 ? (size_t)size : 8;
  uint64_t out_of_order = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double busy0 = rank == 0 ? busy_seconds() : 0;
  const double cpu0 = cpu_seconds();
  const double t0 = MPI_Wtime();
  for (uint64_t i = 0; i < count; ++i) {
    if (rank == 0) memcpy(buf, &i, stamp);
    if (MPI_Bcast(buf, size, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) die("MPI_Bcast failed");
    if (rank != 0) {
      uint64_t got = 0;
      memcpy(&got, buf, stamp);
      /* Compared on the stamped bytes only: a message under 8 bytes holds part of i. */
      uint64_t want = 0;
      memcpy(&want, &i, stamp);
      out_of_order += got != want;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  r.seconds = MPI_Wtime() - t0;
  const double cpu = cpu_seconds() - cpu0;
  if (rank == 0) {
    const double busy = busy_seconds() - busy0;
    MPI_Reduce(&cpu, &r.cpu, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    const double o = (busy - r.cpu) / (r.seconds * usable_cpus());
    r.others = o < 0 ? 0 : (o > 1 ? 1 : o);
  } else {
    MPI_Reduce(&cpu, NULL, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  }
  uint64_t bad = 0;
  MPI_Reduce(&out_of_order, &bad, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0 && bad) {
    fprintf(stderr, "mpi_bcast: %llu messages of %d B arrived with the wrong sequence number\n",
            (unsigned long long)bad, size);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return r;
}

/* Rank 0 decides every run's count and broadcasts it first (0: this size is done), so the
 * other ranks need not repeat the pilot logic. */
static uint64_t next_count(uint64_t count) {
  MPI_Bcast(&count, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return count;
}

static uint64_t scaled(double target, const result* r) {
  const double n = target * (double)r->count / r->seconds;
  return n < 4 ? 4 : (uint64_t)n;
}

static result measure(char* buf, int size, uint64_t fixed, double target) {
  result r = {0, 0, 0, 0};
  if (rank != 0) {
    uint64_t c;
    while ((c = next_count(0)) != 0) r = run(buf, size, c);
    return r;
  }
  if (fixed) {
    r = run(buf, size, next_count(fixed));
  } else {
    uint64_t c = (32u << 20) / (uint64_t)size;
    c = c < 4 ? 4 : (c > 200000 ? 200000 : c);
    for (;;) { /* pilots, until start-up costs no longer skew the rate */
      r = run(buf, size, next_count(c));
      if (r.seconds >= 0.2) break;
      c *= 4;
    }
    r = run(buf, size, next_count(scaled(target, &r)));
    /* Warm-up (connections, page faults) makes short runs look slow: as run.sh does. */
    for (int i = 0; i < 2 && r.seconds < target / 2; ++i)
      r = run(buf, size, next_count(scaled(target, &r) + 1));
  }
  next_count(0);
  return r;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double target = 5;
  uint64_t fixed = 0;
  int first = 1;
  for (; first + 1 < argc && argv[first][0] == '-'; first += 2) {
    if (strcmp(argv[first], "--target") == 0) {
      target = atof(argv[first + 1]);
    } else if (strcmp(argv[first], "--count") == 0) {
      fixed = strtoull(argv[first + 1], NULL, 10);
    } else {
      break;
    }
  }
  if (first >= argc || (target <= 0 && !fixed)) {
    if (rank == 0) fprintf(stderr, "usage: mpi_bcast [--target SECONDS | --count N] SIZE...\n");
    MPI_Finalize();
    return 2;
  }
  int max = 0;
  for (int i = first; i < argc; ++i) {
    const long s = strtol(argv[i], NULL, 10);
    if (s <= 0 || s > (1L << 30)) die("SIZE must be 1 .. 2^30 bytes");
    if (s > max) max = (int)s;
  }
  char* buf = malloc((size_t)max);
  if (!buf) die("out of memory");
  memset(buf, 'x', (size_t)max);
  for (int i = first; i < argc; ++i) {
    const int size = atoi(argv[i]);
    const result r = measure(buf, size, fixed, target);
    if (rank == 0) {
      printf("mpi_bcast %d %llu %.6f %.3f %.3f\n", size, (unsigned long long)r.count, r.seconds,
             r.cpu, r.others);
      fflush(stdout);
    }
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
