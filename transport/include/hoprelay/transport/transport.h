// The one transport interface. TCP and verbs implement it as equals; the node above never
// knows which one carries its messages (brpc's model). make_transport() is the factory, and
// `transport = "auto"` falling back to TCP is a reported choice, not an error path.
//
// Semantics every transport provides (docs/protocol.md):
//  - A link is one direction of data: an OutboundLink posts frames to a peer's InboundLink.
//  - A sender has as many credits as the receiver has slots for the link; each posted frame
//    takes one. The receiver returns a credit when the node releases the slot, i.e. when the
//    message has been acknowledged by every downstream it was routed to (or consumed). So a
//    credit is also an acknowledgement of the oldest unacknowledged frame, in order.
//  - A frame's memory must stay untouched from post() until on_acked() or on_returned():
//    transports send from it directly (zero copy).
//  - A message the receiving node gave up (dropped) is reported with an outcome (outcome.h)
//    before the credit that acknowledges it: on_outcome(), then on_acked(). An acknowledgement
//    with no outcome before it means delivered (the common case costs nothing extra).
//  - When an outbound link drops, every unacknowledged frame comes back through on_returned(),
//    newest first, for the node to push to the front of its queue and post again once the link
//    is back: the original order is kept.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/config/endpoint.h"
#include "hoprelay/transport/auth.h"
#include "hoprelay/transport/event_loop.h"
#include "hoprelay/transport/outcome.h"
#include "hoprelay/transport/slot_ring.h"
#include "hoprelay/transport/wire.h"

namespace hoprelay::transport {

class TlsContext;  // tls.h

// A setup-path failure worded for the operator: what went wrong and what to do about it.
class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Memory frames are sent from and received into; over verbs it is registered with the device.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  virtual uint32_t lkey() const { return 0; }

 protected:
  MemoryRegion(std::byte* data, size_t size) : data_(data), size_(size) {}
  std::byte* data_;
  size_t size_;
};

struct PeerInfo {
  PeerRole role = PeerRole::kNode;
  std::string name;
  uint64_t topology_hash = 0;
  uint32_t origin = 0;
  std::string address;  // "ip:port" the connection came from
  WireAgreement wire;   // what the link speaks (the peer's offer and ours, wire.h)
  // Over TLS: the DNS names of the peer's certificate, which chains to the node's CA (the
  // handshake checked that); who may connect under which name is admission's to decide.
  bool tls = false;
  std::vector<std::string> certificate_names;
};

class LinkEvents;

class InboundLink {
 public:
  virtual ~InboundLink() = default;
  const PeerInfo& peer() const { return peer_; }
  // Gives a slot back. Its credit reaches the sender once every older slot is released too.
  // `outcome`: null when the message was delivered, else what became of it (copied: the
  // sender learns it before the credit).
  virtual void release(Slot& slot, const Outcome* outcome) = 0;
  // Drain: asks the sender to send nothing more (a BYE frame). Frames already on their way are
  // taken as usual; the sender closes the link once all it sent is acknowledged, so a planned
  // stop leaves it nothing to replay (on_inbound_down tells when).
  virtual void drain() = 0;
  virtual uint32_t slots_in_use() const = 0;
  // Slots handed to the node and not released yet (slots_in_use() also counts released ones
  // whose credit waits for an older slot): when it is 0 on a link that is down, the link's
  // ring may be freed.
  virtual uint32_t slots_held() const = 0;
  // The link's ring size (0 before the link is up).
  virtual uint32_t slots() const = 0;
  // Appends the origin of each frame the sender would send again if the link failed now
  // (SlotRing::unreturned_origins): deduplication must not forget those origins.
  virtual void unreturned_origins(std::vector<uint32_t>& out) const = 0;
  // The sender is in this process (transport/inproc), whatever transport the node runs.
  virtual bool in_process() const { return false; }
  // The owner's state of this link (as rdma_cm_id::context): set by the LinkEvents it
  // reports to, from on_inbound_up on, so that it finds its state in O(1) rather than by a
  // search; never read by the transport. Null until set.
  void* context() const { return context_; }
  void set_context(void* context) { context_ = context; }

 protected:
  PeerInfo peer_;

 private:
  void* context_ = nullptr;
};

// One frame to post: its payload is in `memory` (a slot or a producer buffer).
struct OutFrame {
  uint32_t origin = 0;
  uint64_t seq = 0;
  uint16_t flags = 0;
  const std::byte* payload = nullptr;
  uint32_t length = 0;
  const MemoryRegion* memory = nullptr;
  void* cookie = nullptr;  // handed back in on_acked / on_returned
  uint32_t chunk = 0;      // index in its message, for a chunk (flags kFlagMore / kFlagAbort)
  // A node forwarding a receive slot's frame names the slot: the sender's ledger keeps its
  // generation and, should the slot take another frame before this one is acknowledged (the
  // node broke the rule above), reports it rather than release the newer frame
  // (frame_ledger.h). Null for other memory (a producer's buffers).
  const Slot* slot = nullptr;
};

