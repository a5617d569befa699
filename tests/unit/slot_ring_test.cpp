#include "hoprelay/transport/slot_ring.h"

#include <gtest/gtest.h>

#include <vector>

#include "hoprelay/daemon/ring_queue.h"

namespace hoprelay::transport {
namespace {

TEST(SlotRing, FillsInOrderAndReturnsCreditsInOrder) {
  std::vector<std::byte> mem(SlotRing::size_for(4, 1024));
  SlotRing ring(mem.data(), 4, 1024, nullptr);
  EXPECT_EQ(SlotRing::stride_for(1024), 1024u + 64u);
  Slot* s[4];
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ring.expected_index(), i);
    s[i] = ring.acquire();
    ASSERT_NE(s[i], nullptr);
    EXPECT_EQ(s[i]->index, i);
    EXPECT_EQ(s[i]->frame, mem.data() + i * SlotRing::stride_for(1024));
  }
  EXPECT_EQ(ring.acquire(), nullptr) << "a fifth frame overruns the credits";
  EXPECT_EQ(ring.in_use(), 4u);
  // Released out of order: no credit until the oldest goes, then all contiguous ones.
  EXPECT_EQ(ring.release(*s[2]), 0u);
  EXPECT_EQ(ring.release(*s[1]), 0u);
  EXPECT_EQ(ring.release(*s[0]), 3u);
  EXPECT_EQ(ring.in_use(), 1u);
  EXPECT_EQ(ring.release(*s[0]), 0u) << "double release frees nothing (and is reported)";
  EXPECT_EQ(ring.expected_index(), 0u);
  Slot* again = ring.acquire();
  EXPECT_EQ(again->index, 0u);
  EXPECT_EQ(ring.release(*s[3]), 1u);
  EXPECT_EQ(ring.release(*again), 1u);
  EXPECT_EQ(ring.in_use(), 0u);
}

// The frames whose credit has not gone back, released or not: what the sender replays if the
// link fails.
TEST(SlotRing, UnreturnedOriginsAreTheFramesWhoseCreditIsOut) {
  std::vector<std::byte> mem(SlotRing::size_for(4, 256));
  SlotRing ring(mem.data(), 4, 256, nullptr);
  Slot* s[3];
  for (uint32_t i = 0; i < 3; ++i) {
    s[i] = ring.acquire();
    s[i]->origin = 7 + i;
  }
  std::vector<uint32_t> out;
  ring.unreturned_origins(out);
  EXPECT_EQ(out, (std::vector<uint32_t>{7, 8, 9}));
  EXPECT_EQ(ring.release(*s[1]), 0u);  // behind the oldest: no credit yet
  out.clear();
  ring.unreturned_origins(out);
  EXPECT_EQ(out, (std::vector<uint32_t>{7, 8, 9})) << "released, but its credit is not out";
  EXPECT_EQ(ring.release(*s[0]), 2u);
  out.clear();
  ring.unreturned_origins(out);
  EXPECT_EQ(out, (std::vector<uint32_t>{9}));
}

TEST(SlotRing, CreditsNeverExceedSlotsUnderRandomRelease) {
  std::vector<std::byte> mem(SlotRing::size_for(8, 256));
  SlotRing ring(mem.data(), 8, 256, nullptr);
  uint64_t credits = 8, seed = 1;
  std::vector<Slot*> held;
  for (int step = 0; step < 100000; ++step) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    if (credits > 0 && (seed >> 33) % 2) {
      Slot* s = ring.acquire();
      ASSERT_NE(s, nullptr);
      --credits;
      held.push_back(s);
    } else if (!held.empty()) {
      size_t i = (seed >> 40) % held.size();
      credits += ring.release(*held[i]);
      held.erase(held.begin() + static_cast<long>(i));
    }
    ASSERT_LE(credits + ring.in_use(), 8u);
  }
}

