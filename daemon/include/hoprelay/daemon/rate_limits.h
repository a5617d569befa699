// `rate_limit` and `rate_limit_to` (docs/topology.md, "Capping what a distribution takes"):
// the frames a node sends to its downstream peers, paced so that they take no more of its
// links than the topology allows, as Kraken and Dragonfly cap what they take from a host's NIC.
//
// A downstream with a limit has a RateGate: its own bucket (`rate_limit_to`) and the node's,
// shared by all of them (`rate_limit`), both GCRA buckets (common/token_bucket.h) that pace
// whole frames. Downstreams::pump asks the gate before each post; a frame goes once both
// buckets allow it and pays both. When they do not, the gate arms one timer for when they
// will and calls back then (the pump goes on where it stopped), and the time the branch waited
// is counted (hoprelay_rate_limited_seconds_total). A downstream without a limit has no gate:
// nothing is checked per frame.
//
// Owns: the node's bucket (RateLimits) and each gate's own bucket and timer (RateGate, owned
// by its Downstream). Calls: the event loop's timers, the metrics. Nothing here allocates,
// locks or logs per frame. One thread (the node's event loop).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hoprelay/common/token_bucket.h"
#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/transport/event_loop.h"

namespace hoprelay::daemon {

class RateGate {
 public:
  // `node`: the node's bucket (null: none); `own`: this peer's limit (0: none); `resume`: called
  // when a frame refused may go.
  RateGate(transport::EventLoop& loop, TokenBucket* node, uint64_t own, NodeMetrics& metrics,
           const std::string& peer, std::function<void()> resume);
  ~RateGate();  // cancels the timer
  RateGate(const RateGate&) = delete;
  RateGate& operator=(const RateGate&) = delete;

  // May a frame of `bytes` (header and payload) go now? True: it is paid for. False: not yet;
  // `resume` is called once it may.
  bool admit(uint64_t bytes);

 private:
  void wait(uint64_t now);
  void waited(uint64_t now);

  transport::EventLoop& loop_;
  TokenBucket* node_;
  std::optional<TokenBucket> own_;
  std::function<void()> resume_;
  prometheus::Counter* waited_seconds_;
  transport::EventLoop::TimerId timer_ = 0;
  uint64_t waiting_since_ = 0;
};

class RateLimits {
 public:
  RateLimits(transport::EventLoop& loop, NodeMetrics& metrics) : loop_(loop), metrics_(metrics) {}

  // The limits of `spec`: at start, and again after a reload (then every gate is made again).
  void configure(const config::NodeSpec& spec);
  // The gate of downstream `peer` under the limits configured, calling `resume` when a frame
  // it refused may go; null when no limit applies to `peer`.
  std::unique_ptr<RateGate> gate(const std::string& peer, std::function<void()> resume);

  // How far ahead of its rate an idle link may get: one burst of this much time at line rate.
  // Longer than a timer's lateness on a busy host (a wake-up up to this late loses no rate).
  static constexpr uint64_t kBurstNs = 5'000'000;

 private:
  transport::EventLoop& loop_;
  NodeMetrics& metrics_;
  std::optional<TokenBucket> node_;
  std::vector<std::pair<std::string, uint64_t>> per_peer_;
  std::vector<std::string> shown_;  // peers with a hoprelay_rate_limit_bits_per_second series
};

}  // namespace hoprelay::daemon
