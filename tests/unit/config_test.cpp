// Topology file parsing and validation: resolved values, and for every rejection the exact
// position and a recognisable message (operators fix files from these lines).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "hoprelay/config/topology.h"

namespace hoprelay::config {
namespace {

namespace fs = std::filesystem;

std::vector<Diagnostic> errors_of(std::string_view text) {
  try {
    parse_topology(text, "t.toml");
  } catch (const ConfigError& e) {
    return e.diagnostics();
  }
  ADD_FAILURE() << "expected a ConfigError for:\n" << text;
  return {};
}

std::string dump(const std::vector<Diagnostic>& diagnostics) {
  std::string text;
  for (const auto& d : diagnostics) text += "\n  " + d.format();
  return text;
}

// Exactly one diagnostic, at line:col, whose message contains `needle`.
void expect_error(std::string_view text, uint32_t line, uint32_t col, std::string_view needle) {
  auto diagnostics = errors_of(text);
  ASSERT_EQ(diagnostics.size(), 1u) << dump(diagnostics);
  EXPECT_EQ(diagnostics[0].pos.line, line) << dump(diagnostics);
  EXPECT_EQ(diagnostics[0].pos.col, col) << dump(diagnostics);
  EXPECT_NE(diagnostics[0].message.find(needle), std::string::npos)
      << "wanted \"" << needle << "\" in" << dump(diagnostics);
  EXPECT_EQ(diagnostics[0].file, "t.toml");
}

// A minimal valid head: a [pipeline] of two lines; tests append nodes from line 3 on.
constexpr std::string_view kPipeline = "[pipeline]\nname = \"demo\"\n";

std::string with_pipeline(std::string_view nodes) {
  return std::string(kPipeline) + std::string(nodes);
}

// The example of the file format documentation, extended to exercise every key. Node names
// are deliberately not in alphabetical order: the file order must win.
constexpr std::string_view kFull = R"([pipeline]
name = "demo"             # required
transport = "auto"
slot_size = "64KiB"
slots = 64
ingress = "write"
forward = "send"
poll = "event"

[nodes.src]
listen  = "127.0.0.1:7001"
metrics = "127.0.0.1:9101"
downstream = ["mid", "alt"]
route = "round-robin"
stage = { plugin = "crc32c", mode = "stamp" }

[nodes.mid]
listen = "127.0.0.1:7002"
downstream = ["sink"]
transport = "tcp"
slots = 128

[nodes.alt]
listen = "[::1]:7003"
downstream = ["sink"]
slot_size = "1MiB"
ingress = "send"
forward = "write"
poll = "busy"

[nodes.sink]
listen = "127.0.0.1:7004"
slot_size = "1MiB"
[nodes.sink.stage]
plugin = "verify-sink"
report = "/tmp/report.json"
)";

TEST(ConfigTest, FullExampleResolves) {
  Topology t = parse_topology(kFull, "full.toml");
  EXPECT_EQ(t.path, "full.toml");
  EXPECT_EQ(t.name, "demo");
  EXPECT_EQ(t.hash, fnv1a64(kFull));
  EXPECT_EQ(t.transport, TransportKind::kAuto);
  EXPECT_EQ(t.slot_size, 64u * 1024);
  EXPECT_EQ(t.slots, 64u);
  ASSERT_EQ(t.nodes.size(), 4u);
  EXPECT_EQ(t.nodes[0].name, "src");
  EXPECT_EQ(t.nodes[1].name, "mid");
  EXPECT_EQ(t.nodes[2].name, "alt");
  EXPECT_EQ(t.nodes[3].name, "sink");
  EXPECT_EQ(t.link_count(), 4u);
  // Hops to the deepest leaf (the spool's grace per hop below a branch): a diamond.
  EXPECT_EQ(t.height("src"), 2u);
  EXPECT_EQ(t.height("mid"), 1u);
  EXPECT_EQ(t.height("alt"), 1u);
  EXPECT_EQ(t.height("sink"), 0u);
  EXPECT_EQ(t.height("nobody"), 0u);
  // The longest way down counts: a -> b -> c -> d beside a -> d.
  Topology skip =
      parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"b\", \"d\"]\n"
                                   "[nodes.b]\nlisten = \"h:2\"\ndownstream = [\"c\"]\n"
                                   "[nodes.c]\nlisten = \"h:3\"\ndownstream = [\"d\"]\n"
                                   "[nodes.d]\nlisten = \"h:4\"\n"),
                     "t");
  EXPECT_EQ(skip.height("a"), 3u);
  EXPECT_EQ(skip.height("c"), 1u);

  const NodeSpec& src = t.nodes[0];
  EXPECT_EQ(src.listen.host, "127.0.0.1");
  EXPECT_EQ(src.listen.port, 7001);
  ASSERT_TRUE(src.metrics.has_value());
  EXPECT_EQ(src.metrics->to_string(), "127.0.0.1:9101");
  EXPECT_EQ(src.downstream, (std::vector<std::string>{"mid", "alt"}));
  EXPECT_TRUE(src.upstream.empty());
  EXPECT_TRUE(src.is_head());
  EXPECT_EQ(src.route, Route::kRoundRobin);
  EXPECT_EQ(src.stage.plugin, "crc32c");
  EXPECT_EQ(src.stage.params,
            (std::vector<std::pair<std::string, std::string>>{{"mode", "stamp"}}));
  EXPECT_EQ(src.transport, TransportKind::kAuto);
  EXPECT_EQ(src.slot_size, 64u * 1024);
  EXPECT_EQ(src.slots, 64u);
  EXPECT_EQ(src.ingress, Ingress::kWrite);
  EXPECT_EQ(src.forward, Forward::kSend);
  EXPECT_EQ(src.poll, Poll::kEvent);
  EXPECT_EQ(src.pos.line, 10u);
  EXPECT_EQ(src.pos.col, 1u);

  const NodeSpec& mid = t.nodes[1];
  EXPECT_EQ(mid.upstream, (std::vector<std::string>{"src"}));
  EXPECT_EQ(mid.route, Route::kBroadcast);
  EXPECT_EQ(mid.stage.plugin, "passthrough");
  EXPECT_TRUE(mid.stage.params.empty());
  EXPECT_EQ(mid.transport, TransportKind::kTcp);
  EXPECT_EQ(mid.slots, 128u);
  EXPECT_EQ(mid.slot_size, 64u * 1024);
  EXPECT_FALSE(mid.metrics.has_value());

  const NodeSpec& alt = t.nodes[2];
  EXPECT_EQ(alt.listen.host, "::1");
  EXPECT_EQ(alt.listen.port, 7003);
  EXPECT_EQ(alt.listen.to_string(), "[::1]:7003");
  EXPECT_EQ(alt.slot_size, 1024u * 1024);
  EXPECT_EQ(alt.ingress, Ingress::kSend);
  EXPECT_EQ(alt.forward, Forward::kWrite);
  EXPECT_EQ(alt.poll, Poll::kBusy);
  EXPECT_EQ(alt.slots, 64u);

  const NodeSpec& sink = t.nodes[3];
  EXPECT_EQ(sink.upstream, (std::vector<std::string>{"mid", "alt"}));
  EXPECT_TRUE(sink.is_leaf());
  EXPECT_EQ(sink.stage.plugin, "verify-sink");
  EXPECT_EQ(sink.stage.params,
            (std::vector<std::pair<std::string, std::string>>{{"report", "/tmp/report.json"}}));
  EXPECT_EQ(sink.pos.line, 31u);

  ASSERT_NE(t.find("alt"), nullptr);
  EXPECT_EQ(t.find("alt")->name, "alt");
  EXPECT_EQ(t.find("nope"), nullptr);
}

TEST(ConfigTest, PipelineDefaultsReachEveryNode) {
  Topology t = parse_topology(R"([pipeline]
name = "p"
transport = "verbs"
slot_size = 4096
slots = 8
ingress = "send"
forward = "write"
poll = "busy"
[nodes.a]
listen = "h1:1"
)",
                              "t.toml");
  EXPECT_EQ(t.transport, TransportKind::kVerbs);
  EXPECT_EQ(t.slot_size, 4096u);
  EXPECT_EQ(t.slots, 8u);
  ASSERT_EQ(t.nodes.size(), 1u);
  const NodeSpec& a = t.nodes[0];
  EXPECT_EQ(a.transport, TransportKind::kVerbs);
  EXPECT_EQ(a.slot_size, 4096u);
  EXPECT_EQ(a.slots, 8u);
  EXPECT_EQ(a.ingress, Ingress::kSend);
  EXPECT_EQ(a.forward, Forward::kWrite);
  EXPECT_EQ(a.poll, Poll::kBusy);
  EXPECT_EQ(a.listen.host, "h1");
  EXPECT_EQ(a.stage.plugin, "passthrough");
}

TEST(ConfigTest, MinimalFileTakesBuiltInDefaults) {
  Topology t = parse_topology(with_pipeline("[nodes.only]\nlisten = \"10.0.0.1:7000\"\n"), "t");
  EXPECT_EQ(t.transport, TransportKind::kAuto);
  EXPECT_EQ(t.slot_size, 64u * 1024);
  EXPECT_EQ(t.slots, 64u);
  ASSERT_EQ(t.nodes.size(), 1u);
  EXPECT_EQ(t.nodes[0].route, Route::kBroadcast);
  EXPECT_EQ(t.nodes[0].ingress, Ingress::kWrite);
  EXPECT_EQ(t.nodes[0].forward, Forward::kSend);
  EXPECT_EQ(t.nodes[0].poll, Poll::kEvent);
  EXPECT_TRUE(t.nodes[0].is_head());
  EXPECT_TRUE(t.nodes[0].is_leaf());
  EXPECT_EQ(t.link_count(), 0u);
}

// A crc32c stamp needs 4 bytes of room: slots no larger than what its upstream fills drop the
// largest messages, which the file would otherwise let in. validate warns, naming the fix.
TEST(ConfigTest, WarnsAboutAStampWithoutRoomForItsTrailer) {
  const std::string nodes =
      "[nodes.a]\nlisten = \"10.0.0.1:7000\"\ndownstream = [\"b\"]\n"
      "[nodes.b]\nlisten = \"10.0.0.2:7000\"\nstage = { plugin = \"crc32c\", mode = "
      "\"stamp\" }\n";
  Topology t = parse_topology(with_pipeline(nodes), "t.toml");
  auto w = t.warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].format(),
            "t.toml:" + std::to_string(t.find("b")->pos.line) +
                ":1: warning: nodes.b: its crc32c stamp adds a 4-byte trailer, but its slots "
                "(65536 bytes) leave no room in a frame that a fills (65536 bytes): such messages "
                "are dropped as stage_error. Give b a slot_size of at least 65540 (and its "
                "downstream peers too), or a one of at most 65532");
  // The fix it names: no warning. Nor for verify, nor at a head with room.
  Topology fixed = parse_topology(with_pipeline(nodes + "slot_size = 65540\n"), "t.toml");
  EXPECT_TRUE(fixed.warnings().empty()) << dump(fixed.warnings());
  // At a head, what fills a slot is the producer's message: a larger slot_size would not help,
  // and the warning does not say it would.
  Topology head = parse_topology(
      with_pipeline("[nodes.a]\nlisten = \"10.0.0.1:7000\"\nstage = { plugin = \"crc32c\", "
                    "mode = \"stamp\" }\n"),
      "t.toml");
  ASSERT_EQ(head.warnings().size(), 1u);
  EXPECT_EQ(head.warnings()[0].format(),
            "t.toml:" + std::to_string(head.find("a")->pos.line) +
                ":1: warning: nodes.a: its crc32c stamp adds a 4-byte trailer, so a message that "
                "fills one of its slots (65536 bytes) has no room and is dropped as stage_error: "
                "producers must send messages of at most 65532 bytes (hoprelay send --size "
                "65532), or stamp at a node after the head");
  // The demo pipeline of the README does not advertise what it would refuse.
  Topology demo = load_topology(HOPRELAY_SOURCE_DIR "/config/examples/demo.toml",
                                {PluginCheck::Mode::kNone, ""});
  EXPECT_TRUE(demo.warnings().empty()) << dump(demo.warnings());
}

