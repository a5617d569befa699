// Admission decides from the topology alone, with addresses resolved when it is made.
#include "hoprelay/daemon/admission.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hoprelay::daemon {
namespace {

config::Topology topology() {
  return config::parse_topology(R"(
[pipeline]
name = "p"

[nodes.a]
listen = "127.0.0.1:7001"
downstream = ["c"]

[nodes.b]
listen = "0.0.0.0:7002"
downstream = ["c"]

[nodes.v6]
listen = "[::1]:7004"
downstream = ["c"]

[nodes.c]
listen = "127.0.0.1:7003"

[nodes.x]
listen = "localhost:7005"
)",
                                "t.toml");
}

transport::PeerInfo node(const std::string& name, const std::string& address) {
  transport::PeerInfo p;
  p.name = name;
  p.address = address;
  return p;
}

TEST(Admission, AnUpstreamFromItsAddressAProducerAtAHeadAndNothingElse) {
  const config::Topology t = topology();
  Admission c(t, *t.find("c"));
  std::string why;
  EXPECT_EQ(c.check(node("a", "127.0.0.1:40000"), why), Admission::Verdict::kAdmit);
  EXPECT_EQ(c.check(node("a", "127.0.0.2:40000"), why), Admission::Verdict::kWrongAddress);
  EXPECT_EQ(why, "\"a\" connects from 127.0.0.2, not from its address in topology p (127.0.0.1)");
  EXPECT_EQ(c.check(node("b", "10.9.9.9:1"), why), Admission::Verdict::kAdmit)
      << "a wildcard listen address says nothing about where b sends from";
  EXPECT_EQ(c.check(node("v6", "[::1]:40000"), why), Admission::Verdict::kAdmit);
  EXPECT_EQ(c.check(node("v6", "::1"), why), Admission::Verdict::kAdmit) << "verbs: no port";
  EXPECT_EQ(c.check(node("v6", "[::2]:40000"), why), Admission::Verdict::kWrongAddress);
  EXPECT_EQ(c.check(node("x", "127.0.0.1:1"), why), Admission::Verdict::kNotUpstream);
  EXPECT_STREQ(Admission::reason_label(Admission::Verdict::kNotUpstream), "not_upstream");
  transport::PeerInfo producer = node("", "127.0.0.1:2");
  producer.role = transport::PeerRole::kProducer;
  EXPECT_EQ(c.check(producer, why), Admission::Verdict::kProducerNotHead);
  Admission a(t, *t.find("a"));
  EXPECT_EQ(a.check(producer, why), Admission::Verdict::kAdmit);
}

// A chain h -> m -> r -> leaf where h and m may bypass: r's downstream admits r from r's host,
// from m's (m stands in for r) and from h's (h stands in for m, and so runs r's stand-in too);
// m's downstream admits m from m's and h's; nobody else under those names.
TEST(Admission, TheNodesThatMayStandInForARelayAreAdmittedUnderItsNameAndNoOther) {
  const config::Topology t = config::parse_topology(R"(
[pipeline]
name = "p"
on_peer_down = "bypass"

[nodes.h]
listen = "127.0.0.1:7001"
downstream = ["m"]

[nodes.m]
listen = "127.0.0.2:7002"
downstream = ["r"]

[nodes.r]
listen = "127.0.0.3:7003"
downstream = ["leaf"]
on_peer_down = "block"

[nodes.leaf]
listen = "127.0.0.4:7004"
)",
                                                    "t.toml");
  EXPECT_EQ(t.stand_ins("r"), (std::vector<std::string>{"m", "h"}));
  EXPECT_EQ(t.stand_ins("m"), (std::vector<std::string>{"h"}));
  EXPECT_TRUE(t.stand_ins("leaf").empty()) << "r does not bypass";
  std::string why;
  Admission leaf(t, *t.find("leaf"));
  for (const char* from : {"127.0.0.3:1", "127.0.0.2:1", "127.0.0.1:1"}) {
    EXPECT_EQ(leaf.check(node("r", from), why), Admission::Verdict::kAdmit) << from;
  }
  EXPECT_EQ(leaf.check(node("r", "127.0.0.9:1"), why), Admission::Verdict::kWrongAddress);
  EXPECT_EQ(why, "\"r\" connects from 127.0.0.9, not from its address in topology p (127.0.0.3)");
  EXPECT_EQ(leaf.check(node("m", "127.0.0.2:1"), why), Admission::Verdict::kNotUpstream);
  Admission r(t, *t.find("r"));
  EXPECT_EQ(r.check(node("m", "127.0.0.1:1"), why), Admission::Verdict::kAdmit);
  EXPECT_EQ(r.check(node("m", "127.0.0.4:1"), why), Admission::Verdict::kWrongAddress);
}

TEST(Admission, HostOfTakesThePortOffBothFamilies) {
  EXPECT_EQ(Admission::host_of("192.0.2.1:7"), "192.0.2.1");
  EXPECT_EQ(Admission::host_of("192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(Admission::host_of("[2001:db8::1]:7"), "2001:db8::1");
  EXPECT_EQ(Admission::host_of("2001:db8::1"), "2001:db8::1");
}

}  // namespace
}  // namespace hoprelay::daemon
