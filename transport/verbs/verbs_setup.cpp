// Verbs transport: everything that is not the per-message path. Device and memory setup,
// the rdma_cm event loop (listen, accept/reject, resolve, connect, disconnect, reconnect),
// and teardown in reverse order of creation.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#include "hoprelay/transport/address.h"
#include "hoprelay/transport/log.h"
#include "verbs_transport.h"

namespace hoprelay::transport::verbs {
namespace {

constexpr int kResolveTimeoutMs = 2000;
// Credits guarantee a posted receive for every message, so an RNR NAK means a bug or a dead
// peer: retry a few times, then fail the link (7 would mean "retry forever", a silent hang).
constexpr uint8_t kRnrRetry = 3;
// RNR NAK timer advertised by our receive side: 0.64 ms (encoding 12 of the IB spec table)
// instead of the 655 ms that encoding 0 means.
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kRetryCount = 7;
constexpr uint32_t kControlSpare = 4;
constexpr auto kConnectTimeout = std::chrono::milliseconds(5000);
// From rdma_accept to up (ESTABLISHED, and the AUTH frame when the link authenticates): a peer
// that never gets there must not keep the registered ring, its QP and CQ (TCP's hello timer).
constexpr auto kSetupTimeout = std::chrono::milliseconds(10000);

spdlog::logger& log() {
  static auto logger = module_logger("verbs");
  return *logger;
}

// Whether the port an rdma_cm id is bound to is ACTIVE (setup path: a query of the device).
bool port_active(const rdma_cm_id& id) {
  ibv_port_attr attr{};
  return id.verbs && id.port_num && ibv_query_port(id.verbs, id.port_num, &attr) == 0 &&
         attr.state == IBV_PORT_ACTIVE;
}

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

bool to_sockaddr(const config::Endpoint& ep, sockaddr_storage& out) {
  socklen_t len = 0;
  return resolve(ep, out, len);
}

// SENDs the AUTH or WELCOME frame encoded at `frame` (in `region`), signaled, as kSendAuth.
bool send_auth_frame(ibv_qp* qp, const std::byte* frame, uint32_t payload,
                     const VerbsRegion& region) {
  ibv_sge sge{reinterpret_cast<uint64_t>(frame), uint32_t(kFrameHeaderSize) + payload,
              region.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(kSendAuth, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad) == 0;
}

const char* event_name(rdma_cm_event_type t) {
  return rdma_event_str(t);
}

// Sets the responder's RNR timer once the QP is in RTS (rdma_cm leaves it at its default).
void tune_rnr_timer(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.min_rnr_timer = kMinRnrTimer;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_MIN_RNR_TIMER)) {
    log().debug("cannot set min_rnr_timer: {}", std::strerror(rc));
  }
}

}  // namespace

// ---------------------------------------------------------------- memory

VerbsRegion::VerbsRegion(ibv_pd* pd, size_t bytes, int access)
    : MemoryRegion(
          static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095})),
          bytes) {
  if (!data_) throw TransportError("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(data_, 0, bytes);
  mr_.reset(ibv_reg_mr(pd, data_, bytes, access));
  if (!mr_) {
    int err = errno;
    std::free(data_);
    std::string advice = memlock_shortfall(bytes);
    throw TransportError("cannot register " + std::to_string(bytes) +
                         " bytes with the RDMA "
                         "device: " +
                         std::strerror(err) + (advice.empty() ? "" : "; " + advice));
  }
}

VerbsRegion::~VerbsRegion() {
  mr_.reset();
  std::free(data_);
}

std::string memlock_shortfall(size_t needed) {
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return "";
  // Root (CAP_IPC_LOCK) may lock beyond the limit.
  if (geteuid() == 0) return "";
  if (needed <= rl.rlim_cur) return "";
  return "RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur / 1024) +
         " KiB but the configured "
         "slots need " +
         std::to_string((needed + 1023) / 1024) +
         " KiB of registered memory: "
         "raise it (LimitMEMLOCK=infinity in the systemd unit, `ulimit -l unlimited` in a "
         "shell, or a memlock line in /etc/security/limits.conf), or lower slots/slot_size";
}

Connection::~Connection() {
  if (cq && unacked_cq_events) ibv_ack_cq_events(cq.get(), unacked_cq_events);
}

}  // namespace hoprelay::transport::verbs

