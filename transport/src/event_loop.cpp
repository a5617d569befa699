#include "hoprelay/transport/event_loop.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <system_error>

namespace hoprelay::transport {

// The timerfd only wakes epoll; run_once() runs due timers by their deadlines as always.
class EventLoop::TimerFd final : public Handler {
 public:
  explicit TimerFd(int fd) : fd_(fd) {}
  void on_io(uint32_t) override {
    uint64_t expirations;
    [[maybe_unused]] auto n = ::read(fd_, &expirations, sizeof expirations);
  }

 private:
  int fd_;
};

EventLoop::EventLoop() : epfd_(epoll_create1(EPOLL_CLOEXEC)) {
  if (epfd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  deferred_.reserve(64);
  running_deferred_.reserve(64);
  spare_timers_.reserve(64);
  spare_deadlines_.reserve(64);
}

EventLoop::~EventLoop() {
  if (timer_fd_ >= 0) ::close(timer_fd_);
  ::close(epfd_);
}

void EventLoop::set_pollable(bool pollable) {
  if (pollable == (timer_fd_ >= 0)) return;
  if (!pollable) {
    remove(timer_fd_);
    ::close(timer_fd_);
    timer_fd_ = -1;
    timer_handler_.reset();
    return;
  }
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd_ < 0) throw std::system_error(errno, std::generic_category(), "timerfd_create");
  timer_handler_ = std::make_unique<TimerFd>(timer_fd_);
  add(timer_fd_, EPOLLIN, timer_handler_.get());
  armed_ = {};
  arm_timer_fd();
}

void EventLoop::arm_timer_fd() {
  if (timer_fd_ < 0) return;
  Clock::time_point next = timers_.empty() ? Clock::time_point{} : timers_.begin()->first.first;
  // Work deferred between iterations (an application's release) makes the descriptor readable
  // now: a deadline in the past, which has expired already.
  if (!in_iteration_ && !deferred_.empty()) next = Clock::time_point{std::chrono::nanoseconds(1)};
  if (next == armed_) return;
  armed_ = next;
  itimerspec spec{};
  if (next != Clock::time_point{}) {
    // steady_clock is CLOCK_MONOTONIC: the deadline as an absolute time of the timerfd's clock.
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(next.time_since_epoch()).count();
    if (ns <= 0) ns = 1;
    spec.it_value.tv_sec = ns / 1'000'000'000;
    spec.it_value.tv_nsec = ns % 1'000'000'000;
  }
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
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
  // The nodes of timers that fired or were cancelled are kept and reused: the links re-arm
  // their liveness timers all the time under traffic, and a map node allocated per arming
  // would make the data path allocate.
  if (spare_timers_.empty()) {
    timers_.emplace(std::make_pair(deadline, id), std::move(fn));
  } else {
    auto node = std::move(spare_timers_.back());
    spare_timers_.pop_back();
    node.key() = {deadline, id};
    node.mapped() = std::move(fn);
    timers_.insert(std::move(node));
  }
  if (spare_deadlines_.empty()) {
    timer_deadlines_.emplace(id, deadline);
  } else {
    auto node = std::move(spare_deadlines_.back());
    spare_deadlines_.pop_back();
    node.key() = id;
    node.mapped() = deadline;
    timer_deadlines_.insert(std::move(node));
  }
  arm_timer_fd();
  return id;
}

void EventLoop::cancel(TimerId id) {
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return;
  auto timer = timers_.extract({it->second, id});
  spare_deadlines_.push_back(timer_deadlines_.extract(it));
  // The callback's captures die last, once the timer is gone from both maps: a capture whose
  // destructor cancels this timer again (or arms another) finds a consistent loop.
  std::function<void()> fn = std::move(timer.mapped());
  spare_timers_.push_back(std::move(timer));
}

void EventLoop::defer(std::function<void()> fn) {
  deferred_.push_back(std::move(fn));
  // Between iterations, with a pollable loop: the first such work wakes the descriptor, or it
  // would wait for the next timer (libhoprelay: an application that releases messages
  // outside recv and then polls). Within an iteration it runs before the iteration ends.
  if (timer_fd_ >= 0 && !in_iteration_ && deferred_.size() == 1) arm_timer_fd();
}

void EventLoop::run_timers() {
  auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    spare_deadlines_.push_back(timer_deadlines_.extract(node.key().second));
    // The nodes are spare before the callback runs: a timer that re-arms itself (the links'
    // probes) takes its own nodes back.
    std::function<void()> fn = std::move(node.mapped());
    spare_timers_.push_back(std::move(node));
    fn();
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

namespace {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

}  // namespace

void EventLoop::update_now() {
  now_ns_ = monotonic_ns();
}

void EventLoop::run_once(std::chrono::milliseconds timeout) {
  struct Iteration {
    bool& flag;
    explicit Iteration(bool& f) : flag(f) { flag = true; }
    ~Iteration() { flag = false; }
  } iteration(in_iteration_);
  // The stall detector's measure: the iteration's work before the wait and after it. It reads
  // the clock only where the iteration does not already (a busy loop: once more, at its end).
  const bool watched = observer_ != nullptr;
  // A busy loop's iteration is measured from its start to the next one's (below).
  const bool had_deferred = !deferred_.empty() && !busy();
  uint64_t started_ns = watched && had_deferred ? monotonic_ns() : 0;
  // Work deferred outside an iteration (an application's call into libhoprelay posted frames)
  // goes out before the wait, not after it.
  run_deferred();
  update_now();
  if (watched && !had_deferred) started_ns = now_ns_;
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
  // A wait that may block is not work: measured only then (never in a busy loop).
  const bool may_block = watched && wait_ms != 0;
  const uint64_t waiting_ns = may_block ? monotonic_ns() : 0;
  epoll_event events[64];
  int n = epoll_wait(epfd_, events, 64, wait_ms);
  if (n < 0 && errno != EINTR)
    throw std::system_error(errno, std::generic_category(), "epoll_wait");
  if (n > 0) update_now();
  const uint64_t woken_ns = may_block ? (n > 0 ? now_ns_ : monotonic_ns()) : 0;
  for (int i = 0; i < n; ++i) static_cast<Handler*>(events[i].data.ptr)->on_io(events[i].events);
  run_deferred();
  run_timers();
  run_deferred();
  in_iteration_ = false;
  arm_timer_fd();
  if (!watched) return;
  if (busy()) {
    // A loop that never blocks runs its iterations back to back (run()): one's end is the
    // next one's start, a clock read it makes anyway. Reported one iteration late, so a busy
    // loop reads the clock no more often than unwatched (on an emulated CPU a read can cost
    // microseconds: three more per iteration showed in the Soft-RoCE suite's busy latency).
    if (last_started_ns_ != 0) observer_->on_iteration(started_ns - last_started_ns_);
    last_started_ns_ = started_ns;
    return;
  }
  last_started_ns_ = 0;
  observer_->on_iteration(monotonic_ns() - started_ns - (woken_ns - waiting_ns));
}

void EventLoop::run() {
  while (!stopped_) run_once(std::chrono::milliseconds(1000));
}

}  // namespace hoprelay::transport
