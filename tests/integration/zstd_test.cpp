// The zstd stage end to end (docs/stages.md, "zstd"): compressed at the head, decompressed at the
// leaf, the relay between carries the smaller chunks. Real daemons on loopback, 16 KiB slots.
#include <fstream>
#include <random>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

constexpr const char* kCompress = "{ plugin = \"zstd\", mode = \"compress\", level = 3 }";
constexpr const char* kDecompress = "{ plugin = \"zstd\", mode = \"decompress\" }";

// Text that zstd shrinks several times over, then `random_bytes` that it cannot shrink at all.
void write_mixed(const fs::path& path, size_t text_bytes, size_t random_bytes) {
  std::ofstream out(path, std::ios::binary);
  for (size_t line = 0, done = 0; done < text_bytes; ++line) {
    std::string s = "record " + std::to_string(line) +
                    " of the zstd test: value=" + std::to_string(line * 7919 % 1000) +
                    " status=ok\n";
    s.resize(std::min(s.size(), text_bytes - done));
    out << s;
    done += s.size();
  }
  std::mt19937_64 gen(17);
  for (size_t i = 0; i < random_bytes; i += 8) {
    uint64_t w = gen();
    out.write(reinterpret_cast<const char*>(&w),
              static_cast<std::streamsize>(std::min<size_t>(8, random_bytes - i)));
  }
}

double counter(const NodeDef& n, const std::string& metric, const std::string& labels = "") {
  return metric_value(scrape(n.metrics), metric, labels);
}

// `hoprelay send --file` to a of `bytes` of text, cut into messages of `size` bytes.
RunResult send_text(const Pipeline& p, const TempDir& dir, size_t bytes, const std::string& size) {
  const fs::path text = dir / "text.bin";
  write_mixed(text, bytes, 0);
  return run({HOPRELAY_BIN, "send", "--topology", p.topology(), "--to", "a", "--file",
              text.string(), "--size", size});
}

TEST(Zstd, CompressedAtTheHeadTheRelayCarriesLessAndTheLeafGetsTheSameBytes) {
  TempDir dir;
  // c is `hoprelay recv`: the consumer reassembles each message for the application, and its
  // zstd stage decompresses each chunk of it, compressed or not, before that.
  Pipeline p(dir, {{"a", {"b"}, kCompress}, {"b", {"c"}}, {"c", {}, kDecompress}});
  p.start("b");
  p.start("a");
  for (const char* n : {"a", "b"}) {
    ASSERT_TRUE(wait_until([&] { return !scrape(p.node(n).metrics).empty(); }, 10s)) << n;
  }
  const fs::path in = dir / "in.bin", out = dir / "out.bin";
  constexpr size_t kText = 3 << 20, kRandom = 1 << 20;
  write_mixed(in, kText, kRandom);
  Process recv({HOPRELAY_BIN, "recv", "--topology", p.topology(), "--node", "c", "--output",
                out.string(), "--timeout", "60"},
               dir / "recv.log");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("c").metrics).empty(); }, 10s))
      << recv.output();
  // Messages of 100,000 bytes: 7 chunks each (the last of the file shorter), some of them all
  // text, one both text and random (chunks compressed and not in one message), the rest random.
  RunResult sent = run({HOPRELAY_BIN, "send", "--topology", p.topology(), "--to", "a", "--file",
                        in.string(), "--size", "100000"});
  ASSERT_EQ(sent.code, 0) << sent.output;
  ASSERT_EQ(recv.wait(60s), 0) << recv.output();
  EXPECT_EQ(run({"/usr/bin/cmp", in.string(), out.string()}).code, 0) << "out differs from in";
  // The relay received the text compressed (several times smaller) and the random part as it
  // was: well under the file's size, and at least the random megabyte.
  const double relayed = counter(p.node("b"), "hoprelay_received_bytes_total");
  EXPECT_LT(relayed, (kText / 4) + kRandom + 64 * 1024) << relayed;
  EXPECT_GE(relayed, kRandom);
  EXPECT_EQ(counter(p.node("a"), "hoprelay_stage_messages_total", "verdict=\"error\""), 0);
  EXPECT_EQ(counter(p.node("c"), "hoprelay_stage_messages_total", "verdict=\"error\""), 0);
  p.stop_all();
}