namespace hoprelay::transport {

using verbs::CmChannel;
using verbs::CmId;
using verbs::kResolveTimeoutMs;
using verbs::to_sockaddr;

// ---------------------------------------------------------------- device discovery

std::string rdma_device_for(const config::Endpoint& address, bool local, std::string& why) {
  CmChannel channel(rdma_create_event_channel());
  if (!channel && errno == ENODEV) {
    // librdmacm found no device at all: none was ever there, or it was removed (`rdma link
    // delete`, a driver unloaded) and not added back yet.
    why =
        "no RDMA device on this host (`rdma link show` lists none; Soft-RoCE: `rdma link add "
        "rxe0 type rxe netdev IFACE`)";
    return "";
  }
  if (!channel) {
    why = "no RDMA support on this host (cannot open /dev/infiniband/rdma_cm: " +
          std::string(std::strerror(errno)) + "; is rdma_ucm loaded?)";
    return "";
  }
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0) {
    why = std::string("rdma_create_id: ") + std::strerror(errno);
    return "";
  }
  CmId id(raw);
  sockaddr_storage sa{};
  if (!to_sockaddr(address, sa)) {
    why = "cannot resolve " + address.host;
    return "";
  }
  if (local) {
    set_port(sa, 0);  // probe only: do not hold the port
    if (rdma_bind_addr(id.get(), reinterpret_cast<sockaddr*>(&sa)) != 0) {
      why = "no RDMA device serves " + address.host + " (" + std::strerror(errno) + ")";
      return "";
    }
  } else {
    if (rdma_resolve_addr(id.get(), nullptr, reinterpret_cast<sockaddr*>(&sa), kResolveTimeoutMs) !=
        0) {
      why = "no RDMA route to " + address.host + " (" + std::strerror(errno) + ")";
      return "";
    }
    pollfd pfd{channel->fd, POLLIN, 0};
    if (poll(&pfd, 1, kResolveTimeoutMs + 500) != 1) {
      why = "no RDMA route to " + address.host + " (address resolution timed out)";
      return "";
    }
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel.get(), &ev) != 0) {
      why = "rdma_get_cm_event failed";
      return "";
    }
    bool ok = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED;
    rdma_ack_cm_event(ev);
    if (!ok) {
      why = "no RDMA route to " + address.host;
      return "";
    }
  }
  if (!id->verbs) {
    why = "no RDMA device serves " + address.host;
    return "";
  }
  return ibv_get_device_name(id->verbs->device);
}

}  // namespace hoprelay::transport

