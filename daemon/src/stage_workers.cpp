#include "hoprelay/daemon/stage_workers.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

#include "hoprelay/daemon/cpu_pin.h"
#include "hoprelay/daemon/monotonic.h"
#include "hoprelay/transport/log.h"

namespace hoprelay::daemon {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("node");
  return *logger;
}

// One job in kSample has its stage time measured (a power of two; as StageRunner::run on the loop).
constexpr uint64_t kSample = 16;
// The loop lends a hand only to a stage whose sampled time is under this: a longer call would
// hold every link of the node that long, once an iteration.
constexpr uint64_t kLendBudgetNs = 1'000'000;

}  // namespace

StageWorkers::StageWorkers(transport::EventLoop& loop, std::vector<stages::Stage*> stages,
                           stages::Stage* loop_stage, uint32_t capacity, size_t in_flight,
                           const std::vector<uint32_t>& cpus, Finish finish)
    : loop_(loop), loop_stage_(loop_stage), capacity_(capacity), finish_(std::move(finish)) {
  size_t size = 256;
  while (size < in_flight) size <<= 1;
  jobs_ = std::vector<StageJob>(size);
  work_.assign(size, 0);
  mask_ = size - 1;
  wakeup_ = std::make_unique<transport::EventFdWakeup>(loop_, [this] { on_wakeup(); });
  workers_.reserve(stages.size());
  for (stages::Stage* stage : stages) {
    workers_.push_back(std::make_unique<Worker>());
    workers_.back()->stage = stage;
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    int cpu = cpus.empty() ? -1 : static_cast<int>(cpus[(i + 1) % cpus.size()]);
    workers_[i]->thread = std::thread([this, i, cpu] { run(*workers_[i], cpu); });
  }
}

