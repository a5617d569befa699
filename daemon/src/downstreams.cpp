// A node's downstream peers (downstreams.h): their links, routing, the pump, dropping what
// waits for a peer given up, a reload's changes and retiring a removed peer. What happens while
// a peer is down is peer_down.cpp; the branch sets of chunked messages, branch_sets.cpp.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "hoprelay/daemon/downstreams.h"
#include "hoprelay/daemon/stand_in.h"
#include "node_log.h"

namespace hoprelay::daemon {

namespace {

// How often a node with spool_dir looks for a branch behind (watch_spools).
constexpr auto kSpoolLook = std::chrono::milliseconds(100);
// A branch out of credit is spooled after spool_after plus this per hop below its peer. Every
// node acknowledges only what every node below it has, so one slow host leaves every link above
// it out of credit at about the same time; without the grace each relay that keeps a copy (an
// idle branch) spooled for its own downstream at once, and a 32-host chain went through 24
// spools where the one above the slow host was enough. With it the node nearest the slow host
// spools first; its acknowledgements give the links above credit again (seen within two looks)
// before their own, longer, grace ends. A branch that is down is spooled after spool_after.
constexpr auto kSpoolGracePerHop = std::chrono::milliseconds(250);

// Spreads origins over branches for route = "hash": one origin always takes the same branch.
inline size_t origin_branch(uint32_t origin, size_t branches) {
  uint64_t x = origin * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>((x >> 32) % branches);
}

// The `opcode` label of a node's forwarding.
std::string forward_opcode(const transport::Transport& transport, const config::NodeSpec& spec) {
  if (transport.name() != "verbs") return "tcp";
  return spec.forward == config::Forward::kWrite ? "write" : "send";
}

}  // namespace

Downstreams::Downstreams(const config::Topology& topology, const config::NodeSpec& spec,
                         transport::EventLoop& loop, NodeMetrics& metrics, HeldSlots& held,
                         DropLog& drops, Releaser& owner, transport::LinkEvents& events,
                         transport::Transport& transport, LinkThreads* link_threads)
    : topology_(&topology),
      spec_(&spec),
      loop_(loop),
      metrics_(metrics),
      held_(held),
      drops_(drops),
      owner_(owner),
      events_(events),
      transport_(transport),
      link_threads_(link_threads),
      rate_limits_(loop, metrics),
      branch_sets_([this](Downstream& d) { retire_if_done(d); }),
      peer_down_(
          loop, spec, [this](Downstream& d) { drop_waiting(d); },
          [this](Downstream& d) { start_bypass(d); }),
      dropped_too_large_(metrics.hot().wrap(metrics.dropped("too_large_for_peer"))),
      dropped_peer_down_(metrics.hot().wrap(metrics.dropped("peer_down"))) {
  rate_limits_.configure(spec);
  for (const auto& name : spec_->downstream) add(name);
  rebuild_active();
  if (!spec_->spool_dir.empty()) watch_spools();
}

Downstreams::~Downstreams() {
  destroy_links();
  cancel_timers();
}

void Downstreams::connect_all() {
  connected_ = true;
  for (auto& d : peers_) connect(*d);
}

void Downstreams::destroy_links() {
  // A stand-in before the link into it (its node holds that link's slots).
  retired_.clear();
  for (auto& d : peers_) {
    d->stand_in.reset();
    d->link.reset();
    d->parked.reset();
  }
}

void Downstreams::cancel_timers() {
  if (spool_look_) loop_.cancel(spool_look_);
  spool_look_ = 0;
  for (auto& d : peers_) peer_down_.cancel(*d);
}

void Downstreams::close_all() {
  for (auto& d : peers_) {
    // A stand-in's own links, to the peer's downstream nodes, say goodbye too: this node has
    // drained, so the stand-in has had everything it was sent acknowledged there.
    if (d->stand_in) d->stand_in->node().close_downstream_links();
    if (d->link) d->link->close();
    if (d->parked) d->parked->close();
  }
}

void Downstreams::watch_spools() {
  spool_look_ = loop_.after(kSpoolLook, [this] { watch_spools(); });
  // A branch is behind when its link is down, or when it is out of credit while another branch
  // keeps up: a peer with nothing waiting and credit to spare, or the relay's own application
  // holding less than half as many messages (it holds the node's slots, and so the others,
  // back). The application's queue is compared, not required empty: the consumer's loop runs
  // these looks inside its receive calls, where a message delivered in the same iteration
  // makes an application that keeps up look busy, and each such look started the branch's
  // grace over (a 32-host chain at 200 Mbit/s with its last host at R/4: its upstream spooled
  // 1.2 to 2.7 s into the run, and once the relay above it spooled first; now 1.3 to 1.4 s).
  auto up = [](const Downstream& d) { return d.link && d.link->up(); };
  auto idle = [&](const Downstream& d) { return d.waiting.empty() && up(d) && d.link->credits(); };
  const auto now = transport::EventLoop::Clock::now();
  for (auto& dp : peers_) {
    Downstream& d = *dp;
    if (!d.spool) continue;
    if (d.spool->active()) {
      watch_frozen(d, now);
      continue;
    }
    if (d.retiring) continue;
    const bool down = !up(d);
    // Out of credit: its window is full (what waits beyond it, if anything, is in `waiting`),
    // or as many frames in flight as the node lets one branch have.
    const bool stalled =
        !down && (d.link->credits() == 0 || d.link->in_flight() >= d.spool_in_flight_cap);
    bool others_keep_up = false;
    if (stalled) {
      const size_t holds = d.waiting.size() + d.link->in_flight();
      others_keep_up = local_ && 2 * local_->backlog() < holds;
      for (const Downstream* o : active_) others_keep_up |= o != &d && idle(*o);
    }
    const auto after = down ? spec_->spool_after : d.spool_stalled_after;
    if (d.spool->behind_for_long(down || (stalled && others_keep_up), now, after)) {
      start_spooling(d, down);
    }
  }
}

void Downstreams::tick() {
  peer_down_.warn_long_down(peers_);
  const int64_t wall = BranchSpool::wall_ns();
  for (auto& dp : peers_) {
    Downstream& d = *dp;
    if (d.stand_in) {
      d.stand_in->node().tick();
      metrics_.bypassed(d.name).Increment(static_cast<double>(d.bypassed - d.bypassed_counted));
      d.bypassed_counted = d.bypassed;
    }
    d.queued->Set(static_cast<double>(d.waiting.size()));
    d.credits->Set(d.link ? d.link->credits() : 0);
    if (!d.spool) continue;
    if (!d.unsynced.empty()) schedule_sync();  // a sync that failed is tried again
    d.spool->publish(wall);
  }
}

Downstream& Downstreams::add(const std::string& name) {
  auto d = std::make_unique<Downstream>();
  d->name = name;
  d->address = topology_->find(name)->listen;
  d->waiting = RingQueue<transport::Slot*>(size_t{spec_->slots} * 4);
  d->metrics = metrics_.outbound(name, forward_opcode(transport_, *spec_));
  d->queued = &metrics_.queued(name);
  d->credits = &metrics_.credits(name);
  d->replayed = &metrics_.replayed(name);
  set_rate(*d);
  if (!spec_->spool_dir.empty()) {
    const uint32_t window = topology_->find(name)->slots;
    const uint32_t height = topology_->height(name);
    d->spool_stalled_after = spec_->spool_after + kSpoolGracePerHop * height;
    d->spool_in_flight_cap = std::min(4 * (height + 1), std::max(1u, spec_->slots / 2));
    try {
      d->spool = std::make_unique<BranchSpool>(*spec_, name, window, metrics_);
      if (!syncer_) {
        syncer_ = std::make_unique<SpoolSyncer>(loop_, [this](int error) { synced(error); });
      }
    } catch (const std::exception& e) {
      if (!connected_) throw;  // at start: the node does not start (setup's convention)
      // A peer a reload added: the reload is past the point where it could be refused.
      node_log().error("downstream {} runs without a spool: {}", name, e.what());
    }
    d->unsynced = RingQueue<transport::Slot*>(size_t{spec_->slots} * 4);
    if (d->spool && d->spool->active()) {
      node_log().info(
          "downstream {}: {} frames (messages and end marks) left in its spool {} "
          "by an earlier run go to it first",
          name, d->spool->spool().records(), d->spool->dir());
    }
  }
  peers_.push_back(std::move(d));
  return *peers_.back();
}

void Downstreams::set_rate(Downstream& d) {
  d.rate = rate_limits_.gate(d.name, [this, &d] { pump(d); });
}

void Downstreams::connect(Downstream& d) {
  const config::NodeSpec* peer = topology_->find(d.name);
  bool write = spec_->forward == config::Forward::kWrite;
  d.address = peer->listen;
  transport::ConnectParams params{d.name, peer->listen, write, peer->slots};
  // The spool's send buffers first: the node listens (over verbs: opens its device) before
  // it connects, and a frame from the spool goes out only once the link is up.
  if (d.spool) d.spool->allocate_buffers(transport_);
  d.link = link_threads_ ? link_threads_->connect(params) : transport_.connect(params);
  d.link->set_context(&d);  // of()
  peer_down_.went_down(
      d);  // not up until its welcome: a peer that never comes up is down from here
}

void Downstreams::rebuild_active() {
  active_.clear();
  for (auto& d : peers_) {
    if (!d->retiring) active_.push_back(d.get());
  }
  branch_sets_.peers_changed();
}

void Downstreams::to_all(transport::Slot& slot, uint16_t local) {
  SlotNote& n = held_.hold(slot);
  n.refs = static_cast<uint16_t>(active_.size() + local);
  n.routes = n.refs;
  for (Downstream* d : active_) {
    d->waiting.push_back(&slot);
    pump(*d);
  }
}

void Downstreams::route(transport::Slot& slot, Partial* p, uint16_t local) {
  SlotNote& n = held_.hold(slot);
  // A chunk goes where its message's first chunk went, whatever a reload changed since (the
  // peers and the route).
  const BranchSets::Set* set = p ? &branch_sets_.of(*p, active_, spec_->route) : nullptr;
  const std::vector<Downstream*>& to = set ? set->peers : active_;
  const config::Route how = set ? set->route : spec_->route;
  if (how == config::Route::kBroadcast) {
    n.refs = static_cast<uint16_t>(to.size() + local);
    n.routes = n.refs;
    for (Downstream* d : to) {
      d->waiting.push_back(&slot);
      pump(*d);
    }
    return;
  }
  // One branch per message: the chunks of a message follow the branch of its first, even
  // when a reload has removed that branch since (its set keeps it until they are acknowledged).
  Downstream* d = p ? branch_of(*p) : nullptr;
  if (!d && how == config::Route::kRoundRobin) {
    d = to[round_robin_++ % to.size()];
  } else if (!d) {
    d = to[origin_branch(slot.origin, to.size())];
  }
  if (p) p->downstream = d;
  n.refs = static_cast<uint16_t>(1 + local);
  n.routes = n.refs;
  d->waiting.push_back(&slot);
  pump(*d);
}

Downstream* Downstreams::branch_of(const Partial& p) {
  if (!p.downstream) return nullptr;
  for (auto& d : peers_) {
    if (d.get() == p.downstream) return d.get();
  }
  return nullptr;  // retired meanwhile
}

// Posts what this downstream has waiting, as far as its credits go.
void Downstreams::pump(Downstream& d) {
  // Returning to the peer: the stand-in gets nothing new, only the rest of a chunked message
  // open on its link.
  if (d.returning && !d.open) return end_bypass_if_done(d);
  if (d.spool && d.spool->active()) return pump_spooled(d);
  if (d.dropping) return drop_waiting(d);
  while (!d.waiting.empty() && d.link && d.link->up()) {
    if (d.open && !bring_open_forward(d)) break;  // the open message's next chunk is not here
    transport::Slot* s = d.waiting.front();
    if (s->length > d.link->max_payload()) {
      // Only possible when the peer runs another topology (validation requires downstream
      // slots at least as large): it could never be delivered there, and posting it would
      // make the peer close the link and the replay loop forever. Counted and dropped.
      d.waiting.pop_front();
      dropped_too_large_.add();
      drops_.note("too_large_for_peer", d.name, "larger than the downstream's slots", s->origin,
                  s->seq, loop_.now_ns());
      detail_ = std::to_string(s->length) + " bytes; " + d.name + " takes at most " +
                std::to_string(d.link->max_payload());
      held_.record_drop(*s, transport::DropReason::kTooLargeForPeer, detail_, true);
      if (!d.warned_too_large) {
        d.warned_too_large = true;
        node_log().error(
            "{} takes at most {} bytes per message, less than this node forwards: "
            "dropping such messages (is it running another topology file?)",
            d.name, d.link->max_payload());
      }
      note_posted(d, *s);
      branch_done(*s);
      continue;
    }
    const transport::OutFrame f = frame_of(*s);
    // No more of the node's slots in flight than the branch's cap (downstream.h), but a
    // chunked message's frames all go: a peer that reassembles acknowledges none before its last.
    if (d.spool && !d.open && d.link->in_flight() >= d.spool_in_flight_cap) break;
    if (!paced(d, s->length) || !d.link->post(f)) break;
    d.waiting.pop_front();
    ++d.slots_in_flight;
    note_posted(d, *s);
    if (d.stand_in) {
      ++d.bypassed;
      if (d.returning && !d.open) break;
    }
  }
  // A removed peer whose last waiting messages were dropped above (too large) has nothing
  // left to be acknowledged: no acknowledgement would come to retire it.
  if (d.retiring) retire_if_done(d);
}

// A peer given up (PeerDown): what waits for it goes back upstream, dropped, and counted.
void Downstreams::drop_waiting(Downstream& d) {
  uint64_t dropped = 0;
  uint32_t origin = 0;
  uint64_t seq = 0;
  if (d.retiring && d.spool) {
    // A removed peer given up: what its spool holds goes too.
    if (!d.spool->caught_up()) {
      // Those not yet durable still hold their slots: dropped below, as the rest of `waiting`.
      const uint64_t n = d.spool->discard() - d.unsynced.size();
      d.syncing = 0;  // a sync in flight has nothing left to let go here
      while (!d.unsynced.empty()) {
        d.waiting.push_front(d.unsynced.front());
        d.unsynced.pop_front();
      }
      dropped_peer_down_.add(n);
      d.dropped_while_down += n;
      drops_.note("peer_down", d.name,
                  "its downstream was removed from the topology and is down longer than "
                  "peer_down_timeout: its spool was given up",
                  0, 0, loop_.now_ns(), n);
    }
  }
  while (!d.waiting.empty()) {
    transport::Slot* s = d.waiting.front();
    d.waiting.pop_front();
    if (dropped == 0) std::tie(origin, seq) = std::pair(s->origin, s->seq);
    if (!(s->flags & transport::kFlagEnd)) {  // an end mark is not a message
      ++dropped;
      if (dropped == 1) {
        detail_ = "downstream " + d.name + (d.retiring ? " removed from the topology and" : "") +
                  " down longer than " + config::duration_text(spec_->peer_down_timeout);
      }
      held_.record_drop(*s, transport::DropReason::kPeerDown, detail_, true);
    }
    branch_done(*s);
  }
  if (dropped == 0) return;
  dropped_peer_down_.add(dropped);
  drops_.note("peer_down", d.name,
              d.retiring ? "its downstream was removed from the topology and is down longer "
                           "than peer_down_timeout"
                         : "its downstream is down longer than peer_down_timeout",
              origin, seq, loop_.now_ns(), dropped);
  d.dropped_while_down += dropped;
  if (d.retiring) retire_if_done(d);
}

bool Downstreams::bring_open_forward(Downstream& d) {
  return bring_forward(d, d.open_origin, d.open_seq);
}

bool Downstreams::bring_forward(Downstream& d, uint32_t origin, uint64_t seq) {
  for (size_t i = 0; i < d.waiting.size(); ++i) {
    const transport::Slot* s = d.waiting.at(i);
    if (s->origin == origin && s->seq == seq) {
      if (i > 0) d.waiting.move_to_front(i);  // overtakes frames of other messages
      return true;
    }
  }
  return false;
}

void Downstreams::note_posted(Downstream& d, const transport::Slot& s) {
  if (!transport::is_chunk(s.flags, s.chunk)) return;
  d.open = (s.flags & transport::kFlagMore) != 0;  // its last frame (or an abort) closes it
  d.open_origin = s.origin;
  d.open_seq = s.seq;
}

void Downstreams::on_outcome(transport::OutboundLink& link, void* cookie,
                             const transport::Outcome& outcome) {
  Downstream& d = of(link);
  if (outcome.total > 0) d.metrics.dropped_below.add();  // (not for a spool below)
  // A spooled message's slot went back upstream when the spool had it: the node below counted
  // and logged its drop, and there is no outcome here to carry it further.
  if (d.spool && d.spool->owns(cookie)) return;
  held_.merge_below(*static_cast<transport::Slot*>(cookie), outcome);
}

Downstream& Downstreams::of(transport::OutboundLink& link) {
  auto* d = static_cast<Downstream*>(link.context());
  if (d && (d->link.get() == &link || d->parked.get() == &link)) [[likely]]
    return *d;
  // Unreachable: every link the transport reports is one of ours, and a reload closes a link
  // before it leaves its downstream. Should that break, stop rather than guess a downstream
  // (a guess once sent one branch's messages to another): the upstream replays what this node
  // held once systemd has restarted it.
  node_log().critical("internal error: link to {} is not a downstream of node {}: stopping",
                      link.peer_name(), spec_->name);
  node_log().flush();
  std::abort();
}

void Downstreams::on_acked(transport::OutboundLink& link, void* cookie) {
  Downstream& d = of(link);
  if (d.spool && d.spool->owns(cookie)) {
    const BranchSpool::Acked a = d.spool->acked();
    if (!a.end_mark) {
      d.metrics.messages[0].add();
      d.metrics.bytes[0].add(a.length);
    }
    if (d.retiring) retire_if_done(d);
    return;
  }
  auto* slot = static_cast<transport::Slot*>(cookie);
  if (!(slot->flags & transport::kFlagEnd)) {
    d.metrics.messages[0].add();
    d.metrics.bytes[0].add(slot->length);
  }
  --d.slots_in_flight;
  branch_done(*slot);
  // The last frame from the slots a spool waited for: the spool takes what waits (pump).
  if (d.slots_in_flight == 0 && d.spool && d.spool->active()) pump(d);
  if (d.retiring) retire_if_done(d);
  if (d.returning) end_bypass_if_done(d);
}

void Downstreams::on_returned(transport::OutboundLink& link, void* cookie) {
  Downstream& d = of(link);
  d.replayed->Increment();  // the link failed: not the per-message path
  if (d.spool && d.spool->owns(cookie)) {
    d.spool->link_down();  // newest first: the spool's come back before the older slots'
    return;
  }
  --d.slots_in_flight;
  // With the spool active: posted before it started, and older than anything in it (nothing
  // went into it while this was out), so it goes in first (on_down pumps).
  d.waiting.push_front(static_cast<transport::Slot*>(cookie));
  if (d.dropping) drop_waiting(d);
}

void Downstreams::on_credit(transport::OutboundLink& link) {
  pump(of(link));
}

void Downstreams::on_up(transport::OutboundLink& link) {
  Downstream& d = of(link);
  if (d.stand_in) {
    if (&link == d.parked.get()) parked_up(d);
    return;  // the stand-in's link: its credits come next (on_credit)
  }
  d.metrics.up->Set(1);
  peer_down_.came_up(d);
  if (d.was_up) metrics_.reconnects(d.name).Increment();
  d.was_up = true;
  if (ready_ &&
      std::all_of(peers_.begin(), peers_.end(), [](const auto& x) { return x->was_up; })) {
    std::exchange(ready_, nullptr)();
  }
}

void Downstreams::on_down(transport::OutboundLink& link) {
  Downstream& d = of(link);
  if (d.stand_in && &link == d.parked.get()) return parked_down(d);
  // What was not acknowledged comes back to the queue's front in its order, a chunked
  // message from its first unacknowledged frame: the next link starts with nothing open.
  d.open = false;
  d.metrics.up->Set(0);
  peer_down_.went_down(d);
  // The frames it handed back (at the front of `waiting`) go to the spool now, in order: their
  // slots go back upstream once it has them.
  if (d.spool && d.spool->active()) pump(d);
}

}  // namespace hoprelay::daemon

