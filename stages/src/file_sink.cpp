// file-sink: a leaf that appends each message to a file as a record
// [u32 little-endian length][payload]. Each record is handed to the kernel (one writev) before
// the stage returns, because returning is what acknowledges the message upstream: a crash of
// hoprelayd loses no acknowledged record. (A crash of the machine can lose what the kernel had
// not written back yet: there is no fsync per message.)
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <system_error>

#include "builtin.h"

namespace hoprelay::stages {
namespace {

class FileSink {
 public:
  explicit FileSink(const StageArgs& args) : path_(args.get_or("path", "")) {
    if (path_.empty()) throw std::invalid_argument("file-sink needs a path parameter");
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), "cannot open " + path_);
    }
  }
  ~FileSink() { ::close(fd_); }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  hoprelay_verdict process(hoprelay_msg& m) {
    uint32_t len = m.length;
    iovec iov[2] = {{&len, 4}, {m.data, m.length}};
    size_t left = 4 + size_t{m.length};
    int first = 0;
    while (left > 0) {
      ssize_t w = ::writev(fd_, iov + first, 2 - first);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return HOPRELAY_ERROR;  // disk full, I/O error: counted, not acknowledged
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
    // FORWARD from a leaf means "consumed": the node has nowhere further to send it.
    return HOPRELAY_FORWARD;
  }
  void flush() {}

 private:
  std::string path_;
  int fd_ = -1;
};

constexpr const char* kKeys[] = {"path", nullptr};
constexpr auto kDescriptor = BuiltinAdaptor<FileSink>::make("file-sink", kKeys);

}  // namespace

const hoprelay_stage_descriptor* file_sink_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
