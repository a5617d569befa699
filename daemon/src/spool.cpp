#include "hoprelay/daemon/spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "hoprelay/stages/pattern.h"
#include "hoprelay/stages/position_file.h"  // sync_directory_entry

namespace hoprelay::daemon {
namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // host order: a spool never leaves its host
  return v;
}
template <class T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Record header: magic u32 | length u32 | origin u32 | chunk u32 | seq u64 | appended_ns i64 |
// flags u16 | reserved u16 | crc u32, the CRC32C of bytes 0..35 and then the payload.
constexpr uint32_t kRecordMagic = 0x50535248;  // "HRSP"
constexpr size_t kCrcAt = 36;
// File header: magic[8] | version u32 | reserved u32 | first u64 | crc u32 (of bytes 0..23) |
// reserved u32.
constexpr char kFileMagic[8] = {'H', 'R', 'S', 'P', 'O', 'O', 'L', '\0'};
constexpr uint32_t kVersion = 1;
constexpr char kSuffix[] = ".spool";
constexpr size_t kNameDigits = 20;

std::runtime_error sys_error(const std::string& what, const std::string& path, int err) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(err));
}

std::string segment_name(uint64_t first) {
  char name[kNameDigits + sizeof kSuffix];
  std::snprintf(name, sizeof name, "%020llu%s", static_cast<unsigned long long>(first), kSuffix);
  return name;
}

// pread of exactly n bytes: false on an error (errno) or the end of the file (errno 0).
bool read_exact(int fd, void* buf, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

uint32_t header_crc(const std::byte* h, std::span<const std::byte> payload) {
  return stages::crc32c(payload, stages::crc32c({h, kCrcAt}));
}

}  // namespace

Spool::Spool(std::string dir, Limits limits) : dir_(std::move(dir)), limits_(limits) {
  if (limits_.window == 0) limits_.window = 1;
  limits_.segment_bytes = std::max<uint64_t>(limits_.segment_bytes, kFileHeader + kRecordHeader);
  bool created = false;
  if (::mkdir(dir_.c_str(), 0750) == 0) {
    created = true;
  } else if (errno != EEXIST) {
    throw sys_error("cannot create the spool directory", dir_, errno);
  }
  dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) throw sys_error("cannot open the spool directory", dir_, errno);
  in_flight_.resize(limits_.window);
  try {
    if (created) stages::sync_directory_entry(dir_);
    const std::string consumed = dir_ + "/consumed";
    consumed_fd_ = ::open(consumed.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (consumed_fd_ < 0) throw sys_error("cannot open", consumed, errno);
    recover();
  } catch (...) {
    for (auto& s : segments_) ::close(s.fd);
    if (consumed_fd_ >= 0) ::close(consumed_fd_);
    ::close(dir_fd_);
    throw;
  }
}

