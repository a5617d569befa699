// file-sink: a leaf that appends each message to a file as a record
// [u32 little-endian length][payload]. Buffered in user space (one write per MiB, not per
// message); flush() pushes the buffer to the kernel once a second and at shutdown.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

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
    buffer_.reserve(kBufferSize);
  }
  ~FileSink() {
    flush();
    ::close(fd_);
  }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  hoprelay_verdict process(hoprelay_msg& m) {
    if (buffer_.size() + 4 + m.length > kBufferSize && !drain()) return HOPRELAY_ERROR;
    uint32_t len = m.length;
    if (4 + size_t{len} > kBufferSize) {  // larger than the buffer: write straight through
      return write_all(reinterpret_cast<const char*>(&len), 4) &&
                     write_all(reinterpret_cast<const char*>(m.data), len)
                 ? HOPRELAY_FORWARD
                 : HOPRELAY_ERROR;
    }
    buffer_.insert(buffer_.end(), reinterpret_cast<const char*>(&len),
                   reinterpret_cast<const char*>(&len) + 4);
    buffer_.insert(buffer_.end(), m.data, m.data + len);
    // FORWARD from a leaf means "consumed": the node has nowhere further to send it.
    return HOPRELAY_FORWARD;
  }
  void flush() { drain(); }

 private:
  static constexpr size_t kBufferSize = 1 << 20;

  bool drain() {
    bool ok = write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
    return ok;
  }
  bool write_all(const char* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  std::string path_;
  int fd_ = -1;
  std::vector<char> buffer_;
};

constexpr const char* kKeys[] = {"path", nullptr};
constexpr auto kDescriptor = BuiltinAdaptor<FileSink>::make("file-sink", kKeys);

}  // namespace

const hoprelay_stage_descriptor* file_sink_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
