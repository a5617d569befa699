// TCP transport: everything that is not the per-message path. Listening, accepting,
// connecting with backoff, the hello/welcome handshake, and closing.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "hoprelay/transport/address.h"
#include "hoprelay/transport/dead_peer.h"
#include "hoprelay/transport/log.h"
#include "tcp_transport.h"

namespace hoprelay::transport::tcp {
namespace {

constexpr auto kHandshakeTimeout = std::chrono::milliseconds(5000);
constexpr size_t kRxBuffer = 256 * 1024;
// Control bytes waiting for the socket: outcomes beyond it wait in RingInbound.
constexpr size_t kCtlBuffer = 16 * 1024;
// SO_BUSY_POLL in busy mode, the value the kernel's documentation suggests. Our sockets are
// non-blocking, so a read that finds one empty polls the device's queue once, not for this long.
constexpr int kBusyPollMicros = 50;

spdlog::logger& log() {
  static auto logger = module_logger("tcp");
  return *logger;
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return "?";
  return address_text(reinterpret_cast<const sockaddr*>(&ss));
}

}  // namespace

HeapRegion::HeapRegion(size_t bytes)
    : MemoryRegion(
          static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095})),
          bytes) {
  if (!data_) throw TransportError("out of memory allocating " + std::to_string(bytes) + " bytes");
}

HeapRegion::~HeapRegion() {
  std::free(data_);
}

// ---------------------------------------------------------------- TcpTransport

TcpTransport::TcpTransport(EventLoop& loop, LinkEvents& events, Identity identity,
                           config::Poll poll, std::chrono::milliseconds dead_after)
    : loop_(loop),
      events_(events),
      identity_(std::move(identity)),
      busy_(poll == config::Poll::kBusy),
      dead_after_(dead_after) {
  // Busy: the loop never sleeps in epoll_wait, so a frame is read on the next turn of the spin
  // instead of after the wake-up of a sleeping thread. That trades a core for latency.
  loop_.set_spin(busy_);
  log().info("{}", busy_ ? "busy polling (poll = \"busy\"): the event loop spins on its sockets"
                         : "socket events (poll = \"event\"): the event loop sleeps until a "
                           "socket is ready");
}

TcpTransport::~TcpTransport() {
  stop_listening();
  inbound_.clear();
  if (busy_) loop_.set_spin(false);
}

void TcpTransport::tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // A peer whose host died or whose cable was pulled sends no FIN or RST: without these the
  // kernel retransmits for about 15 minutes (tcp_retries2) while the messages wait for it, and
  // an idle link never notices. Data unacknowledged for dead_after_ (peer_dead_after) fails the
  // socket with ETIMEDOUT; so does an idle link whose keepalive probes (from half of it of
  // silence, at least 1 s, one a second) go unanswered that long, since TCP_USER_TIMEOUT also
  // bounds keepalive. Backpressure never
  // trips it: credits keep a sender from filling a receiver that still reads. A receiver whose
  // daemon stops reading altogether (frozen, SIGSTOP) leaves a zero window, which Linux also
  // gives up on after the timeout even though the probes are answered: that link fails and
  // replays like any other, where over verbs the NIC acknowledges for the frozen daemon and its
  // service watchdog restarts it (docs/transport.md).
  const int64_t dead_ms = dead_after_.count();
  int user_timeout_ms = static_cast<int>(dead_ms);
  int idle_s = static_cast<int>(std::clamp<int64_t>(dead_ms / 2000, 1, 2)), interval_s = 1;
  int probes = static_cast<int>(std::max<int64_t>(1, (dead_ms + 999) / 1000));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
  if (!busy_ || busy_poll_refused_) return;
  // Lets a read that finds the socket empty poll the NIC's receive queue instead of waiting
  // for its interrupt (no effect on loopback, which has no such queue). Kernels that check
  // CAP_NET_ADMIN for raising it above net.core.busy_read refuse it without; the spin alone
  // still saves the wake-up, so a refusal is worth one debug line, not a warning.
  int usec = kBusyPollMicros;
  if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &usec, sizeof(usec)) != 0) {
    busy_poll_refused_ = true;
    log().debug("SO_BUSY_POLL not set ({}): busy polling spins on the event loop only",
                std::strerror(errno));
  }
}

