// Verbs: an inbound link's setup and teardown. Accepting a connect request (its ring, queues
// and receives), pre-shared key admission, coming up, failing and draining.
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

// ---------------------------------------------------------------- inbound setup

VerbsInbound::VerbsInbound(VerbsTransport& transport, rdma_cm_id* id, const HelloBody& hello,
                           std::span<const std::byte> cm_hello)
    : RingInbound(transport.loop()), transport_(transport) {
  std::memcpy(cm_hello_.data(), cm_hello.data(), kCmHelloSize);
  conn_.id.reset(id);
  id->context = static_cast<CmHandler*>(this);
  peer_.role = hello.role;
  peer_.name = hello.name;
  peer_.origin = hello.origin;
  peer_.topology_hash = hello.topology_hash;
  (void)agree(own_offer(), hello.offer, peer_.wire);  // (on_connect_request checked they meet)
  // IPv4 or IPv6: admission compares it with the declared host (node.cpp, host_of).
  const std::string addr = address_text(rdma_get_peer_addr(id), false);
  peer_.address = addr;
}

VerbsInbound::~VerbsInbound() {
  if (watch_timer_) transport_.loop().cancel(watch_timer_);
  if (setup_timer_) transport_.loop().cancel(setup_timer_);
  transport_.forget(this);
}

// This link's ring as the welcome tells it (the pre-shared key's challenge replaces the address
// and key until the peer has answered it).
CmWelcome VerbsInbound::welcome() {
  const ListenParams& lp = transport_.listen_params();
  return CmWelcome{lp.slots,
                   lp.slot_size,
                   conn_.region_a->rkey(),
                   reinterpret_cast<uint64_t>(conn_.region_a->data()),
                   transport_.identity().topology_hash,
                   transport_.events().resume_seq(peer_)};
}

void VerbsInbound::accept() {
  const ListenParams& lp = transport_.listen_params();
  const auto& key = transport_.identity().auth;
  ibv_pd* pd = transport_.pd_for(conn_.id->verbs);
  stride_ = SlotRing::stride_for(lp.slot_size);
  // The ring is the only memory this peer may write into, and only when peers of this node
  // send by WRITE (ListenParams::remote_write).
  conn_.region_a = transport_.take_ring(
      pd, SlotRing::size_for(lp.slots, lp.slot_size),
      IBV_ACCESS_LOCAL_WRITE | (lp.remote_write ? IBV_ACCESS_REMOTE_WRITE : 0));
  sq_depth_ = lp.slots + kControlSpare;
  // Credit frames to send, then the AUTH frame's receive buffer and our WELCOME's, then an
  // OUTCOME frame per slot (outcome_frames()).
  conn_.region_b = std::make_unique<VerbsRegion>(
      pd, size_t{sq_depth_} * kFrameHeaderSize + 2 * kAuthBuffer + size_t{lp.slots} * kOutcomeFrame,
      IBV_ACCESS_LOCAL_WRITE);
  conn_.cq = transport_.create_cq(conn_.id->verbs, sq_depth_ + lp.slots + 3, this);
  transport_.create_qp(conn_, sq_depth_, lp.slots);
  start_ring(conn_.region_a->data(), lp.slots, lp.slot_size, conn_.region_a.get(), outcome_frames(),
             kOutcomeFrame);
  CmWelcome w = welcome();
  if (key) {
    // A challenge instead of the ring: no address, no key, no data receive until the peer has
    // answered it (on_auth), so an impostor never gets to write a byte.
    w.rkey = 0;
    w.ring_addr = 0;
    w.auth = true;
    std::memcpy(w.nonce.data(), auth_.challenge().data(), kNonceSize);
    std::byte* buf = conn_.region_b->data() + size_t{sq_depth_} * kFrameHeaderSize;
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), kAuthBuffer, conn_.region_b->lkey()};
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(kRecvAuth, 0);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    check_rc(ibv_post_recv(conn_.id->qp, &wr, &bad), "ibv_post_recv (auth)");
  } else {
    authenticated_ = true;
    if (!post_receives(ring().slots()))
      throw TransportError("ibv_post_recv failed while accepting");
  }
  // Our offer behind the welcome (or the challenge), where version 6 reads nothing.
  std::array<std::byte, kCmChallengeSize + kOfferSize> pdata;
  encode_cm_welcome(w, pdata.data());
  const size_t welcome_size = w.auth ? kCmChallengeSize : kCmWelcomeSize;
  encode_offer(own_offer(), pdata.data() + welcome_size);
  rdma_conn_param param{};
  param.private_data = pdata.data();
  param.private_data_len = static_cast<uint8_t>(welcome_size + kOfferSize);
  param.responder_resources = 0;  // no RDMA READ in this protocol
  param.initiator_depth = 0;
  param.rnr_retry_count = kRnrRetry;
  check_rc(rdma_accept(conn_.id.get(), &param), "rdma_accept");
  setup_timer_ = transport_.loop().after(kSetupTimeout, [this] {
    setup_timer_ = 0;
    if (state_ != State::kAccepting) return;
    transport_.events().on_protocol_error("hello_timeout");
    log().warn("closing the link from {} ({}): not up within {} s of its acceptance{}", peer_.name,
               peer_.address, kSetupTimeout.count() / 1000,
               established_ ? ": no answer to the authentication challenge" : "");
    fail("setup timeout");
  });
}

