// The durable position shared by libhoprelay's consumer and file-sink (position_file.h).
#include "hoprelay/stages/position_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace hoprelay::stages {
namespace {

namespace fs = std::filesystem;

class PositionDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hoprelay-position-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PositionDir, ANewDirectoryIsEmptyAndCommitsSurviveReopening) {
  {
    PositionFile p(dir_.string());
    EXPECT_EQ(p.origins(), 0u);
    EXPECT_EQ(p.next(7), 0u);
    p.take(7, 0, 100);
    p.take(7, 4, 500);  // the highest seq counts: one past it
    p.take(7, 2, 600);
    p.take(9, 10, 700);
    p.end(11, 3);
    EXPECT_TRUE(p.dirty());
    p.commit();
    EXPECT_FALSE(p.dirty());
    p.take(9, 11, 800);  // not committed: gone with the process
  }
  PositionFile p(dir_.string());
  EXPECT_EQ(p.origins(), 3u);
  EXPECT_EQ(p.next(7), 5u);
  EXPECT_EQ(p.next(9), 11u);
  EXPECT_EQ(p.next(11), 3u);
  EXPECT_EQ(p.app(), 700u);
  ASSERT_EQ(p.ended().size(), 1u);
  EXPECT_EQ(p.ended()[0], (std::pair<uint32_t, uint64_t>{11, 3}));
}

TEST_F(PositionDir, AnUnsyncedCommitIsReadByTheNextProcess) {
  // fsync = "interval": the kernel has it, so a crash of the process loses nothing.
  {
    PositionFile p(dir_.string());
    for (uint64_t seq = 0; seq < 1000; ++seq) {
      p.take(1, seq, seq * 10);
      p.commit(false);
    }
  }
  PositionFile p(dir_.string());
  EXPECT_EQ(p.next(1), 1000u);
  EXPECT_EQ(p.app(), 9990u);
}

TEST_F(PositionDir, ATornCommitLeavesThePreviousOne) {
  {
    PositionFile p(dir_.string());
    p.take(1, 41, 1);
    p.commit();  // generation 1, slot 1
    p.take(1, 42, 2);
    p.commit();  // generation 2, slot 0
  }
  // Damage the newest slot (0) as a power loss mid-write would: the other one counts.
  {
    std::fstream f(dir_ / "positions", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x55');
  }
  {
    PositionFile p(dir_.string());
    EXPECT_EQ(p.next(1), 42u);
    EXPECT_EQ(p.app(), 1u);
    p.take(1, 99, 3);
    p.commit();  // generation 2 again, over the damaged slot
  }
  PositionFile p(dir_.string());
  EXPECT_EQ(p.next(1), 100u);
}

// Both slots damaged is a damaged file, said so; only one (a first commit torn) is a new one.
TEST_F(PositionDir, BothSlotsDamagedIsAnErrorNotAFreshStart) {
  {
    PositionFile p(dir_.string());
    p.take(1, 41, 1);
    p.commit();  // generation 1, slot 1
  }
  auto damage = [&](long at) {
    std::fstream f(dir_ / "positions", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at);
    f.put('\x55');
  };
  damage(long(PositionFile::kSlotBytes) + 40);
  {
    PositionFile p(dir_.string());  // slot 0 never written: a first commit torn
    EXPECT_TRUE(p.fresh());
    p.take(1, 50, 2);
    p.commit();  // generation 1 again
    p.take(1, 60, 3);
    p.commit();  // generation 2, slot 0
  }
  damage(40);
  damage(long(PositionFile::kSlotBytes) + 40);
  try {
    PositionFile p(dir_.string());
    FAIL() << "opened a damaged file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("damaged: " + (dir_ / "positions").string()),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("remove it to start afresh"), std::string::npos)
        << e.what();
  }
}

TEST_F(PositionDir, ADirectoryEntryIsSyncedOrTheReasonSaid) {
  fs::create_directories(dir_);
  EXPECT_NO_THROW(sync_directory_entry((dir_ / "new-file").string()));
  EXPECT_NO_THROW(sync_directory_entry(dir_.string() + "/"));
  EXPECT_NO_THROW(sync_directory_entry("relative-name"));
  try {
    sync_directory_entry((dir_ / "missing" / "file").string());
    FAIL() << "synced a directory that is not there";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open directory " + (dir_ / "missing").string()),
              std::string::npos)
        << e.what();
  }
}

