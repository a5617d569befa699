// A frozen peer (issue 59, part 1) with real processes over TCP: the 7-node tree
// a -> {b1, b2}, b1 -> {c1, c2}, b2 -> {c3, c4}, every node with spool_dir. Leaf c1's process is
// stopped with SIGSTOP a tenth into the stream, as a GC pause, a hung disk or a paused VM stops
// it: its kernel keeps the TCP connection open and acknowledges bytes, but c1 acknowledges no
// frame. Its relay b1 spools it after spool_after; the frames it had sent c1 from its slots stay
// unacknowledged for spool_after more, so b1 resets the link (hoprelay_downstream_frozen_total),
// and those frames go to the spool too. Every other leaf gets every message, exactly once and
// in order, while c1 is still stopped, and the producer finishes; once c1 runs again it gets
// everything from b1's spool, exactly once and in order. Before the reset, the few frames in
// flight to c1 held b1's slots, slots go back upstream in ring order, and the whole tree stopped
// at the same byte for as long as c1 was frozen.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr uint64_t kMessages = 6000;
constexpr uint32_t kSize = 4096;
// Longer than a TCP handshake's time limit (5 s): b1's reconnects go into the stopped process's
// listen backlog, time out and retry while it is frozen, and the first after SIGCONT comes up.
constexpr auto kFrozen = std::chrono::seconds(25);
constexpr const char* kReset = "downstream c1 acknowledged none of the";

std::vector<NodeDef> tree(const TempDir& dir, const std::string& relay_extra) {
  return {{"a", {"b1", "b2"}},
          {"b1", {"c1", "c2"}, "{ plugin = \"passthrough\" }", relay_extra},
          {"b2", {"c3", "c4"}},
          {"c1", {}, sink(dir, "c1")},
          {"c2", {}, sink(dir, "c2")},
          {"c3", {}, sink(dir, "c3")},
          {"c4", {}, sink(dir, "c4")}};
}

void a_frozen_leaf_costs_the_others_nothing(const std::string& relay_extra) {
  TempDir dir;
  Pipeline p(dir, tree(dir, relay_extra), "spool_dir = \"" + (dir / "spool").string() + "\"\n");
  p.start_up({"c1", "c2", "c3", "c4", "b1", "b2", "a"});
  ASSERT_TRUE(p.out_link_up("b1", "c1"));
  auto send = p.start_send("a", kMessages, kSize, {"--rate", "2000"});
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kMessages / 10); }, 30s));
  p.proc("c1").signal(SIGSTOP);
  const auto frozen_at = std::chrono::steady_clock::now();

  // While c1 is stopped: the producer finishes, and every other leaf has everything.
  EXPECT_EQ(send->wait(kFrozen - 5s), 0) << send->output() << p.proc("b1").output();
  for (const char* leaf : {"c2", "c3", "c4"}) {
    EXPECT_TRUE(wait_until([&] { return report_has(dir, leaf, kMessages); }, 5s)) << leaf;
  }
  ASSERT_LT(std::chrono::steady_clock::now() - frozen_at, kFrozen);
  const std::string b1 = scrape(p.node("b1").metrics);
  EXPECT_EQ(metric_value(b1, "hoprelay_downstream_frozen_total", "peer=\"c1\""), 1) << b1;
  EXPECT_GT(metric_value(b1, "hoprelay_spooled_total", "peer=\"c1\""), 0) << b1;
  EXPECT_EQ(occurrences(p.proc("b1").output(), kReset), 1u) << p.proc("b1").output();
  // The producer was told where c1's share waits.
  EXPECT_NE(send->output().find("still spooled at b1 for c1"), std::string::npos) << send->output();

  std::this_thread::sleep_until(frozen_at + kFrozen);
  p.proc("c1").signal(SIGCONT);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kMessages); }, 30s))
      << p.proc("b1").output();
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("b1").metrics), "hoprelay_spool_messages",
                            "peer=\"c1\"") == 0;
      },
      10s));
  p.stop_all();
  for (const char* leaf : {"c1", "c2", "c3", "c4"}) {
    SCOPED_TRACE(leaf);
    expect_clean(read_report(dir / (std::string(leaf) + ".json")), kMessages);
  }
}

TEST(Frozen, ALeafStoppedForTwentyFiveSecondsCostsTheOthersNothingAndGetsItsCopyAfter) {
  a_frozen_leaf_costs_the_others_nothing("");
}

// The same with b1's downstream links on a link thread (link_threads.h): the reset crosses to
// the thread, whose link hands the frames back through the proxy.
TEST(Frozen, TheSameWithTheRelaysLinksOnALinkThread) {
  a_frozen_leaf_costs_the_others_nothing("link_threads = 1\n");
}

}  // namespace
}  // namespace hoprelay::test