class OutboundLink {
 public:
  virtual ~OutboundLink() = default;
  const std::string& peer_name() const { return peer_name_; }
  virtual bool up() const = 0;
  // Frames that may be posted now (0 while down).
  virtual uint32_t credits() const = 0;
  // Frames posted and not yet acknowledged.
  virtual uint32_t in_flight() const = 0;
  // Largest payload the peer's slots take (from its welcome; 0 while down).
  virtual uint32_t max_payload() const = 0;
  // A producer's link: WelcomeBody::next_seq of the last welcome (where its origin resumes).
  uint64_t peer_next_seq() const { return peer_next_seq_; }
  // What the link speaks, agreed in the last handshake (wire.h, WireAgreement).
  const WireAgreement& wire() const { return wire_; }
  // Queues a frame for sending. False, with nothing queued, when down or out of credits.
  virtual bool post(const OutFrame& frame) = 0;
  // Closes on purpose (BYE): unacknowledged frames come back through on_returned().
  virtual void close() = 0;
  // Drops the connection as a failure would (no BYE: the peer is not answering), hands every
  // unacknowledged frame back through on_returned(), reports the link down with `reason`, and
  // reconnects with backoff. For a peer whose process stopped while its kernel keeps the
  // connection open (SIGSTOP, a paused VM): its frames, held here until it acknowledges them,
  // are given back to the owner instead. Nothing while the link is not up. An in-process link
  // (a stand-in's) has no connection to drop: it ignores it.
  virtual void reset(std::string_view reason) { (void)reason; }
  // The owner's state of this link, as InboundLink::context(): set by whoever connected it,
  // never read by the transport. Null until set.
  void* context() const { return context_; }
  void set_context(void* context) { context_ = context; }

 protected:
  // The common end of a transport's drop, after it has returned the `unacknowledged` frames:
  // logs the link going down (a warning), closing on purpose or closed by a peer that drained
  // (`planned`: info), and tells the owner.
  void report_down(LinkEvents& events, std::string_view reason, bool retry, uint64_t unacknowledged,
                   bool planned = false);

  std::string peer_name_;
  uint64_t peer_next_seq_ = 0;
  WireAgreement wire_;

 private:
  void* context_ = nullptr;
};

// What the node (or the producer) learns from its links. Called from the event loop.
class LinkEvents {
 public:
  // A peer said hello: admit it (true) or refuse it with a reason sent back and logged.
  virtual bool admit(const PeerInfo& peer, std::string& reason) = 0;
  virtual void on_inbound_up(InboundLink& link) = 0;
  // For an admitted producer's welcome: one past the highest sequence number taken from its
  // origin (0: none), where it resumes (WelcomeBody::next_seq).
  virtual uint64_t resume_seq(const PeerInfo& peer) {
    (void)peer;
    return 0;
  }
  // A frame landed in `slot`. The node must release() the slot eventually.
  virtual void on_message(InboundLink& link, Slot& slot) = 0;
  // The link is gone; slots the node still holds stay valid until released.
  virtual void on_inbound_down(InboundLink& link, std::string_view reason) = 0;
  virtual void on_outbound_up(OutboundLink& link) = 0;
  virtual void on_outbound_down(OutboundLink& link, std::string_view reason) = 0;
  virtual void on_acked(OutboundLink& link, void* cookie) = 0;
  // The frame `cookie` (posted, not yet acknowledged) was given up downstream: its
  // acknowledgement follows. Valid only during the call.
  virtual void on_outcome(OutboundLink& link, void* cookie, const Outcome& outcome) {
    (void)link;
    (void)cookie;
    (void)outcome;
  }
  virtual void on_returned(OutboundLink& link, void* cookie) = 0;
  // Credits became available (after acks, or when the link came up).
  virtual void on_credit(OutboundLink& link) = 0;
  // A peer broke the protocol (a bounded label: bad_magic, too_long, bad_slot, credit_overrun,
  // truncated, bad_hello, ...); the transport closes that link, and only that link.
  virtual void on_protocol_error(std::string_view kind) { (void)kind; }
  // A work completion failed with this status (verbs; ibv_wc_status_str): the link fails too.
  virtual void on_completion_error(std::string_view status) { (void)status; }
  // A connect request to the peer of an outbound link went unanswered while the local RDMA
  // port was ACTIVE (verbs): the peer's host is down, or this device no longer establishes
  // connections (docs/operations.md, "RDMA connects time out"). The link retries as always.
  virtual void on_connect_timeout(OutboundLink& link) { (void)link; }
  // The RDMA device under this transport went away (RDMA_CM_EVENT_DEVICE_REMOVAL: `rdma link
  // delete`, a driver unbound; or IBV_EVENT_DEVICE_FATAL). Every link on it has failed and
  // none can come back on this transport. A driver that cannot disassociate its users (rxe,
  // among others) keeps the device, and the command removing it waits in the kernel, until
  // the owner destroys the transport (its queue pairs, memory, protection domain and device
  // context), so the owner should do that soon, from outside the call. Called once. `device`:
  // the device's name.
  virtual void on_device_lost(std::string_view device) { (void)device; }
  // A peer that was admitted by name failed the pre-shared key challenge (auth.h): refused.
  virtual void on_auth_failed(const PeerInfo& peer) { (void)peer; }
  // The peer of an outbound link refused it, with its reason (the link retries, slowly: a
  // reload there may admit it). A producer that is opening gives up on it instead.
  virtual void on_refused(OutboundLink& link, std::string_view reason) {
    (void)link;
    (void)reason;
  }

