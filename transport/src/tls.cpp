#include "hoprelay/transport/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* s) const { X509_STORE_CTX_free(s); }
};
struct StackFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

// The certificates of a PEM file, the leaf first.
std::vector<std::unique_ptr<X509, X509Free>> read_chain(const std::string& path) {
  std::vector<std::unique_ptr<X509, X509Free>> out;
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "r"));
  if (!f) return out;
  while (X509* x = PEM_read_X509(f.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the end of the file reads as an error
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// "cert /x/a.pem, ca /x/ca.pem": the files of `spec` this host does not have, or "".
std::string absent_files(const config::TlsSpec& spec) {
  std::string absent;
  for (const auto& [path, key] :
       {std::pair{&spec.cert, "cert"}, std::pair{&spec.key, "key"}, std::pair{&spec.ca, "ca"}}) {
    if (!exists(*path)) absent += (absent.empty() ? "" : ", ") + std::string(key) + " " + *path;
  }
  return absent;
}

}  // namespace

std::vector<std::string> dns_names_of(X509* cert) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type != GEN_DNS) continue;
    out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)),
                     static_cast<size_t>(ASN1_STRING_length(n->d.dNSName)));
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string names_text(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "no DNS name" : out;
}

std::string tls_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    // "error:0A000086:SSL routines::certificate verify failed" -> the reason after the last ':'
    std::string_view text(buf);
    if (auto colon = text.rfind(':'); colon != std::string_view::npos)
      text.remove_prefix(colon + 1);
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out;
}

std::string key_mode_refusal(const std::string& key) {
  struct stat st {};
  if (::stat(key.c_str(), &st) != 0) return "";  // OpenSSL's open says why
  // Readable by the node's group is how a service's key is shared (Debian's ssl-cert group,
  // auth_key_file's `chmod 640`); by every user of the host, or writable by the group, it is
  // no longer the node's own.
  if ((st.st_mode & (S_IRWXO | S_IWGRP)) == 0) return "";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
  return "tls.key " + key + " has mode " + mode +
         ((st.st_mode & S_IRWXO) ? ": every user of this host can read the node's private key"
                                 : ": its group can change the node's private key") +
         "; `chmod 600 " + key + "` (or 640, chgrp'd to the group hoprelayd runs in)";
}

std::optional<std::string> tls_start_refusal(const config::TlsSpec& spec) {
  const std::string absent = absent_files(spec);
  if (!absent.empty()) {
    return "this node's TLS files are not on this host: tls " + absent +
           " (docs/security.md, \"TLS\": each host has its node's certificate and key, and "
           "the CA, under these paths)";
  }
  try {
    TlsContext::load(spec);
  } catch (const TransportError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::shared_ptr<const TlsContext> TlsContext::load(const config::TlsSpec& spec) {
  if (std::string why = key_mode_refusal(spec.key); !why.empty()) throw TransportError(why);
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_method()));
  if (!ctx) throw TransportError("TLS: cannot make a context: " + tls_errors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), spec.cert.c_str()) != 1) {
    throw TransportError("tls.cert " + spec.cert + ": " + tls_errors() +
                         (exists(spec.cert) ? ": it must hold the node's certificate (PEM), then "
                                              "any intermediate CA certificates"
                                            : ": put the node's certificate (PEM) there"));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), spec.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    const std::string errors = tls_errors();
    if (errors.find("key values mismatch") != std::string::npos) {
      throw TransportError("tls.key " + spec.key + " is not the key of tls.cert " + spec.cert +
                           ": give the pair that was issued together");
    }
    throw TransportError("tls.key " + spec.key + ": " + errors +
                         (exists(spec.key) ? ": it must hold the private key of tls.cert (PEM, "
                                             "not encrypted), readable by the node's user"
                                           : ": put the private key of tls.cert (PEM) there"));
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    throw TransportError("tls.key " + spec.key + " is not the key of tls.cert " + spec.cert + " (" +
                         tls_errors() + "): give the pair that was issued together");
  }
  if (SSL_CTX_load_verify_locations(ctx.get(), spec.ca.c_str(), nullptr) != 1) {
    throw TransportError("tls.ca " + spec.ca + ": " + tls_errors() +
                         ": it must hold the CA certificate(s) (PEM) that peers' certificates "
                         "chain to");
  }
  X509* own = SSL_CTX_get0_certificate(ctx.get());
  if (X509_cmp_current_time(X509_get0_notAfter(own)) < 0) {
    throw TransportError("tls.cert " + spec.cert +
                         " has expired: every peer refuses it; renew it (then `systemctl reload` "
                         "takes the new one without dropping links)");
  }
  // Both ends verify: a peer without a certificate that chains to tls.ca is refused.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // No session tickets: links are long-lived, and a ticket is a post-handshake record that a
  // kernel TLS receiver (kTLS) would have to take apart from the data.
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  // kTLS where the kernel has it (the `tls` module): records are then encrypted by the kernel
  // and the datapath keeps its sendmsg from the slots. OpenSSL falls back to user space without.
  SSL_CTX_set_options(ctx.get(), SSL_OP_ENABLE_KTLS);
  // The datapath writes what the socket takes and comes back with the rest (from a buffer that
  // may have moved, as the send coalescing buffer does).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  std::string names = names_text(dns_names_of(own));
  return std::shared_ptr<const TlsContext>(new TlsContext(ctx.release(), spec, std::move(names)));
}

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
}

std::optional<std::string> check_tls_files(const config::TlsSpec& spec,
                                           const std::vector<std::string>& nodes, bool& missing) {
  missing = false;
  const std::string absent = absent_files(spec);
  if (!absent.empty()) {
    missing = true;
    return "not on this host: tls " + absent +
           " (they are checked on the hosts that have them, by `hoprelay validate` there, and "
           "by each node at start)";
  }
  // What the node would refuse at start (the pair, the key's mode, expiry); then what its
  // peers would.
  if (auto why = tls_start_refusal(spec)) return why;
  auto chain = read_chain(spec.cert);
  if (chain.empty()) return "tls.cert " + spec.cert + ": no certificate in it";
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  if (X509_STORE_load_file(store.get(), spec.ca.c_str()) != 1) {
    return "tls.ca " + spec.ca + ": " + tls_errors();
  }
  std::unique_ptr<STACK_OF(X509), StackFree> rest(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) {
    X509_up_ref(chain[i].get());
    sk_X509_push(rest.get(), chain[i].get());
  }
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> check(X509_STORE_CTX_new());
  X509_STORE_CTX_init(check.get(), store.get(), chain[0].get(), rest.get());
  if (X509_verify_cert(check.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(check.get());
    ERR_clear_error();
    return "tls.cert " + spec.cert + " does not chain to tls.ca " + spec.ca + ": " +
           X509_verify_cert_error_string(err) +
           " (peers with this CA refuse it: issue it from that CA, or give the CA that issued it)";
  }
  // The files are this host's: its certificate names the node it runs, one of those using them.
  std::string all;
  for (const auto& name : nodes) {
    if (X509_check_host(chain[0].get(), name.data(), name.size(),
                        X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr) == 1) {
      return std::nullopt;
    }
    all += (all.empty() ? "" : ", ") + name;
  }
  return "tls.cert " + spec.cert + " names none of the nodes that use it (" + all +
         "; its DNS names: " + names_text(dns_names_of(chain[0].get())) +
         "): peers refuse it; issue each node's certificate with subjectAltName = DNS:NODE";
}

}  // namespace hoprelay::transport
