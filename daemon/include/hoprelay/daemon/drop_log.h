// Warnings for the messages a node gives up (docs/operations.md, "Dropped messages"): every
// kind of drop is logged at warning level, rate-limited per (reason, peer), so a stuck stage or
// a peer that is down cannot flood the journal (LogThrottle: the first drop of a kind at once,
// with the message's origin and sequence number, then one line per interval with how many
// more). The counters (hoprelay_messages_dropped_total) count every one.
//
// On the data path only when a message is dropped: a linear search of a few entries and an
// integer add; a line is formatted for the first drop of a kind and then once per interval.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/daemon/log_throttle.h"

namespace hoprelay::transport {
class InboundLink;
}

namespace hoprelay::daemon {

// The `peer` of a drop of a message that came on `link`: its peer's name (empty for none).
std::string_view peer_of(const transport::InboundLink* link);

class DropLog {
 public:
  explicit DropLog(std::chrono::seconds interval = std::chrono::seconds(5))
      : interval_ns_(static_cast<uint64_t>(interval.count()) * 1'000'000'000u) {}

  // `reason`: the metric label (a string literal); `peer`: the link the message came from, or
  // for a downstream's drops the peer it was for; `why`: the sentence for a person.
  void note(const char* reason, std::string_view peer, std::string_view why, uint32_t origin,
            uint64_t seq, uint64_t now_ns, uint64_t count = 1);
  // Once a second (Node::tick): a line per kind with drops since its last line, when the
  // interval has passed.
  void flush(uint64_t now_ns);

 private:
  struct Entry {
    const char* reason;
    std::string peer;
    std::string why;
    LogThrottle throttle;
  };
  uint64_t interval_ns_;
  std::vector<Entry> entries_;
};

}  // namespace hoprelay::daemon
