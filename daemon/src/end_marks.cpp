// End marks at a node (end_marks.h): the head stamps them, and where branches join again one
// passes on once every branch's copy is in (end_joins.h says why, and why the others are not
// held).
#include "hoprelay/daemon/end_marks.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "node_log.h"

namespace hoprelay::daemon {

EndMarks::EndMarks(const config::Topology& topology, const config::NodeSpec& spec,
                   transport::EventLoop& loop, HeldSlots& held, Downstreams& downstreams,
                   Releaser& releaser, uint64_t started_ns)
    : spec_(&spec),
      loop_(loop),
      held_(held),
      downstreams_(downstreams),
      releaser_(releaser),
      stamp_(EndJoins::stamp_of(spec.name)),
      started_ns_(started_ns) {
  joins_.set_topology(topology, spec.name);
}

void EndMarks::apply(const config::Topology& topology, const config::NodeSpec& spec) {
  spec_ = &spec;
  joins_.set_topology(topology, spec.name);
  settle();
}

void EndMarks::tick() {
  expire();
  flush_given_up();
}

void EndMarks::on_end(transport::InboundLink& link, transport::Slot& slot) {
  held_.note(slot).arrived_ns = loop_.now_ns();
  if (link.peer().role == transport::PeerRole::kProducer) {
    slot.chunk = stamp_;  // a producer's: from here on it says which head the stream entered by
  } else if (!join(link, slot)) {
    return;
  }
  pass_on(slot);
}

bool EndMarks::join(transport::InboundLink& link, transport::Slot& slot) {
  const uint32_t want = joins_.copies(slot.chunk);
  // One path from its head, or a stamp this topology does not know (a reload in between):
  // passed on as it comes.
  if (want <= 1) return true;
  const EndJoins::Key key{slot.origin, slot.seq, slot.chunk};
  transport::Slot* in_flight = nullptr;
  if (joins_.was_done(key, in_flight)) {
    if (in_flight) {
      // A later copy (a slower branch's, or a replay of the one passed on after its link
      // failed) while the end mark passed on is still in flight: acknowledged with it.
      held_.add_repeat(*in_flight, slot);
    } else {
      releaser_.release(slot);
    }
    return false;
  }
  EndJoins::Waiting* w = &joins_.wait(key, loop_.now_ns());
  const std::string& peer = link.peer().name;
  const bool again = std::find(w->peers.begin(), w->peers.end(), peer) != w->peers.end();
  if (!again) w->peers.push_back(peer);
  if (w->peers.size() < want) {
    if (w->held && again && w->held->link && w->held->link->peer().name == peer) {
      // The held copy again, replayed after its link dropped: acknowledged with it.
      held_.add_repeat(*w->held, slot);
    } else if (!w->held && loop_.now_ns() - started_ns_ < limit_ns()) {
      w->held = &slot;   // right after a start: kept unacknowledged (end_joins.h)
      held_.hold(slot);  // and counted as held (hoprelay_slots_in_use, a drain)
    } else {
      releaser_.release(slot);  // not held: it would stop this link's credits (end_joins.h)
    }
    if (joins_.all_waiting().size() > EndJoins::kMaxWaiting) expire();
    return false;
  }
  transport::Slot* held = w->held;
  joins_.stop_waiting(key);
  joins_.done(key, &slot);
  if (held) {  // the copy kept since the start goes with this one
    held_.unhold(*held);
    held_.add_repeat(slot, *held);
  }
  return true;
}

uint64_t EndMarks::limit_ns() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(spec_->peer_down_timeout).count());
}

// Passes on `key`'s end mark without every branch's copy: a branch's copy did not come in
// time, or a reload left fewer branches to wait for. The copy held since a start if there is
// one, else an end mark of the node's own (the copies were acknowledged as they came).
// `key` by value: it may be the waiting entry's own, which stop_waiting() destroys.
bool EndMarks::give_up(EndJoins::Key key, const char* why) {
  const EndJoins::Waiting* w = joins_.waiting(key);
  transport::Slot* held = w ? w->held : nullptr;
  transport::Slot* s = held ? held : held_.take_own();
  if (!s) return false;  // every frame of its own in flight: the next tick tries again
  if (why) log_given_up(key, w ? w->peers.size() : 0, why);
  joins_.stop_waiting(key);
  if (held) {
    held_.unhold(*held);  // held while it waited; pass_on_end holds it again
  } else {
    s->origin = key.origin;
    s->seq = key.seq;
    s->chunk = key.stamp;
    s->flags = transport::kFlagEnd;
    held_.note(*s).arrived_ns = loop_.now_ns();
  }
  joins_.done(key, s);
  pass_on(*s);
  return true;
}

// Rate-limited (LogThrottle): a branch down for long under many short streams would otherwise
// write a line per stream.
void EndMarks::log_given_up(const EndJoins::Key& key, size_t copies_in, const char* why) {
  if (!given_up_.note(loop_.now_ns())) return;
  node_log().warn(
      "origin {}: end of stream after {} passed on with the end marks of {} of {} branches "
      "({}): a branch lost or dropped its copy, or this node restarted while it waited; "
      "further ones are logged every {} s",
      key.origin, key.seq, copies_in, joins_.copies(key.stamp), why, given_up_.interval_seconds());
}

// Once a second (tick): the give-ups not logged since the last line.
void EndMarks::flush_given_up() {
  uint64_t pending = 0, elapsed_ns = 0;
  if (!given_up_.due(loop_.now_ns(), pending, elapsed_ns)) return;
  node_log().warn(
      "{} more end{} of stream passed on without every branch's end mark in the last {} s; "
      "{} in all",
      pending, pending == 1 ? "" : "s", elapsed_ns / 1'000'000'000u, given_up_.total());
}

// Once a second, and when one more waits than a node keeps: end marks that waited longer than
// peer_down_timeout for a branch's copy, and the oldest past kMaxWaiting. When no frame of the
// node's own is free (all in flight to a downstream that is down), the next tick tries again.
void EndMarks::expire() {
  const auto& all = joins_.all_waiting();
  const uint64_t limit = limit_ns();
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
    if (!give_up(all.front().key, why)) return;
  }
}

void EndMarks::settle() {
  // A reload may have removed a branch: what now has every copy passes on.
  std::vector<EndJoins::Key> ready;
  for (const auto& w : joins_.all_waiting()) {
    if (w.peers.size() >= joins_.copies(w.key.stamp)) ready.push_back(w.key);
  }
  for (const auto& key : ready) give_up(key, nullptr);
}

void EndMarks::pass_on(transport::Slot& slot) {
  if (downstreams_.leaf()) {
    SlotNote& n = held_.hold(slot);
    if (receiver_) {
      n.refs = 1;  // the application's (Node::release_delivered)
      return receiver_->on_end(slot.origin, slot.seq, slot);
    }
    node_log().info("origin {}: end of stream after {} messages", slot.origin, slot.seq);
    return releaser_.release(slot);
  }
  // Every branch: each consumer behind this node learns that the stream ended, whatever the
  // route of the messages; so does this relay's own application, when it has one.
  downstreams_.to_all(slot, receiver_ ? 1 : 0);
  if (receiver_) receiver_->on_end(slot.origin, slot.seq, slot);
}

}  // namespace hoprelay::daemon