namespace hoprelay::transport::verbs {

// ---------------------------------------------------------------- transport

VerbsTransport::VerbsTransport(EventLoop& loop, LinkEvents& events, Identity identity,
                               config::Poll poll)
    : loop_(loop), events_(events), identity_(std::move(identity)), poll_(poll) {
  cm_channel_.reset(check_ptr(rdma_create_event_channel(), "rdma_create_event_channel"));
  set_nonblocking(cm_channel_->fd);
  cm_events_.t = this;
  cq_events_.t = this;
  loop_.add(cm_channel_->fd, EPOLLIN, &cm_events_);
  to_flush_.reserve(64);
  flushing_.reserve(64);
  if (busy_poll()) loop_.set_poller([this] { return poll_all(); });
}

VerbsTransport::~VerbsTransport() {
  if (busy_poll()) loop_.set_poller(nullptr);
  if (pd_) loop_.remove(pd_->context->async_fd);
  inbound_.clear();
  graveyard_.clear();
  stop_listening();
  if (comp_channel_) loop_.remove(comp_channel_->fd);
  loop_.remove(cm_channel_->fd);
}

void VerbsTransport::speak_for(Transport& owner) {
  auto* verbs = dynamic_cast<VerbsTransport*>(&owner);
  if (!verbs) {
    throw TransportError("verbs links cannot act for a " + std::string(owner.name()) +
                         " transport");
  }
  if (!verbs->pd_) {
    throw TransportError("speak_for: the owning transport has no RDMA device yet (listen first)");
  }
  pd_owner_ = verbs;
  listen_.address = verbs->listen_.address;  // what outbound links send from
}

ibv_pd* VerbsTransport::pd_for(ibv_context* device) {
  ibv_pd* pd = links_pd();
  if (pd && pd->context != device) {
    throw TransportError(std::string("links on two RDMA devices (") +
                         ibv_get_device_name(pd->context->device) + ", " +
                         ibv_get_device_name(device->device) +
                         "): one node forwards between its links zero-copy and needs them on "
                         "one device");
  }
  if (!pd) {
    pd_.reset(check_ptr(ibv_alloc_pd(device), "ibv_alloc_pd"));
    pd = pd_.get();
    // The device's asynchronous events (port down and up, fatal errors): logged, so that a
    // link failure can be read against what the port did. (With speak_for, the owner's.)
    set_nonblocking(device->async_fd);
    async_events_.t = this;
    loop_.add(device->async_fd, EPOLLIN, &async_events_);
    log().info("using RDMA device {} ({} completions)", ibv_get_device_name(device->device),
               busy_poll() ? "busy polling" : "completion channel");
  }
  // Completions of its own, whoever's PD: the channel is this transport's, on its loop.
  if (!comp_channel_) {
    comp_channel_.reset(check_ptr(ibv_create_comp_channel(device), "ibv_create_comp_channel"));
    set_nonblocking(comp_channel_->fd);
    loop_.add(comp_channel_->fd, EPOLLIN, &cq_events_);
  }
  return pd;
}

Cq VerbsTransport::create_cq(ibv_context* device, uint32_t entries, CqHandler* handler) {
  pd_for(device);
  Cq cq(check_ptr(ibv_create_cq(device, static_cast<int>(entries), handler, comp_channel_.get(), 0),
                  "ibv_create_cq"));
  if (!busy_poll()) check_rc(ibv_req_notify_cq(cq.get(), 0), "ibv_req_notify_cq");
  cq_handlers_.push_back(handler);
  return cq;
}

void VerbsTransport::forget(CqHandler* handler) {
  std::erase(cq_handlers_, handler);
}

void VerbsTransport::create_qp(Connection& conn, uint32_t send_depth, uint32_t recv_depth) {
  ibv_qp_init_attr attr{};
  attr.send_cq = conn.cq.get();
  attr.recv_cq = conn.cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = send_depth;
  attr.cap.max_recv_wr = recv_depth;
  attr.cap.max_send_sge = 2;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = 64;  // credit frames and tiny messages go inline where allowed
  attr.sq_sig_all = 0;            // selective signaling
  ibv_pd* pd = pd_for(conn.id->verbs);
  if (rdma_create_qp(conn.id.get(), pd, &attr) != 0) {
    attr.cap.max_inline_data = 0;  // a device without inline support
    check_rc(rdma_create_qp(conn.id.get(), pd, &attr), "rdma_create_qp");
  }
  conn.qp.reset(conn.id.get());
  conn.max_inline = attr.cap.max_inline_data;
}

void VerbsTransport::listen(const ListenParams& params) {
  listen_ = params;
  std::string where = params.address.to_string();
  sockaddr_storage sa{};
  if (!to_sockaddr(params.address, sa)) {
    throw TransportError("cannot resolve listen address " + where);
  }
  size_t needed =
      size_t{params.expected_links} * SlotRing::size_for(params.slots, params.slot_size);
  if (std::string advice = memlock_shortfall(needed); !advice.empty()) {
    throw TransportError(advice);
  }
  rdma_cm_id* raw = nullptr;
  check_rc(rdma_create_id(cm_channel_.get(), &raw, nullptr, RDMA_PS_TCP), "rdma_create_id");
  listen_id_.reset(raw);
  listen_id_->context = nullptr;  // connect requests are the transport's own
  if (rdma_bind_addr(listen_id_.get(), reinterpret_cast<sockaddr*>(&sa)) != 0) {
    int err = errno;
    listen_id_.reset();
    if (err == EADDRINUSE) {
      throw TransportError("listen address " + where +
                           " is already in use: another process (or another hoprelayd for this "
                           "node) holds the port; stop it or change `listen` in the topology");
    }
    throw TransportError("no RDMA device serves " + where + " (" + std::strerror(err) +
                         "): check `ip addr` and `rdma link`, or set transport = \"tcp\"");
  }
  if (!listen_id_->verbs) {
    listen_id_.reset();
    throw TransportError("no RDMA device serves " + where +
                         ": bind `listen` to the address of the RDMA netdev (see `rdma link`), or "
                         "set transport = \"tcp\"");
  }
  pd_for(listen_id_->verbs);
  check_rc(rdma_listen(listen_id_.get(), 64), "rdma_listen on " + where);
  log().info("listening on {} over {} ({} slots of {} bytes per inbound link)", where,
             ibv_get_device_name(listen_id_->verbs->device), params.slots, params.slot_size);
}

void VerbsTransport::stop_listening() {
  listen_id_.reset();
}

std::unique_ptr<OutboundLink> VerbsTransport::connect(const ConnectParams& params) {
  auto link = std::make_unique<VerbsOutbound>(*this, params);
  link->start();
  return link;
}

std::unique_ptr<MemoryRegion> VerbsTransport::allocate(size_t bytes) {
  if (!pd_) throw TransportError("no RDMA device opened yet: connect first");
  return std::make_unique<VerbsRegion>(pd_.get(), bytes, IBV_ACCESS_LOCAL_WRITE);
}

void VerbsTransport::bury(std::unique_ptr<Connection> connection) {
  // Its events (a late DISCONNECTED) must not reach the link, which may be connected anew or
  // destroyed before the burial: nor may its CQ's (the receives the disconnect flushed), which
  // the completion channel can still hand out in this very batch of events.
  if (connection->id) connection->id->context = nullptr;
  if (connection->cq) connection->cq->cq_context = nullptr;
  graveyard_.push_back(std::move(connection));
  if (burial_scheduled_) return;
  burial_scheduled_ = true;
  loop_.defer([this] {
    burial_scheduled_ = false;
    graveyard_.clear();
  });
}

void VerbsTransport::reap(VerbsInbound* link) {
  loop_.defer([this, link] {
    forget(link);
    std::erase_if(inbound_, [link](const auto& p) { return p.get() == link; });
  });
}

// The canonical rdma_cm event loop: copy what the handler needs, ack at once (so that a
// handler may destroy the id), then dispatch by the id's context.
void VerbsTransport::on_cm_events() {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(cm_channel_.get(), &ev) != 0) return;  // EAGAIN: drained
    rdma_cm_event_type type = ev->event;
    int status = ev->status;
    rdma_cm_id* id = ev->id;
    std::array<std::byte, 256> pdata{};
    size_t plen = std::min<size_t>(ev->param.conn.private_data_len, pdata.size());
    if (ev->param.conn.private_data && plen) {
      std::memcpy(pdata.data(), ev->param.conn.private_data, plen);
    }
    rdma_ack_cm_event(ev);
    log().debug("cm event {} (status {}) for {}", event_name(type), status,
                type == RDMA_CM_EVENT_CONNECT_REQUEST ? "the listener"
                : id->context                         ? "a link"
                                                      : "no link");
    std::span<const std::byte> private_data(pdata.data(), plen);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      on_connect_request(id, private_data);
    } else if (id->context) {
      static_cast<CmHandler*>(id->context)->on_cm_event(type, status, private_data);
    } else if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      log().error("the RDMA device under the listener was removed; not accepting any more");
      listen_id_.reset();
      device_lost();
    } else {
      log().debug("cm event {} on an id without a link", event_name(type));
    }
  }
}

