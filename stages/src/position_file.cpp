#include "hoprelay/stages/position_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "hoprelay/stages/pattern.h"

namespace hoprelay::stages {
namespace {

template <class T>
T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // little-endian hosts (x86, ARM), as the wire format
  return v;
}
template <class T>
void store_le(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Slot layout (little-endian): magic[8] | generation u64 | app u64 | count u32 | crc u32 |
// count x (origin u32 | flags u32 (1: the stream ended at next) | next u64). The CRC32C covers the
// slot from byte 0 to the end of the entries, with the crc field taken as 0.
constexpr char kMagic[8] = {'H', 'R', 'P', 'O', 'S', '1', 0, 0};
constexpr size_t kHeader = 32;
constexpr size_t kEntry = 16;

std::runtime_error sys_error(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

void sync_directory_entry(const std::string& entry) {
  std::string path = entry;
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // "state/" names "state"
  const auto slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw sys_error("cannot open directory", dir);
  // EINVAL: a file system that has no directory sync (as fsync(2) allows): nothing to wait for.
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL;
  const int err = errno;
  ::close(fd);
  errno = err;
  if (!ok) throw sys_error("cannot make durable (fsync)", dir);
}

PositionFile::PositionFile(const std::string& dir) : path_(dir + "/positions") {
  bool created_dir = false;
  if (::mkdir(dir.c_str(), 0750) == 0) {
    created_dir = true;
  } else if (errno != EEXIST) {
    throw sys_error("cannot create", dir);
  }
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd_ < 0) throw sys_error("cannot open", path_);
  try {
    // Once per start: the directory and the file in it survive a power loss from here on.
    if (created_dir) sync_directory_entry(dir);
    sync_directory_entry(path_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  buf_.resize(kSlotBytes);
  uint64_t best = 0;
  bool found = false;
  int written = 0;  // slots a commit began (their magic is there)
  for (int i = 0; i < 2; ++i) {
    std::vector<std::byte> slot(kSlotBytes);
    ssize_t n = ::pread(fd_, slot.data(), kSlotBytes, off_t(i) * off_t(kSlotBytes));
    if (n < 0) {
      auto e = sys_error("cannot read", path_);
      ::close(fd_);
      fd_ = -1;
      throw e;
    }
    if (size_t(n) < kHeader) continue;
    if (std::memcmp(slot.data(), kMagic, sizeof kMagic) == 0) ++written;
    uint64_t generation = 0;
    auto saved = entries_;
    uint64_t saved_app = app_;
    if (load_slot(slot, generation) && (!found || generation > best)) {
      best = generation;
      found = true;
    } else {
      entries_ = std::move(saved);
      app_ = saved_app;
    }
  }
  if (!found && written == 2) {
    // Both slots were committed once, and neither reads back: not a first commit torn by a
    // crash (that leaves the other slot unwritten), but a damaged file, or a power loss while
    // both slots were unsynced (commit(false): file-sink's fsync other than "always").
    // Starting afresh would take everything again, silently: the operator decides.
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(
        "damaged: " + path_ +
        " (neither of its two slots reads back: a checksum, or a value out of range; restore it "
        "from a backup, or remove it to start afresh: every message still held upstream is then "
        "taken again)");
  }
  generation_ = best;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    index_[it->origin] = it;
    opened_[it->origin] = it->next;
  }
}

PositionFile::~PositionFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool PositionFile::load_slot(const std::vector<std::byte>& slot, uint64_t& generation) {
  if (std::memcmp(slot.data(), kMagic, sizeof kMagic) != 0) return false;
  generation = load_le<uint64_t>(slot.data() + 8);
  const uint64_t app = load_le<uint64_t>(slot.data() + 16);
  const uint32_t count = load_le<uint32_t>(slot.data() + 24);
  const uint32_t crc = load_le<uint32_t>(slot.data() + 28);
  if (count > kMaxOrigins) return false;
  std::vector<std::byte> check(slot.begin(), slot.begin() + long(kHeader + count * kEntry));
  store_le<uint32_t>(check.data() + 28, 0);
  if (crc32c(check) != crc) return false;  // torn or damaged: the other slot counts
  std::list<Entry> entries;
  for (uint32_t i = 0; i < count; ++i) {
    const std::byte* e = slot.data() + kHeader + i * kEntry;
    const uint32_t flags = load_le<uint32_t>(e + 4);
    if (flags > 1) return false;
    entries.push_back({load_le<uint32_t>(e), load_le<uint64_t>(e + 8), flags == 1});
  }
  entries_ = std::move(entries);
  app_ = app;
  return true;
}

PositionFile::Cached& PositionFile::cached(uint32_t origin) {
  if (cache_valid_ && cached_.origin == origin) return cached_;  // the common case
  cached_.origin = origin;
  const auto entry = index_.find(origin);
  cached_.entry = entry == index_.end() ? entries_.end() : entry->second;
  const auto opened = opened_.find(origin);
  cached_.opened = opened == opened_.end() ? nullptr : &opened->second;
  const auto taken = taken_.find(origin);
  cached_.taken = taken == taken_.end() ? nullptr : &taken->second;
  cache_valid_ = true;
  return cached_;
}

PositionFile::Entry& PositionFile::use(uint32_t origin, std::optional<uint32_t>& forgot) {
  Cached& c = cached(origin);
  if (c.entry != entries_.end()) {
    entries_.splice(entries_.end(), entries_, c.entry);  // no allocation
    return *c.entry;
  }
  if (entries_.size() >= kMaxOrigins) {
    auto victim =
        std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.ended; });
    if (victim == entries_.end()) victim = entries_.begin();
    // Not `origin`, which has no entry (nor, then, one in opened_ or taken_): the cache, now
    // origin's, keeps pointing at live nodes.
    forgot = victim->origin;
    index_.erase(victim->origin);
    opened_.erase(victim->origin);  // taken again, should its messages come (the header)
    taken_.erase(victim->origin);
    entries_.erase(victim);
  }
  entries_.push_back({origin, 0, false});
  c.entry = std::prev(entries_.end());
  index_[origin] = c.entry;
  return *c.entry;
}

bool PositionFile::had(uint32_t origin, uint64_t seq) {
  const Cached& c = cached(origin);
  if (c.opened && seq < *c.opened) return true;
  if (c.entry == entries_.end() || seq >= c.entry->next) return false;  // (next() is 0)
  if (!c.taken) return false;  // none taken in this run (an end mark moved next)
  // Below the window: too far behind the newest to be anything but a repeat. Past it: an end
  // mark moved next, and what lies there was not taken.
  return c.taken->test(seq);
}

void PositionFile::mark_taken(uint32_t origin, uint64_t seq) {
  Cached& c = cached(origin);
  // Everything below the position as opened is had anyway: the window starts at the
  // newest's reach.
  if (!c.taken) c.taken = &taken_.try_emplace(origin, seq).first->second;
  c.taken->set(seq);  // too far behind the newest: a repeat, nothing to record
}

std::optional<uint32_t> PositionFile::take(uint32_t origin, uint64_t seq, uint64_t app) {
  std::optional<uint32_t> forgot;
  Entry& n = use(origin, forgot);
  // A late message below an end mark (a split that joins again) is still of the stream that
  // ended; only one past it starts a new stream.
  if (seq >= n.next) n.ended = false;
  n.next = std::max(n.next, seq == UINT64_MAX ? seq : seq + 1);  // (a producer's --first-seq)
  mark_taken(origin, seq);
  app_ = app;
  dirty_ = true;
  return forgot;
}

std::optional<uint32_t> PositionFile::end(uint32_t origin, uint64_t seq) {
  std::optional<uint32_t> forgot;
  Entry& n = use(origin, forgot);
  // Below the position, a late copy of an end mark (one per branch where a split joins
  // again): a newer stream of the origin may have been taken since, and is not ended.
  if (seq >= n.next) n.ended = true;
  n.next = std::max(n.next, seq);
  dirty_ = true;
  return forgot;
}

std::vector<std::pair<uint32_t, uint64_t>> PositionFile::ended() const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  for (const Entry& e : entries_) {
    if (e.ended) out.emplace_back(e.origin, e.next);
  }
  return out;
}

