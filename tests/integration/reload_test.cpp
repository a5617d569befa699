// Live reload (SIGHUP) with traffic flowing: applied by difference, refused whole when the
// file does not validate or changes what cannot change live, and never losing or duplicating
// a message in flight.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr uint64_t kMessages = 60000;

std::unique_ptr<Process> paced_send(Pipeline& p) {
  return p.start_send("a", kMessages, 200, {"--rate", "15000"});
}

double reload_ok(Pipeline& p, const std::string& node) {
  return metric_value(scrape(p.node(node).metrics), "hoprelay_config_last_reload_successful");
}

// Whether b's log says `text` within 5 s.
bool b_logs(Pipeline& p, const std::string& text) {
  return wait_until([&] { return p.proc("b").output().find(text) != std::string::npos; }, 5s);
}

TEST(Reload, DownstreamAddedRefusalsAndStageChangeUnderTraffic) {
  TempDir dir;
  // c2 is declared but nobody sends to it yet.
  Pipeline p(dir,
             {{"a", {"b"}},
              {"b", {"c1"}, "{ plugin = \"crc32c\", mode = \"stamp\" }", "route = \"broadcast\""},
              {"c1", {}, sink(dir, "c1")},
              {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  auto producer = paced_send(p);
  std::this_thread::sleep_for(1000ms);

  // 1. A file that does not validate: refused with its line and column, b runs on.
  write_file(p.topology(), "[pipeline]\nname = \"it\"\nslots = \"many\"\n");
  p.proc("b").signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return reload_ok(p, "b") == 0; }, 5s));
  EXPECT_NE(p.proc("b").output().find("reload refused: " + p.topology().string() + ":3:9: error:"),
            std::string::npos)
      << p.proc("b").output();

  // 2. A change that cannot be applied live: refused by name.
  p.change([](auto& nodes) { nodes[1].extra = "route = \"broadcast\"\nslots = 64\n"; });
  p.proc("b").signal(SIGHUP);
  ASSERT_TRUE(b_logs(p, "nodes.b.slots cannot change while the node runs")) << p.proc("b").output();

  // 3. A good one: c2 added as a second branch, and the stage's parameters changed.
  p.change([](auto& nodes) {
    nodes[1].extra = "route = \"broadcast\"\n";
    nodes[1].downstream = {"c1", "c2"};
    nodes[1].stage = "{ plugin = \"passthrough\" }";  // the stage swapped between messages
  });
  // As configuration management would: the new file on every host, every node reloaded (c2
  // must learn that b is now its upstream, or it refuses b).
  for (const char* n : {"c2", "c1", "b", "a"}) p.proc(n).signal(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return reload_ok(p, "b") == 1; }, 5s));
  EXPECT_NE(p.proc("b").output().find("topology reloaded: downstream added c2 removed - moved -; "
                                      "route broadcast; stage passthrough (new parameters)"),
            std::string::npos)
      << p.proc("b").output();

  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kMessages); }, 10s));
  std::string bm = scrape(p.node("b").metrics);
  EXPECT_EQ(metric_value(bm, "hoprelay_config_reloads_total", "result=\"failure\""), 2);
  EXPECT_EQ(metric_value(bm, "hoprelay_config_reloads_total", "result=\"success\""), 1);
  p.stop_all();
  // c1 got everything, exactly once, through three reloads of its upstream.
  expect_clean(read_report(dir / "c1.json"), kMessages);
  // c2 got everything from the moment it was added: a gap-free tail, nothing twice.
  Report c2 = read_report(dir / "c2.json");
  EXPECT_GT(c2.received, 0);
  EXPECT_EQ(c2.received + c2.missing, static_cast<long long>(kMessages));
  EXPECT_EQ(c2.duplicates, 0);
  EXPECT_EQ(c2.corrupt, 0);
}

