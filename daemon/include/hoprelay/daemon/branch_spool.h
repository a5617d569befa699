// The spool of one downstream branch, as Downstreams (downstreams.h) runs it (issue 42,
// docs/topology.md "Spooling a slow or down branch"): when the branch has been behind for
// spool_after, what is routed to it goes to disk (spool.h) instead of waiting in the node's
// slots, so that the slots go back upstream once the spool has it durably and the other
// branches run at their own speed; the branch is sent what the spool holds, in order, as it
// has credit, until it has caught up, and then the live stream goes to it directly again.
//
// Owns: the Spool, the send buffers frames from the spool are posted from (one per frame the
// branch may have in flight, allocated from the transport, so registered over verbs), when the
// branch started being behind, and the spool's series. Downstreams decides what goes in and
// when, and keeps the order against the frames that went out before the spool started.
// Setup (the constructor) throws std::runtime_error; the rest returns a status or a bool.
// Nothing here allocates or logs per message. One thread (the node's event loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/daemon/spool.h"
#include "hoprelay/transport/slot_ring.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class BranchSpool {
 public:
  // The spool of `peer` at node `spec`: `<spec.spool_dir>/<spec.name>/<peer>`, recovered as
  // it was left (a branch with records in it starts active). `window`: the most frames the
  // branch may have in flight (its slots). Throws std::runtime_error naming the directory.
  BranchSpool(const config::NodeSpec& spec, const std::string& peer, uint32_t window,
              NodeMetrics& metrics);
  // Its send buffers, from `transport` once it has a device (over verbs: after the node
  // listens, Downstreams::connect): before the first next(). Throws TransportError.
  void allocate_buffers(transport::Transport& transport);
  BranchSpool(const BranchSpool&) = delete;
  BranchSpool& operator=(const BranchSpool&) = delete;

  // What is routed to the branch goes to the spool.
  bool active() const { return active_; }
  void activate() { active_ = true; }
  // Everything spooled was sent and acknowledged: the live stream may go to the branch again.
  bool caught_up() const { return spool_.empty(); }
  void deactivate() { active_ = false; }

  // Once a second, whether the branch is behind now (Downstreams::tick): true once it has been
  // behind at every look for spool_after.
  bool behind_for_long(bool behind, std::chrono::steady_clock::time_point now,
                       std::chrono::milliseconds spool_after);

  // Appends the frame in `s` (not yet durable: sync()).
  Spool::Status put(const transport::Slot& s, int64_t wall_ns);
  Spool::Status sync() { return spool_.sync(); }
  // The next spooled frame, read into a send buffer: false when there is none or the window
  // is full; a read error is counted and logged by the caller (error()).
  bool next(transport::OutFrame& f);
  Spool::Status read_status() const { return read_status_; }
  // Whether a frame's cookie is one of this spool's (else it is a slot's).
  bool owns(const void* cookie) const {
    const auto* c = static_cast<const char*>(cookie);
    return c >= cookies_.data() && c < cookies_.data() + cookies_.size();
  }
  // The frame next() gave could not be posted: it is read again next time.
  void unread() { spool_.unread_last(); }
  // The oldest frame in flight from the spool was acknowledged: it leaves the spool. Its
  // payload bytes, and whether it was an end mark (not a message), for the branch's counters.
  struct Acked {
    uint32_t length = 0;
    bool end_mark = false;
  };
  Acked acked();
  // The branch's link went down: what was in flight from the spool is sent again.
  void link_down() { spool_.rewind(); }
  // Drops everything spooled (the branch was removed from the topology and given up): the
  // number of messages dropped.
  uint64_t discard();

  // The wall clock (CLOCK_REALTIME), for a spooled message's age, which a restart keeps.
  static int64_t wall_ns();

  Spool& spool() { return spool_; }
  const std::string& dir() const { return spool_.dir(); }
  // The gauges, from the spool's state (once a second).
  void publish(int64_t wall_ns);
  void count_spooled(uint64_t n);

 private:
  Spool spool_;
  bool active_ = false;
  std::chrono::steady_clock::time_point behind_since_{};
  bool behind_ = false;
  std::unique_ptr<transport::MemoryRegion> buffers_;
  uint32_t slot_size_;
  uint32_t window_;
  // One address per buffer, handed out as the frames' cookies; what each buffer holds.
  std::vector<char> cookies_;
  std::vector<Acked> sent_;
  Spool::Status read_status_ = Spool::Status::kOk;
  NodeMetrics::SpoolSeries series_;
};

}  // namespace hoprelay::daemon
