#include "hoprelay/transport/frame_ledger.h"

#include <fmt/format.h>

#include "hoprelay/transport/invariants.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {

void FrameLedger::reset(uint32_t credits, uint32_t peer_slots) {
  frames_.assign(credits ? credits : 1, Frame{});
  peer_slots_ = peer_slots ? peer_slots : 1;
  acked_ = tail_ = 0;
  draining_ = false;
  ++generation_;
}

void FrameLedger::grow(uint32_t credits) {
  if (credits <= capacity()) return;
  std::vector<Frame> bigger(credits);
  for (uint64_t n = acked_; n < tail_; ++n) bigger[n % credits] = frames_[index(n)];
  frames_ = std::move(bigger);
}

uint32_t FrameLedger::push(const OutFrame& frame) {
  const uint32_t i = index(tail_);
  frames_[i] = Frame{frame.cookie,
                     frame.seq,
                     frame.origin,
                     frame.chunk,
                     false,
                     frame.slot,
                     frame.slot ? frame.slot->generation : 0};
  ++tail_;
  return i;
}

FrameLedger::Frame* FrameLedger::outcome_target(const FrameHeader& h, uint64_t sent) {
  if (h.slot >= peer_slots_) return nullptr;
  const uint64_t n = acked_ + (h.slot + peer_slots_ - acked_ % peer_slots_) % peer_slots_;
  if (n >= sent || n >= tail_) return nullptr;
  Frame& f = frames_[index(n)];
  if (f.outcome || f.origin != h.origin || f.seq != h.seq || f.chunk != h.chunk) return nullptr;
  f.outcome = true;
  return &f;
}

void FrameLedger::report_stale(const Frame& f, const char* event) const {
  report_invariant(
      Invariant::kStaleRelease,
      fmt::format("a frame (origin {} seq {} chunk {}) {} after its slot {} had been given back "
                  "and had taken another frame (slot generation {}, {} when the frame was "
                  "posted)",
                  f.origin, f.seq, f.chunk, event, f.slot->index, f.slot->generation,
                  f.generation));
}

}  // namespace hoprelay::transport