// `standby`: a head's, naming another head whose slots, slot_size, transport and ingress a
// producer's buffers fit as they are. Each mistake is refused at the value, naming the fix.
TEST(ConfigTest, AStandbyIsAnotherHeadOfTheSameShape) {
  auto errors_of = [](const std::string& nodes) {
    try {
      parse_topology(with_pipeline(nodes), "t.toml", {PluginCheck::Mode::kNone, ""});
    } catch (const ConfigError& e) {
      std::string all;
      for (const auto& d : e.diagnostics()) all += d.format() + "\n";
      return all;
    }
    return std::string();
  };
  const std::string b = "[nodes.b]\nlisten = \"10.0.0.3:7000\"\n";
  const std::string a2 = "[nodes.a2]\nlisten = \"10.0.0.2:7000\"\ndownstream = [\"b\"]\n";
  auto a = [](const std::string& standby) {
    return "[nodes.a]\nlisten = \"10.0.0.1:7000\"\ndownstream = [\"b\"]\nstandby = " + standby +
           "\n";
  };
  Topology good =
      parse_topology(with_pipeline(a("\"a2\"") + a2 + b), "t.toml", {PluginCheck::Mode::kNone, ""});
  EXPECT_EQ(good.find("a")->standby, "a2");
  EXPECT_EQ(good.find("a2")->standby, "");
  EXPECT_NE(errors_of(a("\"a3\"") + a2 + b).find("nodes.a.standby: \"a3\" is not a node"),
            std::string::npos);
  EXPECT_NE(errors_of(a("\"a\"") + a2 + b).find("node \"a\" cannot be its own standby"),
            std::string::npos);
  EXPECT_NE(errors_of(a("\"b\"") + a2 + b)
                .find("nodes.a.standby: \"b\" has upstream nodes: a standby is a head node too"),
            std::string::npos);
  EXPECT_NE(errors_of(a("\"a2\"") + a2 + "slots = 32\n" + b)
                .find("\"a2\" has 32 slots of 65536 bytes, \"a\" 64 of 65536: a producer's "
                      "buffers are sized for its head"),
            std::string::npos)
      << errors_of(a("\"a2\"") + a2 + "slots = 32\n" + b);
  EXPECT_NE(errors_of(a("7") + a2 + b).find("nodes.a.standby must be a node name (a string)"),
            std::string::npos);
}

// A node that may stand in for a relay runs its stage: a plugin given by path must be on the
// bypassing host too. validate says so, per host that may stand in (not for a built-in stage,
// nor for a node on the same host).
TEST(ConfigTest, WarnsWhereABypassNeedsAPluginPathOnAnotherHost) {
  const std::string nodes =
      "[nodes.a]\nlisten = \"10.0.0.1:7000\"\ndownstream = [\"b\"]\non_peer_down = \"bypass\"\n"
      "[nodes.b]\nlisten = \"10.0.0.2:7000\"\ndownstream = [\"c\"]\n"
      "stage = { plugin = \"/opt/stages/mine.so\" }\n"
      "[nodes.c]\nlisten = \"10.0.0.3:7000\"\n";
  Topology t = parse_topology(with_pipeline(nodes), "t.toml", {PluginCheck::Mode::kNone, ""});
  auto w = t.warnings();
  ASSERT_EQ(w.size(), 1u) << dump(w);
  EXPECT_EQ(w[0].format(),
            "t.toml:" + std::to_string(t.find("b")->pos.line) +
                ":1: warning: nodes.b: a stands in for it when it is down (on_peer_down = "
                "\"bypass\") and then runs its stage: the plugin /opt/stages/mine.so must exist "
                "on a's host (10.0.0.1) too, or that bypass fails and a holds b's messages as "
                "under \"block\"");
}

// A [nodes.NAME] table for the stage-path tests: its own port, its downstream (a TOML list's
// inside) and its stage line.
std::string node(const std::string& name, const std::string& down, const std::string& stage) {
  return "[nodes." + name + "]\nlisten = \"h:" + std::to_string(7000 + name[0]) + "\"\n" +
         (down.empty() ? "" : "downstream = [" + down + "]\n") + stage;
}

// docs/stages.md, "zstd": between the compressing node and the one that decompresses, only
// relays that take chunks as they are. What would refuse or break the compressed messages is
// named where it is written; what is behind a decompressing node is not.
TEST(ConfigTest, WarnsWhereZstdCompressedMessagesMeetAStageThatCannotTakeThem) {
  const std::string compress = "stage = { plugin = \"zstd\", mode = \"compress\" }\n";
  const std::string decompress = "stage = { plugin = \"zstd\", mode = \"decompress\" }\n";
  // a compresses for b (crc32c) -> c (decompresses) -> d (verify-sink, fine), for e (a leaf
  // that does not decompress), for f (decompresses) -> g (fine), and for h (file-sink).
  const std::string nodes =
      node("a", "\"b\", \"e\", \"f\", \"h\"", compress) +
      node("b", "\"c\"", "stage = { plugin = \"crc32c\", mode = \"verify\" }\n") +
      node("c", "\"d\"", decompress) +
      node("d", "", "stage = { plugin = \"verify-sink\", report = \"/tmp/r\" }\n") +
      node("e", "", "") + node("f", "\"g\"", decompress) + node("g", "", "") +
      node("h", "", "stage = { plugin = \"file-sink\", path = \"/tmp/x\" }\n");
  Topology t = parse_topology(with_pipeline(nodes), "t.toml");
  auto w = t.warnings();
  ASSERT_EQ(w.size(), 3u) << dump(w);
  auto at = [&](const std::string& n) { return "t.toml:" + std::to_string(t.find(n)->pos.line); };
  EXPECT_EQ(w[0].format(),
            at("b") +
                ":1: warning: nodes.b: its crc32c stage gets the zstd-compressed messages "
                "of a (no node between them decompresses): it works on whole messages and "
                "their bytes, so it joins compressed chunks, cuts their zstd frames apart, "
                "and the node that decompresses refuses them as stage_error. Decompress "
                "before b (stage = { plugin = \"zstd\", mode = \"decompress\" } on a node "
                "before it), or compress after it");
  EXPECT_EQ(w[1].format(),
            at("e") +
                ":1: warning: nodes.e: a leaf that gets the zstd-compressed messages of a "
                "(no node between them decompresses) hands none of them to its "
                "application (hoprelay recv, a consumer: dropped as stage_error). Give e "
                "stage = { plugin = \"zstd\", mode = \"decompress\" }");
  EXPECT_EQ(w[2].format(),
            at("h") +
                ":1: warning: nodes.h: its file-sink gets the zstd-compressed messages of "
                "a (no node between them decompresses) and refuses every one of them as "
                "stage_error. Give the node before h stage = { plugin = \"zstd\", mode = "
                "\"decompress\" }");
  // Without the compressing stage nothing is compressed, and nothing is said.
  std::string plain = nodes;
  plain.replace(plain.find(compress), compress.size(), "");
  EXPECT_TRUE(parse_topology(with_pipeline(plain), "t.toml").warnings().empty());
  // The example of docs/stages.md compresses at a, passes b, decompresses at c: nothing to say.
  Topology example = load_topology(HOPRELAY_SOURCE_DIR "/config/examples/zstd.toml",
                                   {PluginCheck::Mode::kNone, ""});
  EXPECT_TRUE(example.warnings().empty()) << dump(example.warnings());
}

// The modes swapped: a leaf that compresses what it is to hand to its application. Nothing
// was said (validate: ok), and the consumer got no message at all.
TEST(ConfigTest, WarnsAtALeafWhoseOwnStageCompresses) {
  const std::string nodes = node("a", "\"b\"", "") +
                            node("b", "", "stage = { plugin = \"zstd\", mode = \"compress\" }\n");
  Topology t = parse_topology(with_pipeline(nodes), "t.toml");
  auto w = t.warnings();
  ASSERT_EQ(w.size(), 1u) << dump(w);
  EXPECT_EQ(w[0].format(), "t.toml:" + std::to_string(t.find("b")->pos.line) +
                               ":1: warning: nodes.b: a leaf whose own stage compresses (zstd, "
                               "mode = \"compress\") hands none of its messages to its "
                               "application (hoprelay recv, a consumer: dropped as stage_error). "
                               "Compress at the head, and give b mode = \"decompress\"");
}

// A crc32c stamp's trailer comes off where a node verifies it: a consumer or a file-sink with
// no verify between them and the stamp gets 4 bytes more per message than was sent.
TEST(ConfigTest, WarnsWhereCrc32cTrailersReachAnApplicationUnverified) {
  // a stamps for b (verifies) -> c (fine), for d (a leaf) and for e (file-sink).
  const std::string nodes =
      node("a", "\"b\", \"d\", \"e\"", "stage = { plugin = \"crc32c\" }\n") +
      node("b", "\"c\"", "stage = { plugin = \"crc32c\", mode = \"verify\" }\n") +
      node("c", "", "") + node("d", "", "") +
      node("e", "", "stage = { plugin = \"file-sink\", path = \"/tmp/x\" }\n");
  Topology t = parse_topology(with_pipeline(nodes), "t.toml");
  auto w = t.warnings();
  ASSERT_EQ(w.size(), 3u) << dump(w);  // the first: a head's stamp and its room
  auto at = [&](const std::string& n) { return "t.toml:" + std::to_string(t.find(n)->pos.line); };
  EXPECT_EQ(w[1].format(),
            at("d") +
                ":1: warning: nodes.d: a leaf that gets the crc32c-stamped messages of a (no "
                "node between them verifies, which strips the 4-byte trailer) hands them to "
                "its application (hoprelay recv, a consumer) with the trailer: 4 bytes more "
                "than was sent. Give d stage = { plugin = \"crc32c\", mode = \"verify\" }");
  EXPECT_EQ(w[2].format(),
            at("e") +
                ":1: warning: nodes.e: its file-sink gets the crc32c-stamped messages of a (no "
                "node between them verifies, which strips the 4-byte trailer) and writes each "
                "with the trailer: 4 bytes more than was sent. Give the node before e stage = "
                "{ plugin = \"crc32c\", mode = \"verify\" }");
}

