#include "hoprelay/transport/inproc.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "hoprelay/transport/invariants.h"
#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::transport::inproc {

InprocInbound::InprocInbound(InprocOutbound& out, const PeerInfo& peer, uint32_t slots)
    : out_(out), entries_(slots) {
  peer_ = peer;
}

void InprocInbound::release(Slot& slot, const Outcome* outcome) {
  Entry& e = entries_[slot.index];
  if (e.released) {
    report_invariant(Invariant::kDoubleRelease,
                     fmt::format("in-process slot {} of {} released when it was not held",
                                 slot.index, entries_.size()));
    return;
  }
  --held_;
  e.released = true;
  if (out_.closed_) {
    // Its frames went back to the producer when it closed: nothing to acknowledge, but the
    // node learns from slots_held() when it holds none of this link any more.
    while (tail_ < head_ && entries_[tail_ % entries_.size()].released) ++tail_;
    return;
  }
  if (outcome) {
    if (!e.outcome) e.outcome = std::make_unique<Outcome>();  // once per entry, then reused
    *e.outcome = *outcome;
    e.dropped = true;
  }
  out_.schedule();
}

uint32_t InprocInbound::slots_in_use() const {
  return static_cast<uint32_t>(head_ - tail_);
}

void InprocInbound::unreturned_origins(std::vector<uint32_t>& out) const {
  for (uint64_t i = tail_; i < head_; ++i) out.push_back(entries_[i % entries_.size()].slot.origin);
}

InprocOutbound::InprocOutbound(EventLoop& loop, LinkEvents& node, LinkEvents& producer,
                               const PeerInfo& peer, const ConnectParams& params,
                               uint32_t slot_size, const MemoryRegion* landing)
    : loop_(loop),
      node_(node),
      producer_(producer),
      in_(*this, peer, params.expected_slots),
      slot_size_(slot_size),
      landing_(landing) {
  peer_name_ = params.peer_name;
  ledger_.reset(in_.slots(), in_.slots());
  // As a transport's handshake does: admitted (or refused) once the loop runs, so the producer
  // learns it from the same callbacks, in the same place, as over a network.
  // Only `this` is captured: it fits std::function's small buffer, so neither this nor
  // schedule()'s callback allocates (the owner never runs the loop after destroying the link).
  loop_.defer([this] { admit(); });
}

void InprocOutbound::admit() {
  if (closed_) return;
  std::string reason;
  if (!node_.admit(in_.peer(), reason)) {
    closed_ = true;
    producer_.on_refused(*this, reason);
    return;
  }
  node_.on_inbound_up(in_);
  up_ = true;
  peer_next_seq_ = node_.resume_seq(in_.peer());
  producer_.on_outbound_up(*this);
  producer_.on_credit(*this);
}

uint32_t InprocOutbound::credits() const {
  return up_ ? in_.slots() - static_cast<uint32_t>(in_.head_ - in_.tail_) : 0;
}

bool InprocOutbound::post(const OutFrame& frame) {
  if (credits() == 0) return false;
  auto index = static_cast<uint32_t>(in_.head_ % in_.entries_.size());
  InprocInbound::Entry& e = in_.entries_[index];
  // A slot as a transport fills it from the wire, over the producer's memory: the frame header
  // would be in front of the payload (the region leaves room; nothing reads it).
  const uint32_t generation = e.slot.generation + 1;
  e.slot = Slot{};
  e.slot.generation = generation;
  if (landing_) {
    // A copy, as a network link's receiver gets one: the node changes it in place.
    std::byte* at = landing_->data() + size_t{index} * SlotRing::stride_for(slot_size_);
    std::memcpy(at + kFrameHeaderSize, frame.payload, frame.length);
    e.slot.frame = at;
    e.slot.memory = landing_;
  } else {
    e.slot.frame = const_cast<std::byte*>(frame.payload) - kFrameHeaderSize;
    e.slot.memory = frame.memory;
  }
  e.slot.link = &in_;
  e.slot.index = index;
  e.slot.length = frame.length;
  e.slot.origin = frame.origin;
  e.slot.flags = frame.flags;
  e.slot.opcode = Opcode::kLocal;
  e.slot.seq = frame.seq;
  e.slot.chunk = frame.chunk;
  ledger_.push(frame);
  e.released = false;
  e.dropped = false;
  ++in_.head_;
  schedule();
  return true;
}

