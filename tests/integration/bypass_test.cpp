// Bypassing a relay lost for good (on_peer_down = "bypass"; docs/topology.md "Bypassing a
// relay that is down") with real processes over TCP: the 7-node tree a -> {b1, b2},
// b1 -> {c1, c2}, b2 -> {c3, c4}, b1 stamping a CRC32C trailer. b1 is killed with SIGKILL at a
// third of a 64 MiB stream; after peer_down_timeout a stands in for it (b1's stage and routing
// run on a, which connects to c1 and c2 itself), and every leaf ends with every message exactly
// once, in order, each with b1's trailer (their verify-sink requires it), and `hoprelay send` exits
// 0. Then again with b1 restarted: the branch goes back to it once the stand-in has acknowledged
// what it was sent.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr uint64_t kMessages = 16384;
constexpr uint32_t kSize = 4096;  // 64 MiB in all
constexpr const char* kStandingIn = "downstream b1 down for 1s: standing in for it";
constexpr const char* kBack = "downstream b1 takes its branch again";

// b1's leaves count a message without its CRC32C trailer as corrupt: a bypass that skipped
// b1's stage fails.
std::string stamped_sink(const TempDir& dir, const std::string& name) {
  return "{ plugin = \"verify-sink\", report = \"" + (dir / (name + ".json")).string() +
         "\", crc32c = \"required\" }";
}

std::vector<NodeDef> tree(const TempDir& dir) {
  return {{"a", {"b1", "b2"}},
          {"b1", {"c1", "c2"}, "{ plugin = \"crc32c\", mode = \"stamp\" }"},
          {"b2", {"c3", "c4"}},
          {"c1", {}, stamped_sink(dir, "c1")},
          {"c2", {}, stamped_sink(dir, "c2")},
          {"c3", {}, sink(dir, "c3")},
          {"c4", {}, sink(dir, "c4")}};
}

const char* kBypass = "on_peer_down = \"bypass\"\npeer_down_timeout = \"1s\"\n";

struct Tree {
  explicit Tree(const TempDir& dir) : dir(dir), p(dir, tree(dir), kBypass) {
    p.start_up({"c1", "c2", "c3", "c4", "b1", "b2", "a"});
  }
  double a_metric(const std::string& metric) {
    return metric_value(scrape(p.node("a").metrics), metric, "peer=\"b1\"");
  }
  // The stream starts (2000 messages/s: about 8 s) and b1 is killed at a third of it.
  std::unique_ptr<Process> send_and_kill_b1() {
    auto send = p.start_send("a", kMessages, kSize, {"--rate", "2000"});
    EXPECT_TRUE(wait_until([&] { return report_has(dir, "c1", kMessages / 3); }, 30s));
    p.crash("b1");
    return send;
  }
  // Once the producer is done: every leaf has everything exactly once.
  void every_leaf_gets_everything(Process& send) {
    ASSERT_EQ(send.wait(60s), 0) << send.output() << p.proc("a").output();
    for (const char* leaf : {"c1", "c2", "c3", "c4"}) {
      ASSERT_TRUE(wait_until([&] { return report_has(dir, leaf, kMessages); }, 10s)) << leaf;
    }
  }
  void expect_every_leaf() {
    // a first: its drain closes the stand-in's links to c1 and c2 with a goodbye, so the
    // leaves log a planned close, not a lost link (only b1's own crash is one).
    p.proc("a").signal(SIGTERM);
    EXPECT_EQ(p.proc("a").wait(20s), 0) << p.proc("a").output();
    p.stop_all();
    for (const char* leaf : {"c1", "c2", "c3", "c4"}) {
      SCOPED_TRACE(leaf);
      expect_clean(read_report(dir / (std::string(leaf) + ".json")), kMessages);
    }
  }
  const TempDir& dir;
  Pipeline p;
};

TEST(Bypass, ARelayKilledForGoodAtAThirdIsBypassedAndEveryLeafGetsEverythingOnce) {
  TempDir dir;
  Tree t(dir);
  auto send = t.send_and_kill_b1();
  t.every_leaf_gets_everything(*send);
  EXPECT_EQ(occurrences(t.p.proc("a").output(), kStandingIn), 1u) << t.p.proc("a").output();
  EXPECT_EQ(t.a_metric("hoprelay_bypass_active"), 1);
  EXPECT_GT(t.a_metric("hoprelay_bypassed_total"), 0);
  t.expect_every_leaf();
  // c1's links from b1: the real one lost (the crash), the stand-in's closed by a goodbye.
  for (const char* leaf : {"c1", "c2"}) {
    const std::string log = t.p.proc(leaf).output();
    EXPECT_EQ(occurrences(log, "inbound link from b1 ("), 2u) << leaf << ":\n" << log;
    EXPECT_EQ(occurrences(log, ") closed by the peer"), 1u) << leaf << ":\n" << log;
  }
}

TEST(Bypass, ARelayBackAfterABypassTakesItsBranchAgainWithNoRepeatAndInOrder) {
  TempDir dir;
  Tree t(dir);
  auto send = t.send_and_kill_b1();
  ASSERT_TRUE(wait_until([&] { return t.a_metric("hoprelay_bypass_active") == 1; }, 10s));
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kMessages / 2); }, 30s));
  t.p.start_up({"b1"});
  ASSERT_TRUE(wait_until([&] { return t.a_metric("hoprelay_bypass_active") == 0; }, 20s))
      << t.p.proc("a").output();
  t.every_leaf_gets_everything(*send);
  EXPECT_EQ(occurrences(t.p.proc("a").output(), kStandingIn), 1u) << t.p.proc("a").output();
  EXPECT_EQ(occurrences(t.p.proc("a").output(), kBack), 1u) << t.p.proc("a").output();
  // The restarted b1 carried the end of the stream.
  EXPECT_GT(metric_value(scrape(t.p.node("b1").metrics), "hoprelay_messages_forwarded_total",
                         "peer=\"c1\""),
            0)
      << t.p.proc("a").output() << scrape(t.p.node("b1").metrics);
  t.expect_every_leaf();
}

// The node standing in is killed too: the producer replays to its next run, which stands in
// again once b1 has been down for peer_down_timeout from its start; the leaves, alive, drop
// what they had as repeats.
TEST(Bypass, TheBypassingNodeKilledAndRestartedStandsInAgainAndLosesNothing) {
  TempDir dir;
  Tree t(dir);
  auto send = t.send_and_kill_b1();
  ASSERT_TRUE(wait_until([&] { return t.a_metric("hoprelay_bypass_active") == 1; }, 10s));
  t.p.crash_and_restart("a");
  t.every_leaf_gets_everything(*send);
  EXPECT_EQ(occurrences(t.p.proc("a").output(), kStandingIn), 1u) << t.p.proc("a").output();
  t.expect_every_leaf();
}

}  // namespace
}  // namespace hoprelay::test
