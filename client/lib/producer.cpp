#include "producer.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <random>

#include "embedded_node.h"
#include "hoprelay/transport/inproc.h"
#include "hoprelay/transport/log.h"
#include "hoprelay/transport/tls.h"
#include "status.h"

namespace hoprelay::client {
namespace {

constexpr size_t kMaxOutcomeRecordsC = HOPRELAY_OUTCOME_RECORDS;
static_assert(kMaxOutcomeRecordsC == transport::kMaxOutcomeRecords);

spdlog::logger& log() {
  static auto logger = module_logger("producer");
  return *logger;
}

uint32_t random_origin() {
  // Distinct per run and per host, so that two producers never share an origin by accident.
  std::random_device rd;
  uint32_t o = rd() ^ (static_cast<uint32_t>(getpid()) << 8);
  return o == 0 ? 1 : o;
}

}  // namespace

Producer::Producer(std::shared_ptr<const config::Topology> topology, const std::string& head,
                   ProducerOptions options)
    : topology_(std::move(topology)),
      head_(topology_->find(head)),
      origin_(options.origin ? options.origin : random_origin()),
      chunk_size_(head_->slot_size),
      max_message_(std::min<uint64_t>(topology_->max_message(), UINT32_MAX)),
      next_seq_(options.first_seq),
      on_outcome_(options.on_outcome),
      outcome_user_(options.outcome_user) {
  transport::Identity id{transport::PeerRole::kProducer, "producer-" + std::to_string(getpid()),
                         topology_->hash, origin_};
  if (!topology_->auth_key_file.empty()) {
    id.auth = transport::AuthKey::load(topology_->auth_key_file);
  }
  // Over TLS to the head: the options' credentials, else the topology's top-level tls (this
  // host's own certificate; a producer is admitted with any the head's CA issued).
  const config::TlsSpec& tls = options.tls.enabled() ? options.tls : topology_->tls;
  if (tls.enabled() && !options.run_head) id.tls = transport::TlsContext::load(tls);
  if (options.run_head) {
    node_ = start_node(topology_, head, loop_, [this](daemon::Node& n) {
      n.when_device_lost([this](std::string_view device) {
        lost_ = true;
        lost_device_ = device;
      });
    });
    schedule_tick();
    transport_ = std::make_unique<transport::inproc::InprocTransport>(
        loop_, *node_, *this, id, head_->slot_size,
        [this](size_t bytes) -> transport::MemoryRegion& { return node_->lend_memory(bytes); });
    log().info("producer of origin {} runs head node {} in this process ({} at {}, {} downstream)",
               origin_, head_->name, node_->transport_name(), head_->listen.to_string(),
               counted(head_->downstream.size(), "link"));
  } else {
    // The head's dead-peer bound: both ends of the link give up on the other alike.
    transport::TransportOptions topts{head_->transport, head_->listen, false, config::Poll::kEvent,
                                      head_->peer_dead_after};
    auto choice = transport::make_transport(topts, loop_, *this, id);
    transport_ = std::move(choice.transport);
    log().info("producer of origin {} to {} at {}: {}", origin_, head_->name,
               head_->listen.to_string(), choice.reason);
  }
  loop_.set_pollable(true);
  queue_ = daemon::RingQueue<Buffer*>(head_->slots);
  bool write = head_->ingress == config::Ingress::kWrite;
  link_ = transport_->connect({head_->name, head_->listen, write, head_->slots});
  primary_ = head_;
  if (!head_->standby.empty() && !options.run_head) {
    standby_ = topology_->find(head_->standby);
    watch_head();  // a head down at the open counts too
  }
  // connect_timeout 0: no wait; the connection proceeds inside later calls (process()).
  if (options.connect_timeout.count() == 0) return;
  int rc = wait_for([this] { return admitted_or_refused(); },
                    static_cast<int>(options.connect_timeout.count()), "");
  if (!refused_.empty()) {
    throw ClientError(refused_status(), head_->name + " refused this producer: " + refused_);
  }
  if (rc != HOPRELAY_OK) {
    throw ClientError(HOPRELAY_ETIMEDOUT, "no connection to " + head_->name + " at " +
                                              head_->listen.to_string() + " within " +
                                              std::to_string(options.connect_timeout.count()) +
                                              " ms: is hoprelayd running there?");
  }
}

Producer::~Producer() {
  if (failover_) loop_.cancel(failover_);
  // Destroyed open (hoprelay_producer_destroy without close): what it gives up is said, once.
  if (!closing_ && sent_ > acked_) {
    log().warn(
        "destroyed with {}: given up, and no end-of-stream mark (close sends it once "
        "everything is acknowledged)",
        unacknowledged_words());
  }
  // A head run here first: its links send from our buffers, and it holds link_'s slots.
  if (tick_) loop_.cancel(tick_);
  node_.reset();
  // Links and registered memory go before the transport that owns their device.
  link_.reset();
  retired_link_.reset();
  memory_.reset();
  transport_.reset();
}

void Producer::schedule_tick() {
  // Once a second, as hoprelayd does: the stage's flush, orphaned chunks, the gauges.
  tick_ = loop_.after(std::chrono::seconds(1), [this] {
    node_->tick();
    schedule_tick();
  });
}

template <class Done>
int Producer::wait_for(Done done, int timeout_ms, const char* what,
                       transport::EventLoop::Clock::time_point since) {
  if (lost_) return fail_lost(what);
  if (done()) return HOPRELAY_OK;  // the common case: no clock read, no loop
  if (since == transport::EventLoop::Clock::time_point{})
    since = transport::EventLoop::Clock::now();
  const auto deadline = since + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    if (lost_) return fail_lost(what);
    if (done()) return HOPRELAY_OK;
    if (!was_up_ && !refused_.empty()) {
      return fail(refused_status(), head_->name + " refused this producer: " + refused_);
    }
    auto wait = std::chrono::milliseconds(1000);
    if (timeout_ms >= 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                               transport::EventLoop::Clock::now());
      if (left.count() <= 0) {
        if (timeout_ms == 0) {
          loop_.run_once(std::chrono::milliseconds(0));
          if (done()) return HOPRELAY_OK;
          return would_wait(what);
        }
        return fail(HOPRELAY_ETIMEDOUT, std::string(what) + ": timed out after " +
                                            std::to_string(timeout_ms) + " ms" +
                                            (link_ && link_->up() ? "" : " (the head is down)"));
      }
      wait = std::min(wait, left);
    }
    loop_.run_once(wait);
  }
}