// held() counts what is not released, in_use() what has no credit back: released out of order,
// the last held slot frees several at once, and only held() said it was the last (the node
// kept a link that went down in its list of dead links past its ring's end).
TEST(SlotRing, HeldCountsUnreleasedSlotsOnly) {
  std::vector<std::byte> mem(SlotRing::size_for(4, 256));
  SlotRing ring(mem.data(), 4, 256, nullptr);
  Slot* s[3];
  for (auto& slot : s) slot = ring.acquire();
  EXPECT_EQ(ring.held(), 3u);
  EXPECT_EQ(ring.release(*s[2]), 0u);
  EXPECT_EQ(ring.release(*s[1]), 0u);
  EXPECT_EQ(ring.held(), 1u) << "the oldest is the last one held";
  EXPECT_EQ(ring.in_use(), 3u) << "though three have no credit back";
  EXPECT_EQ(ring.release(*s[0]), 3u);
  EXPECT_EQ(ring.held(), 0u);
  EXPECT_EQ(ring.in_use(), 0u);
  EXPECT_EQ(ring.release(*s[0]), 0u);
  EXPECT_EQ(ring.held(), 0u) << "a double release does not count";
}

TEST(RingQueue, KeepsOrderAcrossGrowthAndPushFront) {
  daemon::RingQueue<int> q(2);
  for (int i = 0; i < 100; ++i) q.push_back(i);
  q.push_front(-1);
  q.push_front(-2);
  EXPECT_EQ(q.size(), 102u);
  EXPECT_EQ(q.front(), -2);
  q.pop_front();
  EXPECT_EQ(q.front(), -1);
  q.pop_front();
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(q.front(), i);
    q.pop_front();
  }
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace hoprelay::transport

#include "hoprelay/daemon/dedup.h"

