// End-to-end tests over the TCP transport: real hoprelayd processes on loopback, a real
// producer, and verify-sink reports checked for exact counts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

TEST(Pipeline, ChainABCDelivers100kWithZeroLoss) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c"}, "{ plugin = \"crc32c\", mode = \"stamp\" }"},
                   {"c", {}, sink(dir, "c")}});
  p.start_all();
  RunResult r = p.send("a", 100000, 512);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("sent 100000 messages"), std::string::npos) << r.output;
  // The producer returns once the head acknowledged everything, and the head acknowledges
  // only what its downstream acknowledged: the sink already has it all.
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 100000); }, 5s));
  p.stop_all();
  expect_clean(read_report(dir / "c.json"), 100000);
}

// hoprelay_link_slots_in_use{peer="producer"}: the slots of every producer's link, counted
// while a producer that went away still has messages held, and 0 once they are acknowledged
// (it kept the last value sampled while the producer was connected).
TEST(Pipeline, AGoneProducersSlotsAreCountedUntilReleasedThenZero) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  auto producer_slots = [&] {
    return metric_value(scrape(p.node("a").metrics), "hoprelay_link_slots_in_use",
                        "peer=\"producer\"");
  };
  p.proc("b").signal(SIGSTOP);  // a holds what it forwards
  auto send = p.start_send("a", 20, 100, {"--origin", "61"});
  ASSERT_TRUE(wait_until([&] { return producer_slots() == 20; }, 10s)) << producer_slots();
  send->signal(SIGKILL);
  send->wait(10s);
  std::this_thread::sleep_for(1500ms);  // a sample after the producer went
  EXPECT_EQ(producer_slots(), 20) << "held for a producer that went away";
  p.proc("b").signal(SIGCONT);
  EXPECT_TRUE(wait_until([&] { return producer_slots() == 0; }, 10s)) << producer_slots();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 20); }, 10s));
  p.stop_all();
}

TEST(Pipeline, MetricsCountTheTraffic) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  ASSERT_EQ(p.send("a", 1000, 100).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 1000); }, 5s));
  std::string a = scrape(p.node("a").metrics);
  std::string b = scrape(p.node("b").metrics);
  EXPECT_EQ(metric_value(a, "hoprelay_messages_received_total", "peer=\"producer\""), 1000);
  EXPECT_EQ(metric_value(a, "hoprelay_messages_forwarded_total", "peer=\"b\""), 1000);
  EXPECT_EQ(metric_value(b, "hoprelay_messages_received_total", "opcode=\"tcp\""), 1000);
  EXPECT_EQ(metric_value(a, "hoprelay_forwarded_bytes_total", "peer=\"b\""), 100000);
  EXPECT_EQ(metric_value(b, "hoprelay_messages_received_total", "peer=\"a\""), 1000);
  EXPECT_EQ(metric_value(b, "hoprelay_stage_messages_total", "verdict=\"forward\""), 1000);
  EXPECT_EQ(metric_value(a, "hoprelay_link_up", "peer=\"b\""), 1);
  // Latency histograms: residence once per message and hop; the stage's time on one message
  // in 16 (docs/metrics.md).
  EXPECT_EQ(metric_value(b, "hoprelay_stage_duration_seconds_count", "stage=\"verify-sink\""),
            1000 / 16);
  EXPECT_EQ(metric_value(a, "hoprelay_residence_seconds_count"), 1000);
  EXPECT_EQ(metric_value(b, "hoprelay_residence_seconds_bucket", "le=\"+Inf\""), 1000);
  // Gauges are sampled once a second: every credit is back once the traffic is acknowledged.
  EXPECT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("a").metrics), "hoprelay_link_credits", "peer=\"b\"") ==
               32;
      },
      3s));
  // The standard process metrics.
  EXPECT_GT(metric_value(a, "process_resident_memory_bytes"), 1e6);
  EXPECT_GT(metric_value(a, "process_open_fds"), 3);
  EXPECT_GT(metric_value(a, "process_start_time_seconds"), 1.7e9);
  p.stop_all();
}

TEST(Pipeline, FanOutBroadcastGivesEverySinkEverything) {
  TempDir dir;
  Pipeline p(
      dir,
      {{"a", {"b"}},
       {"b", {"c1", "c2"}, "{ plugin = \"crc32c\", mode = \"stamp\" }", "route = \"broadcast\""},
       {"c1", {}, sink(dir, "c1")},
       {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  ASSERT_EQ(p.send("a", 20000, 1000).code, 0);
  ASSERT_TRUE(
      wait_until([&] { return report_has(dir, "c1", 20000) && report_has(dir, "c2", 20000); }, 5s));
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), 20000);
  expect_clean(read_report(dir / "c2.json"), 20000);
}

TEST(Pipeline, FanOutRoundRobinSplitsWithoutDuplicates) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1", "c2"}, "{ plugin = \"passthrough\" }", "route = \"round-robin\""},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  ASSERT_EQ(p.send("a", 20000, 200).code, 0);
  ASSERT_TRUE(
      wait_until([&] { return report_has(dir, "c1", 10000) && report_has(dir, "c2", 10000); }, 5s));
  p.stop_all();
  Report c1 = read_report(dir / "c1.json"), c2 = read_report(dir / "c2.json");
  // Strict alternation: each branch gets exactly half, and the other half shows as gaps.
  EXPECT_EQ(c1.received, 10000);
  EXPECT_EQ(c2.received, 10000);
  EXPECT_EQ(c1.duplicates + c2.duplicates, 0);
  EXPECT_EQ(c1.corrupt + c2.corrupt, 0);
}