void VerbsInbound::on_auth(const ibv_wc& wc) {
  std::byte* in = conn_.region_b->data() + size_t{sq_depth_} * kFrameHeaderSize;
  FrameHeader h;
  if (authenticated_ || wc.opcode != IBV_WC_RECV || wc.byte_len != kFrameHeaderSize + kAuthSize ||
      decode_header(in, WireLimits{}, h) != WireError::kOk || h.type != FrameType::kAuth ||
      h.length != kAuthSize) {
    return violation("bad_auth", "expected an AUTH frame answering the challenge");
  }
  const AuthKey& key = *transport_.identity().auth;
  if (auth_.check(key, cm_hello_, {in + kFrameHeaderSize, kAuthSize}) !=
      AuthAcceptor::Answer::kOk) {
    transport_.events().on_auth_failed(peer_);
    log().warn("rejected {} from {}: {}", peer_.name, peer_.address,
               AuthAcceptor::wrong_key_text(peer_.name));
    return fail("authentication failed");
  }
  if (!post_receives(ring().slots())) return fail("ibv_post_recv failed");
  // The ring's address and key, with our answer to the sender's nonce.
  CmWelcome w = welcome();
  std::byte* out = in + kAuthBuffer;
  FrameHeader wh{FrameType::kWelcome};
  wh.length = kCmWelcomeSize + kMacSize;
  encode_header(wh, out);
  encode_cm_welcome(w, out + kFrameHeaderSize);
  Mac proof = auth_.proof(key, {out + kFrameHeaderSize, kCmWelcomeSize});
  std::memcpy(out + kFrameHeaderSize + kCmWelcomeSize, proof.data(), kMacSize);
  if (!send_auth_frame(conn_.id->qp, out, wh.length, *conn_.region_b)) {
    return fail("ibv_post_send (welcome) failed");
  }
  authenticated_ = true;
  maybe_up();
}

void VerbsInbound::maybe_up() {
  if (state_ != State::kAccepting || !established_ || !authenticated_) return;
  state_ = State::kUp;
  if (setup_timer_) transport_.loop().cancel(setup_timer_);
  setup_timer_ = 0;
  log().info("inbound link up: {} from {} ({} slots, ingress by {}{}{})", peer_.name, peer_.address,
             ring().slots(),
             transport_.listen_params().remote_write
                 ? "WRITE with immediate or SEND"
                 : "SEND only: the ring is not remotely writable",
             transport_.identity().auth ? ", authenticated" : "", older_peer_text(peer_.wire));
  schedule_watch();
  transport_.events().on_inbound_up(*this);
  // Credits (and outcomes) of slots released before the link was up wait for it: without
  // this they would wait for ever, and so would the sender, out of credits. (A first data
  // frame now brings the link up before the node sees it: on_data().)
  if (state_ == State::kUp) flush_returns();
}

void VerbsInbound::on_cm_event(rdma_cm_event_type type, int status, std::span<const std::byte>) {
  switch (type) {
    case RDMA_CM_EVENT_ESTABLISHED:
      return establish();
    case RDMA_CM_EVENT_DISCONNECTED:
      return fail("peer disconnected");
    case RDMA_CM_EVENT_DEVICE_REMOVAL: {
      VerbsTransport& transport = transport_;  // fail() may hand this link to the reaper
      fail("RDMA device removed");
      return transport.device_lost();
    }
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      return fail(std::string(event_name(type)) + " (status " + std::to_string(status) + ")");
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return;
    default:
      log().debug("inbound {}: ignoring {}", peer_.name, event_name(type));
  }
}

void VerbsInbound::establish() {
  if (state_ != State::kAccepting || established_) return;
  tune_rnr_timer(conn_.id->qp);
  established_ = true;
  maybe_up();
}

void VerbsInbound::fail(std::string_view reason) {
  if (state_ == State::kClosed) return;
  bool was_up = state_ == State::kUp;
  state_ = State::kClosed;
  if (watch_timer_) transport_.loop().cancel(watch_timer_);
  watch_timer_ = 0;
  if (setup_timer_) transport_.loop().cancel(setup_timer_);
  setup_timer_ = 0;
  rdma_disconnect(conn_.id.get());
  // The QP goes now: no more DMA into the ring. The ring itself stays until the node has
  // released every slot it still holds.
  conn_.qp.reset();
  if (was_up && draining_) {
    log().info("inbound link from {} ({}) closed: {} (we drain)", peer_.name, peer_.address,
               reason);
    transport_.events().on_inbound_down(*this, reason);
  } else if (was_up) {
    log().warn("inbound link from {} ({}) closed: {}", peer_.name, peer_.address, reason);
    transport_.events().on_inbound_down(*this, reason);
  }
  if (slots_in_use() == 0) transport_.reap(this);
}

void VerbsInbound::drain() {
  if (state_ != State::kUp) return;
  draining_ = true;
  queue_bye();
  flush_returns();
}

void VerbsInbound::reap() {
  transport_.reap(this);
}

}  // namespace hoprelay::transport::verbs
