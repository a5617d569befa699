// Messages larger than a slot travel as chunks, one per slot (docs/protocol.md, "Chunks"). A
// node keeps one entry per message whose chunks are passing through it: which chunk comes
// next (a lower one is a replayed copy, a higher one means chunks were lost upstream), how its
// chunks are handled (decided at its first chunk, for all of them), the downstream branch its
// chunks follow, and, when the stage needs whole messages, the chunks held for reassembly.
//
// Fixed capacity, no allocation: the number of messages passing through a node at once, chunk
// by chunk, is small (one per origin and path); when all entries are taken the one used least
// recently is given up (its message is counted as incomplete).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::daemon {

struct Partial {
  enum class Mode : uint8_t {
    kForward,   // each chunk passes the stage and goes on at once (cut-through)
    kAssemble,  // chunks are held until the last one; the stage sees the whole message
    kDiscard,   // the message was dropped or cannot be completed: its remaining chunks go
  };
  uint32_t origin = 0;
  uint64_t seq = 0;
  uint32_t next_chunk = 0;
  Mode mode = Mode::kForward;
  bool routed = false;  // `branch` chosen (route = round-robin / hash)
  size_t branch = 0;
  // kAssemble: the chunks held, in order, linked through Slot::next, and their bytes.
  transport::Slot* first = nullptr;
  transport::Slot* last = nullptr;
  uint32_t held = 0;
  uint64_t bytes = 0;
  transport::InboundLink* link = nullptr;  // where the held chunks arrived
  uint64_t last_use = 0;
  bool used = false;

  void hold(transport::Slot& slot) {
    slot.next = nullptr;
    (last ? last->next : first) = &slot;
    last = &slot;
    ++held;
    bytes += slot.length;
  }
  // Hands the held chunks over (first of the list) and forgets them.
  transport::Slot* take() {
    transport::Slot* list = first;
    first = last = nullptr;
    held = 0;
    bytes = 0;
    return list;
  }
};

class PartialTable {
 public:
  static constexpr size_t kCapacity = 64;

  Partial* find(uint32_t origin, uint64_t seq);
  bool full() const { return used_ == kCapacity; }
  // The entry used least recently (only when full()).
  Partial& oldest();
  // A fresh entry for (origin, seq); requires !full().
  Partial& open(uint32_t origin, uint64_t seq);
  // Frees an entry; it must hold no chunks.
  void close(Partial& p);
  size_t size() const { return used_; }
  template <class Fn>
  void for_each(Fn&& fn) {
    for (auto& p : entries_) {
      if (p.used) fn(p);
    }
  }

 private:
  std::array<Partial, kCapacity> entries_{};
  size_t used_ = 0;
  uint64_t clock_ = 0;
  Partial* last_ = nullptr;  // the entry found last: chunks of one message come in a row
};

}  // namespace hoprelay::daemon
