#include "hoprelay/daemon/node.h"

#include <netdb.h>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "hoprelay/daemon/monotonic.h"
#include "hoprelay/transport/log.h"
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

namespace {

// Spreads origins over branches for route = "hash": one origin always takes the same branch.
inline size_t origin_branch(uint32_t origin, size_t branches) {
  uint64_t x = origin * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>((x >> 32) % branches);
}

}  // namespace

Node::Node(std::shared_ptr<const config::Topology> topology, const std::string& node_name,
           transport::EventLoop& loop, stages::Stage stage)
    : topology_(std::move(topology)),
      spec_(topology_->find(node_name)),
      loop_(loop),
      stage_(std::move(stage)),
      stamp_(EndJoins::stamp_of(node_name)),
      started_ns_(monotonic_ns()) {
  transport::Identity id{transport::PeerRole::kNode, spec_->name, topology_->hash, 0};
  if (!topology_->auth_key_file.empty()) {
    id.auth = transport::AuthKey::load(topology_->auth_key_file);
  }
  admission_ = Admission(*topology_, *spec_);
  transport::TransportOptions options{spec_->transport, spec_->listen, true, spec_->poll};
  auto choice = transport::make_transport(options, loop_, *this, id);
  transport_ = std::move(choice.transport);
  node_log().info("node {} of pipeline {}: transport {} ({})", spec_->name, topology_->name,
                  transport_->name(), choice.reason);
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
  std::string stage_name(stage_.name());
  stage_forward_ = metrics_->hot().wrap(metrics_->stage_verdict(stage_name, "forward"));
  stage_drop_ = metrics_->hot().wrap(metrics_->stage_verdict(stage_name, "drop"));
  stage_error_ = metrics_->hot().wrap(metrics_->stage_verdict(stage_name, "error"));
  dropped_by_stage_ = metrics_->hot().wrap(metrics_->dropped("stage_drop"));
  dropped_stage_error_ = metrics_->hot().wrap(metrics_->dropped("stage_error"));
  dropped_too_large_ = metrics_->hot().wrap(metrics_->dropped("too_large_for_peer"));
  dropped_duplicate_ = metrics_->hot().wrap(metrics_->dropped("duplicate"));
  dropped_peer_down_ = metrics_->hot().wrap(metrics_->dropped("peer_down"));
  dropped_incomplete_ = metrics_->hot().wrap(metrics_->dropped("incomplete"));
  dropped_reassembly_full_ = metrics_->hot().wrap(metrics_->dropped("reassembly_full"));
  // The data path's counter sums reach prometheus at the end of the loop iteration.
  metrics_->hot().on_first_add([this] { loop_.defer([this] { metrics_->hot().flush(); }); });
  slots_in_use_ = &metrics_->slots_in_use();
  stage_seconds_ = &metrics_->stage_seconds(stage_name);
  residence_seconds_ = &metrics_->residence_seconds();
  configure_workers();
  metrics_->config_loaded(true, topology_->hash);
  export_upstream_series();
  end_joins_.set_topology(*topology_, spec_->name);
  // Deduplication forgets no origin an upstream sender may still send again (dedup.h).
  dedup_.set_pinned([this](std::vector<uint32_t>& out) {
    for (const Inbound& in : inbound_) in.link->unreturned_origins(out);
    for (const transport::InboundLink* link : dead_links_) link->unreturned_origins(out);
  });
  for (const auto& name : spec_->downstream) add_downstream(name);
  rebuild_active();
  if (spec_->on_peer_down == config::OnPeerDown::kDropAfter && !spec_->is_leaf()) {
    node_log().info(
        "on_peer_down = drop-after: messages for a downstream down longer than {} are "
        "dropped",
        config::duration_text(spec_->peer_down_timeout));
  }
}

// The inbound series of every peer that may send to this node exist from start, at 0: a
// series that appears only with its first message may already hold a whole burst at its first
// scrape, and rate() of that series is 0 (a false HoprelayNoTraffic for a head whose first
// stream fits between two scrapes).
void Node::export_upstream_series() {
  std::vector<std::string> peers = spec_->upstream;
  if (peers.empty()) peers.emplace_back("producer");
  for (const auto& peer : peers) {
    metrics_->inbound(peer, transport_->name());
    metrics_->link_slots_in_use(peer);
  }
}

