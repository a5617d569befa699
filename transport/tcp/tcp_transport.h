// The TCP transport: the same frames, credits and acknowledgements as verbs, over a stream
// socket per link. Setup and teardown (listen, accept, connect, handshake, reconnect) live in
// tcp_setup.cpp, a link's TLS handshake in tcp_tls.cpp; the per-message path (parsing frames
// into slots, writev, credits) in tcp_datapath.cpp.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hoprelay/transport/auth_handshake.h"
#include "hoprelay/transport/backoff.h"
#include "hoprelay/transport/frame_ledger.h"
#include "hoprelay/transport/ring_inbound.h"
#include "hoprelay/transport/transport.h"
#include "tls_stream.h"

namespace hoprelay::transport::tcp {

class TcpTransport;

// Heap memory: over TCP any memory can be sent from or received into.
class HeapRegion final : public MemoryRegion {
 public:
  explicit HeapRegion(size_t bytes);
  ~HeapRegion() override;
};

// Receiving end of one link: parses frames from the socket straight into the ring's slots.
// Credits and outcomes go back through RingInbound (ring_inbound.h): this class queues them
// into its control buffer and writes that to the socket.
class TcpInbound final : public RingInbound, public EventLoop::Handler {
 public:
  TcpInbound(TcpTransport& transport, int fd, std::string address);
  ~TcpInbound();

  void on_io(uint32_t events) override;
  void drain() override;
  bool closed() const override { return state_ == State::kClosed; }
  // Closes with a reason (logged, counted by the caller's metrics through on_inbound_down).
  // `clean`: the peer said goodbye; logged at info, not as a failure.
  void fail(std::string_view reason, bool clean = false);
  // Closes the link because the peer broke the protocol: counted by `kind`, logged with why.
  void protocol_error(const char* kind, std::string_view reason);

 private:
  // kTls: the TLS handshake (with tls in the topology), before the hello.
  enum class State { kTls, kHello, kAuth, kUp, kClosed };

  // RingInbound
  bool emit_outcome(std::span<const std::byte> frame) override { return try_queue(frame); }
  bool emit_header(const FrameHeader& header) override;
  bool returns_open() const override { return state_ == State::kUp; }
  void reap() override;
  void send_returns() override { flush_control(); }

  // tcp_tls.cpp
  void continue_tls();
  // A peer that sent clear text to a node that takes TLS only: told so in clear, and closed.
  void refuse_clear_text();
  // tcp_setup.cpp
  void handle_hello(const FrameHeader& h, std::span<const std::byte> body);
  void handle_auth(const FrameHeader& h, std::span<const std::byte> body);
  // Admitted (and authenticated, with the sender's nonce, when the link authenticates): the
  // ring is allocated and the welcome sent.
  void admitted(bool authenticated);
  void reject(std::string_view reason);
  void send_control(const FrameHeader& h, std::span<const std::byte> body);
  // Appends a control frame to ctl_ (false, and the link failed, when it does not fit).
  bool queue_control(const FrameHeader& h, std::span<const std::byte> body);
  bool queue_bytes(std::span<const std::byte> frame);  // a whole encoded frame
  // Appends a whole encoded frame when it fits (false: not now, nothing failed).
  bool try_queue(std::span<const std::byte> frame);
  void update_interest();
  // tcp_datapath.cpp
  bool read_some();
  bool parse_buffered();
  bool start_data(const FrameHeader& h);
  void deliver(Slot& slot);
  bool flush_control();
  // BYE to the sender when the node stops on purpose (the destructor).
  void say_bye();

  TcpTransport& transport_;
  int fd_;
  std::unique_ptr<TlsStream> tls_;  // null: clear text
  State state_ = State::kHello;
  bool want_write_ = false;
  bool draining_ = false;  // our BYE went out: the peer's close is the expected end
  EventLoop::TimerId hello_timer_ = 0;
  // Pre-shared key admission: the hello as received and the challenge sent (auth.h).
  std::array<std::byte, kHelloSize> hello_{};
  AuthAcceptor auth_;
  std::unique_ptr<MemoryRegion> memory_;
  std::vector<std::byte> outcomes_;  // a kMaxOutcomeFrame buffer per slot (RingInbound)
  WireLimits limits_{};
  // Stream buffer for headers and small frames; large payloads bypass it (read into the slot).
  std::vector<std::byte> rx_;
  size_t rx_begin_ = 0;
  size_t rx_end_ = 0;
  Slot* partial_ = nullptr;  // a data frame whose payload is still arriving
  uint32_t partial_have_ = 0;
  // Control bytes to send (the handshake's frames, then outcomes, credits and BYE from
  // RingInbound, as many as fit: the rest waits there until the socket takes these).
  std::vector<std::byte> ctl_ = std::vector<std::byte>(512);
  size_t ctl_off_ = 0;
  size_t ctl_len_ = 0;
};

// Sending end of one link: connects, says hello, posts frames with writev, and turns credit
// frames into acknowledgements. Reconnects with exponential backoff and jitter.
class TcpOutbound final : public OutboundLink, public EventLoop::Handler {
 public:
  TcpOutbound(TcpTransport& transport, ConnectParams params);
  ~TcpOutbound();

