// `threads = N` (docs/topology.md, docs/stages.md "Threads"): a node's stage on N worker threads,
// messages forwarded and acknowledged in arrival order. Real daemons on loopback (TCP); the
// Soft-RoCE suite runs the same over verbs (tests/rxe/verbs_suite.sh, scenario `threads`).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr const char* kCompress = "{ plugin = \"zstd\", mode = \"compress\", level = 3 }";
constexpr const char* kDecompress = "{ plugin = \"zstd\", mode = \"decompress\" }";

// Messages the stage ran on, per worker, then those the event loop ran while every worker was
// busy (worker="loop"), in what `node` serves now.
std::vector<double> per_worker(const NodeDef& node, uint32_t threads) {
  std::string exposition = scrape(node.metrics);
  std::vector<double> counts;
  for (uint32_t i = 0; i <= threads; ++i) {
    counts.push_back(metric_value(exposition, "hoprelay_stage_worker_messages_total",
                                  "worker=\"" + (i < threads ? std::to_string(i) : "loop") + "\""));
  }
  return counts;
}

double total(const std::vector<double>& counts) {
  return std::accumulate(counts.begin(), counts.end(), 0.0);
}

class Threads : public ::testing::TestWithParam<int> {};

// Two producers (two origins) into a -> b (zstd compress, threads = N) -> c (zstd decompress,
// threads = N) -> d (verify-sink), b killed twice mid-stream: every message at d exactly once,
// in its origin's order, and the work of b and c really spread over their workers.
TEST_P(Threads, EveryMessageOnceAndInOrderThroughARelayKilledTwice) {
  const int threads = GetParam();
  const std::string extra = "threads = " + std::to_string(threads);
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c"}, kCompress, extra},
                   {"c", {"d"}, kDecompress, extra},
                   {"d", {}, sink(dir, "d")}});
  p.start_all();
  // Whole messages (most) and chunked ones (16 KiB slots: 40,000 bytes is 3 chunks, which walk
  // on the event loop between the others and must not be overtaken).
  constexpr uint64_t kWhole = 30000, kChunked = 600;
  auto one = p.start_send("a", kWhole, 2000, {"--origin", "11", "--rate", "6000"}, "send1.log");
  auto two = p.start_send("a", kChunked, 40000, {"--origin", "12", "--rate", "120"}, "send2.log");
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(1500ms);
    p.crash_and_restart("b");
  }
  EXPECT_EQ(one->wait(120s), 0) << one->output();
  EXPECT_EQ(two->wait(120s), 0) << two->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "d", kWhole + kChunked); }, 20s))
      << read_file(dir / "d.json");
  // Each worker of c (up all along) ran the stage on a share of the messages, and the loop
  // may have run some while every worker was busy: every whole message once, and every chunk
  // (3 a chunked message) at least once (a chunk replayed after b's restart is staged before
  // it is known for a repeat). The counts reach the metrics once a second.
  std::vector<double> c_workers;
  auto spread = [&] {
    c_workers = per_worker(p.node("c"), static_cast<uint32_t>(threads));
    const auto busy =
        std::count_if(c_workers.begin(), c_workers.end() - 1, [](double n) { return n > 0; });
    return busy >= 2 && total(c_workers) >= static_cast<double>(kWhole + 3 * kChunked);
  };
  EXPECT_TRUE(wait_until(spread, 5s))
      << "c's workers, then its loop: " << testing::PrintToString(c_workers);
  p.stop_all();
  Report r = read_report(dir / "d.json");
  expect_clean(r, kWhole + kChunked);
  EXPECT_EQ(r.reordered, 0) << read_file(dir / "d.json");
  EXPECT_NE(read_file(dir / "b.log").find("runs on " + std::to_string(threads) + " worker threads"),
            std::string::npos)
      << read_file(dir / "b.log");
}

INSTANTIATE_TEST_SUITE_P(Workers, Threads, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param); });

