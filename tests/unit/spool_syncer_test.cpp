// The spools' sync thread (spool_syncer.h): a batch is synced off the loop and reported on it,
// one batch at a time, a sync that fails is reported with its errno, and every descriptor
// handed over is closed.
#include "hoprelay/daemon/spool_syncer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "hoprelay/transport/event_loop.h"

namespace hoprelay::daemon {
namespace {

namespace fs = std::filesystem;

class SpoolSyncerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hoprelay-syncer-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A file written and not synced, opened as the spool opens its segments.
  int written_file(const std::string& name) {
    const int fd = ::open((dir_ / name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, "spooled", 7), 7);
    return fd;
  }
  static bool open_fd(int fd) { return ::fcntl(fd, F_GETFD) != -1; }
  // Runs the loop until `done` ran (at most 10 s of iterations).
  void run_until_done(transport::EventLoop& loop) {
    for (int i = 0; i < 1000 && results_ == 0; ++i) loop.run_once(std::chrono::milliseconds(10));
  }

  fs::path dir_;
  int results_ = 0;
  int error_ = -1;
};

TEST_F(SpoolSyncerTest, ABatchIsSyncedOffTheLoopReportedOnItAndItsDescriptorsClosed) {
  transport::EventLoop loop;
  SpoolSyncer syncer(loop, [this](int error) {
    ++results_;
    error_ = error;
  });
  EXPECT_FALSE(syncer.start());  // an empty batch: nothing to hand over
  const int a = written_file("a");
  const int b = written_file("b");
  const int d = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(d, 0);
  syncer.files().push_back(a);
  syncer.files().push_back(b);
  syncer.dirs().push_back(d);
  ASSERT_TRUE(syncer.start());
  EXPECT_TRUE(syncer.busy());
  EXPECT_FALSE(syncer.start());  // one batch at a time
  EXPECT_EQ(results_, 0);        // reported on the loop, not from the thread
  run_until_done(loop);
  EXPECT_EQ(results_, 1);
  EXPECT_EQ(error_, 0);
  EXPECT_FALSE(syncer.busy());
  EXPECT_FALSE(open_fd(a));
  EXPECT_FALSE(open_fd(b));
  EXPECT_FALSE(open_fd(d));
  EXPECT_TRUE(syncer.files().empty());
  EXPECT_TRUE(syncer.dirs().empty());
  // The next batch goes the same way.
  syncer.files().push_back(written_file("c"));
  ASSERT_TRUE(syncer.start());
  results_ = 0;
  run_until_done(loop);
  EXPECT_EQ(results_, 1);
  EXPECT_EQ(error_, 0);
}

TEST_F(SpoolSyncerTest, ASyncThatFailsIsReportedWithItsErrnoAndTheRestIsStillSyncedAndClosed) {
  transport::EventLoop loop;
  SpoolSyncer syncer(loop, [this](int error) {
    ++results_;
    error_ = error;
  });
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const int good = written_file("good");
  syncer.files().push_back(pipe_fds[0]);  // fdatasync(2) on a pipe: EINVAL
  syncer.files().push_back(good);
  ASSERT_TRUE(syncer.start());
  run_until_done(loop);
  EXPECT_EQ(results_, 1);
  EXPECT_EQ(error_, EINVAL);
  EXPECT_FALSE(open_fd(pipe_fds[0]));
  EXPECT_FALSE(open_fd(good));
  ::close(pipe_fds[1]);
}

TEST_F(SpoolSyncerTest, DestroyedWithABatchInFlightOrOneNotHandedOverClosesEveryDescriptor) {
  transport::EventLoop loop;
  const int a = written_file("a");
  const int b = written_file("b");
  {
    SpoolSyncer syncer(loop, [this](int) { ++results_; });
    syncer.files().push_back(a);
    ASSERT_TRUE(syncer.start());
  }  // joins after the sync: `done` never runs, the loop did not
  EXPECT_EQ(results_, 0);
  EXPECT_FALSE(open_fd(a));
  {
    SpoolSyncer syncer(loop, [this](int) { ++results_; });
    syncer.files().push_back(b);
  }
  EXPECT_FALSE(open_fd(b));
}

}  // namespace
}  // namespace hoprelay::daemon