void InprocOutbound::schedule() {
  if (scheduled_ || closed_) return;
  scheduled_ = true;
  loop_.defer([this] {
    scheduled_ = false;
    run();
  });
}

void InprocOutbound::run() {
  // Frames to the node first: a stage that drops releases at once, and that acknowledgement
  // goes back in this same run.
  while (!closed_ && in_.delivered_ < in_.head_) {
    InprocInbound::Entry& e = in_.entries_[in_.delivered_++ % in_.entries_.size()];
    ++in_.held_;
    node_.on_message(in_, e.slot);
  }
  uint32_t acked = 0;
  while (!closed_ && in_.tail_ < in_.head_) {
    InprocInbound::Entry& e = in_.entries_[in_.tail_ % in_.entries_.size()];
    if (!e.released) break;
    // Its outcome while the entry is still this frame's; the credit after it.
    if (e.dropped) {
      producer_.on_outcome(*this, ledger_.oldest().cookie, *e.outcome);
      if (closed_) break;  // closed from the callback: close() settled the entries
    }
    ++in_.tail_;
    ++acked;
    ledger_.acknowledge(1, ledger_.tail(),
                        [this](void* cookie) { producer_.on_acked(*this, cookie); });
  }
  if (acked != 0 && !closed_) producer_.on_credit(*this);
}

void InprocOutbound::close() {
  if (closed_) return;
  closed_ = true;
  const bool was_up = up_;
  up_ = false;
  // Everything not acknowledged goes back first, while the entries still say which frames
  // those are (the node, told below, releases what it was assembling at once).
  const uint64_t unacknowledged =
      ledger_.return_all([this](void* cookie) { producer_.on_returned(*this, cookie); });
  // Frames never handed to the node are not its to release.
  for (uint64_t i = in_.delivered_; i < in_.head_; ++i) {
    in_.entries_[i % in_.entries_.size()].released = true;
  }
  in_.delivered_ = in_.head_;
  while (in_.tail_ < in_.head_ && in_.entries_[in_.tail_ % in_.entries_.size()].released) {
    ++in_.tail_;
  }
  // What the node holds stays valid until it releases it (the memory is the node's, the
  // entries this object's): those releases acknowledge nothing any more.
  if (was_up) node_.on_inbound_down(in_, "the producer closed its link");
  if (was_up) report_down(producer_, "closed by the producer", false, unacknowledged, true);
}

InprocTransport::InprocTransport(EventLoop& loop, LinkEvents& node, LinkEvents& producer,
                                 Identity identity, uint32_t slot_size, Allocate node_memory)
    : loop_(loop),
      node_(node),
      producer_(producer),
      identity_(std::move(identity)),
      slot_size_(slot_size),
      node_memory_(std::move(node_memory)) {}

void InprocTransport::listen(const ListenParams&) {
  throw TransportError("an in-process link takes no connections: its node listens for them");
}

std::unique_ptr<OutboundLink> InprocTransport::connect(const ConnectParams& params) {
  PeerInfo peer{identity_.role, identity_.name, identity_.topology_hash, identity_.origin,
                "this process"};
  return std::make_unique<InprocOutbound>(loop_, node_, producer_, peer, params, slot_size_);
}

namespace {

// A view of the node's region that starts kFrameHeaderSize bytes (a cache line) in: a slot's
// frame pointer, the header's place in front of a payload, stays inside the region.
class Headroom final : public MemoryRegion {
 public:
  static constexpr size_t kRoom = 64;
  Headroom(MemoryRegion& whole, size_t bytes)
      : MemoryRegion(whole.data() + kRoom, bytes), whole_(whole) {}
  uint32_t lkey() const override { return whole_.lkey(); }

 private:
  MemoryRegion& whole_;
};

}  // namespace

std::unique_ptr<MemoryRegion> InprocTransport::allocate(size_t bytes) {
  return std::make_unique<Headroom>(node_memory_(bytes + Headroom::kRoom), bytes);
}

}  // namespace hoprelay::transport::inproc