TEST(ConfigTest, StageParamsKeepTheirTomlSpelling) {
  Topology t = parse_topology(with_pipeline(R"([nodes.a]
listen = "h:1"
stage = { plugin = "file-sink", path = 42 }
[nodes.b]
listen = "h:2"
stage = { plugin = "file-sink", path = 1.5 }
[nodes.c]
listen = "h:3"
stage = { plugin = "verify-sink", report = true }
[nodes.d]
listen = "h:4"
stage = { plugin = "file-sink", path = 3e0 }
[nodes.e]
listen = "h:5"
stage = { plugin = "file-sink", path = -7 }
[nodes.f]
listen = "h:6"
stage = { path = "x", plugin = "file-sink" }
)"),
                              "t");
  using Params = std::vector<std::pair<std::string, std::string>>;
  ASSERT_EQ(t.nodes.size(), 6u);
  EXPECT_EQ(t.nodes[0].stage.params, (Params{{"path", "42"}}));
  EXPECT_EQ(t.nodes[1].stage.params, (Params{{"path", "1.5"}}));
  EXPECT_EQ(t.nodes[2].stage.params, (Params{{"report", "true"}}));
  EXPECT_EQ(t.nodes[3].stage.params, (Params{{"path", "3.0"}}));
  EXPECT_EQ(t.nodes[4].stage.params, (Params{{"path", "-7"}}));
  EXPECT_EQ(t.nodes[5].stage.params, (Params{{"path", "x"}}));
  EXPECT_EQ(t.nodes[5].stage.plugin, "file-sink");
}

TEST(ConfigTest, OnPeerDownDefaultsAndPerNodeOverrides) {
  Topology plain = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t");
  EXPECT_EQ(plain.nodes[0].on_peer_down, OnPeerDown::kBlock);
  EXPECT_EQ(plain.nodes[0].peer_down_timeout, std::chrono::seconds(30));

  Topology t = parse_topology(R"([pipeline]
name = "p"
on_peer_down = "drop-after"
peer_down_timeout = "5s"
[nodes.a]
listen = "h:1"
[nodes.b]
listen = "h:2"
on_peer_down = "block"
[nodes.c]
listen = "h:3"
peer_down_timeout = "500 ms"
)",
                              "t.toml");
  ASSERT_EQ(t.nodes.size(), 3u);
  EXPECT_EQ(t.nodes[0].on_peer_down, OnPeerDown::kDropAfter);
  EXPECT_EQ(t.nodes[0].peer_down_timeout, std::chrono::seconds(5));
  EXPECT_EQ(t.nodes[1].on_peer_down, OnPeerDown::kBlock);
  EXPECT_EQ(t.nodes[1].peer_down_timeout, std::chrono::seconds(5));
  EXPECT_EQ(t.nodes[2].on_peer_down, OnPeerDown::kDropAfter);
  EXPECT_EQ(t.nodes[2].peer_down_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(to_string(OnPeerDown::kDropAfter), "drop-after");
}

TEST(ConfigTest, AuthKeyFileIsResolvedAgainstTheTopologyFile) {
  auto key_of = [](std::string_view value, const std::string& path) {
    return parse_topology("auth_key_file = " + std::string(value) + "\n" +
                              with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"),
                          path);
  };
  Topology t = key_of("\"keys/hoprelay.key\"", "/etc/hoprelay/topology.toml");
  EXPECT_EQ(t.auth_key_file, "/etc/hoprelay/keys/hoprelay.key");
  EXPECT_EQ(t.auth_key_file_pos.line, 1u);
  EXPECT_EQ(t.auth_key_file_pos.col, 17u);
  // Unlike a bare plugin name, a bare file name has no search path: it is beside the file.
  EXPECT_EQ(key_of("\"k\"", "conf/t.toml").auth_key_file, "conf/k");
  EXPECT_EQ(key_of("\"./k\"", "conf/t.toml").auth_key_file, "conf/./k");
  EXPECT_EQ(key_of("\"/abs/k\"", "conf/t.toml").auth_key_file, "/abs/k");
  EXPECT_EQ(key_of("\"k\"", "t.toml").auth_key_file, "k");
  Topology none = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "conf/t.toml");
  EXPECT_EQ(none.auth_key_file, "");
  EXPECT_EQ(none.auth_key_file_pos.line, 0u);
}

TEST(ConfigTest, ParseDuration) {
  using std::chrono::milliseconds;
  EXPECT_EQ(parse_duration("500ms"), milliseconds(500));
  EXPECT_EQ(parse_duration("5s"), milliseconds(5000));
  EXPECT_EQ(parse_duration("2m"), milliseconds(120000));
  EXPECT_EQ(parse_duration("1h"), milliseconds(3600000));
  EXPECT_EQ(parse_duration("30 s"), milliseconds(30000));
  EXPECT_EQ(parse_duration("0s"), milliseconds(0));
  EXPECT_EQ(parse_duration(""), std::nullopt);
  EXPECT_EQ(parse_duration("30"), std::nullopt);  // no unit: seconds or milliseconds?
  EXPECT_EQ(parse_duration("s"), std::nullopt);
  EXPECT_EQ(parse_duration("1.5s"), std::nullopt);
  EXPECT_EQ(parse_duration("-1s"), std::nullopt);
  EXPECT_EQ(parse_duration("5S"), std::nullopt);
  EXPECT_EQ(parse_duration("5sec"), std::nullopt);
  EXPECT_EQ(parse_duration("1d"), std::nullopt);
  EXPECT_EQ(parse_duration(" 5s"), std::nullopt);
  EXPECT_EQ(parse_duration("5s "), std::nullopt);
  EXPECT_EQ(parse_duration("9223372036854775808ms"), std::nullopt);  // 2^63
  EXPECT_EQ(parse_duration("9223372036854776s"), std::nullopt);
  EXPECT_EQ(duration_text(milliseconds(500)), "500ms");
  EXPECT_EQ(duration_text(milliseconds(5000)), "5s");
  EXPECT_EQ(duration_text(milliseconds(1500)), "1500ms");
  EXPECT_EQ(duration_text(milliseconds(120000)), "2m");
  EXPECT_EQ(duration_text(milliseconds(90000)), "90s");
  EXPECT_EQ(duration_text(kMaxPeerDownTimeout), "24h");
  EXPECT_EQ(duration_text(milliseconds(0)), "0ms");
}

// --- rejections --------------------------------------------------------------------------

TEST(ConfigTest, TomlSyntaxErrorIsTheOnlyError) {
  // Line 4 would be a second (semantic) error, but parsing stops at the syntax error.
  expect_error("[pipeline]\nname = \"demo\"\nslots = \nbogus = 1\n", 3, 9, "TOML syntax error");
  expect_error("[pipeline]\nname = \"demo\n", 2, 13, "TOML syntax error");
}

TEST(ConfigTest, UnknownTopLevelKey) {
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n[metrics]\nx = 1\n"), 5, 2,
               "unknown key \"metrics\" at top level");
}

TEST(ConfigTest, UnknownTopLevelKeySuggestsAndReplacesMissingTable) {
  // "pipline" is reported as a typo of "pipeline", not additionally as a missing [pipeline].
  expect_error("[pipline]\nname = \"x\"\n[nodes.a]\nlisten = \"h:1\"\n", 1, 2,
               "unknown key \"pipline\" at top level; did you mean \"pipeline\"?");
}

TEST(ConfigTest, UnknownPipelineKeySuggests) {
  expect_error("[pipeline]\nname = \"demo\"\nslot = 3\n[nodes.a]\nlisten = \"h:1\"\n", 3, 1,
               "unknown key \"slot\" in [pipeline]; did you mean \"slots\"?");
}

TEST(ConfigTest, UnknownNodeKeySuggests) {
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n  downstrem = []\n"), 5, 3,
               "unknown key \"downstrem\" in [nodes.a]; did you mean \"downstream\"?");
  // Transposition counts as one edit.
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nmetircs = \"h:2\"\n"), 5, 1,
               "did you mean \"metrics\"?");
}

TEST(ConfigTest, UnknownKeyWithoutCloseMatchHasNoSuggestion) {
  auto d = errors_of(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ncolour = \"red\"\n"));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].message, "unknown key \"colour\" in [nodes.a]");
}

TEST(ConfigTest, KeysInTheWrongTableSayWhereTheyBelong) {
  expect_error("[pipeline]\nname = \"demo\"\nroute = \"hash\"\n[nodes.a]\nlisten = \"h:1\"\n", 3, 1,
               "per-node key");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nname = \"a\"\n"), 5, 1,
               "belongs in [pipeline]");
}

TEST(ConfigTest, PipelineNameDefaultsToTheFileName) {
  // Without [pipeline], and with a [pipeline] that has no name: the file's base name.
  for (std::string_view text :
       {"[nodes.a]\nlisten = \"h:1\"\n", "[pipeline]\nslots = 4\n[nodes.a]\nlisten = \"h:1\"\n"}) {
    Topology t = parse_topology(text, "/etc/hoprelay/first-try.toml");
    EXPECT_EQ(t.name, "first-try") << text;
    EXPECT_TRUE(t.name_defaulted) << text;
    ASSERT_EQ(t.nodes.size(), 1u);
  }
  // Only ".toml" is taken off.
  EXPECT_EQ(parse_topology("[nodes.a]\nlisten = \"h:1\"\n", "relay.conf").name, "relay.conf");
  Topology named = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t.toml");
  EXPECT_EQ(named.name, "demo");
  EXPECT_FALSE(named.name_defaulted);
}

TEST(ConfigTest, PipelineNameWithoutAFileNameIsAnError) {
  try {
    parse_topology("[nodes.a]\nlisten = \"h:1\"\n", ".toml");
    ADD_FAILURE() << "no name and no file name to default it from";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u) << dump(e.diagnostics());
    EXPECT_EQ(e.diagnostics()[0].format(),
              ".toml: error: no pipeline name: the file name gives none; set name = \"...\" in "
              "[pipeline]");
  }
}

TEST(ConfigTest, EmptyFileMissesTheNodes) {
  auto d = errors_of("");
  ASSERT_EQ(d.size(), 1u) << dump(d);
  EXPECT_NE(d[0].message.find("missing [nodes]"), std::string::npos);
}

TEST(ConfigTest, EmptyPipelineName) {
  expect_error("[pipeline]\nname = \"\"\n[nodes.a]\nlisten = \"h:1\"\n", 2, 8,
               "pipeline.name must not be empty");
}

TEST(ConfigTest, MissingNodes) {
  auto d = errors_of(kPipeline);
  ASSERT_EQ(d.size(), 1u) << dump(d);
  EXPECT_EQ(d[0].pos.line, 0u);
  EXPECT_NE(d[0].message.find("missing [nodes] table"), std::string::npos);
}

TEST(ConfigTest, NodesWithoutAnyNode) {
  expect_error(with_pipeline("[nodes]\n"), 3, 1, "[nodes] declares no nodes");
}

TEST(ConfigTest, MissingListen) {
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n\n[nodes.b]\nmetrics = \"h:9\"\n"), 6, 1,
               "[nodes.b] is missing required key \"listen\"");
}