TEST(Pipeline, HashRouteKeepsEachOriginOnOneBranch) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1", "c2"}, "{ plugin = \"passthrough\" }", "route = \"hash\""},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, sink(dir, "c2")}});
  p.start_all();
  for (uint32_t origin = 1; origin <= 6; ++origin) {
    ASSERT_EQ(p.send("a", 500, 64, {"--origin", std::to_string(origin)}).code, 0);
  }
  ASSERT_TRUE(wait_until(
      [&] {
        Report c1 = read_report(dir / "c1.json"), c2 = read_report(dir / "c2.json");
        return c1.received + c2.received == 3000;
      },
      5s));
  p.stop_all();
  Report c1 = read_report(dir / "c1.json"), c2 = read_report(dir / "c2.json");
  // Every origin arrived whole on one branch: no gaps anywhere, nothing twice.
  expect_clean(c1, c1.received);
  expect_clean(c2, c2.received);
  EXPECT_EQ(c1.received % 500, 0);
  EXPECT_EQ(c1.received + c2.received, 3000);
}

TEST(Pipeline, StalledSinkPushesBackWithBoundedMemoryAndNoLoss) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {"c"}}, {"c", {}, sink(dir, "c")}});
  p.start_all();
  p.proc("c").signal(SIGSTOP);  // the sink stops consuming
  // What the daemons hold before any traffic: under AddressSanitizer that alone is about 60 MiB
  // (shadow and instrumented globals), so the bound is on the growth.
  const long idle_a = p.proc("a").rss_kib(), idle_b = p.proc("b").rss_kib();
  auto producer = p.start_send("a", 5000, 16384);
  // 5000 x 16 KiB = 80 MB offered; with 32 slots a hop, at most ~64 messages fit in flight
  // (two rings of 32 x 16 KiB at b, one at a: about 1.5 MiB).
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(producer->running()) << "the producer finished although the sink is stopped";
  long rss_a = p.proc("a").rss_kib(), rss_b = p.proc("b").rss_kib();
  EXPECT_LT(rss_a - idle_a, 16 * 1024) << "head node memory grew beyond its slots: " << idle_a
                                       << " KiB idle, " << rss_a << " KiB loaded";
  EXPECT_LT(rss_b - idle_b, 16 * 1024) << "relay memory grew beyond its slots: " << idle_b
                                       << " KiB idle, " << rss_b << " KiB loaded";
  std::string am = scrape(p.node("a").metrics);
  EXPECT_LE(metric_value(am, "hoprelay_messages_received_total"), 32 * 3);
  p.proc("c").signal(SIGCONT);
  EXPECT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 5000); }, 5s));
  p.stop_all();
  expect_clean(read_report(dir / "c.json"), 5000);
}

TEST(Pipeline, UndeclaredPeerIsRejectedAndCounted) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  // An intruder: a node of another topology that claims b as its downstream.
  std::string rogue =
      "[pipeline]\nname = \"rogue\"\ntransport = \"tcp\"\n[nodes.x]\nlisten = "
      "\"127.0.0.1:" +
      std::to_string(free_port()) +
      "\"\ndownstream = [\"b\"]\n"
      "[nodes.b]\nlisten = \"127.0.0.1:" +
      std::to_string(p.node("b").port) + "\"\n";
  write_file(dir / "rogue.toml", rogue);
  Process x({HOPRELAYD_BIN, "--topology", (dir / "rogue.toml").string(), "--node", "x"},
            dir / "x.log");
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("b").metrics), "hoprelay_connections_rejected_total",
                            "reason=\"not_upstream\"") >= 1;
      },
      10s));
  // A producer may only feed a head node.
  EXPECT_NE(p.send("b", 1, 64).code, 0);
  // And b still serves its real upstream.
  ASSERT_EQ(p.send("a", 100, 64).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 100); }, 5s));
  x.signal(SIGTERM);
  EXPECT_EQ(x.wait(20s), 0);
  EXPECT_NE(x.output().find("not an upstream peer of b"), std::string::npos) << x.output();
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 100);
}

TEST(Pipeline, PluginBuiltOutsideTheTreeRunsInPlace) {
  TempDir dir;
  // Build the example plugin the way a user would: a C compiler and the one public header.
  fs::path so = dir / "xor.so";
  RunResult cc =
      run({"/usr/bin/cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I" HOPRELAY_ABI_INCLUDE,
           HOPRELAY_TEST_PLUGIN_SRC "/xor_stage.c", "-o", so.string()});
  ASSERT_EQ(cc.code, 0) << cc.output;
  std::string xor_stage = "{ plugin = \"" + so.string() + "\", key = 90 }";
  // a and b each XOR with the same key: only if both ran on every message does the sink see
  // the original payloads.
  Pipeline p(dir, {{"a", {"b"}, xor_stage}, {"b", {"c"}, xor_stage}, {"c", {}, sink(dir, "c")}});
  p.start_all();
  ASSERT_EQ(p.send("a", 3000, 300).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 3000); }, 5s));
  p.stop_all();
  expect_clean(read_report(dir / "c.json"), 3000);
}

