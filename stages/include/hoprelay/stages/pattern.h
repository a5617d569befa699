// The self-checking payload that `hoprelay send` generates and `verify-sink` checks.
//
// Layout (little-endian): a 24-byte PatternHeader, then 8-byte words derived from
// (origin, seq, word index). Any bit flipped, truncated, reordered or mixed up between
// messages changes what the sink recomputes, so corruption anywhere on the path is seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hoprelay::stages {

inline constexpr uint32_t kPatternMagic = 0x4c505248;  // "HRPL"

struct PatternHeader {
  uint32_t magic;
  uint32_t origin;
  uint64_t seq;
  uint32_t length;    // whole payload length, header included
  uint32_t reserved;  // zero
};
static_assert(sizeof(PatternHeader) == 24);

inline constexpr size_t kMinPatternSize = sizeof(PatternHeader);

// Fills `out` (at least kMinPatternSize bytes) with the payload for (origin, seq).
void fill_pattern(std::span<std::byte> out, uint32_t origin, uint64_t seq);
// Writes only its header (for `out.size()` bytes), leaving the rest of `out` as it is: what
// `hoprelay send --fill header` generates, which check_pattern() refuses as kBadBytes.
void fill_pattern_header(std::span<std::byte> out, uint32_t origin, uint64_t seq);

enum class PatternCheck { kOk, kBadHeader, kBadLength, kBadBytes };

// Checks a payload against what fill_pattern() would have written. On kOk, origin and seq
// hold the values found in the payload.
PatternCheck check_pattern(std::span<const std::byte> payload, uint32_t& origin, uint64_t& seq);

// CRC32C (Castagnoli), hardware-accelerated where the CPU has SSE4.2.
uint32_t crc32c(std::span<const std::byte> data, uint32_t crc = 0);

}  // namespace hoprelay::stages
