// The node's Prometheus metrics (docs/metrics.md lists them). Label sets are bounded: peer and
// stage names from the topology, fixed reason strings; never per-message values.
//
// Every child metric the data path touches is looked up once, when its link comes up, and
// kept as a handle: the per-message cost is an integer add (hot_counters.h), never a map
// lookup, a lock or an atomic read-modify-write.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/hot_counters.h"
#include "hoprelay/daemon/latency.h"
#include "hoprelay/daemon/rdma_health.h"

namespace prometheus {
class Counter;
class Gauge;
class Registry;
class Exposer;
template <typename T>
class Family;
}  // namespace prometheus

namespace hoprelay::daemon {

struct PeerMetrics {
  // By transport::Opcode (tcp, send, write, local); only the ones the link can see exist.
  std::array<HotCounters::Ref, 4> messages{};
  std::array<HotCounters::Ref, 4> bytes{};
  prometheus::Gauge* up = nullptr;
  // Outbound: messages the peer acknowledged as given up there or below it (its outcomes).
  HotCounters::Ref dropped_below{};
};

class NodeMetrics {
 public:
  // Serves /metrics on `bind` when given, from serve() on.
  NodeMetrics(const std::string& node, const std::string& transport,
              const std::optional<config::Endpoint>& bind);
  ~NodeMetrics();
  // Starts the metrics server. Called after the node's listen address is bound, so that a
  // second instance of a node fails on that first, with the hint that says so. Throws
  // std::runtime_error (port in use...) worded for the operator.
  void serve();

