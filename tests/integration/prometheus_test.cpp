// hoprelay under a real Prometheus: Debian's `prometheus` server scrapes an A->B->C pipeline on
// loopback and its HTTP API must show the traffic; `promtool` checks every node's exposition
// and the alert rules of docs/hoprelay-alerts.yml (syntax, and with `promtool test rules` that
// each alert fires on its condition and not on its look-alikes). Skipped when the tools are
// not installed (scripts/install-deps.sh installs the `prometheus` package, which has both).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>

#include "harness.h"
#include "pipeline.h"

namespace hoprelay::test {
namespace {

// Source tree root: HOPRELAY_TEST_PLUGIN_SRC is <root>/tests/plugins.
fs::path source_root() {
  return fs::path(HOPRELAY_TEST_PLUGIN_SRC).parent_path().parent_path();
}

fs::path alert_rules() {
  return source_root() / "docs" / "hoprelay-alerts.yml";
}

// `name` looked up in PATH (and the usual sbin directories); empty when not installed.
std::string find_tool(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/local/bin:/usr/bin:/bin:/usr/sbin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    fs::path p = fs::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// The Prometheus server under test: its HTTP API on 127.0.0.1:port.
struct PromApi {
  uint16_t port;

  // The raw JSON answer of an instant query.
  std::string query_json(const std::string& promql) const {
    return http_get(port, "/api/v1/query?query=" + url_encode(promql)).body;
  }
  // The value of an instant query that yields exactly one sample; NaN otherwise (no sample
  // yet, several, or an error). Aggregate (sum, count) to get one.
  double value(const std::string& promql) const {
    std::string json = query_json(promql);
    if (json.find("\"status\":\"success\"") == std::string::npos) return NAN;
    static const std::regex sample(R"re("value":\[[-+.eE0-9]+,"([^"]*)"\])re");
    auto begin = std::sregex_iterator(json.begin(), json.end(), sample);
    auto end = std::sregex_iterator();
    if (std::distance(begin, end) != 1) return NAN;
    return std::stod((*begin)[1]);
  }
};

// `promtool check metrics` on an exposition (promtool reads it on stdin). Its exit code: 0
// clean, 1 the text does not parse, 3 lint problems (listed on stderr, one per line).
RunResult promtool_check_metrics(const std::string& promtool, const TempDir& dir,
                                 const std::string& name, const std::string& exposition) {
  fs::path file = dir / (name + ".prom");
  write_file(file, exposition);
  return run({"/bin/sh", "-c", "exec \"$0\" check metrics < \"$1\"", promtool, file.string()}, 30s);
}

// Each alert of docs/hoprelay-alerts.yml on synthetic series: when it fires (or is pending)
// and that its look-alikes (another job, inbound links, a saturated but flowing link, a slow
// but acknowledging branch, an idle one, a link that is down, a node never fed, draining
// refusals, a bypass gauge at 0) do not make it fire.
const char* kRulesTest = R"yaml(
evaluation_interval: 1m
tests:
  # A node stops answering scrapes at 2m; another job's targets are not ours.
  - interval: 1m
    input_series:
      - series: 'up{job="hoprelay",instance="c:1"}'
        values: '1 1 0x10'
      - series: 'up{job="hoprelay",instance="b:1"}'
        values: '1x12'
      - series: 'up{job="other",instance="x:1"}'
        values: '0x12'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayNodeDown"}
        eval_time: 2m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayNodeDown",alertstate="pending",severity="critical",job="hoprelay",instance="c:1"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayNodeDown"}
        eval_time: 5m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayNodeDown",alertstate="firing",severity="critical",job="hoprelay",instance="c:1"}'
            value: 1
  # b's link to c goes down at 2m; inbound links (producers gone) do not count.
  - interval: 1m
    input_series:
      - series: 'hoprelay_link_up{job="hoprelay",instance="b:1",peer="c",direction="out"}'
        values: '1 1 0x10'
      - series: 'hoprelay_link_up{job="hoprelay",instance="a:1",peer="b",direction="out"}'
        values: '1x12'
      - series: 'hoprelay_link_up{job="hoprelay",instance="a:1",peer="producer",direction="in"}'
        values: '0x12'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayLinkDown"}
        eval_time: 5m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayLinkDown",alertstate="firing",severity="critical",job="hoprelay",instance="b:1",peer="c",direction="out"}'
            value: 1
  # a->b reconnects every minute; a->c reconnected once.
  - interval: 1m
    input_series:
      - series: 'hoprelay_link_reconnects_total{job="hoprelay",instance="a:1",peer="b"}'
        values: '_ 1+1x20'
      - series: 'hoprelay_link_reconnects_total{job="hoprelay",instance="a:1",peer="c"}'
        values: '_ 1x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayLinkFlapping"}
        eval_time: 16m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayLinkFlapping",alertstate="firing",severity="warning",job="hoprelay",instance="a:1",peer="b"}'
            value: 1
  # c receives until 10m, then nothing; b keeps receiving; d was never fed.
  - interval: 1m
    input_series:
      - series: 'hoprelay_messages_received_total{job="hoprelay",instance="c:1",peer="b"}'
        values: '0+100x10 1000x30'
      - series: 'hoprelay_messages_received_total{job="hoprelay",instance="b:1",peer="a"}'
        values: '0+100x40'
      - series: 'hoprelay_messages_received_total{job="hoprelay",instance="d:1",peer="producer"}'
        values: '0x40'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayNoTraffic"}
        eval_time: 19m
        exp_samples: []
      - expr: ALERTS{alertname="HoprelayNoTraffic"}
        eval_time: 24m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayNoTraffic",alertstate="pending",severity="warning",job="hoprelay",instance="c:1"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayNoTraffic"}
        eval_time: 40m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayNoTraffic",alertstate="firing",severity="warning",job="hoprelay",instance="c:1"}'
            value: 1
  # a->b: up, no credit, messages queued, nothing acknowledged: stuck. e->f: the same gauges
  # but acknowledging (saturated, not stuck). b->c: down, which is HoprelayLinkDown's job.
  - interval: 1m
    input_series:
      - series: 'hoprelay_link_credits{job="hoprelay",instance="a:1",peer="b"}'
        values: '0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="a:1",peer="b"}'
        values: '5x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="a:1",peer="b",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="a:1",peer="b"}'
        values: '100x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="e:1",peer="f"}'
        values: '0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="e:1",peer="f"}'
        values: '5x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="e:1",peer="f",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="e:1",peer="f"}'
        values: '0+100x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="b:1",peer="c"}'
        values: '0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="b:1",peer="c"}'
        values: '7x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="b:1",peer="c",direction="out"}'
        values: '0x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="b:1",peer="c"}'
        values: '50x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayBackpressureStuck"}
        eval_time: 5m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayBackpressureStuck",alertstate="pending",severity="critical",job="hoprelay",instance="a:1",peer="b"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayBackpressureStuck"}
        eval_time: 10m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayBackpressureStuck",alertstate="firing",severity="critical",job="hoprelay",instance="a:1",peer="b"}'
            value: 1
  # b's crc32c stage returns ERROR from 2m to 5m.
  - interval: 1m
    input_series:
      - series: 'hoprelay_stage_messages_total{job="hoprelay",instance="b:1",stage="crc32c",verdict="error"}'
        values: '0 0 5 10 15 20 20x20'
      - series: 'hoprelay_stage_messages_total{job="hoprelay",instance="b:1",stage="crc32c",verdict="forward"}'
        values: '0+100x25'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayStageErrors"}
        eval_time: 5m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayStageErrors",alertstate="firing",severity="warning",job="hoprelay",instance="b:1",stage="crc32c",verdict="error"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayStageErrors"}
        eval_time: 20m
        exp_samples: []
  # a drops 3 messages at 2m (its series appears then) and none after, b drops 2 at 3m (its
  # series exists from the start), c never drops any; duplicates do not count.
  - interval: 1m
    input_series:
      - series: 'hoprelay_messages_dropped_total{job="hoprelay",instance="a:1",reason="too_large_for_peer"}'
        values: '_ _ 3x20'
      - series: 'hoprelay_messages_dropped_total{job="hoprelay",instance="b:1",reason="too_large_for_peer"}'
        values: '0 0 0 2x20'
      - series: 'hoprelay_messages_dropped_total{job="hoprelay",instance="c:1",reason="too_large_for_peer"}'
        values: '0x20'
      - series: 'hoprelay_messages_dropped_total{job="hoprelay",instance="a:1",reason="duplicate"}'
        values: '0 0 3x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayMessagesTooLargeForPeer"}
        eval_time: 2m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayMessagesTooLargeForPeer",alertstate="firing",severity="critical",job="hoprelay",instance="a:1",reason="too_large_for_peer"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayMessagesTooLargeForPeer"}
        eval_time: 12m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayMessagesTooLargeForPeer",alertstate="firing",severity="critical",job="hoprelay",instance="b:1",reason="too_large_for_peer"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayMessagesTooLargeForPeer"}
        eval_time: 13m
        exp_samples: []
  # b refuses a stranger from 1m to 3m; refusals while draining do not alert, nor a series at 0.
  - interval: 1m
    input_series:
      - series: 'hoprelay_connections_rejected_total{job="hoprelay",instance="b:1",reason="not_upstream"}'
        values: '_ 1 2 3x20'
      - series: 'hoprelay_connections_rejected_total{job="hoprelay",instance="c:1",reason="producer_not_head"}'
        values: '0x20'
      - series: 'hoprelay_connections_rejected_total{job="hoprelay",instance="b:1",reason="draining"}'
        values: '_ 1+1x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayConnectionsRejected"}
        eval_time: 1m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayConnectionsRejected",alertstate="firing",severity="warning",job="hoprelay",instance="b:1",reason="not_upstream"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayConnectionsRejected"}
        eval_time: 12m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayConnectionsRejected",alertstate="firing",severity="warning",job="hoprelay",instance="b:1",reason="not_upstream"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayConnectionsRejected"}
        eval_time: 13m
        exp_samples: []
  # b's RDMA port goes down at 2m; c's stays ACTIVE.
  - interval: 1m
    input_series:
      - series: 'hoprelay_rdma_port_active{job="hoprelay",instance="b:1",device="rxe0",port="1"}'
        values: '1 1 0x10'
      - series: 'hoprelay_rdma_port_active{job="hoprelay",instance="c:1",device="rxe0",port="1"}'
        values: '1x12'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayRdmaPortDown"}
        eval_time: 2m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayRdmaPortDown",alertstate="pending",severity="critical",job="hoprelay",instance="b:1",device="rxe0",port="1"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayRdmaPortDown"}
        eval_time: 4m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayRdmaPortDown",alertstate="firing",severity="critical",job="hoprelay",instance="b:1",device="rxe0",port="1"}'
            value: 1
  # a's connects to b time out several times a minute from 1m; one stray timeout to c.
  - interval: 1m
    input_series:
      - series: 'hoprelay_rdma_connect_timeouts_total{job="hoprelay",instance="a:1",peer="b"}'
        values: '_ 1+6x20'
      - series: 'hoprelay_rdma_connect_timeouts_total{job="hoprelay",instance="a:1",peer="c"}'
        values: '_ 1x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayRdmaConnectTimeouts"}
        eval_time: 5m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayRdmaConnectTimeouts",alertstate="firing",severity="warning",job="hoprelay",instance="a:1",peer="b"}'
            value: 1
  # a spools for c from 0 and it only grows; its spool for b is old too, but shrinks (catching
  # up): only c's fires, once the oldest message is 15 minutes old and 5 minutes more pass.
  - interval: 1m
    input_series:
      - series: 'hoprelay_spool_age_seconds{job="hoprelay",instance="a:1",peer="c"}'
        values: '0+60x40'
      - series: 'hoprelay_spool_bytes{job="hoprelay",instance="a:1",peer="c"}'
        values: '0+1000000x40'
      - series: 'hoprelay_spool_age_seconds{job="hoprelay",instance="a:1",peer="b"}'
        values: '3600+60x40'
      - series: 'hoprelay_spool_bytes{job="hoprelay",instance="a:1",peer="b"}'
        values: '100000000-1000000x40'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelaySpoolGrowing"}
        eval_time: 16m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelaySpoolGrowing",alertstate="pending",severity="warning",job="hoprelay",instance="a:1",peer="c"}'
            value: 1
      - expr: ALERTS{alertname="HoprelaySpoolGrowing"}
        eval_time: 22m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelaySpoolGrowing",alertstate="firing",severity="warning",job="hoprelay",instance="a:1",peer="c"}'
            value: 1
  # Nothing acknowledged downstream from 3m on. Head h holds its producer's slots; relay r
  # holds its upstream's; head a has its producer connected and its messages in c's spool
  # (slots released, nothing queued). Head e spools for c too, but b still acknowledges; head d
  # has a producer connected and nothing waiting; g's spool is old and nobody is connected.
  - interval: 1m
    input_series:
      - series: 'hoprelay_link_up{job="hoprelay",instance="h:1",peer="producer",direction="in"}'
        values: '1x20'
      - series: 'hoprelay_link_slots_in_use{job="hoprelay",instance="h:1",peer="producer"}'
        values: '64x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="h:1",peer="b",opcode="tcp"}'
        values: '0+100x3 300x20'
      - series: 'hoprelay_link_slots_in_use{job="hoprelay",instance="r:1",peer="a"}'
        values: '10x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="r:1",peer="s",opcode="tcp"}'
        values: '0+10x3 30x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="a:1",peer="producer",direction="in"}'
        values: '1x20'
      - series: 'hoprelay_link_slots_in_use{job="hoprelay",instance="a:1",peer="producer"}'
        values: '0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="a:1",peer="b"}'
        values: '0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="a:1",peer="c"}'
        values: '0x20'
      - series: 'hoprelay_spool_messages{job="hoprelay",instance="a:1",peer="b"}'
        values: '0x20'
      - series: 'hoprelay_spool_messages{job="hoprelay",instance="a:1",peer="c"}'
        values: '0+50x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="a:1",peer="b",opcode="tcp"}'
        values: '0+100x3 300x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="a:1",peer="c",opcode="tcp"}'
        values: '40x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="e:1",peer="producer",direction="in"}'
        values: '1x20'
      - series: 'hoprelay_link_slots_in_use{job="hoprelay",instance="e:1",peer="producer"}'
        values: '0x20'
      - series: 'hoprelay_spool_messages{job="hoprelay",instance="e:1",peer="c"}'
        values: '0+50x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="e:1",peer="b",opcode="tcp"}'
        values: '0+100x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="e:1",peer="c",opcode="tcp"}'
        values: '40x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="d:1",peer="producer",direction="in"}'
        values: '1x20'
      - series: 'hoprelay_link_slots_in_use{job="hoprelay",instance="d:1",peer="producer"}'
        values: '0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="d:1",peer="b"}'
        values: '0x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="d:1",peer="b",opcode="tcp"}'
        values: '500x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="g:1",peer="producer",direction="in"}'
        values: '0x20'
      - series: 'hoprelay_link_slots_in_use{job="hoprelay",instance="g:1",peer="producer"}'
        values: '0x20'
      - series: 'hoprelay_spool_messages{job="hoprelay",instance="g:1",peer="c"}'
        values: '800x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="g:1",peer="c",opcode="tcp"}'
        values: '40x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayNoProgress"}
        eval_time: 7m
        exp_samples: []
      - expr: ALERTS{alertname="HoprelayNoProgress"}
        eval_time: 8m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayNoProgress",alertstate="pending",severity="critical",job="hoprelay",instance="h:1"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayNoProgress",alertstate="pending",severity="critical",job="hoprelay",instance="r:1"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayNoProgress",alertstate="pending",severity="critical",job="hoprelay",instance="a:1"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayNoProgress"}
        eval_time: 13m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayNoProgress",alertstate="firing",severity="critical",job="hoprelay",instance="h:1"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayNoProgress",alertstate="firing",severity="critical",job="hoprelay",instance="r:1"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayNoProgress",alertstate="firing",severity="critical",job="hoprelay",instance="a:1"}'
            value: 1
  # Links up, no acknowledgement from 3m on. s's branch c is spooled (a few frames in flight:
  # credits 60 of 64, nothing queued, no slot held: all on disk); x->d has its last 10 frames
  # in flight while x holds them; e->k's window is full with nothing queued.
  # HoprelayBackpressureStuck, which wants queued messages, says nothing of any of them.
  # Silent: a->b slow but acknowledging, x->h idle (all credits back) while x holds d's
  # frames, e->g down with its spool (HoprelayLinkDown's), i->m with fewer credits than it
  # had (m came back with fewer slots) on a node that holds nothing.
  - interval: 1m
    input_series:
      - series: 'hoprelay_link_up{job="hoprelay",instance="s:1",peer="c",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="s:1",peer="c"}'
        values: '64 64 64 60x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="s:1",peer="c"}'
        values: '0x20'
      - series: 'hoprelay_spool_messages{job="hoprelay",instance="s:1",peer="c"}'
        values: '0 0 0 10+10x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="s:1",peer="c",opcode="tcp"}'
        values: '0+100x3 300x20'
      - series: 'hoprelay_slots_in_use{job="hoprelay",instance="s:1"}'
        values: '0x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="a:1",peer="b",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="a:1",peer="b"}'
        values: '0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="a:1",peer="b"}'
        values: '3x20'
      - series: 'hoprelay_spool_messages{job="hoprelay",instance="a:1",peer="b"}'
        values: '0x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="a:1",peer="b",opcode="tcp"}'
        values: '0+1x20'
      - series: 'hoprelay_slots_in_use{job="hoprelay",instance="a:1"}'
        values: '3x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="x:1",peer="d",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="x:1",peer="d"}'
        values: '64 64 64 54x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="x:1",peer="d"}'
        values: '0x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="x:1",peer="d",opcode="tcp"}'
        values: '0+100x3 300x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="x:1",peer="h",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="x:1",peer="h"}'
        values: '64x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="x:1",peer="h"}'
        values: '0x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="x:1",peer="h",opcode="tcp"}'
        values: '700x20'
      - series: 'hoprelay_slots_in_use{job="hoprelay",instance="x:1"}'
        values: '0 0 0 10x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="e:1",peer="k",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="e:1",peer="k"}'
        values: '8 8 8 0x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="e:1",peer="k"}'
        values: '0x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="e:1",peer="k",opcode="tcp"}'
        values: '0+8x3 24x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="e:1",peer="g",direction="out"}'
        values: '0x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="e:1",peer="g"}'
        values: '0x20'
      - series: 'hoprelay_spool_messages{job="hoprelay",instance="e:1",peer="g"}'
        values: '100+10x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="e:1",peer="g",opcode="tcp"}'
        values: '50x20'
      - series: 'hoprelay_link_up{job="hoprelay",instance="i:1",peer="m",direction="out"}'
        values: '1x20'
      - series: 'hoprelay_link_credits{job="hoprelay",instance="i:1",peer="m"}'
        values: '64 64 64 32x20'
      - series: 'hoprelay_downstream_queued{job="hoprelay",instance="i:1",peer="m"}'
        values: '0x20'
      - series: 'hoprelay_messages_forwarded_total{job="hoprelay",instance="i:1",peer="m",opcode="tcp"}'
        values: '900x20'
      - series: 'hoprelay_slots_in_use{job="hoprelay",instance="i:1"}'
        values: '0x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayBranchFrozen"}
        eval_time: 4m
        exp_samples: []
      - expr: ALERTS{alertname="HoprelayBranchFrozen"}
        eval_time: 5m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayBranchFrozen",alertstate="pending",severity="critical",job="hoprelay",instance="s:1",peer="c",direction="out"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayBranchFrozen",alertstate="pending",severity="critical",job="hoprelay",instance="x:1",peer="d",direction="out"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayBranchFrozen",alertstate="pending",severity="critical",job="hoprelay",instance="e:1",peer="k",direction="out"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayBranchFrozen"}
        eval_time: 6m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayBranchFrozen",alertstate="firing",severity="critical",job="hoprelay",instance="s:1",peer="c",direction="out"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayBranchFrozen",alertstate="firing",severity="critical",job="hoprelay",instance="x:1",peer="d",direction="out"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayBranchFrozen",alertstate="firing",severity="critical",job="hoprelay",instance="e:1",peer="k",direction="out"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayBackpressureStuck"}
        eval_time: 15m
        exp_samples: []
  # b stands in for its relay b1 from 2m to 6m; c's gauge for c1 stays at 0.
  - interval: 1m
    input_series:
      - series: 'hoprelay_bypass_active{job="hoprelay",instance="b:1",peer="b1"}'
        values: '0 0 1x4 0x10'
      - series: 'hoprelay_bypass_active{job="hoprelay",instance="c:1",peer="c1"}'
        values: '0x16'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayBypassActive"}
        eval_time: 1m
        exp_samples: []
      - expr: ALERTS{alertname="HoprelayBypassActive"}
        eval_time: 2m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayBypassActive",alertstate="firing",severity="warning",job="hoprelay",instance="b:1",peer="b1"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayBypassActive"}
        eval_time: 7m
        exp_samples: []
  # b counts one stale release at 2m; c's first scrape (at 2m) already shows two double
  # releases; b's double_release stays at 0.
  - interval: 1m
    input_series:
      - series: 'hoprelay_invariant_violations_total{job="hoprelay",instance="b:1",kind="stale_release"}'
        values: '0 0 1x20'
      - series: 'hoprelay_invariant_violations_total{job="hoprelay",instance="b:1",kind="double_release"}'
        values: '0x22'
      - series: 'hoprelay_invariant_violations_total{job="hoprelay",instance="c:1",kind="double_release"}'
        values: '_ _ 2x20'
    promql_expr_test:
      - expr: ALERTS{alertname="HoprelayInvariantViolation"}
        eval_time: 1m
        exp_samples: []
      - expr: ALERTS{alertname="HoprelayInvariantViolation"}
        eval_time: 2m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayInvariantViolation",alertstate="firing",severity="critical",job="hoprelay",instance="b:1",kind="stale_release"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayInvariantViolation",alertstate="firing",severity="critical",job="hoprelay",instance="c:1",kind="double_release"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayInvariantViolation"}
        eval_time: 11m
        exp_samples:
          - labels: 'ALERTS{alertname="HoprelayInvariantViolation",alertstate="firing",severity="critical",job="hoprelay",instance="b:1",kind="stale_release"}'
            value: 1
          - labels: 'ALERTS{alertname="HoprelayInvariantViolation",alertstate="firing",severity="critical",job="hoprelay",instance="c:1",kind="double_release"}'
            value: 1
      - expr: ALERTS{alertname="HoprelayInvariantViolation"}
        eval_time: 12m
        exp_samples: []
)yaml";

}  // namespace