TEST(Pipeline, PluginAppliedOnceCorruptsAsExpected) {
  TempDir dir;
  fs::path so = dir / "xor.so";
  ASSERT_EQ(run({"/usr/bin/cc", "-shared", "-fPIC", "-I" HOPRELAY_ABI_INCLUDE,
                 HOPRELAY_TEST_PLUGIN_SRC "/xor_stage.c", "-o", so.string()})
                .code,
            0);
  Pipeline p(dir,
             {{"a", {"b"}, "{ plugin = \"" + so.string() + "\" }"}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  // b's verify-sink refuses each corrupt message (a stage error): the producer hears of it.
  RunResult sent = p.send("a", 500, 300);
  ASSERT_EQ(sent.code, 3) << sent.output;
  EXPECT_NE(sent.output.find("500 of 500 messages dropped at b: stage_error"), std::string::npos)
      << sent.output;
  ASSERT_TRUE(wait_until([&] { return read_report(dir / "b.json").corrupt >= 500; }, 5s));
  p.stop_all();
  Report r = read_report(dir / "b.json");
  EXPECT_EQ(r.corrupt, 500);
  EXPECT_EQ(r.received, 0);
}

TEST(Pipeline, FileIsSentInChunksAndRecordedByFileSink) {
  TempDir dir;
  std::string data;
  for (int i = 0; i < 100000; ++i) data += char('a' + (i * 7919) % 26);
  write_file(dir / "input.bin", data);
  std::string sink_stage =
      "{ plugin = \"file-sink\", path = \"" + (dir / "out.rec").string() + "\" }";
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink_stage}});
  p.start_all();
  RunResult r = run({HOPRELAY_BIN, "send", "--topology", p.topology().string(), "--to", "a",
                     "--file", (dir / "input.bin").string(), "--size", "4096", "--rate", "2000"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("sent 25 messages, 100000 bytes"), std::string::npos) << r.output;
  p.stop_all();  // file-sink flushes at shutdown
  // Records: [u32 length][bytes], in order; together they are the file.
  std::string rec = read_file(dir / "out.rec"), joined;
  size_t off = 0, records = 0;
  while (off + 4 <= rec.size()) {
    uint32_t len;
    std::memcpy(&len, rec.data() + off, 4);
    joined.append(rec, off + 4, len);
    off += 4 + len;
    ++records;
  }
  EXPECT_EQ(records, 25u);
  EXPECT_EQ(joined, data);
}

TEST(Pipeline, StatusShowsEveryNodeInOneTable) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  auto producer = p.start_send("a", 4000, 64, {"--rate", "1000"});
  std::this_thread::sleep_for(500ms);
  RunResult r = run({HOPRELAY_BIN, "status", "--topology", p.topology().string()});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("pipeline it (" + p.topology().string() + "): 2 nodes, 1 link\n", 0), 0u)
      << r.output;
  // a: one producer in, b out; about 1000 msg/s through both.
  std::regex row_a(R"(\na +up +tcp +1 +1/1 +(\d+) +(\d+) )");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, row_a)) << r.output;
  EXPECT_GT(std::stoi(m[1]), 300) << r.output;
  EXPECT_GT(std::stoi(m[2]), 300) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\nb +up +tcp +1 +0/0 )"))) << r.output;
  EXPECT_EQ(producer->wait(30s), 0);
  // A node that does not answer is shown as down, and status says so in its exit code.
  p.proc("b").signal(SIGTERM);
  EXPECT_EQ(p.proc("b").wait(20s), 0);
  r = run({HOPRELAY_BIN, "status", "--topology", p.topology().string(), "--interval", "0.2"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\nb +DOWN +\(no answer from)")))
      << r.output;
  p.stop_all();
}

// A link cut under traffic: a sends again what b had not acknowledged, and b, which still holds
// those messages for c, drops the copies as duplicates. That is a clean recovery, not a loss:
// status's DROPPED leaves duplicates out (it showed them: DROPPED 32 after a clean recovery).
TEST(Pipeline, StatusDroppedLeavesOutDuplicatesOfARecovery) {
  TempDir dir;
  // c takes 4 frames at a time: most of what b holds waits in b's queue, unacknowledged.
  Pipeline p(dir, {{"a", {"b"}}, {"b", {"c"}}, {"c", {}, sink(dir, "c"), "slots = 4"}});
  p.start_all();
  auto producer = p.start_send("a", 20000, 256, {"--rate", "20000"});
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 2000); }, 30s))
      << read_file(dir / "c.json");
  // c stops acknowledging, then the link a -> b is cut: a replays, b takes each for a repeat.
  p.proc("c").signal(SIGSTOP);
  std::this_thread::sleep_for(500ms);
  RunResult cut = run(
      {"/usr/bin/ss", "-K", "dst", "127.0.0.1", "dport", "=", std::to_string(p.node("b").port)});
  ASSERT_EQ(cut.code, 0) << cut.output;
  double duplicates = 0;
  bool deduplicated = wait_until(
      [&] {
        duplicates = metric_value(scrape(p.node("b").metrics), "hoprelay_messages_dropped_total",
                                  "reason=\"duplicate\"");
        return duplicates > 0;
      },
      20s);
  p.proc("c").signal(SIGCONT);
  ASSERT_TRUE(deduplicated) << "no replay was deduplicated at b";
  ASSERT_EQ(producer->wait(60s), 0) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 20000); }, 10s))
      << read_file(dir / "c.json");
  // Everything acknowledged and still: every column after IN and OUT is 0.
  RunResult r = run({HOPRELAY_BIN, "status", "--topology", p.topology().string()});
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* row : {"\na              up    tcp       0       1/1              0          0"
                          "      0       0        0        0       0\n",
                          "\nb              up    tcp       1       1/1              0          0"
                          "      0       0        0        0       0\n",
                          "\nc              up    tcp       1       0/0              0          0"
                          "      0       0        0        0       0\n"}) {
    EXPECT_NE(r.output.find(row), std::string::npos) << "no row " << row << " in\n" << r.output;
  }
  p.stop_all();
  expect_clean(read_report(dir / "c.json"), 20000);
}

