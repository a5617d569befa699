// Applications at both ends (docs/client.md): `hoprelay send --stdin` and `hoprelay recv`,
// both built on libhoprelay, the consumer running leaf node c inside its own process. Real
// processes on loopback; the bytes that come out must be the bytes that went in.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// a -> b -> c, where c is the consumer: only a and b are daemons.
struct Chain {
  TempDir dir;
  Pipeline p{dir, {{"a", {"b"}}, {"b", {"c"}}, {"c", {}}}};
  Chain() {
    p.start("b");
    p.start("a");
    for (const char* n : {"a", "b"}) {
      EXPECT_TRUE(wait_until([&] { return !scrape(p.node(n).metrics).empty(); }, 10s)) << n;
    }
  }
  std::unique_ptr<Process> recv(const fs::path& out, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{HOPRELAY_BIN, "recv",     "--topology", p.topology(), "--node",
                                  "c",          "--output", out.string(), "--timeout",  "60"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto proc = std::make_unique<Process>(argv, dir / "recv.log");
    // Up once it serves c's metrics (the consumer is that node, endpoint included).
    EXPECT_TRUE(wait_until([&] { return !scrape(p.node("c").metrics).empty(); }, 10s))
        << proc->output();
    return proc;
  }
  // `cat FILE | hoprelay send --stdin ...`: a real pipe, not a file on standard input.
  std::unique_ptr<Process> send_stdin(const fs::path& in, const std::string& extra = "") {
    std::string cmd = "cat '" + in.string() + "' | '" + HOPRELAY_BIN + "' send --topology '" +
                      p.topology().string() + "' --to a --stdin " + extra;
    return std::make_unique<Process>(std::vector<std::string>{"/bin/sh", "-c", cmd},
                                     dir / "send.log");
  }
};

// A send killed mid-stream leaves messages on their way; the next send's stream ends and
// recv stops: the killed one's messages are in the output too. recv says so and exits 1
// (it exited 0 with the two streams' bytes mixed in one file).
TEST(Streams, RecvWhoseOutputHoldsAStreamThatDidNotEndSaysSoAndFails) {
  Chain c;
  const fs::path out = c.dir / "out.bin";
  auto recv = c.recv(out);
  auto first = c.p.start_send("a", 100000, 100, {"--origin", "31", "--rate", "2000"}, "s1.log");
  ASSERT_TRUE(wait_until([&] { return size_of(out) >= 20'000; }, 30s)) << recv->output();
  first->signal(SIGKILL);
  first->wait(10s);
  const uint64_t left = size_of(out);
  auto second = c.p.send("a", 50, 100, {"--origin", "32"});
  EXPECT_EQ(second.code, 0) << second.output;
  EXPECT_EQ(recv->wait(30s), 1) << recv->output();
  const std::string said = recv->output();
  EXPECT_NE(said.find("origin 31: "), std::string::npos) << said;
  EXPECT_NE(said.find("hoprelay recv: origin 31 did not end: its "), std::string::npos) << said;
  EXPECT_NE(said.find("origin 32: 50 messages, seq 0-49, ended"), std::string::npos) << said;
  EXPECT_GE(size_of(out), left + 50 * 100) << said;
}

// Ctrl-C of a send of a file mid-stream: it stops, says how far it got, its origin and how to
// resume (no end mark: recv waits on); the same command with --resume sends the rest, the
// messages the head had are not sent again, and the output is the file exactly.
TEST(Streams, AnInterruptedSendSaysHowToResumeAndTheResumeCompletesTheFile) {
  Chain c;
  const fs::path in = c.dir / "in.bin", out = c.dir / "out.bin";
  constexpr uint64_t kBytes = 2'000'000;
  write_random(in, kBytes, 5);
  auto recv = c.recv(out);
  const std::vector<std::string> argv{HOPRELAY_BIN, "send", "--topology", c.p.topology(),
                                      "--to",       "a",    "--file",     in.string(),
                                      "--size",     "1000", "--origin",   "41"};
  auto first_argv = argv;
  first_argv.insert(first_argv.end(), {"--rate", "1000"});
  Process first(first_argv, c.dir / "send1.log");
  ASSERT_TRUE(wait_until([&] { return size_of(out) >= 200'000; }, 30s)) << first.output();
  first.signal(SIGINT);
  EXPECT_EQ(first.wait(10s), 130) << first.output();
  const std::string said = first.output();
  EXPECT_NE(said.find("hoprelay send: interrupted (SIGINT): "), std::string::npos) << said;
  EXPECT_NE(said.find(" acknowledged (origin 41). No end-of-stream mark was sent"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("with --origin 41 --resume"), std::string::npos) << said;
  EXPECT_EQ(said.find(" msg/s"), std::string::npos) << said;  // no success line
  EXPECT_LT(size_of(out), kBytes);
  EXPECT_TRUE(recv->running());
  // The head has seen the producer go (else the resume is refused: origin in use).
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(c.p.node("a").metrics), "hoprelay_link_up",
                            "peer=\"producer\"") == 0;
      },
      10s));

  auto resume_argv = argv;
  resume_argv.push_back("--resume");
  auto resumed = run(resume_argv, 60s);
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("sent 2000 messages"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find(" the head had already (resumed)"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("hoprelay send: origin 41 resumed: the head already had sequence "
                                "numbers 0-"),
            std::string::npos)
      << resumed.output;
  ASSERT_EQ(recv->wait(30s), 0) << recv->output();
  EXPECT_NE(recv->output().find("origin 41: 2000 messages, seq 0-1999, ended"), std::string::npos)
      << recv->output();
  EXPECT_TRUE(same_file(in, out));
}

// A send reading a pipe with nothing more in it yet is interrupted too (the read waits in
// steps), with exact counts.
TEST(Streams, ASendWaitingForInputStopsOnCtrlC) {
  Chain c;
  const fs::path out = c.dir / "out.txt", fifo = c.dir / "in.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int writer = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);  // the pipe's writer stays
  ASSERT_GE(writer, 0);
  {
    auto recv = c.recv(out, {"--framing", "lines"});
    Process send(
        {"/bin/sh", "-c",
         "exec '" + std::string(HOPRELAY_BIN) + "' send --topology '" + c.p.topology().string() +
             "' --to a --stdin --framing lines --origin 43 < '" + fifo.string() + "'"},
        c.dir / "send1.log");
    ASSERT_EQ(::write(writer, "hello\n", 6), 6);
    ASSERT_TRUE(wait_until([&] { return size_of(out) == 6; }, 30s)) << send.output();
    // Its acknowledgement has passed a (the gauge is sampled once a second).
    ASSERT_TRUE(wait_until(
        [&] { return metric_value(scrape(c.p.node("a").metrics), "hoprelay_slots_in_use") == 0; },
        30s));
    send.signal(SIGINT);
    EXPECT_EQ(send.wait(10s), 130) << send.output();
    EXPECT_NE(send.output().find("interrupted (SIGINT): 1 message sent, 1 acknowledged (origin "
                                 "43)"),
              std::string::npos)
        << send.output();
    recv->signal(SIGKILL);
    recv->wait(10s);
  }
  ::close(writer);
}

// Ctrl-C of recv mid-stream: what it received is written and acknowledged, it says so with its
// counts and exits 130; the next recv gets the rest: each message in one of the two outputs.
TEST(Streams, AnInterruptedRecvKeepsWhatItReceivedAndTheNextRecvGetsTheRest) {
  Chain c;
  constexpr uint64_t kCount = 2000, kSize = 100;
  const fs::path out1 = c.dir / "out1.bin", out2 = c.dir / "out2.bin";
  auto recv1 = c.recv(out1);
  auto send = c.p.start_send("a", kCount, kSize, {"--origin", "51", "--rate", "1000"}, "s.log");
  ASSERT_TRUE(wait_until([&] { return size_of(out1) >= 30 * kSize; }, 30s)) << recv1->output();
  recv1->signal(SIGINT);
  ASSERT_EQ(recv1->wait(10s), 130) << recv1->output();
  const std::string said = recv1->output();
  const uint64_t n1 = size_of(out1) / kSize;
  EXPECT_EQ(size_of(out1) % kSize, 0u) << said;
  EXPECT_LT(n1, kCount);
  EXPECT_NE(said.find("origin 51: " + std::to_string(n1) + " messages, seq 0-" +
                      std::to_string(n1 - 1) + ", not ended"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("hoprelay recv: interrupted (SIGINT): what it received is in the output and "
                      "acknowledged; the rest waits upstream for the next recv of node c (which, "
                      "without --state-dir, cannot know where this one stopped"),
            std::string::npos)
      << said;
  auto recv2 = c.recv(out2);
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  const int recv2_exit = recv2->wait(30s);
  // recv2 counts from 0 (it cannot know what recv1 took): the first n1 are missing from its
  // output, and it says where they most likely went (its range: what it got).
  EXPECT_EQ(recv2_exit, 1) << recv2->output();
  const auto n = [](uint64_t v) { return std::to_string(v); };
  EXPECT_NE(
      recv2->output().find("origin 51: " + n(kCount - n1) + " messages, seq " + n(n1) + "-" +
                           n(kCount - 1) + ", ended, " + n(n1) + " missing (seq 0-" + n(n1 - 1) +
                           " before the first this recv got: taken by an earlier recv of "
                           "node c, or dropped upstream; recvs that all give the same "
                           "--state-dir DIR, from the first on, go on where the last one "
                           "stopped)\n"),
      std::string::npos)
      << recv2->output();
  EXPECT_EQ(size_of(out1) + size_of(out2), kCount * kSize);
}

TEST(Streams, OneGiBThroughARelayKilledTwiceArrivesByteEqual) {
  Chain c;
  const fs::path in = c.dir / "in.bin", out = c.dir / "out.bin";
  constexpr uint64_t kBytes = 1ull << 30;
  write_random(in, kBytes, 42);
  auto recv = c.recv(out);
  auto send = c.send_stdin(in);
  // The relay dies (kill -9) at a third and at two thirds of the stream, and comes back: a
  // replays what b had not acknowledged, c's deduplication drops what it had already.
  for (uint64_t mark : {kBytes / 3, 2 * kBytes / 3}) {
    ASSERT_TRUE(wait_until([&] { return size_of(out) >= mark; }, 120s))
        << "stalled at " << size_of(out) << " bytes\n"
        << recv->output();
    c.p.crash_and_restart("b");
  }
  ASSERT_EQ(send->wait(180s), 0) << send->output();
  ASSERT_EQ(recv->wait(60s), 0) << recv->output();
  EXPECT_NE(send->output().find(", 1073741824 bytes in"), std::string::npos) << send->output();
  EXPECT_NE(recv->output().find("ended"), std::string::npos) << recv->output();
  EXPECT_EQ(size_of(out), kBytes);
  EXPECT_TRUE(same_file(in, out));
  c.p.stop_all();
}

// Exactly once into a file across the consumer's crashes (docs/client.md, "Exactly once into
// the application"): `recv --output f --state-dir s` makes the file durable, then its position,
// then acknowledges; killed with SIGKILL it is cut back to the last position on restart and
// appends from there. Killed twice alone, then together with the relay before it (whose
// deduplication dies with it: the window that is at least once without a durable position).
TEST(Streams, RecvWithAStateDirKilledThreeTimesWritesEachByteOnce) {
  Chain c;
  const fs::path in = c.dir / "in.bin", out = c.dir / "out.bin", state = c.dir / "state";
  constexpr uint64_t kBytes = 512ull << 20;
  write_random(in, kBytes, 7);
  const std::vector<std::string> durable{"--state-dir", state.string()};
  auto recv = c.recv(out, durable);
  auto send = c.send_stdin(in);
  for (uint64_t mark : {kBytes / 4, 2 * kBytes / 4, 3 * kBytes / 4}) {
    ASSERT_TRUE(wait_until([&] { return size_of(out) >= mark; }, 120s))
        << "stalled at " << size_of(out) << " bytes\n"
        << recv->output();
    recv->signal(SIGKILL);
    recv->wait(5s);
    if (mark == 3 * kBytes / 4) c.p.crash_and_restart("b", 0ms);  // at the same moment
    recv = c.recv(out, durable);
  }
  ASSERT_EQ(send->wait(180s), 0) << send->output();
  ASSERT_EQ(recv->wait(60s), 0) << recv->output();
  EXPECT_EQ(size_of(out), kBytes);
  EXPECT_TRUE(same_file(in, out));
  // Its mark: the output is this state dir's recv's (ADurableRecvKilledBeforeItsFirstCommit...).
  EXPECT_EQ(read_file(state / "recv-output"), fs::absolute(out).string() + "\n");
  // Started again after the end, it has everything at once: the end mark is part of the
  // position, and the file stays as it is.
  Process again({HOPRELAY_BIN, "recv", "--topology", c.p.topology().string(), "--node", "c",
                 "--output", out.string(), "--timeout", "30", "--state-dir", state.string()},
                c.dir / "again.log");
  EXPECT_EQ(again.wait(30s), 0) << again.output();
  EXPECT_NE(again.output().find("0 messages"), std::string::npos) << again.output();
  EXPECT_TRUE(same_file(in, out));
  c.p.stop_all();
}

// A recv run without --state-dir leaves out.bin; a user then gives the next one a new
// --state-dir with the same output, as if it could go on: a state directory with no position
// says 0 bytes, and the file would be cut to nothing (its messages were acknowledged: gone).
// Refused before the node opens: the file and the messages waiting upstream stay as they are.
TEST(Streams, ADurableRecvWithANewStateDirRefusesAnOutputThatHoldsBytes) {
  TempDir dir;
  Pipeline p{dir, {{"a", {"c"}}, {"c", {}}}};
  const fs::path out = dir / "out.bin", state = dir / "state";
  std::ofstream(out) << "12345";
  Process recv({HOPRELAY_BIN, "recv", "--topology", p.topology().string(), "--node", "c",
                "--output", out.string(), "--state-dir", state.string()},
               dir / "recv.log");
  EXPECT_EQ(recv.wait(30s), 2) << recv.output();
  EXPECT_NE(recv.output().find(out.string() + " holds 5 bytes and " + state.string() +
                               " no position yet"),
            std::string::npos)
      << recv.output();
  EXPECT_NE(recv.output().find("give another --output"), std::string::npos) << recv.output();
  EXPECT_EQ(size_of(out), 5u);
  EXPECT_FALSE(fs::exists(state));
  // A durable recv stopped before its first message leaves an empty positions file (the
  // consumer creates it when it opens): still no position, still refused.
  fs::create_directories(state);
  std::ofstream(state / "positions").flush();
  Process again({HOPRELAY_BIN, "recv", "--topology", p.topology().string(), "--node", "c",
                 "--output", out.string(), "--state-dir", state.string()},
                dir / "again.log");
  EXPECT_EQ(again.wait(30s), 2) << again.output();
  EXPECT_NE(again.output().find(" no position yet"), std::string::npos) << again.output();
  EXPECT_EQ(size_of(out), 5u);
}

// A durable recv killed after it wrote its first bytes but before its first commit: its state
// dir has an empty positions file, and the output bytes that were never acknowledged. Its
// marker (written before the first byte) says the bytes are its own: the next run cuts them
// and gets the messages again (it was refused for good, "no position yet"), and a state dir
// with no marker, from a durable recv stopped before any message, is still refused.
TEST(Streams, ADurableRecvKilledBeforeItsFirstCommitResumes) {
  Chain c;
  const fs::path out = c.dir / "out.bin", state = c.dir / "state", in = c.dir / "in.txt";
  fs::create_directories(state);
  std::ofstream(state / "positions").flush();
  std::ofstream(state / "recv-output") << out.string() << "\n";
  std::ofstream(out) << "bytes of a run killed before its first commit\n";
  write_file(in, "one\ntwo\nthree\n");
  auto recv = c.recv(out, {"--state-dir", state.string(), "--framing", "lines", "--streams", "1"});
  auto send = c.send_stdin(in, "--framing lines");
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  ASSERT_EQ(recv->wait(60s), 0) << recv->output();
  EXPECT_TRUE(same_file(in, out)) << recv->output();
  c.p.stop_all();
}

// A state dir keeps the position of the one output it was used with (its marker): a recv given
// the same state dir and another output (the next file, say) is refused before it touches
// either. Before, a new file was created and refused as "0 bytes, less than the 14 its durable
// position says were written: restore the file", and another file that held more than the
// position was cut to it and appended to.
TEST(Streams, ADurableRecvRefusesAnOutputItsStateDirWasNotUsedWith) {
  Chain c;
  const fs::path first = c.dir / "first.bin", second = c.dir / "second.bin",
                 other = c.dir / "other.bin", state = c.dir / "state", in = c.dir / "in.txt";
  write_file(in, "one\ntwo\nthree\n");
  auto recv =
      c.recv(first, {"--state-dir", state.string(), "--framing", "lines", "--streams", "1"});
  auto send = c.send_stdin(in, "--framing lines");
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  ASSERT_EQ(recv->wait(60s), 0) << recv->output();
  write_file(other, std::string(100, 'x'));
  for (const fs::path& out : {second, other}) {
    Process again({HOPRELAY_BIN, "recv", "--topology", c.p.topology().string(), "--node", "c",
                   "--output", out.string(), "--state-dir", state.string(), "--timeout", "3"},
                  c.dir / "again.log");
    EXPECT_EQ(again.wait(30s), 2) << again.output();
    EXPECT_NE(again.output().find(state.string() + " keeps the position of " + first.string() +
                                  ", not of " + out.string()),
              std::string::npos)
        << again.output();
  }
  EXPECT_FALSE(fs::exists(second));
  EXPECT_EQ(size_of(other), 100u);
  EXPECT_TRUE(same_file(in, first));
  // The output it was used with goes on as before.
  Process same({HOPRELAY_BIN, "recv", "--topology", c.p.topology().string(), "--node", "c",
                "--output", first.string(), "--state-dir", state.string(), "--timeout", "1"},
               c.dir / "same.log");
  EXPECT_NE(same.wait(30s), 2) << same.output();
  EXPECT_TRUE(same_file(in, first));
  c.p.stop_all();
}

// Records of random lengths, 0 bytes to more than a slot (16 KiB: chunks), one per message.
TEST(Streams, LinesAndLengthFramingArriveRecordForRecord) {
  Chain c;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> pick(0, 5);
  const uint32_t lengths[] = {0, 1, 100, 16383, 16384, 40000};
  std::string lines, records;
  for (int i = 0; i < 3000; ++i) {
    uint32_t n = lengths[pick(rng)];
    std::string body(n, '\0');
    for (auto& ch : body) ch = static_cast<char>('a' + rng() % 26);
    lines += body + "\n";
    char len[4] = {char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    records += std::string(len, 4) + body;
  }
  for (const auto& [framing, text] :
       std::vector<std::pair<std::string, std::string>>{{"lines", lines}, {"length", records}}) {
    const fs::path in = c.dir / (framing + ".in"), out = c.dir / (framing + ".out");
    write_file(in, text);
    auto recv = c.recv(out, {"--framing", framing});
    auto send = c.send_stdin(in, "--framing " + framing);
    ASSERT_EQ(send->wait(60s), 0) << send->output();
    ASSERT_EQ(recv->wait(60s), 0) << recv->output();
    EXPECT_NE(send->output().find("sent 3000 messages"), std::string::npos) << send->output();
    EXPECT_NE(recv->output().find("received 3000 messages"), std::string::npos) << recv->output();
    EXPECT_TRUE(same_file(in, out)) << framing;
  }
  c.p.stop_all();
}

// recv that cannot write (a full disk) says so and exits 1, and releases nothing it did not
// write: the next run gets every message. Before, it released each message while its bytes
// still sat in its buffer, then died in std::terminate when the write failed: the producer
// had been told they were delivered, and they were gone.
TEST(Streams, RecvThatCannotWriteReleasesNothingAndTheNextRunGetsEverything) {
  Chain c;
  const fs::path in = c.dir / "in.txt", out = c.dir / "out.txt";
  std::string lines;
  for (int i = 0; i < 2000; ++i) lines += "line " + std::to_string(i) + "\n";
  write_file(in, lines);
  auto full = c.recv("/dev/full", {"--framing", "lines"});
  auto send = c.send_stdin(in, "--framing lines");
  EXPECT_EQ(full->wait(30s), 1) << full->output();
  EXPECT_NE(full->output().find("hoprelay recv: write: No space left on device"), std::string::npos)
      << full->output();
  auto recv = c.recv(out, {"--framing", "lines"});
  ASSERT_EQ(send->wait(60s), 0) << send->output();
  ASSERT_EQ(recv->wait(60s), 0) << recv->output();
  EXPECT_NE(recv->output().find("received 2000 messages"), std::string::npos) << recv->output();
  EXPECT_TRUE(same_file(in, out));
  c.p.stop_all();
}

// A stream that pauses: each line is a message, and the last one before the pause arrives
// (and is written out) without waiting for the next. Before, `send --framing lines` kept the
// last line of a burst queued, and recv kept it in its buffer.
TEST(Streams, TheLastLineBeforeAPauseArrivesWithoutWaitingForTheNext) {
  Chain c;
  const fs::path fifo = c.dir / "in.fifo", out = c.dir / "out.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto recv = c.recv(out, {"--framing", "lines"});
  std::string cmd = "exec '" + std::string(HOPRELAY_BIN) + "' send --topology '" +
                    c.p.topology().string() + "' --to a --stdin --framing lines < '" +
                    fifo.string() + "'";
  Process send({"/bin/sh", "-c", cmd}, c.dir / "send.log");
  int w = ::open(fifo.c_str(), O_WRONLY);  // until send has opened it
  ASSERT_GE(w, 0);
  const std::string burst = "one\ntwo\nthree\n";
  ASSERT_EQ(::write(w, burst.data(), burst.size()), ssize_t(burst.size()));
  EXPECT_TRUE(wait_until([&] { return read_file(out) == burst; }, 20s))
      << "out: '" << read_file(out) << "'\n"
      << send.output() << recv->output();
  // A burst of more messages than the head's credits (32 slots), 4.5 MB in lines of 15,000
  // bytes: all of it arrives during the pause, not only what one turn of the producer sends.
  std::string more;
  for (int i = 0; i < 300; ++i) more += std::to_string(i) + std::string(15000, 'x') + "\n";
  ASSERT_EQ(::write(w, more.data(), more.size()), ssize_t(more.size()));
  EXPECT_TRUE(wait_until([&] { return read_file(out).size() == burst.size() + more.size(); }, 20s))
      << read_file(out).size() << " of " << burst.size() + more.size() << " bytes\n"
      << send.output() << recv->output();
  ::close(w);  // the end of the stream
  EXPECT_EQ(send.wait(30s), 0) << send.output();
  EXPECT_EQ(recv->wait(30s), 0) << recv->output();
  EXPECT_EQ(read_file(out), burst + more);
  c.p.stop_all();
}

// Messages dropped upstream before the first that reaches recv are missing too: recv counts
// from the stream's start, not from what it happened to see first.
TEST(Streams, RecvCountsMessagesDroppedBeforeTheFirstItSawAsMissing) {
  TempDir dir;
  // b's crc32c stamp has no room in a full slot: such messages are dropped there.
  Pipeline p(dir, {{"a", {"b"}},
                   {"b", {"c"}, "{ plugin = \"crc32c\", mode = \"stamp\" }"},
                   {"c", {}, "{ plugin = \"crc32c\", mode = \"verify\" }"}});
  p.start("b");
  p.start("a");
  std::string records;
  for (uint32_t n : {16384u, 16384u, 100u, 100u}) {
    char len[4] = {char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    records += std::string(len, 4) + std::string(n, 'x');
  }
  const fs::path in = dir / "in", out = dir / "out";
  write_file(in, records);
  Process recv({HOPRELAY_BIN, "recv", "--topology", p.topology(), "--node", "c", "--output",
                out.string(), "--framing", "length", "--timeout", "60"},
               dir / "recv.log");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("c").metrics).empty(); }, 10s))
      << recv.output();
  Process send({"/bin/sh", "-c",
                "'" + std::string(HOPRELAY_BIN) + "' send --topology '" + p.topology().string() +
                    "' --to a --stdin --framing length --origin 5 < '" + in.string() + "'"},
               dir / "send.log");
  EXPECT_EQ(send.wait(60s), 3) << send.output();
  EXPECT_NE(send.output().find("2 delivered, 2 dropped"), std::string::npos) << send.output();
  EXPECT_EQ(recv.wait(60s), 1) << recv.output();
  EXPECT_NE(recv.output().find("origin 5: 2 messages, seq 2-3, ended, 2 missing (seq 0-1 before "
                               "the first this recv got: taken by an earlier recv of node c, or "
                               "dropped upstream;"),
            std::string::npos)
      << recv.output();
  p.stop_all();
}

TEST(Streams, WrongNodesAndSizesAreRefusedWithTheReasonAndNothingIsSent) {
  Chain c;
  auto recv_at = [&](const std::string& node) {
    return run({HOPRELAY_BIN, "recv", "--topology", c.p.topology(), "--node", node}, 20s);
  };
  // (A relay, b, is no longer refused: a consumer there keeps what it relays, relay_copy_test.)
  RunResult r = recv_at("zz");
  EXPECT_EQ(r.code, 78);
  EXPECT_NE(r.output.find("no node \"zz\" in topology it (nodes: a, b, c)"), std::string::npos)
      << r.output;
  r = run({HOPRELAY_BIN, "send", "--topology", c.p.topology(), "--to", "b", "--count", "1"}, 20s);
  EXPECT_EQ(r.code, 78);
  EXPECT_NE(r.output.find("node \"b\" has upstream peers; producers send to a head node (heads: "
                          "a)"),
            std::string::npos)
      << r.output;
  r = run({HOPRELAY_BIN, "send", "--topology", c.p.topology(), "--to", "zz", "--count", "1"}, 20s);
  EXPECT_EQ(r.code, 78);
  EXPECT_NE(r.output.find("no node \"zz\" in " + c.p.topology().string() + " (heads: a)"),
            std::string::npos)
      << r.output;
  // A record larger than the pipeline takes (32 slots of 16 KiB) stops the stream, named.
  std::string big(4, '\0');
  const uint32_t n = 32 * 16384 + 1;
  big = {char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
  big += std::string(n, 'x');
  write_file(c.dir / "big.in", big);
  auto send = c.send_stdin(c.dir / "big.in", "--framing length");
  EXPECT_EQ(send->wait(30s), 1);
  EXPECT_NE(
      send->output().find("hoprelay send: 524289 bytes is more than pipeline it takes (524288"),
      std::string::npos)
      << send->output();
  // Nothing reached the relay: a never forwarded a message.
  EXPECT_EQ(metric_value(scrape(c.p.node("b").metrics), "hoprelay_messages_received_total"), 0);
  c.p.stop_all();
}

// The diamond the join tests share: a -> b1, b2 -> c, and with `with_d` c -> d. a splits by
// route = "hash" (origins 21, 25, 29 all through b2, 23 all through b1); `c_settings` for c
// (its peer_down_timeout). Its links, for Pipeline::out_link_up.
std::vector<NodeDef> diamond(bool with_d, const std::string& c_settings) {
  std::vector<NodeDef> nodes{
      {"a", {"b1", "b2"}, "{ plugin = \"passthrough\" }", "route = \"hash\""},
      {"b1", {"c"}},
      {"b2", {"c"}},
      {"c", with_d ? std::vector<std::string>{"d"} : std::vector<std::string>{},
       "{ plugin = \"passthrough\" }", c_settings}};
  if (with_d) nodes.push_back({"d", {}});
  return nodes;
}
std::vector<std::pair<std::string, std::string>> diamond_links(bool with_d) {
  std::vector<std::pair<std::string, std::string>> links{
      {"a", "b1"}, {"a", "b2"}, {"b1", "c"}, {"b2", "c"}};
  if (with_d) links.emplace_back("c", "d");
  return links;
}

// Where a split joins again (a -> b1, b2 -> c) c gets the end mark once per branch. With
// route = "hash" every message of origin 21 takes b2, but its end mark takes both; b1 is
// stopped, so b2's copy comes first. The consumer must wait for b1's, see one end mark, and the
// producer's close must hear that both were acknowledged (end_joins.h). Before, recv stopped
// at b2's copy and b1's was never acknowledged: `send` timed out.
enum class Join {
  kConsumer,  // the consumer is c
  kRelay,     // c is a daemon, the consumer d below it: c passes one end mark on
  kGiveUp,    // as kRelay, b1 stopped longer than c's peer_down_timeout: c passes on its own
};

void expect_one_end_where_branches_join(Join join) {
  TempDir dir;
  constexpr uint64_t kCount = 4000;
  constexpr uint32_t kSize = 200;
  const bool relay = join != Join::kConsumer;
  const std::string consumer = relay ? "d" : "c";
  Pipeline p(dir, diamond(relay, join == Join::kGiveUp ? "peer_down_timeout = \"2s\"" : ""));
  if (relay) p.start("c");
  for (const char* n : {"b1", "b2", "a"}) p.start(n);
  const fs::path out = dir / "out.bin";
  Process recv({HOPRELAY_BIN, "recv", "--topology", p.topology().string(), "--node", consumer,
                "--output", out.string(), "--timeout", "60"},
               dir / "recv.log");
  for (const auto& [from, to] : diamond_links(relay)) {
    ASSERT_TRUE(p.out_link_up(from, to, 10s)) << from << " -> " << to << "\n" << recv.output();
  }
  p.proc("b1").signal(SIGSTOP);
  auto send = p.start_send("a", kCount, kSize, {"--origin", "21"});
  ASSERT_TRUE(wait_until([&] { return size_of(out) == kCount * kSize; }, 60s))
      << size_of(out) << " bytes\n"
      << recv.output() << send->output();
  if (join == Join::kGiveUp) {
    // c gives up on b1's copy after 2 s and passes on one of its own: the consumer ends.
    ASSERT_EQ(recv.wait(30s), 0) << recv.output();
    EXPECT_NE(p.proc("c").output().find("passed on with the end marks of 1 of 2 branches"),
              std::string::npos)
        << p.proc("c").output();
  } else {
    // Every message is in and b2's end mark is on its way or in: the consumer waits for b1's.
    std::this_thread::sleep_for(500ms);
    EXPECT_TRUE(recv.running()) << recv.output();
  }
  // b1's copy then comes (c acknowledges it for the end mark passed on, when it gave up).
  p.proc("b1").signal(SIGCONT);
  ASSERT_EQ(send->wait(60s), 0) << send->output() << recv.output();
  EXPECT_NE(send->output().find("sent " + std::to_string(kCount) + " messages"), std::string::npos)
      << send->output();
  ASSERT_EQ(recv.wait(60s), 0) << recv.output();
  EXPECT_NE(recv.output().find("received " + std::to_string(kCount) + " messages"),
            std::string::npos)
      << recv.output();
  EXPECT_EQ(size_of(out), kCount * kSize) << recv.output();
  p.stop_all();
}

// The end mark waits at the join for b1's copy (stopped) longer than send's close: send says
// that every message was acknowledged, that the end mark is not yet, and what to do. Then a
// resumed send waiting for the same end mark is stopped by SIGTERM.
TEST(Streams, ASendWhoseEndMarkWaitsAtAJoinSaysWhatItWaitsForAndWhatToDo) {
  TempDir dir;
  constexpr uint64_t kCount = 400;
  constexpr uint32_t kSize = 200;
  Pipeline p(dir, diamond(false, ""));
  for (const char* n : {"b1", "b2", "a"}) p.start(n);
  const fs::path out = dir / "out.bin";
  Process recv({HOPRELAY_BIN, "recv", "--topology", p.topology().string(), "--node", "c",
                "--output", out.string(), "--timeout", "60"},
               dir / "recv.log");
  for (const auto& [from, to] : diamond_links(false)) {
    ASSERT_TRUE(p.out_link_up(from, to, 10s)) << from << " -> " << to << "\n" << recv.output();
  }
  p.proc("b1").signal(SIGSTOP);
  auto send = p.start_send("a", kCount, kSize, {"--origin", "21", "--close-timeout", "2"});
  EXPECT_EQ(send->wait(60s), 1) << send->output();
  const std::string said = send->output();
  EXPECT_NE(said.find("sent " + std::to_string(kCount) + " messages"), std::string::npos) << said;
  // The caller's timeout, not what was left of it at the last of close's waits.
  EXPECT_NE(said.find("end of stream: timed out after 2000 ms"), std::string::npos) << said;
  EXPECT_NE(said.find(" ms: every message was acknowledged, the end-of-stream mark not yet"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("--close-timeout SECONDS waits longer"), std::string::npos) << said;
  EXPECT_EQ(size_of(out), kCount * kSize) << recv.output();
  // The same send resumed: every message is one the head has, its end mark waits at c like the
  // first (b1 still stopped), and send waits for it as long as it takes (--close-timeout 0)
  // until SIGTERM, which it says and ends by.
  auto again = p.start_send("a", kCount, kSize,
                            {"--origin", "21", "--resume", "--close-timeout", "0"}, "again.log");
  ASSERT_TRUE(wait_until(  // a holds both end marks for b1: the second was sent
      [&] { return metric_value(scrape(p.node("a").metrics), "hoprelay_slots_in_use") == 2; }, 30s))
      << again->output();
  again->signal(SIGTERM);
  EXPECT_EQ(again->wait(10s), 143) << again->output();
  EXPECT_NE(again->output().find("interrupted (SIGTERM) while waiting for the end-of-stream "
                                 "mark's acknowledgement: all 400 messages were acknowledged "
                                 "(origin 21)"),
            std::string::npos)
      << again->output();
  // b1's copy comes: the consumer ends with every message.
  p.proc("b1").signal(SIGCONT);
  ASSERT_EQ(recv.wait(60s), 0) << recv.output();
  EXPECT_EQ(size_of(out), kCount * kSize) << recv.output();
  p.stop_all();
}

TEST(Streams, WhereASplitJoinsAgainTheConsumerSeesOneEndAndTheProducerClosesCleanly) {
  expect_one_end_where_branches_join(Join::kConsumer);
}

TEST(Streams, ARelayWhereASplitJoinsAgainPassesOneEndOn) {
  expect_one_end_where_branches_join(Join::kRelay);
}

TEST(Streams, ARelayWhereASplitJoinsAgainGivesUpOnABranchAfterPeerDownTimeout) {
  expect_one_end_where_branches_join(Join::kGiveUp);
}

// a -> b1, b2 -> c -> d, c a relay with peer_down_timeout kTimeout (its give-up, and how long
// after its start it holds the first copy of an end mark: end_joins.h), the consumer at d.
// route = "hash": origin 21 goes all through b2, origin 23 all through b1.
struct JoinRelay {
  static constexpr uint64_t kCount = 2000;
  static constexpr uint32_t kSize = 200;
  static constexpr auto kTimeout = 6s;
  TempDir dir;
  Pipeline p{dir, diamond(true, "peer_down_timeout = \"6s\"")};
  fs::path out = dir / "out.bin";
  std::chrono::steady_clock::time_point c_started;
  std::unique_ptr<Process> recv;

  JoinRelay() {
    p.start("c");
    c_started = std::chrono::steady_clock::now();
    for (const char* n : {"b1", "b2", "a"}) p.start(n);
    recv = std::make_unique<Process>(
        std::vector<std::string>{HOPRELAY_BIN, "recv", "--topology", p.topology().string(),
                                 "--node", "d", "--output", out.string(), "--timeout", "90"},
        dir / "recv.log");
    for (const auto& [from, to] : diamond_links(true)) {
      EXPECT_TRUE(link_up(from, to)) << from << " -> " << to << "\n" << recv->output();
    }
  }
  bool link_up(const std::string& from, const std::string& to) { return p.out_link_up(from, to); }
  // c's receive slots from `peer` not yet released (sampled once a second).
  bool c_holds(const std::string& peer, double slots) {
    return wait_until(
        [&] {
          return metric_value(scrape(p.node("c").metrics), "hoprelay_link_slots_in_use",
                              "peer=\"" + peer + "\"") == slots;
        },
        15s);
  }
  bool all_out() {
    return wait_until([&] { return size_of(out) == kCount * kSize; }, 60s);
  }
  void expect_clean_end(Process& send) {
    ASSERT_EQ(recv->wait(60s), 0) << recv->output() << p.proc("c").output();
    EXPECT_NE(recv->output().find("received " + std::to_string(kCount) + " messages"),
              std::string::npos)
        << recv->output();
    EXPECT_EQ(size_of(out), kCount * kSize) << recv->output();
    ASSERT_EQ(send.wait(60s), 0) << send.output();
  }
};

// The joining node restarted while it waited, then killed again before it gave up. c
// acknowledged b2's copy of the end mark, then died; its next life gets only b1's.
// Acknowledged at once, that copy would let the producer's close return, and with c killed
// again before its give-up, no life of c would ever have a copy: the consumer would never see
// the end. Right after a start c holds the copy instead, so the next life gets it replayed
// and passes it on at its give-up: recv ends, send exits 0.
TEST(Streams, AJoinRestartedTwiceWhileItWaitsStillPassesTheEndOn) {
  JoinRelay j;
  // Past c's holding window, so that b2's copy is acknowledged at once, as in a long-running c.
  // (c_started is taken before c's exec: a margin for its start-up.)
  std::this_thread::sleep_until(j.c_started + JoinRelay::kTimeout + 2s);
  const double full =
      metric_value(scrape(j.p.node("b2").metrics), "hoprelay_link_credits", "peer=\"c\"");
  j.p.proc("b1").signal(SIGSTOP);
  // The end mark's acknowledgement comes after two restarts and c's give-up: more than the
  // 10 s `send` waits by default.
  auto send = j.p.start_send("a", JoinRelay::kCount, JoinRelay::kSize,
                             {"--origin", "21", "--close-timeout", "60"});
  ASSERT_TRUE(j.all_out()) << size_of(j.out) << " bytes\n" << j.recv->output() << send->output();
  // b2's copy of the end mark acknowledged by c: all of b2's credits back. (The gauge is
  // sampled once a second: wait for a sample taken after the end mark went out.)
  std::this_thread::sleep_for(1500ms);
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(j.p.node("b2").metrics), "hoprelay_link_credits",
                            "peer=\"c\"") == full;
      },
      15s))
      << full;
  ASSERT_TRUE(j.recv->running()) << j.recv->output();
  j.p.crash_and_restart("c");  // before its give-up: b2's copy is gone with it
  const auto second_start = std::chrono::steady_clock::now();
  j.p.proc("b1").signal(SIGCONT);
  // b1's copy in c's second life, held (the code before acknowledged it: 0).
  ASSERT_TRUE(j.c_holds("b1", 1)) << j.p.proc("c").output();
  // Killed again within its holding window, before its give-up.
  ASSERT_LT(std::chrono::steady_clock::now() - second_start, JoinRelay::kTimeout)
      << "the machine was too slow to kill c before its give-up; the test proves nothing";
  j.p.crash_and_restart("c");
  // The third life gets b1's copy again (held, not acknowledged) and gives up on b2's.
  j.expect_clean_end(*send);
  EXPECT_NE(j.p.proc("c").output().find("passed on with the end marks of 1 of 2 branches"),
            std::string::npos)
      << j.p.proc("c").output();
  j.p.stop_all();
}

// Right after c's start it holds b1's copy; b1 is killed and restarted, so the copy comes
// again on a new link and goes with the held one; then b2's completes the end mark. Every
// copy is acknowledged with the one passed on: c's slots from b1 all come back.
TEST(Streams, AJoinThatHoldsACopyAcknowledgesItsReplayWithIt) {
  JoinRelay j;
  double full = 0;  // b1's credits to c with nothing in flight: c's slots (sampled each second)
  ASSERT_TRUE(wait_until(
      [&] {
        full = metric_value(scrape(j.p.node("b1").metrics), "hoprelay_link_credits", "peer=\"c\"");
        return full > 0;
      },
      10s));
  j.p.proc("b2").signal(SIGSTOP);
  auto send =
      j.p.start_send("a", JoinRelay::kCount, JoinRelay::kSize, {"--origin", "23"});  // via b1
  ASSERT_TRUE(j.all_out()) << size_of(j.out) << " bytes\n" << j.recv->output() << send->output();
  ASSERT_TRUE(j.c_holds("b1", 1)) << j.p.proc("c").output();
  // Counted in what the node holds too (a drain waits for it).
  EXPECT_EQ(metric_value(scrape(j.p.node("c").metrics), "hoprelay_slots_in_use"), 1);
  ASSERT_LT(std::chrono::steady_clock::now() - j.c_started, JoinRelay::kTimeout)
      << "the machine was too slow: c's holding window passed before b1's copy came";
  j.p.crash_and_restart("b1");  // a replays the end mark to b1's next life, and it to c
  // b1's next life sent the replay and c holds it: one credit out. (c's own gauge still shows
  // the old link's 1 until its next sample, so it cannot tell.)
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(scrape(j.p.node("b1").metrics), "hoprelay_link_credits",
                            "peer=\"c\"") == full - 1;
      },
      15s))
      << full << "\n"
      << j.p.proc("b1").output();
  std::this_thread::sleep_for(1s);  // on its way to c, then in c
  // The held copy on b1's old link (gone, its slot still held) and the replay on the new one,
  // chained to it: two of b1's slots.
  ASSERT_TRUE(j.c_holds("b1", 2)) << j.p.proc("c").output();
  j.p.proc("b2").signal(SIGCONT);
  j.expect_clean_end(*send);
  EXPECT_TRUE(j.c_holds("b1", 0)) << "a copy of the end mark was never released";
  EXPECT_EQ(j.p.proc("c").output().find("passed on with the end marks of"), std::string::npos)
      << j.p.proc("c").output();
  j.p.stop_all();
}

