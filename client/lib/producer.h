// libhoprelay's producer: one link to a head node, a ring of send buffers in memory the
// transport registered (two per credit the head grants: a message as large as the head's
// ring is taken while the one before it is still on its way), and every message kept in its
// buffers until the head acknowledges it. When the link drops, the transport hands back what
// was not acknowledged (on_returned) and reconnects; the buffers go again, in their order.
//
// The buffers are taken in ring order (send, reserve, the end mark) and come free in the same
// order: acknowledgements arrive in order, and a repeat settles in queue order. So a message's
// chunks can lie side by side, and a reservation larger than one slot is one contiguous
// buffer that still leaves without a copy (chunk i is bytes [i * chunk, ...) of it).
//
// No thread of its own: the event loop runs inside the calls (wait_for), and its descriptor
// (fd()) tells an application that drives its own loop when to call process().
//
// A producer that runs its head (run_head) runs that node in this process, as the consumer
// runs its leaf (embedded_node.h), on the producer's own loop, and posts to it over an
// in-process link (transport/inproc.h): the node's slots are the producer's buffers, its
// downstream links send from them, and everything above stays as it is.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hoprelay/client.h"
#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/node.h"
#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/transport/outcome_pool.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::client {

struct ProducerOptions {
  uint32_t origin = 0;  // 0: random
  uint64_t first_seq = 0;
  std::chrono::milliseconds connect_timeout{30000};
  hoprelay_outcome_fn on_outcome = nullptr;
  void* outcome_user = nullptr;
  bool run_head = false;  // run the head node in this process (no hoprelayd for it)
  // TLS credentials for the link to the head; disabled: the topology's top-level tls, if any.
  config::TlsSpec tls;
};

class Producer final : public transport::LinkEvents {
 public:
  // Connects and waits for the head's welcome. Throws ClientError (status.h).
  Producer(std::shared_ptr<const config::Topology> topology, const std::string& head,
           ProducerOptions options);
  ~Producer();

  // The datapath: status codes (hoprelay_status), the reason in fail()'s thread-local text.
  int send(std::span<const std::byte> data, int flags, uint64_t* seq, int timeout_ms);
  int reserve(size_t length, void** buffer, int timeout_ms);
  int commit(size_t length, int flags, uint64_t* seq);
  int flush(int timeout_ms);
  int wait_connected(int timeout_ms);
  int process();
  // Once everything sent is acknowledged, the end-of-stream mark (sent once); OK when the mark
  // is acknowledged, EAGAIN / ETIMEDOUT before (call again). Nothing can be sent after it.
  int end(int timeout_ms);
  // end(), and the link closed. The object is done afterwards.
  int close(int timeout_ms);