namespace hoprelay::daemon {
namespace {

TEST(Dedup, FirstTimeOnlyPerOrigin) {
  DedupTable t;
  EXPECT_TRUE(t.first_time(1, 0));
  EXPECT_TRUE(t.first_time(1, 1));
  EXPECT_FALSE(t.first_time(1, 0));
  EXPECT_TRUE(t.first_time(2, 0)) << "another origin has its own sequence space";
  EXPECT_FALSE(t.first_time(2, 0));
}

TEST(Dedup, ReplayedRangeIsDroppedOutOfOrderArrivalsAreNot) {
  DedupTable t;
  for (uint64_t s = 0; s < 1000; s += 2) ASSERT_TRUE(t.first_time(7, s));  // evens first
  for (uint64_t s = 1; s < 1000; s += 2) ASSERT_TRUE(t.first_time(7, s));  // odds late
  for (uint64_t s = 900; s < 1000; ++s) ASSERT_FALSE(t.first_time(7, s));  // a replay
  EXPECT_TRUE(t.first_time(7, 1000));
}

TEST(Dedup, WindowSlidesAndForgetsOnlyWhatIsTooOld) {
  DedupTable t;
  const uint64_t w = DedupTable::kWindow;
  ASSERT_TRUE(t.first_time(3, 5));
  ASSERT_TRUE(t.first_time(3, 3 * w));  // far ahead: the window slides
  EXPECT_FALSE(t.first_time(3, 5)) << "fell out of the window: treated as a repeat";
  EXPECT_TRUE(t.first_time(3, 3 * w - 10)) << "inside the new window, never seen";
  EXPECT_FALSE(t.first_time(3, 3 * w - 10));
  // A long stream: every message once, then the last window replayed.
  DedupTable u;
  for (uint64_t s = 0; s < 4 * w; ++s) ASSERT_TRUE(u.first_time(9, s)) << s;
  for (uint64_t s = 4 * w - 100; s < 4 * w; ++s) ASSERT_FALSE(u.first_time(9, s)) << s;
}

// A node that knows nothing of an origin (restarted, or the origin was forgotten) may get a
// later message first: round-robin branches of a diamond replay at their own pace. What came
// before it is new to this node, not a repeat (a repeat would be lost, acknowledged upstream).
TEST(Dedup, AFreshWindowTakesOlderMessagesAsNew) {
  DedupTable t;
  const uint64_t w = DedupTable::kWindow;
  ASSERT_TRUE(t.first_time(5, 1040));  // one branch's replay first
  for (uint64_t s = 1001; s < 1040; s += 2) EXPECT_TRUE(t.first_time(5, s)) << s;  // the other's
  EXPECT_FALSE(t.first_time(5, 1001));
  EXPECT_TRUE(t.first_time(5, 0)) << "still inside the window";
  ASSERT_TRUE(t.first_time(6, 10 * w));
  EXPECT_TRUE(t.first_time(6, 9 * w + 100)) << "inside the window below the first";
  EXPECT_FALSE(t.first_time(6, 9 * w - 100)) << "older than the window: too old to tell";
  EXPECT_FALSE(t.seen(7, 3 * w));
  EXPECT_FALSE(t.seen(7, 3 * w - 5)) << "seen() of a fresh origin, below the first asked";
}

TEST(Dedup, SeenAsksWithoutRecording) {
  DedupTable t;
  EXPECT_FALSE(t.seen(4, 10));
  EXPECT_FALSE(t.seen(4, 10)) << "asking records nothing";
  EXPECT_TRUE(t.first_time(4, 10));
  EXPECT_TRUE(t.seen(4, 10));
  EXPECT_FALSE(t.seen(4, 11));
  ASSERT_TRUE(t.first_time(4, 3 * DedupTable::kWindow));
  EXPECT_TRUE(t.seen(4, 10)) << "too old to tell: a repeat, as first_time() says";
}

TEST(Dedup, SeenOfAnUnknownOriginForgetsNoOther) {
  DedupTable t(2);
  ASSERT_TRUE(t.first_time(1, 5));
  ASSERT_TRUE(t.first_time(2, 5));
  EXPECT_FALSE(t.seen(3, 5)) << "nothing taken from an unknown origin";
  EXPECT_EQ(t.origins(), 2u) << "asking made no window";
  EXPECT_FALSE(t.first_time(1, 5)) << "origin 1 still remembered";
  EXPECT_FALSE(t.first_time(2, 5)) << "origin 2 still remembered";
}

TEST(Dedup, NextSeqAtTheTopOfTheSequenceSpaceDoesNotWrap) {
  DedupTable t;
  const uint64_t top = UINT64_MAX;
  ASSERT_TRUE(t.first_time(9, top));
  EXPECT_EQ(t.next_seq(9), top) << "not 0, which means nothing was taken";
  EXPECT_FALSE(t.first_time(9, top)) << "a repeat";
  ASSERT_TRUE(t.first_time(9, top - 1)) << "older, inside the window: new";
  EXPECT_EQ(t.next_seq(9), top);
}

TEST(Dedup, OriginsAreBoundedLeastRecentlyUsedFirst) {
  DedupTable t(2);
  t.first_time(1, 0);
  t.first_time(2, 0);
  t.first_time(1, 1);  // 1 used more recently than 2
  t.first_time(3, 0);  // evicts 2
  EXPECT_EQ(t.origins(), 2u);
  EXPECT_FALSE(t.first_time(1, 0)) << "origin 1 kept";
  EXPECT_TRUE(t.first_time(2, 0)) << "origin 2 was forgotten";
}

// An origin an upstream sender may still send again (pinned) is not forgotten: the oldest
// unpinned one is.
TEST(Dedup, APinnedOriginIsNotForgotten) {
  std::vector<uint32_t> pinned{1};
  int asked = 0;
  DedupTable t(2, [&](std::vector<uint32_t>& out) {
    ++asked;
    out.insert(out.end(), pinned.begin(), pinned.end());
  });
  t.first_time(1, 0);  // the oldest, but pinned
  t.first_time(2, 0);
  t.first_time(2, 1);
  EXPECT_EQ(asked, 0) << "asked only when an origin must go";
  t.first_time(3, 0);  // evicts 2
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(t.origins(), 2u);
  EXPECT_FALSE(t.first_time(1, 0)) << "pinned origin 1 kept";
  EXPECT_FALSE(t.first_time(3, 0));
  pinned.clear();
  t.first_time(4, 0);  // 1 (used before 3) is the oldest, no longer pinned: it goes
  EXPECT_FALSE(t.first_time(4, 0));
  EXPECT_TRUE(t.first_time(1, 0)) << "origin 1 was forgotten once unpinned";
}

// Every origin pinned: the table grows rather than forget one (at most by the frames the links
// hold, one per pinned origin).
TEST(Dedup, EveryOriginPinnedTheTableGrows) {
  DedupTable t(2, [](std::vector<uint32_t>& out) { out.insert(out.end(), {1, 2, 3, 2}); });
  t.first_time(1, 0);
  t.first_time(2, 0);
  t.first_time(3, 0);
  EXPECT_EQ(t.origins(), 3u);
  EXPECT_FALSE(t.first_time(1, 0));
  EXPECT_FALSE(t.first_time(2, 0));
  EXPECT_FALSE(t.first_time(3, 0));
}

}  // namespace
}  // namespace hoprelay::daemon
