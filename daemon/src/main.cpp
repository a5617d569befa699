// hoprelayd: runs one node of a hoprelay pipeline in the foreground (systemd runs it as
// hoprelayd@NODE.service, Type=notify). Logs go to stderr, where journald picks them up.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>

#include "hoprelay/common/cli_parse.h"
#include "hoprelay/config/node_files.h"
#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/build_info.h"
#include "hoprelay/daemon/cpu_pin.h"
#include "hoprelay/daemon/loop_watch.h"
#include "hoprelay/daemon/node.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/tls.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "systemd_notify.h"

namespace {

constexpr int kExitConfig = 78;       // EX_CONFIG
constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: cannot start (port, device, memlock)

// The unit's StateDirectory=: systemd creates it, owned by the service user, before the start.
constexpr std::string_view kStateDirectory = "/var/lib/hoprelay";

// A stage that cannot write under the state directory because it does not exist: that is
// because hoprelayd runs outside systemd, which would have created it. Empty otherwise.
std::string state_directory_hint(std::string_view stage_error) {
  if (stage_error.find(std::string(kStateDirectory) + "/") == std::string_view::npos) return "";
  if (::access(std::string(kStateDirectory).c_str(), F_OK) == 0) return "";
  return fmt::format(
      "{0} does not exist: under systemd the unit's StateDirectory=hoprelay creates it; outside "
      "systemd create it (install -d -o hoprelay -g hoprelay {0}, or owned by whoever runs "
      "hoprelayd) or point the stage's paths elsewhere",
      kStateDirectory);
}

std::string short_hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// systemd's STATUS= while the node runs: where it listens and what it forwards to, from the
// topology it runs now (after a reload, the reloaded one), and `note` (a reload's result).
std::string running_status(const hoprelay::daemon::Node& node, const std::string& serving,
                           const std::string& note) {
  // "(topology reloaded)" stays a whole word group: scripts and the cluster suite grep it.
  const auto& down = node.spec().downstream;
  std::string out = "running: " + serving;
  out += down.empty() ? " (no downstream peers)" : ", forwarding to " + join(down);
  return note.empty() ? out : out + " (" + note + ")";
}

std::string json_escape(std::string_view in) {
  std::string out;
  out.reserve(in.size() + 8);
  for (char c : in) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

// %* in the JSON log pattern: the message, escaped for a JSON string.
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string escaped = json_escape({msg.payload.data(), msg.payload.size()});
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessage>();
  }
};

// SIGTERM/SIGINT (drain and exit) and SIGHUP arrive as readable events in the node's loop.
class Signals final : public hoprelay::transport::EventLoop::Handler {
 public:
  Signals(hoprelay::transport::EventLoop& loop, std::function<void(int)> on_signal)
      : on_signal_(std::move(on_signal)) {
    fd_ = signalfd(-1, &handled(), SFD_NONBLOCK | SFD_CLOEXEC);
    loop.add(fd_, EPOLLIN, this);
  }
  ~Signals() { ::close(fd_); }
  // Blocked in every thread (call before any thread starts: the metrics server has some), so
  // they are only ever seen through the signalfd, by the loop.
  static void block() { pthread_sigmask(SIG_BLOCK, &handled(), nullptr); }
  static const sigset_t& handled() {
    static const sigset_t set = [] {
      sigset_t s;
      sigemptyset(&s);
      sigaddset(&s, SIGTERM);
      sigaddset(&s, SIGINT);
      sigaddset(&s, SIGHUP);
      return s;
    }();
    return set;
  }
  void on_io(uint32_t) override {
    signalfd_siginfo si;
    while (::read(fd_, &si, sizeof(si)) == sizeof(si)) on_signal_(static_cast<int>(si.ssi_signo));
  }

 private:
  int fd_ = -1;
  std::function<void(int)> on_signal_;
};