void VerbsTransport::on_connect_request(rdma_cm_id* id, std::span<const std::byte> private_data) {
  HelloBody hello;
  std::string reason;
  PeerInfo peer;
  // IPv4 or IPv6: admission compares it with the declared host (node.cpp, host_of).
  const std::string addr = address_text(rdma_get_peer_addr(id), false);
  peer.address = addr;
  bool ok = decode_cm_hello(private_data, hello);
  if (!ok && !private_data.empty() && uint8_t(private_data[0]) != kWireVersion) {
    std::byte header[kFrameHeaderSize] = {};  // the version where a frame header has it
    header[2] = private_data[0];
    reason = version_mismatch_text(header);
  } else if (!ok) {
    reason = "malformed hello";
  } else {
    peer.role = hello.role;
    peer.name = hello.name;
    peer.origin = hello.origin;
    ok = events_.admit(peer, reason);
  }
  if (!ok) {
    log().warn("rejected {} from {}: {}", peer.name.empty() ? "a connection" : peer.name,
               peer.address, reason);
    std::string text = reason.substr(0, 140);
    rdma_reject(id, text.c_str(), static_cast<uint8_t>(text.size() + 1));
    rdma_destroy_id(id);
    return;
  }
  auto link = std::make_unique<VerbsInbound>(*this, id, hello, private_data.first(kCmHelloSize));
  VerbsInbound* raw = link.get();
  inbound_.push_back(std::move(link));
  try {
    raw->accept();
  } catch (const TransportError& e) {
    log().error("cannot accept {} from {}: {}", peer.name, peer.address, e.what());
    raw->fail(e.what());
  }
}

