// A downstream that is down (peer_down.h): how long the node holds its messages, and when it
// gives them up. Once per transition, never per message.
#include "hoprelay/daemon/peer_down.h"

#include <algorithm>
#include <string>

#include "node_log.h"

namespace hoprelay::daemon {

PeerDown::PeerDown(transport::EventLoop& loop, const config::NodeSpec& spec, Drop drop, Drop bypass)
    : loop_(loop), spec_(&spec), drop_(std::move(drop)), bypass_(std::move(bypass)) {}

void PeerDown::went_down(Downstream& d) {
  d.down_since = transport::EventLoop::Clock::now();
  watch(d);
}

void PeerDown::came_up(Downstream& d) {
  cancel(d);
  if (d.warned_down) {
    node_log().info("downstream {} up after {} s", d.name,
                    d.seconds_down(transport::EventLoop::Clock::now()));
    d.warned_down = false;
  }
  if (d.dropping) stop_dropping(d, "up again: forwarding to it again");
}

void PeerDown::watch(Downstream& d) {
  cancel(d);
  // A peer removed by a reload is treated as drop-after whatever on_peer_down says: held for
  // it, its messages would hold their slots (and the upstream's credits) for good once it is
  // gone. It gets peer_down_timeout to come back and drain, as a drop-after peer does.
  if (!(drop_after(d) || bypass(d)) || d.dropping || !d.link || d.link->up()) return;
  // From when it went down, so that a reload that shortens the timeout counts the time
  // already spent waiting.
  auto left = d.down_since + spec_->peer_down_timeout - transport::EventLoop::Clock::now();
  auto delay =
      std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(left));
  Downstream* target = &d;  // stable: Downstreams owns each by unique_ptr
  d.down_timer = loop_.after(delay, [this, target] {
    target->down_timer = 0;
    if (bypass(*target)) {
      bypass_(*target);
    } else {
      start_dropping(*target);
    }
  });
}

void PeerDown::rewatch(const std::vector<std::unique_ptr<Downstream>>& peers) {
  const auto now = transport::EventLoop::Clock::now();
  for (auto& d : peers) {
    if (d->retiring) continue;  // drop-after whatever the policy: watched when removed
    if (d->dropping && !drop_after(*d)) {
      stop_dropping(*d, "still down: holding its messages again (on_peer_down = block)");
    } else if (d->dropping && now - d->down_since < spec_->peer_down_timeout) {
      stop_dropping(*d, "still down: holding its messages again until it has been down for " +
                            config::duration_text(spec_->peer_down_timeout));
    }
    watch(*d);
  }
}

void PeerDown::cancel(Downstream& d) {
  if (d.down_timer) loop_.cancel(d.down_timer);
  d.down_timer = 0;
}

void PeerDown::warn_long_down(const std::vector<std::unique_ptr<Downstream>>& peers) {
  const auto now = transport::EventLoop::Clock::now();
  for (auto& d : peers) {
    if (d->warned_down || d->retiring || !d->link || d->link->up() ||
        now - d->down_since < kWarnAfter) {
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

void PeerDown::start_dropping(Downstream& d) {
  if (d.dropping || (d.link && d.link->up())) return;
  // Once per transition, never per message: from here on Downstreams drops instead of
  // posting, so the slots held for this peer go back upstream and the other branches keep
  // flowing.
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
  drop_(d);
}

void PeerDown::stop_dropping(Downstream& d, std::string_view now_what) {
  d.dropping = false;
  node_log().info("downstream {} {} ({} messages were dropped for it)", d.name, now_what,
                  d.dropped_while_down);
  d.dropped_while_down = 0;  // a removal's log line counts only what it gave up itself
}

}  // namespace hoprelay::daemon
