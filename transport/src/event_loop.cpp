#include "hoprelay/transport/event_loop.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <system_error>

namespace hoprelay::transport {

EventLoop::EventLoop() : epfd_(epoll_create1(EPOLL_CLOEXEC)) {
  if (epfd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  deferred_.reserve(64);
  running_deferred_.reserve(64);
}

EventLoop::~EventLoop() {
  ::close(epfd_);
}

void EventLoop::add(int fd, uint32_t events, Handler* handler) {
  epoll_event ev{events, {.ptr = handler}};
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
    throw std::system_error(errno, std::generic_category(), "epoll_ctl(ADD)");
  }
}

void EventLoop::modify(int fd, uint32_t events, Handler* handler) {
  epoll_event ev{events, {.ptr = handler}};
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) < 0) {
    throw std::system_error(errno, std::generic_category(), "epoll_ctl(MOD)");
  }
}

void EventLoop::remove(int fd) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
}

EventLoop::TimerId EventLoop::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  TimerId id = next_timer_++;
  auto deadline = Clock::now() + delay;
  timers_.emplace(std::make_pair(deadline, id), std::move(fn));
  timer_deadlines_.emplace(id, deadline);
  return id;
}

void EventLoop::cancel(TimerId id) {
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return;
  timers_.erase({it->second, id});
  timer_deadlines_.erase(it);
}

void EventLoop::defer(std::function<void()> fn) {
  deferred_.push_back(std::move(fn));
}

void EventLoop::run_timers() {
  auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    timer_deadlines_.erase(node.key().second);
    node.mapped()();
  }
}

void EventLoop::run_deferred() {
  // Deferred work may defer more work; run until quiet.
  while (!deferred_.empty()) {
    running_deferred_.swap(deferred_);
    for (auto& fn : running_deferred_) fn();
    running_deferred_.clear();
  }
}

void EventLoop::update_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  now_ns_ = uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

void EventLoop::run_once(std::chrono::milliseconds timeout) {
  update_now();
  // Busy polling: with a poller the completion queues are not armed, so nothing would wake
  // epoll for them; spinning (TCP) the sockets are in epoll but a wake-up is what busy mode
  // avoids. Either way epoll only looks, without waiting. The timers below still run on every
  // iteration, so spinning never starves them.
  if (poller_) poller_();
  int wait_ms = busy() ? 0 : static_cast<int>(timeout.count());
  if (!timers_.empty()) {
    auto until = std::chrono::duration_cast<std::chrono::milliseconds>(
                     timers_.begin()->first.first - Clock::now())
                     .count() +
                 1;
    if (until < wait_ms || wait_ms < 0) wait_ms = static_cast<int>(std::max<int64_t>(0, until));
  }
  epoll_event events[64];
  int n = epoll_wait(epfd_, events, 64, wait_ms);
  if (n < 0 && errno != EINTR)
    throw std::system_error(errno, std::generic_category(), "epoll_wait");
  if (n > 0) update_now();
  for (int i = 0; i < n; ++i) static_cast<Handler*>(events[i].data.ptr)->on_io(events[i].events);
  run_deferred();
  run_timers();
  run_deferred();
}

void EventLoop::run() {
  while (!stopped_) run_once(std::chrono::milliseconds(1000));
}

}  // namespace hoprelay::transport