void TcpTransport::speak_for(Transport& owner) {
  auto* tcp = dynamic_cast<TcpTransport*>(&owner);
  if (!tcp) {
    throw TransportError("TCP links cannot act for a " + std::string(owner.name()) + " transport");
  }
  listen_.address = tcp->listen_.address;  // what outbound links send from
}

void TcpTransport::listen(const ListenParams& params) {
  listen_ = params;
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string where = params.address.to_string();
  if (!resolve(params.address, addr, len, true)) {
    throw TransportError("cannot resolve listen address " + where +
                         ": check `listen` in the topology");
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw TransportError(std::string("socket(): ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) < 0) {
    int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) {
      throw TransportError("listen address " + where +
                           " is already in use: another process (or another hoprelayd for "
                           "this node) holds the port; stop it or change `listen` in the "
                           "topology");
    }
    if (err == EADDRNOTAVAIL) {
      throw TransportError("listen address " + where +
                           " is not an address of this host: is this the right --node?");
    }
    throw TransportError("cannot bind " + where + ": " + std::strerror(err));
  }
  if (::listen(fd, 128) < 0) {
    int err = errno;
    ::close(fd);
    throw TransportError("cannot listen on " + where + ": " + std::strerror(err));
  }
  listen_fd_ = fd;
  loop_.add(fd, EPOLLIN, this);
  log().info("listening on {} ({} slots of {} bytes per inbound link)", where, params.slots,
             params.slot_size);
}

void TcpTransport::stop_listening() {
  if (accept_pause_) loop_.cancel(accept_pause_);
  accept_pause_ = 0;
  if (listen_fd_ < 0) return;
  loop_.remove(listen_fd_);
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void TcpTransport::on_io(uint32_t) {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM) {
        log().warn("accept: {}", std::strerror(errno));
      } else {
        // The connection stays queued and the socket readable: watched, it would spin the
        // loop (and this log). Not watched for a second; links already up go on meanwhile.
        log().warn("accept: {}: not accepting connections for 1 s", std::strerror(errno));
        loop_.modify(listen_fd_, 0, this);
        accept_pause_ = loop_.after(std::chrono::seconds(1), [this] {
          accept_pause_ = 0;
          if (listen_fd_ >= 0) loop_.modify(listen_fd_, EPOLLIN, this);
        });
      }
      return;
    }
    tune_socket(fd);
    inbound_.push_back(std::make_unique<TcpInbound>(*this, fd, peer_address(fd)));
  }
}

void TcpTransport::reap(TcpInbound* link) {
  // Deferred: the link may be in the middle of its own on_io() right now.
  loop_.defer(
      [this, link] { std::erase_if(inbound_, [link](const auto& p) { return p.get() == link; }); });
}

std::unique_ptr<OutboundLink> TcpTransport::connect(const ConnectParams& params) {
  auto link = std::make_unique<TcpOutbound>(*this, params);
  link->start();
  return link;
}

std::unique_ptr<MemoryRegion> TcpTransport::allocate(size_t bytes) {
  return std::make_unique<HeapRegion>(bytes);
}

// ---------------------------------------------------------------- TcpInbound setup

TcpInbound::TcpInbound(TcpTransport& transport, int fd, std::string address)
    // Only a hello fits until the peer is admitted: strangers cost little memory.
    : RingInbound(transport.loop()),
      transport_(transport),
      fd_(fd),
      rx_(kFrameHeaderSize + kMaxControlPayload) {
  peer_.address = std::move(address);
  if (const auto& tls = transport_.identity().tls) {
    tls_ = std::make_unique<TlsStream>(*tls, fd_, true, "");
    state_ = State::kTls;
  }
  transport_.loop().add(fd_, EPOLLIN, this);
  hello_timer_ = transport_.loop().after(kHandshakeTimeout, [this] {
    hello_timer_ = 0;
    protocol_error("hello_timeout",
                   tls_ ? "no TLS handshake and hello within 5 s" : "no hello within 5 s");
  });
}

