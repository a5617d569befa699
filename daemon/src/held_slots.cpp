#include "hoprelay/daemon/held_slots.h"

#include <algorithm>
#include <utility>

namespace hoprelay::daemon {

HeldSlots::HeldSlots(std::string node) : node_(std::move(node)), own_notes_(OwnFrames::kSlots) {}

void HeldSlots::add_repeat(transport::Slot& first, transport::Slot& copy) {
  SlotNote& c = note(copy);
  c.refs = 0;
  c.routes = 0;
  // One flat list, which take_repeats() walks: copy's own copies first, then first's.
  transport::Slot* tail = &copy;
  while (note(*tail).repeats) tail = note(*tail).repeats;
  note(*tail).repeats = std::exchange(note(first).repeats, &copy);
  hold(copy);
}

bool HeldSlots::gone(const transport::InboundLink* link) const {
  return std::any_of(gone_.begin(), gone_.end(), [&](const auto& n) { return &n->link() == link; });
}

bool HeldSlots::hold_with_first(transport::Slot& copy) {
  if (gone_.empty()) return false;  // no link went down with slots held: nothing to find
  // A first copy held for a link gone down is one of the held slots of that link's notes.
  for (const auto& g : gone_) {
    LinkNotes& notes = *g;
    for (uint32_t i = 0; i < notes.size(); ++i) {
      const SlotNote& n = notes[i];
      if (!n.held) continue;
      transport::Slot* s = n.slot;
      // (Not the flags: a stage may have changed the first copy's.)
      if (s->origin != copy.origin || s->seq != copy.seq || s->chunk != copy.chunk ||
          (s->flags & transport::kFlagEnd) != (copy.flags & transport::kFlagEnd) ||
          s->link == copy.link) {
        continue;
      }
      // Into the list of s's copies (s may be a copy itself, after a second cut: the list is
      // the same one).
      add_repeat(*s, copy);
      note(copy).routes = n.routes;
      return true;
    }
  }
  return false;
}

transport::Outcome& HeldSlots::outcome_of(transport::Slot& slot) {
  SlotNote& n = note(slot);
  if (!n.outcome) n.outcome = outcomes_.take();
  return *n.outcome;
}

void HeldSlots::record_drop(transport::Slot& slot, transport::DropReason reason,
                            std::string_view detail, bool branch) {
  transport::Outcome& o = outcome_of(slot);
  o.add(reason, node_, detail);
  if (branch) {
    ++o.branches;
  } else {
    o.whole = true;
  }
}

void HeldSlots::record_spooled(transport::Slot& slot, std::string_view branch) {
  outcome_of(slot).add_spooled(node_, branch);
}

void HeldSlots::merge_below(transport::Slot& slot, const transport::Outcome& below) {
  transport::Outcome& o = outcome_of(slot);
  o.merge(below);
  if (below.total > 0) ++o.branches;  // a branch that dropped it (a spool is no drop)
}

transport::Slot* HeldSlots::take_repeats(SlotNote& n) {
  transport::Slot* repeats = std::exchange(n.repeats, nullptr);
  for (transport::Slot* r = repeats; r; r = note(*r).repeats) {
    if (n.outcome) outcome_of(*r) = *n.outcome;
  }
  return repeats;
}

void HeldSlots::give_back(transport::Slot& slot, SlotNote& n) {
  transport::Outcome* o = std::exchange(n.outcome, nullptr);
  const uint16_t routes = n.routes;
  n = SlotNote{};  // clean for the slot's next frame
  if (!slot.link) {
    // A frame of the node's own: what became of it concerns no one upstream.
    outcomes_.give_back(o);
    own_.give_back(slot);
    return;
  }
  transport::InboundLink& link = *slot.link;
  // Its last slot on a link gone down: the link's ring may go with it, so its notes go now.
  // (Not slots_in_use() == 1: released out of order, the last slot may free several.)
  const bool last_of_gone = !gone_.empty() && link.slots_held() == 1 && gone(&link);
  // Given up on some of its branches only: delivered on the others.
  if (o && o->total > 0 && !o->whole && routes > 0 && o->branches < routes) o->partial = true;
  // A peer of an older release cannot read where a message is spooled: to it, a spooled
  // message is delivered (it is, once the spool drains), and only drops are said.
  if (o && o->spooled && !(link.peer().wire.features & transport::kFeatureSpooledOutcome)) {
    o->strip_spooled();
  }
  // (The pool's outcome goes back below either way.)
  link.release(slot, o && !o->empty() ? o : nullptr);  // may free the slot's ring: not used after
  outcomes_.give_back(o);
  if (last_of_gone) {
    std::erase_if(gone_, [&](const auto& g) { return &g->link() == &link; });
  }
}

void HeldSlots::link_down(std::unique_ptr<LinkNotes> notes) {
  if (notes->link().slots_held() > 0) gone_.push_back(std::move(notes));
}

}  // namespace hoprelay::daemon
