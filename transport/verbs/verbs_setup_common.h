// What the verbs transport's setup files share (verbs_setup.cpp: memory, device, the transport
// and its rdma_cm and completion events; verbs_inbound_setup.cpp; verbs_outbound_setup.cpp):
// the limits of connection setup and a few helpers. Internal to transport/verbs; the datapath
// (verbs_datapath.cpp) has constants of its own.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>

#include "verbs_transport.h"

namespace hoprelay::transport::verbs {

inline constexpr int kResolveTimeoutMs = 2000;
// Credits guarantee a posted receive for every message, so an RNR NAK means a bug or a dead
// peer: retry a few times, then fail the link (7 would mean "retry forever", a silent hang).
inline constexpr uint8_t kRnrRetry = 3;
// RNR NAK timer advertised by our receive side: 0.64 ms (encoding 12 of the IB spec table)
// instead of the 655 ms that encoding 0 means.
inline constexpr uint8_t kMinRnrTimer = 12;
inline constexpr uint8_t kRetryCount = 7;
inline constexpr uint32_t kControlSpare = 4;
inline constexpr auto kConnectTimeout = std::chrono::milliseconds(5000);
// From rdma_accept to up (ESTABLISHED, and the AUTH frame when the link authenticates): a peer
// that never gets there must not keep the registered ring, its QP and CQ (TCP's hello timer).
inline constexpr auto kSetupTimeout = std::chrono::milliseconds(10000);

spdlog::logger& log();
// Whether the port an rdma_cm id is bound to is ACTIVE (setup path: a query of the device).
bool port_active(const rdma_cm_id& id);
void set_nonblocking(int fd);
bool to_sockaddr(const config::Endpoint& ep, sockaddr_storage& out);
// SENDs the AUTH or WELCOME frame encoded at `frame` (in `region`), signaled, as kSendAuth.
bool send_auth_frame(ibv_qp* qp, const std::byte* frame, uint32_t payload,
                     const VerbsRegion& region);
const char* event_name(rdma_cm_event_type t);
// Sets the responder's RNR timer once the QP is in RTS (rdma_cm leaves it at its default).
void tune_rnr_timer(ibv_qp* qp);

}  // namespace hoprelay::transport::verbs
