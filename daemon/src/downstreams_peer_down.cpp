// A downstream that is down: how long the node holds its messages, and when it gives them up
// (on_peer_down, peer_down_timeout: docs/topology.md). Once per transition, never per message.
#include <algorithm>
#include <chrono>
#include <tuple>

#include "hoprelay/daemon/downstreams.h"
#include "node_log.h"

namespace hoprelay::daemon {

void Downstreams::link_went_down(Downstream& d) {
  d.down_since = transport::EventLoop::Clock::now();
  watch_peer_down(d);
}

void Downstreams::watch_peer_down(Downstream& d) {
  cancel_peer_down(d);
  // A peer removed by a reload is treated as drop-after whatever on_peer_down says: no node
  // of the topology will take its messages, and held for it they would hold their slots (and
  // the upstream's credits) for good once it is gone. It gets peer_down_timeout to come back
  // and drain, as a drop-after peer does.
  const bool drop_after = spec_->on_peer_down == config::OnPeerDown::kDropAfter || d.retiring;
  if (!drop_after || d.dropping || !d.link || d.link->up()) return;
  // From when it went down, so that a reload that shortens the timeout counts the time
  // already spent waiting.
  auto left = d.down_since + spec_->peer_down_timeout - transport::EventLoop::Clock::now();
  auto delay =
      std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(left));
  Downstream* target = &d;  // stable: peers_ owns each by unique_ptr
  d.down_timer = loop_.after(delay, [this, target] {
    target->down_timer = 0;
    start_dropping(*target);
  });
}

void Downstreams::cancel_peer_down(Downstream& d) {
  if (d.down_timer) loop_.cancel(d.down_timer);
  d.down_timer = 0;
}

void Downstreams::warn_long_down() {
  const auto now = transport::EventLoop::Clock::now();
  for (auto& d : peers_) {
    if (d->warned_down || d->retiring || !d->link || d->link->up() ||
        now - d->down_since < kDownWarnAfter) {
      continue;
    }
    d->warned_down = true;
    node_log().warn(
        "downstream {} at {} {} for {} s, {} message{} waiting for it: is hoprelayd running "
        "there, with this topology file? (hoprelay status shows every node; each connect "
        "attempt is logged at debug level)",
        d->name, d->address.to_string(), d->was_up ? "down" : "not up", d->seconds_down(now),
        d->waiting.size(), d->waiting.size() == 1 ? "" : "s");
  }
}

void Downstreams::start_dropping(Downstream& d) {
  if (d.dropping || (d.link && d.link->up())) return;
  // Once per transition, never per message: from here on pump() drops instead of posting, so
  // the slots held for this peer go back upstream and the other branches keep flowing.
  if (d.retiring) {
    node_log().warn(
        "downstream {}, removed from the topology, down for {}: giving up the {} message{} "
        "waiting for it (peer_down; producers are told through their outcomes)",
        d.name, config::duration_text(spec_->peer_down_timeout), d.waiting.size(),
        d.waiting.size() == 1 ? "" : "s");
  } else {
    node_log().warn("downstream {} down for {}: dropping its messages (on_peer_down = drop-after)",
                    d.name, config::duration_text(spec_->peer_down_timeout));
  }
  d.dropping = true;
  d.dropped_while_down = 0;
  drop_waiting(d);
}

void Downstreams::stop_dropping(Downstream& d, std::string_view now_what) {
  d.dropping = false;
  node_log().info("downstream {} {} ({} messages were dropped for it)", d.name, now_what,
                  d.dropped_while_down);
  d.dropped_while_down = 0;  // a removal's log line counts only what it gave up itself
}

void Downstreams::drop_waiting(Downstream& d) {
  uint64_t dropped = 0;
  uint32_t origin = 0;
  uint64_t seq = 0;
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
  warn_drop("peer_down", d.name,
            d.retiring ? "its downstream was removed from the topology and is down longer than "
                         "peer_down_timeout"
                       : "its downstream is down longer than peer_down_timeout",
            origin, seq, dropped);
  d.dropped_while_down += dropped;
  if (d.retiring) retire_if_done(d);
}

}  // namespace hoprelay::daemon
