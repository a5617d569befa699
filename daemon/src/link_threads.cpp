#include "hoprelay/daemon/link_threads.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "hoprelay/daemon/cpu_pin.h"
#include "hoprelay/daemon/loop_watch.h"
#include "hoprelay/transport/frame_ledger.h"
#include "hoprelay/transport/log.h"
#include "link_thread_worker.h"

namespace hoprelay::daemon {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("node");
  return *logger;
}

}  // namespace

// What the node holds for a downstream: the frames it posted and that are not acknowledged
// yet, in order, and the real link's state as the last event said.
class LinkThreads::Proxy final : public transport::OutboundLink {
 public:
  Proxy(LinkThreads& owner, std::shared_ptr<Shared> shared, const std::string& peer_name,
        uint32_t expected_slots)
      : owner_(owner), shared_(std::move(shared)) {
    peer_name_ = peer_name;
    const uint32_t n = std::max<uint32_t>(16, expected_slots);
    ledger_.reset(n, n);
  }
  ~Proxy() override {
    owner_.proxies_.remove(shared_->id);
    Command c;
    c.kind = CommandKind::kDestroy;
    c.link = shared_.get();
    // The thread's reference until it gets to the command (the control job that would have
    // held one may have given up already: a link closed before it connected).
    c.keep = new std::shared_ptr<Shared>(shared_);
    owner_.send_control(*shared_->worker, c);
  }

  bool up() const override { return up_; }
  uint32_t credits() const override {
    if (!up_) return 0;
    uint64_t snap = shared_->credits.load(std::memory_order_acquire);
    uint32_t real = static_cast<uint32_t>(snap >> 32);
    uint32_t since = posted_ - static_cast<uint32_t>(snap);  // posts the snapshot has not seen
    return real > since ? real - since : 0;
  }
  uint32_t in_flight() const override { return ledger_.in_flight(); }
  uint32_t max_payload() const override { return up_ ? max_payload_ : 0; }

  bool post(const transport::OutFrame& frame) override {
    if (credits() == 0) return false;
    // More frames in flight than it was sized for: the peer's slots grew on a reload.
    if (ledger_.in_flight() == ledger_.capacity()) ledger_.grow(2 * ledger_.capacity());
    Command c;
    c.kind = CommandKind::kPost;
    c.epoch = epoch_;
    c.link = shared_.get();
    c.frame = frame;
    // The real link's ledger is the thread's: it must not read the slot's generation, which
    // this loop writes. This proxy's ledger checks it (frame_ledger.h).
    c.frame.slot = nullptr;
    if (!owner_.send(*shared_->worker, c)) return false;  // the thread is behind: see kRingEntries
    ledger_.push(frame);
    ++posted_;
    return true;
  }

  // Synchronous, as a transport's close(): the frames come back only once the thread has
  // closed the real link, so it sends none of them after the node has them back (they may go
  // to another link, or their slots be released).
  void close() override {
    if (closed_ || closing_) return;
    closing_ = true;
    Command c;
    c.kind = CommandKind::kClose;
    c.link = shared_.get();
    owner_.send_control(*shared_->worker, c);
    owner_.wait_for(*shared_->worker, shared_->closed_done);
    // Acknowledgements the real link had before it closed count, as they would have without
    // the thread: only what is still unacknowledged comes back.
    owner_.take_acks(*shared_->worker, *this);
    closed_ = true;
    drop("closed on purpose");
  }

  // As the real link's: the thread drops it, and its down event hands the frames back here.
  void reset(std::string_view reason) override {
    if (!up_ || closed_ || closing_) return;
    Command c;
    c.kind = CommandKind::kReset;
    c.link = shared_.get();
    c.text = new std::string(reason);  // a reset is rare: not per message
    owner_.send_control(*shared_->worker, c);
  }

  // The thread's events for this link (node's loop).
  void on_up(const Event& e) {
    if (closed_) return;
    up_ = true;
    max_payload_ = e.max_payload;
    peer_next_seq_ = e.peer_next_seq;
    owner_.events_.on_outbound_up(*this);
  }
  void on_down(std::string_view reason) {
    if (closed_) return;
    ++epoch_;
    drop(reason);
  }
  void on_acked(void* cookie) {
    if (closed_) return;
    if (ledger_.empty() || ledger_.oldest().cookie != cookie) {
      log().critical(
          "internal error: link thread acknowledged a frame the link to {} did not "
          "post next: stopping",
          peer_name_);
      log().flush();
      std::abort();
    }
    ledger_.acknowledge(1, ledger_.tail(), [this](void* c) { owner_.events_.on_acked(*this, c); });
  }
  bool closed() const { return closed_; }

