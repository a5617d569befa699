// When a link gives up on a peer that stopped acknowledging: the same for every transport, so
// that an operator reads one number in the docs and the alerts whichever transport a host runs.
// A crashed host or a pulled cable sends no reset and no disconnect; without a bound of our
// own, verbs retries forever on rxe (retry_count 7) and TCP retransmits for about 15 minutes
// (tcp_retries2), while the sender's messages wait for acknowledgements that never come.
#pragma once

#include <chrono>
#include <string>

namespace hoprelay::transport {

// The bound is the topology's peer_dead_after (config/topology.h: kDefaultPeerDeadAfter, 10 s,
// is longer than any acknowledgement delay of a live peer, even under emulation: rxe in a TCG
// guest acknowledges within a second). A cable pulled for less may or may not fail the link,
// and either way nothing is lost.

// The reason a link fails with, in the log and in `hoprelay status`.
inline std::string dead_peer_reason(std::chrono::milliseconds after) {
  const int64_t ms = after.count();
  return "no transport acknowledgement from the peer for " +
         (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms") +
         ": its host is down or unreachable";
}

}  // namespace hoprelay::transport
