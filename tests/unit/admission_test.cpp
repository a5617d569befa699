// Admission decides from the topology alone, with addresses resolved when it is made.
#include "hoprelay/daemon/admission.h"

#include <gtest/gtest.h>

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

TEST(Admission, HostOfTakesThePortOffBothFamilies) {
  EXPECT_EQ(Admission::host_of("192.0.2.1:7"), "192.0.2.1");
  EXPECT_EQ(Admission::host_of("192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(Admission::host_of("[2001:db8::1]:7"), "2001:db8::1");
  EXPECT_EQ(Admission::host_of("2001:db8::1"), "2001:db8::1");
}

}  // namespace
}  // namespace hoprelay::daemon
