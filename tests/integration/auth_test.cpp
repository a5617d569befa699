// Admission (docs/security.md): a declared name is not enough to get in. The connection must
// come from the node's declared address, and with auth_key_file the peer must answer a fresh
// challenge with the key, and must prove the same to the sender. Real daemons on loopback over TCP;
// the Soft-RoCE suite runs the verbs side (tests/rxe/verbs_suite.sh, "auth").
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>

#include "harness.h"
#include "hoprelay/transport/auth.h"
#include "hoprelay/transport/wire.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

using transport::FrameHeader;
using transport::FrameType;
using transport::kFrameHeaderSize;

void write_key(const fs::path& path, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string key(32, '\0');
  for (auto& c : key) c = static_cast<char>(rng());
  write_file(path, key);
  ::chmod(path.c_str(), 0600);
}

double auth_rejections(uint16_t metrics) {
  return metric_value(scrape(metrics), "hoprelay_connections_rejected_total",
                      "reason=\"auth_failed\"");
}

// Speaks the protocol by hand: a hello as a declared node, then whatever the test says.
class Stranger {
 public:
  explicit Stranger(uint16_t port, const char* from = nullptr)
      : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (from) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      inet_pton(AF_INET, from, &src.sin_addr);
      EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof(src)), 0);
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Stranger() { ::close(fd_); }

  void send_frame(FrameType type, const std::string& body) {
    FrameHeader h{type};
    h.length = static_cast<uint32_t>(body.size());
    std::string out(kFrameHeaderSize, '\0');
    transport::encode_header(h, reinterpret_cast<std::byte*>(out.data()));
    out += body;
    ASSERT_EQ(::send(fd_, out.data(), out.size(), MSG_NOSIGNAL), ssize_t(out.size()));
  }
  void hello_as(const std::string& name) {
    transport::HelloBody hb;
    std::strncpy(hb.name, name.c_str(), transport::kMaxNodeName);
    std::string body(transport::kHelloSize, '\0');
    transport::encode_hello(hb, reinterpret_cast<std::byte*>(body.data()));
    send_frame(FrameType::kHello, body);
  }
  // The next frame's header and body (type 0 on EOF or timeout).
  std::pair<FrameHeader, std::string> receive() {
    std::pair<FrameHeader, std::string> none;
    none.first.type = FrameType{};
    std::string hdr(kFrameHeaderSize, '\0');
    if (::recv(fd_, hdr.data(), hdr.size(), MSG_WAITALL) != ssize_t(hdr.size())) return none;
    FrameHeader h;
    if (transport::decode_header(reinterpret_cast<const std::byte*>(hdr.data()), {}, h) !=
        transport::WireError::kOk) {
      return none;
    }
    std::string body(h.length, '\0');
    if (h.length && ::recv(fd_, body.data(), body.size(), MSG_WAITALL) != ssize_t(h.length)) {
      return none;
    }
    return {h, body};
  }

 private:
  int fd_;
};

TEST(Admission, ADeclaredNameFromAnotherAddressIsRejectedAndCounted) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.start_all();
  // a is declared at 127.0.0.1; the same name from 127.0.0.2 (another loopback address) is not a.
  Stranger s(p.node("b").port, "127.0.0.2");
  s.hello_as("a");
  auto [reject, reason] = s.receive();
  EXPECT_EQ(reject.type, FrameType::kReject);
  EXPECT_NE(reason.find("connects from 127.0.0.2, not from its address"), std::string::npos)
      << reason;
  EXPECT_EQ(metric_value(scrape(p.node("b").metrics), "hoprelay_connections_rejected_total",
                         "reason=\"wrong_address\""),
            1);
  // The real a (sending from its listen address) is admitted and delivers.
  ASSERT_EQ(p.send("a", 1000, 256).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 1000); }, 20s));
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 1000);
}

