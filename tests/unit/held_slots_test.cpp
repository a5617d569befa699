// The node's held-slot ledger (daemon/held_slots.h) with no node and no transport: unit cases,
// then fake links (a real SlotRing each) that fail and replay what they had not had credited,
// driven through 10,000 random sequences of arrivals, fan-out acknowledgements, drops on a
// branch, drops reported from below, whole-message drops and link failures, and checked
// against a reference model: every copy of every message goes back exactly once, with the
// outcome its message earned (its replayed copies with the same one), a replayed copy of a
// message still held for a link gone down waits for that first copy, and nothing is left
// held. A mutation (one slot released twice) must make the model fail.
#include "hoprelay/daemon/held_slots.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hoprelay/transport/invariants.h"
#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::daemon {
namespace {

using transport::DropReason;
using transport::Invariant;
using transport::Outcome;
using transport::Slot;

// What one release told the sender.
struct Released {
  uint64_t seq;
  bool outcome;
  uint16_t total;
  bool partial;
};

// One connection's receiving end: a real slot ring, and what was released from it.
class FakeLink final : public transport::InboundLink {
 public:
  explicit FakeLink(uint32_t slots)
      : memory_(transport::SlotRing::size_for(slots, 64)), ring_(memory_.data(), slots, 64, this) {}

  Slot* land(uint64_t seq) {
    Slot* s = ring_.acquire();
    if (s) {
      s->origin = 1;
      s->seq = seq;
      s->flags = 0;
      s->chunk = 0;
      uncredited_.push_back(seq);
    }
    return s;
  }
  void release(Slot& slot, const Outcome* o) override {
    released.push_back(
        Released{slot.seq, o != nullptr, o ? o->total : uint16_t{0}, o ? o->partial : false});
    for (uint32_t freed = ring_.release(slot); freed > 0; --freed) uncredited_.pop_front();
  }
  void drain() override {}
  uint32_t slots_in_use() const override { return ring_.in_use(); }
  uint32_t slots_held() const override { return ring_.held(); }
  uint32_t slots() const override { return ring_.slots(); }
  void unreturned_origins(std::vector<uint32_t>& out) const override {
    ring_.unreturned_origins(out);
  }
  // The frames the sender sends again if this link fails now (those not yet credited), in
  // the order they came.
  const std::deque<uint64_t>& uncredited() const { return uncredited_; }
  std::vector<Released> released;

