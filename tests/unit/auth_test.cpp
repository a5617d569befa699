#include "hoprelay/transport/auth.h"
#include "hoprelay/transport/auth_handshake.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hoprelay/transport/transport.h"
#include "hoprelay/transport/wire.h"

namespace hoprelay::transport {
namespace {

namespace fs = std::filesystem;

class KeyFile {
 public:
  KeyFile(const std::string& bytes, mode_t mode)
      : path_(fs::temp_directory_path() /
              ("hoprelay-key-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    std::ofstream(path_, std::ios::binary) << bytes;
    ::chmod(path_.c_str(), mode);
  }
  ~KeyFile() { fs::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string load_error(const std::string& path) {
  try {
    AuthKey::load(path);
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

TEST(AuthKey, LoadsAKeyFileAndRefusesWhatCannotBeAKey) {
  KeyFile good(std::string(32, 'k'), 0600);
  EXPECT_NE(AuthKey::load(good.path()), nullptr);

  std::string missing = load_error("/nonexistent/hoprelay.key");
  EXPECT_NE(missing.find("cannot read auth_key_file /nonexistent/hoprelay.key"), std::string::npos);
  EXPECT_NE(missing.find("head -c 32 /dev/urandom"), std::string::npos) << missing;

  KeyFile short_key(std::string(31, 'k'), 0600);
  std::string too_short = load_error(short_key.path());
  EXPECT_NE(too_short.find("holds 31 bytes; at least 32"), std::string::npos) << too_short;

  KeyFile world_readable(std::string(32, 'k'), 0644);
  std::string open = load_error(world_readable.path());
  EXPECT_NE(open.find("readable by every user"), std::string::npos) << open;
  EXPECT_NE(open.find("chmod 600"), std::string::npos) << open;
}

// A key this process may not read exists: the hint is about access, not "create one" (a new
// key would differ from every other host's).
TEST(AuthKey, AKeyThatCannotBeReadIsNotToBeReplaced) {
  std::string text;
  if (::geteuid() != 0) {
    KeyFile locked(std::string(32, 'k'), 0000);
    text = load_error(locked.path());
  } else {
    // root reads anything: the load runs in a child that became nobody.
    KeyFile locked(std::string(32, 'k'), 0600);
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(out[0]);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(2);
      std::string e = load_error(locked.path());
      [[maybe_unused]] auto n = ::write(out[1], e.data(), e.size());
      _exit(0);
    }
    ::close(out[1]);
    char buf[1024];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    ::close(out[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "the child could not become nobody";
  }
  EXPECT_NE(text.find("Permission denied"), std::string::npos) << text;
  EXPECT_NE(text.find("chmod 640"), std::string::npos) << text;
  EXPECT_EQ(text.find("head -c 32"), std::string::npos) << text;
}

std::vector<std::byte> bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

TEST(AuthKey, ProofsDependOnTheKeyBothNoncesTheMessageAndTheDirection) {
  AuthKey key(bytes(std::string(32, 'k')));
  AuthKey other(bytes(std::string(32, 'o')));
  Nonce ns = fresh_nonce();
  Nonce nc = fresh_nonce();
  EXPECT_NE(ns, nc);  // 256 random bits each
  auto hello = bytes("hello as a");
  Mac proof = key.client_proof(ns, nc, hello);

  EXPECT_TRUE(mac_matches(proof, proof));
  EXPECT_EQ(proof, key.client_proof(ns, nc, hello));  // deterministic
  EXPECT_NE(proof, other.client_proof(ns, nc, hello));
  EXPECT_NE(proof, key.client_proof(fresh_nonce(), nc, hello));  // a replay to a new challenge
  EXPECT_NE(proof, key.client_proof(ns, fresh_nonce(), hello));
  EXPECT_NE(proof, key.client_proof(ns, nc, bytes("hello as b")));
  // A client's proof is never a server's, even over the same bytes.
  EXPECT_NE(proof, key.server_proof(ns, nc, hello));

  Mac wrong = proof;
  wrong[31] ^= std::byte{1};
  EXPECT_FALSE(mac_matches(proof, wrong));
  EXPECT_FALSE(mac_matches(proof, std::span(proof).first(31)));
}

// Both halves of the exchange as the transports run them (auth_handshake.h): a peer with the
// key gets in both ways; a wrong key, a replayed answer, a second challenge, a welcome with no
// challenge or a forged one are each refused, with words that say what to do.
TEST(AuthHandshake, BothHalvesAgreeOnlyWithTheSameKeyOnThisConnection) {
  AuthKey key(bytes(std::string(32, 'k')));
  AuthKey other(bytes(std::string(32, 'o')));
  auto hello = bytes("hello as a");
  auto welcome = bytes("welcome: 64 slots");

  AuthAcceptor acceptor;
  AuthConnector connector;
  std::array<std::byte, kAuthSize> answer;
  EXPECT_FALSE(
      connector.check_welcome(key, welcome, std::span<const std::byte>{}, "b").value_or("").empty())
      << "a welcome before any challenge";
  const Nonce challenge = acceptor.challenge();
  ASSERT_TRUE(connector.answer(key, challenge, hello, answer.data()));
  EXPECT_FALSE(connector.answer(key, challenge, hello, answer.data())) << "challenged twice";
  EXPECT_EQ(acceptor.check(key, hello, answer), AuthAcceptor::Answer::kOk);
  const Mac proof = acceptor.proof(key, welcome);
  EXPECT_EQ(connector.check_welcome(key, welcome, proof, "b"), std::nullopt);

  // The welcome's proof covers its bytes and comes from the key.
  auto changed = bytes("welcome: 65 slots");
  EXPECT_NE(connector.check_welcome(key, changed, proof, "b"), std::nullopt);
  const auto forged = connector.check_welcome(key, welcome, acceptor.proof(other, welcome), "b");
  ASSERT_TRUE(forged.has_value());
  EXPECT_NE(forged->find("wrong auth_key_file, or not b"), std::string::npos) << *forged;

  // The answer covers the hello, and the acceptor's challenge of this connection only.
  EXPECT_EQ(acceptor.check(key, bytes("hello as c"), answer), AuthAcceptor::Answer::kWrongKey);
  AuthAcceptor next;
  next.challenge();
  EXPECT_EQ(next.check(key, hello, answer), AuthAcceptor::Answer::kWrongKey) << "a replay";
  EXPECT_EQ(next.check(key, hello, std::span(answer).first(40)), AuthAcceptor::Answer::kMalformed);
  AuthConnector impostor;
  ASSERT_TRUE(impostor.answer(other, next.last_challenge(), hello, answer.data()));
  EXPECT_EQ(next.check(key, hello, answer), AuthAcceptor::Answer::kWrongKey);
  EXPECT_EQ(AuthAcceptor::wrong_key_text("a"),
            "authentication failed: wrong auth_key_file, or not a");

  EXPECT_EQ(AuthConnector::mismatch(true, true), std::nullopt);
  EXPECT_EQ(AuthConnector::mismatch(false, false), std::nullopt);
  EXPECT_NE(AuthConnector::mismatch(true, false)->find("no auth_key_file"), std::string::npos);
  EXPECT_NE(AuthConnector::mismatch(false, true)->find("impostor"), std::string::npos);
}

TEST(AuthKey, ChallengeTravelsInTheCmWelcome) {
  CmWelcome w{64, 65536, 0, 0, 0xfeed};
  w.auth = true;
  Nonce n = fresh_nonce();
  std::memcpy(w.nonce.data(), n.data(), kNonceSize);
  std::array<std::byte, kCmChallengeSize> buf;
  encode_cm_welcome(w, buf.data());
  CmWelcome out;
  ASSERT_TRUE(decode_cm_welcome(buf, out));
  EXPECT_TRUE(out.auth);
  EXPECT_EQ(std::memcmp(out.nonce.data(), n.data(), kNonceSize), 0);
  EXPECT_EQ(out.topology_hash, 0xfeedu);
  // A challenge cut short, or an unknown flag, is malformed.
  EXPECT_FALSE(decode_cm_welcome(std::span(buf).first(kCmWelcomeSize), out));
  buf[1] = std::byte{0x02};
  EXPECT_FALSE(decode_cm_welcome(buf, out));
  // The plain 40-byte welcome is not a challenge.
  w.auth = false;
  encode_cm_welcome(w, buf.data());
  ASSERT_TRUE(decode_cm_welcome(std::span(buf).first(kCmWelcomeSize), out));
  EXPECT_FALSE(out.auth);
}

}  // namespace
}  // namespace hoprelay::transport
