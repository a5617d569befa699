// The producer side of `hoprelay send`: connects to a head node as a producer, posts messages
// from its own buffers as far as the head's credits allow, and keeps every message until the
// head acknowledges it (the head acknowledges once the message is safe downstream), replaying
// what was unacknowledged if the link drops.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::client {

struct ProducerOptions {
  uint64_t count = 0;  // generated messages (when file is empty)
  // Generated message size, or how many bytes of the file make one message. A message larger
  // than the head's slot_size goes as chunks of slot_size (docs/protocol.md, "Chunks").
  uint32_t size = 1024;
  std::string file;  // send this file's bytes, split into `size`-byte messages
  double rate = 0;   // messages per second; 0 = as fast as credits allow
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
  // One frame's memory: a whole message, or one chunk of one.
  struct Buffer {
    std::byte* data;
    uint32_t length;
    uint64_t seq;
    uint32_t chunk;
    uint16_t flags;  // transport::kFlagMore on every chunk but a message's last
  };
  // The next frame into b: the next chunk of the current message, or the first of the next
  // message. False when there is nothing left to send.
  bool fill(Buffer& b);
  // Makes message next_seq_ current (message_).
  void start_message();
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
  std::vector<std::byte> generated_;    // a generated message larger than one chunk
  std::span<const std::byte> message_;  // the message being sent, chunk by chunk
  uint32_t chunk_size_ = 0;             // the head's slot payload (its welcome)
  uint32_t message_offset_ = 0;         // how much of message_ went into buffers
  uint32_t message_chunk_ = 0;          // index of its next chunk
  bool in_message_ = false;             // message_ has bytes left to send
  uint64_t total_ = 0;
  uint64_t next_seq_ = 0;  // the next message to start
  uint64_t acked_ = 0;
  uint64_t bytes_acked_ = 0;
  bool started_ = false;
  bool pacing_ = false;
  std::chrono::steady_clock::time_point t0_;
  std::chrono::steady_clock::time_point t_last_;
  std::string error_;
};

}  // namespace hoprelay::client
