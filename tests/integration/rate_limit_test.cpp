// rate_limit and rate_limit_to (docs/topology.md, "Capping what a distribution takes"), with
// real processes over TCP on loopback, which is far faster than the limits: what a node sends is
// held to its limit (the stream takes at least the time the limit allows; never a test of how
// fast a loaded machine is, only that the node does not go faster), every message arrives once,
// and the metrics say so; a reload sets and lifts a limit under traffic. How close to the limit a
// link gets is measured by bench/fleet.sh (RATE_LIMIT=...), in namespaces shaped with tc.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr uint64_t kMessages = 2000;
constexpr const char* kPassthrough = "{ plugin = \"passthrough\" }";
constexpr uint32_t kSize = 4096;
// What crosses a link per message: the payload and the frame's 32-byte header.
constexpr double kBitsSent = double(kMessages) * (kSize + 32) * 8;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(RateLimit, ANodesLimitHoldsWhatItSendsAndLosesNothing) {
  TempDir dir;
  Pipeline p(dir,
             {{"a", {"b"}, kPassthrough, "rate_limit = \"40Mbit\""}, {"b", {}, sink(dir, "b")}});
  p.start_up({"b", "a"});
  const auto t0 = std::chrono::steady_clock::now();
  auto send = p.start_send("a", kMessages, kSize);
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  const double secs = seconds_since(t0);
  // 66 Mbit at 40 Mbit/s: 1.65 s, less the 5 ms an idle link may send at once, and 5 % for
  // the clocks of two processes.
  EXPECT_GE(secs, kBitsSent / 40e6 * 0.95 - 0.005) << "faster than the limit: " << send->output();
  std::printf("rate limit 40 Mbit/s: %.1f Mbit/s through a\n", kBitsSent / secs / 1e6);
  const std::string m = scrape(p.node("a").metrics);
  EXPECT_EQ(metric_value(m, "hoprelay_rate_limit_bits_per_second", "peer=\"b\""), 40e6);
  EXPECT_GT(metric_value(m, "hoprelay_rate_limited_seconds_total", "peer=\"b\""), 0.5);
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), kMessages);
}

// A limit on one branch of a fan-out, under broadcast: that link is paced, the other has no
// gate at all (no series), and both leaves get everything once.
TEST(RateLimit, ALimitOnOneDownstreamPacesThatLinkOnly) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b", "c"}, kPassthrough, "rate_limit_to = { c = \"30Mbit\" }"},
                   {"b", {}, sink(dir, "b")},
                   {"c", {}, sink(dir, "c")}});
  p.start_up({"b", "c", "a"});
  const auto t0 = std::chrono::steady_clock::now();
  auto send = p.start_send("a", kMessages, kSize);
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  EXPECT_GE(seconds_since(t0), kBitsSent / 30e6 * 0.95 - 0.005) << send->output();
  const std::string m = scrape(p.node("a").metrics);
  EXPECT_EQ(metric_value(m, "hoprelay_rate_limit_bits_per_second", "peer=\"c\""), 30e6);
  EXPECT_GT(metric_value(m, "hoprelay_rate_limited_seconds_total", "peer=\"c\""), 0.5);
  std::istringstream lines(m);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(line.starts_with("hoprelay_rate_limit") && line.find("peer=\"b\"") != line.npos)
        << "b has no limit, and no series of one: " << line;
  }
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), kMessages);
  expect_clean(read_report(dir / "c.json"), kMessages);
}

// A reload (SIGHUP) applies a limit to a stream under way, and lifts it, without dropping the
// link: the gate comes and goes, the stream goes on, every message arrives once.
TEST(RateLimit, AReloadSetsAndLiftsALimitUnderTraffic) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}, kPassthrough}, {"b", {}, sink(dir, "b")}});
  p.start_up({"b", "a"});
  const uint64_t n = 20000;
  auto send = p.start_send("a", n, 1000, {"--rate", "5000"});  // 4 s, about 40 Mbit/s
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 2000); }, 30s));
  p.change([](auto& nodes) { nodes[0].extra = "rate_limit = \"8Mbit\""; });
  p.proc("a").signal(SIGHUP);
  auto limited = [&] {
    const std::string m = scrape(p.node("a").metrics);
    return metric_value(m, "hoprelay_rate_limit_bits_per_second", "peer=\"b\"") == 8e6 &&
           metric_value(m, "hoprelay_rate_limited_seconds_total", "peer=\"b\"") > 0.2;
  };
  ASSERT_TRUE(wait_until(limited, 10s)) << p.proc("a").output();
  p.change([](auto& nodes) { nodes[0].extra = ""; });
  p.proc("a").signal(SIGHUP);
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("a").metrics), "hoprelay_rate_limit_bits_per_second",
                            "peer=\"b\"") == 0;
      },
      10s))
      << p.proc("a").output();
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  EXPECT_EQ(occurrences(p.proc("a").output(), "outbound link up: b"), 1u) << p.proc("a").output();
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), n);
}

}  // namespace
}  // namespace hoprelay::test
