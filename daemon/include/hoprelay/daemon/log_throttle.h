// The bookkeeping of a warning that can come in floods (a drop of one kind, an end mark given
// up at a join): the first occurrence is logged in full at once, with what a person needs to
// find it (origin, sequence number, peer); after that at most one line per interval says how
// many more came. After a quiet interval the next one is logged in full again. The owner
// formats the lines; this class keeps the counts and says when (spdlog's base_sink keeps the
// bookkeeping the same way and leaves the formatting to the one method a sink overrides).
//
// No allocation and no lock: a few integer operations per occurrence.
#pragma once

#include <cstdint>

namespace hoprelay::daemon {

class LogThrottle {
 public:
  static constexpr uint64_t kDefaultIntervalNs = 5'000'000'000u;

  explicit LogThrottle(uint64_t interval_ns = kDefaultIntervalNs) : interval_ns_(interval_ns) {}

  // `count` more occurrences at `now_ns`: true when the caller logs this one in full now.
  bool note(uint64_t now_ns, uint64_t count = 1) {
    total_ += count;
    if (logged_ && (pending_ != 0 || now_ns - logged_ns_ < interval_ns_)) {
      pending_ += count;
      return false;
    }
    logged_ = true;
    logged_ns_ = now_ns;
    return true;
  }
  // Once a second: true when a line with the count is due (occurrences not logged, and the
  // interval passed since the last line): `pending` of them in the last `elapsed_ns`. The
  // caller logs that line; the count starts again.
  bool due(uint64_t now_ns, uint64_t& pending, uint64_t& elapsed_ns) {
    if (pending_ == 0 || now_ns - logged_ns_ < interval_ns_) return false;
    pending = pending_;
    elapsed_ns = now_ns - logged_ns_;
    pending_ = 0;
    logged_ns_ = now_ns;
    return true;
  }
  uint64_t total() const { return total_; }
  uint64_t interval_seconds() const { return interval_ns_ / 1'000'000'000u; }

 private:
  uint64_t interval_ns_;
  uint64_t total_ = 0;
  uint64_t pending_ = 0;  // since the last line
  uint64_t logged_ns_ = 0;
  bool logged_ = false;
};

}  // namespace hoprelay::daemon
