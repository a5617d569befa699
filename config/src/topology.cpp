// The resolved topology's own behaviour: diagnostics, names of enum values, lookups, DOT
// output and reading the file. Parsing and validation live in validate.cpp.
#include "hoprelay/config/topology.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "internal.h"

namespace hoprelay::config {
namespace {

template <class E, size_t N>
std::string_view spelling_of(const std::array<internal::Spelling<E>, N>& spellings, E value) {
  for (const auto& s : spellings) {
    if (s.value == value) return s.text;
  }
  return "?";
}

std::string join_diagnostics(const std::vector<Diagnostic>& diagnostics) {
  std::string text;
  for (const auto& d : diagnostics) {
    if (!text.empty()) text += '\n';
    text += d.format();
  }
  return text;
}

// Escapes text for a double-quoted DOT string.
std::string dot_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::string Diagnostic::format() const {
  // A position of 0 means "the whole file" (e.g. a missing [pipeline] table): print no
  // position rather than a fake one.
  std::string where = file;
  if (pos.line > 0) {
    where += ":" + std::to_string(pos.line);
    if (pos.col > 0) where += ":" + std::to_string(pos.col);
  }
  return where + (warning ? ": warning: " : ": error: ") + message;
}

ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join_diagnostics(diagnostics)), diagnostics_(std::move(diagnostics)) {}

std::string_view to_string(TransportKind v) {
  return spelling_of(internal::kTransportSpellings, v);
}
std::string_view to_string(Route v) {
  return spelling_of(internal::kRouteSpellings, v);
}
std::string_view to_string(Ingress v) {
  return spelling_of(internal::kIngressSpellings, v);
}
std::string_view to_string(Forward v) {
  return spelling_of(internal::kForwardSpellings, v);
}
std::string_view to_string(Poll v) {
  return spelling_of(internal::kPollSpellings, v);
}
std::string_view to_string(OnPeerDown v) {
  return spelling_of(internal::kOnPeerDownSpellings, v);
}

const NodeSpec* Topology::find(std::string_view node) const {
  for (const auto& n : nodes) {
    if (n.name == node) return &n;
  }
  return nullptr;
}

std::string Topology::names(const std::function<bool(const NodeSpec&)>& which) const {
  std::string out;
  for (const auto& n : nodes) {
    if (which && !which(n)) continue;
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

uint64_t Topology::max_message() const {
  uint64_t slots = 0, slot_size = 0;
  for (const auto& n : nodes) {
    slots = slots ? std::min<uint64_t>(slots, n.slots) : n.slots;
    slot_size = slot_size ? std::min<uint64_t>(slot_size, n.slot_size) : n.slot_size;
  }
  return slots * slot_size;
}

namespace {

std::string_view stage_param(const StageSpec& s, std::string_view key) {
  for (const auto& [k, v] : s.params) {
    if (k == key) return v;
  }
  return {};
}

bool zstd_mode(const NodeSpec& n, std::string_view mode) {
  return n.stage.plugin == "zstd" && stage_param(n.stage, "mode") == mode;
}

// For each node, the first node (in file order) that is_source() whose messages reach it with
// no node between them that is_barrier() (one that undoes what the source did), or null.
template <class Source, class Barrier>
std::vector<const NodeSpec*> reached_from(const Topology& t, Source is_source, Barrier is_barrier) {
  const std::vector<NodeSpec>& nodes = t.nodes;
  std::vector<const NodeSpec*> reached_by(nodes.size(), nullptr);
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i].name, i);
  for (const auto& c : nodes) {
    if (!is_source(c)) continue;
    std::vector<size_t> todo;
    std::vector<bool> seen(nodes.size(), false);
    auto push_downstream = [&](const NodeSpec& n) {
      for (const auto& d : n.downstream) {
        auto it = index.find(d);
        if (it != index.end() && !seen[it->second]) {
          seen[it->second] = true;
          todo.push_back(it->second);
        }
      }
    };
    push_downstream(c);
    while (!todo.empty()) {
      const size_t i = todo.back();
      todo.pop_back();
      if (is_barrier(nodes[i])) continue;  // what passes it is as before the source again
      if (!reached_by[i]) reached_by[i] = &c;
      push_downstream(nodes[i]);
    }
  }
  return reached_by;
}

// A warning at each node that a source reaches (reached_from) and that say(node, source) has
// words for (empty: nothing to say).
template <class Say>
void warn_reached(const Topology& t, const std::vector<const NodeSpec*>& reached_by, Say say,
                  std::vector<Diagnostic>& out) {
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    if (!reached_by[i]) continue;
    std::string msg = say(t.nodes[i], *reached_by[i]);
    if (!msg.empty()) out.push_back({t.path, t.nodes[i].pos, std::move(msg), true});
  }
}

// Nodes that get a compressing node's messages with no decompressing node in between, and
// whose stage cannot take them (docs/stages.md, "zstd"): each found once, in file order.
void zstd_warnings(const Topology& t, std::vector<Diagnostic>& out) {
  const auto compressed_by = reached_from(
      t, [](const NodeSpec& n) { return zstd_mode(n, "compress"); },
      [](const NodeSpec& n) { return zstd_mode(n, "decompress"); });
  auto say = [](const NodeSpec& x, const NodeSpec& c) -> std::string {
    const std::string fix = "stage = { plugin = \"zstd\", mode = \"decompress\" }";
    const std::string head = "nodes." + x.name + ": ";
    const std::string from =
        "the zstd-compressed messages of " + c.name + " (no node between them decompresses)";
    if (x.stage.plugin == "crc32c") {
      return head + "its crc32c stage gets " + from +
             ": it works on whole messages and their bytes, so it joins compressed chunks, "
             "cuts their zstd frames apart, and the node that decompresses refuses them as "
             "stage_error. Decompress before " +
             x.name + " (" + fix + " on a node before it), or compress after it";
    }
    if (x.stage.plugin == "verify-sink" || x.stage.plugin == "file-sink") {
      return head + "its " + x.stage.plugin + " gets " + from +
             " and refuses every one of them as stage_error. Give the node before " + x.name + " " +
             fix;
    }
    if (x.is_leaf() && x.stage.plugin == "passthrough") {
      return head + "a leaf that gets " + from + " hands none of them to its application " +
             "(hoprelay recv, a consumer: dropped as stage_error). Give " + x.name + " " + fix;
    }
    return "";  // passthrough and zstd relays forward them as they are; plugins may know
  };
  warn_reached(t, compressed_by, say, out);
  // A leaf that compresses what it is to hand over (the modes swapped, most often).
  for (const NodeSpec& n : t.nodes) {
    if (n.is_leaf() && zstd_mode(n, "compress")) {
      out.push_back({t.path, n.pos,
                     "nodes." + n.name + ": a leaf whose own stage compresses (zstd, mode = " +
                         "\"compress\") hands none of its messages to its application " +
                         "(hoprelay recv, a consumer: dropped as stage_error). Compress at the " +
                         "head, and give " + n.name + " mode = \"decompress\"",
                     true});
    }
  }
}

bool crc32c_mode(const NodeSpec& n, std::string_view mode) {
  if (n.stage.plugin != "crc32c") return false;
  const std::string_view m = stage_param(n.stage, "mode");
  return (m.empty() ? std::string_view("stamp") : m) == mode;
}

// Nodes that hand crc32c-stamped messages on with their 4-byte trailer still on (no node
// between the stamp and them verifies, which strips it): a consumer's application or a
// file-sink gets 4 bytes more per message than the producer sent.
void crc32c_warnings(const Topology& t, std::vector<Diagnostic>& out) {
  const auto stamped_by = reached_from(
      t, [](const NodeSpec& n) { return crc32c_mode(n, "stamp"); },
      [](const NodeSpec& n) { return crc32c_mode(n, "verify"); });
  auto say = [](const NodeSpec& x, const NodeSpec& c) -> std::string {
    const std::string fix = "stage = { plugin = \"crc32c\", mode = \"verify\" }";
    const std::string what = "gets the crc32c-stamped messages of " + c.name +
                             " (no node between them verifies, which strips the 4-byte trailer)";
    if (x.stage.plugin == "file-sink") {
      return "nodes." + x.name + ": its file-sink " + what +
             " and writes each with the trailer: 4 bytes more than was sent. Give the node "
             "before " +
             x.name + " " + fix;
    }
    if (x.is_leaf() && x.stage.plugin == "passthrough") {
      return "nodes." + x.name + ": a leaf that " + what +
             " hands them to its application (hoprelay recv, a consumer) with the trailer: 4 "
             "bytes more than was sent. Give " +
             x.name + " " + fix;
    }
    return "";
  };
  warn_reached(t, stamped_by, say, out);
}

// A bypass runs a relay's stage on the node that stands in for it: a plugin given by path must
// be on that host too (a built-in one always is).
void bypass_warnings(const Topology& t, std::vector<Diagnostic>& out) {
  for (const auto& n : t.nodes) {
    if (n.is_leaf() || n.stage.plugin.find('/') == std::string::npos) continue;
    for (const auto& who : t.stand_ins(n.name)) {
      const NodeSpec* s = t.find(who);
      if (s->listen.host == n.listen.host) continue;  // the same host: the same files
      out.push_back({t.path, n.pos,
                     "nodes." + n.name + ": " + who + " stands in for it when it is down " +
                         "(on_peer_down = \"bypass\") and then runs its stage: the plugin " +
                         n.stage.plugin + " must exist on " + who + "'s host (" + s->listen.host +
                         ") too, or that bypass fails and " + who + " holds " + n.name +
                         "'s messages as under \"block\"",
                     true});
    }
  }
}

}  // namespace

