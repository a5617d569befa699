// Messages larger than a slot at a node, as one component (docs/protocol.md, "Chunks"). Each
// chunk goes the way its message's first chunk decided: cut-through (the stage sees each chunk,
// which goes on at once), reassembly (held in their slots until the last; the stage sees the
// whole message, and a relay sends the result on from the same slots, as chunks again), or
// discarded. Replayed copies are dropped by chunk index; a message its sender gave up, or
// whose link went down and did not come back, is ended downstream with an abort.
//
// Two rules keep it bounded and free of deadlocks:
//  - a sender never interleaves two chunked messages, or a chunked message and other frames,
//    on one link (Downstreams' pump), so a receiver has at most one message in passage per
//    link;
//  - a node that reassembles holds a message's chunks in their slots (unacknowledged) until
//    the last one, and gives the message up as soon as its link carries anything else.
//
// Owns: the table of messages in passage (partials.h), the reassembly buffer, and which link
// holds a message being reassembled.
// Calls: StageRunner, Downstreams (routing, branch sets), HeldSlots, the deduplication table
// (a chunked message is taken at its last chunk), the Receiver, Releaser::release(), the drop
// log. Nothing here allocates per chunk (the buffer grows to the largest message, once).
// One thread (the node's event loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/dedup.h"
#include "hoprelay/daemon/downstreams.h"
#include "hoprelay/daemon/drop_log.h"
#include "hoprelay/daemon/held_slots.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/daemon/partials.h"
#include "hoprelay/daemon/receiver.h"
#include "hoprelay/daemon/stage_runner.h"

namespace hoprelay::daemon {

class Chunks {
 public:
  Chunks(const config::NodeSpec& spec, transport::EventLoop& loop, HeldSlots& held,
         Downstreams& downstreams, StageRunner& stage, DedupTable& dedup, Releaser& releaser,
         DropLog& drops, NodeMetrics& metrics);

  // A leaf's application (Node::set_receiver): it takes whole messages.
  void set_receiver(Receiver* receiver) { receiver_ = receiver; }
  // A reload: the node's entry in the new topology.
  void set_spec(const config::NodeSpec& spec) { spec_ = &spec; }

  // A chunk (or an abort) came on `link`, which is up. `job`: its stage ran on a worker
  // already (its verdict is there).
  void on_chunk(transport::InboundLink& link, transport::Slot& slot, const StageJob* job);
  // Any frame on `link`, before it is taken: a link carries one chunked message at a time, so
  // a frame of another message while one is reassembled from it means its sender gave that
  // message up.
  void check_assembling(const transport::InboundLink& link, const transport::Slot& slot) {
    if (!assembling_.empty()) check_assembling_slow(link, slot);
  }
  // `link` went down: the messages in passage from it are forgotten (their sender sends them
  // again); those partly forwarded wait kOrphanTimeoutNs for the rest.
  void link_down(const transport::InboundLink& link);
  // Once a second: ends downstream (an abort) the partly forwarded messages whose sender has
  // not come back with the rest.
  void tick();

  // An application takes bytes as they are: a message still zstd-compressed after this
  // node's stage is refused as a stage error (true), with what to do, rather than handed over.
  // `branch`: at a relay, for its application only (the peers still get it).
  bool refuse_compressed(uint16_t flags, const transport::InboundLink* from, transport::Slot& slot,
                         bool branch = false);

 private:
  void forward(Partial& p, transport::Slot& slot, const StageJob* job);
  void assemble(Partial& p, transport::Slot& slot);
  void deliver_assembled(Partial& p);
  // Gives up a message: releases the chunks held for it, counts it dropped for `reason`, and
  // discards whatever else of it arrives. `label` names the reason in the drop warning; null
  // for a replayed copy (not a loss).
  void abandon(Partial& p, HotCounters::Ref& reason, const char* label);
  void release_held(Partial& p);  // releases the chunks held for p (no count)
  // Tells the downstream of a partly forwarded message that it ends here (an abort frame).
  void send_abort(Partial& p);
  // Frees p's entry, giving back its branch set.
  void close(Partial& p);
  void check_assembling_slow(const transport::InboundLink& link, const transport::Slot& slot);
  void stop_assembling(const Partial& p);
  static constexpr uint64_t kOrphanTimeoutNs = 5'000'000'000;

  const config::NodeSpec* spec_;
  transport::EventLoop& loop_;
  HeldSlots& held_;
  Downstreams& downstreams_;
  StageRunner& stage_;
  DedupTable& dedup_;
  Releaser& releaser_;
  DropLog& drops_;
  Receiver* receiver_ = nullptr;
  PartialTable partials_;
  std::vector<std::byte> scratch_;  // reassembly: grows to the largest message, once
  // The message each link's slots hold for reassembly (at most one per link). Few: links
  // with a message being reassembled right now.
  std::vector<std::pair<const transport::InboundLink*, Partial*>> assembling_;
  HotCounters::Ref dropped_duplicate_;
  HotCounters::Ref dropped_incomplete_;
  HotCounters::Ref dropped_reassembly_full_;
};

}  // namespace hoprelay::daemon
