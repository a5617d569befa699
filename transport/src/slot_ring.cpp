#include "hoprelay/transport/slot_ring.h"

#include <fmt/format.h>

#include "hoprelay/transport/invariants.h"

namespace hoprelay::transport {

SlotRing::SlotRing(std::byte* base, uint32_t slots, uint32_t slot_size, InboundLink* owner,
                   const MemoryRegion* memory)
    : slots_(slots), slot_size_(slot_size) {
  uint32_t stride = stride_for(slot_size);
  for (uint32_t i = 0; i < slots; ++i) {
    slots_[i].frame = base + size_t{i} * stride;
    slots_[i].link = owner;
    slots_[i].memory = memory;
    slots_[i].index = i;
  }
}

Slot* SlotRing::acquire() {
  if (in_use() == slots()) return nullptr;
  Slot& s = slots_[head_ % slots_.size()];
  s.held = true;
  ++s.generation;
  ++head_;
  ++held_;
  return &s;
}

uint32_t SlotRing::release(Slot& slot) {
  if (!slot.held) {
    // Ignored, rather than corrupt the credit count (a second credit for one frame would let
    // the sender write into a slot still in use), but never silently.
    report_invariant(Invariant::kDoubleRelease,
                     fmt::format("slot {} of a ring of {} released when it was not held",
                                 slot.index, slots_.size()));
    return 0;
  }
  slot.held = false;
  --held_;
  uint32_t freed = 0;
  while (tail_ < head_ && !slots_[tail_ % slots_.size()].held) {
    ++tail_;
    ++freed;
  }
  return freed;
}

}  // namespace hoprelay::transport