TEST(ConfigTest, WrongValueTypesPointAtTheValue) {
  expect_error("[pipeline]\nname = \"demo\"\nslots = \"many\"\n[nodes.a]\nlisten = \"h:1\"\n", 3, 9,
               "pipeline.slots must be an integer, got string");
  expect_error("[pipeline]\nname = 5\n[nodes.a]\nlisten = \"h:1\"\n", 2, 8,
               "pipeline.name must be a string, got integer");
  expect_error(with_pipeline("[nodes.a]\nlisten = 7001\n"), 4, 10,
               "nodes.a.listen must be a string, got integer");
  expect_error(
      with_pipeline(
          "[nodes.a]\nlisten = \"h:1\"\ndownstream = \"b\"\n[nodes.b]\nlisten = \"h:2\"\n"),
      5, 14, "nodes.a.downstream must be an array of node names, got string");
  expect_error(
      with_pipeline(
          "[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"b\", 3]\n[nodes.b]\nlisten = \"h:2\"\n"),
      5, 20, "entries must be node names (strings), got integer");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslot_size = 1.5\n"), 5, 13,
               "nodes.a.slot_size must be a size");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = \"crc32c\"\n"), 5, 9,
               "nodes.a.stage must be a table such as { plugin = \"passthrough\" }, got string");
  expect_error(
      with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"crc32c\", mode = [1] }\n"),
      5, 37, "nodes.a.stage.mode must be a string, integer, float or boolean");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = 1 }\n"), 5, 20,
               "nodes.a.stage.plugin must be a string, got integer");
  expect_error("nodes = 3\n" + with_pipeline(""), 1, 9, "nodes must be a table, got integer");
  expect_error("nodes.a = 3\n" + with_pipeline(""), 1, 11, "nodes.a must be a table, got integer");
  expect_error("pipeline = \"x\"\n[nodes.a]\nlisten = \"h:1\"\n", 1, 12,
               "pipeline must be a table, got string");
}

TEST(ConfigTest, DuplicateListenNamesTheFirstOwner) {
  expect_error(
      with_pipeline(R"([nodes.a]
listen = "127.0.0.1:7001"
[nodes.b]
listen = "127.0.0.1:7001"
)"),
      6, 10,
      "nodes.b.listen: address \"127.0.0.1:7001\" is already the listen address of node \"a\"");
}

TEST(ConfigTest, DuplicateListenComparesCanonicalIps) {
  expect_error(with_pipeline(R"([nodes.a]
listen = "[::1]:7001"
[nodes.b]
listen = "[0:0::1]:7001"
)"),
               6, 10, "is already the listen address of node \"a\"");
  // Host names compare case-insensitively; different ports are different addresses.
  expect_error(with_pipeline(R"([nodes.a]
listen = "Host-1:7001"
[nodes.b]
listen = "host-1:7002"
[nodes.c]
listen = "host-1:7001"
)"),
               8, 10, "already the listen address of node \"a\"");
}

TEST(ConfigTest, MetricsMayNotReuseAnyAddress) {
  expect_error(
      with_pipeline(R"([nodes.a]
listen = "127.0.0.1:7001"
metrics = "127.0.0.1:7001"
)"),
      5, 11,
      "nodes.a.metrics: address \"127.0.0.1:7001\" is already the listen address of node \"a\"");
  expect_error(with_pipeline(R"([nodes.a]
listen = "127.0.0.1:7001"
metrics = "127.0.0.1:9100"
[nodes.b]
listen = "127.0.0.1:7002"
metrics = "127.0.0.1:9100"
)"),
               8, 11, "is already the metrics address of node \"a\"");
  // A listen address taken by an earlier metrics address points at the listen.
  expect_error(
      with_pipeline(R"([nodes.a]
listen = "127.0.0.1:7001"
metrics = "127.0.0.1:9100"
[nodes.b]
listen = "127.0.0.1:9100"
)"),
      7, 10,
      "nodes.b.listen: address \"127.0.0.1:9100\" is already the metrics address of node \"a\"");
}

// A node's listen and metrics addresses are on one host: a wildcard one takes its port on
// every address there (validate said ok; hoprelayd then failed with "in use by another
// process").
TEST(ConfigTest, MetricsMayNotShareThePortOfItsNodesWildcardListen) {
  expect_error(with_pipeline(R"([nodes.a]
listen = "0.0.0.0:7001"
metrics = "127.0.0.1:7001"
)"),
               5, 11,
               "nodes.a.metrics: port 7001 is also the port of this node's listen address "
               "\"0.0.0.0:7001\", and \"0.0.0.0:7001\" takes it on every address of the host: "
               "give the metrics endpoint another port");
  expect_error(with_pipeline(R"([nodes.a]
listen = "127.0.0.1:7001"
metrics = "[::]:7001"
)"),
               5, 11, "and \"[::]:7001\" takes it on every address of the host");
  // However the wildcard is spelled; and :: (dual stack) takes IPv4 ports too.
  expect_error(with_pipeline(R"([nodes.a]
listen = "[0::0]:7001"
metrics = "127.0.0.1:7001"
)"),
               5, 11, "and \"[0::0]:7001\" takes it on every address of the host");
  // 0.0.0.0 leaves IPv6 addresses free (they bind side by side), and over verbs the listen
  // port is rdma_cm's, not a TCP one.
  EXPECT_NO_THROW(parse_topology(with_pipeline(R"([nodes.a]
listen = "0.0.0.0:7001"
metrics = "[::1]:7001"
[nodes.b]
listen = "0.0.0.0:7002"
metrics = "127.0.0.1:7002"
transport = "verbs"
)"),
                                 "t.toml"));
  // Other nodes may run on other hosts: the same port there is theirs.
  EXPECT_NO_THROW(parse_topology(with_pipeline(R"([nodes.a]
listen = "0.0.0.0:7001"
metrics = "0.0.0.0:9100"
downstream = ["b"]
[nodes.b]
listen = "10.0.0.2:7001"
metrics = "10.0.0.2:9100"
)"),
                                 "t.toml"));
}

// The parser stops where it cannot go on, lines after an unclosed array, and in its own
// words: the message adds what the mistake most likely is.
TEST(ConfigTest, SyntaxErrorsSayWhatIsMostLikelyWrong) {
  auto node_a = [](const std::string& line) {
    return with_pipeline("[nodes.a]\n" + line + "\nlisten = \"127.0.0.1:7001\"\n");
  };
  expect_error(node_a("downstream = [\"b\", \"c\""), 5, 1,
               "expected comma or closing ']', saw 'l' (the array opened at 4:14 is still open "
               "here: a ']' missing?)");
  expect_error(node_a("bogus = [1,"), 5, 1,
               "(the array opened at 4:9 is still open here: a ']' missing?)");
  expect_error(node_a("route = broadcast"), 4, 9,
               "could not determine value type (strings are quoted in TOML: \"broadcast\")");
  expect_error(node_a("metrics = \"127.0.0.1:9100"), 4, 26,
               "(a string that does not end on its line: its closing quote missing?)");
  expect_error(node_a("stage = { plugin = \"passthrough\""), 4, 33,
               "(the inline table opened at 4:9 ends on its line: a '}' missing?)");
  expect_error(node_a("stage = { plugin = \"passthrough }"), 4, 34,
               "(a string that does not end on its line: its closing quote missing?)");
  // Inside an array closed as it should be, a bare word is a bare word, and two values on
  // two lines want a comma; a table header met inside an open array (read as a nested one).
  expect_error(node_a("downstream = [\n  \"b\",\n  c,\n]"), 6, 3,
               "could not determine value type (strings are quoted in TOML: \"c\")");
  expect_error(node_a("downstream = [\n  \"b\"\n  \"c\"\n]"), 6, 3,
               "(a comma missing between two values?)");
  expect_error(with_pipeline("[nodes.a]\nbogus = [1,\n\n[nodes.b]\nlisten = \"h:1\"\n"), 6, 3,
               "(the array opened at 4:9 is still open here: a ']' missing?)");
  // A table header's brackets, comments and strings with brackets in them are not arrays.
  expect_error(with_pipeline("# [ not an array\n[nodes.a]\nlisten = \"[::1]:7001\" # ]\n"
                             "route = round_robin\n"),
               6, 9, "(strings are quoted in TOML: \"round_robin\")");
}

TEST(ConfigTest, DownstreamNotANodeSuggestsANodeName) {
  expect_error(with_pipeline(R"([nodes.source]
listen = "h:1"
downstream = ["sinc"]
[nodes.sink]
listen = "h:2"
)"),
               5, 15, "nodes.source.downstream: \"sinc\" is not a node; did you mean \"sink\"?");
  // One-letter names are all one edit apart: no suggestion there.
  auto d = errors_of(with_pipeline(
      "[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"c\"]\n[nodes.b]\nlisten = \"h:2\"\n"));
  ASSERT_EQ(d.size(), 1u) << dump(d);
  EXPECT_EQ(d[0].message, "nodes.a.downstream: \"c\" is not a node");
}

TEST(ConfigTest, DownstreamSelf) {
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ndownstream = [ \"a\" ]\n"), 5, 16,
               "node \"a\" cannot be its own downstream");
}

TEST(ConfigTest, DownstreamListedTwice) {
  expect_error(with_pipeline(R"([nodes.a]
listen = "h:1"
downstream = ["b", "c",
              "b"]
[nodes.b]
listen = "h:2"
[nodes.c]
listen = "h:3"
)"),
               6, 15, "nodes.a.downstream: \"b\" is listed twice");
}

TEST(ConfigTest, CycleIsReportedOnceWithItsPath) {
  expect_error(with_pipeline(R"([nodes.a]
listen = "h:1"
downstream = ["b"]
[nodes.b]
listen = "h:2"
downstream = ["c"]
[nodes.c]
listen = "h:3"
downstream = ["a"]
)"),
               11, 15, "cycle in the pipeline: a -> b -> c -> a");
}

TEST(ConfigTest, EveryIndependentCycleIsReported) {
  auto d = errors_of(with_pipeline(R"([nodes.a]
listen = "h:1"
downstream = ["b"]
[nodes.b]
listen = "h:2"
downstream = ["a", "c"]
[nodes.c]
listen = "h:3"
downstream = ["d"]
[nodes.d]
listen = "h:4"
downstream = ["c"]
)"));
  ASSERT_EQ(d.size(), 2u) << dump(d);
  EXPECT_EQ(d[0].pos.line, 8u);
  EXPECT_EQ(d[0].pos.col, 15u);
  EXPECT_EQ(d[0].message, "cycle in the pipeline: a -> b -> a");
  EXPECT_EQ(d[1].pos.line, 14u);
  EXPECT_EQ(d[1].message, "cycle in the pipeline: c -> d -> c");
}

TEST(ConfigTest, DiamondIsNotACycle) {
  EXPECT_NO_THROW(parse_topology(kFull, "t"));
}

// The cycle search walks a path as long as the pipeline is deep: 60,000 nodes in a chain
// overflowed the stack when it recursed. The back edge from the last node closes one cycle.
TEST(ConfigTest, ChainOfSixtyThousandNodesIsSearchedForCycles) {
  constexpr int kNodes = 60000;
  std::string text = "[pipeline]\nname = \"deep\"\n";
  for (int i = 0; i < kNodes; ++i) {
    text += "[nodes.n" + std::to_string(i) + "]\nlisten = \"h" + std::to_string(i) +
            ":1\"\ndownstream = [\"n" + std::to_string((i + 1) % kNodes) + "\"]\n";
  }
  auto d = errors_of(text);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].pos.line, 3u * kNodes + 2);
  EXPECT_TRUE(d[0].message.starts_with("cycle in the pipeline: n0 -> n1 -> n2 -> "));
  EXPECT_TRUE(d[0].message.ends_with(" -> n59999 -> n0"));
}

