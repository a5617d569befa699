// Counters the data path bumps for every message. A prometheus::Counter is an atomic
// compare-and-swap loop on a double; five of those per message were 11% of a relay's CPU at
// 64-byte messages. Here the data path adds to a plain integer (the event loop is the only
// writer), and the sums reach prometheus once per loop iteration: a scrape is at most one
// iteration behind.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <vector>

namespace prometheus {
class Counter;
}

namespace hoprelay::daemon {

class HotCounters {
  struct Entry {
    prometheus::Counter* counter = nullptr;
    uint64_t pending = 0;
    bool dirty = false;
  };

 public:
  // A handle the data path adds to. Copyable; stays valid as long as its HotCounters.
  class Ref {
   public:
    Ref() = default;
    void add(uint64_t n = 1) {
      entry_->pending += n;
      if (!entry_->dirty) owner_->mark(*entry_);
    }
    explicit operator bool() const { return entry_ != nullptr; }

   private:
    friend class HotCounters;
    Ref(HotCounters* owner, Entry* entry) : owner_(owner), entry_(entry) {}
    HotCounters* owner_ = nullptr;
    Entry* entry_ = nullptr;
  };

  HotCounters() { dirty_.reserve(64); }
  HotCounters(const HotCounters&) = delete;
  HotCounters& operator=(const HotCounters&) = delete;

  // The handle for `counter` (the same entry each time it is asked for).
  Ref wrap(prometheus::Counter& counter);
  // Called when the first counter of an iteration is added to: schedule flush() (the node
  // defers it to the end of the loop iteration).
  void on_first_add(std::function<void()> fn) { schedule_ = std::move(fn); }
  // Hands every pending sum to its prometheus counter.
  void flush();
  // The counter is about to go (its series removed): its entry is dropped, what it had pending
  // with it. Every Ref to it must be gone already. The entry's memory stays (handles point into
  // a deque), a few bytes per series removed.
  void forget(prometheus::Counter& counter);

 private:
  void mark(Entry& e) {
    e.dirty = true;
    if (dirty_.empty() && schedule_) schedule_();
    dirty_.push_back(&e);
  }

  std::deque<Entry> entries_;  // stable addresses: handles point into it
  std::unordered_map<prometheus::Counter*, Entry*> by_counter_;
  std::vector<Entry*> dirty_;
  std::function<void()> schedule_;
};

}  // namespace hoprelay::daemon
