// A branch's spool on disk (spool.h): order, durability across a reopen, segments, a torn
// tail, damage, the size limit, a failing disk, and no allocation once warm.
#include "hoprelay/daemon/spool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <vector>

#include "alloc_count.h"

namespace hoprelay::daemon {
namespace {

namespace fs = std::filesystem;
using Status = Spool::Status;

class SpoolDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hoprelay-spool-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Message i: origin 7, seq i, its own length (i * 37 % 700 bytes) and bytes.
  static std::vector<std::byte> payload_of(uint64_t i) {
    std::vector<std::byte> p(i * 37 % 700);
    for (size_t k = 0; k < p.size(); ++k) p[k] = std::byte(uint8_t(i * 131 + k));
    return p;
  }
  static Status append(Spool& s, uint64_t i) {
    const auto p = payload_of(i);
    SpoolRecord r;
    r.origin = 7;
    r.seq = i;
    r.flags = uint16_t(i % 3);
    r.chunk = uint32_t(i % 5);
    r.appended_ns = int64_t(1000 + i);
    r.payload = p;
    return s.append(r);
  }
  // Reads the next record and checks it is message i.
  static void expect_next(Spool& s, uint64_t i) {
    std::vector<std::byte> buf(4096);
    SpoolRecord r;
    ASSERT_EQ(s.read(r, buf), Status::kOk) << "message " << i;
    EXPECT_EQ(r.origin, 7u);
    EXPECT_EQ(r.seq, i);
    EXPECT_EQ(r.flags, i % 3);
    EXPECT_EQ(r.chunk, i % 5);
    EXPECT_EQ(r.appended_ns, int64_t(1000 + i));
    const auto want = payload_of(i);
    ASSERT_EQ(r.payload.size(), want.size()) << "message " << i;
    EXPECT_TRUE(std::equal(want.begin(), want.end(), r.payload.begin())) << "message " << i;
  }
  size_t segment_files() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().extension() == ".spool";
    return n;
  }
  fs::path last_segment() const {
    fs::path last;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".spool" && e.path() > last) last = e.path();
    }
    return last;
  }
  fs::path dir_;
};

TEST_F(SpoolDir, RecordsComeBackInOrderWithTheirFieldsAndBytes) {
  Spool s(dir_.string(), {});
  EXPECT_TRUE(s.empty());
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(append(s, i), Status::kOk);
  ASSERT_EQ(s.sync(), Status::kOk);
  EXPECT_TRUE(s.synced());
  EXPECT_EQ(s.records(), 1000u);
  EXPECT_EQ(s.oldest_ns(), 1000);
  for (uint64_t i = 0; i < 1000; ++i) {
    expect_next(s, i);
    if (i % 100 == 99) {
      ASSERT_EQ(s.consume(100), Status::kOk);
    }
  }
  std::vector<std::byte> buf(4096);
  SpoolRecord r;
  EXPECT_EQ(s.read(r, buf), Status::kEmpty);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.oldest_ns(), 0);
}

TEST_F(SpoolDir, AReopenedSpoolGoesOnAfterWhatWasConsumed) {
  {
    Spool s(dir_.string(), {});
    for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(append(s, i), Status::kOk);
    ASSERT_EQ(s.sync(), Status::kOk);
    for (uint64_t i = 0; i < 50; ++i) expect_next(s, i);
    ASSERT_EQ(s.consume(40), Status::kOk);  // 40..49 read, not acknowledged
    EXPECT_EQ(s.oldest_ns(), 1040);
  }
  Spool s(dir_.string(), {});
  EXPECT_EQ(s.recovered().records, 60u);
  EXPECT_EQ(s.recovered().cut_bytes, 0u);
  EXPECT_EQ(s.first(), 40u);
  EXPECT_EQ(s.end(), 100u);
  EXPECT_EQ(s.oldest_ns(), 1040);
  for (uint64_t i = 40; i < 100; ++i) expect_next(s, i);
  ASSERT_EQ(append(s, 100), Status::kOk);  // numbering goes on
  expect_next(s, 100);
}

