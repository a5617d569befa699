// Delivery outcomes (docs/guarantees.md): a node that gives a message up says so upstream with
// its acknowledgement, a fan-out merges what its branches said, and the producer learns, per
// message, delivered or dropped (where, why) - `hoprelay send` says it and exits 3. Origins are
// identities: a second producer of a connected origin is refused, and a rerun of a used origin
// learns which sequence numbers the head had taken already.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "hoprelay/transport/outcome.h"
#include "hoprelay/transport/wire.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

std::string drop_every(int every, int chunk = 0) {
  return std::string("{ plugin = \"") + HOPRELAY_TEST_DROP_CHUNK_PLUGIN +
         "\", every = " + std::to_string(every) + ", chunk = " + std::to_string(chunk) + " }";
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST(Outcomes, AStageDropAtARelayIsReportedPerMessage) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {"c"}, drop_every(10)}, {"c", {}, sink(dir, "c")}});
  p.start_all();
  RunResult r = p.send("a", 1000, 1000);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "900 delivered, 100 dropped, 0 repeats")) << r.output;
  EXPECT_TRUE(has(r.output, "100 of 1000 messages dropped at b: stage_drop (drop-chunk said DROP)"))
      << r.output;
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", 900); }, 10s));
  p.stop_all();
  EXPECT_EQ(read_report(dir / "c.json").received, 900);
}

// A fan-out where one branch drops what the other delivers: the producer hears of the drop,
// and that the message was delivered elsewhere.
TEST(Outcomes, AFanOutMergesItsBranches) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c1", "c2"}, "{ plugin = \"passthrough\" }", "route = \"broadcast\""},
                   {"c1", {}, sink(dir, "c1")},
                   {"c2", {}, drop_every(4)}});
  p.start_all();
  RunResult r = p.send("a", 2000, 512);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "1500 delivered, 500 dropped, 0 repeats")) << r.output;
  EXPECT_TRUE(has(r.output, "500 of 2000 messages dropped at c2: stage_drop")) << r.output;
  EXPECT_TRUE(has(r.output, "500 of the dropped messages were delivered on other branches"))
      << r.output;
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", 2000); }, 10s));
  // b says which branch lost them; c2 counts why.
  EXPECT_EQ(metric_value(scrape(p.node("b").metrics), "hoprelay_messages_dropped_downstream_total",
                         "peer=\"c2\""),
            500);
  EXPECT_EQ(metric_value(scrape(p.node("b").metrics), "hoprelay_messages_dropped_downstream_total",
                         "peer=\"c1\""),
            0);
  EXPECT_EQ(metric_value(scrape(p.node("c2").metrics), "hoprelay_messages_dropped_total",
                         "reason=\"stage_drop\""),
            500);
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), 2000);
}

// A message given up on two branches is lost to both: each place's line counts it (before,
// only the first place of each message was counted, so c3's 500 drops, all of them also c2's,
// went unsaid and c2 seemed the only branch that lost anything).
TEST(Outcomes, EachBranchThatDroppedAMessageCountsIt) {
  TempDir dir;
  Pipeline p(dir,
             {{"a", {"b"}},
              {"b", {"c1", "c2", "c3"}, "{ plugin = \"passthrough\" }", "route = \"broadcast\""},
              {"c1", {}, sink(dir, "c1")},
              {"c2", {}, drop_every(2)},
              {"c3", {}, drop_every(4)}});
  p.start_all();
  RunResult r = p.send("a", 2000, 512);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "1000 delivered, 1000 dropped, 0 repeats")) << r.output;
  EXPECT_TRUE(has(r.output, "1000 of 2000 messages dropped at c2: stage_drop")) << r.output;
  EXPECT_TRUE(has(r.output, "500 of 2000 messages dropped at c3: stage_drop")) << r.output;
  EXPECT_TRUE(has(r.output, "1000 of the dropped messages were delivered on other branches"))
      << r.output;
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c1", 2000); }, 10s));
  p.stop_all();
  expect_clean(read_report(dir / "c1.json"), 2000);
}

// on_peer_down = "drop-after": what b gives up for c, down, reaches the producer.
TEST(Outcomes, PeerDownDropsAreReported) {
  TempDir dir;
  Pipeline p(
      dir, {{"a", {"b"}}, {"b", {"c"}, "{ plugin = \"passthrough\" }"}, {"c", {}, sink(dir, "c")}},
      "on_peer_down = \"drop-after\"\npeer_down_timeout = \"1s\"\n");
  for (const char* name : {"b", "a"}) {
    p.start(name);
    ASSERT_TRUE(wait_until([&] { return !scrape(p.node(name).metrics).empty(); }, 10s));
  }
  RunResult r = p.send("a", 50, 256);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output,
                  "50 of 50 messages dropped at b: peer_down (downstream c down longer "
                  "than 1s)"))
      << r.output;
  p.stop_all();
}

// A downstream restarted with a topology of smaller slots than its upstream still runs (a
// half-done rollout): what no longer fits is dropped there, and the producer hears of it.
TEST(Outcomes, MessagesTooLargeForTheDownstreamAreReported) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {"c"}}, {"c", {}, sink(dir, "c")}});
  p.start_all();
  p.change([](std::vector<NodeDef>& nodes) {
    for (auto& n : nodes) n.extra = "slot_size = \"4KiB\"";
  });
  p.crash_and_restart("c");
  // Back to the file a, b and the producer run: c alone has the smaller slots.
  p.change([](std::vector<NodeDef>& nodes) {
    for (auto& n : nodes) n.extra.clear();
  });
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("b").metrics), "hoprelay_link_up", "peer=\"c\"") == 1;
      },
      10s));
  RunResult r = p.send("a", 20, 10000);  // one slot of a and b (16 KiB), more than c's
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output,
                  "20 of 20 messages dropped at b: too_large_for_peer (10000 bytes; c takes at "
                  "most 4096)"))
      << r.output;
  p.stop_all();
}

