// `link_threads = N`: a node's downstream links run on N threads of their own, each with its
// own event loop and its own transport (for TCP: its own epoll and sockets), while routing,
// acknowledgement bookkeeping and the stage stay where they are. A fan-out node sends every
// message once per branch, and each send is a copy (TCP) or a completion to reap (verbs):
// with the branches spread over threads those copies run on several cores.
//
// The node still sees one OutboundLink per downstream (a proxy, as the transport decorators of
// brpc), so nothing above the transport interface changes. The proxy and the real link talk
// through two single-producer single-consumer rings per thread (posts one way, events the
// other) and an eventfd each way: no lock, no allocation per message.
//
// Who owns what, and why it stays consistent:
//  - The proxy (node's thread) keeps the frames it posted and that are not acknowledged yet,
//    in post order. The real link acknowledges in order too, so an acknowledgement from the
//    thread is always for the proxy's oldest frame.
//  - When the real link drops, the thread's next event says so; the proxy then hands back
//    every frame it still holds, newest first, itself: those the real link had sent and those
//    still in the ring. Each side counts the drops (an epoch), and the thread discards posts
//    made before the proxy learned of the drop, so no frame of a dead connection goes out on
//    the next one.
//  - Credits: the thread publishes, with one atomic store, the real link's credits and how
//    many posts it had taken when it read them; the proxy subtracts what it posted since. The
//    result is never more than the real link would accept.
//  - close() is synchronous, as a transport's: it waits until the thread has closed the real
//    link (BYE), then hands the frames back; the node relies on both. The proxy's destruction
//    hands nothing back (as a transport's link): the thread destroys the real link when it
//    gets to the command.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hoprelay/common/generation_slab.h"
#include "hoprelay/common/spsc_ring.h"
#include "hoprelay/transport/eventfd_wakeup.h"
#include "hoprelay/transport/transport.h"

namespace hoprelay::daemon {

class NodeMetrics;

class LinkThreads {
 public:
  // `options` and `identity` as the node's own transport, `memory_owner`: that transport,
  // whose slots the links send from (over verbs the threads' queue pairs share its protection
  // domain; it must outlive this). `cpus`: thread i is pinned to cpus[i % size] (empty: not
  // pinned). Throws transport::TransportError.
  LinkThreads(transport::EventLoop& loop, transport::LinkEvents& events, size_t threads,
              const transport::TransportOptions& options, const transport::Identity& identity,
              const std::vector<uint32_t>& cpus, transport::Transport& memory_owner);
  ~LinkThreads();  // closes the links (BYE), stops and joins the threads
  LinkThreads(const LinkThreads&) = delete;
  LinkThreads& operator=(const LinkThreads&) = delete;

  size_t threads() const { return workers_.size(); }
  // An outbound link on the next thread (round robin), connecting now.
  std::unique_ptr<transport::OutboundLink> connect(const transport::ConnectParams& params);
  // A reload: `apply` runs on each thread's transport, on that thread (a copy per thread).
  void each_transport(const std::function<void(transport::Transport&)>& apply);
  // A stall detector on each thread's loop (loop_watch.h: loop="link-0", "link-1", ...):
  // `metrics` must outlive this.
  void watch_stalls(NodeMetrics& metrics);

 private:
  struct Shared;
  class Proxy;
  struct Worker;

  // What the threads tell the node's loop, in order, per thread.
  enum class EventKind : uint8_t {
    kUp,
    kDown,
    kAcked,
    kOutcome,
    kCredit,
    kRefused,
    kConnectTimeout,
    kProtocolError,
    kCompletionError,
    kDeviceLost,
  };
  struct Event {
    EventKind kind = EventKind::kAcked;
    uint32_t id = 0;
    void* cookie = nullptr;
    uint32_t max_payload = 0;
    uint64_t peer_next_seq = 0;
    std::string* text = nullptr;  // control events only (not per message): owned by the event
  };
  enum class CommandKind : uint8_t { kPost, kClose, kDestroy, kReset };
  struct Command {
    CommandKind kind = CommandKind::kPost;
    uint64_t epoch = 0;
    Shared* link = nullptr;
    transport::OutFrame frame;
    std::shared_ptr<Shared>* keep = nullptr;  // kDestroy: the thread's reference, owned
    std::string* text = nullptr;              // kReset: its reason, owned
  };
  // An event taken out of the ring early (wait_for), with its outcome.
  struct Aside {
    Event event;
    std::unique_ptr<transport::Outcome> outcome;
  };

  void run(Worker& w, int cpu);
  void drain_commands(Worker& w);
  void publish_credits(Worker& w);
  // Thread side: queues an event for the node's loop (waits while the ring is full: the loop
  // never waits for a thread, so it drains it).
  void emit(Worker& w, const Event& e);
  // The node's loop: handles every event the threads queued.
  void on_wakeup();
  void handle(Worker& w, const Event& e, transport::Outcome* aside_outcome);
  // Node side: queues a command and wakes the thread; false when its ring is full.
  bool send(Worker& w, const Command& c);
  // The same for a command that must get there (close, destroy): waits for room.
  void send_control(Worker& w, const Command& c);
  // Waits until the thread has done what `done` says, setting its events aside meanwhile (the
  // thread may be waiting for room in its event ring).
  void wait_for(Worker& w, const std::atomic<bool>& done);
  void set_aside(Worker& w);
  // close(): handles the acknowledgements (and outcomes) of `p` set aside, in order.
  void take_acks(Worker& w, Proxy& p);

  transport::EventLoop& loop_;
  transport::LinkEvents& events_;
  std::unique_ptr<transport::EventFdWakeup> wakeup_;
  std::atomic<bool> loop_notified_{false};
  std::vector<std::unique_ptr<Worker>> workers_;
  transport::Transport& memory_owner_;
  bool memory_shared_ = false;
  bool device_lost_ = false;  // said once, as a transport does
  // By link id (Shared::id), reused as links come and go (node's thread): an event a thread
  // queued for a destroyed proxy finds nothing, never the proxy that took its slot.
  GenerationSlab<Proxy> proxies_;
  size_t next_worker_ = 0;
};

}  // namespace hoprelay::daemon
