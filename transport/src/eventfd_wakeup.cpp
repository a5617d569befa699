#include "hoprelay/transport/eventfd_wakeup.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {

EventFdWakeup::EventFdWakeup(EventLoop& loop, std::function<void()> on_wake)
    : loop_(loop), on_wake_(std::move(on_wake)), fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw TransportError(std::string("eventfd: ") + std::strerror(errno));
  loop_.add(fd_, EPOLLIN, this);
}

EventFdWakeup::~EventFdWakeup() {
  loop_.remove(fd_);
  close(fd_);
}

void EventFdWakeup::notify() const {
  uint64_t one = 1;
  // EAGAIN only when the counter is about to overflow: the reader is awake then anyway.
  [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
}

void EventFdWakeup::on_io(uint32_t) {
  uint64_t n;
  [[maybe_unused]] ssize_t r = read(fd_, &n, sizeof(n));
  on_wake_();
}

}  // namespace hoprelay::transport
