#include "hoprelay/daemon/node.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "hoprelay/daemon/monotonic.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/tls.h"
#include "node_log.h"

namespace hoprelay::daemon {

// The header's flags are the stage ABI's message flags: a stage's flags go on as they are.
static_assert(transport::kFlagCrc32cTrailer == HOPRELAY_MSG_CRC32C_TRAILER &&
              transport::kFlagMore == HOPRELAY_MSG_MORE &&
              transport::kFlagZstd == HOPRELAY_MSG_ZSTD);

spdlog::logger& node_log() {
  static auto logger = module_logger("node");
  return *logger;
}

Node::Node(std::shared_ptr<const config::Topology> topology, const std::string& node_name,
           transport::EventLoop& loop, stages::Stage stage)
    : topology_(std::move(topology)),
      spec_(topology_->find(node_name)),
      loop_(loop),
      started_ns_(monotonic_ns()),
      held_(node_name) {
  transport::Identity id{transport::PeerRole::kNode, spec_->name, topology_->hash, 0};
  if (!topology_->auth_key_file.empty()) {
    id.auth = transport::AuthKey::load(topology_->auth_key_file);
  }
  if (spec_->tls.enabled()) {
    id.tls = transport::TlsContext::load(spec_->tls);
    node_log().info(
        "node {}: TLS 1.3 on its TCP links, as {} (tls.cert {}), peers checked "
        "against tls.ca {}",
        spec_->name, id.tls->names(), spec_->tls.cert, spec_->tls.ca);
  }
  admission_ = Admission(*topology_, *spec_);
  transport::TransportOptions options{spec_->transport, spec_->listen, true, spec_->poll,
                                      spec_->peer_dead_after};
  auto choice = transport::make_transport(options, loop_, *this, id);
  transport_ = std::move(choice.transport);
  node_log().info("node {} of pipeline {}: transport {} ({})", spec_->name, topology_->name,
                  transport_->name(), choice.reason);
  if (id.tls && transport_->name() != "tcp") {
    node_log().info(
        "node {}: its {} links do not use tls (TLS is for TCP links; the fabric "
        "protects RDMA traffic: docs/security.md)",
        spec_->name, transport_->name());
  }
  if (spec_->link_threads > 0 && spec_->downstream.empty()) {
    node_log().info("node {}: link_threads = {} unused: it has no downstream links", spec_->name,
                    spec_->link_threads);
  } else if (spec_->link_threads > 0) {
    // Link thread i on the CPU after the event loop's, as stage worker i (cpu = [...]).
    std::vector<uint32_t> cpus;
    for (size_t i = 0; i < spec_->cpu.size(); ++i) {
      cpus.push_back(spec_->cpu[(i + 1) % spec_->cpu.size()]);
    }
    link_threads_ = std::make_unique<LinkThreads>(loop_, *this, spec_->link_threads, options, id,
                                                  cpus, *transport_);
    node_log().info("node {}: downstream links on {} thread{} of their own", spec_->name,
                    spec_->link_threads, spec_->link_threads == 1 ? "" : "s");
  }
  metrics_ =
      std::make_unique<NodeMetrics>(spec_->name, std::string(transport_->name()), spec_->metrics);
  dropped_duplicate_ = metrics_->hot().wrap(metrics_->dropped("duplicate"));
  // The data path's counter sums reach prometheus at the end of the loop iteration.
  metrics_->hot().on_first_add([this] { loop_.defer([this] { metrics_->hot().flush(); }); });
  slots_in_use_ = &metrics_->slots_in_use();
  residence_seconds_ = &metrics_->residence_seconds();
  if (link_threads_) link_threads_->watch_stalls(*metrics_);
  stage_ = std::make_unique<StageRunner>(*spec_, loop_, std::move(stage), *metrics_, held_, drops_,
                                         [this](StageJob& job) { finish_job(job); });
  metrics_->config_loaded(true, topology_->hash);
  upstreams_ = std::make_unique<Upstreams>(*metrics_, held_, transport_->name());
  upstreams_->export_series(*spec_);
  // Deduplication forgets no origin an upstream sender may still send again (dedup.h).
  dedup_.set_pinned([this](std::vector<uint32_t>& out) { upstreams_->unreturned_origins(out); });
  Releaser& owner = *this;  // (a private base: make_unique cannot see it)
  downstreams_ = std::make_unique<Downstreams>(*topology_, *spec_, loop_, *metrics_, held_, drops_,
                                               owner, *this, *transport_, link_threads_.get());
  end_marks_ = std::make_unique<EndMarks>(*topology_, *spec_, loop_, held_, *downstreams_, owner,
                                          started_ns_);
  chunks_ = std::make_unique<Chunks>(*spec_, loop_, held_, *downstreams_, *stage_, dedup_, owner,
                                     drops_, *metrics_);
  if (spec_->on_peer_down == config::OnPeerDown::kDropAfter && !spec_->is_leaf()) {
    node_log().info(
        "on_peer_down = drop-after: messages for a downstream down longer than {} are "
        "dropped",
        config::duration_text(spec_->peer_down_timeout));
  }
}

Node::~Node() {
  // The workers first: they write into slots the links own.
  stage_->stop_workers();
  // Links first: they call back into the node while they close.
  downstreams_->destroy_links();
  link_threads_.reset();  // after the links: their threads destroy the real ones
  downstreams_->cancel_timers();
  lent_.clear();
  transport_.reset();
  metrics_->hot().on_first_add(nullptr);
  metrics_->hot().flush();
}

transport::MemoryRegion& Node::lend_memory(size_t bytes) {
  lent_.push_back(transport_->allocate(bytes));
  return *lent_.back();
}

void Node::start(Start how) {
  if (how == Start::kServe) {
    uint32_t links = std::max<uint32_t>(1, static_cast<uint32_t>(spec_->upstream.size()));
    transport_->listen(
        {spec_->listen, spec_->slots, spec_->slot_size, links, admission_.accepts_writes()});
    // After the listen address: a stray second instance of this node is told so by the listen
    // error ("another hoprelayd for this node") rather than by the metrics port's.
    metrics_->serve();
  }
  downstreams_->connect_all();
  started_ = true;
}

bool Node::admit(const transport::PeerInfo& peer, std::string& reason) {
  if (draining_) {
    metrics_->rejected("draining").Increment();
    reason = "node " + spec_->name + " is shutting down";
    return false;
  }
  if (peer.role == transport::PeerRole::kProducer && spec_->is_head()) {
    // Origins are identities: two producers of one origin would have their messages taken
    // for each other's repeats. The first keeps its link.
    if (const transport::PeerInfo* other = upstreams_->producer_with(peer.origin)) {
      metrics_->rejected("origin_in_use").Increment();
      reason = std::string(transport::kOriginInUse) + "origin " + std::to_string(peer.origin) +
               " has a producer connected to " + spec_->name + " already, from " + other->address +
               ": stop it, or give this producer another origin";
      return false;
    }
  }
  // What the topology says (admission.h): resolved at load and reload, not here.
  const Admission::Verdict verdict = admission_.check(peer, reason);
  if (verdict == Admission::Verdict::kAdmit) return true;
  metrics_->rejected(Admission::reason_label(verdict)).Increment();
  return false;
}

void Node::on_inbound_up(transport::InboundLink& link) {
  upstreams_->up(link);
  // Admitted before the drain began but up only now (an authenticating peer, or a verbs
  // connect request accepted before): it is asked to stop too, or the drain would wait for
  // it until its timeout.
  if (draining_) link.drain();
}

void Node::on_inbound_down(transport::InboundLink& link, std::string_view) {
  std::unique_ptr<LinkNotes> notes = upstreams_->down(link);
  if (!notes) return;
  chunks_->link_down(link);
  // Its notes stay while the node holds slots of it: their sender replays those frames.
  held_.link_down(std::move(notes));
  if (draining_) check_drained();
}

// A message's walk through the node: drop a replayed copy, stage in place, then route from
// the same slot. With stage workers, the stage runs on one of them and the rest of the walk
// resumes in arrival order (finish_job).
void Node::on_message(transport::InboundLink& link, transport::Slot& slot) {
  const bool end = slot.flags & transport::kFlagEnd;
  const bool chunk = transport::is_chunk(slot.flags, slot.chunk);
  // An end-of-stream mark is not a message: no message counter sees it.
  if (!end) {
    Upstream* in = Upstreams::of(link);
    auto op = static_cast<size_t>(slot.opcode);
    if (in && in->metrics.messages[op]) {
      in->metrics.messages[op].add();
      in->metrics.bytes[op].add(slot.length);
    }
    // The loop's clock (read once per iteration), not one clock read per message.
    held_.note(slot).arrived_ns = loop_.now_ns();
  }
  // Deduplication: a whole message is taken once, decided here, at its arrival (a repeat
  // arriving while its first copy is on a worker is known for one). A chunked message is
  // decided by its chunks (Chunks::on_chunk: taken at its last chunk), an end mark by its
  // joins (EndMarks).
  const bool repeat = !end && !chunk && !dedup_.first_time(slot.origin, slot.seq);
  if (!stage_->on_workers()) return take(link, slot, repeat);
  // To a worker: a whole message seen for the first time. Everything else keeps its place in
  // the order and walks on the event loop when its turn comes. A chunk goes to a worker when
  // the stage takes chunks (cut-through forwarding): its stage call is made ahead, and
  // Chunks::on_chunk decides in order what becomes of it (a replayed copy is still dropped
  // there, after the stage saw it).
  bool staged = false;
  if (stage_->parallel() && !end) {
    if (chunk) {
      staged = stage_->chunkwise() && !receiver_ && !(slot.flags & transport::kFlagAbort);
    } else {
      staged = !repeat;
    }
  }
  stage_->submit(link, slot, staged, repeat);
}

void Node::take(transport::InboundLink& link, transport::Slot& slot, bool repeat,
                const StageJob* job) {
  if (slot.flags & transport::kFlagEnd) return end_marks_->on_end(link, slot);
  Upstream* in = Upstreams::of(link);
  if (in) chunks_->check_assembling(link, slot);
  if (transport::is_chunk(slot.flags, slot.chunk)) {
    return in ? chunks_->on_chunk(link, slot, job) : release(slot);
  }
  if (repeat) {
    // Already taken (a replay after a link or peer failure): acknowledge, do not deliver;
    // with the first copy when that is still held here (hold_with_first).
    dropped_duplicate_.add();
    if (held_.hold_with_first(slot)) return;
    return release(slot);
  }
  hoprelay_msg msg{reinterpret_cast<uint8_t*>(slot.payload()),
                   slot.length,
                   spec_->slot_size,
                   slot.origin,
                   slot.flags,
                   slot.seq,
                   0};
  if (stage_->run(msg, &link, slot) != HOPRELAY_FORWARD) return release(slot);
  slot.length = msg.length;
  after_stage(link, slot, msg.flags);
}

void Node::after_stage(transport::InboundLink& link, transport::Slot& slot, uint32_t flags) {
  if (downstreams_->leaf()) {
    if (chunks_->refuse_compressed(static_cast<uint16_t>(flags), &link, slot)) {
      return release(slot);
    }
    return deliver(slot);
  }
  // Only flags the protocol knows travel on: a peer refuses a frame with unknown bits.
  slot.flags = static_cast<uint16_t>(flags & transport::kStageFlags);
  if (!receiver_) return downstreams_->route(slot);
  // A relay that keeps what it relays: its application is one branch more, and the slot goes
  // back once the peers have acknowledged it and the application released it, whichever is
  // last (its refs count both).
  downstreams_->route(slot, nullptr, 1);
  if (chunks_->refuse_compressed(slot.flags, &link, slot, true)) return local_done(slot);
  receiver_->on_delivered(slot.origin, slot.seq, {slot.payload(), slot.length}, slot, false);
}

uint64_t Node::resume_seq(const transport::PeerInfo& peer) {
  return peer.role == transport::PeerRole::kProducer ? dedup_.next_seq(peer.origin) : 0;
}

void Node::on_auth_failed(const transport::PeerInfo&) {
  metrics_->rejected("auth_failed").Increment();
}

void Node::on_protocol_error(std::string_view kind) {
  metrics_->protocol_errors(kind).Increment();
}

void Node::on_completion_error(std::string_view status) {
  metrics_->completion_errors(status).Increment();
}

void Node::on_device_lost(std::string_view device) {
  node_log().error(
      "RDMA device {} is gone (removed or failed): every link of node {} on it is down; the {} "
      "messages held here come again from upstream once the node runs again",
      device, spec_->name, held_.count());
  if (device_lost_) device_lost_(device);
}

// The downstream links' events: the downstreams' own (downstreams.h).
void Node::on_outbound_up(transport::OutboundLink& link) {
  downstreams_->on_up(link);
}
void Node::on_outbound_down(transport::OutboundLink& link, std::string_view) {
  downstreams_->on_down(link);
}
void Node::on_acked(transport::OutboundLink& link, void* cookie) {
  downstreams_->on_acked(link, cookie);
}
void Node::on_outcome(transport::OutboundLink& link, void* cookie,
                      const transport::Outcome& outcome) {
  downstreams_->on_outcome(link, cookie, outcome);
}
void Node::on_returned(transport::OutboundLink& link, void* cookie) {
  downstreams_->on_returned(link, cookie);
}
void Node::on_credit(transport::OutboundLink& link) {
  downstreams_->on_credit(link);
}

void Node::on_connect_timeout(transport::OutboundLink& link) {
  metrics_->rdma_connect_timeouts(link.peer_name()).Increment();
}

void Node::tick() {
  stage_->tick();
  drops_.flush(loop_.now_ns());
  end_marks_->tick();
  chunks_->tick();
  slots_in_use_->Set(static_cast<double>(held_.count()));
  downstreams_->tick();
  upstreams_->sample_slots();
}

void Node::drain(std::chrono::milliseconds timeout, std::function<void(uint64_t)> done) {
  draining_ = true;
  drained_ = std::move(done);
  transport_->stop_listening();
  // Each sender is asked to stop (BYE) and closes its link once everything it sent is
  // acknowledged: drained means no message held and no inbound link left, so nothing sent to
  // this node has to be replayed to its next run.
  upstreams_->drain_all();
  node_log().info("draining: {} messages in flight, {} inbound links, waiting up to {} ms",
                  held_.count(), upstreams_->size(), timeout.count());
  drain_timer_ = loop_.after(timeout, [this] {
    drain_timer_ = 0;
    if (!upstreams_->empty()) {
      node_log().warn(
          "drain timed out with {} inbound links still open: their senders replay what this "
          "node did not acknowledge",
          upstreams_->size());
    }
    if (drained_) std::exchange(drained_, nullptr)(held_.count());
  });
  check_drained();
}

void Node::check_drained() {
  if (held_.count() != 0 || !upstreams_->empty() || !drained_ || drain_closing_) return;
  if (stage_->pending() != 0) return;
  if (drain_timer_) loop_.cancel(drain_timer_);
  drain_timer_ = 0;
  drain_closing_ = true;  // once: every release from here on would ask again
  // Deferred: let the credit frames for the last releases go out first. Then say goodbye
  // downstream, so peers log a clean close rather than a lost connection.
  loop_.defer([this] {
    downstreams_->close_all();
    drain_closing_ = false;
    if (drained_) std::exchange(drained_, nullptr)(0);
  });
}

}  // namespace hoprelay::daemon
