// A rate limit for whole frames: the generic cell rate algorithm (GCRA, the ATM traffic
// policer's; redis-cell and Stripe's limiters use it too), a token bucket kept as one time
// instead of a token count. `tat` (theoretical arrival time) is when the link would be idle
// had every frame so far gone at exactly the rate; a frame may go once now is within `burst`
// of it, and pushes it on by the frame's time at the rate. So a frame is never split (a
// frame larger than the burst goes whole, and the next waits for it to be paid for), the
// long-run rate is exact (no rounding that accumulates: each frame's time is rounded once,
// to a nanosecond), and an idle link may send `burst` worth at once, no more.
//
// Pure: no clock of its own (the caller passes now), no allocation, no lock. One thread.
#pragma once

#include <algorithm>
#include <cstdint>

namespace hoprelay {

class TokenBucket {
 public:
  // `bits_per_second` > 0; `burst_ns`: how far ahead of the rate an idle link may get.
  TokenBucket(uint64_t bits_per_second, uint64_t burst_ns)
      : bits_per_second_(bits_per_second), burst_ns_(burst_ns) {}

  uint64_t bits_per_second() const { return bits_per_second_; }

  // True when a frame may go at `now_ns` (it need not be taken: may_take then take, when
  // two buckets must both allow it).
  bool may_take(uint64_t now_ns) const { return tat_ns_ <= now_ns + burst_ns_; }
  // Pays for a frame of `bytes` sent at `now_ns`.
  void take(uint64_t bytes, uint64_t now_ns) {
    tat_ns_ = std::max(tat_ns_, now_ns) + ns_for(bytes);
  }
  // How long from `now_ns` until a frame may go (0: now).
  uint64_t wait_ns(uint64_t now_ns) const {
    return may_take(now_ns) ? 0 : tat_ns_ - burst_ns_ - now_ns;
  }
  // The time `bytes` take at the rate, rounded up to a nanosecond. `bytes` below 2 GiB (a
  // frame: at most one slot), so that bits times 10^9 stays within 64 bits.
  uint64_t ns_for(uint64_t bytes) const {
    const uint64_t scaled = bytes * 8 * 1'000'000'000u;
    return (scaled + bits_per_second_ - 1) / bits_per_second_;
  }

 private:
  uint64_t bits_per_second_;
  uint64_t burst_ns_;
  uint64_t tat_ns_ = 0;
};

}  // namespace hoprelay
