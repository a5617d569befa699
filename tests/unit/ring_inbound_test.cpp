// The receiving end's return path (ring_inbound.h), with a fake transport that records what it
// is asked to send and may refuse for want of room: unit cases for each rule, then 2,000 random
// runs of out-of-order releases (some with outcomes), a send queue that fills and empties, and
// drains, decoded as a sender would and checked against the ring's order.
#include "hoprelay/transport/ring_inbound.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "hoprelay/transport/event_loop.h"
#include "hoprelay/transport/outcome.h"

namespace hoprelay::transport {
namespace {

struct Sent {
  FrameType type;
  uint32_t credits = 0;  // kCredit
  uint32_t slot = 0;     // kOutcome: the slot it reports on
  uint64_t seq = 0;
};

class FakeInbound final : public RingInbound {
 public:
  FakeInbound(EventLoop& loop, uint32_t slots)
      : RingInbound(loop),
        memory_(SlotRing::size_for(slots, 64)),
        outcomes_(slots * kMaxOutcomeFrame) {
    start_ring(memory_.data(), slots, 64, nullptr, outcomes_.data(), kMaxOutcomeFrame);
  }

  // A frame arrives in the next slot, as a transport would hand it over.
  Slot& arrive(uint64_t seq) {
    Slot* s = ring().acquire();
    EXPECT_NE(s, nullptr);
    s->origin = 9;
    s->seq = seq;
    return *s;
  }
  void drain() override {
    queue_bye();
    flush_returns();
  }
  using RingInbound::flush_returns;
  using RingInbound::returns_pending;

  std::vector<Sent> sent;
  int room = 1 << 30;  // frames the fake send queue takes before it is full
  bool open = true;
  bool is_closed = false;
  int reaped = 0;

 private:
  bool emit_outcome(std::span<const std::byte> frame) override {
    if (room == 0) return false;
    --room;
    FrameHeader h;
    EXPECT_EQ(decode_header(frame.data(), WireLimits{64}, h), WireError::kOk);
    EXPECT_EQ(h.type, FrameType::kOutcome);
    EXPECT_EQ(frame.size(), kFrameHeaderSize + h.length);
    Outcome o;
    EXPECT_TRUE(decode_outcome(frame.subspan(kFrameHeaderSize), o));
    sent.push_back(Sent{FrameType::kOutcome, 0, h.slot, h.seq});
    return true;
  }
  bool emit_header(const FrameHeader& header) override {
    if (room == 0) return false;
    --room;
    sent.push_back(Sent{header.type, header.credits, 0, 0});
    return true;
  }
  bool returns_open() const override { return open; }
  bool closed() const override { return is_closed; }
  void reap() override { ++reaped; }

