#include "hoprelay/daemon/latency.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "hoprelay/transport/invariants.h"

namespace hoprelay::daemon {

void LatencyHistogram::collect(prometheus::ClientMetric& out) const {
  uint64_t cumulative = 0;
  out.histogram.bucket.clear();
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound =
        i < kBoundsNs.size() ? double(kBoundsNs[i]) / 1e9 : std::numeric_limits<double>::infinity();
    out.histogram.bucket.push_back(b);
  }
  out.histogram.sample_count = cumulative;
  out.histogram.sample_sum = double(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
}

LatencyHistogram& HistogramFamily::add(std::vector<std::pair<std::string, std::string>> labels) {
  std::lock_guard lock(mutex_);
  for (auto& [existing, h] : children_) {
    if (existing == labels) return *h;
  }
  children_.emplace_back(std::move(labels), std::make_unique<LatencyHistogram>());
  return *children_.back().second;
}

std::vector<prometheus::MetricFamily> HistogramFamily::Collect() const {
  prometheus::MetricFamily f;
  f.name = name_;
  f.help = help_;
  f.type = prometheus::MetricType::Histogram;
  std::lock_guard lock(mutex_);
  for (const auto& [labels, h] : children_) {
    prometheus::ClientMetric m;
    for (const auto& [k, v] : labels) m.label.push_back({k, v});
    h->collect(m);
    f.metric.push_back(std::move(m));
  }
  return {f};
}

namespace {

prometheus::MetricFamily one(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

double boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime") {
      in >> value;
      return value;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::getline(stat, line);
  // Fields after the command name, which is in parentheses and may contain spaces.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::vector<std::string> f;
  for (std::string field; rest >> field;) f.push_back(field);
  if (f.size() > 21) {
    double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    // Indices are field numbers from proc(5) minus 3.
    out.push_back(one("process_cpu_seconds_total", "User and system CPU time spent in seconds",
                      MetricType::Counter, (std::stod(f[11]) + std::stod(f[12])) / ticks));
    out.push_back(one("process_start_time_seconds",
                      "Start time of the process since unix epoch in seconds", MetricType::Gauge,
                      boot_time() + std::stod(f[19]) / ticks));
    out.push_back(one("process_virtual_memory_bytes", "Virtual memory size in bytes",
                      MetricType::Gauge, std::stod(f[20])));
    out.push_back(one("process_resident_memory_bytes", "Resident memory size in bytes",
                      MetricType::Gauge, std::stod(f[21]) * page));
  }
  double fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++fds;
    closedir(d);
    fds -= 3;  // ".", ".." and the directory's own descriptor
  }
  out.push_back(one("process_open_fds", "Number of open file descriptors", MetricType::Gauge, fds));
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  out.push_back(one("process_max_fds", "Maximum number of open file descriptors", MetricType::Gauge,
                    static_cast<double>(rl.rlim_cur)));
  // The process's broken invariants (transport/invariants.h): 0 unless hoprelay has a bug.
  prometheus::MetricFamily inv = one("hoprelay_invariant_violations_total",
                                     "Broken invariants of the process's own bookkeeping, by kind "
                                     "(a bug in hoprelay: each is logged as an internal error)",
                                     MetricType::Counter, 0);
  inv.metric.clear();
  for (size_t i = 0; i < static_cast<size_t>(transport::Invariant::kCount); ++i) {
    prometheus::ClientMetric m;
    m.label.push_back({"kind", transport::kInvariantNames[i]});
    m.counter.value =
        static_cast<double>(transport::invariant_violations(static_cast<transport::Invariant>(i)));
    inv.metric.push_back(m);
  }
  out.push_back(std::move(inv));
  return out;
}

}  // namespace hoprelay::daemon
