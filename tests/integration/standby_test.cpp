// A head lost for good (docs/topology.md, `standby`): a -> b and a2 -> b, a's producers failing
// over to a2 once a has been down for peer_down_timeout, with real processes over TCP. a is
// killed with SIGKILL at a third of the stream and never restarted: `hoprelay send` goes on
// into a2 with what a had not acknowledged, b drops what it had as repeats, and ends with every
// message exactly once and in order; the producer exits 0 (its end mark, stamped by a2,
// reaches b).
#include <gtest/gtest.h>

#include <string>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr uint64_t kMessages = 20000;

TEST(Standby, AProducerFailsOverToTheStandbyHeadAndEveryMessageArrivesOnceInOrder) {
  TempDir dir;
  Pipeline p(dir,
             {{"a", {"b"}, "{ plugin = \"passthrough\" }", "standby = \"a2\""},
              {"a2", {"b"}},
              {"b", {}, sink(dir, "b")}},
             "peer_down_timeout = \"1s\"\n");
  p.start_up({"b", "a2", "a"});
  auto send = p.start_send("a", kMessages, 1000, {"--rate", "4000", "--origin", "7"});
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", kMessages / 3); }, 30s));
  p.crash("a");
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", kMessages); }, 10s));
  EXPECT_EQ(occurrences(send->output(), "head node a at "), 1u) << send->output();
  EXPECT_NE(send->output().find("down for 1s: sending to a2 at"), std::string::npos)
      << send->output();
  // (libhoprelay 1.9's producer stats count it)
  EXPECT_NE(send->output().find("between the head and its standby 1 time\n"), std::string::npos)
      << send->output();
  EXPECT_GT(
      metric_value(scrape(p.node("a2").metrics), "hoprelay_messages_forwarded_total", "peer=\"b\""),
      0);
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), kMessages);
}

}  // namespace
}  // namespace hoprelay::test