void Node::configure_workers() {
  if (spec_->threads <= 1) return;
  const uint32_t caps = stage_.caps();
  const bool shared = (caps & HOPRELAY_STAGE_THREADSAFE) != 0;
  const bool per_thread = !shared && (caps & HOPRELAY_STAGE_PER_THREAD) != 0;
  if (!shared && !per_thread) {
    // Jobs already handed over finish with the instance they ran on; what comes now only keeps
    // its place behind them.
    parallel_ = false;
    if (workers_) {
      workers_->set_stages(std::vector<stages::Stage*>(spec_->threads, &stage_), nullptr);
    }
    worker_stages_.clear();
    node_log().warn(
        "threads = {}, but stage {} does not say it may run on several threads "
        "(HOPRELAY_STAGE_THREADSAFE or HOPRELAY_STAGE_PER_THREAD, stage ABI minor 3): it runs on "
        "the event loop alone",
        spec_->threads, stage_.name());
    return;
  }
  std::vector<stages::Stage> instances;
  std::vector<stages::Stage*> pointers;
  for (uint32_t i = 0; i < spec_->threads; ++i) {
    if (per_thread) instances.emplace_back(stage_.type(), spec_->name, spec_->stage.params);
  }
  for (uint32_t i = 0; i < spec_->threads; ++i) {
    pointers.push_back(per_thread ? &instances[i] : &stage_);
  }
  if (!workers_) {
    // Sized for every slot of the node's inbound links (a head node: a few producers).
    size_t links = std::max<size_t>(spec_->upstream.size(), 4);
    workers_ = std::make_unique<StageWorkers>(loop_, pointers, &stage_, spec_->slot_size,
                                              links * spec_->slots, spec_->cpu,
                                              [this](StageJob& job) { finish_job(job); });
    for (uint32_t i = 0; i < spec_->threads; ++i) {
      worker_counters_.push_back(&metrics_->stage_worker_messages(std::to_string(i)));
    }
    worker_counters_.push_back(&metrics_->stage_worker_messages("loop"));
    worker_counted_.assign(worker_counters_.size(), 0);
  } else {
    workers_->set_stages(pointers, &stage_);
  }
  worker_stages_ = std::move(instances);  // after set_stages: the old ones are idle now
  parallel_ = true;
  node_log().info("stage {} runs on {} worker threads ({})", stage_.name(), spec_->threads,
                  shared ? "one thread-safe instance" : "one instance per thread");
}

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

Node::~Node() {
  // The workers first: they write into slots the links own.
  workers_.reset();
  // Links first: they call back into the node while they close.
  for (auto& d : downstream_) d->link.reset();
  link_threads_.reset();  // after the links: their threads destroy the real ones
  for (auto& d : downstream_) cancel_peer_down(*d);
  lent_.clear();
  transport_.reset();
  metrics_->hot().on_first_add(nullptr);
  metrics_->hot().flush();
}

transport::MemoryRegion& Node::lend_memory(size_t bytes) {
  lent_.push_back(transport_->allocate(bytes));
  return *lent_.back();
}

