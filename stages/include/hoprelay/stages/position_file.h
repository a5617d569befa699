// A durable position (docs/client.md, "Exactly once into the application"): per origin, one
// past the highest sequence number taken, and one number of the taker's own (the length of
// its output file at that point). Two takers keep one: libhoprelay's consumer, for the
// application behind it, and the file-sink stage (stages.md, state_dir).
//
// The taker records what it took, makes it durable (commit: one write and one fdatasync) and
// only then lets the acknowledgements go upstream. Restarted, it loads the position and drops
// what was taken already, whatever else restarted with it.
//
// On disk: two fixed slots written in turn, each with a generation and a CRC32C, so a commit
// torn by a power loss leaves the previous one readable.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace hoprelay::stages {

class PositionFile {
 public:
  // Opens (creates) DIR/positions and loads the last complete commit. Throws std::runtime_error
  // worded for the operator (a directory that cannot be created or written, a damaged file).
  explicit PositionFile(const std::string& dir);
  ~PositionFile();
  PositionFile(const PositionFile&) = delete;
  PositionFile& operator=(const PositionFile&) = delete;

  // One past the highest sequence number of `origin` taken (0: none).
  uint64_t next(uint32_t origin) const {
    auto it = next_.find(origin);
    return it == next_.end() ? 0 : it->second.next;
  }
  uint64_t app() const { return app_; }
  size_t origins() const { return next_.size(); }

  // The application took (origin, seq); `app` is its own position after it.
  void take(uint32_t origin, uint64_t seq, uint64_t app);
  // The stream of `origin` ended after the messages before `seq` (until a later message).
  void end(uint32_t origin, uint64_t seq);
  // The origins whose stream ended, with the end mark's seq.
  std::vector<std::pair<uint32_t, uint64_t>> ended() const;
  bool dirty() const { return dirty_; }
  // Writes what was taken since the last commit and, with `sync`, fdatasyncs it. Without, it
  // survives a crash of the process (the kernel has it) but not a power loss until the next
  // synced commit. Throws std::runtime_error.
  void commit(bool sync = true);

  static constexpr size_t kSlotBytes = 32 * 1024;
  static constexpr size_t kMaxOrigins = (kSlotBytes - 32) / 16;

 private:
  bool load_slot(const std::vector<std::byte>& slot, uint64_t& generation);

  std::string path_;
  int fd_ = -1;
  uint64_t generation_ = 0;
  uint64_t app_ = 0;
  bool dirty_ = false;
  struct Entry {
    uint64_t next = 0;
    bool ended = false;
  };
  std::unordered_map<uint32_t, Entry> next_;
  std::vector<std::byte> buf_;  // one slot, reused by every commit
  bool synced_ = true;          // the last write was made durable
};

}  // namespace hoprelay::stages
