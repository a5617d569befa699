// The thread's side of link threads (link_threads.h): the state one downstream link shares
// between the node's loop and its thread, and the thread itself, with its own event loop and
// transport, turning its real links' events into Events for the node's loop. Private to
// link_threads.cpp, which holds the node's side (the proxies) and the rings' protocol.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hoprelay/common/doorbell.h"
#include "hoprelay/common/spsc_ring.h"
#include "hoprelay/daemon/link_threads.h"
#include "hoprelay/daemon/loop_watch.h"
#include "hoprelay/transport/eventfd_wakeup.h"

namespace hoprelay::daemon {

// Entries of each ring. A post takes a credit, and the links of one thread have at most a few
// thousand credits between them, so the command ring fills only when the thread is starved of
// CPU; then the proxy reports no credit until it drains (the acknowledgements that follow
// bring the node back). The event ring: the thread waits while it is full.
inline constexpr size_t kRingEntries = 16384;
inline constexpr size_t kOutcomeEntries = 256;

inline constexpr uint64_t pack(uint32_t credits, uint32_t consumed) {
  return (static_cast<uint64_t>(credits) << 32) | consumed;
}

// One downstream link, as both sides see it.
struct LinkThreads::Shared {
  uint32_t id = GenerationSlab<int>::kNone;  // until the node registers its proxy
  Worker* worker = nullptr;
  // The real link's credits (high half) when the thread had taken `consumed` posts (low half).
  std::atomic<uint64_t> credits{0};
  // The thread's side.
  std::unique_ptr<transport::OutboundLink> real;
  uint64_t epoch = 0;                  // drops of the real link so far
  uint32_t consumed = 0;               // posts taken from the ring (mod 2^32)
  uint64_t failed_epoch = UINT64_MAX;  // a post the real link refused in this epoch
  bool closed = false;
  bool destroyed = false;
  bool discarded = false;  // in Worker::discarded
  // Set by the thread once the real link is closed: close() waits for it.
  std::atomic<bool> closed_done{false};
};

// A thread with its own event loop and transport: the real links' events come here (on that
// thread) and go to the node's loop as Events.
struct LinkThreads::Worker final : transport::LinkEvents {
  Worker(LinkThreads& o) : owner(o) { discarded.reserve(256); }

  LinkThreads& owner;
  transport::EventLoop loop;
  // Its stall detector (watch_stalls), made and destroyed on the thread's side of the loop's
  // life: before the loop goes.
  std::optional<LoopWatch> watch;
  std::unique_ptr<transport::Transport> transport;
  SpscRing<Command> commands{kRingEntries};
  SpscRing<Event> events{kRingEntries};
  SpscRing<transport::Outcome> outcomes{kOutcomeEntries};
  transport::EventFdWakeup wake{loop, [this] { on_wake(); }};
  std::atomic<bool> notified{false};
  // The rare waits between the two sides, asleep: the node's loop for the thread (a close
  // done, room in `commands`), the thread for the node (room in `events` or `outcomes`).
  Doorbell to_node;
  Doorbell to_thread;
  std::atomic<bool> stop{false};
  bool stopping = false;  // the thread's: events are not sent any more
  // Setup work for the thread (connect, a new topology hash): not the data path.
  std::mutex control_mu;
  std::vector<std::function<void()>> control;
  std::atomic<bool> has_control{false};
  // Events the node's loop took out of `events` while a close() waited (loop's side).
  std::deque<Aside> aside;
  // Links with posts discarded in the current batch of commands (the thread's; reserved).
  std::vector<Shared*> discarded;
  // The thread's links.
  std::unordered_map<const transport::OutboundLink*, std::shared_ptr<Shared>> links;
  std::thread thread;