std::vector<Diagnostic> Topology::warnings() const {
  std::vector<Diagnostic> out;
  for (const auto& n : nodes) {
    if (n.stage.plugin != "crc32c") continue;
    std::string mode = "stamp";
    for (const auto& [k, v] : n.stage.params) {
      if (k == "mode") mode = v;
    }
    if (mode != "stamp") continue;
    // The largest frame that reaches it: its upstreams' slots, or at a head one of its own
    // (a producer fills a slot). Reassembled, a message has the room of its frames' slots.
    uint64_t fill = n.is_head() ? n.slot_size : 0;
    std::string from = n.is_head() ? "a producer" : "";
    for (const auto& u : n.upstream) {
      const NodeSpec* up = find(u);
      if (up && up->slot_size > fill) {
        fill = up->slot_size;
        from = u;
      }
    }
    if (n.slot_size >= fill + 4) continue;
    if (n.is_head() && fill == n.slot_size) {
      // What fills a head's slot is the producer's choice: a larger slot_size only lets it
      // send larger messages, so the advice is about the messages.
      out.push_back({path, n.pos,
                     "nodes." + n.name + ": its crc32c stamp adds a 4-byte trailer, so a " +
                         "message that fills one of its slots (" + std::to_string(fill) +
                         " bytes) has no room and is dropped as stage_error: producers must " +
                         "send messages of at most " + std::to_string(fill - 4) +
                         " bytes (hoprelay send --size " + std::to_string(fill - 4) +
                         "), or stamp at a node after the head",
                     true});
      continue;
    }
    std::string msg = "nodes." + n.name + ": its crc32c stamp adds a 4-byte trailer, but its " +
                      "slots (" + std::to_string(n.slot_size) + " bytes) leave no room in a " +
                      "frame that " + from + " fills (" + std::to_string(fill) +
                      " bytes): " + "such messages are dropped as stage_error. Give " + n.name +
                      " a slot_size of at least " + std::to_string(fill + 4) +
                      (n.is_head() ? ", or send messages at least 4 bytes smaller than a slot"
                                   : " (and its downstream peers too), or " + from +
                                         " one of at most " + std::to_string(n.slot_size - 4));
    out.push_back({path, n.pos, msg, true});
  }
  // Link threads beyond a relay's downstream links have nothing to run (a leaf starts none).
  for (const auto& n : nodes) {
    const size_t links = n.downstream.size();
    if (links == 0 || n.link_threads <= links) continue;
    out.push_back({path, n.pos,
                   "nodes." + n.name + ": link_threads = " + std::to_string(n.link_threads) +
                       " but it has " + std::to_string(links) + " downstream link" +
                       (links == 1 ? "" : "s") + ": " + std::to_string(n.link_threads - links) +
                       " of its link threads would have nothing to run (downstream i runs on "
                       "thread i mod link_threads). Set link_threads = " +
                       std::to_string(links) + " or fewer for " + n.name,
                   true});
  }
  zstd_warnings(*this, out);
  crc32c_warnings(*this, out);
  bypass_warnings(*this, out);
  return out;
}

