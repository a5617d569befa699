// The application side of a node in the application's own process (libhoprelay's consumer):
// what it is handed, and what it must give back (Node::release_delivered).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::daemon {

// An application in the node's own process that takes the node's messages, instead of a leaf
// giving each back once its stage has seen it (libhoprelay's consumer, docs/client.md); at a
// relay, as well as the node forwarding them. The node holds a delivered message's slots,
// unacknowledged, until the application hands it back with Node::release_delivered() (and, at
// a relay, its peers acknowledged it): a message an application has not released is sent
// again if the application's process dies. Called from the node's event loop.
class Receiver {
 public:
  // A message passed the stage. `held` is the slot holding it, or for a message that came as
  // chunks the first of its slots (at a leaf the node links the rest; at a relay the first
  // holds the others' credits, which return in ring order). `data` stays valid until the
  // release, except when `reassembled`: then it is the node's reassembly buffer, valid only
  // during the call (the message's chunks are in its slots, but not side by side).
  virtual void on_delivered(uint32_t origin, uint64_t seq, std::span<const std::byte> data,
                            transport::Slot& held, bool reassembled) = 0;
  // The producer of `origin` ended its stream after the messages before `seq`. The mark is
  // held in `held`, unacknowledged, until released like a message (so an application that
  // records where streams ended can make that durable first).
  virtual void on_end(uint32_t origin, uint64_t seq, transport::Slot& held) = 0;
  // How many messages the application was handed and has not taken yet. At a relay the
  // application is one of the node's branches: a downstream peer out of credit that holds
  // many more of the node's messages than this is the one behind (spool_dir,
  // Downstreams::watch_spools).
  virtual size_t backlog() const = 0;

 protected:
  ~Receiver() = default;
};

}  // namespace hoprelay::daemon
