// on_peer_down = "bypass" (downstreams.h, stand_in.h): a downstream relay down for
// peer_down_timeout gets a stand-in on this node, which takes its branch until the relay's own
// link is up again and the stand-in has acknowledged everything it was sent. Once per
// transition, never per message.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include "hoprelay/daemon/downstreams.h"
#include "hoprelay/daemon/stand_in.h"
#include "node_log.h"

namespace hoprelay::daemon {

void StandInDelete::operator()(StandIn* s) const {
  delete s;
}

void Downstreams::start_bypass(Downstream& d) {
  if (d.stand_in || d.retiring || (d.link && d.link->up())) return;
  const config::NodeSpec* peer = topology_->find(d.name);
  const std::string down_for = config::duration_text(spec_->peer_down_timeout);
  if (!peer || peer->is_leaf()) {
    // A leaf's role is its application's: nothing here can take it. Held, as under "block".
    node_log().warn(
        "downstream {} down for {}: it is a leaf, so nothing can stand in for it: holding its "
        "{} message{} until it is back (on_peer_down = bypass)",
        d.name, down_for, d.waiting.size(), d.waiting.size() == 1 ? "" : "s");
    return;
  }
  std::unique_ptr<StandIn, StandInDelete> s;
  try {
    s.reset(new StandIn(*topology_, *spec_, d.name, loop_, events_, transport_));
  } catch (const std::exception& e) {
    node_log().error(
        "downstream {} down for {}: cannot stand in for it ({}): holding its messages until "
        "it is back",
        d.name, down_for, e.what());
    return;
  }
  std::string below;
  for (const auto& n : peer->downstream) below += (below.empty() ? "" : ", ") + n;
  node_log().warn(
      "downstream {} down for {}: standing in for it (on_peer_down = bypass): {}, and its "
      "branch goes to {} directly; the {} message{} waiting for it go there, and what it had "
      "passed on already is dropped there as repeats",
      d.name, down_for, s->stage_text(), below, d.waiting.size(), d.waiting.size() == 1 ? "" : "s");

  d.parked = std::move(d.link);
  d.link = s->take_link();
  d.link->set_context(&d);  // of()
  d.stand_in = std::move(s);
  d.bypassed = 0;
  d.bypassed_counted = 0;
  metrics_.bypassing(d.name).Set(1);
  // The stand-in's link comes up once the loop runs; its credits then pump the branch.
}

void Downstreams::parked_up(Downstream& d) {
  d.metrics.up->Set(1);
  peer_down_.came_up(d);
  if (d.was_up) metrics_.reconnects(d.name).Increment();
  d.returning = true;
  node_log().info(
      "downstream {} is up again: its branch goes back to it once the stand-in here has "
      "acknowledged the {} frame{} in flight around it",
      d.name, d.link->in_flight(), d.link->in_flight() == 1 ? "" : "s");
  end_bypass_if_done(d);
}

void Downstreams::parked_down(Downstream& d) {
  d.metrics.up->Set(0);
  d.down_since = transport::EventLoop::Clock::now();
  if (!d.returning) return;
  d.returning = false;
  node_log().warn("downstream {} down again before its branch went back to it: still standing in",
                  d.name);
  pump(d);
}

void Downstreams::end_bypass_if_done(Downstream& d) {
  // Every frame sent around the peer acknowledged (so safe at every node below it), and no
  // chunked message half sent: only then may the peer's link take the branch again, so that
  // each origin's order along the path is kept.
  if (!d.returning || !d.stand_in || d.open || d.link->in_flight() != 0) return;
  if (!d.parked || !d.parked->up()) return;
  node_log().info(
      "downstream {} takes its branch again: {} frame{} went around it while it was down, "
      "all acknowledged",
      d.name, d.bypassed, d.bypassed == 1 ? "" : "s");
  metrics_.bypassed(d.name).Increment(static_cast<double>(d.bypassed - d.bypassed_counted));
  metrics_.bypassing(d.name).Set(0);
  std::unique_ptr<transport::OutboundLink> around = std::move(d.link);
  d.link = std::move(d.parked);
  d.returning = false;
  StandIn* s = d.stand_in.get();
  retired_.push_back(std::move(d.stand_in));
  // Destroyed once drained, from the loop (not inside its own drain's callback).
  s->retire(std::move(around), [this, s] {
    loop_.defer(
        [this, s] { std::erase_if(retired_, [s](const auto& r) { return r.get() == s; }); });
  });
  // We may be inside a callback of the stand-in's link: the branch's queue goes to the peer
  // from the loop.
  Downstream* target = &d;
  loop_.defer([this, target] {
    for (auto& p : peers_) {
      if (p.get() == target) return pump(*target);
    }
  });
}

}  // namespace hoprelay::daemon