std::vector<std::string> Topology::stand_ins(std::string_view node) const {
  std::vector<std::string> out;
  std::vector<std::string_view> todo{node};
  while (!todo.empty()) {
    const NodeSpec* n = find(todo.back());
    todo.pop_back();
    if (!n) continue;
    for (const auto& u : n->upstream) {
      const NodeSpec* up = find(u);
      if (!up || up->on_peer_down != OnPeerDown::kBypass) continue;
      if (std::find(out.begin(), out.end(), u) != out.end()) continue;
      out.push_back(u);
      todo.push_back(up->name);  // its own stand-ins may run it, and so this one's role
    }
  }
  return out;
}

uint32_t Topology::height(std::string_view node) const {
  // Level by level: the nodes `hops` hops below, each once per level (a node reached by a
  // short and a long path is on both levels: the long one counts). Not recursive: a chain of
  // thousands of nodes would be as deep a recursion. At most as many levels as nodes, so a
  // cycle, which validation refuses, ends too. An index first: find() walks the list.
  std::unordered_map<std::string_view, const NodeSpec*> by_name;
  for (const auto& n : nodes) by_name.emplace(n.name, &n);
  std::vector<std::string_view> level{node}, next;
  std::unordered_set<std::string_view> seen;
  uint32_t hops = 0;
  while (hops < nodes.size()) {
    next.clear();
    seen.clear();
    for (std::string_view name : level) {
      auto it = by_name.find(name);
      if (it == by_name.end()) continue;
      const NodeSpec* n = it->second;
      for (const auto& d : n->downstream) {
        if (seen.insert(d).second) next.push_back(d);
      }
    }
    if (next.empty()) break;
    ++hops;
    level.swap(next);
  }
  return hops;
}

