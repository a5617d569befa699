// Spooling a slow or down branch (spool_dir; docs/topology.md "Spooling a slow or down
// branch") with real processes over TCP: a broadcast node a -> {b, c}. A branch behind for
// spool_after goes to disk, its slots go back upstream once the spool has them durably, the
// other branch and the producer go on, and the spooled branch gets everything, exactly once, in
// order, when it can take it: also after a is killed with its spool full of messages, and when
// the spool or the disk under it fills up (on_peer_down's "block" then holds the rest in the
// slots). Counts are exact: verify-sink reports and a's counters.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr uint64_t kMessages = 20000;
constexpr const char* kSpooling =
    "downstream c is down for 1s: what is routed to it goes to its spool";
constexpr const char* kCaughtUp = "downstream c has caught up with its spool";

std::string spooling(const TempDir& dir, const std::string& more = "") {
  return "spool_dir = \"" + (dir / "spool").string() + "\"\n" + more;
}

// a broadcasts to b and c (c a sink, or a relay to the sink d); `pipeline_extra` goes into
// [pipeline].
std::vector<NodeDef> nodes(const TempDir& dir, const std::string& c_stage) {
  std::vector<NodeDef> n;
  n.push_back({"a", {"b", "c"}});
  n.push_back({"b", {}, sink(dir, "b")});
  if (c_stage.empty()) {
    n.push_back({"c", {}, sink(dir, "c")});
  } else {
    n.push_back({"c", {"d"}, c_stage});
    n.push_back({"d", {}, sink(dir, "d")});
  }
  return n;
}

struct Spooled {
  Spooled(const TempDir& dir, const std::string& pipeline_extra, const std::string& c_stage = "")
      : p(dir, nodes(dir, c_stage), pipeline_extra) {}

  double a_metric(const std::string& metric, const std::string& labels = "") {
    return metric_value(scrape(p.node("a").metrics), metric, labels);
  }
  double c_spool(const std::string& metric) { return a_metric(metric, "peer=\"c\""); }

  // c down while a stream goes: a's spool for it stops taking more (a says `refused`, and
  // `policy`, the rest of the line), the rest waits in a's slots (the producer too); then c
  // starts and gets everything once, as b did.
  void refuses_then_c_catches_up(const TempDir& dir, const std::string& refused,
                                 const std::string& policy) {
    p.start_up({"b", "a"});
    auto producer = p.start_send("a", kMessages, 256);
    ASSERT_TRUE(
        wait_until([&] { return p.proc("a").output().find(refused) != std::string::npos; }, 20s))
        << p.proc("a").output();
    ASSERT_TRUE(wait_until([&] { return a_metric("hoprelay_slots_in_use") == 32; }, 5s));
    const double spooled = c_spool("hoprelay_spooled_total");
    EXPECT_GT(spooled, 1000);
    EXPECT_LT(spooled, kMessages);
    EXPECT_TRUE(producer->running()) << "the producer finished although the spool takes no more";
    EXPECT_NE(p.proc("a").output().find(policy), std::string::npos) << p.proc("a").output();
    p.start_up({"c"});
    EXPECT_EQ(producer->wait(60s), 0) << producer->output();
    ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", kMessages); }, 30s));
    p.stop_all();
    expect_clean(read_report(dir / "b.json"), kMessages);
    expect_clean(read_report(dir / "c.json"), kMessages);
  }

  Pipeline p;
};

