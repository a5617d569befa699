// Which sequence numbers of one stream were set, over the last kBits of them: one bit per
// number in [base(), base() + kBits), a ring of 64-bit words that slides up by whole words as
// the newest number moves past its end. Numbers further behind the newest than that are too old
// to tell apart (below base()); both users take them for a repeat, never for a new one:
// DedupTable (a node's deduplication) and PositionFile (what a durable taker took this run).
//
// Why a window and not a set: a message can arrive late, relative to later messages of its
// origin, only by what the links on its path hold unacknowledged (dedup.h), so the window bounds
// the memory (kBits / 8 bytes, allocated once at construction) and every operation is O(1)
// except a slide, which clears at most the whole ring once.
//
// No wrap near 2^64 (a producer's --first-seq can start there): the end of the window is never
// computed as base() + kBits, which would be 0 for the topmost window.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace hoprelay {

template <uint64_t kBits>
class SeqWindow {
  static_assert(kBits > 0 && kBits % 64 == 0, "a window of whole 64-bit words");

 public:
  // Empty, with `newest` in its top word: nothing is known of the numbers before it, which may
  // still arrive late (a restarted node, a forgotten origin, a round-robin split that joins
  // again), so they are inside the window, as new, rather than below it, as repeats.
  explicit SeqWindow(uint64_t newest) : base_(base_for(newest)), words_(kWords, 0) {}

  // The lowest number the window holds: a multiple of 64.
  uint64_t base() const { return base_; }

  // Whether seq was set. Below base(): true (too old to tell, taken for a repeat). Past the
  // end of the window: false (the window has not reached it, so nothing set it).
  bool test(uint64_t seq) const {
    if (seq < base_) return true;
    if (seq - base_ >= kBits) return false;  // (not seq >= base_ + kBits: that wraps near 2^64)
    return (words_[(seq / 64) % kWords] >> (seq % 64)) & 1;
  }

  // Sets seq; true if it was not set before. Past the end, the window first slides up so that
  // seq is in its top word, and the words it slides over start empty. Below base(): false, and
  // nothing changes (too old to tell, as test()).
  bool set(uint64_t seq) {
    if (seq < base_) return false;
    if (seq - base_ >= kBits) slide_to(seq);
    uint64_t& word = words_[(seq / 64) % kWords];
    const uint64_t bit = uint64_t{1} << (seq % 64);
    if (word & bit) return false;
    word |= bit;
    return true;
  }

 private:
  static constexpr uint64_t kWords = kBits / 64;

  // The base of the window whose top word holds `newest` (0 while that would be below 0).
  static constexpr uint64_t base_for(uint64_t newest) {
    return newest >= kBits ? (newest - kBits + 64) & ~uint64_t{63} : 0;
  }

  void slide_to(uint64_t newest) {
    const uint64_t base = base_for(newest);
    const uint64_t moved = (base - base_) / 64;
    if (moved >= kWords) {
      std::fill(words_.begin(), words_.end(), 0);
    } else {
      // The words that leave the window at the bottom are the ones it reuses at the top.
      for (uint64_t w = 0; w < moved; ++w) words_[(base_ / 64 + w) % kWords] = 0;
    }
    base_ = base;
  }

  uint64_t base_;
  std::vector<uint64_t> words_;  // kWords, a ring: seq's bit is in word (seq / 64) % kWords
};

}  // namespace hoprelay
