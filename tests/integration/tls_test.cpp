// TLS on TCP links (docs/security.md, "TLS"): real daemons on loopback, certificates made by
// `openssl` for each test. A chain carries every message exactly once and nothing of a payload
// crosses in clear (a recording proxy sits on a link); each kind of wrong peer is refused with
// a message that says what to fix while the real link goes on; a reload takes renewed
// certificates without dropping links; `hoprelay validate` checks the files.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "harness.h"
#include "hoprelay/stages/pattern.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// A CA and the certificates it issues, made with the openssl command in `dir`.
class Pki {
 public:
  Pki(const fs::path& dir, std::string ca) : dir_(dir), ca_(std::move(ca)) {
    expect_ok({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
               "ec_paramgen_curve:P-256", "-nodes", "-keyout", path(ca_ + ".key"), "-out",
               path(ca_ + ".pem"), "-days", "2", "-subj", "/CN=" + ca_});
  }
  // NAME.pem and NAME.key, naming `dns` (a DNS subject alternative name), valid for `days`
  // (0: it expires now).
  void issue(const std::string& name, const std::string& dns, int days = 2) {
    write_file(dir_ / (name + ".ext"),
               "subjectAltName = DNS:" + dns + "\nextendedKeyUsage = serverAuth, clientAuth\n");
    expect_ok({"/usr/bin/openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
               "-nodes", "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj",
               "/CN=" + name});
    expect_ok({"/usr/bin/openssl", "x509", "-req", "-in", path(name + ".csr"), "-CA",
               path(ca_ + ".pem"), "-CAkey", path(ca_ + ".key"), "-CAcreateserial", "-out",
               path(name + ".pem"), "-days", std::to_string(days), "-extfile",
               path(name + ".ext")});
  }
  // The topology's tls table for NAME's files, checked against this CA.
  std::string tls(const std::string& name) const {
    return "tls = { cert = \"" + name + ".pem\", key = \"" + name + ".key\", ca = \"" + ca_ +
           ".pem\" }\n";
  }
  std::string path(const std::string& file) const { return (dir_ / file).string(); }

 private:
  static void expect_ok(const std::vector<std::string>& argv) {
    RunResult r = run(argv, 30s);
    ASSERT_EQ(r.code, 0) << argv[0] << " " << argv[1] << ": " << r.output;
  }
  fs::path dir_;
  std::string ca_;
};