TcpInbound::~TcpInbound() {
  if (hello_timer_) transport_.loop().cancel(hello_timer_);
  // Still open here only when the transport goes with the node (a stop, after the drain): a
  // link that failed was closed by fail(). The sender cannot tell a planned stop from a crash
  // by the connection's end (the kernel closes a killed process's sockets the same way), so
  // this end says BYE, and the sender logs it at info; a crash sends none and stays a warning.
  if (fd_ >= 0 && state_ == State::kUp) say_bye();
  tls_.reset();  // before its socket closes
  if (fd_ >= 0) {
    transport_.loop().remove(fd_);
    ::close(fd_);
  }
}

void TcpInbound::say_bye() {
  // Best effort, without blocking: what is left of a control frame under way (so that BYE
  // starts on a frame boundary), then BYE. Credits not yet sent stay unsent, as on any close:
  // the sender keeps those messages and replays them.
  std::vector<std::byte> out(ctl_.begin() + ctl_off_, ctl_.begin() + ctl_len_);
  out.resize(out.size() + kFrameHeaderSize);
  encode_header(FrameHeader{FrameType::kBye}, out.data() + out.size() - kFrameHeaderSize);
  link_send(fd_, tls_.get(), out.data(), out.size());
}

void TcpInbound::handle_hello(const FrameHeader& h, std::span<const std::byte> body) {
  HelloBody hello;
  if (h.length != kHelloSize || !decode_hello(body, hello)) {
    return protocol_error("bad_hello", "malformed hello");
  }
  transport_.loop().cancel(hello_timer_);
  hello_timer_ = 0;
  peer_.role = hello.role;
  peer_.name = hello.name;
  if (tls_) {
    peer_.tls = true;
    peer_.certificate_names = tls_->peer_names();
  }
  peer_.topology_hash = hello.topology_hash;
  peer_.origin = hello.origin;
  // The offer rides in the header's seq, which version 6 sends as 0 and never reads.
  const WireOffer offer = offer_of_field(h.seq);
  if (!agree(own_offer(), offer, peer_.wire)) {
    return reject(no_common_version_text(own_offer(), offer));
  }
  std::string reason;
  if (!transport_.events().admit(peer_, reason)) return reject(reason);
  if (!transport_.identity().auth) return admitted(false);
  // The name is one the topology declares; now the peer proves it holds the key.
  std::memcpy(hello_.data(), body.data(), kHelloSize);
  FrameHeader c{FrameType::kChallenge};
  c.length = kNonceSize;
  send_control(c, auth_.challenge());
  if (state_ == State::kClosed) return;  // the send failed: reaped, no timer for it
  state_ = State::kAuth;
  hello_timer_ = transport_.loop().after(kHandshakeTimeout, [this] {
    hello_timer_ = 0;
    protocol_error("hello_timeout", "no answer to the authentication challenge within 5 s");
  });
}

void TcpInbound::handle_auth(const FrameHeader& h, std::span<const std::byte> body) {
  if (h.length != kAuthSize) return protocol_error("bad_auth", "malformed auth frame");
  transport_.loop().cancel(hello_timer_);
  hello_timer_ = 0;
  if (auth_.check(*transport_.identity().auth, hello_, body.first(h.length)) !=
      AuthAcceptor::Answer::kOk) {
    transport_.events().on_auth_failed(peer_);
    return reject(AuthAcceptor::wrong_key_text(peer_.name));
  }
  admitted(true);
}

void TcpInbound::reject(std::string_view reason) {
  log().warn("rejected {} from {}: {}", peer_.name, peer_.address, reason);
  FrameHeader r{FrameType::kReject};
  r.length = static_cast<uint32_t>(std::min<size_t>(reason.size(), kMaxControlPayload));
  send_control(r, {reinterpret_cast<const std::byte*>(reason.data()), r.length});
  state_ = State::kClosed;  // nothing more is read; the reject is flushed, then closed
  tls_.reset();
  ::shutdown(fd_, SHUT_WR);
  transport_.loop().remove(fd_);
  ::close(fd_);
  fd_ = -1;
  transport_.reap(this);
}

