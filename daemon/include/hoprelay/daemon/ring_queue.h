// A FIFO of pointers on a power-of-two ring. It grows (doubling) only when it must, so after the
// first moments of a run it never allocates: the node's per-downstream queues are bounded by
// the slots of its inbound links anyway.
#pragma once

#include <cstddef>
#include <vector>

namespace hoprelay::daemon {

template <class T>
class RingQueue {
 public:
  explicit RingQueue(size_t capacity = 64) : items_(round_up(capacity)) {}

  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& front() { return items_[head_ & mask()]; }
  void pop_front() { ++head_; }
  void push_back(T v) {
    if (size() == items_.size()) grow();
    items_[tail_++ & mask()] = v;
  }
  void push_front(T v) {
    if (size() == items_.size()) grow();
    items_[--head_ & mask()] = v;
  }
  void clear() { head_ = tail_ = 0; }
  // The i-th item from the front.
  T& at(size_t i) { return items_[(head_ + i) & mask()]; }
  // Moves the i-th item to the front, the ones before it back by one: O(i).
  void move_to_front(size_t i) {
    T v = at(i);
    for (; i > 0; --i) at(i) = at(i - 1);
    front() = v;
  }

 private:
  static size_t round_up(size_t n) {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
  }
  size_t mask() const { return items_.size() - 1; }
  void grow() {
    std::vector<T> bigger(items_.size() * 2);
    for (size_t i = 0; i < size(); ++i) bigger[i] = items_[(head_ + i) & mask()];
    tail_ = size();
    head_ = 0;
    items_.swap(bigger);
  }

  std::vector<T> items_;
  // Free-running counters; size_t wrap-around keeps the arithmetic right.
  size_t head_ = 0;
  size_t tail_ = 0;
};

}  // namespace hoprelay::daemon
