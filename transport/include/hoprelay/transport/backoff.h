// Reconnect delays, the same for every transport: exponential from 50 ms to 3 s, each delay
// drawn from [b/2, b] (jitter), so that a restarted relay is not hit by every upstream at the
// same instant.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace hoprelay::transport {

class Backoff {
 public:
  static constexpr uint32_t kMinMs = 50;
  static constexpr uint32_t kMaxMs = 3000;

  // The next delay; each call doubles the bound up to kMaxMs.
  std::chrono::milliseconds next() {
    bound_ms_ = bound_ms_ == 0 ? kMinMs : std::min(bound_ms_ * 2, kMaxMs);
    static thread_local std::minstd_rand rng{std::random_device{}()};
    return std::chrono::milliseconds(bound_ms_ / 2 + rng() % (bound_ms_ / 2 + 1));
  }
  // After a successful connection.
  void reset() { bound_ms_ = 0; }
  // After a refusal by the peer: retry, but at the slowest pace (a reload may fix it).
  void slowest() { bound_ms_ = kMaxMs; }

 private:
  uint32_t bound_ms_ = 0;
};

}  // namespace hoprelay::transport
