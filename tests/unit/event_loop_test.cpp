// The event loop's busy mode: it must never sleep, and must still run timers and deferred work
// (reconnects, handshake timeouts, metrics flushes and the watchdog all hang off them).
#include "hoprelay/transport/event_loop.h"

#include <gtest/gtest.h>

#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>

#include "alloc_count.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(EventLoop, SpinningNeverSleepsInEpoll) {
  EventLoop loop;
  EXPECT_FALSE(loop.busy());
  // Event mode with nothing to do sleeps for the timeout: the baseline the spin differs from.
  auto t0 = Clock::now();
  loop.run_once(100ms);
  EXPECT_GE(Clock::now() - t0, 90ms);

  loop.set_spin(true);
  EXPECT_TRUE(loop.busy());
  t0 = Clock::now();
  for (int i = 0; i < 100; ++i) loop.run_once(10s);
  // 100 iterations that each honoured the timeout would take 1000 s; a generous bound for a
  // loaded machine that still cannot be met by sleeping even once.
  EXPECT_LT(Clock::now() - t0, 5s);

  loop.set_spin(false);
  EXPECT_FALSE(loop.busy());
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// libhoprelay's handles are polled by the application: work its calls defer between two
// iterations (the credits of a release) must make the descriptor readable, or it would wait
// for the next timer (a second).
TEST(EventLoop, PollableDescriptorWakesForWorkDeferredBetweenIterations) {
  EventLoop loop;
  loop.set_pollable(true);
  loop.after(60s, [] {});  // armed far ahead, as the handles' ticks are
  loop.run_once(0ms);
  EXPECT_FALSE(readable(loop.fd())) << "nothing to do";
  int ran = 0;
  loop.defer([&] { ++ran; });
  loop.defer([&] { ++ran; });
  EXPECT_TRUE(readable(loop.fd())) << "deferred work waits";
  loop.after(30s, [] {});  // a timer armed meanwhile does not hide it
  EXPECT_TRUE(readable(loop.fd()));
  loop.run_once(0ms);
  EXPECT_EQ(ran, 2);
  EXPECT_FALSE(readable(loop.fd())) << "done: the descriptor waits for the timers again";
  // Work deferred inside an iteration runs in it and leaves nothing behind.
  loop.defer([&] { loop.defer([&] { ++ran; }); });
  loop.run_once(0ms);
  EXPECT_EQ(ran, 3);
  EXPECT_FALSE(readable(loop.fd()));
}

TEST(EventLoop, TimersAndDeferredWorkRunWhileSpinning) {
  EventLoop loop;
  loop.set_spin(true);
  bool cancelled_ran = false;
  EventLoop::TimerId cancelled = loop.after(10ms, [&] { cancelled_ran = true; });
  loop.cancel(cancelled);
  bool deferred_ran = false;
  auto t0 = Clock::now();
  Clock::time_point fired{};
  loop.after(50ms, [&] {
    fired = Clock::now();
    // Work deferred from a timer runs in the same iteration, and may stop the loop.
    loop.defer([&] {
      deferred_ran = true;
      loop.stop();
    });
  });
  uint64_t iterations = 0;
  while (!loop.stopped() && Clock::now() - t0 < 10s) {
    loop.run_once(1000ms);
    ++iterations;
  }
  ASSERT_TRUE(deferred_ran) << "the timer or its deferred work never ran while spinning";
  EXPECT_GE(fired - t0, 50ms) << "the timer ran early";
  EXPECT_LT(fired - t0, 5s);
  EXPECT_FALSE(cancelled_ran);
  // Event mode would have slept through the 50 ms in one or two iterations.
  EXPECT_GT(iterations, 100u) << "the loop did not spin";
}

class NoEvents final : public LinkEvents {
 public:
  bool admit(const PeerInfo&, std::string&) override { return false; }
  void on_inbound_up(InboundLink&) override {}
  void on_message(InboundLink&, Slot&) override {}
  void on_inbound_down(InboundLink&, std::string_view) override {}
  void on_outbound_up(OutboundLink&) override {}
  void on_outbound_down(OutboundLink&, std::string_view) override {}
  void on_acked(OutboundLink&, void*) override {}
  void on_returned(OutboundLink&, void*) override {}
  void on_credit(OutboundLink&) override {}
};

