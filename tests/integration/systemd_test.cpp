// The systemd integration: the unit passes `systemd-analyze verify`, its user comes from the
// sysusers file, and hoprelayd speaks the notify protocol (READY=1 only once its downstream is
// up, WATCHDOG=1 from the loop, STOPPING=1 at the drain). The test plays the service manager:
// it binds the NOTIFY_SOCKET datagram socket itself, so no systemd needs to run.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <regex>
#include <sstream>

#include "harness.h"

namespace hoprelay::test {
namespace {

using Clock = std::chrono::steady_clock;

// The repository's systemd/ directory. (Not from __FILE__: built through ccache, which hashes
// paths relative to the clone, that is relative to the compiler's directory.)
const fs::path kSystemdDir = fs::path(HOPRELAY_SOURCE_DIR) / "systemd";

// The path of a tool on PATH, empty when it is not installed (Process takes no PATH search).
std::string which(const std::string& tool) {
  RunResult r = run({"/bin/sh", "-c", "command -v " + tool});
  if (r.code != 0) return "";
  return r.output.substr(0, r.output.find('\n'));
}

struct Notification {
  std::string text;  // NEWLINE-separated VAR=VALUE assignments
  pid_t pid = 0;     // the sender, from SCM_CREDENTIALS
  Clock::time_point at;

  // A line equal to `assignment`, or starting with it when it ends in '=' ("STATUS=").
  bool has(const std::string& assignment) const {
    std::istringstream in(text);
    std::string line;
    bool prefix = !assignment.empty() && assignment.back() == '=';
    while (std::getline(in, line)) {
      if (prefix ? line.rfind(assignment, 0) == 0 : line == assignment) return true;
    }
    return false;
  }
  std::string status() const {
    auto p = text.find("STATUS=");
    if (p == std::string::npos) return "";
    return text.substr(p + 7, text.find('\n', p) - (p + 7));
  }
};

// The manager's end of NOTIFY_SOCKET: an AF_UNIX datagram socket that records every
// notification with its sender's pid.
class NotifySocket {
 public:
  explicit NotifySocket(fs::path path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
  }
  ~NotifySocket() {
    ::close(fd_);
    fs::remove(path_);
  }
  const fs::path& path() const { return path_; }

  // Records what arrives until a notification from `pid` has `assignment` (returned) or
  // `timeout` passes (nullopt).
  std::optional<Notification> wait_for(const std::string& assignment, pid_t pid,
                                       std::chrono::milliseconds timeout) {
    return wait_match(pid, timeout, [&](const Notification& n) { return n.has(assignment); });
  }
  // The first notification from `pid` whose STATUS= holds `part` (waiting up to `timeout`).
  std::optional<Notification> wait_for_status(const std::string& part, pid_t pid,
                                              std::chrono::milliseconds timeout) {
    return wait_match(pid, timeout, [&](const Notification& n) {
      return n.status().find(part) != std::string::npos;
    });
  }
  template <typename Match>
  std::optional<Notification> wait_match(pid_t pid, std::chrono::milliseconds timeout,
                                         Match match) {
    auto deadline = Clock::now() + timeout;
    size_t seen = 0;
    for (;;) {
      for (; seen < all_.size(); ++seen) {
        if (all_[seen].pid == pid && match(all_[seen])) return all_[seen];
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      receive(left);
    }
  }
  // Records everything that arrives during `d`.
  void record_for(std::chrono::milliseconds d) {
    auto deadline = Clock::now() + d;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return;
      receive(left);
    }
  }
  size_t count(const std::string& assignment, pid_t pid,
               Clock::time_point since = Clock::time_point::min()) const {
    return std::count_if(all_.begin(), all_.end(), [&](const Notification& n) {
      return n.pid == pid && n.at >= since && n.has(assignment);
    });
  }
  std::string transcript() const {
    std::string out;
    for (const auto& n : all_) {
      std::string text = n.text;
      std::replace(text.begin(), text.end(), '\n', '|');
      out += "  pid " + std::to_string(n.pid) + ": " + text + "\n";
    }
    return out;
  }

