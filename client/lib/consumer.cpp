#include "consumer.h"

#include <cstring>

#include "embedded_node.h"
#include "hoprelay/transport/log.h"
#include "status.h"

namespace hoprelay::client {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("consumer");
  return *logger;
}

}  // namespace

Consumer::Consumer(std::shared_ptr<const config::Topology> topology, const std::string& node,
                   const std::string& state_dir) {
  node_name_ = node;
  slots_ = topology->find(node)->slots;
  if (!state_dir.empty()) {
    try {
      positions_ = std::make_unique<stages::PositionFile>(state_dir);
    } catch (const std::exception& e) {
      throw ClientError(HOPRELAY_EUNAVAILABLE, std::string("state_dir: ") + e.what());
    }
  }
  loop_.set_pollable(true);
  if (positions_) {
    // Streams that ended before: their end marks again (only them), so an application that
    // restarts after the end knows it has everything.
    for (const auto& [origin, seq] : positions_->ended()) {
      Item& item = take_item();
      item = Item{};
      item.origin = origin;
      item.flags = HOPRELAY_MESSAGE_END;
      item.seq = seq;
      ready_.push_back(&item);
    }
  }
  node_ = start_node(topology, node, loop_, [this](daemon::Node& n) {
    n.set_receiver(this);
    n.when_device_lost([this](std::string_view device) { lost_ = device; });
  });
  schedule_tick();
}

Consumer::~Consumer() {
  if (tick_) loop_.cancel(tick_);
  if (!committing_.empty()) {
    try {
      commit();  // a clean close acknowledges what was released
    } catch (...) {
      // Not durable, so not acknowledged: it comes again.
    }
  }
  try {
    loop_.run_once(std::chrono::milliseconds(0));  // the credits of the last releases go out
    if (!node_->spec().is_leaf()) finish_relaying();
  } catch (...) {
    // A destructor (and hoprelay_consumer_close) must not throw: what was not acknowledged
    // comes again.
  }
  // Messages the application still holds are not acknowledged: they come again.
  for (auto& item : items_) item->held = nullptr;
  node_.reset();
}

