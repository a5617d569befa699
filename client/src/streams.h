// `hoprelay send` and `hoprelay recv`: the CLI's producer and consumer, built on libhoprelay
// (hoprelay/client.hpp) like any application.
#pragma once

#include "hoprelay/client.h"
#include "spdlog/spdlog.h"

#include <cstdint>
#include <string>

namespace hoprelay::client {

// --tls-cert, --tls-key, --tls-ca (all or none): TLS credentials in place of the topology's.
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
};

// libhoprelay's log callback (hoprelay_log_fn) for the CLI: into its spdlog logger, whose
// level (--log-level) filters.
inline void log_line(void*, int level, const char* line) {
  auto l = level >= HOPRELAY_CLIENT_LOG_ERROR  ? spdlog::level::err
           : level >= HOPRELAY_CLIENT_LOG_WARN ? spdlog::level::warn
           : level >= HOPRELAY_CLIENT_LOG_INFO ? spdlog::level::info
                                               : spdlog::level::debug;
  spdlog::log(l, "{}", line);
}

// The exit status of `send` and `recv` for a libhoprelay status, as hoprelayd's (sysexits):
// 78 (EX_CONFIG) for a topology or node the command was given wrong, 69 (EX_UNAVAILABLE) when
// the node cannot run here now (its port is taken, no RDMA device, or the device went away):
// worth trying again later, as systemd does for hoprelayd. 1 for anything else.
inline int exit_code_of(int status) {
  if (status == HOPRELAY_ECONFIG || status == HOPRELAY_ENODE) return 78;
  if (status == HOPRELAY_EUNAVAILABLE) return 69;
  return 1;
}

// How a byte stream is cut into messages, the same on both sides (docs/client.md):
// raw (every --size bytes), lines (one message per line, without its newline) or length
// (a 4-byte big-endian length before each record).
enum class Framing { kRaw, kLines, kLength };

struct SendOptions {
  std::string topology;  // the path given on the command line
  std::string head;
  std::string head_address;  // the head's listen HOST:PORT, for the waiting notice
  uint64_t count = 0;        // generated messages, when neither file nor stdin
  uint32_t size = 1024;      // generated size, or raw framing's message size
  std::string file;          // send this file
  bool stdin_stream = false;
  Framing framing = Framing::kRaw;
  double rate = 0;  // messages per second; 0 = as fast as credits allow
  bool stamp = false;
  // Generated messages hold their pattern header only, not the whole pattern (--fill header).
  bool fill_header = false;
  // Generated messages by copy (hoprelay_producer_send) even when they fit a reserved buffer:
  // for comparing the copy with zero-copy reserve/commit (bench).
  bool copy = false;
  uint32_t origin = 0;
  uint64_t first_seq = 0;
  // The input is the one an interrupted send of this origin was sending: the messages the
  // head had already (repeats) are the part it got through, not an error.
  bool resume = false;
  // Run the head node in this process (hoprelay_producer_options.run_head).
  bool run_head = false;
  int connect_timeout_ms = 30000;
  TlsFiles tls;
  // How long the close waits for the end mark's acknowledgement (-1: as long as it takes).
  int close_timeout_ms = 10000;
  // --wait-all: then wait until every host has every message (spool_wait.h), up to
  // wait_all_ms (-1: as long as it takes).
  bool wait_all = false;
  int wait_all_ms = -1;
  // --json: the summary as one JSON object on standard output instead of its lines.
  bool json = false;
};
// Prints the summary line; returns the process's exit status.
int run_send(const SendOptions& options);

struct RecvOptions {
  std::string topology;
  std::string node;
  std::string output;  // empty: standard output
  Framing framing = Framing::kRaw;
  uint64_t count = 0;    // stop after this many messages (0: by streams)
  uint64_t streams = 1;  // stop once this many streams have ended whole
  double timeout_s = 0;  // give up after this long without a message (0: never)
  // The consumer's durable position (libhoprelay's state_dir): the output is made durable,
  // then the position; on restart the output is cut back to the last recorded position.
  std::string state_dir;
  TlsFiles tls;
};
int run_recv(const RecvOptions& options);

}  // namespace hoprelay::client
