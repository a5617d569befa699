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
//
// A slot holds kMaxOrigins origins. Every `hoprelay send` run is a new origin unless given one,
// so a long-lived taker meets more: the one taken least recently is forgotten for the new one,
// an ended stream first. Forgetting an origin costs only a replay of its messages, should one
// still come (an upstream that took them back when a relay died): they are taken again.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hoprelay/common/seq_window.h"

namespace hoprelay::stages {

// Makes the directory entry of `path` durable: fsync of the directory that holds it. A file
// just created is not found after a power loss until its directory has been synced, whatever
// was fdatasync'ed into it. Throws std::runtime_error.
void sync_directory_entry(const std::string& path);

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
    auto it = index_.find(origin);
    return it == index_.end() ? 0 : it->second->next;
  }
  // Whether (origin, seq) is one the taker had: a replay, to be consumed and not taken again.
  // Below the position this file held when it was opened: taken by an earlier run. Above it,
  // what this run took, one bit per sequence number over the last kReorder below the newest:
  // a round-robin split that joins again delivers an origin's messages out of order, and
  // taking "below the highest" for "had it" consumed the late ones unwritten. Further behind
  // than that is a repeat (as the node's deduplication judges, DedupTable::kWindow).
  // Not const: it remembers where the origin's entries are, for the take() that follows.
  bool had(uint32_t origin, uint64_t seq);
  static constexpr uint64_t kReorder = 65536;
  uint64_t app() const { return app_; }
  size_t origins() const { return entries_.size(); }
  // Nothing was ever committed here (a new directory).
  bool fresh() const { return generation_ == 0; }
  // Records `app` with no origin taken yet (commit() makes it durable): a taker that starts on
  // an existing file records its length at once, so that a crash before its first message's
  // commit is cut back to it rather than taken for a new directory again.
  void start_at(uint64_t app) {
    app_ = app;
    dirty_ = true;
  }

  // The application took (origin, seq), in any order; `app` is its own position after it.
  // Returns the origin forgotten to make room for a new one (the header above), if one was.
  std::optional<uint32_t> take(uint32_t origin, uint64_t seq, uint64_t app);
  // The stream of `origin` ended after the messages before `seq` (until a later message).
  std::optional<uint32_t> end(uint32_t origin, uint64_t seq);
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
  struct Entry {
    uint32_t origin = 0;
    uint64_t next = 0;
    bool ended = false;
  };
  bool load_slot(const std::vector<std::byte>& slot, uint64_t& generation);
  // origin's entry, now the most recently used; a new one may forget another (`forgot`).
  Entry& use(uint32_t origin, std::optional<uint32_t>& forgot);

  std::string path_;
  int fd_ = -1;
  uint64_t generation_ = 0;
  uint64_t app_ = 0;
  bool dirty_ = false;
  // Least recently used first: the order a commit writes them in and a load reads them back.
  std::list<Entry> entries_;
  std::unordered_map<uint32_t, std::list<Entry>::iterator> index_;
  std::unordered_map<uint32_t, uint64_t> opened_;  // next() of each origin when opened
  // What this run took of an origin, over the last kReorder below the newest. 8 KiB,
  // allocated at an origin's first message of the run (not per message).
  std::unordered_map<uint32_t, SeqWindow<kReorder>> taken_;
  void mark_taken(uint32_t origin, uint64_t seq);
  // Where the last origin asked about keeps its entries above: a taker's messages come mostly
  // from one origin in a row, and each asks had() then take(), which would be up to five hash
  // lookups; with this, one comparison. They point at list and map nodes, which neither a
  // splice nor a rehash moves; an erase frees them, and use() erases only an origin other than
  // the one cached.
  struct Cached {
    uint32_t origin = 0;
    std::list<Entry>::iterator entry;      // entries_.end(): none (next() is 0)
    const uint64_t* opened = nullptr;      // opened_'s: null, none
    SeqWindow<kReorder>* taken = nullptr;  // taken_'s: null, none taken in this run
  };
  Cached& cached(uint32_t origin);  // looked up unless it is the one cached
  Cached cached_;
  bool cache_valid_ = false;  // cached_ describes cached_.origin

  std::vector<std::byte> buf_;  // one slot, reused by every commit
  bool synced_ = true;          // the last write was made durable
};

}  // namespace hoprelay::stages
