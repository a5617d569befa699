// One hoprelay node: receives messages into its inbound links' slots, runs its stage on each
// in place, and routes it to its downstream peers from that same slot. It holds a slot until
// every downstream it routed the message to has acknowledged it, so its upstream's credits
// (and the memory the node uses) stay bounded by the slots, and a downstream that fails
// gets every unacknowledged message again when it comes back.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/admission.h"
#include "hoprelay/daemon/dedup.h"
#include "hoprelay/daemon/drop_log.h"
#include "hoprelay/daemon/end_joins.h"
#include "hoprelay/daemon/link_threads.h"
#include "hoprelay/daemon/log_throttle.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/daemon/own_frames.h"
#include "hoprelay/daemon/partials.h"
#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/daemon/stage_workers.h"
#include "hoprelay/stages/stage.h"
#include "hoprelay/transport/outcome_pool.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

// An application in the node's own process that takes a leaf node's messages, instead of the
// node giving each back once its stage has seen it (libhoprelay's consumer, docs/client.md).
// The node holds a delivered message's slots, unacknowledged, until the application hands it
// back with Node::release_delivered(): a message an application has not released is sent
// again if the application's process dies. Called from the node's event loop.
class Receiver {
 public:
  // A message passed the stage. `held` is the slot holding it, or for a message that came as
  // chunks the first of its slots, linked through Slot::next. `data` stays valid until the
  // release, except when `reassembled`: then it is the node's reassembly buffer, valid only
  // during the call (the message's chunks are in its slots, but not side by side).
  virtual void on_delivered(uint32_t origin, uint64_t seq, std::span<const std::byte> data,
                            transport::Slot& held, bool reassembled) = 0;
  // The producer of `origin` ended its stream after the messages before `seq`. The mark is
  // held in `held`, unacknowledged, until released like a message (so an application that
  // records where streams ended can make that durable first).
  virtual void on_end(uint32_t origin, uint64_t seq, transport::Slot& held) = 0;

 protected:
  ~Receiver() = default;
};

class Node final : public transport::LinkEvents {
 public:
  // Throws TransportError / std::runtime_error with an operator-facing message when the node
  // cannot start (port in use, no device, metrics port taken).
  Node(std::shared_ptr<const config::Topology> topology, const std::string& node_name,
       transport::EventLoop& loop, stages::Stage stage);
  ~Node();

  // Listens and connects to every downstream peer.
  void start();
  // Called once, from the loop, when every downstream link has been up at least once (systemd
  // readiness in hoprelayd). Never called for a node without downstream peers.
  void on_downstream_ready(std::function<void()> fn) { downstream_ready_ = std::move(fn); }
  // Called once, from the loop, when the node's RDMA device went away (removed, or failed): its
  // links are down for good and the device stays in the kernel until the node is destroyed
  // (LinkEvents::on_device_lost). The owner destroys the node soon, from outside the call:
  // hoprelayd then waits for a device and exits to be started on it; an application's handle
  // reports the loss. Logged here.
  void when_device_lost(std::function<void(std::string_view)> fn) { device_lost_ = std::move(fn); }
  // Stops taking data, waits until every held slot is acknowledged downstream (or `timeout`),
  // then calls done(messages_left).
  void drain(std::chrono::milliseconds timeout, std::function<void(uint64_t)> done);
  // Applies a new topology by difference, without restarting and without losing or
  // duplicating a message in flight: downstream peers added (connected) or removed (they get
  // no new messages and are closed once everything sent to them is acknowledged), a changed
  // downstream address (reconnected; unacknowledged messages go again), route, stage
  // parameters, on_peer_down and peer_down_timeout. A change that cannot be applied live (this
  // node's listen or metrics address, transport, slots, slot_size, poll, forward) refuses the whole
  // reload, naming the field. Returns an empty string on success, else the reason it was refused.
  std::string reload(std::shared_ptr<const config::Topology> next);
  const config::Topology& topology() const { return *topology_; }
  // This node's entry in topology() (the reloaded one after a reload).
  const config::NodeSpec& spec() const { return *spec_; }
  // A reload that failed before reaching the node (the file does not validate), or that the
  // node refused: counted as a failed reload.
  void reload_failed() { metrics_->config_loaded(false, 0); }
  // Its metrics, for what runs beside the node on its loop (loop_watch.h).
  NodeMetrics& metrics() { return *metrics_; }

