#include "hoprelay/transport/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

namespace hoprelay::transport {

bool resolve(const config::Endpoint& endpoint, sockaddr_storage& out, socklen_t& len,
             bool passive) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return false;
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

void set_port(sockaddr_storage& address, uint16_t port) {
  if (address.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&address)->sin_port = htons(port);
  } else if (address.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&address)->sin6_port = htons(port);
  }
}

std::string address_text(const sockaddr* address, bool with_port) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (address && address->sa_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(address);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    if (!with_port) return host;
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (address && address->sa_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    if (!with_port) return host;
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "?";
}

}  // namespace hoprelay::transport