int Producer::send(std::span<const std::byte> data, int flags, uint64_t* seq, int timeout_ms) {
  if (data.size() > max_message_) {
    return fail(HOPRELAY_ETOOBIG, "send: " + std::to_string(data.size()) +
                                      " bytes is more than pipeline " + topology_->name +
                                      " takes (" + std::to_string(max_message_) +
                                      ": its smallest slots times its smallest slot_size)");
  }
  if (lost_) return fail_lost("send");
  if (reserved_) return fail(HOPRELAY_ESTATE, "send: commit the reserved buffer first");
  if (ending_) return fail(HOPRELAY_ESTATE, "send: the stream has ended");
  // The chunk size is the head's slot, or less once its first welcome said so: counted after
  // the wait.
  size_t chunks = 0;
  auto room = [&] {
    chunks = std::max<size_t>(1, (data.size() + chunk_size_ - 1) / chunk_size_);
    return can_take(chunks, false);
  };
  if (int rc = wait_for(room, timeout_ms, "send")) {
    if (rc != HOPRELAY_ETIMEDOUT) return rc;
    // What it waited for: without this, a message that needs the whole ring looks stuck.
    if (buffers_.empty()) {  // opened without waiting, the head never welcomed it
      return fail(rc, std::string(last_error()) + " (not admitted by " + head_->name +
                          " yet: hoprelay_producer_wait_connected waits for that)");
    }
    return fail(rc, std::string(last_error()) + " (a message of " + std::to_string(data.size()) +
                        " bytes takes " + std::to_string(chunks) + " of the producer's " +
                        std::to_string(buffers_.size()) + " buffers, two per slot of the head; " +
                        std::to_string(free_buffers()) +
                        " are free, the others hold messages not yet acknowledged or waiting for "
                        "the head's credits: a consumer holding messages, or a slow pipeline)");
  }
  const uint64_t s = next_seq_++;
  const uint64_t first = take(chunks, false).pos;
  size_t offset = 0;
  for (uint32_t i = 0; i < chunks; ++i) {
    Buffer& b = at(first + i);
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(chunk_size_, data.size() - offset));
    if (n) std::memcpy(b.data, data.data() + offset, n);
    offset += n;
    b.length = n;
    b.flags = static_cast<uint16_t>(offset < data.size() ? transport::kFlagMore : 0);
    b.chunk = chunks == 1 ? 0 : i;
    b.seq = s;
    queue_.push_back(&b);
  }
  frames_ += chunks;
  ++sent_;
  bytes_sent_ += data.size();
  if (seq) *seq = s;
  pump();
  if (!(flags & HOPRELAY_SEND_MORE)) loop_.run_pending();
  return HOPRELAY_OK;
}

