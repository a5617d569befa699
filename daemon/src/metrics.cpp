#include "hoprelay/daemon/metrics.h"

#include "hoprelay/daemon/build_info.h"

#include "hoprelay/transport/slot_ring.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace hoprelay::daemon {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

NodeMetrics::NodeMetrics(const std::string& node, const std::string& transport,
                         const std::optional<config::Endpoint>& bind)
    : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  rx_messages_ = &BuildCounter()
                      .Name("hoprelay_messages_received_total")
                      .Help("Messages received, by upstream peer")
                      .Register(r);
  rx_bytes_ = &BuildCounter()
                   .Name("hoprelay_received_bytes_total")
                   .Help("Payload bytes received, by upstream peer")
                   .Register(r);
  tx_messages_ = &BuildCounter()
                      .Name("hoprelay_messages_forwarded_total")
                      .Help("Messages acknowledged by a downstream peer, by peer")
                      .Register(r);
  tx_bytes_ = &BuildCounter()
                   .Name("hoprelay_forwarded_bytes_total")
                   .Help("Payload bytes acknowledged by a downstream peer, by peer")
                   .Register(r);
  dropped_below_ = &BuildCounter()
                        .Name("hoprelay_messages_dropped_downstream_total")
                        .Help(
                            "Messages a downstream peer reported given up, there or below it "
                            "(outcomes), by peer")
                        .Register(r);
  link_up_ = &BuildGauge()
                  .Name("hoprelay_link_up")
                  .Help("1 while the link to or from the peer is established")
                  .Register(r);
  stage_ = &BuildCounter()
                .Name("hoprelay_stage_messages_total")
                .Help("Messages processed by the stage, by verdict (forward, drop, error)")
                .Register(r);
  stage_workers_ = &BuildCounter()
                        .Name("hoprelay_stage_worker_messages_total")
                        .Help("Messages the stage ran on, by worker thread (threads > 1)")
                        .Register(r);
  dropped_ = &BuildCounter()
                  .Name("hoprelay_messages_dropped_total")
                  .Help("Messages not forwarded, by reason")
                  .Register(r);
  rejected_ = &BuildCounter()
                   .Name("hoprelay_connections_rejected_total")
                   .Help("Inbound connections refused at admission, by reason")
                   .Register(r);
  reconnects_ = &BuildCounter()
                     .Name("hoprelay_link_reconnects_total")
                     .Help("Times an outbound link came up again after being down")
                     .Register(r);
  frozen_ = &BuildCounter()
                 .Name("hoprelay_downstream_frozen_total")
                 .Help(
                     "Times a spooled branch's link was reset because its peer acknowledged "
                     "nothing for spool_after while the link stayed up (a stopped process)")
                 .Register(r);
  rdma_connect_timeouts_ =
      &BuildCounter()
           .Name("hoprelay_rdma_connect_timeouts_total")
           .Help(
               "Connect requests to the peer that went unanswered while the local RDMA port was "
               "ACTIVE (verbs): its host is down, or this device is wedged")
           .Register(r);
  wc_errors_ = &BuildCounter()
                    .Name("hoprelay_work_completion_errors_total")
                    .Help("Failed RDMA work completions, by ibv_wc_status (each fails its link)")
                    .Register(r);
  protocol_errors_ = &BuildCounter()
                          .Name("hoprelay_protocol_errors_total")
                          .Help("Links closed because the peer broke the protocol, by kind")
                          .Register(r);
  slots_ = &BuildGauge()
                .Name("hoprelay_slots_in_use")
                .Help("Receive slots holding a message not yet acknowledged downstream")
                .Register(r);
  queued_ = &BuildGauge()
                 .Name("hoprelay_downstream_queued")
                 .Help("Messages waiting for credit or for the link, by downstream peer")
                 .Register(r);
  credits_ = &BuildGauge()
                  .Name("hoprelay_link_credits")
                  .Help("Frames the downstream peer lets this node send now (0 while down)")
                  .Register(r);
  bypassing_ = &BuildGauge()
                    .Name("hoprelay_bypass_active")
                    .Help(
                        "1 while this node stands in for the downstream peer, down for "
                        "peer_down_timeout (on_peer_down = \"bypass\")")
                    .Register(r);
  bypassed_ = &BuildCounter()
                   .Name("hoprelay_bypassed_total")
                   .Help(
                       "Frames this node sent around the downstream peer, to its stand-in "
                       "(on_peer_down = \"bypass\")")
                   .Register(r);
  rate_limit_ = &BuildGauge()
                     .Name("hoprelay_rate_limit_bits_per_second")
                     .Help(
                         "The rate limit on the link to the downstream peer: its rate_limit_to, "
                         "else the node's rate_limit, which all its links share (0: none)")
                     .Register(r);
  rate_limited_ = &BuildCounter()
                       .Name("hoprelay_rate_limited_seconds_total")
                       .Help(
                           "Seconds frames for the downstream peer waited for its rate limit "
                           "(rate_limit, rate_limit_to) with credit to go")
                       .Register(r);
  replayed_ = &BuildCounter()
                   .Name("hoprelay_messages_replayed_total")
                   .Help(
                       "Frames sent to the downstream peer that were not acknowledged when its "
                       "link failed, and so are sent again, by peer")
                   .Register(r);
  spool_bytes_ = &BuildGauge()
                      .Name("hoprelay_spool_bytes")
                      .Help("Bytes on disk in the spool of a downstream peer (spool_dir)")
                      .Register(r);
  spool_messages_ = &BuildGauge()
                         .Name("hoprelay_spool_messages")
                         .Help(
                             "Messages in the spool of a downstream peer, not yet "
                             "acknowledged by it")
                         .Register(r);
  spool_age_ = &BuildGauge()
                    .Name("hoprelay_spool_age_seconds")
                    .Help(
                        "Age of the oldest message in the spool of a downstream peer (0 "
                        "when empty)")
                    .Register(r);
  spooled_ = &BuildCounter()
                  .Name("hoprelay_spooled_total")
                  .Help("Messages routed to a downstream peer that went into its spool")
                  .Register(r);
  spool_replayed_ = &BuildCounter()
                         .Name("hoprelay_spool_replayed_total")
                         .Help(
                             "Messages sent from the spool of a downstream peer and "
                             "acknowledged by it")
                         .Register(r);
  link_slots_ = &BuildGauge()
                     .Name("hoprelay_link_slots_in_use")
                     .Help("Receive slots of the inbound link from the peer holding a message")
                     .Register(r);
  stage_seconds_ = std::make_shared<HistogramFamily>("hoprelay_stage_duration_seconds",
                                                     "Time the stage took per message, by stage");
  residence_seconds_ = std::make_shared<HistogramFamily>(
      "hoprelay_residence_seconds",
      "Per-hop residence: from a message's arrival in its slot to its release (acknowledged by "
      "every downstream, or consumed)");
  loop_seconds_ = std::make_shared<HistogramFamily>(
      "hoprelay_loop_iteration_seconds",
      "Busy time of one event loop iteration (its work, not its wait for events), by loop");
  loop_stalls_ = &BuildCounter()
                      .Name("hoprelay_loop_stalls_total")
                      .Help(
                          "Event loop iterations longer than the stall threshold (100 ms), by "
                          "loop: every link of the loop waited meanwhile")
                      .Register(r);
  process_ = std::make_shared<ProcessCollector>();
  reloads_ = &BuildCounter()
                  .Name("hoprelay_config_reloads_total")
                  .Help("Topology reloads (SIGHUP), by result (success, failure)")
                  .Register(r);
  last_reload_ok_ = &BuildGauge()
                         .Name("hoprelay_config_last_reload_successful")
                         .Help("1 if the last topology load or reload succeeded, else 0")
                         .Register(r)
                         .Add({});
  last_reload_time_ = &BuildGauge()
                           .Name("hoprelay_config_last_reload_success_timestamp_seconds")
                           .Help("When the topology in force was loaded, as a Unix time")
                           .Register(r)
                           .Add({});
  config_info_ = &BuildGauge()
                      .Name("hoprelay_config_info")
                      .Help("Always 1; `hash` is the FNV-1a hash of the topology file in force")
                      .Register(r);
  const BuildInfo& build = build_info();  // the same as --version says
  BuildGauge()
      .Name("hoprelay_build_info")
      .Help("Version, commit, stage ABI, wire protocol and transport of this hoprelayd")
      .Register(r)
      .Add({{"version", std::string(build.version)},
            {"commit", std::string(build.commit)},
            {"stage_abi", build.stage_abi},
            {"protocol", build.protocol},
            {"transport", transport},
            {"node", node}})
      .Set(1);
  // The device's port state and hardware counters: what a verbs link failure is read against.
  if (transport == "verbs") rdma_ = std::make_shared<RdmaHealthCollector>();
  bind_ = bind;
}

