// file-sink: a leaf that appends each message to a file as a record
// [u32 little-endian length][payload]. Each record is handed to the kernel (one writev) before
// the stage returns, because returning is what acknowledges the message upstream: a crash of
// hoprelayd loses no acknowledged record.
//
// Two parameters choose how much more it promises (docs/stages.md, "file-sink"):
//   fsync = "always"    each record is made durable (fdatasync) before it is acknowledged,
//                       so a power loss loses none either; "interval": once a second.
//   state_dir = DIR     exactly once across crashes: DIR holds the position (per origin, what
//                       was written, and the file's length at that point; position_file.h),
//                       recorded after each record and before the acknowledgement. A copy of
//                       a message the position has (an upstream replaying what this sink took
//                       but had not acknowledged when it died) is consumed, not written again;
//                       a restarted sink first cuts the file back to the recorded length (a
//                       record written, its position not yet: it comes again).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

#include "builtin.h"
#include "hoprelay/stages/position_file.h"

namespace hoprelay::stages {
namespace {

class FileSink {
 public:
  explicit FileSink(const StageArgs& args) : path_(args.get_or("path", "")) {
    if (path_.empty()) throw std::invalid_argument("file-sink needs a path parameter");
    const std::string fsync = args.get_or("fsync", "");
    if (fsync == "always") {
      always_ = true;
    } else if (fsync == "interval") {
      interval_ = true;
    } else if (!fsync.empty()) {
      throw std::invalid_argument("file-sink fsync = \"" + fsync +
                                  "\": use \"always\" (each record durable before it is "
                                  "acknowledged) or \"interval\" (once a second)");
    }
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), "cannot open " + path_);
    }
    try {
      length_ = file_size();
      // Durable records need a durable name: the records file, if this open created it.
      if (always_ || interval_ || !args.get_or("state_dir", "").empty()) {
        sync_directory_entry(path_);
      }
    } catch (...) {
      ::close(fd_);
      throw;
    }
    const std::string state_dir = args.get_or("state_dir", "");
    if (!state_dir.empty()) {
      try {
        positions_ = std::make_unique<PositionFile>(state_dir);
        resume(args);
      } catch (...) {
        ::close(fd_);
        throw;
      }
    }
  }
  ~FileSink() {
    try {
      flush();
    } catch (...) {
      // Shutting down: what was not made durable is what a power loss could take anyway.
    }
    ::close(fd_);
  }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  hoprelay_verdict process(hoprelay_msg& m) {
    if (!broken_.empty()) return HOPRELAY_ERROR;  // last_error() says why, for every message
    if (m.flags & HOPRELAY_MSG_ZSTD) {
      error_ = kCompressedPayload;  // a record of compressed bytes would read as the message
      return HOPRELAY_ERROR;
    }
    if (positions_ && positions_->had(m.origin, m.seq)) {
      // Written before, by this run or one before it: delivered, so consumed, not written
      // again. (A late message of a split that joins again is not "had": it is written.)
      return HOPRELAY_FORWARD;
    }
    uint32_t len = m.length;
    iovec iov[2] = {{&len, 4}, {m.data, m.length}};
    size_t left = 4 + size_t{m.length};
    int first = 0;
    while (left > 0) {
      ssize_t w = ::writev(fd_, iov + first, 2 - first);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return fail("cannot write " + path_, w < 0 ? errno : ENOSPC);
      left -= static_cast<size_t>(w);
      // A short write (rare, regular files): advance the iovecs past what went out.
      for (size_t done = static_cast<size_t>(w); done > 0 && first < 2;) {
        size_t step = std::min(done, iov[first].iov_len);
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + step;
        iov[first].iov_len -= step;
        done -= step;
        if (iov[first].iov_len == 0) ++first;
      }
    }
    // The record before its position: a crash between the two leaves a record that the
    // restart cuts off and the upstream sends again.
    if (always_ && ::fdatasync(fd_) != 0) {
      return fail("cannot make durable (fdatasync) " + path_, errno);
    }
    length_ += 4 + uint64_t{m.length};
    if (positions_) {
      positions_->take(m.origin, m.seq, length_);
      try {
        positions_->commit(always_);
      } catch (const std::exception& e) {
        // The position now runs ahead of what was recorded: nothing more can be taken
        // exactly once by this run. Every message is an error until a restart after the
        // fix; this one is reported dropped, and its record goes.
        length_ -= 4 + uint64_t{m.length};
        broken_ = std::string("state_dir: ") + e.what() + " (fix it and restart the node)";
        error_ = broken_;
        (void)::ftruncate(fd_, static_cast<off_t>(length_));
        return HOPRELAY_ERROR;
      }
    }
    // FORWARD from a leaf means "consumed": the node has nowhere further to send it.
    return HOPRELAY_FORWARD;
  }

  void flush() {
    if (!interval_ || sync_failed_) return;
    try {
      // The records first, then the position that counts them.
      if (::fdatasync(fd_) != 0) {
        throw std::system_error(errno, std::generic_category(),
                                "cannot make durable (fdatasync) " + path_);
      }
      if (positions_) positions_->commit(true);
    } catch (const std::exception& e) {
      // What was acknowledged since the last flush may not be on disk, and the kernel reports
      // a lost write-back once: taking more would acknowledge more such records. Every later
      // message is an error, which the node counts and its producer hears of.
      sync_failed_ = true;
      broken_ = std::string(e.what()) +
                ": the records of the last second may not be on disk (fix it and restart the "
                "node)";
      error_ = broken_;
    }
  }

  const char* last_error() const { return error_.c_str(); }

 private:
  // Back to the last recorded position: the file's length then, and what was taken.
  void resume(const StageArgs& args) {
    const uint64_t size = file_size();
    const uint64_t recorded = positions_->app();
    length_ = size;
    if (positions_->fresh()) {
      // A new state directory: the file is as it is, and that length is recorded now.
      positions_->start_at(size);
      positions_->commit(true);
      return;
    }
    if (size > recorded) {
      if (::ftruncate(fd_, static_cast<off_t>(recorded)) != 0 || ::fdatasync(fd_) != 0) {
        throw std::system_error(errno, std::generic_category(), "cannot cut back " + path_);
      }
      length_ = recorded;
      args.log(HOPRELAY_LOG_INFO, "resuming " + path_ + " at " + std::to_string(recorded) +
                                      " bytes: the " + std::to_string(size - recorded) +
                                      " bytes after its recorded position are cut off (they "
                                      "come again from upstream)");
    } else if (size < recorded) {
      // Only a power loss under fsync = "interval" (or a hand on the file) does this: the
      // records of the last second are gone, and upstream no longer has them.
      args.log(HOPRELAY_LOG_WARN,
               path_ + " is " + std::to_string(recorded - size) +
                   " bytes shorter than its recorded position: the records written last "
                   "before a power loss are lost (fsync = \"always\" prevents that)");
    } else {
      args.log(HOPRELAY_LOG_INFO, "resuming " + path_ + " at " + std::to_string(size) + " bytes");
    }
  }

  uint64_t file_size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw std::system_error(errno, std::generic_category(), path_);
    return static_cast<uint64_t>(st.st_size);
  }

  // A record that did not go out whole is cut off, so the file stays a sequence of records.
  hoprelay_verdict fail(const std::string& why, int err) {
    error_ = why + ": " + std::strerror(err);
    if (::ftruncate(fd_, static_cast<off_t>(length_)) != 0) {
      broken_ = error_ + "; and it cannot be cut back to its last whole record";
      error_ = broken_;
    }
    return HOPRELAY_ERROR;  // counted, and reported to the producer as a stage_error
  }

  std::string path_;
  int fd_ = -1;
  bool sync_failed_ = false;  // a flush failed: what it would sync again may be gone
  bool always_ = false;
  bool interval_ = false;
  uint64_t length_ = 0;  // of the file, as this sink wrote it
  std::unique_ptr<PositionFile> positions_;
  std::string broken_;
  std::string error_;
};

constexpr const char* kKeys[] = {"path", "fsync", "state_dir", nullptr};
constexpr auto kDescriptor =
    BuiltinAdaptor<FileSink>::make("file-sink", kKeys, HOPRELAY_STAGE_LOCAL);

}  // namespace

const hoprelay_stage_descriptor* file_sink_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