int Producer::reserve(size_t length, void** buffer, int timeout_ms) {
  if (lost_) return fail_lost("reserve");
  if (reserved_) return fail(HOPRELAY_ESTATE, "reserve: a buffer is reserved already: commit it");
  if (ending_) return fail(HOPRELAY_ESTATE, "reserve: the stream has ended");
  if (length > max_message_) {
    return fail(HOPRELAY_ETOOBIG, "reserve: " + std::to_string(length) +
                                      " bytes is more than pipeline " + topology_->name +
                                      " takes (" + std::to_string(max_message_) +
                                      ": its smallest slots times its smallest slot_size)");
  }
  // Larger than a slot: side by side in the ring, sent as chunks from where they lie. (The
  // chunk size is final once the head welcomed us: counted after the wait, as in send.)
  size_t n = 0;
  auto room = [&] {
    n = std::max<size_t>(1, (length + chunk_size_ - 1) / chunk_size_);  // 0 bytes: one frame
    return can_take(n, true);
  };
  if (int rc = wait_for(room, timeout_ms, "reserve")) {
    if (rc != HOPRELAY_ETIMEDOUT || buffers_.empty() || n == 1) return rc;
    return fail(rc, std::string(last_error()) + " (" + std::to_string(length) + " bytes take " +
                        std::to_string(n) + " side by side of the producer's " +
                        std::to_string(buffers_.size()) + " buffers, two per slot of the head; " +
                        std::to_string(free_buffers()) +
                        " are free, the others hold messages not yet acknowledged)");
  }
  reserved_ = &take(n, true);
  reserved_length_ = length;
  reserved_buffers_ = n;
  *buffer = reserved_->data;
  return HOPRELAY_OK;
}

int Producer::commit(size_t length, int flags, uint64_t* seq) {
  if (!reserved_) return fail(HOPRELAY_ESTATE, "commit: no buffer is reserved");
  if (lost_) return fail_lost("commit");
  if (length > reserved_length_) {
    return fail(HOPRELAY_EINVAL, "commit: the length must be 0 to the reserved " +
                                     std::to_string(reserved_length_) + " bytes");
  }
  Buffer* b = std::exchange(reserved_, nullptr);
  const uint64_t s = next_seq_++;
  // An empty message (0 bytes, since 1.7) is one frame, as send() makes it.
  const size_t chunks = std::max<size_t>(1, (length + chunk_size_ - 1) / chunk_size_);
  take_ -= reserved_buffers_ - chunks;  // the buffers the message does not fill: free again
  ++sent_;
  bytes_sent_ += length;
  frames_ += chunks;
  if (seq) *seq = s;
  if (chunks == 1) {
    b->length = static_cast<uint32_t>(length);
    b->flags = 0;
    b->chunk = 0;
    b->seq = s;
    // Straight to the link when nothing waits before it (the common case), else in order.
    if (!queue_.empty() || !post(*b)) {
      queue_.push_back(b);
      pump();
    }
  } else {
    // Chunk i is bytes [i * chunk_size_, ...) of the reservation, which the application wrote
    // as one piece: buffer i exactly (the stride is the chunk size, allocate_buffers).
    for (size_t i = 0, offset = 0; i < chunks; ++i, offset += chunk_size_) {
      Buffer& c = at(b->pos + i);
      c.length = static_cast<uint32_t>(std::min<size_t>(chunk_size_, length - offset));
      c.flags = static_cast<uint16_t>(i + 1 < chunks ? transport::kFlagMore : 0);
      c.chunk = static_cast<uint32_t>(i);
      c.seq = s;
      queue_.push_back(&c);
    }
    pump();
  }
  if (!(flags & HOPRELAY_SEND_MORE)) loop_.run_pending();
  return HOPRELAY_OK;
}

