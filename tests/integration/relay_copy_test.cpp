// A relay that keeps what it relays (issue 41): `hoprelay recv --node b` where b has a
// downstream peer. b's application gets every message and b forwards it to c too; a message is
// acknowledged upstream only once b's application released it and c acknowledged it, so a
// relay consumer killed mid-stream and run again with its state_dir ends byte-equal, like c.
#include <gtest/gtest.h>

#include <csignal>
#include <memory>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// a -> b -> c: a is a daemon, b and c are `hoprelay recv` (b a relay).
struct RelayChain {
  TempDir dir;
  Pipeline p{dir, {{"a", {"b"}}, {"b", {"c"}}, {"c", {}}}};  // 32 slots of 16 KiB
  RelayChain() {
    p.start("a");
    EXPECT_TRUE(wait_until([&] { return !scrape(p.node("a").metrics).empty(); }, 10s));
  }
  std::unique_ptr<Process> recv(const std::string& node, const fs::path& out,
                                const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{HOPRELAY_BIN, "recv",     "--topology", p.topology(), "--node",
                                  node,         "--output", out.string(), "--timeout",  "60"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto proc = std::make_unique<Process>(argv, dir / (node + "-recv.log"));
    EXPECT_TRUE(wait_until([&] { return !scrape(p.node(node).metrics).empty(); }, 10s))
        << proc->output();
    return proc;
  }
  RunResult send(const fs::path& in, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{HOPRELAY_BIN, "send", "--topology", p.topology(),
                                  "--to",       "a",    "--file",     in.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv, 120s);
  }
};

// Whole messages (one slot each) and, in a second stream, messages of 100,000 bytes that
// travel as chunks (the relay reassembles them for its application and forwards them anew).
TEST(RelayCopy, ARelayConsumerAndTheLeafBehindItBothGetTheFileByteEqual) {
  RelayChain c;
  const fs::path in = c.dir / "in.bin";
  write_random(in, 6 << 20, 3);
  for (const char* size : {"16384", "100000"}) {
    SCOPED_TRACE(size);
    const fs::path b_out = c.dir / "b.out", c_out = c.dir / "c.out";
    fs::remove(b_out);
    fs::remove(c_out);
    auto leaf = c.recv("c", c_out);
    auto relay = c.recv("b", b_out);
    RunResult sent = c.send(in, {"--size", size});
    ASSERT_EQ(sent.code, 0) << sent.output;
    ASSERT_EQ(relay->wait(60s), 0) << relay->output();
    ASSERT_EQ(leaf->wait(60s), 0) << leaf->output();
    EXPECT_TRUE(same_file(in, b_out)) << size_of(b_out) << " bytes at b";
    EXPECT_TRUE(same_file(in, c_out)) << size_of(c_out) << " bytes at c";
    // b closed after c had everything: it said goodbye, c saw no failure.
    EXPECT_EQ(leaf->output().find("closed: peer closed the connection"), std::string::npos)
        << leaf->output();
  }
}

// The relay's application holds a message (it writes nothing until restarted): what it holds
// is not acknowledged upstream, and the relay consumer killed with SIGKILL three times and
// started again with its state_dir ends byte-equal, as does the leaf behind it (which drops the
// replays it already had).
TEST(RelayCopy, ARelayConsumerKilledThreeTimesWithAStateDirEndsByteEqualAndSoDoesItsLeaf) {
  RelayChain c;
  const fs::path in = c.dir / "in.bin", b_out = c.dir / "b.out", c_out = c.dir / "c.out",
                 state = c.dir / "state";
  constexpr uint64_t kBytes = 96ull << 20;
  write_random(in, kBytes, 11);
  const std::vector<std::string> durable{"--state-dir", state.string()};
  auto leaf = c.recv("c", c_out);
  auto relay = c.recv("b", b_out, durable);
  auto send = std::make_unique<Process>(
      std::vector<std::string>{HOPRELAY_BIN, "send", "--topology", c.p.topology(), "--to", "a",
                               "--file", in.string(), "--rate", "2000", "--close-timeout", "0"},
      c.dir / "send.log");
  for (uint64_t mark : {kBytes / 4, 2 * kBytes / 4, 3 * kBytes / 4}) {
    ASSERT_TRUE(wait_until([&] { return size_of(b_out) >= mark; }, 120s))
        << "stalled at " << size_of(b_out) << " bytes\n"
        << relay->output();
    relay->signal(SIGKILL);
    relay->wait(5s);
    relay = c.recv("b", b_out, durable);
  }
  ASSERT_EQ(send->wait(180s), 0) << send->output();
  ASSERT_EQ(relay->wait(60s), 0) << relay->output();
  ASSERT_EQ(leaf->wait(60s), 0) << leaf->output();
  EXPECT_TRUE(same_file(in, b_out)) << size_of(b_out) << " bytes at b";
  EXPECT_TRUE(same_file(in, c_out)) << size_of(c_out) << " bytes at c";
  c.p.stop_all();
}

// A relay that keeps a copy, with spool_dir, and one slow downstream peer (c paces itself to
// 2,000 messages a second): the relay's own application keeps up, so c is the branch behind,
// and after spool_after it is spooled for. The producer and the relay's application go on at
// their own speed; c gets everything from the spool, once and in order. (Before, with one
// downstream peer, no branch counted as waiting for nothing: the relay never spooled, and its
// application went at c's pace.)
TEST(RelayCopy, ARelayConsumerSpoolsForASlowPeerWhileItsApplicationKeepsUp) {
  TempDir dir;
  Pipeline p{dir,
             {{"a", {"b"}},
              {"b",
               {"c"},
               "{ plugin = \"passthrough\" }",
               "spool_dir = \"" + (dir / "spool").string() + "\""},
              {"c",
               {"d"},
               std::string("{ plugin = \"") + HOPRELAY_TEST_PACE_PLUGIN + "\", us = \"500\" }"},
              {"d", {}, sink(dir, "d")}}};
  p.start_up({"d", "c", "a"});
  const fs::path out = dir / "b.out";
  Process relay({HOPRELAY_BIN, "recv", "--topology", p.topology(), "--node", "b", "--output",
                 out.string(), "--timeout", "60"},
                dir / "b-recv.log");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("b").metrics).empty(); }, 10s))
      << relay.output();
  // Generated messages (d's verify-sink checks their bytes): b's file is all of them.
  RunResult sent = run({HOPRELAY_BIN, "send", "--topology", p.topology(), "--to", "a", "--count",
                        "10000", "--size", "256"},
                       120s);
  ASSERT_EQ(sent.code, 0) << sent.output;
  EXPECT_NE(sent.output.find(" still spooled at b for c\n"), std::string::npos) << sent.output;
  ASSERT_EQ(relay.wait(60s), 0) << relay.output();
  EXPECT_EQ(size_of(out), 10000u * 256) << relay.output();
  EXPECT_NE(relay.output().find(
                "downstream c is out of credit while other branches wait for nothing for 1s"),
            std::string::npos)
      << relay.output();
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "d", 10000); }, 60s));
  p.stop_all();
  expect_clean(read_report(dir / "d.json"), 10000);
}

}  // namespace
}  // namespace hoprelay::test