  void on_io(uint32_t events) override;
  bool up() const override { return state_ == State::kUp; }
  uint32_t credits() const override;
  uint32_t in_flight() const override { return ledger_.in_flight(); }
  uint32_t max_payload() const override { return up() ? peer_slot_size_ : 0; }
  bool post(const OutFrame& frame) override;
  void close() override;
  void reset(std::string_view reason) override {
    if (up()) drop(reason, true);
  }
  void start();

 private:
  // kTls: the TLS handshake (with tls in the topology), between the connect and the hello.
  enum class State { kBackoff, kConnecting, kTls, kHello, kUp, kClosed };
  // What TCP keeps of a posted frame beside the ledger: its header and where its payload is.
  struct TxEntry {
    std::array<std::byte, kFrameHeaderSize> header;
    const std::byte* payload;
    uint32_t length;
  };

  // tcp_setup.cpp
  void on_connected();
  void continue_tls();  // tcp_tls.cpp, as refuse_tls()
  void send_hello();
  void handle_challenge(const FrameHeader& h, std::span<const std::byte> body);
  void handle_welcome(const FrameHeader& h, std::span<const std::byte> body);
  // The peer failed (or skipped) authentication: logged as an error, retried slowly.
  void refuse_peer(std::string_view why);
  // The TLS handshake failed (a certificate refused, a peer without TLS): an error, retried
  // slowly.
  void refuse_tls(std::string_view why);
  void drop(std::string_view reason, bool retry, bool planned = false);
  void schedule_reconnect();
  // tcp_datapath.cpp
  // The peer drains (its BYE): once nothing sent is unacknowledged, close (and retry).
  bool close_if_drained();
  bool read_control();
  bool handle_credit(const FrameHeader& h);
  bool handle_outcome(const FrameHeader& h, std::span<const std::byte> body);
  void flush();
  void schedule_flush();
  void update_interest();

  TcpTransport& transport_;
  ConnectParams params_;
  State state_ = State::kBackoff;
  int fd_ = -1;
  std::unique_ptr<TlsStream> tls_;  // null: clear text; a fresh one per connection
  bool want_write_ = false;
  bool flush_scheduled_ = false;
  Backoff backoff_;
  uint64_t connects_ = 0;
  EventLoop::TimerId timer_ = 0;
  uint32_t peer_slots_ = 0;
  uint32_t peer_slot_size_ = 0;
  // Pre-shared key admission: the hello we sent, the peer's challenge and our nonce.
  std::array<std::byte, kHelloSize> hello_{};
  AuthConnector auth_;  // a fresh one per connection
  // Posted frames (frame_ledger.h): [acked, written_) are on the wire awaiting credit,
  // [written_, tail) still to write (written_off_ bytes of the first already sent); tx_ holds
  // their headers by the ledger's index.
  FrameLedger ledger_;
  std::vector<TxEntry> tx_;
  // flush(): small frames copied side by side, one iovec per run (rebuilt on every flush from
  // tx_, so a partial write needs nothing kept here).
  std::vector<std::byte> coalesce_;
  uint64_t written_ = 0;
  size_t written_off_ = 0;
  std::array<std::byte, 4096> rx_{};
  size_t rx_len_ = 0;
};

class TcpTransport final : public Transport, public EventLoop::Handler {
 public:
  // poll = kBusy: the event loop spins (EventLoop::set_spin) for as long as the transport
  // lives, and sockets ask for SO_BUSY_POLL.
  // dead_after: the dead-peer bound of its sockets (tune_socket).
  TcpTransport(EventLoop& loop, LinkEvents& events, Identity identity,
               config::Poll poll = config::Poll::kEvent,
               std::chrono::milliseconds dead_after = config::kDefaultPeerDeadAfter);
  ~TcpTransport() override;

  std::string_view name() const override { return "tcp"; }
  void listen(const ListenParams& params) override;
  void stop_listening() override;
  std::unique_ptr<OutboundLink> connect(const ConnectParams& params) override;
  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override;
  void on_io(uint32_t events) override;  // the listening socket

  EventLoop& loop() { return loop_; }
  LinkEvents& events() { return events_; }
  const Identity& identity() const { return identity_; }
  void set_topology_hash(uint64_t hash) override { identity_.topology_hash = hash; }
  void set_tls(std::shared_ptr<const TlsContext> tls) override { identity_.tls = std::move(tls); }
  const ListenParams& listen_params() const { return listen_; }
  // TCP sends from any memory: only the address outbound links send from is the owner's.
  void speak_for(Transport& owner) override;
  // Frees a closed inbound link once the node holds none of its slots.
  void reap(TcpInbound* link);
  // Options of every link's socket, accepted or connecting: TCP_NODELAY, and in busy mode
  // SO_BUSY_POLL.
  void tune_socket(int fd);
  // Why a socket failed with `err`: ETIMEDOUT is the dead-peer bound.
  std::string failure_reason(int err) const;

 private:
  EventLoop& loop_;
  LinkEvents& events_;
  Identity identity_;
  bool busy_ = false;
  bool busy_poll_refused_ = false;  // SO_BUSY_POLL was refused once: not asked again
  std::chrono::milliseconds dead_after_;
  ListenParams listen_;
  int listen_fd_ = -1;
  EventLoop::TimerId accept_pause_ = 0;  // out of descriptors: accepting again after it
  std::vector<std::unique_ptr<TcpInbound>> inbound_;
};

}  // namespace hoprelay::transport::tcp
