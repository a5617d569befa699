#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/stages/pattern.h"
#include "hoprelay/stages/stage.h"

namespace hoprelay::stages {
namespace {

namespace fs = std::filesystem;

struct Buf {
  explicit Buf(uint32_t size, uint32_t capacity, uint32_t origin, uint64_t seq)
      : bytes(capacity), msg{} {
    fill_pattern({bytes.data(), size}, origin, seq);
    msg = {reinterpret_cast<uint8_t*>(bytes.data()), size, capacity, origin, 0, seq};
  }
  std::vector<std::byte> bytes;
  hoprelay_msg msg;
};

Stage make(const std::string& plugin, Params params = {}) {
  return Stage(resolve(plugin), "test", params);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hoprelay-stages-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(Pattern, RoundTripsAndDetectsDamage) {
  for (uint32_t size : {24u, 25u, 31u, 64u, 1000u, 65536u}) {
    std::vector<std::byte> b(size);
    fill_pattern(b, 7, 123);
    uint32_t o = 0;
    uint64_t s = 0;
    ASSERT_EQ(check_pattern(b, o, s), PatternCheck::kOk) << size;
    EXPECT_EQ(o, 7u);
    EXPECT_EQ(s, 123u);
    b[size - 1] ^= std::byte{1};
    EXPECT_NE(check_pattern(b, o, s), PatternCheck::kOk) << size;
  }
  std::vector<std::byte> b(100);
  fill_pattern(b, 1, 2);
  uint32_t o;
  uint64_t s;
  EXPECT_EQ(check_pattern(std::span(b).first(99), o, s), PatternCheck::kBadLength);
}

// `hoprelay send --fill header`: the header of (origin, seq) and nothing else, so a sink that
// checks the pattern sees a damaged body, never a good message.
TEST(Pattern, TheHeaderAloneLeavesTheBodyAndFailsTheCheck) {
  std::vector<std::byte> b(1000, std::byte{0x5a});
  fill_pattern_header(b, 7, 123);
  PatternHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  EXPECT_EQ(h.magic, kPatternMagic);
  EXPECT_EQ(h.origin, 7u);
  EXPECT_EQ(h.seq, 123u);
  EXPECT_EQ(h.length, 1000u);
  EXPECT_EQ(h.reserved, 0u);
  for (size_t i = sizeof h; i < b.size(); ++i) ASSERT_EQ(b[i], std::byte{0x5a}) << i;
  uint32_t o;
  uint64_t s;
  EXPECT_EQ(check_pattern(b, o, s), PatternCheck::kBadBytes);
  fill_pattern(b, 7, 123);  // the whole pattern over it: the same header
  EXPECT_EQ(std::memcmp(b.data(), &h, sizeof h), 0);
  EXPECT_EQ(check_pattern(b, o, s), PatternCheck::kOk);
}

TEST(Pattern, Crc32cKnownAnswer) {
  // RFC 3720 B.4: 32 bytes of zeros -> 0x8A9136AA; "123456789" -> 0xE3069283.
  std::vector<std::byte> zeros(32);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  const char* digits = "123456789";
  EXPECT_EQ(crc32c({reinterpret_cast<const std::byte*>(digits), 9}), 0xE3069283u);
}

// A file-sink on a new state directory records where it starts at once: killed after writing
// its first record but before recording its position, it is cut back on restart (the message
// comes again from upstream). Before, the directory still counted as new, and the record was
// kept and then written a second time.
TEST(FileSinkState, KilledBeforeItsFirstPositionIsCutBackOnRestart) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hoprelay-fs-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "out.bin").string(), state = (dir / "state").string();
  { std::ofstream(out, std::ios::binary) << "earlier"; }  // 7 bytes from before the sink
  Params params{{"path", out}, {"state_dir", state}};
  { Stage s = make("file-sink", params); }
  // What a record written just before a SIGKILL leaves: bytes past the recorded position.
  { std::ofstream(out, std::ios::binary | std::ios::app) << "half-done"; }
  { Stage s = make("file-sink", params); }
  EXPECT_EQ(std::filesystem::file_size(out), 7u);
  std::filesystem::remove_all(dir);
}

TEST(Stages, BuiltinsResolveAndUnknownIsRefused) {
  for (auto name : builtin_names()) EXPECT_EQ(resolve(name)->name(), name);
  EXPECT_THROW(resolve("no-such-stage"), StageError);
  try {
    resolve("/nonexistent/stage.so");
    FAIL();
  } catch (const StageError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load"), std::string::npos) << e.what();
  }
}

TEST(Stages, ParamKeysAreDeclared) {
  auto crc = resolve("crc32c");
  EXPECT_FALSE(crc->rejects_param("mode"));
  EXPECT_TRUE(crc->rejects_param("mdoe"));
  EXPECT_TRUE(resolve("passthrough")->rejects_param("anything"));
}

TEST(Stages, AbiMajorMismatchIsRefusedByVersion) {
  hoprelay_stage_descriptor d{HOPRELAY_STAGE_ABI_MAJOR + 1, 0, sizeof(d), "x"};
  try {
    check_descriptor(&d, "x.so");
    FAIL();
  } catch (const StageError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 1, found 2"), std::string::npos) << e.what();
  }
  hoprelay_stage_descriptor small{HOPRELAY_STAGE_ABI_MAJOR, 0, 8, "x"};
  EXPECT_THROW(check_descriptor(&small, "x.so"), StageError);
}

TEST(Stages, ChunkCapabilityIsReadOnlyWhenTheDescriptorHasIt) {
  EXPECT_TRUE(resolve("passthrough")->caps() & HOPRELAY_STAGE_CHUNKS);
  EXPECT_FALSE(resolve("verify-sink")->caps() & HOPRELAY_STAGE_CHUNKS);
  EXPECT_FALSE(resolve("crc32c")->caps() & HOPRELAY_STAGE_CHUNKS);
  // A stage built against minor 0 has no caps field: it is loaded, and gets whole messages,
  // whatever bytes follow its (shorter) descriptor.
  hoprelay_stage_descriptor d{
      HOPRELAY_STAGE_ABI_MAJOR, 0, sizeof(d), "old", nullptr, nullptr, nullptr, nullptr, nullptr};
  d.create = [](const hoprelay_stage_config*, char*, size_t) -> void* { return nullptr; };
  d.process = [](void*, hoprelay_msg*) { return HOPRELAY_FORWARD; };
  d.destroy = [](void*) {};
  d.struct_size = offsetof(hoprelay_stage_descriptor, caps);
  d.caps = HOPRELAY_STAGE_CHUNKS;  // not part of a minor-0 descriptor: never read
  EXPECT_NO_THROW(check_descriptor(&d, "old.so"));
  EXPECT_EQ(StageType(&d, nullptr, "old.so").caps(), 0u);
  d.struct_size = sizeof(d);
  EXPECT_EQ(StageType(&d, nullptr, "new.so").caps(), HOPRELAY_STAGE_CHUNKS);
}

// A descriptor of ABI minor `minor` with the required functions and nothing else.
hoprelay_stage_descriptor minimal_descriptor(uint16_t minor, const char* name) {
  hoprelay_stage_descriptor d{};
  d.abi_major = HOPRELAY_STAGE_ABI_MAJOR;
  d.abi_minor = minor;
  d.struct_size = sizeof(d);
  d.name = name;
  d.create = [](const hoprelay_stage_config*, char*, size_t) -> void* { return nullptr; };
  d.process = [](void*, hoprelay_msg*) { return HOPRELAY_FORWARD; };
  d.destroy = [](void*) {};
  return d;
}

TEST(Stages, ThreadCapabilitiesCountFromMinorThreeOnly) {
  EXPECT_TRUE(resolve("passthrough")->caps() & HOPRELAY_STAGE_THREADSAFE);
  EXPECT_TRUE(resolve("zstd")->caps() & HOPRELAY_STAGE_PER_THREAD);
  EXPECT_TRUE(resolve("crc32c")->caps() & HOPRELAY_STAGE_PER_THREAD);
  // Stages that must see every message, or write one file, stay on the event loop.
  for (const char* name : {"verify-sink", "file-sink"}) {
    EXPECT_EQ(resolve(name)->caps() & (HOPRELAY_STAGE_THREADSAFE | HOPRELAY_STAGE_PER_THREAD), 0u)
        << name;
  }
  hoprelay_stage_descriptor d = minimal_descriptor(2, "minor2");
  // Bits a minor-2 stage set had no meaning then: it runs on the event loop alone.
  d.caps = HOPRELAY_STAGE_CHUNKS | HOPRELAY_STAGE_THREADSAFE | HOPRELAY_STAGE_PER_THREAD;
  EXPECT_EQ(StageType(&d, nullptr, "minor2.so").caps(), HOPRELAY_STAGE_CHUNKS);
  d.abi_minor = 3;
  EXPECT_EQ(StageType(&d, nullptr, "minor3.so").caps(), d.caps);
}

// What a node standing in for a relay runs of its stage (stand_in.h): the built-ins that change
// the message are transforms, the sinks' effect is local; a stage before minor 4 declares none.
TEST(Stages, EffectIsDeclaredFromMinorFourAndTheBuiltinsDeclareIt) {
  using Effect = StageType::Effect;
  for (const char* name : {"passthrough", "crc32c", "zstd"}) {
    EXPECT_EQ(resolve(name)->effect(), Effect::kTransform) << name;
  }
  for (const char* name : {"verify-sink", "file-sink"}) {
    EXPECT_EQ(resolve(name)->effect(), Effect::kLocal) << name;
  }
  hoprelay_stage_descriptor d = minimal_descriptor(3, "minor3");
  // Bits a minor-3 stage set had no meaning then.
  d.caps = HOPRELAY_STAGE_CHUNKS | HOPRELAY_STAGE_LOCAL;
  EXPECT_EQ(StageType(&d, nullptr, "minor3.so").caps(), HOPRELAY_STAGE_CHUNKS);
  EXPECT_EQ(StageType(&d, nullptr, "minor3.so").effect(), Effect::kUndeclared);
  d.abi_minor = 4;
  EXPECT_EQ(StageType(&d, nullptr, "minor4.so").effect(), Effect::kLocal);
  d.caps = HOPRELAY_STAGE_TRANSFORM | HOPRELAY_STAGE_LOCAL;
  EXPECT_EQ(StageType(&d, nullptr, "minor4.so").effect(), Effect::kBoth);
  d.caps = 0;
  EXPECT_EQ(StageType(&d, nullptr, "minor4.so").effect(), Effect::kUndeclared);
  EXPECT_EQ(effect_name(Effect::kLocal), "local");
  EXPECT_EQ(effect_name(Effect::kUndeclared), "undeclared");
}

TEST(Stages, PluginLoadsByPathAndFutureAbiIsRefused) {
  auto xor_type = resolve(HOPRELAY_TEST_XOR_PLUGIN);
  EXPECT_EQ(xor_type->name(), "xor");
  Stage s(xor_type, "n", {{"key", "255"}});
  Buf b(64, 128, 1, 1);
  auto before = b.bytes;
  ASSERT_EQ(s.process(b.msg), HOPRELAY_FORWARD);
  EXPECT_EQ(uint8_t(b.bytes[0]), uint8_t(before[0]) ^ 0xff);
  EXPECT_THROW(Stage(xor_type, "n", {{"key", "300"}}), StageError);
  try {
    resolve(HOPRELAY_TEST_FUTURE_PLUGIN);
    FAIL();
  } catch (const StageError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 1, found 2"), std::string::npos) << e.what();
  }
}

TEST(Stages, Crc32cStampThenVerify) {
  Stage stamp = make("crc32c", {{"mode", "stamp"}});
  Stage verify = make("crc32c", {{"mode", "verify"}});
  Buf b(100, 200, 3, 4);
  ASSERT_EQ(stamp.process(b.msg), HOPRELAY_FORWARD);
  EXPECT_EQ(b.msg.length, 104u);
  EXPECT_TRUE(b.msg.flags & HOPRELAY_MSG_CRC32C_TRAILER);
  Buf copy = b;
  copy.msg.data = reinterpret_cast<uint8_t*>(copy.bytes.data());
  ASSERT_EQ(verify.process(b.msg), HOPRELAY_FORWARD);
  EXPECT_EQ(b.msg.length, 100u);
  EXPECT_FALSE(b.msg.flags & HOPRELAY_MSG_CRC32C_TRAILER);
  copy.bytes[10] ^= std::byte{0x40};  // damage in flight
  EXPECT_EQ(verify.process(copy.msg), HOPRELAY_ERROR);
  Buf unstamped(100, 200, 3, 5);
  EXPECT_EQ(verify.process(unstamped.msg), HOPRELAY_ERROR);
  Buf full(100, 100, 3, 6);  // no room for a trailer
  EXPECT_EQ(stamp.process(full.msg), HOPRELAY_ERROR);
  EXPECT_THROW(make("crc32c", {{"mode", "check"}}), StageError);
  // Stamped, then compressed on the way: not "corrupted", but in the wrong order.
  Buf compressed(100, 200, 3, 7);
  ASSERT_EQ(stamp.process(compressed.msg), HOPRELAY_FORWARD);
  compressed.msg.flags |= HOPRELAY_MSG_ZSTD;
  compressed.bytes[20] ^= std::byte{0x40};  // what compression does to the stamped bytes
  EXPECT_EQ(verify.process(compressed.msg), HOPRELAY_ERROR);
  EXPECT_EQ(std::string(verify.last_error()),
            "zstd-compressed since it was stamped: put a zstd stage with mode = \"decompress\" "
            "before this crc32c verify");
  // Compressed, then stamped: the trailer is outside the compressed bytes, and matches.
  Buf outside(100, 200, 3, 8);
  outside.msg.flags |= HOPRELAY_MSG_ZSTD;
  ASSERT_EQ(stamp.process(outside.msg), HOPRELAY_FORWARD);
  EXPECT_EQ(verify.process(outside.msg), HOPRELAY_FORWARD);
}

// A payload zstd shrinks: text that repeats, with a counter so it is not one run.
std::vector<std::byte> compressible(size_t size) {
  std::string text;
  for (size_t i = 0; text.size() < size; ++i) {
    text += "line " + std::to_string(i % 97) + ": the quick brown fox jumps over the lazy dog\n";
  }
  std::vector<std::byte> out(size);
  std::memcpy(out.data(), text.data(), size);
  return out;
}

// A message of `payload` in a slot of `capacity` bytes.
struct Slot {
  Slot(const std::vector<std::byte>& payload, uint32_t capacity) : bytes(capacity), msg{} {
    std::memcpy(bytes.data(), payload.data(), payload.size());
    msg = {reinterpret_cast<uint8_t*>(bytes.data()),
           static_cast<uint32_t>(payload.size()),
           capacity,
           1,
           0,
           7};
  }
  std::vector<std::byte> payload() const { return {bytes.begin(), bytes.begin() + msg.length}; }
  std::vector<std::byte> bytes;
  hoprelay_msg msg;
};

std::string refusal(const Params& params) {
  try {
    make("zstd", params);
  } catch (const StageError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Stages, ZstdRoundTripShrinksAndRestoresTheBytes) {
  Stage compress = make("zstd", {{"mode", "compress"}});
  Stage decompress = make("zstd", {{"mode", "decompress"}});
  EXPECT_TRUE(resolve("zstd")->caps() & HOPRELAY_STAGE_CHUNKS);
  for (int level : {1, 3, 19}) {
    Stage c = make("zstd", {{"mode", "compress"}, {"level", std::to_string(level)}});
    auto original = compressible(16384);
    Slot s(original, 16384);
    ASSERT_EQ(c.process(s.msg), HOPRELAY_FORWARD) << level;
    EXPECT_LT(s.msg.length, original.size() / 4) << level;
    EXPECT_TRUE(s.msg.flags & HOPRELAY_MSG_ZSTD);
    // Compressed upstream already: a second compressing stage leaves it as it is.
    auto once = s.payload();
    ASSERT_EQ(compress.process(s.msg), HOPRELAY_FORWARD);
    EXPECT_EQ(s.payload(), once);
    ASSERT_EQ(decompress.process(s.msg), HOPRELAY_FORWARD) << decompress.last_error();
    EXPECT_FALSE(s.msg.flags & HOPRELAY_MSG_ZSTD);
    EXPECT_EQ(s.payload(), original) << level;
  }
  // Other flags travel through untouched, both ways.
  Slot s(compressible(5000), 8000);
  s.msg.flags = HOPRELAY_MSG_CRC32C_TRAILER | HOPRELAY_MSG_MORE;
  s.msg.chunk = 3;
  ASSERT_EQ(compress.process(s.msg), HOPRELAY_FORWARD);
  EXPECT_EQ(s.msg.flags, HOPRELAY_MSG_CRC32C_TRAILER | HOPRELAY_MSG_MORE | HOPRELAY_MSG_ZSTD);
  ASSERT_EQ(decompress.process(s.msg), HOPRELAY_FORWARD);
  EXPECT_EQ(s.msg.flags, HOPRELAY_MSG_CRC32C_TRAILER | HOPRELAY_MSG_MORE);
  EXPECT_EQ(s.payload(), compressible(5000));
}

TEST(Stages, ZstdForwardsWhatDoesNotShrinkUnchanged) {
  Stage compress = make("zstd", {{"mode", "compress"}});
  Stage decompress = make("zstd", {{"mode", "decompress"}});
  // The verify pattern does not compress: forwarded as it was, the flag clear, and the
  // decompressing side passes an unflagged payload on untouched.
  for (uint32_t size : {0u, 1u, 24u, 1000u, 65536u}) {
    Buf b(size < 24 ? 24 : size, size < 24 ? 24 : size, 1, 2);
    b.msg.length = size;
    std::vector<std::byte> before(b.bytes.begin(), b.bytes.begin() + size);
    ASSERT_EQ(compress.process(b.msg), HOPRELAY_FORWARD) << size;
    EXPECT_EQ(b.msg.length, size);
    EXPECT_EQ(b.msg.flags, 0u) << size;
    ASSERT_EQ(decompress.process(b.msg), HOPRELAY_FORWARD);
    EXPECT_EQ(std::vector<std::byte>(b.bytes.begin(), b.bytes.begin() + b.msg.length), before);
  }
  // A message filling its slot exactly, compressible: it shrinks, and comes back whole in the
  // slot (the scratch space grows to the larger slot once).
  auto full = compressible(65536);
  Slot s(full, 65536);
  ASSERT_EQ(compress.process(s.msg), HOPRELAY_FORWARD);
  EXPECT_LT(s.msg.length, 65536u);
  ASSERT_EQ(decompress.process(s.msg), HOPRELAY_FORWARD) << decompress.last_error();
  EXPECT_EQ(s.msg.length, 65536u);
  EXPECT_EQ(s.payload(), full);
}

TEST(Stages, ZstdDecompressesAReassembledMessageOfSeveralFrames) {
  // Chunks compressed one by one, then copied together (a node reassembling for a whole-message
  // consumer): one payload of several frames, decompressed as one.
  Stage compress = make("zstd", {{"mode", "compress"}});
  Stage decompress = make("zstd", {{"mode", "decompress"}});
  auto original = compressible(3 * 4096);
  std::vector<std::byte> joined;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::byte> part(original.begin() + i * 4096, original.begin() + (i + 1) * 4096);
    Slot c(part, 4096);
    c.msg.chunk = i;
    ASSERT_EQ(compress.process(c.msg), HOPRELAY_FORWARD);
    ASSERT_TRUE(c.msg.flags & HOPRELAY_MSG_ZSTD);
    auto frame = c.payload();
    joined.insert(joined.end(), frame.begin(), frame.end());
  }
  Slot whole(joined, 3 * 4096);
  whole.msg.flags = HOPRELAY_MSG_ZSTD;
  ASSERT_EQ(decompress.process(whole.msg), HOPRELAY_FORWARD) << decompress.last_error();
  EXPECT_EQ(whole.payload(), original);
}

TEST(Stages, ZstdRefusesCorruptFramesWithAReason) {
  Stage compress = make("zstd", {{"mode", "compress"}});
  Stage decompress = make("zstd", {{"mode", "decompress"}});
  Slot good(compressible(8000), 8192);
  ASSERT_EQ(compress.process(good.msg), HOPRELAY_FORWARD);
  ASSERT_TRUE(good.msg.flags & HOPRELAY_MSG_ZSTD);
  auto expect_refused = [&](Slot s, const std::string& words) {
    s.msg.data = reinterpret_cast<uint8_t*>(s.bytes.data());
    EXPECT_EQ(decompress.process(s.msg), HOPRELAY_ERROR) << words;
    EXPECT_NE(std::string(decompress.last_error()).find(words), std::string::npos)
        << decompress.last_error();
  };
  Slot truncated = good;
  truncated.msg.length -= 5;
  expect_refused(truncated, "cut short or corrupt");
  // A flipped bit in the middle of the frame: caught by the frame's checksum if not before.
  Slot flipped = good;
  flipped.bytes[good.msg.length / 2] ^= std::byte{0x10};
  expect_refused(flipped, "corrupt");
  Slot checksum = good;
  checksum.bytes[good.msg.length - 1] ^= std::byte{0x01};  // the frame's last byte: its checksum
  expect_refused(checksum, "corrupt zstd frame: Restored data doesn't match checksum");
  Slot magic = good;
  magic.bytes[0] ^= std::byte{0xff};
  expect_refused(magic, "not a zstd frame at byte 0");
  // Larger than the slot it came in, once decompressed.
  Slot small = good;
  small.msg.capacity = 4000;
  expect_refused(small, "decompresses to 8000 bytes, more than the 4000 the slot holds");
  Slot empty = good;
  empty.msg.length = 0;
  expect_refused(empty, "empty");
  // Something after the frame that is not a frame.
  Slot trailing = good;
  trailing.bytes[trailing.msg.length] = std::byte{1};
  trailing.msg.length += 1;
  expect_refused(trailing, "at byte");
  // The good one still decompresses: the errors left nothing behind.
  ASSERT_EQ(decompress.process(good.msg), HOPRELAY_FORWARD) << decompress.last_error();
  EXPECT_EQ(good.payload(), compressible(8000));
}

TEST(Stages, ZstdParametersAreCheckedWithWhatToDo) {
  EXPECT_NE(refusal({}).find("zstd needs a mode: mode = \"compress\""), std::string::npos)
      << refusal({});
  EXPECT_NE(refusal({{"mode", "squeeze"}})
                .find("mode must be \"compress\" or \"decompress\", not \"squeeze\""),
            std::string::npos);
  for (const char* bad : {"0x3", "", "abc", "23", "-1000000", "3.5"}) {
    std::string why = refusal({{"mode", "compress"}, {"level", bad}});
    EXPECT_NE(why.find("is not a zstd level: use an integer from"), std::string::npos)
        << bad << ": " << why;
  }
  EXPECT_EQ(refusal({{"mode", "compress"}, {"level", "22"}}), "(accepted)");
  EXPECT_EQ(refusal({{"mode", "compress"}, {"level", "-5"}}), "(accepted)");
  EXPECT_NE(refusal({{"mode", "decompress"}, {"level", "3"}})
                .find("level applies to mode = \"compress\" only"),
            std::string::npos);
  EXPECT_FALSE(resolve("zstd")->rejects_param("level"));
  EXPECT_TRUE(resolve("zstd")->rejects_param("levle"));
}

TEST_F(TempDir, SinksRefuseAZstdCompressedPayloadAndSayWhatToDo) {
  fs::path report = dir_ / "r.json", out = dir_ / "out.bin";
  Stage verify = make("verify-sink", {{"report", report.string()}});
  Stage file = make("file-sink", {{"path", out.string()}});
  for (Stage* sink : {&verify, &file}) {
    Buf b(100, 100, 1, 0);
    b.msg.flags = HOPRELAY_MSG_ZSTD;
    EXPECT_EQ(sink->process(b.msg), HOPRELAY_ERROR) << sink->name();
    EXPECT_EQ(sink->last_error(),
              "zstd-compressed: put a zstd stage with mode = \"decompress\" before this sink");
    b.msg.flags = 0;  // the same bytes, decompressed
    EXPECT_EQ(sink->process(b.msg), HOPRELAY_FORWARD) << sink->name();
  }
  verify.flush();
  EXPECT_NE(slurp(report).find("\"corrupt\": 1"), std::string::npos) << slurp(report);
  EXPECT_EQ(fs::file_size(out), 104u);  // one record, of the second
}

// verify-sink tracks 2^28 sequence numbers per origin: a message past that is an error that
// says so, and a verdict log with a torn record in it still loads. Before, such a sequence
// number resized its bitmap to match: bad_alloc through the C ABI, and the daemon aborted, on
// every restart too (the message came again).
TEST_F(TempDir, VerifySinkRefusesASequenceNumberPastWhatItTracksAndLoadsATornLog) {
  fs::path report = dir_ / "r.json";
  {
    Stage sink = make("verify-sink", {{"report", report.string()}});
    Buf far(64, 64, 5, uint64_t{1} << 40);
    EXPECT_EQ(sink.process(far.msg), HOPRELAY_ERROR);
    EXPECT_EQ(sink.last_error(),
              "sequence number past the 2^28 per origin that verify-sink tracks (it counts from "
              "0)");
    Buf near(64, 64, 5, 0);
    EXPECT_EQ(sink.process(near.msg), HOPRELAY_FORWARD);
  }
  // A full disk cut a record short: the ones after it are read shifted.
  { std::ofstream(report.string() + ".verdicts", std::ios::binary | std::ios::app) << "torn"; }
  {
    Stage sink = make("verify-sink", {{"report", report.string()}});
    Buf next(64, 64, 5, 1);
    for (int i = 0; i < 3; ++i) {
      std::ofstream(report.string() + ".verdicts", std::ios::binary | std::ios::app)
          << std::string(24, '\xff');  // garbage where records should be
    }
    EXPECT_EQ(sink.process(next.msg), HOPRELAY_FORWARD);
  }
  Stage again = make("verify-sink", {{"report", report.string()}});  // loads, skipping garbage
  Buf last(64, 64, 5, 2);
  EXPECT_EQ(again.process(last.msg), HOPRELAY_FORWARD);
}

// fsync = "interval": a flush that cannot make the records durable stops the sink, with the
// reason on every later message (/dev/null refuses fdatasync as a failing disk would). Before,
// the failure was dropped without a word, and the sink went on acknowledging.
TEST(FileSinkState, AnIntervalFlushThatFailsStopsTheSinkAndSaysWhy) {
  Stage sink = make("file-sink", {{"path", "/dev/null"}, {"fsync", "interval"}});
  Buf first(64, 64, 1, 0);
  EXPECT_EQ(sink.process(first.msg), HOPRELAY_FORWARD);
  sink.flush();
  Buf next(64, 64, 1, 1);
  EXPECT_EQ(sink.process(next.msg), HOPRELAY_ERROR);
  EXPECT_EQ(sink.last_error(),
            "cannot make durable (fdatasync) /dev/null: Invalid argument: the records of the last "
            "second may not be on disk (fix it and restart the node)");
}

TEST_F(TempDir, VerifySinkCountsAndReports) {
  fs::path report = dir_ / "r.json";
  {
    Stage sink = make("verify-sink", {{"report", report.string()}});
    Stage stamp = make("crc32c", {{"mode", "stamp"}});
    for (uint64_t seq : {0, 1, 2, 4, 4, 5}) {  // 3 missing, 4 twice
      Buf b(256, 300, 11, seq);
      if (seq == 5) stamp.process(b.msg);  // a stamped one is checked through its trailer
      sink.process(b.msg);
    }
    Buf bad(256, 300, 11, 6);
    bad.bytes[100] ^= std::byte{1};
    EXPECT_EQ(sink.process(bad.msg), HOPRELAY_ERROR);
    Buf other(64, 64, 12, 0);
    EXPECT_EQ(sink.process(other.msg), HOPRELAY_FORWARD);
    Buf liar(64, 64, 12, 1);
    liar.msg.seq = 9;  // header says one thing, payload another
    EXPECT_EQ(sink.process(liar.msg), HOPRELAY_ERROR);
  }  // destroyed: final flush
  std::string json = slurp(report);
  EXPECT_NE(json.find("\"received\": 6,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"duplicates\": 1,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"missing\": 1,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"corrupt\": 2,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"11\": {\"received\": 5, \"duplicates\": 1, \"missing\": 1, "
                      "\"corrupt\": 1"),
            std::string::npos)
      << json;
  EXPECT_FALSE(fs::exists(dir_ / "r.json.tmp"));
}

TEST_F(TempDir, VerifySinkResumesAfterACrashAndCountsReplaysAsRedelivered) {
  fs::path report = dir_ / "r.json";
  auto feed = [](Stage& s, uint64_t from, uint64_t to) {
    for (uint64_t seq = from; seq < to; ++seq) {
      Buf b(64, 64, 5, seq);
      s.process(b.msg);
    }
  };
  {
    Stage sink = make("verify-sink", {{"report", report.string()}});
    feed(sink, 0, 100);  // the first run consumes 0..99, then "dies"
  }
  {
    Stage sink = make("verify-sink", {{"report", report.string()}});
    feed(sink, 90, 200);  // the upstream replays 90..99 (unacknowledged), then goes on
    Buf again(64, 64, 5, 150);
    // A copy it already has is consumed, not dropped: the message was delivered, so its
    // producer's outcome must say so. Only the counters tell the copies apart.
    EXPECT_EQ(sink.process(again.msg), HOPRELAY_FORWARD) << "twice in one run";
  }
  std::string json = slurp(report);
  EXPECT_NE(json.find("\"received\": 200,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"duplicates\": 1,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"missing\": 0,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"redelivered\": 10,"), std::string::npos) << json;
}

TEST_F(TempDir, VerifySinkRefusesUnwritableReport) {
  std::string report = (dir_ / "no/such/dir/r.json").string();
  try {
    make("verify-sink", {{"report", report}});
    ADD_FAILURE() << "verify-sink accepted " << report;
  } catch (const StageError& e) {
    // Names the parameter's value as written (docs/operations.md, "Errors and what to do").
    EXPECT_NE(std::string(e.what()).find("stage verify-sink refused its parameters: cannot "
                                         "write report file " +
                                         report + ": No such file or directory"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TempDir, FileSinkAppendsLengthPrefixedRecords) {
  fs::path out = dir_ / "records";
  {
    Stage sink = make("file-sink", {{"path", out.string()}});
    for (uint32_t len : {24u, 100u, 3000u}) {
      Buf b(len, len, 1, len);
      EXPECT_EQ(sink.process(b.msg), HOPRELAY_FORWARD);
    }
  }
  std::string data = slurp(out);
  ASSERT_EQ(data.size(), 3 * 4 + 24 + 100 + 3000u);
  size_t off = 0;
  for (uint32_t want : {24u, 100u, 3000u}) {
    uint32_t len;
    std::memcpy(&len, data.data() + off, 4);
    EXPECT_EQ(len, want);
    uint32_t o;
    uint64_t s;
    EXPECT_EQ(check_pattern({reinterpret_cast<const std::byte*>(data.data() + off + 4), len}, o, s),
              PatternCheck::kOk);
    off += 4 + len;
  }
}

// The records of a file-sink file, as (origin, seq) of their pattern payloads, in order.
std::vector<std::pair<uint32_t, uint64_t>> records_of(const fs::path& path) {
  std::string data = slurp(path);
  std::vector<std::pair<uint32_t, uint64_t>> out;
  for (size_t off = 0; off + 4 <= data.size();) {
    uint32_t len;
    std::memcpy(&len, data.data() + off, 4);
    EXPECT_LE(off + 4 + len, data.size()) << "a torn record at " << off;
    uint32_t o = 0;
    uint64_t s = 0;
    EXPECT_EQ(check_pattern({reinterpret_cast<const std::byte*>(data.data() + off + 4), len}, o, s),
              PatternCheck::kOk);
    out.emplace_back(o, s);
    off += 4 + len;
  }
  return out;
}

TEST_F(TempDir, FileSinkWithAStateDirWritesEachMessageOnceAcrossRestarts) {
  const fs::path out = dir_ / "records", state = dir_ / "state";
  const Params params{{"path", out.string()}, {"state_dir", state.string()}};
  auto feed = [](Stage& s, uint32_t origin, uint64_t from, uint64_t to) {
    for (uint64_t seq = from; seq < to; ++seq) {
      Buf b(100, 100, origin, seq);
      ASSERT_EQ(s.process(b.msg), HOPRELAY_FORWARD) << seq;
    }
  };
  {
    Stage sink = make("file-sink", params);
    feed(sink, 5, 0, 100);
    feed(sink, 6, 0, 10);
  }
  // A record written when the process died, before its position was recorded: the restart
  // cuts it off (its message was not acknowledged, so it comes again).
  std::ofstream(out, std::ios::app | std::ios::binary) << std::string("\x64\0\0\0half", 8);
  {
    Stage sink = make("file-sink", params);
    feed(sink, 5, 90, 200);  // 90..99: the upstream's replay, consumed and not written again
    feed(sink, 6, 0, 20);
    // A copy of an earlier run's message, or of this run's (the node's deduplication drops
    // those first, unless it forgot the origin), is consumed, not dropped or written again.
    for (uint64_t seq : {50, 150}) {
      Buf again(100, 100, 5, seq);
      EXPECT_EQ(sink.process(again.msg), HOPRELAY_FORWARD) << "a copy is consumed, not dropped";
    }
  }
  auto records = records_of(out);
  ASSERT_EQ(records.size(), 220u);
  for (uint64_t seq = 0; seq < 200; ++seq) {
    EXPECT_EQ(records[seq < 100 ? seq : seq + 10], (std::pair<uint32_t, uint64_t>{5, seq}));
  }
  for (uint64_t seq = 0; seq < 20; ++seq) {
    EXPECT_EQ(records[seq < 10 ? 100 + seq : 200 + seq], (std::pair<uint32_t, uint64_t>{6, seq}));
  }
}

TEST_F(TempDir, FileSinkFsyncTakesAlwaysOrInterval) {
  const fs::path out = dir_ / "records";
  for (const char* mode : {"always", "interval"}) {
    Stage sink = make("file-sink", {{"path", out.string()}, {"fsync", mode}});
    Buf b(64, 64, 1, 1);
    EXPECT_EQ(sink.process(b.msg), HOPRELAY_FORWARD) << mode;
    sink.flush();
  }
  EXPECT_EQ(records_of(out).size(), 2u);
  try {
    make("file-sink", {{"path", out.string()}, {"fsync", "sometimes"}});
    FAIL() << "accepted";
  } catch (const StageError& e) {
    EXPECT_NE(std::string(e.what()).find("use \"always\""), std::string::npos) << e.what();
  }
}

TEST_F(TempDir, FileSinkGivenAStateDirForAnExistingFileKeepsTheFile) {
  const fs::path out = dir_ / "records";
  {
    Stage sink = make("file-sink", {{"path", out.string()}});
    Buf b(64, 64, 1, 7);
    sink.process(b.msg);
  }
  Stage sink = make("file-sink", {{"path", out.string()}, {"state_dir", (dir_ / "s").string()}});
  Buf b(64, 64, 1, 8);
  EXPECT_EQ(sink.process(b.msg), HOPRELAY_FORWARD);
  EXPECT_EQ(records_of(out).size(), 2u);
}

}  // namespace
}  // namespace hoprelay::stages

namespace hoprelay::stages {
namespace {

TEST_F(TempDir, RelativePluginPathIsRelativeToTheTopologyFile) {
  fs::create_directories(dir_ / "plugins");
  fs::copy_file(HOPRELAY_TEST_XOR_PLUGIN, dir_ / "plugins" / "xor.so");
  std::ofstream(dir_ / "t.toml") << "[pipeline]\nname = \"p\"\n[nodes.a]\nlisten = "
                                    "\"127.0.0.1:1\"\nstage = { plugin = \"plugins/xor.so\" }\n";
  // Loaded from another working directory: the path still resolves beside the file.
  auto cwd = fs::current_path();
  fs::current_path(fs::temp_directory_path());
  auto topology = config::load_topology((dir_ / "t.toml").string());
  fs::current_path(cwd);
  EXPECT_EQ(topology.nodes.at(0).stage.plugin, (dir_ / "plugins" / "xor.so").string());
}

}  // namespace
}  // namespace hoprelay::stages
