// StageWorkers (`threads = N`): jobs finish in the order they came, whoever ran them, and the
// event loop runs waiting jobs itself while every worker is busy (lend_a_hand).
#include "hoprelay/daemon/stage_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "hoprelay/stage_abi.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {
namespace {

using namespace std::chrono_literals;

// A thread-safe stage that holds messages of origin 1 on a worker until the gate opens, takes
// 2 ms for messages of origin 3, and writes who ran it into the first payload byte: 'L' on the
// test's thread (the event loop), 'W' elsewhere. (Never held on the loop: a job lent wrongly
// fails the checks instead of hanging the test.)
std::atomic<bool> g_gate{false};
std::atomic<int> g_held{0};
thread_local bool t_is_loop = false;

void* gated_create(const hoprelay_stage_config*, char*, size_t) {
  return new int(0);
}
hoprelay_verdict gated_process(void*, hoprelay_msg* msg) {
  if (msg->origin == 1 && !t_is_loop) {
    g_held.fetch_add(1);
    while (!g_gate.load()) std::this_thread::sleep_for(1ms);
  }
  if (msg->origin == 3) std::this_thread::sleep_for(2ms);
  msg->data[0] = t_is_loop ? 'L' : 'W';
  return HOPRELAY_FORWARD;
}
void gated_destroy(void* self) {
  delete static_cast<int*>(self);
}
const hoprelay_stage_descriptor kGated{HOPRELAY_STAGE_ABI_MAJOR,
                                       HOPRELAY_STAGE_ABI_MINOR,
                                       sizeof(hoprelay_stage_descriptor),
                                       "gated",
                                       nullptr,
                                       gated_create,
                                       gated_process,
                                       nullptr,
                                       gated_destroy,
                                       HOPRELAY_STAGE_THREADSAFE,
                                       nullptr};

// submit() only keeps the link for the finish callback.
class NoLink final : public transport::InboundLink {
 public:
  void release(transport::Slot&, const transport::Outcome*) override {}
  void drain() override {}
  uint32_t slots_in_use() const override { return 0; }
  uint32_t slots_held() const override { return 0; }
  uint32_t slots() const override { return 0; }
  void unreturned_origins(std::vector<uint32_t>&) const override {}
};

// Opens the gate however the test ends, so that the worker can be joined.
struct OpenGateAtEnd {
  OpenGateAtEnd() {
    g_gate.store(false);
    g_held.store(0);
  }
  ~OpenGateAtEnd() { g_gate.store(true); }
};

// `n` slots of 64 payload bytes, each holding a 1-byte message with seq = first_seq + its index
// and origin origin_of(index).
struct TestSlots {
  static constexpr size_t kSlotBytes = transport::kFrameHeaderSize + 64;
  template <typename OriginOf>
  TestSlots(size_t n, OriginOf origin_of, uint64_t first_seq = 0)
      : memory(n * kSlotBytes), slots(n) {
    for (size_t i = 0; i < n; ++i) {
      slots[i].frame = memory.data() + i * kSlotBytes;
      slots[i].length = 1;
      slots[i].origin = static_cast<uint32_t>(origin_of(i));
      slots[i].seq = first_seq + i;
    }
  }
  std::vector<std::byte> memory;
  std::vector<transport::Slot> slots;
};

// Submits `slot` (origin 1) and waits up to 10 s until a worker holds it at the gate.
bool held_by_a_worker(StageWorkers& workers, NoLink& link, transport::Slot& slot) {
  workers.submit(link, slot, true);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (g_held.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  return g_held.load() == 1;
}

// Quick jobs (origin 2, seq 1000 and up) through the workers until one of them was timed: the
// loop lends only to a stage whose time it knows.
void warm_up(transport::EventLoop& loop, StageWorkers& workers, NoLink& link,
             std::vector<uint64_t>& finished) {
  constexpr size_t kJobs = 16;  // one in 16 is timed
  static TestSlots test(
      kJobs, [](size_t) { return 2; }, 1000);
  const size_t before = finished.size();
  for (transport::Slot& slot : test.slots) workers.submit(link, slot, true);
  for (int i = 0; i < 1000 && finished.size() < before + kJobs; ++i) loop.run_once(10ms);
  ASSERT_EQ(finished.size(), before + kJobs) << "the warm-up jobs did not finish";
}

TEST(StageWorkers, TheLoopRunsWaitingJobsWhileEveryWorkerIsBusyAndNothingOvertakes) {
  t_is_loop = true;
  transport::EventLoop loop;
  auto type = std::make_shared<stages::StageType>(&kGated, nullptr, "test");
  stages::Stage stage(type, "n", {});
  std::vector<uint64_t> finished;
  std::string runners;
  StageWorkers workers(loop, {&stage}, &stage, 64, 16, {}, [&](StageJob& job) {
    finished.push_back(job.slot->seq);
    runners += static_cast<char>(job.slot->payload()[0]);
  });
  OpenGateAtEnd gate;
  NoLink link;
  warm_up(loop, workers, link, finished);
  finished.clear();
  runners.clear();
  // The first one holds the one worker.
  TestSlots test(4, [](size_t i) { return i == 0 ? 1 : 2; });
  std::vector<transport::Slot>& slots = test.slots;
  ASSERT_TRUE(held_by_a_worker(workers, link, slots[0])) << "the worker never took the first job";
  for (size_t i = 1; i < slots.size(); ++i) workers.submit(link, slots[i], true);
  // The worker is busy: the loop runs the three others, one per reading of its clock.
  for (int i = 0; i < 1000 && workers.processed_on_loop() < 3; ++i) {
    loop.run_once(1ms);
    workers.collect();
  }
  EXPECT_EQ(workers.processed_on_loop(), 3u);
  EXPECT_TRUE(finished.empty()) << "a job finished before the oldest, which still runs";
  g_gate.store(true);
  for (int i = 0; i < 1000 && finished.size() < slots.size(); ++i) loop.run_once(10ms);
  EXPECT_EQ(finished, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(runners, "WLLL");
  EXPECT_EQ(workers.processed(0), 16u + 1);  // the warm-up and the held one
}

TEST(StageWorkers, TheLoopLeavesAStageOfOverAMillisecondACallToTheWorkers) {
  t_is_loop = true;
  transport::EventLoop loop;
  auto type = std::make_shared<stages::StageType>(&kGated, nullptr, "test");
  stages::Stage stage(type, "n", {});
  size_t finished = 0;
  StageWorkers workers(loop, {&stage}, &stage, 64, 64, {}, [&](StageJob&) { ++finished; });
  OpenGateAtEnd gate;
  constexpr size_t kSlow = 32;
  // 2 ms each; the held one; quick
  TestSlots test(kSlow + 4, [](size_t i) { return i < kSlow ? 3 : i == kSlow ? 1 : 2; });
  std::vector<transport::Slot>& slots = test.slots;
  NoLink link;
  // 32 calls of 2 ms (two of them timed, one in 16): the stage is known to be slow.
  for (size_t i = 0; i < kSlow; ++i) workers.submit(link, slots[i], true);
  for (int i = 0; i < 2000 && finished < kSlow; ++i) {
    loop.run_once(1ms);
    workers.collect();
  }
  ASSERT_EQ(finished, kSlow);
  const uint64_t lent = workers.processed_on_loop();
  // The worker held, three quick jobs waiting: the loop does not lend to this stage.
  ASSERT_TRUE(held_by_a_worker(workers, link, slots[kSlow]))
      << "the worker never took the held job";
  for (size_t i = kSlow + 1; i < slots.size(); ++i) workers.submit(link, slots[i], true);
  for (int i = 0; i < 20; ++i) {
    loop.run_once(1ms);
    workers.collect();
  }
  EXPECT_EQ(workers.processed_on_loop(), lent);
  g_gate.store(true);
  for (int i = 0; i < 1000 && finished < slots.size(); ++i) loop.run_once(10ms);
  EXPECT_EQ(finished, slots.size());
}

// A ring of two jobs and a stage of 2 ms a call on the one worker, nothing lent to the loop:
// submit() finds the ring full again and again, and finish_all() (a reload) waits for the rest.
// Both sleep until the worker is done (a futex); yielding in a loop, they burnt a core of the
// two for as long as the worker took. Every job finishes once, in order.
TEST(StageWorkers, AFullRingAndFinishAllSleepUntilTheWorkerIsDone) {
  t_is_loop = true;
  transport::EventLoop loop;
  auto type = std::make_shared<stages::StageType>(&kGated, nullptr, "test");
  stages::Stage stage(type, "n", {});
  std::vector<uint64_t> finished;
  StageWorkers workers(loop, {&stage}, nullptr, 64, 2, {},
                       [&](StageJob& job) { finished.push_back(job.slot->seq); });
  constexpr size_t kJobs = 40;
  TestSlots test(kJobs, [](size_t) { return 3; });  // 2 ms each
  NoLink link;
  auto cpu_ns = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
  };
  const uint64_t cpu_before = cpu_ns();
  const auto wall_before = std::chrono::steady_clock::now();
  for (transport::Slot& slot : test.slots) workers.submit(link, slot, true);
  EXPECT_GT(workers.pending(), 0u);
  workers.finish_all();
  const uint64_t cpu = cpu_ns() - cpu_before;
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - wall_before)
                        .count();
  EXPECT_EQ(workers.pending(), 0u);
  ASSERT_EQ(finished.size(), kJobs);
  for (size_t i = 0; i < kJobs; ++i) EXPECT_EQ(finished[i], i);
  EXPECT_EQ(workers.processed_on_loop(), 0u);
  // At least 80 ms of the worker's stage, waited for: asleep, the loop used a small part of
  // it (spinning, nearly all of it).
  EXPECT_LT(double(cpu), 0.5 * double(wall)) << "cpu " << cpu << " ns over " << wall << " ns";
}

// A flush asked of idle workers reaches each of them, and quiesce() (a reload) returns: with
// one semaphore for all workers, one could take every wake-up and leave another asleep with
// its flush asked, and quiesce waited for it forever (a SIGHUP reload hung the node).
std::atomic<int> g_flushes{0};
void counting_flush(void*) {
  g_flushes.fetch_add(1);
}
const hoprelay_stage_descriptor kFlushCounting{HOPRELAY_STAGE_ABI_MAJOR,
                                               HOPRELAY_STAGE_ABI_MINOR,
                                               sizeof(hoprelay_stage_descriptor),
                                               "flush-counting",
                                               nullptr,
                                               gated_create,
                                               gated_process,
                                               counting_flush,
                                               gated_destroy,
                                               HOPRELAY_STAGE_THREADSAFE,
                                               nullptr};

TEST(StageWorkers, EveryIdleWorkerTakesItsFlushAndQuiesceReturns) {
  transport::EventLoop loop;
  auto type = std::make_shared<stages::StageType>(&kFlushCounting, nullptr, "test");
  stages::Stage stage(type, "n", {});
  StageWorkers workers(loop, {&stage, &stage}, &stage, 64, 64, {}, [](StageJob&) {});
  g_flushes.store(0);
  constexpr int kRounds = 300;
  for (int i = 0; i < kRounds; ++i) {
    workers.request_flush();
    workers.quiesce();  // hung here on the old code, within a few rounds
  }
  EXPECT_EQ(g_flushes.load(), 2 * kRounds);  // each worker once a round
}

// Before any call was timed (a start, or a reload: another stage), the loop does not know what
// a call costs, so it does not lend: a stage of 30 ms would hold every link that long. Once a
// worker has timed one, it does.
TEST(StageWorkers, TheLoopLendsOnlyOnceAWorkerHasTimedTheStageAgainAfterAReload) {
  t_is_loop = true;
  transport::EventLoop loop;
  auto type = std::make_shared<stages::StageType>(&kGated, nullptr, "test");
  stages::Stage stage(type, "n", {});
  std::vector<uint64_t> finished;
  StageWorkers workers(loop, {&stage}, &stage, 64, 64, {},
                       [&](StageJob& job) { finished.push_back(job.slot->seq); });
  OpenGateAtEnd gate;
  NoLink link;
  // 0 and 4 hold the one worker; the others quick
  TestSlots test(8, [](size_t i) { return i % 4 == 0 ? 1 : 2; });
  std::vector<transport::Slot>& slots = test.slots;
  // Held on the worker, three waiting, nothing timed yet, then after a reload: none lent.
  auto held_then_three_not_lent = [&](size_t first, const char* when) {
    g_gate.store(false);
    g_held.store(0);
    ASSERT_TRUE(held_by_a_worker(workers, link, slots[first]))
        << when << ": the worker never took the held job";
    for (size_t i = first + 1; i < first + 4; ++i) workers.submit(link, slots[i], true);
    for (int i = 0; i < 20; ++i) {
      loop.run_once(1ms);
      workers.collect();
    }
    EXPECT_EQ(workers.processed_on_loop(), 0u) << when;
    g_gate.store(true);
    for (int i = 0; i < 1000 && finished.size() < first + 4; ++i) loop.run_once(10ms);
    ASSERT_EQ(finished.size(), first + 4) << when;
  };
  held_then_three_not_lent(0, "at the start");
  workers.set_stages({&stage}, &stage);
  held_then_three_not_lent(4, "after a reload");
  // Timed once on the worker: now the loop lends.
  warm_up(loop, workers, link, finished);
  g_gate.store(false);
  g_held.store(0);
  std::vector<transport::Slot> more(slots.begin(), slots.begin() + 4);
  for (size_t i = 0; i < more.size(); ++i) more[i].seq = 100 + i;
  ASSERT_TRUE(held_by_a_worker(workers, link, more[0])) << "the worker never took the held job";
  for (size_t i = 1; i < more.size(); ++i) workers.submit(link, more[i], true);
  for (int i = 0; i < 1000 && workers.processed_on_loop() < 3; ++i) {
    loop.run_once(1ms);
    workers.collect();
  }
  EXPECT_EQ(workers.processed_on_loop(), 3u);
  g_gate.store(true);
  for (int i = 0; i < 1000 && finished.size() < 8 + 16 + 4; ++i) loop.run_once(10ms);
  EXPECT_EQ(finished.size(), 8u + 16 + 4);
}

}  // namespace
}  // namespace hoprelay::daemon
