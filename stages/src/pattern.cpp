#include "hoprelay/stages/pattern.h"

#include <array>
#include <cstring>

namespace hoprelay::stages {
namespace {

// One word of the pattern. Multiplicative mixing so neighbouring words, seqs and origins
// all differ; cheap enough to fill and check 64 KiB payloads at memory speed.
inline uint64_t pattern_word(uint32_t origin, uint64_t seq, uint64_t index) {
  uint64_t x = (seq + 1) * 0x9E3779B97F4A7C15ull ^ (index + 1) * 0xBF58476D1CE4E5B9ull ^
               (uint64_t{origin} << 17);
  return x ^ (x >> 29);
}

}  // namespace

void fill_pattern_header(std::span<std::byte> out, uint32_t origin, uint64_t seq) {
  PatternHeader h{kPatternMagic, origin, seq, static_cast<uint32_t>(out.size()), 0};
  std::memcpy(out.data(), &h, sizeof(h));
}

void fill_pattern(std::span<std::byte> out, uint32_t origin, uint64_t seq) {
  fill_pattern_header(out, origin, seq);
  size_t body = out.size() - sizeof(PatternHeader);
  std::byte* p = out.data() + sizeof(PatternHeader);
  size_t words = body / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = pattern_word(origin, seq, i);
    std::memcpy(p + i * 8, &w, 8);
  }
  if (size_t tail = body % 8) {
    uint64_t w = pattern_word(origin, seq, words);
    std::memcpy(p + words * 8, &w, tail);
  }
}

PatternCheck check_pattern(std::span<const std::byte> payload, uint32_t& origin, uint64_t& seq) {
  if (payload.size() < sizeof(PatternHeader)) return PatternCheck::kBadLength;
  PatternHeader h;
  std::memcpy(&h, payload.data(), sizeof(h));
  if (h.magic != kPatternMagic || h.reserved != 0) return PatternCheck::kBadHeader;
  if (h.length != payload.size()) return PatternCheck::kBadLength;
  const std::byte* p = payload.data() + sizeof(h);
  size_t body = payload.size() - sizeof(h);
  size_t words = body / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    if (w != pattern_word(h.origin, h.seq, i)) return PatternCheck::kBadBytes;
  }
  if (size_t tail = body % 8) {
    uint64_t w = pattern_word(h.origin, h.seq, words);
    if (std::memcmp(p + words * 8, &w, tail) != 0) return PatternCheck::kBadBytes;
  }
  origin = h.origin;
  seq = h.seq;
  return PatternCheck::kOk;
}

namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = make_crc_table();

uint32_t crc32c_soft(const std::byte* p, size_t n, uint32_t crc) {
  for (size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ uint8_t(p[i])) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_hw(const std::byte* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, uint8_t(*p++));
  return c32;
}
#endif

}  // namespace

uint32_t crc32c(std::span<const std::byte> data, uint32_t crc) {
  crc = ~crc;
#if defined(__x86_64__)
  static const bool hw = __builtin_cpu_supports("sse4.2");
  if (hw) return ~crc32c_hw(data.data(), data.size(), crc);
#endif
  return ~crc32c_soft(data.data(), data.size(), crc);
}

}  // namespace hoprelay::stages
