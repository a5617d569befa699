// libFuzzer target: the topology loader (TOML parsing and validation).
//
// The input is the text of a topology file. parse_topology() either returns a Topology or
// throws ConfigError; anything else escaping it (another exception type), a crash, a sanitizer
// report or a broken invariant below is a finding. Plugins are not checked (PluginCheck kNone),
// so the fuzzer never dlopens a path it made up.
//
// On success the result must satisfy every rule docs/topology.md promises: the validator's
// output is what the daemon trusts without checking again.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <typeinfo>

#include "fuzz_check.h"
#include "hoprelay/config/topology.h"
#include "hoprelay/transport/wire.h"

namespace {

using namespace hoprelay::config;

void check_endpoint(const Endpoint& e) {
  FUZZ_CHECK(!e.host.empty());
  FUZZ_CHECK(e.port != 0);
  // What the daemon prints and what a peer reads back must name the same endpoint.
  auto again = parse_endpoint(e.to_string());
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->host == e.host);
  FUZZ_CHECK(again->port == e.port);
}

void check_settings(uint32_t slot_size, uint32_t slots) {
  FUZZ_CHECK(slot_size >= kMinSlotSize && slot_size <= kMaxSlotSize);
  FUZZ_CHECK(static_cast<int64_t>(slots) >= kMinSlots && static_cast<int64_t>(slots) <= kMaxSlots);
}

void check_topology(const Topology& t, std::string_view text) {
  FUZZ_CHECK(t.path == "fuzz.toml");
  FUZZ_CHECK(t.hash == fnv1a64(text));
  FUZZ_CHECK(!t.name.empty());
  FUZZ_CHECK(to_string(t.transport) != "?");
  check_settings(t.slot_size, t.slots);
  FUZZ_CHECK(!t.nodes.empty());

  std::set<std::string> names;
  std::set<std::string> addresses;
  size_t upstream_links = 0;
  for (const NodeSpec& n : t.nodes) {
    // The validator's name rule must be the wire's: every valid node can send its hello.
    FUZZ_CHECK(hoprelay::transport::valid_node_name(n.name));
    FUZZ_CHECK(names.insert(n.name).second);
    FUZZ_CHECK(t.find(n.name) == &n);
    check_endpoint(n.listen);
    FUZZ_CHECK(addresses.insert(n.listen.to_string()).second);
    if (n.metrics) {
      check_endpoint(*n.metrics);
      FUZZ_CHECK(addresses.insert(n.metrics->to_string()).second);
    }
    check_settings(n.slot_size, n.slots);
    FUZZ_CHECK(!n.stage.plugin.empty());
    FUZZ_CHECK(to_string(n.route) != "?" && to_string(n.transport) != "?" &&
               to_string(n.ingress) != "?" && to_string(n.forward) != "?" &&
               to_string(n.poll) != "?");
    upstream_links += n.upstream.size();
  }
  FUZZ_CHECK(upstream_links == t.link_count());

  // Links: to existing other nodes, once each, mirrored in upstream, slot sizes that fit,
  // transports that agree.
  std::map<std::string, size_t> indegree;
  for (const NodeSpec& n : t.nodes) indegree[n.name] = n.upstream.size();
  for (const NodeSpec& a : t.nodes) {
    std::set<std::string> seen;
    for (const std::string& d : a.downstream) {
      const NodeSpec* b = t.find(d);
      FUZZ_CHECK(b != nullptr);
      FUZZ_CHECK(b != &a);
      FUZZ_CHECK(seen.insert(d).second);
      FUZZ_CHECK(std::count(b->upstream.begin(), b->upstream.end(), a.name) == 1);
      FUZZ_CHECK(b->slot_size >= a.slot_size);
      FUZZ_CHECK(a.transport == b->transport || a.transport == TransportKind::kAuto ||
                 b->transport == TransportKind::kAuto);
    }
  }

  // No cycles: Kahn's algorithm removes every node.
  std::vector<const NodeSpec*> ready;
  for (const NodeSpec& n : t.nodes) {
    if (n.is_head()) ready.push_back(&n);
  }
  size_t removed = 0;
  while (!ready.empty()) {
    const NodeSpec* n = ready.back();
    ready.pop_back();
    ++removed;
    for (const std::string& d : n->downstream) {
      if (--indegree[d] == 0) ready.push_back(t.find(d));
    }
  }
  FUZZ_CHECK(removed == t.nodes.size());

  std::string dot = to_dot(t);
  FUZZ_CHECK(dot.rfind("digraph ", 0) == 0);
}

void check_error(const ConfigError& e) {
  const auto& diagnostics = e.diagnostics();
  FUZZ_CHECK(!diagnostics.empty());
  FUZZ_CHECK(std::string_view(e.what()).size() > 0);
  for (size_t i = 0; i < diagnostics.size(); ++i) {
    const Diagnostic& d = diagnostics[i];
    FUZZ_CHECK(d.file == "fuzz.toml");
    FUZZ_CHECK(!d.message.empty());
    FUZZ_CHECK(d.format().find(": error: ") != std::string::npos);
    if (i > 0) {  // in file order
      const SourcePos& p = diagnostics[i - 1].pos;
      FUZZ_CHECK(p.line < d.pos.line || (p.line == d.pos.line && p.col <= d.pos.col));
    }
  }
}

// The scalar syntaxes on their own, without TOML around them.
void check_scalars(std::string_view text) {
  if (auto endpoint = parse_endpoint(text)) check_endpoint(*endpoint);
  if (auto bytes = parse_size(text)) FUZZ_CHECK(!text.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (size <= 512) check_scalars(text);
  try {
    Topology t = parse_topology(text, "fuzz.toml", {PluginCheck::Mode::kNone, ""});
    check_topology(t, text);
  } catch (const ConfigError& e) {
    check_error(e);  // the expected way to refuse a file
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse_topology threw %s (not ConfigError): %s\n", typeid(e).name(),
                 e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "parse_topology threw a non-std::exception\n");
    std::abort();
  }
  return 0;
}
