// A reload (SIGHUP, docs/operations.md): what may change while the node runs, applied whole or
// not at all, and a removed downstream retired once nothing it was sent is outstanding.
#include <algorithm>
#include <optional>
#include <thread>

#include "hoprelay/daemon/node.h"
#include "node_log.h"

namespace hoprelay::daemon {

void Node::retire_if_done(Downstream& d) {
  // A chunked message open on the link keeps it: its next chunks go there (branch_of).
  // So does a message half sent whose set holds it (it may not have reached it yet).
  auto done = [this](const Downstream& d) {
    return d.retiring && d.waiting.empty() && !d.open && !(d.link && d.link->in_flight() != 0) &&
           !held_by_open_message(d);
  };
  if (!done(d)) return;
  Downstream* dying = &d;
  // Deferred: we may be inside a callback of this very link. Checked again then: a chunk of
  // the open message may have been routed to it in the same iteration.
  loop_.defer([this, dying, done] {
    auto it = std::find_if(downstream_.begin(), downstream_.end(),
                           [&](const auto& p) { return p.get() == dying; });
    if (it == downstream_.end() || !done(**it)) return;  // re-added, or busy again
    if (dying->dropped_while_down == 0) {
      node_log().info("downstream {} removed: everything sent to it was acknowledged", dying->name);
    } else {
      node_log().info(
          "downstream {} removed: {} message{} routed to it were given up while it "
          "was down, the rest was acknowledged",
          dying->name, dying->dropped_while_down, dying->dropped_while_down == 1 ? "" : "s");
    }
    if (dying->link) dying->link->close();
    cancel_peer_down(*dying);  // after close(), which reports the link down
    const std::string name = dying->name;
    downstream_.erase(it);
    // Its series go with it: a link_up of 0 for a peer removed on purpose would fire
    // HoprelayLinkDown for good, nothing samples its queue or credits any more, and its
    // counters would stay for as long as the node (their handles went with `dying`).
    metrics_->forget_downstream(name, forward_opcode());
  });
}

std::string Node::reload(std::shared_ptr<const config::Topology> next) {
  const config::NodeSpec* n = next->find(spec_->name);
  if (!n) return "node " + spec_->name + " is not in the new topology";
  auto same = [](const config::Endpoint& a, const config::Endpoint& b) {
    return a.host == b.host && a.port == b.port;
  };
  std::vector<std::string> fixed;
  if (!same(n->listen, spec_->listen)) fixed.push_back("listen");
  if (n->metrics.has_value() != spec_->metrics.has_value() ||
      (n->metrics && !same(*n->metrics, *spec_->metrics))) {
    fixed.push_back("metrics");
  }
  if (n->transport != spec_->transport) fixed.push_back("transport");
  if (n->slots != spec_->slots) fixed.push_back("slots");
  if (n->slot_size != spec_->slot_size) fixed.push_back("slot_size");
  if (n->poll != spec_->poll) fixed.push_back("poll");
  if (n->forward != spec_->forward) fixed.push_back("forward");
  if (n->cpu != spec_->cpu) fixed.push_back("cpu");
  if (n->threads != spec_->threads) fixed.push_back("threads");
  if (n->link_threads != spec_->link_threads) fixed.push_back("link_threads");
  if (!fixed.empty()) {
    std::string names;
    for (const auto& f : fixed)
      names += (names.empty() ? "" : ", ") + ("nodes." + n->name + "." + f);
    return names + " cannot change while the node runs: restart the node to apply it";
  }
  std::optional<stages::Stage> new_stage;
  if (n->stage.plugin != spec_->stage.plugin || n->stage.params != spec_->stage.params) {
    try {
      new_stage.emplace(stages::resolve(n->stage.plugin), n->name, n->stage.params);
    } catch (const stages::StageError& e) {
      return e.what();
    }
  }

  // Every message that arrived before the reload passes the old stage, whole: what the workers
  // have goes on first (a chunk the old stage saw must not meet the new one).
  if (new_stage && workers_) {
    while (workers_->pending() != 0) {
      workers_->collect();
      if (workers_->pending() != 0) std::this_thread::yield();
    }
  }

  // Upstream hosts resolved now, before the point of no return (admission.h).
  Admission admission(*next, *n);

  // Nothing below can fail: the reload is applied whole or not at all.
  std::vector<std::string> added, removed, moved;
  topology_ = std::move(next);
  spec_ = n;
  const bool writes_before = admission_.accepts_writes();
  admission_ = std::move(admission);
  // A peer that now sends by RDMA WRITE restarts to do so: its new link gets a ring it may
  // write into (and one that no longer does, one it may not).
  if (admission_.accepts_writes() != writes_before) {
    node_log().info("reload: receive rings of links accepted from now on are {}",
                    admission_.accepts_writes() ? "remotely writable (a peer sends by WRITE)"
                                                : "for SEND only (no peer sends by WRITE)");
  }
  transport_->set_remote_write(admission_.accepts_writes());
  // Peers that read the new file must not be told it differs from this node's.
  transport_->set_topology_hash(topology_->hash);
  if (link_threads_) link_threads_->set_topology_hash(topology_->hash);
  if (new_stage) {
    // Between two messages: no worker may be inside the old instance when it goes.
    if (workers_) workers_->quiesce();
    stage_ = std::move(*new_stage);
    configure_workers();
    std::string stage_name(stage_.name());
    stage_forward_ = metrics_->hot().wrap(metrics_->stage_verdict(stage_name, "forward"));
    stage_drop_ = metrics_->hot().wrap(metrics_->stage_verdict(stage_name, "drop"));
    stage_error_ = metrics_->hot().wrap(metrics_->stage_verdict(stage_name, "error"));
    stage_seconds_ = &metrics_->stage_seconds(stage_name);
  }
  for (auto& d : downstream_) {
    bool listed =
        std::find(n->downstream.begin(), n->downstream.end(), d->name) != n->downstream.end();
    if (!listed) {
      if (!d->retiring) removed.push_back(d->name);
      d->retiring = true;
      watch_peer_down(*d);  // down now: given peer_down_timeout from when it went down
      retire_if_done(*d);
    } else {
      d->retiring = false;
      if (!same(topology_->find(d->name)->listen, d->address) && started_) {
        // Unacknowledged messages come back (on_returned) and go to the new address.
        moved.push_back(d->name);
        // Closed while it is still d's: close() hands back the unacknowledged frames
        // (on_returned) and reports the link down, and both find their downstream by its link
        // (moved out first, they went to the first downstream's queue: another branch got
        // them and this one lost them). The old link is destroyed once this iteration's
        // events are handled (event_loop.h): one of them may still be for it (a completion of
        // its flushed receives).
        d->link->close();
        std::shared_ptr<transport::OutboundLink> old = std::move(d->link);
        d->warned_down = false;  // a new address: its own warning if it does not come up
        connect(*d);
        loop_.defer([old] {});
      }
    }
  }
  for (const auto& name : n->downstream) {
    bool present = std::any_of(downstream_.begin(), downstream_.end(),
                               [&](const auto& d) { return d->name == name; });
    if (present) continue;
    added.push_back(name);
    Downstream& d = add_downstream(name);
    if (started_) connect(d);
  }
  // A changed on_peer_down or peer_down_timeout applies to the peers that are down now too,
  // counting the time they have been down already.
  bool drop_after = n->on_peer_down == config::OnPeerDown::kDropAfter;
  auto now = transport::EventLoop::Clock::now();
  for (auto& d : downstream_) {
    if (d->retiring) continue;  // drop-after whatever the policy: watched above
    if (d->dropping && !drop_after) {
      stop_dropping(*d, "still down: holding its messages again (on_peer_down = block)");
    } else if (d->dropping && now - d->down_since < n->peer_down_timeout) {
      stop_dropping(*d, "still down: holding its messages again until it has been down for " +
                            config::duration_text(n->peer_down_timeout));
    }
    watch_peer_down(*d);
  }
  rebuild_active();
  export_upstream_series();
  end_joins_.set_topology(*topology_, spec_->name);
  settle_ends();
  metrics_->config_loaded(true, topology_->hash);
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
    return out.empty() ? std::string("-") : out;
  };
  std::string on_peer_down(config::to_string(n->on_peer_down));
  if (drop_after) on_peer_down += " " + config::duration_text(n->peer_down_timeout);
  node_log().info(
      "topology reloaded: downstream added {} removed {} moved {}; route {}; stage {}{}; "
      "on_peer_down {}",
      list(added), list(removed), list(moved), config::to_string(n->route), stage_.name(),
      new_stage ? " (new parameters)" : "", on_peer_down);
  return "";
}

}  // namespace hoprelay::daemon
