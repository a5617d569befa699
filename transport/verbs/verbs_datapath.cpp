// Verbs transport: the per-message path. Posting data frames (SEND or RDMA WRITE with
// immediate, two SGEs straight from the slot), credit frames, receives, and the completion
// handling that turns them into the node's events. No allocation, no locks, no logging per
// message; errors are status codes that fail the link (its peer reconnects and replays).
#include <arpa/inet.h>

#include <algorithm>

#include "hoprelay/transport/dead_peer.h"
#include "verbs_transport.h"

namespace hoprelay::transport::verbs {
namespace {

// Signal one send in kSignalEvery: the completion also retires the unsignaled sends before it,
// which is all a send completion is needed for (acknowledgement comes as credit).
constexpr uint32_t kSignalEvery = 16;
constexpr int kPollBatch = 32;

// How long frames may sit unacknowledged, with no credit coming back, before the sender checks
// that the peer's QP is still there, and how many such intervals a signaled send may wait for
// its completion, with no other send completing, before the peer counts as dead
// (send_watchdog.h, dead_peer.h): VerbsTransport::probe_every() and dead_ticks(), from
// peer_dead_after.

// The reason text for a failed work completion (logged once, when the link fails).
std::string wc_error(const ibv_wc& wc) {
  return std::string("work completion error: ") + ibv_wc_status_str(wc.status) + " (vendor " +
         std::to_string(wc.vendor_err) + ")";
}

}  // namespace

// ---------------------------------------------------------------- inbound (receiver)

// The receives of the next `count` slots in ring order, chained: one ibv_post_recv (on rxe a
// system call) for up to kRecvChain of them, not one per slot.
bool VerbsInbound::post_receives(uint32_t count) {
  constexpr uint32_t kRecvChain = 32;
  ibv_recv_wr wrs[kRecvChain];
  ibv_sge sges[kRecvChain];
  while (count > 0) {
    const uint32_t n = std::min(count, kRecvChain);
    for (uint32_t i = 0; i < n; ++i) {
      const auto slot = static_cast<uint32_t>((receives_posted_ + i) % ring().slots());
      sges[i] = {reinterpret_cast<uint64_t>(ring().at(slot).frame), stride_,
                 conn_.region_a->lkey()};
      wrs[i] = ibv_recv_wr{};
      wrs[i].wr_id = make_wr_id(kRecvData, slot);
      wrs[i].sg_list = &sges[i];
      wrs[i].num_sge = 1;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(conn_.id->qp, wrs, &bad) != 0) return false;
    receives_posted_ += n;
    count -= n;
  }
  return true;
}

bool VerbsInbound::poll_cq() {
  if (!conn_.cq) return false;
  ibv_wc wc[kPollBatch];
  bool any = false;
  for (;;) {
    int n = ibv_poll_cq(conn_.cq.get(), kPollBatch, wc);
    if (n <= 0) return any;
    any = true;
    for (int i = 0; i < n; ++i) {
      if (state_ == State::kClosed) continue;  // flushed work after the link failed
      if (wc[i].status != IBV_WC_SUCCESS) {
        transport_.events().on_completion_error(ibv_wc_status_str(wc[i].status));
        fail(wc_error(wc[i]));
        continue;
      }
      switch (wr_kind(wc[i].wr_id)) {
        case kRecvData:
          on_data(wc[i]);
          break;
        case kSendControl:
          watch_.completed();
          sq_outstanding_ -= static_cast<uint32_t>(wr_value(wc[i].wr_id));
          if (returns_pending()) flush_returns();
          break;
        case kRecvAuth:
          on_auth(wc[i]);
          break;
        case kSendAuth:
          break;
        default:
          fail("completion of an unknown kind");
      }
    }
  }
}

// A data frame landed in the slot its receive was posted for: by SEND (byte_len tells the
// length) or by RDMA WRITE with immediate (the immediate names the slot and checks the length).
// Either way the header in the slot is the peer's and is validated before anything trusts it.
// A peer broke the protocol: counted by kind, then its link (and only its link) is closed.
void VerbsInbound::violation(const char* kind, std::string_view reason) {
  transport_.events().on_protocol_error(kind);
  fail(std::string("protocol violation: ") + std::string(reason));
}

void VerbsInbound::on_data(const ibv_wc& wc) {
  uint32_t slot_index = static_cast<uint32_t>(wr_value(wc.wr_id));
  uint32_t expected = ring().expected_index();
  if (slot_index != expected) return violation("bad_slot", "receive completed out of ring order");
  Slot& slot = ring().at(slot_index);
  FrameHeader h;
  WireLimits limits{ring().slot_size()};
  WireError err = decode_header(slot.frame, limits, h);
  if (err != WireError::kOk) return violation(reason_label(err).data(), reason_text(err));
  if (h.type != FrameType::kData) {
    return violation("unexpected_frame", "non-data frame in a data slot");
  }
  if (h.slot != expected) {
    return violation("bad_slot", "data frame names slot " + std::to_string(h.slot) + ", expected " +
                                     std::to_string(expected));
  }
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    uint32_t imm = ntohl(wc.imm_data);
    if (imm_slot(imm) != expected || !imm_matches_length(imm, h.length)) {
      return violation("bad_immediate", "immediate data disagrees with the frame header");
    }
  } else if (wc.opcode == IBV_WC_RECV) {
    if (wc.byte_len != kFrameHeaderSize + h.length) {
      return violation("bad_length", "received length disagrees with the frame header");
    }
  } else {
    return fail("unexpected receive opcode");
  }
  Slot* s = ring().acquire();
  if (!s) return violation("credit_overrun", "sender overran its credits");
  s->length = h.length;
  s->origin = h.origin;
  s->seq = h.seq;
  s->chunk = h.chunk;
  s->flags = h.flags;
  s->opcode = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? Opcode::kWrite : Opcode::kSend;
  // The sender posts its first frames as soon as its own ESTABLISHED arrives, and their
  // completions can reach us before ours does (the QP takes them from RTR on; data receives
  // are posted only once the peer is authenticated). The link comes up first, so that the
  // node knows it before its first message: a chunk from a link the node does not know
  // would be given back unseen.
  if (state_ == State::kAccepting) establish();
  transport_.events().on_message(*this, *s);
}

