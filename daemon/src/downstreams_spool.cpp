// A node's downstream peers (downstreams.h), their spools: a branch behind for spool_after
// starts spooling, what is routed to it goes to disk in the order it would have been posted,
// its slots go back upstream once the spool has them durably, and the branch is sent from the
// spool until it has caught up. The spool itself is spool.h; a branch's use of it,
// branch_spool.h.
#include <prometheus/counter.h>

#include <cstdio>
#include <cstring>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/downstreams.h"
#include "node_log.h"

namespace hoprelay::daemon {

namespace {

std::string size_text(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.1f GiB", double(bytes) / double(uint64_t{1} << 30));
  } else {
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(uint64_t{1} << 20));
  }
  return text;
}

}  // namespace

void Downstreams::start_spooling(Downstream& d, bool down) {
  d.spool->activate();
  d.spool_started_at = d.spool->spool().end();
  // A chunked message open on the link goes on in the spool: its next frames first.
  d.spool_open = d.open;
  d.spool_open_origin = d.open_origin;
  d.spool_open_seq = d.open_seq;
  // A peer that left with nothing waiting for it (a consumer that exits after the stream's
  // end does) is said at info: nothing of it is on disk yet, and should it stay away while
  // messages come, the peer-down warning says so (peer_down.h).
  const auto level = down && d.waiting.empty() ? spdlog::level::info : spdlog::level::warn;
  node_log().log(
      level,
      "downstream {} {} for {}: what is routed to it goes to its spool {} (at most {}) until it "
      "has caught up; the other branches go on at their own speed",
      d.name, down ? "is down" : "is out of credit while other branches wait for nothing",
      config::duration_text(spec_->spool_after), d.spool->dir(), size_text(spec_->spool_max));
  pump(d);
}

void Downstreams::watch_frozen(Downstream& d, transport::EventLoop::Clock::time_point now) {
  // Waiting for this node (a chunked message's next frame has not arrived) is not frozen.
  const bool waits_for_us = d.open && d.link && d.link->credits() > 0;
  if (d.slots_in_flight == 0 || !d.link || !d.link->up() || d.stand_in || waits_for_us) {
    d.frozen_count = 0;
    return;
  }
  if (d.slots_in_flight != d.frozen_count) {
    d.frozen_count = d.slots_in_flight;
    d.frozen_since = now;
    return;
  }
  if (now - d.frozen_since < spec_->spool_after) return;
  d.frozen_count = 0;
  const std::string after = config::duration_text(spec_->spool_after);
  node_log().warn(
      "downstream {} acknowledged none of the {} frames sent to it before its spool started, "
      "for {}, while its link stayed up (is its process stopped, or its host paused?): the "
      "link is reset, those frames go to its spool and their slots back upstream; it gets "
      "them again once it answers",
      d.name, d.slots_in_flight, after);
  metrics_.frozen(d.name).Increment();
  d.link->reset("it acknowledged nothing for " + after + " (frozen?)");
}

void Downstreams::pump_spooled(Downstream& d) {
  BranchSpool& sp = *d.spool;
  if (d.slots_in_flight > 0) {
    // Frames sent from the slots before the spool started are still out: what waits is
    // younger, so it goes into the spool only once they are acknowledged or handed back
    // (on_acked, on_down pump again). A chunked message open on the link meanwhile gets its
    // other frames from the slots too: its peer acknowledges none of it before its last. A
    // peer that acknowledges none of them while its link stays up is frozen: watch_spools
    // resets its link after spool_after.
    while (d.open && !d.waiting.empty() && d.link && d.link->up() && bring_open_forward(d)) {
      transport::Slot* s = d.waiting.front();
      const transport::OutFrame f = frame_of(*s);
      if (!paced(d, s->length) || !d.link->post(f)) break;
      d.waiting.pop_front();
      ++d.slots_in_flight;
      note_posted(d, *s);
    }
    // A message still open on the link when the spool takes over goes on there first.
    d.spool_open = d.open;
    d.spool_open_origin = d.open_origin;
    d.spool_open_seq = d.open_seq;
    return;
  }
  // Into the spool, in the order pump() would have posted them.
  const int64_t wall = d.waiting.empty() ? 0 : BranchSpool::wall_ns();
  while (!d.waiting.empty()) {
    if (d.spool_open && !bring_forward(d, d.spool_open_origin, d.spool_open_seq)) break;
    transport::Slot* s = d.waiting.front();
    const Spool::Status st = sp.put(*s, wall);
    if (st != Spool::Status::kOk) {
      spool_refused(d, st);
      break;
    }
    if (d.spool_refusing) {
      d.spool_refusing = false;
      node_log().info("the spool of downstream {} takes messages again", d.name);
    }
    d.waiting.pop_front();
    if (transport::is_chunk(s->flags, s->chunk)) {
      d.spool_open = (s->flags & transport::kFlagMore) != 0;
      d.spool_open_origin = s->origin;
      d.spool_open_seq = s->seq;
    }
    d.unsynced.push_back(s);  // its branch's ref goes once the spool has it durably
    schedule_sync();
  }
  // What the spool could not take: under "drop-after", once the peer has been down for
  // peer_down_timeout, it is dropped; under "block", it waits for room.
  if (d.dropping && !d.waiting.empty()) drop_waiting(d);

  if (!d.link || !d.link->up()) return;
  transport::OutFrame f;
  while (d.link->credits() > 0 && sp.next(f)) {
    if (f.length > d.link->max_payload()) {
      // As in pump(): the peer runs another topology. It stays in the spool (it was
      // acknowledged upstream already), and the branch waits until the peer takes it.
      sp.unread();
      if (!d.warned_spool_too_large) {
        d.warned_spool_too_large = true;
        node_log().error(
            "{} takes at most {} bytes per message, less than its spool's next ({}): the "
            "spool waits (is the peer running another topology file?)",
            d.name, d.link->max_payload(), f.length);
      }
      return;
    }
    if (!paced(d, f.length) || !d.link->post(f)) {
      sp.unread();
      return;
    }
    if (transport::is_chunk(f.flags, f.chunk)) {
      d.open = (f.flags & transport::kFlagMore) != 0;
      d.open_origin = f.origin;
      d.open_seq = f.seq;
    }
  }
  if (sp.read_status() == Spool::Status::kIoError) {
    if (!d.spool_failing) {
      d.spool_failing = true;
      node_log().error("cannot read the spool of downstream {} ({}): {}; its branch waits", d.name,
                       sp.dir(), std::strerror(sp.spool().error()));
    }
    return;
  }
  // Caught up: the whole spool acknowledged, and credit to spare (a branch that started
  // spooling with its window full has taken none of the spool yet: it is still behind).
  if (sp.caught_up() && d.waiting.empty() && d.unsynced.empty() && d.link->credits() > 0 &&
      sp.spool().end() > d.spool_started_at) {
    sp.deactivate();
    d.spool_open = false;
    node_log().info("downstream {} has caught up with its spool: it is sent to directly again",
                    d.name);
  }
}

