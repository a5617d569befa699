// TLS on TCP links (docs/security.md, "TLS"): one node's credentials, loaded once and shared by
// every link it makes or accepts. TLS 1.3 only, and mutual: each end presents a certificate
// that must chain to the other's CA, and a node's certificate must name it (a DNS subject
// alternative name equal to its node name) to be admitted as that node. Verbs links do not use
// it (their protection is the fabric's; the pre-shared key still authenticates them).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/config/topology.h"

using SSL_CTX = struct ssl_ctx_st;
using X509 = struct x509_st;

namespace hoprelay::transport {

class TlsContext {
 public:
  // Reads the certificate chain, the key and the CA (PEM) and checks that they belong
  // together. Throws TransportError naming the file and what to do.
  static std::shared_ptr<const TlsContext> load(const config::TlsSpec& spec);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* ctx() const { return ctx_; }
  const config::TlsSpec& spec() const { return spec_; }
  // The DNS names the own certificate carries, comma-separated: what peers check it against.
  const std::string& names() const { return names_; }

 private:
  TlsContext(SSL_CTX* ctx, config::TlsSpec spec, std::string names)
      : ctx_(ctx), spec_(std::move(spec)), names_(std::move(names)) {}
  SSL_CTX* ctx_;
  config::TlsSpec spec_;
  std::string names_;
};

// `hoprelay validate`'s check of the TLS files that `nodes` use, as this host has them: they
// load, the certificate chains to the CA, has not expired and names one of `nodes` (the one
// this host runs: every host has its own files under the same paths). nullopt when all holds;
// else what is wrong and what to do. `missing` is set when a file does not exist here (the
// files belong on the hosts that run the nodes): a warning, not an error.
std::optional<std::string> check_tls_files(const config::TlsSpec& spec,
                                           const std::vector<std::string>& nodes, bool& missing);

// What a node using these TLS files refuses at start (hoprelayd, and `hoprelay validate --node`
// for the node's own): a file not on this host, a private key readable by every user or
// writable by its group (key_mode_refusal), a pair that does not load or match, a certificate
// expired. nullopt when it would start. Whether the certificate names the node is a peer's to
// refuse (check_tls_files says it ahead).
std::optional<std::string> tls_start_refusal(const config::TlsSpec& spec);
// Why the private key at `key` is not the node's own, by its mode, or "" (also "" when it
// cannot be looked at: loading it says why). TlsContext::load refuses the same.
std::string key_mode_refusal(const std::string& key);

// A certificate's DNS subject alternative names.
std::vector<std::string> dns_names_of(X509* cert);
// "a, b", or "no DNS name".
std::string names_text(const std::vector<std::string>& names);

// What OpenSSL's error queue holds, one line, and the queue emptied ("" when it is empty).
std::string tls_errors();

}  // namespace hoprelay::transport