bool VerbsInbound::freed(uint32_t count) {
  if (post_receives(count)) return true;
  fail("ibv_post_recv failed");
  return false;
}

bool VerbsInbound::emit_outcome(std::span<const std::byte> frame) {
  if (sq_outstanding_ >= sq_depth_) return false;  // retried when a send completion retires some
  return post_control(frame.data(), static_cast<uint32_t>(frame.size()));
}

bool VerbsInbound::emit_header(const FrameHeader& header) {
  if (sq_outstanding_ >= sq_depth_) return false;  // retried when a send completion retires some
  // sq_depth_ header buffers, used in turn: the one this reuses was posted sq_depth_ sends ago,
  // and at most sq_depth_ are outstanding, so that send has completed.
  std::byte* buf = conn_.region_b->data() + (ctl_sent_ % sq_depth_) * kFrameHeaderSize;
  encode_header(header, buf);
  return post_control(buf, kFrameHeaderSize);
}

bool VerbsInbound::post_control(const std::byte* frame, uint32_t length) {
  ibv_sge sge{reinterpret_cast<uint64_t>(frame), length, conn_.region_b->lkey()};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = conn_.max_inline >= length ? IBV_SEND_INLINE : 0;
  ++unsignaled_;
  // Signal periodically, and whenever the queue is about to run out of room.
  if (unsignaled_ >= kSignalEvery || sq_outstanding_ + 1 >= sq_depth_) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    wr.wr_id = make_wr_id(kSendControl, unsignaled_);
    unsignaled_ = 0;
    watch_.posted();
  }
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(conn_.id->qp, &wr, &bad) != 0) {
    fail("ibv_post_send (credit) failed");
    return false;
  }
  ++sq_outstanding_;
  ++ctl_sent_;
  return true;
}

// Liveness: a receiver sends credits and outcomes; if one of those waits for its completion a
// whole dead-peer timeout, the sender's host is gone (send_watchdog.h) and the link fails
// (otherwise it would hold its ring, and a producer's origin, until the peer came back).
void VerbsInbound::schedule_watch() {
  watch_timer_ = transport_.loop().after(transport_.probe_every(), [this] {
    watch_timer_ = 0;
    if (state_ != State::kUp) return;
    if (watch_.tick(transport_.dead_ticks())) {
      return fail(dead_peer_reason(transport_.dead_after()));
    }
    schedule_watch();
  });
}

// ---------------------------------------------------------------- outbound (sender)

uint32_t VerbsOutbound::credits() const {
  if (state_ != State::kUp) return 0;
  uint32_t by_credit = ledger_.room();
  uint32_t by_queue = sq_depth_ - sq_outstanding_;
  return std::min(by_credit, by_queue);
}

