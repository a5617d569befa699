// The receiving end of a link over a network (TCP, verbs): the ring frames land in, and the
// return path of credits and outcomes to the sender. The sending end's counterpart is
// frame_ledger.h. Both transports used to write this half twice (TcpInbound::release and
// flush_control, VerbsInbound::release and flush_credits); as spdlog's base_sink, this base now
// owns the bookkeeping and a transport overrides only how a control frame goes out.
//
// Owns: the receive ring (slot_ring.h); the credits freed and not sent yet; the outcomes
// encoded and not sent yet (each in its slot's outcome buffer, memory the transport gives:
// verbs' is registered); a BYE asked for by drain.
// Keeps the receiving end's rules (docs/protocol.md, "Credits"):
// - a slot's outcome leaves before the credit that covers it;
// - credits coalesce: one CREDIT frame per loop iteration, however many slots were released;
// - a BYE leaves after the credits pending when it was asked for;
// - nothing leaves before the link is up (what was released before waits for it: a frame may
//   complete before verbs' ESTABLISHED) or after it closed; a closed link goes to its reaper
//   once the node has released every slot it held.
// A transport provides: emit_outcome / emit_header, which take a frame or say that there is no
// room now (then the base stops, and the transport calls flush_returns() again when room comes:
// TCP when the socket is writable, verbs when a send completes); returns_open(); closed();
// reap(); and, if it needs them, freed() (verbs reposts the freed slots' receives there) and
// send_returns() (TCP writes what was emitted).
//
// Threading: the link's event loop only. release() and flush_returns() neither allocate, lock
// nor log (the datapath); start_ring() allocates (setup: a link admitted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "hoprelay/transport/event_loop.h"
#include "hoprelay/transport/slot_ring.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {

class RingInbound : public InboundLink {
 public:
  void release(Slot& slot, const Outcome* outcome) final;
  uint32_t slots_in_use() const final { return ring_ ? ring_->in_use() : 0; }
  uint32_t slots_held() const final { return ring_ ? ring_->held() : 0; }
  uint32_t slots() const final { return ring_ ? ring_->slots() : 0; }
  void unreturned_origins(std::vector<uint32_t>& out) const final {
    if (ring_) ring_->unreturned_origins(out);
  }

  // Credits freed and not yet sent (a test's view; the sender sees them in its credits()).
  uint32_t credits_pending() const { return pending_credits_; }
  // Outcomes encoded and not yet sent.
  uint32_t outcomes_pending() const {
    return static_cast<uint32_t>(pending_outcomes_.size() - outcomes_emitted_);
  }

 protected:
  explicit RingInbound(EventLoop& loop) : loop_(loop) {}

  // The link is admitted: its ring over `base` (SlotRing::size_for(slots, slot_size) bytes in
  // `memory`), and an outcome buffer of `outcome_stride` >= kMaxOutcomeFrame bytes per slot
  // from `outcomes`. Both must outlive the link.
  void start_ring(std::byte* base, uint32_t slots, uint32_t slot_size, const MemoryRegion* memory,
                  std::byte* outcomes, uint32_t outcome_stride);
  SlotRing& ring() { return *ring_; }

  // Drain: a BYE goes after what is pending (at the next flush).
  void queue_bye() { bye_pending_ = true; }
  bool returns_pending() const {
    return pending_credits_ != 0 || outcomes_pending() != 0 || bye_pending_;
  }
  // Emits what waits, in order: outcomes, then one CREDIT frame, then the BYE; each as long as
  // the transport takes it. Nothing while !returns_open().
  void flush_returns();

  // An encoded OUTCOME frame (in its slot's outcome buffer) to send. False: no room now, or
  // the link failed.
  virtual bool emit_outcome(std::span<const std::byte> frame) = 0;
  // A header-only frame (CREDIT or BYE) to send. False: no room now, or the link failed.
  virtual bool emit_header(const FrameHeader& header) = 0;
  // Control frames may go out (the link is up).
  virtual bool returns_open() const = 0;
  virtual bool closed() const = 0;
  // A closed link whose every slot is back: hands it to its reaper.
  virtual void reap() = 0;
  // `count` slots were freed, oldest first, before their credit is counted. False when the
  // link failed.
  virtual bool freed(uint32_t /*count*/) { return true; }
  // Once per loop iteration with releases in it: flush_returns(), and whatever else the
  // transport does to put the frames on their way (TCP writes its socket).
  virtual void send_returns() { flush_returns(); }

 private:
  // One flush per loop iteration, after the iteration's releases.
  void schedule_flush();
  std::byte* outcome_buffer(uint32_t slot) { return outcomes_ + size_t{slot} * outcome_stride_; }

  EventLoop& loop_;
  std::optional<SlotRing> ring_;
  std::byte* outcomes_ = nullptr;
  uint32_t outcome_stride_ = 0;
  uint32_t pending_credits_ = 0;
  // Slots whose OUTCOME frame is encoded and not yet sent, in release order; reserved to the
  // ring's size (no slot is released again before its credit, which goes after its outcome).
  std::vector<uint32_t> pending_outcomes_;
  size_t outcomes_emitted_ = 0;  // of pending_outcomes_
  bool bye_pending_ = false;
  bool flush_scheduled_ = false;
};

}  // namespace hoprelay::transport