  int fd() const { return loop_.fd(); }
  size_t max_message() const { return max_message_; }
  size_t max_reserve() const { return chunk_size_; }  // one frame; reserve takes max_message
  uint32_t origin() const { return origin_; }
  uint64_t next_seq() const { return next_seq_; }
  uint64_t sent() const { return sent_; }
  uint64_t acknowledged() const { return acked_; }
  uint64_t bytes_acknowledged() const { return bytes_acked_; }
  uint64_t reconnects() const { return reconnects_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t failovers() const { return failovers_; }
  uint64_t resume_seq() const { return resume_seq_; }
  // True while the application's on_outcome callback runs (inside one of this producer's
  // calls): the C API refuses calls into the producer from there.
  bool in_outcome() const { return in_outcome_; }
  const hoprelay_outcome_counts& outcomes() const { return counts_; }
  // Frames waiting for credits or acknowledgements (0: everything sent is acknowledged).
  size_t unacknowledged() const { return frames_; }

  bool admit(const transport::PeerInfo&, std::string& reason) override;
  void on_inbound_up(transport::InboundLink&) override {}
  void on_message(transport::InboundLink& link, transport::Slot& slot) override;
  void on_inbound_down(transport::InboundLink&, std::string_view) override {}
  void on_outbound_up(transport::OutboundLink& link) override;
  void on_outbound_down(transport::OutboundLink& link, std::string_view reason) override;
  void on_acked(transport::OutboundLink& link, void* cookie) override;
  void on_outcome(transport::OutboundLink& link, void* cookie,
                  const transport::Outcome& outcome) override;
  void on_returned(transport::OutboundLink& link, void* cookie) override;
  void on_credit(transport::OutboundLink& link) override;
  void on_refused(transport::OutboundLink& link, std::string_view reason) override;
  void on_device_lost(std::string_view device) override;

 private:
  // One frame's memory: a whole message, one chunk of one, or the end-of-stream mark.
  struct Buffer {
    uint64_t pos;  // its place in the ring, counted from the start (take_, freed_)
    std::byte* data;
    uint32_t length;
    uint16_t flags;  // kFlagMore on every chunk but a message's last; kFlagEnd
    uint32_t chunk;
    uint64_t seq;
    transport::Outcome* outcome;  // what the head reported for this frame (null: delivered)
  };
  // Runs the loop until done() or timeout_ms after `since` (0: once, without waiting). OK,
  // ETIMEDOUT or EAGAIN (timeout 0), or the status of a failure seen meanwhile. `since` lets
  // a call that waits several times (end) spend one timeout and report that timeout; the
  // default (the epoch) is the call's start.
  template <class Done>
  int wait_for(Done done, int timeout_ms, const char* what,
               transport::EventLoop::Clock::time_point since = {});
  bool post(Buffer& b);  // to the link now; false while it is down or out of credits
  // A frame of a message the head had taken already (resume_seq_): not sent, its buffer
  // free again, and at the message's last frame its outcome is REPEAT.
  void settle_repeat(Buffer& b);
  // A message's last frame was acknowledged (or found a repeat): its outcome is counted and
  // handed to the application. `outcome`: the drops reported for its frames, or null.
  void settle(uint64_t seq, const transport::Outcome* outcome, hoprelay_outcome_status status);
  void pump();  // posts what the queue holds, in order, as far as credits go
  // The ring: where `n` buffers would be taken now, contiguous (not across the ring's end)
  // if asked; whether they are free; taking them (the first); giving back the oldest.
  uint64_t take_at(size_t n, bool contiguous) const;
  bool can_take(size_t n, bool contiguous) const;
  Buffer& take(size_t n, bool contiguous);
  Buffer& at(uint64_t pos) { return buffers_[pos % buffers_.size()]; }
  void release(Buffer& b);
  size_t free_buffers() const { return buffers_.size() - (take_ - freed_); }
  // "N messages [and the end-of-stream mark] not yet acknowledged by HEAD", for errors.
  std::string unacknowledged_words() const;

  std::shared_ptr<const config::Topology> topology_;
  const config::NodeSpec* head_;
  transport::EventLoop loop_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::OutboundLink> link_;
  // The link to the head before the last failover (fail_over): closed, destroyed at the next
  // one or with the producer, before the transport.
  std::unique_ptr<transport::OutboundLink> retired_link_;
  std::unique_ptr<transport::MemoryRegion> memory_;
  // run_head: the head node, declared after the link and the memory so that it goes first
  // however the producer ends (its links send from memory_, its slots are memory_'s buffers
  // and link_'s entries); its tick, once a second.
  std::unique_ptr<daemon::Node> node_;
  transport::EventLoop::TimerId tick_ = 0;
  void schedule_tick();
  std::vector<Buffer> buffers_;
  uint64_t take_ = 0;   // the next place to take
  uint64_t freed_ = 0;  // places before it are free (a skip to the ring's start included)
  size_t frames_ = 0;   // frames queued or sent, not yet acknowledged
  daemon::RingQueue<Buffer*> queue_;  // to post, in order: returned ones first
  Buffer* reserved_ = nullptr;        // the first of the reservation's buffers
  size_t reserved_length_ = 0;
  size_t reserved_buffers_ = 0;
  uint32_t origin_;
  uint32_t chunk_size_;
  size_t max_message_;
  uint64_t next_seq_;
  uint64_t sent_ = 0;
  uint64_t acked_ = 0;
  uint64_t bytes_acked_ = 0;
  uint64_t reconnects_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t failovers_ = 0;  // fail_over() calls that moved to the other head
  // The head's next_seq for our origin at the first connection: below it, repeats.
  uint64_t resume_seq_ = 0;
  hoprelay_outcome_fn on_outcome_;
  void* outcome_user_;
  bool in_outcome_ = false;
  // Calls on_outcome_ with in_outcome_ set.
  void report(const hoprelay_outcome& out);
  hoprelay_outcome_counts counts_{};
  // Outcome records of dropped messages (outcome_pool.h, as the node's).
  transport::OutcomePool outcomes_;
  transport::Outcome* message_outcome_ = nullptr;  // the drops of the message being acked
  bool was_up_ = false;
  // The head admitted or refused this producer; says once, a second after the open, that it
  // still waits.
  bool admitted_or_refused();
  const transport::EventLoop::Clock::time_point opened_ = transport::EventLoop::Clock::now();
  bool said_waiting_ = false;
  bool ending_ = false;        // end() was called: nothing more may be sent
  bool closing_ = false;       // close() closes the link: its going down is no reconnect
  bool end_sent_ = false;      // the end mark is queued
  bool ended_ = false;         // the end mark is acknowledged
  std::string refused_;        // the head's reason, while opening
  int refused_status() const;  // EORIGIN for an origin in use, else EREFUSED
  // The RDMA device went away: every call fails with EUNAVAILABLE and says so.
  bool lost_ = false;
  std::string lost_device_;
  int fail_lost(const char* what);
  // run_head: the head drained and its downstream links closed with a goodbye.
  void stop_head(int timeout_ms);
  // At the first welcome: two buffers per credit, from the transport (registered over verbs).
  void allocate_buffers(transport::OutboundLink& link);
  // A head with a standby (NodeSpec::standby, docs/topology.md): once the head in use has been
  // down (or not up since the open) for its peer_down_timeout, the producer sends to the other
  // one, what was not acknowledged first; the nodes below drop what they had as repeats.
  const config::NodeSpec* primary_ = nullptr;
  const config::NodeSpec* standby_ = nullptr;  // null: no standby (or run_head)
  transport::EventLoop::TimerId failover_ = 0;
  bool failing_over_ = false;
  void watch_head();
  void fail_over();
};

}  // namespace hoprelay::client
