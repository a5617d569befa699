// Verbs: an outbound link's setup and teardown. Resolving and connecting (with a bound), its
// queues and control receives, pre-shared key admission, coming up, dropping (the
// unacknowledged frames go back newest first) and reconnecting with backoff.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "hoprelay/transport/address.h"
#include "hoprelay/transport/log.h"
#include "verbs_setup_common.h"

namespace hoprelay::transport::verbs {

// ---------------------------------------------------------------- outbound setup

VerbsOutbound::VerbsOutbound(VerbsTransport& transport, ConnectParams params)
    : transport_(transport), params_(std::move(params)) {
  peer_name_ = params_.peer_name;
}

VerbsOutbound::~VerbsOutbound() {
  transport_.forget_flush(this);
  if (timer_) transport_.loop().cancel(timer_);
  if (probe_timer_) transport_.loop().cancel(probe_timer_);
  if (conn_) transport_.forget(this);
  conn_.reset();
}

void VerbsOutbound::start() {
  timer_ = 0;
  if (state_ == State::kClosed) return;
  conn_ = std::make_unique<Connection>();
  rdma_cm_id* raw = nullptr;
  sockaddr_storage sa{};
  if (rdma_create_id(transport_.cm_channel(), &raw, static_cast<CmHandler*>(this), RDMA_PS_TCP) !=
          0 ||
      !to_sockaddr(params_.address, sa)) {
    return drop("cannot create an rdma_cm id or resolve " + params_.address.host, true);
  }
  conn_->id.reset(raw);
  state_ = State::kResolving;
  // Resolve, connect and (with a key) authenticate within a bound, as over TCP. rdma_cm's own
  // limit is far longer (its REQ retries take ~100 s under rxe), and a connect request lost
  // while a port comes back up (netdev down and up) would hold the link that long.
  timer_ = transport_.loop().after(kConnectTimeout, [this] {
    timer_ = 0;
    // Asked before drop(), which hands the id to the graveyard.
    bool timed_out = state_ == State::kConnecting && conn_ && port_active(*conn_->id);
    drop("connection not established within 5 s", true);
    if (timed_out) transport_.events().on_connect_timeout(*this);
  });
  // A node sends from the address it listens on: the one its peers expect it to come from
  // (admission checks the source address against the topology).
  sockaddr_storage src{};
  sockaddr* from = nullptr;
  const config::Endpoint& own = transport_.listen_params().address;
  if (!own.host.empty() && !own.is_wildcard() && to_sockaddr({own.host, 0}, src) &&
      src.ss_family == sa.ss_family) {
    from = reinterpret_cast<sockaddr*>(&src);
  }
  if (rdma_resolve_addr(raw, from, reinterpret_cast<sockaddr*>(&sa), kResolveTimeoutMs) != 0) {
    return drop(std::string("rdma_resolve_addr: ") + std::strerror(errno), true);
  }
}

void VerbsOutbound::on_route_resolved() {
  try {
    cap_ = std::min<uint32_t>(params_.expected_slots, 1u << kImmSlotBits);
    sq_depth_ = cap_ + kControlSpare;
    // Between two polls of this side the receiver may send, for every frame it releases, an
    // outcome and a credit frame (each release in an iteration of its own), then a BYE: a
    // receive for each, or its sends meet an empty queue (RNR) and its link fails.
    ctl_depth_ = 2 * cap_ + kControlSpare;
    ibv_pd* pd = transport_.pd_for(conn_->id->verbs);
    // Data frame headers, then the AUTH frame (pre-shared key admission).
    conn_->region_a = std::make_unique<VerbsRegion>(
        pd, size_t{cap_} * kFrameHeaderSize + kAuthBuffer, IBV_ACCESS_LOCAL_WRITE);
    conn_->region_b = std::make_unique<VerbsRegion>(pd, size_t{ctl_depth_} * kControlRecvSize,
                                                    IBV_ACCESS_LOCAL_WRITE);
    conn_->cq = transport_.create_cq(conn_->id->verbs, sq_depth_ + ctl_depth_ + 2, this);
    transport_.create_qp(*conn_, sq_depth_, ctl_depth_);
    for (uint32_t i = 0; i < ctl_depth_; ++i) {
      if (!post_control_receive(i)) throw TransportError("ibv_post_recv failed");
    }
  } catch (const TransportError& e) {
    return drop(e.what(), true);
  }
  HelloBody hello;
  const Identity& id = transport_.identity();
  hello.role = id.role;
  std::strncpy(hello.name, id.name.c_str(), kMaxNodeName);
  hello.origin = id.origin;
  hello.offer = own_offer();  // (in the last 8 bytes, when the name leaves them free)
  encode_cm_hello(hello, cm_hello_.data());
  rdma_conn_param param{};
  param.private_data = cm_hello_.data();
  param.private_data_len = kCmHelloSize;
  param.responder_resources = 0;
  param.initiator_depth = 0;
  param.retry_count = kRetryCount;
  param.rnr_retry_count = kRnrRetry;
  state_ = State::kConnecting;
  if (rdma_connect(conn_->id.get(), &param) != 0) {
    return drop(std::string("rdma_connect: ") + std::strerror(errno), true);
  }
}

void VerbsOutbound::on_established(std::span<const std::byte> private_data) {
  CmWelcome w;
  if (!decode_cm_welcome(private_data, w)) return drop("malformed welcome", true);
  const auto& key = transport_.identity().auth;
  if (auto why = AuthConnector::mismatch(w.auth, key != nullptr)) return refuse_peer(*why);
  // The receiver's offer behind its welcome; version 6 sends none (the rest of the private
  // data is zero then: no offer).
  const size_t welcome_size = w.auth ? kCmChallengeSize : kCmWelcomeSize;
  const WireOffer offer = private_data.size() >= welcome_size + kOfferSize
                              ? decode_offer(private_data.data() + welcome_size)
                              : WireOffer{};
  if (!agree(own_offer(), offer, wire_)) {  // (a receiver of our range rejects us first)
    log().error("not sending to {} at {}: {}", peer_name_, params_.address.to_string(),
                no_common_version_text(own_offer(), offer));
    backoff_.slowest();
    return drop("no common wire protocol version", true);
  }
  peer_ = w;
  if (w.auth) return send_auth();
  link_up();
}

void VerbsOutbound::send_auth() {
  const AuthKey& key = *transport_.identity().auth;
  std::byte* out = conn_->region_a->data() + conn_->region_a->size() - kAuthBuffer;
  auth_ = AuthConnector{};
  auth_.answer(key, peer_.nonce, cm_hello_, out + kFrameHeaderSize);  // a fresh one: cannot fail
  FrameHeader a{FrameType::kAuth};
  a.length = kAuthSize;
  encode_header(a, out);
  if (!send_auth_frame(conn_->id->qp, out, kAuthSize, *conn_->region_a)) {
    return drop("ibv_post_send (auth)", true);
  }
  state_ = State::kAuthenticating;  // the connect timer (start()) still runs
}

void VerbsOutbound::on_welcome_frame(const ibv_wc& wc, const FrameHeader& h,
                                     const std::byte* body) {
  CmWelcome w;
  if (h.length != kCmWelcomeSize + kMacSize || !decode_cm_welcome({body, kCmWelcomeSize}, w) ||
      w.auth) {
    return drop("malformed welcome", true);
  }
  const AuthKey& key = *transport_.identity().auth;
  if (auto why = auth_.check_welcome(key, {body, kCmWelcomeSize}, {body + kCmWelcomeSize, kMacSize},
                                     peer_name_)) {
    return refuse_peer(*why);
  }
  if (!post_control_receive(static_cast<uint32_t>(wr_value(wc.wr_id)))) {
    return drop("ibv_post_recv failed", true);
  }
  peer_ = w;
  link_up();
}

void VerbsOutbound::refuse_peer(std::string_view why) {
  log().error("not sending to {} at {}: {}", peer_name_, params_.address.to_string(), why);
  backoff_.slowest();
  drop(std::string("authentication: ") + std::string(why), true);
}

void VerbsOutbound::link_up() {
  if (timer_) transport_.loop().cancel(timer_);
  timer_ = 0;
  if (peer_.topology_hash != transport_.identity().topology_hash) {
    log().warn("{} runs a different topology file (hash {:016x}, ours {:016x})", peer_name_,
               peer_.topology_hash, transport_.identity().topology_hash);
  }
  peer_stride_ = SlotRing::stride_for(peer_.slot_size);
  if (peer_.slots > cap_) {
    log().warn("{} grants {} slots but the topology says {}: using {}", peer_name_, peer_.slots,
               cap_, cap_);
  }
  cap_ = std::min(cap_, peer_.slots);
  peer_next_seq_ = peer_.next_seq;
  ledger_.reset(cap_, peer_.slots);
  wrs_.assign(cap_, ibv_send_wr{});
  sges_.assign(cap_, {});
  batch_len_ = 0;
  sq_outstanding_ = 0;
  unsignaled_ = 0;
  backoff_.reset();
  tune_rnr_timer(conn_->id->qp);
  state_ = State::kUp;
  log().info("outbound link up: {} at {} ({} credits, forwarding by {}{}{})", peer_name_,
             params_.address.to_string(), cap_,
             params_.write ? "RDMA WRITE with immediate" : "SEND",
             transport_.identity().auth ? ", authenticated" : "", older_peer_text(wire_));
  acked_at_last_probe_ = 0;
  watch_.reset();
  schedule_probe();
  transport_.events().on_outbound_up(*this);
  transport_.events().on_credit(*this);
}

void VerbsOutbound::on_cm_event(rdma_cm_event_type type, int status,
                                std::span<const std::byte> private_data) {
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(conn_->id.get(), kResolveTimeoutMs) != 0) {
        drop(std::string("rdma_resolve_route: ") + std::strerror(errno), true);
      }
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return on_route_resolved();
    case RDMA_CM_EVENT_ESTABLISHED:
      return on_established(private_data);
    case RDMA_CM_EVENT_REJECTED: {
      // A consumer reject carries our peer's reason; others (no listener yet) are the normal
      // start-up order and only logged at debug level.
      std::string reason(
          reinterpret_cast<const char*>(private_data.data()),
          strnlen(reinterpret_cast<const char*>(private_data.data()), private_data.size()));
      if (!reason.empty()) {
        log().warn("{} refused this node: {}", peer_name_, reason);
        backoff_.slowest();
      }
      drop("rejected (status " + std::to_string(status) + ")" +
               (reason.empty() ? "" : ": " + reason),
           true);
      if (!reason.empty()) transport_.events().on_refused(*this, reason);
      return;
    }
    case RDMA_CM_EVENT_UNREACHABLE: {
      // rdma_cm's own REQ retries ran out (only when they are shorter than kConnectTimeout).
      bool timed_out =
          state_ == State::kConnecting && status == -ETIMEDOUT && conn_ && port_active(*conn_->id);
      drop(std::string(event_name(type)) + " (status " + std::to_string(status) + ")", true);
      if (timed_out) transport_.events().on_connect_timeout(*this);
      return;
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return drop(std::string(event_name(type)) + " (status " + std::to_string(status) + ")", true);
    case RDMA_CM_EVENT_DISCONNECTED:
      if (state_ == State::kAuthenticating) {
        return refuse_peer(
            "it closed the connection on our answer to its challenge: is its auth_key_file the "
            "same as ours?");
      }
      return drop("peer disconnected", true);
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      drop("RDMA device removed", true);
      return transport_.device_lost();
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return;
    default:
      log().debug("outbound {}: ignoring {}", peer_name_, event_name(type));
  }
}

