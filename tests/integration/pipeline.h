// A pipeline of real hoprelayd processes on loopback, described in a few lines, for the
// integration tests.
#pragma once

#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace hoprelay::test {

struct NodeDef {
  std::string name;
  std::vector<std::string> downstream;
  std::string stage = "{ plugin = \"passthrough\" }";
  std::string extra;  // more keys, e.g. route = "round-robin"
  uint16_t port = 0;
  uint16_t metrics = 0;
};

// A pipeline of real daemons described by NodeDefs; every daemon is stopped with SIGTERM at the
// end and must exit 0 (drain works).
class Pipeline {
 public:
  Pipeline(const TempDir& dir, std::vector<NodeDef> nodes, std::string pipeline_extra = "")
      : dir_(dir), nodes_(std::move(nodes)), pipeline_extra_(std::move(pipeline_extra)) {
    // free_port() closes the port it found, so two calls can find the same one: every port of
    // the pipeline must differ (the validator refuses a metrics address equal to a listen one).
    std::vector<uint16_t> taken;
    auto unique_port = [&] {
      uint16_t p = free_port();
      while (std::find(taken.begin(), taken.end(), p) != taken.end()) p = free_port();
      taken.push_back(p);
      return p;
    };
    for (auto& n : nodes_) {
      n.port = unique_port();
      n.metrics = unique_port();
    }
    topology_ = dir_ / "topology.toml";
    write_topology();
  }

  // Edits the node definitions (ports stay) and rewrites the topology file, e.g. before a
  // SIGHUP reload.
  void change(const std::function<void(std::vector<NodeDef>&)>& edit) {
    edit(nodes_);
    write_topology();
  }

  // Top-level keys written before [pipeline], e.g. auth_key_file.
  void set_preamble(std::string preamble) {
    preamble_ = std::move(preamble);
    write_topology();
  }

  void write_topology() {
    std::ostringstream t;
    t << preamble_
      << "[pipeline]\nname = \"it\"\ntransport = \"tcp\"\nslot_size = \"16KiB\"\nslots = 32\n"
      << pipeline_extra_ << "\n";
    for (auto& n : nodes_) {
      t << "[nodes." << n.name << "]\nlisten = \"127.0.0.1:" << n.port << "\"\n"
        << "metrics = \"127.0.0.1:" << n.metrics << "\"\n";
      if (!n.downstream.empty()) {
        t << "downstream = [";
        for (size_t i = 0; i < n.downstream.size(); ++i) {
          t << (i ? ", " : "") << '"' << n.downstream[i] << '"';
        }
        t << "]\n";
      }
      t << "stage = " << n.stage << "\n" << n.extra << "\n";
    }
    // Atomically, as configuration management would: a reload never reads half a file.
    write_file(dir_ / "topology.toml.tmp", t.str());
    fs::rename(dir_ / "topology.toml.tmp", topology_);
  }

