// Trees of dozens of nodes (issue 17): a 63-node binary tree of real daemons on loopback, every
// message at each of its 32 leaves exactly once, also with a relay killed mid-stream; and
// `hoprelay validate` of a generated 10,000-node topology.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// A complete binary tree of `levels` levels: n0 is the head, node i broadcasts to n(2i+1) and
// n(2i+2), and the 2^(levels-1) leaves run verify-sink.
struct Tree {
  explicit Tree(int levels) : size((1 << levels) - 1), first_leaf((1 << (levels - 1)) - 1) {}
  std::string name(int i) const { return "n" + std::to_string(i); }
  bool leaf(int i) const { return i >= first_leaf; }
  std::vector<NodeDef> nodes(const TempDir& dir) const {
    std::vector<NodeDef> out;
    for (int i = 0; i < size; ++i) {
      if (leaf(i)) {
        out.push_back({name(i), {}, sink(dir, name(i))});
      } else {
        out.push_back({name(i), {name(2 * i + 1), name(2 * i + 2)}});
        out.back().extra = "route = \"broadcast\"\n";
      }
    }
    return out;
  }
  int size;
  int first_leaf;
};

// Every leaf received exactly `count` messages: none missing, duplicated or corrupt.
void expect_every_leaf_clean(const TempDir& dir, const Tree& tree, Pipeline& p, long long count) {
  for (int i = tree.first_leaf; i < tree.size; ++i) {
    ASSERT_TRUE(wait_until([&] { return report_has(dir, tree.name(i), count); }, 20s))
        << tree.name(i) << ": " << read_file(dir / (tree.name(i) + ".json"));
  }
  p.stop_all();
  for (int i = tree.first_leaf; i < tree.size; ++i) {
    SCOPED_TRACE(tree.name(i));
    expect_clean(read_report(dir / (tree.name(i) + ".json")), count);
  }
}

TEST(Tree, SixtyThreeNodesDeliverEveryMessageToAll32LeavesExactlyOnce) {
  TempDir dir;
  Tree tree(6);
  ASSERT_EQ(tree.size, 63);
  Pipeline p(dir, tree.nodes(dir));
  ASSERT_NO_FATAL_FAILURE(p.start_all());
  constexpr uint64_t kMessages = 20000;
  RunResult r = p.send("n0", kMessages, 1024, {"--connect-timeout", "20"});
  ASSERT_EQ(r.code, 0) << r.output;
  expect_every_leaf_clean(dir, tree, p, kMessages);
}

// n1 carries half the tree (15 nodes, 16 leaves below it): killed twice while the stream runs,
// its upstream n0 replays what it had not acknowledged, and the leaves still see every message
// once.
TEST(Tree, SixtyThreeNodesExactlyOnceThroughAKilledRelay) {
  TempDir dir;
  Tree tree(6);
  Pipeline p(dir, tree.nodes(dir));
  ASSERT_NO_FATAL_FAILURE(p.start_all());
  constexpr uint64_t kMessages = 6000;
  auto producer = p.start_send("n0", kMessages, 1024, {"--rate", "1500", "--log-level", "info"});
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(1200ms);
    p.crash_and_restart("n1");
  }
  EXPECT_EQ(producer->wait(90s), 0) << producer->output();
  expect_every_leaf_clean(dir, tree, p, kMessages);
  EXPECT_NE(read_file(dir / "n0.log").find("kept for replay"), std::string::npos)
      << "n1 was not killed mid-stream";
}

// A generated topology of `nodes` nodes, each node i broadcasting to 2i+1 and 2i+2 where those
// exist; `dangling` adds a downstream entry naming a node that is not there to the last node.
std::string big_topology(int nodes, bool dangling) {
  std::ostringstream t;
  t << "[pipeline]\nname = \"big\"\ntransport = \"tcp\"\nslot_size = \"16KiB\"\nslots = 32\n";
  for (int i = 0; i < nodes; ++i) {
    t << "\n[nodes.n" << i << "]\nlisten = \"127.0.0.1:" << 20000 + i << "\"\n";
    std::vector<int> down;
    for (int c : {2 * i + 1, 2 * i + 2}) {
      if (c < nodes) down.push_back(c);
    }
    if (dangling && i == nodes - 1) down.push_back(nodes);
    if (!down.empty()) {
      t << "downstream = [";
      for (size_t k = 0; k < down.size(); ++k) t << (k ? ", " : "") << "\"n" << down[k] << '"';
      t << "]\n";
    }
    t << "stage = { plugin = \"passthrough\" }\n";
  }
  return t.str();
}

TEST(Tree, ValidateTenThousandNodes) {
  TempDir dir;
  write_file(dir / "big.toml", big_topology(10000, false));
  RunResult r = run({HOPRELAY_BIN, "validate", (dir / "big.toml").string()}, 30s);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: pipeline \"big\", 10000 nodes, 9999 links"), std::string::npos)
      << r.output;
}

TEST(Tree, ValidateTenThousandNodesNamesTheDanglingDownstream) {
  TempDir dir;
  std::string text = big_topology(10000, true);
  write_file(dir / "big.toml", text);
  // Where `"n10000"` stands: 1-based line and column.
  size_t at = text.find("\"n10000\"");
  ASSERT_NE(at, std::string::npos);
  size_t line_start = text.rfind('\n', at) + 1;
  long line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
  std::string where = (dir / "big.toml").string() + ":" + std::to_string(line) + ":" +
                      std::to_string(at - line_start + 1) + ": error: ";
  RunResult r = run({HOPRELAY_BIN, "validate", (dir / "big.toml").string()}, 30s);
  EXPECT_EQ(r.code, 78) << r.output;
  EXPECT_NE(r.output.find(where + "nodes.n9999.downstream: \"n10000\" is not a node"),
            std::string::npos)
      << "expected " << where << " in:\n"
      << r.output;
}

}  // namespace
}  // namespace hoprelay::test