bool VerbsOutbound::post_control_receive(uint32_t index) {
  ibv_sge sge{reinterpret_cast<uint64_t>(conn_->region_b->data() + index * kControlRecvSize),
              kControlRecvSize, conn_->region_b->lkey()};
  ibv_recv_wr wr{};
  wr.wr_id = make_wr_id(kRecvControl, index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(conn_->id->qp, &wr, &bad) == 0;
}

bool VerbsOutbound::post(const OutFrame& f) {
  // After the peer's BYE nothing more is sent: it waits for what it has to be acknowledged.
  if (state_ != State::kUp || ledger_.room() == 0 || sq_outstanding_ >= sq_depth_) {
    return false;
  }
  uint32_t slot = ledger_.next_slot();
  uint32_t idx = ledger_.index(ledger_.tail());
  std::byte* hdr = conn_->region_a->data() + size_t{idx} * kFrameHeaderSize;
  FrameHeader h{FrameType::kData};
  h.flags = f.flags;
  h.length = f.length;
  h.origin = f.origin;
  h.seq = f.seq;
  h.chunk = f.chunk;
  h.slot = slot;
  encode_header(h, hdr);
  // Zero copy: the header from our registered header array, the payload straight from the
  // slot (or producer buffer) it sits in.
  ibv_sge* sge = sges_[idx].data();
  sge[0] = {reinterpret_cast<uint64_t>(hdr), kFrameHeaderSize, conn_->region_a->lkey()};
  sge[1] = {reinterpret_cast<uint64_t>(f.payload), f.length, f.memory ? f.memory->lkey() : 0};
  ibv_send_wr& wr = wrs_[idx];
  wr = ibv_send_wr{};
  wr.sg_list = sge;
  wr.num_sge = f.length ? 2 : 1;
  if (params_.write) {
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(encode_imm(slot, f.length));
    wr.wr.rdma.remote_addr = peer_.ring_addr + uint64_t{slot} * peer_stride_;
    wr.wr.rdma.rkey = peer_.rkey;
  } else {
    wr.opcode = IBV_WR_SEND;
  }
  if (kFrameHeaderSize + f.length <= conn_->max_inline) wr.send_flags |= IBV_SEND_INLINE;
  ++unsignaled_;
  if (unsignaled_ >= kSignalEvery || sq_outstanding_ + 1 >= sq_depth_ ||
      ledger_.in_flight() + 1 >= cap_) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    wr.wr_id = make_wr_id(kSendData, unsignaled_);
    unsignaled_ = 0;
    watch_.posted();
  }
  // Doorbell batching: chained to the frames posted before it in this loop iteration and
  // handed to the device in one ibv_post_send at the end of the iteration (flush_posts). A
  // post is a doorbell; on rxe it is a system call.
  if (batch_len_ == 0) {
    batch_first_ = idx;
  } else {
    wrs_[batch_last_].next = &wr;
  }
  batch_last_ = idx;
  ++batch_len_;
  if (!flush_scheduled_) {
    flush_scheduled_ = true;
    transport_.flush_later(this);
  }
  ledger_.push(f);
  ++sq_outstanding_;
  return true;
}

void VerbsTransport::flush_later(VerbsOutbound* link) {
  to_flush_.push_back(link);
  if (to_flush_.size() > 1) return;
  loop_.defer([this] {
    flushing_.swap(to_flush_);
    for (VerbsOutbound* l : flushing_) {
      if (l) l->flush_posts();
    }
    flushing_.clear();
  });
}

void VerbsTransport::forget_flush(VerbsOutbound* link) {
  std::erase(to_flush_, link);
  std::replace(flushing_.begin(), flushing_.end(), link, static_cast<VerbsOutbound*>(nullptr));
}

void VerbsOutbound::flush_posts() {
  flush_scheduled_ = false;
  if (batch_len_ == 0) return;
  batch_len_ = 0;
  if (state_ != State::kUp) return;  // dropped meanwhile: the frames came back to the node
  wrs_[batch_last_].next = nullptr;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(conn_->id->qp, &wrs_[batch_first_], &bad); rc != 0) {
    // The frames are unacknowledged: the drop hands them back for replay.
    drop(std::string("ibv_post_send: ") + std::strerror(rc), true);
  }
}

bool VerbsOutbound::poll_cq() {
  if (!conn_ || !conn_->cq) return false;
  ibv_wc wc[kPollBatch];
  bool any = false;
  for (;;) {
    if (!conn_) return any;  // dropped while handling a completion
    int n = ibv_poll_cq(conn_->cq.get(), kPollBatch, wc);
    if (n <= 0) return any;
    any = true;
    for (int i = 0; i < n; ++i) {
      // Flushed work of a failed connection.
      if (state_ != State::kUp && state_ != State::kAuthenticating) continue;
      if (wc[i].status != IBV_WC_SUCCESS) {
        transport_.events().on_completion_error(ibv_wc_status_str(wc[i].status));
        drop(wc_error(wc[i]), true);
        continue;
      }
      switch (wr_kind(wc[i].wr_id)) {
        case kSendData:
        case kProbe:
          watch_.completed();
          sq_outstanding_ -= static_cast<uint32_t>(wr_value(wc[i].wr_id));
          break;
        case kRecvControl:
          on_control_frame(wc[i]);
          break;
        case kSendAuth:
          break;
        default:
          drop("completion of an unknown kind", true);
      }
    }
    if (state_ == State::kUp) transport_.events().on_credit(*this);
  }
}