namespace {

// Why `where` cannot be bound, by trying it (the metrics server only says "possible problem
// binding to port"): the errno of bind(2), or 0 if it can be bound now.
int probe_bind(const config::Endpoint& where) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(where.port);
  if (getaddrinfo(where.host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return EINVAL;
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int err = ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 ? 0 : errno;
  ::close(fd);
  freeaddrinfo(res);
  return err;
}

}  // namespace

void NodeMetrics::serve() {
  if (!bind_ || exposer_) return;
  std::string where = bind_->to_string();
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(where, 1);
  } catch (const std::exception& e) {
    int err = probe_bind(*bind_);
    if (err == EADDRINUSE) {
      throw std::runtime_error("cannot serve metrics on " + where +
                               ": the port is in use by another process (perhaps another "
                               "hoprelayd for this node; `ss -ltnp` names it): stop it or "
                               "change `metrics` in the topology");
    }
    if (err == EADDRNOTAVAIL) {
      throw std::runtime_error("cannot serve metrics on " + where +
                               ": not an address of this host: change `metrics` in the "
                               "topology (is this the right --node?)");
    }
    throw std::runtime_error("cannot serve metrics on " + where + " (" + e.what() +
                             (err ? std::string(": ") + std::strerror(err) : "") +
                             "): change `metrics` in the topology");
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(stage_seconds_);
  exposer_->RegisterCollectable(residence_seconds_);
  exposer_->RegisterCollectable(loop_seconds_);
  exposer_->RegisterCollectable(process_);
  if (rdma_) exposer_->RegisterCollectable(rdma_);
}

NodeMetrics::~NodeMetrics() {
  // The HTTP server first: its threads may be collecting (a scrape during shutdown) from the
  // histogram families and collectors, members declared after it and so destroyed before it.
  // Found by ThreadSanitizer (a scrape racing the families' destruction).
  exposer_.reset();
}

PeerMetrics NodeMetrics::inbound(const std::string& peer, std::string_view transport) {
  PeerMetrics m;
  auto [first, last] = transport == "verbs"        ? std::pair(1u, 3u)
                       : transport == "in-process" ? std::pair(3u, 4u)
                                                   : std::pair(0u, 1u);
  for (size_t op = first; op < last; ++op) {
    m.messages[op] =
        hot_.wrap(rx_messages_->Add({{"peer", peer}, {"opcode", transport::kOpcodeNames[op]}}));
    m.bytes[op] =
        hot_.wrap(rx_bytes_->Add({{"peer", peer}, {"opcode", transport::kOpcodeNames[op]}}));
  }
  m.up = &link_up_->Add({{"peer", peer}, {"direction", "in"}});
  return m;
}

PeerMetrics NodeMetrics::outbound(const std::string& peer, const std::string& opcode) {
  PeerMetrics m;
  m.messages[0] = hot_.wrap(tx_messages_->Add({{"peer", peer}, {"opcode", opcode}}));
  m.bytes[0] = hot_.wrap(tx_bytes_->Add({{"peer", peer}, {"opcode", opcode}}));
  m.dropped_below = hot_.wrap(dropped_below_->Add({{"peer", peer}}));
  m.up = &link_up_->Add({{"peer", peer}, {"direction", "out"}});
  return m;
}

prometheus::Counter& NodeMetrics::protocol_errors(std::string_view kind) {
  return protocol_errors_->Add({{"kind", std::string(kind)}});
}

prometheus::Counter& NodeMetrics::completion_errors(std::string_view status) {
  return wc_errors_->Add({{"status", std::string(status)}});
}

prometheus::Counter& NodeMetrics::stage_verdict(const std::string& stage, const char* verdict) {
  return stage_->Add({{"stage", stage}, {"verdict", verdict}});
}
prometheus::Counter& NodeMetrics::stage_worker_messages(const std::string& worker) {
  return stage_workers_->Add({{"worker", worker}});
}
prometheus::Counter& NodeMetrics::dropped(const char* reason) {
  return dropped_->Add({{"reason", reason}});
}
prometheus::Counter& NodeMetrics::rejected(const char* reason) {
  return rejected_->Add({{"reason", reason}});
}
prometheus::Counter& NodeMetrics::reconnects(const std::string& peer) {
  return reconnects_->Add({{"peer", peer}});
}

prometheus::Counter& NodeMetrics::frozen(const std::string& peer) {
  return frozen_->Add({{"peer", peer}});
}

prometheus::Counter& NodeMetrics::rdma_connect_timeouts(const std::string& peer) {
  return rdma_connect_timeouts_->Add({{"peer", peer}});
}
prometheus::Gauge& NodeMetrics::slots_in_use() {
  return slots_->Add({});
}
prometheus::Gauge& NodeMetrics::queued(const std::string& peer) {
  return queued_->Add({{"peer", peer}});
}
prometheus::Counter& NodeMetrics::replayed(const std::string& peer) {
  return replayed_->Add({{"peer", peer}});
}
prometheus::Gauge& NodeMetrics::credits(const std::string& peer) {
  return credits_->Add({{"peer", peer}});
}
prometheus::Gauge& NodeMetrics::bypassing(const std::string& peer) {
  return bypassing_->Add({{"peer", peer}});
}
prometheus::Counter& NodeMetrics::bypassed(const std::string& peer) {
  return bypassed_->Add({{"peer", peer}});
}
prometheus::Gauge& NodeMetrics::rate_limit(const std::string& peer) {
  return rate_limit_->Add({{"peer", peer}});
}
prometheus::Counter& NodeMetrics::rate_limited_seconds(const std::string& peer) {
  return rate_limited_->Add({{"peer", peer}});
}
void NodeMetrics::forget_downstream(const std::string& peer, const std::string& opcode) {
  link_up_->Remove(&link_up_->Add({{"peer", peer}, {"direction", "out"}}));
  queued_->Remove(&queued_->Add({{"peer", peer}}));
  credits_->Remove(&credits_->Add({{"peer", peer}}));
  bypassing_->Remove(&bypassing_->Add({{"peer", peer}}));
  bypassed_->Remove(&bypassed_->Add({{"peer", peer}}));
  rate_limit_->Remove(&rate_limit_->Add({{"peer", peer}}));
  rate_limited_->Remove(&rate_limited_->Add({{"peer", peer}}));
  // Counters too: the data path's handles to them went with the downstream.
  auto drop_hot = [this](prometheus::Family<prometheus::Counter>* family,
                         const std::map<std::string, std::string>& labels) {
    prometheus::Counter& c = family->Add(labels);
    hot_.forget(c);
    family->Remove(&c);
  };
  drop_hot(tx_messages_, {{"peer", peer}, {"opcode", opcode}});
  drop_hot(tx_bytes_, {{"peer", peer}, {"opcode", opcode}});
  drop_hot(dropped_below_, {{"peer", peer}});
  for (auto* family : {reconnects_, replayed_, rdma_connect_timeouts_, spooled_, spool_replayed_}) {
    family->Remove(&family->Add({{"peer", peer}}));
  }
  for (auto* family : {spool_bytes_, spool_messages_, spool_age_}) {
    family->Remove(&family->Add({{"peer", peer}}));
  }
}

NodeMetrics::SpoolSeries NodeMetrics::spool(const std::string& peer) {
  return {&spool_bytes_->Add({{"peer", peer}}), &spool_messages_->Add({{"peer", peer}}),
          &spool_age_->Add({{"peer", peer}}), &spooled_->Add({{"peer", peer}}),
          &spool_replayed_->Add({{"peer", peer}})};
}

prometheus::Gauge& NodeMetrics::link_slots_in_use(const std::string& peer) {
  return link_slots_->Add({{"peer", peer}});
}
LatencyHistogram& NodeMetrics::stage_seconds(const std::string& stage) {
  return stage_seconds_->add({{"stage", stage}});
}
LatencyHistogram& NodeMetrics::loop_iteration_seconds(const std::string& loop) {
  return loop_seconds_->add({{"loop", loop}});
}
prometheus::Counter& NodeMetrics::loop_stalls(const std::string& loop) {
  return loop_stalls_->Add({{"loop", loop}});
}
LatencyHistogram& NodeMetrics::residence_seconds() {
  return residence_seconds_->add({});
}

void NodeMetrics::config_loaded(bool ok, uint64_t hash) {
  // The first call is the load at start, not a reload.
  if (loads_++ > 0) reloads_->Add({{"result", ok ? "success" : "failure"}}).Increment();
  last_reload_ok_->Set(ok ? 1 : 0);
  if (!ok) return;
  last_reload_time_->SetToCurrentTime();
  if (config_hash_) config_info_->Remove(config_hash_);
  config_hash_ = &config_info_->Add({{"hash", fmt::format("{:016x}", hash)}});
  config_hash_->Set(1);
}

}  // namespace hoprelay::daemon