TEST(Pipeline, StatusWatchPipedPrintsOneTableAfterAnother) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}}});
  p.start_all();
  // Piped (the test's log file): plain tables, no terminal control sequences.
  Process watch(
      {HOPRELAY_BIN, "status", "--watch", "--interval", "0.2", "--topology", p.topology().string()},
      dir / "watch.log");
  auto tables = [&] {
    std::string out = watch.output();
    size_t n = 0;
    for (size_t at = out.find("\nNODE "); at != std::string::npos;
         at = out.find("\nNODE ", at + 1)) {
      ++n;
    }
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return tables() >= 3; }, 10s)) << watch.output();
  EXPECT_TRUE(watch.running()) << watch.output();
  watch.signal(SIGTERM);
  watch.wait(5s);
  std::string out = watch.output();
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\n\npipeline it \()"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\nb +up +tcp +1 +0/0 )"))) << out;
  // On a terminal (script(1) gives it one): the screen cleared and homed before each table.
  RunResult tty = run({"/usr/bin/script", "-qec",
                       "timeout 2 " + std::string(HOPRELAY_BIN) +
                           " status --watch --interval 0.2 --topology " + p.topology().string(),
                       "/dev/null"},
                      30s);
  const std::string clear = "\x1b[H\x1b[2Jpipeline it (";
  size_t first = tty.output.find(clear);
  ASSERT_NE(first, std::string::npos) << tty.output;
  EXPECT_NE(tty.output.find(clear, first + 1), std::string::npos) << tty.output;
  p.stop_all();
}

TEST(Pipeline, GarbageFromAStrangerClosesOnlyItsOwnLink) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  // Garbage at b's listener: bad magic twice, and a header with an unsupported version.
  for (int i = 0; i < 3; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(p.node("b").port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    std::string junk(4096, char(0x41 + i));
    if (i == 1) junk[0] = 'H', junk[1] = 'R', junk[2] = 9;  // wrong version
    ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    char c;
    EXPECT_LE(::recv(fd, &c, 1, 0), 0) << "b must close a link that sends garbage";
    ::close(fd);
  }
  ASSERT_EQ(p.send("a", 1000, 64).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 1000); }, 5s));
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 1000);
}

}  // namespace
}  // namespace hoprelay::test

namespace hoprelay::test {
namespace {

TEST(Cli, ValidateAndGraph) {
  TempDir dir;
  write_file(dir / "good.toml",
             "[pipeline]\nname = \"p\"\n[nodes.a]\nlisten = \"127.0.0.1:1\"\ndownstream = "
             "[\"b\", \"c\"]\n[nodes.b]\nlisten = \"127.0.0.1:2\"\n[nodes.c]\nlisten = "
             "\"127.0.0.1:3\"\nstage = { plugin = \"/nonexistent/c.so\" }\n");
  write_file(dir / "bad.toml",
             "[pipeline]\nname = \"p\"\nslots = 1\n[nodes.a]\nlisten = \"127.0.0.1\"\ndownstrem "
             "= [\"a\"]\n");
  // Every node's plugin is checked by default; --node checks only that node's.
  RunResult r = run({HOPRELAY_BIN, "validate", (dir / "good.toml").string()});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find("good.toml:10:20: error: nodes.c.stage.plugin: cannot load stage plugin"),
            std::string::npos)
      << r.output;
  // A relative plugin path in a topology given by a relative path: the message names the file
  // it looked for, absolute, in the topology file's directory (not the working directory).
  fs::create_directories(dir / "sub");
  write_file(dir / "sub" / "rel.toml",
             "[nodes.a]\nlisten = \"127.0.0.1:1\"\nstage = { plugin = \"plugins/nope.so\" }\n");
  r = run({"/bin/sh", "-c",
           "cd '" + dir.path().string() + "' && exec '" + std::string(HOPRELAY_BIN) +
               "' validate sub/rel.toml"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find("cannot load stage plugin: sub/plugins/nope.so: cannot open shared "
                          "object file: No such file or directory (looked for " +
                          (dir / "sub" / "plugins" / "nope.so").string() +
                          ": a relative plugin path is taken from the topology file's directory)"),
            std::string::npos)
      << r.output;
  r = run({HOPRELAY_BIN, "validate", "--node", "a", (dir / "good.toml").string()});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "ok: pipeline \"p\", 3 nodes, 2 links, messages up to 4194304 bytes\n");
  // An unknown --node lists the nodes there are, as hoprelayd does.
  r = run({HOPRELAY_BIN, "validate", "--node", "zz", (dir / "good.toml").string()});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_EQ(r.output, (dir / "good.toml").string() +
                          ": error: no node \"zz\" in the topology (nodes: a, b, c); pass --node "
                          "NAME\n");
  // No pipeline name: the file's base name, and validate says so.
  write_file(dir / "first.toml", "[nodes.a]\nlisten = \"127.0.0.1:1\"\n");
  r = run({HOPRELAY_BIN, "validate", (dir / "first.toml").string()});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output,
            "ok: pipeline \"first\" (name defaulted from the file name), 1 node, 0 links, "
            "messages up to 4194304 bytes\n");
  // Every error of the file, each with its position.
  r = run({HOPRELAY_BIN, "validate", (dir / "bad.toml").string()});
  EXPECT_EQ(r.code, 78);
  EXPECT_NE(r.output.find("bad.toml:3:9: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.toml:5:10: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.toml:6:1: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did you mean \"downstream\"?"), std::string::npos) << r.output;
  r = run({HOPRELAY_BIN, "graph", (dir / "bad.toml").string()});
  EXPECT_EQ(r.code, 78);
  write_file(dir / "ok.toml",
             "[pipeline]\nname = \"p\"\n[nodes.a]\nlisten = \"127.0.0.1:1\"\ndownstream = "
             "[\"b\"]\n[nodes.b]\nlisten = \"127.0.0.1:2\"\n");
  r = run({HOPRELAY_BIN, "graph", (dir / "ok.toml").string()});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("digraph \"p\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"a\" -> \"b\""), std::string::npos) << r.output;
}

