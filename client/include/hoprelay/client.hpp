// C++ over libhoprelay's C ABI (hoprelay/client.h), header only: RAII handles, errors as
// exceptions on open and close, status codes where the C API returns them on the datapath
// (timeouts and EAGAIN are normal there). Thread safety is the C API's: one thread at a time
// per handle.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "hoprelay/client.h"

namespace hoprelay {

// A failed call: its status (hoprelay_status) and hoprelay_last_error()'s text.
class Error : public std::runtime_error {
 public:
  Error(int status, const std::string& what) : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

[[noreturn]] inline void throw_last(int status) {
  const char* text = hoprelay_last_error();
  throw Error(status, text && *text ? text : hoprelay_strerror(status));
}

class Producer {
 public:
  Producer(const std::string& topology, const std::string& head,
           const hoprelay_producer_options* options = nullptr) {
    if (int rc = hoprelay_producer_open(topology.c_str(), head.c_str(), options, &p_)) {
      throw_last(rc);
    }
  }
  // Not closed by close(): what was sent gets up to flush_on_destroy() (5 s unless set) to be
  // acknowledged, so that a producer that goes out of scope early loses nothing on a healthy
  // pipeline; then the handle goes without the end-of-stream mark (the stream did not end by
  // close(): its consumers do not learn that it ended), and what is still unacknowledged is
  // given up, said through the log callback.
  ~Producer() {
    if (!p_) return;
    if (flush_on_destroy_ms_ != 0) (void)hoprelay_producer_flush(p_, flush_on_destroy_ms_);
    hoprelay_producer_destroy(p_);
  }
  // How long the destructor of a producer not closed waits for what was sent to be
  // acknowledged: milliseconds, 0 not at all, -1 as long as it takes.
  void flush_on_destroy(int timeout_ms) { flush_on_destroy_ms_ = timeout_ms; }
  Producer(Producer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), flush_on_destroy_ms_(o.flush_on_destroy_ms_) {}
  Producer& operator=(Producer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(flush_on_destroy_ms_, o.flush_on_destroy_ms_);
    return *this;
  }
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Status codes: HOPRELAY_OK, or ETIMEDOUT / EAGAIN / ETOOBIG... (hoprelay_last_error()):
  // a message refused (too large, say) is not sent, so the status must be looked at.
  [[nodiscard]] int send(std::span<const std::byte> data, int flags = 0, uint64_t* seq = nullptr,
                         int timeout_ms = -1) {
    return hoprelay_producer_send(p_, data.data(), data.size(), flags, seq, timeout_ms);
  }
  // The reserved buffer, or an empty span with the status in *status.
  std::span<std::byte> reserve(size_t length, int timeout_ms = -1, int* status = nullptr) {
    void* buffer = nullptr;
    int rc = hoprelay_producer_reserve(p_, length, &buffer, timeout_ms);
    if (status) *status = rc;
    if (rc != HOPRELAY_OK) return {};
    return {static_cast<std::byte*>(buffer), length};
  }
  [[nodiscard]] int commit(size_t length, int flags = 0, uint64_t* seq = nullptr) {
    return hoprelay_producer_commit(p_, length, flags, seq);
  }
  int flush(int timeout_ms = -1) { return hoprelay_producer_flush(p_, timeout_ms); }
  // The end-of-stream mark without closing (hoprelay_producer_end): ETIMEDOUT / EAGAIN: not
  // yet, call again; then close() returns at once.
  int end(int timeout_ms = -1) { return hoprelay_producer_end(p_, timeout_ms); }
  int fd() const { return hoprelay_producer_fd(p_); }
  int process() { return hoprelay_producer_process(p_); }
  size_t max_message() const { return hoprelay_producer_max_message(p_); }
  size_t max_reserve() const { return hoprelay_producer_max_reserve(p_); }
  uint32_t origin() const { return hoprelay_producer_origin(p_); }
  uint64_t next_seq() const { return hoprelay_producer_next_seq(p_); }
  uint64_t resume_seq() const { return hoprelay_producer_resume_seq(p_); }
  struct hoprelay_outcome_counts outcomes() const {
    struct hoprelay_outcome_counts c;
    hoprelay_producer_outcomes(p_, &c, sizeof c);
    return c;
  }
  struct hoprelay_producer_stats stats() const {
    struct hoprelay_producer_stats s;
    hoprelay_producer_stats(p_, &s);
    return s;
  }
  // Flush, end-of-stream mark, close; throws Error when that failed (the handle is gone
  // either way).
  void close(int timeout_ms = -1) {
    hoprelay_producer* p = std::exchange(p_, nullptr);
    int rc = hoprelay_producer_close(p, timeout_ms);
    const std::string why = rc != HOPRELAY_OK ? hoprelay_last_error() : "";
    // Since 1.8 close keeps the handle until destroy; before, it freed it (and destroy would
    // free it twice).
    if (hoprelay_version() >= (1u << 16 | 8u)) hoprelay_producer_destroy(p);
    if (rc != HOPRELAY_OK) throw Error(rc, why.empty() ? hoprelay_strerror(rc) : why);
  }
  hoprelay_producer* get() const { return p_; }

