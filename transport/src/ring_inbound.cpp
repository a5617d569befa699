#include "hoprelay/transport/ring_inbound.h"

#include "hoprelay/transport/outcome.h"

namespace hoprelay::transport {

void RingInbound::start_ring(std::byte* base, uint32_t slots, uint32_t slot_size,
                             const MemoryRegion* memory, std::byte* outcomes,
                             uint32_t outcome_stride) {
  ring_.emplace(base, slots, slot_size, this, memory);
  outcomes_ = outcomes;
  outcome_stride_ = outcome_stride;
  pending_outcomes_.clear();
  pending_outcomes_.reserve(slots);
  outcomes_emitted_ = 0;
  pending_credits_ = 0;
}

void RingInbound::release(Slot& slot, const Outcome* outcome) {
  if (outcome && !closed()) {
    // Encoded into the slot's own buffer, which stays untouched until the slot is used and
    // released again: after its credit, which goes after this frame.
    encode_outcome_frame(slot, *outcome, outcome_buffer(slot.index));
    pending_outcomes_.push_back(slot.index);
    schedule_flush();
  }
  const uint32_t freed_now = ring_->release(slot);
  if (closed()) {
    if (ring_->in_use() == 0) reap();
    return;
  }
  if (freed_now == 0) return;
  if (!freed(freed_now)) return;
  pending_credits_ += freed_now;
  schedule_flush();
}

void RingInbound::schedule_flush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  loop_.defer([this] {
    flush_scheduled_ = false;
    if (!closed()) send_returns();
  });
}

void RingInbound::flush_returns() {
  if (!returns_open()) return;
  // Outcomes first: each must reach the sender before the credit that covers its slot.
  while (outcomes_emitted_ < pending_outcomes_.size()) {
    const std::byte* frame = outcome_buffer(pending_outcomes_[outcomes_emitted_]);
    const uint32_t length = kFrameHeaderSize + load_le<uint32_t>(frame + 8);
    if (!emit_outcome({frame, length})) return;
    ++outcomes_emitted_;
  }
  pending_outcomes_.clear();
  outcomes_emitted_ = 0;
  if (pending_credits_ != 0) {
    FrameHeader credit{FrameType::kCredit};
    credit.credits = pending_credits_;
    if (!emit_header(credit)) return;
    pending_credits_ = 0;
  }
  if (bye_pending_ && emit_header(FrameHeader{FrameType::kBye})) bye_pending_ = false;
}

}  // namespace hoprelay::transport
