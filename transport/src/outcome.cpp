#include "hoprelay/transport/outcome.h"

#include <algorithm>
#include <cstring>

#include "hoprelay/transport/slot_ring.h"

namespace hoprelay::transport {

std::string_view drop_reason_label(DropReason r) {
  switch (r) {
    case DropReason::kStageDrop:
      return "stage_drop";
    case DropReason::kStageError:
      return "stage_error";
    case DropReason::kTooLargeForPeer:
      return "too_large_for_peer";
    case DropReason::kPeerDown:
      return "peer_down";
    case DropReason::kIncomplete:
      return "incomplete";
    case DropReason::kReassemblyFull:
      return "reassembly_full";
  }
  return "unknown";
}

void Outcome::add(DropReason reason, std::string_view node, std::string_view detail) {
  if (total < UINT16_MAX) ++total;
  if (count == kMaxOutcomeRecords) return;
  DropRecord& r = records[count++];
  r.reason = reason;
  r.node_len = static_cast<uint8_t>(std::min(node.size(), kMaxNodeName));
  std::memcpy(r.node.data(), node.data(), r.node_len);
  r.detail_len = static_cast<uint8_t>(std::min(detail.size(), kMaxDropDetail));
  std::memcpy(r.detail.data(), detail.data(), r.detail_len);
  // A stage's own words go on the wire: keep them to one printable line.
  for (uint8_t i = 0; i < r.detail_len; ++i) {
    auto c = static_cast<unsigned char>(r.detail[i]);
    if (c < 0x20 || c == 0x7f) r.detail[i] = ' ';
  }
}

void Outcome::add_spooled(std::string_view node, std::string_view branch) {
  if (spooled++ > 0) {
    if (spooled == 0) spooled = UINT16_MAX;  // (saturates)
    return;
  }
  spool.node_len = static_cast<uint8_t>(std::min(node.size(), kMaxNodeName));
  std::memcpy(spool.node.data(), node.data(), spool.node_len);
  spool.branch_len = static_cast<uint8_t>(std::min(branch.size(), kMaxNodeName));
  std::memcpy(spool.branch.data(), branch.data(), spool.branch_len);
}

void Outcome::merge(const Outcome& from) {
  for (uint8_t i = 0; i < from.count && count < kMaxOutcomeRecords; ++i) {
    records[count++] = from.records[i];
  }
  total = static_cast<uint16_t>(std::min<uint32_t>(UINT16_MAX, uint32_t{total} + from.total));
  partial = partial || from.partial;
  if (from.spooled) {
    if (spooled == 0) spool = from.spool;
    spooled =
        static_cast<uint16_t>(std::min<uint32_t>(UINT16_MAX, uint32_t{spooled} + from.spooled));
  }
}

uint32_t encode_outcome(const Outcome& o, std::byte* out) {
  store_le<uint16_t>(out, o.total);
  out[2] = std::byte{o.count};
  out[3] = std::byte{
      static_cast<uint8_t>((o.partial ? kOutcomePartial : 0) | (o.spooled ? kOutcomeSpooled : 0))};
  uint32_t at = 4;
  for (uint8_t i = 0; i < o.count; ++i) {
    const DropRecord& r = o.records[i];
    out[at] = std::byte{static_cast<uint8_t>(r.reason)};
    out[at + 1] = std::byte{r.node_len};
    out[at + 2] = std::byte{r.detail_len};
    at += 3;
    std::memcpy(out + at, r.node.data(), r.node_len);
    at += r.node_len;
    std::memcpy(out + at, r.detail.data(), r.detail_len);
    at += r.detail_len;
  }
  if (o.spooled) {
    store_le<uint16_t>(out + at, o.spooled);
    out[at + 2] = std::byte{o.spool.node_len};
    out[at + 3] = std::byte{o.spool.branch_len};
    at += 4;
    std::memcpy(out + at, o.spool.node.data(), o.spool.node_len);
    at += o.spool.node_len;
    std::memcpy(out + at, o.spool.branch.data(), o.spool.branch_len);
    at += o.spool.branch_len;
  }
  return at;
}

uint32_t encode_outcome_frame(const Slot& slot, const Outcome& o, std::byte* out) {
  FrameHeader h{FrameType::kOutcome};
  h.origin = slot.origin;
  h.seq = slot.seq;
  h.chunk = slot.chunk;
  h.slot = slot.index;
  h.length = encode_outcome(o, out + kFrameHeaderSize);
  encode_header(h, out);
  return kFrameHeaderSize + h.length;
}

bool decode_outcome(std::span<const std::byte> in, Outcome& out) {
  out.clear();
  if (in.size() < 4 || in.size() > kMaxOutcomePayload) return false;
  out.total = load_le<uint16_t>(in.data());
  out.count = uint8_t(in[2]);
  uint8_t flags = uint8_t(in[3]);
  // At least one record: an outcome is sent for a drop, and a drop names where; or for a
  // spool alone, then with no drop at all.
  const bool spooled = flags & kOutcomeSpooled;
  if (out.count > kMaxOutcomeRecords || out.total < out.count) return false;
  if (out.count == 0 && (!spooled || out.total != 0)) return false;
  if (flags & ~(kOutcomePartial | kOutcomeSpooled)) return false;
  out.partial = flags & kOutcomePartial;
  size_t at = 4;
  for (uint8_t i = 0; i < out.count; ++i) {
    if (in.size() - at < 3) return false;
    uint8_t reason = uint8_t(in[at]);
    uint8_t node_len = uint8_t(in[at + 1]);
    uint8_t detail_len = uint8_t(in[at + 2]);
    at += 3;
    if (reason == 0 || reason > kDropReasonMax) return false;
    if (node_len > kMaxNodeName || detail_len > kMaxDropDetail) return false;
    if (in.size() - at < size_t{node_len} + detail_len) return false;
    DropRecord& r = out.records[i];
    r.reason = DropReason(reason);
    r.node_len = node_len;
    r.detail_len = detail_len;
    std::memcpy(r.node.data(), in.data() + at, node_len);
    if (!valid_node_name(r.node_name())) return false;
    at += node_len;
    std::memcpy(r.detail.data(), in.data() + at, detail_len);
    for (char c : r.detail_text()) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;  // printable only
    }
    at += detail_len;
  }
  if (spooled) {
    if (in.size() - at < 4) return false;
    out.spooled = load_le<uint16_t>(in.data() + at);
    const uint8_t node_len = uint8_t(in[at + 2]), branch_len = uint8_t(in[at + 3]);
    at += 4;
    if (out.spooled == 0 || node_len > kMaxNodeName || branch_len > kMaxNodeName) return false;
    if (in.size() - at < size_t{node_len} + branch_len) return false;
    out.spool.node_len = node_len;
    out.spool.branch_len = branch_len;
    std::memcpy(out.spool.node.data(), in.data() + at, node_len);
    at += node_len;
    std::memcpy(out.spool.branch.data(), in.data() + at, branch_len);
    at += branch_len;
    if (!valid_node_name(out.spool.node_name()) || !valid_node_name(out.spool.branch_name())) {
      return false;
    }
  }
  return at == in.size();
}

}  // namespace hoprelay::transport