  // A leaf node's messages go to `receiver` (before start()); it must outlive the node's links.
  // It also makes the node reassemble chunked messages whatever its stage takes.
  void set_receiver(Receiver* receiver) { receiver_ = receiver; }
  // Gives back a message handed to the receiver (every slot of it): its credits go upstream.
  void release_delivered(transport::Slot& held);

  // Once a second: stage flush (reports, files) and gauges.
  void tick();
  uint64_t held() const { return held_; }
  std::string_view transport_name() const { return transport_->name(); }
  // Memory a producer in this process posts from into this node (libhoprelay's producer that
  // runs its head: transport/inproc). Allocated by the node's transport, so registered with
  // its device over verbs, since the node's downstream links send from it; owned by the node,
  // freed after its links and before its transport.
  transport::MemoryRegion& lend_memory(size_t bytes);

  // LinkEvents
  bool admit(const transport::PeerInfo& peer, std::string& reason) override;
  void on_inbound_up(transport::InboundLink& link) override;
  void on_message(transport::InboundLink& link, transport::Slot& slot) override;
  void on_inbound_down(transport::InboundLink& link, std::string_view reason) override;
  void on_outbound_up(transport::OutboundLink& link) override;
  void on_outbound_down(transport::OutboundLink& link, std::string_view reason) override;
  void on_acked(transport::OutboundLink& link, void* cookie) override;
  void on_outcome(transport::OutboundLink& link, void* cookie,
                  const transport::Outcome& outcome) override;
  uint64_t resume_seq(const transport::PeerInfo& peer) override;
  void on_returned(transport::OutboundLink& link, void* cookie) override;
  void on_credit(transport::OutboundLink& link) override;
  void on_completion_error(std::string_view status) override;
  void on_device_lost(std::string_view device) override;
  void on_connect_timeout(transport::OutboundLink& link) override;
  void on_protocol_error(std::string_view kind) override;
  void on_auth_failed(const transport::PeerInfo& peer) override;

 private:
  struct Downstream {
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
    // on_peer_down = "drop-after": since when the link is down (or, never up yet, since it was
    // first connected), the timer that ends the wait, and whether what is routed here is being
    // dropped (from the timer until the link is up again).
    transport::EventLoop::Clock::time_point down_since{};
    transport::EventLoop::TimerId down_timer = 0;
    bool dropping = false;
    uint64_t dropped_while_down = 0;
    bool warned_down = false;  // warn_long_down() said it is down; said again when it is up
    // Whole seconds since down_since, for the log lines about it.
    int64_t seconds_down(transport::EventLoop::Clock::time_point now) const {
      return std::chrono::duration_cast<std::chrono::seconds>(now - down_since).count();
    }
    // The chunked message being sent on this link: until its last frame is posted no other
    // frame goes to this peer. A node that reassembles holds chunks in ring order, and credits
    // come back in ring order: another message's frames between two chunks would fill its
    // ring behind a held chunk, and neither message could finish (docs/protocol.md).
    bool open = false;
    uint32_t open_origin = 0;
    uint64_t open_seq = 0;
  };
  struct Inbound {
    transport::InboundLink* link;
    PeerMetrics metrics;
    prometheus::Gauge* slots_in_use;
    // The message whose chunks this link's slots hold for reassembly (one at a time: senders
    // do not interleave chunked messages on a link), or null.
    Partial* assembling = nullptr;
  };

  // The downstream peers of one moment, and the route: what active_ and the route were when
  // a chunked message's first chunk came. Its frames all go to that set, so a reload while it is
  // half sent neither gives an added peer its tail (refused there as incomplete) nor leaves a
  // removed one holding its head for ever. One set serves every message between two reloads; a
  // removed peer is kept (retire_if_done) while a set in use holds it.
  struct BranchSet {
    std::vector<Downstream*> peers;
    config::Route route = config::Route::kBroadcast;  // and how they were chosen from
    uint32_t users = 0;  // open messages (Partial::branches) routed to it
  };
  // p's set: the current one (taken now, at its first chunk) or the one it has.
  BranchSet& branches_of(Partial& p);
  // Frees p's entry, giving back its set.
  void close_partial(Partial& p);
  void free_branch_set(BranchSet* set);
  bool held_by_open_message(const Downstream& d) const;