void Downstreams::spool_refused(Downstream& d, Spool::Status st) {
  if (d.spool_refusing) return;
  d.spool_refusing = true;
  const char* policy = spec_->on_peer_down == config::OnPeerDown::kDropAfter
                           ? "its messages are dropped once it has been down for "
                             "peer_down_timeout (on_peer_down = \"drop-after\")"
                           : "its messages wait in the node's slots (on_peer_down = \"block\")";
  if (st == Spool::Status::kFull) {
    node_log().error("the spool of downstream {} is full ({} of spool_max {}): {}", d.name,
                     size_text(d.spool->spool().bytes()), size_text(spec_->spool_max), policy);
  } else {
    node_log().error("the spool of downstream {} cannot take more ({}: {}): {}", d.name,
                     d.spool->dir(), std::strerror(d.spool->spool().error()), policy);
  }
}

void Downstreams::schedule_sync() {
  if (sync_scheduled_) return;
  sync_scheduled_ = true;
  loop_.defer([this] { sync_spools(); });
}

void Downstreams::sync_spools() {
  sync_scheduled_ = false;
  if (syncer_ && syncer_->busy()) return;  // synced() schedules the next batch
  for (auto& dp : peers_) {
    Downstream& d = *dp;
    if (!d.spool || d.unsynced.size() == d.syncing) continue;
    if (syncer_) {
      if (d.spool->spool().take_unsynced(syncer_->files(), syncer_->dirs()) != Spool::Status::kOk) {
        sync_error(d);
        continue;
      }
      d.syncing = d.unsynced.size();
      continue;
    }
    if (d.spool->sync() != Spool::Status::kOk) {
      sync_error(d);
      continue;
    }
    d.spool_failing = false;
    release_synced(d, d.unsynced.size());
  }
  if (syncer_) syncer_->start();
}

void Downstreams::synced(int error) {
  bool more = false;
  for (auto& dp : peers_) {
    Downstream& d = *dp;
    if (d.syncing == 0) {
      more = more || (d.spool && !d.unsynced.empty());
      continue;
    }
    if (error != 0) {
      // The slots stay held (nothing acknowledged upstream that is not durable); the next
      // tick tries again.
      d.spool->spool().sync_failed(error);
      d.syncing = 0;
      sync_error(d);
      continue;
    }
    d.spool_failing = false;
    release_synced(d, d.syncing);
    d.syncing = 0;
    more = more || !d.unsynced.empty();
  }
  // What was spooled while the batch synced: the next batch, at once. After a failure the
  // tick tries again, once a second.
  if (error == 0 && more) schedule_sync();
}

void Downstreams::sync_error(Downstream& d) {
  if (d.spool_failing) return;
  d.spool_failing = true;
  node_log().error(
      "cannot make the spool of downstream {} durable ({}: {}): its messages stay held, "
      "tried again every second",
      d.name, d.spool->dir(), std::strerror(d.spool->spool().error()));
}

void Downstreams::release_synced(Downstream& d, size_t n) {
  uint64_t spooled = 0;
  for (; n > 0; --n) {
    transport::Slot* s = d.unsynced.front();
    d.unsynced.pop_front();
    if (!(s->flags & transport::kFlagEnd)) {
      ++spooled;
      held_.record_spooled(*s, d.name);  // the producer learns where it waits
    }
    branch_done(*s);  // may route more here: synced next time
  }
  d.spool->count_spooled(spooled);
}

}  // namespace hoprelay::daemon
