#include "hoprelay/transport/wire.h"

#include "hoprelay/transport/outcome.h"

#include <algorithm>
#include <bit>

namespace hoprelay::transport {

static_assert(std::endian::native == std::endian::little,
              "wire codec assumes a little-endian host");

std::string_view reason_text(WireError e) {
  switch (e) {
    case WireError::kOk:
      return "ok";
    case WireError::kBadMagic:
      return "bad magic";
    case WireError::kBadVersion:
      return "unsupported protocol version";
    case WireError::kBadType:
      return "unknown frame type";
    case WireError::kBadReserved:
      return "reserved field not zero";
    case WireError::kBadFlags:
      return "unknown flag bits";
    case WireError::kTooLong:
      return "frame longer than agreed";
  }
  return "unknown";
}

std::string_view reason_label(WireError e) {
  switch (e) {
    case WireError::kOk:
      return "ok";
    case WireError::kBadMagic:
      return "bad_magic";
    case WireError::kBadVersion:
      return "bad_version";
    case WireError::kBadType:
      return "bad_type";
    case WireError::kBadReserved:
      return "bad_reserved";
    case WireError::kBadFlags:
      return "bad_flags";
    case WireError::kTooLong:
      return "too_long";
  }
  return "unknown";
}

// Layout: magic u16 | version u8 | type u8 | flags u16 | reserved u16 | length u32 |
//         origin u32 | seq u64 | credits u32 (data frames: chunk) | slot u32
void encode_header(const FrameHeader& h, std::byte* out) {
  store_le<uint16_t>(out + 0, kFrameMagic);
  out[2] = std::byte{kFrameFormat};
  out[3] = std::byte{static_cast<uint8_t>(h.type)};
  store_le<uint16_t>(out + 4, h.flags);
  store_le<uint16_t>(out + 6, 0);
  store_le<uint32_t>(out + 8, h.length);
  store_le<uint32_t>(out + 12, h.origin);
  store_le<uint64_t>(out + 16, h.seq);
  const bool chunked = h.type == FrameType::kData || h.type == FrameType::kOutcome;
  store_le<uint32_t>(out + 24, chunked ? h.chunk : h.credits);
  store_le<uint32_t>(out + 28, h.slot);
}

WireError decode_header(const std::byte* in, const WireLimits& limits, FrameHeader& out) {
  if (load_le<uint16_t>(in) != kFrameMagic) return WireError::kBadMagic;
  if (uint8_t(in[2]) != kFrameFormat) return WireError::kBadVersion;
  uint8_t type = uint8_t(in[3]);
  if (type < uint8_t(FrameType::kHello) || type > uint8_t(FrameType::kOutcome)) {
    return WireError::kBadType;
  }
  if (load_le<uint16_t>(in + 6) != 0) return WireError::kBadReserved;
  out.type = FrameType(type);
  out.flags = load_le<uint16_t>(in + 4);
  if (out.flags & ~kKnownFlags) return WireError::kBadFlags;
  out.length = load_le<uint32_t>(in + 8);
  out.origin = load_le<uint32_t>(in + 12);
  out.seq = load_le<uint64_t>(in + 16);
  out.credits = load_le<uint32_t>(in + 24);
  const bool chunked = out.type == FrameType::kData || out.type == FrameType::kOutcome;
  out.chunk = chunked ? out.credits : 0;
  if (chunked) out.credits = 0;
  out.slot = load_le<uint32_t>(in + 28);
  uint32_t max = out.type == FrameType::kData      ? limits.max_data_payload
                 : out.type == FrameType::kOutcome ? kMaxOutcomePayload
                                                   : kMaxControlPayload;
  if (out.length > max) return WireError::kTooLong;
  // An abort ends a message and carries nothing; it cannot also announce more chunks.
  if ((out.flags & kFlagAbort) && (out.length != 0 || (out.flags & kFlagMore))) {
    return WireError::kBadFlags;
  }
  // An end of stream is a mark, not a message: no bytes, no other flag (its `chunk` is the
  // head's stamp, any value).
  if ((out.flags & kFlagEnd) && (out.length != 0 || (out.flags & ~kFlagEnd) != 0)) {
    return WireError::kBadFlags;
  }
  // A chunk announcing another after the last index there is would wrap the count.
  if ((out.flags & kFlagMore) && out.chunk == UINT32_MAX) return WireError::kBadFlags;
  return WireError::kOk;
}

namespace {

std::string range_text(uint8_t min, uint8_t max) {
  return min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max);
}

std::string upgrade_text(bool peer_older) {
  return peer_older ? ": upgrade hoprelay (or libhoprelay) on the peer's host; a release speaks "
                      "its own wire version and the one before it"
                    : ": upgrade hoprelay (or libhoprelay) on this host; a release speaks its "
                      "own wire version and the one before it";
}

constexpr uint16_t kOfferMagic = 0x564e;  // "NV"

}  // namespace