// After a reload the node's handshakes carry the new file's hash: a producer or a peer that
// reads the new file is not told that the files differ (they were, against the old hash). And
// the new file's warnings about the node are logged, as at a start.
TEST(Reload, AReloadedNodeHandshakesWithTheNewFilesHash) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  p.change([](auto& nodes) { nodes[0].extra = "peer_down_timeout = \"20s\"\n"; });
  for (const char* n : {"b", "a"}) p.proc(n).signal(SIGHUP);
  for (const char* n : {"b", "a"}) {
    ASSERT_TRUE(wait_until(
        [&] {
          return metric_value(scrape(p.node(n).metrics), "hoprelay_config_reloads_total",
                              "result=\"success\"") == 1;
        },
        5s))
        << n << "\n"
        << p.proc(n).output();
  }
  RunResult r = p.send("a", 100, 100);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("runs a different topology file"), std::string::npos) << r.output;
  // b restarted reads the new file: a's link to it comes up without a word about files.
  p.crash_and_restart("b");
  ASSERT_TRUE(p.out_link_up("a", "b", 10s));
  r = p.send("a", 100, 100);
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* n : {"a", "b"}) {
    EXPECT_EQ(p.proc(n).output().find("different topology file"), std::string::npos)
        << n << "\n"
        << p.proc(n).output();
  }
  // A reload that gives the head a crc32c stamp: its geometry's warning is logged as at a
  // start (producers' largest message shrinks by the trailer).
  p.change([](auto& nodes) { nodes[0].stage = "{ plugin = \"crc32c\", mode = \"stamp\" }"; });
  p.proc("a").signal(SIGHUP);
  EXPECT_TRUE(wait_until(
      [&] {
        return p.proc("a").output().find(
                   "warning: nodes.a: its crc32c stamp adds a 4-byte "
                   "trailer") != std::string::npos;
      },
      5s))
      << p.proc("a").output();
  p.stop_all();
}

TEST(Reload, RemovedDownstreamGetsEverythingAlreadyRoutedToIt) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1", "c2"}, "{ plugin = \"passthrough\" }", "route = \"broadcast\""},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  auto producer = paced_send(p);
  std::this_thread::sleep_for(1500ms);
  p.change([](auto& nodes) { nodes[1].downstream = {"c1"}; });
  p.proc("b").signal(SIGHUP);
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kMessages); }, 10s));
  EXPECT_TRUE(b_logs(p,
                     "downstream c2 removed: everything sent to it was "
                     "acknowledged"))
      << p.proc("b").output();
  // Closed on purpose once done: nothing given up, no warning.
  EXPECT_EQ(p.proc("b").output().find("giving up"), std::string::npos) << p.proc("b").output();
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), kMessages);
  // c2 got a gap-free prefix: everything routed to it before the reload, nothing after.
  Report c2 = read_report(dir / "c2.json");
  EXPECT_GT(c2.received, 0);
  EXPECT_LT(c2.received, static_cast<long long>(kMessages));
  EXPECT_EQ(c2.missing, 0);
  EXPECT_EQ(c2.duplicates, 0);
  EXPECT_EQ(c2.corrupt, 0);
}

// A downstream removed while it is down (killed): what was routed to it waits for a node that
// no topology will bring back, holding b's slots, so the producer stalled for good with
// nothing said, whatever on_peer_down. Now a removed peer is drop-after whatever the policy
// (b's is block): b gives those messages up once it has been down peer_down_timeout (1 s
// here, long past at the reload; counted as peer_down, each producer told through its
// outcomes), the other branch gets everything, the removal's log line says what was given up
// (it said "everything sent to it was acknowledged"), and c2's gauges go (link_up 0 would
// fire HoprelayLinkDown for good).
TEST(Reload, ADownstreamRemovedWhileDownGivesUpItsMessagesAndItsSeries) {
  TempDir dir;
  constexpr uint64_t kCount = 3000;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b",
                    {"c1", "c2"},
                    "{ plugin = \"passthrough\" }",
                    "route = \"broadcast\"\npeer_down_timeout = \"1s\"\n"},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  ASSERT_TRUE(p.out_link_up("b", "c2"));
  p.crash("c2");
  auto producer = p.start_send("a", kCount, 200);
  // b's slots all held for c2: the stream stands still.
  ASSERT_TRUE(wait_until(
      [&] { return metric_value(scrape(p.node("b").metrics), "hoprelay_slots_in_use") == 32; },
      15s));
  p.change([](auto& nodes) { nodes[1].downstream = {"c1"}; });
  p.proc("b").signal(SIGHUP);
  EXPECT_EQ(producer->wait(60s), 3) << producer->output();  // 3: some messages were dropped
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kCount); }, 10s));
  ASSERT_TRUE(b_logs(p, "downstream c2, removed from the topology, down for 1s: giving up the "))
      << p.proc("b").output();
  // Every message routed to c2 was given up there, and each was delivered to c1.
  const std::string out = producer->output();
  const std::string at =
      " messages dropped at b: peer_down (downstream c2 removed from the "
      "topology and down longer than 1s)";
  const size_t pos = out.find(at);
  ASSERT_NE(pos, std::string::npos) << out;
  const size_t start = out.rfind("hoprelay send: ", pos) + std::strlen("hoprelay send: ");
  const long long dropped = std::stoll(out.substr(start));
  EXPECT_GT(dropped, 0) << out;
  EXPECT_NE(out.find("hoprelay send: " + std::to_string(dropped) +
                     " of the dropped messages were delivered on other branches"),
            std::string::npos)
      << out;
  EXPECT_TRUE(b_logs(p, "downstream c2 removed: " + std::to_string(dropped) +
                            " messages routed to it were given up while it was down"))
      << p.proc("b").output();
  const std::string b = scrape(p.node("b").metrics);
  EXPECT_EQ(metric_value(b, "hoprelay_messages_dropped_total", "reason=\"peer_down\""),
            static_cast<double>(dropped))
      << b;
  // Every series of c2 went with it, gauges and counters (forwarded, bytes, dropped below,
  // reconnects, replayed); c1's are still there.
  for (size_t at = b.find("peer=\"c2\""); at != std::string::npos;
       at = b.find("peer=\"c2\"", at + 1)) {
    const size_t start = b.rfind('\n', at) + 1;
    ADD_FAILURE() << "a series of the removed c2: " << b.substr(start, b.find('\n', at) - start);
  }
  EXPECT_NE(b.find("hoprelay_messages_forwarded_total{"), std::string::npos) << b;
  EXPECT_NE(b.find("peer=\"c1\""), std::string::npos) << b;
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), kCount);
}

