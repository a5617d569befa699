// Verbs transport: what is not the per-message path, for the transport as a whole: memory,
// device discovery, the PD and completion channel, listening, and the rdma_cm, async and
// completion events it dispatches to its links. A link's own setup and teardown are in
// verbs_inbound_setup.cpp and verbs_outbound_setup.cpp; resources are torn down in reverse
// order of creation.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "hoprelay/transport/address.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/ring_registrations.h"
#include "verbs_setup_common.h"

namespace hoprelay::transport::verbs {

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

// ---------------------------------------------------------------- memory

VerbsRegion::VerbsRegion(ibv_pd* pd, size_t bytes, int access)
    : MemoryRegion(
          static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095})), bytes),
      access_(access) {
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

namespace {
std::atomic<uint64_t> g_rings_registered{0};
std::atomic<uint64_t> g_rings_reused{0};
}  // namespace

}  // namespace hoprelay::transport::verbs

namespace hoprelay::transport {
RingRegistrations ring_registrations() {
  return {verbs::g_rings_registered.load(std::memory_order_relaxed),
          verbs::g_rings_reused.load(std::memory_order_relaxed)};
}
}  // namespace hoprelay::transport

namespace hoprelay::transport::verbs {

std::unique_ptr<VerbsRegion> VerbsTransport::take_ring(ibv_pd* pd, size_t bytes, int access) {
  for (auto it = spare_rings_.begin(); it != spare_rings_.end(); ++it) {
    if ((*it)->pd() == pd && (*it)->size() == bytes && (*it)->access() == access) {
      std::unique_ptr<VerbsRegion> ring = std::move(*it);
      spare_rings_.erase(it);
      g_rings_reused.fetch_add(1, std::memory_order_relaxed);
      return ring;
    }
  }
  auto ring = std::make_unique<VerbsRegion>(pd, bytes, access);
  g_rings_registered.fetch_add(1, std::memory_order_relaxed);
  return ring;
}

void VerbsTransport::keep_ring(std::unique_ptr<VerbsRegion> ring) {
  if (!ring) return;
  // As many as links are expected: with the live rings, at most twice that is registered,
  // what listen()'s memlock check counts. A ring of another size (slots or slot_size changed
  // by a reload) would serve nobody: the oldest spare goes first.
  if (spare_rings_.size() >= std::max<uint32_t>(1, listen_.expected_links)) {
    spare_rings_.erase(spare_rings_.begin());
  }
  spare_rings_.push_back(std::move(ring));
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
                               config::Poll poll, std::chrono::milliseconds dead_after)
    : loop_(loop),
      events_(events),
      identity_(std::move(identity)),
      poll_(poll),
      dead_after_(dead_after) {
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
  // A link that fails while the node holds some of its slots keeps its ring until they are
  // released, and its reconnect takes another: what a recovery needs is two rings per link
  // (keep_ring() keeps no more than that registered).
  size_t needed =
      2 * size_t{params.expected_links} * SlotRing::size_for(params.slots, params.slot_size);
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
  // In the protection domain its links post from: the owner's when this speaks for one.
  ibv_pd* pd = links_pd();
  if (!pd) throw TransportError("no RDMA device opened yet: connect first");
  return std::make_unique<VerbsRegion>(pd, bytes, IBV_ACCESS_LOCAL_WRITE);
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
    keep_ring(link->give_up_ring());
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
  if (!ok && !private_data.empty() && uint8_t(private_data[0]) != kFrameFormat) {
    std::byte header[kFrameHeaderSize] = {};  // the version where a frame header has it
    header[2] = private_data[0];
    reason = version_mismatch_text(header);
  } else if (!ok) {
    reason = "malformed hello";
  } else if (!agree(own_offer(), hello.offer, peer.wire)) {
    ok = false;
    reason = no_common_version_text(own_offer(), hello.offer);
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
    // Re-armed before the poll (the canonical order above). A CQ that cannot be re-armed would
    // never signal again: its link fails now (its events were counted above, as ~Connection
    // needs them).
    if (int rc = ibv_req_notify_cq(cq, 0); rc != 0 && handler) {
      handler->cq_failed(std::string("ibv_req_notify_cq: ") + std::strerror(rc));
      continue;
    }
    if (handler) handler->poll_cq();
  }
}

}  // namespace hoprelay::transport::verbs