std::string version_mismatch_text(const std::byte* frame) {
  // Frames of version 6 and 7 say 6 (kFrameFormat); before 6 each version said its own.
  const uint8_t peer = uint8_t(frame[2]);
  return "the peer speaks wire protocol version " + std::to_string(peer) + ", this end speaks " +
         range_text(kWireVersionMin, kWireVersion) + upgrade_text(peer < kWireVersionMin);
}

WireOffer own_offer() {
  return WireOffer{kWireVersionMin, kWireVersion, kFeatures, true};
}

// Layout: magic u16 "NV" | min u8 | max u8 | features u32
void encode_offer(const WireOffer& o, std::byte* out) {
  store_le<uint16_t>(out, kOfferMagic);
  out[2] = std::byte{o.min};
  out[3] = std::byte{o.max};
  store_le<uint32_t>(out + 4, o.features);
}

WireOffer decode_offer(const std::byte* in) {
  WireOffer o;  // version 6's, not present
  if (load_le<uint16_t>(in) != kOfferMagic) return o;
  const uint8_t min = uint8_t(in[2]), max = uint8_t(in[3]);
  if (min == 0 || min > max) return o;  // not an offer: as one that sent none
  o.min = min;
  o.max = max;
  o.features = load_le<uint32_t>(in + 4);
  o.present = true;
  return o;
}

uint64_t offer_field(const WireOffer& o) {
  std::byte b[kOfferSize];
  encode_offer(o, b);
  return load_le<uint64_t>(b);
}

WireOffer offer_of_field(uint64_t field) {
  std::byte b[kOfferSize];
  store_le<uint64_t>(b, field);
  return decode_offer(b);
}

bool agree(const WireOffer& mine, const WireOffer& peer, WireAgreement& out) {
  const uint8_t low = std::max(mine.min, peer.min), high = std::min(mine.max, peer.max);
  if (low > high) return false;
  out.version = high;
  out.features = mine.features & peer.features;
  return true;
}

std::string older_peer_text(const WireAgreement& wire) {
  if (wire.version >= kWireVersion) return {};
  return "; wire protocol " + std::to_string(wire.version) + ": the peer's release is older";
}

std::string no_common_version_text(const WireOffer& mine, const WireOffer& peer) {
  return "the peer speaks wire protocol versions " + range_text(peer.min, peer.max) +
         ", this end " + range_text(mine.min, mine.max) + upgrade_text(peer.max < mine.min);
}

bool valid_node_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNodeName) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// HELLO: role u8 | name_len u8 | reserved u16 (0) | origin u32 | topology_hash u64 | name[48]
void encode_hello(const HelloBody& h, std::byte* out) {
  std::memset(out, 0, kHelloSize);
  size_t n = strnlen(h.name, kMaxNodeName);
  out[0] = std::byte{static_cast<uint8_t>(h.role)};
  out[1] = std::byte{static_cast<uint8_t>(n)};
  store_le<uint32_t>(out + 4, h.origin);
  store_le<uint64_t>(out + 8, h.topology_hash);
  std::memcpy(out + 16, h.name, n);
}

bool decode_hello(std::span<const std::byte> in, HelloBody& out) {
  if (in.size() != kHelloSize) return false;
  uint8_t role = uint8_t(in[0]);
  size_t n = uint8_t(in[1]);
  if (role != uint8_t(PeerRole::kNode) && role != uint8_t(PeerRole::kProducer)) return false;
  if (n > kMaxNodeName || load_le<uint16_t>(in.data() + 2) != 0) return false;
  out.role = PeerRole(role);
  out.origin = load_le<uint32_t>(in.data() + 4);
  out.topology_hash = load_le<uint64_t>(in.data() + 8);
  std::memset(out.name, 0, sizeof(out.name));
  std::memcpy(out.name, in.data() + 16, n);
  return valid_node_name({out.name, n});
}

