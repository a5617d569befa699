#include "producer.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>

#include "hoprelay/stages/pattern.h"
#include "hoprelay/transport/log.h"

namespace hoprelay::client {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("send");
  return *logger;
}

}  // namespace

Producer::Producer(transport::EventLoop& loop, ProducerOptions options)
    : loop_(loop), options_(std::move(options)) {
  if (!options_.file.empty()) {
    std::ifstream in(options_.file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + options_.file);
    in.seekg(0, std::ios::end);
    file_bytes_.resize(static_cast<size_t>(in.tellg()));
    in.seekg(0);
    in.read(reinterpret_cast<char*>(file_bytes_.data()),
            static_cast<std::streamsize>(file_bytes_.size()));
    total_ = (file_bytes_.size() + options_.size - 1) / options_.size;
  } else {
    total_ = options_.count;
  }
}

Producer::~Producer() {
  link_.reset();
}

bool Producer::admit(const transport::PeerInfo&, std::string& reason) {
  reason = "a producer accepts no connections";
  return false;
}

void Producer::on_message(transport::InboundLink& link, transport::Slot& slot) {
  link.release(slot);
}

ProducerResult Producer::run(transport::Transport& transport,
                             const transport::ConnectParams& head) {
  transport_ = &transport;
  ProducerResult r;
  if (total_ == 0) {
    r.ok = true;
    return r;
  }
  link_ = transport.connect(head);
  auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
  while (!loop_.stopped()) {
    loop_.run_once(std::chrono::milliseconds(100));
    if (!started_ && std::chrono::steady_clock::now() > deadline) {
      error_ = "no connection to " + head.peer_name + " at " + head.address.to_string() +
               " within " + std::to_string(options_.connect_timeout.count()) +
               " s: is hoprelayd running there, and is this a head node?";
      break;
    }
  }
  // Links and registered memory go before the transport that owns their device.
  link_->close();
  link_.reset();
  r.messages = acked_;
  r.bytes = bytes_acked_;
  r.seconds = std::chrono::duration<double>(t_last_ - t0_).count();
  r.ok = error_.empty() && acked_ == total_;
  r.error = error_;
  resend_.clear();
  free_.clear();
  buffers_.clear();
  memory_.reset();
  return r;
}

void Producer::on_outbound_up(transport::OutboundLink& link) {
  if (!memory_) {
    // One buffer per credit the head grants: the producer can never have more in flight.
    uint32_t n = link.credits();
    chunk_size_ = std::min(options_.size, link.max_payload());
    size_t stride = (chunk_size_ + 63) & ~size_t{63};
    memory_ = transport_->allocate(stride * n);
    buffers_.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      buffers_[i] = {memory_->data() + i * stride, 0, 0};
      free_.push_back(&buffers_[i]);
    }
    started_ = true;
    t0_ = std::chrono::steady_clock::now();
  }
}

void Producer::on_outbound_down(transport::OutboundLink&, std::string_view reason) {
  if (acked_ == total_) return;  // closed at the end, everything acknowledged
  log().warn("link to head down ({}); {} messages will be sent again", reason, resend_.size());
}

void Producer::start_message() {
  uint64_t seq = next_seq_++;
  if (!file_bytes_.empty()) {
    size_t off = seq * options_.size;
    size_t len = std::min<size_t>(options_.size, file_bytes_.size() - off);
    message_ = {file_bytes_.data() + off, len};
  } else {
    generated_.resize(options_.size);
    stages::fill_pattern(generated_, options_.origin, seq);
    message_ = generated_;
  }
  message_offset_ = 0;
  message_chunk_ = 0;
  in_message_ = true;
}

bool Producer::fill(Buffer& b) {
  if (!in_message_) {
    if (next_seq_ >= total_) return false;
    if (options_.size <= chunk_size_ && file_bytes_.empty()) {
      // A whole message in one frame: generated straight into the buffer, no copy.
      b = {b.data, options_.size, next_seq_, 0, 0};
      stages::fill_pattern({b.data, b.length}, options_.origin, next_seq_++);
      return true;
    }
    start_message();
  }
  uint32_t n = std::min(chunk_size_, static_cast<uint32_t>(message_.size() - message_offset_));
  std::memcpy(b.data, message_.data() + message_offset_, n);
  message_offset_ += n;
  in_message_ = message_offset_ < message_.size();
  b = {b.data, n, next_seq_ - 1, message_chunk_++,
       in_message_ ? transport::kFlagMore : uint16_t{0}};
  return true;
}

void Producer::stamp(Buffer& b) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
  std::memcpy(b.data, &ns, std::min<size_t>(sizeof ns, b.length));
}

void Producer::pump() {
  if (!link_ || !link_->up()) return;
  auto now = std::chrono::steady_clock::now();
  while (link_->credits() > 0) {
    if (options_.rate > 0 && resend_.empty() && !in_message_) {
      // Pacing: message n may leave at t0 + n / rate (its chunks go as credits allow).
      auto due = t0_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(double(next_seq_) / options_.rate));
      if (due > now) {
        if (!pacing_) {
          pacing_ = true;
          auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(due - now);
          loop_.after(std::max(wait, std::chrono::milliseconds(1)), [this] {
            pacing_ = false;
            pump();
          });
        }
        return;
      }
    }
    Buffer* b = nullptr;
    if (!resend_.empty()) {
      b = resend_.front();
      resend_.pop_front();
    } else {
      if (free_.empty() || (!in_message_ && next_seq_ >= total_)) return;
      b = free_.back();
      free_.pop_back();
      fill(*b);
      if (options_.stamp && b->chunk == 0) stamp(*b);
    }
    transport::OutFrame f{options_.origin, b->seq,        b->flags, b->data,
                          b->length,       memory_.get(), b,        b->chunk};
    if (!link_->post(f)) {
      resend_.push_front(b);
      return;
    }
  }
}

void Producer::on_acked(transport::OutboundLink&, void* cookie) {
  auto* b = static_cast<Buffer*>(cookie);
  if (!(b->flags & transport::kFlagMore)) ++acked_;  // a message's last frame
  bytes_acked_ += b->length;
  free_.push_back(b);
  if (acked_ == total_) {
    t_last_ = std::chrono::steady_clock::now();
    loop_.stop();
  }
}

void Producer::on_returned(transport::OutboundLink&, void* cookie) {
  resend_.push_front(static_cast<Buffer*>(cookie));
}

void Producer::on_credit(transport::OutboundLink&) {
  pump();
}

}  // namespace hoprelay::client
