#include "hoprelay/daemon/rate_limits.h"

#include "hoprelay/daemon/monotonic.h"

#include <algorithm>
#include <chrono>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

namespace hoprelay::daemon {

RateGate::RateGate(transport::EventLoop& loop, TokenBucket* node, uint64_t own,
                   NodeMetrics& metrics, const std::string& peer, std::function<void()> resume)
    : loop_(loop),
      node_(node),
      resume_(std::move(resume)),
      waited_seconds_(&metrics.rate_limited_seconds(peer)) {
  if (own) own_.emplace(own, RateLimits::kBurstNs);
}

RateGate::~RateGate() {
  if (timer_) loop_.cancel(timer_);
}

bool RateGate::admit(uint64_t bytes) {
  // A clock read of its own (vDSO): the loop's iteration time is not renewed when the wait
  // ended by a timer, which is how a gate's pump comes back (read that late, a frame would wait
  // a second time, losing a fifth of the rate at 64 KiB frames and 20 Mbit/s).
  const uint64_t now = monotonic_ns();
  if ((node_ && !node_->may_take(now)) || (own_ && !own_->may_take(now))) {
    if (!timer_) wait(now);
    return false;
  }
  if (timer_) {  // allowed before the timer (the pump ran for credit meanwhile)
    loop_.cancel(timer_);
    timer_ = 0;
    waited(now);
  }
  if (node_) node_->take(bytes, now);
  if (own_) own_->take(bytes, now);
  return true;
}

void RateGate::wait(uint64_t now) {
  const uint64_t ns = std::max(node_ ? node_->wait_ns(now) : 0, own_ ? own_->wait_ns(now) : 0);
  waiting_since_ = now;
  // The loop's timers count milliseconds: rounded up, at least one.
  const auto ms = std::chrono::milliseconds(std::max<uint64_t>(1, (ns + 999'999) / 1'000'000));
  timer_ = loop_.after(ms, [this] {
    timer_ = 0;
    waited(monotonic_ns());
    resume_();
  });
}

void RateGate::waited(uint64_t now) {
  if (now > waiting_since_) waited_seconds_->Increment(double(now - waiting_since_) / 1e9);
}

void RateLimits::configure(const config::NodeSpec& spec) {
  node_.reset();
  if (spec.rate_limit) node_.emplace(spec.rate_limit, kBurstNs);
  per_peer_ = spec.rate_limit_to;
}

std::unique_ptr<RateGate> RateLimits::gate(const std::string& peer, std::function<void()> resume) {
  uint64_t own = 0;
  for (const auto& [name, bits] : per_peer_) {
    if (name == peer) own = bits;
  }
  const uint64_t shown = own ? own : node_ ? node_->bits_per_second() : 0;
  // The gauge exists once a limit applied to the peer (0 after a reload that removed it).
  if (shown || std::find(shown_.begin(), shown_.end(), peer) != shown_.end()) {
    metrics_.rate_limit(peer).Set(static_cast<double>(shown));
    if (std::find(shown_.begin(), shown_.end(), peer) == shown_.end()) shown_.push_back(peer);
  }
  if (!shown) return nullptr;
  return std::make_unique<RateGate>(loop_, node_ ? &*node_ : nullptr, own, metrics_, peer,
                                    std::move(resume));
}

}  // namespace hoprelay::daemon