  std::vector<std::byte> memory_;
  std::vector<std::byte> outcomes_;
};

Outcome dropped() {
  Outcome o;
  o.add(DropReason::kStageDrop, "relay", "test");
  return o;
}

TEST(RingInbound, OutcomeBeforeItsCreditAndCreditsCoalescePerIteration) {
  EventLoop loop;
  FakeInbound link(loop, 4);
  Slot& a = link.arrive(0);
  Slot& b = link.arrive(1);
  Slot& c = link.arrive(2);
  const Outcome o = dropped();
  link.release(a, nullptr);
  link.release(b, &o);
  link.release(c, nullptr);
  EXPECT_TRUE(link.sent.empty()) << "nothing leaves inside the releases' iteration";
  EXPECT_EQ(link.credits_pending(), 3u);
  loop.run_pending();
  ASSERT_EQ(link.sent.size(), 2u);
  EXPECT_EQ(link.sent[0].type, FrameType::kOutcome);
  EXPECT_EQ(link.sent[0].slot, 1u);
  EXPECT_EQ(link.sent[0].seq, 1u);
  EXPECT_EQ(link.sent[1].type, FrameType::kCredit);
  EXPECT_EQ(link.sent[1].credits, 3u) << "one CREDIT frame for the iteration's releases";
  EXPECT_FALSE(link.returns_pending());
}

TEST(RingInbound, ACreditWaitsForTheOldestSlot) {
  EventLoop loop;
  FakeInbound link(loop, 4);
  Slot& a = link.arrive(0);
  Slot& b = link.arrive(1);
  link.release(b, nullptr);
  loop.run_pending();
  EXPECT_TRUE(link.sent.empty()) << "slot 0 is still held";
  link.release(a, nullptr);
  loop.run_pending();
  ASSERT_EQ(link.sent.size(), 1u);
  EXPECT_EQ(link.sent[0].credits, 2u);
}

TEST(RingInbound, AFullSendQueueHoldsTheCreditBehindTheOutcomes) {
  EventLoop loop;
  FakeInbound link(loop, 4);
  Slot& a = link.arrive(0);
  Slot& b = link.arrive(1);
  const Outcome o = dropped();
  link.room = 1;
  link.release(a, &o);
  link.release(b, &o);
  loop.run_pending();
  ASSERT_EQ(link.sent.size(), 1u) << "room for one frame";
  EXPECT_EQ(link.outcomes_pending(), 1u);
  EXPECT_EQ(link.credits_pending(), 2u) << "no credit before every outcome it covers";
  link.room = 10;  // a send completed: the transport flushes again
  link.flush_returns();
  ASSERT_EQ(link.sent.size(), 3u);
  EXPECT_EQ(link.sent[1].type, FrameType::kOutcome);
  EXPECT_EQ(link.sent[1].slot, 1u);
  EXPECT_EQ(link.sent[2].type, FrameType::kCredit);
  EXPECT_EQ(link.sent[2].credits, 2u);
}

TEST(RingInbound, NothingLeavesBeforeTheLinkIsUp) {
  EventLoop loop;
  FakeInbound link(loop, 4);
  link.open = false;
  const Outcome o = dropped();
  link.release(link.arrive(0), &o);
  loop.run_pending();
  EXPECT_TRUE(link.sent.empty());
  link.open = true;  // up: the transport flushes what waited
  link.flush_returns();
  ASSERT_EQ(link.sent.size(), 2u);
  EXPECT_EQ(link.sent[0].type, FrameType::kOutcome);
  EXPECT_EQ(link.sent[1].type, FrameType::kCredit);
}

TEST(RingInbound, AByeGoesAfterThePendingCredits) {
  EventLoop loop;
  FakeInbound link(loop, 4);
  link.release(link.arrive(0), nullptr);
  link.drain();
  ASSERT_EQ(link.sent.size(), 2u);
  EXPECT_EQ(link.sent[0].type, FrameType::kCredit);
  EXPECT_EQ(link.sent[1].type, FrameType::kBye);
  loop.run_pending();
  EXPECT_EQ(link.sent.size(), 2u) << "sent once";
}

TEST(RingInbound, AClosedLinkSendsNothingAndIsReapedWithItsLastSlot) {
  EventLoop loop;
  FakeInbound link(loop, 4);
  Slot& a = link.arrive(0);
  Slot& b = link.arrive(1);
  link.is_closed = true;
  const Outcome o = dropped();
  link.release(b, &o);
  EXPECT_EQ(link.reaped, 0) << "slot 0 is still held";
  link.release(a, nullptr);
  EXPECT_EQ(link.reaped, 1);
  loop.run_pending();
  EXPECT_TRUE(link.sent.empty());
  EXPECT_EQ(link.outcomes_pending(), 0u);
}

// Random runs: a ring of 1..8 slots, frames arriving as the credits sent allow, the node releasing
// held slots in any order (a third with outcomes), the send queue filling and emptying, loop
// iterations, and a drain near the end. What went out, read as a sender reads it: every credit
// acknowledges the oldest frames; each outcome names a frame not yet acknowledged and comes
// before the credit that covers it; at the end every frame is acknowledged exactly once, and the
// BYE is last.
TEST(RingInbound, RandomReleasesReachTheSenderInRingOrder) {
  for (uint32_t run = 0; run < 2000; ++run) {
    SCOPED_TRACE(testing::Message() << "seed " << run);
    std::mt19937 rng(run);
    auto chance = [&](int percent) { return int(rng() % 100) < percent; };
    EventLoop loop;
    const uint32_t slots = 1 + rng() % 8;
    FakeInbound link(loop, slots);
    const Outcome o = dropped();
    std::vector<Slot*> held;
    std::vector<bool> has_outcome;  // by frame number
    uint64_t arrived = 0;
    const uint64_t total = 50 + rng() % 100;
    bool drained = false;
    // The sender sends only what its credits allow: frames below granted + slots.
    uint64_t granted = 0;
    size_t read = 0;
    auto read_credits = [&] {
      for (; read < link.sent.size(); ++read) {
        if (link.sent[read].type == FrameType::kCredit) granted += link.sent[read].credits;
      }
    };
    while (!drained) {
      read_credits();
      const int op = int(rng() % 100);
      if (op < 35 && arrived < total && arrived < granted + slots) {
        held.push_back(&link.arrive(arrived++));
        has_outcome.push_back(false);
      } else if (op < 70 && !held.empty()) {
        const size_t i = rng() % held.size();
        Slot* s = held[i];
        held.erase(held.begin() + static_cast<long>(i));
        const bool with = chance(33);
        has_outcome[s->seq] = with;
        link.release(*s, with ? &o : nullptr);
      } else if (op < 80) {  // sends completed: the transport flushes what waits
        link.room = int(rng() % 4);
        if (link.returns_pending()) link.flush_returns();
      } else if (op < 95) {
        loop.run_pending();
      } else if (arrived == total && held.empty()) {
        link.room = 1 << 30;
        link.drain();
        loop.run_pending();
        drained = true;
      }
    }
    // The sender's reading.
    uint64_t acked = 0;
    std::vector<int> outcomes_seen(total, 0);
    for (size_t i = 0; i < link.sent.size(); ++i) {
      const Sent& s = link.sent[i];
      if (s.type == FrameType::kOutcome) {
        ASSERT_GE(s.seq, acked) << "an outcome for a frame already acknowledged";
        ASSERT_EQ(s.slot, s.seq % slots);
        ++outcomes_seen[s.seq];
      } else if (s.type == FrameType::kCredit) {
        ASSERT_GT(s.credits, 0u);
        for (uint64_t f = acked; f < acked + s.credits; ++f) {
          ASSERT_EQ(outcomes_seen[f], has_outcome[f] ? 1 : 0) << "frame " << f;
        }
        acked += s.credits;
        ASSERT_LE(acked, arrived) << "a credit for a frame never received";
      } else {
        ASSERT_EQ(s.type, FrameType::kBye);
        ASSERT_EQ(i, link.sent.size() - 1) << "the BYE is last";
      }
    }
    ASSERT_EQ(acked, total);
    ASSERT_EQ(link.sent.back().type, FrameType::kBye);
    ASSERT_FALSE(link.returns_pending());
  }
}

}  // namespace
}  // namespace hoprelay::transport