Spool::~Spool() {
  if (consumed_fd_ >= 0) write_consumed();
  for (auto& s : segments_) ::close(s.fd);
  if (consumed_fd_ >= 0) ::close(consumed_fd_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

bool Spool::scan(Segment& s, uint64_t& good, int64_t& first_ns) {
  good = kFileHeader;
  std::vector<std::byte> payload;
  std::byte h[kRecordHeader];
  while (good < s.size) {
    if (s.size - good < kRecordHeader || !read_exact(s.fd, h, kRecordHeader, good)) return false;
    const uint32_t length = load<uint32_t>(h + 4);
    if (load<uint32_t>(h) != kRecordMagic || length > kMaxPayload ||
        s.size - good - kRecordHeader < length) {
      return false;
    }
    payload.resize(length);
    if (!read_exact(s.fd, payload.data(), length, good + kRecordHeader)) return false;
    if (header_crc(h, payload) != load<uint32_t>(h + kCrcAt)) return false;
    if (s.count == 0) first_ns = load<int64_t>(h + 24);
    good += kRecordHeader + length;
    ++s.count;
  }
  return true;
}

void Spool::recover() {
  std::vector<uint64_t> firsts;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) throw sys_error("cannot list the spool directory", dir_, errno);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() != kNameDigits + sizeof kSuffix - 1 || !name.ends_with(kSuffix)) continue;
    if (!std::all_of(name.begin(), name.begin() + kNameDigits, ::isdigit)) continue;
    firsts.push_back(std::stoull(name.substr(0, kNameDigits)));
  }
  ::closedir(d);
  std::sort(firsts.begin(), firsts.end());

  uint64_t consumed = 0;
  {
    std::byte c[16];
    if (read_exact(consumed_fd_, c, sizeof c, 0) &&
        stages::crc32c({c, 8}) == load<uint32_t>(c + 8)) {
      consumed = load<uint64_t>(c);
    }
  }

  const std::string fix =
      ": move the spool directory aside to start without it (what it holds "
      "is then lost for its branch) or restore it";
  for (size_t i = 0; i < firsts.size(); ++i) {
    const bool last = i + 1 == firsts.size();
    Segment s;
    s.first = firsts[i];
    s.path = dir_ + "/" + segment_name(s.first);
    s.fd = ::open(s.path.c_str(), O_RDWR | O_CLOEXEC);
    if (s.fd < 0) throw sys_error("cannot open spool segment", s.path, errno);
    struct stat st {};
    if (::fstat(s.fd, &st) != 0) {
      const int err = errno;
      ::close(s.fd);
      throw sys_error("cannot stat spool segment", s.path, err);
    }
    s.size = static_cast<uint64_t>(st.st_size);
    std::byte h[kFileHeader];
    const bool header_ok = read_exact(s.fd, h, kFileHeader, 0) &&
                           std::memcmp(h, kFileMagic, sizeof kFileMagic) == 0 &&
                           load<uint32_t>(h + 8) == kVersion && load<uint64_t>(h + 16) == s.first &&
                           stages::crc32c({h, 24}) == load<uint32_t>(h + 24);
    if (!header_ok) {
      // A segment whose creation a crash cut short holds no record yet: it goes.
      if (last && s.size < kFileHeader + kRecordHeader) {
        ::close(s.fd);
        ::unlink(s.path.c_str());
        recovered_.cut_bytes += s.size;
        break;
      }
      ::close(s.fd);
      throw std::runtime_error("spool segment " + s.path + " has no valid header" + fix);
    }
    if (!segments_.empty()) {
      const Segment& prev = segments_.back();
      if (prev.first + prev.count != s.first) {
        ::close(s.fd);
        throw std::runtime_error(
            "spool " + dir_ + ": records " + std::to_string(prev.first + prev.count) + " to " +
            std::to_string(s.first - 1) + " are missing before " + s.path + fix);
      }
    }
    uint64_t good = 0;
    int64_t first_ns = 0;
    if (!scan(s, good, first_ns)) {
      if (!last) {
        ::close(s.fd);
        throw std::runtime_error("spool segment " + s.path + " is damaged at byte " +
                                 std::to_string(good) + ", before its end" + fix);
      }
      // The tail of the last segment: an append a crash cut short, never made durable, so
      // never acknowledged upstream either (its upstream sends it again).
      if (::ftruncate(s.fd, static_cast<off_t>(good)) != 0) {
        const int err = errno;
        ::close(s.fd);
        throw sys_error("cannot cut the torn tail of", s.path, err);
      }
      recovered_.cut_bytes += s.size - good;
      s.size = good;
    }
    bytes_ += s.size;
    segments_.push_back(s);
  }

  if (segments_.empty()) {
    first_ = read_ = end_ = consumed;
    return;
  }
  end_ = segments_.back().first + segments_.back().count;
  first_ = std::clamp(consumed, segments_.front().first, end_);
  // Where first_ is: one header read per record before it in its segment (at open only).
  first_at_ = {0, kFileHeader};
  uint64_t index = segments_.front().first;
  while (index < first_) {
    normalize(first_at_);
    Segment& s = segments_[first_at_.segment];
    if (index == s.first + s.count) continue;  // normalize() moves on
    if (index < s.first) break;                // cannot happen: segments are contiguous
    uint32_t length = 0;
    int64_t ns = 0;
    if (!peek(first_at_, length, ns)) break;
    first_at_.offset += kRecordHeader + length;
    ++index;
  }
  normalize(first_at_);
  read_ = first_;
  read_at_ = first_at_;
  drop_consumed();
  if (empty()) drop_all();  // consumed before the crash, not yet deleted
  uint32_t length = 0;
  if (!empty()) peek(first_at_, length, oldest_ns_);
  recovered_.records = records();
  recovered_.segments = static_cast<uint32_t>(segments_.size());
}

void Spool::normalize(Cursor& c) const {
  while (c.segment + 1 < segments_.size() && c.offset >= segments_[c.segment].size) {
    ++c.segment;
    c.offset = kFileHeader;
  }
}

bool Spool::peek(const Cursor& c, uint32_t& length, int64_t& appended_ns) const {
  const Segment& s = segments_[c.segment];
  std::byte h[kRecordHeader];
  if (c.offset + kRecordHeader > s.size || !read_exact(s.fd, h, kRecordHeader, c.offset)) {
    return false;
  }
  length = load<uint32_t>(h + 4);
  appended_ns = load<int64_t>(h + 24);
  return load<uint32_t>(h) == kRecordMagic && length <= kMaxPayload;
}

