// The stage of a node, as one component: the plugin run in place on each message, on the
// event loop or, with `threads` > 1 and a stage that may run on threads, on worker threads
// that give the messages back in arrival order (stage_workers.h); one verdict per message,
// counted, its time sampled, and a drop recorded in the message's outcome with the stage's
// words.
//
// Owns: the stage instance (and its per-thread copies), the workers, the stage's counters,
// its time histogram and the text of the last verdict.
// Calls: HeldSlots::record_drop() for a drop, the drop log, and the node's Finish for each
// job, in arrival order. Nothing here allocates, locks or logs per message (a worker's job
// is a slot in a ring made at start).
// One thread (the node's event loop), apart from the workers it runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/drop_log.h"
#include "hoprelay/daemon/held_slots.h"
#include "hoprelay/daemon/latency.h"
#include "hoprelay/daemon/metrics.h"
#include "hoprelay/daemon/stage_workers.h"
#include "hoprelay/stages/stage.h"

namespace hoprelay::daemon {

class StageRunner {
 public:
  // The rest of a message's walk once the workers are done with it, in arrival order.
  using Finish = std::function<void(StageJob&)>;

  // Starts the workers when `spec` asks for them (threads > 1) and the stage may run on
  // threads. Throws std::system_error when a thread cannot be made.
  StageRunner(const config::NodeSpec& spec, transport::EventLoop& loop, stages::Stage stage,
              NodeMetrics& metrics, HeldSlots& held, DropLog& drops, Finish finish);
  ~StageRunner();
  // Stops and joins the workers (the node's first step in its destructor: they write into
  // slots the links own); jobs not finished are not finished.
  void stop_workers() { workers_.reset(); }
  StageRunner(const StageRunner&) = delete;
  StageRunner& operator=(const StageRunner&) = delete;

  std::string_view name() const { return stage_.name(); }
  // The stage works on each chunk of a large message (cut-through), not on whole messages.
  bool chunkwise() const { return stage_.chunkwise(); }

  // Messages go through the workers (every one, to keep their order), and whether the
  // workers run the stage (else they only keep the order: a stage that may not run on
  // threads).
  bool on_workers() const { return workers_ != nullptr; }
  bool parallel() const { return parallel_; }
  // To the workers; `staged`: the stage runs there (else the job only keeps its place).
  void submit(transport::InboundLink& link, transport::Slot& slot, bool staged, bool repeat) {
    workers_->submit(link, slot, staged, repeat);
  }
  // Jobs submitted and not finished (a drain waits for them).
  size_t pending() const { return workers_ ? workers_->pending() : 0; }

  // Runs the stage on `msg` on the event loop, in place. The verdict is counted; a FORWARD
  // that grew the message past its capacity is an ERROR; a DROP or ERROR is recorded in
  // `slot`'s outcome. `from`: the link it came on (the drop warning names it).
  hoprelay_verdict run(hoprelay_msg& msg, const transport::InboundLink* from,
                       transport::Slot& slot);
  // The verdict a worker reached for `job` (staged), counted as run() counts its own.
  // `capacity`: what the message could grow to.
  hoprelay_verdict take_verdict(const StageJob& job, uint32_t capacity, uint32_t origin,
                                uint64_t seq, const transport::InboundLink* from,
                                transport::Slot& slot);
  // A message this node gives up as a stage error for a reason of its own (an application
  // that takes bytes as they are, handed compressed ones): counted and recorded as one.
  // `branch`: given up for this node's application only (a relay forwards it still).
  void refuse(std::string_view why, uint32_t origin, uint64_t seq,
              const transport::InboundLink* from, transport::Slot& slot, bool branch = false);

  // Finishes every job the workers have, in order (a reload with a new stage: every message
  // that arrived before it passes the old stage, whole, and under the old topology).
  void finish_all();
  // A reload: the node's entry in the new topology (before replace()).
  void set_spec(const config::NodeSpec& spec) { spec_ = &spec; }
  // A reload with new stage parameters, after finish_all(): the new instance takes over.
  void replace(stages::Stage next);
  // Once a second: the stage's flush (reports, files), the workers' counts.
  void tick();

 private:
  // Counts a verdict and records a drop (run's second half, and a worker's).
  hoprelay_verdict judge(hoprelay_verdict verdict, bool grew, std::string_view why, uint32_t origin,
                         uint64_t seq, const transport::InboundLink* from, transport::Slot& slot);
  // The words of a verdict, for the producer: "crc32c: message leaves no room ...".
  std::string_view detail(hoprelay_verdict verdict, bool grew, std::string_view why);
  // Starts, re-points or stops using the workers for the stage now in stage_; per-thread
  // instances are made here.
  void configure_workers();
  void resolve_series();  // the stage's counters and histogram, under its name

  const config::NodeSpec* spec_;
  transport::EventLoop& loop_;
  stages::Stage stage_;
  NodeMetrics& metrics_;
  HeldSlots& held_;
  DropLog& drops_;
  Finish finish_;
  // `threads` > 1 with a stage that may run on threads: the workers, and for a
  // HOPRELAY_STAGE_PER_THREAD stage their instances (stage_ stays the event loop's own).
  std::vector<stages::Stage> worker_stages_;
  std::unique_ptr<StageWorkers> workers_;
  bool parallel_ = false;  // new messages go to the workers' stage (else only keep order)
  std::vector<prometheus::Counter*> worker_counters_;
  std::vector<uint64_t> worker_counted_;
  std::string detail_;  // detail()'s text
  // The stage's time is measured on one message in kStageSample: two clock reads per message
  // cost more than most stages (a histogram wants a sample, not every message).
  static constexpr uint64_t kStageSample = 16;  // a power of two
  uint64_t calls_ = 0;
  HotCounters::Ref forward_;
  HotCounters::Ref drop_;
  HotCounters::Ref error_;
  HotCounters::Ref dropped_by_stage_;
  HotCounters::Ref dropped_stage_error_;
  LatencyHistogram* seconds_ = nullptr;
};

}  // namespace hoprelay::daemon