void TcpInbound::admitted(bool authenticated) {
  if (peer_.topology_hash != transport_.identity().topology_hash) {
    log().warn("{} at {} runs a different topology file (hash {:016x}, ours {:016x})", peer_.name,
               peer_.address, peer_.topology_hash, transport_.identity().topology_hash);
  }
  const ListenParams& lp = transport_.listen_params();
  memory_ = transport_.allocate(SlotRing::size_for(lp.slots, lp.slot_size));
  outcomes_.resize(size_t{lp.slots} * kMaxOutcomeFrame);
  start_ring(memory_->data(), lp.slots, lp.slot_size, memory_.get(), outcomes_.data(),
             kMaxOutcomeFrame);
  limits_.max_data_payload = lp.slot_size;
  rx_.resize(kRxBuffer);
  ctl_.resize(kCtlBuffer);
  WelcomeBody w{lp.slots, lp.slot_size, transport_.identity().topology_hash,
                transport_.events().resume_seq(peer_)};
  std::array<std::byte, kWelcomeSize + kMacSize> body_out;
  encode_welcome(w, body_out.data());
  FrameHeader wh{FrameType::kWelcome};
  wh.length = kWelcomeSize;
  wh.seq = offer_field(own_offer());  // (a sender of version 6 reads no header field here)
  if (authenticated) {
    // Our answer: the sender checks it before it sends a single message.
    Mac proof = auth_.proof(*transport_.identity().auth, std::span(body_out).first(kWelcomeSize));
    std::memcpy(body_out.data() + kWelcomeSize, proof.data(), kMacSize);
    wh.length += kMacSize;
  }
  // Up only once the welcome went out: a peer that reset the connection meanwhile fails the
  // send, and the link closes as one never admitted (reaped), not as one the node must know.
  send_control(wh, std::span(body_out).first(wh.length));
  if (state_ == State::kClosed) return;
  state_ = State::kUp;
  log().info("inbound link up: {} from {}{}{}{}", peer_.name, peer_.address,
             authenticated ? " (authenticated)" : "", older_peer_text(peer_.wire),
             tls_ ? "; " + tls_->description() : std::string());
  transport_.events().on_inbound_up(*this);
}

void TcpInbound::protocol_error(const char* kind, std::string_view reason) {
  if (state_ == State::kClosed) return;
  transport_.events().on_protocol_error(kind);
  log().warn("closing the link from {} ({}): protocol violation: {}",
             peer_.name.empty() ? "an unadmitted peer" : peer_.name, peer_.address, reason);
  fail(reason);
}

void TcpInbound::fail(std::string_view reason, bool clean) {
  if (state_ == State::kClosed) return;
  bool was_up = state_ == State::kUp;
  state_ = State::kClosed;
  if (hello_timer_) transport_.loop().cancel(hello_timer_);
  hello_timer_ = 0;
  tls_.reset();
  transport_.loop().remove(fd_);
  ::close(fd_);
  fd_ = -1;
  // A frame whose payload never completed was never delivered: its slot goes back here.
  if (partial_) {
    ring().release(*partial_);
    partial_ = nullptr;
  }
  if (was_up) {
    if (clean) {
      log().info("inbound link from {} ({}) closed by the peer", peer_.name, peer_.address);
    } else {
      log().warn("inbound link from {} ({}) closed: {}", peer_.name, peer_.address, reason);
    }
    transport_.events().on_inbound_down(*this, reason);
  } else {
    log().info("connection from {} closed before admission: {}", peer_.address, reason);
  }
  if (slots_in_use() == 0) transport_.reap(this);
}

void TcpInbound::drain() {
  if (state_ != State::kUp) return;
  draining_ = true;
  queue_bye();
  flush_control();
}

void TcpInbound::reap() {
  transport_.reap(this);
}

void TcpInbound::update_interest() {
  if (fd_ < 0) return;
  uint32_t ev = EPOLLIN | (want_write_ ? uint32_t{EPOLLOUT} : 0u);
  transport_.loop().modify(fd_, ev, this);
}

// ---------------------------------------------------------------- TcpOutbound setup

TcpOutbound::TcpOutbound(TcpTransport& transport, ConnectParams params)
    : transport_(transport), params_(std::move(params)) {
  peer_name_ = params_.peer_name;
}

TcpOutbound::~TcpOutbound() {
  if (timer_) transport_.loop().cancel(timer_);
  if (fd_ >= 0) {
    transport_.loop().remove(fd_);
    ::close(fd_);
  }
}

