// The sliding bitmap of sequence numbers under DedupTable and PositionFile (seq_window.h).
#include "hoprelay/common/seq_window.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace hoprelay {
namespace {

// Two words: small enough to name every number the tests walk over.
using Window = SeqWindow<128>;

TEST(SeqWindow, AFreshWindowEndsAtTheWordOfTheFirstNumber) {
  Window w(1000);
  EXPECT_EQ(w.base(), 896u) << "1000 is in the top word, [960, 1024)";
  for (uint64_t seq = 896; seq < 1100; ++seq) EXPECT_FALSE(w.test(seq)) << seq;
  EXPECT_TRUE(w.test(895)) << "below the window: too old to tell";
  EXPECT_EQ(Window(5).base(), 0u) << "no window below 0";
  EXPECT_EQ(Window(127).base(), 0u);
  EXPECT_EQ(Window(128).base(), 64u);
}

TEST(SeqWindow, SetSaysWhetherANumberIsNew) {
  Window w(0);
  EXPECT_TRUE(w.set(3));
  EXPECT_TRUE(w.set(100));  // out of order, inside the window
  EXPECT_FALSE(w.set(3));
  EXPECT_FALSE(w.set(100));
  EXPECT_TRUE(w.test(3));
  EXPECT_TRUE(w.test(100));
  EXPECT_FALSE(w.test(4));
  EXPECT_FALSE(w.test(99));
  EXPECT_EQ(w.base(), 0u) << "nothing past the end: no slide";
}

TEST(SeqWindow, PastTheEndIsNotSetAndAskingDoesNotSlide) {
  Window w(0);
  ASSERT_TRUE(w.set(5));
  EXPECT_FALSE(w.test(128 + 5)) << "the ring word of 5: not the same number";
  EXPECT_FALSE(w.test(UINT64_MAX));
  EXPECT_EQ(w.base(), 0u);
  EXPECT_TRUE(w.test(5));
}

TEST(SeqWindow, SlidingOneWordClearsOnlyTheWordItLeaves) {
  Window w(0);
  ASSERT_TRUE(w.set(5));
  ASSERT_TRUE(w.set(70));
  ASSERT_TRUE(w.set(127));
  ASSERT_TRUE(w.set(128));  // one past the end: up one word
  EXPECT_EQ(w.base(), 64u);
  EXPECT_TRUE(w.test(70)) << "the word that stays keeps its bits";
  EXPECT_TRUE(w.test(127));
  EXPECT_TRUE(w.test(128));
  EXPECT_FALSE(w.test(128 + 5)) << "the reused word starts empty (5 was in it)";
  EXPECT_TRUE(w.test(5)) << "below the window now: too old to tell";
  EXPECT_TRUE(w.set(133));
  EXPECT_FALSE(w.set(70));
}

TEST(SeqWindow, SlidingTheWholeWindowOrMoreClearsEveryWord) {
  for (const uint64_t newest : {uint64_t{192}, uint64_t{255}, uint64_t{10 * 128 + 3}}) {
    Window w(0);
    for (uint64_t seq = 0; seq < 128; ++seq) ASSERT_TRUE(w.set(seq));
    ASSERT_TRUE(w.set(newest));
    EXPECT_EQ(w.base(), (newest - 64) & ~uint64_t{63}) << newest;
    for (uint64_t seq = w.base(); seq < w.base() + 128; ++seq) {
      EXPECT_EQ(w.test(seq), seq == newest) << newest << " " << seq;
    }
  }
}

TEST(SeqWindow, BelowTheBaseIsTakenForSetAndSetChangesNothing) {
  Window w(1000);  // [896, 1024)
  EXPECT_FALSE(w.set(895)) << "too old to tell: not new";
  EXPECT_TRUE(w.test(895));
  EXPECT_FALSE(w.test(895 + 128)) << "its ring word's bit, in the window, stays clear";
  EXPECT_EQ(w.base(), 896u);
  EXPECT_FALSE(w.set(0));
  EXPECT_TRUE(w.set(896)) << "the base itself is inside";
}

// A producer's --first-seq can start anywhere: the topmost window, whose end would be 2^64,
// neither wraps to 0 nor slides backwards.
TEST(SeqWindow, NearTheTopOfTheSequenceSpaceNothingWraps) {
  const uint64_t top_base = UINT64_MAX - 127;  // 2^64 - 128
  Window fresh(UINT64_MAX);
  EXPECT_EQ(fresh.base(), top_base);
  Window w(0);
  ASSERT_TRUE(w.set(5));
  ASSERT_TRUE(w.set(UINT64_MAX - 63));  // slides from the bottom to the top
  EXPECT_EQ(w.base(), top_base);
  EXPECT_FALSE(w.test(top_base + 5)) << "5's ring word was cleared";
  EXPECT_TRUE(w.set(top_base)) << "inside the window: no slide";
  EXPECT_TRUE(w.set(UINT64_MAX - 100));
  EXPECT_TRUE(w.set(UINT64_MAX));
  EXPECT_EQ(w.base(), top_base);
  EXPECT_TRUE(w.test(UINT64_MAX - 63)) << "kept: the window did not slide again";
  EXPECT_TRUE(w.test(top_base));
  EXPECT_TRUE(w.test(UINT64_MAX - 100));
  EXPECT_TRUE(w.test(UINT64_MAX));
  EXPECT_FALSE(w.test(UINT64_MAX - 1));
  EXPECT_FALSE(w.set(UINT64_MAX));
  EXPECT_FALSE(w.set(UINT64_MAX - 100));
  EXPECT_TRUE(w.test(top_base - 1)) << "below the window";
  EXPECT_FALSE(w.set(top_base - 1));

  // The same at the size the node and the takers use.
  constexpr uint64_t kBits = 65536;
  SeqWindow<kBits> big(UINT64_MAX - 63);
  EXPECT_EQ(big.base(), UINT64_MAX - kBits + 1);
  EXPECT_TRUE(big.set(UINT64_MAX - 63));
  EXPECT_TRUE(big.set(UINT64_MAX - kBits + 1));
  EXPECT_TRUE(big.set(UINT64_MAX));
  EXPECT_TRUE(big.test(UINT64_MAX - 63));
  EXPECT_FALSE(big.test(UINT64_MAX - 64));
}

// Every number of a long stream once, late ones included, then a replay of the newest window.
TEST(SeqWindow, ALongStreamInAndOutOfOrder) {
  SeqWindow<65536> w(0);
  for (uint64_t seq = 0; seq < 4 * 65536; seq += 2) ASSERT_TRUE(w.set(seq)) << seq;
  for (uint64_t seq = 4 * 65536 - 1000 + 1; seq < 4 * 65536; seq += 2) {
    ASSERT_TRUE(w.set(seq)) << "late, inside the window: " << seq;
  }
  for (uint64_t seq = 4 * 65536 - 1000; seq < 4 * 65536; ++seq) ASSERT_FALSE(w.set(seq)) << seq;
  EXPECT_FALSE(w.test(4 * 65536 - 2001)) << "inside the window, never set (odd)";
  EXPECT_TRUE(w.test(3 * 65536 - 1)) << "below the window: too old to tell";
}

}  // namespace
}  // namespace hoprelay