void VerbsTransport::device_lost() {
  if (device_lost_) return;
  device_lost_ = true;
  ibv_pd* pd = links_pd();
  std::string device = pd ? ibv_get_device_name(pd->context->device) : "the RDMA device";
  events_.on_device_lost(device);
}

void VerbsTransport::on_async_events() {
  ibv_async_event ev;
  while (ibv_get_async_event(pd_->context, &ev) == 0) {
    ibv_event_type type = ev.event_type;
    int port =
        type == IBV_EVENT_PORT_ACTIVE || type == IBV_EVENT_PORT_ERR ? ev.element.port_num : 0;
    ibv_ack_async_event(&ev);
    if (type == IBV_EVENT_DEVICE_FATAL) {
      log().error("RDMA device {}: {}", ibv_get_device_name(pd_->context->device),
                  ibv_event_type_str(type));
      device_lost();
      return;  // the owner destroys the transport: the device's events end here
    } else if (type == IBV_EVENT_PORT_ERR) {
      log().warn("RDMA device {} port {}: down ({})", ibv_get_device_name(pd_->context->device),
                 port, ibv_event_type_str(type));
    } else if (type == IBV_EVENT_PORT_ACTIVE) {
      log().info("RDMA device {} port {}: active again", ibv_get_device_name(pd_->context->device),
                 port);
    } else {
      // QP and CQ events: the completions of the link concerned say the same.
      log().debug("RDMA device {}: {}", ibv_get_device_name(pd_->context->device),
                  ibv_event_type_str(type));
    }
  }
}

bool VerbsTransport::poll_all() {
  bool any = false;
  // Index loop: a handler may fail its link (deferred removal), never erase synchronously.
  for (size_t i = 0; i < cq_handlers_.size(); ++i) any |= cq_handlers_[i]->poll_cq();
  return any;
}

