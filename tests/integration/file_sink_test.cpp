// file-sink with a durable position (docs/stages.md, "file-sink"): killed mid-stream, alone and
// together with the relay before it, its records file still holds every message once.
#include <signal.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "harness.h"
#include "hoprelay/stages/pattern.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// The records file holds each of `count` messages of `size` bytes from `origin` exactly once.
void expect_each_once(const fs::path& out, uint64_t count, uint32_t size, uint32_t want_origin) {
  const uint64_t record = 4 + uint64_t{size};
  std::ifstream in(out, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  ASSERT_EQ(data.size(), count * record) << data.size() / record << " records";
  std::vector<int> seen(count, 0);
  for (size_t off = 0; off < data.size(); off += record) {
    uint32_t len;
    std::memcpy(&len, data.data() + off, 4);
    ASSERT_EQ(len, size) << "at " << off;
    uint32_t origin = 0;
    uint64_t seq = 0;
    ASSERT_EQ(stages::check_pattern(
                  {reinterpret_cast<const std::byte*>(data.data() + off + 4), size}, origin, seq),
              stages::PatternCheck::kOk)
        << "at " << off;
    ASSERT_EQ(origin, want_origin);
    ASSERT_LT(seq, count);
    ++seen[seq];
  }
  for (uint64_t seq = 0; seq < count; ++seq) ASSERT_EQ(seen[seq], 1) << "seq " << seq;
}

TEST(FileSink, KilledFourTimesWithAStateDirItHoldsEveryMessageOnce) {
  TempDir dir;
  const fs::path out = dir / "out.rec", state = dir / "state";
  constexpr uint64_t kCount = 40000;
  constexpr uint32_t kSize = 200;
  constexpr uint64_t kRecord = 4 + kSize;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c"}},
                   {"c",
                    {},
                    "{ plugin = \"file-sink\", path = \"" + out.string() + "\", state_dir = \"" +
                        state.string() + "\", fsync = \"interval\" }"}});
  p.start_all();
  auto send = p.start_send("a", kCount, kSize, {"--origin", "17"});
  // Three times c alone, then b and c at the same moment: the restarted c has no
  // deduplication memory and b none either, so a's replay reaches c again; only the position
  // tells c what it wrote already.
  const uint64_t marks[] = {kCount / 5, 2 * kCount / 5, 3 * kCount / 5, 4 * kCount / 5};
  for (uint64_t mark : marks) {
    ASSERT_TRUE(wait_until([&] { return size_of(out) >= mark * kRecord; }, 120s))
        << "stalled at " << size_of(out) / kRecord << " records\n"
        << send->output();
    if (mark == marks[3]) {
      p.proc("c").signal(SIGKILL);
      p.crash_and_restart("b", 0ms);
    }
    p.crash_and_restart("c", 0ms);
  }
  ASSERT_EQ(send->wait(180s), 0) << send->output();
  // Exit 0: every message's outcome was "delivered" (a copy c had is consumed, not dropped).
  EXPECT_NE(send->output().find("sent " + std::to_string(kCount) + " messages"), std::string::npos)
      << send->output();
  p.stop_all();

  expect_each_once(out, kCount, kSize, 17);
  // Each restart said where it resumed.
  EXPECT_NE(read_file(dir / "c.log").find("resuming " + out.string()), std::string::npos)
      << read_file(dir / "c.log");
}

// A hoprelayd relay that keeps what it relays: a file-sink at b writes each record and the
// message goes on to c (FORWARD at a relay passes it on; the slot goes back once c has
// acknowledged it). b is killed twice mid-stream: with its state_dir it writes each message
// once, and c, which drops a's replays by their sequence numbers, has each once too.
TEST(FileSink, AtARelayItKeepsEveryMessageOnceAndPassesItOn) {
  TempDir dir;
  const fs::path at_b = dir / "b.rec", at_c = dir / "c.rec", state = dir / "state";
  constexpr uint64_t kCount = 30000;
  constexpr uint32_t kSize = 200;
  constexpr uint64_t kRecord = 4 + kSize;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b",
                    {"c"},
                    "{ plugin = \"file-sink\", path = \"" + at_b.string() + "\", state_dir = \"" +
                        state.string() + "\" }"},
                   {"c", {}, "{ plugin = \"file-sink\", path = \"" + at_c.string() + "\" }"}});
  p.start_all();
  auto send = p.start_send("a", kCount, kSize, {"--origin", "19"});
  for (uint64_t mark : {kCount / 3, 2 * kCount / 3}) {
    ASSERT_TRUE(wait_until([&] { return size_of(at_b) >= mark * kRecord; }, 120s))
        << "stalled at " << size_of(at_b) / kRecord << " records\n"
        << send->output();
    p.crash_and_restart("b", 0ms);
  }
  ASSERT_EQ(send->wait(180s), 0) << send->output();
  p.stop_all();
  expect_each_once(at_b, kCount, kSize, 19);
  expect_each_once(at_c, kCount, kSize, 19);
}

// A round-robin split that joins again at a sink with state_dir: b1 stops while b2 goes on, so
// c writes b2's share first and b1's older messages arrive after newer ones of their origin.
// Each is written once. Before, c took "below the highest written" for "written": it consumed
// b1's late share unwritten, and the producer heard "delivered".
TEST(FileSink, ARoundRobinSplitThatJoinsAgainLosesNoLateMessage) {
  TempDir dir;
  const fs::path out = dir / "out.rec", state = dir / "state";
  constexpr uint64_t kCount = 4000;
  constexpr uint32_t kSize = 200;
  Pipeline p(dir, {{"a", {"b1", "b2"}, "{ plugin = \"passthrough\" }", "route = \"round-robin\""},
                   {"b1", {"c"}},
                   {"b2", {"c"}},
                   {"c",
                    {},
                    "{ plugin = \"file-sink\", path = \"" + out.string() + "\", state_dir = \"" +
                        state.string() + "\" }"}});
  p.start_all();
  // Every link up first: b1 stopped before a's link to it is, a would wait for it to answer.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"a", "b1"}, {"a", "b2"}, {"b1", "c"}, {"b2", "c"}}) {
    ASSERT_TRUE(p.out_link_up(from, to, 10s)) << from << " -> " << to;
  }
  p.proc("b1").signal(SIGSTOP);
  auto send = p.start_send("a", kCount, kSize, {"--origin", "23"});
  // a sends in turn, so it stops once b1 holds all it may: b2's share up to there arrives.
  ASSERT_TRUE(wait_until([&] { return size_of(out) >= 8 * (4 + kSize); }, 60s))
      << "b2's share did not arrive: " << size_of(out) / (4 + kSize) << " records\n"
      << send->output();
  p.proc("b1").signal(SIGCONT);
  ASSERT_EQ(send->wait(120s), 0) << send->output();
  EXPECT_NE(send->output().find("sent " + std::to_string(kCount) + " messages"), std::string::npos)
      << send->output();
  p.stop_all();
  expect_each_once(out, kCount, kSize, 23);
}

}  // namespace
}  // namespace hoprelay::test
