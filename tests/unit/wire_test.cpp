#include "hoprelay/transport/wire.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>

namespace hoprelay::transport {
namespace {

std::array<std::byte, kFrameHeaderSize> encoded(const FrameHeader& h) {
  std::array<std::byte, kFrameHeaderSize> b{};
  encode_header(h, b.data());
  return b;
}

TEST(Wire, HeaderRoundTrips) {
  FrameHeader h{FrameType::kData, 1, 4096, 77, 0x1122334455667788ull, 0, 13};
  auto b = encoded(h);
  FrameHeader out;
  ASSERT_EQ(decode_header(b.data(), {65536}, out), WireError::kOk);
  EXPECT_EQ(out.type, FrameType::kData);
  EXPECT_EQ(out.flags, 1);
  EXPECT_EQ(out.length, 4096u);
  EXPECT_EQ(out.origin, 77u);
  EXPECT_EQ(out.seq, 0x1122334455667788ull);
  EXPECT_EQ(out.slot, 13u);
}

TEST(Wire, RejectsEveryBadField) {
  FrameHeader h{FrameType::kData, 0, 100};
  FrameHeader out;
  WireLimits limits{64};
  auto b = encoded(h);
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kTooLong);  // longer than a slot

  b = encoded(FrameHeader{FrameType::kCredit});
  b[0] = std::byte{0};
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kBadMagic);

  b = encoded(FrameHeader{FrameType::kCredit});
  b[2] = std::byte{9};
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kBadVersion);

  b = encoded(FrameHeader{FrameType::kCredit});
  b[3] = std::byte{0};
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kBadType);
  b[3] = std::byte{10};  // one past kOutcome
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kBadType);

  b = encoded(FrameHeader{FrameType::kCredit});
  b[6] = std::byte{1};
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kBadReserved);

  b = encoded(FrameHeader{FrameType::kCredit, 0x8000});
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kBadFlags);
  // Version 5 knows the zstd stage's flag (0x0010), and no bit above it.
  b = encoded(FrameHeader{FrameType::kData, kFlagZstd | kFlagCrc32cTrailer, 10, 1, 2});
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kOk);
  EXPECT_EQ(out.flags, kFlagZstd | kFlagCrc32cTrailer);
  b = encoded(FrameHeader{FrameType::kData, 0x0020, 10, 1, 2});
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kBadFlags);

  FrameHeader ctl{FrameType::kHello};
  ctl.length = kMaxControlPayload + 1;
  b = encoded(ctl);
  EXPECT_EQ(decode_header(b.data(), limits, out), WireError::kTooLong);
}