 private:
  // Waits up to `timeout` for one datagram.
  void receive(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return;
    char buf[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n < 0) return;
    Notification note{std::string(buf, size_t(n)), 0, Clock::now()};
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred;
        std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
        note.pid = cred.pid;
      }
    }
    all_.push_back(std::move(note));
  }

  fs::path path_;
  int fd_ = -1;
  std::vector<Notification> all_;
};

// hoprelayd as systemd starts it for Type=notify with WatchdogSec=: NOTIFY_SOCKET,
// WATCHDOG_USEC and WATCHDOG_PID (this process's own pid, through the shell's exec; or
// `watchdog_pid` when given).
std::vector<std::string> under_systemd(const NotifySocket& sock, const std::string& watchdog_usec,
                                       std::vector<std::string> argv,
                                       const std::string& watchdog_pid = "$$") {
  std::vector<std::string> out{"/usr/bin/env",
                               "NOTIFY_SOCKET=" + sock.path().string(),
                               "WATCHDOG_USEC=" + watchdog_usec,
                               "/bin/sh",
                               "-c",
                               "export WATCHDOG_PID=" + watchdog_pid + "; exec \"$@\"",
                               "sh"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// A chain a -> b (or a single leaf) over TCP on loopback.
fs::path write_topology(const TempDir& dir, bool chain, uint16_t& a_metrics, uint16_t& b_metrics) {
  a_metrics = free_port();
  b_metrics = free_port();
  std::ostringstream t;
  t << "[pipeline]\nname = \"sd\"\ntransport = \"tcp\"\nslot_size = \"4KiB\"\nslots = 8\n\n"
    << "[nodes.a]\nlisten = \"127.0.0.1:" << free_port()
    << "\"\nmetrics = \"127.0.0.1:" << a_metrics << "\"\n"
    << (chain ? "downstream = [\"b\"]\n" : "") << "stage = { plugin = \"passthrough\" }\n\n";
  if (chain) {
    t << "[nodes.b]\nlisten = \"127.0.0.1:" << free_port()
      << "\"\nmetrics = \"127.0.0.1:" << b_metrics << "\"\nstage = { plugin = \"passthrough\" }\n";
  }
  fs::path path = dir / "topology.toml";
  write_file(path, t.str());
  return path;
}

std::vector<std::string> hoprelayd(const fs::path& topology, const std::string& node) {
  return {HOPRELAYD_BIN, "--topology", topology.string(), "--node", node};
}

TEST(SystemdUnit, VerifyPasses) {
  std::string analyze = which("systemd-analyze");
  if (analyze.empty()) {
    GTEST_SKIP() << "systemd-analyze is not installed (Debian package systemd; "
                    "scripts/install-deps.sh installs it)";
  }
  TempDir dir;
  // The unit names the /usr install paths, which verify requires to exist: point them at the
  // binaries of this build. Everything else is checked as shipped.
  std::string unit = read_file(kSystemdDir / "hoprelayd@.service");
  ASSERT_FALSE(unit.empty()) << kSystemdDir;
  unit = std::regex_replace(unit, std::regex("/usr/sbin/hoprelayd "),
                            std::string(HOPRELAYD_BIN) + " ");
  ASSERT_NE(unit.find(HOPRELAYD_BIN), std::string::npos);
  // A refusal at start (exit 78: the topology, the node's TLS files, spool_dir, sink paths) is
  // not restarted, which systemd judges by the main process's exit alone: a failing
  // ExecStartPre would be retried every second until the start limit.
  EXPECT_NE(unit.find("\nRestartPreventExitStatus=78\n"), std::string::npos);
  EXPECT_EQ(unit.find("\nExecStartPre="), std::string::npos);
  write_file(dir / "hoprelayd@.service", unit);

  RunResult r = run({analyze, "verify", (dir / "hoprelayd@b.service").string()});
  EXPECT_EQ(r.code, 0) << r.output;
  // Anything said about this unit (unknown keys or sections, bad values, missing commands) is
  // a failure; lines about other units of the host are not ours to judge.
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_EQ(line.find("hoprelayd@"), std::string::npos) << line;
    EXPECT_EQ(line.find("Unknown"), std::string::npos) << line;
  }
}

TEST(SystemdUnit, SysusersCreatesTheUserTheUnitRunsAs) {
  std::string sysusers = which("systemd-sysusers");
  if (sysusers.empty()) {
    GTEST_SKIP() << "systemd-sysusers is not installed (Debian package systemd)";
  }
  TempDir dir;
  fs::create_directories(dir / "root");
  RunResult r = run({sysusers, "--dry-run", "--root=" + (dir / "root").string(),
                     (kSystemdDir / "hoprelay.sysusers.conf").string()});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Creating group 'hoprelay'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Creating user 'hoprelay'"), std::string::npos) << r.output;
  std::string unit = read_file(kSystemdDir / "hoprelayd@.service");
  EXPECT_NE(unit.find("\nUser=hoprelay\n"), std::string::npos);
  EXPECT_NE(unit.find("\nGroup=hoprelay\n"), std::string::npos);
}

// The unit's comments are what an operator reads first: they must not contradict the program
// (issue 16: it said live reload was not implemented while SIGHUP reloads).
TEST(SystemdUnit, CommentsSayReloadWorks) {
  std::string unit = read_file(kSystemdDir / "hoprelayd@.service");
  ASSERT_FALSE(unit.empty()) << kSystemdDir;
  EXPECT_EQ(unit.find("not implemented"), std::string::npos);
  EXPECT_NE(unit.find("\nExecReload=/bin/kill -HUP $MAINPID\n"), std::string::npos);
  EXPECT_NE(unit.find("# Live reload: SIGHUP re-reads the topology"), std::string::npos);
}

TEST(SystemdNotify, HeadIsReadyOnlyOnceItsDownstreamIsUpFeedsTheWatchdogAndSaysStopping) {
  TempDir dir;
  NotifySocket sock(dir / "notify.sock");
  uint16_t a_metrics, b_metrics;
  fs::path topology = write_topology(dir, true, a_metrics, b_metrics);

  Process a(under_systemd(sock, "400000", hoprelayd(topology, "a")), dir / "a.log");
  ASSERT_TRUE(wait_until([&] { return !scrape(a_metrics).empty(); }, 10s)) << a.output();
  // a listens, b is down: a says what it waits for, feeds the watchdog, and is not ready.
  auto listening = Clock::now();
  sock.record_for(1200ms);
  EXPECT_EQ(sock.count("READY=1", a.pid()), 0u) << sock.transcript() << a.output();
  EXPECT_GE(sock.count("WATCHDOG=1", a.pid(), listening), 2u) << sock.transcript();
  auto waiting = sock.wait_for("STATUS=", a.pid(), 0ms);
  ASSERT_TRUE(waiting.has_value()) << sock.transcript();
  EXPECT_NE(waiting->status().find("waiting for the downstream links to b"), std::string::npos)
      << waiting->status();

  Process b(hoprelayd(topology, "b"), dir / "b.log");  // not under systemd
  auto ready = sock.wait_for("READY=1", a.pid(), 10s);
  ASSERT_TRUE(ready.has_value()) << sock.transcript() << a.output() << b.output();
  EXPECT_NE(ready->status().find("running"), std::string::npos) << ready->status();
  EXPECT_NE(ready->status().find("forwarding to b"), std::string::npos) << ready->status();

  // The loop keeps feeding it (every 200 ms for WATCHDOG_USEC=400000).
  auto after_ready = Clock::now();
  sock.record_for(1000ms);
  EXPECT_GE(sock.count("WATCHDOG=1", a.pid(), after_ready), 2u) << sock.transcript();

  // A reload says so, and still says what the node forwards to.
  a.signal(SIGHUP);
  auto reloaded = sock.wait_for_status("(topology reloaded)", a.pid(), 5s);
  ASSERT_TRUE(reloaded.has_value()) << sock.transcript() << a.output();
  EXPECT_NE(reloaded->status().find("running: tcp, listening on 127.0.0.1:"), std::string::npos)
      << reloaded->status();
  EXPECT_NE(reloaded->status().find(", forwarding to b (topology reloaded)"), std::string::npos)
      << reloaded->status();

  a.signal(SIGTERM);
  auto stopping = sock.wait_for("STOPPING=1", a.pid(), 5s);
  ASSERT_TRUE(stopping.has_value()) << sock.transcript() << a.output();
  EXPECT_NE(stopping->status().find("draining"), std::string::npos) << stopping->status();
  EXPECT_EQ(a.wait(20s), 0) << a.output();
  sock.record_for(100ms);
  EXPECT_EQ(sock.count("READY=1", a.pid()), 2u) << sock.transcript();  // start, reload
  // Everything came from the main process, as NotifyAccess=main requires; b said nothing.
  for (const auto& line : {"READY=1", "WATCHDOG=1", "STOPPING=1"}) {
    EXPECT_EQ(sock.count(line, b.pid()), 0u) << line;
  }

  b.signal(SIGTERM);
  EXPECT_EQ(b.wait(20s), 0) << b.output();
}

TEST(SystemdNotify, LeafIsReadyOnceListeningAndFeedsOnlyAWatchdogMeantForIt) {
  TempDir dir;
  NotifySocket sock(dir / "notify.sock");
  uint16_t a_metrics, unused;
  fs::path topology = write_topology(dir, false, a_metrics, unused);

  // WATCHDOG_PID names another process (pid 1): the watchdog is not this daemon's.
  Process a(under_systemd(sock, "400000", hoprelayd(topology, "a"), "1"), dir / "a.log");
  auto ready = sock.wait_for("READY=1", a.pid(), 10s);
  ASSERT_TRUE(ready.has_value()) << sock.transcript() << a.output();
  EXPECT_NE(ready->status().find("no downstream peers"), std::string::npos) << ready->status();
  EXPECT_FALSE(scrape(a_metrics).empty());  // ready means serving
  sock.record_for(1000ms);
  EXPECT_EQ(sock.count("WATCHDOG=1", a.pid()), 0u) << sock.transcript();
  // After a reload, as the cluster suite greps it: "(topology reloaded)" whole.
  a.signal(SIGHUP);
  auto reloaded = sock.wait_for_status("(topology reloaded)", a.pid(), 5s);
  ASSERT_TRUE(reloaded.has_value()) << sock.transcript() << a.output();
  EXPECT_NE(reloaded->status().find("(no downstream peers) (topology reloaded)"), std::string::npos)
      << reloaded->status();

  a.signal(SIGTERM);
  EXPECT_TRUE(sock.wait_for("STOPPING=1", a.pid(), 5s).has_value()) << sock.transcript();
  EXPECT_EQ(a.wait(20s), 0) << a.output();
}

TEST(SystemdNotify, ConfigurationErrorIsReportedAsStatusAndExit78) {
  TempDir dir;
  NotifySocket sock(dir / "notify.sock");
  write_file(dir / "bad.toml", "[pipeline\n");
  Process a(under_systemd(sock, "400000", hoprelayd(dir / "bad.toml", "a")), dir / "a.log");
  EXPECT_EQ(a.wait(10s), 78) << a.output();
  sock.record_for(100ms);
  EXPECT_EQ(sock.count("READY=1", a.pid()), 0u) << sock.transcript();
  auto status = sock.wait_for("STATUS=", a.pid(), 0ms);
  ASSERT_TRUE(status.has_value()) << sock.transcript();
  EXPECT_NE(status->status().find("invalid topology"), std::string::npos) << status->status();
}

}  // namespace
}  // namespace hoprelay::test