// A downstream moved to another address while its link is up with messages in flight on it
// (c2 stopped, b's slots full): the old link hands them back and they go to the new address,
// to that branch and no other. (They went to the first downstream's queue: c1 dropped them as
// duplicates and c2 never got them.)
TEST(Reload, AMovedDownstreamGetsWhatWasInFlightOnItsOldLink) {
  TempDir dir;
  constexpr uint64_t kCount = 3000;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1", "c2"}, "{ plugin = \"passthrough\" }", "route = \"broadcast\""},
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
  ASSERT_TRUE(b_logs(p, "moved c2")) << p.proc("b").output();
  fs::rename(dir / "c2.log", dir / "c2.old.log");
  p.start("c2");  // on its new address (the stopped one is killed)
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until(
      [&] { return report_has(dir, "c1", kCount) && report_has(dir, "c2", kCount); }, 30s))
      << p.proc("b").output();
  const std::string b = scrape(p.node("b").metrics);
  EXPECT_EQ(metric_value(b, "hoprelay_messages_replayed_total", "peer=\"c1\""), 0) << b;
  EXPECT_GT(metric_value(b, "hoprelay_messages_replayed_total", "peer=\"c2\""), 0) << b;
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), kCount);
  expect_clean(read_report(dir / "c2.json"), kCount);
}

// Starts a producer of `count` messages of 13 chunks into a -> b (broadcast, 20 slots) -> c1
// (a sink, which reassembles), and returns once b holds a message half sent: c1 stops
// acknowledging, b's 20 slots fill and a stops sending. c1 acknowledges whole messages, so b
// then holds one whole message and the first 7 chunks of the next.
std::unique_ptr<Process> start_and_stop_b_mid_message(Pipeline& p, uint64_t count) {
  auto producer = p.start_send("a", count, 200000);
  EXPECT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("c1").metrics), "hoprelay_messages_received_total",
                            "peer=\"b\"") > 0;
      },
      20s));
  p.proc("c1").signal(SIGSTOP);
  EXPECT_TRUE(wait_until(
      [&] { return metric_value(scrape(p.node("b").metrics), "hoprelay_slots_in_use") == 20; },
      10s));
  return producer;
}

constexpr const char* kBroadcast20 = "route = \"broadcast\"\nslots = 20\n";

