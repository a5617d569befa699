// libhoprelay's consumer: a leaf node of the topology run inside the application. It is the
// node of hoprelayd (daemon::Node: the transports, admission, auth, credits, deduplication,
// the node's stage, reassembly of chunked messages, its metrics endpoint if it has one), with
// the application as its Receiver: a message is held in its slots, unacknowledged, from the
// moment the node delivers it until the application releases it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hoprelay/client.h"
#include "hoprelay/daemon/node.h"
#include "hoprelay/daemon/ring_queue.h"
#include "hoprelay/stages/position_file.h"

namespace hoprelay::client {

class Consumer final : public daemon::Receiver {
 public:
  // Starts the node. Throws ClientError (status.h). `state_dir` (may be empty): the durable
  // position (stages/position_file.h): releases are made durable there before they are
  // acknowledged, and what it says was taken is not handed to the application again.
  Consumer(std::shared_ptr<const config::Topology> topology, const std::string& node,
           const std::string& state_dir);
  ~Consumer();

  int recv(hoprelay_message& msg, int timeout_ms);
  // `app`: the application's own position after this message (kept with the durable one);
  // none (a plain release) keeps the one recorded last.
  int release(hoprelay_message& msg, std::optional<uint64_t> app);
  // Gives a message up unreleased (it comes again to the node's next consumer); recv refuses
  // from then on, since nothing after it can be acknowledged.
  int abandon(hoprelay_message& msg);
  uint64_t resume_seq(uint32_t origin) const { return positions_ ? positions_->next(origin) : 0; }
  uint64_t app_position() const { return positions_ ? positions_->app() : 0; }
  uint64_t skipped() const { return skipped_; }
  int process();
  int fd() const { return loop_.fd(); }

  void on_delivered(uint32_t origin, uint64_t seq, std::span<const std::byte> data,
                    transport::Slot& held, bool reassembled) override;
  void on_end(uint32_t origin, uint64_t seq, transport::Slot& held) override;
  size_t backlog() const override { return ready_.size(); }

 private:
  // A delivered message until the application releases it. Items are reused, and so is a
  // reassembled message's copy (its capacity stays): no allocation once the pool has grown.
  struct Item {
    uint32_t origin = 0;
    uint32_t flags = 0;
    uint64_t seq = 0;
    const std::byte* data = nullptr;
    size_t length = 0;
    transport::Slot* held = nullptr;  // null for an end mark from the durable position
    std::vector<std::byte> copy;      // a reassembled message's bytes
    bool out = false;                 // handed to the application, not released
    bool abandoned = false;           // given up by the application: out for good
    std::optional<uint64_t> app;      // released with this application position (state_dir)
    uint64_t received = 0;            // recv's count when it handed this one out
  };
  Item& take_item();
  // At close, a relay's: waits for its peers to acknowledge what the application is done with.
  void finish_relaying();
  static constexpr std::chrono::seconds kRelayCloseTimeout{10};
  // The item of a message handed out and neither released nor abandoned, or null (and
  // ESTATE said) for anything else: a stale copy, a message released already.
  Item* out_item(const hoprelay_message& msg, const char* what);
  // Makes what was released durable, then acknowledges it (stages/position_file.h).
  void commit();

  transport::EventLoop loop_;
  std::unique_ptr<daemon::Node> node_;
  std::vector<std::unique_ptr<Item>> items_;
  size_t out_ = 0;         // items handed to the application, not released (abandoned ones too)
  uint64_t received_ = 0;  // messages recv handed out (for recv's timeout message)
  std::string node_name_;
  uint32_t slots_ = 0;  // the node's slots per inbound link (for recv's timeout message)
  std::vector<Item*> free_;
  daemon::RingQueue<Item*> ready_;  // delivered, not received yet, in arrival order
  transport::EventLoop::TimerId tick_ = 0;
  std::unique_ptr<stages::PositionFile> positions_;
  std::vector<transport::Slot*> committing_;  // released, acknowledged once durable
  // With a durable position: the messages handed to the application, in the order recv gave
  // them, until they are released. The position advances over the released front only: it
  // says "everything up to here", and one application position goes with it, so a message
  // released before an earlier one waits for it (recorded, it would hide the earlier one
  // from a restarted consumer, which would never get it again).
  daemon::RingQueue<Item*> unreleased_;
  // Records the released front of unreleased_ for the next commit (scheduled).
  void advance();
  bool commit_scheduled_ = false;
  std::string commit_error_;  // a commit that failed: every call reports it
  std::string lost_;          // the RDMA device went away: every call reports it
  std::string abandoned_;     // "message S of origin O": recv refuses to go on past it
  int fail_lost(const char* what);
  uint64_t skipped_ = 0;  // taken already (by an earlier run): not handed over again
  void schedule_tick();
};

}  // namespace hoprelay::client
