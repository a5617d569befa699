// The stage runner of a Node: the stage on the event loop (run_stage) or on worker threads
// (threads > 1, stage_workers.h: configure_workers, finish_job), its verdict counted and a drop
// recorded (judge), and an application's refusal of compressed bytes at a leaf.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "hoprelay/daemon/monotonic.h"
#include "hoprelay/daemon/node.h"
#include "node_log.h"

namespace hoprelay::daemon {

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

}  // namespace hoprelay::daemon
