// One hoprelay node: receives messages into its inbound links' slots, runs its stage on each
// in place, and routes it to its downstream peers from that same slot. It holds a slot until
// every downstream it routed the message to has acknowledged it, so its upstream's credits
// (and the memory the node uses) stay bounded by the slots, and a downstream that fails
// gets every unacknowledged message again when it comes back.
//
// Node is a facade: it receives the transports' events (LinkEvents), decides once per whole
// message whether it is a replay (on_message), and walks each message through the components
// that hold the state, each with its own header and contract:
//   Admission (who may connect)           HeldSlots (what is held; the one way back: release)
//   StageRunner (the stage, on workers)   Downstreams (links, routing, pump, peer down)
//   Chunks (messages larger than a slot)  EndMarks (end-of-stream marks and their joins)
//   Upstreams (inbound links, their series)
// and owns what ties them together: start, drain, reload (each component takes its part),
// tick and the metrics.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/admission.h"
#include "hoprelay/daemon/chunks.h"
#include "hoprelay/daemon/dedup.h"
#include "hoprelay/daemon/downstreams.h"
#include "hoprelay/daemon/drop_log.h"
#include "hoprelay/daemon/end_marks.h"
#include "hoprelay/daemon/held_slots.h"
#include "hoprelay/daemon/link_threads.h"
#include "hoprelay/daemon/log_throttle.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/daemon/partials.h"
#include "hoprelay/daemon/receiver.h"
#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/daemon/stage_runner.h"
#include "hoprelay/daemon/upstreams.h"
#include "hoprelay/stages/stage.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class Node final : public transport::LinkEvents, private Releaser {
 public:
  // Throws TransportError / std::runtime_error with an operator-facing message when the node
  // cannot start (port in use, no device, metrics port taken).
  Node(std::shared_ptr<const config::Topology> topology, const std::string& node_name,
       transport::EventLoop& loop, stages::Stage stage);
  ~Node();

  // Listens, serves its metrics and connects to every downstream peer; with kConnectOnly, only
  // connects (a node that stands in for a relay gone down, stand_in.h: the relay's address is
  // not this host's, and the host node's metrics say what it does).
  enum class Start { kServe, kConnectOnly };
  void start(Start how = Start::kServe);
  // Before start(): this node's links send from the address `host` listens on and, over verbs,
  // from its protection domain (Transport::speak_for): a stand-in's, run inside the node
  // whose host it uses (stand_in.h). `host` outlives this node.
  void speak_for(transport::Transport& host) { transport_->speak_for(host); }
  // Called once, from the loop, when every downstream link has been up at least once (systemd
  // readiness in hoprelayd). Never called for a node without downstream peers.
  void on_downstream_ready(std::function<void()> fn) { downstreams_->when_ready(std::move(fn)); }
  // Called once, from the loop, when the node's RDMA device went away (removed, or failed): its
  // links are down for good and the device stays in the kernel until the node is destroyed
  // (LinkEvents::on_device_lost). The owner destroys the node soon, from outside the call:
  // hoprelayd then waits for a device and exits to be started on it; an application's handle
  // reports the loss. Logged here.
  void when_device_lost(std::function<void(std::string_view)> fn) { device_lost_ = std::move(fn); }
  // Stops taking data, waits until every held slot is acknowledged downstream (or `timeout`),
  // then calls done(messages_left).
  void drain(std::chrono::milliseconds timeout, std::function<void(uint64_t)> done);
  // Closes the downstream links on purpose (BYE), as a drain that is done does: a stand-in's,
  // when the node it runs in has drained (everything sent to it is acknowledged).
  void close_downstream_links() { downstreams_->close_all(); }
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

  // The node's messages go to `receiver` (before start()); it must outlive the node's links.
  // At a relay too: each message is then also routed on, and its slot goes back once the
  // receiver released it and every peer acknowledged it. It also makes the node reassemble
  // chunked messages whatever its stage takes.
  void set_receiver(Receiver* receiver) {
    receiver_ = receiver;
    downstreams_->set_local(receiver);
    end_marks_->set_receiver(receiver);
    chunks_->set_receiver(receiver);
  }
  // The receiver is done with a message it was handed (every slot of it): at a leaf its
  // credits go upstream; at a relay, once every peer has acknowledged it too.
  void release_delivered(transport::Slot& held);

  // Once a second: stage flush (reports, files) and gauges.
  void tick();
  uint64_t held() const { return held_.count(); }
  // Frames in its spools for downstream peers (spool_dir), acknowledged upstream already.
  uint64_t spooled() const { return downstreams_->spooled(); }
  // Inbound links up now (upstream nodes and producers).
  size_t inbound_links() const { return upstreams_->size(); }
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
  // A message's walk through the node after the arrival counters, in arrival order: end
  // marks, chunks, repeats, the stage on the event loop, then after_stage().
  // `repeat`: a replayed copy of a whole message (on_message decided). `job`: the stage ran
  // on a worker already, for a chunk (its verdict is there).
  void take(transport::InboundLink& link, transport::Slot& slot, bool repeat,
            const StageJob* job = nullptr);
  // A message the stage passed with `flags`: to the receiver at a leaf, else routed.
  void after_stage(transport::InboundLink& link, transport::Slot& slot, uint32_t flags);
  // A job back from the workers, in arrival order.
  void finish_job(StageJob& job);
  // The one way a slot goes back, held or not (routed and acknowledged, released by the
  // receiver, consumed at a leaf, dropped, a repeat): no longer held, its residence
  // observed, then to its link with its outcome before its credit (HeldSlots::give_back),
  // then its replayed copies the same way.
  void release(transport::Slot& slot) override;
  // A leaf's message that passed its stage: to the receiver, or consumed.
  void deliver(transport::Slot& slot);
  // The node's application is done with `slot` (one of its refs): back once none is left.
  void local_done(transport::Slot& slot);
  void check_drained();

  std::shared_ptr<const config::Topology> topology_;
  const config::NodeSpec* spec_;
  transport::EventLoop& loop_;
  std::unique_ptr<NodeMetrics> metrics_;
  Admission admission_;  // who may connect, from the topology (admission.h)
  std::unique_ptr<transport::Transport> transport_;
  // `link_threads` > 0: the downstream links' threads (their transports are their own).
  std::unique_ptr<LinkThreads> link_threads_;
  std::vector<std::unique_ptr<transport::MemoryRegion>> lent_;  // lend_memory()
  DedupTable dedup_;
  const uint64_t started_ns_;  // the node's start: end marks are held a while after it
  DropLog drops_;
  // What the node holds, its notes about every slot, and the way back (held_slots.h).
  HeldSlots held_;
  // The inbound links up, their state and series (upstreams.h): made with the metrics.
  std::unique_ptr<Upstreams> upstreams_;
  // The downstream peers, routing, the pump and peer-down (downstreams.h): made once the
  // transport is, after held_ and drops_ (it uses them), destroyed first.
  std::unique_ptr<Downstreams> downstreams_;
  // End-of-stream marks: stamped, joined, passed on (end_marks.h).
  std::unique_ptr<EndMarks> end_marks_;
  // The stage, on the loop or on workers (stage_runner.h).
  std::unique_ptr<StageRunner> stage_;
  // Messages larger than a slot, in passage (chunks.h).
  std::unique_ptr<Chunks> chunks_;
  bool draining_ = false;
  bool drain_closing_ = false;  // check_drained() found it drained and closes the links
  bool started_ = false;
  std::function<void(uint64_t)> drained_;
  std::function<void(std::string_view)> device_lost_;
  Receiver* receiver_ = nullptr;
  transport::EventLoop::TimerId drain_timer_ = 0;
  // Hot-path counters, resolved once.
  HotCounters::Ref dropped_duplicate_;
  prometheus::Gauge* slots_in_use_;
  LatencyHistogram* residence_seconds_;
};

}  // namespace hoprelay::daemon