// A relay's messages go on to its peers after the application released them: the node stays
// until its peers have acknowledged everything the application is done with (an end mark the
// producer waits for among them), for at most kRelayCloseTimeout, and until its spools have
// drained, as long as they do. What is still held then is
// not acknowledged upstream, so it comes again (the peers drop what they had).
void Consumer::finish_relaying() {
  auto held_by_application = [this] {
    uint64_t n = 0;
    for (const auto& item : items_) n += item->held != nullptr;
    return n;
  };
  auto deadline = std::chrono::steady_clock::now() + kRelayCloseTimeout;
  // With spool_dir, a branch that was behind still has the spool to get: the relay finishes
  // it before it goes (else that branch waits for the relay's next run), as long as it drains:
  // kRelayCloseTimeout from the last frame a branch took from it.
  uint64_t spooled = node_->spooled();
  if (spooled) {
    log().info(
        "relay {}: {} frames in its spools wait for their branches: sending them before "
        "closing",
        node_->spec().name, spooled);
  }
  while ((node_->held() > held_by_application() || node_->spooled() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    loop_.run_once(std::chrono::milliseconds(50));
    if (node_->spooled() < spooled) {
      spooled = node_->spooled();
      deadline = std::chrono::steady_clock::now() + kRelayCloseTimeout;
    }
  }
  if (node_->spooled() > 0) {
    log().warn(
        "closing relay {} with {} frames in its spools: they go to their branches from "
        "its next run",
        node_->spec().name, node_->spooled());
  }
  if (node_->held() > held_by_application()) {
    log().warn(
        "closing relay {} with {} messages its peers have not acknowledged: its upstream "
        "sends them again to its next run",
        node_->spec().name, node_->held() - held_by_application());
    return;
  }
  if (node_->held() != 0) return;  // the application's: they come again
  // Nothing held: stop as hoprelayd stops its node (a drain), so that the peers are told
  // goodbye rather than see their connections drop, which they log as a failure. By the
  // clock, not by loop passes: a busy-polling node's loop never sleeps.
  const auto stop_by = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  auto stopped = std::make_shared<bool>(false);  // the node may outlive this frame
  node_->drain(std::chrono::seconds(1), [stopped](uint64_t) { *stopped = true; });
  while (!*stopped && std::chrono::steady_clock::now() < stop_by) {
    loop_.run_once(std::chrono::milliseconds(20));
  }
  loop_.run_once(std::chrono::milliseconds(0));  // the goodbyes go out
}

void Consumer::schedule_tick() {
  // Once a second, as hoprelayd does: the stage's flush, orphaned chunks, the gauges.
  tick_ = loop_.after(std::chrono::seconds(1), [this] {
    node_->tick();
    schedule_tick();
  });
}

Consumer::Item& Consumer::take_item() {
  if (free_.empty()) {
    items_.push_back(std::make_unique<Item>());
    free_.push_back(items_.back().get());
  }
  Item* item = free_.back();
  free_.pop_back();
  item->abandoned = false;
  return *item;
}

void Consumer::on_delivered(uint32_t origin, uint64_t seq, std::span<const std::byte> data,
                            transport::Slot& held, bool reassembled) {
  if (positions_ && positions_->had(origin, seq)) {
    // Taken by the application before (this consumer restarted, or what fed it did): a
    // replay. Acknowledged, not handed over again. (A late message of a split that joins
    // again is not "had": it is handed over.)
    ++skipped_;
    return node_->release_delivered(held);
  }
  Item& item = take_item();
  item.origin = origin;
  item.flags = 0;
  item.seq = seq;
  // The slot stays held, unacknowledged, until the application releases the message: its
  // bytes are the slot's (zero copy), and the upstream replays them if this process dies.
  item.held = &held;
  item.length = data.size();
  if (reassembled) {
    // The node's reassembly buffer is reused by the next message: the view needs its own.
    item.copy.resize(data.size());
    std::memcpy(item.copy.data(), data.data(), data.size());
    item.data = item.copy.data();
    item.flags = HOPRELAY_MESSAGE_COPY;  // said, so that an application can tell (client.h)
  } else {
    item.data = data.data();
  }
  ready_.push_back(&item);
}

void Consumer::on_end(uint32_t origin, uint64_t seq, transport::Slot& held) {
  Item& item = take_item();
  item.origin = origin;
  item.flags = HOPRELAY_MESSAGE_END;
  item.seq = seq;
  item.held = &held;
  if (!positions_) {
    // No bytes to read and no position to record it in: acknowledged at once.
    node_->release_delivered(held);
    item.held = nullptr;
  }
  item.data = nullptr;
  item.length = 0;
  ready_.push_back(&item);
}

int Consumer::recv(hoprelay_message& msg, int timeout_ms) {
  const auto deadline =
      transport::EventLoop::Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  // Messages delivered by the last loop iteration are handed out without a system call; the
  // loop runs when they are all out, and then sends the credits of every release since in
  // one go (a daemon's loop iteration batches the same way).
  if (!abandoned_.empty()) {
    return fail(HOPRELAY_ESTATE,
                "recv: " + abandoned_ +
                    " was abandoned: nothing received after it can be acknowledged "
                    "(acknowledgements go in order), so this consumer would stall once node " +
                    node_name_ +
                    "'s slots fill. Close the consumer and open it again to have that message "
                    "again; to skip a message instead, release it. (On a consumer with a "
                    "state_dir, hoprelay::Message abandons a message that leaves its scope "
                    "unreleased: release each with release_at() once the application has made "
                    "it durable.)");
  }
  if (ready_.empty()) loop_.run_once(std::chrono::milliseconds(0));
  if (!lost_.empty()) return fail_lost("recv");
  while (ready_.empty()) {
    if (!commit_error_.empty()) return fail(HOPRELAY_EINTERNAL, "state_dir: " + commit_error_);
    if (!lost_.empty()) return fail_lost("recv");
    auto wait = std::chrono::milliseconds(1000);
    if (timeout_ms >= 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                               transport::EventLoop::Clock::now());
      if (left.count() <= 0) {
        if (timeout_ms == 0) return fail(HOPRELAY_EAGAIN, "recv: no message yet");
        std::string why = "recv: no message within " + std::to_string(timeout_ms) + " ms";
        if (out_ == 0 && node_->inbound_links() == 0) {
          // Nothing can come: say why, not only that nothing came.
          const auto& up = node_->spec().upstream;
          std::string names;
          for (const auto& n : up) names += (names.empty() ? "" : ", ") + n;
          why += up.empty() ? " (no producer is connected to node " + node_name_ + ")"
                            : " (no upstream link into node " + node_name_ + " is up: is " +
                                  (up.size() == 1 ? "its upstream node " : "one of ") + names +
                                  " running, with this topology?)";
        }
        if (out_ > 0) {
          // An application that forgets to release stalls its upstream: say so, not only
          // that nothing came.
          why += " (the application holds " + counted(out_, "message") + " it has not released";
          std::string waiting;
          // With a state_dir, releases are recorded (and acknowledged) in order: those after
          // an unreleased message wait for it, and hold their slots meanwhile.
          if (const size_t behind = positions_ ? unreleased_.size() - out_ : 0) {
            why += ", and " + std::to_string(behind) +
                   " it released after them wait for them to be recorded in order";
          } else if (!positions_) {
            // Without one, credits go back in ring order: what was released after a held
            // message keeps its slot until that one is released, so one held message stops
            // the stream once the slots are used (per link: "up to" with several upstreams).
            const Item* oldest = nullptr;
            for (const auto& item : items_) {
              if (item->out && item->held && (!oldest || item->received < oldest->received)) {
                oldest = item.get();
              }
            }
            uint64_t behind = 0;
            if (oldest) {
              behind = received_ - oldest->received;
              for (const auto& item : items_) {
                if (item->out && item->received > oldest->received) --behind;
              }
            }
            if (behind > 0) {
              waiting = "; up to " + std::to_string(behind) + " it released after message " +
                        std::to_string(oldest->seq) + " of origin " +
                        std::to_string(oldest->origin) +
                        " keep their slots until that one is released too (slots are "
                        "acknowledged in the order they were received)";
            }
          }
          why += ", of the " + std::to_string(slots_) + " slots of each link into node " +
                 node_name_ + ": its upstream sends more only as they are released" + waiting + ")";
        }
        return fail(HOPRELAY_ETIMEDOUT, why);
      }
      wait = std::min(wait, left);
    }
    loop_.run_once(wait);
  }
  // An end mark: the credits of the releases since the last loop pass go out first, once per
  // stream. It can arrive while the application still holds messages before it (the producer
  // sends it behind them, at once), and its producer waits for its acknowledgement: that
  // must not wait for a later call the application may never make.
  if (ready_.front()->flags & HOPRELAY_MESSAGE_END) loop_.run_once(std::chrono::milliseconds(0));
  Item* item = ready_.front();
  ready_.pop_front();
  item->out = true;
  item->received = ++received_;
  ++out_;
  if (positions_) unreleased_.push_back(item);
  msg = {item->origin, item->flags, item->seq, item->data, item->length, item};
  return HOPRELAY_OK;
}