 protected:
  ~LinkEvents() = default;
};

// Who this end is, sent in every hello.
struct Identity {
  PeerRole role = PeerRole::kNode;
  std::string name;
  uint64_t topology_hash = 0;
  uint32_t origin = 0;  // producers only
  // The topology's pre-shared key (auth_key_file), or null: then links are not authenticated.
  std::shared_ptr<const AuthKey> auth;
  // TLS credentials (tls in the topology; tls.h), or null: TCP links in clear text. Verbs
  // links do not use them.
  std::shared_ptr<const TlsContext> tls;
};

struct ListenParams {
  config::Endpoint address;
  uint32_t slots = 64;
  uint32_t slot_size = 64 * 1024;
  // Inbound links the node expects (its upstream peers, or 1 for a head node's producer):
  // sizes the registered memory checked against RLIMIT_MEMLOCK up front.
  uint32_t expected_links = 1;
  // Verbs: peers may RDMA WRITE into the receive rings (an upstream or a producer sends by
  // WRITE with immediate). False: the rings are registered for local access only, so a peer
  // that was admitted to SEND cannot rewrite a slot the stage or a downstream link is reading:
  // its WRITE fails with a remote access error and its link closes. (The liveness probe, a
  // zero-length WRITE, touches no memory and is checked against none: IBA C9-88.)
  bool remote_write = true;
};

struct ConnectParams {
  std::string peer_name;
  config::Endpoint address;
  // Verbs: RDMA WRITE with immediate into the peer's ring (true) or SEND (false).
  bool write = false;
  // The peer's slots as the topology declares them: sizes the queue pair before the peer's
  // welcome confirms the real number.
  uint32_t expected_slots = 64;
};

// How to build a transport (make_transport).
struct TransportOptions {
  config::TransportKind kind = config::TransportKind::kAuto;
  // The address whose device decides `auto`: the node's own listen address (local = true),
  // or for a producer the head node's address (local = false).
  config::Endpoint address;
  bool local = true;
  config::Poll poll = config::Poll::kEvent;
  // The dead-peer bound of every link (config's peer_dead_after; dead_peer.h).
  std::chrono::milliseconds dead_after = config::kDefaultPeerDeadAfter;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  // Starts accepting inbound links; throws TransportError (port in use, no device, memlock).
  virtual void listen(const ListenParams& params) = 0;
  virtual void stop_listening() = 0;
  // An outbound link that connects now and reconnects with backoff whenever it drops.
  virtual std::unique_ptr<OutboundLink> connect(const ConnectParams& params) = 0;
  // Memory to post frames from (producers).
  virtual std::unique_ptr<MemoryRegion> allocate(size_t bytes) = 0;
  // A reload: the topology hash that handshakes from now on carry and compare (links up now
  // stay as they are).
  virtual void set_topology_hash(uint64_t hash) = 0;
  // A reload: the TLS credentials that handshakes from now on use (links up now stay as they
  // are). Only TCP uses them.
  virtual void set_tls(std::shared_ptr<const TlsContext> tls) { (void)tls; }
  // A reload: whether peers may RDMA WRITE into the rings of links accepted from now on
  // (ListenParams::remote_write; links up now keep theirs). Only verbs registers rings.
  virtual void set_remote_write(bool writable) { (void)writable; }
  // This transport's outbound links act for `owner`'s node, on another thread
  // (daemon/link_threads.h): they send from the address `owner` listens on (the one peers
  // admit the node from) and post frames from memory `owner` registered (the node's slots,
  // forwarded zero-copy): over verbs its queue pairs are made in `owner`'s protection domain,
  // while its completion queues and channel stay its own. Call after `owner` listens and
  // before connect(); `owner` must outlive this transport. Throws TransportError for an
  // `owner` of another kind.
  virtual void speak_for(Transport& owner) = 0;
};

struct TransportChoice {
  std::unique_ptr<Transport> transport;
  std::string reason;  // why this transport: logged at start
};

// Builds the transport `options.kind` asks for; for kAuto, verbs when an RDMA device serves
// `options.address`, else TCP. Throws TransportError when an explicit choice cannot be met.
TransportChoice make_transport(const TransportOptions& options, EventLoop& loop, LinkEvents& events,
                               Identity identity);

// The RDMA device that serves `address` (bound locally, or routed to when !local), or an empty
// string with the reason in `why`.
std::string rdma_device_for(const config::Endpoint& address, bool local, std::string& why);

}  // namespace hoprelay::transport