int Producer::flush(int timeout_ms) {
  loop_.run_pending();
  int rc = wait_for([this] { return unacknowledged() == 0; }, timeout_ms, "flush");
  if (rc != HOPRELAY_ETIMEDOUT) return rc;
  return fail(rc, std::string(last_error()) + " (" + unacknowledged_words() +
                      ": a consumer holding messages, or a slow or stopped pipeline)");
}

std::string Producer::unacknowledged_words() const {
  // After end(), flush waits for the end-of-stream mark too: "0 messages" alone would read as
  // nothing left to wait for.
  std::string words = counted(sent_ - acked_, "message");
  if (end_sent_ && !ended_) words += " and the end-of-stream mark";
  return words + " not yet acknowledged by " + head_->name;
}

bool Producer::admitted_or_refused() {
  if (was_up_ || !refused_.empty()) return true;
  // Said once, a second after the open: a head that is not running was 30 s of silence (also
  // for a binding that waits in short steps of wait_connected).
  if (!said_waiting_ && transport::EventLoop::Clock::now() - opened_ >= std::chrono::seconds(1)) {
    said_waiting_ = true;
    log().info(
        "waiting for head node {} at {} to accept this producer: is hoprelayd running "
        "there?",
        head_->name, head_->listen.to_string());
  }
  return false;
}

int Producer::wait_connected(int timeout_ms) {
  if (int rc = wait_for([this] { return admitted_or_refused(); }, timeout_ms, "connect")) {
    return rc;
  }
  if (!was_up_) return fail(refused_status(), head_->name + " refused this producer: " + refused_);
  return HOPRELAY_OK;
}

int Producer::process() {
  loop_.run_once(std::chrono::milliseconds(0));
  return lost_ ? fail_lost("process") : HOPRELAY_OK;
}

int Producer::end(int timeout_ms) {
  if (ended_) return HOPRELAY_OK;
  // One timeout for all the waits below, reported as the caller gave it.
  const auto started = transport::EventLoop::Clock::now();
  if (!end_sent_) {
    ending_ = true;   // from the first call on, even one that returns EAGAIN (client.h)
    if (reserved_) {  // reserved, never committed: unsent, its buffers free again
      take_ = std::exchange(reserved_, nullptr)->pos;
    }
    loop_.run_pending();
    // The mark goes behind what was sent, at once (since 1.8; before, once all of it was
    // acknowledged): a consumer that holds a batch it has not committed yet gets the end of
    // the stream too, instead of waiting for it forever. Its acknowledgement still says that
    // everything before it is acknowledged (they come in order). It takes a buffer of its own:
    // a producer not admitted yet (opened with connect_timeout 0) has its buffers only with
    // the link's first welcome.
    if (int rc =
            wait_for([this] { return can_take(1, false); }, timeout_ms, "end of stream", started)) {
      return rc;
    }
    // The end mark takes a buffer like a message, and is acknowledged like one.
    Buffer& b = take(1, false);
    b.length = 0;
    b.flags = transport::kFlagEnd;
    b.chunk = 0;
    b.seq = next_seq_;
    queue_.push_back(&b);
    ++frames_;
    end_sent_ = true;
    pump();
  }
  return wait_for([this] { return ended_; }, timeout_ms, "end of stream", started);
}

int Producer::close(int timeout_ms) {
  int rc = end(timeout_ms);
  closing_ = true;
  // Said here, not when the link goes down: a link that is down already (the head stopped,
  // or never admitted us) does not go down again, and its frames would be given up unsaid.
  if (!ended_ && (sent_ > acked_ || end_sent_)) {
    const uint64_t given_up = sent_ - acked_ + (end_sent_ ? 1 : 0);  // the end mark too
    log().warn("closing with {}: given up ({}; the consumers may or may not have {})",
               unacknowledged_words(), link_ && link_->up() ? "the link is up" : "the link is down",
               given_up == 1 ? "it" : "them");
  }
  if (link_) link_->close();
  loop_.run_pending();
  if (node_) stop_head(timeout_ms);
  return rc;
}