  // Inbound links see tcp, send and write over verbs, or local from a producer in this
  // process: `transport` is Transport::name(), or "in-process" for such a link.
  PeerMetrics inbound(const std::string& peer, std::string_view transport);
  // Outbound links forward with one opcode; its counters are at index 0.
  PeerMetrics outbound(const std::string& peer, const std::string& opcode);
  prometheus::Counter& completion_errors(std::string_view status);
  prometheus::Counter& protocol_errors(std::string_view kind);
  // An event loop's iteration times and stalls (loop_watch.h), by loop name.
  LatencyHistogram& loop_iteration_seconds(const std::string& loop);
  prometheus::Counter& loop_stalls(const std::string& loop);
  prometheus::Counter& stage_verdict(const std::string& stage, const char* verdict);
  prometheus::Counter& dropped(const char* reason);
  prometheus::Counter& rejected(const char* reason);
  prometheus::Counter& reconnects(const std::string& peer);
  // A spooled branch's link reset because the peer acknowledged nothing while it stayed up.
  prometheus::Counter& frozen(const std::string& peer);
  // Verbs: connect requests to the peer unanswered while the local port was ACTIVE.
  prometheus::Counter& rdma_connect_timeouts(const std::string& peer);
  prometheus::Gauge& slots_in_use();
  prometheus::Gauge& queued(const std::string& peer);
  prometheus::Gauge& credits(const std::string& peer);
  // 1 while this node stands in for the downstream (on_peer_down = "bypass", stand_in.h).
  prometheus::Gauge& bypassing(const std::string& peer);
  // Messages this node sent to its stand-in for the downstream, over every bypass.
  prometheus::Counter& bypassed(const std::string& peer);
  // rate_limit / rate_limit_to (rate_limits.h): the limit that applies to the peer's link
  // alone, and the seconds its frames waited for it.
  prometheus::Gauge& rate_limit(const std::string& peer);
  prometheus::Counter& rate_limited_seconds(const std::string& peer);
  // Frames sent to the peer and not acknowledged when its link failed: sent again.
  prometheus::Counter& replayed(const std::string& peer);
  prometheus::Gauge& link_slots_in_use(const std::string& peer);
  // A downstream's spool (branch_spool.h): its size, messages and age, and the messages that
  // went into it and were sent from it.
  struct SpoolSeries {
    prometheus::Gauge* bytes = nullptr;
    prometheus::Gauge* messages = nullptr;
    prometheus::Gauge* age_seconds = nullptr;
    prometheus::Counter* spooled = nullptr;
    prometheus::Counter* replayed = nullptr;
  };
  SpoolSeries spool(const std::string& peer);
  // A downstream removed by a reload: every series of it goes (link_up, queued, credits, and
  // its counters; `opcode`: what it was forwarded with). Its handles must be gone already.
  void forget_downstream(const std::string& peer, const std::string& opcode);
  LatencyHistogram& stage_seconds(const std::string& stage);
  // `threads` > 1: messages the stage ran on, per worker thread (how the work spreads).
  // `worker`: "0", "1", ... or "loop" (the event loop's share, StageWorkers::lend_a_hand).
  prometheus::Counter& stage_worker_messages(const std::string& worker);
  LatencyHistogram& residence_seconds();
  // The data path's counters (PeerMetrics, and what the node wraps itself).
  HotCounters& hot() { return hot_; }
  // A reload attempt's outcome, and the hash of the topology now in force.
  void config_loaded(bool ok, uint64_t hash);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::optional<config::Endpoint> bind_;
  prometheus::Family<prometheus::Counter>* rx_messages_;
  prometheus::Family<prometheus::Counter>* rx_bytes_;
  prometheus::Family<prometheus::Counter>* tx_messages_;
  prometheus::Family<prometheus::Counter>* tx_bytes_;
  prometheus::Family<prometheus::Counter>* dropped_below_;
  prometheus::Family<prometheus::Gauge>* link_up_;
  prometheus::Family<prometheus::Counter>* stage_;
  prometheus::Family<prometheus::Counter>* stage_workers_;
  prometheus::Family<prometheus::Counter>* dropped_;
  prometheus::Family<prometheus::Counter>* rejected_;
  prometheus::Family<prometheus::Counter>* reconnects_;
  prometheus::Family<prometheus::Counter>* frozen_;
  prometheus::Family<prometheus::Counter>* rdma_connect_timeouts_;
  prometheus::Family<prometheus::Counter>* wc_errors_;
  prometheus::Family<prometheus::Counter>* protocol_errors_;
  prometheus::Family<prometheus::Gauge>* slots_;
  prometheus::Family<prometheus::Gauge>* queued_;
  prometheus::Family<prometheus::Gauge>* credits_;
  prometheus::Family<prometheus::Gauge>* bypassing_;
  prometheus::Family<prometheus::Counter>* bypassed_;
  prometheus::Family<prometheus::Counter>* replayed_;
  prometheus::Family<prometheus::Gauge>* rate_limit_;
  prometheus::Family<prometheus::Counter>* rate_limited_;
  prometheus::Family<prometheus::Gauge>* spool_bytes_;
  prometheus::Family<prometheus::Gauge>* spool_messages_;
  prometheus::Family<prometheus::Gauge>* spool_age_;
  prometheus::Family<prometheus::Counter>* spooled_;
  prometheus::Family<prometheus::Counter>* spool_replayed_;
  prometheus::Family<prometheus::Gauge>* link_slots_;
  std::shared_ptr<HistogramFamily> stage_seconds_;
  std::shared_ptr<HistogramFamily> residence_seconds_;
  std::shared_ptr<HistogramFamily> loop_seconds_;
  prometheus::Family<prometheus::Counter>* loop_stalls_;
  std::shared_ptr<ProcessCollector> process_;
  std::shared_ptr<RdmaHealthCollector> rdma_;  // verbs only
  prometheus::Family<prometheus::Counter>* reloads_;
  prometheus::Gauge* last_reload_ok_;
  prometheus::Gauge* last_reload_time_;
  prometheus::Family<prometheus::Gauge>* config_info_;
  prometheus::Gauge* config_hash_ = nullptr;
  uint64_t loads_ = 0;
  HotCounters hot_;
};

}  // namespace hoprelay::daemon
