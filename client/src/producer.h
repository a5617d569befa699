// The producer side of `hoprelay send`: connects to a head node as a producer, posts messages
// from its own buffers as far as the head's credits allow, and keeps every message until the
// head acknowledges it (the head acknowledges once the message is safe downstream), replaying
// what was unacknowledged if the link drops.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::client {

struct ProducerOptions {
  uint64_t count = 0;    // generated messages (when file is empty)
  uint32_t size = 1024;  // generated message size, or the chunk size for a file
  std::string file;      // send this file's bytes, split into `size`-byte messages
  double rate = 0;       // messages per second; 0 = as fast as credits allow
  // Overwrite each message's first 8 bytes, just before its first post, with the send time:
  // CLOCK_MONOTONIC in nanoseconds, u64 in host (little-endian) order. For latency benchmarks
  // (bench/latency_stage.c reads it at the leaf); replaces the start of the payload pattern.
  bool stamp = false;
  uint32_t origin = 0;
  std::chrono::seconds connect_timeout{30};
};

struct ProducerResult {
  uint64_t messages = 0;
  uint64_t bytes = 0;
  double seconds = 0;  // first post to last acknowledgement
  bool ok = false;
  std::string error;
};

class Producer final : public transport::LinkEvents {
 public:
  Producer(transport::EventLoop& loop, ProducerOptions options);
  ~Producer();
  // Runs the loop until every message is acknowledged (or it fails).
  ProducerResult run(transport::Transport& transport, const transport::ConnectParams& head);

  bool admit(const transport::PeerInfo&, std::string& reason) override;
  void on_inbound_up(transport::InboundLink&) override {}
  void on_message(transport::InboundLink& link, transport::Slot& slot) override;
  void on_inbound_down(transport::InboundLink&, std::string_view) override {}
  void on_outbound_up(transport::OutboundLink& link) override;
  void on_outbound_down(transport::OutboundLink& link, std::string_view reason) override;
  void on_acked(transport::OutboundLink& link, void* cookie) override;
  void on_returned(transport::OutboundLink& link, void* cookie) override;
  void on_credit(transport::OutboundLink& link) override;

 private:
  struct Buffer {
    std::byte* data;
    uint32_t length;
    uint64_t seq;
  };
  bool fill(Buffer& b);   // next message into b; false when there is none left
  void stamp(Buffer& b);  // options_.stamp: the send time into b's first 8 bytes
  void pump();
  uint64_t total() const { return total_; }

  transport::EventLoop& loop_;
  ProducerOptions options_;
  transport::Transport* transport_ = nullptr;
  std::unique_ptr<transport::OutboundLink> link_;
  std::unique_ptr<transport::MemoryRegion> memory_;
  std::vector<Buffer> buffers_;
  std::vector<Buffer*> free_;
  daemon::RingQueue<Buffer*> resend_;
  std::vector<std::byte> file_bytes_;
  uint64_t total_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t acked_ = 0;
  uint64_t bytes_acked_ = 0;
  bool started_ = false;
  bool pacing_ = false;
  std::chrono::steady_clock::time_point t0_;
  std::chrono::steady_clock::time_point t_last_;
  std::string error_;
};

}  // namespace hoprelay::client
