#include "hoprelay/daemon/hot_counters.h"

#include <prometheus/counter.h>

#include <vector>

namespace hoprelay::daemon {

HotCounters::Ref HotCounters::wrap(prometheus::Counter& counter) {
  auto [it, added] = by_counter_.try_emplace(&counter, nullptr);
  if (added) {
    entries_.push_back(Entry{&counter});
    it->second = &entries_.back();
  }
  return Ref(this, it->second);
}

void HotCounters::forget(prometheus::Counter& counter) {
  auto it = by_counter_.find(&counter);
  if (it == by_counter_.end()) return;
  Entry* e = it->second;
  if (e->dirty) std::erase(dirty_, e);
  *e = Entry{};
  by_counter_.erase(it);
}

void HotCounters::flush() {
  for (Entry* e : dirty_) {
    e->counter->Increment(static_cast<double>(e->pending));
    e->pending = 0;
    e->dirty = false;
  }
  dirty_.clear();
}

}  // namespace hoprelay::daemon
