// End marks at a node: the head stamps them, and where branches join again one copy passes
// on once every branch's is in (end_joins.h says why).
#include <algorithm>

#include "hoprelay/daemon/node.h"
#include "node_log.h"

namespace hoprelay::daemon {

void Node::on_end(transport::InboundLink& link, transport::Slot& slot) {
  slot.arrived_ns = loop_.now_ns();
  if (link.peer().role == transport::PeerRole::kProducer) {
    slot.chunk = stamp_;  // a producer's: from here on it says which head the stream entered by
  } else if (!join_end(link, slot)) {
    return;  // held until the copy of every other branch is in
  }
  pass_on_end(slot, false);
}

// True when `slot` passes on now, with the copies held before it (released with it). False
// when it waits for another branch's copy, or went with a copy passed on before.
bool Node::join_end(transport::InboundLink& link, transport::Slot& slot) {
  const uint32_t want = end_joins_.copies(slot.chunk);
  // One path from its head, or a stamp this topology does not know (a reload in between):
  // passed on as it comes.
  if (want <= 1) return true;
  const EndJoins::Key key{slot.origin, slot.seq, slot.chunk};
  transport::Slot* in_flight = nullptr;
  if (end_joins_.was_done(key, in_flight)) {
    // A copy replayed after the end mark passed on (its link failed before the acknowledgement
    // reached its sender): acknowledged with it, or at once when that is done.
    if (!in_flight) {
      consume(link, slot);
      return false;
    }
    slot.refs = 0;
    slot.routes = 0;
    slot.repeats = std::exchange(in_flight->repeats, &slot);
    hold(slot);
    return false;
  }
  EndJoins::Waiting* w = end_joins_.waiting(key);
  if (!w) w = &end_joins_.wait(key);
  const std::string& peer = link.peer().name;
  auto same = std::find_if(w->copies.begin(), w->copies.end(),
                           [&](const EndJoins::Copy& c) { return c.peer == peer; });
  if (same != w->copies.end()) {
    // The same branch again: a replay on a new link after the old one failed (nothing goes
    // back on that one), or the same end again (a producer that resumed and closed at once).
    release(*std::exchange(same->slot, &slot));
  } else {
    w->copies.push_back({peer, &slot});
  }
  hold(slot);
  if (w->copies.size() < want) {
    if (end_joins_.all_waiting().size() > EndJoins::kMaxWaiting) {
      pass_on_waiting(end_joins_.all_waiting().front(),
                      "more streams than kMaxWaiting wait for another branch's end mark");
    }
    return false;
  }
  pass_on_waiting(*w, nullptr);
  return false;
}

// Passes on the newest copy of `w` with the others as its repeats, and forgets `w`.
void Node::pass_on_waiting(EndJoins::Waiting& w, const char* why) {
  const EndJoins::Key key = w.key;
  const size_t have = w.copies.size();
  transport::Slot& last = *w.copies.back().slot;
  for (size_t i = 0; i + 1 < have; ++i) {
    transport::Slot& copy = *w.copies[i].slot;
    copy.refs = 0;
    copy.routes = 0;
    copy.repeats = std::exchange(last.repeats, &copy);
  }
  if (why) {
    node_log().warn(
        "origin {}: end of stream after {} passed on with {} of {} branches' copies ({}): a "
        "consumer below may see it before the last messages of the other branches",
        key.origin, key.seq, have, end_joins_.copies(key.stamp), why);
  }
  end_joins_.stop_waiting(key);  // `w` is gone
  end_joins_.done(key, &last);
  pass_on_end(last, true);
}

void Node::settle_ends() {
  // A reload may have removed a branch: what now has every copy passes on.
  std::vector<EndJoins::Key> ready;
  for (auto& w : end_joins_.all_waiting()) {
    if (w.copies.size() >= end_joins_.copies(w.key.stamp)) ready.push_back(w.key);
  }
  for (const auto& key : ready) pass_on_waiting(*end_joins_.waiting(key), nullptr);
}

void Node::pass_on_end(transport::Slot& slot, bool held) {
  if (!held) hold(slot);
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
