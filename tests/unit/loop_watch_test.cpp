// The stall detector on a real event loop: an iteration that sleeps past the threshold is
// counted, observed in the histogram and logged; detaching leaves the loop as it was.
#include "hoprelay/daemon/loop_watch.h"

#include <gtest/gtest.h>
#include <prometheus/client_metric.h>
#include <prometheus/counter.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <chrono>
#include <thread>

#include "hoprelay/daemon/metrics.h"
#include "hoprelay/transport/log.h"

namespace hoprelay::daemon {
namespace {

TEST(LoopWatch, AnIterationPastTheThresholdIsCountedObservedAndLogged) {
  transport::EventLoop loop;
  NodeMetrics metrics("n", "tcp", std::nullopt);
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
  module_logger("loop")->sinks().push_back(sink);
  {
    LoopWatch watch(loop, metrics, "node", 5'000'000);  // 5 ms
    // Two quick iterations, then two that sleep 20 ms each: at least 20 ms busy, certainly.
    loop.run_once(std::chrono::milliseconds(0));
    loop.run_once(std::chrono::milliseconds(0));
    for (int i = 0; i < 2; ++i) {
      loop.defer([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
      loop.run_once(std::chrono::milliseconds(0));
    }
    EXPECT_GE(metrics.loop_stalls("node").Value(), 2.0);
    prometheus::ClientMetric m;
    metrics.loop_iteration_seconds("node").collect(m);
    EXPECT_EQ(m.histogram.sample_count, 4u) << "every iteration is observed";
    EXPECT_GE(m.histogram.sample_sum, 0.040);
  }
  const auto lines = sink->last_formatted();
  module_logger("loop")->sinks().pop_back();
  ASSERT_EQ(lines.size(), 1u) << "the first stall at once, the next one throttled";
  EXPECT_NE(lines[0].find("the node event loop stalled: one iteration took"), std::string::npos)
      << lines[0];
  // Detached: the loop runs on without it.
  loop.defer([] { std::this_thread::sleep_for(std::chrono::milliseconds(10)); });
  loop.run_once(std::chrono::milliseconds(0));
  prometheus::ClientMetric m;
  metrics.loop_iteration_seconds("node").collect(m);
  EXPECT_EQ(m.histogram.sample_count, 4u);
}

// Waiting for events is not work: an iteration that sleeps 100 ms in epoll_wait for its timer is
// no stall at a 50 ms threshold.
TEST(LoopWatch, TheWaitForEventsIsNotCounted) {
  transport::EventLoop loop;
  NodeMetrics metrics("n", "tcp", std::nullopt);
  LoopWatch watch(loop, metrics, "node", 50'000'000);
  bool fired = false;
  loop.after(std::chrono::milliseconds(100), [&] { fired = true; });
  const auto start = std::chrono::steady_clock::now();
  while (!fired) loop.run_once(std::chrono::milliseconds(1000));
  ASSERT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_EQ(metrics.loop_stalls("node").Value(), 0.0);
  prometheus::ClientMetric m;
  metrics.loop_iteration_seconds("node").collect(m);
  EXPECT_GE(m.histogram.sample_count, 1u);
  EXPECT_LT(m.histogram.sample_sum, 0.050) << "the 100 ms of waiting counted as work";
}

// A busy loop (poll = "busy") reads the clock no more often for the watch: an iteration is
// reported at the next one's start. A stall in it is still counted.
TEST(LoopWatch, ABusyLoopsStallIsCountedAtTheNextIteration) {
  transport::EventLoop loop;
  loop.set_spin(true);
  NodeMetrics metrics("n", "tcp", std::nullopt);
  // A threshold far above what an empty iteration takes on a loaded machine (one of 5 ms was
  // passed by an empty iteration while CI ran other tests beside it).
  LoopWatch watch(loop, metrics, "node", 200'000'000);
  loop.run_once(std::chrono::milliseconds(0));
  loop.run_once(std::chrono::milliseconds(0));
  EXPECT_EQ(metrics.loop_stalls("node").Value(), 0.0);
  // Work deferred between iterations runs first thing in the next one, before its clock read:
  // it counts to the span from the previous start, reported at once.
  loop.defer([] { std::this_thread::sleep_for(std::chrono::milliseconds(400)); });
  loop.run_once(std::chrono::milliseconds(0));
  loop.run_once(std::chrono::milliseconds(0));
  EXPECT_EQ(metrics.loop_stalls("node").Value(), 1.0);
  prometheus::ClientMetric m;
  metrics.loop_iteration_seconds("node").collect(m);
  EXPECT_EQ(m.histogram.sample_count, 3u) << "the first iteration has none before it";
  EXPECT_GE(m.histogram.sample_sum, 0.400);
}

}  // namespace
}  // namespace hoprelay::daemon
