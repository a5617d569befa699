// Every message a node gives up is logged (docs/operations.md, "Dropped messages"): the first
// of a kind at once with its origin and sequence number, then one line per interval with the
// count, per (reason, peer), never a line per message.

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// The README's demo geometry: b's crc32c stamp has no room for its 4-byte trailer in a slot
// that the message fills, so b refuses every such message (a stage error).
TEST(Drops, AStageRefusingEveryMessageLogsOnceThenACountPerInterval) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c"}, "{ plugin = \"crc32c\", mode = \"stamp\" }"},
                   {"c", {}, sink(dir, "c")}});
  p.start_all();
  RunResult r = p.send("a", 200, 16384, {"--origin", "77"});
  // The producer hears of it: every message, where and why, and exits 3.
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("200 of 200 messages dropped at b: stage_error (crc32c: message leaves "
                          "no room for the 4-byte trailer)"),
            std::string::npos)
      << r.output;
  const std::string first =
      "dropped a message (origin 77 seq 0, a): crc32c: message leaves no room for the 4-byte "
      "trailer";
  ASSERT_TRUE(
      wait_until([&] { return read_file(dir / "b.log").find(first) != std::string::npos; }, 5s))
      << read_file(dir / "b.log");
  // The other 199 in one line, once the interval (5 s) has passed.
  ASSERT_TRUE(wait_until(
      [&] {
        return read_file(dir / "b.log").find("dropped 199 more messages (a, stage_error)") !=
               std::string::npos;
      },
      10s))
      << read_file(dir / "b.log");
  std::string log = read_file(dir / "b.log");
  EXPECT_EQ(lines_with(log, "[stage_error]"), 2u) << log;
  EXPECT_NE(log.find("200 in all"), std::string::npos) << log;
  EXPECT_EQ(metric_value(scrape(p.node("b").metrics), "hoprelay_messages_dropped_total",
                         "reason=\"stage_error\""),
            200);
  p.stop_all();
}

}  // namespace
}  // namespace hoprelay::test
