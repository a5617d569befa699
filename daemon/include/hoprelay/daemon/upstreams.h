// A node's upstream links, as one component: the inbound links that are up (each one's state is
// its context, an Upstream), the producers' origins among them, what their senders may send
// again (deduplication keeps those origins), the drain's request to each sender, and their
// series (hoprelay_link_slots_in_use and the inbound counters, per `peer` label).
//
// Owns: each Upstream from the link's on_inbound_up until its on_inbound_down, which hands it
// to HeldSlots (held_slots.h) while slots of it are still held.
// Calls: NodeMetrics, and HeldSlots for the links gone down with slots held (their origins and
// slots count too). Nothing here runs per message: the node reads an Upstream's counters.
// One thread (the node's event loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/held_slots.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

// An inbound link's state: its context (LinkNotes::of), from on_inbound_up until its last held
// slot goes back.
struct Upstream final : LinkNotes {
  Upstream(transport::InboundLink& l, PeerMetrics m, prometheus::Gauge* in_use)
      : LinkNotes(l), metrics(std::move(m)), slots_in_use(in_use) {}
  PeerMetrics metrics;
  prometheus::Gauge* slots_in_use;
  bool up = true;  // false once down: its slots still held keep it (HeldSlots::link_down)
};

class Upstreams {
 public:
  // `transport`: the `transport` label of the links' series (an in-process producer's says
  // "in-process"). The references outlive this.
  Upstreams(NodeMetrics& metrics, const HeldSlots& held, std::string_view transport);
  Upstreams(const Upstreams&) = delete;
  Upstreams& operator=(const Upstreams&) = delete;

  // A link came up: its state is its context from here on (one allocation per link).
  void up(transport::InboundLink& link);
  // A link went down: its state, for HeldSlots::link_down; null when it was not up.
  std::unique_ptr<LinkNotes> down(transport::InboundLink& link);
  // The state of `link` while it is up, else null.
  static Upstream* of(const transport::InboundLink& link) {
    auto* in = static_cast<Upstream*>(&LinkNotes::of(link));
    return in->up ? in : nullptr;
  }
  bool empty() const { return up_.empty(); }
  size_t size() const { return up_.size(); }

  // The producer connected with `origin`, if one is: origins are identities, so a second one
  // is refused (Node::admit).
  const transport::PeerInfo* producer_with(uint32_t origin) const;
  // Appends the origin of every frame a sender may send again, on links up or gone down with
  // slots held: deduplication must not forget them (dedup.h).
  void unreturned_origins(std::vector<uint32_t>& out) const;
  // Asks every sender to stop (BYE): each closes its link once all it sent is acknowledged.
  void drain_all();

  // The series of every peer that may send to this node, at 0, from start and after each
  // reload: a series that appears only with its first message may already hold a whole burst
  // at its first scrape, and rate() of it is 0 (a false HoprelayNoTraffic for a head whose
  // first stream fits between two scrapes).
  void export_series(const config::NodeSpec& spec);
  // hoprelay_link_slots_in_use, once a second: per `peer` label the sum over its links
  // (producers share one label), links gone down with slots held included.
  void sample_slots();

 private:
  // The `peer` label of a link's series: its node, or "producer" (all producers).
  static std::string label(const transport::InboundLink& link);

  NodeMetrics& metrics_;
  const HeldSlots& held_;
  std::string transport_;
  std::vector<std::unique_ptr<Upstream>> up_;
  // sample_slots()'s sums, one per label seen (kept: a label whose links are gone reads 0).
  std::vector<std::pair<prometheus::Gauge*, double>> link_slots_;
};

}  // namespace hoprelay::daemon