// The canonical completion-channel loop: take the event, re-arm, then poll the CQ empty, so no
// completion that arrives between the poll and the re-arm is lost. Events are acknowledged in
// batches of kCqAckBatch per CQ: ibv_ack_cq_events takes a mutex (rdma-core advises batching),
// one per wake-up under traffic otherwise; the rest go when the connection is destroyed.
void VerbsTransport::on_cq_events() {
  for (;;) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(comp_channel_.get(), &cq, &ctx) != 0) return;
    auto* handler = static_cast<CqHandler*>(ctx);
    ibv_req_notify_cq(cq, 0);
    // None: a buried connection's CQ (bury()). Its events go at once, as do those of a CQ
    // that is not its handler's connection's (not expected: bury() clears the context).
    Connection* conn = handler ? handler->cq_connection() : nullptr;
    if (conn && conn->cq.get() == cq) {
      if (++conn->unacked_cq_events >= kCqAckBatch) {
        ibv_ack_cq_events(cq, conn->unacked_cq_events);
        conn->unacked_cq_events = 0;
      }
    } else {
      ibv_ack_cq_events(cq, 1);
    }
    if (handler) handler->poll_cq();
  }
}

// ---------------------------------------------------------------- inbound setup

VerbsInbound::VerbsInbound(VerbsTransport& transport, rdma_cm_id* id, const HelloBody& hello,
                           std::span<const std::byte> cm_hello)
    : transport_(transport) {
  std::memcpy(cm_hello_.data(), cm_hello.data(), kCmHelloSize);
  conn_.id.reset(id);
  id->context = static_cast<CmHandler*>(this);
  peer_.role = hello.role;
  peer_.name = hello.name;
  peer_.origin = hello.origin;
  peer_.topology_hash = hello.topology_hash;
  // IPv4 or IPv6: admission compares it with the declared host (node.cpp, host_of).
  const std::string addr = address_text(rdma_get_peer_addr(id), false);
  peer_.address = addr;
}

VerbsInbound::~VerbsInbound() {
  if (watch_timer_) transport_.loop().cancel(watch_timer_);
  if (setup_timer_) transport_.loop().cancel(setup_timer_);
  transport_.forget(this);
}

