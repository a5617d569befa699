#include "status.h"

#include <curl/curl.h>

#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

namespace hoprelay::client {

Samples parse_exposition(const std::string& text) {
  Samples out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // The value is the last field (no timestamps in prometheus-cpp's exposition).
    size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    } catch (...) {
      // Not a sample line; skip it rather than fail the whole screen.
    }
  }
  return out;
}

double sum(const Samples& s, const std::string& metric, const std::string& label) {
  double total = 0;
  for (auto it = s.lower_bound(metric); it != s.end(); ++it) {
    const std::string& key = it->first;
    if (key.compare(0, metric.size(), metric) != 0) break;
    char next = key.size() > metric.size() ? key[metric.size()] : '\0';
    if (next != '{' && next != '\0') continue;  // a longer name with the same prefix
    if (!label.empty() && key.find(label) == std::string::npos) continue;
    total += it->second;
  }
  return total;
}

namespace {

size_t append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct Row {
  std::string node;
  std::optional<Samples> first, second;
};

std::string rate(double now, double before, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f", (now - before) / seconds);
  return buf;
}

}  // namespace

std::optional<std::string> fetch_metrics(const config::Endpoint& address,
                                         std::chrono::milliseconds timeout) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return std::nullopt;
  std::string url = "http://" + address.to_string() + "/metrics";
  std::string body;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &body);
  long code = 0;
  if (curl_easy_perform(curl.get()) != CURLE_OK) return std::nullopt;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) return std::nullopt;
  return body;
}

int run_status(const config::Topology& topology, std::chrono::milliseconds interval,
               bool clear_screen) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  constexpr auto kTimeout = std::chrono::milliseconds(1000);
  std::vector<Row> rows;
  for (const auto& n : topology.nodes) {
    Row r{n.name, std::nullopt, std::nullopt};
    if (n.metrics) {
      if (auto text = fetch_metrics(*n.metrics, kTimeout)) r.first = parse_exposition(*text);
    }
    rows.push_back(std::move(r));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(interval);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& n = topology.nodes[i];
    if (n.metrics && rows[i].first) {
      if (auto text = fetch_metrics(*n.metrics, kTimeout)) rows[i].second = parse_exposition(*text);
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Cleared only now, after the scrapes, so that the table is never off the screen for long.
  if (clear_screen) std::printf("\x1b[H\x1b[2J");
  const size_t links = topology.link_count();
  std::printf("pipeline %s (%s): %zu node%s, %zu link%s\n", topology.name.c_str(),
              topology.path.c_str(), topology.nodes.size(), topology.nodes.size() == 1 ? "" : "s",
              links, links == 1 ? "" : "s");
  std::printf("%-14s %-5s %-9s %-7s %-7s %10s %10s %6s %7s %8s %8s %7s\n", "NODE", "STATE",
              "TRANSPORT", "IN", "OUT", "MSG/S IN", "MSG/S OUT", "HELD", "QUEUED", "SPOOLED",
              "DROPPED", "ERRORS");
  int status = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& n = topology.nodes[i];
    const Row& r = rows[i];
    if (!n.metrics) {
      std::printf("%-14s %-5s (no metrics address in the topology)\n", n.name.c_str(), "?");
      continue;
    }
    if (!r.first || !r.second) {
      std::printf("%-14s %-5s (no answer from %s)\n", n.name.c_str(), "DOWN",
                  n.metrics->to_string().c_str());
      status = 1;
      continue;
    }
    const Samples& a = *r.first;
    const Samples& b = *r.second;
    std::string transport = "?";
    for (const auto& [key, value] : b) {
      if (key.rfind("hoprelay_build_info{", 0) != 0) continue;
      auto at = key.find("transport=\"");
      if (at != std::string::npos) {
        transport = key.substr(at + 11, key.find('"', at + 11) - at - 11);
      }
    }
    char in[16], out[16];
    std::snprintf(in, sizeof(in), "%.0f", sum(b, "hoprelay_link_up", "direction=\"in\""));
    std::snprintf(out, sizeof(out), "%.0f/%zu", sum(b, "hoprelay_link_up", "direction=\"out\""),
                  n.downstream.size());
    // Not reason="duplicate": a replay after a failure that the node had already taken is
    // acknowledged and deduplicated, not lost (docs/guarantees.md).
    double dropped = sum(b, "hoprelay_messages_dropped_total") -
                     sum(b, "hoprelay_messages_dropped_total", "reason=\"duplicate\"");
    double errors = sum(b, "hoprelay_stage_messages_total", "verdict=\"error\"");
    std::printf("%-14s %-5s %-9s %-7s %-7s %10s %10s %6.0f %7.0f %8.0f %8.0f %7.0f\n",
                n.name.c_str(), "up", transport.c_str(), in, out,
                rate(sum(b, "hoprelay_messages_received_total"),
                     sum(a, "hoprelay_messages_received_total"), seconds)
                    .c_str(),
                rate(sum(b, "hoprelay_messages_forwarded_total"),
                     sum(a, "hoprelay_messages_forwarded_total"), seconds)
                    .c_str(),
                sum(b, "hoprelay_slots_in_use"), sum(b, "hoprelay_downstream_queued"),
                sum(b, "hoprelay_spool_messages"), dropped, errors);
  }
  curl_global_cleanup();
  return status;
}

void watch_status(const config::Topology& topology, std::chrono::milliseconds interval) {
  // On a terminal, in place like top(1); into a pipe or a file, one block after another (an
  // empty line between them), each flushed as it is complete.
  const bool terminal = ::isatty(STDOUT_FILENO);
  for (bool first = true;; first = false) {
    if (!terminal && !first) std::printf("\n");
    run_status(topology, interval, terminal);
    std::fflush(stdout);
  }
}

}  // namespace hoprelay::client
