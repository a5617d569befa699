// The in-process link (transport/inproc) against the transport contract (transport.h), with
// a scripted node and producer: admission, credits, in-order acknowledgements with outcomes
// first, close, and no allocation once warm (the datapath rule).
#include "hoprelay/transport/inproc.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "alloc_count.h"

namespace hoprelay::transport::inproc {
namespace {

using namespace std::chrono_literals;

class HeapRegion final : public MemoryRegion {
 public:
  explicit HeapRegion(size_t bytes) : MemoryRegion(nullptr, bytes), bytes_(bytes) {
    data_ = bytes_.data();
  }

 private:
  std::vector<std::byte> bytes_;
};

// The head node: admits (or refuses) and keeps every slot it is given until the test releases it.
struct ScriptedNode final : LinkEvents {
  ScriptedNode() { slots.reserve(1024); }
  bool admit(const PeerInfo& peer, std::string& reason) override {
    admitted_peer = peer.name;
    if (!refuse.empty()) reason = refuse;
    return refuse.empty();
  }
  void on_inbound_up(InboundLink& l) override { link = &l; }
  uint64_t resume_seq(const PeerInfo&) override { return 41; }
  void on_message(InboundLink&, Slot& s) override { slots.push_back(&s); }
  void on_inbound_down(InboundLink&, std::string_view r) override { down = std::string(r); }
  void on_outbound_up(OutboundLink&) override {}
  void on_outbound_down(OutboundLink&, std::string_view) override {}
  void on_acked(OutboundLink&, void*) override {}
  void on_returned(OutboundLink&, void*) override {}
  void on_credit(OutboundLink&) override {}

  std::string refuse;
  std::string admitted_peer;
  InboundLink* link = nullptr;
  std::vector<Slot*> slots;
  std::string down;
};

// The producer: records what comes back, in order ('a' acked, 'o' outcome, 'r' returned).
struct ScriptedProducer final : LinkEvents {
  ScriptedProducer() { events.reserve(4096); }
  bool admit(const PeerInfo&, std::string&) override { return false; }
  void on_inbound_up(InboundLink&) override {}
  void on_message(InboundLink&, Slot&) override {}
  void on_inbound_down(InboundLink&, std::string_view) override {}
  void on_outbound_up(OutboundLink&) override { ++ups; }
  void on_outbound_down(OutboundLink&, std::string_view) override { ++downs; }
  void on_acked(OutboundLink&, void* c) override { events.push_back({'a', id(c)}); }
  void on_outcome(OutboundLink&, void* c, const Outcome& o) override {
    events.push_back({'o', id(c)});
    last_outcome_total = o.total;
  }
  void on_returned(OutboundLink&, void* c) override { events.push_back({'r', id(c)}); }
  void on_credit(OutboundLink&) override { ++credits; }
  void on_refused(OutboundLink&, std::string_view r) override { refused = std::string(r); }
  static int id(void* c) { return static_cast<int>(reinterpret_cast<intptr_t>(c)); }

  int ups = 0, downs = 0, credits = 0;
  uint16_t last_outcome_total = 0;
  std::string refused;
  std::vector<std::pair<char, int>> events;
};

class InprocLinkTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kSlots = 4;
  static constexpr uint32_t kSlotSize = 256;

  void connect() {
    Identity id{PeerRole::kProducer, "p", 7, 3, nullptr};
    transport_ = std::make_unique<InprocTransport>(
        loop_, node_, producer_, id, kSlotSize,
        [this](size_t bytes) -> MemoryRegion& { return node_memory_.emplace_back(bytes); });
    memory_ = transport_->allocate(kSlots * kSlotSize);
    link_ = transport_->connect({"head", {}, false, kSlots});
  }
  // Posts frame `n` (its cookie), from buffer n % kSlots.
  bool post(int n) {
    OutFrame f;
    f.origin = 3;
    f.seq = static_cast<uint64_t>(n);
    f.payload = memory_->data() + (n % kSlots) * kSlotSize;
    f.length = 16;
    f.memory = memory_.get();
    f.cookie = reinterpret_cast<void*>(static_cast<intptr_t>(n));
    return link_->post(f);
  }
  void run() { loop_.run_once(0ms); }

