// A node's downstream peers, as one component: their links (connect, up, down, credits,
// acknowledgements, frames handed back), routing a message to them (broadcast, round robin or
// by origin), the pump that posts what waits for each (one chunked message at a time per
// link), what happens while one is down (on_peer_down, peer_down_timeout), and a peer a reload
// removed, retired once nothing sent to it is outstanding.
//
// Owns: each Downstream (downstream.h: its link, its queue of slots routed to it and not yet
// posted, its series, its spool), the set routing chooses from, and two parts of its own:
// PeerDown (peer_down.h: the peer-down policy and its timers) and BranchSets (branch_sets.h:
// the peers open chunked messages keep across a reload). With spool_dir, each peer has a
// BranchSpool (branch_spool.h): when a branch has been behind for spool_after (its link down,
// or out of credit while another branch has none and nothing waiting: checked once a
// second), what is routed to it goes to disk, and its slot goes back upstream once the spool
// has it durably (a batch of fdatasyncs on the SpoolSyncer's thread, spool_syncer.h, for
// everything spooled since the last, not one per message, and never on the loop). Under
// on_peer_down = "bypass", a relay down for peer_down_timeout gets a stand-in (stand_in.h) that
// takes its branch until it is back. With rate_limit or rate_limit_to, each limited peer has a
// RateGate (rate_limits.h) that the pump asks before each frame.
// Calls: HeldSlots (a routed slot's refs and routes, a drop's outcome), Releaser::release() when
// the last branch of a slot is done with it, the transport (or the link threads) to connect,
// the metrics and the drop log. Nothing here allocates, locks or logs per message.
// One thread (the node's event loop).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/branch_sets.h"
#include "hoprelay/daemon/downstream.h"
#include "hoprelay/daemon/drop_log.h"
#include "hoprelay/daemon/held_slots.h"
#include "hoprelay/daemon/link_threads.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/daemon/partials.h"
#include "hoprelay/daemon/peer_down.h"
#include "hoprelay/daemon/rate_limits.h"
#include "hoprelay/daemon/receiver.h"
#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/daemon/spool_syncer.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class Downstreams {
 public:
  // `link_threads`: null, or where the links run (link_threads.h). The references outlive
  // this. The peers are those `spec` lists, not connected before connect_all().
  // `events`: the node's, for the links of the stand-ins it runs (stand_in.h).
  Downstreams(const config::Topology& topology, const config::NodeSpec& spec,
              transport::EventLoop& loop, NodeMetrics& metrics, HeldSlots& held, DropLog& drops,
              Releaser& owner, transport::LinkEvents& events, transport::Transport& transport,
              LinkThreads* link_threads);
  ~Downstreams();
  Downstreams(const Downstreams&) = delete;
  Downstreams& operator=(const Downstreams&) = delete;

  // Connects every peer (Node::start).
  void connect_all();
  // Called once, when every peer has been up at least once (systemd readiness).
  void when_ready(std::function<void()> fn) { ready_ = std::move(fn); }
  // A reload, applied by difference (Node::reload, which has checked it may be): peers added
  // (connected when `started`), removed (retired once what was sent to them is acknowledged,
  // or given up after peer_down_timeout), moved (reconnected; what was not acknowledged goes
  // again), and the route and peer-down policy. The peer names, for the reload's log line.
  struct Changes {
    std::vector<std::string> added, removed, moved;
  };
  Changes apply(const config::Topology& topology, const config::NodeSpec& spec, bool started);

  // No peer to route to: this node is a leaf (or every peer was removed).
  bool leaf() const { return active_.empty(); }
  // Frames (messages and end marks) in the spools, not yet acknowledged by their branches.
  uint64_t spooled() const {
    uint64_t n = 0;
    for (const auto& d : peers_) n += d->spool ? d->spool->spool().records() : 0;
    return n;
  }
  // Holds `slot` and routes it: to every peer, or one (route); a chunk to where the first chunk
  // of its message `p` went, whatever a reload changed since. `local`: a branch more that is
  // not a peer (a relay's own application, Node::set_receiver), counted in the slot's refs so
  // that the slot goes back only once it too is done (Node::release_delivered).
  void route(transport::Slot& slot, Partial* p = nullptr, uint16_t local = 0);
  // Holds `slot` and sends it to every peer, whatever the route (an end-of-stream mark);
  // `local` as for route().
  void to_all(transport::Slot& slot, uint16_t local = 0);
  // The peers `p`'s frames go to: none means a leaf for all of it (taken at its first chunk).
  bool no_branches(Partial& p) { return branch_sets_.of(p, active_, spec_->route).peers.empty(); }
  // `p` is done: its branch set is given back.
  void leave(Partial& p) { branch_sets_.leave(p); }
  // A partly forwarded message that ends here with no abort sent: no link waits for its rest.
  void forget_open(uint32_t origin, uint64_t seq);

  // The node's link events (transport::LinkEvents) for its outbound links.
  void on_up(transport::OutboundLink& link);
  void on_down(transport::OutboundLink& link);
  void on_acked(transport::OutboundLink& link, void* cookie);
  void on_outcome(transport::OutboundLink& link, void* cookie, const transport::Outcome& outcome);
  void on_returned(transport::OutboundLink& link, void* cookie);
  void on_credit(transport::OutboundLink& link);

  // The node's own application, at a relay that keeps a copy (Node::set_receiver): a branch
  // more when tick() looks for the one behind. Null: none.
  void set_local(const Receiver* local) { local_ = local; }
  // Once a second: gauges, and a peer down for long said once.
  void tick();
  // With spool_dir, ten times a second (kSpoolLook): which branch is behind, and whether one
  // has been for spool_after (then it starts spooling). Looking once a second, as tick(), let
  // a branch hold the node's slots for up to a second more than spool_after.
  void watch_spools();
  // A drain is done: each link closed on purpose (BYE), so its peer logs a clean close.
  void close_all();
  // Before the node's transport and link threads go: the links first (they call back while
  // they close), then, once the link threads are gone too, cancel_timers().
  void destroy_links();
  void cancel_timers();

 private:
  Downstream* branch_of(const Partial& p);

  // The peer of `link` (its context). A link not ours stops the process: guessing one once
  // sent a branch's messages to another.
  Downstream& of(transport::OutboundLink& link);
  Downstream& add(const std::string& name);
  void connect(Downstream& d);
  void retire_if_done(Downstream& d);
  void rebuild_active();
  // Posts what waits for d, as far as its credits go.
  void pump(Downstream& d);
  // With a chunked message open on d's link, brings its next frame to the front of d's
  // queue; false when that frame has not arrived yet.
  bool bring_open_forward(Downstream& d);
  void note_posted(Downstream& d, const transport::Slot& s);
  // The frame that forwards what `s` holds, `s` its cookie.
  static transport::OutFrame frame_of(transport::Slot& s) {
    return {s.origin, s.seq, s.flags, s.payload(), s.length, s.memory, &s, s.chunk, &s};
  }
  // A branch of `s` is done with it: the slot goes back once every branch is.
  void branch_done(transport::Slot& s) {
    if (--held_.note(s).refs == 0) owner_.release(s);
  }

  // Releases everything waiting for `d` as dropped (reason peer_down): PeerDown's `drop`.
  void drop_waiting(Downstream& d);

  // on_peer_down = "bypass" (downstreams_bypass.cpp). PeerDown's `bypass`: `d`, down for
  // peer_down_timeout, gets a stand-in (a relay; a leaf is held for, said once).
  void start_bypass(Downstream& d);
  // The events of the peer's own link while a stand-in has its branch: up again starts the
  // return, down again stops it.
  void parked_up(Downstream& d);
  void parked_down(Downstream& d);
  // The branch returns to the peer once the stand-in has acknowledged all it was sent.
  void end_bypass_if_done(Downstream& d);
  std::vector<std::unique_ptr<StandIn, StandInDelete>> retired_;  // draining, then destroyed

  // Whether a frame of `length` payload bytes may go to `d` now: no rate limit, no credit
  // (the post fails anyway, and nothing is paid), or its gate lets it go (and it is paid for).
  // False: the gate calls pump(d) again once it may.
  bool paced(Downstream& d, uint32_t length) {
    return !d.rate || d.link->credits() == 0 || d.rate->admit(transport::kFrameHeaderSize + length);
  }
  void set_rate(Downstream& d);

  // pump() for a branch whose spool is active.
  void pump_spooled(Downstream& d);
  void start_spooling(Downstream& d, bool down);
  // watch_spools, for a branch whose spool is active: frames from the slots out on a link that
  // is up, none acknowledged for spool_after (and the peer not waiting for the rest of a
  // chunked message): the peer is frozen, and its link is reset (transport.h, reset), so that
  // they go to the spool and their slots back upstream.
  void watch_frozen(Downstream& d, transport::EventLoop::Clock::time_point now);
  // The spool of `d` took no more (full, or the disk failed): said once per episode.
  void spool_refused(Downstream& d, Spool::Status st);
  // Makes what was spooled durable, then lets its slots go: deferred to the end of the loop
  // iteration, and handed to syncer_ as one batch for every spool (while a batch is in flight,
  // the next waits for it: group commit). Without syncer_ (it could not be made), on the loop.
  void schedule_sync();
  void sync_spools();
  // The batch in flight is on disk (error 0) or failed: its slots go, or stay held until the
  // next tick tries again.
  void synced(int error);
  // The oldest `n` of d's unsynced are durable: their branch is done with them.
  void release_synced(Downstream& d, size_t n);
  void sync_error(Downstream& d);  // said once per episode
  bool sync_scheduled_ = false;
  std::unique_ptr<SpoolSyncer> syncer_;  // the first spool makes it
  bool connected_ = false;               // connect_all() ran: a peer added now comes from a reload
  // With a chunked message (origin, seq) open, brings its next frame in d's queue to the
  // front; false when that frame has not arrived yet.
  bool bring_forward(Downstream& d, uint32_t origin, uint64_t seq);

  const config::Topology* topology_;
  const config::NodeSpec* spec_;
  transport::EventLoop& loop_;
  transport::EventLoop::TimerId spool_look_ = 0;  // the next watch_spools()
  NodeMetrics& metrics_;
  HeldSlots& held_;
  DropLog& drops_;
  Releaser& owner_;
  transport::LinkEvents& events_;
  transport::Transport& transport_;
  LinkThreads* link_threads_;
  RateLimits rate_limits_;  // before peers_: their gates point at its bucket
  std::vector<std::unique_ptr<Downstream>> peers_;
  std::vector<Downstream*> active_;  // what route() chooses from: not retiring
  BranchSets branch_sets_;
  PeerDown peer_down_;
  size_t round_robin_ = 0;
  std::function<void()> ready_;
  const Receiver* local_ = nullptr;
  std::string detail_;  // a drop's outcome text
  HotCounters::Ref dropped_too_large_;
  HotCounters::Ref dropped_peer_down_;
};

}  // namespace hoprelay::daemon