void encode_welcome(const WelcomeBody& w, std::byte* out) {
  store_le<uint32_t>(out + 0, w.slots);
  store_le<uint32_t>(out + 4, w.slot_size);
  store_le<uint64_t>(out + 8, w.topology_hash);
  store_le<uint64_t>(out + 16, w.next_seq);
}

bool decode_welcome(std::span<const std::byte> in, WelcomeBody& out) {
  if (in.size() != kWelcomeSize) return false;
  out.slots = load_le<uint32_t>(in.data());
  out.slot_size = load_le<uint32_t>(in.data() + 4);
  out.topology_hash = load_le<uint64_t>(in.data() + 8);
  out.next_seq = load_le<uint64_t>(in.data() + 16);
  return out.slots > 0 && out.slot_size > 0;
}

void encode_cm_hello(const HelloBody& h, std::byte* out) {
  std::memset(out, 0, kCmHelloSize);
  size_t n = strnlen(h.name, kMaxNodeName);
  out[0] = std::byte{kFrameFormat};
  out[1] = std::byte{static_cast<uint8_t>(h.role)};
  out[2] = std::byte{static_cast<uint8_t>(n)};
  store_le<uint32_t>(out + 4, h.origin);
  std::memcpy(out + 8, h.name, n);
  // Version 6 reads the name's n bytes and nothing after them.
  if (h.offer.present && n <= kMaxNameWithCmOffer) {
    encode_offer(h.offer, out + kCmHelloSize - kOfferSize);
  }
}

bool decode_cm_hello(std::span<const std::byte> in, HelloBody& out) {
  if (in.size() < kCmHelloSize) return false;
  if (uint8_t(in[0]) != kFrameFormat || uint8_t(in[3]) != 0) return false;
  uint8_t role = uint8_t(in[1]);
  size_t n = uint8_t(in[2]);
  if (role != uint8_t(PeerRole::kNode) && role != uint8_t(PeerRole::kProducer)) return false;
  if (n > kMaxNodeName) return false;
  out.role = PeerRole(role);
  out.origin = load_le<uint32_t>(in.data() + 4);
  out.topology_hash = 0;  // does not fit: the sender compares against the welcome's
  std::memset(out.name, 0, sizeof(out.name));
  std::memcpy(out.name, in.data() + 8, n);
  out.offer =
      n <= kMaxNameWithCmOffer ? decode_offer(in.data() + kCmHelloSize - kOfferSize) : WireOffer{};
  return valid_node_name({out.name, n});
}

void encode_cm_welcome(const CmWelcome& w, std::byte* out) {
  std::memset(out, 0, kCmWelcomeSize);
  out[0] = std::byte{kFrameFormat};
  out[1] = std::byte{w.auth ? kCmAuth : uint8_t{0}};
  store_le<uint32_t>(out + 4, w.slots);
  store_le<uint32_t>(out + 8, w.slot_size);
  store_le<uint32_t>(out + 12, w.rkey);
  store_le<uint64_t>(out + 16, w.ring_addr);
  store_le<uint64_t>(out + 24, w.topology_hash);
  store_le<uint64_t>(out + 32, w.next_seq);
  if (w.auth) std::memcpy(out + kCmWelcomeSize, w.nonce.data(), w.nonce.size());
}

bool decode_cm_welcome(std::span<const std::byte> in, CmWelcome& out) {
  if (in.size() < kCmWelcomeSize || uint8_t(in[0]) != kFrameFormat) return false;
  uint8_t flags = uint8_t(in[1]);
  if (flags & ~kCmAuth) return false;
  out.auth = flags & kCmAuth;
  if (out.auth) {
    if (in.size() < kCmChallengeSize) return false;
    std::memcpy(out.nonce.data(), in.data() + kCmWelcomeSize, out.nonce.size());
  }
  out.slots = load_le<uint32_t>(in.data() + 4);
  out.slot_size = load_le<uint32_t>(in.data() + 8);
  out.rkey = load_le<uint32_t>(in.data() + 12);
  out.ring_addr = load_le<uint64_t>(in.data() + 16);
  out.topology_hash = load_le<uint64_t>(in.data() + 24);
  out.next_seq = load_le<uint64_t>(in.data() + 32);
  return out.slots > 0 && out.slots <= (1u << kImmSlotBits) && out.slot_size > 0;
}

}  // namespace hoprelay::transport
