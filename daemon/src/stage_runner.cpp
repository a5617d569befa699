// The stage runner (stage_runner.h): the stage on the event loop or on worker threads, one
// verdict per message, counted, and a drop recorded in the message's outcome.
#include "hoprelay/daemon/stage_runner.h"

#include <prometheus/counter.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "hoprelay/daemon/monotonic.h"
#include "node_log.h"

namespace hoprelay::daemon {

StageRunner::StageRunner(const config::NodeSpec& spec, transport::EventLoop& loop,
                         stages::Stage stage, NodeMetrics& metrics, HeldSlots& held, DropLog& drops,
                         Finish finish)
    : spec_(&spec),
      loop_(loop),
      stage_(std::move(stage)),
      metrics_(metrics),
      held_(held),
      drops_(drops),
      finish_(std::move(finish)) {
  dropped_by_stage_ = metrics_.hot().wrap(metrics_.dropped("stage_drop"));
  dropped_stage_error_ = metrics_.hot().wrap(metrics_.dropped("stage_error"));
  resolve_series();
  configure_workers();
}

StageRunner::~StageRunner() {
  workers_.reset();
}

void StageRunner::resolve_series() {
  std::string name(stage_.name());
  forward_ = metrics_.hot().wrap(metrics_.stage_verdict(name, "forward"));
  drop_ = metrics_.hot().wrap(metrics_.stage_verdict(name, "drop"));
  error_ = metrics_.hot().wrap(metrics_.stage_verdict(name, "error"));
  seconds_ = &metrics_.stage_seconds(name);
}

void StageRunner::configure_workers() {
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
                                              [this](StageJob& job) { finish_(job); });
    for (uint32_t i = 0; i < spec_->threads; ++i) {
      worker_counters_.push_back(&metrics_.stage_worker_messages(std::to_string(i)));
    }
    worker_counters_.push_back(&metrics_.stage_worker_messages("loop"));
    worker_counted_.assign(worker_counters_.size(), 0);
  } else {
    workers_->set_stages(pointers, &stage_);
  }
  worker_stages_ = std::move(instances);  // after set_stages: the old ones are idle now
  parallel_ = true;
  node_log().info("stage {} runs on {} worker threads ({})", stage_.name(), spec_->threads,
                  shared ? "one thread-safe instance" : "one instance per thread");
}

void StageRunner::finish_all() {
  if (!workers_) return;
  // A reload is rare, and the workers are busy with messages already taken: the loop waits
  // for them here, helping (collect() runs waiting jobs itself while every worker is busy).
  workers_->finish_all();
}

void StageRunner::replace(stages::Stage next) {
  // Between two messages: no worker may be inside the old instance when it goes.
  if (workers_) workers_->quiesce();
  stage_ = std::move(next);
  configure_workers();
  resolve_series();
}

void StageRunner::tick() {
  stage_.flush();
  if (!workers_) return;
  if (!worker_stages_.empty()) workers_->request_flush();
  for (size_t i = 0; i < worker_counters_.size(); ++i) {
    uint64_t n = i < workers_->threads() ? workers_->processed(i) : workers_->processed_on_loop();
    worker_counters_[i]->Increment(static_cast<double>(n - worker_counted_[i]));
    worker_counted_[i] = n;
  }
}

hoprelay_verdict StageRunner::run(hoprelay_msg& msg, const transport::InboundLink* from,
                                  transport::Slot& slot) {
  const uint32_t capacity = msg.capacity;
  const bool timed = (++calls_ & (kStageSample - 1)) == 0;
  const uint64_t started = timed ? monotonic_ns() : 0;
  hoprelay_verdict verdict = stage_.process(msg);
  if (timed) seconds_->observe_ns(monotonic_ns() - started);
  bool grew = verdict == HOPRELAY_FORWARD && msg.length > capacity;
  std::string_view why = verdict == HOPRELAY_FORWARD ? std::string_view() : stage_.last_error();
  return judge(verdict, grew, why, msg.origin, msg.seq, from, slot);
}

hoprelay_verdict StageRunner::take_verdict(const StageJob& job, uint32_t capacity, uint32_t origin,
                                           uint64_t seq, const transport::InboundLink* from,
                                           transport::Slot& slot) {
  if (job.timed) seconds_->observe_ns(job.stage_ns);
  const bool grew = job.verdict == HOPRELAY_FORWARD && job.length > capacity;
  return judge(job.verdict, grew, job.why, origin, seq, from, slot);
}

void StageRunner::refuse(std::string_view why, uint32_t origin, uint64_t seq,
                         const transport::InboundLink* from, transport::Slot& slot, bool branch) {
  dropped_stage_error_.add();
  drops_.note("stage_error", peer_of(from), why, origin, seq, loop_.now_ns());
  held_.record_drop(slot, transport::DropReason::kStageError, why, branch);
}

hoprelay_verdict StageRunner::judge(hoprelay_verdict verdict, bool grew, std::string_view why,
                                    uint32_t origin, uint64_t seq,
                                    const transport::InboundLink* from, transport::Slot& slot) {
  if (grew) verdict = HOPRELAY_ERROR;
  switch (verdict) {
    case HOPRELAY_FORWARD:
      forward_.add();
      return verdict;
    case HOPRELAY_DROP:
      drop_.add();
      dropped_by_stage_.add();
      drops_.note("stage_drop", peer_of(from), detail(verdict, false, why), origin, seq,
                  loop_.now_ns());
      held_.record_drop(slot, transport::DropReason::kStageDrop, detail_, false);
      return verdict;
    default:
      error_.add();
      dropped_stage_error_.add();
      drops_.note("stage_error", peer_of(from), detail(HOPRELAY_ERROR, grew, why), origin, seq,
                  loop_.now_ns());
      held_.record_drop(slot, transport::DropReason::kStageError, detail_, false);
      return HOPRELAY_ERROR;
  }
}

std::string_view StageRunner::detail(hoprelay_verdict verdict, bool grew, std::string_view why) {
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
