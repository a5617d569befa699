// What a Node holds: a slot stays held, unacknowledged upstream, until every downstream it was
// routed to has acknowledged it (or the receiver released it); then it goes back to its link
// with the outcome of a drop, if any, before its credit. Replayed copies of a frame still held
// wait for it (hold_with_first). release() is the one way back for a held slot;
// consume() gives back one that was never routed.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "hoprelay/daemon/monotonic.h"
#include "hoprelay/daemon/node.h"
#include "node_log.h"

namespace hoprelay::daemon {

transport::Outcome& Node::outcome_of(transport::Slot& slot) {
  if (!slot.outcome) slot.outcome = outcomes_.take();
  return *slot.outcome;
}

void Node::record_drop(transport::Slot& slot, transport::DropReason reason, std::string_view detail,
                       bool branch) {
  transport::Outcome& o = outcome_of(slot);
  o.add(reason, spec_->name, detail);
  if (branch) {
    ++o.branches;
  } else {
    o.whole = true;
  }
}

void Node::on_outcome(transport::OutboundLink& link, void* cookie,
                      const transport::Outcome& outcome) {
  auto* slot = static_cast<transport::Slot*>(cookie);
  downstream_of(link).metrics.dropped_below.add();
  transport::Outcome& o = outcome_of(*slot);
  o.merge(outcome);
  ++o.branches;
}

void Node::release_to(transport::InboundLink& link, transport::Slot& slot) {
  if (!dead_links_.empty() && link.slots_held() == 1) {
    // Its last slot: the link's ring may go with it. (Not slots_in_use() == 1: released out
    // of order, the last slot may free several, and the link stayed listed after it was
    // freed: the next tick read it.)
    std::erase(dead_links_, &link);
  }
  transport::Outcome* o = std::exchange(slot.outcome, nullptr);
  // Given up on some of its branches only: delivered on the others.
  if (o && !o->whole && slot.routes > 0 && o->branches < slot.routes) o->partial = true;
  slot.routes = 0;
  link.release(slot, o);  // may free the slot's ring (a closed link): slot is not used after
  outcomes_.give_back(o);
}

void Node::hold(transport::Slot& slot) {
  ++held_;
  slot.held_prev = nullptr;
  slot.held_next = held_list_;
  if (held_list_) held_list_->held_prev = &slot;
  held_list_ = &slot;
}

void Node::unhold(transport::Slot& slot) {
  --held_;
  if (slot.held_prev) {
    slot.held_prev->held_next = slot.held_next;
  } else if (held_list_ == &slot) {
    held_list_ = slot.held_next;
  }
  if (slot.held_next) slot.held_next->held_prev = slot.held_prev;
  slot.held_prev = slot.held_next = nullptr;
}

bool Node::hold_with_first(transport::Slot& copy) {
  if (dead_links_.empty()) return false;  // no link went down with slots held: nothing to find
  for (transport::Slot* s = held_list_; s; s = s->held_next) {
    // (Not the flags: a stage may have changed the first copy's.)
    if (s->origin != copy.origin || s->seq != copy.seq || s->chunk != copy.chunk ||
        (s->flags & transport::kFlagEnd) != (copy.flags & transport::kFlagEnd) || !s->link ||
        s->link == copy.link ||
        std::find(dead_links_.begin(), dead_links_.end(), s->link) == dead_links_.end()) {
      continue;
    }
    // Into the list of s's copies (s may be a copy itself, after a second cut: the list is
    // the same one).
    add_repeat(*s, copy);
    copy.routes = s->routes;
    return true;
  }
  return false;
}

void Node::release(transport::Slot& slot) {
  // An end mark that completed a join is forgotten as in flight (end_joins.h).
  if (slot.flags & transport::kFlagEnd)
    end_joins_.released({slot.origin, slot.seq, slot.chunk}, &slot);
  unhold(slot);
  if (!(slot.flags & transport::kFlagEnd)) {  // an end mark is not a message
    residence_seconds_->observe_ns(loop_.now_ns() - slot.arrived_ns);
  }
  // Replayed copies held with this one learn what became of it, then go with it.
  transport::Slot* repeats = std::exchange(slot.repeats, nullptr);
  for (transport::Slot* r = repeats; r; r = r->repeats) {
    if (slot.outcome) outcome_of(*r) = *slot.outcome;
  }
  if (slot.link) {
    release_to(*slot.link, slot);
  } else {
    // A frame of the node's own (own_frames.h: an abort, an end mark): what became of it
    // concerns no one upstream.
    outcomes_.give_back(slot.outcome);
    slot.routes = 0;
    own_frames_.give_back(slot);
  }
  while (repeats) {
    transport::Slot* r = repeats;
    repeats = std::exchange(r->repeats, nullptr);
    release(*r);
  }
  if (draining_) check_drained();
}

void Node::consume(transport::InboundLink& link, transport::Slot& slot) {
  if (!(slot.flags & transport::kFlagEnd)) {
    residence_seconds_->observe_ns(loop_.now_ns() - slot.arrived_ns);
  }
  release_to(link, slot);
}

void Node::deliver(transport::InboundLink& link, transport::Slot& slot) {
  if (!receiver_) return consume(link, slot);  // the stage consumed it
  hold(slot);
  receiver_->on_delivered(slot.origin, slot.seq, {slot.payload(), slot.length}, slot, false);
}

void Node::release_delivered(transport::Slot& held) {
  for (transport::Slot* s = &held; s;) {
    transport::Slot* next = s->next;
    s->next = nullptr;
    release(*s);
    s = next;
  }
}

}  // namespace hoprelay::daemon