  Shared* of(const transport::OutboundLink& real) {
    auto it = links.find(&real);
    return it == links.end() ? nullptr : it->second.get();
  }
  void emit(EventKind kind, const transport::OutboundLink* real, void* cookie = nullptr,
            std::string_view text = {}, bool with_text = false) {
    Event e;
    e.kind = kind;
    if (real) {
      Shared* s = of(*real);
      if (!s) return;  // destroyed: the proxy is gone
      e.id = s->id;
    }
    e.cookie = cookie;
    if (with_text) e.text = new std::string(text);
    owner.emit(*this, e);
  }

  void on_wake() {
    // Cleared before the ring is read, and both sides use read-modify-writes of the flag (a
    // total order): either the sender's comes after this one and it sees false and wakes us,
    // or it came before and this one synchronizes with it, so its push is seen below. A
    // standalone fence would do too, but ThreadSanitizer neither checks nor (GCC: -Werror=tsan)
    // compiles it.
    notified.exchange(false, std::memory_order_acq_rel);
    owner.drain_commands(*this);
  }

  // LinkEvents: the thread's transport only connects, so nothing comes in.
  bool admit(const transport::PeerInfo&, std::string& reason) override {
    reason = "not listening";
    return false;
  }
  void on_inbound_up(transport::InboundLink&) override {}
  void on_message(transport::InboundLink&, transport::Slot&) override { std::abort(); }
  void on_inbound_down(transport::InboundLink&, std::string_view) override {}

  void on_outbound_up(transport::OutboundLink& real) override {
    Shared* s = of(real);
    if (!s) return;
    s->credits.store(pack(real.credits(), s->consumed), std::memory_order_release);
    Event e;
    e.kind = EventKind::kUp;
    e.id = s->id;
    e.max_payload = real.max_payload();
    e.peer_next_seq = real.peer_next_seq();
    owner.emit(*this, e);
  }
  void on_outbound_down(transport::OutboundLink& real, std::string_view reason) override {
    Shared* s = of(real);
    if (!s) return;
    ++s->epoch;  // posts made before the proxy hears of this are discarded (it returns them)
    s->credits.store(pack(0, s->consumed), std::memory_order_release);
    emit(EventKind::kDown, &real, nullptr, reason, true);
  }
  void on_acked(transport::OutboundLink& real, void* cookie) override {
    emit(EventKind::kAcked, &real, cookie);
  }
  void on_outcome(transport::OutboundLink& real, void* cookie,
                  const transport::Outcome& outcome) override {
    if (!of(real) || stopping) return;
    if (!outcomes.push(outcome)) {
      bool stopped = false;
      to_node.ring();  // a node's loop asleep in a close() takes what is there
      to_thread.sleep_until([&] {
        stopped = stop.load(std::memory_order_acquire);  // nobody reads them any more
        return stopped || outcomes.push(outcome);
      });
      if (stopped) return;
    }
    emit(EventKind::kOutcome, &real, cookie);
  }
  // The proxy hands back what it holds when it hears of the drop: it knows the posts this
  // thread discarded too, and their order.
  void on_returned(transport::OutboundLink&, void*) override {}
  void on_credit(transport::OutboundLink& real) override {
    Shared* s = of(real);
    if (!s) return;
    s->credits.store(pack(real.credits(), s->consumed), std::memory_order_release);
    emit(EventKind::kCredit, &real);
  }
  void on_protocol_error(std::string_view kind) override {
    emit(EventKind::kProtocolError, nullptr, nullptr, kind, true);
  }
  void on_completion_error(std::string_view status) override {
    emit(EventKind::kCompletionError, nullptr, nullptr, status, true);
  }
  void on_connect_timeout(transport::OutboundLink& real) override {
    emit(EventKind::kConnectTimeout, &real);
  }
  void on_device_lost(std::string_view device) override {
    emit(EventKind::kDeviceLost, nullptr, nullptr, device, true);
  }
  void on_refused(transport::OutboundLink& real, std::string_view reason) override {
    emit(EventKind::kRefused, &real, nullptr, reason, true);
  }
};

}  // namespace hoprelay::daemon
