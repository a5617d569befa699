#include "../tcp/tcp_transport.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {

TransportChoice make_transport(config::TransportKind kind, const config::Endpoint& local_address,
                               EventLoop& loop, LinkEvents& events, Identity identity) {
  switch (kind) {
    case config::TransportKind::kTcp:
      return {std::make_unique<tcp::TcpTransport>(loop, events, std::move(identity)),
              "transport = \"tcp\" in the topology"};
    case config::TransportKind::kVerbs:
      throw TransportError(
          "transport = \"verbs\" is not available in this build yet; use "
          "\"tcp\" or \"auto\"");
    case config::TransportKind::kAuto:
      break;
  }
  return {std::make_unique<tcp::TcpTransport>(loop, events, std::move(identity)),
          "transport = \"auto\": no RDMA device serves " + local_address.host + ", using tcp"};
}

}  // namespace hoprelay::transport