void Producer::stop_head(int timeout_ms) {
  // As hoprelayd stops its node (a drain): the downstream peers are told goodbye (BYE) once
  // the head holds nothing, rather than see their connection drop, which they log as a
  // failure. Held messages (close timed out) wait no longer than the close's own timeout.
  // By the clock, not by loop passes: a busy-polling head's loop never sleeps.
  const auto wait = std::chrono::milliseconds(timeout_ms < 0 ? 1000 : std::min(timeout_ms, 1000));
  const auto deadline = transport::EventLoop::Clock::now() + wait;
  auto stopped = std::make_shared<bool>(false);  // the node may outlive this call's frame
  node_->drain(wait, [stopped](uint64_t) { *stopped = true; });
  while (!*stopped && transport::EventLoop::Clock::now() < deadline) {
    loop_.run_once(std::chrono::milliseconds(20));
  }
  loop_.run_once(std::chrono::milliseconds(0));  // the goodbyes go out
}

bool Producer::post(Buffer& b) {
  // The link refuses (nothing queued) while it is down or out of credits.
  if (!link_) return false;
  if (b.seq < resume_seq_ && !(b.flags & transport::kFlagEnd) && was_up_) {
    settle_repeat(b);
    return true;
  }
  transport::OutFrame f{origin_, b.seq, b.flags, b.data, b.length, memory_.get(), &b, b.chunk};
  return link_->post(f);
}

void Producer::pump() {
  while (!queue_.empty() && post(*queue_.front())) queue_.pop_front();
}

bool Producer::admit(const transport::PeerInfo&, std::string& reason) {
  reason = "a producer accepts no connections";
  return false;
}

void Producer::on_message(transport::InboundLink& link, transport::Slot& slot) {
  link.release(slot, nullptr);
}

void Producer::on_outbound_up(transport::OutboundLink& link) {
  if (failover_) loop_.cancel(failover_);
  failover_ = 0;
  // The buffers first: a producer whose memory cannot be had (RLIMIT_MEMLOCK over verbs) is
  // not up, and says why from the call that ran into it.
  if (!memory_) allocate_buffers(link);
  if (was_up_) ++reconnects_;
  if (!was_up_) {
    // Only the first welcome: after a reconnection the head has taken some of our own
    // messages, and replaying them is not a repeat (the head deduplicates them).
    resume_seq_ = link.peer_next_seq();
    if (resume_seq_ > next_seq_ - sent_) {  // below it: the first_seq asked for
      // Info, not a warning: a restarted producer resuming its origin is the expected case,
      // and each such message's outcome (REPEAT) tells the application anyway.
      log().info(
          "the head has taken sequence numbers of origin {} up to {} already: messages below "
          "{} are repeats and are not sent (first_seq {} starts after them)",
          origin_, resume_seq_ - 1, resume_seq_, resume_seq_);
    }
  }
  was_up_ = true;
  refused_.clear();
}

void Producer::allocate_buffers(transport::OutboundLink& link) {
  // Memory is registered with the device the first connection opened (verbs has none
  // before). Two buffers per credit the head grants: the link never has more in flight than
  // the head can take, and the second ring's worth waits in the queue for credits. With one, a
  // message as large as the head's ring (the largest the pipeline takes) could be copied in
  // only once every frame before it was acknowledged: between two such messages the whole
  // pipeline drained and filled again.
  chunk_size_ = std::min(chunk_size_, link.max_payload());
  const uint32_t n = 2 * link.credits();
  // Side by side, not rounded up: chunk i of a reservation is exactly buffer i, so the buffer an
  // acknowledged chunk frees holds nothing of the next chunk, still in flight. (With a stride
  // rounded up to 64, a slot_size of 1000 put the start of chunk i in buffer i - 1.)
  memory_ = transport_->allocate(size_t{chunk_size_} * n);
  buffers_.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    buffers_[i] = {i, memory_->data() + size_t{i} * chunk_size_, 0, 0, 0, 0, nullptr};
}

