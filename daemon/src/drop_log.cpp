#include "hoprelay/daemon/drop_log.h"

#include <cstring>

#include "hoprelay/transport/log.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("node");
  return *logger;
}

}  // namespace

std::string_view peer_of(const transport::InboundLink* link) {
  return link ? std::string_view(link->peer().name) : std::string_view();
}

void DropLog::note(const char* reason, std::string_view peer, std::string_view why, uint32_t origin,
                   uint64_t seq, uint64_t now_ns, uint64_t count) {
  Entry* entry = nullptr;
  for (auto& e : entries_) {
    if (e.reason == reason && e.peer == peer) {
      entry = &e;
      break;
    }
  }
  if (!entry) {
    entry = &entries_.emplace_back(
        Entry{reason, std::string(peer), std::string(why), LogThrottle(interval_ns_)});
  }
  if (!entry->throttle.note(now_ns, count)) return;
  log().warn(
      "dropped {} (origin {} seq {}{}): {} [{}]; further drops of this kind are counted in "
      "hoprelay_messages_dropped_total{{reason=\"{}\"}} and logged every {} s",
      count == 1 ? "a message" : std::to_string(count) + " messages", origin, seq,
      peer.empty() ? "" : ", " + std::string(peer), why, reason, reason,
      entry->throttle.interval_seconds());
}

void DropLog::flush(uint64_t now_ns) {
  for (auto& e : entries_) {
    uint64_t pending = 0, elapsed_ns = 0;
    if (!e.throttle.due(now_ns, pending, elapsed_ns)) continue;
    log().warn("dropped {} more message{} ({}{}) in the last {} s: {} [{}]; {} in all", pending,
               pending == 1 ? "" : "s", e.peer.empty() ? "" : e.peer + ", ", e.reason,
               elapsed_ns / 1'000'000'000u, e.why, e.reason, e.throttle.total());
  }
}

}  // namespace hoprelay::daemon
