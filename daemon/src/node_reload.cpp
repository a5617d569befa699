// A reload (SIGHUP, docs/operations.md): what may change while the node runs, applied whole or
// not at all. The downstream peers' part (added, removed, moved) is Downstreams::apply().
#include <algorithm>
#include <optional>

#include "hoprelay/daemon/node.h"
#include "hoprelay/transport/tls.h"
#include "node_log.h"

namespace hoprelay::daemon {

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
  if (n->spool_dir != spec_->spool_dir) fixed.push_back("spool_dir");
  if (n->spool_max != spec_->spool_max) fixed.push_back("spool_max");
  if (n->spool_after != spec_->spool_after) fixed.push_back("spool_after");
  if (n->peer_dead_after != spec_->peer_dead_after) fixed.push_back("peer_dead_after");
  if (n->tls.enabled() != spec_->tls.enabled()) fixed.push_back("tls");
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
  if (new_stage) stage_->finish_all();

  // Certificates read again (renewed ones under the same paths, or new paths): links up now
  // keep theirs, handshakes from now on use these. Files that do not load refuse the reload.
  std::shared_ptr<const transport::TlsContext> tls;
  if (n->tls.enabled()) {
    try {
      tls = transport::TlsContext::load(n->tls);
    } catch (const transport::TransportError& e) {
      return e.what();
    }
  }

  // Upstream hosts resolved now, before the point of no return (admission.h).
  Admission admission(*next, *n);

  // Nothing below can fail: the reload is applied whole or not at all.
  // The old topology lives until the end: the downstreams read it until apply().
  const std::shared_ptr<const config::Topology> previous =
      std::exchange(topology_, std::move(next));
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
  const uint64_t hash = topology_->hash;
  transport_->set_topology_hash(hash);
  if (tls) transport_->set_tls(tls);
  if (link_threads_) {
    link_threads_->each_transport([hash, tls](transport::Transport& t) {
      t.set_topology_hash(hash);
      if (tls) t.set_tls(tls);
    });
  }
  if (tls) node_log().info("reload: TLS certificates read again from {}", n->tls.cert);
  stage_->set_spec(*spec_);
  chunks_->set_spec(*spec_);
  if (new_stage) stage_->replace(std::move(*new_stage));
  const Downstreams::Changes changes = downstreams_->apply(*topology_, *spec_, started_);
  upstreams_->export_series(*spec_);
  end_marks_->apply(*topology_, *spec_);
  metrics_->config_loaded(true, topology_->hash);
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
    return out.empty() ? std::string("-") : out;
  };
  std::string on_peer_down(config::to_string(n->on_peer_down));
  if (n->on_peer_down == config::OnPeerDown::kDropAfter)
    on_peer_down += " " + config::duration_text(n->peer_down_timeout);
  node_log().info(
      "topology reloaded: downstream added {} removed {} moved {}; route {}; stage {}{}; "
      "on_peer_down {}",
      list(changes.added), list(changes.removed), list(changes.moved), config::to_string(n->route),
      stage_->name(), new_stage ? " (new parameters)" : "", on_peer_down);
  return "";
}

}  // namespace hoprelay::daemon