TEST(Zstd, AFourNodeChainDeliversEveryMessageOnceWhetherItCompressesOrNot) {
  TempDir dir;
  // a compresses, b relays, c decompresses, d checks every message (verify-sink needs the
  // original bytes, so its node cannot be the one that decompresses: one stage a node).
  Pipeline p(dir, {{"a", {"b"}, kCompress},
                   {"b", {"c"}},
                   {"c", {"d"}, kDecompress},
                   {"d", {}, sink(dir, "d")}});
  p.start_all();
  // The verify pattern does not compress: whole messages, a message of exactly one slot, and
  // chunked ones (7 chunks), all forwarded uncompressed and unchanged.
  uint64_t messages = 0;
  for (auto [count, size] :
       std::vector<std::pair<uint64_t, uint32_t>>{{2000, 1000}, {300, 16 * 1024}, {200, 100000}}) {
    RunResult r = p.send("a", count, size);
    ASSERT_EQ(r.code, 0) << r.output;
    messages += count;
  }
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "d", messages); }, 30s))
      << read_file(dir / "d.json");
  EXPECT_EQ(counter(p.node("b"), "hoprelay_received_bytes_total"),
            counter(p.node("a"), "hoprelay_received_bytes_total"));
  // And text does: sent by file, it reaches d compressed only up to c, whole at d (d's
  // verify-sink counts it as corrupt, since it is not the pattern, but not as compressed).
  RunResult r = send_text(p, dir, 1 << 20, "100000");
  EXPECT_EQ(r.code, 3) << r.output;  // some messages dropped
  EXPECT_NE(r.output.find("11 of 11 messages dropped at d: stage_error"), std::string::npos)
      << r.output;
  ASSERT_TRUE(wait_until([&] { return read_report(dir / "d.json").corrupt >= 11; }, 30s))
      << read_file(dir / "d.json");
  p.stop_all();
  Report d = read_report(dir / "d.json");
  EXPECT_EQ(d.received, static_cast<long long>(messages));
  EXPECT_EQ(d.duplicates, 0);
  EXPECT_EQ(d.missing, 0);
  EXPECT_EQ(d.corrupt, 11);  // ceil(1 MiB / 100,000)
  EXPECT_EQ(p.proc("d").output().find("zstd-compressed"), std::string::npos)
      << p.proc("d").output();
}

TEST(Zstd, ASinkWithoutADecompressingStageRefusesCompressedMessagesAndSaysWhy) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}, kCompress}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  RunResult r = send_text(p, dir, 200000, "10000");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("zstd-compressed: put a zstd stage with mode = "
                          "\"decompress\" before this sink"),
            std::string::npos)
      << r.output;
  ASSERT_TRUE(wait_until([&] { return read_report(dir / "b.json").corrupt >= 20; }, 20s))
      << read_file(dir / "b.json");
  EXPECT_EQ(counter(p.node("b"), "hoprelay_stage_messages_total", "verdict=\"error\""), 20);
  p.stop_all();
  EXPECT_EQ(read_report(dir / "b.json").received, 0);
}

TEST(Zstd, FramesCutByAReassemblingRelayAreRefusedAsStageErrorsWithTheReason) {
  TempDir dir;
  // b's crc32c needs whole messages: it joins the compressed chunks, appends its trailer and
  // cuts the result at its own slot boundaries, so what c gets is no longer one frame a chunk
  // (docs/stages.md: relays between compress and decompress must take chunks as they are).
  Pipeline p(dir, {{"a", {"b"}, kCompress},
                   {"b", {"c"}, "{ plugin = \"crc32c\", mode = \"stamp\" }"},
                   {"c", {"d"}, kDecompress},
                   {"d", {}, sink(dir, "d")}});
  p.start_all();
  RunResult r = send_text(p, dir, 500000, "100000");
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_NE(r.output.find("5 of 5 messages dropped at c: stage_error (zstd: "), std::string::npos)
      << r.output;
  EXPECT_EQ(counter(p.node("c"), "hoprelay_messages_dropped_total", "reason=\"stage_error\""), 5);
  p.stop_all();
  Report d = read_report(dir / "d.json");
  EXPECT_EQ(d.received + d.corrupt, 0);  // nothing damaged went on
}

TEST(Zstd, AnApplicationLeafWithoutADecompressingStageGetsNoCompressedBytes) {
  TempDir dir;
  // b is `hoprelay recv` with the default passthrough: the application could not tell
  // compressed bytes from the message, so the node refuses them, whole or chunked, and says why.
  Pipeline p(dir, {{"a", {"b"}, kCompress}, {"b", {}}});
  p.start("a");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("a").metrics).empty(); }, 10s));
  const fs::path out = dir / "out.bin";
  Process recv({HOPRELAY_BIN, "recv", "--topology", p.topology(), "--node", "b", "--output",
                out.string(), "--timeout", "60", "--streams", "2"},
               dir / "recv.log");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("b").metrics).empty(); }, 10s))
      << recv.output();
  for (const char* size : {"10000", "100000"}) {  // whole messages; 7 chunks each
    RunResult r = send_text(p, dir, 300000, size);
    EXPECT_EQ(r.code, 3) << r.output;
    EXPECT_NE(r.output.find("dropped at b: stage_error (zstd-compressed: give this leaf a zstd "
                            "stage with mode = \"decompress\")"),
              std::string::npos)
        << r.output;
  }
  // Both streams ended with every message missing here, and recv says so.
  ASSERT_EQ(recv.wait(60s), 1) << recv.output();
  EXPECT_NE(recv.output().find("no messages, ended, 30 missing"), std::string::npos)
      << recv.output();
  EXPECT_NE(recv.output().find("no messages, ended, 3 missing"), std::string::npos)
      << recv.output();
  EXPECT_EQ(fs::file_size(out), 0u);
  p.stop_all();
}

}  // namespace
}  // namespace hoprelay::test