// Forwards connections on its port to 127.0.0.1:`to` and keeps every byte that went that way.
class RecordingProxy {
 public:
  explicit RecordingProxy(uint16_t to) : to_(to), listen_(::socket(AF_INET, SOCK_STREAM, 0)) {
    int one = 1;
    setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa = loopback(0);
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    EXPECT_EQ(::listen(listen_, 8), 0);
    socklen_t len = sizeof(sa);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~RecordingProxy() {
    stop_ = true;
    thread_.join();
    for (auto [a, b] : pairs_) {
      ::close(a);
      ::close(b);
    }
    ::close(listen_);
  }
  uint16_t port() const { return port_; }
  std::string recorded() {
    std::lock_guard lock(mu_);
    return bytes_;
  }

 private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
  }
  void run() {
    std::vector<char> buf(1 << 16);
    while (!stop_) {
      std::vector<pollfd> fds{{listen_, POLLIN, 0}};
      for (auto [a, b] : pairs_) {
        fds.push_back({a, POLLIN, 0});
        fds.push_back({b, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int in = ::accept(listen_, nullptr, nullptr);
        int out = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in sa = loopback(to_);
        if (in >= 0 && ::connect(out, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
          pairs_.emplace_back(in, out);
        } else {
          if (in >= 0) ::close(in);
          ::close(out);
        }
        continue;  // the pairs changed: poll again
      }
      for (size_t i = 0; i < pairs_.size(); ++i) {
        for (int side = 0; side < 2; ++side) {
          if (!(fds[1 + 2 * i + side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          const int from = side ? pairs_[i].second : pairs_[i].first;
          const int to = side ? pairs_[i].first : pairs_[i].second;
          ssize_t n = ::recv(from, buf.data(), buf.size(), 0);
          if (n <= 0) {
            ::shutdown(to, SHUT_WR);
            continue;
          }
          if (side == 0) {
            std::lock_guard lock(mu_);
            bytes_.append(buf.data(), size_t(n));
          }
          for (ssize_t off = 0; off < n;) {
            ssize_t w = ::send(to, buf.data() + off, size_t(n - off), MSG_NOSIGNAL);
            if (w <= 0) break;
            off += w;
          }
        }
      }
    }
  }

  uint16_t to_;
  int listen_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<std::pair<int, int>> pairs_;
  std::mutex mu_;
  std::string bytes_;
  std::thread thread_;
};

// How many of the pattern headers of origin 77's messages `seqs` (512 bytes each, as sent)
// are in `bytes`: each is 24 bytes that ciphertext holds by chance with odds of 2^-192.
int headers_in(const std::string& bytes, const std::vector<uint64_t>& seqs) {
  int found = 0;
  for (uint64_t seq : seqs) {
    std::vector<std::byte> message(512);
    stages::fill_pattern_header(message, 77, seq);
    const std::string header(reinterpret_cast<const char*>(message.data()),
                             sizeof(stages::PatternHeader));
    found += bytes.find(header) != std::string::npos;
  }
  return found;
}

// The same topology as `p`'s, with b's address (for a, which reads it) at `port`.
fs::path topology_via(const TempDir& dir, Pipeline& p, uint16_t port) {
  std::string t = read_file(p.topology());
  const std::string b = "127.0.0.1:" + std::to_string(p.node("b").port) + "\"";
  t.replace(t.find(b), b.size(), "127.0.0.1:" + std::to_string(port) + "\"");
  write_file(dir / "via-proxy.toml", t);
  return dir / "via-proxy.toml";
}

// a -> b -> c with a recording proxy on a -> b: `messages` of 512 bytes from origin 77. Returns
// what crossed the proxy towards b.
std::string chain_through_proxy(const TempDir& dir, Pipeline& p, uint64_t messages,
                                const std::vector<std::string>& send_extra) {
  p.start_up({"c", "b"});
  RecordingProxy proxy(p.node("b").port);
  Process a(
      {HOPRELAYD_BIN, "--topology", topology_via(dir, p, proxy.port()).string(), "--node", "a"},
      dir / "a.log");
  std::vector<std::string> extra{"--origin", "77"};
  extra.insert(extra.end(), send_extra.begin(), send_extra.end());
  RunResult sent = p.send("a", messages, 512, extra);
  EXPECT_EQ(sent.code, 0) << sent.output;
  EXPECT_TRUE(wait_until([&] { return report_has(dir, "c", messages); }, 60s));
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait(20s), 0) << a.output();
  p.stop_all();
  expect_clean(read_report(dir / "c.json"), messages);
  return proxy.recorded();
}

TEST(Tls, AChainOverTlsCarriesEveryMessageOnceAndNoPayloadCrossesInClear) {
  TempDir dir;
  Pki pki(dir.path(), "ca");
  for (const char* n : {"a", "b", "c"}) pki.issue(n, n);
  pki.issue("producer", "producer");
  Pipeline p(dir, {{"a", {"b"}, "{ plugin = \"passthrough\" }", pki.tls("a")},
                   {"b", {"c"}, "{ plugin = \"passthrough\" }", pki.tls("b")},
                   {"c", {}, sink(dir, "c"), pki.tls("c")}});
  const std::string through =
      chain_through_proxy(dir, p, 20000,
                          {"--tls-cert", pki.path("producer.pem"), "--tls-key",
                           pki.path("producer.key"), "--tls-ca", pki.path("ca.pem")});
  // Every message crossed the proxy (its payload and more), and none of their headers in clear.
  EXPECT_GT(through.size(), 20000u * 512);
  EXPECT_EQ(headers_in(through, {0, 1, 777, 10000, 19999}), 0);
  EXPECT_EQ(through.find("HRPL"), std::string::npos);  // no pattern magic at all
  // Each link says what it runs.
  EXPECT_NE(read_file(dir / "a.log").find("outbound link up: b"), std::string::npos);
  EXPECT_NE(read_file(dir / "a.log").find("TLSv1.3"), std::string::npos);
  EXPECT_NE(read_file(dir / "b.log").find("TLSv1.3"), std::string::npos);
  EXPECT_NE(read_file(dir / "c.log").find("inbound link up: b"), std::string::npos);
}

// The check above can fail: in clear text, the same proxy sees the headers.
TEST(Tls, TheRecordingProxySeesPayloadsOfAClearTextChain) {
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {"c"}}, {"c", {}, sink(dir, "c")}});
  const std::string through = chain_through_proxy(dir, p, 1000, {});
  EXPECT_EQ(headers_in(through, {0, 1, 777, 999}), 4);
}

double rejected(uint16_t metrics, const std::string& reason) {
  return metric_value(scrape(metrics), "hoprelay_connections_rejected_total",
                      "reason=\"" + reason + "\"");
}

// Runs hoprelayd as node `node` of `topology` (a's ports replaced: the real a holds them) with
// `tls` in place of its tls line, until its log shows `expect`; then stops it.
void impostor(const TempDir& dir, Pipeline& p, const std::string& name, const std::string& tls,
              const std::string& expect) {
  std::string t = read_file(p.topology());
  for (uint16_t port : {p.node("a").port, p.node("a").metrics}) {
    std::string text = ":" + std::to_string(port) + "\"";
    t.replace(t.find(text), text.size(), ":" + std::to_string(free_port()) + "\"");
  }
  const std::string own = "tls = { cert = \"a.pem\", key = \"a.key\", ca = \"ca.pem\" }\n";
  t.replace(t.find(own), own.size(), tls);
  t.erase(0, t.find("[pipeline]"));  // not the producers' top-level tls: only its own, if any
  write_file(dir / (name + ".toml"), t);
  Process proc({HOPRELAYD_BIN, "--topology", (dir / (name + ".toml")).string(), "--node", "a"},
               dir / (name + ".log"));
  EXPECT_TRUE(wait_until([&] { return proc.output().find(expect) != std::string::npos; }, 20s))
      << name << ": no \"" << expect << "\" in:\n"
      << proc.output();
}

TEST(Tls, EachWrongPeerIsRefusedWithWhatToFixAndTheRealLinkGoesOn) {
  TempDir dir;
  Pki pki(dir.path(), "ca");
  Pki other(dir.path(), "other-ca");
  pki.issue("a", "a");
  pki.issue("b", "b");
  pki.issue("producer", "producer");
  pki.issue("named-c", "c");
  other.issue("foreign-a", "a");
  pki.issue("expired-a", "a", 0);
  Pipeline p(dir, {{"a", {"b"}, "{ plugin = \"passthrough\" }", pki.tls("a")},
                   {"b", {}, sink(dir, "b"), pki.tls("b")}});
  p.set_preamble(pki.tls("producer"));  // hoprelay send's
  p.start_all();
  ASSERT_EQ(p.send("a", 2000, 512).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 2000); }, 20s));
  const uint16_t b = p.node("b").metrics;

  // A certificate from another CA: b refuses the handshake, and a says b refused its
  // certificate (b's alert), which must chain to b's CA.
  impostor(dir, p, "foreign",
           "tls = { cert = \"foreign-a.pem\", key = \"foreign-a.key\", ca = \"ca.pem\" }\n",
           "refused this node's certificate");
  EXPECT_NE(read_file(dir / "b.log").find("certificate is refused"), std::string::npos);

  // The right CA, but naming c: b's admission refuses it as a, and says how to issue a's.
  impostor(dir, p, "misnamed",
           "tls = { cert = \"named-c.pem\", key = \"named-c.key\", ca = \"ca.pem\" }\n",
           "shows a TLS certificate that names c, not a: issue a's certificate with "
           "subjectAltName = DNS:a");
  EXPECT_GE(rejected(b, "wrong_certificate"), 1);

  // Clear text to a node that takes TLS only: told so, in clear.
  impostor(dir, p, "clear", "", "takes TLS only");

  // An expired certificate: a node with one does not start, and says to renew it...
  {
    std::string t = read_file(p.topology());
    const std::string own = "cert = \"a.pem\", key = \"a.key\"";
    t.replace(t.find(own), own.size(), "cert = \"expired-a.pem\", key = \"expired-a.key\"");
    write_file(dir / "expired.toml", t);
    std::this_thread::sleep_for(1100ms);  // (issued to expire now)
    Process proc({HOPRELAYD_BIN, "--topology", (dir / "expired.toml").string(), "--node", "a"},
                 dir / "expired.log");
    EXPECT_NE(proc.wait(10s), 0);
    EXPECT_NE(proc.output().find("has expired: every peer refuses it; renew it"), std::string::npos)
        << proc.output();
  }
  // ... and a peer that shows one anyway (openssl s_client) is refused by b, which says so.
  {
    RunResult r =
        run({"/bin/sh", "-c",
             "/usr/bin/openssl s_client -connect 127.0.0.1:" + std::to_string(p.node("b").port) +
                 " -tls1_3 -cert " + pki.path("expired-a.pem") + " -key " +
                 pki.path("expired-a.key") + " -CAfile " + pki.path("ca.pem") + " </dev/null"},
            20s);
    EXPECT_TRUE(wait_until(
        [&] {
          return read_file(dir / "b.log").find("certificate has expired") != std::string::npos;
        },
        10s))
        << read_file(dir / "b.log");
  }

  // A TLS node to a clear-text one: both say which side lacks TLS.
  {
    TempDir dir2;
    Pki pki2(dir2.path(), "ca");
    pki2.issue("x", "x");
    Pipeline q(dir2, {{"x", {"y"}, "{ plugin = \"passthrough\" }", pki2.tls("x")},
                      {"y", {}, sink(dir2, "y")}});
    q.start_all();
    EXPECT_TRUE(wait_until(
        [&] {
          const std::string x = read_file(dir2 / "x.log");
          return x.find("does it run without tls?") != std::string::npos ||
                 x.find("does not speak TLS") != std::string::npos;
        },
        20s))
        << read_file(dir2 / "x.log");
    EXPECT_TRUE(wait_until(
        [&] { return read_file(dir2 / "y.log").find("a TLS client") != std::string::npos; }, 10s))
        << read_file(dir2 / "y.log");
    q.stop_all();
  }

  // Through all of it the real link went on, and nothing else got in.
  ASSERT_EQ(p.send("a", 2000, 512).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 4000); }, 20s));
  EXPECT_EQ(occurrences(read_file(dir / "a.log"), "outbound link up: b"), 1u);
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 4000);
}

