// Frames a node sends of its own, from no inbound slot: an abort (the rest of a chunked message
// will not come) and the end mark a head stamps for its producers (end_marks.h). Header-only
// slots with no link (Slot::link null tells release() to give one back here): kSlots of them,
// made at the first use, so that taking one never allocates after it. None free: null, and the
// caller does without (an abort is then learnt from the next frame on the link).
// One thread (the node's loop).
#pragma once

#include <cstddef>
#include <vector>

#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::daemon {

class OwnFrames {
 public:
  static constexpr size_t kSlots = 64;

  // A free frame (length 0, no link), or null when all are in flight.
  transport::Slot* take() {
    if (slots_.empty()) {
      frames_.resize(kSlots * transport::kFrameHeaderSize);
      slots_.resize(kSlots);
      for (size_t i = 0; i < kSlots; ++i) {
        slots_[i].frame = frames_.data() + i * transport::kFrameHeaderSize;
        slots_[i].index = static_cast<uint32_t>(i);  // its note's (held_slots.h)
        free_.push_back(&slots_[i]);
      }
    }
    if (free_.empty()) return nullptr;
    transport::Slot* s = free_.back();
    free_.pop_back();
    s->length = 0;
    s->link = nullptr;
    ++s->generation;
    return s;
  }
  void give_back(transport::Slot& slot) { free_.push_back(&slot); }

 private:
  std::vector<std::byte> frames_;
  std::vector<transport::Slot> slots_;
  std::vector<transport::Slot*> free_;
};

}  // namespace hoprelay::daemon
