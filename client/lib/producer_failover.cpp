// A producer's failover between a head and its standby (producer.h, NodeSpec::standby,
// docs/topology.md "A standby head"): once the head in use has been down, or not up since the
// open, for its peer_down_timeout, the producer sends to the other one, what was not
// acknowledged first. Once per failover, never per message.
#include "hoprelay/transport/log.h"
#include "producer.h"
#include "status.h"

namespace hoprelay::client {
namespace {

spdlog::logger& log() {
  static auto logger = module_logger("producer");
  return *logger;
}

}  // namespace

void Producer::watch_head() {
  if (!standby_ || failover_ || closing_ || ended_) return;
  failover_ = loop_.after(head_->peer_down_timeout, [this] {
    failover_ = 0;
    fail_over();
  });
}

void Producer::fail_over() {
  if (closing_ || ended_ || !link_ || link_->up()) return;
  const config::NodeSpec* next = head_ == primary_ ? standby_ : primary_;
  log().warn(
      "head node {} at {} {} for {}: sending to {} at {} instead ({}; the nodes below drop "
      "what they had already as repeats)",
      head_->name, head_->listen.to_string(), was_up_ ? "down" : "not up",
      config::duration_text(head_->peer_down_timeout), next->name, next->listen.to_string(),
      queue_.empty() ? std::string("nothing waits to be sent")
                     : counted(queue_.size(), "frame") + " wait to be sent, in their order");
  // What was not acknowledged came back to the queue when the link went down; closing it
  // hands back nothing more and reports nothing (it is not up).
  failing_over_ = true;
  link_->close();
  failing_over_ = false;
  retired_link_ = std::move(link_);  // the one before goes now: closed a timeout ago
  head_ = next;
  ++failovers_;
  const bool write = head_->ingress == config::Ingress::kWrite;
  link_ = transport_->connect({head_->name, head_->listen, write, head_->slots});
  watch_head();  // and back again should this one not come up either
}

}  // namespace hoprelay::client