TEST(Cli, SecondInstanceOfANodeIsToldSo) {
  TempDir dir;
  Pipeline p(dir, {{"a", {}}});
  p.start_all();
  // The same node again: its listen address is bound before its metrics port, so the hint
  // names the likely cause (issue 16: the metrics error came first and said nothing of it).
  RunResult r = run({HOPRELAYD_BIN, "--topology", p.topology().string(), "--node", "a"}, 20s);
  EXPECT_EQ(r.code, 69) << r.output;
  EXPECT_NE(
      r.output.find("cannot start: listen address 127.0.0.1:" + std::to_string(p.node("a").port) +
                    " is already in use: another process (or another hoprelayd for this "
                    "node) holds the port; stop it or change `listen` in the topology"),
      std::string::npos)
      << r.output;
  // A consumer of that node runs it too: 69 as well, so that a script can tell "try again
  // later" from a mistake (78) or a failure (1).
  r = run({HOPRELAY_BIN, "recv", "--topology", p.topology().string(), "--node", "a"}, 20s);
  EXPECT_EQ(r.code, 69) << r.output;
  EXPECT_NE(r.output.find("is already in use"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(is a hoprelayd, a consumer or a producer running this node?)"),
            std::string::npos)
      << r.output;
  p.stop_all();

  // Only the metrics port taken (by anything): that error says what to do too.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(p.node("a").metrics);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;  // the scrapes above left connections in TIME_WAIT on that port
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(fd, 1), 0);
  r = run({HOPRELAYD_BIN, "--topology", p.topology().string(), "--node", "a"}, 20s);
  ::close(fd);
  EXPECT_EQ(r.code, 69) << r.output;
  EXPECT_NE(r.output.find("cannot start: cannot serve metrics on 127.0.0.1:" +
                          std::to_string(p.node("a").metrics) +
                          ": the port is in use by another process (perhaps another hoprelayd "
                          "for this node; `ss -ltnp` names it): stop it or change `metrics` in "
                          "the topology"),
            std::string::npos)
      << r.output;
}

TEST(Cli, SendToAHeadThatIsDownSaysItWaitsOnATerminal) {
  TempDir dir;
  uint16_t port = free_port();
  write_file(dir / "t.toml",
             "[pipeline]\nname = \"p\"\ntransport = \"tcp\"\n[nodes.a]\nlisten = "
             "\"127.0.0.1:" +
                 std::to_string(port) + "\"\n");
  std::string send = std::string(HOPRELAY_BIN) + " send --topology " + (dir / "t.toml").string() +
                     " --to a --count 1 --connect-timeout 3";
  const std::string waiting = "hoprelay send: waiting for 127.0.0.1:" + std::to_string(port) +
                              " (node a) to accept: is hoprelayd running there? (";
  // On a terminal (script(1), Debian's essential bsdutils, gives it one): a line a second, then
  // the error.
  RunResult r = run({"/usr/bin/script", "-qec", send, "/dev/null"}, 30s);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(waiting + "1 s of 3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(waiting + "2 s of 3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no connection to a at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << r.output;
  // Into a pipe or a log: only the error.
  r = run({HOPRELAY_BIN, "send", "--topology", (dir / "t.toml").string(), "--to", "a", "--count",
           "1", "--connect-timeout", "2"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(r.output.find("waiting for"), std::string::npos) << r.output;
  // A missing --file is an unreadable one: exit 1 and why (docs/operations.md), not a usage
  // error, and before any wait for the head.
  r = run({HOPRELAY_BIN, "send", "--topology", (dir / "t.toml").string(), "--to", "a", "--file",
           (dir / "nope.bin").string()});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(r.output, "hoprelay send: cannot read " + (dir / "nope.bin").string() +
                          ": No such file or directory\n");
}

// A send that waits with nothing acknowledged (its head's downstream is down: a holds the
// messages for b) says so once after 10 s, and says so again when acknowledgements come back.
TEST(Cli, ASendStalledDownstreamSaysWhyOnce) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start("a");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("a").metrics).empty(); }, 10s));
  auto send = p.start_send("a", 10, 100);
  const std::string stalled = "hoprelay send: nothing acknowledged for 10 s, 10 messages waiting";
  ASSERT_TRUE(wait_until([&] { return send->output().find(stalled) != std::string::npos; }, 30s))
      << send->output();
  EXPECT_NE(
      send->output().find("`hoprelay status --topology " + p.topology().string() + "` shows where"),
      std::string::npos)
      << send->output();
  p.start("b");
  EXPECT_EQ(send->wait(30s), 0) << send->output();
  const std::string said = send->output();
  EXPECT_NE(said.find("hoprelay send: acknowledgements again after "), std::string::npos) << said;
  EXPECT_EQ(said.find(stalled), said.rfind(stalled)) << said;  // once
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 10); }, 10s));
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 10);
}