  Downstream& downstream_of(transport::OutboundLink& link);
  Downstream& add_downstream(const std::string& name);
  void connect(Downstream& d);
  void retire_if_done(Downstream& d);
  void rebuild_active();
  std::string forward_opcode() const;  // the `opcode` label of this node's forwarding
  Inbound* inbound_of(transport::InboundLink& link);
  // Runs the stage on one message (or chunk), counts its verdict, and times one in
  // kStageSample. A FORWARD that grew the message past its capacity is an ERROR.
  // `from`: the link the message came on (the drop warning names it).
  // `slot`: where the outcome of a drop is recorded (the message's slot, or one of its chunks').
  hoprelay_verdict run_stage(hoprelay_msg& msg, const transport::InboundLink* from,
                             transport::Slot& slot);
  // Counts a stage's verdict and records a drop (run_stage's second half, also for a verdict
  // a worker reached). `grew`: a FORWARD past the slot's capacity, an ERROR. `why`: the
  // stage's last_error() for a DROP or ERROR.
  hoprelay_verdict judge(hoprelay_verdict verdict, bool grew, std::string_view why, uint32_t origin,
                         uint64_t seq, const transport::InboundLink* from, transport::Slot& slot);
  // A message's walk through the node after the arrival counters, in arrival order: end
  // marks, chunks, repeats, the stage on the event loop, then after_stage().
  void take(transport::InboundLink& link, transport::Slot& slot);
  // A message the stage passed with `flags`: to the receiver at a leaf, else routed.
  void after_stage(transport::InboundLink& link, transport::Slot& slot, uint32_t flags);
  // A link carries one chunked message at a time: a frame of another message while one is
  // reassembled from it means its sender gave that message up.
  void check_assembling(Inbound* in, const transport::Slot& slot);
  // `threads` > 1 (stage_workers.h): starts, re-points or stops using the workers for the
  // stage now in stage_; per-thread instances are made here.
  void configure_workers();
  void export_upstream_series();
  // A job back from the workers, in arrival order.
  void finish_job(StageJob& job);
  // An application takes bytes as they are: a message still zstd-compressed after this leaf's
  // stage is refused as a stage error (true), with what to do, rather than handed over.
  bool refuse_compressed(uint16_t flags, const transport::InboundLink* from, transport::Slot& slot);
  // A message given up: the warning (rate-limited, drop_log.h); the caller counts it.
  void warn_drop(const char* reason, std::string_view peer, std::string_view why, uint32_t origin,
                 uint64_t seq, uint64_t count = 1) {
    drops_.note(reason, peer, why, origin, seq, loop_.now_ns(), count);
  }
  // A message given up here: its outcome (what goes upstream with its acknowledgement) gets a
  // record naming this node, `reason` and `detail`. `branch`: given up for one of the
  // branches it was routed to (the others may still deliver it).
  void record_drop(transport::Slot& slot, transport::DropReason reason, std::string_view detail,
                   bool branch);
  transport::Outcome& outcome_of(transport::Slot& slot);
  // Gives a slot back to its link with its outcome (null: delivered), and the outcome back
  // to the pool.
  void release_to(transport::InboundLink& link, transport::Slot& slot);
  // The words of a stage's verdict, for the producer: "crc32c: message leaves no room ...".
  std::string_view stage_detail(hoprelay_verdict verdict, bool grew, std::string_view why);
  static std::string_view peer_of(const transport::InboundLink* link) {
    return link ? std::string_view(link->peer().name) : std::string_view();
  }
  // The `peer` label of an inbound link's series: its node, or "producer" (all producers).
  static std::string inbound_label(const transport::InboundLink& link) {
    return link.peer().role == transport::PeerRole::kProducer ? "producer" : link.peer().name;
  }
  // hoprelay_link_slots_in_use, once a second (tick).
  void sample_link_slots();
  // Chunks of a message larger than a slot (partials.h).
  // (node_chunks.cpp)
  void on_chunk(Inbound& in, transport::Slot& slot);
  void forward_chunk(Partial& p, transport::Slot& slot);
  void assemble_chunk(Partial& p, Inbound& in, transport::Slot& slot);
  void deliver_assembled(Partial& p, Inbound& in);
  // Gives up a message: releases the chunks held for it, counts it dropped for `reason`,
  // and discards whatever else of it arrives.
  // `label` names the reason in the drop warning; null for a replayed copy (not a loss).
  void abandon(Partial& p, HotCounters::Ref& reason, const char* label);
  void consume_held(Partial& p);  // releases the chunks held for p (no count)
  // An inbound link went down: forget the messages in passage from it (their sender sends
  // them again); those partly forwarded already wait for the rest kOrphanTimeoutNs.
  void forget_partials(transport::InboundLink& link);
  // From tick(): ends downstream (an abort) the partly forwarded messages whose sender has
  // not come back with the rest.
  void abort_orphans();
  static constexpr uint64_t kOrphanTimeoutNs = 5'000'000'000;
  // Tells the downstream of a partly forwarded message that it ends here (an abort frame).
  void send_abort(Partial& p);
  // With a chunked message open on d's link, brings its next frame to the front of d's
  // queue; false when that frame has not arrived yet.
  bool bring_open_forward(Downstream& d);
  void note_posted(Downstream& d, const transport::Slot& s);
  Downstream* branch_of(const Partial& p);
  // Routes a message or chunk; the chunks of one message follow one branch (its Partial).
  void route(transport::Slot& slot, Partial* p = nullptr);
  void pump(Downstream& d);
  // on_peer_down: the link of `d` went down (or starts down): wait for it, or for its timeout.
  void link_went_down(Downstream& d);
  // (Re)arms the timeout of a downstream that is down, from when it went down, under the
  // current policy; cancels it when there is nothing to wait for.
  void watch_peer_down(Downstream& d);
  void start_dropping(Downstream& d);
  void stop_dropping(Downstream& d, std::string_view now_what);
  // From tick(): a downstream link down, or never up, for kDownWarnAfter is said once, at
  // warning level: the transports log refused connects at debug level only (a peer not yet
  // started is normal at start), so a head whose downstream never comes up looked idle.
  void warn_long_down();
  static constexpr std::chrono::seconds kDownWarnAfter{10};
  // Releases everything waiting for `d` as dropped (reason peer_down).
  void drop_waiting(Downstream& d);
  void cancel_peer_down(Downstream& d);
  void release(transport::Slot& slot);
  // The node now holds `slot` until release(): routed downstream, or with the receiver.
  void hold(transport::Slot& slot);
  // Takes `slot` out of what the node holds without giving it back: it goes on held again, as
  // another copy's repeat or passed on (an end mark's copy held at a join, node_ends.cpp).
  void unhold(transport::Slot& slot);
  // A replayed copy of a frame this node took already. When the first copy is still held
  // here and came on a link that has gone down, the copy is held with it and acknowledged
  // (with its outcome) when it is: acknowledged at once, it would leave no copy upstream, and
  // this node dying before its downstream acknowledged the first copy would lose the message.
  // False when there is no such first copy: the caller acknowledges it now.
  bool hold_with_first(transport::Slot& copy);
  // Gives back a slot that was not routed downstream (consumed at a leaf, dropped).
  void consume(transport::InboundLink& link, transport::Slot& slot);
  // A leaf's message that passed its stage: to the receiver, or consumed.
  void deliver(transport::InboundLink& link, transport::Slot& slot);
  // An end-of-stream mark: to the receiver at a leaf, else on to every downstream.
  // End marks (node_ends.cpp): a head stamps them; where branches join again, one passes on
  // once every branch's copy is in (end_joins.h).
  void on_end(transport::InboundLink& link, transport::Slot& slot);
  bool join_end(transport::InboundLink& link, transport::Slot& slot);
  bool give_up_end(EndJoins::Key key, const char* why);
  void log_given_up_end(const EndJoins::Key& key, size_t copies_in, const char* why);
  void flush_given_up_ends();
  void add_repeat(transport::Slot& first, transport::Slot& copy);
  uint64_t end_limit_ns() const;  // peer_down_timeout: how long an end mark waits for a branch
  void expire_ends();
  void settle_ends();
  void pass_on_end(transport::Slot& slot);
  void check_drained();

