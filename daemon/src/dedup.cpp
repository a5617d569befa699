#include "hoprelay/daemon/dedup.h"

#include <algorithm>

namespace hoprelay::daemon {

DedupTable::Window& DedupTable::window_for(uint32_t origin, uint64_t seq) {
  if (last_ && last_origin_ == origin) return *last_;  // the common case: same origin again
  auto it = windows_.find(origin);
  if (it == windows_.end()) {
    if (windows_.size() >= max_origins_) evict_oldest();
    // The first sequence number seen goes at the top of the window, not at its bottom: the
    // table knows nothing of this origin yet (a restarted node, a forgotten origin), and
    // replays along other branches of a diamond may bring older messages after it. Taken
    // as new they cost at worst a repeat; taken as repeats they would be lost.
    it = windows_.try_emplace(origin, seq).first;
  }
  last_origin_ = origin;
  last_ = &it->second;
  return it->second;
}

void DedupTable::evict_oldest() {
  pinned_now_.clear();
  if (pinned_) {
    pinned_(pinned_now_);
    std::sort(pinned_now_.begin(), pinned_now_.end());
  }
  auto oldest = windows_.end();
  for (auto it = windows_.begin(); it != windows_.end(); ++it) {
    if (oldest != windows_.end() && it->second.last_use >= oldest->second.last_use) continue;
    if (std::binary_search(pinned_now_.begin(), pinned_now_.end(), it->first)) continue;
    oldest = it;
  }
  if (oldest == windows_.end()) return;  // every origin pinned: the table grows (above)
  if (last_ == &oldest->second) last_ = nullptr;
  windows_.erase(oldest);
}

bool DedupTable::seen(uint32_t origin, uint64_t seq) const {
  if (last_ && last_origin_ == origin) return last_->taken.test(seq);
  auto it = windows_.find(origin);
  // An origin the table does not know has nothing taken: asking must not make it a window,
  // which would evict another origin, and one with last_use 0, evicted first.
  return it != windows_.end() && it->second.taken.test(seq);  // too old to tell: a repeat
}

bool DedupTable::first_time(uint32_t origin, uint64_t seq) {
  Window& w = window_for(origin, seq);
  w.last_use = ++clock_;
  // A repeat, or too old to tell (below the window): not recorded. Past the window, it slides.
  if (!w.taken.set(seq)) return false;
  // At the very top of the sequence space there is no "one past": keep UINT64_MAX, where a
  // producer resuming would find its next message a repeat, rather than wrap to 0 ("none").
  w.next = std::max(w.next, seq == UINT64_MAX ? seq : seq + 1);
  return true;
}

uint64_t DedupTable::next_seq(uint32_t origin) const {
  auto it = windows_.find(origin);
  return it == windows_.end() ? 0 : it->second.next;
}

}  // namespace hoprelay::daemon
