// A single-threaded epoll reactor. A node runs one: every link's socket (or, over verbs, the
// rdma_cm event channel and completion channel), the signalfd and the timers feed it, so a
// message's walk through a node never crosses a thread or takes a lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace hoprelay::transport {

class EventLoop {
 public:
  class Handler {
   public:
    virtual void on_io(uint32_t events) = 0;

   protected:
    ~Handler() = default;
  };
  // Told the busy time of every iteration (its work, not its wait for events), at its end, on
  // the loop's thread: the stall detector (daemon/loop_watch.h). Must not allocate or lock.
  // A busy loop (busy()) reports each iteration at the start of the next, as the time between
  // their starts: meant for run(), whose iterations follow each other.
  class IterationObserver {
   public:
    virtual void on_iteration(uint64_t busy_ns) = 0;

   protected:
    ~IterationObserver() = default;
  };

  using TimerId = uint64_t;
  using Clock = std::chrono::steady_clock;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Register/modify/unregister an fd. A handler must stay alive until the end of the current
  // iteration after remove(): destroy links from a defer()red callback, never inline.
  void add(int fd, uint32_t events, Handler* handler);
  void modify(int fd, uint32_t events, Handler* handler);
  void remove(int fd);

  TimerId after(std::chrono::milliseconds delay, std::function<void()> fn);
  void cancel(TimerId id);
  // Runs fn once after the events of the current iteration (coalesced work: credit frames,
  // deleting closed links). Small captures do not allocate.
  void defer(std::function<void()> fn);

  // A function run on every iteration, which then waits with a zero epoll timeout: the
  // busy-poll hook for transports that poll completion queues (verbs).
  void set_poller(std::function<bool()> poll) { poller_ = std::move(poll); }
  // Busy polling without a poller (TCP): every iteration waits for events with a zero epoll
  // timeout instead of sleeping, so a socket that becomes readable is seen by the spin, not
  // after a wake-up. Timers, deferred work and the signalfd run exactly as in event mode.
  void set_spin(bool spin) { spin_ = spin; }
  // Whether run_once() never sleeps: spinning, or a poller is set.
  bool busy() const { return spin_ || static_cast<bool>(poller_); }

  // The epoll descriptor: readable (POLLIN) when run_once(0) has I/O to handle. With
  // set_pollable(true) it is also readable when a timer is due, or when work was defer()red
  // between iterations, so an application that polls it alone (libhoprelay's pollable
  // handles) never misses a reconnect, a timeout or the credits of its releases.
  int fd() const { return epfd_; }
  void set_pollable(bool pollable);
  // Null: none (then an iteration reads the clock no more than before).
  void set_iteration_observer(IterationObserver* observer) { observer_ = observer; }
  // Runs the work defer()red so far (posted frames go out), without waiting for events.
  void run_pending() { run_deferred(); }

  void run();  // until stop()
  // One iteration: waits at most timeout (or until the next timer) for events.
  void run_once(std::chrono::milliseconds timeout);
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }
  // Monotonic nanoseconds, read once when the iteration started and again when epoll
  // returned: what the data path stamps messages with, instead of a clock read per message.
  uint64_t now_ns() const { return now_ns_; }

 private:
  void run_timers();
  void run_deferred();
  void update_now();
  void arm_timer_fd();  // set_pollable: the timerfd to the earliest timer

  class TimerFd;

  int epfd_ = -1;
  bool stopped_ = false;
  TimerId next_timer_ = 1;
  std::map<std::pair<Clock::time_point, TimerId>, std::function<void()>> timers_;
  std::map<TimerId, Clock::time_point> timer_deadlines_;
  // Nodes of fired and cancelled timers, reused by after(): arming a timer allocates nothing
  // once as many timers as are ever pending at once have been armed.
  std::vector<decltype(timers_)::node_type> spare_timers_;
  std::vector<decltype(timer_deadlines_)::node_type> spare_deadlines_;
  std::vector<std::function<void()>> deferred_;
  std::vector<std::function<void()>> running_deferred_;
  std::function<bool()> poller_;
  bool spin_ = false;
  uint64_t now_ns_ = 0;
  IterationObserver* observer_ = nullptr;
  uint64_t last_started_ns_ = 0;  // a busy loop's previous iteration (observer_ only)
  int timer_fd_ = -1;  // set_pollable(true): fires at the earliest timer, or now (deferred work)
  bool in_iteration_ = false;  // inside run_once()
  std::unique_ptr<TimerFd> timer_handler_;
  Clock::time_point armed_{};
};

}  // namespace hoprelay::transport
