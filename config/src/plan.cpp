// `hoprelay plan` (plan.h): hosts file -> shape -> topology text.
#include "hoprelay/config/plan.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

#include "internal.h"

namespace hoprelay::config {

namespace {

constexpr std::string_view kLineForm = "a host line is ADDRESS [LABEL [NAME]]";
// Frames a link has unacknowledged per hop below its receiver (plan.h, "The window").
constexpr uint32_t kSlotsPerHop = 4;

struct Token {
  std::string_view text;
  uint32_t col = 0;
};

std::vector<Token> split_fields(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i >= line.size()) break;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    out.push_back({line.substr(start, i - start), static_cast<uint32_t>(start + 1)});
  }
  return out;
}

// ADDRESS as the topology writes it (HOST:PORT or [V6]:PORT), `port` when it has none.
std::string with_port(std::string_view address, uint16_t port) {
  const std::string p = ":" + std::to_string(port);
  if (address.front() == '[') {
    return address.find("]:") == std::string_view::npos ? std::string(address) + p
                                                        : std::string(address);
  }
  const size_t colons = std::count(address.begin(), address.end(), ':');
  if (colons >= 2) return "[" + std::string(address) + "]" + p;  // a bare IPv6 address
  if (colons == 1) return std::string(address);
  return std::string(address) + p;
}

uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// A name as a TOML key: bare unless it holds a '.'.
std::string key_of(const std::string& name) {
  return name.find('.') == std::string::npos ? name : "\"" + name + "\"";
}

}  // namespace

std::string parse_plan_shape(std::string_view text, PlanOptions& options) {
  const std::string form = " (expected chain, tree:K or racks:K, K a whole number from 1)";
  if (text == "chain") {
    options.shape = PlanShape::kChain;
    options.fanout = 1;
    return "";
  }
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  if (kind != "tree" && kind != "racks") {
    return "unknown shape \"" + std::string(text) + "\"" + form;
  }
  if (colon == std::string_view::npos) {
    return "\"" + std::string(text) + "\" needs its fan-out K, as in " + std::string(kind) + ":2";
  }
  const std::string_view k = text.substr(colon + 1);
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), value);
  if (ec != std::errc() || end != k.data() + k.size() || value < 1) {
    return "fan-out \"" + std::string(k) + "\" of " + std::string(kind) + " is not a whole " +
           "number from 1" + form;
  }
  if (value > 1024) return "fan-out " + std::to_string(value) + " is more than 1024";
  options.shape = kind == "tree" ? PlanShape::kTree : PlanShape::kRacks;
  options.fanout = value;
  return "";
}

std::vector<PlanHost> parse_plan_hosts(std::string_view text, const std::string& file,
                                       uint16_t port) {
  std::vector<PlanHost> hosts;
  std::vector<Diagnostic> errors;
  auto error = [&](uint32_t line, uint32_t col, std::string message) {
    errors.push_back({file, {line, col}, std::move(message)});
  };
  uint32_t line_no = 0;
  size_t index = 0;  // of the host line, for its default name
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    ++line_no;
    begin = end + 1;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const std::vector<Token> fields = split_fields(line);
    if (fields.empty()) continue;
    const size_t this_index = index++;
    if (fields.size() > 3) {
      error(line_no, fields[3].col,
            "\"" + std::string(fields[3].text) + "\": one field too many (" +
                std::string(kLineForm) + "; use '-' for no label)");
      continue;
    }
    PlanHost h;
    h.pos = {line_no, fields[0].col};
    const internal::EndpointParse parsed =
        internal::parse_endpoint_explained(with_port(fields[0].text, port));
    if (!parsed.endpoint) {
      error(line_no, fields[0].col,
            "\"" + std::string(fields[0].text) + "\" is not a valid address: " + parsed.error +
                " (" + std::string(kLineForm) + ")");
      continue;
    }
    h.listen = *parsed.endpoint;
    if (fields.size() >= 2 && fields[1].text != "-") h.label = std::string(fields[1].text);
    h.name_pos = h.pos;
    if (fields.size() == 3) {
      h.name = std::string(fields[2].text);
      h.name_pos = {line_no, fields[2].col};
      if (!internal::node_name_charset_ok(h.name)) {
        error(
            line_no, fields[2].col,
            "node name \"" + h.name + "\" is invalid: use only letters, digits, '_', '.' and '-'");
        continue;
      }
      if (h.name.size() > internal::kMaxNodeNameBytes) {
        error(line_no, fields[2].col,
              "node name \"" + h.name + "\" is " + std::to_string(h.name.size()) +
                  " bytes long; at most " + std::to_string(internal::kMaxNodeNameBytes) +
                  " are allowed");
        continue;
      }
    } else {
      h.name = "h" + std::to_string(this_index);
    }
    hosts.push_back(std::move(h));
  }
  if (errors.empty() && hosts.empty()) {
    error(0, 0, "no hosts: write one host a line (" + std::string(kLineForm) + ")");
  }
  if (!errors.empty()) throw ConfigError(std::move(errors));
  return hosts;
}

