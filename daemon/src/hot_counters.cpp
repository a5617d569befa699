#include "hoprelay/daemon/hot_counters.h"

#include <prometheus/counter.h>

namespace hoprelay::daemon {

HotCounters::Ref HotCounters::wrap(prometheus::Counter& counter) {
  auto [it, added] = by_counter_.try_emplace(&counter, nullptr);
  if (added) {
    entries_.push_back(Entry{&counter});
    it->second = &entries_.back();
  }
  return Ref(this, it->second);
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