// hoprelayd --wait-for-device: run by hoprelayd itself (below) after its node let go of an
// RDMA device that went away. Runs a loop of its own (signals, the watchdog) until a device
// serves `listen` again, checking once a second, then returns 69 for the service manager to
// start the node on it; a signal ends the wait with 0.
int wait_for_device(hoprelay::daemon::SystemdNotifier& notifier, const std::string& device,
                    const hoprelay::config::Endpoint& listen) {
  hoprelay::transport::EventLoop loop;
  int code = kExitUnavailable;
  Signals signals(loop, [&](int sig) {
    if (sig == SIGHUP) return;  // no node to reload
    spdlog::info("{}: exiting while waiting for an RDMA device", strsignal(sig));
    code = 0;
    loop.stop();
  });
  notifier.start_watchdog(loop);
  spdlog::error(
      "RDMA device {} is gone and the node has let go of it, so that it can be removed; waiting "
      "for a device to serve {} again, then exiting to be started on it",
      device, listen.to_string());
  notifier.status("RDMA device " + device + " gone: waiting for a device to serve " +
                  listen.to_string() + " again");
  std::function<void()> check = [&] {
    std::string why;
    std::string now = hoprelay::transport::rdma_device_for(listen, true, why);
    if (!now.empty()) {
      spdlog::info("RDMA device {} serves {}: exiting so that the node is started on it", now,
                   listen.to_string());
      notifier.stopping("RDMA device " + now + " is back; exiting to start on it");
      loop.stop();
      return;
    }
    loop.after(std::chrono::seconds(1), check);
  };
  loop.after(std::chrono::seconds(1), check);
  loop.run();
  return code;
}

// After the node let go of a device that went away, the process still holds it: librdmacm keeps
// every device context it opened until the process ends. So the process becomes a new one (the
// same PID, which systemd keeps tracking; every descriptor is close-on-exec) that waits for the
// device. Returns only when exec failed: the caller exits instead.
void wait_in_new_image(char** argv, const std::string& device) {
  std::vector<std::string> args;
  for (char** a = argv; *a; ++a) args.emplace_back(*a);
  args.push_back("--wait-for-device=" + device);
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  execv("/proc/self/exe", raw.data());
  spdlog::error("cannot run hoprelayd again to wait for the RDMA device ({}): exiting",
                std::strerror(errno));
}

