#include "hoprelay/transport/log.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {

void OutboundLink::report_down(LinkEvents& events, std::string_view reason, bool retry,
                               uint64_t unacknowledged, bool planned) {
  static auto logger = module_logger("link");
  if (retry && planned) {
    logger->info("outbound link to {} down: {} ({} unacknowledged frames kept for replay)",
                 peer_name_, reason, unacknowledged);
  } else if (retry) {
    logger->warn("outbound link to {} down: {} ({} unacknowledged frames kept for replay)",
                 peer_name_, reason, unacknowledged);
  } else {
    logger->info("outbound link to {} closed", peer_name_);
  }
  events.on_outbound_down(*this, reason);
}

}  // namespace hoprelay::transport