  std::shared_ptr<const config::Topology> topology_;
  const config::NodeSpec* spec_;
  transport::EventLoop& loop_;
  stages::Stage stage_;
  // `threads` > 1 with a stage that may run on threads: the workers, and for a
  // HOPRELAY_STAGE_PER_THREAD stage their instances (stage_ stays the event loop's own).
  std::vector<stages::Stage> worker_stages_;
  std::unique_ptr<StageWorkers> workers_;
  bool parallel_ = false;  // new messages go to the workers' stage (else only keep order)
  // The chunk job being finished: its stage call was made on a worker (forward_chunk).
  const StageJob* staged_chunk_ = nullptr;
  std::vector<prometheus::Counter*> worker_counters_;
  std::vector<uint64_t> worker_counted_;
  std::unique_ptr<NodeMetrics> metrics_;
  Admission admission_;  // who may connect, from the topology (admission.h)
  std::unique_ptr<transport::Transport> transport_;
  // `link_threads` > 0: the downstream links' threads (their transports are their own).
  std::unique_ptr<LinkThreads> link_threads_;
  std::vector<std::unique_ptr<transport::MemoryRegion>> lent_;  // lend_memory()
  std::vector<std::unique_ptr<Downstream>> downstream_;
  std::vector<Downstream*> active_;  // what route() chooses from: not retiring
  // Sets taken by open chunked messages, and the current one (a copy of active_, made at the
  // first chunked message after a reload; null until then).
  std::vector<std::unique_ptr<BranchSet>> branch_sets_;
  BranchSet* current_branches_ = nullptr;
  std::vector<Inbound> inbound_;
  DedupTable dedup_;
  EndJoins end_joins_;
  const uint32_t stamp_;       // this node's, for its producers' end marks (EndJoins::stamp_of)
  const uint64_t started_ns_;  // the node's start: end marks are held a while after it
  LogThrottle ends_given_up_;  // end marks passed on without every branch's copy
  DropLog drops_;
  // Outcomes of messages given up here or below (Slot::outcome).
  transport::OutcomePool outcomes_;
  std::string detail_;  // stage_detail()'s text
  PartialTable partials_;
  std::vector<std::byte> scratch_;  // reassembly: grows to the largest message, once
  OwnFrames own_frames_;            // aborts and end marks of the node's own (release() gives back)
  size_t round_robin_ = 0;
  uint64_t held_ = 0;  // slots holding a message routed downstream and not yet acknowledged
  transport::Slot* held_list_ = nullptr;  // those slots (Slot::held_next)
  // Inbound links gone down while the node still holds slots of theirs: their sender has
  // taken those frames back and sends them again (hold_with_first). Few, and only after a
  // failure: the common path checks that this is empty.
  std::vector<transport::InboundLink*> dead_links_;
  // sample_link_slots()'s sums, one per `peer` label seen (kept: a label whose links are gone
  // reads 0).
  std::vector<std::pair<prometheus::Gauge*, double>> link_slots_;
  bool draining_ = false;
  bool started_ = false;
  std::function<void(uint64_t)> drained_;
  std::function<void()> downstream_ready_;
  std::function<void(std::string_view)> device_lost_;
  Receiver* receiver_ = nullptr;
  transport::EventLoop::TimerId drain_timer_ = 0;
  // Hot-path counters, resolved once.
  static constexpr uint64_t kStageSample = 16;  // a power of two
  uint64_t stage_calls_ = 0;
  HotCounters::Ref stage_forward_;
  HotCounters::Ref stage_drop_;
  HotCounters::Ref stage_error_;
  HotCounters::Ref dropped_by_stage_;
  HotCounters::Ref dropped_stage_error_;
  HotCounters::Ref dropped_too_large_;
  HotCounters::Ref dropped_duplicate_;
  HotCounters::Ref dropped_peer_down_;
  HotCounters::Ref dropped_incomplete_;
  HotCounters::Ref dropped_reassembly_full_;
  prometheus::Gauge* slots_in_use_;
  LatencyHistogram* stage_seconds_;
  LatencyHistogram* residence_seconds_;
};

}  // namespace hoprelay::daemon