void PositionFile::commit(bool sync) {
  if (!dirty_) {
    if (sync && !synced_) {
      if (::fdatasync(fd_) != 0) throw sys_error("cannot make durable (fdatasync)", path_);
      synced_ = true;
    }
    return;
  }
  const uint64_t generation = generation_ + 1;
  std::memcpy(buf_.data(), kMagic, sizeof kMagic);
  store_le<uint64_t>(buf_.data() + 8, generation);
  store_le<uint64_t>(buf_.data() + 16, app_);
  store_le<uint32_t>(buf_.data() + 24, static_cast<uint32_t>(entries_.size()));
  store_le<uint32_t>(buf_.data() + 28, 0);
  size_t at = kHeader;
  for (const Entry& e : entries_) {
    store_le<uint32_t>(buf_.data() + at, e.origin);
    store_le<uint32_t>(buf_.data() + at + 4, e.ended ? 1 : 0);
    store_le<uint64_t>(buf_.data() + at + 8, e.next);
    at += kEntry;
  }
  store_le<uint32_t>(buf_.data() + 28, crc32c(std::span(buf_).first(at)));
  // Only the bytes the CRC covers: what lies beyond them in the slot is never read. A
  // file-sink commits once per message, so this is one small write, not the slot.
  const off_t where = off_t(generation % 2) * off_t(kSlotBytes);
  if (::pwrite(fd_, buf_.data(), at, where) != ssize_t(at)) throw sys_error("cannot write", path_);
  synced_ = false;
  if (sync) {
    if (::fdatasync(fd_) != 0) throw sys_error("cannot make durable (fdatasync)", path_);
    synced_ = true;
  }
  generation_ = generation;
  dirty_ = false;
}

}  // namespace hoprelay::stages
