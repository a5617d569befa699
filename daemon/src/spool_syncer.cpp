#include "hoprelay/daemon/spool_syncer.h"

#include <unistd.h>

#include <cerrno>

namespace hoprelay::daemon {

SpoolSyncer::SpoolSyncer(transport::EventLoop& loop, Done done) : done_(std::move(done)) {
  wakeup_ = std::make_unique<transport::EventFdWakeup>(loop, [this] { finished(); });
  files_.reserve(16);
  dirs_.reserve(16);
  thread_ = std::thread([this] { run(); });
}

SpoolSyncer::~SpoolSyncer() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_one();
  thread_.join();
  // A batch never handed over, or one whose `done` never ran: nothing synced is lost by
  // closing (the appends are in the files; what was not synced is not acknowledged).
  for (int fd : files_) ::close(fd);
  for (int fd : dirs_) ::close(fd);
}

bool SpoolSyncer::start() {
  if (busy_ || (files_.empty() && dirs_.empty())) return false;
  busy_ = true;
  {
    std::lock_guard lock(mutex_);
    given_ = true;
  }
  work_.notify_one();
  return true;
}

void SpoolSyncer::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return given_ || stop_; });
    if (!given_) return;  // stopped, nothing handed over
    lock.unlock();
    // The vectors are the thread's until `given_` is cleared: the loop touches them only when
    // not busy(), and busy() clears only in finished(), after the wake-up below.
    int error = 0;
    for (int fd : files_) {
      if (::fdatasync(fd) != 0 && error == 0) error = errno;
      ::close(fd);
    }
    for (int fd : dirs_) {
      // EINVAL: a file system without directory sync (fsync(2)): nothing to wait for.
      if (::fsync(fd) != 0 && errno != EINVAL && error == 0) error = errno;
      ::close(fd);
    }
    files_.clear();
    dirs_.clear();
    lock.lock();
    given_ = false;
    error_ = error;
    wakeup_->notify();
    if (stop_) return;
  }
}

void SpoolSyncer::finished() {
  int error = 0;
  {
    std::lock_guard lock(mutex_);
    if (given_ || !busy_) return;  // a spurious wake-up: the batch is still syncing
    error = error_;
  }
  busy_ = false;
  done_(error);
}

}  // namespace hoprelay::daemon