TEST(Wire, ChunksCarryTheirIndexWhereCreditFramesCarryCredits) {
  FrameHeader h{FrameType::kData, kFlagMore, 4096, 5, 99};
  h.chunk = 7;
  auto b = encoded(h);
  FrameHeader out;
  ASSERT_EQ(decode_header(b.data(), {65536}, out), WireError::kOk);
  EXPECT_EQ(out.chunk, 7u);
  EXPECT_EQ(out.credits, 0u);
  EXPECT_TRUE(is_chunk(out.flags, out.chunk));
  FrameHeader credit{FrameType::kCredit};
  credit.credits = 3;
  b = encoded(credit);
  ASSERT_EQ(decode_header(b.data(), {65536}, out), WireError::kOk);
  EXPECT_EQ(out.credits, 3u);
  EXPECT_EQ(out.chunk, 0u);
  // The last chunk of a message: no flag, an index.
  EXPECT_TRUE(is_chunk(0, 4));
  EXPECT_FALSE(is_chunk(kFlagCrc32cTrailer, 0)) << "a whole message";
  // An abort ends a message: it carries nothing and announces nothing more.
  FrameHeader abort{FrameType::kData, kFlagAbort, 0, 5, 99};
  abort.chunk = 2;
  b = encoded(abort);
  EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kOk);
  abort.length = 1;
  b = encoded(abort);
  EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kBadFlags);
  abort.length = 0;
  abort.flags = kFlagAbort | kFlagMore;
  b = encoded(abort);
  EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kBadFlags);
  // An end of stream is a bare mark: no bytes, not a chunk, no other flag.
  FrameHeader end{FrameType::kData, kFlagEnd, 0, 5, 100};
  b = encoded(end);
  EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kOk);
  EXPECT_EQ(out.flags, kFlagEnd);
  for (auto bad : {FrameHeader{FrameType::kData, kFlagEnd, 1, 5, 100},
                   FrameHeader{FrameType::kData, kFlagEnd | kFlagMore, 0, 5, 100},
                   FrameHeader{FrameType::kData, kFlagEnd | kFlagCrc32cTrailer, 0, 5, 100}}) {
    b = encoded(bad);
    EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kBadFlags);
  }
  // Its chunk field is the head's stamp, not an index: any value, and never a chunk.
  FrameHeader stamped{FrameType::kData, kFlagEnd, 0, 5, 100, 0, 0, 0xfedcba98};
  b = encoded(stamped);
  ASSERT_EQ(decode_header(b.data(), {65536}, out), WireError::kOk);
  EXPECT_EQ(out.chunk, 0xfedcba98u);
  EXPECT_FALSE(is_chunk(out.flags, out.chunk));
  // A peer of another version learns both numbers.
  b = encoded(end);
  b[2] = std::byte{3};
  EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kBadVersion);
  EXPECT_EQ(version_mismatch_text(b.data()),
            "the peer speaks wire protocol version 3, this end speaks 6 to 7: upgrade hoprelay "
            "(or libhoprelay) on the peer's host; a release speaks its own wire version and the "
            "one before it");
  b[2] = std::byte{9};  // a later release that changed the frames and speaks 6 no more
  EXPECT_NE(version_mismatch_text(b.data()).find("version 9, this end speaks 6 to 7: upgrade "
                                                 "hoprelay (or libhoprelay) on this host"),
            std::string::npos);
  // No chunk can follow the highest index.
  FrameHeader wrap{FrameType::kData, kFlagMore, 10, 5, 99};
  wrap.chunk = UINT32_MAX;
  b = encoded(wrap);
  EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kBadFlags);
  wrap.flags = 0;
  b = encoded(wrap);
  EXPECT_EQ(decode_header(b.data(), {65536}, out), WireError::kOk)
      << "as the last chunk it is fine";
}

TEST(Wire, RandomHeadersNeverDecodeOutOfLimits) {
  std::mt19937_64 rng(42);
  WireLimits limits{4096};
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::array<std::byte, kFrameHeaderSize> b;
    for (auto& x : b) x = std::byte(rng());
    if (i % 2) {  // half with a valid prefix so the deeper checks are reached
      b[0] = std::byte{0x48};
      b[1] = std::byte{0x52};
      b[2] = std::byte{kFrameFormat};
      b[3] = std::byte(1 + rng() % 6);
      b[6] = b[7] = std::byte{0};
      b[5] = std::byte{0};
      b[4] = std::byte(rng() % 2);
      b[9] = std::byte(rng() % 0x20);  // lengths around the limits
      b[10] = b[11] = std::byte{0};
    }
    FrameHeader out;
    if (decode_header(b.data(), limits, out) == WireError::kOk) {
      ++accepted;
      uint32_t max = out.type == FrameType::kData ? limits.max_data_payload : kMaxControlPayload;
      ASSERT_LE(out.length, max);
    }
  }
  EXPECT_GT(accepted, 0);
}

TEST(Wire, HelloRoundTripAndValidation) {
  HelloBody h;
  h.role = PeerRole::kProducer;
  std::strcpy(h.name, "relay-b.01");
  h.topology_hash = 0xdeadbeefcafef00dull;
  h.origin = 9;
  std::array<std::byte, kHelloSize> b;
  encode_hello(h, b.data());
  HelloBody out;
  ASSERT_TRUE(decode_hello(b, out));
  EXPECT_STREQ(out.name, "relay-b.01");
  EXPECT_EQ(out.role, PeerRole::kProducer);
  EXPECT_EQ(out.topology_hash, h.topology_hash);
  EXPECT_EQ(out.origin, 9u);

  auto bad = b;
  bad[0] = std::byte{7};  // role
  EXPECT_FALSE(decode_hello(bad, out));
  bad = b;
  bad[1] = std::byte{200};  // name length beyond the field
  EXPECT_FALSE(decode_hello(bad, out));
  bad = b;
  bad[16] = std::byte{' '};  // not a valid node-name character
  EXPECT_FALSE(decode_hello(bad, out));
  EXPECT_FALSE(decode_hello(std::span(b).first(10), out));  // truncated
}