 private:
  hoprelay_producer* p_ = nullptr;
  int flush_on_destroy_ms_ = 5000;
};

class Consumer;

namespace detail {
// The consumer handle, shared by a Consumer and the Messages it handed out: a Message that
// outlives its Consumer (declared before it, say) finds the handle closed and releases nothing
// (not acknowledged, the message comes again to the node's next consumer) instead of calling
// into a freed handle. One per Consumer; a Message holds a reference (no allocation).
struct ConsumerHandle {
  hoprelay_consumer* c = nullptr;
  bool durable = false;  // opened with a state_dir
};
}  // namespace detail

// A received message (or end-of-stream mark), released when it goes out of scope. Its data is
// the consumer's slot: valid until it is released, and never after its Consumer was closed.
// On a consumer with a state_dir (since 1.8) a message is never released implicitly: one that
// goes out of scope unreleased is abandoned (released, it would be recorded as taken, and its
// acknowledgement would go upstream, whether or not the application had made it durable), and
// the consumer's next recv says so, naming it. Release each with release_at() once the
// application has committed it. Before 1.8 only an exception unwinding its scope abandoned it.
// An end mark, which carries no data, is released.
class Message {
 public:
  Message() = default;
  ~Message() { let_go(); }
  Message(Message&& o) noexcept : h_(std::move(o.h_)), m_(o.m_) {}
  Message& operator=(Message&& o) noexcept {
    let_go();
    h_ = std::move(o.h_);
    m_ = o.m_;
    return *this;
  }
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;

  // A message not yet released, whose Consumer is open.
  explicit operator bool() const { return h_ && h_->c; }
  bool end() const { return (m_.flags & HOPRELAY_MESSAGE_END) != 0; }
  // A message larger than a slot, reassembled into a copy (1.8; client.h).
  bool copied() const { return (m_.flags & HOPRELAY_MESSAGE_COPY) != 0; }
  uint32_t origin() const { return m_.origin; }
  uint64_t seq() const { return m_.seq; }
  std::span<const std::byte> data() const {
    return {static_cast<const std::byte*>(m_.data), m_.length};
  }
  void release() {
    if (auto h = std::exchange(h_, nullptr); h && h->c) hoprelay_consumer_release(h->c, &m_);
  }
  // Release with the application's own position (a state_dir consumer keeps it, durable).
  // ESTATE when its Consumer was closed first (nothing released: the message comes again;
  // said by the wrapper, so hoprelay_last_error() does not describe it).
  [[nodiscard]] int release_at(uint64_t app_position) {
    auto h = std::exchange(h_, nullptr);
    if (!h) return HOPRELAY_OK;
    return h->c ? hoprelay_consumer_release_at(h->c, &m_, app_position) : HOPRELAY_ESTATE;
  }
  // Gives the message up without releasing it, for an application that could not take it (a
  // write failed) and stops (hoprelay_consumer_abandon): it is not acknowledged, keeps its
  // slot until the Consumer is closed, and comes again to the next consumer of this node; the
  // Consumer's recv says ESTATE from then on. The destructor would release it.
  void abandon() {
    if (auto h = std::exchange(h_, nullptr); h && h->c) (void)hoprelay_consumer_abandon(h->c, &m_);
  }

 private:
  // Going out of scope (or assigned over) unreleased: see the class comment.
  void let_go() {
    if (h_ && h_->durable && !end()) {
      abandon();
    } else {
      release();
    }
  }
  friend class Consumer;
  std::shared_ptr<detail::ConsumerHandle> h_;
  hoprelay_message m_{};
};

class Consumer {
 public:
  Consumer(const std::string& topology, const std::string& node,
           const hoprelay_consumer_options* options = nullptr)
      : h_(std::make_shared<detail::ConsumerHandle>()) {
    if (int rc = hoprelay_consumer_open(topology.c_str(), node.c_str(), options, &h_->c)) {
      throw_last(rc);
    }
    h_->durable = options && options->state_dir && *options->state_dir;
  }
  // Messages still out are not released (they come again to the node's next consumer); one
  // that outlives its Consumer releases nothing and its data must not be read.
  ~Consumer() {
    if (h_ && h_->c) hoprelay_consumer_destroy(std::exchange(h_->c, nullptr));
  }
  Consumer(Consumer&& o) noexcept : h_(std::move(o.h_)) {}
  Consumer& operator=(Consumer&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // The next message, or an empty one with the status (ETIMEDOUT, EAGAIN) in *status.
  Message recv(int timeout_ms = -1, int* status = nullptr) {
    Message m;
    int rc = hoprelay_consumer_recv(get(), &m.m_, timeout_ms);
    if (status) *status = rc;
    if (rc == HOPRELAY_OK) {
      m.h_ = h_;
    }
    return m;
  }
  int fd() const { return hoprelay_consumer_fd(get()); }
  int process() { return hoprelay_consumer_process(get()); }
  uint64_t app_position() const { return hoprelay_consumer_app_position(get()); }
  uint64_t resume_seq(uint32_t origin) const { return hoprelay_consumer_resume_seq(get(), origin); }
  hoprelay_consumer* get() const { return h_ ? h_->c : nullptr; }

 private:
  std::shared_ptr<detail::ConsumerHandle> h_;
};

}  // namespace hoprelay