// The same with messages larger than a slot while the branch that stays has stopped
// acknowledging, so that the reload lands between two chunks of one message: the removed
// branch still gets the rest of the message it had begun (the branches of a message are
// fixed at its first chunk), is closed once all it was sent is acknowledged, and the other
// gets every message once.
TEST(Reload, RemovedBroadcastBranchWithChunkedMessagesWhileTheOtherStalls) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1", "c2"}, "{ plugin = \"passthrough\" }", kBroadcast20},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  constexpr uint64_t kLarge = 5000;  // 1 GB: the stream lasts seconds
  auto producer = start_and_stop_b_mid_message(p, kLarge);
  p.change([](auto& nodes) { nodes[1].downstream = {"c1"}; });
  p.proc("b").signal(SIGHUP);
  ASSERT_TRUE(b_logs(p, "topology reloaded")) << p.proc("b").output();
  p.proc("c1").signal(SIGCONT);
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kLarge); }, 10s));
  EXPECT_TRUE(b_logs(p,
                     "downstream c2 removed: everything sent to it was "
                     "acknowledged"))
      << p.proc("b").output();
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), kLarge);
  Report c2 = read_report(dir / "c2.json");
  EXPECT_GT(c2.received, 0);
  EXPECT_LT(c2.received, static_cast<long long>(kLarge));
  EXPECT_EQ(c2.missing, 0);
  EXPECT_EQ(c2.duplicates, 0);
  EXPECT_EQ(c2.corrupt, 0);
}

// A reload that turns b's broadcast into round-robin between two chunks of a message: the rest
// of that message still goes to both branches (a message keeps the route of its first chunk
// too). Before, it went to one branch, and the other held the first chunks for ever: the
// stream stopped.
TEST(Reload, RouteChangedBetweenTwoChunksOfAMessage) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1", "c2"}, "{ plugin = \"passthrough\" }", kBroadcast20},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  constexpr uint64_t kLarge = 2000;
  auto producer = start_and_stop_b_mid_message(p, kLarge);
  p.change([](auto& nodes) { nodes[1].extra = "route = \"round-robin\"\nslots = 20\n"; });
  p.proc("b").signal(SIGHUP);
  ASSERT_TRUE(b_logs(p,
                     "topology reloaded: downstream added - removed - "
                     "moved -; route round-robin"))
      << p.proc("b").output();
  p.proc("c1").signal(SIGCONT);
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  auto received = [&] {
    return read_report(dir / "c1.json").received + read_report(dir / "c2.json").received;
  };
  // Every message at one sink at least (the first ones, broadcast, at both).
  ASSERT_TRUE(wait_until([&] { return received() >= static_cast<long long>(kLarge); }, 10s));
  p.stop_all();
  for (const char* n : {"c1", "c2"}) {
    Report r = read_report(dir / (std::string(n) + ".json"));
    EXPECT_EQ(r.duplicates, 0) << n;
    EXPECT_EQ(r.corrupt, 0) << n;
  }
}

double incomplete_at(Pipeline& p, const std::string& node) {
  return metric_value(scrape(p.node(node).metrics), "hoprelay_messages_dropped_total",
                      "reason=\"incomplete\"");
}

// A broadcast branch added while a chunked message is half sent: the message's remaining
// chunks go where its first went, not to the new branch too (which could only refuse them as
// incomplete, and the producer would hear of a drop). The new branch gets every message that
// starts after the reload.
TEST(Reload, AddedBroadcastBranchGetsNoHalfOfAChunkedMessage) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1"}, "{ plugin = \"passthrough\" }", kBroadcast20},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  constexpr uint64_t kLarge = 3000;
  auto producer = start_and_stop_b_mid_message(p, kLarge);
  p.change([](auto& nodes) { nodes[1].downstream = {"c1", "c2"}; });
  for (const char* n : {"c2", "b", "a"}) p.proc(n).signal(SIGHUP);
  ASSERT_TRUE(b_logs(p, "topology reloaded: downstream added c2")) << p.proc("b").output();
  p.proc("c1").signal(SIGCONT);
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", kLarge); }, 10s));
  EXPECT_EQ(incomplete_at(p, "c2"), 0);
  EXPECT_EQ(incomplete_at(p, "c1"), 0);
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), kLarge);
  // c2: a gap-free tail, every message of it whole.
  Report c2 = read_report(dir / "c2.json");
  EXPECT_GT(c2.received, 0);
  EXPECT_EQ(c2.received + c2.missing, static_cast<long long>(kLarge));
  EXPECT_EQ(c2.duplicates, 0);
  EXPECT_EQ(c2.corrupt, 0);
}

}  // namespace
}  // namespace hoprelay::test
