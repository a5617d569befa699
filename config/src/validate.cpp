// parse_topology(): TOML -> validated Topology. The validator never stops at the first problem:
// it records every one it can find, with the position of the offending key or value, so that an
// operator fixes a file in one round instead of one error per run.
#include <toml++/toml.h>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "hoprelay/config/topology.h"
#include "hoprelay/stages/stage.h"
#include "internal.h"

namespace hoprelay::config {
namespace {

using internal::did_you_mean;
using internal::kMaxNodeNameBytes;
using internal::node_name_charset_ok;

const std::vector<std::string_view> kTopLevelKeys = {"pipeline", "nodes", "auth_key_file", "tls"};
const std::vector<std::string_view> kTlsKeys = {"cert", "key", "ca"};
const std::vector<std::string_view> kPipelineKeys = {
    "name",      "transport",    "slot_size",         "slots",          "ingress",      "forward",
    "poll",      "on_peer_down", "peer_down_timeout", "threads",        "link_threads", "spool_dir",
    "spool_max", "spool_after",  "rate_limit",        "peer_dead_after"};
const std::vector<std::string_view> kNodeKeys = {"listen",
                                                 "metrics",
                                                 "downstream",
                                                 "route",
                                                 "stage",
                                                 "transport",
                                                 "slot_size",
                                                 "slots",
                                                 "ingress",
                                                 "forward",
                                                 "poll",
                                                 "on_peer_down",
                                                 "peer_down_timeout",
                                                 "peer_dead_after",
                                                 "cpu",
                                                 "threads",
                                                 "link_threads",
                                                 "spool_dir",
                                                 "spool_max",
                                                 "spool_after",
                                                 "standby",
                                                 "rate_limit",
                                                 "rate_limit_to",
                                                 "tls"};

SourcePos pos_of(const toml::source_region& region) {
  return {region.begin.line, region.begin.column};
}

// Whether two addresses of one host with the same port cannot both be bound because one is a
// wildcard: 0.0.0.0 takes the port on every IPv4 address (an IPv6 one stays free), :: (dual
// stack, Linux's default) on every address. A host name may resolve to IPv4: it collides with
// 0.0.0.0.
struct HostKind {
  int family = 0;    // AF_INET, AF_INET6, or 0 for a host name
  bool any = false;  // the wildcard of its family (0.0.0.0, ::, however spelled)
};

HostKind host_kind(const std::string& host) {
  std::array<unsigned char, 16> addr{};
  for (int af : {AF_INET, AF_INET6}) {
    if (inet_pton(af, host.c_str(), addr.data()) == 1) {
      return {af, std::all_of(addr.begin(), addr.end(), [](unsigned char c) { return c == 0; })};
    }
  }
  return {};
}

bool wildcard_takes(const Endpoint& a, const Endpoint& b) {
  const HostKind ka = host_kind(a.host), kb = host_kind(b.host);
  auto takes = [](HostKind wild, HostKind other) {
    return wild.any && (wild.family == AF_INET6 || other.family != AF_INET6);
  };
  return takes(ka, kb) || takes(kb, ka);
}

bool before(SourcePos a, SourcePos b) {
  return a.line != b.line ? a.line < b.line : a.col < b.col;
}

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

bool contains(const std::vector<std::string_view>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string quoted(std::string_view text) {
  return "\"" + std::string(text) + "\"";
}

// A node name as it appears in a key path of messages ("nodes.a", "nodes.\"a.b\""): quoted the
// way TOML needs it when it is not a bare key, so the path can be pasted back into the file.
std::string key_part(std::string_view name) {
  bool bare = !name.empty();
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) bare = false;
  }
  if (bare) return std::string(name);
  std::string out = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// "64KiB" for the limits in messages, so they read like what the user writes.
std::string size_text(uint64_t bytes) {
  if (bytes != 0 && bytes % (1024 * 1024) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

// A float in TOML spelling: shortest round-trip digits, always recognisably a float.
std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  std::string text(buf, end);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

struct Entry {
  std::string_view key;
  SourcePos key_pos;
  const toml::node* value;
  SourcePos value_pos;
};

// toml++ keeps a table's keys sorted by name; the file order is what users (and the node and
// parameter lists) expect.
std::vector<Entry> in_file_order(const toml::table& table) {
  std::vector<Entry> entries;
  for (auto&& [key, value] : table) {
    entries.push_back({key.str(), pos_of(key.source()), &value, pos_of(value.source())});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (before(a.value_pos, b.value_pos)) return true;
    if (before(b.value_pos, a.value_pos)) return false;
    return before(a.key_pos, b.key_pos);
  });
  return entries;
}

struct Settings {
  TransportKind transport = TransportKind::kAuto;
  uint32_t slot_size = 64 * 1024;
  uint32_t slots = 64;
  Ingress ingress = Ingress::kWrite;
  Forward forward = Forward::kSend;
  Poll poll = Poll::kEvent;
  OnPeerDown on_peer_down = OnPeerDown::kBlock;
  std::chrono::milliseconds peer_down_timeout = std::chrono::seconds(30);
  std::chrono::milliseconds peer_dead_after = kDefaultPeerDeadAfter;
  uint32_t threads = 1;
  uint32_t link_threads = 0;
  std::string spool_dir;
  SourcePos spool_dir_pos;
  uint64_t spool_max = uint64_t{1} << 30;
  std::chrono::milliseconds spool_after = std::chrono::seconds(1);
  uint64_t rate_limit = 0;  // bits per second; 0: none
  // slot_size was given but refused: its error is said once, and no link check compares with
  // the default left in its place (that would add a second, false error).
  bool slot_size_refused = false;
};

// One entry of [nodes], table or not, so that downstream names resolve against every declared
// name even when the declaration itself is broken.
struct RawNode {
  std::string name;
  SourcePos key_pos;
  const toml::table* table = nullptr;
  NodeSpec spec;
  struct Link {
    size_t to;
    SourcePos pos;
  };
  std::vector<Link> links;         // valid downstream links only
  bool slot_size_refused = false;  // Settings::slot_size_refused
  SourcePos standby_pos;           // of the `standby` value, when there is one
};

struct AddressUse {
  SourcePos pos;
  std::string identity;
  std::string text;
  std::string_view kind;  // "listen" or "metrics"
  std::string node;
  std::string key;  // "nodes.a.listen"
  Endpoint endpoint;
};

class Validator {
 public:
  Validator(std::string_view text, const std::string& path, const PluginCheck& plugins)
      : text_(text), path_(path), plugins_(plugins) {}

  Topology run() {
    toml::table root;
    try {
      root = toml::parse(text_, std::string_view(path_));
    } catch (const toml::parse_error& e) {
      // The parser cannot go on past a syntax error, so this is the one single-error case.
      const SourcePos at = pos_of(e.source());
      error(at, "TOML syntax error: " + std::string(e.description()) +
                    internal::syntax_hint(text_, at.line, at.col, e.description()));
      throw ConfigError(std::move(diagnostics_));
    }

    Topology topology;
    topology.path = path_;
    topology.hash = fnv1a64(text_);

    const toml::node* pipeline = nullptr;
    const toml::node* nodes = nullptr;
    std::set<std::string_view> suggested;
    for (const Entry& e : in_file_order(root)) {
      if (e.key == "pipeline") {
        pipeline = e.value;
      } else if (e.key == "nodes") {
        nodes = e.value;
      } else if (e.key == "auth_key_file") {
        parse_auth_key_file(e, topology);
      } else if (e.key == "tls") {
        parse_tls(e, "tls", topology.tls);
      } else {
        unknown_key(e, "at top level", kTopLevelKeys, &suggested);
        note_misspelt_nodes(e);
      }
    }

    Settings defaults;
    // [pipeline] is optional (every key of it has a default), so a first topology needs only
    // its nodes. A misspelt table is reported as such, and its name not defaulted on top.
    bool name_given = suggested.count("pipeline") > 0;
    if (pipeline) name_given = parse_pipeline(*pipeline, topology, defaults);
    if (!name_given) default_name(topology);
    topology.transport = defaults.transport;
    topology.slot_size = defaults.slot_size;
    topology.slots = defaults.slots;

    top_tls_ = topology.tls;
    if (nodes) {
      parse_nodes(*nodes, defaults);
    } else if (!suggested.count("nodes")) {
      error({}, "missing [nodes] table: declare each node as [nodes.NAME]");
    }
    check_addresses();
    check_links();
    check_cycles();
    check_standbys();

    if (!diagnostics_.empty()) {
      std::stable_sort(
          diagnostics_.begin(), diagnostics_.end(),
          [](const Diagnostic& a, const Diagnostic& b) { return before(a.pos, b.pos); });
      throw ConfigError(std::move(diagnostics_));
    }

    for (const RawNode& raw : raw_nodes_) {
      for (const auto& link : raw.links) raw_nodes_[link.to].spec.upstream.push_back(raw.name);
    }
    for (RawNode& raw : raw_nodes_) {
      if (raw.table) topology.nodes.push_back(std::move(raw.spec));
    }
    return topology;
  }

 private:
  void error(SourcePos pos, std::string message) {
    diagnostics_.push_back({path_, pos, std::move(message)});
  }

  void type_error(const Entry& e, const std::string& name, std::string_view expected) {
    error(e.value_pos,
          name + " must be " + std::string(expected) + ", got " + std::string(type_name(*e.value)));
  }

  // `where` reads after the key: "at top level", "in [pipeline]". `suggested` collects the
  // keys suggested, so that "missing required key" is not reported on top of its typo.
  void unknown_key(const Entry& e, std::string_view where,
                   const std::vector<std::string_view>& known,
                   std::set<std::string_view>* suggested) {
    std::string message = "unknown key " + quoted(e.key) + " " + std::string(where);
    if (auto match = internal::closest(e.key, known)) {
      message += "; did you mean " + quoted(*match) + "?";
      suggested->insert(*match);
    } else if (where == "in [pipeline]" && contains(kNodeKeys, e.key) && e.key != "tls") {
      message += " (" + quoted(e.key) + " is a per-node key: set it in [nodes.NAME])";
    } else if (where != "in [pipeline]" && contains(kPipelineKeys, e.key)) {
      message += " (" + quoted(e.key) + " belongs in [pipeline])";
    } else if (e.key == "auth_key_file" || (e.key == "tls" && where == "in [pipeline]")) {
      message += " (" + quoted(e.key) + " is a top-level key: set it before the first table" +
                 (e.key == "tls" ? ", or in [nodes.NAME] for one node)" : ")");
    }
    error(e.key_pos, std::move(message));
  }

  // [node.c] written for [nodes.c]: the names in it are remembered, so that a downstream list
  // naming "c" (an error placed before the typo) says why "c" is not a node.
  void note_misspelt_nodes(const Entry& e) {
    auto match = internal::closest(e.key, kTopLevelKeys);
    const toml::table* table = e.value->as_table();
    if (!match || *match != "nodes" || !table) return;
    for (const auto& [name, value] : *table) {
      misspelt_nodes_.emplace(std::string(name.str()), std::string(e.key));
    }
  }

  std::optional<std::string> get_string(const Entry& e, const std::string& name) {
    if (auto s = e.value->as_string()) return s->get();
    type_error(e, name, "a string");
    return std::nullopt;
  }

  template <class E, size_t N>
  void get_enum(const Entry& e, const std::string& name,
                const std::array<internal::Spelling<E>, N>& spellings, E* out) {
    auto text = get_string(e, name);
    if (!text) return;
    std::vector<std::string_view> allowed;
    for (const auto& s : spellings) {
      if (s.text == *text) {
        *out = s.value;
        return;
      }
      allowed.push_back(s.text);
    }
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + quoted(a);
    error(e.value_pos, name + " must be one of " + list + ", not " + quoted(*text) +
                           did_you_mean(*text, allowed));
  }

  // Handles the keys [pipeline] and [nodes.X] share. False when `e` is not one of them.
  bool setting(const Entry& e, const std::string& prefix, Settings& s) {
    std::string name = prefix + "." + std::string(e.key);
    if (e.key == "transport") {
      get_enum(e, name, internal::kTransportSpellings, &s.transport);
    } else if (e.key == "ingress") {
      get_enum(e, name, internal::kIngressSpellings, &s.ingress);
    } else if (e.key == "forward") {
      get_enum(e, name, internal::kForwardSpellings, &s.forward);
    } else if (e.key == "poll") {
      get_enum(e, name, internal::kPollSpellings, &s.poll);
    } else if (e.key == "on_peer_down") {
      get_enum(e, name, internal::kOnPeerDownSpellings, &s.on_peer_down);
    } else if (e.key == "peer_down_timeout") {
      parse_peer_down_timeout(e, name, s);
    } else if (e.key == "peer_dead_after") {
      if (auto d = get_duration(e, name, kMinPeerDeadAfter, kMaxPeerDeadAfter)) {
        s.peer_dead_after = *d;
      }
    } else if (e.key == "slot_size") {
      parse_slot_size(e, name, s);
    } else if (e.key == "threads") {
      parse_threads(e, name, s);
    } else if (e.key == "link_threads") {
      parse_link_threads(e, name, s);
    } else if (e.key == "spool_dir") {
      if (auto path = get_string(e, name)) {
        if (path->empty()) {
          error(e.value_pos, name + " must not be empty (leave it out for no spooling)");
        } else {
          s.spool_dir = path->front() == '/' ? *path : beside_file(*path);
          s.spool_dir_pos = e.value_pos;
        }
      }
    } else if (e.key == "spool_max") {
      parse_spool_max(e, name, s);
    } else if (e.key == "rate_limit") {
      if (auto r = get_rate(*e.value, e.value_pos, name)) s.rate_limit = *r;
    } else if (e.key == "spool_after") {
      if (auto d = get_duration(e, name, kMinSpoolAfter, kMaxSpoolAfter)) s.spool_after = *d;
    } else if (e.key == "slots") {
      auto v = e.value->as_integer();
      if (!v) {
        type_error(e, name, "an integer");
      } else if (v->get() < kMinSlots || v->get() > kMaxSlots) {
        error(e.value_pos, name + " " + std::to_string(v->get()) +
                               " is out of range: must be between " + std::to_string(kMinSlots) +
                               " and " + std::to_string(kMaxSlots));
      } else {
        s.slots = static_cast<uint32_t>(v->get());
      }
    } else {
      return false;
    }
    return true;
  }

  void parse_slot_size(const Entry& e, const std::string& name, Settings& s) {
    s.slot_size_refused = true;  // until it is taken
    std::optional<uint64_t> bytes;
    std::string spelled;
    if (auto i = e.value->as_integer()) {
      spelled = std::to_string(i->get());
      if (i->get() >= 0) bytes = static_cast<uint64_t>(i->get());
    } else if (auto str = e.value->as_string()) {
      spelled = quoted(str->get());
      bytes = parse_size(str->get());
      if (!bytes) {
        error(e.value_pos, name + " " + spelled +
                               " is not a size: write an integer number of bytes or a number "
                               "with unit B, KiB or MiB, as in \"64KiB\"");
        return;
      }
    } else {
      type_error(e, name, "a size such as \"64KiB\" or an integer number of bytes");
      return;
    }
    if (!bytes || *bytes < kMinSlotSize || *bytes > kMaxSlotSize) {
      error(e.value_pos, name + " " + spelled + " is out of range: must be between " +
                             size_text(kMinSlotSize) + " and " + size_text(kMaxSlotSize) + " (" +
                             std::to_string(kMinSlotSize) + " to " + std::to_string(kMaxSlotSize) +
                             " bytes)");
      return;
    }
    s.slot_size = static_cast<uint32_t>(*bytes);
    s.slot_size_refused = false;
  }

  // A rate: "100Mbit" (bit, kbit, Mbit, Gbit, Tbit; "/s" optional) or an integer number of
  // bits per second, within [kMinRate, kMaxRate]; the error, naming what to write, otherwise.
  std::optional<uint64_t> get_rate(const toml::node& value, SourcePos pos,
                                   const std::string& name) {
    std::optional<uint64_t> bits;
    std::string spelled;
    if (auto i = value.as_integer()) {
      spelled = std::to_string(i->get());
      if (i->get() >= 0) bits = static_cast<uint64_t>(i->get());
    } else if (auto str = value.as_string()) {
      spelled = quoted(str->get());
      bits = parse_rate(str->get());
      if (!bits) {
        error(pos, name + " " + spelled +
                       " is not a rate: write a whole number with unit bit, kbit, Mbit or Gbit "
                       "(bits per second, as tc writes them), as in \"100Mbit\"");
        return std::nullopt;
      }
    } else {
      error(pos, name +
                     " must be a rate such as \"100Mbit\" or an integer number of bits per "
                     "second, got " +
                     std::string(type_name(value)));
      return std::nullopt;
    }
    if (!bits || *bits < kMinRate || *bits > kMaxRate) {
      error(pos, name + " " + spelled + " is out of range: must be between " + rate_text(kMinRate) +
                     " and " + rate_text(kMaxRate) + " (leave it out for no limit)");
      return std::nullopt;
    }
    return bits;
  }

  // `rate_limit_to = { peer = "100Mbit", ... }`: each a downstream peer of this node.
  void parse_rate_limit_to(const Entry& e, NodeSpec& spec, const std::string& name,
                           std::vector<SourcePos>& positions) {
    const toml::table* table = e.value->as_table();
    if (!table) {
      type_error(e, name, "a table of downstream peers and rates, as in { b = \"100Mbit\" }");
      return;
    }
    for (const auto& [key, value] : *table) {
      const std::string peer(key.str());
      if (auto r = get_rate(value, pos_of(value.source()), name + "." + peer)) {
        spec.rate_limit_to.emplace_back(peer, *r);
        positions.push_back(pos_of(key.source()));
      }
    }
  }

  void parse_peer_down_timeout(const Entry& e, const std::string& name, Settings& s) {
    if (auto d = get_duration(e, name, kMinPeerDownTimeout, kMaxPeerDownTimeout)) {
      s.peer_down_timeout = *d;
    }
  }

  // A duration string within [low, high]; the error, naming the range, otherwise.
  std::optional<std::chrono::milliseconds> get_duration(const Entry& e, const std::string& name,
                                                        std::chrono::milliseconds low,
                                                        std::chrono::milliseconds high) {
    auto text = e.value->as_string();
    if (!text) {
      type_error(e, name, "a duration such as \"30s\"");
      return std::nullopt;
    }
    auto duration = parse_duration(text->get());
    if (!duration) {
      error(e.value_pos, name + " " + quoted(text->get()) +
                             " is not a duration: write a whole number with unit ms, s, m or h, "
                             "as in \"500ms\" or \"30s\"");
      return std::nullopt;
    }
    if (*duration < low || *duration > high) {
      error(e.value_pos, name + " " + quoted(text->get()) + " is out of range: must be between " +
                             duration_text(low) + " and " + duration_text(high));
      return std::nullopt;
    }
    return duration;
  }

  void parse_spool_max(const Entry& e, const std::string& name, Settings& s) {
    auto text = e.value->as_string();
    std::optional<uint64_t> bytes;
    if (auto i = e.value->as_integer()) {
      if (i->get() >= 0) bytes = static_cast<uint64_t>(i->get());
    } else if (text) {
      bytes = parse_size(text->get());
      if (!bytes) {
        error(e.value_pos, name + " " + quoted(text->get()) +
                               " is not a size: write an integer number of bytes or a number "
                               "with unit B, KiB, MiB, GiB or TiB, as in \"20GiB\"");
        return;
      }
    } else {
      type_error(e, name, "a size such as \"20GiB\" or an integer number of bytes");
      return;
    }
    if (!bytes || *bytes < kMinSpoolMax) {
      error(e.value_pos,
            name + " is too small: a spool must be allowed at least " + size_text(kMinSpoolMax));
      return;
    }
    s.spool_max = *bytes;
  }

  // Not read here (the transport reads it when it starts): a missing or unreadable key file is
  // the business of the host that runs a node, not of `hoprelay validate` on another host.
  void parse_auth_key_file(const Entry& e, Topology& topology) {
    auto path = get_string(e, "auth_key_file");
    if (!path) return;
    if (path->empty()) {
      error(e.value_pos, "auth_key_file must not be empty");
      return;
    }
    topology.auth_key_file = path->front() == '/' ? *path : beside_file(*path);
    topology.auth_key_file_pos = e.value_pos;
  }

  // `tls = { cert = "...", key = "...", ca = "..." }`, all three required. Not read here (the
  // transport loads them when it starts; `hoprelay validate` checks them where they exist).
  void parse_tls(const Entry& e, const std::string& name, TlsSpec& out) {
    const toml::table* table = e.value->as_table();
    if (!table) {
      type_error(e, name,
                 "a table of the node's certificate, key and CA, as in { cert = \"node.pem\", "
                 "key = \"node.key\", ca = \"ca.pem\" }");
      return;
    }
    TlsSpec spec;
    spec.pos = e.value_pos;
    bool ok = true;
    for (const Entry& f : in_file_order(*table)) {
      std::string* path = f.key == "cert"  ? &spec.cert
                          : f.key == "key" ? &spec.key
                          : f.key == "ca"  ? &spec.ca
                                           : nullptr;
      if (!path) {
        std::string message = "unknown key " + quoted(f.key) + " in " + name;
        if (auto match = internal::closest(f.key, kTlsKeys)) {
          message += "; did you mean " + quoted(*match) + "?";
        } else {
          message += " (it takes cert, key and ca)";
        }
        error(f.key_pos, std::move(message));
        ok = false;
        continue;
      }
      auto value = get_string(f, name + "." + std::string(f.key));
      if (!value) {
        ok = false;
        continue;
      }
      if (value->empty()) {
        error(f.value_pos, name + "." + std::string(f.key) + " must not be empty");
        ok = false;
        continue;
      }
      *path = value->front() == '/' ? *value : beside_file(*value);
    }
    for (auto [path, key] :
         {std::pair{&spec.cert, "cert"}, std::pair{&spec.key, "key"}, std::pair{&spec.ca, "ca"}}) {
      if (path->empty() && ok) {
        error(e.value_pos, name + " is missing \"" + std::string(key) +
                               "\": TLS needs the node's certificate (cert), its private key "
                               "(key) and the CA its peers' certificates chain to (ca)");
        ok = false;
      }
    }
    if (ok) out = std::move(spec);
  }

  // The pipeline's name when the file gives none: the file's base name without ".toml"
  // (/etc/hoprelay/topology.toml -> "topology"), said so by `hoprelay validate`.
  void default_name(Topology& topology) {
    std::string base = path_.substr(path_.find_last_of('/') + 1);
    if (base.ends_with(".toml")) base.resize(base.size() - 5);
    if (base.empty()) {
      error({}, "no pipeline name: the file name gives none; set name = \"...\" in [pipeline]");
      return;
    }
    topology.name = base;
    topology.name_defaulted = true;
  }

  // Returns whether the table gives a name (or a misspelling of "name" was reported).
  bool parse_pipeline(const toml::node& node, Topology& topology, Settings& defaults) {
    const toml::table* table = node.as_table();
    if (!table) {
      error(pos_of(node.source()), "pipeline must be a table, got " + std::string(type_name(node)));
      return true;
    }
    bool has_name = false;
    std::set<std::string_view> suggested;
    for (const Entry& e : in_file_order(*table)) {
      if (e.key == "name") {
        has_name = true;
        if (auto name = get_string(e, "pipeline.name")) {
          if (name->empty()) {
            error(e.value_pos, "pipeline.name must not be empty");
          } else {
            topology.name = *name;
          }
        }
      } else if (!setting(e, "pipeline", defaults)) {
        unknown_key(e, "in [pipeline]", kPipelineKeys, &suggested);
      }
    }
    return has_name || suggested.count("name") > 0;
  }

  void check_node_name(const RawNode& raw) {
    if (!node_name_charset_ok(raw.name)) {
      error(raw.key_pos, "node name " + quoted(raw.name) +
                             " is invalid: use only letters, digits, '_', '.' and '-'");
    }
    if (raw.name.size() > kMaxNodeNameBytes) {
      error(raw.key_pos, "node name " + quoted(raw.name) + " is " +
                             std::to_string(raw.name.size()) + " bytes long; at most " +
                             std::to_string(kMaxNodeNameBytes) +
                             " are allowed (names travel in the 56-byte connection hello)");
    }
  }

  void parse_nodes(const toml::node& node, const Settings& defaults) {
    const toml::table* table = node.as_table();
    if (!table) {
      error(pos_of(node.source()), "nodes must be a table, got " + std::string(type_name(node)));
      return;
    }
    if (table->empty()) {
      error(pos_of(table->source()), "[nodes] declares no nodes: add at least one [nodes.NAME]");
      return;
    }
    std::vector<Entry> entries = in_file_order(*table);
    for (const Entry& e : entries) {
      RawNode raw;
      raw.name = std::string(e.key);
      raw.key_pos = e.key_pos;
      raw.table = e.value->as_table();
      index_.emplace(raw.name, raw_nodes_.size());
      raw_nodes_.push_back(std::move(raw));
      node_names_.push_back(e.key);
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      RawNode& raw = raw_nodes_[i];
      check_node_name(raw);
      if (!raw.table) {
        type_error(entries[i], "nodes." + key_part(raw.name), "a table");
        continue;
      }
      parse_node(raw, defaults);
    }
  }

  void parse_node(RawNode& raw, const Settings& defaults) {
    const std::string prefix = "nodes." + key_part(raw.name);
    NodeSpec& spec = raw.spec;
    spec.name = raw.name;
    spec.pos = pos_of(raw.table->source());
    Settings s = defaults;
    bool has_listen = false;
    std::set<std::string_view> suggested;
    std::vector<SourcePos> rate_limit_to_pos;
    spec.tls = top_tls_;
    for (const Entry& e : in_file_order(*raw.table)) {
      if (e.key == "listen" || e.key == "metrics") {
        if (e.key == "listen") has_listen = true;
        auto endpoint = get_address(e, prefix + "." + std::string(e.key), raw.name);
        if (endpoint && e.key == "listen") spec.listen = *endpoint;
        if (endpoint && e.key == "metrics") spec.metrics = *endpoint;
      } else if (e.key == "downstream") {
        parse_downstream(e, raw, prefix + ".downstream");
      } else if (e.key == "route") {
        get_enum(e, prefix + ".route", internal::kRouteSpellings, &spec.route);
      } else if (e.key == "stage") {
        parse_stage(e, spec, prefix + ".stage");
      } else if (e.key == "cpu") {
        parse_cpu(e, spec, prefix + ".cpu");
      } else if (e.key == "rate_limit_to") {
        parse_rate_limit_to(e, spec, prefix + ".rate_limit_to", rate_limit_to_pos);
      } else if (e.key == "tls") {
        parse_tls(e, prefix + ".tls", spec.tls);
      } else if (e.key == "standby") {
        if (const auto* str = e.value->as_string()) {
          spec.standby = str->get();
          raw.standby_pos = e.value_pos;
        } else {
          type_error(e, prefix + ".standby", "a node name (a string)");
        }
      } else if (!setting(e, prefix, s)) {
        unknown_key(e, "in [" + prefix + "]", kNodeKeys, &suggested);
      }
    }
    if (!has_listen && !suggested.count("listen")) {
      error(spec.pos, "[" + prefix + "] is missing required key \"listen\"");
    }
    spec.transport = s.transport;
    spec.slot_size = s.slot_size;
    raw.slot_size_refused = s.slot_size_refused;
    spec.slots = s.slots;
    spec.ingress = s.ingress;
    spec.forward = s.forward;
    spec.poll = s.poll;
    spec.on_peer_down = s.on_peer_down;
    spec.peer_down_timeout = s.peer_down_timeout;
    spec.peer_dead_after = s.peer_dead_after;
    spec.threads = s.threads;
    spec.link_threads = s.link_threads;
    spec.spool_dir = s.spool_dir;
    spec.spool_dir_pos = s.spool_dir_pos;
    spec.spool_max = s.spool_max;
    spec.spool_after = s.spool_after;
    spec.rate_limit = s.rate_limit;
    for (size_t i = 0; i < spec.rate_limit_to.size(); ++i) {
      const std::string& peer = spec.rate_limit_to[i].first;
      if (std::find(spec.downstream.begin(), spec.downstream.end(), peer) ==
          spec.downstream.end()) {
        error(rate_limit_to_pos[i],
              prefix + ".rate_limit_to." + peer + ": " + quoted(peer) +
                  " is not a downstream peer of " + quoted(raw.name) +
                  did_you_mean(peer, std::vector<std::string_view>(spec.downstream.begin(),
                                                                   spec.downstream.end())));
      }
    }
  }

  // A CPU number or a list of them; whether this host has them is checked by hoprelayd when
  // it pins itself.
  void parse_cpu(const Entry& e, NodeSpec& spec, const std::string& name) {
    static constexpr const char* kWhat = "an integer (a CPU number, as in `taskset -c`)";
    spec.cpu_pos = e.value_pos;
    auto one = [&](const toml::node& n, SourcePos pos, const std::string& what) -> bool {
      auto v = n.as_integer();
      if (!v) {
        error(pos, what + " must be " + kWhat);
        return false;
      }
      if (v->get() < 0 || v->get() >= kMaxCpu) {
        error(pos, what + " " + std::to_string(v->get()) +
                       " is out of range: must be between 0 and " + std::to_string(kMaxCpu - 1));
        return false;
      }
      spec.cpu.push_back(static_cast<uint32_t>(v->get()));
      return true;
    };
    if (const toml::array* list = e.value->as_array()) {
      if (list->empty()) {
        return error(e.value_pos, name + " is an empty list: give CPU numbers, or leave it out");
      }
      for (size_t i = 0; i < list->size(); ++i) {
        const toml::node& n = *list->get(i);
        if (!one(n, pos_of(n.source()), name + "[" + std::to_string(i) + "]")) return;
      }
      return;
    }
    if (!e.value->is_integer()) {
      return type_error(e, name, std::string(kWhat) + " or a list of them");
    }
    one(*e.value, e.value_pos, name);
  }

  // Worker threads for the stage: 1 (the event loop runs it) up to kMaxThreads.
  void parse_threads(const Entry& e, const std::string& name, Settings& s) {
    auto v = e.value->as_integer();
    if (!v) return type_error(e, name, "an integer (how many threads run the stage)");
    if (v->get() < 1 || v->get() > kMaxThreads) {
      return error(e.value_pos, name + " " + std::to_string(v->get()) +
                                    " is out of range: must be between 1 and " +
                                    std::to_string(kMaxThreads));
    }
    s.threads = static_cast<uint32_t>(v->get());
  }

  // Threads for the downstream links: 0 (the event loop runs them) up to kMaxThreads.
  void parse_link_threads(const Entry& e, const std::string& name, Settings& s) {
    auto v = e.value->as_integer();
    if (!v) return type_error(e, name, "an integer (how many threads run the downstream links)");
    if (v->get() < 0 || v->get() > kMaxThreads) {
      return error(e.value_pos, name + " " + std::to_string(v->get()) +
                                    " is out of range: must be between 0 (links on the event "
                                    "loop) and " +
                                    std::to_string(kMaxThreads));
    }
    s.link_threads = static_cast<uint32_t>(v->get());
  }

  std::optional<Endpoint> get_address(const Entry& e, const std::string& name,
                                      const std::string& node) {
    auto text = get_string(e, name);
    if (!text) return std::nullopt;
    internal::EndpointParse parsed = internal::parse_endpoint_explained(*text);
    if (!parsed.endpoint) {
      error(e.value_pos, name + " " + quoted(*text) + " is not a valid address: " + parsed.error);
      return std::nullopt;
    }
    addresses_.push_back({e.value_pos, internal::endpoint_identity(*parsed.endpoint), *text,
                          e.key == "listen" ? "listen" : "metrics", node, name, *parsed.endpoint});
    return parsed.endpoint;
  }

  void parse_downstream(const Entry& e, RawNode& raw, const std::string& name) {
    const toml::array* array = e.value->as_array();
    if (!array) {
      type_error(e, name, "an array of node names");
      return;
    }
    std::set<std::string> seen;
    for (const toml::node& item : *array) {
      SourcePos pos = pos_of(item.source());
      const auto* str = item.as_string();
      if (!str) {
        error(pos,
              name + " entries must be node names (strings), got " + std::string(type_name(item)));
        continue;
      }
      const std::string& target = str->get();
      auto it = index_.find(target);
      if (it == index_.end()) {
        auto misspelt = misspelt_nodes_.find(target);
        error(pos, name + ": " + quoted(target) + " is not a node" +
                       (misspelt == misspelt_nodes_.end()
                            ? did_you_mean(target, node_names_)
                            : " (it is declared as [" + misspelt->second + "." + target +
                                  "], which is not read: did you mean [nodes." + target + "]?)"));
      } else if (target == raw.name) {
        error(pos, name + ": node " + quoted(raw.name) + " cannot be its own downstream");
      } else if (!seen.insert(target).second) {
        error(pos, name + ": " + quoted(target) + " is listed twice");
      } else {
        raw.spec.downstream.push_back(target);
        raw.links.push_back({it->second, pos});
      }
    }
  }

  // A relative path in the file is relative to the topology file, not to wherever the
  // program reading it happens to run (systemd starts hoprelayd in /).
  std::string beside_file(const std::string& relative) const {
    size_t slash = path_.rfind('/');
    return slash == std::string::npos ? relative : path_.substr(0, slash + 1) + relative;
  }

  // A relative plugin path ("stages/x.so") is resolved with beside_file(); a bare "x.so" is
  // left to the dynamic linker's search path.
  std::string plugin_location(const std::string& plugin) const {
    if (!stages::is_plugin_path(plugin) || plugin.front() == '/' ||
        plugin.find('/') == std::string::npos) {
      return plugin;
    }
    return beside_file(plugin);
  }

  // Resolving loads plugins (dlopen), so each spelling is resolved once per file.
  struct Resolved {
    std::shared_ptr<const stages::StageType> type;
    std::string error;
  };
  const Resolved& resolve(const std::string& plugin) {
    auto it = resolved_.find(plugin);
    if (it != resolved_.end()) return it->second;
    Resolved r;
    try {
      r.type = stages::resolve(plugin);
    } catch (const std::exception& e) {
      r.error = e.what();
      if (!stages::is_plugin_path(plugin)) {
        auto names = stages::builtin_names();
        std::string hint = did_you_mean(plugin, names);
        if (hint.empty()) {
          hint = " (built-in stages:";
          for (size_t i = 0; i < names.size(); ++i) {
            hint += (i ? ", " : " ") + std::string(names[i]);
          }
          hint += "; a plugin is given by a path, e.g. \"./my_stage.so\")";
        }
        r.error += hint;
      }
    }
    return resolved_.emplace(plugin, std::move(r)).first->second;
  }

  void parse_stage(const Entry& e, NodeSpec& spec, const std::string& name) {
    const toml::table* table = e.value->as_table();
    if (!table) {
      type_error(e, name, "a table such as { plugin = \"passthrough\" }");
      return;
    }
    spec.stage.pos = e.value_pos;
    SourcePos plugin_pos = e.value_pos;
    bool plugin_ok = true;
    bool bad_param = false;  // a parameter the stage cannot take: unknown, or not a scalar
    std::vector<SourcePos> param_pos, value_pos;
    for (const Entry& p : in_file_order(*table)) {
      if (p.key == "plugin") {
        plugin_pos = p.value_pos;
        auto plugin = get_string(p, name + ".plugin");
        if (plugin && plugin->empty()) {
          error(p.value_pos, name + ".plugin must not be empty");
          plugin.reset();
        }
        if (plugin) {
          spec.stage.plugin = plugin_location(*plugin);
        } else {
          plugin_ok = false;
        }
        continue;
      }
      std::string value;
      if (auto s = p.value->as_string()) {
        value = s->get();
      } else if (auto i = p.value->as_integer()) {
        value = std::to_string(i->get());
      } else if (auto f = p.value->as_floating_point()) {
        value = float_text(f->get());
      } else if (auto b = p.value->as_boolean()) {
        value = b->get() ? "true" : "false";
      } else {
        type_error(p, name + "." + std::string(p.key),
                   "a string, integer, float or boolean (stage parameters are scalars)");
        bad_param = true;
        continue;
      }
      spec.stage.params.emplace_back(std::string(p.key), std::move(value));
      param_pos.push_back(p.key_pos);
      value_pos.push_back(p.value_pos);
    }
    if (!plugin_ok || !checks_plugin_of(spec.name)) return;
    const Resolved& resolved = resolve(spec.stage.plugin);
    if (!resolved.type) {
      // A relative path was taken from the topology file's directory: the message names the
      // file it looked for, since that is seldom where the operator's shell is.
      std::string where;
      const std::string& plugin = spec.stage.plugin;
      if (stages::is_plugin_path(plugin) && plugin.front() != '/' &&
          plugin.find('/') != std::string::npos) {
        where = " (looked for " + internal::absolute_path(plugin) +
                ": a relative plugin path is taken from the topology file's directory)";
      }
      error(plugin_pos, name + ".plugin: " + resolved.error + where);
      return;
    }
    for (size_t i = 0; i < spec.stage.params.size(); ++i) {
      const std::string& key = spec.stage.params[i].first;
      if (!resolved.type->rejects_param(key)) continue;
      bad_param = true;
      auto keys = resolved.type->param_keys();
      std::string message =
          name + ": stage " + quoted(resolved.type->name()) + " has no parameter " + quoted(key);
      std::string hint = did_you_mean(key, keys);
      if (hint.empty()) {
        if (keys.empty()) {
          hint = " (it takes no parameters)";
        } else {
          hint = " (it takes:";
          for (size_t k = 0; k < keys.size(); ++k) hint += (k ? ", " : " ") + std::string(keys[k]);
          hint += ")";
        }
      }
      error(param_pos[i], message + hint);
    }
    // A built-in's values, where it can be tried without side effects (a mode, a level), and
    // its required parameters. Not after a parameter it does not know or could not take (not
    // a scalar): that is most often the one it misses, and one message says it.
    if (bad_param) return;
    std::string refusal = stages::builtin_refusal(*resolved.type, spec.stage.params);
    if (refusal.empty()) return;
    // At the value the refusal is about, when it names one as stages do ("...: mode must be
    // \"compress\" or ..."); else (a parameter missing) at the plugin.
    SourcePos at = plugin_pos;
    for (size_t i = 0; i < spec.stage.params.size(); ++i) {
      if (refusal.find(": " + spec.stage.params[i].first + " ") != std::string::npos) {
        at = value_pos[i];
        break;
      }
    }
    error(at, name + ": " + refusal);
  }

  // Every address may be used once across the pipeline, listen or metrics: a second user could
  // not bind it (same host) or would be ambiguous to connect to (the file is shared).
  void check_addresses() {
    std::stable_sort(addresses_.begin(), addresses_.end(),
                     [](const AddressUse& a, const AddressUse& b) { return before(a.pos, b.pos); });
    std::map<std::string, const AddressUse*> first;
    for (const AddressUse& use : addresses_) {
      auto [it, inserted] = first.emplace(use.identity, &use);
      if (inserted) continue;
      const AddressUse& earlier = *it->second;
      error(use.pos, use.key + ": address " + quoted(use.text) + " is already the " +
                         std::string(earlier.kind) + " address of node " + quoted(earlier.node));
    }
    // A node's two addresses are on one host: a wildcard one (0.0.0.0, ::) binds its port on
    // every address there, so the other cannot have that port whatever its host.
    // (Over verbs the listen port is rdma_cm's, not the kernel's TCP one: no clash.)
    std::map<std::string, const AddressUse*> listen_of;
    for (const AddressUse& use : addresses_) {
      if (use.kind == "listen" && !uses_verbs(use.node)) listen_of.emplace(use.node, &use);
    }
    for (const AddressUse& use : addresses_) {
      auto it = listen_of.find(use.node);
      if (use.kind != "metrics" || it == listen_of.end()) continue;
      const AddressUse& listen = *it->second;
      if (use.endpoint.port != listen.endpoint.port || use.identity == listen.identity ||
          !wildcard_takes(use.endpoint, listen.endpoint)) {
        continue;
      }
      const bool metrics_wild = host_kind(use.endpoint.host).any;
      error(use.pos, use.key + ": port " + std::to_string(use.endpoint.port) +
                         " is also the port of this node's listen address " + quoted(listen.text) +
                         ", and " + quoted(metrics_wild ? use.text : listen.text) +
                         " takes it on every address of the host: give the metrics endpoint "
                         "another port");
    }
  }

  bool uses_verbs(const std::string& node) const {
    auto it = index_.find(node);
    return it != index_.end() && raw_nodes_[it->second].spec.transport == TransportKind::kVerbs;
  }

  bool checks_plugin_of(const std::string& node) const {
    return plugins_.mode == PluginCheck::Mode::kAll ||
           (plugins_.mode == PluginCheck::Mode::kNode && plugins_.node == node);
  }

  // What must hold along every link: the downstream's slots take whatever the upstream's
  // slots hold (so nothing the upstream forwards can be too big for it), and both ends speak
  // the same transport when both name one.
  void check_links() {
    for (const RawNode& from : raw_nodes_) {
      for (const auto& link : from.links) {
        const NodeSpec& a = from.spec;
        const NodeSpec& b = raw_nodes_[link.to].spec;
        const bool sizes_known = !from.slot_size_refused && !raw_nodes_[link.to].slot_size_refused;
        if (sizes_known && b.slot_size < a.slot_size) {
          error(link.pos, "nodes." + from.name + ".downstream: " + quoted(b.name) +
                              " has slot_size " + std::to_string(b.slot_size) + " but " +
                              quoted(a.name) + " forwards messages of up to " +
                              std::to_string(a.slot_size) + " bytes: give " + quoted(b.name) +
                              " a slot_size of at least " + std::to_string(a.slot_size));
        }
        if (a.transport != b.transport && a.transport != TransportKind::kAuto &&
            b.transport != TransportKind::kAuto) {
          error(link.pos, "nodes." + from.name + ".downstream: " + quoted(a.name) + " uses " +
                              std::string(to_string(a.transport)) + " but " + quoted(b.name) +
                              " uses " + std::string(to_string(b.transport)) +
                              ": both ends of a link need the same transport");
        }
      }
    }
  }

  // A head's standby (`standby`): another head, which a producer's buffers and sequence
  // numbers fit as they are.
  void check_standbys() {
    std::vector<bool> has_upstream(raw_nodes_.size(), false);
    for (const RawNode& raw : raw_nodes_) {
      for (const auto& link : raw.links) has_upstream[link.to] = true;
    }
    for (size_t i = 0; i < raw_nodes_.size(); ++i) {
      const RawNode& raw = raw_nodes_[i];
      const NodeSpec& a = raw.spec;
      if (a.standby.empty()) continue;
      const std::string name = "nodes." + raw.name + ".standby";
      auto it = index_.find(a.standby);
      if (it == index_.end()) {
        error(raw.standby_pos, name + ": " + quoted(a.standby) + " is not a node" +
                                   did_you_mean(a.standby, node_names_));
        continue;
      }
      const NodeSpec& b = raw_nodes_[it->second].spec;
      auto refuse = [&](const std::string& why) { error(raw.standby_pos, name + ": " + why); };
      if (it->second == i) {
        refuse("node " + quoted(a.name) + " cannot be its own standby");
      } else if (has_upstream[i]) {
        refuse(quoted(a.name) +
               " has upstream nodes: only a head node (the one producers send "
               "to) has a standby");
      } else if (has_upstream[it->second]) {
        refuse(quoted(b.name) +
               " has upstream nodes: a standby is a head node too, one that "
               "producers of " +
               quoted(a.name) + " send to while it is down");
      } else if (a.slots != b.slots || a.slot_size != b.slot_size) {
        refuse(quoted(b.name) + " has " + std::to_string(b.slots) + " slots of " +
               std::to_string(b.slot_size) + " bytes, " + quoted(a.name) + " " +
               std::to_string(a.slots) + " of " + std::to_string(a.slot_size) +
               ": a producer's buffers are sized for its head, so both need the same slots "
               "and slot_size");
      } else if (a.transport != b.transport || a.ingress != b.ingress) {
        refuse(quoted(a.name) + " and " + quoted(b.name) +
               " need the same transport and ingress: a producer keeps its transport and "
               "buffers when it fails over");
      }
    }
  }

  // Depth-first search in file order; every back edge closes one cycle, reported at the
  // downstream entry that closes it. Removing the reported entries leaves a DAG. Iterative, with
  // the path on the heap: a chain of 50,000 nodes overflowed the 8 MiB stack when recursive.
  struct Step {
    size_t node;
    size_t next_link;  // the first of its links not followed yet
  };
  void check_cycles() {
    std::vector<int> state(raw_nodes_.size(), 0);  // 0 new, 1 on the path, 2 done
    std::vector<Step> path;
    for (size_t root = 0; root < raw_nodes_.size(); ++root) {
      if (state[root] != 0) continue;
      state[root] = 1;
      path.push_back({root, 0});
      while (!path.empty()) {
        Step& top = path.back();
        const auto& links = raw_nodes_[top.node].links;
        if (top.next_link == links.size()) {
          state[top.node] = 2;
          path.pop_back();
          continue;
        }
        const RawNode::Link& link = links[top.next_link++];
        if (state[link.to] == 0) {
          state[link.to] = 1;
          path.push_back({link.to, 0});
        } else if (state[link.to] == 1) {
          report_cycle(path, link);
        }
      }
    }
  }

  void report_cycle(const std::vector<Step>& path, const RawNode::Link& link) {
    auto from = std::find_if(path.begin(), path.end(),
                             [&](const Step& step) { return step.node == link.to; });
    std::string names;
    for (auto it = from; it != path.end(); ++it) names += raw_nodes_[it->node].name + " -> ";
    names += raw_nodes_[link.to].name;
    error(link.pos, "cycle in the pipeline: " + names);
  }

  std::string_view text_;
  const std::string& path_;
  const PluginCheck& plugins_;
  std::vector<Diagnostic> diagnostics_;
  TlsSpec top_tls_;  // the top-level `tls`: every node's unless it has its own
  std::vector<RawNode> raw_nodes_;
  std::map<std::string, size_t> index_;
  std::vector<std::string_view> node_names_;           // views into the parsed table's keys
  std::map<std::string, std::string> misspelt_nodes_;  // name -> the misspelt table ("node")
  std::vector<AddressUse> addresses_;
  std::map<std::string, Resolved> resolved_;
};

}  // namespace

Topology parse_topology(std::string_view text, const std::string& path_for_messages,
                        const PluginCheck& plugins) {
  return Validator(text, path_for_messages, plugins).run();
}

}  // namespace hoprelay::config