TEST(ConfigTest, SlotSizeOutOfRange) {
  expect_error("[pipeline]\nname = \"d\"\nslot_size = \"128B\"\n[nodes.a]\nlisten = \"h:1\"\n", 3,
               13, "pipeline.slot_size \"128B\" is out of range: must be between 256B and 16MiB");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslot_size = 16777217\n"), 5, 13,
               "nodes.a.slot_size 16777217 is out of range: must be between 256B and 16MiB "
               "(256 to 16777216 bytes)");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslot_size = -1\n"), 5, 13,
               "out of range");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslot_size = \"32MiB\"\n"), 5, 13,
               "out of range");
  // The limits themselves are allowed.
  EXPECT_NO_THROW(
      parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslot_size = 256\n"
                                   "[nodes.b]\nlisten = \"h:2\"\nslot_size = \"16MiB\"\n"),
                     "t"));
}

// A refused slot_size is one error: the default left in its place is not compared along a
// link (a gave 1MiB, b's "32MiB" is refused; b's default 64KiB < 1MiB was a second, false error).
TEST(ConfigTest, ARefusedSlotSizeIsNotAlsoALinkError) {
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslot_size = \"1MiB\"\n"
                             "downstream = [\"b\"]\n[nodes.b]\nlisten = \"h:2\"\n"
                             "slot_size = \"32MiB\"\n"),
               9, 13, "nodes.b.slot_size \"32MiB\" is out of range");
  expect_error(
      "[pipeline]\nname = \"d\"\nslot_size = \"64KB\"\n[nodes.a]\nlisten = \"h:1\"\n"
      "slot_size = \"1MiB\"\ndownstream = [\"b\"]\n[nodes.b]\nlisten = \"h:2\"\n",
      3, 13, "pipeline.slot_size \"64KB\" is not a size");
  // A node's own valid slot_size still counts under a refused pipeline one.
  auto d = errors_of(
      "[pipeline]\nname = \"d\"\nslot_size = 1\n[nodes.a]\nlisten = \"h:1\"\n"
      "slot_size = \"1MiB\"\ndownstream = [\"b\"]\n[nodes.b]\nlisten = \"h:2\"\nslot_size = "
      "4096\n");
  ASSERT_EQ(d.size(), 2u) << dump(d);
  EXPECT_NE(d[1].message.find("\"b\" has slot_size 4096 but \"a\" forwards"), std::string::npos)
      << dump(d);
}

TEST(ConfigTest, SlotSizeThatDoesNotParseNamesTheUnits) {
  expect_error("[pipeline]\nname = \"d\"\nslot_size = \"64KB\"\n[nodes.a]\nlisten = \"h:1\"\n", 3,
               13,
               "pipeline.slot_size \"64KB\" is not a size: write an integer number of bytes "
               "or a number with unit B, KiB or MiB");
}

TEST(ConfigTest, SlotsOutOfRange) {
  expect_error("[pipeline]\nname = \"d\"\nslots = 1\n[nodes.a]\nlisten = \"h:1\"\n", 3, 9,
               "pipeline.slots 1 is out of range: must be between 2 and 4096");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslots = 4097\n"), 5, 9,
               "nodes.a.slots 4097 is out of range: must be between 2 and 4096");
  EXPECT_NO_THROW(parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nslots = 2\n"
                                               "[nodes.b]\nlisten = \"h:2\"\nslots = 4096\n"),
                                 "t"));
}

TEST(ConfigTest, AddressesThatDoNotParse) {
  expect_error(with_pipeline("[nodes.a]\nlisten = \"127.0.0.1\"\n"), 4, 10,
               "nodes.a.listen \"127.0.0.1\" is not a valid address: missing port");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"127.0.0.1:0\"\n"), 4, 10,
               "port 0 is out of range 1..65535");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"127.0.0.1:65536\"\n"), 4, 10,
               "port 65536 is out of range 1..65535");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"[::1:7001\"\n"), 4, 10,
               "'[' without a closing ']'");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"::1]:7001\"\n"), 4, 10,
               "brackets must enclose the whole IPv6 host");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"::1:7001\"\n"), 4, 10,
               "an IPv6 address must be in brackets");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"http://127.0.0.1:27206\"\n"), 4, 10,
               "a URL is not an address: write host:port alone");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nmetrics = \"h:\"\n"), 5, 11,
               "nodes.a.metrics \"h:\" is not a valid address: missing port number");
}

TEST(ConfigTest, EnumValuesListTheAllowedSet) {
  expect_error("[pipeline]\nname = \"d\"\ntransport = \"rdma\"\n[nodes.a]\nlisten = \"h:1\"\n", 3,
               13, "pipeline.transport must be one of \"auto\", \"verbs\", \"tcp\", not \"rdma\"");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nroute = \"roundrobin\"\n"), 5, 9,
               "nodes.a.route must be one of \"broadcast\", \"round-robin\", \"hash\", not "
               "\"roundrobin\"; did you mean \"round-robin\"?");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ningress = \"read\"\n"), 5, 11,
               "nodes.a.ingress must be one of \"write\", \"send\", not \"read\"");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nforward = \"post\"\n"), 5, 11,
               "nodes.a.forward must be one of \"send\", \"write\", not \"post\"");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\npoll = \"spin\"\n"), 5, 8,
               "nodes.a.poll must be one of \"event\", \"busy\", not \"spin\"");
  // Case differences are suggested too.
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ntransport = \"TCP\"\n"), 5, 13,
               "did you mean \"tcp\"?");
}

// A file whose node a (line 3) has `keys` from line 5 on.
std::string node_a(std::string_view keys) {
  return with_pipeline("[nodes.a]\nlisten = \"h:1\"\n" + std::string(keys));
}

// A file whose [pipeline] has `keys` from line 3 on.
std::string pipeline_with(std::string_view keys) {
  return std::string(kPipeline) + std::string(keys) + "[nodes.a]\nlisten = \"h:1\"\n";
}

TEST(ConfigTest, OnPeerDownValuesThatDoNotValidate) {
  expect_error(
      pipeline_with("on_peer_down = \"drop\"\n"), 3, 16,
      "pipeline.on_peer_down must be one of \"block\", \"drop-after\", \"bypass\", not \"drop\"");
  expect_error(node_a("on_peer_down = \"drop_after\"\n"), 5, 16,
               "nodes.a.on_peer_down must be one of \"block\", \"drop-after\", \"bypass\", not "
               "\"drop_after\"; did you mean \"drop-after\"?");
  expect_error(node_a("on_peer_down = true\n"), 5, 16,
               "nodes.a.on_peer_down must be a string, got boolean");
  expect_error(node_a("on_peer_dwon = \"block\"\n"), 5, 1,
               "unknown key \"on_peer_dwon\" in [nodes.a]; did you mean \"on_peer_down\"?");
  expect_error(
      pipeline_with("peer_down_timout = \"1s\"\n"), 3, 1,
      "unknown key \"peer_down_timout\" in [pipeline]; did you mean \"peer_down_timeout\"?");
}

TEST(ConfigTest, PeerDownTimeoutThatDoesNotValidate) {
  expect_error(pipeline_with("peer_down_timeout = 5\n"), 3, 21,
               "pipeline.peer_down_timeout must be a duration such as \"30s\", got integer");
  expect_error(node_a("peer_down_timeout = \"5 sec\"\n"), 5, 21,
               "nodes.a.peer_down_timeout \"5 sec\" is not a duration: write a whole number with "
               "unit ms, s, m or h, as in \"500ms\" or \"30s\"");
  expect_error(node_a("peer_down_timeout = \"30\"\n"), 5, 21, "is not a duration");
  expect_error(
      pipeline_with("peer_down_timeout = \"50ms\"\n"), 3, 21,
      "pipeline.peer_down_timeout \"50ms\" is out of range: must be between 100ms and 24h");
  expect_error(node_a("peer_down_timeout = \"25h\"\n"), 5, 21, "is out of range");
  // The limits themselves are allowed.
  EXPECT_NO_THROW(parse_topology(pipeline_with("peer_down_timeout = \"100ms\"\n"), "t"));
  EXPECT_NO_THROW(parse_topology(node_a("peer_down_timeout = \"24h\"\n"), "t"));
}

// peer_dead_after: the dead-peer bound of a node's links, a pipeline default and a node's
// override, within 500ms and 10min (its errors name the key's place).
TEST(ConfigTest, PeerDeadAfterDefaultsOverridesAndRange) {
  Topology plain = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t");
  EXPECT_EQ(plain.nodes[0].peer_dead_after, std::chrono::seconds(10));
  Topology t = parse_topology(R"([pipeline]
name = "p"
peer_dead_after = "2s"
[nodes.a]
listen = "h:1"
[nodes.b]
listen = "h:2"
peer_dead_after = "750ms"
)",
                              "t");
  EXPECT_EQ(t.nodes[0].peer_dead_after, std::chrono::seconds(2));
  EXPECT_EQ(t.nodes[1].peer_dead_after, std::chrono::milliseconds(750));
  expect_error(node_a("peer_dead_after = \"100ms\"\n"), 5, 19,
               "nodes.a.peer_dead_after \"100ms\" is out of range: must be between 500ms and 10m");
  expect_error(pipeline_with("peer_dead_after = \"1h\"\n"), 3, 19, "is out of range");
  expect_error(node_a("peer_dead_after = 2\n"), 5, 19,
               "nodes.a.peer_dead_after must be a duration such as \"30s\", got integer");
  EXPECT_NO_THROW(parse_topology(node_a("peer_dead_after = \"500ms\"\n"), "t"));
  EXPECT_NO_THROW(parse_topology(node_a("peer_dead_after = \"10m\"\n"), "t"));
}

TEST(ConfigTest, SpoolKeysDefaultsOverridesAndPaths) {
  Topology plain = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t");
  EXPECT_EQ(plain.nodes[0].spool_dir, "");
  EXPECT_EQ(plain.nodes[0].spool_max, uint64_t{1} << 30);
  EXPECT_EQ(plain.nodes[0].spool_after, std::chrono::seconds(1));

  Topology t = parse_topology(R"([pipeline]
name = "p"
spool_dir = "spool"
spool_max = "20GiB"
[nodes.a]
listen = "h:1"
[nodes.b]
listen = "h:2"
spool_dir = "/var/lib/hoprelay/spool"
spool_max = 1048576
spool_after = "2m"
)",
                              "/etc/hoprelay/t.toml");
  ASSERT_EQ(t.nodes.size(), 2u);
  EXPECT_EQ(t.nodes[0].spool_dir, "/etc/hoprelay/spool");  // beside the topology file
  EXPECT_EQ(t.nodes[0].spool_max, uint64_t{20} << 30);
  EXPECT_EQ(t.nodes[0].spool_after, std::chrono::seconds(1));
  EXPECT_EQ(t.nodes[1].spool_dir, "/var/lib/hoprelay/spool");
  EXPECT_EQ(t.nodes[1].spool_max, uint64_t{1} << 20);
  EXPECT_EQ(t.nodes[1].spool_after, std::chrono::minutes(2));
}

