// TCP transport: the TLS handshake of a link (docs/security.md, "TLS on TCP links"), the state
// each end is in between the connect and the hello when the node has `tls`, and what each end
// does with a peer that does not match it. The session itself is tls_stream.h's.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "hoprelay/transport/log.h"
#include "tcp_transport.h"

namespace hoprelay::transport::tcp {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("tcp");
  return *logger;
}

}  // namespace

// ---------------------------------------------------------------- TcpInbound

void TcpInbound::continue_tls() {
  // A clear-text peer's first bytes are a frame header ("HR"), never a TLS record (0x14-0x17).
  std::byte first{};
  if (::recv(fd_, &first, 1, MSG_PEEK) == 1 && first == std::byte{'H'}) return refuse_clear_text();
  switch (tls_->handshake()) {
    case TlsStream::Step::kWantRead:
      transport_.loop().modify(fd_, EPOLLIN, this);
      return;
    case TlsStream::Step::kWantWrite:
      transport_.loop().modify(fd_, EPOLLIN | EPOLLOUT, this);
      return;
    case TlsStream::Step::kFailed: {
      const std::string why = tls_->why();  // fail() frees the session, and its text
      transport_.events().on_protocol_error("tls");
      log().warn("refused a connection from {}: {}", peer_.address, why);
      return fail(why);
    }
    case TlsStream::Step::kDone:
      break;
  }
  state_ = State::kHello;
  transport_.loop().modify(fd_, EPOLLIN, this);
  // The hello may have come with the handshake's last flight: read what TLS holds already.
  read_some();
}

void TcpInbound::refuse_clear_text() {
  const std::string reason =
      "node " + transport_.identity().name +
      " takes TLS only: give the connecting side the same tls table (docs/security.md)";
  transport_.events().on_protocol_error("tls_required");
  log().warn(
      "refused a clear-text connection from {}: this node takes TLS only (tls in the "
      "topology); the peer needs a tls table too",
      peer_.address);
  // In clear text, so that the peer can read and log it.
  std::vector<std::byte> out(kFrameHeaderSize + reason.size());
  FrameHeader r{FrameType::kReject};
  r.length = static_cast<uint32_t>(std::min<size_t>(reason.size(), kMaxControlPayload));
  encode_header(r, out.data());
  std::memcpy(out.data() + kFrameHeaderSize, reason.data(), r.length);
  ::send(fd_, out.data(), kFrameHeaderSize + r.length, MSG_NOSIGNAL | MSG_DONTWAIT);
  tls_.reset();
  fail("clear text to a node that takes TLS only");
}

// ---------------------------------------------------------------- TcpOutbound

void TcpOutbound::continue_tls() {
  switch (tls_->handshake()) {
    case TlsStream::Step::kWantRead:
      transport_.loop().modify(fd_, EPOLLIN, this);
      return;
    case TlsStream::Step::kWantWrite:
      transport_.loop().modify(fd_, EPOLLOUT, this);
      return;
    case TlsStream::Step::kFailed:
      return refuse_tls(std::string(tls_->why()));  // a copy: drop() frees the session
    case TlsStream::Step::kDone:
      break;
  }
  log().debug("TLS with {}: {}", peer_name_, tls_->description());
  send_hello();
}

void TcpOutbound::refuse_tls(std::string_view why) {
  // A certificate or a peer without TLS stays wrong until an operator fixes it: logged as an
  // error, retried slowly (as a refused key).
  log().error("not sending to {} at {}: {}", peer_name_, params_.address.to_string(), why);
  backoff_.slowest();
  const std::string reason(why);  // drop() frees the session that holds it
  drop(reason, true);
  // A refusal, not a link that failed: a producer that is opening gives up with the reason
  // (HOPRELAY_EREFUSED) instead of waiting out its connect timeout for a head that runs.
  transport_.events().on_refused(*this, reason);
}

}  // namespace hoprelay::transport::tcp