TEST_F(SpoolDir, SegmentsRollAndGoOnceConsumedAcrossAReopenToo) {
  Spool::Limits small;
  small.segment_bytes = 4096;
  {
    Spool s(dir_.string(), small);
    for (uint64_t i = 0; i < 200; ++i) ASSERT_EQ(append(s, i), Status::kOk);
    ASSERT_EQ(s.sync(), Status::kOk);
    EXPECT_GT(segment_files(), 20u);
    uint64_t on_disk = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".spool") on_disk += fs::file_size(e.path());
    }
    EXPECT_EQ(s.bytes(), on_disk);
    for (uint64_t i = 0; i < 150; ++i) expect_next(s, i);
    const size_t before = segment_files();
    ASSERT_EQ(s.consume(150), Status::kOk);
    EXPECT_LT(segment_files(), before / 3);
  }
  Spool s(dir_.string(), small);
  EXPECT_EQ(s.first(), 150u);
  EXPECT_EQ(s.recovered().segments, segment_files());
  for (uint64_t i = 150; i < 200; ++i) expect_next(s, i);
  ASSERT_EQ(s.consume(50), Status::kOk);
  EXPECT_EQ(segment_files(), 0u);  // caught up: nothing left on disk
  EXPECT_EQ(s.bytes(), 0u);
  ASSERT_EQ(append(s, 200), Status::kOk);  // a new segment, numbered on
  expect_next(s, 200);
}

TEST_F(SpoolDir, ATornTailIsCutAtOpenAndTheSpoolGoesOn) {
  {
    Spool s(dir_.string(), {});
    for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(append(s, i), Status::kOk);
    ASSERT_EQ(s.sync(), Status::kOk);
  }
  const auto seg = last_segment();
  const auto good = fs::file_size(seg);
  {
    // A crash half-way through an append: half a header, then a whole header with half its
    // payload.
    std::ofstream f(seg, std::ios::binary | std::ios::app);
    f.write("HRSP\x20\x00\x00\x00\x07", 9);
  }
  Spool s(dir_.string(), {});
  EXPECT_EQ(s.recovered().records, 10u);
  EXPECT_EQ(s.recovered().cut_bytes, 9u);
  EXPECT_EQ(fs::file_size(seg), good);
  ASSERT_EQ(append(s, 10), Status::kOk);
  for (uint64_t i = 0; i <= 10; ++i) expect_next(s, i);
}

TEST_F(SpoolDir, ADamagedRecordBeforeTheEndIsAnErrorThatNamesTheFileAndTheByte) {
  Spool::Limits small;
  small.segment_bytes = 4096;
  {
    Spool s(dir_.string(), small);
    for (uint64_t i = 0; i < 40; ++i) ASSERT_EQ(append(s, i), Status::kOk);
    ASSERT_EQ(s.sync(), Status::kOk);
  }
  // The first segment, a byte inside its first record's payload (message 1, 37 bytes).
  fs::path first;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().extension() == ".spool" && (first.empty() || e.path() < first)) first = e.path();
  }
  {
    std::fstream f(first, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(Spool::kFileHeader + Spool::kRecordHeader + Spool::kRecordHeader + 3);
    f.put('\xff');
  }
  try {
    Spool s(dir_.string(), small);
    FAIL() << "a damaged record before the end was taken";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(first.string()), std::string::npos) << what;
    EXPECT_NE(
        what.find("damaged at byte " + std::to_string(Spool::kFileHeader + Spool::kRecordHeader)),
        std::string::npos)
        << what;
    EXPECT_NE(what.find("move the spool directory aside"), std::string::npos) << what;
  }
}

TEST_F(SpoolDir, AFullSpoolRefusesAndStaysAsItWasUntilConsumed) {
  Spool::Limits small;
  small.segment_bytes = 2048;
  small.max_bytes = 8192;
  Spool s(dir_.string(), small);
  uint64_t n = 0;
  Status st;
  while ((st = append(s, n)) == Status::kOk) ++n;
  EXPECT_EQ(st, Status::kFull);
  EXPECT_GT(n, 10u);
  EXPECT_LE(s.bytes(), small.max_bytes);
  EXPECT_EQ(s.records(), n);
  for (uint64_t i = 0; i < n / 2; ++i) expect_next(s, i);
  ASSERT_EQ(s.consume(n / 2), Status::kOk);
  EXPECT_EQ(append(s, n), Status::kOk);  // room again: consumed segments went
  for (uint64_t i = n / 2; i <= n; ++i) expect_next(s, i);
}

TEST_F(SpoolDir, ReadsStopAtTheWindowAndARewindReadsWhatWasInFlightAgain) {
  Spool::Limits w;
  w.window = 4;
  Spool s(dir_.string(), w);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(append(s, i), Status::kOk);
  for (uint64_t i = 0; i < 4; ++i) expect_next(s, i);
  std::vector<std::byte> buf(4096);
  SpoolRecord r;
  EXPECT_EQ(s.read(r, buf), Status::kWindow);
  ASSERT_EQ(s.consume(1), Status::kOk);
  expect_next(s, 4);
  s.rewind();  // the link went down with 1..4 in flight
  EXPECT_EQ(s.read_index(), 1u);
  for (uint64_t i = 1; i < 5; ++i) expect_next(s, i);
  ASSERT_EQ(s.consume(4), Status::kOk);
  EXPECT_EQ(s.oldest_ns(), 1005);
}