// openssl s_client's view of a node's port: the protocol, and the certificate's fingerprint.
std::string s_client(const Pki& pki, uint16_t port) {
  RunResult r =
      run({"/bin/sh", "-c",
           "/usr/bin/openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
               " -tls1_3 -cert " + pki.path("producer.pem") + " -key " + pki.path("producer.key") +
               " -CAfile " + pki.path("ca.pem") +
               " -verify_hostname b -verify_return_error </dev/null 2>&1 | /usr/bin/tee " +
               pki.path("s_client.out") + " | /usr/bin/openssl x509 -noout -fingerprint"},
          20s);
  return read_file(pki.path("s_client.out")) + r.output + "(exit " + std::to_string(r.code) + ")";
}

std::string fingerprint(const Pki& pki, const std::string& name) {
  return run({"/usr/bin/openssl", "x509", "-noout", "-fingerprint", "-in", pki.path(name + ".pem")})
      .output;
}

TEST(Tls, AReloadTakesRenewedCertificatesWithoutDroppingLinks) {
  TempDir dir;
  Pki pki(dir.path(), "ca");
  for (const char* n : {"a", "b", "producer"}) pki.issue(n, n);
  Pipeline p(dir, {{"a", {"b"}, "{ plugin = \"passthrough\" }", pki.tls("a")},
                   {"b", {}, sink(dir, "b"), pki.tls("b")}});
  p.set_preamble(pki.tls("producer"));
  p.start_all();
  ASSERT_EQ(p.send("a", 1000, 512).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 1000); }, 20s));
  // What b's port shows: TLS 1.3, verified as b, with b's certificate.
  std::string seen = s_client(pki, p.node("b").port);
  EXPECT_NE(seen.find("TLSv1.3"), std::string::npos) << "seen: " << seen;
  EXPECT_NE(seen.find("Verify return code: 0 (ok)"), std::string::npos) << seen;
  const std::string before = fingerprint(pki, "b");
  EXPECT_NE(seen.find(before), std::string::npos) << seen << "\nwant " << before;

  pki.issue("b", "b");  // renewed: a new key and certificate under the same paths
  const std::string after = fingerprint(pki, "b");
  ASSERT_NE(before, after);
  p.proc("b").signal(SIGHUP);
  ASSERT_TRUE(wait_until(
      [&] {
        return read_file(dir / "b.log").find("TLS certificates read again") != std::string::npos;
      },
      10s))
      << read_file(dir / "b.log");
  seen = s_client(pki, p.node("b").port);
  EXPECT_NE(seen.find(after), std::string::npos) << seen << "\nwant " << after;

  // The link a -> b stayed up through it, and carries on.
  ASSERT_EQ(p.send("a", 1000, 512).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "b", 2000); }, 20s));
  EXPECT_EQ(occurrences(read_file(dir / "a.log"), "outbound link up: b"), 1u);
  p.stop_all();
  expect_clean(read_report(dir / "b.json"), 2000);
}

