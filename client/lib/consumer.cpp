#include "consumer.h"

#include <cstring>

#include "hoprelay/transport/log.h"
#include "status.h"

namespace hoprelay::client {

Consumer::Consumer(std::shared_ptr<const config::Topology> topology, const std::string& node) {
  const config::NodeSpec* spec = topology->find(node);
  try {
    stages::Stage stage(stages::resolve(spec->stage.plugin), spec->name, spec->stage.params);
    node_ = std::make_unique<daemon::Node>(topology, node, loop_, std::move(stage));
  } catch (const stages::StageError& e) {
    throw ClientError(HOPRELAY_ECONFIG, e.what());
  }
  node_->set_receiver(this);
  loop_.set_pollable(true);
  try {
    node_->start();
  } catch (const std::exception& e) {
    throw ClientError(HOPRELAY_EUNAVAILABLE,
                      "cannot run node " + node + ": " + e.what() +
                          " (is a hoprelayd or another consumer running this node?)");
  }
  schedule_tick();
}

Consumer::~Consumer() {
  if (tick_) loop_.cancel(tick_);
  loop_.run_once(std::chrono::milliseconds(0));  // the credits of the last releases go out
  // Messages the application still holds are not acknowledged: they come again.
  for (auto& item : items_) item->held = nullptr;
  node_.reset();
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
  return *item;
}

void Consumer::on_delivered(uint32_t origin, uint64_t seq, std::span<const std::byte> data,
                            transport::Slot& held, bool reassembled) {
  Item& item = take_item();
  item.origin = origin;
  item.flags = 0;
  item.seq = seq;
  item.held = &held;
  item.length = data.size();
  if (reassembled) {
    // The node's reassembly buffer is reused by the next message: the view needs its own.
    item.copy.resize(data.size());
    std::memcpy(item.copy.data(), data.data(), data.size());
    item.data = item.copy.data();
  } else {
    item.data = data.data();
  }
  ready_.push_back(&item);
}

void Consumer::on_end(uint32_t origin, uint64_t seq) {
  Item& item = take_item();
  item.origin = origin;
  item.flags = HOPRELAY_MESSAGE_END;
  item.seq = seq;
  item.held = nullptr;
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
  if (ready_.empty()) loop_.run_once(std::chrono::milliseconds(0));
  while (ready_.empty()) {
    auto wait = std::chrono::milliseconds(1000);
    if (timeout_ms >= 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                               transport::EventLoop::Clock::now());
      if (left.count() <= 0) {
        return timeout_ms == 0 ? fail(HOPRELAY_EAGAIN, "recv: no message yet")
                               : fail(HOPRELAY_ETIMEDOUT, "recv: no message within " +
                                                              std::to_string(timeout_ms) + " ms");
      }
      wait = std::min(wait, left);
    }
    loop_.run_once(wait);
  }
  Item* item = ready_.front();
  ready_.pop_front();
  item->out = true;
  msg = {item->origin, item->flags, item->seq, item->data, item->length, item};
  return HOPRELAY_OK;
}

int Consumer::release(hoprelay_message& msg) {
  auto* item = static_cast<Item*>(msg.internal_);
  if (!item || !item->out) {
    return fail(HOPRELAY_ESTATE, "release: not a message from recv, or released already");
  }
  item->out = false;
  if (item->held) node_->release_delivered(*std::exchange(item->held, nullptr));
  free_.push_back(item);
  msg.internal_ = nullptr;
  msg.data = nullptr;
  return HOPRELAY_OK;  // the credit goes out with the next recv or process that runs the loop
}

int Consumer::process() {
  loop_.run_once(std::chrono::milliseconds(0));
  return HOPRELAY_OK;
}

}  // namespace hoprelay::client
