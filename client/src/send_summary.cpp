// `hoprelay send`'s summary (send_summary.h).
#include "send_summary.h"

#include <unistd.h>

#include "hoprelay/config/topology.h"
#include "stop_signals.h"

namespace hoprelay::client {

namespace {

std::string json_text(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

bool wait_all(const SendOptions& o, const Spooled& spooled, SpoolWaitResult& result) {
  if (spooled.empty()) {
    if (!o.json) std::printf("every host has every message: none of it waited in a spool\n");
    return true;
  }
  const config::Topology topology =
      config::load_topology(o.topology, config::PluginCheck{config::PluginCheck::Mode::kNone, ""});
  result = wait_for_spools(topology, spooled, std::chrono::milliseconds(o.wait_all_ms),
                           ::isatty(STDERR_FILENO), [] { return stop_signal() != 0; });
  if (result.behind.empty()) {
    if (!o.json) {
      std::printf(
          "every host has every message: the spools that held part of it drained in %.1f s\n",
          result.seconds);
    }
    return true;
  }
  for (const auto& b : result.behind) {
    std::string hosts;
    for (const auto& h : b.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
    std::fprintf(stderr,
                 "hoprelay send: not every host has everything yet after %.0f s: %s (%llu of this "
                 "stream's messages were spooled at %s for %s: %s)\n",
                 result.seconds, hosts.c_str(), static_cast<unsigned long long>(b.spooled),
                 b.at.c_str(), b.branch.c_str(), b.why.c_str());
  }
  return false;
}

void print_json(uint32_t origin, uint64_t messages, uint64_t bytes, double secs, uint64_t delivered,
                const Outcomes& outcomes, bool waited, const SpoolWaitResult& wait, bool complete,
                int code) {
  std::string spooled = "[";
  for (const auto& [key, n] : outcomes.spooled()) {
    const SpoolWaitResult::Behind* behind = nullptr;
    for (const auto& b : wait.behind) {
      if (b.at == key.first && b.branch == key.second) behind = &b;
    }
    std::string left =
        waited ? (behind && behind->left >= 0 ? std::to_string(static_cast<uint64_t>(behind->left))
                  : behind                    ? "null"
                                              : "0")
               : "null";
    spooled += (spooled.size() > 1 ? ", " : "") + std::string("{\"at\": ") + json_text(key.first) +
               ", \"for\": " + json_text(key.second) + ", \"messages\": " + std::to_string(n) +
               ", \"left\": " + left +
               (behind ? ", \"why\": " + json_text(behind->why) : std::string()) + "}";
  }
  spooled += "]";
  std::printf(
      "{\"origin\": %u, \"messages\": %llu, \"bytes\": %llu, \"seconds\": %.3f, \"delivered\": "
      "%llu, \"dropped\": %llu, \"repeats\": %llu, \"drops\": %s, \"spooled\": %s, "
      "\"waited_seconds\": %.1f, \"complete\": %s, \"exit\": %d}\n",
      origin, static_cast<unsigned long long>(messages), static_cast<unsigned long long>(bytes),
      secs, static_cast<unsigned long long>(delivered),
      static_cast<unsigned long long>(outcomes.dropped()),
      static_cast<unsigned long long>(outcomes.repeats()), outcomes.drops_json().c_str(),
      spooled.c_str(), wait.seconds, complete ? "true" : "false", code);
}

}  // namespace hoprelay::client