TEST(Tls, ValidateChecksTheFilesThisHostHas) {
  TempDir dir;
  Pki pki(dir.path(), "ca");
  Pki other(dir.path(), "other-ca");
  pki.issue("a", "a");
  other.issue("foreign", "a");
  pki.issue("named-z", "z");
  auto validate = [&](const std::string& tls) {
    write_file(dir / "t.toml", tls + "[pipeline]\nname = \"v\"\n[nodes.a]\nlisten = \"h:1\"\n");
    return run({HOPRELAY_BIN, "validate", (dir / "t.toml").string()});
  };
  RunResult ok = validate(pki.tls("a"));
  EXPECT_EQ(ok.code, 0) << ok.output;
  RunResult foreign =
      validate("tls = { cert = \"foreign.pem\", key = \"foreign.key\", ca = \"ca.pem\" }\n");
  EXPECT_EQ(foreign.code, 78) << foreign.output;
  EXPECT_NE(foreign.output.find("t.toml:1:7: error: tls.cert"), std::string::npos)
      << foreign.output;
  EXPECT_NE(foreign.output.find("does not chain to tls.ca"), std::string::npos) << foreign.output;
  RunResult misnamed =
      validate("tls = { cert = \"named-z.pem\", key = \"named-z.key\", ca = \"ca.pem\" }\n");
  EXPECT_EQ(misnamed.code, 78) << misnamed.output;
  EXPECT_NE(misnamed.output.find("names none of the nodes that use it (a; its DNS names: z)"),
            std::string::npos)
      << misnamed.output;
  RunResult mismatched =
      validate("tls = { cert = \"a.pem\", key = \"named-z.key\", ca = \"ca.pem\" }\n");
  EXPECT_EQ(mismatched.code, 78) << mismatched.output;
  EXPECT_NE(mismatched.output.find("is not the key of tls.cert"), std::string::npos)
      << mismatched.output;
  // Files that are not on this host are another host's: a warning, and the file is valid.
  RunResult elsewhere =
      validate("tls = { cert = \"/nonexistent/a.pem\", key = \"a.key\", ca = \"ca.pem\" }\n");
  EXPECT_EQ(elsewhere.code, 0) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("warning: not on this host: tls cert /nonexistent/a.pem"),
            std::string::npos)
      << elsewhere.output;
}