TEST(ConfigTest, SpoolKeysThatDoNotValidate) {
  expect_error(pipeline_with("spool_dir = \"\"\n"), 3, 13,
               "pipeline.spool_dir must not be empty (leave it out for no spooling)");
  expect_error(node_a("spool_dir = 1\n"), 5, 13, "nodes.a.spool_dir must be a string, got integer");
  expect_error(node_a("spool_max = \"1MB\"\n"), 5, 13,
               "nodes.a.spool_max \"1MB\" is not a size: write an integer number of bytes or a "
               "number with unit B, KiB, MiB, GiB or TiB, as in \"20GiB\"");
  expect_error(pipeline_with("spool_max = \"512KiB\"\n"), 3, 13,
               "pipeline.spool_max is too small: a spool must be allowed at least 1MiB");
  expect_error(node_a("spool_max = -1\n"), 5, 13, "is too small");
  expect_error(node_a("spool_after = \"100ms\"\n"), 5, 15,
               "nodes.a.spool_after \"100ms\" is out of range: must be between 200ms and 24h");
  expect_error(node_a("spool_after = 1\n"), 5, 15,
               "nodes.a.spool_after must be a duration such as \"30s\", got integer");
  expect_error(node_a("spool_dri = \"x\"\n"), 5, 1,
               "unknown key \"spool_dri\" in [nodes.a]; did you mean \"spool_dir\"?");
}

TEST(ConfigTest, RateLimitsPerNodePerPeerAndAsThePipelinesDefault) {
  Topology plain = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t");
  EXPECT_EQ(plain.nodes[0].rate_limit, 0u);
  EXPECT_TRUE(plain.nodes[0].rate_limit_to.empty());
  Topology t = parse_topology(R"([pipeline]
name = "p"
rate_limit = "1Gbit"
[nodes.a]
listen = "h:1"
downstream = ["b", "c"]
rate_limit = "2500Mbit/s"
rate_limit_to = { c = "100Mbit", b = 50000000 }
[nodes.b]
listen = "h:2"
[nodes.c]
listen = "h:3"
)",
                              "t");
  EXPECT_EQ(t.nodes[0].rate_limit, uint64_t{2'500'000'000});
  ASSERT_EQ(t.nodes[0].rate_limit_to.size(), 2u);
  // (in the order of their names: a TOML table has no other)
  EXPECT_EQ(t.nodes[0].rate_limit_to[0], (std::pair<std::string, uint64_t>{"b", 50'000'000}));
  EXPECT_EQ(t.nodes[0].rate_limit_to[1], (std::pair<std::string, uint64_t>{"c", 100'000'000}));
  EXPECT_EQ(t.nodes[1].rate_limit, uint64_t{1'000'000'000});  // the pipeline's
  EXPECT_EQ(rate_text(100'000'000), "100Mbit");
  EXPECT_EQ(rate_text(2'500'000'000), "2500Mbit");
  EXPECT_EQ(parse_rate("64000bit"), 64000u);
  EXPECT_EQ(parse_rate("1 Gbit"), uint64_t{1'000'000'000});
  EXPECT_EQ(parse_rate("100MB"), std::nullopt);
  EXPECT_EQ(parse_rate("100"), std::nullopt);
}

TEST(ConfigTest, RateLimitsThatDoNotValidate) {
  expect_error(node_a("rate_limit = \"100MB\"\n"), 5, 14,
               "nodes.a.rate_limit \"100MB\" is not a rate: write a whole number with unit bit, "
               "kbit, Mbit or Gbit (bits per second, as tc writes them), as in \"100Mbit\"");
  expect_error(pipeline_with("rate_limit = \"500kbit\"\n"), 3, 14,
               "pipeline.rate_limit \"500kbit\" is out of range: must be between 1Mbit and 1Tbit "
               "(leave it out for no limit)");
  expect_error(node_a("rate_limit = true\n"), 5, 14,
               "nodes.a.rate_limit must be a rate such as \"100Mbit\" or an integer number of bits "
               "per second, got boolean");
  expect_error(node_a("rate_limit_to = \"1Gbit\"\n"), 5, 17,
               "nodes.a.rate_limit_to must be a table of downstream peers and rates");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"bb\"]\n"
                             "rate_limit_to = { b = \"1Gbit\" }\n[nodes.bb]\nlisten = \"h:2\"\n"),
               6, 19,
               "nodes.a.rate_limit_to.b: \"b\" is not a downstream peer of \"a\"; did you mean "
               "\"bb\"?");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"b\"]\n"
                             "rate_limit_to = { b = \"fast\" }\n[nodes.b]\nlisten = \"h:2\"\n"),
               6, 23, "nodes.a.rate_limit_to.b \"fast\" is not a rate");
}

TEST(ConfigTest, AuthKeyFileThatDoesNotValidate) {
  std::string nodes = node_a("");
  expect_error("auth_key_file = 5\n" + nodes, 1, 17, "auth_key_file must be a string, got integer");
  expect_error("auth_key_file = \"\"\n" + nodes, 1, 17, "auth_key_file must not be empty");
  expect_error("auth_kye_file = \"k\"\n" + nodes, 1, 1,
               "unknown key \"auth_kye_file\" at top level; did you mean \"auth_key_file\"?");
  // Below a table header, TOML puts the key into that table.
  expect_error(pipeline_with("auth_key_file = \"k\"\n"), 3, 1,
               "unknown key \"auth_key_file\" in [pipeline] (\"auth_key_file\" is a top-level key: "
               "set it before the first table)");
}

TEST(ConfigTest, TlsAtTopLevelIsEveryNodesAndANodesOwnOverridesIt) {
  Topology t =
      parse_topology(R"(tls = { cert = "tls/node.pem", key = "tls/node.key", ca = "/etc/ca.pem" }
[pipeline]
name = "p"
[nodes.a]
listen = "h:1"
downstream = ["b"]
[nodes.b]
listen = "h:2"
tls = { ca = "b/ca.pem", cert = "b/b.pem", key = "b/b.key" }
)",
                     "/etc/hoprelay/t.toml");
  EXPECT_EQ(t.tls.cert, "/etc/hoprelay/tls/node.pem");
  EXPECT_EQ(t.tls.key, "/etc/hoprelay/tls/node.key");
  EXPECT_EQ(t.tls.ca, "/etc/ca.pem");
  EXPECT_EQ(t.tls.pos.line, 1u);
  EXPECT_EQ(t.tls.pos.col, 7u);
  EXPECT_EQ(t.nodes[0].tls, t.tls);
  EXPECT_EQ(t.nodes[1].tls.cert, "/etc/hoprelay/b/b.pem");
  EXPECT_EQ(t.nodes[1].tls.ca, "/etc/hoprelay/b/ca.pem");
  EXPECT_EQ(t.nodes[1].tls.pos.line, 9u);
  Topology plain = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t");
  EXPECT_FALSE(plain.tls.enabled());
  EXPECT_FALSE(plain.nodes[0].tls.enabled());
}

TEST(ConfigTest, TlsThatDoesNotValidate) {
  std::string nodes = node_a("");
  expect_error("tls = \"x.pem\"\n" + nodes, 1, 7,
               "tls must be a table of the node's certificate, key and CA, as in { cert = "
               "\"node.pem\", key = \"node.key\", ca = \"ca.pem\" }, got string");
  expect_error("tls = { cert = \"c\", key = \"k\" }\n" + nodes, 1, 7,
               "tls is missing \"ca\": TLS needs the node's certificate (cert), its private key "
               "(key) and the CA its peers' certificates chain to (ca)");
  expect_error("tls = { crt = \"c\", key = \"k\", ca = \"a\" }\n" + nodes, 1, 9,
               "unknown key \"crt\" in tls; did you mean \"cert\"?");
  expect_error("tls = { cert = \"c\", key = \"k\", ca = \"a\", password = \"x\" }\n" + nodes, 1, 42,
               "unknown key \"password\" in tls (it takes cert, key and ca)");
  expect_error("tls = { cert = \"\", key = \"k\", ca = \"a\" }\n" + nodes, 1, 16,
               "tls.cert must not be empty");
  expect_error(node_a("tls = { cert = 1, key = \"k\", ca = \"a\" }\n"), 5, 16,
               "nodes.a.tls.cert must be a string, got integer");
  expect_error(pipeline_with("tls = { cert = \"c\", key = \"k\", ca = \"a\" }\n"), 3, 1,
               "unknown key \"tls\" in [pipeline] (\"tls\" is a top-level key: set it before the "
               "first table, or in [nodes.NAME] for one node)");
}

TEST(ConfigTest, UnknownBuiltInStageSuggests) {
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"crc32\" }\n"), 5,
               20, "did you mean \"crc32c\"?");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n[nodes.a.stage]\nplugin = \"lz4\"\n"), 6,
               10, "built-in stages: passthrough, crc32c, verify-sink, file-sink, zstd");
}

TEST(ConfigTest, PluginThatDoesNotExist) {
  expect_error(with_pipeline(
                   "[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"/nonexistent/dir/x.so\" }\n"),
               5, 20, "/nonexistent/dir/x.so");
}

TEST(ConfigTest, PluginThatIsNotAnElf) {
  fs::path dir = fs::temp_directory_path() / ("hoprelay_config_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path fake = dir / "not_elf.so";
  std::ofstream(fake) << "this is not a shared object\n";
  auto d = errors_of(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"" +
                                   fake.string() + "\", mode = 1 }\n"));
  fs::remove_all(dir);
  ASSERT_EQ(d.size(), 1u) << dump(d);
  EXPECT_EQ(d[0].pos.line, 5u);
  EXPECT_EQ(d[0].pos.col, 20u);
  EXPECT_NE(d[0].message.find("nodes.a.stage.plugin: "), std::string::npos) << dump(d);
  EXPECT_NE(d[0].message.find("not_elf.so"), std::string::npos) << dump(d);
  // A path is not a typo of a built-in name: no suggestion.
  EXPECT_EQ(d[0].message.find("did you mean"), std::string::npos) << dump(d);
}

TEST(ConfigTest, UnknownStageParamSuggests) {
  expect_error(
      with_pipeline(
          "[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"crc32c\", mdoe = \"verify\" }\n"),
      5, 30, "stage \"crc32c\" has no parameter \"mdoe\"; did you mean \"mode\"?");
  expect_error(
      with_pipeline("[nodes.a]\nlisten = \"h:1\"\n[nodes.a.stage]\nplugin = \"verify-sink\"\n"
                    "output = \"x\"\n"),
      7, 1,
      "nodes.a.stage: stage \"verify-sink\" has no parameter \"output\" (it takes: report, "
      "crc32c)");
  // Without a plugin key the stage is passthrough, which takes no parameters.
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { mode = \"stamp\" }\n"), 5, 11,
               "stage \"passthrough\" has no parameter \"mode\" (it takes no parameters)");
}

