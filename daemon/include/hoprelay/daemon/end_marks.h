// End-of-stream marks at a node, as one component: a head stamps its producers' marks; where
// branches join again, one mark passes on once every branch's copy is in, or without the
// missing ones after peer_down_timeout (end_joins.h says why, and why the copies before the
// last are not held); at a leaf, the receiver gets it, or it is logged and given back.
//
// Owns: the joins (EndJoins: which copies are in, which mark is in flight), the throttle of
// the "passed on without every branch" warning.
// Calls: HeldSlots (holds, repeats, the node's own frames), Downstreams::to_all(), the
// Receiver, Releaser::release(). Once per stream, never per message.
// One thread (the node's event loop).
#pragma once

#include <cstdint>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/downstreams.h"
#include "hoprelay/daemon/end_joins.h"
#include "hoprelay/daemon/held_slots.h"
#include "hoprelay/daemon/log_throttle.h"
#include "hoprelay/daemon/receiver.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class EndMarks {
 public:
  // `started_ns`: the node's start (end marks are held a while after it: end_joins.h).
  EndMarks(const config::Topology& topology, const config::NodeSpec& spec,
           transport::EventLoop& loop, HeldSlots& held, Downstreams& downstreams,
           Releaser& releaser, uint64_t started_ns);

  // A leaf's application (Node::set_receiver), or null.
  void set_receiver(Receiver* receiver) { receiver_ = receiver; }
  // An end mark came on `link` in `slot`.
  void on_end(transport::InboundLink& link, transport::Slot& slot);
  // The end mark in `slot` goes back (Node::release): a mark that completed a join is no
  // longer in flight.
  void released(const transport::Slot& slot) {
    joins_.released({slot.origin, slot.seq, slot.chunk}, &slot);
  }
  // Once a second: marks that waited too long pass on; the throttled warning's summary.
  void tick();
  // A reload: the joins of the new topology; what now has every copy passes on.
  void apply(const config::Topology& topology, const config::NodeSpec& spec);

 private:
  // True when `slot` passes on now. False when it was acknowledged (a copy before the last, or
  // after its end mark passed on) or goes with the copy passed on.
  bool join(transport::InboundLink& link, transport::Slot& slot);
  bool give_up(EndJoins::Key key, const char* why);
  void log_given_up(const EndJoins::Key& key, size_t copies_in, const char* why);
  void flush_given_up();
  uint64_t limit_ns() const;  // peer_down_timeout: how long an end mark waits for a branch
  void expire();
  void settle();
  void pass_on(transport::Slot& slot);

  const config::NodeSpec* spec_;
  transport::EventLoop& loop_;
  HeldSlots& held_;
  Downstreams& downstreams_;
  Releaser& releaser_;
  Receiver* receiver_ = nullptr;
  EndJoins joins_;
  const uint32_t stamp_;       // this node's, for its producers' end marks (EndJoins::stamp_of)
  const uint64_t started_ns_;  // the node's start: end marks are held a while after it
  LogThrottle given_up_;       // end marks passed on without every branch's copy
};

}  // namespace hoprelay::daemon
