// The single-producer single-consumer ring the link threads talk through (spsc_ring.h).
#include "hoprelay/common/spsc_ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "alloc_count.h"

namespace hoprelay {
namespace {

TEST(SpscRing, RoundsUpAndRefusesWhenFullAndWhenEmpty) {
  SpscRing<int> ring(5);
  EXPECT_EQ(ring.capacity(), 8u);
  int v = 0;
  EXPECT_FALSE(ring.pop(v));
  EXPECT_TRUE(ring.empty());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(ring.push(i));
  EXPECT_FALSE(ring.push(8)) << "a full ring takes nothing";
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(ring.pop(v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(ring.pop(v));
  EXPECT_THROW(SpscRing<int>(0), std::invalid_argument);
}

// One thread pushes a million numbers through a small ring (full and empty all the time),
// another pops them: each once, in order, and nothing allocated once built.
TEST(SpscRing, TwoThreadsPassAMillionItemsInOrderWithoutAllocating) {
  constexpr uint64_t kItems = 1'000'000;
  SpscRing<uint64_t> ring(64);
  const uint64_t before = test::allocations();
  std::thread producer([&] {
    for (uint64_t i = 0; i < kItems;) {
      if (ring.push(i)) {
        ++i;
      } else {
        std::this_thread::yield();
      }
    }
  });
  uint64_t expected = 0, wrong = 0, v = 0;
  while (expected < kItems) {
    if (!ring.pop(v)) {
      std::this_thread::yield();
      continue;
    }
    if (v != expected) ++wrong;
    ++expected;
  }
  producer.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(ring.empty());
  // The thread's own start is the one allocation std::thread makes.
  EXPECT_LE(test::allocations() - before, 1u);
}

}  // namespace
}  // namespace hoprelay