 private:
  friend class LinkThreads;

  // Down (or closed): every frame not acknowledged comes back, newest first.
  void drop(std::string_view reason) {
    bool was_up = std::exchange(up_, false);
    ledger_.return_all([this](void* cookie) { owner_.events_.on_returned(*this, cookie); });
    if (was_up) owner_.events_.on_outbound_down(*this, reason);
  }

  LinkThreads& owner_;
  std::shared_ptr<Shared> shared_;
  bool up_ = false;
  bool closing_ = false;  // in close(), waiting for the thread
  bool closed_ = false;
  uint32_t max_payload_ = 0;
  uint64_t epoch_ = 0;
  uint32_t posted_ = 0;  // mod 2^32, as Shared::consumed
  // Frames posted and not acknowledged (frame_ledger.h): the thread's link validated credits
  // and outcomes; the proxy checks that its acknowledgements come in posting order.
  transport::FrameLedger ledger_;
};

LinkThreads::LinkThreads(transport::EventLoop& loop, transport::LinkEvents& events, size_t threads,
                         const transport::TransportOptions& options,
                         const transport::Identity& identity, const std::vector<uint32_t>& cpus,
                         transport::Transport& memory_owner)
    : loop_(loop), events_(events), memory_owner_(memory_owner) {
  wakeup_ = std::make_unique<transport::EventFdWakeup>(loop_, [this] { on_wakeup(); });
  for (size_t i = 0; i < threads; ++i) {
    auto w = std::make_unique<Worker>(*this);
    auto choice = transport::make_transport(options, w->loop, *w, identity);
    if (choice.transport->name() != memory_owner.name()) {
      throw transport::TransportError("link_threads: the links' threads chose transport " +
                                      std::string(choice.transport->name()) +
                                      " where the node runs " + std::string(memory_owner.name()) +
                                      ": set transport explicitly for this node");
    }
    w->transport = std::move(choice.transport);
    workers_.push_back(std::move(w));
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    int cpu = cpus.empty() ? -1 : static_cast<int>(cpus[i % cpus.size()]);
    Worker& w = *workers_[i];
    w.thread = std::thread([this, &w, cpu] { run(w, cpu); });
  }
}

LinkThreads::~LinkThreads() {
  for (auto& w : workers_) {
    w->stop.store(true);
    w->wake.notify();
    w->to_thread.ring();  // asleep for room in a ring nobody empties any more
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  for (auto& w : workers_) {
    Event e;
    while (w->events.pop(e)) delete e.text;
    Command c;
    while (w->commands.pop(c)) delete c.keep;
    for (Aside& a : w->aside) delete a.event.text;
    w->aside.clear();
    w->links.clear();
    w->transport.reset();
  }
}

void LinkThreads::run(Worker& w, int cpu) {
  if (cpu >= 0) {
    std::string why = pin_this_thread(static_cast<uint32_t>(cpu));
    if (!why.empty()) log().warn("link thread: {}", why);
  }
  while (!w.stop.load(std::memory_order_acquire)) {
    w.loop.run_once(std::chrono::milliseconds(1000));
    drain_commands(w);  // what came in during the iteration's events
  }
  // Stopping: what the node asked for last (its closes: BYE) is done, then every link still
  // open says goodbye, so peers log a clean close.
  w.stopping = true;
  drain_commands(w);
  for (auto& [real, s] : w.links) {
    if (s->real && !s->closed) s->real->close();
  }
  w.loop.run_once(std::chrono::milliseconds(0));
}

std::unique_ptr<transport::OutboundLink> LinkThreads::connect(
    const transport::ConnectParams& params) {
  if (!memory_shared_) {
    // The node listens before it connects: its transport has opened the device by now.
    // (Written here, read by each thread after the control job below hands it over.)
    for (auto& wp : workers_) wp->transport->speak_for(memory_owner_);
    memory_shared_ = true;
  }
  Worker& w = *workers_[next_worker_++ % workers_.size()];
  auto shared = std::make_shared<Shared>();
  shared->worker = &w;
  auto proxy = std::make_unique<Proxy>(*this, shared, params.peer_name, params.expected_slots);
  shared->id = proxies_.add(proxy.get());
  {
    std::lock_guard lock(w.control_mu);
    w.control.push_back([&w, shared, params] {
      if (shared->closed || shared->destroyed) return;
      // Registered before connect(): a link may report its first events from inside it.
      auto real = w.transport->connect(params);
      w.links.emplace(real.get(), shared);
      shared->real = std::move(real);
    });
    w.has_control.store(true, std::memory_order_release);
  }
  w.notified.store(true);
  w.wake.notify();
  return proxy;
}

void LinkThreads::watch_stalls(NodeMetrics& metrics) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = *workers_[i];
    std::string name = "link-" + std::to_string(i);
    std::lock_guard lock(w.control_mu);
    // On the thread: the loop reads its observer there.
    w.control.push_back([&w, &metrics, name] { w.watch.emplace(w.loop, metrics, name); });
    w.has_control.store(true, std::memory_order_release);
    w.wake.notify();
  }
}