TEST(Wire, WelcomeValidation) {
  std::array<std::byte, kWelcomeSize> b;
  encode_welcome({64, 65536, 5}, b.data());
  WelcomeBody w;
  ASSERT_TRUE(decode_welcome(b, w));
  EXPECT_EQ(w.slots, 64u);
  EXPECT_EQ(w.slot_size, 65536u);
  encode_welcome({0, 65536, 5}, b.data());
  EXPECT_FALSE(decode_welcome(b, w));
}

TEST(Wire, NodeNames) {
  EXPECT_TRUE(valid_node_name("a"));
  EXPECT_TRUE(valid_node_name("relay_2.east-1"));
  EXPECT_FALSE(valid_node_name(""));
  EXPECT_FALSE(valid_node_name("has space"));
  EXPECT_FALSE(valid_node_name(std::string(49, 'x')));
}

}  // namespace
}  // namespace hoprelay::transport

namespace hoprelay::transport {
namespace {

TEST(WireVerbs, CmHelloFitsTheConnectPrivateData) {
  static_assert(kCmHelloSize <= 56, "RC connect private data is 56 bytes");
  static_assert(kCmWelcomeSize <= 196, "RC accept private data is 196 bytes");
  HelloBody h;
  h.role = PeerRole::kNode;
  std::string name(kMaxNodeName, 'n');
  std::strcpy(h.name, name.c_str());
  h.origin = 5;
  std::array<std::byte, kCmHelloSize> b;
  encode_cm_hello(h, b.data());
  HelloBody out;
  ASSERT_TRUE(decode_cm_hello(b, out));
  EXPECT_EQ(std::string(out.name), name);
  EXPECT_EQ(out.origin, 5u);
  auto bad = b;
  bad[0] = std::byte{kFrameFormat + 1};
  EXPECT_FALSE(decode_cm_hello(bad, out)) << "version";
  bad = b;
  bad[2] = std::byte{49};
  EXPECT_FALSE(decode_cm_hello(bad, out)) << "name length";
  EXPECT_FALSE(decode_cm_hello(std::span(b).first(20), out)) << "truncated";
}

TEST(WireVerbs, CmWelcomeRoundTripsAndRefusesTooManySlots) {
  CmWelcome w{64, 65536, 0x1234, 0x7f0000001000ull, 99};
  std::array<std::byte, kCmWelcomeSize> b;
  encode_cm_welcome(w, b.data());
  CmWelcome out;
  ASSERT_TRUE(decode_cm_welcome(b, out));
  EXPECT_EQ(out.slots, 64u);
  EXPECT_EQ(out.rkey, 0x1234u);
  EXPECT_EQ(out.ring_addr, 0x7f0000001000ull);
  EXPECT_EQ(out.topology_hash, 99u);
  w.slots = 4097;  // more than the immediate can address
  encode_cm_welcome(w, b.data());
  EXPECT_FALSE(decode_cm_welcome(b, out));
}

TEST(WireVerbs, ImmediateCarriesSlotAndLengthCheck) {
  for (uint32_t slot : {0u, 1u, 63u, 4095u}) {
    for (uint32_t len : {0u, 1u, 65536u, (16u << 20)}) {
      uint32_t imm = encode_imm(slot, len);
      EXPECT_EQ(imm_slot(imm), slot);
      EXPECT_TRUE(imm_matches_length(imm, len));
      EXPECT_FALSE(imm_matches_length(imm, len + 1));
    }
  }
}

}  // namespace
}  // namespace hoprelay::transport

#include "hoprelay/transport/backoff.h"

namespace hoprelay::transport {
namespace {

TEST(Backoff, DoublesWithJitterUpToTheMaximumAndResets) {
  Backoff b;
  uint32_t bound = Backoff::kMinMs;
  for (int i = 0; i < 10; ++i) {
    auto d = b.next().count();
    EXPECT_GE(d, bound / 2) << i;
    EXPECT_LE(d, bound) << i;
    bound = std::min(bound * 2, Backoff::kMaxMs);
  }
  b.reset();
  EXPECT_LE(b.next().count(), Backoff::kMinMs);
  b.slowest();
  EXPECT_GE(b.next().count(), Backoff::kMaxMs / 2);
}

}  // namespace
}  // namespace hoprelay::transport