TEST_F(SpoolDir, AWriteTheDiskRefusesIsReportedAndCutBackAndTheSpoolGoesOn) {
  Spool s(dir_.string(), {});
  for (uint64_t i = 0; i < 5; ++i) ASSERT_EQ(append(s, i), Status::kOk);
  ASSERT_EQ(s.sync(), Status::kOk);
  const auto before = s.bytes();
  // The file-size limit stands in for a full disk: the write fails part-way (EFBIG).
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit tight = old;
  tight.rlim_cur = before + Spool::kRecordHeader + 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tight), 0);
  std::vector<std::byte> big(600, std::byte{1});
  SpoolRecord r;
  r.seq = 99;
  r.payload = big;
  const Status st = s.append(r);
  const int err = s.error();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(st, Status::kIoError);
  EXPECT_EQ(err, EFBIG);
  EXPECT_EQ(s.records(), 5u);
  EXPECT_EQ(s.bytes(), before);
  EXPECT_EQ(fs::file_size(last_segment()), before);  // cut back
  ASSERT_EQ(append(s, 5), Status::kOk);
  for (uint64_t i = 0; i <= 5; ++i) expect_next(s, i);
}

TEST_F(SpoolDir, ASyncTakenForAnotherThreadCountsTheSpoolCleanAndAFailureWantsItAgain) {
  Spool::Limits l;
  l.segment_bytes = 2048;  // a few records per segment: several dirty ones at once
  Spool s(dir_.string(), l);
  for (uint64_t i = 0; i < 12; ++i) ASSERT_EQ(append(s, i), Status::kOk);
  ASSERT_GE(segment_files(), 2u);
  EXPECT_FALSE(s.synced());
  std::vector<int> files;
  std::vector<int> dirs;
  ASSERT_EQ(s.take_unsynced(files, dirs), Status::kOk);
  EXPECT_EQ(files.size(), segment_files());  // every segment written since the open
  EXPECT_EQ(dirs.size(), 1u);                // they were made: the directory too
  EXPECT_TRUE(s.synced());
  // The copies are the caller's: consuming a whole segment closes and deletes the spool's
  // own descriptor, and the copy still syncs the file.
  for (uint64_t i = 0; i < 12; ++i) expect_next(s, i);
  ASSERT_EQ(s.consume(12), Status::kOk);
  for (int fd : files) {
    EXPECT_EQ(::fdatasync(fd), 0);
    ::close(fd);
  }
  for (int fd : dirs) ::close(fd);
  files.clear();
  dirs.clear();
  // Nothing written since: nothing to take.
  ASSERT_EQ(append(s, 12), Status::kOk);
  ASSERT_EQ(s.take_unsynced(files, dirs), Status::kOk);
  const size_t after_one = files.size();
  EXPECT_GE(after_one, 1u);
  ASSERT_EQ(s.take_unsynced(files, dirs), Status::kOk);
  EXPECT_EQ(files.size(), after_one);
  // The sync of what was taken failed: everything is wanted again, and the error is kept.
  s.sync_failed(EIO);
  EXPECT_FALSE(s.synced());
  EXPECT_EQ(s.error(), EIO);
  ASSERT_EQ(s.take_unsynced(files, dirs), Status::kOk);
  EXPECT_GT(files.size(), after_one);
  for (int fd : files) ::close(fd);
  for (int fd : dirs) ::close(fd);
  EXPECT_TRUE(s.synced());
}

TEST_F(SpoolDir, AnUnwritableDirectoryIsAnErrorThatNamesIt) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  try {
    Spool s((dir_ / "file" / "spool").string(), {});
    FAIL() << "a spool under a file was opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the spool directory"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find((dir_ / "file" / "spool").string()), std::string::npos);
  }
}

TEST_F(SpoolDir, AppendReadAndConsumeAllocateNothingOnceWarm) {
  Spool::Limits l;
  l.segment_bytes = uint64_t{1} << 30;  // no roll in the measured part
  Spool s(dir_.string(), l);
  std::vector<std::byte> buf(4096);
  SpoolRecord r;
  for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(append(s, i), Status::kOk);
  const auto payload = payload_of(3);
  SpoolRecord w;
  w.payload = payload;
  const uint64_t before = test::allocations();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(s.append(w), Status::kOk);
    ASSERT_EQ(s.read(r, buf), Status::kOk);
    ASSERT_EQ(s.consume(1), Status::kOk);
  }
  ASSERT_EQ(s.sync(), Status::kOk);
  EXPECT_EQ(test::allocations() - before, 0u);
}

}  // namespace
}  // namespace hoprelay::daemon