// The sender's side of a certificate that names another node: the downstream b shows one
// naming c. a's refusal says what it does name (a refused certificate is never the session's
// peer certificate: the names are kept from its verification), not "no DNS name".
TEST(Tls, ASenderRefusingADownstreamsCertificateSaysWhatItNames) {
  TempDir dir;
  Pki pki(dir.path(), "ca");
  pki.issue("a", "a");
  pki.issue("named-c", "c");
  Pipeline p(dir, {{"a", {"b"}, "{ plugin = \"passthrough\" }", pki.tls("a")},
                   {"b",
                    {},
                    sink(dir, "b"),
                    "tls = { cert = \"named-c.pem\", key = \"named-c.key\", ca = \"ca.pem\" }\n"}});
  p.start_up({"b", "a"});
  const std::string expect =
      "TLS: b's certificate is refused: hostname mismatch (it names c, not b): is the "
      "topology's address of b another node's? Else issue b's certificate with "
      "subjectAltName = DNS:b";
  EXPECT_TRUE(
      wait_until([&] { return p.proc("a").output().find(expect) != std::string::npos; }, 20s))
      << p.proc("a").output();
  EXPECT_EQ(p.proc("a").output().find("no DNS name"), std::string::npos) << p.proc("a").output();
  p.stop_all();
}

