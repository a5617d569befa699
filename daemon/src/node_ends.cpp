// End marks at a node: the head stamps them, and where branches join again one passes on once
// every branch's copy is in (end_joins.h says why, and why the others are not held).
#include <algorithm>

#include "hoprelay/daemon/node.h"
#include "node_log.h"

namespace hoprelay::daemon {

void Node::on_end(transport::InboundLink& link, transport::Slot& slot) {
  slot.arrived_ns = loop_.now_ns();
  if (link.peer().role == transport::PeerRole::kProducer) {
    slot.chunk = stamp_;  // a producer's: from here on it says which head the stream entered by
  } else if (!join_end(link, slot)) {
    return;
  }
  pass_on_end(slot);
}

// True when `slot` passes on now. False when it was acknowledged (a copy before the last, or
// after its end mark passed on) or goes with the copy passed on.
bool Node::join_end(transport::InboundLink& link, transport::Slot& slot) {
  const uint32_t want = end_joins_.copies(slot.chunk);
  // One path from its head, or a stamp this topology does not know (a reload in between):
  // passed on as it comes.
  if (want <= 1) return true;
  const EndJoins::Key key{slot.origin, slot.seq, slot.chunk};
  transport::Slot* in_flight = nullptr;
  if (end_joins_.was_done(key, in_flight)) {
    if (in_flight) {
      // A later copy (a slower branch's, or a replay of the one passed on after its link
      // failed) while the end mark passed on is still in flight: acknowledged with it.
      slot.refs = 0;
      slot.routes = 0;
      slot.repeats = std::exchange(in_flight->repeats, &slot);
      hold(slot);
    } else {
      consume(link, slot);
    }
    return false;
  }
  EndJoins::Waiting* w = end_joins_.waiting(key);
  if (!w) w = &end_joins_.wait(key, loop_.now_ns());
  const std::string& peer = link.peer().name;
  if (std::find(w->peers.begin(), w->peers.end(), peer) == w->peers.end()) {
    w->peers.push_back(peer);
  }
  if (w->peers.size() < want) {
    consume(link, slot);  // not held: it would stop this link's credits (end_joins.h)
    if (end_joins_.all_waiting().size() > EndJoins::kMaxWaiting) expire_ends();
    return false;
  }
  end_joins_.stop_waiting(key);
  end_joins_.done(key, &slot);
  return true;
}

// Passes on an end mark of the node's own for `key` (its copies were acknowledged as they
// came): a branch's copy did not come in time, or a reload left fewer branches to wait for.
// `key` by value: it may be the waiting entry's own, which stop_waiting() destroys.
bool Node::give_up_end(EndJoins::Key key, const char* why) {
  transport::Slot* s = own_frame();
  if (!s) return false;  // every frame of its own in flight: the next tick tries again
  if (why) {
    const EndJoins::Waiting* w = end_joins_.waiting(key);
    node_log().warn(
        "origin {}: end of stream after {} passed on with the end marks of {} of {} branches "
        "({}): a branch lost or dropped its copy, or this node restarted while it waited",
        key.origin, key.seq, w ? w->peers.size() : 0, end_joins_.copies(key.stamp), why);
  }
  end_joins_.stop_waiting(key);
  s->origin = key.origin;
  s->seq = key.seq;
  s->chunk = key.stamp;
  s->flags = transport::kFlagEnd;
  s->arrived_ns = loop_.now_ns();
  end_joins_.done(key, s);
  pass_on_end(*s);
  return true;
}

// Once a second, and when one more waits than a node keeps: end marks that waited longer than
// peer_down_timeout for a branch's copy, and the oldest past kMaxWaiting. When no frame of the
// node's own is free (all in flight to a downstream that is down), the next tick tries again.
void Node::expire_ends() {
  auto& all = end_joins_.all_waiting();
  const auto limit = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(spec_->peer_down_timeout).count());
  const uint64_t now = loop_.now_ns();
  while (!all.empty()) {
    const char* why = nullptr;
    if (now - all.front().since_ns >= limit) {
      why = "no copy from the other branches within peer_down_timeout";
    } else if (all.size() > EndJoins::kMaxWaiting) {
      why = "more streams wait for a branch's end mark than a node keeps";
    } else {
      return;
    }
    if (!give_up_end(all.front().key, why)) return;
  }
}

void Node::settle_ends() {
  // A reload may have removed a branch: what now has every copy passes on.
  std::vector<EndJoins::Key> ready;
  for (const auto& w : end_joins_.all_waiting()) {
    if (w.peers.size() >= end_joins_.copies(w.key.stamp)) ready.push_back(w.key);
  }
  for (const auto& key : ready) give_up_end(key, nullptr);
}

void Node::pass_on_end(transport::Slot& slot) {
  hold(slot);
  if (active_.empty()) {
    if (receiver_) return receiver_->on_end(slot.origin, slot.seq, slot);
    node_log().info("origin {}: end of stream after {} messages", slot.origin, slot.seq);
    return release(slot);
  }
  // Every branch: each consumer behind this node learns that the stream ended, whatever the
  // route of the messages.
  slot.refs = static_cast<uint16_t>(active_.size());
  slot.routes = slot.refs;
  for (Downstream* d : active_) {
    d->waiting.push_back(&slot);
    pump(*d);
  }
}

}  // namespace hoprelay::daemon