void Node::start() {
  uint32_t links = std::max<uint32_t>(1, static_cast<uint32_t>(spec_->upstream.size()));
  transport_->listen(
      {spec_->listen, spec_->slots, spec_->slot_size, links, admission_.accepts_writes()});
  // After the listen address: a stray second instance of this node is told so by the listen
  // error ("another hoprelayd for this node") rather than by the metrics port's.
  metrics_->serve();
  for (auto& d : downstream_) connect(*d);
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
    for (const Inbound& in : inbound_) {
      const transport::PeerInfo& other = in.link->peer();
      if (other.role != transport::PeerRole::kProducer || other.origin != peer.origin) continue;
      metrics_->rejected("origin_in_use").Increment();
      reason = std::string(transport::kOriginInUse) + "origin " + std::to_string(peer.origin) +
               " has a producer connected to " + spec_->name + " already, from " + other.address +
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
  const std::string peer = inbound_label(link);
  Inbound in{&link, metrics_->inbound(peer, link.in_process() ? "in-process" : transport_->name()),
             &metrics_->link_slots_in_use(peer)};
  in.metrics.up->Increment();  // a count: several producers share the "producer" label
  inbound_.push_back(in);
  // Admitted before the drain began but up only now (an authenticating peer, or a verbs
  // connect request accepted before): it is asked to stop too, or the drain would wait for
  // it until its timeout.
  if (draining_) link.drain();
}

void Node::on_inbound_down(transport::InboundLink& link, std::string_view) {
  auto it = std::find_if(inbound_.begin(), inbound_.end(),
                         [&](const Inbound& i) { return i.link == &link; });
  if (it == inbound_.end()) return;
  it->metrics.up->Decrement();
  inbound_.erase(it);
  forget_partials(link);
  if (link.slots_held() > 0) dead_links_.push_back(&link);
  if (draining_) check_drained();
}

Node::Inbound* Node::inbound_of(transport::InboundLink& link) {
  for (auto& in : inbound_) {
    if (in.link == &link) return &in;
  }
  return nullptr;
}

// A message's walk through the node: drop a replayed copy, stage in place, then route from
// the same slot. With stage workers, the stage runs on one of them and the rest of the walk
// resumes in arrival order (finish_job).
void Node::on_message(transport::InboundLink& link, transport::Slot& slot) {
  // An end-of-stream mark is not a message: no message counter sees it.
  if (!(slot.flags & transport::kFlagEnd)) {
    Inbound* in = inbound_of(link);
    auto op = static_cast<size_t>(slot.opcode);
    if (in && in->metrics.messages[op]) {
      in->metrics.messages[op].add();
      in->metrics.bytes[op].add(slot.length);
    }
    // The loop's clock (read once per iteration), not one clock read per message.
    slot.arrived_ns = loop_.now_ns();
  }
  if (!workers_) return take(link, slot);
  // To a worker: a whole message seen for the first time, recorded as taken now, so that a
  // repeat arriving while it is on a worker is known for one. Everything else keeps its place
  // in the order and walks on the event loop when its turn comes.
  // A chunk goes to a worker when the stage takes chunks (cut-through forwarding): its stage
  // call is made ahead, and on_chunk() decides in order what becomes of it (a replayed copy
  // is still dropped there, after the stage saw it).
  bool staged = false;
  if (parallel_ && !(slot.flags & transport::kFlagEnd)) {
    if (transport::is_chunk(slot.flags, slot.chunk)) {
      staged = stage_.chunkwise() && !receiver_ && !(slot.flags & transport::kFlagAbort);
    } else {
      staged = dedup_.first_time(slot.origin, slot.seq);
    }
  }
  workers_->submit(link, slot, staged);
}

void Node::check_assembling(Inbound* in, const transport::Slot& slot) {
  if (in && in->assembling &&
      (in->assembling->origin != slot.origin || in->assembling->seq != slot.seq)) {
    abandon(*in->assembling, dropped_incomplete_, "incomplete");
  }
}

void Node::take(transport::InboundLink& link, transport::Slot& slot) {
  if (slot.flags & transport::kFlagEnd) return on_end(link, slot);
  Inbound* in = inbound_of(link);
  check_assembling(in, slot);
  if (transport::is_chunk(slot.flags, slot.chunk)) {
    return in ? on_chunk(*in, slot) : consume(link, slot);
  }
  if (!dedup_.first_time(slot.origin, slot.seq)) {
    // Already taken (a replay after a link or peer failure): acknowledge, do not deliver;
    // with the first copy when that is still held here (hold_with_first).
    dropped_duplicate_.add();
    if (hold_with_first(slot)) return;
    return consume(link, slot);
  }
  hoprelay_msg msg{reinterpret_cast<uint8_t*>(slot.payload()),
                   slot.length,
                   spec_->slot_size,
                   slot.origin,
                   slot.flags,
                   slot.seq,
                   0};
  if (run_stage(msg, &link, slot) != HOPRELAY_FORWARD) return consume(link, slot);
  slot.length = msg.length;
  after_stage(link, slot, msg.flags);
}

void Node::finish_job(StageJob& job) {
  transport::InboundLink& link = *job.link;
  transport::Slot& slot = *job.slot;
  if (!job.staged) {
    take(link, slot);
  } else if (transport::is_chunk(slot.flags, slot.chunk)) {
    staged_chunk_ = &job;  // forward_chunk() takes the worker's verdict
    take(link, slot);
    staged_chunk_ = nullptr;
  } else {
    check_assembling(inbound_of(link), slot);
    if (job.timed) stage_seconds_->observe_ns(job.stage_ns);
    bool grew = job.verdict == HOPRELAY_FORWARD && job.length > spec_->slot_size;
    if (judge(job.verdict, grew, job.why, slot.origin, slot.seq, &link, slot) != HOPRELAY_FORWARD) {
      consume(link, slot);
    } else {
      slot.length = job.length;
      after_stage(link, slot, job.flags);
    }
  }
  // This job still counts as pending until the workers' collect() moves past it: checked
  // once it has (the last job of a drain would otherwise leave it to the timeout).
  if (draining_ && held_ == 0 && inbound_.empty()) loop_.defer([this] { check_drained(); });
}

void Node::after_stage(transport::InboundLink& link, transport::Slot& slot, uint32_t flags) {
  if (active_.empty()) {  // a leaf
    if (refuse_compressed(static_cast<uint16_t>(flags), &link, slot)) {
      return consume(link, slot);
    }
    return deliver(link, slot);
  }
  // Only flags the protocol knows travel on: a peer refuses a frame with unknown bits.
  slot.flags = static_cast<uint16_t>(flags & transport::kStageFlags);
  route(slot);
}

bool Node::refuse_compressed(uint16_t flags, const transport::InboundLink* from,
                             transport::Slot& slot) {
  if (!receiver_ || !(flags & transport::kFlagZstd)) return false;
  static constexpr std::string_view kWhy =
      "zstd-compressed: give this leaf a zstd stage with mode = \"decompress\"";
  dropped_stage_error_.add();
  warn_drop("stage_error", peer_of(from), kWhy, slot.origin, slot.seq);
  record_drop(slot, transport::DropReason::kStageError, kWhy, false);
  return true;
}

hoprelay_verdict Node::run_stage(hoprelay_msg& msg, const transport::InboundLink* from,
                                 transport::Slot& slot) {
  const uint32_t capacity = msg.capacity;
  // The stage's time is measured on one message in kStageSample: two clock reads per message
  // cost more than most stages (a histogram wants a sample, not every message).
  const bool timed = (++stage_calls_ & (kStageSample - 1)) == 0;
  const uint64_t started = timed ? monotonic_ns() : 0;
  hoprelay_verdict verdict = stage_.process(msg);
  if (timed) stage_seconds_->observe_ns(monotonic_ns() - started);
  bool grew = verdict == HOPRELAY_FORWARD && msg.length > capacity;
  std::string_view why = verdict == HOPRELAY_FORWARD ? std::string_view() : stage_.last_error();
  return judge(verdict, grew, why, msg.origin, msg.seq, from, slot);
}

hoprelay_verdict Node::judge(hoprelay_verdict verdict, bool grew, std::string_view why,
                             uint32_t origin, uint64_t seq, const transport::InboundLink* from,
                             transport::Slot& slot) {
  if (grew) verdict = HOPRELAY_ERROR;
  switch (verdict) {
    case HOPRELAY_FORWARD:
      stage_forward_.add();
      return verdict;
    case HOPRELAY_DROP:
      stage_drop_.add();
      dropped_by_stage_.add();
      warn_drop("stage_drop", peer_of(from), stage_detail(verdict, false, why), origin, seq);
      record_drop(slot, transport::DropReason::kStageDrop, detail_, false);
      return verdict;
    default:
      stage_error_.add();
      dropped_stage_error_.add();
      warn_drop("stage_error", peer_of(from), stage_detail(HOPRELAY_ERROR, grew, why), origin, seq);
      record_drop(slot, transport::DropReason::kStageError, detail_, false);
      return HOPRELAY_ERROR;
  }
}

std::string_view Node::stage_detail(hoprelay_verdict verdict, bool grew, std::string_view why) {
  detail_.assign(stage_.name());
  if (grew) {
    detail_ += ": grew the message past its slot";
  } else if (!why.empty()) {
    detail_ += ": ";
    detail_ += why;
  } else {
    detail_ += verdict == HOPRELAY_DROP ? " said DROP" : " said ERROR";
  }
  return detail_;
}

transport::Outcome& Node::outcome_of(transport::Slot& slot) {
  if (slot.outcome) return *slot.outcome;
  if (free_outcomes_.empty()) {
    outcome_store_.push_back(std::make_unique<transport::Outcome>());
    free_outcomes_.push_back(outcome_store_.back().get());
  }
  slot.outcome = free_outcomes_.back();
  free_outcomes_.pop_back();
  return *slot.outcome;
}

void Node::record_drop(transport::Slot& slot, transport::DropReason reason, std::string_view detail,
                       bool branch) {
  transport::Outcome& o = outcome_of(slot);
  o.add(reason, spec_->name, detail);
  if (branch) {
    ++o.branches;
  } else {
    o.whole = true;
  }
}

void Node::on_outcome(transport::OutboundLink& link, void* cookie,
                      const transport::Outcome& outcome) {
  auto* slot = static_cast<transport::Slot*>(cookie);
  downstream_of(link).metrics.dropped_below.add();
  transport::Outcome& o = outcome_of(*slot);
  o.merge(outcome);
  ++o.branches;
}

void Node::release_to(transport::InboundLink& link, transport::Slot& slot) {
  if (!dead_links_.empty() && link.slots_held() == 1) {
    // Its last slot: the link's ring may go with it. (Not slots_in_use() == 1: released out
    // of order, the last slot may free several, and the link stayed listed after it was
    // freed: the next tick read it.)
    std::erase(dead_links_, &link);
  }
  transport::Outcome* o = std::exchange(slot.outcome, nullptr);
  // Given up on some of its branches only: delivered on the others.
  if (o && !o->whole && slot.routes > 0 && o->branches < slot.routes) o->partial = true;
  slot.routes = 0;
  link.release(slot, o);  // may free the slot's ring (a closed link): slot is not used after
  if (o) {
    o->clear();
    free_outcomes_.push_back(o);
  }
}

uint64_t Node::resume_seq(const transport::PeerInfo& peer) {
  return peer.role == transport::PeerRole::kProducer ? dedup_.next_seq(peer.origin) : 0;
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

void Node::hold(transport::Slot& slot) {
  ++held_;
  slot.held_prev = nullptr;
  slot.held_next = held_list_;
  if (held_list_) held_list_->held_prev = &slot;
  held_list_ = &slot;
}

void Node::unhold(transport::Slot& slot) {
  --held_;
  if (slot.held_prev) {
    slot.held_prev->held_next = slot.held_next;
  } else if (held_list_ == &slot) {
    held_list_ = slot.held_next;
  }
  if (slot.held_next) slot.held_next->held_prev = slot.held_prev;
  slot.held_prev = slot.held_next = nullptr;
}

bool Node::hold_with_first(transport::Slot& copy) {
  if (dead_links_.empty()) return false;  // no link went down with slots held: nothing to find
  for (transport::Slot* s = held_list_; s; s = s->held_next) {
    // (Not the flags: a stage may have changed the first copy's.)
    if (s->origin != copy.origin || s->seq != copy.seq || s->chunk != copy.chunk ||
        (s->flags & transport::kFlagEnd) != (copy.flags & transport::kFlagEnd) || !s->link ||
        s->link == copy.link ||
        std::find(dead_links_.begin(), dead_links_.end(), s->link) == dead_links_.end()) {
      continue;
    }
    // Into the list of s's copies (s may be a copy itself, after a second cut: the list is
    // the same one).
    add_repeat(*s, copy);
    copy.routes = s->routes;
    return true;
  }
  return false;
}

void Node::release(transport::Slot& slot) {
  // An end mark that completed a join is forgotten as in flight (end_joins.h).
  if (slot.flags & transport::kFlagEnd)
    end_joins_.released({slot.origin, slot.seq, slot.chunk}, &slot);
  unhold(slot);
  if (!(slot.flags & transport::kFlagEnd)) {  // an end mark is not a message
    residence_seconds_->observe_ns(loop_.now_ns() - slot.arrived_ns);
  }
  // Replayed copies held with this one learn what became of it, then go with it.
  transport::Slot* repeats = std::exchange(slot.repeats, nullptr);
  for (transport::Slot* r = repeats; r; r = r->repeats) {
    if (slot.outcome) outcome_of(*r) = *slot.outcome;
  }
  if (slot.link) {
    release_to(*slot.link, slot);
  } else {
    // A frame of the node's own (own_frame(): an abort, an end mark): what became of it concerns
    // no one upstream.
    if (slot.outcome) {
      slot.outcome->clear();
      free_outcomes_.push_back(std::exchange(slot.outcome, nullptr));
    }
    slot.routes = 0;
    free_aborts_.push_back(&slot);
  }
  while (repeats) {
    transport::Slot* r = repeats;
    repeats = std::exchange(r->repeats, nullptr);
    release(*r);
  }
  if (draining_) check_drained();
}

void Node::consume(transport::InboundLink& link, transport::Slot& slot) {
  if (!(slot.flags & transport::kFlagEnd)) {
    residence_seconds_->observe_ns(loop_.now_ns() - slot.arrived_ns);
  }
  release_to(link, slot);
}

void Node::deliver(transport::InboundLink& link, transport::Slot& slot) {
  if (!receiver_) return consume(link, slot);  // the stage consumed it
  hold(slot);
  receiver_->on_delivered(slot.origin, slot.seq, {slot.payload(), slot.length}, slot, false);
}

void Node::release_delivered(transport::Slot& held) {
  for (transport::Slot* s = &held; s;) {
    transport::Slot* next = s->next;
    s->next = nullptr;
    release(*s);
    s = next;
  }
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
      device, spec_->name, held_);
  if (device_lost_) device_lost_(device);
}

void Node::on_connect_timeout(transport::OutboundLink& link) {
  metrics_->rdma_connect_timeouts(link.peer_name()).Increment();
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

void Node::tick() {
  stage_.flush();
  expire_ends();
  if (workers_) {
    if (!worker_stages_.empty()) workers_->request_flush();
    for (size_t i = 0; i < worker_counters_.size(); ++i) {
      uint64_t n = i < workers_->threads() ? workers_->processed(i) : workers_->processed_on_loop();
      worker_counters_[i]->Increment(static_cast<double>(n - worker_counted_[i]));
      worker_counted_[i] = n;
    }
  }
  drops_.flush(loop_.now_ns());
  flush_given_up_ends();
  warn_long_down();
  abort_orphans();
  slots_in_use_->Set(static_cast<double>(held_));
  for (auto& d : downstream_) {
    d->queued->Set(static_cast<double>(d->waiting.size()));
    d->credits->Set(d->link ? d->link->credits() : 0);
  }
  sample_link_slots();
}

// Per `peer` label the sum over its links (producers share one label; each set its own value
// before, so the gauge showed whichever came last, and kept it once the producer was gone),
// links that went down with slots still held included.
void Node::sample_link_slots() {
  for (auto& [gauge, sum] : link_slots_) sum = 0;
  auto add = [this](prometheus::Gauge* gauge, uint32_t n) {
    for (auto& [g, sum] : link_slots_) {
      if (g == gauge) {
        sum += n;
        return;
      }
    }
    link_slots_.emplace_back(gauge, n);
  };
  for (const Inbound& in : inbound_) add(in.slots_in_use, in.link->slots_in_use());
  for (const transport::InboundLink* link : dead_links_) {
    add(&metrics_->link_slots_in_use(inbound_label(*link)), link->slots_in_use());
  }
  for (const auto& [gauge, sum] : link_slots_) gauge->Set(sum);
}

void Node::drain(std::chrono::milliseconds timeout, std::function<void(uint64_t)> done) {
  draining_ = true;
  drained_ = std::move(done);
  transport_->stop_listening();
  // Each sender is asked to stop (BYE) and closes its link once everything it sent is
  // acknowledged: drained means no message held and no inbound link left, so nothing sent to
  // this node has to be replayed to its next run.
  // By pointer: a link whose BYE cannot be sent fails at once, and leaves inbound_.
  std::vector<transport::InboundLink*> links;
  for (auto& in : inbound_) links.push_back(in.link);
  for (auto* link : links) link->drain();
  node_log().info("draining: {} messages in flight, {} inbound links, waiting up to {} ms", held_,
                  inbound_.size(), timeout.count());
  drain_timer_ = loop_.after(timeout, [this] {
    drain_timer_ = 0;
    if (!inbound_.empty()) {
      node_log().warn(
          "drain timed out with {} inbound links still open: their senders replay what this "
          "node did not acknowledge",
          inbound_.size());
    }
    if (drained_) std::exchange(drained_, nullptr)(held_);
  });
  check_drained();
}

void Node::check_drained() {
  if (held_ != 0 || !inbound_.empty() || !drained_) return;
  if (workers_ && workers_->pending() != 0) return;
  if (drain_timer_) loop_.cancel(drain_timer_);
  drain_timer_ = 0;
  // Deferred: let the credit frames for the last releases go out first. Then say goodbye
  // downstream, so peers log a clean close rather than a lost connection.
  loop_.defer([this] {
    for (auto& d : downstream_) {
      if (d->link) d->link->close();
    }
    if (drained_) std::exchange(drained_, nullptr)(0);
  });
}

}  // namespace hoprelay::daemon
