// `hoprelay send` and `hoprelay recv`: the CLI's producer and consumer, built on libhoprelay
// (hoprelay/client.hpp) like any application.
#pragma once

#include <cstdint>
#include <string>

namespace hoprelay::client {

// How a byte stream is cut into messages, the same on both sides (docs/client.md):
// raw (every --size bytes), lines (one message per line, without its newline) or length
// (a 4-byte big-endian length before each record).
enum class Framing { kRaw, kLines, kLength };

struct SendOptions {
  std::string topology;  // the path given on the command line
  std::string head;
  uint64_t count = 0;    // generated messages, when neither file nor stdin
  uint32_t size = 1024;  // generated size, or raw framing's message size
  std::string file;      // send this file
  bool stdin_stream = false;
  Framing framing = Framing::kRaw;
  double rate = 0;  // messages per second; 0 = as fast as credits allow
  bool stamp = false;
  // Generated messages by copy (hoprelay_producer_send) even when they fit a reserved buffer:
  // for comparing the copy with zero-copy reserve/commit (bench).
  bool copy = false;
  uint32_t origin = 0;
  uint64_t first_seq = 0;
  int connect_timeout_ms = 30000;
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
};
int run_recv(const RecvOptions& options);

}  // namespace hoprelay::client
