// on_peer_down with real processes over TCP: a broadcast node a -> {b, c} whose branch c is
// down. With "drop-after" a drops c's messages once c has been down for peer_down_timeout, so
// b and the producer keep going, and counts each drop; with "block" (the default) nothing is
// dropped and the producer waits for c. Counts are exact: verify-sink reports and a's counters.
#include <signal.h>

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr uint64_t kMessages = 20000;
constexpr const char* kDropAfter = "on_peer_down = \"drop-after\"\npeer_down_timeout = \"1s\"\n";
constexpr const char* kDropLog =
    "downstream c down for 1s: dropping its messages (on_peer_down = drop-after)";

// a broadcasts to the sinks b and c; `pipeline_extra` goes into [pipeline].
struct FanOut {
  FanOut(const TempDir& dir, const std::string& pipeline_extra)
      : p(dir,
          {{"a", {"b", "c"}, "{ plugin = \"passthrough\" }", "route = \"broadcast\""},
           {"b", {}, sink(dir, "b")},
           {"c", {}, sink(dir, "c")}},
          pipeline_extra) {}

  // Starts b and a only: c is down from the start.
  void start_without_c() { p.start_up({"b", "a"}); }
  double a_metric(const std::string& metric, const std::string& labels = "") {
    return metric_value(scrape(p.node("a").metrics), metric, labels);
  }
  double dropped_peer_down() {
    return a_metric("hoprelay_messages_dropped_total", "reason=\"peer_down\"");
  }
  std::unique_ptr<Process> send_async(const std::string& rate = "") {
    return p.start_send(
        "a", kMessages, 256,
        rate.empty() ? std::vector<std::string>{} : std::vector<std::string>{"--rate", rate});
  }
  // Starts b and a without c, and a producer that a's broadcast to the absent c blocks: a
  // ends up holding every slot of the producer's link (the gauge is sampled once a second)
  // and has dropped nothing.
  std::unique_ptr<Process> send_blocked_by_c() {
    start_without_c();
    auto producer = send_async();
    EXPECT_TRUE(wait_until([&] { return a_metric("hoprelay_slots_in_use") == 32; }, 10s));
    EXPECT_TRUE(producer->running()) << "the producer finished although c is down";
    EXPECT_EQ(dropped_peer_down(), 0);
    return producer;
  }

  // Stops every daemon (each must drain and exit 0), then checks the sinks' reports: exactly
  // `b` messages at b, and `c` at c when given.
  void stop_and_check(const TempDir& dir, long long b, std::optional<long long> c = {}) {
    p.stop_all();
    expect_clean(read_report(dir / "b.json"), b);
    if (c) expect_clean(read_report(dir / "c.json"), *c);
  }

  Pipeline p;
};

TEST(PeerDown, DropAfterLetsTheOtherBranchTakeEverythingAndCountsTheDrops) {
  TempDir dir;
  FanOut f(dir, kDropAfter);
  f.start_without_c();
  // Blocked for the first second (c has not been down for 1s yet), then it flows.
  RunResult sent = f.p.send("a", kMessages, 256);
  // The producer is done once a released every message: b acknowledged it and c's copy was
  // dropped, counted before the release. It hears of every drop, and that b delivered them.
  ASSERT_EQ(sent.code, 3) << sent.output;
  EXPECT_NE(sent.output.find(std::to_string(kMessages) + " of " + std::to_string(kMessages) +
                             " messages dropped at a: peer_down (downstream c down longer than "
                             "1s)"),
            std::string::npos)
      << sent.output;
  EXPECT_NE(sent.output.find(std::to_string(kMessages) +
                             " of the dropped messages were delivered on other branches"),
            std::string::npos)
      << sent.output;
  EXPECT_EQ(f.dropped_peer_down(), kMessages);
  EXPECT_EQ(f.a_metric("hoprelay_messages_forwarded_total", "peer=\"b\""), kMessages);
  EXPECT_EQ(f.a_metric("hoprelay_messages_forwarded_total", "peer=\"c\""), 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", kMessages); }, 5s));
  // Logged once for the transition, not per message.
  EXPECT_EQ(occurrences(f.p.proc("a").output(), kDropLog), 1u) << f.p.proc("a").output();

  // c comes up: it gets what is sent from then on (another origin, so its sequence starts at
  // 0 and verify-sink sees no gap), and nothing more is dropped.
  f.p.start("c");
  ASSERT_TRUE(wait_until(
      [&] { return f.a_metric("hoprelay_link_up", "direction=\"out\",peer=\"c\"") == 1; }, 10s));
  ASSERT_EQ(f.p.send("a", 1000, 256, {"--origin", "2"}).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 1000); }, 5s));
  EXPECT_EQ(f.dropped_peer_down(), kMessages);
  std::string a_log = f.p.proc("a").output();
  EXPECT_NE(a_log.find("downstream c up again: forwarding to it again (20000 messages were "
                       "dropped for it)"),
            std::string::npos)
      << a_log;
  f.stop_and_check(dir, kMessages + 1000, 1000);
}

