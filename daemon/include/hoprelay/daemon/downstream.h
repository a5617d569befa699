// One downstream peer of a node, as Downstreams (downstreams.h) keeps it: its link, the slots
// routed to it and not yet posted, its series, the chunked message open on its link, and what
// PeerDown (peer_down.h) knows of it while it is down. Plain data: the component named beside
// each group gives it its meaning and is the only one to write it.
// One thread (the node's event loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/branch_spool.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/daemon/rate_limits.h"
#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/transport/event_loop.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class StandIn;
// stand_in.h: deletes a StandIn where its type is complete.
struct StandInDelete {
  void operator()(StandIn* s) const;
};

struct Downstream {
  // Downstreams.
  std::string name;
  std::unique_ptr<transport::OutboundLink> link;
  RingQueue<transport::Slot*> waiting;  // routed here, not yet posted
  PeerMetrics metrics;
  prometheus::Gauge* queued = nullptr;
  prometheus::Gauge* credits = nullptr;
  prometheus::Counter* replayed = nullptr;
  bool was_up = false;
  bool warned_too_large = false;
  bool retiring = false;  // removed by a reload: closed once its messages are acknowledged
  config::Endpoint address;
  // Downstreams, from RateLimits: the pace its frames keep (rate_limit, rate_limit_to); null
  // when none applies.
  std::unique_ptr<RateGate> rate;
  // The chunked message being sent on this link: until its last frame is posted no other
  // frame goes to this peer. A node that reassembles holds chunks in ring order, and credits
  // come back in ring order: another message's frames between two chunks would fill its
  // ring behind a held chunk, and neither message could finish (docs/protocol.md).
  bool open = false;
  uint32_t open_origin = 0;
  uint64_t open_seq = 0;

  // Frames posted from the node's slots (not from the spool) and neither acknowledged nor
  // handed back yet, on whichever link is the branch's.
  uint32_t slots_in_flight = 0;

  // Downstreams, when the node spools (spool_dir): the branch's spool (branch_spool.h). While
  // it is active, what is routed here goes from `waiting` into the spool, in the order it
  // would have been posted (a chunked message's frames together: `spool_open` is to the spool
  // what `open` is to the link), and each slot stays in `unsynced` until the spool has it
  // durably. The frames sent from the slots before the spool started are older than anything
  // it will hold: nothing goes into it until they are acknowledged or handed back (then they
  // go first, from the front of `waiting`), so a branch never holds a slot for a frame that
  // waits behind its spool.
  std::unique_ptr<BranchSpool> spool;
  // How long the branch must be out of credit before it is spooled (Downstreams::add): the
  // node's spool_after plus a grace per hop below the peer (downstreams.cpp, kSpoolGracePerHop).
  std::chrono::milliseconds spool_stalled_after{0};
  // The most frames from the node's slots in flight to the branch (Downstreams::add): 4 per
  // hop below the peer, as `hoprelay plan` sizes windows, at least 4, at most half the node's
  // slots. A frame in flight holds its slot until the peer acknowledges it, which a slow peer
  // does at its own pace, and slots go back upstream in ring order: were the whole window the
  // peer grants in flight, a branch that starts spooling would hold the ring until those frames
  // drained (4 MiB at a quarter of 50 Mbit/s: 2.7 s with the whole chain above it paced).
  uint32_t spool_in_flight_cap = 0;
  RingQueue<transport::Slot*> unsynced;
  // How many of `unsynced`, from its front, the spool sync in flight covers (spool_syncer.h):
  // those go once it succeeds; the rest wait for the next.
  size_t syncing = 0;
  uint64_t spool_started_at = 0;  // the spool's end() when it started: caught up once past it
  // Downstreams::watch_spools, for a spooled branch whose frames from the slots stay
  // unacknowledged while its link is up (a frozen peer): slots_in_flight at the last look that
  // saw it change, and when. Unchanged for spool_after, the link is reset.
  uint32_t frozen_count = 0;
  transport::EventLoop::Clock::time_point frozen_since{};
  bool spool_open = false;
  uint32_t spool_open_origin = 0;
  uint64_t spool_open_seq = 0;
  bool spool_refusing = false;  // said once, until the spool takes messages again
  bool spool_failing = false;   // a read or sync failed: said once, until one succeeds
  bool warned_spool_too_large = false;

  // PeerDown: since when the link is down (or, never up yet, since it was first connected),
  // the timer that ends the wait under "drop-after", and whether what is routed here is being
  // dropped (from the timer until the link is up again).
  transport::EventLoop::Clock::time_point down_since{};
  transport::EventLoop::TimerId down_timer = 0;
  bool dropping = false;
  uint64_t dropped_while_down = 0;  // Downstreams counts them (drop_waiting)
  bool warned_down = false;         // said to be down for long; said again when it is up

  // Downstreams, under on_peer_down = "bypass" once the peer has been down for
  // peer_down_timeout: the node standing in for it (stand_in.h), whose in-process link is
  // `link` meanwhile, the peer's own link `parked` (it keeps reconnecting). Once that is up
  // again the branch is `returning`: nothing more goes to the stand-in, and once it has
  // acknowledged everything it had, the peer's link is `link` again and the stand-in goes.
  std::unique_ptr<StandIn, StandInDelete> stand_in;
  std::unique_ptr<transport::OutboundLink> parked;
  bool returning = false;
  uint64_t bypassed = 0;          // frames posted to the stand-in in this bypass
  uint64_t bypassed_counted = 0;  // of those, in hoprelay_bypassed_total (once a second)
  // Whole seconds since down_since, for the log lines about it.
  int64_t seconds_down(transport::EventLoop::Clock::time_point now) const {
    return std::chrono::duration_cast<std::chrono::seconds>(now - down_since).count();
  }
};

}  // namespace hoprelay::daemon
