// The held-slot ledger of a node: what the node keeps about each slot it took, beside the slot
// (transport::Slot is the frame only), and the one path by which a slot goes back to its link.
//
// Owns: a SlotNote per slot of every inbound link (LinkNotes, the link's context, so a slot's
// note is found in O(1): its link's notes at its index), the node's own frames and their notes
// (own_frames.h), the count of held slots, the replayed copies held with a first copy,
// the outcomes lent to given-up messages, and the notes of links gone down with slots still
// held (their senders replay those frames: hold_with_first()).
// Calls: InboundLink::release(), and nothing of the node.
//
// The rule it keeps: a slot goes back once, with its outcome (what became of the message)
// before its credit, and its replayed copies go back after it, with the same outcome.
// One thread (the node's event loop); nothing here allocates per message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hoprelay/daemon/own_frames.h"
#include "hoprelay/transport/outcome_pool.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

// What the node keeps about one slot.
struct SlotNote {
  uint16_t refs = 0;    // downstream posts not yet acknowledged
  uint16_t routes = 0;  // branches it was routed to
  bool held = false;    // held (hold()): routed, with the receiver, or waiting
  // What became of the message where it was given up (null: delivered so far); goes upstream
  // when the slot goes back.
  transport::Outcome* outcome = nullptr;
  transport::Slot* next = nullptr;     // the next chunk held for the same message (partials.h)
  uint64_t arrived_ns = 0;             // the loop's clock at arrival (residence metric)
  transport::Slot* repeats = nullptr;  // replayed copies that go back with this one
  // The slot, while held: hold_with_first() finds a first copy by its link's notes.
  transport::Slot* slot = nullptr;
};

// The notes of one inbound link's slots: the link's context (InboundLink::context()) from
// on_inbound_up until the last of its slots goes back. The node's per-link state derives
// from it. Made once per link (not per message).
class LinkNotes {
 public:
  explicit LinkNotes(transport::InboundLink& link) : link_(&link), notes_(link.slots()) {
    link.set_context(this);
  }
  virtual ~LinkNotes() = default;
  LinkNotes(const LinkNotes&) = delete;
  LinkNotes& operator=(const LinkNotes&) = delete;

  transport::InboundLink& link() const { return *link_; }
  SlotNote& operator[](uint32_t index) { return notes_[index]; }
  uint32_t size() const { return static_cast<uint32_t>(notes_.size()); }
  // The notes of `link` (its context).
  static LinkNotes& of(const transport::InboundLink& link) {
    return *static_cast<LinkNotes*>(link.context());
  }

 private:
  transport::InboundLink* link_;
  std::vector<SlotNote> notes_;
};

// Gives a slot back once a component that had it is done with it: the node's release
// (Node::release: residence, end marks, drain), which ends in HeldSlots::release.
class Releaser {
 public:
  virtual void release(transport::Slot& slot) = 0;

 protected:
  ~Releaser() = default;
};

class HeldSlots {
 public:
  // `node`: the name outcomes record drops under.
  explicit HeldSlots(std::string node);

  SlotNote& note(const transport::Slot& s) {
    return s.link ? LinkNotes::of(*s.link)[s.index] : own_notes_[s.index];
  }
  transport::Slot* next(const transport::Slot& s) { return note(s).next; }

  // Slots held: hoprelay_slots_in_use, and what a drain waits for.
  uint64_t count() const { return count_; }
  // Counts `slot` as held (it must not be). No list: only the slots of links gone down are
  // ever searched (hold_with_first), and those are found by their links' notes.
  SlotNote& hold(transport::Slot& slot) {
    SlotNote& n = note(slot);
    ++count_;
    n.held = true;
    n.slot = &slot;
    return n;
  }
  // No longer held (it must be), without giving it back.
  void unhold(transport::Slot& slot) {
    --count_;
    note(slot).held = false;
  }
  // `copy`, with the copies chained to it already, goes back when `first` does; it is held
  // meanwhile. Its refs and routes are cleared: it is routed nowhere.
  void add_repeat(transport::Slot& first, transport::Slot& copy);
  // A replayed copy of a frame whose first copy is still held here and came on a link gone
  // down since: the copy is held with it (add_repeat) and goes back when it does, with its
  // outcome; acknowledged at once, it would leave no copy upstream, and this node dying
  // before its downstream acknowledged the first would lose the message. False when there is
  // no such first copy.
  bool hold_with_first(transport::Slot& copy);

