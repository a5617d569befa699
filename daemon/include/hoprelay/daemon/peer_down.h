// What a node does about a downstream that is down (on_peer_down, peer_down_timeout:
// docs/topology.md): how long it holds the messages routed there ("block": for as long as it
// takes; "drop-after": until the peer has been down for peer_down_timeout, from then on it
// drops them; "bypass": until then, from then on a node standing in for it takes them,
// stand_in.h), when it holds them again, and the one warning about a peer down for long.
// A peer a reload removed is "drop-after" whatever the policy says: no node of the topology
// will take its messages.
//
// Owns: the meaning of the PeerDown fields of each Downstream (downstream.h) and their timers.
// Calls: `drop` (Downstreams::drop_waiting: what waits for a peer goes back upstream as dropped),
// `bypass` (Downstreams::start_bypass), the event loop's timers and the log. Once per transition,
// never per message. One thread (the node's event loop).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/downstream.h"
#include "hoprelay/transport/event_loop.h"

namespace hoprelay::daemon {

class PeerDown {
 public:
  using Drop = std::function<void(Downstream&)>;
  // `spec` stays valid until the next set_spec(); `loop` outlives this.
  PeerDown(transport::EventLoop& loop, const config::NodeSpec& spec, Drop drop, Drop bypass);

  // A reload's policy, from now on (then rewatch() the peers).
  void set_spec(const config::NodeSpec& spec) { spec_ = &spec; }
  // The link of `d` went down, or starts down (connected, not up until its welcome).
  void went_down(Downstream& d);
  // The link of `d` is up: no more waiting, and what was dropped is said.
  void came_up(Downstream& d);
  // (Re)arms the timeout of `d` if it is down, from when it went down, under the current
  // policy (a reload that shortens the timeout counts the time spent waiting already); does
  // nothing for a peer that is up or already dropping.
  void watch(Downstream& d);
  // After a reload: the policy now in force applies to `peers` down now too; a peer that was
  // being dropped for and is held for again is said.
  void rewatch(const std::vector<std::unique_ptr<Downstream>>& peers);
  void cancel(Downstream& d);
  // Once a second: a peer down, or never up, for kWarnAfter is said once, at warning level.
  // The transports log refused connects at debug level only (a peer not yet started is normal
  // at start), so a head whose downstream never came up looked idle.
  void warn_long_down(const std::vector<std::unique_ptr<Downstream>>& peers);
  static constexpr std::chrono::seconds kWarnAfter{10};

 private:
  bool drop_after(const Downstream& d) const {
    return spec_->on_peer_down == config::OnPeerDown::kDropAfter || d.retiring;
  }
  bool bypass(const Downstream& d) const {
    return spec_->on_peer_down == config::OnPeerDown::kBypass && !d.retiring && !d.stand_in;
  }
  void start_dropping(Downstream& d);
  void stop_dropping(Downstream& d, std::string_view now_what);

  transport::EventLoop& loop_;
  const config::NodeSpec* spec_;
  Drop drop_;
  Drop bypass_;
};

}  // namespace hoprelay::daemon
