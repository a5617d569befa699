// A Node's downstream peers: their links (connect, up, down, credits, acknowledgements,
// returned frames), routing a message to them (broadcast, round robin or by origin), and the
// pump that posts what waits for each, one chunked message at a time per link.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "hoprelay/daemon/monotonic.h"
#include "hoprelay/daemon/node.h"
#include "node_log.h"

namespace hoprelay::daemon {

namespace {

// Spreads origins over branches for route = "hash": one origin always takes the same branch.
inline size_t origin_branch(uint32_t origin, size_t branches) {
  uint64_t x = origin * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>((x >> 32) % branches);
}

}  // namespace

Node::Downstream& Node::add_downstream(const std::string& name) {
  auto d = std::make_unique<Downstream>();
  d->name = name;
  d->address = topology_->find(name)->listen;
  d->waiting = RingQueue<transport::Slot*>(size_t{spec_->slots} * 4);
  d->metrics = metrics_->outbound(name, forward_opcode());
  d->queued = &metrics_->queued(name);
  d->credits = &metrics_->credits(name);
  d->replayed = &metrics_->replayed(name);
  downstream_.push_back(std::move(d));
  return *downstream_.back();
}

void Node::connect(Downstream& d) {
  const config::NodeSpec* peer = topology_->find(d.name);
  bool write = spec_->forward == config::Forward::kWrite;
  d.address = peer->listen;
  transport::ConnectParams params{d.name, peer->listen, write, peer->slots};
  d.link = link_threads_ ? link_threads_->connect(params) : transport_->connect(params);
  link_went_down(d);  // not up until its welcome: a peer that never comes up is down from here
}

void Node::rebuild_active() {
  active_.clear();
  for (auto& d : downstream_) {
    if (!d->retiring) active_.push_back(d.get());
  }
  // Messages half sent keep the set they started with; the next one takes a new copy.
  if (BranchSet* old = std::exchange(current_branches_, nullptr); old && old->users == 0)
    free_branch_set(old);
}

void Node::route(transport::Slot& slot, Partial* p) {
  hold(slot);
  // A chunk goes where its message's first chunk went, whatever a reload changed since (the
  // peers and the route).
  const BranchSet* set = p ? &branches_of(*p) : nullptr;
  const std::vector<Downstream*>& to = set ? set->peers : active_;
  const config::Route how = set ? set->route : spec_->route;
  if (how == config::Route::kBroadcast) {
    slot.refs = static_cast<uint16_t>(to.size());
    slot.routes = slot.refs;
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
  slot.refs = 1;
  slot.routes = 1;
  d->waiting.push_back(&slot);
  pump(*d);
}

Node::Downstream* Node::branch_of(const Partial& p) {
  if (!p.downstream) return nullptr;
  for (auto& d : downstream_) {
    if (d.get() == p.downstream) return d.get();
  }
  return nullptr;  // retired meanwhile
}

// Posts what this downstream has waiting, as far as its credits go.
void Node::pump(Downstream& d) {
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
      warn_drop("too_large_for_peer", d.name, "larger than the downstream's slots", s->origin,
                s->seq);
      detail_ = std::to_string(s->length) + " bytes; " + d.name + " takes at most " +
                std::to_string(d.link->max_payload());
      record_drop(*s, transport::DropReason::kTooLargeForPeer, detail_, true);
      if (!d.warned_too_large) {
        d.warned_too_large = true;
        node_log().error(
            "{} takes at most {} bytes per message, less than this node forwards: "
            "dropping such messages (is it running another topology file?)",
            d.name, d.link->max_payload());
      }
      note_posted(d, *s);
      if (--s->refs == 0) release(*s);
      continue;
    }
    transport::OutFrame f{s->origin, s->seq,    s->flags, s->payload(),
                          s->length, s->memory, s,        s->chunk};
    if (!d.link->post(f)) break;
    d.waiting.pop_front();
    note_posted(d, *s);
  }
  // A removed peer whose last waiting messages were dropped above (too large) has nothing
  // left to be acknowledged: no acknowledgement would come to retire it.
  if (d.retiring) retire_if_done(d);
}

bool Node::bring_open_forward(Downstream& d) {
  for (size_t i = 0; i < d.waiting.size(); ++i) {
    const transport::Slot* s = d.waiting.at(i);
    if (s->origin == d.open_origin && s->seq == d.open_seq) {
      if (i > 0) d.waiting.move_to_front(i);  // overtakes frames of other messages
      return true;
    }
  }
  return false;
}

void Node::note_posted(Downstream& d, const transport::Slot& s) {
  if (!transport::is_chunk(s.flags, s.chunk)) return;
  d.open = (s.flags & transport::kFlagMore) != 0;  // its last frame (or an abort) closes it
  d.open_origin = s.origin;
  d.open_seq = s.seq;
}

Node::Downstream& Node::downstream_of(transport::OutboundLink& link) {
  for (auto& d : downstream_) {
    if (d->link.get() == &link) return *d;
  }
  // Unreachable: every link the transport reports is one of ours, and a reload closes a link
  // before it leaves its downstream. Should that break, stop rather than guess a downstream
  // (a guess once sent one branch's messages to another): the upstream replays what this node
  // held once systemd has restarted it.
  node_log().critical("internal error: link to {} is not a downstream of node {}: stopping",
                      link.peer_name(), spec_->name);
  node_log().flush();
  std::abort();
}

void Node::on_acked(transport::OutboundLink& link, void* cookie) {
  auto* slot = static_cast<transport::Slot*>(cookie);
  Downstream& d = downstream_of(link);
  if (!(slot->flags & transport::kFlagEnd)) {
    d.metrics.messages[0].add();
    d.metrics.bytes[0].add(slot->length);
  }
  if (--slot->refs == 0) release(*slot);
  if (d.retiring) retire_if_done(d);
}

void Node::on_returned(transport::OutboundLink& link, void* cookie) {
  Downstream& d = downstream_of(link);
  d.replayed->Increment();  // the link failed: not the per-message path
  d.waiting.push_front(static_cast<transport::Slot*>(cookie));
  if (d.dropping) drop_waiting(d);
}

std::string Node::forward_opcode() const {
  if (transport_->name() != "verbs") return "tcp";
  return spec_->forward == config::Forward::kWrite ? "write" : "send";
}

void Node::on_credit(transport::OutboundLink& link) {
  pump(downstream_of(link));
}

void Node::on_outbound_up(transport::OutboundLink& link) {
  Downstream& d = downstream_of(link);
  d.metrics.up->Set(1);
  cancel_peer_down(d);
  if (d.warned_down) {
    node_log().info("downstream {} up after {} s", d.name,
                    d.seconds_down(transport::EventLoop::Clock::now()));
    d.warned_down = false;
  }
  if (d.dropping) stop_dropping(d, "up again: forwarding to it again");
  if (d.was_up) metrics_->reconnects(d.name).Increment();
  d.was_up = true;
  if (downstream_ready_ && std::all_of(downstream_.begin(), downstream_.end(),
                                       [](const auto& x) { return x->was_up; })) {
    std::exchange(downstream_ready_, nullptr)();
  }
}

void Node::on_outbound_down(transport::OutboundLink& link, std::string_view) {
  Downstream& d = downstream_of(link);
  // What was not acknowledged comes back to the queue's front in its order, a chunked
  // message from its first unacknowledged frame: the next link starts with nothing open.
  d.open = false;
  d.metrics.up->Set(0);
  link_went_down(d);
}

}  // namespace hoprelay::daemon
