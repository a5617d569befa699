// libFuzzer target: the wire decoders (transport/include/hoprelay/transport/wire.h).
//
// Everything a peer sends passes through these functions before a transport trusts a byte of
// it, so each must refuse malformed input and, when it accepts, hand back only values within
// what docs/protocol.md allows. The input is used three ways:
//   1. its first 32 bytes as one header, decoded against a range of receive limits;
//   2. the whole input as each body on its own (hello, welcome, CM hello, CM welcome,
//      outcome);
//   3. the whole input as a byte stream of frames, the way the TCP transport reads it:
//      header, then `length` bytes of payload whose meaning the header's type gives.
// A crash, a sanitizer report or a broken invariant is a finding.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz_check.h"
#include "hoprelay/transport/outcome.h"
#include "hoprelay/transport/wire.h"

namespace {

using namespace hoprelay::transport;

// Receive limits a link can have agreed: none (control-only readers), tiny, the smallest and
// largest slot the validator allows, the default slot, and the largest a u32 can say.
constexpr std::array<uint32_t, 7> kLimits = {0, 1, 256, 4096, 65536, 16u << 20, UINT32_MAX};

bool known_type(FrameType t) {
  return uint8_t(t) >= uint8_t(FrameType::kHello) && uint8_t(t) <= uint8_t(FrameType::kOutcome);
}

// The name is NUL-terminated within the array and is a valid node name.
void check_name(const HelloBody& h) {
  size_t n = strnlen(h.name, sizeof(h.name));
  FUZZ_CHECK(n < sizeof(h.name));
  FUZZ_CHECK(n <= kMaxNodeName);
  FUZZ_CHECK(valid_node_name({h.name, n}));
  for (size_t i = n; i < sizeof(h.name); ++i) FUZZ_CHECK(h.name[i] == '\0');
}

bool same_hello(const HelloBody& a, const HelloBody& b) {
  return a.role == b.role && std::memcmp(a.name, b.name, sizeof(a.name)) == 0 &&
         a.topology_hash == b.topology_hash && a.origin == b.origin;
}

// Returns the result for limit `limit`, after checking what an accepted header promises.
WireError check_header(const std::byte* in, uint32_t limit, FrameHeader& out) {
  out = FrameHeader{};
  WireError err = decode_header(in, WireLimits{limit}, out);
  FUZZ_CHECK(reason_text(err) != "unknown");
  if (err != WireError::kOk) return err;
  FUZZ_CHECK(known_type(out.type));
  FUZZ_CHECK((out.flags & ~kKnownFlags) == 0);
  if (out.type == FrameType::kData) {
    FUZZ_CHECK(out.length <= limit);
    // An abort ends a message: nothing in it, nothing after it.
    if (out.flags & kFlagAbort) FUZZ_CHECK(out.length == 0 && !(out.flags & kFlagMore));
    if (out.flags & kFlagMore) FUZZ_CHECK(out.chunk != UINT32_MAX);
    // An end of stream is a bare mark: no bytes, no other flag, never a chunk (its chunk
    // field is the head's stamp, any value).
    if (out.flags & kFlagEnd) {
      FUZZ_CHECK(out.length == 0 && out.flags == kFlagEnd && !is_chunk(out.flags, out.chunk));
    }
    FUZZ_CHECK(out.credits == 0);  // data frames carry a chunk index there
  } else if (out.type == FrameType::kOutcome) {
    FUZZ_CHECK(out.length <= kMaxOutcomePayload);
    FUZZ_CHECK(out.credits == 0);  // outcomes name a chunk there, like data frames
  } else {
    FUZZ_CHECK(out.length <= kMaxControlPayload);
    FUZZ_CHECK(out.chunk == 0);
  }
  // An accepted header is exactly what encode_header() writes for the decoded fields.
  std::array<std::byte, kFrameHeaderSize> again{};
  encode_header(out, again.data());
  FUZZ_CHECK(std::memcmp(again.data(), in, kFrameHeaderSize) == 0);
  // Verbs carries slot and length in the immediate too; what fits must come back out.
  if (out.type == FrameType::kData && out.slot < (1u << kImmSlotBits)) {
    uint32_t imm = encode_imm(out.slot, out.length);
    FUZZ_CHECK(imm_slot(imm) == out.slot);
    FUZZ_CHECK(imm_matches_length(imm, out.length));
  }
  return err;
}

void check_headers(std::span<const std::byte> in) {
  if (in.size() < kFrameHeaderSize) return;
  bool accepted_before = false;
  for (uint32_t limit : kLimits) {
    FrameHeader h;
    WireError err = check_header(in.data(), limit, h);
    // A larger limit never refuses what a smaller one accepted, and only length depends on it.
    if (accepted_before) FUZZ_CHECK(err == WireError::kOk);
    if (err == WireError::kOk) accepted_before = true;
    if (limit == UINT32_MAX) FUZZ_CHECK(err != WireError::kTooLong || h.type != FrameType::kData);
  }
}

void check_hello(std::span<const std::byte> in) {
  HelloBody h;
  if (!decode_hello(in, h)) return;
  FUZZ_CHECK(in.size() == kHelloSize);
  FUZZ_CHECK(h.role == PeerRole::kNode || h.role == PeerRole::kProducer);
  check_name(h);
  std::array<std::byte, kHelloSize> again{};
  encode_hello(h, again.data());
  HelloBody h2;
  FUZZ_CHECK(decode_hello(again, h2));
  FUZZ_CHECK(same_hello(h, h2));
}

void check_welcome(std::span<const std::byte> in) {
  WelcomeBody w;
  if (!decode_welcome(in, w)) return;
  FUZZ_CHECK(in.size() == kWelcomeSize);
  FUZZ_CHECK(w.slots > 0 && w.slot_size > 0);
  std::array<std::byte, kWelcomeSize> again{};
  encode_welcome(w, again.data());
  FUZZ_CHECK(std::memcmp(again.data(), in.data(), kWelcomeSize) == 0);
}

void check_cm_hello(std::span<const std::byte> in) {
  HelloBody h;
  h.topology_hash = 0x5a5a5a5a5a5a5a5aull;  // must be overwritten: the CM hello has no hash
  if (!decode_cm_hello(in, h)) return;
  FUZZ_CHECK(in.size() >= kCmHelloSize);
  FUZZ_CHECK(h.role == PeerRole::kNode || h.role == PeerRole::kProducer);
  FUZZ_CHECK(h.topology_hash == 0);
  check_name(h);
  std::array<std::byte, kCmHelloSize> again{};
  encode_cm_hello(h, again.data());
  HelloBody h2;
  FUZZ_CHECK(decode_cm_hello(again, h2));
  FUZZ_CHECK(same_hello(h, h2));
}

void check_cm_welcome(std::span<const std::byte> in) {
  CmWelcome w;
  if (!decode_cm_welcome(in, w)) return;
  FUZZ_CHECK(in.size() >= (w.auth ? kCmChallengeSize : kCmWelcomeSize));
  FUZZ_CHECK(w.slots > 0 && w.slots <= (1u << kImmSlotBits));
  FUZZ_CHECK(w.slot_size > 0);
  // A challenge encodes to kCmChallengeSize bytes, a plain welcome to kCmWelcomeSize.
  std::array<std::byte, kCmChallengeSize> again{};
  encode_cm_welcome(w, again.data());
  CmWelcome w2;
  FUZZ_CHECK(
      decode_cm_welcome(std::span(again).first(w.auth ? kCmChallengeSize : kCmWelcomeSize), w2));
  FUZZ_CHECK(w2.slots == w.slots && w2.slot_size == w.slot_size && w2.rkey == w.rkey &&
             w2.ring_addr == w.ring_addr && w2.topology_hash == w.topology_hash &&
             w2.auth == w.auth && w2.nonce == w.nonce);
}

// An outcome body: what is accepted is within the limits every reader relies on (records,
// names that are node names, printable details), and encodes back to exactly the same bytes.
void check_outcome(std::span<const std::byte> in) {
  Outcome o;
  if (!decode_outcome(in, o)) return;
  FUZZ_CHECK(in.size() <= kMaxOutcomePayload);
  // A drop names where, or (wire protocol 7) the outcome says only where it waits in a spool.
  FUZZ_CHECK(o.count <= kMaxOutcomeRecords && o.total >= o.count);
  FUZZ_CHECK(o.count >= 1 || (o.total == 0 && o.spooled > 0));
  if (o.spooled) {
    FUZZ_CHECK(valid_node_name(o.spool.node_name()) && valid_node_name(o.spool.branch_name()));
  } else {
    FUZZ_CHECK(o.spool.node_len == 0 && o.spool.branch_len == 0);
  }
  for (uint8_t i = 0; i < o.count; ++i) {
    const DropRecord& r = o.records[i];
    FUZZ_CHECK(uint8_t(r.reason) >= 1 && uint8_t(r.reason) <= kDropReasonMax);
    FUZZ_CHECK(drop_reason_label(r.reason) != "unknown");
    FUZZ_CHECK(valid_node_name(r.node_name()));
    FUZZ_CHECK(r.detail_len <= kMaxDropDetail);
    for (char c : r.detail_text()) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
  std::array<std::byte, kMaxOutcomePayload> again{};
  uint32_t n = encode_outcome(o, again.data());
  FUZZ_CHECK(n == in.size());
  FUZZ_CHECK(std::memcmp(again.data(), in.data(), n) == 0);
  // Merging into an empty outcome keeps it; merging again stays within the limits.
  Outcome merged;
  merged.merge(o);
  merged.merge(o);
  FUZZ_CHECK(merged.count <= kMaxOutcomeRecords && merged.total >= merged.count);
  FUZZ_CHECK(merged.spooled >= o.spooled);
}

void check_bodies(std::span<const std::byte> in) {
  check_hello(in);
  check_welcome(in);
  check_cm_hello(in);
  check_cm_welcome(in);
  check_outcome(in);
}

// A byte stream of frames, read like the TCP transport reads one: stop at the first refused
// header (the link is dropped) or at a frame that is not complete yet.
void check_stream(std::span<const std::byte> in, uint32_t limit) {
  size_t off = 0;
  while (in.size() - off >= kFrameHeaderSize) {
    FrameHeader h;
    if (check_header(in.data() + off, limit, h) != WireError::kOk) return;
    if (in.size() - off - kFrameHeaderSize < h.length) return;
    std::span<const std::byte> body = in.subspan(off + kFrameHeaderSize, h.length);
    switch (h.type) {
      case FrameType::kHello:
        check_hello(body);
        break;
      case FrameType::kWelcome:
        check_welcome(body);
        break;
      case FrameType::kOutcome:
        check_outcome(body);
        break;
      default:
        break;
    }
    off += kFrameHeaderSize + h.length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  check_headers(in);
  check_bodies(in);
  check_stream(in, 0);
  check_stream(in, 65536);
  return 0;
}