// A producer whose certificate the head refuses (another CA's): over TLS 1.3 the refusal is the
// head's alert after the handshake. `hoprelay send` (the library's open) is told the head's
// refusal and what to fix, and exits at once, instead of timing out with "is hoprelayd running
// there?".
TEST(Tls, AProducerWhoseCertificateTheHeadRefusesIsToldSoNotTimedOut) {
  TempDir dir;
  Pki pki(dir.path(), "ca");
  Pki other(dir.path(), "other-ca");
  pki.issue("a", "a");
  other.issue("foreign-producer", "producer");
  Pipeline p(dir, {{"a", {}, sink(dir, "a"), pki.tls("a")}});
  p.start_all();
  RunResult r = p.send("a", 10, 100,
                       {"--tls-cert", pki.path("foreign-producer.pem"), "--tls-key",
                        pki.path("foreign-producer.key"), "--tls-ca", pki.path("ca.pem")});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("a refused this producer: TLS: a refused this node's certificate ("),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("is hoprelayd running there"), std::string::npos) << r.output;
  EXPECT_EQ(read_report(dir / "a.json").received, 0);
  p.stop_all();
}

// The node's own files, as `hoprelay validate --node N` on its host and hoprelayd
// at start see them: missing here, or a key every user may read, is an error that exits 78
// (EX_CONFIG), which the unit does not restart on; another node's files missing stay a warning.
TEST(Tls, ANodesOwnFilesMissingOrItsKeyReadableByAllRefuseItsStart) {
  TempDir dir;
  Pki pki(dir.path(), "ca");
  pki.issue("a", "a");
  const std::string nodes =
      "[pipeline]\nname = \"v\"\ntransport = \"tcp\"\n[nodes.a]\nlisten = \"127.0.0.1:" +
      std::to_string(free_port()) + "\"\ndownstream = [\"b\"]\n";
  auto topology = [&](const std::string& tls) {
    write_file(dir / "t.toml", nodes + tls + "[nodes.b]\nlisten = \"127.0.0.1:" +
                                   std::to_string(free_port()) + "\"\n");
    return (dir / "t.toml").string();
  };
  auto validate = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv{HOPRELAY_BIN, "validate", (dir / "t.toml").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
  };
  auto start = [&](const std::string& name) {
    Process proc({HOPRELAYD_BIN, "--topology", (dir / "t.toml").string(), "--node", "a"},
                 dir / (name + ".log"));
    const int code = proc.wait(10s);
    return std::pair{code, proc.output()};
  };

  // Missing: for the whole file a warning (another host's), for --node a an error.
  topology("tls = { cert = \"missing.pem\", key = \"a.key\", ca = \"ca.pem\" }\n");
  RunResult any = validate({});
  EXPECT_EQ(any.code, 0) << any.output;
  RunResult own = validate({"--node", "a"});
  EXPECT_EQ(own.code, 78) << own.output;
  EXPECT_NE(own.output.find("t.toml:7:7: error: this node's TLS files are not on this host: "
                            "tls cert " +
                            (dir / "missing.pem").string()),
            std::string::npos)
      << own.output;
  auto [missing_code, missing_log] = start("missing");
  EXPECT_EQ(missing_code, 78) << missing_log;
  EXPECT_NE(missing_log.find("this node's TLS files are not on this host"), std::string::npos)
      << missing_log;

  // A key every user of the host may read: refused by both, with the chmod to run.
  topology(pki.tls("a"));
  ASSERT_EQ(validate({"--node", "a"}).code, 0);
  fs::permissions(dir / "a.key", fs::perms::owner_read | fs::perms::owner_write |
                                     fs::perms::group_read | fs::perms::others_read);
  RunResult readable = validate({"--node", "a"});
  EXPECT_EQ(readable.code, 78) << readable.output;
  const std::string chmod =
      "has mode 0644: every user of this host can read the node's private "
      "key; `chmod 600 " +
      pki.path("a.key") + "`";
  EXPECT_NE(readable.output.find(chmod), std::string::npos) << readable.output;
  auto [readable_code, readable_log] = start("readable");
  EXPECT_EQ(readable_code, 78) << readable_log;
  EXPECT_NE(readable_log.find(chmod), std::string::npos) << readable_log;
  // Readable by its group (how a service's key is shared): accepted.
  fs::permissions(dir / "a.key", fs::perms::others_read, fs::perm_options::remove);
  RunResult group = validate({"--node", "a"});
  EXPECT_EQ(group.code, 0) << group.output;
}

}  // namespace
}  // namespace hoprelay::test