namespace hoprelay::transport {
namespace {

// Version 7's negotiation (docs/protocol.md, "Versioning"): each side's range and features
// travel where version 6 reads nothing, and a link speaks the highest version of both.
TEST(WireNegotiation, TwoReleasesAgreeOnTheHighestCommonVersionAndTheFeaturesBothHave) {
  WireAgreement a;
  ASSERT_TRUE(agree(own_offer(), own_offer(), a));
  EXPECT_EQ(a.version, kWireVersion);
  EXPECT_EQ(a.features, kFeatures);
  // A peer of version 6 sends no offer: the link speaks 6, with 6's features.
  ASSERT_TRUE(agree(own_offer(), WireOffer{}, a));
  EXPECT_EQ(a.version, 6);
  EXPECT_EQ(a.features, kFeaturesOf6);
  EXPECT_EQ(older_peer_text(a), "; wire protocol 6: the peer's release is older");
  EXPECT_EQ(older_peer_text(WireAgreement{}), "");
  // A later release (7 to 8, a feature more): 7, and only the features both have.
  WireOffer later{7, 8, kFeatures | 0x100, true};
  ASSERT_TRUE(agree(own_offer(), later, a));
  EXPECT_EQ(a.version, 7);
  EXPECT_EQ(a.features, kFeatures);
  // Ranges that do not meet, either way round: refused, naming both and what to upgrade.
  WireOffer newer{8, 9, kFeatures, true};
  EXPECT_FALSE(agree(own_offer(), newer, a));
  EXPECT_EQ(
      no_common_version_text(own_offer(), newer),
      "the peer speaks wire protocol versions 8 to 9, this end 6 to 7: upgrade hoprelay (or "
      "libhoprelay) on this host; a release speaks its own wire version and the one before it");
  WireOffer older{5, 5, kFeaturesOf6, true};
  EXPECT_FALSE(agree(own_offer(), older, a));
  EXPECT_NE(no_common_version_text(own_offer(), older).find("on the peer's host"),
            std::string::npos);
}

TEST(WireNegotiation, OffersRoundTripAndAnythingElseIsVersion6) {
  const WireOffer mine = own_offer();
  WireOffer back = offer_of_field(offer_field(mine));
  EXPECT_TRUE(back.present);
  EXPECT_EQ(back.min, kWireVersionMin);
  EXPECT_EQ(back.max, kWireVersion);
  EXPECT_EQ(back.features, kFeatures);
  // What version 6 puts there (0), garbage, and a range upside down: no offer.
  for (uint64_t field :
       {uint64_t{0}, uint64_t{0x1234567890abcdef}, offer_field(WireOffer{7, 6, 0, true})}) {
    back = offer_of_field(field);
    EXPECT_FALSE(back.present) << std::hex << field;
    EXPECT_EQ(back.max, 6);
  }
  // Over TCP the offer is the hello's header seq: version 6 decodes such a header as before.
  FrameHeader h{FrameType::kHello};
  h.length = kHelloSize;
  h.seq = offer_field(mine);
  std::array<std::byte, kFrameHeaderSize> b;
  encode_header(h, b.data());
  EXPECT_EQ(uint8_t(b[2]), 6) << "the frames of 7 are 6's";
  FrameHeader out;
  ASSERT_EQ(decode_header(b.data(), {4096}, out), WireError::kOk);
  EXPECT_TRUE(offer_of_field(out.seq).present);
}

TEST(WireNegotiation, TheVerbsHelloCarriesTheOfferWhenTheNameLeavesRoom) {
  for (size_t len : {size_t{1}, kMaxNameWithCmOffer, kMaxNameWithCmOffer + 1, kMaxNodeName}) {
    HelloBody h;
    const std::string name(len, 'n');
    std::strncpy(h.name, name.c_str(), kMaxNodeName);
    h.offer = own_offer();
    std::array<std::byte, kCmHelloSize> b;
    encode_cm_hello(h, b.data());
    EXPECT_EQ(uint8_t(b[0]), 6);
    HelloBody out;
    ASSERT_TRUE(decode_cm_hello(b, out)) << len;
    EXPECT_EQ(std::string(out.name), name);
    // A name longer than 40 characters fills the room: that link speaks 6.
    EXPECT_EQ(out.offer.present, len <= kMaxNameWithCmOffer) << len;
    WireAgreement a;
    ASSERT_TRUE(agree(own_offer(), out.offer, a));
    EXPECT_EQ(a.version, len <= kMaxNameWithCmOffer ? kWireVersion : 6) << len;
  }
}

}  // namespace
}  // namespace hoprelay::transport