TEST(Spool, ALeafDownForTheWholeStreamCatchesUpFromTheSpoolExactlyOnceAndInOrder) {
  TempDir dir;
  Spooled s(dir, spooling(dir));
  s.p.start_up({"b", "a"});  // c is down from the start
  // Held in a's slots for the first second or two, then spooled: the producer finishes.
  RunResult sent = s.p.send("a", kMessages, 256);
  ASSERT_EQ(sent.code, 0) << sent.output;
  // Its outcomes said so: delivered to b, and spooled at a for c (wire protocol 7).
  EXPECT_NE(sent.output.find("20000 delivered, of which 20000 still spooled at a for c\n"),
            std::string::npos)
      << sent.output;
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", kMessages); }, 10s));
  EXPECT_EQ(s.c_spool("hoprelay_spooled_total"), kMessages);
  // Every message, and the stream's end mark.
  ASSERT_TRUE(
      wait_until([&] { return s.c_spool("hoprelay_spool_messages") == kMessages + 1; }, 5s));
  EXPECT_GT(s.c_spool("hoprelay_spool_bytes"), kMessages * 256);
  EXPECT_GT(s.c_spool("hoprelay_spool_age_seconds"), 0);
  EXPECT_EQ(s.a_metric("hoprelay_slots_in_use"), 0);  // nothing held for c
  EXPECT_EQ(occurrences(s.p.proc("a").output(), kSpooling), 1u) << s.p.proc("a").output();

  // c comes up: it is sent the spool, in order (verify-sink counts a message out of order
  // within its origin as missing until it comes, and a repeat as a duplicate).
  s.p.start_up({"c"});
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", kMessages); }, 30s))
      << s.p.proc("a").output();
  ASSERT_TRUE(wait_until([&] { return s.c_spool("hoprelay_spool_messages") == 0; }, 5s));
  EXPECT_EQ(s.c_spool("hoprelay_spool_replayed_total"), kMessages);
  EXPECT_EQ(s.c_spool("hoprelay_spool_bytes"), 0) << "segments left behind";
  EXPECT_EQ(occurrences(s.p.proc("a").output(), kCaughtUp), 1u) << s.p.proc("a").output();

  // Caught up: what comes now goes to c directly.
  ASSERT_EQ(s.p.send("a", 1000, 256, {"--origin", "2"}).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", kMessages + 1000); }, 10s));
  EXPECT_EQ(s.c_spool("hoprelay_spooled_total"), kMessages);
  s.p.stop_all();
  expect_clean(read_report(dir / "b.json"), kMessages + 1000);
  expect_clean(read_report(dir / "c.json"), kMessages + 1000);
}

// `hoprelay send --wait-all`: acknowledged is not everywhere while a branch is spooled. With c
// down, the wait runs out and send exits 4 naming c, why, and its --json summary says so; with
// c started while a second send waits, that send exits 0 once a's spool for c has drained.
TEST(Spool, SendWaitsUntilEveryHostHasItAndNamesTheHostThatDoesNot) {
  TempDir dir;
  Spooled s(dir, spooling(dir));
  s.p.start_up({"b", "a"});  // c is down
  RunResult first = s.p.send("a", 2000, 256, {"--wait-all", "2", "--json"});
  EXPECT_EQ(first.code, 4) << first.output;
  EXPECT_NE(first.output.find("hoprelay send: not every host has everything yet after "),
            std::string::npos)
      << first.output;
  EXPECT_NE(first.output.find(" s: c (2000 of this stream's messages were spooled at a for c: "
                              "2,001 frames wait in a's spool for c (a's link to it is down))"),
            std::string::npos)
      << first.output;
  EXPECT_NE(first.output.find("\"spooled\": [{\"at\": \"a\", \"for\": \"c\", \"messages\": "
                              "2000, \"left\": 2001, "),
            std::string::npos)
      << first.output;
  EXPECT_NE(first.output.find("\"complete\": false, \"exit\": 4}"), std::string::npos)
      << first.output;
  EXPECT_EQ(first.output.find("sent 2000 messages"), std::string::npos) << "--json: no lines";

  auto second = s.p.start_send("a", 1000, 256, {"--origin", "2", "--wait-all", "0"});
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 1000); }, 20s));
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(second->running()) << "done while c has none of it: " << second->output();
  s.p.start_up({"c"});
  EXPECT_EQ(second->wait(60s), 0) << second->output();
  EXPECT_NE(second->output().find("every host has every message: the spools that held part of "
                                  "it drained in "),
            std::string::npos)
      << second->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 3000); }, 10s));
  s.p.stop_all();
  expect_clean(read_report(dir / "b.json"), 3000);
  expect_clean(read_report(dir / "c.json"), 3000);
}