// The topology's warnings about this node's geometry (a crc32c trailer with no room, zstd
// frames a node cannot take), at start and after each reload: the other nodes' are theirs.
void log_own_warnings(const hoprelay::config::Topology& topology, const std::string& node) {
  for (const auto& w : topology.warnings()) {
    if (w.message.starts_with("nodes." + node + ":")) spdlog::warn("{}", w.format());
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hoprelay;
  CLI::App app{"hoprelayd: one node of a hoprelay data distribution pipeline"};
  std::string topology_path;
  std::string node_name = short_hostname();
  std::string log_level = "info";
  std::string log_format = "text";
  double drain_timeout_s = 10.0;
  app.set_version_flag(
      "--version", daemon::version_text("hoprelayd"),
      "Print the version, commit, stage ABI, wire protocol and transports, and exit");
  app.add_option("--topology,-t", topology_path, "Topology TOML file")->required();
  auto* node_opt = app.add_option("--node,-n", node_name, "Node to run (default: hostname -s)");
  app.add_option("--log-format", log_format,
                 "text (for people and journald) or json (one object per line, for log shippers)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_option("--drain-timeout", drain_timeout_s,
                 "Seconds SIGTERM waits for in-flight messages to be acknowledged downstream")
      ->check(CLI::Range(0.0, 3600.0));
  std::string wait_device;  // hoprelayd runs itself with it: wait_in_new_image()
  app.add_option("--wait-for-device", wait_device,
                 "(internal) Wait until an RDMA device serves the node's address, then exit 69")
      ->group("");
  if (auto status = cli::parse(app, argc, argv)) return *status;
  Signals::block();

  auto logger = spdlog::stderr_color_mt("hoprelayd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));
  // journald adds its own timestamps; the node name on every line tells interleaved logs apart.
  if (log_format == "json") {
    // One JSON object per line; the message is escaped by JsonMessage (%*).
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","node":")" + json_escape(node_name) +
        R"(","logger":"%n","msg":"%*"})");
    spdlog::set_formatter(std::move(formatter));
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + node_name + "] %n: %v");
  }
  // Under systemd (Type=notify): READY=1 once the node serves, STATUS= for `systemctl status`,
  // WATCHDOG=1 from the loop, STOPPING=1 at the drain. A no-op anywhere else.
  daemon::SystemdNotifier notifier;
  // Errors before the node runs: plain lines on stderr (FILE:LINE:COL: error: ..., what an
  // editor or a person reads), or, with --log-format json, log records like every other line.
  auto startup_error = [&](const std::string& line) {
    if (log_format == "json") {
      spdlog::error("{}", line);
    } else {
      std::cerr << line << "\n";
    }
  };

  // Only this node's plugin must load on this host.
  const config::PluginCheck plugin_check{config::PluginCheck::Mode::kNode, node_name};
  std::shared_ptr<const config::Topology> topology_ptr;
  try {
    topology_ptr = std::make_shared<const config::Topology>(
        config::load_topology(topology_path, plugin_check));
  } catch (const config::ConfigError& e) {
    for (const auto& d : e.diagnostics()) startup_error(d.format());
    const auto& all = e.diagnostics();
    notifier.status(
        "invalid topology: " + (all.empty() ? topology_path : all.front().format()) +
        (all.size() > 1 ? fmt::format(" (and {} more in the log)", all.size() - 1) : ""));
    return kExitConfig;
  } catch (const std::exception& e) {
    startup_error(std::string("hoprelayd: ") + e.what());
    notifier.status(e.what());
    return kExitConfig;
  }
  const config::Topology& topology = *topology_ptr;
  const config::NodeSpec* spec = topology.find(node_name);
  if (!spec) {
    startup_error("hoprelayd: node \"" + node_name + "\" is not in " + topology_path +
                  (node_opt->count() ? "" : " (this host's name: no --node was given)") +
                  " (nodes: " + topology.names() + "); pass --node NAME");
    notifier.status("node " + node_name + " is not in " + topology_path);
    return kExitConfig;
  }
  log_own_warnings(topology, node_name);

  if (!wait_device.empty()) return wait_for_device(notifier, wait_device, spec->listen);

  // Ready for systemd once the node listens and every downstream link has come up once (a
  // leaf: once it listens), so units ordered after this one find the pipeline below it up.
  std::string serving;
  bool downstream_ready = spec->downstream.empty();
  // Every CPU of `cpu` first: the stage workers pin themselves as the node starts them.
  for (uint32_t cpu : spec->cpu) {
    if (std::string why = daemon::cpu_refusal(cpu); !why.empty()) {
      // Where to change it, as the validator would say it: FILE:LINE:COL.
      spdlog::error("{}", config::Diagnostic{topology.path, spec->cpu_pos,
                                             "nodes." + node_name + ".cpu: cannot start: " + why}
                              .format());
      notifier.status("cannot start: " + why);
      return kExitConfig;
    }
  }
  // What the node opens on this host, before it does: a refusal here is the operator's to fix,
  // which no restart cures (so EX_CONFIG, which the unit does not restart on); `hoprelay
  // validate --node` says the same ahead (node_files.h, tls.h).
  std::vector<config::Diagnostic> refusals = config::node_file_refusals(topology, *spec);
  if (spec->tls.enabled()) {
    if (auto why = transport::tls_start_refusal(spec->tls)) {
      refusals.push_back({topology.path, spec->tls.pos, *why, false});
    }
  }
  if (!refusals.empty()) {
    for (const auto& d : refusals) spdlog::error("{}", d.format());
    notifier.status("cannot start: " + refusals.front().message);
    return kExitConfig;
  }
  transport::EventLoop loop;
  std::unique_ptr<daemon::Node> node;
  try {
    stages::Stage stage(stages::resolve(spec->stage.plugin), spec->name, spec->stage.params);
    node = std::make_unique<daemon::Node>(topology_ptr, node_name, loop, std::move(stage));
    serving = std::string(node->transport_name()) + ", listening on " + spec->listen.to_string();
    node->on_downstream_ready([&] {
      downstream_ready = true;
      notifier.ready(running_status(*node, serving, ""));
    });
    node->start();
  } catch (const stages::StageError& e) {
    spdlog::error("{}",
                  config::Diagnostic{topology.path, spec->stage.pos,
                                     "nodes." + node_name + ".stage: " + std::string(e.what())}
                      .format());
    if (std::string hint = state_directory_hint(e.what()); !hint.empty()) spdlog::error("{}", hint);
    notifier.status(e.what());
    return kExitConfig;
  } catch (const std::exception& e) {
    spdlog::error("cannot start: {}", e.what());
    notifier.status(std::string("cannot start: ") + e.what());
    return kExitUnavailable;
  }
  if (spec->downstream.empty()) {
    notifier.ready(running_status(*node, serving, ""));
  } else if (!downstream_ready) {
    notifier.status("starting: " + serving + "; waiting for the downstream links to " +
                    join(spec->downstream) + " to come up");
  }
  // The event loop (every link and the routing; the stage too unless `threads` > 1) goes to
  // the first CPU of `cpu`. Pinned once the node has started, so the metrics server's threads
  // keep the process's other CPUs (the stage workers pinned themselves).
  if (!spec->cpu.empty()) {
    if (std::string why = daemon::pin_this_thread(spec->cpu.front()); !why.empty()) {
      spdlog::error("cannot start: {}", why);
      notifier.status("cannot start: " + why);
      return kExitConfig;
    }
    spdlog::info("event loop pinned to CPU {}", spec->cpu.front());
  }
  notifier.start_watchdog(loop);

  int exit_code = 0;
  bool stopping = false;
  // The device went away under the node. No drain: its links are gone, and the device itself
  // stays in the kernel (`rdma link delete` waits) until this process has let go of it. So the
  // node goes at once (once the loop stopped: not from inside its own callback), and the process
  // waits for the device as a new image (wait_in_new_image) and exits to be started on it.
  // Exiting at once instead would have systemd start it while the device is away: failing
  // starts hit its start limit, and `transport = "auto"` would settle on TCP, which its verbs
  // peers cannot reach.
  std::string lost_device;
  node->when_device_lost([&](std::string_view device) {
    lost_device = device;
    exit_code = kExitUnavailable;
    loop.stop();
  });
  Signals signals(loop, [&](int sig) {
    if (sig == SIGHUP) {
      // Live reload (also systemd's ExecReload): a file that does not validate, or a change
      // that cannot be applied live, is refused and the node runs on with what it has.
      notifier.reloading();
      spdlog::info("SIGHUP: reloading {}", topology_path);
      std::string refused;
      try {
        auto next = std::make_shared<const config::Topology>(
            config::load_topology(topology_path, plugin_check));
        refused = node->reload(next);
        if (refused.empty()) log_own_warnings(*next, node_name);
      } catch (const config::ConfigError& e) {
        for (const auto& d : e.diagnostics()) spdlog::error("reload refused: {}", d.format());
        refused = "the topology file does not validate";
      } catch (const std::exception& e) {
        refused = e.what();
      }
      if (refused.empty()) {
        notifier.ready(running_status(*node, serving, "topology reloaded"));
      } else {
        node->reload_failed();
        spdlog::error("reload refused: {}; still running on the previous topology", refused);
        notifier.ready(running_status(*node, serving, "reload refused: " + refused));
      }
      return;
    }
    if (stopping) {
      spdlog::warn("second {}: exiting without waiting", strsignal(sig));
      notifier.status("stopping without waiting (second signal)");
      loop.stop();
      return;
    }
    stopping = true;
    spdlog::info("{}: draining", strsignal(sig));
    notifier.stopping(
        fmt::format("draining: {} messages in flight, waiting up to {} s for "
                    "their downstream acknowledgements",
                    node->held(), drain_timeout_s));
    node->drain(
        std::chrono::milliseconds(static_cast<int64_t>(drain_timeout_s * 1000)),
        [&](uint64_t left) {
          if (left == 0) {
            spdlog::info("drained: every message acknowledged downstream; exiting");
            notifier.status("drained; exiting");
          } else {
            // A head's upstream is its producers: a running one sends again what was not
            // acknowledged; one that exited before the acknowledgements no longer can.
            spdlog::warn(
                "drain timed out: {} messages not acknowledged downstream; {}", left,
                spec->is_head()
                    ? "their producers send them again when this node is back, if they are "
                      "still running (one that exited has them no longer: they are lost unless "
                      "it sends them again with the same --origin)"
                    : "their upstream replays them when this node is back");
            notifier.status(fmt::format("drain timed out with {} messages left; exiting", left));
          }
          loop.stop();
        });
  });

  // The stall detector of the node's loop (its stage workers and link threads have loops of
  // their own, not watched yet).
  std::optional<daemon::LoopWatch> loop_watch;
  loop_watch.emplace(loop, node->metrics(), "node");
  std::function<void()> tick = [&] {
    node->tick();
    loop.after(std::chrono::seconds(1), tick);
  };
  loop.after(std::chrono::seconds(1), tick);
  loop.run();
  node->tick();
  loop_watch.reset();
  node.reset();
  if (!lost_device.empty()) wait_in_new_image(argv, lost_device);
  return exit_code;
}
