// One TCP link's TLS session (docs/security.md, "TLS"): the handshake on the link's
// non-blocking socket, driven by its event-loop handler, then the reads and writes of the
// datapath with the same contract as the system calls they stand for (> 0 bytes, 0 at the
// peer's end, -1 with errno, EAGAIN when the socket has nothing or takes nothing now).
// With kernel TLS in a direction, that direction's calls are the plain system calls on the
// socket (the kernel encrypts): the datapath keeps its sendmsg from the slots.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/transport/tls.h"

using SSL = struct ssl_st;

namespace hoprelay::transport::tcp {

class TlsStream {
 public:
  // A client (connecting) checks that the peer's certificate names `peer` (the downstream
  // node); a server learns who the peer says it is from its hello and asks names() then.
  TlsStream(const TlsContext& context, int fd, bool server, std::string_view peer);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  enum class Step { kDone, kWantRead, kWantWrite, kFailed };
  // One step of the handshake; with kFailed, why() says what went wrong and what to do.
  Step handshake();
  // Why the handshake or the last call that failed with EPROTO failed (a refused certificate
  // shows only at the client's first read in TLS 1.3: the server's alert comes then).
  const std::string& why() const { return why_; }

  ssize_t recv(void* buf, size_t len);
  ssize_t readv(const iovec* iov, int n);
  ssize_t send(const void* buf, size_t len);
  ssize_t sendv(const iovec* iov, int n);
  // Bytes decrypted and waiting here, which the socket's readiness does not show.
  bool pending() const;

  // The peer certificate's DNS subject alternative names, and the same as text for messages.
  std::vector<std::string> peer_names() const;
  std::string peer_names_text() const { return names_text(peer_names()); }
  // From the verification of the peer's certificate (its DNS names, kept also when it is
  // refused): what peer_names() says once the handshake has failed.
  void keep_shown_names(std::vector<std::string> names) { shown_names_ = std::move(names); }
  // "TLS 1.3, TLS_AES_256_GCM_SHA384, kTLS send and receive" for the link-up log.
  std::string description() const;
  bool ktls_send() const { return ktls_send_; }
  bool ktls_recv() const { return ktls_recv_; }

 private:
  // SSL_read/SSL_write's result in the system calls' terms.
  ssize_t result(int ok, size_t done, bool write);
  // What a failed call of OpenSSL means for the operator, from its error (SSL_get_error), the
  // errno it left and the error queue (emptied).
  std::string explain(int err, int saved_errno);

  SSL* ssl_;
  int fd_;
  bool server_;
  std::string peer_;
  std::string why_;
  std::vector<std::string> shown_names_;
  bool ktls_send_ = false;
  bool ktls_recv_ = false;
};

// The link's stream, TLS or clear (tls null): the datapath's system calls.
inline ssize_t link_recv(int fd, TlsStream* tls, void* buf, size_t len) {
  return tls ? tls->recv(buf, len) : ::recv(fd, buf, len, 0);
}
inline ssize_t link_readv(int fd, TlsStream* tls, const iovec* iov, int n) {
  return tls ? tls->readv(iov, n) : ::readv(fd, iov, n);
}
inline ssize_t link_send(int fd, TlsStream* tls, const void* buf, size_t len) {
  return tls ? tls->send(buf, len) : ::send(fd, buf, len, MSG_NOSIGNAL);
}
inline ssize_t link_sendv(int fd, TlsStream* tls, const iovec* iov, int n) {
  if (tls) return tls->sendv(iov, n);
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(n);
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL);
}

}  // namespace hoprelay::transport::tcp
