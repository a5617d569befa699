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
  stages::Stage stage(stages::resolve(spec.stage.plugin), spec.name, spec.stage.params);
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