// Give-ups are logged at once, then one line per 5 s with how many more: a branch down under
// many short streams must not write a line per stream. Three producers (origins 21, 25, 29:
// all through b2 by route = "hash") end while b1 is stopped; c gives up on each after 1 s.
TEST(Streams, AJoinLogsItsGiveUpsOnceThenCountsThem) {
  TempDir dir;
  Pipeline p(dir, diamond(true, "peer_down_timeout = \"1s\""));
  p.start("d");
  p.start("c");
  const auto c_started = std::chrono::steady_clock::now();
  for (const char* n : {"b1", "b2", "a"}) p.start(n);
  for (const auto& [from, to] : diamond_links(true)) {
    ASSERT_TRUE(p.out_link_up(from, to)) << from << " -> " << to;
  }
  std::this_thread::sleep_until(c_started + 3s);  // past c's holding window (end_joins.h)
  p.proc("b1").signal(SIGSTOP);
  std::vector<std::unique_ptr<Process>> sends;
  for (const char* origin : {"21", "25", "29"}) {
    // Their close waits for b1 too (a passes every end mark down both branches): not for that.
    sends.push_back(p.start_send("a", 100, 64, {"--origin", origin, "--close-timeout", "60"},
                                 std::string("send-") + origin + ".log"));
  }
  auto ends_at_d = [&] {
    const std::string log = p.proc("d").output();
    size_t n = 0;
    for (size_t at = log.find(": end of stream after 100 messages"); at != std::string::npos;
         at = log.find(": end of stream after 100 messages", at + 1)) {
      ++n;
    }
    return n;
  };
  ASSERT_TRUE(wait_until([&] { return ends_at_d() == 3; }, 30s)) << p.proc("d").output();
  ASSERT_TRUE(wait_until(
      [&] { return p.proc("c").output().find("2 more ends of stream") != std::string::npos; }, 15s))
      << p.proc("c").output();
  const std::string c_log = p.proc("c").output();
  EXPECT_EQ(c_log.find("passed on with the end marks of 1 of 2 branches"),
            c_log.rfind("passed on with the end marks of 1 of 2 branches"))
      << "one line for the first, the others counted:\n"
      << c_log;
  EXPECT_NE(c_log.find("3 in all"), std::string::npos) << c_log;
  p.proc("b1").signal(SIGCONT);  // b1's copies come late: acknowledged, not passed on again
  for (auto& send : sends) EXPECT_EQ(send->wait(30s), 0) << send->output();
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(ends_at_d(), 3u) << p.proc("d").output();
  p.stop_all();
}

}  // namespace
}  // namespace hoprelay::test