void VerbsOutbound::on_control_frame(const ibv_wc& wc) {
  uint32_t index = static_cast<uint32_t>(wr_value(wc.wr_id));
  const std::byte* in = conn_->region_b->data() + size_t{index} * kControlRecvSize;
  FrameHeader h;
  WireError err = decode_header(in, WireLimits{}, h);
  if (err != WireError::kOk) return drop(reason_text(err), true);
  if (state_ == State::kAuthenticating) {
    if (h.type != FrameType::kWelcome || wc.byte_len != kFrameHeaderSize + h.length) {
      return drop("unexpected control frame while authenticating", true);
    }
    return on_welcome_frame(wc, h, in + kFrameHeaderSize);
  }
  if (h.type == FrameType::kOutcome && wc.byte_len == kFrameHeaderSize + h.length) {
    if (!on_outcome_frame(h, in + kFrameHeaderSize)) return;
    if (!post_control_receive(index)) return drop("ibv_post_recv failed", true);
    return;
  }
  if (wc.byte_len == kFrameHeaderSize && h.type == FrameType::kBye) {
    // The peer drains: what was sent is acknowledged as it passes, nothing more is sent.
    if (!post_control_receive(index)) return drop("ibv_post_recv failed", true);
    ledger_.peer_draining();
    close_if_drained();
    return;
  }
  if (wc.byte_len != kFrameHeaderSize || h.type != FrameType::kCredit) {
    return drop("unexpected control frame", true);
  }
  if (!post_control_receive(index)) return drop("ibv_post_recv failed", true);
  if (!ledger_.acknowledge(h.credits, ledger_.tail(),
                           [this](void* cookie) { transport_.events().on_acked(*this, cookie); })) {
    return drop("credit for frames never sent", true);
  }
  close_if_drained();
}

bool VerbsOutbound::close_if_drained() {
  if (!ledger_.drained() || state_ != State::kUp) return false;
  drop("the peer is shutting down and acknowledged everything sent to it", true, true);
  return true;
}

// An outcome names the slot its frame took in the peer's ring, and the frame's origin, seq and
// chunk: it must be a frame posted and not yet acknowledged, reported once.
bool VerbsOutbound::on_outcome_frame(const FrameHeader& h, const std::byte* body) {
  Outcome outcome;
  FrameLedger::Frame* frame = ledger_.outcome_target(h, ledger_.tail());
  if (!frame) {
    transport_.events().on_protocol_error("bad_outcome");
    drop("protocol violation: an outcome for a message this link did not send", true);
    return false;
  }
  if (!decode_outcome({body, h.length}, outcome)) {
    transport_.events().on_protocol_error("bad_outcome");
    drop("protocol violation: a malformed outcome", true);
    return false;
  }
  if (ledger_.current(*frame, "reported on")) {
    transport_.events().on_outcome(*this, frame->cookie, outcome);
  }
  return state_ == State::kUp;
}

// Liveness. An RC queue pair only notices a dead peer when it sends: frames in flight whose
// credits never come back (the peer's QP went into error, e.g. its netdev went down, and its
// disconnect request was lost) would wait forever. So while frames are unacknowledged and no
// credit arrived for a probe interval, post a zero-length RDMA WRITE to the peer's ring: it
// consumes no receive and writes nothing, but fails (retry exceeded, remote access error) if
// the peer's QP is gone, which fails the link, and the frames are replayed after reconnecting.
// A zero-length WRITE is checked against no memory key (IBA C9-88), so it works as well on a
// ring that is not remotely writable (ListenParams::remote_write).
// A peer that is merely slow (backpressure) acknowledges the probe at the transport level.
void VerbsOutbound::schedule_probe() {
  probe_timer_ = transport_.loop().after(transport_.probe_every(), [this] {
    probe_timer_ = 0;
    if (state_ != State::kUp) return;
    if (watch_.tick(transport_.dead_ticks())) {
      return drop(dead_peer_reason(transport_.dead_after()), true);
    }
    if (!ledger_.empty() && ledger_.acked() == acked_at_last_probe_) probe();
    acked_at_last_probe_ = ledger_.acked();
    if (state_ == State::kUp) schedule_probe();
  });
}

void VerbsOutbound::probe() {
  if (sq_outstanding_ >= sq_depth_) return;  // sends are pending: they will tell
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(kProbe, 1);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.num_sge = 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer_.ring_addr;
  wr.wr.rdma.rkey = peer_.rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(conn_->id->qp, &wr, &bad); rc != 0) {
    return drop(std::string("ibv_post_send (probe): ") + std::strerror(rc), true);
  }
  watch_.posted();
  ++sq_outstanding_;
}

}  // namespace hoprelay::transport::verbs
