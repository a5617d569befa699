// The receive slots of one inbound link.
//
// A ring of `slots` fixed-size slots in one block of memory (registered once, for verbs). Each
// slot holds one frame exactly as it crossed the wire: the 32-byte header, then the payload.
// Frames fill slots strictly in ring order, so a sender always knows which slot its next frame
// lands in. Slots may be released out of order (fan-out peers acknowledge at different times),
// but credits return in order: the ring's tail only moves past released slots, so a credit
// always names the oldest slots and a sender never writes into a slot still in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hoprelay/transport/wire.h"

namespace hoprelay::transport {

class InboundLink;
class MemoryRegion;

// How a frame arrived (metrics label `opcode`): over a TCP stream, by RDMA SEND, by RDMA
// WRITE with immediate, or from a producer in the node's own process (transport/inproc).
enum class Opcode : uint8_t { kTcp = 0, kSend = 1, kWrite = 2, kLocal = 3 };
inline constexpr const char* kOpcodeNames[] = {"tcp", "send", "write", "local"};

// A frame in a receive ring, as the transport hands it over. What its owner keeps about it
// (the node: daemon/held_slots.h) lives beside it, found through `link` and `index`.
struct Slot {
  std::byte* frame = nullptr;  // kFrameHeaderSize header bytes, then the payload
  InboundLink* link = nullptr;
  const MemoryRegion* memory = nullptr;  // the ring's region: forwarding posts from it
  uint32_t index = 0;                    // in its ring: 0 .. InboundLink::slots() - 1
  uint32_t length = 0;                   // payload bytes (the stage may change it)
  uint32_t origin = 0;
  uint16_t flags = 0;
  Opcode opcode = Opcode::kTcp;
  bool held = false;  // the ring's: handed over and not released yet
  uint64_t seq = 0;
  uint32_t chunk = 0;  // index in its message when it is a chunk (FrameHeader::chunk)
  // Counts the frames this slot has taken (SlotRing::acquire, the in-process link's landing,
  // a node's own frames). Whoever keeps a pointer to the slot across an asynchronous
  // boundary keeps this with it, and learns so that the slot took another frame meanwhile:
  // a posted frame's ledger (frame_ledger.h) does, so that a late acknowledgement cannot
  // release the frame that came after it.
  uint32_t generation = 0;
  std::byte* payload() const { return frame + kFrameHeaderSize; }
};

class SlotRing {
 public:
  // `base` must hold size_for(slots, slot_size) bytes and outlive the ring; `memory` is the
  // region it lies in (nullptr in tests).
  SlotRing(std::byte* base, uint32_t slots, uint32_t slot_size, InboundLink* owner,
           const MemoryRegion* memory = nullptr);

  // Bytes between slot starts: header + payload capacity, rounded to a cache line.
  static constexpr uint32_t stride_for(uint32_t slot_size) {
    return (static_cast<uint32_t>(kFrameHeaderSize) + slot_size + 63u) & ~63u;
  }
  static constexpr size_t size_for(uint32_t slots, uint32_t slot_size) {
    return size_t{slots} * stride_for(slot_size);
  }

  uint32_t slots() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t slot_size() const { return slot_size_; }
  uint32_t in_use() const { return static_cast<uint32_t>(head_ - tail_); }
  // Slots acquired and not released (in_use() also counts released ones whose credit waits
  // for an older slot's release).
  uint32_t held() const { return held_; }
  uint32_t free_slots() const { return slots() - in_use(); }
  // Ring index the next frame must land in.
  uint32_t expected_index() const { return static_cast<uint32_t>(head_ % slots_.size()); }

  // Takes the next slot in ring order; nullptr when all are held (the sender overran its
  // credits, which is a protocol violation).
  Slot* acquire();
  // Gives a slot back; returns how many credits that frees (0 while an older slot is held).
  // A slot not held (released twice) frees nothing and is reported (invariants.h).
  uint32_t release(Slot& slot);
  Slot& at(uint32_t index) { return slots_[index]; }
  // Appends the origin of every frame whose credit has not gone back to the sender, released
  // or not: the sender sends them again if the link fails. (A released slot keeps its fields
  // until its credit lets a new frame into it.)
  void unreturned_origins(std::vector<uint32_t>& out) const {
    for (uint64_t i = tail_; i < head_; ++i) out.push_back(slots_[i % slots_.size()].origin);
  }

 private:
  std::vector<Slot> slots_;
  uint32_t slot_size_;
  uint64_t head_ = 0;  // frames acquired
  uint64_t tail_ = 0;  // frames whose credit has been returned
  uint32_t held_ = 0;  // acquired, not released
};

}  // namespace hoprelay::transport
