// An eventfd on an event loop, for the threads that feed that loop through a ring: notify()
// from any thread wakes the loop, whose thread then reads the counter and runs `on_wake`
// once, however many notifications came before it ran. The flag that spares a system call
// per item (notify only when the loop may be asleep) stays with the ring's owner, which pairs
// it with its own data (link_threads.cpp, stage_workers.cpp).
#pragma once

#include <functional>

#include "hoprelay/transport/event_loop.h"

namespace hoprelay::transport {

class EventFdWakeup final : public EventLoop::Handler {
 public:
  // Registers with `loop` (TransportError when no eventfd can be had); `on_wake` runs on the
  // loop's thread.
  EventFdWakeup(EventLoop& loop, std::function<void()> on_wake);
  ~EventFdWakeup();
  EventFdWakeup(const EventFdWakeup&) = delete;
  EventFdWakeup& operator=(const EventFdWakeup&) = delete;

  // Any thread; never blocks (the counter is full only when the loop is awake anyway).
  void notify() const;
  void on_io(uint32_t events) override;

 private:
  EventLoop& loop_;
  std::function<void()> on_wake_;
  int fd_;
};

}  // namespace hoprelay::transport
