// hoprelay: the operator's command line. validate and graph read a topology file, plan writes
// one from a list of hosts; send is the producer that feeds a head node, recv a consumer that
// runs a leaf node (both on libhoprelay).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "hoprelay/common/cli_parse.h"
#include "hoprelay/config/node_files.h"
#include "hoprelay/config/plan.h"
#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/build_info.h"
#include "hoprelay/stages/pattern.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/tls.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "status.h"
#include "stop_signals.h"
#include "streams.h"

namespace {

constexpr int kExitConfig = 78;  // EX_CONFIG
// --framing's values, as a string: CLI11's enum mapping would show "{length->2,...}" in
// --help and in the error for a wrong one.
const std::map<std::string, hoprelay::client::Framing> kFramings{
    {"raw", hoprelay::client::Framing::kRaw},
    {"lines", hoprelay::client::Framing::kLines},
    {"length", hoprelay::client::Framing::kLength}};

// "1 node", "3 nodes".
std::string counted(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

using hoprelay::config::Topology;

// Loads a topology or prints every diagnostic; nullopt means "exit 78".
std::optional<Topology> load_or_report(const std::string& path,
                                       hoprelay::config::PluginCheck plugins) {
  try {
    return hoprelay::config::load_topology(path, plugins);
  } catch (const hoprelay::config::ConfigError& e) {
    for (const auto& d : e.diagnostics()) std::cerr << d.format() << "\n";
  } catch (const std::exception& e) {
    std::cerr << path << ": error: " << e.what() << "\n";
  }
  return std::nullopt;
}

// hoprelay plan: the topology on standard output, or every problem of the hosts file on
// standard error (exit 78).
int run_plan(hoprelay::config::PlanOptions options) {
  using namespace hoprelay::config;
  std::string text;
  try {
    std::ifstream in(options.hosts_file, std::ios::binary);
    if (!in) {
      std::cerr << options.hosts_file << ": error: cannot read it: " << std::strerror(errno)
                << "\n";
      return kExitConfig;
    }
    std::ostringstream buf;
    buf << in.rdbuf();
    text = buf.str();
    const std::vector<PlanHost> hosts = parse_plan_hosts(text, options.hosts_file, options.port);
    const Plan plan = make_plan(hosts, options);
    const std::string topology = write_plan(plan, options);
    // What plan writes must load: checked here rather than trusted.
    try {
      (void)parse_topology(topology, "<plan>", PluginCheck{PluginCheck::Mode::kNone, ""});
    } catch (const ConfigError& e) {
      std::cerr << "hoprelay plan: internal error: the plan does not validate:\n";
      for (const auto& d : e.diagnostics()) std::cerr << d.format() << "\n";
      return 70;  // EX_SOFTWARE
    }
    for (const std::string& note : plan.notes) std::cerr << "hoprelay plan: note: " << note << "\n";
    std::cout << topology;
    return 0;
  } catch (const ConfigError& e) {
    for (const auto& d : e.diagnostics()) std::cerr << d.format() << "\n";
    return kExitConfig;
  }
}

// --tls-cert, --tls-key, --tls-ca: all three or none.
void add_tls_options(CLI::App* cmd, hoprelay::client::TlsFiles& tls, const std::string& own,
                     const std::string& peers) {
  auto* cert = cmd->add_option("--tls-cert", tls.cert,
                               "TLS: " + own +
                                   " certificate chain (PEM), in place of the "
                                   "topology's tls (docs/security.md)");
  auto* key = cmd->add_option("--tls-key", tls.key, "TLS: its private key (PEM)");
  auto* ca = cmd->add_option("--tls-ca", tls.ca,
                             "TLS: the CA (PEM) that " + peers + " certificates chain to");
  cert->needs(key)->needs(ca);
  key->needs(cert)->needs(ca);
  ca->needs(cert)->needs(key);
}

// validate: the TLS files of the nodes (of `node` alone, when given) as this host has them.
// Every host has its own under the same paths, so a certificate must name one of the nodes
// that use those paths. A file this host lacks is a warning: it belongs on another host.
bool check_tls(const hoprelay::config::Topology& topology, const std::string& node) {
  std::vector<std::pair<const hoprelay::config::TlsSpec*, std::vector<std::string>>> uses;
  for (const auto& n : topology.nodes) {
    if (!n.tls.enabled() || (!node.empty() && n.name != node)) continue;
    auto it =
        std::find_if(uses.begin(), uses.end(), [&](const auto& u) { return *u.first == n.tls; });
    if (it == uses.end()) {
      uses.push_back({&n.tls, {n.name}});
    } else {
      it->second.push_back(n.name);
    }
  }
  bool ok = true;
  for (const auto& [spec, nodes] : uses) {
    bool missing = false;
    if (auto problem = hoprelay::transport::check_tls_files(*spec, nodes, missing)) {
      // With --node, the files are this host's own node's: missing here, the node would not
      // start (hoprelayd refuses it), so it is an error.
      const bool own = !node.empty();
      if (own && missing) problem = hoprelay::transport::tls_start_refusal(*spec);
      hoprelay::config::Diagnostic d{topology.path, spec->pos, *problem, missing && !own};
      std::cerr << d.format() << "\n";
      ok &= missing && !own;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hoprelay;
  CLI::App app{"hoprelay: validate, draw and feed hoprelay pipelines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", daemon::version_text("hoprelay"),
                       "Print the version, commit, stage ABI and wire protocol, and exit");

  std::string path;
  auto* validate = app.add_subcommand("validate", "Check a topology file; exit 78 on errors");
  std::string validate_node;
  validate->add_option("file", path, "Topology TOML file")->required();
  validate->add_option("--node", validate_node,
                       "Load only this node's stage plugin, as hoprelayd --node does (the "
                       "other nodes' plugins need not exist on this host)");

  auto* graph = app.add_subcommand("graph", "Print the topology as Graphviz DOT");
  graph->add_option("file", path, "Topology TOML file")->required();

  auto* plan = app.add_subcommand(
      "plan", "Write a topology for a list of hosts in a shape (chain, tree:K, racks:K)");
  config::PlanOptions plan_opts;
  std::string plan_shape;
  std::string plan_slot_size = "64KiB";
  uint16_t plan_metrics_port = 0;
  plan->add_option("--hosts", plan_opts.hosts_file,
                   "File of hosts, one a line: ADDRESS [LABEL [NAME]] (# comments); the first "
                   "is the head")
      ->required();
  plan->add_option("--shape", plan_shape,
                   "chain (the hosts in order), tree:K (K-ary, breadth first) or racks:K (the "
                   "racks chained, K-ary within each; needs LABELs)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& v) {
            config::PlanOptions o;
            return config::parse_plan_shape(v, o);
          },
          "SHAPE"));
  plan->add_option("--port", plan_opts.port, "Listen port of hosts given without one")
      ->check(CLI::Range(1, 65535));
  plan->add_option("--metrics-port", plan_metrics_port,
                   "Serve Prometheus metrics on this port of every host (default: none)")
      ->check(CLI::Range(1, 65535));
  plan->add_option("--slot-size", plan_slot_size, "Slot size, as \"64KiB\" or bytes")
      ->check(CLI::Validator(
          [](std::string& v) {
            auto b = config::parse_size(v);
            if (b && *b >= config::kMinSlotSize && *b <= config::kMaxSlotSize) return std::string();
            return "\"" + v + "\" is not a slot size from " + std::to_string(config::kMinSlotSize) +
                   " bytes to 16MiB";
          },
          "SIZE"));
  plan->add_option("--slots", plan_opts.slots,
                   "Least slots per node (deeper nodes get more: 4 per hop below them)")
      ->check(CLI::Range(static_cast<int64_t>(config::kMinSlots), config::kMaxSlots));
  plan->add_option("--name", plan_opts.name, "Pipeline name")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.empty() || v.find_first_of("\"\\\n") != std::string::npos
                       ? std::string(
                             "a pipeline name must be non-empty, without quotes, "
                             "backslashes or newlines")
                       : std::string();
          },
          "NAME"));

  auto* status = app.add_subcommand(
      "status", "One table of every node: up/down, links, messages/s, held, queued, errors");
  double interval_s = 1.0;
  status->add_option("--topology,-t", path, "Topology TOML file")->required();
  status->add_option("--interval", interval_s, "Seconds between the two scrapes that give rates")
      ->check(CLI::Range(0.1, 60.0));
  bool watch = false;
  status->add_flag("--watch,-w", watch,
                   "Refresh every --interval until interrupted: in place on a terminal (like "
                   "top), one table after another when piped");

  auto* send = app.add_subcommand("send", "Send messages into a head node as a producer");
  std::string to;
  client::SendOptions opts;
  int64_t size = 0;
  uint64_t count = 0;
  int connect_timeout = 30;
  int close_timeout = 10;
  int wait_all = 0;
  std::string log_level = "warn";
  send->add_option("--topology,-t", path, "Topology TOML file")->required();
  send->add_option("--to", to, "Head node to send to")->required();
  // Not CLI::ExistingFile: a missing file is an unreadable one (exit 1 and the reason, as
  // docs/operations.md says), not a usage error.
  auto* file_opt = send->add_option("--file", opts.file, "Send this file, cut into messages");
  auto* stdin_opt = send->add_flag("--stdin", opts.stdin_stream,
                                   "Send standard input, cut into messages (see --framing)");
  auto* count_opt = send->add_option("--count", count, "Generate this many messages");
  send->add_option("--size", size,
                   "Message size in bytes: generated ones (default 1024), or how --file and "
                   "--stdin are cut with --framing raw (default: one slot of the head)");
  std::string send_framing = "raw", recv_framing = "raw";
  send->add_option("--framing", send_framing,
                   "How --file or --stdin is cut into messages: raw (every --size bytes), lines "
                   "(one message per line, without its newline) or length (a 4-byte big-endian "
                   "length before each record); hoprelay recv takes the same option")
      ->check(CLI::IsMember({"raw", "lines", "length"}));
  send->add_option("--first-seq", opts.first_seq,
                   "Sequence number of the first message (continue an origin's numbering)");
  send->add_option("--rate", opts.rate, "Messages per second (default: as fast as credits allow)")
      ->check(CLI::NonNegativeNumber);
  send->add_flag("--stamp", opts.stamp,
                 "Write the send time (CLOCK_MONOTONIC ns, u64) into each message's first 8 "
                 "bytes, for a latency-recording stage such as bench/latency_stage.c (the "
                 "payload then no longer passes verify-sink)");
  std::string fill = "pattern";
  auto* fill_opt =
      send->add_option("--fill", fill,
                       "What generated messages hold: pattern (default: every byte from origin "
                       "and seq, which verify-sink checks) or header (its 24-byte header only; "
                       "the rest as the buffer held it, so verify-sink counts them corrupt): for "
                       "measuring the pipeline rather than the generator, as the references in "
                       "bench/ write a sequence number only")
          ->check(CLI::IsMember({"pattern", "header"}));
  send->add_flag("--copy", opts.copy,
                 "Send generated messages by copy (hoprelay_producer_send) instead of writing "
                 "them into reserved registered buffers (zero copy): for comparing the two");
  auto* origin_opt = send->add_option("--origin", opts.origin,
                                      "Origin id carried by every message (default: random)");
  send->add_flag("--resume", opts.resume,
                 "Go on with an interrupted send: the same input and --origin as it had; the "
                 "messages the head has already are not sent again, and are not an error")
      ->needs(origin_opt);
  send->add_flag("--run-head", opts.run_head,
                 "Run the head node (--to) in this process instead of sending to its hoprelayd, "
                 "which must not be running: one copy fewer per message; the head stops with "
                 "the command (docs/client.md, \"A producer that runs its head\")");
  send->add_option("--connect-timeout", connect_timeout, "Seconds to wait for the head node")
      ->check(CLI::Range(0, 86400));
  send->add_option("--close-timeout", close_timeout,
                   "Seconds to wait at the end for the end-of-stream mark's acknowledgement "
                   "(0: as long as it takes)")
      ->check(CLI::Range(0, 86400));
  auto* wait_all_opt =
      send->add_option("--wait-all", wait_all,
                       "Then wait up to SECONDS (0: as long as it takes) until every host has "
                       "every message: what was acknowledged while a branch was spooled reaches "
                       "it once that spool drains. Exits 4 when some host does not have "
                       "everything by then, naming it and why")
          ->check(CLI::Range(0, 86400));
  send->add_flag("--json", opts.json,
                 "The summary as one JSON object on standard output (counts, drops, spools, "
                 "whether every host has everything, the exit code)");
  add_tls_options(send, opts.tls, "the producer's", "the head's");
  send->add_option("--log-level", log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  file_opt->excludes(count_opt);
  fill_opt->excludes(file_opt);
  fill_opt->excludes(stdin_opt);
  stdin_opt->excludes(count_opt);
  stdin_opt->excludes(file_opt);

  auto* recv = app.add_subcommand(
      "recv",
      "Run a node as a consumer and write what arrives to standard output: a leaf, or a relay "
      "that keeps what it relays");
  client::RecvOptions ropts;
  recv->add_option("--topology,-t", path, "Topology TOML file")->required();
  recv->add_option("--node,-n", ropts.node,
                   "The node to run: a leaf, or a relay (it forwards every message too)")
      ->required();
  recv->add_option("--output,-o", ropts.output, "Write to this file instead of standard output");
  add_tls_options(recv, ropts.tls, "the node's", "its peers'");
  recv->add_option("--framing", recv_framing,
                   "raw (payloads back to back), lines (a newline after each) or length (a "
                   "4-byte big-endian length before each): as hoprelay send was given")
      ->check(CLI::IsMember({"raw", "lines", "length"}));
  recv->add_option("--state-dir", ropts.state_dir,
                   "Keep a durable position here (with --output): a restarted recv cuts the "
                   "file back to it and appends, exactly once")
      ->check(CLI::Validator(
          [](std::string& dir) -> std::string {
            struct stat st {};
            if (::stat(dir.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return "";
            return dir +
                   " is not a directory: --state-dir takes a directory of its own "
                   "(created if missing), not the output file";
          },
          "DIR"));
  recv->add_option("--count", ropts.count, "Stop after this many messages");
  recv->add_option("--streams", ropts.streams,
                   "Stop once this many producers' streams have ended (default 1)");
  recv->add_option("--timeout", ropts.timeout_s,
                   "Give up (exit 1) after this many seconds without a message");
  recv->add_option("--log-level", log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  // Bare `hoprelay`: what it can do, not just "a subcommand is required".
  if (argc < 2) {
    std::cerr << app.help();
    return 2;
  }
  if (auto status = cli::parse(app, argc, argv)) return *status;

  auto logger = spdlog::stderr_color_mt("hoprelay");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));

  if (plan->parsed()) {
    config::parse_plan_shape(plan_shape, plan_opts);
    plan_opts.shape_text = plan_shape;
    plan_opts.slot_size = *config::parse_size(plan_slot_size);
    if (plan_metrics_port != 0) plan_opts.metrics_port = plan_metrics_port;
    return run_plan(plan_opts);
  }

  // validate and graph check every node's plugin; a producer needs none of them.
  using Mode = config::PluginCheck::Mode;
  config::PluginCheck plugins{Mode::kNone, ""};
  if (validate->parsed() && !validate_node.empty()) {
    plugins = {Mode::kNode, validate_node};
  } else if (validate->parsed() || graph->parsed()) {
    plugins = {Mode::kAll, ""};
  }
  auto topology = load_or_report(path, plugins);
  if (!topology) return kExitConfig;

  if (validate->parsed()) {
    if (!validate_node.empty() && !topology->find(validate_node)) {
      std::cerr << path << ": error: no node \"" << validate_node
                << "\" in the topology (nodes: " << topology->names() << "); pass --node NAME\n";
      return kExitConfig;
    }
    for (const auto& w : topology->warnings()) std::cerr << w.format() << "\n";
    bool files_ok = check_tls(*topology, validate_node);
    if (!validate_node.empty()) {
      // What this node opens on this host: its spool directory, its sinks' files.
      for (const auto& d : config::node_file_refusals(*topology, *topology->find(validate_node))) {
        std::cerr << d.format() << "\n";
        files_ok = false;
      }
    }
    if (!files_ok) return kExitConfig;
    std::cout << "ok: pipeline \"" << topology->name << "\""
              << (topology->name_defaulted ? " (name defaulted from the file name)" : "") << ", "
              << counted(topology->nodes.size(), "node") << ", "
              << counted(topology->link_count(), "link") << ", messages up to "
              << topology->max_message() << " bytes\n";
    return 0;
  }
  if (graph->parsed()) {
    std::cout << config::to_dot(*topology);
    return 0;
  }
  if (status->parsed()) {
    auto interval = std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000));
    if (watch) client::watch_status(*topology, interval);
    return client::run_status(*topology, interval);
  }

  opts.framing = kFramings.at(send_framing);
  ropts.framing = kFramings.at(recv_framing);
  if (recv->parsed()) {
    ropts.topology = path;
    return client::exit_status(client::run_recv(ropts));
  }

  // send
  const config::NodeSpec* head = topology->find(to);
  if (!head || !head->is_head()) {
    const std::string heads = topology->names(&config::NodeSpec::is_head);
    if (!head) {
      std::cerr << "hoprelay send: no node \"" << to << "\" in " << path << " (heads: " << heads
                << ")\n";
    } else {
      std::cerr << "hoprelay send: node \"" << to << "\" has upstream peers; producers send to "
                << "a head node (heads: " << heads << ")\n";
    }
    return kExitConfig;
  }
  if (opts.resume && opts.origin == 0) {
    std::cerr << "hoprelay send: --resume needs the origin the interrupted send printed "
                 "(--origin 0 means a random one)\n";
    return 2;
  }
  if (opts.file.empty() && !opts.stdin_stream && count_opt->count() == 0) {
    std::cerr << "hoprelay send: give --count N (generated messages), --file PATH or --stdin\n";
    return 2;
  }
  const bool generated = opts.file.empty() && !opts.stdin_stream;
  if (size == 0) size = generated ? 1024 : head->slot_size;
  uint64_t min_size = generated ? stages::kMinPatternSize : 1;
  const uint64_t max_size = std::min<uint64_t>(topology->max_message(), UINT32_MAX);
  if (size < static_cast<int64_t>(min_size) || static_cast<uint64_t>(size) > max_size) {
    std::cerr << "hoprelay send: --size must be between " << min_size << " and " << max_size
              << ", the largest message pipeline " << topology->name
              << " takes (its smallest slots times its smallest slot_size; larger messages "
              << "need more slots or larger slots)\n";
    return 2;
  }
  opts.topology = path;
  opts.head = to;
  opts.head_address = head->listen.to_string();
  opts.size = static_cast<uint32_t>(size);
  opts.count = count;
  opts.fill_header = fill == "header";
  opts.connect_timeout_ms = connect_timeout * 1000;
  opts.close_timeout_ms = close_timeout == 0 ? -1 : close_timeout * 1000;
  opts.wait_all = wait_all_opt->count() > 0;
  opts.wait_all_ms = wait_all == 0 ? -1 : wait_all * 1000;
  return client::exit_status(client::run_send(opts));
}
