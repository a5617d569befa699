// The wait of `hoprelay send --wait-all` for the spools that hold part of its stream
// (spool_wait.h).
#include "spool_wait.h"

#include <cstdio>
#include <optional>
#include <set>
#include <thread>

#include "status.h"

namespace hoprelay::client {

namespace {

constexpr auto kPoll = std::chrono::seconds(1);
constexpr auto kFirstLook = std::chrono::milliseconds(1200);
constexpr auto kScrapeTimeout = std::chrono::milliseconds(1000);

std::string thousands(double v) {
  std::string digits = std::to_string(static_cast<unsigned long long>(v < 0 ? 0 : v));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return digits;
}

// One look at a spool: how many frames it holds and whether its branch's link is up, or why
// that cannot be told.
struct Look {
  double left = -1;
  bool link_up = false;
  std::string unknown;  // non-empty: the node's metrics cannot be read
};

Look look(const config::Topology& topology, const std::string& at, const std::string& branch) {
  Look l;
  const config::NodeSpec* node = topology.find(at);
  if (!node || !node->metrics) {
    l.unknown = at + " has no metrics address in the topology: its spool cannot be watched";
    return l;
  }
  const auto text = fetch_metrics(*node->metrics, kScrapeTimeout);
  if (!text) {
    l.unknown = at + "'s metrics (" + node->metrics->to_string() + ") do not answer";
    return l;
  }
  const Samples s = parse_exposition(*text);
  const std::string peer = "peer=\"" + branch + "\"";
  l.left = sum(s, "hoprelay_spool_messages", peer);
  l.link_up = sum(s, "hoprelay_link_up", peer) > 0;
  return l;
}

std::string why_of(const std::string& at, const std::string& branch, const Look& l) {
  if (!l.unknown.empty()) return l.unknown;
  return thousands(l.left) + " frames wait in " + at + "'s spool for " + branch + " (" +
         (l.link_up ? at + " is sending them" : at + "'s link to it is down") + ")";
}

}  // namespace

std::vector<std::string> hosts_below(const config::Topology& topology, const std::string& peer) {
  std::set<std::string> seen;
  std::vector<std::string> todo{peer};
  while (!todo.empty()) {
    const std::string n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    if (const config::NodeSpec* spec = topology.find(n)) {
      for (const auto& d : spec->downstream) todo.push_back(d);
    }
  }
  std::vector<std::string> out;
  for (const auto& n : topology.nodes) {
    if (seen.count(n.name)) out.push_back(n.name);
  }
  return out;
}

SpoolWaitResult wait_for_spools(const config::Topology& topology, const Spooled& spooled,
                                std::chrono::milliseconds timeout, bool progress, bool (*stop)()) {
  const auto t0 = std::chrono::steady_clock::now();
  SpoolWaitResult r;
  // The gauge is sampled once a second: the first look comes after a sample that was taken once
  // the spool had this stream's messages (their outcomes said so before the send ended), so a 0
  // means drained, not "not sampled yet".
  std::this_thread::sleep_for(kFirstLook);
  for (;;) {
    r.behind.clear();
    bool unknowable = false;
    for (const auto& [key, n] : spooled) {
      const Look l = look(topology, key.first, key.second);
      if (l.unknown.empty() && l.left == 0) continue;
      unknowable |= !l.unknown.empty() && !topology.find(key.first)->metrics;
      r.behind.push_back({key.first, key.second, n, l.left, hosts_below(topology, key.second),
                          why_of(key.first, key.second, l)});
    }
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    r.seconds = std::chrono::duration<double>(elapsed).count();
    if (r.behind.empty() || unknowable || (stop && stop())) return r;
    if (timeout.count() >= 0 && elapsed >= timeout) return r;
    if (progress) {
      std::string line;
      for (const auto& b : r.behind) line += (line.empty() ? "" : "; ") + b.why;
      std::fprintf(
          stderr, "hoprelay send: waiting for every host to have everything (%.0f s%s): %s\n",
          r.seconds,
          timeout.count() >= 0 ? (" of " + std::to_string(timeout.count() / 1000)).c_str() : "",
          line.c_str());
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace hoprelay::client
