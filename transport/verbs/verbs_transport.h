// The verbs transport: rdma_cm for connections, RC queue pairs for data.
//
//   sender (OutboundLink)                         receiver (InboundLink)
//   ---------------------                         ----------------------
//   header+payload (2 SGEs, from the slot)  ──►   ring slot i  (RDMA WRITE with immediate
//                                                 into slot i, or SEND consuming receive i)
//   control receives  ◄──  CREDIT frames (SEND, inline)  ◄──  slots released in order
//
// Every receive slot of an inbound link has a receive posted for it while it is free; a data
// frame (SEND or WRITE with immediate) consumes the receive of exactly the slot the sender's
// credit names. So credits == posted receives == free slots, and no RNR can happen in normal
// operation. The sender keeps one control receive posted per credit (plus spare), so credit
// frames never meet an RNR either.
//
// Setup and teardown: verbs_setup.cpp (the transport), verbs_inbound_setup.cpp and
// verbs_outbound_setup.cpp (a link's). Per-message path: verbs_datapath.cpp.
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
#include "send_watchdog.h"
#include "verbs_resources.h"

namespace hoprelay::transport::verbs {

class VerbsTransport;

// What a work request is, in the top byte of its wr_id; the low 56 bits are kind-specific.
enum WrKind : uint64_t {
  kRecvData = 1,     // value: the slot
  kRecvControl = 2,  // value: the control receive buffer
  kSendData = 3,     // value: sends this completion retires
  kSendControl = 4,  // value: sends this completion retires
  kProbe = 5,
  kRecvAuth = 6,  // pre-shared key admission (auth.h): the sender's AUTH frame
  kSendAuth = 7,  // the AUTH frame, or the WELCOME that answers it
};
inline uint64_t make_wr_id(WrKind kind, uint64_t value) {
  return (uint64_t{kind} << 56) | value;
}
inline WrKind wr_kind(uint64_t wr_id) {
  return WrKind(wr_id >> 56);
}
inline uint64_t wr_value(uint64_t wr_id) {
  return wr_id & ((uint64_t{1} << 56) - 1);
}

// A sender's control receives take credit frames (32 bytes), OUTCOME frames (up to 480 bytes)
// and, once, the WELCOME frame of an authenticated link (header + CM welcome + MAC = 104 bytes).
inline constexpr uint32_t kControlRecvSize = 640;
// A receiver's OUTCOME frame buffer, one per slot of its ring.
inline constexpr uint32_t kOutcomeFrame = 640;
static_assert(kFrameHeaderSize + kMaxOutcomePayload <= kControlRecvSize);
static_assert(kFrameHeaderSize + kMaxOutcomePayload <= kOutcomeFrame);
// Bytes set aside in a link's registered memory for the AUTH / WELCOME exchange.
inline constexpr uint32_t kAuthBuffer = 128;
// Completion events acknowledged per ibv_ack_cq_events call (Connection::unacked_cq_events).
inline constexpr uint32_t kCqAckBatch = 256;

// Something rdma_cm events are dispatched to (the cm id's context).
class CmHandler {
 public:
  virtual void on_cm_event(rdma_cm_event_type type, int status,
                           std::span<const std::byte> private_data) = 0;

 protected:
  ~CmHandler() = default;
};

struct Connection;

// Something whose CQ signals on the shared completion channel (the CQ's context).
class CqHandler {
 public:
  // Polls the CQ empty. Returns true if it found completions (busy-poll bookkeeping).
  virtual bool poll_cq() = 0;
  // The connection whose CQ signals (it counts the events not yet acknowledged), or null.
  virtual Connection* cq_connection() = 0;
  // The CQ could not be re-armed (ibv_req_notify_cq failed): no event would come for it again,
  // so the link fails now rather than wait in silence.
  virtual void cq_failed(std::string_view why) = 0;