// A chunk dropped mid-message by a stage that takes chunks: the producer learns the stage's
// drop; the leaf that then holds an incomplete message says so too.
TEST(Outcomes, AChunkDroppedMidMessage) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}, "{ plugin = \"passthrough\" }", "slot_size = \"4KiB\""},
                   {"b", {"c"}, drop_every(5, 1), "slot_size = \"4KiB\""},
                   {"c", {}, sink(dir, "c"), "slot_size = \"4KiB\""}});
  p.start_all();
  RunResult r = p.send("a", 100, 10000);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "80 delivered, 20 dropped, 0 repeats")) << r.output;
  EXPECT_TRUE(has(r.output, "20 of 100 messages dropped at b: stage_drop")) << r.output;
  p.stop_all();
  EXPECT_EQ(read_report(dir / "c.json").received, 80);
}

TEST(Origins, ASecondProducerOfAConnectedOriginIsRefused) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  auto first = p.start_send("a", 20000, 100, {"--origin", "7", "--rate", "4000"});
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("a").metrics), "hoprelay_link_up", "peer=\"producer\"") ==
               1;
      },
      10s));
  RunResult second = p.send("a", 20000, 100, {"--origin", "7"});
  EXPECT_EQ(second.code, 1) << second.output;
  EXPECT_TRUE(has(second.output,
                  "a refused this producer: origin in use: origin 7 has a producer "
                  "connected to a already, from 127.0.0.1:"))
      << second.output;
  EXPECT_EQ(first->wait(60s), 0) << first->output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 20000); }, 10s));
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 20000);
}

TEST(Origins, ARerunLearnsItsRepeatsAndFirstSeqAppends) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  RunResult r = p.send("a", 1000, 100, {"--origin", "9"});
  ASSERT_EQ(r.code, 0) << r.output;
  r = p.send("a", 1000, 100, {"--origin", "9"});
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output,
                  "origin 9: the head already had sequence numbers 0-999; 1000 messages dropped as "
                  "repeats (use --first-seq 1000 to append new data, --resume if this is the "
                  "input an interrupted send of this origin was sending, or another origin)"))
      << r.output;
  r = p.send("a", 1000, 100, {"--origin", "9", "--first-seq", "1000"});
  EXPECT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 2000); }, 10s));
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 2000);
}

// A downstream that sends an outcome for a message it never received breaks the protocol: the
// link to it is closed (counted), and only that link; the node connects again.
TEST(Outcomes, AnOutcomeForAMessageNeverSentClosesThatLink) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  // b is played by this test: a listening socket that admits a's link.
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(p.node("b").port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(ls, 4), 0);
  p.start("a");
  auto serve = [&](bool lie) {
    int fd = ::accept(ls, nullptr, nullptr);
    EXPECT_GE(fd, 0);
    std::byte hdr[transport::kFrameHeaderSize];
    std::vector<std::byte> hello(transport::kHelloSize);
    EXPECT_EQ(::recv(fd, hdr, sizeof hdr, MSG_WAITALL), ssize_t(sizeof hdr));
    EXPECT_EQ(::recv(fd, hello.data(), hello.size(), MSG_WAITALL), ssize_t(hello.size()));
    transport::FrameHeader w{transport::FrameType::kWelcome};
    w.length = transport::kWelcomeSize;
    std::vector<std::byte> out(transport::kFrameHeaderSize + transport::kWelcomeSize);
    transport::encode_header(w, out.data());
    transport::encode_welcome({64, 65536, 0, 0}, out.data() + transport::kFrameHeaderSize);
    EXPECT_EQ(::send(fd, out.data(), out.size(), 0), ssize_t(out.size()));
    if (lie) {
      // An outcome for slot 0 before anything was sent there.
      transport::Outcome o;
      o.add(transport::DropReason::kStageDrop, "b", "made up");
      transport::FrameHeader h{transport::FrameType::kOutcome};
      std::vector<std::byte> f(transport::kFrameHeaderSize + transport::kMaxOutcomePayload);
      h.length = transport::encode_outcome(o, f.data() + transport::kFrameHeaderSize);
      h.seq = 12345;
      transport::encode_header(h, f.data());
      EXPECT_EQ(::send(fd, f.data(), transport::kFrameHeaderSize + h.length, 0),
                ssize_t(transport::kFrameHeaderSize + h.length));
    }
    return fd;
  };
  int first = serve(true);
  // a closes that link (the read returns 0: its end is closed) and connects again.
  char c;
  EXPECT_EQ(::recv(first, &c, 1, 0), 0);
  EXPECT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("a").metrics), "hoprelay_protocol_errors_total",
                            "kind=\"bad_outcome\"") == 1;
      },
      5s));
  int second = serve(false);
  EXPECT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(p.node("a").metrics), "hoprelay_link_up", "peer=\"b\"") == 1;
      },
      10s));
  ::close(first);
  ::close(second);
  ::close(ls);
  p.stop_all();
}

}  // namespace
}  // namespace hoprelay::test