TEST(PeerDown, DropAfterReleasesWhatAKilledPeerHadNotAcknowledged) {
  TempDir dir;
  FanOut f(dir, kDropAfter);
  f.p.start_all();
  auto producer = f.send_async("10000");
  ASSERT_TRUE(wait_until(
      [&] { return f.a_metric("hoprelay_messages_forwarded_total", "peer=\"c\"") >= 3000; }, 10s));
  f.p.proc("c").signal(SIGKILL);
  // The frames c had not acknowledged come back to a when the link drops, and are dropped
  // with the rest once c has been down for 1s: the producer hears of it (exit 3).
  EXPECT_EQ(producer->wait(60s), 3) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", kMessages); }, 5s));
  double to_c = f.a_metric("hoprelay_messages_forwarded_total", "peer=\"c\"");
  double dropped = f.dropped_peer_down();
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(to_c + dropped, kMessages) << "acknowledged by c " << to_c << ", dropped " << dropped;
  EXPECT_EQ(occurrences(f.p.proc("a").output(), kDropLog), 1u) << f.p.proc("a").output();
  f.p.start("c");  // so that every daemon can be stopped cleanly
  ASSERT_TRUE(wait_until(
      [&] { return f.a_metric("hoprelay_link_up", "direction=\"out\",peer=\"c\"") == 1; }, 10s));
  f.stop_and_check(dir, kMessages);
}

// The default loses nothing however long c is down; peer_down_timeout alone changes nothing.
TEST(PeerDown, BlockByDefaultHoldsTheBranchUntilThePeerComes) {
  TempDir dir;
  FanOut f(dir, "peer_down_timeout = \"100ms\"\n");
  auto producer = f.send_blocked_by_c();
  ASSERT_FALSE(HasFailure());
  f.p.start("c");
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until(
      [&] { return report_has(dir, "b", kMessages) && report_has(dir, "c", kMessages); }, 5s));
  EXPECT_EQ(f.dropped_peer_down(), 0);
  f.stop_and_check(dir, kMessages, kMessages);
}

// A reload applies on_peer_down to a peer that is down already, counting the time it has been
// down: the blocked branch is released at once.
TEST(PeerDown, ReloadToDropAfterReleasesABlockedBranch) {
  TempDir dir;
  FanOut f(dir, "");
  auto producer = f.send_blocked_by_c();
  ASSERT_FALSE(HasFailure());
  f.p.change([](std::vector<NodeDef>& nodes) { nodes[0].extra += std::string("\n") + kDropAfter; });
  f.p.proc("a").signal(SIGHUP);
  ASSERT_TRUE(wait_until(
      [&] { return f.a_metric("hoprelay_config_reloads_total", "result=\"success\"") == 1; }, 5s))
      << f.p.proc("a").output();
  EXPECT_EQ(producer->wait(60s), 3) << producer->output();
  EXPECT_EQ(f.dropped_peer_down(), kMessages);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", kMessages); }, 5s));
  std::string a_log = f.p.proc("a").output();
  EXPECT_NE(a_log.find("on_peer_down drop-after 1s"), std::string::npos) << a_log;
  EXPECT_EQ(occurrences(a_log, kDropLog), 1u) << a_log;
  f.stop_and_check(dir, kMessages);
}

}  // namespace
}  // namespace hoprelay::test
