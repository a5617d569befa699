// What a link needs of the topology: where a peer listens, which transport carries it, how
// completions are handled, and how long it waits for a silent peer. The transports include this and
// not the whole model (topology.h), so that a change to the topology's nodes or stages does not
// reach them.
#pragma once

#include <chrono>
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

// peer_dead_after: how long a link waits for the peer's host to acknowledge what it sent (TCP's
// ACKs; over verbs a send's completion) before it fails, as after a power loss or a pulled
// cable. Shorter than half a second fails links on a few lost packets in a row (a TCP
// retransmission waits at least 200 ms, an RC one about a second on RoCE); above ten minutes,
// TCP's own retransmissions (about 15) decide anyway. The default keeps the bound of every
// release so far (docs/transport.md, "Dead peers").
inline constexpr std::chrono::milliseconds kMinPeerDeadAfter{500};
inline constexpr std::chrono::milliseconds kMaxPeerDeadAfter = std::chrono::minutes(10);
inline constexpr std::chrono::milliseconds kDefaultPeerDeadAfter = std::chrono::seconds(10);

std::string_view to_string(TransportKind v);
std::string_view to_string(Poll v);

}  // namespace hoprelay::config