// Every `hoprelay send` run is an origin of its own: a taker that outlives more runs than a
// slot holds forgets the one taken least recently, an ended stream first, and goes on (it
// stopped for good at the first origin too many).
TEST_F(PositionDir, MoreOriginsThanASlotHoldsForgetTheLeastRecentlyTakenEndedOnesFirst) {
  constexpr uint32_t kMax = PositionFile::kMaxOrigins;
  {
    PositionFile p(dir_.string());
    for (uint32_t o = 1; o <= kMax; ++o) EXPECT_FALSE(p.take(o, 5, o).has_value());
    p.end(7, 6);      // origin 7's stream ended (and 7 is now the one used last)
    p.take(1, 6, 0);  // origin 1 taken again: now among the most recent
    p.commit();
    EXPECT_EQ(p.origins(), kMax);
    // A new origin: the ended stream goes, however recent.
    EXPECT_EQ(p.take(kMax + 1, 0, 1), std::optional<uint32_t>(7));
    // Then the least recently taken: 2 (1 was taken again).
    EXPECT_EQ(p.take(kMax + 2, 0, 2), std::optional<uint32_t>(2));
    p.commit();
  }
  // The order of use survives a restart: the next to go is 3.
  PositionFile p(dir_.string());
  EXPECT_EQ(p.origins(), kMax);
  EXPECT_EQ(p.next(7), 0u);
  EXPECT_EQ(p.next(2), 0u);
  EXPECT_EQ(p.next(1), 7u);
  EXPECT_EQ(p.next(3), 6u);
  EXPECT_EQ(p.next(kMax + 2), 1u);
  EXPECT_EQ(p.take(kMax + 3, 0, 3), std::optional<uint32_t>(3));
  EXPECT_TRUE(p.ended().empty());
}