// [node.c] for [nodes.c]: the downstream list naming "c" comes first in the file, so its error
// says why "c" is not a node; the typo's own error follows.
TEST(ConfigTest, ANodeUnderAMisspeltTableIsNamedAsSuchWhereItIsUsed) {
  auto d =
      errors_of(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"c\"]\n"
                              "[node.c]\nlisten = \"h:2\"\n"));
  ASSERT_EQ(d.size(), 2u) << dump(d);
  EXPECT_EQ(d[0].pos.line, 5u) << dump(d);
  EXPECT_EQ(d[0].message,
            "nodes.a.downstream: \"c\" is not a node (it is declared as [node.c], which is not "
            "read: did you mean [nodes.c]?)");
  EXPECT_EQ(d[1].pos.line, 6u) << dump(d);
  EXPECT_NE(d[1].message.find("unknown key \"node\" at top level; did you mean \"nodes\"?"),
            std::string::npos)
      << dump(d);
}

// At the value a stage refuses (its column), or at the plugin for a parameter it misses.
TEST(ConfigTest, BuiltinStageValuesAreCheckedWhereTheStageIsWritten) {
  expect_error(
      with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"zstd\", mode = \"zip\" }\n"),
      5, 35,
      "nodes.a.stage: stage zstd refused its parameters: mode must be \"compress\" or "
      "\"decompress\", not \"zip\"");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"zstd\" }\n"), 5, 20,
               "zstd needs a mode: mode = \"compress\" (at the head) or mode = \"decompress\"");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"
                             "stage = { plugin = \"zstd\", mode = \"compress\", level = 40 }\n"),
               5, 55,
               "level = 40 is not a zstd level: use an integer from -131072 (fastest) to 22");
  expect_error(
      with_pipeline(
          "[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"crc32c\", mode = \"check\" }\n"),
      5, 37, "mode must be \"stamp\" or \"verify\", not \"check\"");
  // The sinks open files, so validation does not try them; a missing required parameter is
  // still said where the stage is written (the node refused it only at its start).
  expect_error(
      with_pipeline("[nodes.a]\nlisten = \"h:1\"\nstage = { plugin = \"file-sink\" }\n"), 5, 20,
      "nodes.a.stage: stage file-sink refused its parameters: file-sink needs a path parameter");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"
                             "stage = { plugin = \"verify-sink\", report = \"\" }\n"),
               5, 20, "verify-sink needs a report parameter");
  // A required parameter given, but not as a scalar: one error, the type's.
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"
                             "stage = { plugin = \"file-sink\", path = [\"x\"] }\n"),
               5, 40, "nodes.a.stage.path must be a string, integer, float or boolean");
}

TEST(ConfigTest, ZstdExampleIsValidWithItsStagesTried) {
  Topology t = load_topology(HOPRELAY_SOURCE_DIR "/config/examples/zstd.toml",
                             {PluginCheck::Mode::kAll, ""});
  EXPECT_TRUE(t.warnings().empty()) << dump(t.warnings());
  ASSERT_EQ(t.nodes.size(), 3u);
  EXPECT_EQ(t.nodes[0].stage.plugin, "zstd");
}

TEST(ConfigTest, NodeNameCharacters) {
  expect_error(with_pipeline("[nodes.\"a b\"]\nlisten = \"h:1\"\n"), 3, 8,
               "node name \"a b\" is invalid: use only letters, digits, '_', '.' and '-'");
  expect_error(with_pipeline("[nodes.\"\"]\nlisten = \"h:1\"\n"), 3, 8,
               "node name \"\" is invalid");
  // A '.' is allowed in a name, but TOML needs the key quoted to keep it in one piece.
  EXPECT_NO_THROW(parse_topology(with_pipeline("[nodes.\"A-z_0.9\"]\nlisten = \"h:1\"\n"), "t"));
}

TEST(ConfigTest, KeyPathsQuoteNamesThatAreNotBareKeys) {
  expect_error(with_pipeline("[nodes.\"a.b\"]\nlisten = \"h\"\n"), 4, 10,
               "nodes.\"a.b\".listen \"h\" is not a valid address");
  expect_error(with_pipeline("[nodes.\"a.b\"]\nlisten = \"h:1\"\nslot = 3\n"), 5, 1,
               "unknown key \"slot\" in [nodes.\"a.b\"]");
}

TEST(ConfigTest, NodeNameLength) {
  std::string ok(48, 'n');
  std::string too_long(49, 'n');
  EXPECT_NO_THROW(parse_topology(with_pipeline("[nodes." + ok + "]\nlisten = \"h:1\"\n"), "t"));
  expect_error(with_pipeline("[nodes." + too_long + "]\nlisten = \"h:1\"\n"), 3, 8,
               "is 49 bytes long; at most 48 are allowed");
}

TEST(ConfigTest, ThreeIndependentErrorsAreAllReportedInFileOrder) {
  auto d = errors_of(R"([pipeline]
name = "demo"
slots = 1

[nodes.a]
listen = "127.0.0.1:7001"
downstream = ["b"]
route = "random"

[nodes.b]
listen = "127.0.0.1"
)");
  ASSERT_EQ(d.size(), 3u) << dump(d);
  EXPECT_EQ(d[0].format(),
            "t.toml:3:9: error: pipeline.slots 1 is out of range: must be between 2 and 4096");
  EXPECT_EQ(d[1].pos.line, 8u);
  EXPECT_EQ(d[1].pos.col, 9u);
  EXPECT_NE(d[1].message.find("nodes.a.route must be one of"), std::string::npos);
  EXPECT_EQ(d[2].pos.line, 11u);
  EXPECT_EQ(d[2].pos.col, 10u);
  EXPECT_NE(d[2].message.find("missing port"), std::string::npos);
}

TEST(ConfigTest, ErrorsAreSortedByPositionNotByCheck) {
  // The duplicate address (found after all nodes are read) sits between two per-node errors.
  auto d = errors_of(with_pipeline(R"([nodes.a]
listen = "h:1"
slots = 0
[nodes.b]
listen = "h:1"
[nodes.c]
listen = "h:3"
colour = 1
)"));
  ASSERT_EQ(d.size(), 3u) << dump(d);
  EXPECT_EQ(d[0].pos.line, 5u);
  EXPECT_EQ(d[1].pos.line, 7u);
  EXPECT_EQ(d[2].pos.line, 10u);
}

TEST(ConfigTest, ConfigErrorWhatJoinsAllDiagnostics) {
  try {
    parse_topology("[pipeline]\nname = \"\"\nslots = 1\n[nodes.a]\nlisten = \"h:1\"\n", "x.toml");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "x.toml:2:8: error: pipeline.name must not be empty\n"
                 "x.toml:3:9: error: pipeline.slots 1 is out of range: must be between 2 and 4096");
  }
}

TEST(ConfigTest, DiagnosticFormat) {
  EXPECT_EQ((Diagnostic{"f.toml", {3, 7}, "bad"}).format(), "f.toml:3:7: error: bad");
  EXPECT_EQ((Diagnostic{"f.toml", {3, 0}, "bad"}).format(), "f.toml:3: error: bad");
  EXPECT_EQ((Diagnostic{"f.toml", {0, 0}, "bad"}).format(), "f.toml: error: bad");
}

// --- value syntaxes ---------------------------------------------------------------------

TEST(ConfigTest, ParseSize) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("512B"), 512u);
  EXPECT_EQ(parse_size("64KiB"), 65536u);
  EXPECT_EQ(parse_size("64 KiB"), 65536u);
  EXPECT_EQ(parse_size("1MiB"), 1048576u);
  EXPECT_EQ(parse_size("16MiB"), 16u << 20);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_size(""), std::nullopt);
  EXPECT_EQ(parse_size("KiB"), std::nullopt);
  EXPECT_EQ(parse_size("64KB"), std::nullopt);
  EXPECT_EQ(parse_size("64kib"), std::nullopt);
  EXPECT_EQ(parse_size("64K"), std::nullopt);
  EXPECT_EQ(parse_size("1GiB"), uint64_t{1} << 30);  // spool_max
  EXPECT_EQ(parse_size("2TiB"), uint64_t{2} << 40);
  EXPECT_EQ(parse_size("1GB"), std::nullopt);
  EXPECT_EQ(parse_size("1.5MiB"), std::nullopt);
  EXPECT_EQ(parse_size("-1"), std::nullopt);
  EXPECT_EQ(parse_size("+1"), std::nullopt);
  EXPECT_EQ(parse_size(" 64KiB"), std::nullopt);
  EXPECT_EQ(parse_size("64KiB "), std::nullopt);
  EXPECT_EQ(parse_size("64 "), std::nullopt);
  EXPECT_EQ(parse_size("18446744073709551616"), std::nullopt);  // 2^64
  EXPECT_EQ(parse_size("17592186044416MiB"), std::nullopt);     // 2^44 MiB = 2^64 bytes
}

TEST(ConfigTest, ParseEndpoint) {
  auto v4 = parse_endpoint("127.0.0.1:7001");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 7001);
  auto v6 = parse_endpoint("[::1]:7001");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7001);
  EXPECT_EQ(v6->to_string(), "[::1]:7001");
  auto name = parse_endpoint("relay-1.example.org:65535");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->host, "relay-1.example.org");
  EXPECT_EQ(name->port, 65535);
  EXPECT_EQ(name->to_string(), "relay-1.example.org:65535");
  auto zone = parse_endpoint("[fe80::1%eth0]:1");
  ASSERT_TRUE(zone);
  EXPECT_EQ(zone->host, "fe80::1%eth0");
  EXPECT_EQ(zone->to_string(), "[fe80::1%eth0]:1");

  for (const char* bad : {"",
                          "127.0.0.1",
                          "127.0.0.1:",
                          ":7001",
                          "127.0.0.1:0",
                          "127.0.0.1:65536",
                          "127.0.0.1:99999999999999999999",
                          "127.0.0.1:-1",
                          "127.0.0.1:+1",
                          "127.0.0.1:80x",
                          "::1:7001",
                          "[::1]",
                          "[::1]7001",
                          "[::1:7001",
                          "::1]:7001",
                          "[]:7001",
                          "[127.0.0.1]:7001",
                          "[x]:1",
                          "a[b]:1",
                          "300.0.0.1:1",
                          "127.1:1",
                          "bad host:1",
                          "-h:1",
                          "h/x:1",
                          "[fe80::1%]:1"}) {
    EXPECT_EQ(parse_endpoint(bad), std::nullopt) << bad;
  }
}

TEST(ConfigTest, EndpointToString) {
  EXPECT_EQ((Endpoint{"10.1.2.3", 80}).to_string(), "10.1.2.3:80");
  EXPECT_EQ((Endpoint{"2001:db8::7", 443}).to_string(), "[2001:db8::7]:443");
}