void LinkThreads::each_transport(const std::function<void(transport::Transport&)>& apply) {
  for (auto& wp : workers_) {
    Worker& w = *wp;
    std::lock_guard lock(w.control_mu);
    w.control.push_back([&w, apply] { apply(*w.transport); });
    w.has_control.store(true, std::memory_order_release);
    w.wake.notify();
  }
}

bool LinkThreads::send(Worker& w, const Command& c) {
  if (!w.commands.push(c)) return false;
  // Against the thread's clearing of `notified` (Worker::on_wake): see there.
  if (!w.notified.exchange(true, std::memory_order_acq_rel)) w.wake.notify();
  return true;
}

void LinkThreads::send_control(Worker& w, const Command& c) {
  // A full ring (the thread behind on posts) drains: the thread waits for nothing of ours but
  // room for its events, which set_aside() makes; it rings once it took commands.
  if (send(w, c)) return;
  w.to_node.sleep_until([&] {
    set_aside(w);
    return send(w, c);
  });
}

void LinkThreads::wait_for(Worker& w, const std::atomic<bool>& done) {
  // The thread rings once it is done, and whenever it waits for room in its rings.
  w.to_node.sleep_until([&] {
    set_aside(w);
    return done.load(std::memory_order_acquire);
  });
  // What was set aside is handled in order, before anything newer, at the next wake-up.
  if (!w.aside.empty()) wakeup_->notify();
}

void LinkThreads::take_acks(Worker& w, Proxy& p) {
  set_aside(w);  // the last ones, sent before the thread said it closed the link
  std::vector<Aside> mine;
  for (auto it = w.aside.begin(); it != w.aside.end();) {
    if (it->event.id == p.shared_->id &&
        (it->event.kind == EventKind::kAcked || it->event.kind == EventKind::kOutcome)) {
      mine.push_back(std::move(*it));
      it = w.aside.erase(it);
    } else {
      ++it;
    }
  }
  // In order; a handler may close another link meanwhile (it sets more aside: newer ones).
  for (Aside& a : mine) {
    if (a.event.kind == EventKind::kAcked) {
      p.on_acked(a.event.cookie);
    } else {
      events_.on_outcome(p, a.event.cookie, *a.outcome);
    }
  }
}

void LinkThreads::set_aside(Worker& w) {
  Event e;
  while (w.events.pop(e)) {
    Aside a{e, nullptr};
    if (e.kind == EventKind::kOutcome) {
      a.outcome = std::make_unique<transport::Outcome>();
      w.outcomes.pop(*a.outcome);
    }
    w.aside.push_back(std::move(a));
  }
  w.to_thread.ring();  // room: the thread may be asleep for it
}