// What a taker may take: below the position it opened with, a replay of an earlier run's; in
// this run, a late message (a round-robin split that joined again), except one too far behind
// the newest to be anything but a repeat (the deduplication window).
TEST_F(PositionDir, BelowThePositionOpenedWithIsAReplayALateMessageOfThisRunIsNot) {
  {
    PositionFile p(dir_.string());
    p.take(7, 9, 100);
    p.end(8, 4);
    p.commit();
  }
  PositionFile p(dir_.string());
  EXPECT_TRUE(p.had(7, 0));
  EXPECT_TRUE(p.had(7, 9));
  EXPECT_FALSE(p.had(7, 10));
  p.take(7, 20, 200);
  p.take(7, 30, 300);
  EXPECT_TRUE(p.had(7, 9));    // still an earlier run's
  EXPECT_FALSE(p.had(7, 15));  // late: taken when it comes
  EXPECT_TRUE(p.had(7, 20));   // this run's, again
  EXPECT_TRUE(p.had(7, 30));
  p.take(7, 15, 350);
  EXPECT_TRUE(p.had(7, 15));
  EXPECT_EQ(p.next(7), 31u);
  EXPECT_FALSE(p.had(5, 0));  // an origin new to this run
  const uint64_t far = PositionFile::kReorder + 1000;
  p.take(5, far, 400);
  EXPECT_FALSE(p.had(5, far - PositionFile::kReorder + 64));
  EXPECT_TRUE(p.had(5, 10));  // further behind the newest than any reorder a node lets through
  // The window slides with the newest, by whole words, and what it slid over is forgotten:
  // far + 1 is one word further than far - kReorder + 64 and was taken; 2 * far is not.
  p.take(5, far + 1, 410);
  for (uint64_t seq = far + 2; seq < 3 * far; seq += 997) EXPECT_FALSE(p.had(5, seq)) << seq;
  p.take(5, 3 * far, 420);
  EXPECT_TRUE(p.had(5, far + 1));  // now behind by more than kReorder: a repeat
  EXPECT_TRUE(p.had(5, 3 * far));
  EXPECT_FALSE(p.had(5, 3 * far - 1));
  EXPECT_FALSE(p.had(5, 3 * far - PositionFile::kReorder + 64));
  // A late message below an end mark is of the stream that ended: the end stays.
  p.take(8, 2, 500);
  ASSERT_EQ(p.ended().size(), 1u);
  EXPECT_EQ(p.ended()[0], (std::pair<uint32_t, uint64_t>{8, 4}));
  p.take(8, 4, 600);  // one past it: a new stream
  EXPECT_TRUE(p.ended().empty());
  EXPECT_EQ(p.next(8), 5u);
  // An end mark alone moves the position, and takes nothing: below it is not had, nor past
  // the window of what was taken (its bits would alias a taken one's).
  p.end(6, 100);
  EXPECT_FALSE(p.had(6, 50));
  p.take(9, 5, 700);
  p.end(9, 70000);
  EXPECT_FALSE(p.had(9, 65541));  // ring word 0, bit 5: where seq 5 is
  EXPECT_TRUE(p.had(9, 5));
  // A late copy of an end mark (one per branch) below a newer stream's message ends nothing.
  p.take(9, 70000, 800);
  p.end(9, 70000);
  for (const auto& [origin, seq] : p.ended()) EXPECT_NE(origin, 9u) << seq;
  // Near 2^64 (a producer's --first-seq): the window does not wrap.
  const uint64_t top = UINT64_MAX - 63;
  p.take(10, top, 900);
  p.take(10, top - 136, 910);
  EXPECT_TRUE(p.had(10, top));
  EXPECT_TRUE(p.had(10, top - 136));
  EXPECT_FALSE(p.had(10, top - 1));
  p.take(10, UINT64_MAX, 920);
  EXPECT_EQ(p.next(10), UINT64_MAX);  // saturates: it does not wrap to 0
}

// had() and take() remember where the last origin's entries are: an origin opened with, one
// new to the run, one forgotten and one that comes back are each told apart as before.
TEST_F(PositionDir, TheOriginRememberedFromTheMessageBeforeIsNeverStale) {
  constexpr uint32_t kMax = PositionFile::kMaxOrigins;
  {
    PositionFile p(dir_.string());
    p.take(1, 10, 0);
    p.commit();
  }
  PositionFile p(dir_.string());
  EXPECT_TRUE(p.had(1, 10));  // opened with
  EXPECT_FALSE(p.had(2, 0));  // new to the run: no entry yet
  p.take(2, 0, 1);            // the same origin again: now it has one, and took 0
  EXPECT_TRUE(p.had(2, 0));
  EXPECT_FALSE(p.had(2, 1));
  EXPECT_TRUE(p.had(1, 9));
  for (uint32_t o = 3; o <= kMax; ++o) p.take(o, 5, o);
  // Origin 1, taken least recently, is the next to go: asked about just before.
  EXPECT_TRUE(p.had(1, 10));
  EXPECT_EQ(p.take(kMax + 1, 7, 0), std::optional<uint32_t>(1));
  EXPECT_FALSE(p.had(1, 10)) << "forgotten: taken again, should it come";
  EXPECT_EQ(p.next(1), 0u);
  EXPECT_TRUE(p.had(kMax + 1, 7));
  EXPECT_EQ(p.take(1, 10, 0), std::optional<uint32_t>(2));  // back, as new: 2 goes
  EXPECT_TRUE(p.had(1, 10));
  EXPECT_FALSE(p.had(1, 9)) << "not opened with any more, and not taken in this run";
  EXPECT_FALSE(p.had(2, 0));
  EXPECT_EQ(p.origins(), kMax);
}

TEST_F(PositionDir, ADirectoryThatCannotBeCreatedIsReported) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  try {
    PositionFile p((dir_ / "file" / "sub").string());
    FAIL() << "opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hoprelay::stages
