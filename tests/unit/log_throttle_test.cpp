// The rate limit shared by drop warnings and given-up end marks
// (daemon/include/hoprelay/daemon/log_throttle.h).
#include "hoprelay/daemon/log_throttle.h"

#include <gtest/gtest.h>

namespace hoprelay::daemon {
namespace {

constexpr uint64_t kS = 1'000'000'000u;

TEST(LogThrottle, FirstInFullThenOneCountPerInterval) {
  LogThrottle t(5 * kS);
  uint64_t pending = 0, elapsed = 0;
  EXPECT_TRUE(t.note(100 * kS)) << "the first occurrence is logged in full";
  EXPECT_FALSE(t.due(101 * kS, pending, elapsed)) << "nothing pending";
  EXPECT_FALSE(t.note(101 * kS));
  EXPECT_FALSE(t.note(102 * kS, 3));
  EXPECT_FALSE(t.due(104 * kS, pending, elapsed)) << "within the interval";
  ASSERT_TRUE(t.due(105 * kS, pending, elapsed));
  EXPECT_EQ(pending, 4u);
  EXPECT_EQ(elapsed, 5 * kS);
  EXPECT_EQ(t.total(), 5u);
  EXPECT_FALSE(t.due(111 * kS, pending, elapsed)) << "counted once";
  // More within the interval after a count line: counted again, not in full.
  EXPECT_FALSE(t.note(106 * kS));
  ASSERT_TRUE(t.due(110 * kS, pending, elapsed));
  EXPECT_EQ(pending, 1u);
  EXPECT_EQ(t.interval_seconds(), 5u);
}

TEST(LogThrottle, AfterAQuietIntervalTheNextIsInFullAgain) {
  LogThrottle t(5 * kS);
  EXPECT_TRUE(t.note(10 * kS));
  EXPECT_TRUE(t.note(15 * kS)) << "nothing pending and the interval passed";
  EXPECT_FALSE(t.note(16 * kS));
  // Pending ones are reported by due(), not by the next note in full: the count stays right.
  EXPECT_FALSE(t.note(30 * kS));
  uint64_t pending = 0, elapsed = 0;
  ASSERT_TRUE(t.due(30 * kS, pending, elapsed));
  EXPECT_EQ(pending, 2u);
  EXPECT_EQ(t.total(), 4u);
}

TEST(LogThrottle, AtTimeZeroTheFirstIsStillInFull) {
  LogThrottle t(5 * kS);
  EXPECT_TRUE(t.note(0));
  EXPECT_FALSE(t.note(0));
}

}  // namespace
}  // namespace hoprelay::daemon
