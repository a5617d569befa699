// The stall detector of one event loop. A node's loop must never block: every message of every
// link waits while it does (a DNS lookup, a slow plugin, a memory registration, the machine
// swapping). Each iteration's busy time (its work, not its wait for events) goes into
// hoprelay_loop_iteration_seconds{loop}; an iteration longer than the threshold is a stall,
// counted in hoprelay_loop_stalls_total{loop} and logged (a warning from 1 s on, else info): the
// first at once, then at most one line per 5 s saying how many more (LogThrottle).
//
// Owns: its histogram child, counter handle and throttle. Attaches itself to the loop for its
// lifetime (EventLoop::set_iteration_observer), so it must go before the loop and the metrics.
// Runs on the loop's thread; per iteration a histogram observation (no lock, no allocation).
#pragma once

#include <cstdint>
#include <string>

#include "hoprelay/daemon/log_throttle.h"
#include "hoprelay/transport/event_loop.h"

namespace prometheus {
class Counter;
}

namespace hoprelay::daemon {

class LatencyHistogram;
class NodeMetrics;

class LoopWatch final : public transport::EventLoop::IterationObserver {
 public:
  static constexpr uint64_t kDefaultStallNs = 100'000'000;  // 100 ms
  static constexpr uint64_t kWarnNs = 1'000'000'000;        // a stall this long is a warning

  LoopWatch(transport::EventLoop& loop, NodeMetrics& metrics, std::string name,
            uint64_t stall_ns = kDefaultStallNs);
  ~LoopWatch();
  LoopWatch(const LoopWatch&) = delete;
  LoopWatch& operator=(const LoopWatch&) = delete;

  void on_iteration(uint64_t busy_ns) override;

 private:
  transport::EventLoop& loop_;
  std::string name_;
  uint64_t stall_ns_;
  LatencyHistogram& iterations_;
  prometheus::Counter& stalls_;
  LogThrottle throttle_;
};

}  // namespace hoprelay::daemon