size_t Topology::link_count() const {
  size_t links = 0;
  for (const auto& n : nodes) links += n.downstream.size();
  return links;
}

std::string to_dot(const Topology& topology) {
  std::string out = "digraph " + dot_quote(topology.name) + " {\n";
  out += "  rankdir=LR;\n";
  out += "  node [shape=box];\n";
  for (const auto& n : topology.nodes) {
    out += "  " + dot_quote(n.name) +
           " [label=" + dot_quote(n.name + "\n" + n.stage.plugin + "\n" + n.listen.to_string()) +
           "];\n";
  }
  for (const auto& n : topology.nodes) {
    // The route only matters where a node has a choice of peers.
    bool fan_out = n.downstream.size() > 1;
    for (const auto& d : n.downstream) {
      out += "  " + dot_quote(n.name) + " -> " + dot_quote(d);
      if (fan_out) out += " [label=" + dot_quote(to_string(n.route)) + "]";
      out += ";\n";
    }
  }
  out += "}\n";
  return out;
}

Topology load_topology(const std::string& path, const PluginCheck& plugins) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::system_error(errno, std::generic_category(),
                            "cannot read topology file \"" + path + "\"");
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;  // a directory opens fine and fails here with EISDIR
      ::close(fd);
      throw std::system_error(err, std::generic_category(),
                              "cannot read topology file \"" + path + "\"");
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return parse_topology(text, path, plugins);
}

}  // namespace hoprelay::config
