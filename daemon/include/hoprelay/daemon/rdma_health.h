// The health of the host's RDMA devices as Prometheus sees it, read from sysfs at scrape time
// (on the metrics server's thread: nothing on the data path), the way node_exporter's
// infiniband collector does, so that a link failure can be read against what the port and the
// device did. Per device and port:
//   hoprelay_rdma_port_state_id      the IB port state (1 down, 2 init, 3 armed, 4 active)
//   hoprelay_rdma_port_active        1 while that state is ACTIVE
//   hoprelay_rdma_hw_counter_total   every counter in ports/P/hw_counters/ (the driver's own
//                                    names: rxe has rcvd_pkts, sent_pkts, retry_exceeded_err,
//                                    completer_retry_err, link_downed, ...)
// A device or counter that cannot be read is left out of that scrape, not reported as 0.
// And the process's own receive rings (transport/ring_registrations.h):
//   hoprelay_rdma_rings_registered_total  rings registered with the device
//   hoprelay_rdma_rings_reused_total      rings a link took from a link gone (a reconnect)
#pragma once

#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

namespace hoprelay::daemon {

class RdmaHealthCollector final : public prometheus::Collectable {
 public:
  // `root`: the directory of the RDMA devices (tests point it at a fake tree).
  explicit RdmaHealthCollector(std::string root = "/sys/class/infiniband");
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string root_;
};

// The state number in sysfs's "4: ACTIVE" form, or -1.
int parse_port_state(const std::string& text);

}  // namespace hoprelay::daemon