// Chunks on the workers: a file sent in messages of 100,000 bytes (7 chunks of the 16 KiB
// slots each) through a (zstd compress, threads = 2, chunk by chunk on its workers) -> b
// (passthrough, threads = 2) -> c (`hoprelay recv`, decompressing): the same bytes out.
TEST(ThreadsChunks, CompressedChunkByChunkOnWorkersTheLeafGetsTheSameBytes) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}, kCompress, "threads = 2"},
                   {"b", {"c"}, "{ plugin = \"passthrough\" }", "threads = 2"},
                   {"c", {}, kDecompress}});
  p.start("b");
  p.start("a");
  const fs::path in = dir / "in.bin", out = dir / "out.bin";
  {
    std::ofstream f(in, std::ios::binary);
    for (int line = 0; f.tellp() < (4 << 20); ++line) {
      f << "line " << line << " of the threads test: value=" << (line * 7919 % 1000) << " ok\n";
    }
  }
  Process recv({HOPRELAY_BIN, "recv", "--topology", p.topology(), "--node", "c", "--output",
                out.string(), "--timeout", "60"},
               dir / "recv.log");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("c").metrics).empty(); }, 10s))
      << recv.output();
  RunResult sent = run({HOPRELAY_BIN, "send", "--topology", p.topology(), "--to", "a", "--file",
                        in.string(), "--size", "100000"});
  ASSERT_EQ(sent.code, 0) << sent.output;
  ASSERT_EQ(recv.wait(60s), 0) << recv.output();
  EXPECT_EQ(run({"/usr/bin/cmp", in.string(), out.string()}).code, 0) << "out differs from in";
  // Every chunk of every message was staged: on a worker, or on the loop lending a hand
  // (ceil(4 MiB / 100,000) messages of 7).
  EXPECT_TRUE(wait_until([&] { return total(per_worker(p.node("a"), 2)) >= 42 * 7 - 6; }, 5s))
      << testing::PrintToString(per_worker(p.node("a"), 2));
  p.stop_all();
}

// Reloads that change the stage of a node with threads = 2 while messages flow: from per-thread
// zstd to thread-safe passthrough, to verify-sink (on the event loop alone: jobs already on the
// workers finish first), to per-thread crc32c and back to zstd: every message once and in
// order at d, and each reload applied.
TEST(ThreadsReload, StageChangesBetweenMessagesWithWorkersRunning) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c"}, kCompress, "threads = 2"},
                   {"c", {"d"}, kDecompress},
                   {"d", {}, sink(dir, "d")}});
  p.start_all();
  constexpr uint64_t kCount = 30000;
  auto producer = p.start_send("a", kCount, 2000, {"--rate", "6000"});
  const std::vector<std::string> stages = {"{ plugin = \"passthrough\" }", sink(dir, "b"),
                                           "{ plugin = \"crc32c\", mode = \"stamp\" }", kCompress};
  for (const std::string& stage : stages) {
    std::this_thread::sleep_for(1200ms);
    p.change([&](std::vector<NodeDef>& nodes) { nodes[1].stage = stage; });
    p.proc("b").signal(SIGHUP);
  }
  EXPECT_EQ(producer->wait(120s), 0) << producer->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "d", kCount); }, 20s))
      << read_file(dir / "d.json");
  p.stop_all();
  Report r = read_report(dir / "d.json");
  expect_clean(r, kCount);
  EXPECT_EQ(r.reordered, 0);
  const std::string log = read_file(dir / "b.log");
  EXPECT_NE(log.find("stage passthrough runs on 2 worker threads (one thread-safe instance)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("stage crc32c runs on 2 worker threads (one instance per thread)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("stage verify-sink does not say it may run on several threads"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("reload refused"), std::string::npos) << log;
  // b's verify-sink saw its share in order too.
  Report b = read_report(dir / "b.json");
  EXPECT_GT(b.received, 0);
  EXPECT_EQ(b.reordered, 0);
  EXPECT_EQ(b.duplicates, 0);
}

// An idle node with threads = 2 reloads a changed stage, again and again (the helper found
// it hung at the first: both workers' flush wake-ups taken by one of them, the reload waiting
// for the other's flush with the loop that would wake it held; SIGTERM did not stop it).
TEST(ThreadsReload, AnIdleNodeReloadsItsStageWithoutHanging) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}, kCompress, "threads = 2"}, {"b", {}, kDecompress}});
  p.start("a");
  for (int level : {5, 7, 3}) {
    std::this_thread::sleep_for(1500ms);  // ticks: the workers asked to flush, idle
    p.change([&](std::vector<NodeDef>& nodes) {
      nodes[0].stage =
          "{ plugin = \"zstd\", mode = \"compress\", level = " + std::to_string(level) + " }";
    });
    const size_t before = lines_with(p.proc("a").output(), "topology reloaded");
    p.proc("a").signal(SIGHUP);
    ASSERT_TRUE(wait_until(
        [&] { return lines_with(p.proc("a").output(), "topology reloaded") > before; }, 10s))
        << "level " << level << ":\n"
        << p.proc("a").output();
  }
  p.proc("a").signal(SIGTERM);
  EXPECT_EQ(p.proc("a").wait(10s), 0) << p.proc("a").output();
}

