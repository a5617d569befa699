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

uint64_t size_of(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
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

  std::ifstream in(out, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  ASSERT_EQ(data.size(), kCount * kRecord);
  std::vector<int> seen(kCount, 0);
  for (size_t off = 0; off < data.size(); off += kRecord) {
    uint32_t len;
    std::memcpy(&len, data.data() + off, 4);
    ASSERT_EQ(len, kSize) << "at " << off;
    uint32_t origin = 0;
    uint64_t seq = 0;
    ASSERT_EQ(stages::check_pattern(
                  {reinterpret_cast<const std::byte*>(data.data() + off + 4), kSize}, origin, seq),
              stages::PatternCheck::kOk)
        << "at " << off;
    ASSERT_EQ(origin, 17u);
    ASSERT_LT(seq, kCount);
    ++seen[seq];
  }
  for (uint64_t seq = 0; seq < kCount; ++seq) ASSERT_EQ(seen[seq], 1) << "seq " << seq;
  // Each restart said where it resumed.
  EXPECT_NE(read_file(dir / "c.log").find("resuming " + out.string()), std::string::npos)
      << read_file(dir / "c.log");
}

}  // namespace
}  // namespace hoprelay::test