void TcpOutbound::start() {
  timer_ = 0;
  if (state_ == State::kClosed) return;
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!resolve(params_.address, addr, len, false)) {
    log().warn("cannot resolve {} for {}; retrying", params_.address.to_string(), peer_name_);
    return schedule_reconnect();
  }
  fd_ = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return schedule_reconnect();
  transport_.tune_socket(fd_);
  // A node sends from the address it listens on: that is the address its peers expect it to
  // come from (admission checks the source address against the topology).
  const config::Endpoint& own = transport_.listen_params().address;
  if (!own.host.empty() && !own.is_wildcard()) {
    sockaddr_storage src{};
    socklen_t src_len = 0;
    config::Endpoint any_port{own.host, 0};
    if (resolve(any_port, src, src_len, true) && src.ss_family == addr.ss_family &&
        ::bind(fd_, reinterpret_cast<sockaddr*>(&src), src_len) != 0) {
      log().debug("cannot send from {}: {}", own.host, std::strerror(errno));
    }
  }
  ++connects_;
  int rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), len);
  if (rc < 0 && errno != EINPROGRESS) {
    ::close(fd_);
    fd_ = -1;
    return schedule_reconnect();
  }
  state_ = State::kConnecting;
  transport_.loop().add(fd_, EPOLLOUT, this);
  timer_ = transport_.loop().after(kHandshakeTimeout, [this] {
    timer_ = 0;
    drop("handshake timed out", true);
  });
}

void TcpOutbound::on_connected() {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    // Refused while the peer is not up yet is the normal start-up order; log it quietly.
    log().debug("connect to {} ({}): {}", peer_name_, params_.address.to_string(),
                std::strerror(err));
    return drop(std::strerror(err), true);
  }
  if (const auto& tls = transport_.identity().tls) {
    try {
      tls_ = std::make_unique<TlsStream>(*tls, fd_, false, peer_name_);
    } catch (const TransportError& e) {
      return drop(e.what(), true);
    }
    state_ = State::kTls;
    return continue_tls();
  }
  send_hello();
}