 private:
  std::vector<std::byte> memory_;
  transport::SlotRing ring_;
  std::deque<uint64_t> uncredited_;
};

TEST(HeldSlots, AReleasedSlotGoesBackOnceWithItsOutcomeAndItsRepeatsWithIt) {
  FakeLink a(4), b(4);
  HeldSlots held("relay");
  auto notes_a = std::make_unique<LinkNotes>(a);
  LinkNotes notes_b(b);
  Slot* first = a.land(7);
  held.hold(*first);
  held.note(*first).routes = 2;
  held.record_drop(*first, DropReason::kPeerDown, "down", true);
  EXPECT_EQ(held.count(), 1u);
  // Link a goes down with the slot held: its sender replays it on b.
  held.link_down(std::move(notes_a));
  Slot* copy = b.land(7);
  EXPECT_TRUE(held.hold_with_first(*copy)) << "held with the first copy, not acknowledged now";
  EXPECT_EQ(held.count(), 2u);
  EXPECT_TRUE(b.released.empty());
  int each = 0;
  held.release(*first, [&](const Slot&, const SlotNote&) { ++each; });
  EXPECT_EQ(each, 2);
  EXPECT_EQ(held.count(), 0u);
  ASSERT_EQ(a.released.size(), 1u);
  ASSERT_EQ(b.released.size(), 1u);
  EXPECT_TRUE(a.released[0].outcome);
  EXPECT_TRUE(a.released[0].partial) << "dropped on one of two branches";
  EXPECT_TRUE(b.released[0].outcome) << "the copy carries the first's outcome";
  int gone = 0;
  held.for_each_gone([&](const transport::InboundLink&) { ++gone; });
  EXPECT_EQ(gone, 0) << "a's notes went with its last held slot";
}

TEST(HeldSlots, ACopyOfAMessageHeldForALiveLinkIsNotHeld) {
  FakeLink a(4);
  HeldSlots held("relay");
  LinkNotes notes(a);
  Slot* first = a.land(3);
  held.hold(*first);
  Slot* copy = a.land(3);
  EXPECT_FALSE(held.hold_with_first(*copy)) << "no link went down: the caller releases it";
  held.release(*copy);
  held.release(*first);
  EXPECT_EQ(a.released.size(), 2u);
  EXPECT_EQ(a.slots_in_use(), 0u);
}

TEST(HeldSlots, ADoubleReleaseIsCountedAndTheSecondFreesNothing) {
  FakeLink a(2);
  HeldSlots held("relay");
  LinkNotes notes(a);
  const uint64_t before = transport::invariant_violations(Invariant::kDoubleRelease);
  Slot* s = a.land(1);
  held.hold(*s);
  held.release(*s);
  held.release(*s);
  EXPECT_EQ(transport::invariant_violations(Invariant::kDoubleRelease), before + 1);
  EXPECT_EQ(a.slots_held(), 0u);
}

// ------------------------------------------------------------------ the model

struct Copy {
  FakeLink* link;
  Slot* slot;
};

// One run; returns what broke the model, or nothing. `mutate`: one slot is released twice.
std::optional<std::string> run_model(uint32_t seed, bool mutate) {
  std::mt19937 rng(seed);
  auto chance = [&](uint32_t percent) { return rng() % 100 < percent; };
  const uint32_t slots = 2 + rng() % 6;
  const uint64_t messages = 10 + rng() % 40;
  const uint64_t before = transport::invariant_violations(Invariant::kDoubleRelease);

  HeldSlots held("relay");
  std::vector<std::unique_ptr<FakeLink>> links;  // every connection, the last one up
  std::unique_ptr<LinkNotes> notes;              // the one up's
  std::deque<uint64_t> to_send;                  // the sender's queue, front first
  for (uint64_t i = 0; i < messages; ++i) to_send.push_back(i);
  // The model.
  std::vector<int> taken(messages, 0);  // first copies taken (the node's dedup)
  std::map<uint64_t, Copy> first;       // messages held, by seq
  std::map<uint64_t, uint32_t> refs;    // branches still to acknowledge
  std::map<uint64_t, uint32_t> routes;
  std::map<uint64_t, uint32_t> branch_drops;  // drops on a branch (here or below)
  std::map<uint64_t, bool> whole;             // given up whole (no branch)
  std::map<uint64_t, std::vector<Copy>> repeats;
  std::map<const Slot*, int> gone_back;  // per copy in flight: released this many times
  uint64_t expected_held = 0;
  std::optional<Copy> stale;  // the mutation's, released once already

  auto connect = [&] {
    if (notes) held.link_down(std::move(notes));
    links.push_back(std::make_unique<FakeLink>(slots));
    notes = std::make_unique<LinkNotes>(*links.back());
  };
  // The sender sends again what the failed link had not had credited, before the rest.
  auto fail = [&] {
    FakeLink& old = *links.back();
    const std::deque<uint64_t> again = old.uncredited();
    connect();
    for (auto it = again.rbegin(); it != again.rend(); ++it) to_send.push_front(*it);
  };
  std::optional<std::string> broken;
  auto check_release = [&](const Slot& s, const SlotNote&) {
    if (gone_back[&s]++ != 0 && !mutate) broken = "a copy went back twice";
  };
  // The first copy of `seq` is done (every branch acknowledged it): it and its repeats go.
  auto finish = [&](uint64_t seq) {
    Copy c = first[seq];
    const size_t expect_repeats = repeats[seq].size();
    const size_t released_before = c.link->released.size();
    const uint64_t expect_total = branch_drops[seq] + (whole[seq] ? 1 : 0);
    const bool expect_partial =
        !whole[seq] && branch_drops[seq] > 0 && branch_drops[seq] < routes[seq];
    std::vector<std::pair<FakeLink*, size_t>> copies_before;
    for (const Copy& r : repeats[seq]) copies_before.emplace_back(r.link, r.link->released.size());
    held.release(*c.slot, check_release);
    expected_held -= 1 + expect_repeats;
    if (c.link->released.size() != released_before + 1) {
      broken = "a first copy did not go back to its link";
      return;
    }
    const Released& r = c.link->released.back();
    if (r.seq != seq) broken = "the wrong slot went back";
    if (r.outcome != (expect_total > 0)) broken = "an outcome for a delivered message, or none";
    if (r.outcome && r.total != expect_total) broken = "an outcome lost a drop";
    if (r.outcome && r.partial != expect_partial) broken = "an outcome's partial flag is wrong";
    for (auto& [link, n] : copies_before) {
      if (link->released.size() <= n) {
        broken = "a replayed copy did not go back with its first";
        continue;
      }
      const Released& rr = link->released[n];
      if (rr.seq != seq || rr.outcome != r.outcome || rr.total != r.total) {
        broken = "a replayed copy went back without its first's outcome";
      }
    }
    if (mutate && !stale && chance(50)) stale = c;
    first.erase(seq);
    repeats.erase(seq);
  };
  connect();

  for (int step = 0; step < 600 && !broken; ++step) {
    const uint32_t op = rng() % 100;
    const bool ending = step >= 500;
    if (op < 35 && !ending) {  // a frame lands on the link that is up
      if (to_send.empty()) continue;
      Slot* s = links.back()->land(to_send.front());
      if (!s) continue;  // out of credits: the sender waits
      const uint64_t seq = to_send.front();
      to_send.pop_front();
      gone_back[s] = 0;  // a new frame in this slot
      held.note(*s).arrived_ns = 1;
      if (taken[seq]) {  // a replay: dropped by seq
        const bool first_held = first.count(seq) != 0;
        const bool first_gone = first_held && first[seq].link != links.back().get();
        const bool with_first = held.hold_with_first(*s);
        if (with_first != first_gone) {
          broken = with_first ? "a copy held with a first copy on a live link"
                              : "a copy acknowledged while its first waits for a link gone down";
          break;
        }
        if (with_first) {
          repeats[seq].push_back(Copy{links.back().get(), s});
          ++expected_held;
        } else {
          const size_t n = links.back()->released.size();
          held.release(*s, check_release);
          if (links.back()->released.size() != n + 1 || links.back()->released.back().outcome) {
            broken = "a replayed copy did not go back at once, without an outcome";
          }
        }
        continue;
      }
      taken[seq] = 1;
      if (chance(10)) {  // the stage drops it: given back now, with its outcome
        held.record_drop(*s, DropReason::kStageDrop, "stage", false);
        const size_t n = links.back()->released.size();
        held.release(*s, check_release);
        if (links.back()->released.size() != n + 1 || !links.back()->released.back().outcome ||
            links.back()->released.back().partial) {
          broken = "a message dropped whole went back without its outcome";
        }
        continue;
      }
      const uint32_t r = 1 + rng() % 3;
      held.hold(*s);
      held.note(*s).refs = static_cast<uint16_t>(r);
      held.note(*s).routes = static_cast<uint16_t>(r);
      first[seq] = Copy{links.back().get(), s};
      refs[seq] = r;
      routes[seq] = r;
      branch_drops[seq] = 0;
      whole[seq] = false;
      ++expected_held;
    } else if (op < 80 || ending) {  // a branch is done with a held message, in any order
      if (first.empty()) {
        if (ending) break;
        continue;
      }
      auto it = first.begin();
      std::advance(it, rng() % first.size());
      const uint64_t seq = it->first;
      Slot& s = *it->second.slot;
      const uint32_t how = rng() % 10;
      if (how == 0) {  // dropped for that branch here (peer down, too large)
        held.record_drop(s, DropReason::kPeerDown, "down", true);
        ++branch_drops[seq];
      } else if (how == 1) {  // dropped below it (an OUTCOME from the downstream)
        Outcome below;
        below.add(DropReason::kStageDrop, "leaf", "no");
        held.merge_below(s, below);
        ++branch_drops[seq];
      }
      if (--held.note(s).refs != --refs[seq]) broken = "refs went astray";
      if (refs[seq] == 0) finish(seq);
    } else if (op < 88) {  // the link fails: the sender replays what was not credited
      fail();
    } else if (stale) {  // the mutation: one slot released once more
      const Copy c = *stale;
      stale.reset();
      if (c.link == links.back().get()) held.release(*c.slot, check_release);
    }
    if (held.count() != expected_held) broken = "the held count went astray";
  }
  if (broken) return broken;
  if (!first.empty()) return std::to_string(first.size()) + " messages still held";
  if (held.count() != 0) return "the ledger still counts held slots";
  int gone = 0;
  held.for_each_gone([&](const transport::InboundLink&) { ++gone; });
  if (gone != 0) return "a link gone down kept its notes with nothing held";
  for (auto& [slot, n] : gone_back) {
    if (n != 1) return "a copy went back " + std::to_string(n) + " times";
  }
  if (transport::invariant_violations(Invariant::kDoubleRelease) != before) {
    return "a slot was released twice";
  }
  return std::nullopt;
}

TEST(HeldSlots, FakeLinksThatFailAndReplayGiveEveryCopyBackOnceWithItsOutcome) {
  for (uint32_t seed = 1; seed <= 10'000; ++seed) {
    auto broken = run_model(seed, false);
    ASSERT_FALSE(broken) << "seed " << seed << ": " << *broken;
  }
}

TEST(HeldSlots, TheModelCatchesASlotReleasedTwice) {
  uint32_t caught = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) caught += run_model(seed, true).has_value();
  EXPECT_GT(caught, 100u) << "the mutation went unnoticed in " << 200 - caught << " of 200 runs";
}

}  // namespace
}  // namespace hoprelay::daemon
