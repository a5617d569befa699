// The RDMA health collector (daemon/rdma_health.h) reading a sysfs tree laid out as Soft-RoCE
// lays it out; what a real rxe device reports is checked by the Soft-RoCE and cluster suites.
#include "hoprelay/daemon/rdma_health.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "hoprelay/transport/ring_registrations.h"

namespace fs = std::filesystem;
using hoprelay::daemon::parse_port_state;
using hoprelay::daemon::RdmaHealthCollector;

namespace {

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// "name{label=value,...}" -> value, for every sample.
std::map<std::string, double> samples(const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, double> out;
  for (const auto& f : families) {
    for (const auto& m : f.metric) {
      std::string key = f.name + "{";
      for (const auto& l : m.label) key += l.name + "=" + l.value + ",";
      key += "}";
      out[key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

class RdmaHealth : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("hoprelay-rdma-health-" +
             std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

}  // namespace

TEST(RdmaPortState, ParsesSysfsForm) {
  EXPECT_EQ(parse_port_state("4: ACTIVE"), 4);
  EXPECT_EQ(parse_port_state("1: DOWN"), 1);
  EXPECT_EQ(parse_port_state("ACTIVE"), -1);
  EXPECT_EQ(parse_port_state("4"), -1);
  EXPECT_EQ(parse_port_state(""), -1);
}

TEST_F(RdmaHealth, ExportsStateAndEveryHwCounterPerDeviceAndPort) {
  write(root_ / "rxe0/ports/1/state", "4: ACTIVE\n");
  write(root_ / "rxe0/ports/1/hw_counters/rcvd_pkts", "1234\n");
  write(root_ / "rxe0/ports/1/hw_counters/retry_exceeded_err", "0\n");
  write(root_ / "rxe0/ports/1/hw_counters/lifespan", "10\n");
  write(root_ / "rxe0/ports/1/hw_counters/broken", "n/a\n");
  write(root_ / "rxe1/ports/1/state", "1: DOWN\n");
  auto s = samples(RdmaHealthCollector(root_.string()).Collect());
  EXPECT_EQ(s.size(), 8u);  // and the process's two ring counters
  EXPECT_EQ(s.at("hoprelay_rdma_port_state_id{device=rxe0,port=1,}"), 4);
  EXPECT_EQ(s.at("hoprelay_rdma_port_active{device=rxe0,port=1,}"), 1);
  EXPECT_EQ(s.at("hoprelay_rdma_port_state_id{device=rxe1,port=1,}"), 1);
  EXPECT_EQ(s.at("hoprelay_rdma_port_active{device=rxe1,port=1,}"), 0);
  EXPECT_EQ(s.at("hoprelay_rdma_hw_counter_total{device=rxe0,port=1,counter=rcvd_pkts,}"), 1234);
  EXPECT_EQ(s.at("hoprelay_rdma_hw_counter_total{device=rxe0,port=1,counter=retry_exceeded_err,}"),
            0);
}

TEST_F(RdmaHealth, NoDevicesNoDeviceSeriesOnlyTheProcesssRings) {
  auto s = samples(RdmaHealthCollector(root_.string()).Collect());
  EXPECT_EQ(s.size(), 2u);
  // What this process registered: nothing, unless a verbs test ran before in the same process.
  const auto rings = hoprelay::transport::ring_registrations();
  EXPECT_EQ(s.at("hoprelay_rdma_rings_registered_total{}"), double(rings.registered));
  EXPECT_EQ(s.at("hoprelay_rdma_rings_reused_total{}"), double(rings.reused));
}