TEST(Spool, ANodeKilledWithItsSpoolFullOfMessagesSendsThemAfterItsRestartExactlyOnce) {
  TempDir dir;
  Spooled s(dir, spooling(dir));
  s.p.start_up({"b", "a"});
  ASSERT_EQ(s.p.send("a", kMessages, 256).code, 0);
  ASSERT_TRUE(
      wait_until([&] { return s.c_spool("hoprelay_spool_messages") == kMessages + 1; }, 5s));
  s.p.crash_and_restart("a");
  EXPECT_NE(s.p.proc("a").output().find(
                "downstream c: 20001 frames (messages and end marks) left in its spool"),
            std::string::npos)
      << s.p.proc("a").output();
  s.p.start_up({"c"});
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", kMessages); }, 30s))
      << s.p.proc("a").output();
  ASSERT_TRUE(wait_until([&] { return s.c_spool("hoprelay_spool_messages") == 0; }, 5s));
  s.p.stop_all();
  expect_clean(read_report(dir / "b.json"), kMessages);
  expect_clean(read_report(dir / "c.json"), kMessages);
}

TEST(Spool, ASlowBranchIsSpooledWhileTheOtherTakesEverythingAtItsOwnSpeed) {
  TempDir dir;
  // c relays to d at 2,000 messages a second at most (its stage sleeps 500 us a message).
  constexpr uint64_t kCount = 10000;
  Spooled s(dir, spooling(dir),
            std::string("{ plugin = \"") + HOPRELAY_TEST_PACE_PLUGIN + "\", us = \"500\" }");
  s.p.start_up({"d", "c", "b", "a"});
  ASSERT_TRUE(s.p.out_link_up("a", "c"));
  RunResult sent = s.p.send("a", kCount, 256);
  ASSERT_EQ(sent.code, 0) << sent.output;
  // The producer is done once b has everything and c's share is spooled, long before c could
  // take it all (5 s at its pace): b sets the pace, not c. (verify-sink writes its report
  // once a second.)
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", kCount); }, 5s));
  const long long at_d = read_report(dir / "d.json").received;
  EXPECT_LT(at_d, static_cast<long long>(kCount)) << "c was not slower than the producer";
  EXPECT_GT(s.c_spool("hoprelay_spooled_total"), 0);
  EXPECT_NE(s.p.proc("a").output().find(
                "downstream c is out of credit while other branches wait for nothing for 1s"),
            std::string::npos)
      << s.p.proc("a").output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "d", kCount); }, 60s));
  ASSERT_TRUE(wait_until([&] { return s.c_spool("hoprelay_spool_messages") == 0; }, 5s));
  s.p.stop_all();
  expect_clean(read_report(dir / "b.json"), kCount);
  expect_clean(read_report(dir / "d.json"), kCount);
}

TEST(Spool, AFullSpoolHoldsTheRestInTheSlotsUnderBlockAndLosesNothing) {
  TempDir dir;
  // 1 MiB of spool holds about 3,500 messages of 256 bytes (each with its record header).
  Spooled s(dir, spooling(dir, "spool_max = \"1MiB\"\n"));
  s.refuses_then_c_catches_up(dir, "the spool of downstream c is full (",
                              "of spool_max 1.0 MiB): its messages wait in the node's slots "
                              "(on_peer_down = \"block\")");
}

// The disk under the spool full (ENOSPC, not spool_max): a tmpfs of 1 MiB mounted in a mount
// namespace of this test's own (its daemons inherit it; nothing outside sees it). The node
// says so, falls back to on_peer_down ("block": the rest waits in its slots), loses nothing it
// acknowledged, and once c is up c gets everything exactly once and in order. Needs root.
TEST(Spool, TheDiskUnderASpoolFullFallsBackToBlockAndLosesNothing) {
  if (::geteuid() != 0 || ::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    GTEST_SKIP() << "needs root: a mount namespace and a small tmpfs";
  }
  TempDir dir;
  const fs::path disk = dir / "spool";
  fs::create_directories(disk);
  ASSERT_EQ(::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=1m"), 0) << std::strerror(errno);
  Spooled s(dir, spooling(dir));  // spool_max 1 GiB: the disk fills first
  s.refuses_then_c_catches_up(dir, "the spool of downstream c cannot take more (",
                              "No space left on device): its messages wait in the node's slots "
                              "(on_peer_down = \"block\")");
  ::umount(disk.c_str());
}

}  // namespace
}  // namespace hoprelay::test