void VerbsOutbound::drop(std::string_view reason, bool retry, bool planned) {
  bool was_up = state_ == State::kUp;
  bool connected = was_up || state_ == State::kAuthenticating;
  if (timer_) transport_.loop().cancel(timer_);
  timer_ = 0;
  if (probe_timer_) transport_.loop().cancel(probe_timer_);
  probe_timer_ = 0;
  state_ = retry ? State::kBackoff : State::kClosed;
  if (conn_) {
    transport_.forget(this);
    if (connected) rdma_disconnect(conn_->id.get());
    transport_.bury(std::move(conn_));
  }
  // Everything not acknowledged goes back to the node, newest first (the batch not yet handed
  // to the device included).
  batch_len_ = 0;
  const uint64_t returned =
      ledger_.return_all([this](void* cookie) { transport_.events().on_returned(*this, cookie); });
  if (was_up) {
    report_down(transport_.events(), reason, retry, returned, planned);
  } else {
    log().debug("connect to {} failed: {}", peer_name_, reason);
  }
  if (retry) schedule_reconnect();
}

void VerbsOutbound::schedule_reconnect() {
  state_ = State::kBackoff;
  timer_ = transport_.loop().after(backoff_.next(), [this] { start(); });
}

void VerbsOutbound::close() {
  if (state_ == State::kClosed) return;
  drop("closed", false);
}

}  // namespace hoprelay::transport::verbs
