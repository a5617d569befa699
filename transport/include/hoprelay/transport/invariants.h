// Broken invariants of this process's own bookkeeping: a bug here, never a peer's doing (what
// a peer breaks is a protocol error, transport.h, and closes that peer's link). The datapath
// cannot stop for one, and must not hide one either: report_invariant() counts it
// (hoprelay_invariant_violations_total{kind}, read at scrape time by the daemon's metrics) and
// logs it as an error, the 1st, 2nd, 4th, 8th, ... of each kind, so a flood cannot fill the
// journal. Any thread; no lock, no allocation on the counting path.
#pragma once

#include <cstdint>
#include <string_view>

namespace hoprelay::transport {

enum class Invariant : uint8_t {
  // A receive slot released when it was not held: released twice, or by a holder that had
  // already given it back (slot_ring.h). Ignored, so that the credit count stays right.
  kDoubleRelease = 0,
  // A frame forwarded from a receive slot was acknowledged (or came back) after that slot had
  // been given back and had taken another frame (frame_ledger.h): released too early, so the
  // late acknowledgement would release the newer frame. Not handed on.
  kStaleRelease = 1,
  kCount
};
inline constexpr const char* kInvariantNames[] = {"double_release", "stale_release"};

// Counts one violation of `which`; `where` says what broke, for the log line.
void report_invariant(Invariant which, std::string_view where);
// Violations of `which` in this process so far.
uint64_t invariant_violations(Invariant which);

}  // namespace hoprelay::transport
