// The sending end's ledger of posted frames, the one every outbound link keeps: TCP, verbs, the
// in-process link and a link thread's proxy (daemon/link_threads.cpp). Each of them used to
// write its own, and "credit validation", "which frame does this outcome name" and "give the
// unacknowledged frames back newest first" were written four times; a transport now keeps only
// what differs (TCP its headers and what is written, verbs its work requests), in arrays of its
// own indexed by index().
//
// Frames are numbered from 0 in the order they were posted since the link came up (reset()):
// frames [acked(), tail()) are posted and not acknowledged. Frame n lands in the peer's slot
// n % peer_slots (slot_ring.h): credits come back in ring order, so a credit acknowledges the
// oldest frames, and an outcome, which names a slot, names exactly one unacknowledged frame.
//
// Owner: the link, on its event loop's thread. reset() and grow() allocate (setup path: a link
// coming up); nothing else allocates, locks or logs (the datapath).
#pragma once

#include <cstdint>
#include <vector>

#include "hoprelay/transport/slot_ring.h"
#include "hoprelay/transport/wire.h"

namespace hoprelay::transport {

struct OutFrame;

class FrameLedger {
 public:
  struct Frame {
    void* cookie = nullptr;  // OutFrame::cookie: handed back in on_acked / on_returned
    uint64_t seq = 0;
    uint32_t origin = 0;
    uint32_t chunk = 0;
    bool outcome = false;  // the peer reported an outcome for it (at most one per frame)
    // OutFrame::slot, and the generation it had when posted (Slot::generation).
    const Slot* slot = nullptr;
    uint32_t generation = 0;
  };

  // A link comes up: empty, at most `credits` frames in flight (the peer's slots, or fewer when
  // the link's own queues are smaller), frame n landing in slot n % `peer_slots`.
  void reset(uint32_t credits, uint32_t peer_slots);
  // Room for `credits` frames in flight, keeping those posted (a link thread's proxy, whose
  // peer's slots grew on a reload).
  void grow(uint32_t credits);

  uint32_t capacity() const { return static_cast<uint32_t>(frames_.size()); }
  uint32_t peer_slots() const { return peer_slots_; }
  uint64_t acked() const { return acked_; }
  uint64_t tail() const { return tail_; }
  uint32_t in_flight() const { return static_cast<uint32_t>(tail_ - acked_); }
  bool empty() const { return tail_ == acked_; }
  // Frames that may be posted now: none after the peer's BYE.
  uint32_t room() const { return draining_ ? 0 : capacity() - in_flight(); }
  // Where frame `n` (in [acked(), tail()]) keeps its state, in the ledger and in the
  // transport's own arrays of capacity() entries.
  uint32_t index(uint64_t n) const { return static_cast<uint32_t>(n % frames_.size()); }
  // The slot of the peer's ring the next frame lands in.
  uint32_t next_slot() const { return static_cast<uint32_t>(tail_ % peer_slots_); }
  const Frame& at(uint64_t n) const { return frames_[index(n)]; }
  const Frame& oldest() const { return at(acked_); }

  // Records a posted frame as the newest (the caller checked room() or its own limit); returns
  // its index().
  uint32_t push(const OutFrame& frame);

  // The peer drains (its BYE): nothing more is posted, and the link closes once drained().
  void peer_draining() { draining_ = true; }
  bool draining() const { return draining_; }
  bool drained() const { return draining_ && empty(); }

  // Whether `f` is still its slot's frame (always, for a frame posted from no slot). When its
  // slot took another frame before `f` was acknowledged, the owner released the slot too
  // early: handing `f` back would release (or requeue) the newer frame, so the caller must
  // not, and this reports it (invariants.h, kStaleRelease), naming `event`.
  bool current(const Frame& f, const char* event) const {
    if (!f.slot || f.slot->generation == f.generation) [[likely]]
      return true;
    report_stale(f, event);
    return false;
  }

  // A credit frame: the `credits` oldest frames are acknowledged, oldest first, each handed to
  // on_acked(cookie), which may post more. False, with nothing acknowledged, when it credits
  // none or frames never sent: those below `sent` (TCP: written whole; the others: tail()).
  // Stops early when on_acked dropped the link (return_all()). A frame no longer current()
  // is acknowledged without on_acked.
  template <typename OnAcked>
  bool acknowledge(uint32_t credits, uint64_t sent, OnAcked&& on_acked) {
    if (credits == 0 || credits > sent - acked_) return false;
    const uint64_t generation = generation_;
    for (uint32_t i = 0; i < credits && generation == generation_; ++i) {
      const Frame& f = frames_[index(acked_)];
      ++acked_;
      if (current(f, "acknowledged")) on_acked(f.cookie);
    }
    return true;
  }

  // An outcome frame names the slot its frame took in the peer's ring, and the frame's origin,
  // seq and chunk: the frame it reports on, marked as reported, or null when it names none
  // sent and unacknowledged (below `sent`, as for acknowledge()) or one already reported (a
  // protocol violation: the caller closes the link).
  Frame* outcome_target(const FrameHeader& h, uint64_t sent);

  // The link dropped or closed: every unacknowledged frame goes to on_returned(cookie), newest
  // first, so that an owner pushing each to the front of its queue has them in their original
  // order; the ledger starts over empty. Returns how many came back. A frame no longer
  // current() does not come back (it is counted).
  template <typename OnReturned>
  uint64_t return_all(OnReturned&& on_returned) {
    const uint64_t first = acked_, last = tail_;
    acked_ = tail_ = 0;
    draining_ = false;
    ++generation_;
    for (uint64_t i = last; i-- > first;) {
      const Frame& f = frames_[index(i)];
      if (current(f, "returned")) on_returned(f.cookie);
    }
    return last - first;
  }

 private:
  // The error path of current(): out of line, as it formats.
  void report_stale(const Frame& f, const char* event) const;

  std::vector<Frame> frames_ = std::vector<Frame>(1);
  uint32_t peer_slots_ = 1;
  uint64_t acked_ = 0;
  uint64_t tail_ = 0;
  uint64_t generation_ = 0;  // return_all(): a loop over acknowledgements stops
  bool draining_ = false;
};

}  // namespace hoprelay::transport