void TcpOutbound::send_hello() {
  state_ = State::kHello;
  const Identity& id = transport_.identity();
  HelloBody hello;
  hello.role = id.role;
  std::strncpy(hello.name, id.name.c_str(), kMaxNodeName);
  hello.topology_hash = id.topology_hash;
  hello.origin = id.origin;
  std::array<std::byte, kFrameHeaderSize + kHelloSize> buf;
  FrameHeader h{FrameType::kHello};
  h.length = kHelloSize;
  h.seq = offer_field(own_offer());  // (a receiver of version 6 reads no header field here)
  encode_header(h, buf.data());
  encode_hello(hello, buf.data() + kFrameHeaderSize);
  std::memcpy(hello_.data(), buf.data() + kFrameHeaderSize, kHelloSize);
  auth_ = AuthConnector{};
  // The socket is fresh and empty: 96 bytes always fit into its send buffer.
  if (link_send(fd_, tls_.get(), buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
    return drop("cannot send hello", true);
  }
  transport_.loop().modify(fd_, EPOLLIN, this);
}

void TcpOutbound::handle_challenge(const FrameHeader& h, std::span<const std::byte> body) {
  const auto& key = transport_.identity().auth;
  if (!key) return refuse_peer(*AuthConnector::mismatch(true, false));
  std::array<std::byte, kFrameHeaderSize + kAuthSize> buf;
  if (!auth_.answer(*key, body.first(h.length), hello_, buf.data() + kFrameHeaderSize)) {
    return drop("malformed challenge", true);
  }
  FrameHeader a{FrameType::kAuth};
  a.length = kAuthSize;
  encode_header(a, buf.data());
  // Nothing else was sent since the hello: 96 more bytes fit into the socket's buffer.
  if (link_send(fd_, tls_.get(), buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
    return drop("cannot send auth", true);
  }
}

void TcpOutbound::refuse_peer(std::string_view why) {
  log().error("not sending to {} at {}: {}", peer_name_, params_.address.to_string(), why);
  backoff_.slowest();
  drop(std::string("authentication: ") + std::string(why), true);
}

void TcpOutbound::handle_welcome(const FrameHeader& h, std::span<const std::byte> body) {
  const auto& key = transport_.identity().auth;
  WelcomeBody w;
  uint32_t expected = kWelcomeSize + (key ? kMacSize : 0);
  if (h.length != expected || !decode_welcome(body.first(kWelcomeSize), w) || w.slots > 1u << 20) {
    if (key && h.length == kWelcomeSize) return refuse_peer(*AuthConnector::mismatch(false, true));
    return drop("malformed welcome", true);
  }
  if (key) {
    if (auto why = auth_.check_welcome(*key, body.first(kWelcomeSize), body.subspan(kWelcomeSize),
                                       peer_name_)) {
      return refuse_peer(*why);
    }
  }
  const WireOffer offer = offer_of_field(h.seq);
  if (!agree(own_offer(), offer, wire_)) {  // (a receiver of our range rejects us first)
    log().error("not sending to {} at {}: {}", peer_name_, params_.address.to_string(),
                no_common_version_text(own_offer(), offer));
    backoff_.slowest();
    return drop("no common wire protocol version", true);
  }
  if (timer_) transport_.loop().cancel(timer_);
  timer_ = 0;
  if (w.topology_hash != transport_.identity().topology_hash) {
    log().warn("{} runs a different topology file (hash {:016x}, ours {:016x})", peer_name_,
               w.topology_hash, transport_.identity().topology_hash);
  }
  peer_slots_ = w.slots;
  peer_slot_size_ = w.slot_size;
  peer_next_seq_ = w.next_seq;
  ledger_.reset(peer_slots_, peer_slots_);
  tx_.assign(peer_slots_, TxEntry{});
  written_ = 0;
  written_off_ = 0;
  backoff_.reset();
  state_ = State::kUp;
  log().info("outbound link up: {} at {} ({} credits{}{})", peer_name_, params_.address.to_string(),
             peer_slots_, older_peer_text(wire_),
             tls_ ? "; " + tls_->description() : std::string());
  transport_.events().on_outbound_up(*this);
  transport_.events().on_credit(*this);
}

void TcpOutbound::drop(std::string_view reason, bool retry, bool planned) {
  bool was_up = state_ == State::kUp;
  if (timer_) transport_.loop().cancel(timer_);
  timer_ = 0;
  tls_.reset();  // before its socket closes
  if (fd_ >= 0) {
    transport_.loop().remove(fd_);
    ::close(fd_);
    fd_ = -1;
  }
  want_write_ = false;
  // What was left unparsed belongs to the old connection (a reject, a welcome we refused):
  // the next one starts empty, or it would read them again.
  rx_len_ = 0;
  state_ = retry ? State::kBackoff : State::kClosed;
  // Everything not acknowledged goes back to the node, newest first, so that a node pushing
  // each to the front of its queue ends with them in their original order.
  written_ = 0;
  written_off_ = 0;
  const uint64_t returned =
      ledger_.return_all([this](void* cookie) { transport_.events().on_returned(*this, cookie); });
  if (was_up) report_down(transport_.events(), reason, retry, returned, planned);
  if (retry) schedule_reconnect();
}

void TcpOutbound::schedule_reconnect() {
  state_ = State::kBackoff;
  timer_ = transport_.loop().after(backoff_.next(), [this] { start(); });
}

void TcpOutbound::close() {
  if (state_ == State::kClosed) return;
  // BYE only on a frame boundary: in the middle of a frame its bytes would end that frame's
  // payload. Without it the peer sees the stream end mid-frame and drops that frame, which
  // this side hands back (on_returned) like every other unacknowledged one.
  if (fd_ >= 0 && state_ == State::kUp && written_off_ == 0) {
    std::array<std::byte, kFrameHeaderSize> bye;
    encode_header(FrameHeader{FrameType::kBye}, bye.data());
    link_send(fd_, tls_.get(), bye.data(), bye.size());
  }
  drop("closed", false);
}

void TcpOutbound::update_interest() {
  if (fd_ < 0) return;
  transport_.loop().modify(fd_, EPOLLIN | (want_write_ ? uint32_t{EPOLLOUT} : 0u), this);
}

}  // namespace hoprelay::transport::tcp