TEST(Cli, MissingStateDirectoryIsExplained) {
  if (fs::exists("/var/lib/hoprelay")) {
    GTEST_SKIP() << "/var/lib/hoprelay exists on this host: the hint is only for its absence";
  }
  TempDir dir;
  write_file(
      dir / "t.toml",
      "[pipeline]\nname = \"p\"\ntransport = \"tcp\"\n[nodes.c]\nlisten = \"127.0.0.1:" +
          std::to_string(free_port()) +
          "\"\nstage = { plugin = \"file-sink\", path = \"/var/lib/hoprelay/c.records\" }\n");
  RunResult r = run({HOPRELAYD_BIN, "--topology", (dir / "t.toml").string(), "--node", "c"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find("/var/lib/hoprelay does not exist: under systemd the unit's "
                          "StateDirectory=hoprelay creates it; outside systemd create it"),
            std::string::npos)
      << r.output;
}

TEST(Cli, ReadmeGraphCommandMakesAPng) {
  // The README's line, as written, in a directory with a topology.toml (the demo's), with this
  // build's hoprelay first on PATH and Graphviz's dot (scripts/install-deps.sh installs it).
  std::string readme = read_file(fs::path(HOPRELAY_SOURCE_DIR) / "README.md");
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(readme, m, std::regex(R"(\n(hoprelay graph [^\n#]*?) *(#[^\n]*)?\n)")))
      << "no `hoprelay graph` line in README.md";
  const std::string line = m[1];
  ASSERT_NE(line.find("| dot -Tpng > topology.png"), std::string::npos) << line;
  TempDir dir;
  fs::copy_file(fs::path(HOPRELAY_SOURCE_DIR) / "config/examples/demo.toml", dir / "topology.toml");
  RunResult r = run({"/bin/bash", "-c",
                     "set -o pipefail; cd '" + dir.path().string() + "' && PATH='" +
                         fs::path(HOPRELAY_BIN).parent_path().string() + "':$PATH " + line});
  ASSERT_EQ(r.code, 0) << line << "\n" << r.output;
  std::string png = read_file(dir / "topology.png");
  ASSERT_GT(png.size(), 1000u) << line;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(Cli, VersionSaysWhatWasBuilt) {
  // Both binaries, exit 0, the same facts (one source: daemon/src/build_info.cpp), and no
  // topology needed (hoprelayd's --topology is otherwise required).
  const std::regex facts(
      R"( \d+\.\d+\.\d+\ncommit: [0-9a-z-]+\nstage ABI: \d+\.\d+\nwire protocol: \d+ \(speaks \d+ to \d+\)\n)"
      R"(transports: tcp, verbs\n$)");
  RunResult d = run({HOPRELAYD_BIN, "--version"});
  EXPECT_EQ(d.code, 0) << d.output;
  EXPECT_TRUE(d.output.starts_with("hoprelayd ")) << d.output;
  EXPECT_TRUE(std::regex_search(d.output, facts)) << d.output;
  RunResult c = run({HOPRELAY_BIN, "--version"});
  EXPECT_EQ(c.code, 0) << c.output;
  EXPECT_TRUE(c.output.starts_with("hoprelay ")) << c.output;
  EXPECT_EQ(c.output.substr(c.output.find(' ')), d.output.substr(d.output.find(' ')));
}

TEST(Cli, AMisspeltOptionIsNamedWithTheNearestOneNotTakenForAMissingOne) {
  // CLI11 alone said "--node is required" for `--nod c`: the option typed was not named.
  RunResult r = run({HOPRELAY_BIN, "recv", "--topology", "t.toml", "--nod", "c"});
  EXPECT_EQ(r.code, 109) << r.output;
  EXPECT_EQ(r.output,
            "hoprelay recv: unknown option --nod: did you mean --node? (hoprelay recv --help "
            "lists the options)\n");
  r = run({HOPRELAY_BIN, "send", "--topology", "t.toml", "--to", "a", "--fil=x"});
  EXPECT_EQ(r.code, 109) << r.output;
  EXPECT_NE(r.output.find("hoprelay send: unknown option --fil: did you mean --file?"),
            std::string::npos)
      << r.output;
  r = run({HOPRELAYD_BIN, "--topolgy", "t.toml", "--node", "a"});
  EXPECT_EQ(r.code, 109) << r.output;
  EXPECT_NE(r.output.find("hoprelayd: unknown option --topolgy: did you mean --topology?"),
            std::string::npos)
      << r.output;
  // Nothing near: named alone. A missing option with nothing misspelt: CLI11's words.
  r = run({HOPRELAY_BIN, "recv", "--topology", "t.toml", "--node", "c", "--zzzzzz"});
  EXPECT_EQ(r.code, 109) << r.output;
  EXPECT_NE(r.output.find("unknown option --zzzzzz (hoprelay recv --help"), std::string::npos)
      << r.output;
  r = run({HOPRELAY_BIN, "recv", "--topology", "t.toml"});
  EXPECT_EQ(r.code, 106) << r.output;
  EXPECT_NE(r.output.find("--node is required"), std::string::npos) << r.output;
  // A short option's attached value is its value, not a misspelt option.
  r = run({HOPRELAY_BIN, "recv", "-tt.toml", "-oout"});
  EXPECT_EQ(r.code, 106) << r.output;
  EXPECT_NE(r.output.find("--node is required"), std::string::npos) << r.output;
  // A misspelt command: named, not its (then unknown) options.
  r = run({HOPRELAY_BIN, "sned", "--topology", "t.toml", "--to", "a"});
  EXPECT_EQ(r.code, 109) << r.output;
  EXPECT_EQ(r.output,
            "hoprelay: unknown command sned: did you mean send? (hoprelay --help lists the "
            "commands)\n");
  // --state-dir given the output file (or any file): said so, not CLI11's two validators.
  r = run({HOPRELAY_BIN, "recv", "--topology", "t.toml", "--node", "c", "--output", "y",
           "--state-dir", HOPRELAY_BIN});
  EXPECT_EQ(r.code, 105) << r.output;
  EXPECT_NE(r.output.find(" is not a directory: --state-dir takes a directory of its own (created "
                          "if missing), not the output file"),
            std::string::npos)
      << r.output;
  // A hidden option is not suggested.
  r = run({HOPRELAYD_BIN, "--topology", "t.toml", "--wait-for-devic", "x"});
  EXPECT_EQ(r.code, 109) << r.output;
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hoprelay::test

namespace hoprelay::test {
namespace {

TEST(Logs, PlannedStopOfADownstreamIsInfoACrashAWarning) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}}});
  p.start_all();
  auto link_up = [&] {
    return metric_value(scrape(p.node("a").metrics), "hoprelay_link_up", "peer=\"b\"") == 1;
  };
  ASSERT_TRUE(wait_until(link_up, 10s)) << p.proc("a").output();
  // b stops on purpose: it says BYE, and a logs the close at info.
  p.proc("b").signal(SIGTERM);
  EXPECT_EQ(p.proc("b").wait(20s), 0);
  const std::regex planned(
      R"(info \[a\] [a-z.]+: outbound link to b closed: the peer is shutting down)");
  ASSERT_TRUE(wait_until([&] { return std::regex_search(p.proc("a").output(), planned); }, 5s))
      << p.proc("a").output();
  EXPECT_EQ(p.proc("a").output().find("warning [a]"), std::string::npos) << p.proc("a").output();
  // b killed: nothing said, so a warning as before.
  p.start("b");
  ASSERT_TRUE(wait_until(link_up, 10s)) << p.proc("a").output();
  p.proc("b").signal(SIGKILL);
  p.proc("b").wait(5s);
  const std::regex crash(
      R"(warning \[a\] [a-z.]+: outbound link to b down: peer closed the connection)");
  EXPECT_TRUE(wait_until([&] { return std::regex_search(p.proc("a").output(), crash); }, 5s))
      << p.proc("a").output();
  p.start("b");
  ASSERT_TRUE(wait_until(link_up, 10s)) << p.proc("a").output();
  p.stop_all();
}