uint64_t Producer::take_at(size_t n, bool contiguous) const {
  const size_t at = take_ % buffers_.size();
  if (!contiguous || at + n <= buffers_.size()) return take_;
  return take_ + (buffers_.size() - at);  // the ring's end is skipped: free at the next release
}

bool Producer::can_take(size_t n, bool contiguous) const {
  if (buffers_.empty()) return false;                // before the head's first welcome
  if (take_ == freed_) return n <= buffers_.size();  // empty: any place will do
  return take_at(n, contiguous) + n - freed_ <= buffers_.size();
}

Producer::Buffer& Producer::take(size_t n, bool contiguous) {
  const uint64_t first = take_at(n, contiguous);
  if (take_ == freed_) freed_ = first;  // empty: a skip costs nothing
  take_ = first + n;
  for (uint64_t p = first; p < take_; ++p) {
    Buffer& b = at(p);
    b.pos = p;
    b.outcome = nullptr;
  }
  return at(first);
}

void Producer::release(Buffer& b) {
  // In order (producer.h): the places before it, a skip included, are free with it.
  assert(b.pos >= freed_ && b.pos < take_);
  freed_ = b.pos + 1;
  --frames_;
}

void Producer::on_outbound_down(transport::OutboundLink&, std::string_view reason) {
  if (ended_) return;    // closed at the end
  if (closing_) return;  // close() before the end was acknowledged: it warned, ETIMEDOUT
  if (failing_over_) return;
  watch_head();
  // Frames not acknowledged come back to the queue with those not sent yet: all go once the
  // head is back. Nothing waiting (a head stopped by plan, after acknowledging everything):
  // not a warning.
  // Info either way: the transport has just warned that the link is down (one warning per
  // event; this line adds what waits).
  if (queue_.empty()) {
    log().info("link to {} down ({}); reconnecting, nothing waits to be sent", head_->name, reason);
  } else {
    log().info("link to {} down ({}); reconnecting, {} frames wait to be sent when it is back",
               head_->name, reason, queue_.size());
  }
}

void Producer::on_refused(transport::OutboundLink&, std::string_view reason) {
  if (!was_up_) refused_ = reason;
}

void Producer::on_device_lost(std::string_view device) {
  lost_ = true;
  lost_device_ = device;
  log().error("RDMA device {} is gone (removed or failed): the link to {} is down for good", device,
              head_->name);
}

int Producer::fail_lost(const char* what) {
  return fail(HOPRELAY_EUNAVAILABLE,
              std::string(what) + ": RDMA device " + lost_device_ +
                  " is gone (removed or failed); " + counted(sent_ - acked_, "message") + " sent " +
                  (sent_ - acked_ == 1 ? "is" : "are") +
                  " not acknowledged. Close this producer and open a new one "
                  "once a device serves " +
                  head_->listen.to_string() +
                  (node_ ? " again (its head starts afresh: send again what was not acknowledged)"
                         : " again (with the same origin it resumes)") +
                  ". The device itself stays in use "
                  "until this process exits: librdmacm keeps the device contexts it opened");
}

int Producer::refused_status() const {
  return refused_.find(transport::kOriginInUse) != std::string::npos ? HOPRELAY_EORIGIN
                                                                     : HOPRELAY_EREFUSED;
}

void Producer::on_acked(transport::OutboundLink&, void* cookie) {
  auto* b = static_cast<Buffer*>(cookie);
  if (b->outcome) {
    // Acknowledgements come in order, and a message's frames are contiguous: its drops
    // gather here until its last frame.
    if (!message_outcome_) message_outcome_ = outcomes_.take();
    message_outcome_->merge(*b->outcome);
    outcomes_.give_back(b->outcome);
  }
  if (b->flags & transport::kFlagEnd) {
    ended_ = true;
  } else if (!(b->flags & transport::kFlagMore)) {
    ++acked_;  // a message's last frame
    // (An outcome without drops: delivered, and spooled somewhere.)
    const bool dropped = message_outcome_ && message_outcome_->total > 0;
    settle(b->seq, message_outcome_, dropped ? HOPRELAY_DROPPED : HOPRELAY_DELIVERED);
    outcomes_.give_back(message_outcome_);
  }
  bytes_acked_ += b->length;
  release(*b);
}