  // A drop here: a record naming this node. `branch`: for one of the branches it was routed
  // to (the others may still deliver it); else the whole message.
  void record_drop(transport::Slot& slot, transport::DropReason reason, std::string_view detail,
                   bool branch);
  // `slot` waits in this node's spool for its branch `branch` (delivered there later): said
  // upstream as spooled, to links that know the outcome (kFeatureSpooledOutcome), else nothing.
  void record_spooled(transport::Slot& slot, std::string_view branch);
  // A branch reported drops (or spools) below it (OUTCOME from a downstream).
  void merge_below(transport::Slot& slot, const transport::Outcome& below);

  // The one path back, for a slot held or not: `slot` goes to its link with its outcome (or,
  // one of the node's own frames, back to them), then each replayed copy held with it, with
  // the same outcome. `each(slot, note)` is called for each just before it goes (the node's
  // bookkeeping: residence, end marks). Neither the slots nor their notes may be used after.
  template <class Fn>
  void release(transport::Slot& slot, Fn&& each) {
    SlotNote& n = note(slot);
    // (The common case, no repeats, looks the note up once.)
    transport::Slot* repeats = n.repeats ? take_repeats(n) : nullptr;
    release_one(slot, n, each);
    while (repeats) {
      transport::Slot* r = repeats;
      repeats = std::exchange(note(*r).repeats, nullptr);
      release_one(*r, note(*r), each);
    }
  }
  void release(transport::Slot& slot) {
    release(slot, [](const transport::Slot&, const SlotNote&) {});
  }

  // A frame of the node's own (an abort, an end mark), or null when all are in flight.
  transport::Slot* take_own() { return own_.take(); }
  void give_back_own(transport::Slot& slot) { own_.give_back(slot); }

  // An inbound link went down: its notes stay (and its ring, the transport's) while slots of
  // it are held, else they go now.
  void link_down(std::unique_ptr<LinkNotes> notes);
  // The links gone down with slots held (deduplication keeps their origins; their slots are
  // counted in hoprelay_link_slots_in_use).
  template <class Fn>
  void for_each_gone(Fn&& fn) const {
    for (const auto& n : gone_) fn(n->link());
  }

 private:
  // The outcome of `slot`'s message, lent from the pool at its first drop.
  transport::Outcome& outcome_of(transport::Slot& slot);
  bool gone(const transport::InboundLink* link) const;
  // Detaches `slot`'s replayed copies, each given `slot`'s outcome, and returns the first
  // (chained through their notes' repeats).
  transport::Slot* take_repeats(SlotNote& n);
  template <class Fn>
  void release_one(transport::Slot& slot, SlotNote& n, Fn& each) {
    each(static_cast<const transport::Slot&>(slot), static_cast<const SlotNote&>(n));
    if (n.held) {
      --count_;
      n.held = false;
    }
    give_back(slot, n);
  }
  // `slot` (no longer held) to its link with its outcome, or to the own frames; its note
  // is cleared for the slot's next frame.
  void give_back(transport::Slot& slot, SlotNote& n);

  std::string node_;
  OwnFrames own_;
  std::vector<SlotNote> own_notes_;
  transport::OutcomePool outcomes_;
  uint64_t count_ = 0;
  // Few, and only after a failure: the common path checks that this is empty.
  std::vector<std::unique_ptr<LinkNotes>> gone_;
};

}  // namespace hoprelay::daemon
