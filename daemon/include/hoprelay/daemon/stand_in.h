// A downstream relay's role, run by the node upstream of it while it is down for good
// (on_peer_down = "bypass", docs/topology.md): the relay's node as the topology declares it
// (its stage with its parameters, unless the stage's effect is local to the relay's host, its
// routing, its own downstream nodes and their policies),
// built inside this process on this node's event loop, fed through an in-process link that
// copies each frame (the relay's stage changes it in place; the slot here is the other
// branches' too). Its links to the relay's downstream nodes go out from this host under the
// relay's name; those nodes admit it for that branch only (Admission, Topology::stand_ins).
// Whatever the relay had passed on before it died, they take once (deduplication by origin
// and sequence). A downstream of the relay that is down too is bypassed the same way by the
// node here, recursively.
//
// Owns: the stand-in node (no listening socket, no metrics endpoint), the memory frames land
// in, and the in-process link into it while that link is not in Downstream::link.
// Calls: the owner's LinkEvents for the link's events, until retire(); the loop.
// One thread (the owner node's event loop). Setup's convention: the constructor throws.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/downstream.h"
#include "hoprelay/daemon/node.h"
#include "hoprelay/stages/stage.h"
#include "hoprelay/transport/event_loop.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class StandIn final : private transport::LinkEvents {
 public:
  // Builds node `peer` of `topology` as node `host` runs it: connected from host's listen
  // address (its links speak for `host_transport`: Transport::speak_for) to the peer's
  // downstream nodes (started: connecting once the loop runs), with a
  // link from `host` into it whose events go to `owner` (the host node). Throws when its stage
  // does not load or its transport cannot be made, naming the peer.
  StandIn(const config::Topology& topology, const config::NodeSpec& host, const std::string& peer,
          transport::EventLoop& loop, transport::LinkEvents& owner,
          transport::Transport& host_transport);
  ~StandIn();
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;

  // The link into it, once: the downstream's link while this stands in (Downstream::link).
  std::unique_ptr<transport::OutboundLink> take_link();
  // It stands in no more. `link` is the one take_link() gave, with nothing unacknowledged on
  // it: closed here (its events no longer reach the owner), and the node drains: its links
  // to the peer's downstream nodes close with a BYE. `done` is called from the loop once this
  // may be destroyed (not from inside one of its own calls).
  void retire(std::unique_ptr<transport::OutboundLink> link, std::function<void()> done);
  Node& node() { return *node_; }
  // The stage of the peer, as the log names it.
  const std::string& stage() const { return stage_name_; }
  // What this does with the peer's stage, for the log line that says it stands in: "its stage
  // crc32c runs here", or, for a stage whose effect is local to the peer's host (file-sink,
  // verify-sink: stage_abi.h, HOPRELAY_STAGE_LOCAL), that it does not run here; where its
  // local effect runs here all the same (it declares none, or both), that too, and the fix.
  std::string stage_text() const;

 private:
  // The host's side of the in-process link: forwarded to the owner while it stands in.
  bool admit(const transport::PeerInfo&, std::string&) override { return false; }
  void on_inbound_up(transport::InboundLink&) override {}
  void on_message(transport::InboundLink&, transport::Slot&) override {}
  void on_inbound_down(transport::InboundLink&, std::string_view) override {}
  void on_outbound_up(transport::OutboundLink& link) override;
  void on_outbound_down(transport::OutboundLink& link, std::string_view reason) override;
  void on_acked(transport::OutboundLink& link, void* cookie) override;
  void on_outcome(transport::OutboundLink& link, void* cookie,
                  const transport::Outcome& outcome) override;
  void on_returned(transport::OutboundLink& link, void* cookie) override;
  void on_credit(transport::OutboundLink& link) override;
  void on_refused(transport::OutboundLink& link, std::string_view reason) override;

  transport::LinkEvents& owner_;
  std::string peer_;
  std::string stage_name_;
  stages::StageType::Effect effect_ = stages::StageType::Effect::kUndeclared;
  bool forwarding_ = true;
  // The topology as this host runs the peer (its listen address this host's, no metrics
  // endpoint, no threads or spool of its own): the node keeps a pointer into it.
  std::shared_ptr<const config::Topology> topology_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<transport::OutboundLink> link_;  // until take_link(), and after retire()
};

}  // namespace hoprelay::daemon
