// The sender's frame ledger and the receiver's slot ring, with no transport: unit cases, then a
// scripted fake link between them driven through 10,000 random sequences of posts, deliveries,
// out-of-order releases (some with outcomes), credit flushes, link failures with replay (the
// receiver then sees duplicates and drops them by sequence number, as a node does) and hostile
// control frames, checked against a reference model. A mutation (the receiver releasing one
// slot a second time) must make the model fail.
#include "hoprelay/transport/frame_ledger.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hoprelay/transport/invariants.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/slot_ring.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {
namespace {

void* cookie_of(uint64_t id) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(id + 1));
}
uint64_t id_of(void* cookie) {
  return reinterpret_cast<uintptr_t>(cookie) - 1;
}

OutFrame frame_of(uint64_t id) {
  OutFrame f;
  f.origin = 7;
  f.seq = id;
  f.cookie = cookie_of(id);
  return f;
}

FrameHeader outcome_header(uint32_t slot, uint64_t seq) {
  FrameHeader h{FrameType::kOutcome};
  h.slot = slot;
  h.origin = 7;
  h.seq = seq;
  return h;
}

TEST(FrameLedger, AcknowledgesOldestFirstAndRefusesCreditsForFramesNeverSent) {
  FrameLedger ledger;
  ledger.reset(4, 4);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(ledger.push(frame_of(i)), i);
  EXPECT_EQ(ledger.in_flight(), 3u);
  EXPECT_EQ(ledger.room(), 1u);
  std::vector<uint64_t> acked;
  auto on_acked = [&](void* c) { acked.push_back(id_of(c)); };
  EXPECT_FALSE(ledger.acknowledge(0, ledger.tail(), on_acked)) << "an empty credit";
  EXPECT_FALSE(ledger.acknowledge(4, ledger.tail(), on_acked)) << "more than in flight";
  EXPECT_FALSE(ledger.acknowledge(2, 1, on_acked)) << "frames not yet written whole";
  EXPECT_TRUE(acked.empty());
  EXPECT_TRUE(ledger.acknowledge(2, ledger.tail(), on_acked));
  EXPECT_EQ(acked, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(ledger.in_flight(), 1u);
  // Frame n lands in slot n % peer_slots, however many were acknowledged.
  for (uint64_t i = 3; i < 6; ++i) ledger.push(frame_of(i));
  EXPECT_EQ(ledger.next_slot(), 2u);
  EXPECT_EQ(ledger.room(), 0u);
}

TEST(FrameLedger, AnOutcomeNamesOneUnacknowledgedFrameOnce) {
  FrameLedger ledger;
  ledger.reset(4, 8);
  for (uint64_t i = 0; i < 4; ++i) ledger.push(frame_of(i));
  ledger.acknowledge(1, ledger.tail(), [](void*) {});
  // Frame 2 took slot 2.
  FrameLedger::Frame* f = ledger.outcome_target(outcome_header(2, 2), ledger.tail());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(id_of(f->cookie), 2u);
  EXPECT_EQ(ledger.outcome_target(outcome_header(2, 2), ledger.tail()), nullptr) << "twice";
  EXPECT_EQ(ledger.outcome_target(outcome_header(0, 0), ledger.tail()), nullptr) << "acked";
  EXPECT_EQ(ledger.outcome_target(outcome_header(3, 4), ledger.tail()), nullptr) << "wrong seq";
  EXPECT_EQ(ledger.outcome_target(outcome_header(5, 5), ledger.tail()), nullptr) << "never sent";
  EXPECT_EQ(ledger.outcome_target(outcome_header(8, 1), ledger.tail()), nullptr) << "no slot 8";
  EXPECT_EQ(ledger.outcome_target(outcome_header(3, 3), 3), nullptr) << "not written yet";
  EXPECT_NE(ledger.outcome_target(outcome_header(3, 3), ledger.tail()), nullptr);
}

TEST(FrameLedger, ReturnsTheUnacknowledgedNewestFirstAndStartsOver) {
  FrameLedger ledger;
  ledger.reset(4, 4);
  for (uint64_t i = 0; i < 4; ++i) ledger.push(frame_of(i));
  ledger.acknowledge(1, ledger.tail(), [](void*) {});
  ledger.peer_draining();
  EXPECT_EQ(ledger.room(), 0u) << "nothing is posted after the peer's BYE";
  EXPECT_FALSE(ledger.drained());
  std::deque<uint64_t> queue{9};
  EXPECT_EQ(ledger.return_all([&](void* c) { queue.push_front(id_of(c)); }), 3u);
  EXPECT_EQ(queue, (std::deque<uint64_t>{1, 2, 3, 9})) << "the original order, in front";
  EXPECT_TRUE(ledger.empty());
  EXPECT_FALSE(ledger.draining());
  EXPECT_EQ(ledger.next_slot(), 0u);
}

TEST(FrameLedger, AnAcknowledgementThatDropsTheLinkEndsTheLoop) {
  FrameLedger ledger;
  ledger.reset(4, 4);
  for (uint64_t i = 0; i < 4; ++i) ledger.push(frame_of(i));
  std::vector<uint64_t> acked, returned;
  EXPECT_TRUE(ledger.acknowledge(3, ledger.tail(), [&](void* c) {
    acked.push_back(id_of(c));
    ledger.return_all([&](void* r) { returned.push_back(id_of(r)); });
  }));
  EXPECT_EQ(acked, (std::vector<uint64_t>{0}));
  EXPECT_EQ(returned, (std::vector<uint64_t>{3, 2, 1}));
}

TEST(FrameLedger, GrowsKeepingWhatIsInFlight) {
  FrameLedger ledger;
  ledger.reset(2, 2);
  ledger.push(frame_of(0));
  ledger.push(frame_of(1));
  ledger.acknowledge(1, ledger.tail(), [](void*) {});
  ledger.push(frame_of(2));
  ledger.grow(5);
  ledger.push(frame_of(3));
  std::vector<uint64_t> acked;
  ledger.acknowledge(3, ledger.tail(), [&](void* c) { acked.push_back(id_of(c)); });
  EXPECT_EQ(acked, (std::vector<uint64_t>{1, 2, 3}));
}

// The internal-error lines report_invariant() writes while `fn` runs.
template <class Fn>
std::vector<std::string> invariant_log(Fn&& fn) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
  module_logger("invariants")->sinks().push_back(sink);
  fn();
  module_logger("invariants")->sinks().pop_back();
  return sink->last_formatted();
}

