// `hoprelay plan` (config/plan.h) with no process: the hosts file's errors name their line and
// column, each shape's edges, the windows sized from the depth, and every plan loads through
// the validator the daemon uses (also one of 10,000 hosts).
#include "hoprelay/config/plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hoprelay::config {
namespace {

std::vector<std::string> error_lines(const std::string& hosts, uint16_t port = 7001) {
  try {
    parse_plan_hosts(hosts, "hosts.txt", port);
  } catch (const ConfigError& e) {
    std::vector<std::string> out;
    for (const auto& d : e.diagnostics()) out.push_back(d.format());
    return out;
  }
  return {};
}

std::vector<std::string> plan_errors(const std::string& hosts, const std::string& shape,
                                     std::optional<uint16_t> metrics = std::nullopt) {
  PlanOptions o;
  o.hosts_file = "hosts.txt";
  EXPECT_EQ(parse_plan_shape(shape, o), "");
  o.metrics_port = metrics;
  try {
    make_plan(parse_plan_hosts(hosts, "hosts.txt", o.port), o);
  } catch (const ConfigError& e) {
    std::vector<std::string> out;
    for (const auto& d : e.diagnostics()) out.push_back(d.format());
    return out;
  }
  return {};
}

// The topology of a plan, loaded as hoprelayd loads one.
Topology planned(const std::string& hosts, const std::string& shape, PlanOptions o = {}) {
  o.hosts_file = "hosts.txt";
  o.shape_text = shape;
  EXPECT_EQ(parse_plan_shape(shape, o), "");
  const Plan plan = make_plan(parse_plan_hosts(hosts, "hosts.txt", o.port), o);
  const std::string text = write_plan(plan, o);
  try {
    return parse_topology(text, "plan.toml", PluginCheck{PluginCheck::Mode::kNone, ""});
  } catch (const ConfigError& e) {
    std::string all;
    for (const auto& d : e.diagnostics()) all += d.format() + "\n";
    ADD_FAILURE() << all << text;
    throw;
  }
}

std::string hosts_of(int n, const std::string& prefix = "10.0.") {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += prefix + std::to_string(i / 250) + "." + std::to_string(1 + i % 250) + "\n";
  }
  return out;
}

std::vector<std::string> downstream(const Topology& t, const std::string& node) {
  return t.find(node)->downstream;
}

TEST(Plan, ShapesParseAndRefuseWhatTheyCannotMean) {
  PlanOptions o;
  EXPECT_EQ(parse_plan_shape("tree:3", o), "");
  EXPECT_EQ(o.shape, PlanShape::kTree);
  EXPECT_EQ(o.fanout, 3u);
  EXPECT_EQ(parse_plan_shape("racks:1", o), "");
  EXPECT_EQ(o.shape, PlanShape::kRacks);
  EXPECT_NE(parse_plan_shape("tree:0", o).find("not a whole number from 1"), std::string::npos);
  EXPECT_NE(parse_plan_shape("tree", o).find("needs its fan-out K, as in tree:2"),
            std::string::npos);
  EXPECT_NE(parse_plan_shape("star", o).find("unknown shape \"star\""), std::string::npos);
  EXPECT_NE(parse_plan_shape("tree:2x", o).find("not a whole number"), std::string::npos);
}

TEST(Plan, BadHostLinesAreNamedByLineAndColumnAllAtOnce) {
  const auto errors = error_lines(
      "# fleet\n"
      "10.0.0.1 rack1 head\n"
      "\n"
      "  10.0.0.300\n"         // line 4: not IPv4
      "10.0.0.3 r b c\n"       // line 5: a fourth field
      "10.0.0.4 - bad/name\n"  // line 6
      "[fd00::1:7001\n");      // line 7
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].rfind("hosts.txt:4:3: error: \"10.0.0.300\" is not a valid address", 0), 0u)
      << errors[0];
  EXPECT_EQ(errors[1].rfind("hosts.txt:5:14: error: \"c\": one field too many", 0), 0u)
      << errors[1];
  EXPECT_EQ(errors[2].rfind("hosts.txt:6:12: error: node name \"bad/name\" is invalid", 0), 0u)
      << errors[2];
  EXPECT_EQ(errors[3].rfind("hosts.txt:7:1: error:", 0), 0u) << errors[3];
  const auto empty = error_lines("# nothing here\n\n");
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_NE(empty[0].find("no hosts"), std::string::npos) << empty[0];
}

