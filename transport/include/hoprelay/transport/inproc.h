// A link inside one process: libhoprelay's producer that runs its head node itself
// (docs/client.md, "A producer that runs its head") posts its frames straight into that node.
// No socket and no copy: the node's slot is the producer's buffer, so the head's stage runs
// in it and its downstream links send from it, and a message crosses one copy fewer than
// through a hoprelayd on the same host (the producer's write and the head's read are gone).
//
// The semantics are those of every transport (transport.h): credits are the head's slots, a
// slot released by the node acknowledges its frame in order (with its outcome first), and
// close() hands back what was not acknowledged, newest first. Both ends run on the producer's
// event loop; frames reach the node and acknowledgements reach the producer from deferred
// callbacks, never inside the call that caused them (a producer's send does not run the head's
// stage inside its own bookkeeping, and the node does not re-enter itself through a release).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hoprelay/transport/frame_ledger.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport::inproc {

class InprocOutbound;

// The node's end. Owned by its InprocOutbound: the node may hold its slots after it closed
// (on_inbound_down), so it lives as long as the producer's link does.
class InprocInbound final : public InboundLink {
 public:
  InprocInbound(InprocOutbound& out, const PeerInfo& peer, uint32_t slots);
  void release(Slot& slot, const Outcome* outcome) override;
  // The sender is in this process and stops with it: nothing to ask. (The producer drains
  // its head only once it has closed this link: Producer::stop_head.)
  void drain() override {}
  uint32_t slots_in_use() const override;
  uint32_t slots_held() const override { return held_; }
  uint32_t slots() const override { return static_cast<uint32_t>(entries_.size()); }
  void unreturned_origins(std::vector<uint32_t>& out) const override;
  bool in_process() const override { return true; }

 private:
  friend class InprocOutbound;
  struct Entry {
    Slot slot;
    bool released = false;
    bool dropped = false;              // `outcome` holds what the node reported
    std::unique_ptr<Outcome> outcome;  // made at the first drop in this entry, then reused
  };
  InprocOutbound& out_;
  std::vector<Entry> entries_;
  uint64_t head_ = 0;       // frames posted
  uint64_t delivered_ = 0;  // frames handed to the node
  uint64_t tail_ = 0;       // frames acknowledged to the producer
  uint32_t held_ = 0;       // handed to the node, not released
};

// The producer's end, connected to `node` (the embedded head, which must be started: its
// transport is listening) as soon as the loop runs. With a `landing`, the link copies each
// frame into it instead (a node's link to the node it stands in for, daemon/stand_in.h: that
// node's stage changes the message in place, and the sender's slot is its other branches' too):
// `landing` holds slots × SlotRing::stride_for(slot_size) bytes and outlives the link. As with a
// TCP or verbs link, its deferred callbacks hold a plain `this` (no allocation per loop iteration):
// the owner must not run the loop after destroying it (the producer destroys its loop with it).
class InprocOutbound final : public OutboundLink {
 public:
  InprocOutbound(EventLoop& loop, LinkEvents& node, LinkEvents& producer, const PeerInfo& peer,
                 const ConnectParams& params, uint32_t slot_size,
                 const MemoryRegion* landing = nullptr);

  bool up() const override { return up_; }
  uint32_t credits() const override;
  uint32_t in_flight() const override { return ledger_.in_flight(); }
  uint32_t max_payload() const override { return up_ ? slot_size_ : 0; }
  bool post(const OutFrame& frame) override;
  // Every frame not acknowledged comes back (on_returned, newest first), then the node hears
  // that the link is down. Unlike over a network, the node may still read the frames it holds
  // (they are its slots) until it releases them: an owner must not write into a returned
  // buffer of a closed link (the producer, closing, never does).
  void close() override;

 private:
  friend class InprocInbound;
  void admit();
  void schedule();
  // Deferred: posted frames to the node, in order; then acknowledgements to the producer,
  // in order, each released frame's outcome before its acknowledgement.
  void run();

  EventLoop& loop_;
  LinkEvents& node_;
  LinkEvents& producer_;
  InprocInbound in_;
  // The producer's frames not yet acknowledged (frame_ledger.h), by the same positions as the
  // node's end numbers its entries until close().
  FrameLedger ledger_;
  uint32_t slot_size_;
  const MemoryRegion* landing_;
  bool up_ = false;
  bool closed_ = false;
  bool scheduled_ = false;
};

// The producer's transport when it runs its head: connect() links it to the node in this
// process; memory comes from the node's own transport (registered with its device over verbs,
// since the node's downstream links send from it), with room for a frame header before it.
class InprocTransport final : public Transport {
 public:
  // `node`: the head's LinkEvents; `node_memory`: allocates from the head's transport and keeps
  // the region alive as long as the node's links may send from it.
  using Allocate = std::function<MemoryRegion&(size_t bytes)>;
  InprocTransport(EventLoop& loop, LinkEvents& node, LinkEvents& producer, Identity identity,
                  uint32_t slot_size, Allocate node_memory);

  std::string_view name() const override { return "in-process"; }
  void listen(const ListenParams&) override;
  void stop_listening() override {}
  std::unique_ptr<OutboundLink> connect(const ConnectParams& params) override;
  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override;
  void set_topology_hash(uint64_t hash) override { identity_.topology_hash = hash; }
  // Its one link is the producer's own, in this process: it acts for nobody else.
  void speak_for(Transport& owner) override {
    throw TransportError("the in-process link cannot act for a " + std::string(owner.name()) +
                         " transport");
  }

 private:
  EventLoop& loop_;
  LinkEvents& node_;
  LinkEvents& producer_;
  Identity identity_;
  uint32_t slot_size_;
  Allocate node_memory_;
};

}  // namespace hoprelay::transport::inproc