  EventLoop loop_;
  ScriptedNode node_;
  ScriptedProducer producer_;
  std::vector<HeapRegion> node_memory_ = [] {
    std::vector<HeapRegion> v;
    v.reserve(4);
    return v;
  }();
  std::unique_ptr<InprocTransport> transport_;
  std::unique_ptr<MemoryRegion> memory_;
  std::unique_ptr<OutboundLink> link_;
};

TEST_F(InprocLinkTest, ComesUpOnTheLoopWithEveryHeadSlotAsCredit) {
  connect();
  EXPECT_FALSE(link_->up()) << "admitted when the loop runs, as over a network";
  EXPECT_EQ(link_->credits(), 0u);
  run();
  EXPECT_TRUE(link_->up());
  EXPECT_EQ(node_.admitted_peer, "p");
  ASSERT_NE(node_.link, nullptr);
  EXPECT_TRUE(node_.link->in_process());
  EXPECT_EQ(link_->credits(), kSlots);
  EXPECT_EQ(link_->max_payload(), kSlotSize);
  EXPECT_EQ(link_->peer_next_seq(), 41u) << "the node's resume_seq";
  EXPECT_EQ(producer_.ups, 1);
  EXPECT_EQ(producer_.credits, 1);
}

TEST_F(InprocLinkTest, ARefusalReachesTheProducerWithItsReason) {
  node_.refuse = "no producer of origin 3 here";
  connect();
  run();
  EXPECT_FALSE(link_->up());
  EXPECT_EQ(producer_.refused, "no producer of origin 3 here");
  EXPECT_FALSE(post(0));
}

TEST_F(InprocLinkTest, FramesReachTheNodeOnTheLoopInTheProducersMemory) {
  connect();
  run();
  ASSERT_TRUE(post(0));
  ASSERT_TRUE(post(1));
  EXPECT_TRUE(node_.slots.empty()) << "never inside post()";
  run();
  ASSERT_EQ(node_.slots.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const Slot& s = *node_.slots[i];
    EXPECT_EQ(s.seq, static_cast<uint64_t>(i));
    EXPECT_EQ(s.origin, 3u);
    EXPECT_EQ(s.length, 16u);
    EXPECT_EQ(s.opcode, Opcode::kLocal);
    EXPECT_EQ(s.frame + kFrameHeaderSize, memory_->data() + i * kSlotSize) << "no copy";
    EXPECT_EQ(s.memory, memory_.get());
  }
  EXPECT_EQ(link_->credits(), kSlots - 2);
  EXPECT_EQ(node_.link->slots_held(), 2u);
}

TEST_F(InprocLinkTest, AcknowledgesInOrderWithAnOutcomeBeforeItsAcknowledgement) {
  connect();
  run();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(post(i));
  run();
  ASSERT_EQ(node_.slots.size(), 3u);
  node_.link->release(*node_.slots[2], nullptr);
  run();
  EXPECT_TRUE(producer_.events.empty()) << "frame 2 waits for 0 and 1";
  EXPECT_EQ(node_.link->slots_in_use(), 3u);
  EXPECT_EQ(node_.link->slots_held(), 2u);
  Outcome dropped;
  dropped.add(DropReason::kStageDrop, "head", "filtered");
  node_.link->release(*node_.slots[0], &dropped);
  run();
  using E = std::vector<std::pair<char, int>>;
  EXPECT_EQ(producer_.events, (E{{'o', 0}, {'a', 0}}));
  EXPECT_EQ(producer_.last_outcome_total, 1);
  node_.link->release(*node_.slots[1], nullptr);
  run();
  EXPECT_EQ(producer_.events, (E{{'o', 0}, {'a', 0}, {'a', 1}, {'a', 2}}));
  EXPECT_EQ(link_->credits(), kSlots);
  EXPECT_EQ(link_->in_flight(), 0u);
}

TEST_F(InprocLinkTest, CloseReturnsTheUnacknowledgedNewestFirstThenTellsTheNode) {
  connect();
  run();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(post(i));
  EXPECT_FALSE(post(4)) << "out of credits";
  run();
  node_.link->release(*node_.slots[0], nullptr);
  run();
  ASSERT_TRUE(post(4));  // posted, never handed to the node
  producer_.events.clear();
  link_->close();
  using E = std::vector<std::pair<char, int>>;
  EXPECT_EQ(producer_.events, (E{{'r', 4}, {'r', 3}, {'r', 2}, {'r', 1}}));
  EXPECT_EQ(node_.down, "the producer closed its link");
  EXPECT_EQ(producer_.downs, 1);
  EXPECT_FALSE(link_->up());
  EXPECT_EQ(node_.slots.size(), 4u) << "frame 4 never reached the node";
  EXPECT_EQ(node_.link->slots_held(), 3u) << "the node still holds 1..3";
  for (int i = 1; i < 4; ++i) node_.link->release(*node_.slots[i], nullptr);
  run();
  EXPECT_EQ(node_.link->slots_held(), 0u);
  EXPECT_EQ(node_.link->slots_in_use(), 0u);
  EXPECT_EQ(producer_.events.size(), 4u) << "a closed link acknowledges nothing";
}

// The datapath rule (nothing allocates per message), for this link: once every entry has held
// a frame and a dropped one has its outcome, posting, delivering, releasing and acknowledging
// allocate nothing, and neither do the loop's deferred callbacks.
TEST_F(InprocLinkTest, ASteadyStreamAllocatesNothing) {
  connect();
  run();
  Outcome dropped;
  dropped.add(DropReason::kStageDrop, "head", "filtered");
  auto round = [&](int n) {
    for (int i = 0; i < static_cast<int>(kSlots); ++i) ASSERT_TRUE(post(n * kSlots + i));
    run();
    for (int i = 0; i < static_cast<int>(kSlots); ++i) {
      node_.link->release(*node_.slots[i], i == 1 ? &dropped : nullptr);
    }
    node_.slots.clear();
    run();
    ASSERT_EQ(link_->credits(), kSlots);
  };
  for (int n = 0; n < 4; ++n) round(n);  // warm: every entry's outcome made once
  producer_.events.clear();
  const uint64_t before = hoprelay::test::allocations();
  for (int n = 4; n < 204; ++n) {
    round(n);
    if (producer_.events.size() > 3000) producer_.events.clear();
  }
  EXPECT_EQ(hoprelay::test::allocations() - before, 0u);
}

}  // namespace
}  // namespace hoprelay::transport::inproc
