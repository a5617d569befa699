// poll = "busy" over TCP: a relay that spins instead of sleeping still delivers every message
// exactly once, still runs its timers (reconnects) and signals (drain on SIGTERM), and really
// spins: its event loop burns CPU while idle, where an event-mode node's sleeps.
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// CPU seconds (user + system) the main thread of `pid` has used: the event loop's thread. The
// metrics server's threads are left out on purpose.
double loop_cpu_seconds(pid_t pid) {
  std::string stat =
      read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/stat");
  // Fields after the ")" that ends the command name: state is field 3, utime 14, stime 15.
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  long long ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i >= 14) ticks += std::stoll(field);
  }
  return double(ticks) / double(sysconf(_SC_CLK_TCK));
}

// Share of one CPU each node's event loop used over `wall` of idleness.
std::map<std::string, double> idle_cpu_share(Pipeline& p, const std::vector<std::string>& names,
                                             std::chrono::milliseconds wall) {
  std::map<std::string, double> before;
  for (const auto& n : names) before[n] = loop_cpu_seconds(p.proc(n).pid());
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(wall);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, double> share;
  for (const auto& n : names) {
    share[n] = (loop_cpu_seconds(p.proc(n).pid()) - before[n]) / seconds;
  }
  return share;
}

TEST(BusyPoll, TcpRelaySpinsAndDelivers20kExactly) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c"}, "{ plugin = \"passthrough\" }", "poll = \"busy\""},
                   {"c", {}, sink(dir, "c")}});
  // c starts last: b's first connect is refused, and only a reconnect timer, firing while b
  // spins, can bring its link to c up.
  p.start("b");
  p.start("a");
  for (const char* n : {"a", "b"}) {
    ASSERT_TRUE(wait_until([&] { return !scrape(p.node(n).metrics).empty(); }, 10s))
        << n << " did not come up:\n"
        << p.proc(n).output();
  }
  std::this_thread::sleep_for(500ms);
  p.start("c");
  ASSERT_TRUE(wait_until(
      [&] { return read_file(dir / "b.log").find("outbound link up: c") != std::string::npos; },
      10s))
      << "b never reconnected to c: timers starved by the spin?\n"
      << read_file(dir / "b.log");
  EXPECT_NE(read_file(dir / "b.log").find("busy polling (poll = \"busy\")"), std::string::npos)
      << read_file(dir / "b.log");
  EXPECT_NE(read_file(dir / "a.log").find("socket events (poll = \"event\")"), std::string::npos)
      << read_file(dir / "a.log");

  RunResult r = p.send("a", 20000, 512);
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 20000); }, 10s));
  // The counters reach prometheus through deferred work at the end of a loop iteration.
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("b").metrics), "hoprelay_messages_forwarded_total",
                            "peer=\"c\"") == 20000;
      },
      5s))
      << scrape(p.node("b").metrics);

  // Idle, b's loop spins on a core while a's and c's sleep. The machine is shared (two cores,
  // parallel tests, builds), so b may get far less than a whole core: it must get a quarter
  // of one in the best of three one-second windows, while the event-mode nodes stay near
  // zero in every window.
  double busy_best = 0, event_worst = 0;
  for (int i = 0; i < 3 && busy_best < 0.25; ++i) {
    auto share = idle_cpu_share(p, {"a", "b", "c"}, 1000ms);
    busy_best = std::max(busy_best, share["b"]);
    event_worst = std::max({event_worst, share["a"], share["c"]});
  }
  std::printf("idle event loops: b (busy) %.2f of a CPU at best, a and c (event) %.3f at most\n",
              busy_best, event_worst);
  EXPECT_GE(busy_best, 0.25) << "b's event loop does not spin";
  EXPECT_LE(event_worst, 0.05) << "an event-mode node's loop used CPU while idle";

  p.stop_all();  // SIGTERM reaches the spinning loop through its signalfd: b drains, exits 0
  expect_clean(read_report(dir / "c.json"), 20000);
}

}  // namespace
}  // namespace hoprelay::test
