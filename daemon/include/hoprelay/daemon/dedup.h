// Drops messages a node has already taken: replays after a peer or link failure resend every
// unacknowledged frame, so a downstream node can see a message twice. The table remembers, per
// origin, which sequence numbers arrived within a sliding window.
//
// Why a window is enough: every link holds at most `slots` (<= 4096) unacknowledged frames, so
// a message can arrive late, relative to later messages of its origin, only by what the links
// on its path hold. kWindow (65536, of which at least 65,472 lie below the newest: the window
// slides by whole words) covers 15 hops of the largest slot rings.
//
// Bounded memory: at most kMaxOrigins origins (8 KiB each); the one idle longest is forgotten
// first. A forgotten origin that comes back starts a fresh window, which ends at the first
// sequence number it sees: older ones still count as new (at worst a repeat, never a loss).
// So an origin is not forgotten while an upstream sender may still send a message of it again
// (pinned(): the frames whose credit has not gone back, on every inbound link): a consumer
// that holds a message while more than kMaxOrigins other origins pass would otherwise get it
// twice once its link fails. When every origin is pinned the table grows instead, by at most
// the frames the links hold (each pinned origin has one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "hoprelay/common/seq_window.h"

namespace hoprelay::daemon {

class DedupTable {
 public:
  static constexpr uint64_t kWindow = 65536;
  static constexpr size_t kMaxOrigins = 1024;

  // Appends the origins that must not be forgotten now (duplicates allowed). Called only when
  // the table is full and a new origin comes, never per message.
  using Pinned = std::function<void(std::vector<uint32_t>& out)>;

  explicit DedupTable(size_t max_origins = kMaxOrigins, Pinned pinned = nullptr)
      : max_origins_(max_origins), pinned_(std::move(pinned)) {}
  void set_pinned(Pinned pinned) { pinned_ = std::move(pinned); }

  // True the first time (origin, seq) is seen; false for a repeat, or for a sequence number
  // that fell out of the window (too old to tell: treated as a repeat).
  bool first_time(uint32_t origin, uint64_t seq);
  // Whether first_time(origin, seq) would say "repeat", without recording anything (an origin
  // it does not know stays unknown): a chunked message is recorded at its last chunk, and each
  // chunk asks whether it passed already.
  bool seen(uint32_t origin, uint64_t seq) const;
  size_t origins() const { return windows_.size(); }
  // One past the highest sequence number taken from `origin` (0: none, or forgotten): where a
  // restarted producer of that origin resumes.
  uint64_t next_seq(uint32_t origin) const;

 private:
  struct Window {
    // First asked about with `seq` (the top of a fresh window, seq_window.h says why).
    explicit Window(uint64_t seq) : taken(seq) {}
    SeqWindow<kWindow> taken;
    uint64_t last_use = 0;
    uint64_t next = 0;  // one past the highest seq taken
  };
  Window& window_for(uint32_t origin, uint64_t seq);
  void evict_oldest();

  size_t max_origins_;
  Pinned pinned_;
  std::vector<uint32_t> pinned_now_;  // evict_oldest()'s, kept for its capacity
  uint64_t clock_ = 0;
  std::unordered_map<uint32_t, Window> windows_;
  uint32_t last_origin_ = 0;
  Window* last_ = nullptr;
};

}  // namespace hoprelay::daemon
