// `hoprelay status`: the whole pipeline on one screen, from every node's metrics endpoint.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "hoprelay/config/topology.h"

namespace hoprelay::client {

// One scrape of a node: every sample, keyed by "name{labels}" as exposed.
using Samples = std::map<std::string, double>;

// Parses Prometheus text exposition (comments and blank lines skipped).
Samples parse_exposition(const std::string& text);
// Sum of the samples of `metric` whose labels contain `label` (empty: all of them).
double sum(const Samples& s, const std::string& metric, const std::string& label = "");

// GET http://ADDRESS/metrics with a timeout; nullopt when the node does not answer.
std::optional<std::string> fetch_metrics(const config::Endpoint& address,
                                         std::chrono::milliseconds timeout);

// Scrapes every node twice, `interval` apart, and prints one table (after clearing the
// terminal with `clear_screen`). Returns 0 when every node with a metrics address answered, 1
// otherwise.
int run_status(const config::Topology& topology, std::chrono::milliseconds interval,
               bool clear_screen = false);
// run_status() again and again until interrupted: a new table every `interval` or so.
[[noreturn]] void watch_status(const config::Topology& topology,
                               std::chrono::milliseconds interval);

}  // namespace hoprelay::client