Plan make_plan(const std::vector<PlanHost>& hosts, const PlanOptions& options) {
  const std::string& file = options.hosts_file;
  std::vector<Diagnostic> errors;
  auto error = [&](SourcePos pos, std::string message) {
    errors.push_back({file, pos, std::move(message)});
  };
  auto line_of = [](const PlanHost& h) { return std::to_string(h.pos.line); };

  Plan plan;
  plan.nodes.resize(hosts.size());
  // Every address (listen and metrics) and name once.
  std::unordered_map<std::string, size_t> addresses, names;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const PlanHost& h = hosts[i];
    PlannedNode& n = plan.nodes[i];
    n.name = h.name;
    n.listen = h.listen;
    if (auto [it, fresh] = names.emplace(h.name, i); !fresh) {
      error(h.name_pos, "node name \"" + h.name + "\" is line " + line_of(hosts[it->second]) +
                            "'s already: give each host its own NAME (the third field)");
    }
    const std::string listen_id = internal::endpoint_identity(h.listen);
    if (auto [it, fresh] = addresses.emplace(listen_id, i); !fresh) {
      error(h.pos, h.listen.to_string() + " is line " + line_of(hosts[it->second]) +
                       "'s address already: two nodes cannot listen on one address; give "
                       "each its own host, or its own port (ADDRESS:PORT)");
    }
    if (options.metrics_port) {
      n.metrics = Endpoint{h.listen.host, *options.metrics_port};
      const std::string id = internal::endpoint_identity(*n.metrics);
      if (auto [it, fresh] = addresses.emplace(id, i); !fresh) {
        error(h.pos, "--metrics-port " + std::to_string(*options.metrics_port) + " puts " +
                         n.metrics->to_string() + " on line " + line_of(hosts[it->second]) +
                         "'s address already: hosts that share an address cannot all serve "
                         "metrics on one port (leave --metrics-port out, or give each host "
                         "its own address)");
      }
    }
  }

  // The edges.
  const uint32_t k = options.fanout;
  const size_t count = hosts.size();
  if (options.shape == PlanShape::kChain) {
    for (size_t i = 0; i + 1 < count; ++i) plan.nodes[i].downstream.push_back(i + 1);
  } else if (options.shape == PlanShape::kTree) {
    for (size_t i = 0; i < count; ++i) {
      for (size_t c = size_t{k} * i + 1; c <= size_t{k} * i + k && c < count; ++c) {
        plan.nodes[i].downstream.push_back(static_cast<uint32_t>(c));
      }
    }
  } else {
    std::vector<std::vector<uint32_t>> racks;  // in order of first appearance
    std::map<std::string, size_t> rack_of;
    for (size_t i = 0; i < count; ++i) {
      if (hosts[i].label.empty()) {
        error(hosts[i].pos, "racks:" + std::to_string(k) +
                                " needs every host's LABEL (the second field): "
                                "this host has none");
        continue;
      }
      auto [it, fresh] = rack_of.emplace(hosts[i].label, racks.size());
      if (fresh) racks.emplace_back();
      racks[it->second].push_back(static_cast<uint32_t>(i));
    }
    for (size_t r = 0; r < racks.size(); ++r) {
      const std::vector<uint32_t>& m = racks[r];
      // The next rack first: the crossing carries to every host after it.
      if (r + 1 < racks.size()) plan.nodes[m[0]].downstream.push_back(racks[r + 1][0]);
      for (size_t j = 0; j < m.size(); ++j) {
        for (size_t c = size_t{k} * j + 1; c <= size_t{k} * j + k && c < m.size(); ++c) {
          plan.nodes[m[j]].downstream.push_back(m[c]);
        }
      }
    }
  }
  if (!errors.empty()) throw ConfigError(std::move(errors));

  // Heights, from the leaves up: breadth first from the head, then backwards.
  std::vector<uint32_t> order{0};
  for (size_t i = 0; i < order.size(); ++i) {
    for (uint32_t c : plan.nodes[order[i]].downstream) order.push_back(c);
  }
  for (size_t i = order.size(); i-- > 0;) {
    PlannedNode& n = plan.nodes[order[i]];
    for (uint32_t c : n.downstream) n.height = std::max(n.height, plan.nodes[c].height + 1);
  }
  // Windows.
  size_t capped = 0;
  uint32_t deepest = 0;
  for (PlannedNode& n : plan.nodes) {
    const uint64_t wanted = uint64_t{kSlotsPerHop} * (n.height + 1);
    if (wanted > static_cast<uint64_t>(kMaxSlots)) {
      ++capped;
      deepest = std::max(deepest, n.height);
      n.slots = static_cast<uint32_t>(kMaxSlots);
    } else {
      n.slots = std::max(options.slots, round_up_pow2(static_cast<uint32_t>(wanted)));
      n.slots = std::min<uint32_t>(n.slots, static_cast<uint32_t>(kMaxSlots));
    }
  }
  if (capped > 0) {
    plan.notes.push_back(std::to_string(capped) + " node" + (capped == 1 ? " has" : "s have") +
                         " a window capped at " + std::to_string(kMaxSlots) +
                         " slots, fewer than the " + std::to_string(kSlotsPerHop) +
                         " per hop below them that keep a link busy (up to " +
                         std::to_string(deepest) + " hops): that part of the " +
                         (options.shape == PlanShape::kChain ? "chain" : "plan") +
                         " runs below the link rate; a tree:K or racks:K shape is shallower");
  }
  return plan;
}

