// The hoprelay wire format, shared by every transport (docs/protocol.md is its reference).
//
// Every frame starts with the same fixed 32-byte little-endian header. A data frame's bytes on
// the wire are exactly the bytes that land in the receiver's slot (header, then payload), so a
// relay can forward a message from the slot it arrived in without copying it.
//
// Everything here is pure: no I/O, no allocation. Decoding validates every field a peer sends;
// transports call decode_header() before they trust a single byte of a frame.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace hoprelay::transport {

inline constexpr uint16_t kFrameMagic = 0x5248;  // "HR"
// Wire protocol versions (docs/protocol.md, "Versioning"):
// 2: chunks (kFlagMore, kFlagAbort, FrameHeader::chunk); 3: end of stream (kFlagEnd);
// 4: outcomes (kOutcome frames, outcome.h) and the welcome's next_seq.
// 5: flag kFlagZstd (the zstd stage's compressed payloads).
// 6: an end mark carries in `chunk` the stamp of the head its stream entered by (end_joins.h).
// 7: negotiation: the hello and the welcome carry each side's range and features (WireOffer);
//    a link speaks the highest version both have. Its frames are version 6's; feature
//    kFeatureSpooledOutcome adds a part to the OUTCOME payload (outcome.h).
// A release speaks its own version and the one before it (and this one also 6, the last
// release without negotiation, at 97db411).
inline constexpr uint8_t kWireVersion = 7;     // the newest this end speaks
inline constexpr uint8_t kWireVersionMin = 6;  // the oldest
// The header's version byte (and the verbs CM hello's first byte): the layout of the frames,
// not the version a link speaks. Version 7 kept 6's frames, so every frame still says 6, which
// is what a node of version 6 checks; a version that changes the layout gives its frames a new
// number, on the links that agreed on it (as TLS 1.3 records keep 1.2's version number).
inline constexpr uint8_t kFrameFormat = 6;
inline constexpr size_t kFrameHeaderSize = 32;
// Control frames (hello, welcome, reject) carry at most this many payload bytes.
inline constexpr uint32_t kMaxControlPayload = 256;
// Node names travel in the hello and, over verbs, in 56 bytes of rdma_cm private data.
inline constexpr size_t kMaxNodeName = 48;
// The longest name that leaves the verbs CM hello room for the offer (WireOffer).
inline constexpr size_t kMaxNameWithCmOffer = 40;

enum class FrameType : uint8_t {
  kHello = 1,    // sender -> receiver: who I am (HelloBody)
  kWelcome = 2,  // receiver -> sender: admitted, here are your credits (WelcomeBody)
  kReject = 3,   // receiver -> sender: not admitted; payload is the reason text
  kData = 4,     // sender -> receiver: one message, into slot `slot`
  kCredit = 5,   // receiver -> sender: `credits` more slots released (acknowledges the oldest)
  // Closing on purpose, not a failure. Sender -> receiver: the sender is done. Receiver ->
  // sender: the receiver drains: send nothing more, and close once all sent is acknowledged.
  kBye = 6,
  // Pre-shared key admission (auth.h), only when the topology names an auth_key_file:
  kChallenge = 7,  // receiver -> sender (TCP): a fresh nonce to answer (kNonceSize bytes)
  kAuth = 8,       // sender -> receiver: client nonce + MAC over the challenge and the hello
  // receiver -> sender: the message in slot `slot` (origin, seq, chunk) was given up, and
  // where and why (outcome.h); sent before the credit that acknowledges that slot.
  kOutcome = 9,
};

// Header flag bits are the message flags of the stage ABI (HOPRELAY_MSG_*), carried end to end,
// and two that say how a message larger than a slot travels as chunks (docs/protocol.md):
inline constexpr uint16_t kFlagCrc32cTrailer = 0x0001;  // HOPRELAY_MSG_CRC32C_TRAILER
inline constexpr uint16_t kFlagMore = 0x0002;  // HOPRELAY_MSG_MORE: more chunks of it follow
// The message ends here, incomplete: a node dropped one of its chunks after it had forwarded
// earlier ones (a stage's verdict). Length 0; never shown to a stage.
inline constexpr uint16_t kFlagAbort = 0x0004;
inline constexpr uint16_t kChunkFlags = kFlagMore | kFlagAbort;
// End of stream: the producer of `origin` closed after sending the messages before `seq` (the
// frame's seq is the number its next message would have had). Length 0, never a chunk, never
// shown to a stage, not deduplicated (repeating it is harmless); every branch gets it, so each
// consumer learns that the stream ended (docs/protocol.md, "End of stream"). Its `chunk` is not
// an index: the head's stamp (0 from a producer), so that where branches join again a node can
// tell how many copies to wait for.
inline constexpr uint16_t kFlagEnd = 0x0008;
// HOPRELAY_MSG_ZSTD: the payload (this chunk's, for a chunk) is zstd frames (since version 5).
inline constexpr uint16_t kFlagZstd = 0x0010;
// The flags a stage may set or clear, which a node carries on to the next hop.
inline constexpr uint16_t kStageFlags = kFlagCrc32cTrailer | kFlagZstd;
inline constexpr uint16_t kKnownFlags = kStageFlags | kChunkFlags | kFlagEnd;