StageWorkers::~StageWorkers() {
  stop_.store(true);
  for (auto& w : workers_) w->wake.release();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void StageWorkers::wake_one() {
  // The sleeper is claimed (asleep cleared) by the one who wakes it, so that the next job wakes
  // another. A worker counted in sleepers_ but claimed already runs every published job before
  // it sleeps again: a job never waits for a worker that nobody wakes.
  for (auto& w : workers_) {
    if (w->asleep.exchange(false)) {
      w->wake.release();
      return;
    }
  }
}

void StageWorkers::submit(transport::InboundLink& link, transport::Slot& slot, bool staged,
                          bool repeat) {
  // Full: every job of the ring is a message the node holds; wait for the oldest (a worker
  // is on it) rather than let a later message overtake it.
  while (pending() == jobs_.size()) {
    collect();
    if (pending() == jobs_.size()) wait_oldest();
  }
  StageJob& job = jobs_[tail_ & mask_];
  job.link = &link;
  job.slot = &slot;
  job.staged = staged;
  job.repeat = repeat;
  job.why[0] = '\0';
  job.done.store(0, std::memory_order_relaxed);
  size_t index = tail_ & mask_;
  ++tail_;
  if (staged) {
    job.timed = (++sample_ & (kSample - 1)) == 0;
    uint64_t p = published_.load(std::memory_order_relaxed);
    work_[p & mask_] = index;
    // seq_cst against the workers' sleepers_ (a Dekker pair): either this sees a sleeper and
    // wakes it, or the sleeper sees this job before it sleeps.
    published_.store(p + 1);
    if (sleepers_.load() > 0) wake_one();
  }
  collect();
}

void StageWorkers::finish_all() {
  while (pending() != 0) {
    collect();
    if (pending() != 0) wait_oldest();
  }
}

void StageWorkers::wait_oldest() {
  // collect() stopped at it: staged, and not done. A worker has it or is about to claim it
  // (published jobs wake a sleeper), and tells its `done` (work()).
  jobs_[head_ & mask_].done.wait(0);
}

void StageWorkers::collect() {
  if (collecting_) return;  // a Finish that leads back here: the outer loop goes on
  collecting_ = true;
  do {
    while (head_ != tail_) {
      StageJob& job = jobs_[head_ & mask_];
      if (job.staged && !job.done.load()) break;
      if (job.staged && job.timed) add_sample(job.stage_ns);
      finish_(job);
      ++head_;
    }
  } while (head_ != tail_ && lend_a_hand());
  collecting_ = false;
}

bool StageWorkers::lend_a_hand() {
  // Every worker runs a job and another waits for one: the loop, which would
  // otherwise wait for the oldest, runs it with its own instance (the caller runs). With N
  // workers on N cores, a worker preempted by the loop, a producer or a leaf leaves its job
  // waiting while the loop sleeps on the oldest; lending, the loop works instead.
  // At most one job per reading of the loop's clock (one or two per iteration), so that the
  // links are served in between: frames forwarded by the jobs finished are written by the
  // iteration's flush, and credits go back. And only for a stage known to take under
  // kLendBudgetNs a call: the links wait for the whole call. Known: sampled on a worker first
  // (a stage that takes 30 ms must not get a call on the loop to find out), and every call
  // the loop makes is timed too, so a stage that slows down is left to the workers at once.
  // Busy: every worker runs a job it claimed (working_). A worker woken for this job, or
  // between two jobs, is about to claim it: lending then would only take it from that worker.
  if (loop_stage_ == nullptr || loop_.now_ns() == last_lend_ns_ || stage_ns_ == 0 ||
      stage_ns_ > kLendBudgetNs || working_.load() < static_cast<int>(workers_.size())) {
    return false;
  }
  StageJob* job = claim();
  if (job == nullptr) return false;
  last_lend_ns_ = loop_.now_ns();
  job->timed = true;
  run_stage(*loop_stage_, *job);
  add_sample(job->stage_ns);
  job->timed = false;  // counted: collect() must not count it again
  ++loop_processed_;
  job->done.store(1);
  return true;
}

void StageWorkers::add_sample(uint64_t ns) {
  // A moving average (1/8 weight), from the first sample on; never 0 once there is one.
  stage_ns_ = std::max<uint64_t>(1, stage_ns_ ? stage_ns_ - stage_ns_ / 8 + ns / 8 : ns);
}

void StageWorkers::on_wakeup() {
  // Cleared before looking, seq_cst against the workers' exchange: a job done after this
  // store writes the eventfd again.
  loop_notified_.store(false);
  collect();
}

StageJob* StageWorkers::claim() {
  uint64_t c = claimed_.load();
  while (c < published_.load()) {
    if (claimed_.compare_exchange_weak(c, c + 1)) return &jobs_[work_[c & mask_]];
  }
  return nullptr;
}

void StageWorkers::work(Worker& w, StageJob& job) {
  run_stage(*w.stage, job);
  w.processed.store(w.processed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  working_.fetch_sub(1);  // before done: the loop that sees it done must not count this worker
  job.done.store(1);
  // Wakes the loop if it sleeps in wait_oldest() (no system call when nobody waits).
  job.done.notify_one();
  if (!loop_notified_.exchange(true)) wakeup_->notify();
}

void StageWorkers::run_stage(stages::Stage& stage, StageJob& job) {
  transport::Slot& slot = *job.slot;
  hoprelay_msg msg{reinterpret_cast<uint8_t*>(slot.payload()),
                   slot.length,
                   capacity_,
                   slot.origin,
                   slot.flags,  // a chunk's MORE flag included, as the loop's stage sees it
                   slot.seq,
                   slot.chunk};
  const uint64_t started = job.timed ? monotonic_ns() : 0;
  job.verdict = stage.process(msg);
  job.stage_ns = job.timed ? monotonic_ns() - started : 0;
  job.length = msg.length;
  job.flags = msg.flags;
  if (job.verdict != HOPRELAY_FORWARD) {
    std::string_view why = stage.last_error();
    size_t n = std::min(why.size(), StageJob::kWhyMax);
    std::memcpy(job.why, why.data(), n);
    job.why[n] = '\0';
  }
}

void StageWorkers::run(Worker& w, int cpu) {
  if (cpu >= 0) {
    if (std::string why = pin_this_thread(static_cast<uint32_t>(cpu)); !why.empty()) {
      log().warn("stage worker not pinned: {}", why);
    }
  }
  while (!stop_.load()) {
    // busy_ brackets everything that touches the stage instance: quiesce() waits on it.
    busy_.fetch_add(1);
    if (w.flush.exchange(false)) w.stage->flush();
    StageJob* job = claim();
    if (job) {
      working_.fetch_add(1);
      work(w, *job);
    }
    busy_.fetch_sub(1);
    // quiesce() may sleep on it (no system call when nobody does). A count that only grows:
    // busy_ itself may leave and come back to the value a sleeper saw.
    brackets_.fetch_add(1);
    brackets_.notify_all();
    if (job) continue;
    w.asleep.store(true);
    sleepers_.fetch_add(1);
    if (published_.load() == claimed_.load() && !stop_.load() && !w.flush.load()) {
      w.wake.acquire();
    }
    sleepers_.fetch_sub(1);
    w.asleep.store(false);
  }
}

void StageWorkers::quiesce() {
  // A flush asked for and not yet taken would touch the instance after this returns.
  auto flush_asked = [this] {
    return std::any_of(workers_.begin(), workers_.end(), [](auto& w) { return w->flush.load(); });
  };
  // Every change it waits for (a job claimed, a flush taken, a worker out of its stage) is
  // made by a worker inside its busy_ bracket, whose end counts and notifies brackets_.
  for (;;) {
    const uint32_t seen = brackets_.load();
    if (claimed_.load() == published_.load() && !flush_asked() && busy_.load() == 0) return;
    brackets_.wait(seen);
  }
}

void StageWorkers::set_stages(std::vector<stages::Stage*> stages, stages::Stage* loop_stage) {
  quiesce();
  for (size_t i = 0; i < workers_.size() && i < stages.size(); ++i) workers_[i]->stage = stages[i];
  loop_stage_ = loop_stage;
  stage_ns_ = 0;  // another stage: not lent to until a worker has timed it
}

void StageWorkers::request_flush() {
  // Each worker its own wake-up: with one semaphore for all, one worker could take every
  // permit and leave another asleep with its flush asked, and quiesce() (a reload) waited for
  // that flush with the loop that would wake it held: the node hung.
  for (auto& w : workers_) {
    w->flush.store(true);
    w->wake.release();
  }
}

}  // namespace hoprelay::daemon
