// End marks where branches join again.
//
// Every node sends a stream's end mark down every branch (docs/protocol.md, "End of stream"),
// so where a split joins again (a -> b1, b2 -> c) c gets one copy per branch. A consumer that
// stops at the first (hoprelay recv) leaves the later copies unacknowledged, and the producer's
// close waits for them until it times out. So a node passes an end mark on only once a copy
// from every upstream peer the stream can come through is in, and passes one copy on: each node
// below then again gets one per upstream peer, never more.
//
// Which upstream peers a stream comes through depends on the head it entered by: the head
// stamps its end marks (FrameHeader::chunk) with stamp_of(its name), and every node computes
// from the shared topology which of its upstream peers that head reaches.
//
// The copies that come before the last are acknowledged at once, not held: slots go back to a
// sender in ring order, so one held slot would stop its link's credits, and with them every
// stream behind it (two heads whose end marks cross on two branches would stop each other for
// good). What a node remembers of them is only which peers' copies are in. So a node that
// dies while it waits has lost them (their senders do not replay what was acknowledged): after
// a limit (the node's peer_down_timeout) it passes on an end mark of its own. The same limit
// covers a branch that never delivers its copy (dropped under on_peer_down = "drop-after",
// or a reload in between that changed the branches).
//
// One exception, bounded by the same limit: for peer_down_timeout after the node started, the
// first copy of a stream is held (Waiting::held), and it is that copy which passes on, with
// the completing one or at the give-up. A node that started may have acknowledged the other
// copies in its previous life; acknowledging this one too would let the producer's close
// return before any consumer has the end mark, and lose the mark for good if the node died
// again before the give-up. Held, it is replayed to the next life instead. The stall: a held
// copy keeps its link's credits for at most peer_down_timeout (then the give-up passes it on),
// and only copies that come within peer_down_timeout of a start are held.
//
// This class is the computation and the bookkeeping; EndMarks (end_marks.h) acknowledges, passes
// on and gives up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hoprelay::config {
struct Topology;
}
namespace hoprelay::transport {
struct Slot;
}

namespace hoprelay::daemon {

class EndJoins {
 public:
  // Streams whose end mark waits for another branch's copy. Past this many the oldest is
  // given up on (passed on as if complete).
  static constexpr size_t kMaxWaiting = 1024;
  // End marks passed on, remembered so that a copy that comes after its end mark passed on (a
  // slower branch's, or a replay after a link failed before the acknowledgement reached its
  // sender) is acknowledged, not waited for again.
  static constexpr size_t kMaxDone = 1024;

  struct Key {
    uint32_t origin = 0;
    uint64_t seq = 0;
    uint32_t stamp = 0;
    bool operator==(const Key&) const = default;
  };
  struct Waiting {
    Key key;
    std::vector<std::string> peers;  // the upstream nodes whose copy is in
    uint64_t since_ns = 0;           // when the first came (the event loop's clock)
    // Right after a start: the copy kept unacknowledged, to pass on (see above), or null.
    transport::Slot* held = nullptr;
  };

  // A head's stamp: the FNV-1a 64 hash of its name folded to 32 bits, never 0 (0 is a
  // producer's end mark, not yet stamped).
  static uint32_t stamp_of(std::string_view node);

  // At start and at every reload: the nodes, their edges and this node's upstream peers.
  void set_topology(const config::Topology& topology, const std::string& self);

  // How many copies of an end mark stamped `stamp` reach this node: one from each upstream
  // peer that the stamping head reaches (itself included). 0 when no node of the topology has
  // that stamp, or two have. Computed once per head (one walk of the topology), then cached.
  uint32_t copies(uint32_t stamp);

  // What is known of `key`'s copies while it waits, or null.
  Waiting* waiting(const Key& key);
  // A new entry for `key`, the newest (or the one there is).
  Waiting& wait(const Key& key, uint64_t now_ns);
  void stop_waiting(const Key& key);
  // Every waiting entry, oldest first.
  const std::list<Waiting>& all_waiting() const { return waiting_; }

  // `passed_on` carries `key`'s end mark on; remembered until kMaxDone more have.
  void done(const Key& key, transport::Slot* passed_on);
  // Whether `key`'s end mark was passed on already; `in_flight` is the copy passed on while
  // it is held, null once it was released.
  bool was_done(const Key& key, transport::Slot*& in_flight) const;
  // The slot passed on for `key` was released.
  void released(const Key& key, const transport::Slot* slot);

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.seq ^ (uint64_t{k.origin} << 32) ^ k.stamp);
    }
  };

  std::vector<std::vector<uint32_t>> edges_;         // node index -> downstream indices
  std::unordered_map<uint32_t, uint32_t> by_stamp_;  // stamp -> node index (kShared: two)
  std::vector<uint32_t> upstream_;                   // this node's upstream peers, by index
  std::unordered_map<uint32_t, uint32_t> copies_;    // stamp -> copies (cache)
  std::list<Waiting> waiting_;                       // oldest first
  std::unordered_map<Key, std::list<Waiting>::iterator, KeyHash> waiting_index_;
  std::unordered_map<Key, transport::Slot*, KeyHash> done_;
  std::deque<Key> done_order_;
};

}  // namespace hoprelay::daemon
