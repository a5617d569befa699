#include "hoprelay/daemon/rdma_health.h"

#include "hoprelay/transport/ring_registrations.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace hoprelay::daemon {
namespace {

namespace fs = std::filesystem;
constexpr int kPortActive = 4;  // IB spec port state ACTIVE

bool read_text(const fs::path& file, std::string& out) {
  std::ifstream in(file);
  if (!in) return false;
  std::getline(in, out);
  return !in.bad() && !out.empty();
}

bool read_number(const fs::path& file, double& out) {
  std::string text;
  if (!read_text(file, text)) return false;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data()) return false;
  out = static_cast<double>(v);
  return true;
}

// Directory entries, sorted (stable output order), none if the directory is not there.
std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

prometheus::MetricFamily family(const char* name, const char* help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void add(prometheus::MetricFamily& f, std::vector<prometheus::ClientMetric::Label> labels,
         double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace

int parse_port_state(const std::string& text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data() || end == text.data() + text.size() || *end != ':') {
    return -1;
  }
  return v;
}

RdmaHealthCollector::RdmaHealthCollector(std::string root) : root_(std::move(root)) {}

std::vector<prometheus::MetricFamily> RdmaHealthCollector::Collect() const {
  using prometheus::MetricType;
  auto state = family("hoprelay_rdma_port_state_id",
                      "State of the RDMA port (IB spec: 1 down, 2 init, 3 armed, 4 active)",
                      MetricType::Gauge);
  auto active =
      family("hoprelay_rdma_port_active", "1 while the RDMA port is ACTIVE", MetricType::Gauge);
  auto hw = family("hoprelay_rdma_hw_counter_total",
                   "The RDMA device's hardware counters (sysfs hw_counters), by the driver's name",
                   MetricType::Counter);
  for (const fs::path& dev : entries(root_)) {
    for (const fs::path& port : entries(dev / "ports")) {
      std::vector<prometheus::ClientMetric::Label> labels{{"device", dev.filename().string()},
                                                          {"port", port.filename().string()}};
      std::string text;
      if (int s = read_text(port / "state", text) ? parse_port_state(text) : -1; s >= 0) {
        add(state, labels, s);
        add(active, labels, s == kPortActive ? 1 : 0);
      }
      for (const fs::path& counter : entries(port / "hw_counters")) {
        // lifespan is how long the driver caches the counters (ms), not a counter.
        if (counter.filename() == "lifespan") continue;
        double v = 0;
        if (!read_number(counter, v)) continue;
        auto with_name = labels;
        with_name.push_back({"counter", counter.filename().string()});
        add(hw, std::move(with_name), v);
      }
    }
  }
  std::vector<prometheus::MetricFamily> out;
  for (auto* f : {&state, &active, &hw}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  // This process's own registrations, whatever sysfs shows.
  const transport::RingRegistrations rings = transport::ring_registrations();
  auto registered =
      family("hoprelay_rdma_rings_registered_total",
             "Receive rings registered with the RDMA device (ibv_reg_mr)", MetricType::Counter);
  add(registered, {}, static_cast<double>(rings.registered));
  auto reused = family("hoprelay_rdma_rings_reused_total",
                       "Receive rings a new link took from links gone instead of registering one "
                       "(a reconnect)",
                       MetricType::Counter);
  add(reused, {}, static_cast<double>(rings.reused));
  out.push_back(std::move(registered));
  out.push_back(std::move(reused));
  return out;
}

}  // namespace hoprelay::daemon
