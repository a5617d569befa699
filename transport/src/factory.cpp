// The transport factory: TCP and verbs are equals behind one interface, and `auto` is a
// choice made once, at start, and logged with its reason, not a fallback on error.
#include "../tcp/tcp_transport.h"
#include "../verbs/verbs_transport.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {

TransportChoice make_transport(const TransportOptions& options, EventLoop& loop, LinkEvents& events,
                               Identity identity) {
  auto make_tcp = [&] {
    return std::make_unique<tcp::TcpTransport>(loop, events, std::move(identity), options.poll,
                                               options.dead_after);
  };
  auto make_verbs = [&] {
    return std::make_unique<verbs::VerbsTransport>(loop, events, std::move(identity), options.poll,
                                                   options.dead_after);
  };
  std::string why;
  switch (options.kind) {
    case config::TransportKind::kTcp:
      return {make_tcp(), "transport = \"tcp\" in the topology"};
    case config::TransportKind::kVerbs: {
      std::string device = rdma_device_for(options.address, options.local, why);
      if (device.empty()) {
        throw TransportError("transport = \"verbs\" but " + why +
                             ": load the RDMA driver and give the netdev this address, or set "
                             "transport = \"tcp\"");
      }
      return {make_verbs(),
              "transport = \"verbs\"; RDMA device " + device + " serves " + options.address.host};
    }
    case config::TransportKind::kAuto:
      break;
  }
  std::string device = rdma_device_for(options.address, options.local, why);
  if (!device.empty()) {
    return {make_verbs(), "transport = \"auto\": RDMA device " + device + " serves " +
                              options.address.host + ", using verbs"};
  }
  return {make_tcp(), "transport = \"auto\": " + why + ", using tcp"};
}

}  // namespace hoprelay::transport