// A line that names `kind` is among `lines` (the 1st, 2nd, 4th, ... of a kind are logged, so
// a test that causes one violation of a kind sees its line only if it is the first so far in
// this process or a power of two: each kind is caused once per test below, once per process).
bool logged(const std::vector<std::string>& lines, const std::string& kind) {
  for (const auto& l : lines) {
    if (l.find("internal error (" + kind) != std::string::npos) return true;
  }
  return false;
}

TEST(SlotRing, ADoubleReleaseIsCountedAndLoggedNotIgnored) {
  std::vector<std::byte> mem(SlotRing::size_for(2, 64));
  SlotRing ring(mem.data(), 2, 64, nullptr);
  Slot* a = ring.acquire();
  Slot* b = ring.acquire();
  const uint64_t before = invariant_violations(Invariant::kDoubleRelease);
  EXPECT_EQ(ring.release(*a), 1u);
  auto lines =
      invariant_log([&] { EXPECT_EQ(ring.release(*a), 0u) << "the second frees nothing"; });
  EXPECT_EQ(invariant_violations(Invariant::kDoubleRelease), before + 1);
  if (before == 0) {
    EXPECT_TRUE(logged(lines, "double_release"));
  }
  EXPECT_EQ(ring.held(), 1u);
  EXPECT_EQ(ring.release(*b), 1u);
  EXPECT_EQ(ring.in_use(), 0u);
}

// A node forwards slot 0's frame, then (its bug) releases the slot before the downstream
// acknowledged it; the credit lets the next frame into slot 0. The late acknowledgement (or
// outcome, or return) of the first frame must not reach the owner, who would release (or
// requeue) the frame now in slot 0: it is counted and logged instead.
struct StaleSetup {
  std::vector<std::byte> mem = std::vector<std::byte>(SlotRing::size_for(1, 64));
  SlotRing ring{mem.data(), 1, 64, nullptr};
  FrameLedger ledger;
  Slot* slot = nullptr;

  StaleSetup() {
    ledger.reset(4, 4);
    slot = ring.acquire();
    slot->origin = 7;
    slot->seq = 1;
    OutFrame f = frame_of(1);
    f.slot = slot;
    ledger.push(f);
    OutFrame g = frame_of(2);  // a producer's buffer: no slot, never stale
    ledger.push(g);
    EXPECT_EQ(ring.release(*slot), 1u);  // too early
    EXPECT_EQ(ring.acquire(), slot) << "the next frame lands in the same slot";
  }
};

TEST(FrameLedger, AStaleAcknowledgementIsCountedAndLoggedAndReleasesNothing) {
  StaleSetup t;
  const uint64_t before = invariant_violations(Invariant::kStaleRelease);
  std::vector<uint64_t> acked;
  auto lines = invariant_log([&] {
    EXPECT_TRUE(
        t.ledger.acknowledge(2, t.ledger.tail(), [&](void* c) { acked.push_back(id_of(c)); }));
  });
  EXPECT_EQ(acked, (std::vector<uint64_t>{2})) << "the stale frame is not handed back";
  EXPECT_TRUE(t.ledger.empty()) << "but its credit counts";
  EXPECT_EQ(invariant_violations(Invariant::kStaleRelease), before + 1);
  if (before == 0) {
    ASSERT_TRUE(logged(lines, "stale_release"));
    EXPECT_NE(lines[0].find("origin 7 seq 1 chunk 0) acknowledged after its slot 0"),
              std::string::npos)
        << lines[0];
  }
  EXPECT_EQ(t.ring.held(), 1u) << "the newer frame is still held";
}