std::string write_plan(const Plan& plan, const PlanOptions& options) {
  uint32_t depth = plan.nodes.empty() ? 0 : plan.nodes[0].height;
  uint32_t most = 0;
  for (const PlannedNode& n : plan.nodes) most = std::max(most, n.slots);
  std::string out;
  out.reserve(plan.nodes.size() * 128 + 1024);
  out += "# Written by `hoprelay plan --shape " + options.shape_text + "` from " +
         options.hosts_file + ": " + std::to_string(plan.nodes.size()) + " host" +
         (plan.nodes.size() == 1 ? "" : "s") + ", head " + plan.nodes[0].name + ", " +
         std::to_string(depth) + " hop" + (depth == 1 ? "" : "s") + " to the deepest leaf.\n";
  out += "# Window: each node has " + std::to_string(kSlotsPerHop) +
         " slots per hop to its deepest leaf, plus one hop, rounded up to a power of two, at "
         "least " +
         std::to_string(options.slots) + "\n# (docs/topology.md, \"Planning a fleet\"). At most " +
         std::to_string(most) + " slots of " + std::to_string(options.slot_size) +
         " bytes: " + std::to_string((uint64_t{most} * options.slot_size) >> 20) +
         " MiB of receive ring per inbound link.\n";
  for (const std::string& note : plan.notes) out += "# Note: " + note + ".\n";
  out += "\n[pipeline]\nname = \"" + options.name +
         "\"\nslot_size = " + std::to_string(options.slot_size) +
         "\nslots = " + std::to_string(options.slots) + "\n";
  for (const PlannedNode& n : plan.nodes) {
    out += "\n[nodes." + key_of(n.name) + "]\nlisten = \"" + n.listen.to_string() + "\"\n";
    if (n.metrics) out += "metrics = \"" + n.metrics->to_string() + "\"\n";
    if (!n.downstream.empty()) {
      out += "downstream = [";
      for (size_t i = 0; i < n.downstream.size(); ++i) {
        out += (i ? ", \"" : "\"") + plan.nodes[n.downstream[i]].name + "\"";
      }
      out += "]\n";
    }
    if (n.slots != options.slots) out += "slots = " + std::to_string(n.slots) + "\n";
  }
  return out;
}

}  // namespace hoprelay::config