Consumer::Item* Consumer::out_item(const hoprelay_message& msg, const char* what) {
  auto* item = static_cast<Item*>(msg.internal_);
  // Items are reused: a stale copy of a released message may point at one that now holds
  // another message, which it must not release.
  if (!item || !item->out || item->abandoned || item->origin != msg.origin ||
      item->seq != msg.seq || item->flags != msg.flags) {
    fail(HOPRELAY_ESTATE,
         std::string(what) + ": not a message from recv, or released (or abandoned) already");
    return nullptr;
  }
  return item;
}

int Consumer::release(hoprelay_message& msg, std::optional<uint64_t> app) {
  Item* item = out_item(msg, "release");
  if (!item) return HOPRELAY_ESTATE;
  item->out = false;
  --out_;
  msg.internal_ = nullptr;
  msg.data = nullptr;
  if (positions_) {
    item->app = app;
    advance();
    return HOPRELAY_OK;
  }
  if (item->held) node_->release_delivered(*std::exchange(item->held, nullptr));
  free_.push_back(item);
  return HOPRELAY_OK;  // the credit goes out with the next recv or process that runs the loop
}

int Consumer::abandon(hoprelay_message& msg) {
  Item* item = out_item(msg, "abandon");
  if (!item) return HOPRELAY_ESTATE;
  // Still out: its slot stays held (unacknowledged) until the consumer closes, and with a
  // state_dir the position never passes it, so a restarted consumer gets it again.
  item->abandoned = true;
  msg.internal_ = nullptr;
  msg.data = nullptr;
  if (abandoned_.empty()) {
    abandoned_ =
        "message " + std::to_string(item->seq) + " of origin " + std::to_string(item->origin);
  }
  return HOPRELAY_OK;
}

void Consumer::advance() {
  bool recorded = false;
  std::optional<uint32_t> forgot;
  while (!unreleased_.empty() && !unreleased_.front()->out) {
    Item* item = unreleased_.front();
    unreleased_.pop_front();
    if (item->held) {  // (an end mark replayed from the position file holds nothing)
      if (item->flags & HOPRELAY_MESSAGE_END) {
        forgot = positions_->end(item->origin, item->seq);
      } else {
        // A plain release keeps the application's position: 0 would make a restarted
        // `hoprelay recv --state-dir` cut its output file back to nothing.
        forgot = positions_->take(item->origin, item->seq, item->app.value_or(positions_->app()));
      }
      committing_.push_back(std::exchange(item->held, nullptr));
      recorded = true;
    }
    free_.push_back(item);
    if (forgot) {
      log().warn(
          "state_dir: the position holds {} origins at most: origin {} (taken least recently) "
          "is forgotten for origin {}; should its messages come again, they are taken again",
          stages::PositionFile::kMaxOrigins, *forgot, item->origin);
      forgot.reset();
    }
  }
  // Acknowledged once durable: one commit for everything released in this loop iteration.
  if (recorded && !commit_scheduled_) {
    commit_scheduled_ = true;
    loop_.defer([this] {
      commit_scheduled_ = false;
      try {
        commit();
      } catch (const std::exception& e) {
        commit_error_ = e.what();
      }
    });
  }
}

int Consumer::process() {
  loop_.run_once(std::chrono::milliseconds(0));
  if (!commit_error_.empty()) return fail(HOPRELAY_EINTERNAL, "state_dir: " + commit_error_);
  if (!lost_.empty()) return fail_lost("process");
  return HOPRELAY_OK;
}

int Consumer::fail_lost(const char* what) {
  return fail(HOPRELAY_EUNAVAILABLE,
              std::string(what) + ": RDMA device " + lost_ +
                  " is gone (removed or failed): the node's links are down for good. Close this "
                  "consumer and open it again once a device serves its address: messages not "
                  "released come again. The device itself stays in use until this process "
                  "exits: librdmacm keeps the device contexts it opened");
}

void Consumer::commit() {
  positions_->commit();
  for (transport::Slot* s : committing_) node_->release_delivered(*s);
  committing_.clear();
}

}  // namespace hoprelay::client
