// hoprelay: the operator's command line. validate and graph read a topology file; send is the
// producer that feeds a head node.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <random>

#include "hoprelay/config/topology.h"
#include "hoprelay/stages/pattern.h"
#include "hoprelay/transport/log.h"
#include "producer.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "status.h"

namespace {

constexpr int kExitConfig = 78;  // EX_CONFIG

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

uint32_t default_origin() {
  // Distinct per run and per host so that two producers never share an origin by accident.
  std::random_device rd;
  uint32_t o = rd() ^ (static_cast<uint32_t>(getpid()) << 8);
  return o == 0 ? 1 : o;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hoprelay;
  CLI::App app{"hoprelay: validate, draw and feed hoprelay pipelines"};
  app.require_subcommand(1);

  std::string path;
  auto* validate = app.add_subcommand("validate", "Check a topology file; exit 78 on errors");
  std::string validate_node;
  validate->add_option("file", path, "Topology TOML file")->required();
  validate->add_option("--node", validate_node,
                       "Load only this node's stage plugin, as hoprelayd --node does (the "
                       "other nodes' plugins need not exist on this host)");

  auto* graph = app.add_subcommand("graph", "Print the topology as Graphviz DOT");
  graph->add_option("file", path, "Topology TOML file")->required();

  auto* status = app.add_subcommand(
      "status", "One table of every node: up/down, links, messages/s, held, queued, errors");
  double interval_s = 1.0;
  status->add_option("--topology,-t", path, "Topology TOML file")->required();
  status->add_option("--interval", interval_s, "Seconds between the two scrapes that give rates")
      ->check(CLI::Range(0.1, 60.0));

  auto* send = app.add_subcommand("send", "Send messages into a head node as a producer");
  std::string to;
  client::ProducerOptions opts;
  int64_t size = 1024;
  uint64_t count = 0;
  uint32_t origin = 0;
  int connect_timeout = 30;
  std::string log_level = "warn";
  send->add_option("--topology,-t", path, "Topology TOML file")->required();
  send->add_option("--to", to, "Head node to send to")->required();
  auto* file_opt = send->add_option("--file", opts.file, "Send this file, split into messages")
                       ->check(CLI::ExistingFile);
  auto* count_opt = send->add_option("--count", count, "Generate this many messages");
  send->add_option("--size", size, "Message size in bytes (generated), or chunk size (--file)");
  send->add_option("--rate", opts.rate, "Messages per second (default: as fast as credits allow)")
      ->check(CLI::NonNegativeNumber);
  send->add_flag("--stamp", opts.stamp,
                 "Write the send time (CLOCK_MONOTONIC ns, u64) into each message's first 8 "
                 "bytes, for a latency-recording stage such as bench/latency_stage.c (the "
                 "payload then no longer passes verify-sink)");
  send->add_option("--origin", origin, "Origin id carried by every message (default: random)");
  send->add_option("--connect-timeout", connect_timeout, "Seconds to wait for the head node");
  send->add_option("--log-level", log_level, "trace|debug|info|warn|error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  file_opt->excludes(count_opt);
  CLI11_PARSE(app, argc, argv);

  auto logger = spdlog::stderr_color_mt("hoprelay");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));

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
      std::cerr << path << ": error: no node \"" << validate_node << "\" in the topology\n";
      return kExitConfig;
    }
    std::cout << "ok: " << topology->nodes.size() << " nodes, " << topology->link_count()
              << " links, messages up to " << topology->max_message() << " bytes\n";
    return 0;
  }
  if (graph->parsed()) {
    std::cout << config::to_dot(*topology);
    return 0;
  }
  if (status->parsed()) {
    return client::run_status(*topology,
                              std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000)));
  }

  // send
  const config::NodeSpec* head = topology->find(to);
  if (!head) {
    std::cerr << "hoprelay send: no node \"" << to << "\" in " << path << "\n";
    return kExitConfig;
  }
  if (!head->is_head()) {
    std::cerr << "hoprelay send: node \"" << to << "\" has upstream peers; producers send to a "
              << "head node\n";
    return kExitConfig;
  }
  if (opts.file.empty() && count_opt->count() == 0) {
    std::cerr << "hoprelay send: give --count N (generated messages) or --file PATH\n";
    return 2;
  }
  uint64_t min_size = opts.file.empty() ? stages::kMinPatternSize : 1;
  const uint64_t max_size = std::min<uint64_t>(topology->max_message(), UINT32_MAX);
  if (size < static_cast<int64_t>(min_size) || static_cast<uint64_t>(size) > max_size) {
    std::cerr << "hoprelay send: --size must be between " << min_size << " and " << max_size
              << ", the largest message pipeline " << topology->name
              << " takes (its smallest slots times its smallest slot_size; larger messages "
              << "need more slots or larger slots)\n";
    return 2;
  }
  opts.size = static_cast<uint32_t>(size);
  opts.count = count;
  opts.origin = origin ? origin : default_origin();
  opts.connect_timeout = std::chrono::seconds(connect_timeout);

  transport::EventLoop loop;
  client::ProducerResult r;
  try {
    client::Producer producer(loop, opts);
    std::string name = "send-" + std::to_string(getpid());
    transport::Identity id{transport::PeerRole::kProducer, name, topology->hash, opts.origin};
    if (!topology->auth_key_file.empty()) {
      id.auth = transport::AuthKey::load(topology->auth_key_file);
    }
    transport::TransportOptions options{head->transport, head->listen, false, head->poll};
    auto choice = transport::make_transport(options, loop, producer, id);
    spdlog::info("{}", choice.reason);
    bool write = head->ingress == config::Ingress::kWrite;
    r = producer.run(*choice.transport, {head->name, head->listen, write, head->slots});
  } catch (const std::exception& e) {
    std::cerr << "hoprelay send: " << e.what() << "\n";
    return 1;
  }
  if (!r.ok) {
    std::cerr << "hoprelay send: " << r.error << " (" << r.messages << " messages acknowledged)\n";
    return 1;
  }
  double secs = r.seconds > 0 ? r.seconds : 1e-9;
  std::printf("sent %llu messages, %llu bytes in %.3f s: %.0f msg/s, %.3f Gb/s (origin %u)\n",
              static_cast<unsigned long long>(r.messages), static_cast<unsigned long long>(r.bytes),
              r.seconds, double(r.messages) / secs, double(r.bytes) * 8 / secs / 1e9, opts.origin);
  return 0;
}
