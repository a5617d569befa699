// How many copies of an end mark a node waits for, and the bookkeeping of those it holds
// (daemon/include/hoprelay/daemon/end_joins.h). The slots and the acknowledgements are the
// integration tests' (Streams.WhereASplitJoinsAgain...).
#include "hoprelay/daemon/end_joins.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::daemon {
namespace {

// Nodes as (name, downstream...), listening on distinct ports.
config::Topology topology(const std::vector<std::vector<std::string>>& nodes) {
  std::string text = "[pipeline]\nname = \"t\"\n";
  int port = 7000;
  for (const auto& n : nodes) {
    text += "[nodes." + n[0] + "]\nlisten = \"127.0.0.1:" + std::to_string(port++) + "\"\n";
    text += "downstream = [";
    for (size_t i = 1; i < n.size(); ++i) text += (i > 1 ? ", \"" : "\"") + n[i] + "\"";
    text += "]\n";
  }
  return config::parse_topology(text, "t.toml");
}

TEST(EndJoins, OneCopyPerUpstreamPeerTheHeadReaches) {
  // Two heads: h1 splits to b1 and b2, which join at c; h2 feeds b2 only. c -> d.
  auto t =
      topology({{"h1", "b1", "b2"}, {"h2", "b2"}, {"b1", "c"}, {"b2", "c"}, {"c", "d"}, {"d"}});
  EndJoins c;
  c.set_topology(t, "c");
  EXPECT_EQ(c.copies(EndJoins::stamp_of("h1")), 2u);  // through b1 and b2
  EXPECT_EQ(c.copies(EndJoins::stamp_of("h2")), 1u);  // through b2 only
  EXPECT_EQ(c.copies(EndJoins::stamp_of("nobody")), 0u);
  EXPECT_EQ(c.copies(0), 0u);
  EndJoins d;
  d.set_topology(t, "d");
  EXPECT_EQ(d.copies(EndJoins::stamp_of("h1")), 1u);  // c passes one on
  EndJoins b2;
  b2.set_topology(t, "b2");
  EXPECT_EQ(b2.copies(EndJoins::stamp_of("h1")), 1u);
  EXPECT_EQ(b2.copies(EndJoins::stamp_of("h2")), 1u);
  // A reload that removes b1: c waits for one copy from h1's streams.
  c.set_topology(topology({{"h1", "b2"}, {"h2", "b2"}, {"b2", "c"}, {"c", "d"}, {"d"}}), "c");
  EXPECT_EQ(c.copies(EndJoins::stamp_of("h1")), 1u);
}

TEST(EndJoins, AStampIsNeverZeroAndTellsNamesApart) {
  EXPECT_NE(EndJoins::stamp_of(""), 0u);
  EXPECT_NE(EndJoins::stamp_of("a"), EndJoins::stamp_of("b"));
  EXPECT_EQ(EndJoins::stamp_of("relay-7"), EndJoins::stamp_of("relay-7"));
}

TEST(EndJoins, WaitingAndDoneBookkeeping) {
  EndJoins j;
  const EndJoins::Key k1{23, 4000, 77}, k2{23, 4000, 78};
  EXPECT_EQ(j.waiting(k1), nullptr);
  transport::Slot s1, s2;
  j.wait(k1, 5).peers.push_back("b1");
  j.wait(k2, 6);
  EXPECT_EQ(&j.wait(k1, 7), j.waiting(k1)) << "waiting already: the same entry";
  EXPECT_EQ(j.all_waiting().size(), 2u);
  ASSERT_NE(j.waiting(k1), nullptr);
  EXPECT_EQ(j.waiting(k1)->peers.size(), 1u);
  EXPECT_EQ(j.waiting(k1)->since_ns, 5u);
  EXPECT_EQ(&j.all_waiting().front(), j.waiting(k1));  // oldest first
  j.stop_waiting(k1);
  EXPECT_EQ(j.waiting(k1), nullptr);
  EXPECT_NE(j.waiting(k2), nullptr);

  transport::Slot* in_flight = nullptr;
  EXPECT_FALSE(j.was_done(k1, in_flight));
  j.done(k1, &s2);
  ASSERT_TRUE(j.was_done(k1, in_flight));
  EXPECT_EQ(in_flight, &s2);
  j.released(k1, &s1);  // not the one passed on: nothing changes
  ASSERT_TRUE(j.was_done(k1, in_flight));
  EXPECT_EQ(in_flight, &s2);
  j.released(k1, &s2);
  ASSERT_TRUE(j.was_done(k1, in_flight));
  EXPECT_EQ(in_flight, nullptr);
  // Remembered for kMaxDone more ends, then forgotten.
  for (uint64_t seq = 0; seq < EndJoins::kMaxDone; ++seq) j.done({1, seq, 77}, nullptr);
  EXPECT_FALSE(j.was_done(k1, in_flight));
  EXPECT_TRUE(j.was_done({1, 0, 77}, in_flight));
}

}  // namespace
}  // namespace hoprelay::daemon