struct FrameHeader {
  FrameType type = FrameType::kData;
  uint16_t flags = 0;
  uint32_t length = 0;   // payload bytes after the header
  uint32_t origin = 0;   // producer id (data)
  uint64_t seq = 0;      // per-origin sequence (data)
  uint32_t credits = 0;  // credit frames: slots released
  uint32_t slot = 0;     // data frames: receiver slot index the frame occupies
  // Data and outcome frames: the index of this chunk in its message (0 for a whole message).
  // On the wire it takes the place credit frames use for `credits`.
  uint32_t chunk = 0;
};

// A data frame that is part of a chunked message (not a whole message in one frame). An end
// mark never is: its `chunk` is a stamp.
inline constexpr bool is_chunk(uint16_t flags, uint32_t chunk) {
  return (flags & kFlagEnd) == 0 && ((flags & kChunkFlags) != 0 || chunk != 0);
}

// Why a header was refused. Each has a metric label and a log text (reason_text()).
enum class WireError : uint8_t {
  kOk = 0,
  kBadMagic,
  kBadVersion,
  kBadType,
  kBadReserved,
  kBadFlags,
  kTooLong,
};
std::string_view reason_text(WireError e);
// kBadVersion, worded with both versions and what to upgrade: "the peer speaks wire protocol
// version 5, this end speaks 6 to 7 (...)". `frame` is the refused header's first bytes.
std::string version_mismatch_text(const std::byte* frame);
// A short, bounded label for metrics: bad_magic, bad_version, ...
std::string_view reason_label(WireError e);

// Limits a decoder checks against: what this end of this link has agreed to receive.
struct WireLimits {
  uint32_t max_data_payload = 0;  // the receiver's slot payload capacity
};

void encode_header(const FrameHeader& h, std::byte* out);
WireError decode_header(const std::byte* in, const WireLimits& limits, FrameHeader& out);

enum class PeerRole : uint8_t { kNode = 1, kProducer = 2 };

// ---- Negotiation (version 7) ----------------------------------------------------------
// Features a link uses only when both ends have them. Version 6 had the first five (a peer of
// version 6 has them all); later versions add bits rather than assume them.
inline constexpr uint32_t kFeatureChunks = 1u << 0;    // kFlagMore, kFlagAbort
inline constexpr uint32_t kFeatureEndMark = 1u << 1;   // kFlagEnd
inline constexpr uint32_t kFeatureOutcomes = 1u << 2;  // kOutcome frames
inline constexpr uint32_t kFeatureZstd = 1u << 3;      // kFlagZstd
inline constexpr uint32_t kFeatureEndStamp = 1u << 4;  // an end mark's stamp in `chunk`
inline constexpr uint32_t kFeaturesOf6 = 0x1f;
// Since 7: an outcome says where a message waits in a spool (outcome.h, kOutcomeSpooled).
inline constexpr uint32_t kFeatureSpooledOutcome = 1u << 5;
inline constexpr uint32_t kFeatures = kFeaturesOf6 | kFeatureSpooledOutcome;  // this end's

// One side's range and features. Travels in 8 bytes where version 6 reads nothing: the `seq`
// of the hello's and the welcome's frame header over TCP; over verbs the CM hello's last 8
// bytes (when the node's name leaves them free: 40 characters or fewer) and 8 bytes behind the
// CM welcome. A peer that sends none speaks version 6 only (present false).
struct WireOffer {
  uint8_t min = kWireVersionMin;
  uint8_t max = kWireVersionMin;
  uint32_t features = kFeaturesOf6;
  bool present = false;
};
inline constexpr size_t kOfferSize = 8;
WireOffer own_offer();
void encode_offer(const WireOffer& o, std::byte* out);  // kOfferSize bytes
// What `in` (kOfferSize bytes) offers; not present (version 6) when it is not an offer.
WireOffer decode_offer(const std::byte* in);
uint64_t offer_field(const WireOffer& o);  // the 8 bytes as a header's seq
WireOffer offer_of_field(uint64_t field);

// What a link speaks: the highest version of both ranges and the features both have.
struct WireAgreement {
  uint8_t version = kWireVersion;
  uint32_t features = kFeatures;
};
// The agreement of this end's offer and the peer's; false when the ranges do not meet.
bool agree(const WireOffer& mine, const WireOffer& peer, WireAgreement& out);
// For a link-up log line: "" when the link speaks this end's version, else "; wire protocol
// 6: the peer's release is older" (what an operator upgrading host by host looks for).
std::string older_peer_text(const WireAgreement& wire);
// Why two ranges do not meet, naming both and what to upgrade: "the peer speaks wire protocol
// versions 8 to 9, this end 6 to 7: upgrade hoprelay on this end ...".
std::string no_common_version_text(const WireOffer& mine, const WireOffer& peer);