void LinkThreads::drain_commands(Worker& w) {
  // The lock only when there is setup work: not once per batch of posts. None once stopping
  // (a connect that would be dropped at once).
  if (!w.stopping && w.has_control.load(std::memory_order_acquire)) {
    std::vector<std::function<void()>> control;
    {
      std::lock_guard lock(w.control_mu);
      control.swap(w.control);
      w.has_control.store(false, std::memory_order_relaxed);
    }
    for (auto& job : control) job();
  }
  Command c;
  bool took = false;
  while (w.commands.pop(c)) {
    took = true;
    Shared& s = *c.link;
    switch (c.kind) {
      case CommandKind::kPost:
        ++s.consumed;
        if (!s.real || s.closed || c.epoch != s.epoch || c.epoch == s.failed_epoch) {
          // Posted before the proxy heard of a drop: it hands the frame back itself. The
          // credits it sees must count this post as taken without a credit spent.
          if (!s.discarded) {
            s.discarded = true;
            w.discarded.push_back(&s);  // reserved: no allocation
          }
          break;
        }
        if (!s.real->post(c.frame)) {
          // The peer is draining (no credit left, its goodbye follows): this frame and the
          // ones after it in this epoch stay with the proxy, which hands them back when the
          // link goes down.
          s.failed_epoch = c.epoch;
        }
        break;
      case CommandKind::kReset: {
        std::unique_ptr<std::string> reason(c.text);
        if (s.real && !s.closed && !s.destroyed) s.real->reset(*reason);
        break;
      }
      case CommandKind::kClose:
        s.closed = true;
        if (s.real) s.real->close();
        s.closed_done.store(true, std::memory_order_release);
        w.to_node.ring();  // the node's loop sleeps in close() until this
        break;
      case CommandKind::kDestroy: {
        std::unique_ptr<std::shared_ptr<Shared>> keep(c.keep);
        s.destroyed = true;
        if (!s.real) break;
        w.links.erase(s.real.get());
        // Destroyed after this iteration's events (event_loop.h): one may be for it.
        w.loop.defer([keep = std::shared_ptr<Shared>(*keep)] { keep->real.reset(); });
        break;
      }
    }
  }
  // Posts discarded after a drop (and maybe a reconnect): without a fresh snapshot and an
  // event to read it, the proxy would count them against the new connection's credits for
  // good. Every such link of the batch.
  for (Shared* d : w.discarded) {
    d->discarded = false;
    if (d->destroyed || !d->real) continue;
    d->credits.store(pack(d->real->credits(), d->consumed), std::memory_order_release);
    w.emit(EventKind::kCredit, d->real.get());
  }
  w.discarded.clear();
  if (took) w.to_node.ring();  // room in `commands`: the node's loop may be asleep for it
}

void LinkThreads::emit(Worker& w, const Event& e) {
  if (!w.stopping && !w.events.push(e)) {
    w.to_node.ring();  // a node's loop asleep in a close() takes what is there
    w.to_thread.sleep_until([&] {
      if (w.stop.load(std::memory_order_acquire)) w.stopping = true;  // nobody reads them now
      return w.stopping || w.events.push(e);
    });
  }
  if (w.stopping) {
    delete e.text;
    return;
  }
  // As in send(): a read-modify-write against on_wakeup's.
  if (!loop_notified_.exchange(true, std::memory_order_acq_rel)) wakeup_->notify();
}

void LinkThreads::on_wakeup() {
  loop_notified_.exchange(false, std::memory_order_acq_rel);  // as in Worker::on_wake
  for (auto& w : workers_) {
    // Events a close() set aside while it waited are older than those still in the ring (and
    // a handler's close() may set more aside meanwhile): they go first.
    Event e;
    while (true) {
      if (!w->aside.empty()) {
        Aside a = std::move(w->aside.front());
        w->aside.pop_front();
        handle(*w, a.event, a.outcome.get());
      } else if (w->events.pop(e)) {
        handle(*w, e, nullptr);
      } else {
        break;
      }
    }
    w->to_thread.ring();  // room: the thread may be asleep for it
  }
}

void LinkThreads::handle(Worker& w, const Event& e, transport::Outcome* aside_outcome) {
  std::unique_ptr<std::string> text(e.text);
  std::string_view what = text ? std::string_view(*text) : std::string_view();
  switch (e.kind) {
    case EventKind::kProtocolError:
      return events_.on_protocol_error(what);
    case EventKind::kCompletionError:
      return events_.on_completion_error(what);
    case EventKind::kDeviceLost:
      if (std::exchange(device_lost_, true)) return;
      return events_.on_device_lost(what);
    default:
      break;
  }
  transport::Outcome outcome;
  if (e.kind == EventKind::kOutcome) {
    if (aside_outcome) {
      outcome = *aside_outcome;
    } else {
      w.outcomes.pop(outcome);
    }
  }
  Proxy* p = proxies_.find(e.id);
  if (!p || p->closed()) return;
  switch (e.kind) {
    case EventKind::kUp:
      return p->on_up(e);
    case EventKind::kDown:
      return p->on_down(what);
    case EventKind::kAcked:
      return p->on_acked(e.cookie);
    case EventKind::kOutcome:
      return events_.on_outcome(*p, e.cookie, outcome);
    case EventKind::kCredit:
      return events_.on_credit(*p);
    case EventKind::kRefused:
      return events_.on_refused(*p, what);
    case EventKind::kConnectTimeout:
      return events_.on_connect_timeout(*p);
    default:
      return;
  }
}

}  // namespace hoprelay::daemon
