// TCP transport: the per-message path. Nothing here allocates or logs per message; the only
// per-message copies are of payload bytes that arrived together with their header in one read
// (small frames), large payloads are read straight into their slot.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "hoprelay/transport/dead_peer.h"
#include "hoprelay/transport/log.h"
#include "tcp_transport.h"

namespace hoprelay::transport::tcp {
namespace {

// Bytes read from one link per wakeup before yielding to the other links (fairness).
constexpr size_t kReadBudget = 1 << 20;
constexpr int kMaxIov = 64;
// Frames up to this size (header included) are copied together into one iovec per sendmsg;
// larger payloads go from their slot as they are (zero copy).
constexpr size_t kCoalesceFrame = 1024;
constexpr size_t kCoalesceBytes = 256 * 1024;
// While the payload of a frame of at least kDirectFrame bytes arrives straight into its slot, the
// same read takes at most kLookahead bytes of what follows it into the stream buffer: the next
// header, and the start of the next payload, which is then copied out again. With the whole
// stream buffer as lookahead, a backlogged socket filled it with most of the next large payload
// and every such payload was copied twice: 28 % of the relays' CPU with 256 KiB chunks, 10-15 %
// less CPU per GB without it (loopback, chain and one hop). Smaller frames keep the whole
// buffer: many of them per read beat a read per frame. At 64 KiB the copy out of the buffer was
// 15 % of a relay's CPU (bench/profile_hop.sh) and reading straight into the slot took 11 % less
// CPU per GB; at 16 KiB the read per frame cost more than the copy it saved.
constexpr size_t kDirectFrame = 64 * 1024;
constexpr size_t kLookahead = 4096;

spdlog::logger& log() {
  static auto logger = module_logger("tcp");
  return *logger;
}

}  // namespace

// Why a socket call failed, for the log and `hoprelay status`: ETIMEDOUT on an established link
// is the dead-peer bound of tune_socket(), which says more than "Connection timed out".
std::string TcpTransport::failure_reason(int err) const {
  return err == ETIMEDOUT ? dead_peer_reason(dead_after_) : std::string(std::strerror(err));
}

// ---------------------------------------------------------------- TcpInbound

void TcpInbound::on_io(uint32_t events) {
  if (state_ == State::kClosed) return;
  if (state_ == State::kTls) return continue_tls();
  if (events & EPOLLOUT) flush_control();
  if (state_ == State::kClosed) return;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_some();
}

// Reads until the socket is empty or the budget is spent. False when the link closed.
bool TcpInbound::read_some() {
  size_t budget = kReadBudget;
  // Past the budget, TLS's decrypted bytes are still read: the socket's readiness would not
  // bring the loop back for them (at most a record, 16 KiB).
  while ((budget > 0 || (tls_ && tls_->pending())) && state_ != State::kClosed) {
    ssize_t n;
    if (partial_) {
      // The rest of a payload goes straight into its slot, what follows it in the stream into
      // the stream buffer, in one call (a read for the payload and another for the next header
      // measured slower than copying: two system calls per frame).
      const size_t want = partial_->length - partial_have_;
      iovec iov[2] = {{partial_->payload() + partial_have_, want},
                      {rx_.data(), partial_->length >= kDirectFrame ? kLookahead : rx_.size()}};
      n = link_readv(fd_, tls_.get(), iov, 2);
      if (n > 0) {
        budget -= std::min(budget, size_t(n));
        if (size_t(n) < want) {
          partial_have_ += static_cast<uint32_t>(n);
          continue;
        }
        rx_begin_ = 0;  // the buffer was empty: start_data() took all of it
        rx_end_ = size_t(n) - want;
        Slot* done = std::exchange(partial_, nullptr);
        deliver(*done);
        if (state_ == State::kClosed) return false;
        if (!parse_buffered()) return false;
        continue;
      }
    } else {
      if (rx_begin_ == rx_end_) rx_begin_ = rx_end_ = 0;
      if (rx_end_ == rx_.size()) {  // compact: a partial header or control frame at the end
        std::memmove(rx_.data(), rx_.data() + rx_begin_, rx_end_ - rx_begin_);
        rx_end_ -= rx_begin_;
        rx_begin_ = 0;
      }
      n = link_recv(fd_, tls_.get(), rx_.data() + rx_end_, rx_.size() - rx_end_);
      if (n > 0) {
        rx_end_ += size_t(n);
        budget -= std::min(budget, size_t(n));
        if (!parse_buffered()) return false;
        continue;
      }
    }
    if (n == 0) {
      if (partial_ || rx_end_ != rx_begin_) {
        protocol_error("truncated", "peer closed the connection in the middle of a frame");
      } else {
        fail("peer closed the connection", draining_);
      }
      return false;
    }
    if (errno == EAGAIN || errno == EINTR) return true;
    fail(errno == EPROTO && tls_ ? tls_->why() : transport_.failure_reason(errno));
    return false;
  }
  return state_ != State::kClosed;
}

// Consumes whole frames (and the start of a data frame's payload) from the stream buffer.
bool TcpInbound::parse_buffered() {
  while (!partial_ && rx_end_ - rx_begin_ >= kFrameHeaderSize && state_ != State::kClosed) {
    FrameHeader h;
    WireError err = decode_header(rx_.data() + rx_begin_, limits_, h);
    if (err != WireError::kOk && state_ == State::kHello && rx_[rx_begin_] == std::byte{0x16} &&
        rx_[rx_begin_ + 1] == std::byte{0x03}) {
      // A TLS record (handshake, TLS 1.x): a peer with tls in its topology, this node without.
      protocol_error("tls_unexpected",
                     "a TLS client (its first bytes are a TLS handshake), and this node has no "
                     "tls: give it the same tls table as its peers (docs/security.md), or remove "
                     "the peer's");
      return false;
    }
    if (err != WireError::kOk) {
      protocol_error(reason_label(err).data(), err == WireError::kBadVersion
                                                   ? version_mismatch_text(rx_.data() + rx_begin_)
                                                   : std::string(reason_text(err)));
      return false;
    }
    if (h.type == FrameType::kData) {
      if (!start_data(h)) return false;
      continue;
    }
    size_t whole = kFrameHeaderSize + h.length;
    if (rx_end_ - rx_begin_ < whole) break;  // control frame not complete yet
    std::span<const std::byte> body{rx_.data() + rx_begin_ + kFrameHeaderSize, h.length};
    rx_begin_ += whole;
    if (h.type == FrameType::kHello && state_ == State::kHello) {
      handle_hello(h, body);
    } else if (h.type == FrameType::kAuth && state_ == State::kAuth) {
      handle_auth(h, body);
    } else if (h.type == FrameType::kBye) {
      fail("peer closed the link (bye)", true);
      return false;
    } else {
      protocol_error("unexpected_frame", "unexpected frame type on an inbound link");
      return false;
    }
  }
  return state_ != State::kClosed;
}

// A data frame header is at rx_begin_: claim its slot and copy what has arrived of it.
bool TcpInbound::start_data(const FrameHeader& h) {
  if (state_ != State::kUp) {
    protocol_error("data_before_hello", "data before the hello was admitted");
    return false;
  }
  if (h.slot != ring().expected_index()) {
    protocol_error("bad_slot", "data frame names slot " + std::to_string(h.slot) + ", expected " +
                                   std::to_string(ring().expected_index()));
    return false;
  }
  Slot* slot = ring().acquire();
  if (!slot) {
    protocol_error("credit_overrun", "sender overran its credits");
    return false;
  }
  std::memcpy(slot->frame, rx_.data() + rx_begin_, kFrameHeaderSize);
  slot->length = h.length;
  slot->origin = h.origin;
  slot->seq = h.seq;
  slot->chunk = h.chunk;
  slot->flags = h.flags;
  slot->opcode = Opcode::kTcp;
  rx_begin_ += kFrameHeaderSize;
  size_t have = std::min<size_t>(h.length, rx_end_ - rx_begin_);
  std::memcpy(slot->payload(), rx_.data() + rx_begin_, have);
  rx_begin_ += have;
  if (have < h.length) {
    partial_ = slot;
    partial_have_ = static_cast<uint32_t>(have);
    return true;
  }
  deliver(*slot);
  return state_ != State::kClosed;
}

void TcpInbound::deliver(Slot& slot) {
  transport_.events().on_message(*this, slot);
}

bool TcpInbound::queue_control(const FrameHeader& h, std::span<const std::byte> body) {
  std::array<std::byte, kFrameHeaderSize + kMaxControlPayload + kMacSize> frame;
  if (body.size() > frame.size() - kFrameHeaderSize) {
    fail("control frame too large");
    return false;
  }
  encode_header(h, frame.data());
  // An empty body (BYE) may have no data pointer at all: memcpy must not see it.
  if (!body.empty()) std::memcpy(frame.data() + kFrameHeaderSize, body.data(), body.size());
  return queue_bytes(std::span(frame).first(kFrameHeaderSize + body.size()));
}

bool TcpInbound::queue_bytes(std::span<const std::byte> frame) {
  if (try_queue(frame)) return true;
  fail("control backlog overflow");
  return false;
}

bool TcpInbound::try_queue(std::span<const std::byte> frame) {
  const size_t need = frame.size();
  if (ctl_off_ == ctl_len_) ctl_off_ = ctl_len_ = 0;
  if (ctl_len_ + need > ctl_.size() && ctl_off_ > 0) {  // what was sent makes room
    std::memmove(ctl_.data(), ctl_.data() + ctl_off_, ctl_len_ - ctl_off_);
    ctl_len_ -= ctl_off_;
    ctl_off_ = 0;
  }
  if (ctl_len_ + need > ctl_.size()) return false;
  std::memcpy(ctl_.data() + ctl_len_, frame.data(), need);
  ctl_len_ += need;
  return true;
}

bool TcpInbound::emit_header(const FrameHeader& header) {
  std::array<std::byte, kFrameHeaderSize> frame;
  encode_header(header, frame.data());
  return try_queue(frame);
}

void TcpInbound::send_control(const FrameHeader& h, std::span<const std::byte> body) {
  if (queue_control(h, body)) flush_control();
}

// Writes queued control bytes, and the outcomes, credits and BYE that RingInbound has waiting
// as they fit. False when the link closed.
bool TcpInbound::flush_control() {
  for (;;) {
    flush_returns();
    if (state_ == State::kClosed) return false;
    if (ctl_off_ == ctl_len_) break;
    ssize_t n = link_send(fd_, tls_.get(), ctl_.data() + ctl_off_, ctl_len_ - ctl_off_);
    if (n > 0) {
      ctl_off_ += size_t(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    fail(n == 0                    ? "send returned 0"
         : errno == EPROTO && tls_ ? tls_->why()
                                   : transport_.failure_reason(errno));
    return false;
  }
  bool want = ctl_off_ != ctl_len_;
  if (want != want_write_) {
    want_write_ = want;
    update_interest();
  }
  return true;
}

// ---------------------------------------------------------------- TcpOutbound

uint32_t TcpOutbound::credits() const {
  return state_ == State::kUp ? ledger_.room() : 0;
}

void TcpOutbound::on_io(uint32_t events) {
  switch (state_) {
    case State::kConnecting:
      on_connected();
      return;
    case State::kTls:
      continue_tls();
      return;
    case State::kHello:
    case State::kUp:
      if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (!read_control()) return;
      }
      if ((events & EPOLLOUT) && state_ == State::kUp) flush();
      return;
    default:
      return;
  }
}

// Reads credit (and, during the handshake, welcome/reject) frames. False when dropped.
bool TcpOutbound::read_control() {
  for (;;) {
    ssize_t n = link_recv(fd_, tls_.get(), rx_.data() + rx_len_, rx_.size() - rx_len_);
    if (n == 0) {
      drop("peer closed the connection", true);
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return true;
      // Over TLS 1.3 a peer that refuses this node's certificate says so (its alert) only
      // after the handshake ended here: at this first read.
      if (errno == EPROTO && tls_) {
        const std::string why = tls_->why();  // drop() frees the session, and its text
        if (state_ == State::kHello) {
          refuse_tls(why);
        } else {
          drop(why, true);
        }
        return false;
      }
      drop(transport_.failure_reason(errno), true);
      return false;
    }
    rx_len_ += size_t(n);
    size_t off = 0;
    while (rx_len_ - off >= kFrameHeaderSize) {
      FrameHeader h;
      WireError err = decode_header(rx_.data() + off, WireLimits{}, h);
      if (err != WireError::kOk) {
        drop(err == WireError::kBadVersion ? version_mismatch_text(rx_.data() + off)
                                           : std::string(reason_text(err)),
             true);
        return false;
      }
      if (rx_len_ - off < kFrameHeaderSize + h.length) break;
      std::span<const std::byte> body{rx_.data() + off + kFrameHeaderSize, h.length};
      off += kFrameHeaderSize + h.length;
      if (h.type == FrameType::kCredit && state_ == State::kUp) {
        if (!handle_credit(h)) return false;
      } else if (h.type == FrameType::kOutcome && state_ == State::kUp) {
        if (!handle_outcome(h, body)) return false;
      } else if (h.type == FrameType::kWelcome && state_ == State::kHello) {
        handle_welcome(h, body);
      } else if (h.type == FrameType::kChallenge && state_ == State::kHello) {
        handle_challenge(h, body);
      } else if (h.type == FrameType::kReject) {
        std::string reason(reinterpret_cast<const char*>(body.data()), body.size());
        log().warn("{} refused this node: {}", peer_name_, reason);
        // Retried (at the slowest backoff): the peer may run an older topology that a reload
        // will fix.
        backoff_.slowest();
        drop("rejected by peer: " + reason, true);
        transport_.events().on_refused(*this, reason);
        return false;
      } else if (h.type == FrameType::kBye && state_ == State::kUp) {
        // The peer drains: what was sent is acknowledged as it passes, nothing more is sent.
        ledger_.peer_draining();
        if (close_if_drained()) return false;
      } else if (h.type == FrameType::kBye) {
        drop("peer is shutting down", true, true);
        return false;
      } else {
        drop("unexpected frame type on an outbound link", true);
        return false;
      }
      if (state_ != State::kUp && state_ != State::kHello) return false;
    }
    std::memmove(rx_.data(), rx_.data() + off, rx_len_ - off);
    rx_len_ -= off;
  }
}

bool TcpOutbound::handle_credit(const FrameHeader& h) {
  if (!ledger_.acknowledge(h.credits, written_,
                           [this](void* cookie) { transport_.events().on_acked(*this, cookie); })) {
    drop("credit for frames never sent", true);
    return false;
  }
  if (state_ != State::kUp) return false;
  if (close_if_drained()) return false;
  transport_.events().on_credit(*this);
  return true;
}

bool TcpOutbound::close_if_drained() {
  if (!ledger_.drained() || state_ != State::kUp) return false;
  drop("the peer is shutting down and acknowledged everything sent to it", true, true);
  return true;
}

// An outcome names the slot its frame took in the peer's ring, and the frame's origin, seq and
// chunk: it must be a frame written and not yet acknowledged, reported once.
bool TcpOutbound::handle_outcome(const FrameHeader& h, std::span<const std::byte> body) {
  Outcome outcome;
  FrameLedger::Frame* frame = ledger_.outcome_target(h, written_);
  if (!frame) {
    transport_.events().on_protocol_error("bad_outcome");
    drop("protocol violation: an outcome for a message this link did not send", true);
    return false;
  }
  if (!decode_outcome(body, outcome)) {
    transport_.events().on_protocol_error("bad_outcome");
    drop("protocol violation: a malformed outcome", true);
    return false;
  }
  if (ledger_.current(*frame, "reported on")) {
    transport_.events().on_outcome(*this, frame->cookie, outcome);
  }
  return state_ == State::kUp;
}

bool TcpOutbound::post(const OutFrame& f) {
  // After the peer's BYE nothing more is sent: it waits for what it has to be acknowledged.
  if (state_ != State::kUp || ledger_.room() == 0) return false;
  TxEntry& e = tx_[ledger_.index(ledger_.tail())];
  FrameHeader h{FrameType::kData};
  h.flags = f.flags;
  h.length = f.length;
  h.origin = f.origin;
  h.seq = f.seq;
  h.chunk = f.chunk;
  h.slot = ledger_.next_slot();
  encode_header(h, e.header.data());
  e.payload = f.payload;
  e.length = f.length;
  ledger_.push(f);
  schedule_flush();
  return true;
}

// Posts coalesce: one writev per loop iteration for everything posted during it.
void TcpOutbound::schedule_flush() {
  if (flush_scheduled_ || want_write_) return;
  flush_scheduled_ = true;
  transport_.loop().defer([this] {
    flush_scheduled_ = false;
    if (state_ == State::kUp) flush();
  });
}

void TcpOutbound::flush() {
  if (coalesce_.empty()) coalesce_.resize(kCoalesceBytes);
  while (written_ < ledger_.tail()) {
    iovec iov[kMaxIov];
    int n_iov = 0;
    size_t used = 0;  // bytes of coalesce_ in this sendmsg
    size_t skip = written_off_;
    for (uint64_t i = written_; i < ledger_.tail() && n_iov + 2 <= kMaxIov; ++i) {
      TxEntry& e = tx_[ledger_.index(i)];
      const size_t whole = kFrameHeaderSize + e.length;
      if (skip == 0 && whole <= kCoalesceFrame) {
        // A small frame is copied next to the previous one: one iovec for a run of them.
        // The kernel walks iovecs one by one, and two per 64-byte message cost more than
        // this copy (and capped a sendmsg at 32 messages).
        if (used + whole > coalesce_.size()) break;
        std::byte* at = coalesce_.data() + used;
        std::memcpy(at, e.header.data(), kFrameHeaderSize);
        if (e.length) std::memcpy(at + kFrameHeaderSize, e.payload, e.length);
        if (n_iov > 0 &&
            static_cast<std::byte*>(iov[n_iov - 1].iov_base) + iov[n_iov - 1].iov_len == at) {
          iov[n_iov - 1].iov_len += whole;
        } else {
          iov[n_iov++] = {at, whole};
        }
        used += whole;
        continue;
      }
      if (skip < kFrameHeaderSize) {
        iov[n_iov++] = {e.header.data() + skip, kFrameHeaderSize - skip};
        skip = 0;
      } else {
        skip -= kFrameHeaderSize;
      }
      if (e.length > skip) {
        iov[n_iov++] = {const_cast<std::byte*>(e.payload) + skip, e.length - skip};
      }
      skip = 0;
    }
    ssize_t n = link_sendv(fd_, tls_.get(), iov, n_iov);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      drop(errno == EPROTO && tls_ ? tls_->why() : transport_.failure_reason(errno), true);
      return;
    }
    // Advance over fully written frames.
    size_t left = size_t(n) + written_off_;
    while (written_ < ledger_.tail()) {
      size_t whole = kFrameHeaderSize + tx_[ledger_.index(written_)].length;
      if (left < whole) break;
      left -= whole;
      ++written_;
    }
    written_off_ = left;
  }
  bool want = written_ < ledger_.tail();
  if (want != want_write_) {
    want_write_ = want;
    update_interest();
  }
}

}  // namespace hoprelay::transport::tcp