void Spool::drop_consumed() {
  while (segments_.size() > 1 && first_at_.segment > 0) {
    Segment& s = segments_.front();
    ::close(s.fd);
    ::unlink(s.path.c_str());  // not synced: a segment found again is consumed again
    bytes_ -= s.size;
    segments_.pop_front();
    --first_at_.segment;
    read_at_.segment = read_at_.segment > 0 ? read_at_.segment - 1 : 0;
  }
}

Spool::Status Spool::roll() {
  Segment s;
  s.first = end_;
  s.path = dir_ + "/" + segment_name(s.first);
  s.fd = ::open(s.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  if (s.fd < 0) return fail(errno);
  std::byte h[kFileHeader] = {};
  std::memcpy(h, kFileMagic, sizeof kFileMagic);
  store<uint32_t>(h + 8, kVersion);
  store<uint64_t>(h + 16, s.first);
  store<uint32_t>(h + 24, stages::crc32c({h, 24}));
  const ssize_t n = ::pwrite(s.fd, h, kFileHeader, 0);
  if (n != static_cast<ssize_t>(kFileHeader)) {
    const int err = n < 0 ? errno : ENOSPC;
    ::close(s.fd);
    ::unlink(s.path.c_str());
    return fail(err);
  }
  s.size = kFileHeader;
  s.dirty = true;
  const bool was_empty = segments_.empty();
  segments_.push_back(std::move(s));
  bytes_ += kFileHeader;
  dir_dirty_ = true;
  if (was_empty) {
    first_at_ = read_at_ = {0, kFileHeader};
  } else {
    normalize(first_at_);
    normalize(read_at_);
    drop_consumed();
  }
  return Status::kOk;
}

Spool::Status Spool::append(const SpoolRecord& r) {
  if (r.payload.size() > kMaxPayload) return fail(EMSGSIZE);
  const uint64_t need = kRecordHeader + r.payload.size();
  const bool new_segment =
      segments_.empty() ||
      (segments_.back().count > 0 && segments_.back().size + need > limits_.segment_bytes);
  if (limits_.max_bytes != 0 &&
      bytes_ + need + (new_segment ? kFileHeader : 0) > limits_.max_bytes) {
    return Status::kFull;
  }
  if (new_segment) {
    if (Status st = roll(); st != Status::kOk) return st;
  }
  Segment& s = segments_.back();
  std::byte h[kRecordHeader];
  store<uint32_t>(h, kRecordMagic);
  store<uint32_t>(h + 4, static_cast<uint32_t>(r.payload.size()));
  store<uint32_t>(h + 8, r.origin);
  store<uint32_t>(h + 12, r.chunk);
  store<uint64_t>(h + 16, r.seq);
  store<int64_t>(h + 24, r.appended_ns);
  store<uint16_t>(h + 32, r.flags);
  store<uint16_t>(h + 34, 0);
  store<uint32_t>(h + kCrcAt, header_crc(h, r.payload));
  iovec iov[2] = {{h, kRecordHeader}, {const_cast<std::byte*>(r.payload.data()), r.payload.size()}};
  uint64_t done = 0;
  while (done < need) {
    // Past the header (or a part of the payload) on a short write.
    iovec part[2];
    int parts = 0;
    uint64_t skip = done;
    for (const iovec& v : iov) {
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      part[parts++] = {static_cast<char*>(v.iov_base) + skip, v.iov_len - skip};
      skip = 0;
    }
    const ssize_t n = ::pwritev(s.fd, part, parts, static_cast<off_t>(s.size + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // Cut back what went in, so the segment ends at its last whole record. Should that fail
      // too, the next append writes over it from s.size, and an open cuts what is left over.
      [[maybe_unused]] const int cut = ::ftruncate(s.fd, static_cast<off_t>(s.size));
      return fail(err);
    }
    done += static_cast<uint64_t>(n);
  }
  s.size += need;
  ++s.count;
  s.dirty = true;
  bytes_ += need;
  if (empty()) oldest_ns_ = r.appended_ns;
  ++end_;
  return Status::kOk;
}

Spool::Status Spool::sync() {
  for (auto it = segments_.rbegin(); it != segments_.rend() && it->dirty; ++it) {
    if (::fdatasync(it->fd) != 0) return fail(errno);
    it->dirty = false;
  }
  if (dir_dirty_) {
    // EINVAL: a file system without directory sync (fsync(2)): nothing to wait for.
    if (::fsync(dir_fd_) != 0 && errno != EINVAL) return fail(errno);
    dir_dirty_ = false;
  }
  return Status::kOk;
}

Spool::Status Spool::take_unsynced(std::vector<int>& files, std::vector<int>& dirs) {
  const size_t files_before = files.size();
  const size_t dirs_before = dirs.size();
  const auto undo = [&](int err) {
    for (size_t i = files_before; i < files.size(); ++i) ::close(files[i]);
    for (size_t i = dirs_before; i < dirs.size(); ++i) ::close(dirs[i]);
    files.resize(files_before);
    dirs.resize(dirs_before);
    return fail(err);
  };
  auto it = segments_.rbegin();
  for (; it != segments_.rend() && it->dirty; ++it) {
    const int fd = ::fcntl(it->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return undo(errno);
    files.push_back(fd);
  }
  if (dir_dirty_) {
    const int fd = ::fcntl(dir_fd_, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return undo(errno);
    dirs.push_back(fd);
  }
  for (auto clean = segments_.rbegin(); clean != it; ++clean) clean->dirty = false;
  dir_dirty_ = false;
  return Status::kOk;
}

void Spool::sync_failed(int err) {
  // Which of them failed is not known here: every segment is synced again (a clean one's
  // fdatasync costs next to nothing), and the directory.
  for (Segment& s : segments_) s.dirty = true;
  dir_dirty_ = true;
  error_ = err;
}

Spool::Status Spool::read(SpoolRecord& out, std::span<std::byte> buffer) {
  if (read_ == end_) return Status::kEmpty;
  if (read_ - first_ >= limits_.window) return Status::kWindow;
  normalize(read_at_);
  const Segment& s = segments_[read_at_.segment];
  std::byte h[kRecordHeader];
  if (!read_exact(s.fd, h, kRecordHeader, read_at_.offset)) return fail(errno ? errno : EIO);
  const uint32_t length = load<uint32_t>(h + 4);
  if (load<uint32_t>(h) != kRecordMagic || length > kMaxPayload) return fail(EIO);
  if (length > buffer.size()) return fail(EMSGSIZE);
  if (!read_exact(s.fd, buffer.data(), length, read_at_.offset + kRecordHeader)) {
    return fail(errno ? errno : EIO);
  }
  const auto payload = buffer.first(length);
  if (header_crc(h, payload) != load<uint32_t>(h + kCrcAt)) return fail(EIO);
  out.origin = load<uint32_t>(h + 8);
  out.chunk = load<uint32_t>(h + 12);
  out.seq = load<uint64_t>(h + 16);
  out.appended_ns = load<int64_t>(h + 24);
  out.flags = load<uint16_t>(h + 32);
  out.payload = payload;
  in_flight_[read_ % limits_.window] = static_cast<uint32_t>(kRecordHeader + length);
  read_at_.offset += kRecordHeader + length;
  ++read_;
  return Status::kOk;
}

void Spool::unread_last() {
  if (read_ == first_) return;
  --read_;
  read_at_.offset -= in_flight_[read_ % limits_.window];  // read() left it in that segment
}

void Spool::rewind() {
  read_ = first_;
  read_at_ = first_at_;
}

Spool::Status Spool::consume(uint64_t n) {
  n = std::min(n, read_ahead());
  if (n == 0) return Status::kOk;
  for (uint64_t i = 0; i < n; ++i) {
    normalize(first_at_);
    first_at_.offset += in_flight_[first_ % limits_.window];
    ++first_;
  }
  normalize(first_at_);
  drop_consumed();
  // Caught up: nothing on disk (the next append starts a segment).
  if (empty()) {
    drop_all();
    return Status::kOk;
  }
  uint32_t length = 0;
  if (!empty() && !peek(first_at_, length, oldest_ns_)) return fail(errno ? errno : EIO);
  return Status::kOk;
}

uint64_t Spool::discard() {
  const uint64_t n = records();
  first_ = read_ = end_;
  drop_all();
  write_consumed();
  return n;
}

void Spool::drop_all() {
  for (auto& s : segments_) {
    ::close(s.fd);
    ::unlink(s.path.c_str());
  }
  segments_.clear();
  bytes_ = 0;
  first_at_ = read_at_ = {};
}

void Spool::write_consumed() {
  std::byte c[16] = {};
  store<uint64_t>(c, first_);
  store<uint32_t>(c + 8, stages::crc32c({c, 8}));
  // Not synced, and a failure is not one: a stale position only sends again what the branch
  // had (the header).
  [[maybe_unused]] const ssize_t n = ::pwrite(consumed_fd_, c, sizeof c, 0);
}

}  // namespace hoprelay::daemon