TEST(Plan, DuplicateAddressesNamesAndMissingLabelsNameBothLines) {
  auto e = plan_errors("10.0.0.1\n10.0.0.2\n10.0.0.1:7001\n", "chain");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].rfind("hosts.txt:3:1: error: 10.0.0.1:7001 is line 1's address already", 0), 0u)
      << e[0];
  e = plan_errors("10.0.0.1 - a\n10.0.0.2 - a\n", "chain");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].rfind("hosts.txt:2:12: error: node name \"a\" is line 1's already", 0), 0u)
      << e[0];
  e = plan_errors("10.0.0.1 - h1\n10.0.0.2\n", "chain");  // the second's default name is h1
  ASSERT_EQ(e.size(), 1u) << "a given name may not take another host's default";
  e = plan_errors("10.0.0.1 r1\n10.0.0.2\n", "racks:2");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("hosts.txt:2:1: error: racks:2 needs every host's LABEL"), std::string::npos)
      << e[0];
  e = plan_errors("127.0.0.1:7001\n127.0.0.1:7002\n", "chain", 9100);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("leave --metrics-port out"), std::string::npos) << e[0];
  EXPECT_TRUE(plan_errors("127.0.0.1:7001\n127.0.0.1:7002\n", "chain").empty());
}

TEST(Plan, AChainFollowsTheFileAndItsWindowsShrinkTowardTheEnd) {
  const Topology t = planned(hosts_of(40), "chain");
  ASSERT_EQ(t.nodes.size(), 40u);
  EXPECT_TRUE(t.find("h0")->is_head());
  for (int i = 0; i + 1 < 40; ++i) {
    EXPECT_EQ(downstream(t, "h" + std::to_string(i)),
              std::vector<std::string>{"h" + std::to_string(i + 1)});
  }
  EXPECT_TRUE(t.find("h39")->is_leaf());
  // 4 x (hops below + 1), a power of two, at least the pipeline's 64.
  EXPECT_EQ(t.find("h0")->slots, 256u);   // 4 x 40 = 160
  EXPECT_EQ(t.find("h10")->slots, 128u);  // 4 x 30 = 120
  EXPECT_EQ(t.find("h30")->slots, 64u);   // 4 x 10 = 40, the least
  EXPECT_EQ(t.find("h39")->listen.to_string(), "10.0.0.40:7001");
}

TEST(Plan, ATreeIsBreadthFirstAndShallow) {
  const Topology t = planned(hosts_of(13), "tree:3");
  EXPECT_EQ(downstream(t, "h0"), (std::vector<std::string>{"h1", "h2", "h3"}));
  EXPECT_EQ(downstream(t, "h1"), (std::vector<std::string>{"h4", "h5", "h6"}));
  EXPECT_EQ(downstream(t, "h3"), (std::vector<std::string>{"h10", "h11", "h12"}));
  EXPECT_TRUE(t.find("h4")->is_leaf());
  EXPECT_EQ(t.find("h0")->slots, 64u) << "two hops: the least window";
}

TEST(Plan, RacksAreChainedThroughTheirFirstHostsAndFanOutInside) {
  PlanOptions o;
  o.metrics_port = 9100;
  o.port = 7100;
  const Topology t = planned(
      "10.0.1.1 r1 a\n10.0.2.1 r2\n10.0.1.2 r1\n10.0.1.3 r1\n10.0.2.2 r2\n"
      "fd00::3:1 r3 c.1\n10.0.1.4 r1\n",
      "racks:2", o);
  EXPECT_EQ(downstream(t, "a"), (std::vector<std::string>{"h1", "h2", "h3"}))
      << "the next rack first, then the rack's own tree";
  EXPECT_EQ(downstream(t, "h1"), (std::vector<std::string>{"c.1", "h4"}));
  EXPECT_EQ(downstream(t, "h2"), (std::vector<std::string>{"h6"}));
  EXPECT_TRUE(t.find("c.1")->is_leaf());
  EXPECT_EQ(t.find("c.1")->listen.to_string(), "[fd00::3:1]:7100");
  ASSERT_TRUE(t.find("c.1")->metrics);
  EXPECT_EQ(t.find("c.1")->metrics->to_string(), "[fd00::3:1]:9100");
}

TEST(Plan, AChainDeeperThanTheLargestWindowSaysSo) {
  PlanOptions o;
  o.hosts_file = "hosts.txt";
  ASSERT_EQ(parse_plan_shape("chain", o), "");
  const Plan plan = make_plan(parse_plan_hosts(hosts_of(1500), "hosts.txt", o.port), o);
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_NE(plan.notes[0].find("476 nodes have a window capped at 4096 slots"), std::string::npos)
      << plan.notes[0];
}

TEST(Plan, TenThousandHostsInEveryShapeLoad) {
  const std::string hosts = hosts_of(10000);
  EXPECT_EQ(planned(hosts, "tree:4").nodes.size(), 10000u);
  PlanOptions o;
  o.slots = 4096;
  EXPECT_EQ(planned(hosts, "chain", o).nodes.size(), 10000u);
}

}  // namespace
}  // namespace hoprelay::config
