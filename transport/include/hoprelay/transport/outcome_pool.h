// Outcomes lent to messages given up somewhere (outcome.h): by the node that holds them until
// they go upstream, and by libhoprelay's producer until it has reported them. A free list that
// grows to the most lent at once (at most one per slot or buffer), so a drop allocates only
// until then, and never again once that many were lent. One thread (the owner's event loop).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "hoprelay/transport/outcome.h"

namespace hoprelay::transport {

class OutcomePool {
 public:
  // A cleared outcome, the pool's until give_back().
  Outcome* take() {
    if (free_.empty()) {
      store_.push_back(std::make_unique<Outcome>());
      free_.push_back(store_.back().get());
    }
    Outcome* o = free_.back();
    free_.pop_back();
    return o;
  }
  // Back to the pool, cleared; `o` becomes null. Null: nothing.
  void give_back(Outcome*& o) {
    if (!o) return;
    o->clear();
    free_.push_back(std::exchange(o, nullptr));
  }

 private:
  std::vector<std::unique_ptr<Outcome>> store_;
  std::vector<Outcome*> free_;
};

}  // namespace hoprelay::transport
