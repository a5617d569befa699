// What a link needs of the topology: where a peer listens, which transport carries it, and how
// completions are handled. The transports include this and not the whole model (topology.h),
// so that a change to the topology's nodes or stages does not reach them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hoprelay::config {

// "host:port" or "[v6]:port"; host is a literal IP address or a name resolvable at run time.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const;
  // "0.0.0.0" or "::": every address of the host, so not one a peer can expect it to send from.
  bool is_wildcard() const { return host == "0.0.0.0" || host == "::"; }
};

// Which transport carries a node's links ("auto": verbs where an RDMA device serves the
// address, else TCP).
enum class TransportKind { kAuto, kVerbs, kTcp };
// Completion handling: a completion channel (event) or busy polling.
enum class Poll { kEvent, kBusy };

std::string_view to_string(TransportKind v);
std::string_view to_string(Poll v);

}  // namespace hoprelay::config