 protected:
  ~CqHandler() = default;
};

// One connection's verbs objects. Members are declared so that they are destroyed in the
// right order: the QP first, then the memory regions, the CQ, and the cm id last.
struct Connection {
  CmId id;
  Cq cq;
  std::unique_ptr<VerbsRegion> region_a;  // inbound: the ring; outbound: tx headers
  std::unique_ptr<VerbsRegion> region_b;  // inbound: credit frames; outbound: control receives
  QpHandle qp;
  uint32_t max_inline = 0;
  // Completion events taken from the channel and not yet acknowledged: ibv_ack_cq_events
  // takes a mutex, so they are acknowledged in batches (VerbsTransport::on_cq_events) and the
  // rest before the CQ is destroyed (~Connection), as ibv_destroy_cq requires.
  uint32_t unacked_cq_events = 0;
  ~Connection();
};

// Credits and outcomes go back through RingInbound (ring_inbound.h): this class posts them as
// SENDs from region_b, as many as its send queue has room for.
class VerbsInbound final : public RingInbound, public CmHandler, public CqHandler {
 public:
  VerbsInbound(VerbsTransport& transport, rdma_cm_id* id, const HelloBody& hello,
               std::span<const std::byte> cm_hello);
  ~VerbsInbound();

  // Creates the QP, registers the ring, posts a receive per slot and accepts.
  void accept();
  void on_cm_event(rdma_cm_event_type type, int status,
                   std::span<const std::byte> private_data) override;
  bool poll_cq() override;
  Connection* cq_connection() override { return &conn_; }
  void cq_failed(std::string_view why) override { fail(why); }
  void drain() override;
  void fail(std::string_view reason);
  Connection& connection() { return conn_; }
  // A closed link's ring, for the next link (VerbsTransport::keep_ring): its QP is gone, so
  // nothing writes into it any more. Null when the link never had one, or is not closed.
  std::unique_ptr<VerbsRegion> give_up_ring() {
    return state_ == State::kClosed ? std::move(conn_.region_a) : nullptr;
  }

 private:
  enum class State { kAccepting, kUp, kClosed };

  // RingInbound
  bool emit_outcome(std::span<const std::byte> frame) override;
  bool emit_header(const FrameHeader& header) override;
  bool returns_open() const override { return state_ == State::kUp; }
  bool closed() const override { return state_ == State::kClosed; }
  void reap() override;
  // Reposts the freed slots' receives (in ring order) before their credit leaves: by the
  // time the sender can use the credit, the receive is there.
  bool freed(uint32_t count) override;

  CmWelcome welcome();
  // The receives of the next `count` slots in ring order (receives_posted_), chained.
  bool post_receives(uint32_t count);
  // Pre-shared key admission: the sender's answer to our challenge, then our WELCOME.
  void on_auth(const ibv_wc& wc);
  // Established, and authenticated when the link authenticates: tell the node.
  void maybe_up();
  // Our RDMA_CM_EVENT_ESTABLISHED, or a data frame that came before it: the sender's QP is in
  // RTS, so the connection is established (IB's "communication established" case).
  void establish();
  void violation(const char* kind, std::string_view reason);
  void on_data(const ibv_wc& wc);
  // Liveness of the credit sends (send_watchdog.h): one tick per second while up.
  void schedule_watch();
  bool post_control(const std::byte* frame, uint32_t length);
  // The OUTCOME frame buffers in region_b, kOutcomeFrame bytes per ring slot.
  std::byte* outcome_frames() {
    return conn_.region_b->data() + size_t{sq_depth_} * kFrameHeaderSize + 2 * kAuthBuffer;
  }

  VerbsTransport& transport_;
  Connection conn_;
  State state_ = State::kAccepting;
  bool draining_ = false;  // drain() was called: the peer's disconnect is the expected end
  // Both must hold before the link is up: rdma_cm's ESTABLISHED and the AUTH completion can
  // come in either order (two event channels).
  bool established_ = false;
  bool authenticated_ = false;
  std::array<std::byte, kCmHelloSize> cm_hello_{};
  AuthAcceptor auth_;
  uint32_t stride_ = 0;
  uint64_t receives_posted_ = 0;  // in ring order: receive n is for slot n % slots
  uint32_t sq_depth_ = 0;
  uint32_t sq_outstanding_ = 0;
  uint32_t unsignaled_ = 0;
  uint64_t ctl_sent_ = 0;
  SendWatchdog watch_;
  EventLoop::TimerId watch_timer_ = 0;
  EventLoop::TimerId setup_timer_ = 0;  // accepted, not up yet: how long it may take
};

class VerbsOutbound final : public OutboundLink, public CmHandler, public CqHandler {
 public:
  VerbsOutbound(VerbsTransport& transport, ConnectParams params);
  ~VerbsOutbound();