TEST(Logs, JsonFormatIsOneObjectPerLine) {
  TempDir dir;
  write_file(dir / "t.toml",
             "[pipeline]\nname = \"p\"\ntransport = \"tcp\"\n[nodes.a]\nlisten = "
             "\"127.0.0.1:" +
                 std::to_string(free_port()) + "\"\n");
  Process a({HOPRELAYD_BIN, "--topology", (dir / "t.toml").string(), "--node", "a", "--log-format",
             "json"},
            dir / "a.log");
  ASSERT_TRUE(wait_until([&] { return a.output().find("listening on") != std::string::npos; }, 5s));
  a.signal(SIGTERM);
  ASSERT_EQ(a.wait(20s), 0);
  // Every line parses as JSON and carries the node; quotes in messages are escaped.
  RunResult r = run({"/usr/bin/python3", "-c",
                     "import json, sys\n"
                     "lines = [json.loads(l) for l in open(sys.argv[1])]\n"
                     "assert len(lines) >= 4, lines\n"
                     "assert all(l['node'] == 'a' and l['level'] and l['logger'] for l in lines)\n"
                     "assert any('transport = \"tcp\"' in l['msg'] for l in lines)\n"
                     "print(len(lines), 'lines ok')\n",
                     (dir / "a.log").string()});
  EXPECT_EQ(r.code, 0) << r.output << a.output();
}

