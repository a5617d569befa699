// A doorbell between two threads: one sleeps until a condition holds, the other rings after it
// may have made it hold. For the rare waits between an event loop and a thread it talks to
// through lock-free rings (spsc_ring.h): a ring full, a close waiting for the other side. The
// sleeper sleeps in the kernel (std::atomic::wait: a futex), never spinning on a core the
// other side may need; a ring with nobody asleep is one read-modify-write, no system call.
//
// Why it cannot miss a wake-up: the sleeper counts itself in before it tests its condition,
// and the ringer changes the condition before it reads that count with a read-modify-write on
// the same word. Either the ringer sees the sleeper (and moves the word the sleeper waits on),
// or the sleeper's count-in came later in that word's order, acquired the ringer's change, and
// finds its condition true. No standalone fence (ThreadSanitizer checks none).
//
// One sleeper at a time per doorbell; any thread may ring.
#pragma once

#include <atomic>
#include <cstdint>

namespace hoprelay {

class Doorbell {
 public:
  // Returns once ready() is true, sleeping in between; ready() runs on this thread, first at
  // once and again after every ring (it may do work: take what the other side produced).
  template <typename Ready>
  void sleep_until(Ready&& ready) {
    sleepers_.fetch_add(1, std::memory_order_acq_rel);
    for (;;) {
      const uint32_t seen = rings_.load(std::memory_order_acquire);
      if (ready()) break;
      rings_.wait(seen, std::memory_order_acquire);
    }
    sleepers_.fetch_sub(1, std::memory_order_acq_rel);
  }

  // After a change a sleeper may wait for.
  void ring() {
    if (sleepers_.fetch_add(0, std::memory_order_acq_rel) == 0) return;
    rings_.fetch_add(1, std::memory_order_acq_rel);
    rings_.notify_all();
  }

 private:
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint32_t> rings_{0};
};

}  // namespace hoprelay
