// `hoprelay plan` as an operator runs it: a hosts file in, a topology out that `hoprelay
// validate` accepts and that real daemons run (a tree:2 of seven nodes on loopback, a file to
// its four leaves byte-equal), and a bad hosts file refused with every line named.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "harness.h"

namespace hoprelay::test {
namespace {

TEST(Plan, APlannedTreeValidatesAndCarriesAFileToEveryLeafByteEqual) {
  TempDir dir;
  // Seven nodes on this host: each its own port (free_port() may return one twice).
  std::vector<uint16_t> ports;
  std::string hosts = "# a tree:2 of seven nodes on loopback\n";
  while (ports.size() < 7) {
    uint16_t p = free_port();
    if (std::find(ports.begin(), ports.end(), p) != ports.end()) continue;
    ports.push_back(p);
    hosts += "127.0.0.1:" + std::to_string(p) + (ports.size() == 1 ? "  -  head\n" : "\n");
  }
  write_file(dir / "hosts.txt", hosts);
  RunResult plan = run({HOPRELAY_BIN, "plan", "--hosts", (dir / "hosts.txt").string(), "--shape",
                        "tree:2", "--slot-size", "16KiB", "--name", "planned"});
  ASSERT_EQ(plan.code, 0) << plan.output;
  const std::string topology = plan.output;
  EXPECT_NE(topology.find("[nodes.head]\nlisten = \"127.0.0.1:" + std::to_string(ports[0]) +
                          "\"\ndownstream = [\"h1\", \"h2\"]\n"),
            std::string::npos)
      << topology;
  write_file(dir / "topology.toml", topology);
  RunResult ok = run({HOPRELAY_BIN, "validate", (dir / "topology.toml").string()});
  ASSERT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("ok: pipeline \"planned\", 7 nodes, 6 links"), std::string::npos)
      << ok.output;

  // The relays as daemons, the leaves as `hoprelay recv`, then a file into the head.
  const std::string topo = (dir / "topology.toml").string();
  std::vector<std::unique_ptr<Process>> daemons, leaves;
  for (const char* relay : {"head", "h1", "h2"}) {
    daemons.push_back(std::make_unique<Process>(
        std::vector<std::string>{HOPRELAYD_BIN, "--topology", topo, "--node", relay},
        dir / (std::string(relay) + ".log")));
  }
  for (int leaf = 3; leaf < 7; ++leaf) {
    const std::string name = "h" + std::to_string(leaf);
    leaves.push_back(std::make_unique<Process>(
        std::vector<std::string>{HOPRELAY_BIN, "recv", "--topology", topo, "--node", name,
                                 "--output", (dir / (name + ".out")).string(), "--timeout", "60"},
        dir / (name + ".log")));
  }
  const fs::path in = dir / "in.bin";
  write_random(in, 4 << 20, 41);
  RunResult sent = run({HOPRELAY_BIN, "send", "--topology", topo, "--to", "head", "--file",
                        in.string(), "--connect-timeout", "20"});
  ASSERT_EQ(sent.code, 0) << sent.output;
  for (int leaf = 3; leaf < 7; ++leaf) {
    const std::string name = "h" + std::to_string(leaf);
    EXPECT_EQ(leaves[leaf - 3]->wait(60s), 0) << name << ": " << leaves[leaf - 3]->output();
    EXPECT_TRUE(same_file(in, dir / (name + ".out"))) << name << " differs";
  }
}

TEST(Plan, ABadHostsFileIsRefusedWithEveryLineNamed) {
  TempDir dir;
  write_file(dir / "hosts.txt", "10.0.0.1\n10.0.0.1\n10.0.0.999\n");
  const std::string hosts = (dir / "hosts.txt").string();
  RunResult r = run({HOPRELAY_BIN, "plan", "--hosts", hosts, "--shape", "chain"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find(hosts + ":3:1: error: \"10.0.0.999\" is not a valid address"),
            std::string::npos)
      << r.output;
  r = run({HOPRELAY_BIN, "plan", "--hosts", hosts, "--shape", "tree:0"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("not a whole number from 1"), std::string::npos) << r.output;
  write_file(dir / "hosts.txt", "10.0.0.1\n10.0.0.1\n");
  r = run({HOPRELAY_BIN, "plan", "--hosts", hosts, "--shape", "chain"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find(hosts + ":2:1: error: 10.0.0.1:7001 is line 1's address already"),
            std::string::npos)
      << r.output;
  r = run({HOPRELAY_BIN, "plan", "--hosts", (dir / "missing.txt").string(), "--shape", "chain"});
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find("missing.txt: error: cannot read it"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hoprelay::test
