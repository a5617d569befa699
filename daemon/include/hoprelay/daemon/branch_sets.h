// The branches of chunked messages: the peers of one moment, and the route, as they were when a
// message's first chunk came. All its frames go to that set, so a reload while it is half sent
// neither gives an added peer its tail (refused there as incomplete) nor leaves a removed one
// holding its head for ever. One set serves every message between two reloads; a removed peer
// is kept (Downstreams::retire_if_done asks holds()) while a set in use lists it.
//
// Owns: the sets taken by open chunked messages (Partial::branches points at one), and the
// current one (made at the first chunked message after a reload: one allocation per reload).
// Calls: `freed` for each removed peer a set kept, when that set goes (it may retire now).
// One thread (the node's event loop).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/downstream.h"
#include "hoprelay/daemon/partials.h"

namespace hoprelay::daemon {

class BranchSets {
 public:
  struct Set {
    std::vector<Downstream*> peers;
    config::Route route = config::Route::kBroadcast;  // and how they were chosen from
    uint32_t users = 0;  // open messages (Partial::branches) routed to it
  };
  explicit BranchSets(std::function<void(Downstream&)> freed) : freed_(std::move(freed)) {}

  // p's set: the one it has, or, at its first chunk, the current one (taken from `active` and
  // `route` if there is none since the last peers_changed()).
  const Set& of(Partial& p, const std::vector<Downstream*>& active, config::Route route);
  // `p` is done: its set is given back.
  void leave(Partial& p);
  // A reload changed the peers or the route: the next chunked message takes a new set.
  void peers_changed();
  // A set in use lists `d`.
  bool holds(const Downstream& d) const;

 private:
  void free(Set* set);

  std::vector<std::unique_ptr<Set>> sets_;
  Set* current_ = nullptr;
  std::function<void(Downstream&)> freed_;
};

}  // namespace hoprelay::daemon
