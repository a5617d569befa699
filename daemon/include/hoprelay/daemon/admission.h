// Who may open an inbound link to a node, as far as the topology decides it: a producer only at
// a head node; a node only if the topology lists it upstream of this one, and only from one of
// the addresses its `listen` host resolves to (nodes send from their listen address: the
// transports bind outgoing connections to it; a wildcard listen address says nothing about
// where a node sends from, so it admits any). Over TLS, a node must also show a certificate
// that names it (one that names the node standing in, for a stand-in); a producer any
// certificate the node's CA issued (the handshake checked that).
//
// Owns: the table of upstream peers with their addresses, resolved when it is made, at load and
// at every reload (setup path: getaddrinfo may block on DNS), not when a peer connects: a check
// runs on the event loop and compares strings. The one exception is a host that did not
// resolve when it was made (DNS not up yet at boot): a peer of that name retries it, at most
// once per 5 s, so that it is admitted without a reload once its name resolves. What depends
// on the node's state (draining, an origin already connected) stays with the node.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class Admission {
 public:
  // Refusals, as hoprelay_connections_rejected_total{reason} names them.
  enum class Verdict { kAdmit, kProducerNotHead, kWrongAddress, kNotUpstream, kWrongCertificate };
  static const char* reason_label(Verdict verdict);

  Admission() = default;
  // For node `self` of `topology`. An upstream host that does not resolve is logged, and
  // admits nobody until a reload resolves it.
  Admission(const config::Topology& topology, const config::NodeSpec& self);

  // Whether `peer` may open a link; when not, `reason` says why, worded for the peer's log.
  Verdict check(const transport::PeerInfo& peer, std::string& reason);

  // Whether any peer this node admits sends by RDMA WRITE with immediate (a producer, into a
  // head whose `ingress` is "write"; an upstream node whose `forward` is "write"). When none
  // does, the receive rings are not remotely writable (ListenParams::remote_write).
  bool accepts_writes() const { return accepts_writes_; }

  // The host part of an address as transports report it: "ip:port", "[v6]:port" or "ip".
  static std::string_view host_of(std::string_view address);

 private:
  struct Upstream {
    std::string name;
    std::string certified_as;        // the node its TLS certificate names: itself, or the stand-in
    std::string declared_host;       // for the refusal's text
    bool any = false;                // a wildcard listen address
    std::vector<std::string> hosts;  // numeric addresses it resolved to
    std::chrono::steady_clock::time_point retry_at{};  // while `hosts` is empty
  };
  static void resolve(Upstream& upstream);
  std::string node_;
  std::string pipeline_;
  bool head_ = false;
  bool accepts_writes_ = true;
  std::vector<Upstream> upstream_;
};

}  // namespace hoprelay::daemon
