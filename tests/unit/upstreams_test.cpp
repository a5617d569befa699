// A node's inbound links (daemon/upstreams.h) with no node and no transport: a link's state is
// its context from up to down, one producer per origin is found, deduplication is told every
// origin a sender may replay (links gone down with slots held too), and the slots-in-use gauge
// is a sum per peer label that reads 0 once the links are gone.
#include "hoprelay/daemon/upstreams.h"

#include <gtest/gtest.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hoprelay::daemon {
namespace {

using transport::PeerRole;

// The receiving end of one link, as far as Upstreams looks: who sent, how many slots it uses,
// and the origins its sender would replay.
class FakeLink final : public transport::InboundLink {
 public:
  FakeLink(PeerRole role, std::string name, uint32_t origin) {
    peer_.role = role;
    peer_.name = std::move(name);
    peer_.origin = origin;
    peer_.address = "192.0.2.1:7000";
  }
  void release(transport::Slot&, const transport::Outcome*) override {}
  void drain() override { ++drains; }
  uint32_t slots_in_use() const override { return in_use; }
  uint32_t slots_held() const override { return held; }
  uint32_t slots() const override { return 8; }
  void unreturned_origins(std::vector<uint32_t>& out) const override {
    for (uint32_t i = 0; i < in_use; ++i) out.push_back(peer_.origin);
  }

  uint32_t in_use = 0;
  uint32_t held = 0;
  int drains = 0;
};

struct Bed {
  NodeMetrics metrics{"relay", "tcp", std::nullopt};
  HeldSlots held{"relay"};
  Upstreams up{metrics, held, "tcp"};

  double slots_gauge(const std::string& peer) { return metrics.link_slots_in_use(peer).Value(); }
  double up_gauge(const std::string& peer) { return metrics.inbound(peer, "tcp").up->Value(); }
};

TEST(Upstreams, ALinksStateIsItsContextFromUpToDown) {
  Bed t;
  FakeLink b(PeerRole::kNode, "b", 0);
  t.up.up(b);
  ASSERT_NE(Upstreams::of(b), nullptr);
  EXPECT_EQ(&Upstreams::of(b)->link(), &b);
  EXPECT_EQ(t.up.size(), 1u);
  EXPECT_EQ(t.up_gauge("b"), 1.0);
  std::unique_ptr<LinkNotes> notes = t.up.down(b);
  ASSERT_NE(notes, nullptr);
  EXPECT_EQ(Upstreams::of(b), nullptr) << "down: its notes remain, its state is not found";
  EXPECT_TRUE(t.up.empty());
  EXPECT_EQ(t.up_gauge("b"), 0.0);
  FakeLink never(PeerRole::kNode, "x", 0);
  EXPECT_EQ(t.up.down(never), nullptr) << "a link never up";
}

TEST(Upstreams, OneProducerPerOriginIsFound) {
  Bed t;
  FakeLink p5(PeerRole::kProducer, "", 5), b(PeerRole::kNode, "b", 6);
  t.up.up(p5);
  t.up.up(b);
  ASSERT_NE(t.up.producer_with(5), nullptr);
  EXPECT_EQ(t.up.producer_with(5)->address, "192.0.2.1:7000");
  EXPECT_EQ(t.up.producer_with(6), nullptr) << "a node is not a producer, whatever its origin";
  EXPECT_EQ(t.up.producer_with(7), nullptr);
  std::unique_ptr<LinkNotes> gone = t.up.down(p5);
  EXPECT_EQ(t.up.producer_with(5), nullptr) << "its origin is free once it is down";
}

TEST(Upstreams, DeduplicationKeepsTheOriginsOfLinksUpAndOfLinksGoneDownWithSlotsHeld) {
  Bed t;
  FakeLink p1(PeerRole::kProducer, "", 1), p2(PeerRole::kProducer, "", 2),
      p3(PeerRole::kProducer, "", 3);
  for (FakeLink* l : {&p1, &p2, &p3}) t.up.up(*l);
  p1.in_use = 1;
  p2.in_use = p2.held = 2;
  t.held.link_down(t.up.down(p2));  // slots held: kept by HeldSlots
  t.held.link_down(t.up.down(p3));  // none: gone for good
  std::vector<uint32_t> origins;
  t.up.unreturned_origins(origins);
  std::sort(origins.begin(), origins.end());
  EXPECT_EQ(origins, (std::vector<uint32_t>{1, 2, 2}));
}

TEST(Upstreams, SlotsInUseAreSummedPerLabelAndReadZeroOnceTheLinksAreGone) {
  Bed t;
  config::NodeSpec spec;
  spec.upstream = {"a", "b"};
  t.up.export_series(spec);  // from the start, at 0
  EXPECT_EQ(t.slots_gauge("a"), 0.0);
  EXPECT_EQ(t.up_gauge("b"), 0.0);
  FakeLink p1(PeerRole::kProducer, "", 1), p2(PeerRole::kProducer, "", 2),
      b(PeerRole::kNode, "b", 0);
  for (FakeLink* l : {&p1, &p2, &b}) t.up.up(*l);
  p1.in_use = 3;
  p2.in_use = p2.held = 4;
  b.in_use = 5;
  t.up.sample_slots();
  EXPECT_EQ(t.slots_gauge("producer"), 7.0) << "producers share one label: a sum";
  EXPECT_EQ(t.slots_gauge("b"), 5.0);
  t.held.link_down(t.up.down(p2));
  t.up.sample_slots();
  EXPECT_EQ(t.slots_gauge("producer"), 7.0) << "a link gone down with slots held counts";
  p2.held = 0;
  p2.in_use = 0;
  std::unique_ptr<LinkNotes> gone1 = t.up.down(p1);
  std::unique_ptr<LinkNotes> gone_b = t.up.down(b);
  t.up.sample_slots();
  EXPECT_EQ(t.slots_gauge("producer"), 0.0) << "not the last value it had";
  EXPECT_EQ(t.slots_gauge("b"), 0.0);
}

TEST(Upstreams, ADrainAsksEverySenderOnce) {
  Bed t;
  FakeLink p(PeerRole::kProducer, "", 1), b(PeerRole::kNode, "b", 0);
  t.up.up(p);
  t.up.up(b);
  t.up.drain_all();
  EXPECT_EQ(p.drains, 1);
  EXPECT_EQ(b.drains, 1);
}

}  // namespace
}  // namespace hoprelay::daemon
