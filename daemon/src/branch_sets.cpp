// The branch sets of chunked messages (branch_sets.h).
#include "hoprelay/daemon/branch_sets.h"

#include <algorithm>

namespace hoprelay::daemon {

const BranchSets::Set& BranchSets::of(Partial& p, const std::vector<Downstream*>& active,
                                      config::Route route) {
  if (p.branches) return *static_cast<Set*>(p.branches);
  if (!current_) {
    // The first chunked message since a reload (or since the start): one allocation.
    sets_.push_back(std::make_unique<Set>(Set{active, route, 0}));
    current_ = sets_.back().get();
  }
  ++current_->users;
  p.branches = current_;
  return *current_;
}

void BranchSets::leave(Partial& p) {
  if (auto* set = static_cast<Set*>(std::exchange(p.branches, nullptr))) {
    if (--set->users == 0 && set != current_) free(set);
  }
}

void BranchSets::peers_changed() {
  // Messages half sent keep the set they started with; the next one takes a new copy.
  if (Set* old = std::exchange(current_, nullptr); old && old->users == 0) free(old);
}

void BranchSets::free(Set* set) {
  std::vector<Downstream*> retiring;
  for (Downstream* d : set->peers) {
    if (d->retiring) retiring.push_back(d);
  }
  std::erase_if(sets_, [&](const auto& s) { return s.get() == set; });
  // A removed peer this set kept may go now.
  for (Downstream* d : retiring) freed_(*d);
}

bool BranchSets::holds(const Downstream& d) const {
  for (const auto& set : sets_) {
    if (set->users != 0 && std::find(set->peers.begin(), set->peers.end(), &d) != set->peers.end())
      return true;
  }
  return false;
}

}  // namespace hoprelay::daemon
