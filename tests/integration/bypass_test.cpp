// Bypassing a relay lost for good (on_peer_down = "bypass"; docs/topology.md "Bypassing a
// relay that is down") with real processes over TCP: the 7-node tree a -> {b1, b2},
// b1 -> {c1, c2}, b2 -> {c3, c4}, b1 stamping a CRC32C trailer. b1 is killed with SIGKILL at a
// third of a 64 MiB stream; after peer_down_timeout a stands in for it (b1's stage and routing
// run on a, which connects to c1 and c2 itself), and every leaf ends with every message exactly
// once, in order, each with b1's trailer (their verify-sink requires it), and `hoprelay send` exits
// 0. Then again with b1 restarted: the branch goes back to it once the stand-in has acknowledged
// what it was sent. And with a file-sink on every node, each host's at the same path on its own
// disk: the node standing in for b1 does not run b1's sink, so its own copy stays its own.
#include <gtest/gtest.h>

#include <cstring>

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

// Every node keeps a copy with file-sink at one path, "<dir>/copy/records", which on each
// node's host is its own disk: each daemon runs in a mount namespace of its own with its host's
// directory mounted there, as one disk per host would have it. b1 is killed at a third; a
// stands in for it. Before stages declared their effect (stage ABI 1.4, HOPRELAY_STAGE_LOCAL)
// the stand-in ran b1's file-sink on a's host, into a's own copy: a held the stream once and
// b1's part again.
constexpr uint64_t kCopyMessages = 6000;
constexpr uint32_t kCopySize = 4096;

// The records of a file-sink copy ([u32 length][payload] each), or -1 if one is cut short.
long long records_in(const fs::path& file) {
  const std::string bytes = read_file(file);
  long long n = 0;
  for (size_t at = 0; at < bytes.size(); ++n) {
    if (bytes.size() - at < 4) return -1;
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + at, 4);
    if (bytes.size() - at - 4 < len) return -1;
    at += 4 + size_t{len};
  }
  return n;
}

TEST(Bypass, ARelayWithAFileSinkKilledUnderBypassLeavesTheStandInsHostsCopyItsOwn) {
  if (run({"/usr/bin/unshare", "--mount", "/bin/true"}).code != 0) {
    GTEST_SKIP() << "no mount namespace here (unshare --mount needs root): one disk per host "
                    "cannot be made";
  }
  TempDir dir;
  const fs::path copy = dir / "copy";
  fs::create_directories(copy);
  const std::string file_sink =
      "{ plugin = \"file-sink\", path = \"" + (copy / "records").string() + "\" }";
  std::vector<NodeDef> nodes = {{"a", {"b1", "b2"}, file_sink},
                                {"b1", {"c1", "c2"}, file_sink},
                                {"b2", {"c3", "c4"}, file_sink},
                                {"c1", {}, file_sink},
                                {"c2", {}, file_sink},
                                {"c3", {}, file_sink},
                                {"c4", {}, file_sink}};
  Pipeline p(dir, nodes, kBypass);
  auto host = [&](const std::string& name) { return dir / "hosts" / name; };
  for (const auto& n : nodes) {
    fs::create_directories(host(n.name));
    p.run_with(n.name, {"/usr/bin/unshare", "--mount", "--", "/bin/sh", "-c",
                        "mount --bind \"$0\" \"$1\" && shift && exec \"$@\"", host(n.name).string(),
                        copy.string()});
  }
  p.start_up({"c1", "c2", "c3", "c4", "b1", "b2", "a"});
  auto copy_of = [&](const std::string& name) { return host(name) / "records"; };
  auto has = [&](const std::string& name, long long n) { return records_in(copy_of(name)) >= n; };

  auto send = p.start_send("a", kCopyMessages, kCopySize, {"--rate", "2000"});
  ASSERT_TRUE(wait_until([&] { return has("c1", kCopyMessages / 3); }, 30s))
      << p.proc("a").output();
  p.crash("b1");
  ASSERT_EQ(send->wait(60s), 0) << send->output() << p.proc("a").output();
  for (const char* leaf : {"c1", "c2", "c3", "c4"}) {
    ASSERT_TRUE(wait_until([&] { return has(leaf, kCopyMessages); }, 10s))
        << leaf << ": " << records_in(copy_of(leaf)) << "\n"
        << p.proc("a").output();
  }
  const std::string a_log = p.proc("a").output();
  EXPECT_EQ(occurrences(a_log, kStandingIn), 1u) << a_log;
  EXPECT_EQ(occurrences(a_log,
                        "its stage file-sink does not run here (its effect is local to "
                        "b1's host"),
            1u)
      << a_log;
  p.proc("a").signal(SIGTERM);
  EXPECT_EQ(p.proc("a").wait(20s), 0) << p.proc("a").output();
  p.stop_all();

  // Every live host's copy: the whole stream once, byte-equal to the others'.
  EXPECT_EQ(records_in(copy_of("a")), static_cast<long long>(kCopyMessages));
  EXPECT_EQ(size_of(copy_of("a")), kCopyMessages * (4 + kCopySize));
  for (const char* name : {"b2", "c1", "c2", "c3", "c4"}) {
    EXPECT_TRUE(same_file(copy_of("a"), copy_of(name)))
        << name << ": " << records_in(copy_of(name)) << " records";
  }
  // b1's host: what b1 wrote before it died, and nothing from the stand-in (it would hold the
  // stream's end).
  const long long b1 = records_in(copy_of("b1"));
  EXPECT_GE(b1, static_cast<long long>(kCopyMessages / 3));
  EXPECT_LT(b1, static_cast<long long>(kCopyMessages));
}

}  // namespace
}  // namespace hoprelay::test