#include "hoprelay/transport/outcome.h"

namespace hoprelay::transport {
namespace {

// The spooled outcome (kFeatureSpooledOutcome, since wire protocol 7): where a message waits in
// a spool travels with its acknowledgement, alone or beside drops, and merges up a tree.
TEST(WireOutcome, ASpooledOutcomeRoundTripsAloneAndBesideDrops) {
  Outcome spooled;
  spooled.add_spooled("a", "c");
  EXPECT_FALSE(spooled.empty());
  std::array<std::byte, kMaxOutcomePayload> b;
  uint32_t n = encode_outcome(spooled, b.data());
  Outcome out;
  ASSERT_TRUE(decode_outcome(std::span(b).first(n), out));
  EXPECT_EQ(out.total, 0u);
  EXPECT_EQ(out.count, 0u);
  EXPECT_EQ(out.spooled, 1u);
  EXPECT_EQ(out.spool.node_name(), "a");
  EXPECT_EQ(out.spool.branch_name(), "c");

  // Beside drops, and merged at the node above: counts add up, the first spool is kept.
  Outcome both;
  both.add(DropReason::kStageDrop, "b", "no");
  Outcome other;
  other.add_spooled("x", "y");
  both.merge(out);
  both.merge(other);
  EXPECT_EQ(both.total, 1u);
  EXPECT_EQ(both.spooled, 2u);
  EXPECT_EQ(both.spool.node_name(), "a");
  n = encode_outcome(both, b.data());
  ASSERT_TRUE(decode_outcome(std::span(b).first(n), out));
  EXPECT_EQ(out.total, 1u);
  EXPECT_EQ(out.records[0].node_name(), "b");
  EXPECT_EQ(out.spooled, 2u);
  EXPECT_EQ(out.spool.branch_name(), "c");

  // For a peer without the feature only the drops remain; with none, no outcome at all.
  both.strip_spooled();
  EXPECT_FALSE(both.empty());
  n = encode_outcome(both, b.data());
  EXPECT_EQ(uint8_t(b[3]) & kOutcomeSpooled, 0);
  spooled.strip_spooled();
  EXPECT_TRUE(spooled.empty());

  // The largest outcome there is fits the frame and the verbs receive buffers' promise.
  Outcome largest;
  const std::string name(kMaxNodeName, 'n'), detail(kMaxDropDetail, 'd');
  for (size_t i = 0; i < kMaxOutcomeRecords; ++i) largest.add(DropReason::kPeerDown, name, detail);
  largest.add_spooled(name, name);
  EXPECT_EQ(encode_outcome(largest, b.data()), kMaxOutcomePayload);
}

TEST(WireOutcome, MalformedSpoolPartsAreRefused) {
  Outcome o;
  o.add_spooled("a", "c");
  std::array<std::byte, kMaxOutcomePayload> b;
  const uint32_t n = encode_outcome(o, b.data());
  Outcome out;
  auto refused = [&](auto&& edit, const char* why) {
    auto bad = b;
    edit(bad);
    EXPECT_FALSE(decode_outcome(std::span(bad).first(n), out)) << why;
  };
  refused([](auto& x) { x[3] = std::byte{0}; }, "no drop and no spool");
  refused([](auto& x) { x[3] = std::byte{0x06}; }, "an unknown flag");
  refused([](auto& x) { x[4] = x[5] = std::byte{0}; }, "a spool part that counts none");
  refused([](auto& x) { x[8] = std::byte{'/'}; }, "a node name that is not one");
  refused([](auto& x) { x[0] = std::byte{1}; }, "a drop counted with no record");
  EXPECT_FALSE(decode_outcome(std::span(b).first(n - 1), out)) << "cut short";
}

}  // namespace
}  // namespace hoprelay::transport