  void start();
  void on_cm_event(rdma_cm_event_type type, int status,
                   std::span<const std::byte> private_data) override;
  bool poll_cq() override;
  Connection* cq_connection() override { return conn_.get(); }
  void cq_failed(std::string_view why) override { drop(why, true); }
  bool up() const override { return state_ == State::kUp; }
  uint32_t credits() const override;
  uint32_t in_flight() const override { return ledger_.in_flight(); }
  uint32_t max_payload() const override { return up() ? peer_.slot_size : 0; }
  bool post(const OutFrame& frame) override;
  void close() override;
  void reset(std::string_view reason) override {
    if (up()) drop(reason, true);
  }

 private:
  enum class State { kBackoff, kResolving, kConnecting, kAuthenticating, kUp, kClosed };

  void on_route_resolved();
  void on_established(std::span<const std::byte> private_data);
  // Pre-shared key admission: answer the peer's challenge, check its WELCOME.
  void send_auth();
  void on_welcome_frame(const ibv_wc& wc, const FrameHeader& h, const std::byte* body);
  void refuse_peer(std::string_view why);
  // The peer's ring is known (peer_): credits flow.
  void link_up();
  void drop(std::string_view reason, bool retry, bool planned = false);
  void schedule_reconnect();
  // The peer drains (its BYE): once nothing sent is unacknowledged, close (and retry).
  bool close_if_drained();
  bool post_control_receive(uint32_t index);
  // Liveness: see verbs_datapath.cpp.
  void schedule_probe();
  void probe();
  void on_control_frame(const ibv_wc& wc);
  bool on_outcome_frame(const FrameHeader& h, const std::byte* body);
  friend class VerbsTransport;
  void flush_posts();

  VerbsTransport& transport_;
  ConnectParams params_;
  std::unique_ptr<Connection> conn_;
  State state_ = State::kBackoff;
  Backoff backoff_;
  bool established_once_ = false;
  EventLoop::TimerId timer_ = 0;
  EventLoop::TimerId probe_timer_ = 0;
  uint64_t acked_at_last_probe_ = 0;
  SendWatchdog watch_;
  // The peer's ring, from its welcome.
  CmWelcome peer_{};
  std::array<std::byte, kCmHelloSize> cm_hello_{};
  AuthConnector auth_;  // a fresh one per connection
  uint32_t peer_stride_ = 0;
  uint32_t cap_ = 0;  // credits: min(peer slots, what our queues were sized for)
  uint32_t ctl_depth_ = 0;
  uint32_t sq_depth_ = 0;
  uint32_t sq_outstanding_ = 0;
  uint32_t unsignaled_ = 0;
  // Posted frames (frame_ledger.h), cap_ at most.
  FrameLedger ledger_;
  // Their work requests, by the ledger's index (their headers too, in conn_->region_a); the ones
  // posted in this loop iteration are a chain from batch_first_ to batch_last_, not yet handed to
  // the device (flush_posts).
  std::vector<ibv_send_wr> wrs_;
  std::vector<std::array<ibv_sge, 2>> sges_;
  uint32_t batch_first_ = 0;
  uint32_t batch_last_ = 0;
  uint32_t batch_len_ = 0;
  bool flush_scheduled_ = false;
};

class VerbsTransport final : public Transport {
 public:
  // dead_after: peer_dead_after, the links' dead-peer bound (probe_every, dead_ticks).
  VerbsTransport(EventLoop& loop, LinkEvents& events, Identity identity, config::Poll poll,
                 std::chrono::milliseconds dead_after = config::kDefaultPeerDeadAfter);
  ~VerbsTransport() override;

  std::string_view name() const override { return "verbs"; }
  void listen(const ListenParams& params) override;
  void stop_listening() override;
  std::unique_ptr<OutboundLink> connect(const ConnectParams& params) override;
  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override;

  EventLoop& loop() { return loop_; }
  LinkEvents& events() { return events_; }
  const Identity& identity() const { return identity_; }
  void set_topology_hash(uint64_t hash) override { identity_.topology_hash = hash; }
  void set_remote_write(bool writable) override { listen_.remote_write = writable; }
  void speak_for(Transport& owner) override;
  const ListenParams& listen_params() const { return listen_; }
  rdma_event_channel* cm_channel() { return cm_channel_.get(); }
  bool busy_poll() const { return poll_ == config::Poll::kBusy; }
  // Liveness (verbs_datapath.cpp): a link probes a peer that has not acknowledged for an
  // interval, and fails once a send has waited dead_ticks() intervals for its completion. A
  // second, or a quarter of a shorter bound.
  std::chrono::milliseconds dead_after() const { return dead_after_; }
  std::chrono::milliseconds probe_every() const {
    return std::min(std::chrono::milliseconds(1000), dead_after_ / 4);
  }
  uint32_t dead_ticks() const {
    return static_cast<uint32_t>(std::max<int64_t>(1, dead_after_ / probe_every()));
  }

