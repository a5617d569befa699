// Messages larger than a slot travel as chunks, one per slot (docs/protocol.md, "Chunks"). A
// node keeps one entry per message whose chunks are passing through it: which chunk comes
// next (a lower one is a replayed copy, a higher one means chunks were lost upstream), how its
// chunks are handled (decided at its first chunk, for all of them), the downstream branch its
// chunks follow, and, when the stage needs whole messages, the chunks held for reassembly.
//
// Fixed capacity, no allocation: senders never interleave two chunked messages on one link, so
// a node has at most one message in passage per inbound link; when all entries are taken, one
// that holds nothing (a message being discarded) goes first, else the one used least recently
// (its message is counted as incomplete).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "hoprelay/daemon/held_slots.h"

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
  // The downstream peers its frames go to (a BranchSets::Set), fixed at its first chunk: a
  // reload while it is half sent must not change them. Null until then.
  void* branches = nullptr;
  // route = round-robin / hash: the one of them (a Downstream) its first chunk went to.
  const void* downstream = nullptr;
  bool forwarded = false;  // kForward: chunks of it went downstream (an abort must end it)
  // kForward, forwarded: when the link its chunks came on went down (0: not orphaned). The
  // sender normally reconnects and sends the rest; if not, an abort ends it downstream.
  uint64_t orphaned_ns = 0;
  // kAssemble: the chunks held, in order, linked through their notes (SlotNote::next), and
  // their bytes.
  transport::Slot* first = nullptr;
  transport::Slot* last = nullptr;
  uint32_t held = 0;
  uint64_t bytes = 0;
  transport::InboundLink* link = nullptr;  // the link its first chunk came on (and held ones)
  uint64_t last_use = 0;
  bool used = false;

  void hold(transport::Slot& slot, HeldSlots& notes) {
    notes.note(slot).next = nullptr;
    (last ? notes.note(*last).next : first) = &slot;
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
  static constexpr size_t kCapacity = 256;

  Partial* find(uint32_t origin, uint64_t seq);
  bool full() const { return used_ == kCapacity; }
  // The entry to give up when full(): one holding nothing first, else the least recently used.
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
