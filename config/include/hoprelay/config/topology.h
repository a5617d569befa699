// The topology file: one TOML file, shared by every host, that declares the pipeline's nodes,
// their links and stages. This header is the validated, resolved form the daemon works from.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hoprelay/config/endpoint.h"

namespace hoprelay::config {

// Position in the topology file, 1-based; 0 when not known (e.g. a whole-file problem).
struct SourcePos {
  uint32_t line = 0;
  uint32_t col = 0;
};

// One problem found in a topology file. format() gives "FILE:LINE:COL: error: MESSAGE".
struct Diagnostic {
  std::string file;
  SourcePos pos;
  std::string message;
  bool warning = false;  // "warning:" instead of "error:": the file loads, but mind this
  std::string format() const;
};

// Thrown by load_topology()/parse_topology() with every problem found, in file order.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

enum class Route { kBroadcast, kRoundRobin, kHash };
// How data enters a node over verbs (ignored by tcp): RDMA WRITE with immediate or SEND.
enum class Ingress { kWrite, kSend };
// How a node forwards to its downstream peers over verbs (ignored by tcp).
enum class Forward { kSend, kWrite };
// What a node does with the messages routed to a downstream peer whose link stays down: hold
// them (block its branch, lose nothing), drop them once it has been down for
// peer_down_timeout, or, once it has been down that long, take over its role for its branch
// (a relay: its stage and routing run on this node, which connects to its downstream nodes
// directly; a leaf is held for as under "block").
enum class OnPeerDown { kBlock, kDropAfter, kBypass };

std::string_view to_string(Route v);
std::string_view to_string(Ingress v);
std::string_view to_string(Forward v);
std::string_view to_string(OnPeerDown v);

struct StageSpec {
  std::string plugin = "passthrough";
  // Every key of the `stage` table except `plugin`, values in their TOML spelling
  // (strings unquoted), in file order.
  std::vector<std::pair<std::string, std::string>> params;
  SourcePos pos;  // of the `stage` value: where a stage's refusal at start points
};

// Limits enforced by validation.
inline constexpr uint64_t kMinSlotSize = 256;
inline constexpr uint64_t kMaxSlotSize = 16ull << 20;  // 16 MiB
inline constexpr int64_t kMinSlots = 2;
inline constexpr int64_t kMaxSlots = 4096;
inline constexpr int64_t kMaxCpu = 4096;
// The most stage worker threads a node may have (`threads`).
inline constexpr int64_t kMaxThreads = 64;
// Shorter than a few reconnect attempts would drop a branch on every blip of a link; longer
// than a day is no timeout anyone means (and keeps deadlines far from overflowing).
inline constexpr std::chrono::milliseconds kMinPeerDownTimeout{100};
inline constexpr std::chrono::milliseconds kMaxPeerDownTimeout = std::chrono::hours(24);
// A spool smaller than this holds too few slots to be worth a disk. spool_after is looked at
// ten times a second (Downstreams::watch_spools): at least two looks. Its default is a second,
// past a branch's usual hiccups (a peer's garbage collection, a retransmission); an operator
// may go lower where the slow branch's pace costs more than an early spool (the whole tree
// runs at it until then).
inline constexpr uint64_t kMinSpoolMax = uint64_t{1} << 20;
inline constexpr std::chrono::milliseconds kMinSpoolAfter = std::chrono::milliseconds(200);
inline constexpr std::chrono::milliseconds kMaxSpoolAfter = std::chrono::hours(24);
// rate_limit: below 1 Mbit/s a 64 KiB slot takes half a second, which no one distributing data
// means; above 1 Tbit/s is more than any NIC sends.
inline constexpr uint64_t kMinRate = 1000 * 1000;
inline constexpr uint64_t kMaxRate = uint64_t{1000} * 1000 * 1000 * 1000;

// `tls = { cert = "...", key = "...", ca = "..." }` (docs/security.md, "TLS"): the node's
// certificate chain and private key (PEM), and the CA its peers' certificates must chain to;
// paths usable from any directory (a relative one is resolved against the topology file's
// directory). Only validated as paths here; `hoprelay validate` reads them where they exist.
struct TlsSpec {
  std::string cert;
  std::string key;
  std::string ca;
  SourcePos pos;  // of the `tls` value
  bool enabled() const { return !cert.empty(); }
  bool operator==(const TlsSpec& o) const { return cert == o.cert && key == o.key && ca == o.ca; }
};

struct NodeSpec {
  std::string name;
  Endpoint listen;
  std::optional<Endpoint> metrics;
  std::vector<std::string> downstream;  // names of nodes, in file order
  std::vector<std::string> upstream;    // derived: nodes that list this one as downstream
  Route route = Route::kBroadcast;
  StageSpec stage;
  // Pipeline defaults, overridable per node.
  TransportKind transport = TransportKind::kAuto;
  uint32_t slot_size = 64 * 1024;
  uint32_t slots = 64;
  Ingress ingress = Ingress::kWrite;
  Forward forward = Forward::kSend;
  Poll poll = Poll::kEvent;
  OnPeerDown on_peer_down = OnPeerDown::kBlock;
  std::chrono::milliseconds peer_down_timeout = std::chrono::seconds(30);  // with kDropAfter
  // The dead-peer bound of this node's links, both directions (kMinPeerDeadAfter above).
  std::chrono::milliseconds peer_dead_after = kDefaultPeerDeadAfter;
  // Spooling (docs/topology.md, "Spooling a slow or down branch"): the directory under which
  // the node keeps a spool per downstream peer (`<spool_dir>/<node>/<peer>`; empty: no
  // spooling; a relative path is resolved against the topology file's directory), the most
  // each spool may hold, and how long a branch must be behind before it is spooled for.
  std::string spool_dir;
  SourcePos spool_dir_pos;  // where spool_dir is written (the pipeline's or the node's)
  uint64_t spool_max = uint64_t{1} << 30;
  std::chrono::milliseconds spool_after = std::chrono::seconds(1);
  // `threads = N`: the node's stage runs on N worker threads (1: on the event loop itself).
  uint32_t threads = 1;
  // `link_threads = N`: the node's downstream links run on N threads of their own (0: on the
  // event loop; daemon/link_threads.h).
  uint32_t link_threads = 0;
  // CPUs to pin to (`cpu = N` or `cpu = [N, ...]`), empty for none: the first is the event
  // loop's, worker i takes entry (i + 1) modulo the list's length.
  std::vector<uint32_t> cpu;
  SourcePos cpu_pos;  // of the `cpu` value (a CPU this host lacks is refused at start)
  // A head's `standby`: another head node that producers of this one send to instead once it
  // has been down for peer_down_timeout (and back again, the same way); empty for none. The
  // two have the same slots, slot_size, transport and ingress (validated), so a producer's
  // buffers and origin's sequence numbers go on unchanged (docs/topology.md).
  std::string standby;
  // Rate limits (docs/topology.md, "Capping what a distribution takes"), bits per second of
  // frames (header and payload), 0 for none: `rate_limit`, what the node sends to all its
  // downstream peers together; `rate_limit_to`, what it sends to one of them (both apply).
  uint64_t rate_limit = 0;
  std::vector<std::pair<std::string, uint64_t>> rate_limit_to;
  // TLS on the node's TCP links, in and out (the node's own `tls`, else the top-level one);
  // disabled when neither is given.
  TlsSpec tls;
  SourcePos pos;  // where [nodes.NAME] starts

