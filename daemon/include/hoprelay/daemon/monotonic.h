// The data path's clock read, for what the event loop's per-iteration clock cannot time (a
// sampled stage call).
#pragma once

#include <cstdint>
#include <ctime>

namespace hoprelay::daemon {

// Monotonic nanoseconds (vDSO clock_gettime: no system call on the data path).
inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

}  // namespace hoprelay::daemon