// poll = "busy" reaches the TCP transport and makes the loop spin while it lives; "event" does
// not (the factory once passed `poll` to verbs only).
TEST(EventLoop, TcpTransportSpinsTheLoopOnlyWithPollBusy) {
  NoEvents events;
  for (auto poll : {config::Poll::kEvent, config::Poll::kBusy}) {
    EventLoop loop;
    TransportOptions options{config::TransportKind::kTcp, {"127.0.0.1", 0}, true, poll};
    {
      TransportChoice choice = make_transport(options, loop, events, Identity{});
      EXPECT_EQ(choice.transport->name(), "tcp");
      EXPECT_EQ(loop.busy(), poll == config::Poll::kBusy);
    }
    EXPECT_FALSE(loop.busy()) << "the loop still spins after its transport is gone";
  }
}

// Links re-arm liveness timers all the time under traffic (verbs: every probe interval, per
// link): arming, firing and cancelling a timer reuses the nodes of earlier ones, so once warm
// it allocates nothing (the Soft-RoCE run of unit.DatapathVerbs counted 2 allocations per
// re-arm before).
// A timer that re-arms itself from its callback, as a link's probe does, takes back the nodes
// it fired from: from its first arming on, nothing is allocated, however soon the traffic
// after a start is measured (the Soft-RoCE run once counted a first re-arm per loop).
TEST(EventLoop, ATimerReArmingItselfAllocatesNothingFromItsFirstReArm) {
  EventLoop loop;
  int fired = 0;
  std::function<void()> probe = [&] {
    if (++fired < 100) loop.after(0ms, [&] { probe(); });
  };
  loop.after(0ms, [&] { probe(); });
  const uint64_t before = hoprelay::test::allocations();
  for (int i = 0; i < 1000 && fired < 100; ++i) loop.run_once(0ms);
  EXPECT_EQ(fired, 100);
  EXPECT_EQ(hoprelay::test::allocations() - before, 0u);
}

TEST(EventLoop, ArmingFiringAndCancellingTimersAllocatesNothingOnceWarm) {
  EventLoop loop;
  int fired = 0;
  auto round = [&] {
    // Two that fire, re-arming themselves once, and one cancelled: as a link's probe and
    // watch timers, and a handshake timeout that is not needed.
    loop.after(0ms, [&] {
      ++fired;
      loop.after(0ms, [&] { ++fired; });
    });
    loop.after(0ms, [&] { ++fired; });
    loop.cancel(loop.after(60s, [&] { ++fired; }));
    for (int i = 0; i < 3 && fired % 3 != 0; ++i) loop.run_once(0ms);
    loop.run_once(0ms);
  };
  for (int i = 0; i < 4; ++i) round();  // warm
  fired = 0;
  const uint64_t before = hoprelay::test::allocations();
  for (int i = 0; i < 1000; ++i) round();
  EXPECT_EQ(hoprelay::test::allocations() - before, 0u);
  EXPECT_EQ(fired, 3000);
}

// What a timer's callback holds may cancel that timer, or arm another, from its destructor (a
// link's state released with its last timer). cancel() lets the captures go only once the
// timer has left the loop's books; it used to drop them first, and the nested cancel found the
// timer half removed and crashed.
struct CancelsOnDestruction {
  EventLoop* loop = nullptr;
  EventLoop::TimerId id = 0;
  int* cancels = nullptr;
  int* fired = nullptr;
  ~CancelsOnDestruction() {
    if (loop == nullptr) return;
    ++*cancels;
    loop->cancel(id);  // this very timer, already cancelled: a no-op
    int* count = fired;
    loop->after(0ms, [count] { ++*count; });  // and a new one, which must fire
  }
};

TEST(EventLoop, ACallbackWhoseCapturesCancelTheirOwnTimerOnDestructionIsSafe) {
  EventLoop loop;
  int cancels = 0;
  int fired = 0;
  for (int round = 0; round < 3; ++round) {
    // Built in place and filled field by field: a temporary of the holder would run the
    // destructor itself and count a cancel of its own.
    auto holder = std::make_shared<CancelsOnDestruction>();
    auto id = loop.after(60s, [holder] { FAIL() << "a cancelled timer fired"; });
    holder->loop = &loop;
    holder->id = id;
    holder->cancels = &cancels;
    holder->fired = &fired;
    holder.reset();  // the timer's callback holds the only reference now
    loop.cancel(id);
    EXPECT_EQ(cancels, round + 1);
    loop.cancel(id);  // twice: still a no-op
    for (int i = 0; i < 10 && fired < round + 1; ++i) loop.run_once(0ms);
    EXPECT_EQ(fired, round + 1);
  }
}

}  // namespace
}  // namespace hoprelay::transport