// A plugin built against stage ABI minor 2 (before the thread capabilities) runs unchanged on a
// node with threads = 2: on its event loop alone, said so in the log, every message through.
TEST(ThreadsAbi, APluginOfMinorTwoRunsUnchangedOnTheEventLoop) {
  TempDir dir;
  fs::path so = dir / "xor_minor2.so";
  RunResult cc =
      run({"/usr/bin/cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-DXOR_ABI_MINOR=2",
           "-I" HOPRELAY_ABI_INCLUDE, HOPRELAY_TEST_PLUGIN_SRC "/xor_stage.c", "-o", so.string()});
  ASSERT_EQ(cc.code, 0) << cc.output;
  std::string xor_stage = "{ plugin = \"" + so.string() + "\", key = 90 }";
  // XORed at a and again at b: only if both ran on every message does c see the pattern.
  Pipeline p(dir, {{"a", {"b"}, xor_stage, "threads = 2"},
                   {"b", {"c"}, xor_stage, "threads = 2"},
                   {"c", {}, sink(dir, "c")}});
  p.start_all();
  ASSERT_EQ(p.send("a", 5000, 300).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 5000); }, 10s));
  EXPECT_EQ(per_worker(p.node("a"), 2), (std::vector<double>{0, 0, 0}));
  p.stop_all();
  Report r = read_report(dir / "c.json");
  expect_clean(r, 5000);
  EXPECT_EQ(r.reordered, 0);
  EXPECT_NE(read_file(dir / "a.log").find("stage xor does not say it may run on several threads"),
            std::string::npos)
      << read_file(dir / "a.log");
}

// Stage errors found on a worker reach the producer with the stage's reason, as on the loop: a's
// crc32c verifies a trailer nobody stamped, on two workers, and refuses every message.
TEST(ThreadsAbi, StageErrorsOnWorkersReachTheProducerWithTheReason) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}, "{ plugin = \"crc32c\", mode = \"verify\" }", "threads = 2"},
                   {"b", {}, sink(dir, "b")}});
  p.start_all();
  RunResult sent = p.send("a", 400, 300);
  EXPECT_EQ(sent.code, 3) << sent.output;
  EXPECT_NE(sent.output.find("400 of 400 messages dropped at a: stage_error"), std::string::npos)
      << sent.output;
  EXPECT_NE(sent.output.find("crc32c: message carries no CRC32C trailer"), std::string::npos)
      << sent.output;
  // The per-worker counts reach the metrics once a second.
  EXPECT_TRUE(wait_until([&] { return total(per_worker(p.node("a"), 2)) == 400; }, 5s))
      << testing::PrintToString(per_worker(p.node("a"), 2));
  p.stop_all();
}

}  // namespace
}  // namespace hoprelay::test