TEST(FrameLedger, AStaleFrameIsNeitherReportedOnNorReturned) {
  StaleSetup t;
  const uint64_t before = invariant_violations(Invariant::kStaleRelease);
  FrameLedger::Frame* f = t.ledger.outcome_target(outcome_header(0, 1), t.ledger.tail());
  ASSERT_NE(f, nullptr) << "the peer did nothing wrong: it names a frame it was sent";
  EXPECT_FALSE(t.ledger.current(*f, "reported on"));
  std::vector<uint64_t> returned;
  EXPECT_EQ(t.ledger.return_all([&](void* c) { returned.push_back(id_of(c)); }), 2u);
  EXPECT_EQ(returned, (std::vector<uint64_t>{2}));
  EXPECT_EQ(invariant_violations(Invariant::kStaleRelease), before + 2);
}

// ------------------------------------------------------------------ the scripted fake link

// What the receiving end sends back, in order on one connection.
struct Control {
  bool credit = false;
  uint32_t credits = 0;
  FrameHeader outcome;
};

struct Held {
  Slot* slot;
  uint64_t id;
  uint32_t gen;  // the connection it came on
};

// One run: `messages` messages through a link of `slots` slots; returns what broke the model,
// or nothing. `mutate`: the receiver releases one slot a second time, later.
std::optional<std::string> run_model(uint32_t seed, bool mutate) {
  std::mt19937 rng(seed);
  auto chance = [&](uint32_t percent) { return rng() % 100 < percent; };
  const uint32_t slots = 1 + rng() % 6;
  const uint64_t messages = 20 + rng() % 40;
  const uint64_t violations_before = invariant_violations(Invariant::kDoubleRelease);

  // Sender.
  FrameLedger ledger;
  std::deque<uint64_t> queue;  // to post, front first
  for (uint64_t i = 0; i < messages; ++i) queue.push_back(i);
  uint64_t next_ack = 0;                           // acknowledgements come in this order
  std::vector<int64_t> outcome_gen(messages, -1);  // connection its outcome came on
  // Receiver: one ring per connection (a node keeps holding a dead link's slots).
  std::vector<std::vector<std::byte>> memory;
  std::vector<std::unique_ptr<SlotRing>> rings;
  std::vector<Held> held;
  // Replayed copies of a message still held, released with it (Node::hold_with_first).
  std::vector<std::vector<Held>> repeats(messages);
  std::vector<int> delivered(messages, 0);              // to the application, once each
  std::vector<int64_t> released_gen(messages, -1);      // released on this connection
  std::vector<int64_t> outcome_sent_gen(messages, -1);  // with an outcome
  uint32_t pending_credits = 0;
  std::optional<Held> stale;  // the mutation's slot, released once already
  // The connection.
  uint32_t gen = 0;
  std::deque<uint64_t> wire;  // data frames: message ids
  std::deque<Control> control;

  auto connect = [&] {
    ++gen;
    memory.emplace_back(SlotRing::size_for(slots, 64));
    rings.push_back(std::make_unique<SlotRing>(memory.back().data(), slots, 64, nullptr));
    ledger.reset(slots, slots);
    wire.clear();
    control.clear();
    pending_credits = 0;
  };
  auto fail_link = [&] {
    ledger.return_all([&](void* c) { queue.push_front(id_of(c)); });
    connect();
  };
  // The receiving node gives a slot back: outcome first, then (later) its credit.
  auto release = [&](const Held& h, bool with_outcome) {
    SlotRing& ring = *rings[h.gen - 1];
    if (h.gen == gen) {
      if (with_outcome) {
        control.push_back(Control{false, 0, outcome_header(h.slot->index, h.id)});
        outcome_sent_gen[h.id] = gen;
      }
      released_gen[h.id] = gen;
    }
    const uint32_t freed = ring.release(*h.slot);
    if (h.gen == gen) pending_credits += freed;
  };
  connect();

  for (int step = 0; step < 4000 && next_ack < messages; ++step) {
    const uint32_t op = rng() % 100;
    if (op < 25) {  // post
      if (ledger.room() == 0 || queue.empty()) continue;
      const uint64_t id = queue.front();
      queue.pop_front();
      ledger.push(frame_of(id));
      wire.push_back(id);
    } else if (op < 45) {  // a data frame lands
      if (wire.empty()) continue;
      const uint64_t id = wire.front();
      wire.pop_front();
      SlotRing& ring = *rings[gen - 1];
      Slot* s = ring.acquire();
      if (!s) return "the sender overran the receiver's slots";
      s->seq = id;
      if (delivered[id] != 0) {  // a replay of one delivered: dropped by seq
        bool first_held = false;
        for (const Held& h : held) first_held |= h.id == id;
        if (first_held) {
          repeats[id].push_back(Held{s, id, gen});
        } else {
          release(Held{s, id, gen}, false);
        }
        continue;
      }
      delivered[id] = 1;
      held.push_back(Held{s, id, gen});
    } else if (op < 65) {  // the node releases one held slot, in any order
      if (held.empty()) continue;
      const size_t i = rng() % held.size();
      const Held h = held[i];
      held.erase(held.begin() + static_cast<ptrdiff_t>(i));
      release(h, chance(30));
      for (const Held& r : repeats[h.id]) release(r, false);
      repeats[h.id].clear();
      if (mutate && !stale && chance(50)) stale = h;
    } else if (op < 72) {  // credits coalesce, one frame per flush
      if (pending_credits == 0) continue;
      control.push_back(Control{true, pending_credits, {}});
      pending_credits = 0;
    } else if (op < 92) {  // a control frame reaches the sender
      if (control.empty()) continue;
      const Control c = control.front();
      control.pop_front();
      if (!c.credit) {
        FrameLedger::Frame* f = ledger.outcome_target(c.outcome, ledger.tail());
        if (!f) return "an outcome the receiver sent was refused";
        if (id_of(f->cookie) != c.outcome.seq) return "an outcome found the wrong frame";
        outcome_gen[c.outcome.seq] = gen;
        continue;
      }
      std::optional<std::string> broken;
      const bool ok = ledger.acknowledge(c.credits, ledger.tail(), [&](void* cookie) {
        const uint64_t id = id_of(cookie);
        if (id != next_ack) broken = "acknowledged out of order";
        if (released_gen[id] != gen) broken = "acknowledged a message the receiver holds";
        if (outcome_sent_gen[id] == gen && outcome_gen[id] != gen) {
          broken = "a credit came before its outcome";
        }
        if (outcome_sent_gen[id] != gen && outcome_gen[id] == gen) {
          broken = "an outcome for a delivered message";
        }
        ++next_ack;
      });
      if (!ok) return "a credit the receiver sent was refused";
      if (broken) return broken;
    } else if (op < 95 &&
               step < 3000) {  // the link fails: what is in flight is lost, the ledger replays
      fail_link();
    } else if (op < 98 &&
               step < 3000) {  // a hostile peer: the ledger must refuse it, and the link fails
      bool refused = true;
      if (chance(50)) {
        refused = !ledger.acknowledge(ledger.in_flight() + 1, ledger.tail(), [](void*) {});
      } else if (!ledger.empty()) {
        const uint64_t n = ledger.acked();
        FrameHeader h = outcome_header(static_cast<uint32_t>(n % slots), ledger.at(n).seq + 1);
        refused = ledger.outcome_target(h, ledger.tail()) == nullptr;
      }
      if (!refused) return "a hostile control frame was taken";
      fail_link();
    } else if (stale) {  // the mutation: the same slot released once more
      const Held h = *stale;
      stale.reset();
      release(h, false);
    }
    // Nothing left to do but flush: finish the run (the link stays up from here on).
    if (step >= 3000) {
      while (!held.empty()) {
        const Held h = held.back();
        held.pop_back();
        release(h, false);
        for (const Held& r : repeats[h.id]) release(r, false);
        repeats[h.id].clear();
      }
    }
  }
  if (invariant_violations(Invariant::kDoubleRelease) != violations_before) {
    return "a slot was released twice";
  }
  for (uint64_t id = 0; id < messages; ++id) {
    if (delivered[id] != 1) return "message " + std::to_string(id) + " never delivered";
  }
  if (next_ack != messages) {
    return std::to_string(messages - next_ack) + " messages never acknowledged";
  }
  return std::nullopt;
}

TEST(FrameLedger, AFakeLinkThatFailsReplaysAndLiesKeepsEveryMessageExactlyOnce) {
  for (uint32_t seed = 1; seed <= 10'000; ++seed) {
    auto broken = run_model(seed, false);
    ASSERT_FALSE(broken) << "seed " << seed << ": " << *broken;
  }
}

TEST(FrameLedger, TheModelCatchesASlotReleasedTwice) {
  uint32_t caught = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) caught += run_model(seed, true).has_value();
  EXPECT_GT(caught, 150u) << "the mutation went unnoticed in " << 200 - caught << " of 200 runs";
}

}  // namespace
}  // namespace hoprelay::transport
