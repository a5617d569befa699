#include "hoprelay/daemon/drop_log.h"

#include <cstring>

#include "hoprelay/transport/log.h"

namespace hoprelay::daemon {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("node");
  return *logger;
}

}  // namespace

void DropLog::note(const char* reason, std::string_view peer, std::string_view why, uint32_t origin,
                   uint64_t seq, uint64_t now_ns, uint64_t count) {
  for (auto& e : entries_) {
    if (e.reason == reason && e.peer == peer) {
      e.pending += count;
      e.total += count;
      return;
    }
  }
  entries_.push_back({reason, std::string(peer), std::string(why), 0, count, now_ns});
  log().warn(
      "dropped {} (origin {} seq {}{}): {} [{}]; further drops of this kind are counted in "
      "hoprelay_messages_dropped_total{{reason=\"{}\"}} and logged every {} s",
      count == 1 ? "a message" : std::to_string(count) + " messages", origin, seq,
      peer.empty() ? "" : ", " + std::string(peer), why, reason, reason,
      interval_ns_ / 1'000'000'000u);
}

void DropLog::flush(uint64_t now_ns) {
  for (auto& e : entries_) {
    if (e.pending == 0 || now_ns - e.last_ns < interval_ns_) continue;
    log().warn("dropped {} more message{} ({}{}) in the last {} s: {} [{}]; {} in all", e.pending,
               e.pending == 1 ? "" : "s", e.peer.empty() ? "" : e.peer + ", ", e.reason,
               (now_ns - e.last_ns) / 1'000'000'000u, e.why, e.reason, e.total);
    e.pending = 0;
    e.last_ns = now_ns;
  }
}

}  // namespace hoprelay::daemon
