#include "hoprelay/daemon/partials.h"

namespace hoprelay::daemon {

Partial* PartialTable::find(uint32_t origin, uint64_t seq) {
  if (last_ && last_->used && last_->origin == origin && last_->seq == seq) {
    last_->last_use = ++clock_;
    return last_;
  }
  for (auto& p : entries_) {
    if (p.used && p.origin == origin && p.seq == seq) {
      p.last_use = ++clock_;
      last_ = &p;
      return &p;
    }
  }
  return nullptr;
}

Partial& PartialTable::oldest() {
  Partial* oldest = nullptr;
  for (auto& p : entries_) {
    if (!p.used) continue;
    if (p.mode == Partial::Mode::kDiscard) return p;  // costs nothing to forget
    if (!oldest || p.last_use < oldest->last_use) oldest = &p;
  }
  return *oldest;
}

Partial& PartialTable::open(uint32_t origin, uint64_t seq) {
  for (auto& p : entries_) {
    if (p.used) continue;
    p = Partial{};
    p.used = true;
    p.origin = origin;
    p.seq = seq;
    p.last_use = ++clock_;
    ++used_;
    last_ = &p;
    return p;
  }
  return entries_.front();  // unreachable: callers check full() first
}

void PartialTable::close(Partial& p) {
  if (!p.used) return;
  p.used = false;
  --used_;
}

}  // namespace hoprelay::daemon
