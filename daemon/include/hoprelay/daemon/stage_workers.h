// `threads = N`: the stage of a node runs on N worker threads while everything else (links,
// routing, acknowledgements, deduplication, chunks, metrics) stays on the node's event loop.
//
// Why this split and not links spread over threads: a relay with one upstream link and one
// producer must still use N cores for a CPU-bound stage (compression: 64 KiB takes ~100 us,
// the rest of a message's walk ~2 us), and the order of one origin's messages must be kept.
// So the event loop hands messages to the workers in arrival order and takes them back in
// that same order: a job that finished early waits for the ones before it. The workers touch
// nothing but the slot's bytes and the job: no lock, no allocation, no log on the data path.
//
// Jobs sit in a ring the event loop owns; workers claim the next unclaimed one with a
// compare-and-swap (so a slow message on one worker does not stall the others, as a fixed
// round robin would) and mark it done; the loop is woken through an eventfd only when it may
// be asleep. A frame that does not reach the workers (an end mark, a repeat, a chunk of a
// message reassembled for its stage, anything while the stage runs on the loop) still takes
// its turn in the ring, so what comes after it cannot overtake what came before.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "hoprelay/stages/stage.h"
#include "hoprelay/transport/event_loop.h"
#include "hoprelay/transport/eventfd_wakeup.h"
#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::daemon {

// One message in passage through the workers.
struct StageJob {
  transport::InboundLink* link = nullptr;
  transport::Slot* slot = nullptr;
  bool staged = false;  // runs the stage on a worker; else only keeps its place in the order
  bool repeat = false;  // a replayed copy of a whole message (the node decided at arrival)
  // Written by the worker, read by the loop once `done`:
  hoprelay_verdict verdict = HOPRELAY_FORWARD;
  uint32_t length = 0;                   // the payload after the stage
  uint32_t flags = 0;                    // HOPRELAY_MSG_* after the stage
  uint64_t stage_ns = 0;                 // the stage's time, when this job was one of the sampled
  static constexpr size_t kWhyMax = 96;  // the outcome's detail is cut there anyway
  char why[kWhyMax + 1] = {};            // the stage's last_error() for a DROP or ERROR, or ""
  bool timed = false;  // one in kStageSample: the worker measures the stage's time
  // 1 once the stage ran. 32 bits, not a bool: std::atomic<uint32_t>::wait is a futex on the
  // word itself, where a bool's goes through a table shared by the process.
  std::atomic<uint32_t> done{0};
};

class StageWorkers {
 public:
  // Called on the event loop for each job, in the order they were submitted.
  using Finish = std::function<void(StageJob&)>;

  // `stages`: one instance per worker (the same pointer N times for a thread-safe stage);
  // each must outlive the workers or be replaced by set_stages(). `loop_stage`: the instance
  // the event loop runs a job with when every worker is busy (null: it never does).
  // `capacity`: the payload room
  // of a slot, what the stage sees as `capacity`. `in_flight`: about how many messages the
  // node's inbound slots hold at most (sizes the ring; when it is full, submit() waits for the
  // oldest job). `cpus`: worker i is pinned to cpus[(i + 1) % size] (empty: not pinned).
  // Throws std::system_error when a thread cannot be made, TransportError without an eventfd.
  StageWorkers(transport::EventLoop& loop, std::vector<stages::Stage*> stages,
               stages::Stage* loop_stage, uint32_t capacity, size_t in_flight,
               const std::vector<uint32_t>& cpus, Finish finish);
  ~StageWorkers();  // stops and joins the workers; jobs not finished are not finished
  StageWorkers(const StageWorkers&) = delete;
  StageWorkers& operator=(const StageWorkers&) = delete;

  size_t threads() const { return workers_.size(); }
  // Jobs submitted and not yet finished.
  size_t pending() const { return tail_ - head_; }
  // Takes the next message in arrival order; `staged`: run the stage on it on a worker.
  // Finishes what is done already (so it may call Finish before returning).
  // `repeat`: handed back with the job (StageJob::repeat).
  void submit(transport::InboundLink& link, transport::Slot& slot, bool staged,
              bool repeat = false);
  // Finishes, in order, every job that is done; while the oldest is not and every worker is
  // busy, runs waiting jobs on the loop (lend_a_hand).
  void collect();
  // Finishes every job submitted (a reload): collect(), and between two, sleeps until the
  // oldest job's worker is done with it. The loop waits asleep (a futex), never spinning.
  void finish_all();
  // Waits, asleep, until no worker runs a stage (jobs done but not finished stay), so the
  // stage instances can be swapped: a reload.
  void quiesce();
  void set_stages(std::vector<stages::Stage*> stages, stages::Stage* loop_stage);
  // Asks each worker to flush its stage instance (about once a second).
  void request_flush();
  // Messages the stage ran on, per worker (a relaxed read: the metrics' gauges).
  uint64_t processed(size_t worker) const {
    return workers_[worker]->processed.load(std::memory_order_relaxed);
  }
  // Messages the stage ran on on the event loop (lend_a_hand). Loop only.
  uint64_t processed_on_loop() const { return loop_processed_; }

 private:
  // Sleeps until the oldest job, a worker's, is done (std::atomic::wait: a futex). The loop
  // calls it only when it cannot go on without that job: a full ring, or finish_all().
  void wait_oldest();

  struct alignas(64) Worker {
    stages::Stage* stage = nullptr;
    std::atomic<uint64_t> processed{0};
    std::atomic<bool> flush{false};
    // Its own wake-up (request_flush must reach every worker) and whether it sleeps or is
    // about to (wake_one picks such a one).
    std::counting_semaphore<> wake{0};
    std::atomic<bool> asleep{false};
    std::thread thread;
  };

  void run(Worker& w, int cpu);
  // Claims the next published job, or returns nullptr when there is none.
  StageJob* claim();
  void work(Worker& w, StageJob& job);
  void run_stage(stages::Stage& stage, StageJob& job);
  bool lend_a_hand();
  void add_sample(uint64_t ns);  // one timed call of the stage, into stage_ns_
  void on_wakeup();
  void wake_one();  // a sleeping worker, for a job just published

  transport::EventLoop& loop_;
  stages::Stage* loop_stage_;
  uint64_t loop_processed_ = 0;
  uint64_t last_lend_ns_ = 0;
  uint64_t stage_ns_ = 0;  // the stage's time per call, sampled (0: no sample yet; a reload)
  uint32_t capacity_;
  Finish finish_;
  // The ring: a power-of-two of jobs; [head_, tail_) submitted and not finished (loop only).
  std::vector<StageJob> jobs_;
  size_t head_ = 0;
  size_t tail_ = 0;
  size_t mask_ = 0;
  bool collecting_ = false;
  uint64_t sample_ = 0;
  // Staged jobs go to the workers through a second ring of job indices: published_ counts
  // those handed over (written by the loop), claimed_ those taken (workers' CAS).
  std::vector<size_t> work_;
  alignas(64) std::atomic<uint64_t> published_{0};
  alignas(64) std::atomic<uint64_t> claimed_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> loop_notified_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> busy_{0};           // workers awake, touching their stage or a job (quiesce)
  std::atomic<uint32_t> brackets_{0};  // busy_ brackets ended: what quiesce() sleeps on
  std::atomic<int> working_{0};        // workers running a job they claimed (lend_a_hand)
  std::unique_ptr<transport::EventFdWakeup> wakeup_;  // a worker finished a job
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace hoprelay::daemon
