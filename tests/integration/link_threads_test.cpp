// `link_threads = N` (docs/topology.md, daemon/link_threads.h): a node's downstream links on N
// threads of their own, each with its own event loop and transport. Real daemons on loopback.
#include <gtest/gtest.h>

#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

class LinkThreads : public ::testing::TestWithParam<int> {};

// Two producers (two origins) into a -> r (link_threads = N, broadcasting to b, c and d, three
// verify-sinks); r killed twice and b once mid-stream: every message at every leaf exactly
// once, in its origin's order, whole and chunked.
TEST_P(LinkThreads, EveryMessageOnceAndInOrderAtEveryLeafThroughARelayKilledTwice) {
  const int threads = GetParam();
  TempDir dir;
  Pipeline p(dir, {{"a", {"r"}},
                   {"r",
                    {"b", "c", "d"},
                    "{ plugin = \"passthrough\" }",
                    "link_threads = " + std::to_string(threads)},
                   {"b", {}, sink(dir, "b")},
                   {"c", {}, sink(dir, "c")},
                   {"d", {}, sink(dir, "d")}});
  p.start_all();
  // 16 KiB slots: 40,000 bytes is 3 chunks.
  constexpr uint64_t kWhole = 20000, kChunked = 400;
  auto one = p.start_send("a", kWhole, 2000, {"--origin", "11", "--rate", "5000"}, "send1.log");
  auto two = p.start_send("a", kChunked, 40000, {"--origin", "12", "--rate", "100"}, "send2.log");
  std::this_thread::sleep_for(1200ms);
  p.crash_and_restart("r");
  std::this_thread::sleep_for(1000ms);
  p.crash_and_restart("b");
  std::this_thread::sleep_for(1000ms);
  p.crash_and_restart("r");
  EXPECT_EQ(one->wait(120s), 0) << one->output();
  EXPECT_EQ(two->wait(120s), 0) << two->output();
  for (const char* leaf : {"b", "c", "d"}) {
    ASSERT_TRUE(wait_until([&] { return report_has(dir, leaf, kWhole + kChunked); }, 20s))
        << leaf << ": " << read_file(dir / (std::string(leaf) + ".json"));
  }
  p.stop_all();
  for (const char* leaf : {"b", "c", "d"}) {
    SCOPED_TRACE(leaf);
    Report r = read_report(dir / (std::string(leaf) + ".json"));
    expect_clean(r, kWhole + kChunked);
    EXPECT_EQ(r.reordered, 0) << read_file(dir / (std::string(leaf) + ".json"));
  }
  EXPECT_NE(
      read_file(dir / "r.log").find("downstream links on " + std::to_string(threads) + " thread"),
      std::string::npos)
      << read_file(dir / "r.log");
}

INSTANTIATE_TEST_SUITE_P(Threads, LinkThreads, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param); });

// Reloads with the links on threads: a downstream moved to a new address while its old link
// holds frames in flight (close() hands them back at once, the new link gets them), then one
// removed: every message at each leaf exactly once.
TEST(LinkThreadsReload, AMovedDownstreamGetsWhatWasInFlightThenOneIsRemoved) {
  TempDir dir;
  constexpr uint64_t kCount = 3000;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b",
                    {"c1", "c2"},
                    "{ plugin = \"passthrough\" }",
                    "route = \"broadcast\"\nlink_threads = 2"},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  // Paced so that c2 is stopped mid-stream: unpaced, a fast machine sent all 3,000 to c2
  // before the stop (CI saw b's slots never fill).
  auto producer = p.start_send("a", kCount, 200, {"--rate", "1000"});
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("c2").metrics), "hoprelay_messages_received_total") > 0;
      },
      20s));
  p.proc("c2").signal(SIGSTOP);
  // b's slots all held for c2: its link to c2 has frames in flight.
  ASSERT_TRUE(wait_until(
      [&] { return metric_value(scrape(p.node("b").metrics), "hoprelay_slots_in_use") == 32; },
      15s));
  p.change([](std::vector<NodeDef>& nodes) {
    nodes[3].port = free_port();
    nodes[3].metrics = free_port();
  });
  p.proc("b").signal(SIGHUP);
  ASSERT_TRUE(
      wait_until([&] { return p.proc("b").output().find("moved c2") != std::string::npos; }, 5s))
      << p.proc("b").output();
  fs::rename(dir / "c2.log", dir / "c2.old.log");
  p.start("c2");  // on its new address (the stopped one is killed)
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until(
      [&] { return report_has(dir, "c1", kCount) && report_has(dir, "c2", kCount); }, 30s))
      << p.proc("b").output();
  const std::string b = scrape(p.node("b").metrics);
  EXPECT_EQ(metric_value(b, "hoprelay_messages_replayed_total", "peer=\"c1\""), 0) << b;
  EXPECT_GT(metric_value(b, "hoprelay_messages_replayed_total", "peer=\"c2\""), 0) << b;
  // Each link thread's loop is watched for stalls as the node's is (loop_watch.h).
  EXPECT_GT(metric_value(b, "hoprelay_loop_iteration_seconds_count", "loop=\"link-0\""), 0) << b;
  EXPECT_GT(metric_value(b, "hoprelay_loop_iteration_seconds_count", "loop=\"link-1\""), 0) << b;
  EXPECT_NE(b.find("hoprelay_loop_stalls_total{loop=\"link-1\"}"), std::string::npos) << b;

  // Then c2 removed, and more messages: all at c1, c2 closed on purpose.
  p.change([](std::vector<NodeDef>& nodes) { nodes[1].downstream = {"c1"}; });
  p.proc("b").signal(SIGHUP);
  ASSERT_TRUE(wait_until(
      [&] {
        return p.proc("b").output().find(
                   "downstream c2 removed: everything sent to it was "
                   "acknowledged") != std::string::npos;
      },
      10s))
      << p.proc("b").output();
  ASSERT_EQ(p.send("a", kCount, 200, {"--origin", "9"}).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", 2 * kCount); }, 30s));
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), 2 * kCount);
  expect_clean(read_report(dir / "c2.json"), kCount);
}

}  // namespace
}  // namespace hoprelay::test
