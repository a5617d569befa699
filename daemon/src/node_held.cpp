// What a Node holds, seen from the node: a slot stays held, unacknowledged upstream, until
// every downstream it was routed to has acknowledged it (or the receiver released it).
// Node::release() is the one way back for any slot, held or not; the ledger itself (notes,
// outcomes, repeats, links gone down) is HeldSlots (held_slots.h).
#include <prometheus/counter.h>

#include "hoprelay/daemon/node.h"

namespace hoprelay::daemon {

void Node::release(transport::Slot& slot) {
  held_.release(slot, [this](const transport::Slot& s, const SlotNote& n) {
    if (s.flags & transport::kFlagEnd) {
      end_marks_->released(s);  // an end mark is not a message
    } else {
      residence_seconds_->observe_ns(loop_.now_ns() - n.arrived_ns);
    }
  });
  if (draining_) check_drained();
}

void Node::deliver(transport::Slot& slot) {
  if (!receiver_) return release(slot);  // the stage consumed it
  held_.hold(slot).refs = 1;             // the application's
  receiver_->on_delivered(slot.origin, slot.seq, {slot.payload(), slot.length}, slot, false);
}

void Node::local_done(transport::Slot& slot) {
  if (--held_.note(slot).refs == 0) release(slot);
}

void Node::release_delivered(transport::Slot& held) {
  for (transport::Slot* s = &held; s;) {
    transport::Slot* next = std::exchange(held_.note(*s).next, nullptr);
    local_done(*s);
    s = next;
  }
}

}  // namespace hoprelay::daemon