void VerbsInbound::accept() {
  const ListenParams& lp = transport_.listen_params();
  const auto& key = transport_.identity().auth;
  ibv_pd* pd = transport_.pd_for(conn_.id->verbs);
  stride_ = SlotRing::stride_for(lp.slot_size);
  // The ring is the only memory this peer may write into, and only when peers of this node
  // send by WRITE (ListenParams::remote_write).
  conn_.region_a = std::make_unique<VerbsRegion>(
      pd, SlotRing::size_for(lp.slots, lp.slot_size),
      IBV_ACCESS_LOCAL_WRITE | (lp.remote_write ? IBV_ACCESS_REMOTE_WRITE : 0));
  sq_depth_ = lp.slots + kControlSpare;
  // Credit frames to send, then the AUTH frame's receive buffer and our WELCOME's, then an
  // OUTCOME frame per slot (outcome_frame()).
  conn_.region_b = std::make_unique<VerbsRegion>(
      pd, size_t{sq_depth_} * kFrameHeaderSize + 2 * kAuthBuffer + size_t{lp.slots} * kOutcomeFrame,
      IBV_ACCESS_LOCAL_WRITE);
  pending_outcomes_.reserve(lp.slots);
  conn_.cq = transport_.create_cq(conn_.id->verbs, sq_depth_ + lp.slots + 3, this);
  transport_.create_qp(conn_, sq_depth_, lp.slots);
  ring_.emplace(conn_.region_a->data(), lp.slots, lp.slot_size, this, conn_.region_a.get());
  CmWelcome w{lp.slots,
              lp.slot_size,
              conn_.region_a->rkey(),
              reinterpret_cast<uint64_t>(conn_.region_a->data()),
              transport_.identity().topology_hash,
              transport_.events().resume_seq(peer_)};
  if (key) {
    // A challenge instead of the ring: no address, no key, no data receive until the peer has
    // answered it (on_auth), so an impostor never gets to write a byte.
    challenge_ = fresh_nonce();
    w.rkey = 0;
    w.ring_addr = 0;
    w.auth = true;
    std::memcpy(w.nonce.data(), challenge_.data(), kNonceSize);
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
    if (!post_receives(ring_->slots()))
      throw TransportError("ibv_post_recv failed while accepting");
  }
  std::array<std::byte, kCmChallengeSize> pdata;
  encode_cm_welcome(w, pdata.data());
  rdma_conn_param param{};
  param.private_data = pdata.data();
  param.private_data_len = w.auth ? kCmChallengeSize : kCmWelcomeSize;
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
  Nonce client;
  std::memcpy(client.data(), in + kFrameHeaderSize, kNonceSize);
  if (!mac_matches(key.client_proof(challenge_, client, cm_hello_),
                   {in + kFrameHeaderSize + kNonceSize, kMacSize})) {
    transport_.events().on_auth_failed(peer_);
    log().warn("rejected {} from {}: authentication failed: wrong auth_key_file, or not {}",
               peer_.name, peer_.address, peer_.name);
    return fail("authentication failed");
  }
  if (!post_receives(ring_->slots())) return fail("ibv_post_recv failed");
  // The ring's address and key, with our answer to the sender's nonce.
  const ListenParams& lp = transport_.listen_params();
  CmWelcome w{lp.slots,
              lp.slot_size,
              conn_.region_a->rkey(),
              reinterpret_cast<uint64_t>(conn_.region_a->data()),
              transport_.identity().topology_hash,
              transport_.events().resume_seq(peer_)};
  std::byte* out = in + kAuthBuffer;
  FrameHeader wh{FrameType::kWelcome};
  wh.length = kCmWelcomeSize + kMacSize;
  encode_header(wh, out);
  encode_cm_welcome(w, out + kFrameHeaderSize);
  Mac proof = key.server_proof(client, challenge_, {out + kFrameHeaderSize, kCmWelcomeSize});
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
  log().info("inbound link up: {} from {} ({} slots, ingress by {}{})", peer_.name, peer_.address,
             ring_->slots(),
             transport_.listen_params().remote_write
                 ? "WRITE with immediate or SEND"
                 : "SEND only: the ring is not remotely writable",
             transport_.identity().auth ? ", authenticated" : "");
  schedule_watch();
  transport_.events().on_inbound_up(*this);
  // Credits (and outcomes) of slots released before the link was up wait for it: without
  // this they would wait for ever, and so would the sender, out of credits. (A first data
  // frame now brings the link up before the node sees it: on_data().)
  if (state_ == State::kUp && (pending_credits_ != 0 || !pending_outcomes_.empty())) {
    flush_credits();
  }
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
  draining_ = bye_pending_ = true;
  flush_credits();
}

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
  if (w.auth && !key) {
    return refuse_peer(
        "it asks for authentication and this node has no auth_key_file: give both the same "
        "topology");
  }
  if (!w.auth && key) {
    return refuse_peer(
        "it did not authenticate itself (its topology has no auth_key_file?); an impostor could "
        "be listening at its address");
  }
  peer_ = w;
  if (w.auth) return send_auth();
  link_up();
}

void VerbsOutbound::send_auth() {
  const AuthKey& key = *transport_.identity().auth;
  nonce_ = fresh_nonce();
  Mac proof = key.client_proof(peer_.nonce, nonce_, cm_hello_);
  std::byte* out = conn_->region_a->data() + conn_->region_a->size() - kAuthBuffer;
  FrameHeader a{FrameType::kAuth};
  a.length = kAuthSize;
  encode_header(a, out);
  std::memcpy(out + kFrameHeaderSize, nonce_.data(), kNonceSize);
  std::memcpy(out + kFrameHeaderSize + kNonceSize, proof.data(), kMacSize);
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
  if (!mac_matches(key.server_proof(nonce_, peer_.nonce, {body, kCmWelcomeSize}),
                   {body + kCmWelcomeSize, kMacSize})) {
    return refuse_peer("its answer to our challenge is wrong: wrong auth_key_file, or not " +
                       peer_name_);
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
  log().info("outbound link up: {} at {} ({} credits, forwarding by {}{})", peer_name_,
             params_.address.to_string(), cap_,
             params_.write ? "RDMA WRITE with immediate" : "SEND",
             transport_.identity().auth ? ", authenticated" : "");
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
