// `hoprelay plan`: a topology written from a list of hosts and a shape, so that a fleet of
// dozens or thousands of hosts is not written by hand (docs/topology.md, "Planning a fleet").
//
// The hosts file has one host a line: `ADDRESS [LABEL [NAME]]`, `#` starting a comment, blank
// lines ignored. ADDRESS is an IPv4 or IPv6 address or a host name, with or without a port
// (`10.0.0.1`, `10.0.0.1:7001`, `fd00::1`, `[fd00::1]:7001`, `node7.example`); LABEL groups
// hosts into racks (or zones) for the `racks` shape, `-` for none; NAME is the node's name,
// else `h<index>` (the host's index in the file, from 0). The first host is the head.
//
// Shapes: `chain` (the hosts in file order), `tree:K` (K-ary, breadth first: host i forwards
// to hosts K*i+1 .. K*i+K), `racks:K` (the racks chained through their first hosts, in order of
// first appearance, each rack a K-ary tree below its first host).
//
// The window: a node acknowledges a message only once every node below it has (that is what
// makes replay lose nothing), so an upstream link carries about as many unacknowledged frames
// as there are hops below its receiver, and a window smaller than that halves the rate
// (measured: a 32-host chain at 50 Mbit/s took 2.01 x S/R with 16 slots, 1.29 x with 64). Each
// node gets slots = 4 x (hops to its deepest leaf + 1), rounded up to a power of two, at least
// the pipeline's `slots`, at most kMaxSlots (a note says where that cap binds).
// Setup code: throws ConfigError (naming FILE:LINE:COL) on bad input; not on any datapath.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/config/topology.h"

namespace hoprelay::config {

struct PlanHost {
  Endpoint listen;     // its address, with the default port when it gave none
  std::string label;   // empty for none
  std::string name;    // as given, or h<index>
  SourcePos pos;       // of the address
  SourcePos name_pos;  // of the name as given, else the address's
};

enum class PlanShape { kChain, kTree, kRacks };

struct PlanOptions {
  PlanShape shape = PlanShape::kChain;
  uint32_t fanout = 1;                   // K of tree:K and racks:K
  uint16_t port = 7001;                  // for addresses without one
  std::optional<uint16_t> metrics_port;  // metrics = HOST:PORT on every node when given
  uint64_t slot_size = 64 * 1024;
  uint32_t slots = 64;  // the pipeline's, and every node's least
  std::string name = "fleet";
  std::string hosts_file;  // for messages and the header comment
  std::string shape_text;  // as given ("tree:2"), for the header comment
};

// "chain", "tree:K", "racks:K" into `options` (shape and fanout); the error, or empty.
std::string parse_plan_shape(std::string_view text, PlanOptions& options);

// The hosts of a hosts file, `port` for an address without one. Throws ConfigError naming
// every bad line (`file` in messages), or an empty file.
std::vector<PlanHost> parse_plan_hosts(std::string_view text, const std::string& file,
                                       uint16_t port);

// One node of a plan, before it is written out.
struct PlannedNode {
  std::string name;
  Endpoint listen;
  std::optional<Endpoint> metrics;
  std::vector<uint32_t> downstream;  // indexes into the plan
  uint32_t height = 0;               // hops to its deepest leaf
  uint32_t slots = 0;
};

struct Plan {
  std::vector<PlannedNode> nodes;  // host order
  std::vector<std::string> notes;  // what the reader of the file should know (capped windows)
};

// The shape over the hosts. Throws ConfigError naming the lines at fault (two hosts on one
// address, a name used twice, racks:K with a host that has no label).
Plan make_plan(const std::vector<PlanHost>& hosts, const PlanOptions& options);

// The topology file of a plan: TOML that validates (with every node's stage passthrough).
std::string write_plan(const Plan& plan, const PlanOptions& options);

}  // namespace hoprelay::config