  // The PD and completion channel of the device, opened on first use (the PD: the owner's,
  // after speak_for). Throws when a second, different device shows up: slots are
  // forwarded zero-copy, so every link shares one PD.
  ibv_pd* pd_for(ibv_context* device);
  // The PD this transport's queue pairs use: the owner's after speak_for, else its own (null
  // before the first device).
  ibv_pd* links_pd() const { return pd_owner_ ? pd_owner_->pd_.get() : pd_.get(); }
  // A CQ of `entries` on the shared completion channel, armed unless busy polling.
  Cq create_cq(ibv_context* device, uint32_t entries, CqHandler* handler);
  // A RC QP on `conn.id` with the given depths; fills conn.qp and conn.max_inline.
  void create_qp(Connection& conn, uint32_t send_depth, uint32_t recv_depth);
  void reap(VerbsInbound* link);
  // A receive ring: a spare one registered with `pd` for `bytes` and `access` if there is one,
  // else a new one (the spare rings: keep_ring()).
  std::unique_ptr<VerbsRegion> take_ring(ibv_pd* pd, size_t bytes, int access);
  // Keeps a ring of a link gone for the next link, up to listen's expected_links of them.
  void keep_ring(std::unique_ptr<VerbsRegion> ring);
  void forget(CqHandler* handler);
  // Frees a failed outbound connection after the current loop iteration (we may be inside its
  // own completion or cm event), and at the latest when the transport goes.
  void bury(std::unique_ptr<Connection> connection);
  // Doorbell batching: `link` posts its chained work requests at the end of this iteration.
  void flush_later(VerbsOutbound* link);
  void forget_flush(VerbsOutbound* link);
  // The device is gone (a link's or the listener's DEVICE_REMOVAL, or a fatal async event):
  // tells the owner once (LinkEvents::on_device_lost). Links have failed on their own.
  void device_lost();

 private:
  struct CmEvents final : EventLoop::Handler {
    VerbsTransport* t;
    void on_io(uint32_t) override { t->on_cm_events(); }
  };
  struct CqEvents final : EventLoop::Handler {
    VerbsTransport* t;
    void on_io(uint32_t) override { t->on_cq_events(); }
  };
  struct AsyncEvents final : EventLoop::Handler {
    VerbsTransport* t;
    void on_io(uint32_t) override { t->on_async_events(); }
  };

  void on_cm_events();
  void on_cq_events();
  void on_async_events();
  void on_connect_request(rdma_cm_id* id, std::span<const std::byte> private_data);
  bool poll_all();

  EventLoop& loop_;
  LinkEvents& events_;
  Identity identity_;
  config::Poll poll_;
  std::chrono::milliseconds dead_after_;
  ListenParams listen_;
  // Destroyed in reverse: links, listener, completion channel, PD, cm channel.
  CmChannel cm_channel_;
  Pd pd_;
  // speak_for: the transport whose PD this one's queue pairs use (its PD is then not
  // this one's: pd_ stays empty, and the device's asynchronous events are the owner's).
  VerbsTransport* pd_owner_ = nullptr;
  CompChannel comp_channel_;
  CmId listen_id_;
  CmEvents cm_events_{};
  CqEvents cq_events_{};
  AsyncEvents async_events_{};
  std::vector<std::unique_ptr<Connection>> graveyard_;
  std::vector<VerbsOutbound*> to_flush_;  // reserved: no allocation per iteration
  std::vector<VerbsOutbound*> flushing_;
  bool burial_scheduled_ = false;
  bool device_lost_ = false;
  std::vector<CqHandler*> cq_handlers_;  // busy polling walks these
  // Rings of closed links, still registered, for the next (take_ring): a relay that comes back
  // does not cost its downstream an aligned_alloc, a memset and an ibv_reg_mr of a whole ring
  // on the loop. Destroyed before the PD (declared after it).
  std::vector<std::unique_ptr<VerbsRegion>> spare_rings_;
  std::vector<std::unique_ptr<VerbsInbound>> inbound_;
};

}  // namespace hoprelay::transport::verbs
