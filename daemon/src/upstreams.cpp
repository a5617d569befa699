#include "hoprelay/daemon/upstreams.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>

namespace hoprelay::daemon {

Upstreams::Upstreams(NodeMetrics& metrics, const HeldSlots& held, std::string_view transport)
    : metrics_(metrics), held_(held), transport_(transport) {}

std::string Upstreams::label(const transport::InboundLink& link) {
  return link.peer().role == transport::PeerRole::kProducer ? "producer" : link.peer().name;
}

void Upstreams::up(transport::InboundLink& link) {
  const std::string peer = label(link);
  auto in = std::make_unique<Upstream>(
      link, metrics_.inbound(peer, link.in_process() ? "in-process" : transport_),
      &metrics_.link_slots_in_use(peer));
  in->metrics.up->Increment();  // a count: several producers share the "producer" label
  up_.push_back(std::move(in));
}

std::unique_ptr<LinkNotes> Upstreams::down(transport::InboundLink& link) {
  auto it =
      std::find_if(up_.begin(), up_.end(), [&](const auto& i) { return &i->link() == &link; });
  if (it == up_.end()) return nullptr;
  std::unique_ptr<Upstream> in = std::move(*it);
  up_.erase(it);
  in->metrics.up->Decrement();
  in->up = false;
  return in;
}

const transport::PeerInfo* Upstreams::producer_with(uint32_t origin) const {
  for (const auto& in : up_) {
    const transport::PeerInfo& peer = in->link().peer();
    if (peer.role == transport::PeerRole::kProducer && peer.origin == origin) return &peer;
  }
  return nullptr;
}

void Upstreams::unreturned_origins(std::vector<uint32_t>& out) const {
  for (const auto& in : up_) in->link().unreturned_origins(out);
  held_.for_each_gone([&](const transport::InboundLink& link) { link.unreturned_origins(out); });
}

void Upstreams::drain_all() {
  // By pointer: a link whose BYE cannot be sent fails at once, and leaves up_.
  std::vector<transport::InboundLink*> links;
  for (auto& in : up_) links.push_back(&in->link());
  for (auto* link : links) link->drain();
}

void Upstreams::export_series(const config::NodeSpec& spec) {
  std::vector<std::string> peers = spec.upstream;
  if (peers.empty()) peers.emplace_back("producer");
  for (const auto& peer : peers) {
    metrics_.inbound(peer, transport_);
    metrics_.link_slots_in_use(peer);
  }
}

// (Each link set its own value before, so a label's gauge showed whichever came last, and
// kept it once a producer was gone.)
void Upstreams::sample_slots() {
  for (auto& [gauge, sum] : link_slots_) sum = 0;
  auto add = [this](prometheus::Gauge* gauge, uint32_t n) {
    for (auto& [g, sum] : link_slots_) {
      if (g == gauge) {
        sum += n;
        return;
      }
    }
    link_slots_.emplace_back(gauge, n);
  };
  for (const auto& in : up_) add(in->slots_in_use, in->link().slots_in_use());
  held_.for_each_gone([&](const transport::InboundLink& link) {
    add(&metrics_.link_slots_in_use(label(link)), link.slots_in_use());
  });
  for (const auto& [gauge, sum] : link_slots_) gauge->Set(sum);
}

}  // namespace hoprelay::daemon
