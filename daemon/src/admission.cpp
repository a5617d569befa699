#include "hoprelay/daemon/admission.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "hoprelay/transport/log.h"

namespace hoprelay::daemon {

namespace {

spdlog::logger& log() {
  static auto logger = module_logger("node");
  return *logger;
}

// Every numeric address `host` resolves to (setup path).
std::vector<std::string> resolve_all(const std::string& host, std::string& error) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    error = gai_strerror(rc);
    return out;
  }
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    char text[NI_MAXHOST];
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) ==
        0) {
      out.emplace_back(text);
    }
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

const char* Admission::reason_label(Verdict verdict) {
  switch (verdict) {
    case Verdict::kProducerNotHead:
      return "producer_not_head";
    case Verdict::kWrongAddress:
      return "wrong_address";
    case Verdict::kNotUpstream:
      return "not_upstream";
    case Verdict::kWrongCertificate:
      return "wrong_certificate";
    case Verdict::kAdmit:
      break;
  }
  return "admitted";
}

std::string_view Admission::host_of(std::string_view address) {
  if (address.starts_with('[')) return address.substr(1, address.find(']') - 1);
  if (std::count(address.begin(), address.end(), ':') == 1) {
    return address.substr(0, address.find(':'));
  }
  return address;
}

Admission::Admission(const config::Topology& topology, const config::NodeSpec& self)
    : node_(self.name),
      pipeline_(topology.name),
      head_(self.is_head()),
      accepts_writes_(head_ && self.ingress == config::Ingress::kWrite) {
  for (const std::string& name : self.upstream) {
    const config::NodeSpec* declared = topology.find(name);
    if (!declared) continue;
    accepts_writes_ |= declared->forward == config::Forward::kWrite;
    Upstream u{name, name, declared->listen.host, declared->listen.is_wildcard(), {}};
    if (!u.any) resolve(u);
    upstream_.push_back(std::move(u));
    // A node that stands in for it (on_peer_down = "bypass") connects under its name, from
    // its own host: admitted for that branch only.
    for (const std::string& who : topology.stand_ins(name)) {
      const config::NodeSpec* s = topology.find(who);
      Upstream b{name, who, s->listen.host, s->listen.is_wildcard(), {}};
      if (!b.any) resolve(b);
      upstream_.push_back(std::move(b));
    }
  }
}

void Admission::resolve(Upstream& u) {
  std::string error;
  u.hosts = resolve_all(u.declared_host, error);
  if (!u.hosts.empty()) return;
  u.retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  log().warn(
      "upstream peer {}: its listen host {} does not resolve ({}): it is refused until it "
      "does (tried again when it connects, at most every 5 s)",
      u.name, u.declared_host, error.empty() ? "no address" : error);
}

Admission::Verdict Admission::check(const transport::PeerInfo& peer, std::string& reason) {
  if (peer.role == transport::PeerRole::kProducer) {
    if (head_) return Verdict::kAdmit;
    reason = "node " + node_ +
             " is not a head node: producers send to a node without "
             "upstream peers";
    return Verdict::kProducerNotHead;
  }
  // The peer's own entry first, then those of the nodes that may stand in for it.
  const Upstream* first = nullptr;
  const Upstream* uncertified = nullptr;  // from its address, without the certificate for it
  const std::string_view host = host_of(peer.address);
  for (Upstream& u : upstream_) {
    if (u.name != peer.name) continue;
    if (!first) first = &u;
    if (!u.any && u.hosts.empty() && std::chrono::steady_clock::now() >= u.retry_at) {
      resolve(u);  // it failed when the topology was loaded: the one lookup on the loop
    }
    if (u.any || std::find(u.hosts.begin(), u.hosts.end(), host) != u.hosts.end()) {
      const auto& names = peer.certificate_names;
      if (!peer.tls || std::find(names.begin(), names.end(), u.certified_as) != names.end()) {
        return Verdict::kAdmit;
      }
      if (!uncertified) uncertified = &u;
    }
  }
  if (uncertified) {
    std::string names;
    for (const auto& n : peer.certificate_names) names += (names.empty() ? "" : ", ") + n;
    reason = "\"" + peer.name + "\" shows a TLS certificate that names " +
             (names.empty() ? std::string("no DNS name") : names) + ", not " +
             uncertified->certified_as + ": issue " + uncertified->certified_as +
             "'s certificate with subjectAltName = DNS:" + uncertified->certified_as;
    return Verdict::kWrongCertificate;
  }
  if (!first) {
    reason =
        "\"" + peer.name + "\" is not an upstream peer of " + node_ + " in topology " + pipeline_;
    return Verdict::kNotUpstream;
  }
  reason = "\"" + peer.name + "\" connects from " + std::string(host) +
           ", not from its address in topology " + pipeline_ + " (" + first->declared_host + ")";
  return Verdict::kWrongAddress;
}

}  // namespace hoprelay::daemon
