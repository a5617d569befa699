// What became of a message that a node gave up: the outcome that travels upstream with its
// acknowledgement (docs/protocol.md, "Outcomes"), so that the producer learns which messages
// were dropped, where and why, instead of taking every acknowledgement for a delivery.
//
// Delivered is the common case and costs nothing: a credit with no outcome before it means
// delivered. Only a dropped message gets an OUTCOME frame, sent by the receiver of a link
// before the credit that acknowledges the message's slot. A node with several branches
// merges what its branches reported into the outcome it sends upstream, so one outcome
// describes the whole tree below the node: up to kMaxOutcomeRecords drops in full (node,
// reason, detail), how many there were in all, and whether some branch delivered it.
//
// Pure: fixed-size, no allocation; decode validates everything a peer sends.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hoprelay/transport/wire.h"

namespace hoprelay::transport {

struct Slot;

// Why a message was given up. The numbers are on the wire; the labels are the `reason` label
// of hoprelay_dropped_total and what `hoprelay send` prints.
enum class DropReason : uint8_t {
  kStageDrop = 1,        // the stage said DROP
  kStageError = 2,       // the stage said ERROR (or grew the message past its slot)
  kTooLargeForPeer = 3,  // larger than a downstream's slots (it runs another topology)
  kPeerDown = 4,         // a downstream down longer than peer_down_timeout (drop-after)
  kIncomplete = 5,       // a chunked message that lost a chunk
  kReassemblyFull = 6,   // no room to reassemble a chunked message
};
inline constexpr uint8_t kDropReasonMax = 6;
std::string_view drop_reason_label(DropReason r);

inline constexpr size_t kMaxOutcomeRecords = 3;
inline constexpr size_t kMaxDropDetail = 96;
// OUTCOME payload: total u16 | count u8 | flags u8, then `count` records of
// reason u8 | node_len u8 | detail_len u8 | node | detail; with kOutcomeSpooled then
// spooled u16 | node_len u8 | branch_len u8 | node | branch.
inline constexpr uint32_t kMaxOutcomePayload =
    4 + kMaxOutcomeRecords * (3 + kMaxNodeName + kMaxDropDetail) + 4 + 2 * kMaxNodeName;
inline constexpr uint8_t kOutcomePartial = 0x01;  // some branch delivered the message
// Since wire protocol 7, on links with kFeatureSpooledOutcome: the message waits in a spool for
// some branches (delivered on the others, or dropped there: the records say). Without drops,
// the outcome has no records (count 0, total 0).
inline constexpr uint8_t kOutcomeSpooled = 0x02;

// Where a message waits in a spool: the node that spools it and the branch it spools for.
struct SpoolRecord {
  uint8_t node_len = 0;
  uint8_t branch_len = 0;
  std::array<char, kMaxNodeName> node{};
  std::array<char, kMaxNodeName> branch{};

  std::string_view node_name() const { return {node.data(), node_len}; }
  std::string_view branch_name() const { return {branch.data(), branch_len}; }
};

struct DropRecord {
  DropReason reason = DropReason::kStageDrop;
  uint8_t node_len = 0;
  uint8_t detail_len = 0;
  std::array<char, kMaxNodeName> node{};
  std::array<char, kMaxDropDetail> detail{};

  std::string_view node_name() const { return {node.data(), node_len}; }
  std::string_view detail_text() const { return {detail.data(), detail_len}; }
};

struct Outcome {
  uint16_t total = 0;  // drops it stands for (records holds the first of them)
  uint8_t count = 0;   // records filled
  bool partial = false;
  std::array<DropRecord, kMaxOutcomeRecords> records{};
  // Spools it waits in below (0: none), and where the first is.
  uint16_t spooled = 0;
  SpoolRecord spool{};
  // Node bookkeeping, not on the wire: how many of this node's branches reported a drop, and
  // whether this node gave the whole message up (then no branch delivered it).
  uint16_t branches = 0;
  bool whole = false;

  void clear() { *this = Outcome{}; }
  // One drop seen here: node `node` gave the message up for `reason` (detail may be empty;
  // both are cut to their limits).
  void add(DropReason reason, std::string_view node, std::string_view detail);
  // Node `node` keeps the message in a spool for its branch `branch`.
  void add_spooled(std::string_view node, std::string_view branch);
  // What a branch reported (its drops and spools join this node's; partial carries over).
  void merge(const Outcome& from);
  // For a peer without kFeatureSpooledOutcome: the spools go, the drops stay.
  void strip_spooled() {
    spooled = 0;
    spool = SpoolRecord{};
  }
  // Nothing to say: delivered everywhere (no outcome frame).
  bool empty() const { return total == 0 && spooled == 0; }
};

// Writes the payload (at most kMaxOutcomePayload bytes); returns its length.
uint32_t encode_outcome(const Outcome& o, std::byte* out);
inline constexpr uint32_t kMaxOutcomeFrame = kFrameHeaderSize + kMaxOutcomePayload;
// The OUTCOME frame, header and body, about the frame that took `slot` of a link's ring (its
// origin, seq, chunk and index): at most kMaxOutcomeFrame bytes; returns its length.
uint32_t encode_outcome_frame(const Slot& slot, const Outcome& o, std::byte* out);
// False when the payload is malformed: counts out of range, a record running past the end,
// an unknown reason or flag, a node name that is not a valid one, or bytes left over.
bool decode_outcome(std::span<const std::byte> in, Outcome& out);

}  // namespace hoprelay::transport
