#include "hoprelay/daemon/dedup.h"

#include <algorithm>

namespace hoprelay::daemon {
namespace {
constexpr uint64_t kWords = DedupTable::kWindow / 64;
}

DedupTable::Window& DedupTable::window_for(uint32_t origin, uint64_t seq) {
  if (last_ && last_origin_ == origin) return *last_;  // the common case: same origin again
  auto it = windows_.find(origin);
  if (it == windows_.end()) {
    if (windows_.size() >= max_origins_) evict_oldest();
    Window w;
    // The first sequence number seen goes at the top of the window, not at its bottom: the
    // table knows nothing of this origin yet (a restarted node, a forgotten origin), and
    // replays along other branches of a diamond may bring older messages after it. Taken
    // as new they cost at worst a repeat; taken as repeats they would be lost.
    w.base = seq + 64 >= kWindow ? (seq + 64 - kWindow) & ~uint64_t{63} : 0;
    w.bits.assign(kWords, 0);
    it = windows_.emplace(origin, std::move(w)).first;
  }
  last_origin_ = origin;
  last_ = &it->second;
  return it->second;
}

void DedupTable::evict_oldest() {
  auto oldest = windows_.begin();
  for (auto it = windows_.begin(); it != windows_.end(); ++it) {
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  }
  if (last_ == &oldest->second) last_ = nullptr;
  windows_.erase(oldest);
}

bool DedupTable::seen(uint32_t origin, uint64_t seq) {
  Window& w = window_for(origin, seq);
  if (seq < w.base) return true;
  if (seq >= w.base + kWindow) return false;
  return (w.bits[(seq / 64) % kWords] >> (seq % 64)) & 1;
}

bool DedupTable::first_time(uint32_t origin, uint64_t seq) {
  Window& w = window_for(origin, seq);
  w.last_use = ++clock_;
  if (seq < w.base) return false;
  if (seq >= w.base + kWindow) {
    // Slide forward so that seq is the newest position; words that leave the window are
    // cleared as they are reused by the ring.
    uint64_t new_base = (seq - kWindow + 64) & ~uint64_t{63};
    uint64_t shift = (new_base - w.base) / 64;
    for (uint64_t i = 0; i < std::min(shift, kWords); ++i) {
      w.bits[(w.base / 64 + i) % kWords] = 0;
    }
    w.base = new_base;
  }
  uint64_t& word = w.bits[(seq / 64) % kWords];
  uint64_t bit = uint64_t{1} << (seq % 64);
  if (word & bit) return false;
  word |= bit;
  w.next = std::max(w.next, seq + 1);
  return true;
}

uint64_t DedupTable::next_seq(uint32_t origin) const {
  auto it = windows_.find(origin);
  return it == windows_.end() ? 0 : it->second.next;
}

}  // namespace hoprelay::daemon
