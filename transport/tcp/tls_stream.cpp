#include "tls_stream.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "hoprelay/transport/transport.h"

namespace hoprelay::transport::tcp {

namespace {

// The context's verification, plus: the names of the certificate shown, kept for the refusal's
// words. A certificate that fails verification is never the session's peer certificate
// (SSL_get0_peer_certificate is null after a failed handshake), so without this a hostname
// mismatch said "it names no DNS name" of a certificate that names DNS:head.
int keep_leaf_names(int ok, X509_STORE_CTX* ctx) {
  if (X509_STORE_CTX_get_error_depth(ctx) != 0) return ok;
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(ctx, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* self = ssl ? static_cast<TlsStream*>(SSL_get_app_data(ssl)) : nullptr;
  X509* leaf = X509_STORE_CTX_get_current_cert(ctx);
  if (self && leaf) self->keep_shown_names(dns_names_of(leaf));
  return ok;
}

}  // namespace

TlsStream::TlsStream(const TlsContext& context, int fd, bool server, std::string_view peer)
    : ssl_(SSL_new(context.ctx())), fd_(fd), server_(server), peer_(peer) {
  if (!ssl_ || SSL_set_fd(ssl_, fd) != 1) {
    if (ssl_) SSL_free(ssl_);
    throw TransportError("TLS: cannot start a session: " + tls_errors());
  }
  if (server) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
    // The downstream must be the node the topology names: its certificate says so in a DNS
    // subject alternative name (never the subject's common name).
    SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    SSL_set1_host(ssl_, peer_.c_str());
  }
  SSL_set_app_data(ssl_, this);
  SSL_set_verify(ssl_, SSL_get_verify_mode(ssl_), &keep_leaf_names);
}

TlsStream::~TlsStream() {
  // No close_notify: the link's own BYE says a close was planned, and a shutdown record
  // written here could block or land after the socket's end.
  SSL_free(ssl_);
}

TlsStream::Step TlsStream::handshake() {
  ERR_clear_error();
  errno = 0;
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    ktls_send_ = BIO_get_ktls_send(SSL_get_wbio(ssl_)) > 0;
    ktls_recv_ = BIO_get_ktls_recv(SSL_get_rbio(ssl_)) > 0;
    return Step::kDone;
  }
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ) return Step::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return Step::kWantWrite;
  why_ = explain(err, errno);
  return Step::kFailed;
}

std::string TlsStream::explain(int err, int saved_errno) {
  const long verify = SSL_get_verify_result(ssl_);
  const std::string errors = tls_errors();
  const std::string who = server_ ? "the peer" : peer_;
  if (verify != X509_V_OK) {
    std::string why =
        "TLS: " + who + "'s certificate is refused: " + X509_verify_cert_error_string(verify);
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH) {
      return why + " (it names " + peer_names_text() + ", not " + peer_ +
             "): is the topology's address of " + peer_ + " another node's? Else issue " + peer_ +
             "'s certificate with subjectAltName = DNS:" + peer_;
    }
    if (verify == X509_V_ERR_CERT_HAS_EXPIRED) {
      return why + ": renew it on " + who + "'s host, then `systemctl reload` there";
    }
    return why + ": it must chain to this node's tls.ca";
  }
  if (errors.find("alert") != std::string::npos) {
    // The peer refused this end's certificate (or its hello), and said why in its alert.
    return "TLS: " + who + " refused this node's certificate (" + errors +
           "): it must chain to the peer's tls.ca, be current and name this node";
  }
  if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && saved_errno == 0) ||
      errors.find("unexpected eof") != std::string::npos) {
    return "TLS: " + who +
           " closed the connection during the TLS handshake: does it run without tls? Both "
           "ends of a link need a tls table (docs/security.md)";
  }
  if (errors.find("wrong version number") != std::string::npos ||
      errors.find("packet length too long") != std::string::npos ||
      errors.find("http request") != std::string::npos) {
    return "TLS: " + who +
           " does not speak TLS (its first bytes are clear text): give it a tls table too, or "
           "remove this one's";
  }
  return "TLS with " + who + " failed: " +
         (errors.empty() ? std::string(std::strerror(saved_errno ? saved_errno : EPROTO)) : errors);
}

ssize_t TlsStream::result(int ok, size_t done, bool write) {
  if (ok == 1) return static_cast<ssize_t>(done);
  const int err = SSL_get_error(ssl_, ok);
  switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return write ? (errno = EPIPE, -1) : 0;  // the peer's close_notify: its end
    case SSL_ERROR_SYSCALL:
      if (errno == 0) {
        if (!write) return 0;  // the connection ended without close_notify
        errno = EPIPE;
      }
      ERR_clear_error();
      return -1;
    default:
      // A record that fails to decrypt, an alert, any other protocol error: the link fails.
      why_ = explain(err, errno);
      errno = EPROTO;
      return -1;
  }
}

ssize_t TlsStream::recv(void* buf, size_t len) {
  if (ktls_recv_) return ::recv(fd_, buf, len, 0);
  size_t got = 0;
  errno = 0;
  const int ok = SSL_read_ex(ssl_, buf, len, &got);  // (before `got` is read)
  return result(ok, got, false);
}

ssize_t TlsStream::readv(const iovec* iov, int n) {
  if (ktls_recv_) return ::readv(fd_, iov, n);
  ssize_t total = 0;
  for (int i = 0; i < n; ++i) {
    if (iov[i].iov_len == 0) continue;
    const ssize_t r = recv(iov[i].iov_base, iov[i].iov_len);
    if (r <= 0) return total > 0 ? total : r;
    total += r;
    if (static_cast<size_t>(r) < iov[i].iov_len) break;
  }
  return total;
}

ssize_t TlsStream::send(const void* buf, size_t len) {
  if (ktls_send_) return ::send(fd_, buf, len, MSG_NOSIGNAL);
  size_t done = 0;
  errno = 0;
  const int ok = SSL_write_ex(ssl_, buf, len, &done);  // (before `done` is read)
  return result(ok, done, true);
}

ssize_t TlsStream::sendv(const iovec* iov, int n) {
  if (ktls_send_) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(n);
    return ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
  }
  // One record at most per element: a partial write comes back as the bytes taken, and the
  // datapath calls again from there (SSL_MODE_ENABLE_PARTIAL_WRITE).
  ssize_t total = 0;
  for (int i = 0; i < n; ++i) {
    if (iov[i].iov_len == 0) continue;
    const ssize_t r = send(iov[i].iov_base, iov[i].iov_len);
    if (r <= 0) return total > 0 ? total : r;
    total += r;
    if (static_cast<size_t>(r) < iov[i].iov_len) break;
  }
  return total;
}

bool TlsStream::pending() const {
  return !ktls_recv_ && SSL_has_pending(ssl_) == 1;
}

std::vector<std::string> TlsStream::peer_names() const {
  X509* cert = SSL_get0_peer_certificate(ssl_);
  return cert ? dns_names_of(cert) : shown_names_;
}

std::string TlsStream::description() const {
  std::string out = std::string(SSL_get_version(ssl_)) + ", " + SSL_get_cipher_name(ssl_);
  if (ktls_send_ && ktls_recv_) return out + ", kTLS";
  if (ktls_send_) return out + ", kTLS send";
  if (ktls_recv_) return out + ", kTLS receive";
  return out;
}

}  // namespace hoprelay::transport::tcp
