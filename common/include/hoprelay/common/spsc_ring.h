// A bounded single-producer, single-consumer queue: one thread pushes, one other thread pops,
// with no lock and no allocation after construction (the data path's rule). Each side keeps a
// cached copy of the other side's index, so a push or a pop touches the shared cache line only
// when the cached view says the ring is full or empty (the usual Lamport ring, as in DPDK's
// rte_ring in SP/SC mode or folly's ProducerConsumerQueue).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <vector>

namespace hoprelay {

template <typename T>
class SpscRing {
 public:
  // `capacity`: rounded up to a power of two. Throws std::invalid_argument for 0.
  explicit SpscRing(size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("SpscRing: capacity 0");
    size_t n = 1;
    while (n < capacity) n <<= 1;
    items_.resize(n);
    mask_ = n - 1;
  }
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  size_t capacity() const { return mask_ + 1; }

  // Producer only. False, with nothing queued, when the ring is full.
  bool push(const T& item) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_cached_ > mask_) {
      head_cached_ = head_.load(std::memory_order_acquire);
      if (tail - head_cached_ > mask_) return false;
    }
    items_[tail & mask_] = item;
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. False when the ring is empty.
  bool pop(T& item) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_cached_) {
      tail_cached_ = tail_.load(std::memory_order_acquire);
      if (head == tail_cached_) return false;
    }
    item = items_[head & mask_];
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer only: whether nothing is queued (a fresh read of the producer's index).
  bool empty() const {
    return head_.load(std::memory_order_relaxed) == tail_.load(std::memory_order_acquire);
  }

 private:
  std::vector<T> items_;
  size_t mask_ = 0;
  // Written by the consumer; the producer's cached copy of it.
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) uint64_t head_cached_ = 0;
  // Written by the producer; the consumer's cached copy of it.
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) uint64_t tail_cached_ = 0;
};

}  // namespace hoprelay
