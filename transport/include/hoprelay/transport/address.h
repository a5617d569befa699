// Socket addresses as every transport needs them: an endpoint of the topology resolved to one
// address, and an address written for logs and admission. IPv4 and IPv6 alike: a transport that
// handled one family only would refuse every peer of the other.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "hoprelay/config/endpoint.h"

namespace hoprelay::transport {

// Resolves host:port to one socket address (the first getaddrinfo gives; `passive`: a wildcard
// host binds every address). Setup path only: may block on DNS.
bool resolve(const config::Endpoint& endpoint, sockaddr_storage& out, socklen_t& len,
             bool passive = false);
// The port of an AF_INET or AF_INET6 address (others: nothing).
void set_port(sockaddr_storage& address, uint16_t port);
// "ip:port" or "[ipv6]:port"; with_port = false: "ip" or "ipv6" (what admission compares with
// the declared host). "?" for no address or another family.
std::string address_text(const sockaddr* address, bool with_port = true);

}  // namespace hoprelay::transport