TEST(PrometheusRules, PromtoolAcceptsTheAlertRules) {
  std::string promtool = find_tool("promtool");
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  RunResult r = run({promtool, "check", "rules", alert_rules().string()}, 60s);
  EXPECT_EQ(r.code, 0) << r.output;
  // Every rule of the file was read.
  size_t rules = occurrences(read_file(alert_rules()), "- alert: ");
  EXPECT_GE(rules, 5u);
  EXPECT_NE(r.output.find("SUCCESS: " + std::to_string(rules) + " rules found"), std::string::npos)
      << r.output;
}

TEST(PrometheusRules, EachAlertFiresOnItsConditionOnly) {
  std::string promtool = find_tool("promtool");
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  TempDir dir;
  write_file(dir / "rules_test.yml",
             "rule_files: ['" + alert_rules().string() + "']\n" + std::string(kRulesTest));
  RunResult r = run({promtool, "test", "rules", (dir / "rules_test.yml").string()}, 60s);
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(Prometheus, ScrapesThePipelineAndSeesTheTraffic) {
  std::string prometheus = find_tool("prometheus");
  std::string promtool = find_tool("promtool");
  if (prometheus.empty() || promtool.empty()) {
    GTEST_SKIP() << "prometheus/promtool not installed (Debian package prometheus)";
  }
  TempDir dir;
  Pipeline p(dir, {{"a", {"b"}}, {"b", {"c"}}, {"c", {}, sink(dir, "c")}});
  p.start_all();
  auto instance = [&](const std::string& node) {
    return "127.0.0.1:" + std::to_string(p.node(node).metrics);
  };
  // The label matchers of a node's series, e.g. {job="hoprelay",instance="127.0.0.1:1234"}.
  auto matchers = [&](const std::string& node, const std::string& labels = "") {
    return "job=\"hoprelay\",instance=\"" + instance(node) + "\"" +
           (labels.empty() ? "" : "," + labels);
  };
  auto sel = [&](const std::string& node, const std::string& labels = "") {
    return "{" + matchers(node, labels) + "}";
  };

  // The scrape configuration docs/metrics.md recommends, scraping every second, and the alert
  // rules evaluated every second.
  uint16_t port = free_port();
  std::ostringstream conf;
  conf << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
       << "rule_files:\n  - '" << alert_rules().string() << "'\n"
       << "scrape_configs:\n  - job_name: hoprelay\n    static_configs:\n      - targets: ['"
       << instance("a") << "', '" << instance("b") << "', '" << instance("c") << "']\n";
  write_file(dir / "prometheus.yml", conf.str());
  Process prom({prometheus, "--config.file=" + (dir / "prometheus.yml").string(),
                "--storage.tsdb.path=" + (dir / "tsdb").string(),
                "--web.listen-address=127.0.0.1:" + std::to_string(port)},
               dir / "prometheus.log");
  PromApi api{port};
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/-/ready").status == 200; }, 30s))
      << "prometheus did not become ready:\n"
      << prom.output();

  // Every node scraped, and before any traffic nothing received yet. Every inbound series
  // exists from start, a's producer series too: were it to appear with the first producer, a
  // send that fits between two scrapes would be first seen at its total, rate() would be 0
  // and HoprelayNoTraffic would be pending below.
  ASSERT_TRUE(wait_until([&] { return api.value("count(up{job=\"hoprelay\"} == 1)") == 3; }, 20s))
      << api.query_json("up") << "\n"
      << prom.output();
  EXPECT_EQ(api.value("sum(hoprelay_messages_received_total{job=\"hoprelay\"})"), 0)
      << api.query_json("hoprelay_messages_received_total");
  EXPECT_EQ(
      api.value("count(hoprelay_messages_received_total" + sel("a", "peer=\"producer\"") + ")"), 1)
      << api.query_json("hoprelay_messages_received_total");
  EXPECT_EQ(api.value("count(hoprelay_link_up" + sel("a", "peer=\"producer\",direction=\"in\"") +
                      " == 0)"),
            1)
      << api.query_json("hoprelay_link_up");
  EXPECT_EQ(api.value("count(hoprelay_build_info" + sel("b", "node=\"b\"") + ")"), 1)
      << api.query_json("hoprelay_build_info");

  const long long n = 5000, size = 512;
  ASSERT_EQ(p.send("a", n, size).code, 0);
  ASSERT_TRUE(wait_until([&] { return report_has(dir, "c", n); }, 10s));
  // Wait for the scrape that saw it all: every hop received n and every acknowledgement is in.
  ASSERT_TRUE(wait_until(
      [&] {
        return api.value("sum(hoprelay_messages_received_total{job=\"hoprelay\"})") == 3 * n &&
               api.value("sum(hoprelay_messages_forwarded_total{job=\"hoprelay\"})") == 2 * n;
      },
      20s))
      << api.query_json("hoprelay_messages_received_total") << "\n"
      << api.query_json("hoprelay_messages_forwarded_total");

  // Per node, per peer, as Prometheus stored them.
  auto v = [&](const std::string& metric, const std::string& node, const std::string& labels) {
    return api.value("sum(" + metric + sel(node, labels) + ")");
  };
  EXPECT_EQ(v("hoprelay_messages_received_total", "a", "peer=\"producer\""), n);
  EXPECT_EQ(v("hoprelay_received_bytes_total", "a", "peer=\"producer\""), n * size);
  EXPECT_EQ(v("hoprelay_messages_forwarded_total", "a", "peer=\"b\""), n);
  EXPECT_EQ(v("hoprelay_forwarded_bytes_total", "a", "peer=\"b\""), n * size);
  EXPECT_EQ(v("hoprelay_messages_received_total", "b", "peer=\"a\""), n);
  EXPECT_EQ(v("hoprelay_messages_forwarded_total", "b", "peer=\"c\""), n);
  EXPECT_EQ(v("hoprelay_messages_received_total", "c", "peer=\"b\""), n);
  EXPECT_EQ(v("hoprelay_stage_messages_total", "c", "stage=\"verify-sink\",verdict=\"forward\""),
            n);
  EXPECT_EQ(v("hoprelay_stage_messages_total", "c", "verdict=\"error\""), 0);
  EXPECT_EQ(v("hoprelay_messages_dropped_total", "b", ""), 0);
  // Histograms arrive as _bucket/_count/_sum series: one residence observation per message.
  EXPECT_EQ(v("hoprelay_residence_seconds_count", "a", ""), n);
  EXPECT_EQ(v("hoprelay_residence_seconds_bucket", "b", "le=\"+Inf\""), n);
  EXPECT_EQ(v("hoprelay_link_up", "a", "peer=\"b\",direction=\"out\""), 1);
  EXPECT_EQ(v("hoprelay_link_up", "b", "peer=\"c\",direction=\"out\""), 1);

  // The Grafana dashboard, the way Grafana uses it: every panel's query, with the dashboard's
  // variables as Grafana substitutes them (all nodes of the job), parses and returns a series.
  std::string dashboard = read_file(source_root() / "docs" / "grafana-dashboard.json");
  static const std::regex expr_re(R"re("expr": "((?:[^"\\]|\\.)*)")re");
  size_t exprs = 0;
  for (auto it = std::sregex_iterator(dashboard.begin(), dashboard.end(), expr_re);
       it != std::sregex_iterator(); ++it) {
    std::string expr = std::regex_replace((*it)[1].str(), std::regex(R"(\\")"), "\"");
    expr = std::regex_replace(expr, std::regex(R"(\$job)"), "hoprelay");
    expr = std::regex_replace(expr, std::regex(R"(\$instance)"), ".+");
    expr = std::regex_replace(expr, std::regex(R"(\$__rate_interval)"), "1m");
    ++exprs;
    std::string json;
    EXPECT_TRUE(wait_until(
        [&] {
          json = api.query_json(expr);
          return json.find("\"status\":\"success\"") != std::string::npos &&
                 json.find("\"result\":[{") != std::string::npos;
        },
        10s))
        << "dashboard query returns no series or does not parse: " << expr << "\n"
        << json;
  }
  EXPECT_GE(exprs, 16u) << "panels' expr not found in docs/grafana-dashboard.json";

  // promtool lints what each node exposes, now that every series exists.
  for (const char* node : {"a", "b", "c"}) {
    std::string exposition = scrape(p.node(node).metrics);
    ASSERT_FALSE(exposition.empty()) << node;
    RunResult r = promtool_check_metrics(promtool, dir, node, exposition);
    EXPECT_EQ(r.code, 0) << "promtool check metrics on node " << node << " (exit 1: does not "
                         << "parse, 3: lint problems):\n"
                         << r.output;
  }

  // Every alert rule loaded and evaluated without error, and none pending on a healthy
  // pipeline.
  size_t rules = occurrences(read_file(alert_rules()), "- alert: ");
  std::string rules_json;
  EXPECT_TRUE(wait_until(
      [&] {
        rules_json = http_get(port, "/api/v1/rules").body;
        return occurrences(rules_json, "\"health\":\"ok\"") == rules;
      },
      10s))
      << rules_json;
  EXPECT_EQ(occurrences(rules_json, "\"health\":\"err\""), 0u) << rules_json;
  EXPECT_TRUE(std::isnan(api.value("count(ALERTS)"))) << api.query_json("ALERTS");

  // The sink stops: Prometheus sees it down, and b's link to it; both alerts become pending.
  p.proc("c").signal(SIGTERM);
  EXPECT_EQ(p.proc("c").wait(20s), 0) << p.proc("c").output();
  EXPECT_TRUE(wait_until(
      [&] {
        return api.value("count(ALERTS" + sel("c", "alertname=\"HoprelayNodeDown\"") + ")") == 1 &&
               api.value("count(ALERTS" + sel("b", "alertname=\"HoprelayLinkDown\",peer=\"c\"") +
                         ")") == 1;
      },
      15s))
      << api.query_json("ALERTS") << "\n"
      << api.query_json("up") << "\n"
      << api.query_json("hoprelay_link_up");

  prom.signal(SIGTERM);
  EXPECT_EQ(prom.wait(20s), 0) << prom.output();
  p.stop_all();
}

}  // namespace hoprelay::test
