// How many receive rings the verbs transports of this process registered with a device, and
// how many a new link took instead from a link gone (VerbsTransport keeps the rings of closed
// links registered for the next: a relay that comes back reconnects without an aligned_alloc,
// a memset and an ibv_reg_mr of a whole ring on the loop). Any thread: relaxed counters, read
// at scrape time (daemon/rdma_health.h); 0 and 0 under TCP.
#pragma once

#include <cstdint>

namespace hoprelay::transport {

struct RingRegistrations {
  uint64_t registered = 0;  // rings registered (ibv_reg_mr)
  uint64_t reused = 0;      // rings a link took from the spare rings instead
};
RingRegistrations ring_registrations();

}  // namespace hoprelay::transport