namespace hoprelay::daemon {

void Downstreams::forget_open(uint32_t origin, uint64_t seq) {
  for (auto& d : peers_) {
    if (d->open && d->open_origin == origin && d->open_seq == seq) d->open = false;
  }
}

// ------------------------------------------------------------------ reload

void Downstreams::retire_if_done(Downstream& d) {
  // A chunked message open on the link keeps it: its next chunks go there (branch_of).
  // So does a message half sent whose set holds it (it may not have reached it yet).
  auto done = [this](const Downstream& d) {
    return d.retiring && d.waiting.empty() && !d.open && !(d.link && d.link->in_flight() != 0) &&
           !branch_sets_.holds(d) && (!d.spool || (d.spool->caught_up() && d.unsynced.empty()));
  };
  if (!done(d)) return;
  Downstream* dying = &d;
  // Deferred: we may be inside a callback of this very link. Checked again then: a chunk of
  // the open message may have been routed to it in the same iteration.
  loop_.defer([this, dying, done] {
    auto it =
        std::find_if(peers_.begin(), peers_.end(), [&](const auto& p) { return p.get() == dying; });
    if (it == peers_.end() || !done(**it)) return;  // re-added, or busy again
    if (dying->dropped_while_down == 0) {
      node_log().info("downstream {} removed: everything sent to it was acknowledged", dying->name);
    } else {
      node_log().info(
          "downstream {} removed: {} message{} routed to it were given up while it "
          "was down, the rest was acknowledged",
          dying->name, dying->dropped_while_down, dying->dropped_while_down == 1 ? "" : "s");
    }
    if (dying->link) dying->link->close();
    peer_down_.cancel(*dying);  // after close(), which reports the link down
    const std::string name = dying->name;
    peers_.erase(it);
    // Its series go with it: a link_up of 0 for a peer removed on purpose would fire
    // HoprelayLinkDown for good, nothing samples its queue or credits any more, and its
    // counters would stay for as long as the node (their handles went with `dying`).
    metrics_.forget_downstream(name, forward_opcode(transport_, *spec_));
  });
}

Downstreams::Changes Downstreams::apply(const config::Topology& topology,
                                        const config::NodeSpec& spec, bool started) {
  auto same = [](const config::Endpoint& a, const config::Endpoint& b) {
    return a.host == b.host && a.port == b.port;
  };
  Changes changes;
  std::vector<std::string>& added = changes.added;
  std::vector<std::string>& removed = changes.removed;
  std::vector<std::string>& moved = changes.moved;
  const config::NodeSpec* n = &spec;
  topology_ = &topology;
  spec_ = &spec;
  peer_down_.set_spec(spec);
  // Rate limits as the new spec says: every gate anew (a frame one was holding back goes
  // through the pump again, under the new limit).
  rate_limits_.configure(spec);
  for (auto& d : peers_) {
    const bool held_back = d->rate != nullptr;
    set_rate(*d);
    if (held_back && d->link) pump(*d);
  }
  for (auto& d : peers_) {
    bool listed =
        std::find(n->downstream.begin(), n->downstream.end(), d->name) != n->downstream.end();
    if (!listed) {
      if (!d->retiring) removed.push_back(d->name);
      d->retiring = true;
      peer_down_.watch(*d);  // down now: given peer_down_timeout from when it went down
      retire_if_done(*d);
    } else {
      d->retiring = false;
      if (!same(topology_->find(d->name)->listen, d->address) && started) {
        // Standing in for it: the peer's own link is the one that moves (swapped back below).
        if (d->stand_in) std::swap(d->link, d->parked);
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
        if (d->stand_in) std::swap(d->link, d->parked);
        loop_.defer([old] {});
      }
    }
  }
  for (const auto& name : n->downstream) {
    bool present =
        std::any_of(peers_.begin(), peers_.end(), [&](const auto& d) { return d->name == name; });
    if (present) continue;
    added.push_back(name);
    Downstream& d = add(name);
    if (started) connect(d);
  }
  // A changed on_peer_down or peer_down_timeout applies to the peers that are down now too,
  // counting the time they have been down already.
  peer_down_.rewatch(peers_);
  rebuild_active();
  return changes;
}

}  // namespace hoprelay::daemon
