/* Latency histogram shared by the benchmark's two latency recorders: the `bench-latency` stage
 * (bench/latency_stage.c, at hoprelay's leaf nodes) and the ZeroMQ chain's sink
 * (bench/zmq_chain.cpp), so both are bucketed and written the same way and bench/report.py
 * reads one format.
 *
 * The producer writes its send time, CLOCK_MONOTONIC in nanoseconds as a little-endian u64,
 * into a message's first 8 bytes; the recorder subtracts it from its own clock when the whole
 * message has arrived. Both ends run on one host, so they share the clock.
 *
 * Buckets are log-linear: values below 64 ns exactly, then 32 buckets per power of two, so
 * a bucket is at most 1/32 (3.1 %) of its value wide. Values of 2^40 ns (18 minutes) and more,
 * and stamps from the future, count as invalid. Plain C99, header only.
 */
#ifndef HOPRELAY_BENCH_LATENCY_HIST_H
#define HOPRELAY_BENCH_LATENCY_HIST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define LAT_SUB_BITS 5
#define LAT_MAX_EXP 40
#define LAT_BUCKETS (64 + (LAT_MAX_EXP - 6) * (1 << LAT_SUB_BITS))

typedef struct lat_hist {
  uint64_t count;   /* valid samples */
  uint64_t invalid; /* negative or >= 2^40 ns */
  uint64_t buckets[LAT_BUCKETS];
} lat_hist;

static inline uint64_t lat_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writes the current time as the stamp into the first 8 bytes of a payload (>= 8 bytes). */
static inline void lat_stamp(void* payload) {
  uint64_t now = lat_now_ns();
  memcpy(payload, &now, sizeof now); /* little-endian hosts only, like the benchmark */
}

static inline int lat_bucket(uint64_t v) {
  if (v < 64) return (int)v;
  int e = 63 - __builtin_clzll(v); /* 6 .. LAT_MAX_EXP - 1 */
  int sub = (int)((v >> (e - LAT_SUB_BITS)) & ((1u << LAT_SUB_BITS) - 1));
  return 64 + (e - 6) * (1 << LAT_SUB_BITS) + sub;
}

/* Lowest value of bucket i; its highest is lat_bucket_low(i + 1) - 1. */
static inline uint64_t lat_bucket_low(int i) {
  if (i < 64) return (uint64_t)i;
  int e = 6 + (i - 64) / (1 << LAT_SUB_BITS);
  uint64_t sub = (uint64_t)((i - 64) % (1 << LAT_SUB_BITS));
  return (1ull << e) + (sub << (e - LAT_SUB_BITS));
}

/* Records the latency of a payload whose first 8 bytes are a stamp, against `now`. */
static inline void lat_record(lat_hist* h, const void* payload, uint64_t now) {
  uint64_t stamp;
  memcpy(&stamp, payload, sizeof stamp);
  if (stamp > now || now - stamp >= (1ull << LAT_MAX_EXP)) {
    ++h->invalid;
    return;
  }
  ++h->count;
  ++h->buckets[lat_bucket(now - stamp)];
}

/* Writes the histogram to `path` atomically (PATH.tmp, then renamed):
 *   count N
 *   invalid M
 *   LOW_NS HIGH_NS COUNT      one line per non-empty bucket, in order
 * Returns 0, or -1 with errno set. */
static inline int lat_write(const lat_hist* h, const char* path) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return -1;
  FILE* f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "count %llu\ninvalid %llu\n", (unsigned long long)h->count,
          (unsigned long long)h->invalid);
  for (int i = 0; i < LAT_BUCKETS; ++i) {
    if (h->buckets[i] == 0) continue;
    fprintf(f, "%llu %llu %llu\n", (unsigned long long)lat_bucket_low(i),
            (unsigned long long)lat_bucket_low(i + 1) - 1, (unsigned long long)h->buckets[i]);
  }
  if (fclose(f) != 0) return -1;
  return rename(tmp, path);
}

#endif /* HOPRELAY_BENCH_LATENCY_HIST_H */