  bool is_head() const { return upstream.empty(); }
  bool is_leaf() const { return downstream.empty(); }
};

struct Topology {
  std::string path;
  std::string name;
  bool name_defaulted = false;  // no pipeline.name in the file: `name` is the file's base name
  uint64_t hash = 0;  // FNV-1a 64 of the file's bytes: tells nodes apart that run different files
  TransportKind transport = TransportKind::kAuto;
  uint32_t slot_size = 64 * 1024;
  uint32_t slots = 64;
  // The pre-shared key file of the connection handshake (docs/security.md), as a path usable
  // from any directory (a relative one is resolved against the topology file's directory);
  // empty when the file names none. Only validated as a path here, not read.
  std::string auth_key_file;
  SourcePos auth_key_file_pos;  // of its value
  // The top-level `tls`: every node's unless it has its own, and what a producer or consumer
  // of the topology presents by default (its options may give another).
  TlsSpec tls;
  std::vector<NodeSpec> nodes;  // file order

  const NodeSpec* find(std::string_view node) const;
  // The names of the nodes `which` accepts (every node when empty), comma-separated in file
  // order: the choices an error message about a node offers.
  std::string names(const std::function<bool(const NodeSpec&)>& which = {}) const;
  size_t link_count() const;  // number of (node -> downstream) edges
  // Hops from `node` to its deepest leaf (0 for a leaf or an unknown node).
  uint32_t height(std::string_view node) const;
  // The nodes that may run `node`'s role when it is down (on_peer_down = "bypass"): its
  // upstream nodes with that policy, and, recursively, theirs (a stand-in that is itself
  // bypassed runs inside its own stand-in). Its downstream nodes admit them under its name.
  std::vector<std::string> stand_ins(std::string_view node) const;
  // The largest message the pipeline takes: the smallest `slots` times the smallest
  // `slot_size` of its nodes. A message larger than a slot travels as chunks, and a node
  // whose stage needs whole messages holds all of one message's chunks in one link's ring
  // (as do the nodes before it, until it acknowledges them), so it must fit every ring.
  uint64_t max_message() const;
  // What loads but will drop messages: a crc32c stamp at a node whose slots are no larger than
  // what its upstream (or, at a head, a producer) fills; a node that gets zstd-compressed
  // messages which its stage cannot take (crc32c, a sink, a leaf handing them to an
  // application) with no node decompressing them before it.
  std::vector<Diagnostic> warnings() const;
};

// Which nodes' stage plugins validation loads (dlopen) to check them and their parameters:
// every node's (`hoprelay validate`, the operator's check of the whole file), one node's
// (hoprelayd: its host need not have the plugins of the other nodes), or none (`hoprelay send`).
struct PluginCheck {
  enum class Mode { kAll, kNode, kNone };
  Mode mode = Mode::kAll;
  std::string node;  // with kNode
};

// Parses and validates. Throws ConfigError carrying every problem found (never just the
// first), std::system_error when the file cannot be read.
Topology load_topology(const std::string& path, const PluginCheck& plugins = {});
Topology parse_topology(std::string_view text, const std::string& path_for_messages,
                        const PluginCheck& plugins = {});

// Graphviz DOT of the topology: one node per topology node (labelled with stage and listen
// address), one edge per downstream link, the route on fan-out edges.
std::string to_dot(const Topology& topology);

// "64KiB", "1MiB", "512B", "4096" -> bytes. nullopt when it does not parse.
std::optional<uint64_t> parse_size(std::string_view text);
// "100Mbit", "1Gbit", "500kbit", "64000bit" (also "100Mbit/s") -> bits per second, SI units.
// nullopt when it does not parse.
std::optional<uint64_t> parse_rate(std::string_view text);
// The reverse, in the largest unit that is exact: 100000000 -> "100Mbit".
std::string rate_text(uint64_t bits_per_second);
// "500ms", "30s", "2m", "1h" (also "30 s") -> milliseconds. nullopt when it does not parse.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
// The reverse, in the largest unit that is exact: 500ms -> "500ms", 5000ms -> "5s".
std::string duration_text(std::chrono::milliseconds duration);
// "127.0.0.1:7001", "[::1]:7001", "host:7001"; nullopt when it does not parse.
std::optional<Endpoint> parse_endpoint(std::string_view text);
uint64_t fnv1a64(std::string_view bytes);

}  // namespace hoprelay::config