// The words a head's refusal of a producer starts with when another producer of the same
// origin is connected: origins are identities, and the refused producer reports it as such.
inline constexpr std::string_view kOriginInUse = "origin in use: ";

// HELLO payload: fixed 64 bytes.
struct HelloBody {
  PeerRole role = PeerRole::kNode;
  char name[kMaxNodeName + 1] = {};  // NUL-terminated
  uint64_t topology_hash = 0;
  uint32_t origin = 0;  // producers: the origin id their messages carry
  WireOffer offer;      // the CM hello's (TCP: the frame header's seq)
};
inline constexpr uint32_t kHelloSize = 64;
void encode_hello(const HelloBody& h, std::byte* out);
// False when the body is malformed (bad role, name not terminated or not a valid node name).
bool decode_hello(std::span<const std::byte> in, HelloBody& out);

// WELCOME payload: fixed 24 bytes, followed by the receiver's MAC (kMacSize) when the link
// authenticates (auth.h).
struct WelcomeBody {
  uint32_t slots = 0;      // credits granted (the receiver's ring size for this link)
  uint32_t slot_size = 0;  // payload capacity of one slot
  uint64_t topology_hash = 0;
  // To a producer: one past the highest sequence number the head has taken from its origin
  // (0: none), where a restarted producer resumes. 0 to a node.
  uint64_t next_seq = 0;
};
inline constexpr uint32_t kWelcomeSize = 24;
void encode_welcome(const WelcomeBody& w, std::byte* out);
bool decode_welcome(std::span<const std::byte> in, WelcomeBody& out);

// ---- Verbs (rdma_cm) connection private data ------------------------------------------
// An RC connect request carries at most 56 bytes of private data, an accept 196: the hello
// fits the first exactly, the welcome (with the ring's address and rkey) the second.

// CM hello (56 bytes): version u8 | role u8 | name_len u8 | reserved u8 | origin u32 | name[48]
// (version: kFrameFormat; since version 7 the offer in the last 8 bytes when the name is
// 40 characters or fewer, HelloBody::offer)
inline constexpr size_t kCmHelloSize = 56;
void encode_cm_hello(const HelloBody& h, std::byte* out);
bool decode_cm_hello(std::span<const std::byte> in, HelloBody& out);

// CM welcome (40 bytes): version u8 | flags u8 | reserved u8[2] | slots u32 | slot_size u32 |
//                        rkey u32 | ring_addr u64 | topology_hash u64 | next_seq u64
// With flag kCmAuth the accept carries a challenge instead: 72 bytes, the 40 above with rkey
// and ring_addr zero, then the receiver's nonce. The ring's address and key follow over the
// QP, in a WELCOME frame (payload: this 40-byte form, then the receiver's MAC), only once the
// sender has answered the challenge with an AUTH frame.
inline constexpr uint8_t kCmAuth = 0x01;
struct CmWelcome {
  uint32_t slots = 0;
  uint32_t slot_size = 0;
  uint32_t rkey = 0;
  uint64_t ring_addr = 0;
  uint64_t topology_hash = 0;
  uint64_t next_seq = 0;  // WelcomeBody::next_seq
  bool auth = false;      // a challenge: `nonce` is set, rkey and ring_addr are not
  std::array<std::byte, 32> nonce{};
};
inline constexpr size_t kCmWelcomeSize = 40;
inline constexpr size_t kCmChallengeSize = 72;
// Writes kCmWelcomeSize bytes, or kCmChallengeSize when w.auth.
void encode_cm_welcome(const CmWelcome& w, std::byte* out);
bool decode_cm_welcome(std::span<const std::byte> in, CmWelcome& out);

// Immediate data of an RDMA WRITE with immediate: the slot index in the top 12 bits (slots are
// at most 4096) and the low 20 bits of the payload length, which the receiver checks against
// the header written into the slot, so a frame whose header and immediate disagree is refused.
inline constexpr uint32_t kImmSlotBits = 12;
inline constexpr uint32_t kImmLengthBits = 20;
inline constexpr uint32_t encode_imm(uint32_t slot, uint32_t length) {
  return (slot << kImmLengthBits) | (length & ((1u << kImmLengthBits) - 1));
}
inline constexpr uint32_t imm_slot(uint32_t imm) {
  return imm >> kImmLengthBits;
}
inline constexpr bool imm_matches_length(uint32_t imm, uint32_t length) {
  return (imm & ((1u << kImmLengthBits) - 1)) == (length & ((1u << kImmLengthBits) - 1));
}

// Valid node names: [A-Za-z0-9_.-]{1,48}. Shared with the topology validator's rule.
bool valid_node_name(std::string_view name);

// Little-endian load/store helpers (x86 and ARM hosts are LE; memcpy keeps them alignment-safe).
template <class T>
inline T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
inline void store_le(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace hoprelay::transport
