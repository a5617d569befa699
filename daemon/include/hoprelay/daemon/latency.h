// Latency histograms the data loop can afford: no lock (prometheus-cpp's Histogram takes a
// mutex per Observe) and no locked instruction: the event loop's thread is the only writer, so
// an observation is a relaxed load and store per field, which the metrics server's thread reads
// (HistogramFamily::Collect) without ever seeing a torn or decreasing value. Buckets from
// 1 microsecond, not the web defaults.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

namespace hoprelay::daemon {

class LatencyHistogram {
 public:
  // Upper bounds in nanoseconds: 1 us ... 5 s, 1-2-5 steps.
  static constexpr std::array<uint64_t, 21> kBoundsNs = {
      1'000,         2'000,         5'000,        10'000,      20'000,      50'000,
      100'000,       200'000,       500'000,      1'000'000,   2'000'000,   5'000'000,
      10'000'000,    20'000'000,    50'000'000,   100'000'000, 200'000'000, 500'000'000,
      1'000'000'000, 2'000'000'000, 5'000'000'000};

  // From the event loop's thread only (single writer).
  void observe_ns(uint64_t ns) {
    size_t i = 0;
    while (i < kBoundsNs.size() && ns > kBoundsNs[i]) ++i;
    bump(counts_[i], 1);
    bump(sum_ns_, ns);
  }
  void collect(prometheus::ClientMetric& out) const;

 private:
  // A fetch_add without its lock prefix (the two locked adds of the residence histogram took
  // a relay at 64 B about 10% of its time): correct because there is one writer.
  static void bump(std::atomic<uint64_t>& v, uint64_t by) {
    v.store(v.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }

  std::array<std::atomic<uint64_t>, kBoundsNs.size() + 1> counts_{};  // last: +Inf
  std::atomic<uint64_t> sum_ns_{0};
};

// A histogram metric family with a fixed label set per child, added on the setup path.
class HistogramFamily final : public prometheus::Collectable {
 public:
  HistogramFamily(std::string name, std::string help)
      : name_(std::move(name)), help_(std::move(help)) {}
  LatencyHistogram& add(std::vector<std::pair<std::string, std::string>> labels);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string name_;
  std::string help_;
  // Guards the list, not the histograms: add() (setup, reload) and Collect() (the metrics
  // server's thread) may run at once; observations never take it.
  mutable std::mutex mutex_;
  std::vector<std::pair<std::vector<std::pair<std::string, std::string>>,
                        std::unique_ptr<LatencyHistogram>>>
      children_;
};

// The standard process_* metrics (CPU seconds, resident and virtual memory, open and maximum
// file descriptors, start time), which prometheus-cpp does not provide: read from /proc at
// scrape time. With them, the process's hoprelay_invariant_violations_total (invariants.h).
class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace hoprelay::daemon