TEST(ConfigTest, EnumNamesAreTheTomlSpellings) {
  EXPECT_EQ(to_string(TransportKind::kAuto), "auto");
  EXPECT_EQ(to_string(TransportKind::kVerbs), "verbs");
  EXPECT_EQ(to_string(TransportKind::kTcp), "tcp");
  EXPECT_EQ(to_string(Route::kBroadcast), "broadcast");
  EXPECT_EQ(to_string(Route::kRoundRobin), "round-robin");
  EXPECT_EQ(to_string(Route::kHash), "hash");
  EXPECT_EQ(to_string(Ingress::kWrite), "write");
  EXPECT_EQ(to_string(Ingress::kSend), "send");
  EXPECT_EQ(to_string(Forward::kSend), "send");
  EXPECT_EQ(to_string(Forward::kWrite), "write");
  EXPECT_EQ(to_string(Poll::kEvent), "event");
  EXPECT_EQ(to_string(Poll::kBusy), "busy");
}

TEST(ConfigTest, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(ConfigTest, HashChangesWithTheFileBytes) {
  std::string a = with_pipeline("[nodes.a]\nlisten = \"h:1\"\n");
  std::string b = a + "# comment\n";
  EXPECT_NE(parse_topology(a, "t").hash, parse_topology(b, "t").hash);
}

// --- output and loading ------------------------------------------------------------------

TEST(ConfigTest, ToDot) {
  std::string dot = to_dot(parse_topology(kFull, "t"));
  EXPECT_EQ(dot.rfind("digraph \"demo\" {\n", 0), 0u) << dot;
  EXPECT_NE(dot.find("  \"src\" [label=\"src\\ncrc32c\\n127.0.0.1:7001\"];\n"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("  \"alt\" [label=\"alt\\npassthrough\\n[::1]:7003\"];\n"), std::string::npos)
      << dot;
  // Fan-out edges carry the route; single edges do not.
  EXPECT_NE(dot.find("  \"src\" -> \"mid\" [label=\"round-robin\"];\n"), std::string::npos) << dot;
  EXPECT_NE(dot.find("  \"src\" -> \"alt\" [label=\"round-robin\"];\n"), std::string::npos) << dot;
  EXPECT_NE(dot.find("  \"mid\" -> \"sink\";\n"), std::string::npos) << dot;
  EXPECT_NE(dot.find("  \"alt\" -> \"sink\";\n"), std::string::npos) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

TEST(ConfigTest, ToDotQuotesNames) {
  Topology t =
      parse_topology("[pipeline]\nname = 'say \"hi\" \\ bye'\n[nodes.a]\nlisten = \"h:1\"\n", "t");
  EXPECT_EQ(to_dot(t).rfind("digraph \"say \\\"hi\\\" \\\\ bye\" {\n", 0), 0u) << to_dot(t);
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hoprelay_config_file_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ConfigFileTest, LoadsAFile) {
  fs::path path = dir_ / "demo.toml";
  std::ofstream(path) << kFull;
  Topology t = load_topology(path.string());
  EXPECT_EQ(t.path, path.string());
  EXPECT_EQ(t.nodes.size(), 4u);
  EXPECT_EQ(t.hash, fnv1a64(kFull));
}

TEST_F(ConfigFileTest, DiagnosticsNameTheFile) {
  fs::path path = dir_ / "bad.toml";
  std::ofstream(path) << "[pipeline]\nname = \"demo\"\nslots = 1\n[nodes.a]\nlisten = \"h:1\"\n";
  try {
    load_topology(path.string());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_EQ(e.diagnostics()[0].file, path.string());
    EXPECT_EQ(std::string(e.what()).rfind(path.string() + ":3:9: error: ", 0), 0u) << e.what();
  }
}

TEST_F(ConfigFileTest, UnreadableFileThrowsSystemErrorWithThePath) {
  std::string missing = (dir_ / "missing.toml").string();
  try {
    load_topology(missing);
    FAIL() << "expected std::system_error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  try {
    load_topology(dir_.string());  // a directory opens, then fails to read
    FAIL() << "expected std::system_error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::is_a_directory);
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
  }
}

}  // namespace
namespace {

TEST(ConfigLinkTest, DownstreamSlotsMustHoldWhatTheUpstreamForwards) {
  constexpr std::string_view kText = R"([pipeline]
name = "p"
[nodes.a]
listen = "127.0.0.1:1"
slot_size = "8KiB"
downstream = ["b"]
[nodes.b]
listen = "127.0.0.1:2"
slot_size = "4KiB"
)";
  try {
    parse_topology(kText, "t.toml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_EQ(e.diagnostics()[0].format(),
              "t.toml:6:15: error: nodes.a.downstream: \"b\" has slot_size 4096 but \"a\" "
              "forwards messages of up to 8192 bytes: give \"b\" a slot_size of at least 8192");
  }
}

TEST(ConfigLinkTest, BothEndsOfALinkNeedTheSameTransport) {
  constexpr std::string_view kText = R"([pipeline]
name = "p"
[nodes.a]
listen = "127.0.0.1:1"
transport = "verbs"
downstream = ["b"]
[nodes.b]
listen = "127.0.0.1:2"
transport = "tcp"
)";
  try {
    parse_topology(kText, "t.toml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_NE(e.diagnostics()[0].message.find("both ends of a link need the same transport"),
              std::string::npos);
    EXPECT_EQ(e.diagnostics()[0].pos.line, 6u);
  }
}

TEST(ConfigLinkTest, PluginsOfOtherNodesAreNotLoadedForOneNode) {
  constexpr std::string_view kText = R"([pipeline]
name = "p"
[nodes.a]
listen = "127.0.0.1:1"
downstream = ["b"]
[nodes.b]
listen = "127.0.0.1:2"
stage = { plugin = "/nonexistent/b.so" }
)";
  EXPECT_THROW(parse_topology(kText, "t.toml"), ConfigError);
  EXPECT_NO_THROW(parse_topology(kText, "t.toml", {PluginCheck::Mode::kNode, "a"}));
  EXPECT_THROW(parse_topology(kText, "t.toml", {PluginCheck::Mode::kNode, "b"}), ConfigError);
  EXPECT_NO_THROW(parse_topology(kText, "t.toml", {PluginCheck::Mode::kNone, ""}));
}

}  // namespace
}  // namespace hoprelay::config

namespace hoprelay::config {
namespace {

TEST(Topology, CpuPinsOneNodeAndIsCheckedWhereWritten) {
  Topology t = parse_topology(with_pipeline("[nodes.a]\nlisten = \"10.0.0.1:7000\"\ncpu = 1\n"
                                            "[nodes.b]\nlisten = \"10.0.0.1:7001\"\n"),
                              "t.toml");
  EXPECT_EQ(t.find("a")->cpu, std::vector<uint32_t>{1});
  EXPECT_TRUE(t.find("b")->cpu.empty());
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ncpu = -1\n"), 5, 7,
               "nodes.a.cpu -1 is out of range: must be between 0 and 4095");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ncpu = \"2\"\n"), 5, 7,
               "nodes.a.cpu must be an integer (a CPU number");
  // A per-node key only: pinning every node to one CPU is never what was meant.
  expect_error("[pipeline]\nname = \"demo\"\ncpu = 0\n[nodes.a]\nlisten = \"h:1\"\n", 3, 1,
               "unknown key \"cpu\" in [pipeline]");
  // A list: the event loop's CPU, then the stage workers'.
  t = parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ncpu = [0, 1, 1]\n"), "t.toml");
  EXPECT_EQ(t.find("a")->cpu, (std::vector<uint32_t>{0, 1, 1}));
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ncpu = [0, 4096]\n"), 5, 11,
               "nodes.a.cpu[1] 4096 is out of range: must be between 0 and 4095");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ncpu = [0, \"1\"]\n"), 5, 11,
               "nodes.a.cpu[1] must be an integer (a CPU number");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ncpu = []\n"), 5, 7,
               "nodes.a.cpu is an empty list: give CPU numbers, or leave it out");
}

TEST(Topology, ThreadsIsAPipelineDefaultANodeMayOverride) {
  Topology t = parse_topology(
      "[pipeline]\nname = \"p\"\nthreads = 2\n[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"b\"]\n"
      "[nodes.b]\nlisten = \"h:2\"\nthreads = 4\n",
      "t.toml");
  EXPECT_EQ(t.find("a")->threads, 2u);
  EXPECT_EQ(t.find("b")->threads, 4u);
  EXPECT_EQ(
      parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t.toml").find("a")->threads,
      1u);
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nthreads = 0\n"), 5, 11,
               "nodes.a.threads 0 is out of range: must be between 1 and 64");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nthreads = \"2\"\n"), 5, 11,
               "nodes.a.threads must be an integer (how many threads run the stage)");
}

// More link threads than downstream links: the rest would idle. A leaf (a pipeline default
// reaching it) starts none and is not warned about.
TEST(Topology, WarnsAboutLinkThreadsBeyondTheDownstreamLinks) {
  Topology t = parse_topology(
      with_pipeline("[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"b\", \"c\"]\n"
                    "link_threads = 3\n[nodes.b]\nlisten = \"h:2\"\nlink_threads = 2\n"
                    "[nodes.c]\nlisten = \"h:3\"\n"),
      "t.toml");
  auto w = t.warnings();
  ASSERT_EQ(w.size(), 1u) << dump(w);
  EXPECT_EQ(w[0].format(), "t.toml:" + std::to_string(t.find("a")->pos.line) +
                               ":1: warning: nodes.a: link_threads = 3 but it has 2 downstream "
                               "links: 1 of its link threads would have nothing to run "
                               "(downstream i runs on thread i mod link_threads). Set "
                               "link_threads = 2 or fewer for a");
  Topology fine =
      parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\ndownstream = [\"b\", \"c\"]\n"
                                   "link_threads = 2\n[nodes.b]\nlisten = \"h:2\"\n[nodes.c]\n"
                                   "listen = \"h:3\"\n"),
                     "t.toml");
  EXPECT_TRUE(fine.warnings().empty()) << dump(fine.warnings());
}

TEST(Topology, LinkThreadsIsAPipelineDefaultANodeMayOverride) {
  Topology t = parse_topology(
      "[pipeline]\nname = \"p\"\nlink_threads = 2\n[nodes.a]\nlisten = \"h:1\"\n"
      "downstream = [\"b\"]\n[nodes.b]\nlisten = \"h:2\"\nlink_threads = 0\n",
      "t.toml");
  EXPECT_EQ(t.find("a")->link_threads, 2u);
  EXPECT_EQ(t.find("b")->link_threads, 0u);
  EXPECT_EQ(parse_topology(with_pipeline("[nodes.a]\nlisten = \"h:1\"\n"), "t.toml")
                .find("a")
                ->link_threads,
            0u);
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nlink_threads = 65\n"), 5, 16,
               "nodes.a.link_threads 65 is out of range: must be between 0 (links on the event "
               "loop) and 64");
  expect_error(with_pipeline("[nodes.a]\nlisten = \"h:1\"\nlink_threads = true\n"), 5, 16,
               "nodes.a.link_threads must be an integer (how many threads run the downstream "
               "links)");
}

}  // namespace
}  // namespace hoprelay::config