TEST(Auth, KeyHoldersGetInAndAStrangerWithTheRightNameDoesNot) {
  TempDir dir;
  write_key(dir / "pipeline.key", 1);
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.set_preamble("auth_key_file = \"pipeline.key\"\n");
  p.start_all();

  // The producer and a -> b authenticate with the key: everything arrives.
  RunResult sent = p.send("a", 5000, 512);
  ASSERT_EQ(sent.code, 0) << sent.output;
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 5000); }, 20s));
  EXPECT_NE(read_file(dir / "b.log").find("(authenticated)"), std::string::npos);

  // A stranger says hello as "a" (a declared upstream of b, from the right address): it gets a
  // challenge, not a welcome, and its guess at the answer gets it refused and counted.
  {
    Stranger s(p.node("b").port);
    s.hello_as("a");
    auto [challenge, nonce] = s.receive();
    ASSERT_EQ(challenge.type, FrameType::kChallenge);
    ASSERT_EQ(nonce.size(), transport::kNonceSize);
    s.send_frame(FrameType::kAuth, std::string(transport::kAuthSize, 'x'));
    auto [reject, reason] = s.receive();
    EXPECT_EQ(reject.type, FrameType::kReject);
    EXPECT_NE(reason.find("authentication failed"), std::string::npos) << reason;
    EXPECT_EQ(s.receive().first.type, FrameType{});  // then closed
  }
  EXPECT_EQ(auth_rejections(p.node("b").metrics), 1);

  // A stranger that skips the answer and sends data is a protocol violation: closed.
  {
    Stranger s(p.node("b").port);
    s.hello_as("a");
    ASSERT_EQ(s.receive().first.type, FrameType::kChallenge);
    s.send_frame(FrameType::kData, std::string(8, 'd'));
    EXPECT_EQ(s.receive().first.type, FrameType{});
  }

  // A real daemon for "a" whose key differs: b refuses it, it says why, and counts nothing in.
  std::string topology = read_file(p.topology());
  write_key(dir / "other.key", 2);
  std::string other = topology;
  other.replace(other.find("pipeline.key"), 12, "other.key");
  // Its own ports: the real a holds the declared ones.
  for (uint16_t port : {p.node("a").port, p.node("a").metrics}) {
    std::string text = ":" + std::to_string(port) + "\"";
    other.replace(other.find(text), text.size(), ":" + std::to_string(free_port()) + "\"");
  }
  write_file(dir / "other.toml", other);
  {
    Process impostor({HOPRELAYD_BIN, "--topology", (dir / "other.toml").string(), "--node", "a"},
                     dir / "impostor.log");
    ASSERT_TRUE(wait_until([&] { return auth_rejections(p.node("b").metrics) >= 2; }, 20s))
        << impostor.output();
    ASSERT_TRUE(wait_until(
        [&] { return impostor.output().find("authentication failed") != std::string::npos; }, 10s))
        << impostor.output();
  }

  // A producer without the key is told what is missing, and sends nothing.
  std::string keyless = topology;
  keyless.erase(0, keyless.find("[pipeline]"));
  write_file(dir / "keyless.toml", keyless);
  RunResult refused = run({HOPRELAY_BIN, "send", "--topology", (dir / "keyless.toml").string(),
                           "--to", "a", "--count", "10", "--connect-timeout", "2"});
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.output.find("auth_key_file"), std::string::npos) << refused.output;

  // Through all of it the real link kept working, and nothing else got in.
  ASSERT_EQ(p.send("a", 5000, 512).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 10000); }, 20s));
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 10000);
}

TEST(Auth, ASenderRefusesADownstreamThatDoesNotProveTheKey) {
  TempDir dir;
  write_key(dir / "pipeline.key", 3);
  Pipeline p(dir, {{"a", {"b"}}, {"b", {}, sink(dir, "b")}});
  p.set_preamble("auth_key_file = \"pipeline.key\"\n");
  // Something listens at b's address without the key (its topology has none).
  std::string topology = read_file(p.topology());
  std::string keyless = topology.substr(topology.find("[pipeline]"));
  write_file(dir / "keyless.toml", keyless);
  auto fake_b = std::make_unique<Process>(
      std::vector<std::string>{HOPRELAYD_BIN, "--topology", (dir / "keyless.toml").string(),
                               "--node", "b"},
      dir / "fake-b.log");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("b").metrics).empty(); }, 10s));
  p.start("a");
  ASSERT_TRUE(wait_until([&] { return !scrape(p.node("a").metrics).empty(); }, 10s));
  // a holds the messages: it does not send them to a peer that cannot prove the key (so the
  // producer, which waits for a's acknowledgements, is still running).
  auto producer = p.start_send("a", 300, 256);
  ASSERT_TRUE(wait_until(
      [&] {
        return read_file(dir / "a.log").find("did not authenticate itself") != std::string::npos;
      },
      10s));
  EXPECT_EQ(read_report(dir / "b.json").received, 0);
  fake_b->signal(SIGTERM);
  EXPECT_EQ(fake_b->wait(20s), 0);
  fake_b.reset();
  // The real b, with the key: a's held messages reach it, once each.
  p.start("b");
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 300); }, 30s))
      << read_file(dir / "a.log") << read_file(dir / "b.log");
  EXPECT_EQ(producer->wait(20s), 0) << producer->output();
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 300);
}

}  // namespace
}  // namespace hoprelay::test