// Without --node, hoprelayd runs the node named as the host: the error says so, and the choices.
TEST(Logs, ANodeNamedByTheHostThatIsNotInTheTopologySaysWhereTheNameCameFrom) {
  TempDir dir;
  write_file(dir / "t.toml",
             "[pipeline]\nname = \"p\"\n[nodes.only-node-z9]\nlisten = \"127.0.0.1:" +
                 std::to_string(free_port()) + "\"\n");
  RunResult r = run({HOPRELAYD_BIN, "--topology", (dir / "t.toml").string()});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find(" (this host's name: no --node was given) (nodes: only-node-z9); pass "
                          "--node NAME"),
            std::string::npos)
      << r.output;
  r = run({HOPRELAYD_BIN, "--topology", (dir / "t.toml").string(), "--node", "zz"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_EQ(r.output.find("this host's name"), std::string::npos) << r.output;
}

// The errors written before the node runs (a file that does not validate, a node it does not
// declare) are JSON records too: a log shipper sees why the service did not start.
TEST(Logs, JsonFormatCoversErrorsBeforeTheNodeRuns) {
  TempDir dir;
  write_file(dir / "t.toml",
             "[pipeline]\nname = \"p\"\ntransport = \"tcp\"\n[nodes.a]\nlisten = 7\n");
  write_file(dir / "ok.toml", "[pipeline]\nname = \"p\"\n[nodes.a]\nlisten = \"127.0.0.1:" +
                                  std::to_string(free_port()) + "\"\n");
  const std::pair<std::string, std::string> cases[] = {
      {"t.toml", (dir / "t.toml").string() + ":5:10: error: "},
      {"ok.toml", "node \\\"zz\\\" is not in "},
  };
  for (const auto& [file, want] : cases) {
    RunResult r = run({HOPRELAYD_BIN, "--topology", (dir / file).string(), "--node",
                       file == "ok.toml" ? "zz" : "a", "--log-format", "json"});
    EXPECT_EQ(r.code, 78) << r.output;
    RunResult check =
        run({"/usr/bin/python3", "-c",
             "import json, sys\n"
             "lines = [json.loads(l) for l in sys.argv[1].splitlines() if l]\n"
             "assert lines and all(l['node'] for l in lines), lines\n"
             "assert any(l['level'] == 'error' and sys.argv[2] in json.dumps(l['msg'])"
             " for l in lines), lines\n",
             r.output, want});
    EXPECT_EQ(check.code, 0) << check.output << r.output;
  }
}

}  // namespace
}  // namespace hoprelay::test

namespace hoprelay::test {
namespace {

// `cpu = N` pins the node's event loop (its main thread) and nothing else; a CPU the process
// may not use is a configuration error that names what to change.
TEST(Pipeline, CpuPinsTheEventLoopThread) {
  TempDir dir;
  Pipeline p(dir,
             {{"a", {"b"}, "{ plugin = \"passthrough\" }", "cpu = 0"}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  // The node pins its loop once it has started, which may be just after metrics came up.
  ASSERT_TRUE(wait_until(
      [&] {
        return read_file(dir / "a.log").find("event loop pinned to CPU 0") != std::string::npos;
      },
      10s))
      << read_file(dir / "a.log");
  std::string status = read_file("/proc/" + std::to_string(p.proc("a").pid()) + "/status");
  EXPECT_NE(status.find("Cpus_allowed_list:\t0\n"), std::string::npos) << status;
  ASSERT_EQ(p.send("a", 2000, 256).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 2000); }, 20s));
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 2000);

  p.change([](std::vector<NodeDef>& nodes) { nodes[0].extra = "cpu = 4095"; });
  RunResult r = run({HOPRELAYD_BIN, "--topology", p.topology().string(), "--node", "a"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find("cpu = 4095 but this process may only run on CPUs"), std::string::npos)
      << r.output;
  // Where to change it, as the validator says it.
  EXPECT_NE(r.output.find(p.topology().string() + ":"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": error: nodes.a.cpu: cannot start: cpu = 4095"), std::string::npos)
      << r.output;
  // An application's leaf the same (its stage workers would pin themselves there): hoprelay
  // recv exits 78 with the same words (it opened, warning per worker, before).
  p.change([](std::vector<NodeDef>& nodes) {
    nodes[0].extra = "";
    nodes[1].extra = "threads = 2\ncpu = [0, 4095]";
    nodes[1].stage = "{ plugin = \"passthrough\" }";
  });
  r = run(
      {HOPRELAY_BIN, "recv", "--topology", p.topology().string(), "--node", "b", "--timeout", "1"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find(": error: nodes.b.cpu: cannot start: cpu = 4095"), std::string::npos)
      << r.output;

  // A stage that refuses its parameters at start (the validator cannot try a path): the same.
  p.change([](std::vector<NodeDef>& nodes) {
    nodes[1].extra = "";
    nodes[1].stage = "{ plugin = \"verify-sink\", report = \"/nonexistent/dir/r.json\" }";
  });
  r = run({HOPRELAYD_BIN, "--topology", p.topology().string(), "--node", "b"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find(p.topology().string() + ":"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": error: nodes.b.stage: stage verify-sink refused its parameters: "
                          "cannot write report file /nonexistent/dir/r.json"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace hoprelay::test