void Producer::on_outcome(transport::OutboundLink&, void* cookie,
                          const transport::Outcome& outcome) {
  auto* b = static_cast<Buffer*>(cookie);
  if (!b->outcome) b->outcome = outcomes_.take();
  b->outcome->merge(outcome);
}

void Producer::settle_repeat(Buffer& b) {
  if (!(b.flags & transport::kFlagMore)) {
    ++acked_;  // taken care of: nothing is waiting for it
    settle(b.seq, nullptr, HOPRELAY_REPEAT);
  }
  release(b);
}

void Producer::settle(uint64_t seq, const transport::Outcome* outcome,
                      hoprelay_outcome_status status) {
  if (status == HOPRELAY_DELIVERED && !outcome) {
    // The common case, once per message: no struct to clear, the records are not read.
    ++counts_.delivered;
    if (!on_outcome_) return;
    hoprelay_outcome out;
    out.origin = origin_;
    out.seq = seq;
    out.status = status;
    out.reason = 0;
    out.partial = 0;
    out.drops = 0;
    out.n_drops = 0;
    out.spooled = 0;
    out.spooled_at = nullptr;
    out.spooled_for = nullptr;
    report(out);
    return;
  }
  hoprelay_outcome out{};
  out.origin = origin_;
  out.seq = seq;
  out.status = status;
  if (outcome && outcome->spooled) ++counts_.spooled;
  if (status == HOPRELAY_REPEAT) {
    ++counts_.repeat;
  } else if (status == HOPRELAY_DELIVERED) {
    ++counts_.delivered;  // (spooled somewhere)
  } else {
    // The main reason: a chunked message ends incomplete downstream because a chunk was
    // dropped upstream; the drop says why, the incomplete only what followed.
    const transport::DropRecord* main = &outcome->records[0];
    for (uint8_t i = 0; i < outcome->count; ++i) {
      if (outcome->records[i].reason != transport::DropReason::kIncomplete) {
        main = &outcome->records[i];
        break;
      }
    }
    out.reason = static_cast<int>(main->reason);
    out.partial = outcome->partial;
    out.drops = outcome->total;
    ++counts_.dropped;
    if (outcome->partial) ++counts_.partial;
    ++counts_.by_reason[out.reason];
  }
  if (!on_outcome_) return;
  // NUL-terminated copies for the C caller, on the stack: valid during the call.
  char names[kMaxOutcomeRecordsC][transport::kMaxNodeName + 1];
  char details[kMaxOutcomeRecordsC][transport::kMaxDropDetail + 1];
  char spool_node[transport::kMaxNodeName + 1];
  char spool_branch[transport::kMaxNodeName + 1];
  if (outcome && outcome->spooled) {
    const transport::SpoolRecord& r = outcome->spool;
    std::memcpy(spool_node, r.node.data(), r.node_len);
    spool_node[r.node_len] = '\0';
    std::memcpy(spool_branch, r.branch.data(), r.branch_len);
    spool_branch[r.branch_len] = '\0';
    out.spooled = outcome->spooled;
    out.spooled_at = spool_node;
    out.spooled_for = spool_branch;
  }
  if (outcome) {
    out.n_drops = outcome->count;
    for (uint8_t i = 0; i < outcome->count; ++i) {
      const transport::DropRecord& r = outcome->records[i];
      std::memcpy(names[i], r.node.data(), r.node_len);
      names[i][r.node_len] = '\0';
      std::memcpy(details[i], r.detail.data(), r.detail_len);
      details[i][r.detail_len] = '\0';
      out.drop[i] = {static_cast<int>(r.reason), names[i], details[i]};
    }
  }
  report(out);
}

void Producer::report(const hoprelay_outcome& out) {
  in_outcome_ = true;
  on_outcome_(outcome_user_, &out);  // C: it does not throw
  in_outcome_ = false;
}

void Producer::on_returned(transport::OutboundLink&, void* cookie) {
  queue_.push_front(static_cast<Buffer*>(cookie));  // newest first: the order is kept
}

void Producer::on_credit(transport::OutboundLink&) {
  pump();
}

}  // namespace hoprelay::client
