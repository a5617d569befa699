#include "hoprelay/daemon/loop_watch.h"

#include <prometheus/counter.h>

#include "hoprelay/daemon/metrics.h"
#include "hoprelay/transport/log.h"

namespace hoprelay::daemon {

namespace {

spdlog::logger& log() {
  static auto logger = module_logger("loop");
  return *logger;
}

}  // namespace

LoopWatch::LoopWatch(transport::EventLoop& loop, NodeMetrics& metrics, std::string name,
                     uint64_t stall_ns)
    : loop_(loop),
      name_(std::move(name)),
      stall_ns_(stall_ns),
      iterations_(metrics.loop_iteration_seconds(name_)),
      stalls_(metrics.loop_stalls(name_)) {
  loop_.set_iteration_observer(this);
}

LoopWatch::~LoopWatch() {
  loop_.set_iteration_observer(nullptr);
}

void LoopWatch::on_iteration(uint64_t busy_ns) {
  iterations_.observe_ns(busy_ns);
  const uint64_t now = loop_.now_ns();
  if (busy_ns > stall_ns_) {
    stalls_.Increment();
    if (throttle_.note(now)) {
      // A warning from a second on; shorter stalls, which a loaded host or a sanitizer build
      // makes now and then, are said at info level (and counted all the same).
      log().log(
          busy_ns >= kWarnNs ? spdlog::level::warn : spdlog::level::info,
          "the {} event loop stalled: one iteration took {} ms (more than {} ms), and every "
          "link of this loop waited meanwhile; hoprelay_loop_stalls_total counts them (a slow "
          "stage, a host that swaps or is short of CPU, or a bug: report it with this log)",
          name_, busy_ns / 1'000'000, stall_ns_ / 1'000'000);
      return;
    }
  }
  // On every iteration, stalled or not: a loop that stalls on every iteration still says so
  // once per interval.
  uint64_t pending = 0, elapsed = 0;
  if (throttle_.due(now, pending, elapsed)) {
    log().info("the {} event loop stalled {} more times in the last {} s", name_, pending,
               elapsed / 1'000'000'000);
  }
}

}  // namespace hoprelay::daemon
