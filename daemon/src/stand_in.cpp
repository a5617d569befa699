// A node's stand-in for a downstream relay that is down for good (stand_in.h).
#include "hoprelay/daemon/stand_in.h"

#include "hoprelay/stages/stage.h"
#include "hoprelay/transport/inproc.h"
#include "hoprelay/transport/slot_ring.h"
#include "node_log.h"

namespace hoprelay::daemon {

namespace {

// The peer's entry as this host runs it: it sends from this host's address, serves no
// metrics of its own (the host's say what it does), and runs on the host's loop alone.
std::shared_ptr<const config::Topology> as_run_here(const config::Topology& topology,
                                                    const config::NodeSpec& host,
                                                    const std::string& peer) {
  auto copy = std::make_shared<config::Topology>(topology);
  for (auto& n : copy->nodes) {
    if (n.name != peer) continue;
    n.listen = host.listen;
    n.metrics.reset();
    n.threads = 1;
    n.link_threads = 0;
    n.cpu.clear();
    n.spool_dir.clear();  // the peer's spool directory is its host's, not this one's
  }
  return copy;
}

}  // namespace

StandIn::StandIn(const config::Topology& topology, const config::NodeSpec& host,
                 const std::string& peer, transport::EventLoop& loop, transport::LinkEvents& owner,
                 transport::Transport& host_transport)
    : owner_(owner), peer_(peer), topology_(as_run_here(topology, host, peer)) {
  const config::NodeSpec& spec = *topology_->find(peer);
  stage_name_ = spec.stage.plugin;
  std::shared_ptr<const stages::StageType> type = stages::resolve(spec.stage.plugin);
  effect_ = type->effect();
  // A local effect is the peer's host's (its copy, its report): here it would land in this
  // host's files. The branch depends only on the message, which such a stage forwards as it
  // arrived, so the stand-in passes it on unchanged.
  stages::Stage stage = effect_ == stages::StageType::Effect::kLocal
                            ? stages::Stage(stages::resolve("passthrough"), spec.name, {})
                            : stages::Stage(std::move(type), spec.name, spec.stage.params);
  node_ = std::make_unique<Node>(topology_, peer, loop, std::move(stage));
  // Its links send from this host's address, the one the peer's downstream nodes admit it
  // from, and over verbs from this node's protection domain.
  node_->speak_for(host_transport);
  node_->start(Node::Start::kConnectOnly);
  // Frames land in memory of the stand-in's own transport: its links to the peer's
  // downstream nodes send from it (registered with the device over verbs, in the host's
  // protection domain).
  transport::MemoryRegion& landing =
      node_->lend_memory(size_t{spec.slots} * transport::SlotRing::stride_for(spec.slot_size));
  const config::NodeSpec& me = *topology.find(host.name);
  transport::PeerInfo from{transport::PeerRole::kNode, me.name, topology.hash, 0,
                           // Admission compares the host part with the topology's.
                           me.listen.to_string()};
  transport::ConnectParams params{peer, spec.listen, false, spec.slots};
  transport::LinkEvents& events = *this;  // (a private base: make_unique cannot see it)
  link_ = std::make_unique<transport::inproc::InprocOutbound>(loop, *node_, events, from, params,
                                                              spec.slot_size, &landing);
}

StandIn::~StandIn() {
  // The node first: it holds slots of the link's entries, and its own links call back into it
  // while they close; the link and its landing memory after it.
  std::unique_ptr<transport::OutboundLink> link = std::move(link_);
  node_.reset();
  link.reset();
}

std::unique_ptr<transport::OutboundLink> StandIn::take_link() {
  return std::move(link_);
}

void StandIn::retire(std::unique_ptr<transport::OutboundLink> link, std::function<void()> done) {
  forwarding_ = false;
  link_ = std::move(link);
  link_->close();
  node_->drain(std::chrono::seconds(5), [done = std::move(done)](uint64_t left) {
    if (left != 0) {
      node_log().warn("a retired stand-in still held {} messages: its links close anyway", left);
    }
    done();
  });
}

std::string StandIn::stage_text() const {
  using Effect = stages::StageType::Effect;
  switch (effect_) {
    case Effect::kTransform:
      return fmt::format("its stage {} runs here", stage_name_);
    case Effect::kLocal:
      return fmt::format(
          "its stage {} does not run here (its effect is local to {}'s host: {} misses what "
          "goes around it), its messages go on as they arrive",
          stage_name_, peer_, peer_);
    case Effect::kBoth:
      return fmt::format(
          "its stage {} runs here, and so does its local effect (it declares both "
          "HOPRELAY_STAGE_TRANSFORM and HOPRELAY_STAGE_LOCAL: docs/stages.md, \"Effect\")",
          stage_name_);
    case Effect::kUndeclared:
      break;
  }
  return fmt::format(
      "its stage {} runs here as a transform: it declares no effect (built before stage ABI "
      "1.4), so anything it writes on its host is written on this one too; declare "
      "HOPRELAY_STAGE_TRANSFORM or HOPRELAY_STAGE_LOCAL (docs/stages.md, \"Effect\")",
      stage_name_);
}

void StandIn::on_outbound_up(transport::OutboundLink& link) {
  if (forwarding_) owner_.on_outbound_up(link);
}
void StandIn::on_outbound_down(transport::OutboundLink& link, std::string_view reason) {
  if (forwarding_) owner_.on_outbound_down(link, reason);
}
void StandIn::on_acked(transport::OutboundLink& link, void* cookie) {
  if (forwarding_) owner_.on_acked(link, cookie);
}
void StandIn::on_outcome(transport::OutboundLink& link, void* cookie,
                         const transport::Outcome& outcome) {
  if (forwarding_) owner_.on_outcome(link, cookie, outcome);
}
void StandIn::on_returned(transport::OutboundLink& link, void* cookie) {
  if (forwarding_) owner_.on_returned(link, cookie);
}
void StandIn::on_credit(transport::OutboundLink& link) {
  if (forwarding_) owner_.on_credit(link);
}
void StandIn::on_refused(transport::OutboundLink&, std::string_view reason) {
  // Only when the topology copy disagrees with itself: the link stays down, and the branch
  // is held as under "block".
  node_log().error("the stand-in for {} refused this node's link: {}", peer_, reason);
}

}  // namespace hoprelay::daemon
