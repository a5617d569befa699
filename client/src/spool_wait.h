// `hoprelay send --wait-all`: after every message is acknowledged, the wait until every host has
// every message. A message acknowledged while a branch was spooled (its outcome says "spooled at
// X for Y") is on X's disk, not yet at Y and the hosts below it; Y has it once X's spool for it
// has drained, which X's metrics say (hoprelay_spool_messages{peer="Y"}, sampled once a second:
// the first look is 1.2 s in, so that a sample taken after the stream's last message is seen).
// So the wait polls those nodes' metrics endpoints until every such spool is empty or the time
// is up, says on a terminal what it waits for, and in the end names each host that does not
// have everything yet and why (the spool's node unreachable, the branch's link down, or only
// still sending).
// A spool holds every origin's messages for its branch: with other producers sending to the
// same branch, "empty" may come later than this stream's own messages arrived, never earlier.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hoprelay/config/topology.h"

namespace hoprelay::client {

// (node that spooled, the branch it spooled for) -> messages of this stream so spooled.
using Spooled = std::map<std::pair<std::string, std::string>, uint64_t>;

struct SpoolWaitResult {
  struct Behind {
    std::string at, branch;  // the spool's node and branch
    uint64_t spooled = 0;    // this stream's messages spooled there
    double left = -1;        // messages (and end marks) in that spool at the end; -1: unknown
    std::vector<std::string> hosts;  // the branch's peer and every node below it
    std::string why;                 // what keeps them (for the line and the summary)
  };
  std::vector<Behind> behind;  // empty: every host has every message
  double seconds = 0;          // how long it waited
};

// Waits up to `timeout` (negative: as long as it takes) for every spool in `spooled` to drain,
// polling once a second; `progress`: a line a second on standard error meanwhile. Returns at
// once, with what is behind, when a spool's node has no metrics address or `stop()` says so.
SpoolWaitResult wait_for_spools(const config::Topology& topology, const Spooled& spooled,
                                std::chrono::milliseconds timeout, bool progress, bool (*stop)());

// The branch's peer and every node below it (its subtree), in topology order.
std::vector<std::string> hosts_below(const config::Topology& topology, const std::string& peer);

}  // namespace hoprelay::client