  void start_all() {
    // Sinks first is not required (links retry), but it keeps the logs quiet.
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) start(it->name);
    for (auto& n : nodes_) {
      ASSERT_TRUE(wait_until([&] { return !scrape(n.metrics).empty(); }, 10s))
          << n.name << " did not come up:\n"
          << procs_[n.name]->output();
    }
  }
  // Starts `names` in this order, each waited for until it serves metrics (the others may be
  // down: a node whose downstream is not up yet serves them all the same).
  void start_up(const std::vector<std::string>& names) {
    for (const auto& name : names) {
      start(name);
      ASSERT_TRUE(wait_until([&] { return !scrape(node(name).metrics).empty(); }, 10s))
          << name << " did not come up:\n"
          << procs_[name]->output();
    }
  }
  // `extra`: more hoprelayd options.
  void start(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv =
        prefix_.count(name) ? prefix_[name] : std::vector<std::string>{};
    for (const std::string& a : {std::string(HOPRELAYD_BIN), std::string("--topology"),
                                 topology_.string(), std::string("--node"), name}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    procs_[name] = std::make_unique<Process>(std::move(argv), dir_ / (name + ".log"));
  }
  // kill -9, for good: stop_all() leaves it out.
  void crash(const std::string& name) {
    procs_.at(name)->signal(SIGKILL);
    procs_.at(name)->wait(5s);
    procs_.erase(name);
  }
  // kill -9, then start again and wait until it serves metrics.
  void crash_and_restart(const std::string& name, std::chrono::milliseconds down = 200ms) {
    procs_.at(name)->signal(SIGKILL);
    procs_.at(name)->wait(5s);
    std::this_thread::sleep_for(down);
    // The old log is kept: each incarnation appends its own file.
    fs::rename(dir_ / (name + ".log"), dir_ / (name + "." + std::to_string(++restarts_) + ".log"));
    start(name);
    ASSERT_TRUE(wait_until([&] { return !scrape(node(name).metrics).empty(); }, 10s))
        << name << " did not come back:\n"
        << procs_[name]->output();
  }
  // Node `name`'s daemon runs as `prefix` followed by its command line (each start from now
  // on): a program that sets up the process's surroundings and then execs the rest in the same
  // process, so that its signals still reach the daemon.
  void run_with(const std::string& name, std::vector<std::string> prefix) {
    prefix_[name] = std::move(prefix);
  }
  Process& proc(const std::string& name) { return *procs_.at(name); }
  // Waits until `from` reports its outbound link to `to` up (hoprelay_link_up, sampled once a
  // second).
  bool out_link_up(const std::string& from, const std::string& to,
                   std::chrono::seconds within = 15s) {
    return wait_until(
        [&] {
          return metric_value(scrape(node(from).metrics), "hoprelay_link_up",
                              "direction=\"out\",peer=\"" + to + "\"") == 1;
        },
        within);
  }
  const NodeDef& node(const std::string& name) const {
    for (auto& n : nodes_) {
      if (n.name == name) return n;
    }
    throw std::runtime_error("no node " + name);
  }

  // `hoprelay send` of `count` generated messages of `size` bytes to `to`, to completion.
  RunResult send(const std::string& to, uint64_t count, uint32_t size,
                 const std::vector<std::string>& extra = {}) {
    return run(send_argv(to, count, size, extra));
  }
  // The same in the background, its output in `log` (in the test's directory): traffic to
  // fail nodes under, or several producers at once.
  std::unique_ptr<Process> start_send(const std::string& to, uint64_t count, uint32_t size,
                                      const std::vector<std::string>& extra = {},
                                      const std::string& log = "send.log") {
    return std::make_unique<Process>(send_argv(to, count, size, extra), dir_ / log);
  }

  // SIGTERM to every daemon, head first; each must drain and exit 0.
  void stop_all() {
    for (auto& n : nodes_) {
      if (procs_.count(n.name)) procs_[n.name]->signal(SIGTERM);
    }
    for (auto& n : nodes_) {
      if (!procs_.count(n.name)) continue;
      EXPECT_EQ(procs_[n.name]->wait(20s), 0) << n.name << ":\n" << procs_[n.name]->output();
    }
  }

  const fs::path& topology() const { return topology_; }

 private:
  std::vector<std::string> send_argv(const std::string& to, uint64_t count, uint32_t size,
                                     const std::vector<std::string>& extra) const {
    std::vector<std::string> argv{
        HOPRELAY_BIN, "send",    "--topology",          topology_.string(), "--to",
        to,           "--count", std::to_string(count), "--size",           std::to_string(size)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  const TempDir& dir_;
  std::vector<NodeDef> nodes_;
  std::string pipeline_extra_;
  std::string preamble_;
  fs::path topology_;
  std::map<std::string, std::unique_ptr<Process>> procs_;
  std::map<std::string, std::vector<std::string>> prefix_;
  int restarts_ = 0;
};

inline std::string sink(const TempDir& dir, const std::string& name) {
  return "{ plugin = \"verify-sink\", report = \"" + (dir / (name + ".json")).string() + "\" }";
}

inline bool report_has(const TempDir& dir, const std::string& name, long long received) {
  return read_report(dir / (name + ".json")).received >= received;
}

inline void expect_clean(const Report& r, long long received) {
  EXPECT_EQ(r.received, received);
  EXPECT_EQ(r.duplicates, 0);
  EXPECT_EQ(r.missing, 0);
  EXPECT_EQ(r.corrupt, 0);
}

}  // namespace hoprelay::test
